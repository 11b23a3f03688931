"""A one-off experiment, not part of the book (docs/kernel-notes.md, "Fewer, larger programs", has its
outcome).

The 0.6B step at batch 1 with one launch's grid made of fewer, larger programs, each variant replayed
as a CUDA graph and timed in interleaved rounds against the default config of the same round; every
replay is checked bit for bit against its own eager step.
Usage, from the book's root, on a CUDA GPU: python docs/experiments/grid_variants.py"""
import statistics
from dataclasses import replace

import torch

from floorlab.core.shapes import get_shape
from floorlab.core.timing import time_ms
from floorlab.engine.graphs import capture_graph
from floorlab.engine.kernels import GemvConfig, default_config, shape_kwargs, triton_step
from floorlab.engine.model import build_model
from floorlab.tools.sweep_steps import VARIANT_CONTEXT, VARIANT_MAX_CONTEXT, prefilled

ROUNDS, REPEATS = 3, 60


def row_loop(rows: int, block_k: int, warps: int) -> GemvConfig:
    return GemvConfig(rows_per_program=rows, block_k=block_k, num_warps=warps, row_loop=True)


def main():
    shape, device = get_shape("qwen3-0.6b"), torch.device("cuda")
    model = build_model(shape, device=device, dtype=torch.bfloat16, max_batch=1, max_context=VARIANT_MAX_CONTEXT)
    tokens, positions = prefilled(model, 1, VARIANT_CONTEXT)
    base = default_config(1, max_context=VARIANT_MAX_CONTEXT, **shape_kwargs(shape))
    variants = {
        "default": base,
        "gate_up r8 w4": base.with_gemv("gate_up", row_loop(8, 1024, 4)),
        "gate_up r16 w8": base.with_gemv("gate_up", row_loop(16, 1024, 8)),
        "qkv r16 w8": base.with_gemv("qkv", row_loop(16, 1024, 8)),
        "o_proj r8 w4": base.with_gemv("o_proj", row_loop(8, 2048, 4)),
        "attention w4": replace(base, attention=replace(base.attention, num_warps=4)),
    }
    graphs = {}
    for name, config in variants.items():
        step = triton_step(model, config=config.check())
        eager = step(tokens, positions).clone()
        graph, out = capture_graph(lambda step=step: step(tokens, positions), warmup=2)
        graph.replay()
        torch.cuda.synchronize()
        graphs[name] = (graph, torch.equal(out, eager))
    medians = {name: [] for name in graphs}
    for _ in range(ROUNDS):
        for name, (graph, _) in graphs.items():
            medians[name].append(time_ms(graph.replay, warmup=10, repeats=REPEATS, device=device).median_ms)
    for name, (_, same) in graphs.items():
        ratios = [a / b for a, b in zip(medians[name], medians["default"])]
        print(f"{name:16s} {1e3 * statistics.median(medians[name]):7.1f} µs  x default "
              f"{statistics.median(ratios):.3f} (rounds {min(ratios):.3f}-{max(ratios):.3f})  "
              f"bit-identical replay {same}")


if __name__ == "__main__":
    main()
