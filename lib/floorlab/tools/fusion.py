"""Tools wing: `python -m floorlab.tools.fusion`: attention and o_proj as two kernels or one, each replayed
from a CUDA graph in rounds (A B C, A B C, ...) so the spread between rounds says what a difference must beat."""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace

import torch

from floorlab.core.bandwidth import measure_bandwidths
from floorlab.core.files import save_or_keep
from floorlab.core.roofline import bytes_per_step, floor_ms
from floorlab.core.runs import run_stamp
from floorlab.core.shapes import get_shape
from floorlab.engine.kernels import default_config, shape_kwargs
from floorlab.engine.model import build_model
from floorlab.tools.cli import whole_arg
from floorlab.tools.sweep_steps import VARIANT_CONTEXT, VARIANT_MAX_CONTEXT, prefilled, time_configs

ROUNDS = 3


def fusion_variants(shape, batch: int, max_context: int) -> list[tuple[str, object]]:
    """(label, StepConfig): today's two kernels first, then attention fused into o_proj at a few program sizes."""
    base = default_config(batch, max_context=max_context, **shape_kwargs(shape))
    two = replace(base, attention=replace(base.attention, o_proj_rows=0))
    out = [("two kernels", two)]
    for rows, warps in ((16, 4), (32, 4), (32, 8), (64, 8)):
        attention = replace(base.attention, splits=1, o_proj_rows=rows, num_warps=warps)
        out.append((f"fused r{rows} w{warps}", replace(base, attention=attention)))
    return out


def time_fusion(presets, batches, *, device, warmup: int, repeats: int) -> dict:
    """Rows of every variant at every preset and batch, timed in ROUNDS rounds, with the bandwidths the floors
    divide by."""
    bandwidths = measure_bandwidths(device)
    gbps = bandwidths.floor_gbps
    rows, errors = [], []
    for name in presets:
        shape = get_shape(name)
        model = build_model(shape, device=device, dtype=torch.bfloat16, max_batch=max(batches),
                            max_context=VARIANT_MAX_CONTEXT)
        for batch in batches:
            tokens, positions = prefilled(model, batch, VARIANT_CONTEXT)
            moved = bytes_per_step(shape, batch, VARIANT_CONTEXT + 1)
            heads = [({"preset": name, "batch": batch, "variant": label, "floor_ms": floor_ms(moved, gbps),
                       "config": config.attention.to_dict()}, config)
                     for label, config in fusion_variants(shape, batch, VARIANT_MAX_CONTEXT)]
            here = time_configs(model, heads, tokens, positions, moved, gbps, device=device, warmup=warmup,
                                repeats=repeats, errors=errors, vs="vs_two_kernels", rounds=ROUNDS,
                                reference=model.decode_step(tokens, positions).float())
            for row in (r for r in here if "ms" in r):
                row["spread"] = (max(row["ms_rounds"]) - min(row["ms_rounds"])) / row["ms"]
                row["beyond_us_per_layer"] = 1e3 * (row["ms"] - row["floor_ms"]) / shape.num_layers
            rows += here
        del model
        torch.cuda.empty_cache()
    return {"stamp": run_stamp().to_dict(), "bandwidths": bandwidths.as_gbps(), "floor_gbps": gbps,
            "device": torch.cuda.get_device_name(device), "rows": rows}


def format_rows(rows: list[dict]) -> str:
    """One line per variant: ms, x floor, vs the two-kernel path, spread, µs beyond per layer, parity."""
    lines = [f"{'preset':<11} {'b':>2} {'variant':<14} {'ms':>7} {'x floor':>7} {'vs two':>6} {'spread':>6} "
             f"{'us/layer':>8} {'err':>8} bit-id"]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['preset']:<11} {r['batch']:>2} {r['variant']:<14} failed: {r['error']}")
            continue
        lines.append(f"{r['preset']:<11} {r['batch']:>2} {r['variant']:<14} {r['ms']:>7.4f} {r['x_floor']:>7.3f} "
                     f"{r['vs_two_kernels']:>6.3f} {r['spread']:>6.3f} {r['beyond_us_per_layer']:>8.2f} "
                     f"{r['rel_err_vs_plain']:>8.1e} {r['bit_identical']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m floorlab.tools.fusion",
                                     description="Attention and o_proj as two kernels or one, side by side.")
    parser.add_argument("--presets", nargs="+", default=["qwen3-0.6b", "qwen3-8b"])
    parser.add_argument("--batches", nargs="+", type=whole_arg("--batches", 1, None, "1 8"), default=[1, 8])
    parser.add_argument("--warmup", type=whole_arg("--warmup", 0, None, "20"), default=20)
    parser.add_argument("--repeats", type=whole_arg("--repeats", 1, None, "200"), default=200)
    parser.add_argument("--out", default="fusion.json")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("the fusion comparison times CUDA graphs: run it on a CUDA GPU", file=sys.stderr)
        return 2
    result = time_fusion(args.presets, sorted(set(args.batches)), device=torch.device("cuda"),
                         warmup=args.warmup, repeats=args.repeats)
    print(format_rows(result["rows"]))
    where, note = save_or_keep(result, args.out)
    print(note or f"wrote {where}", file=sys.stderr if note else sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
