"""Sweep the book's Triton GEMVs over launch configs, then time the kernel step: `python -m floorlab.kernel_sweep`.

For each preset's layer shapes (qwen3-0.6b and qwen3-8b) at batch 1 and 8 it times each GEMV
(with the epilogue the step really runs) over a few configs, inside a CUDA graph of one launch
per layer on distinct weights, so no weight sits in L2. Then it times triton_step with the
winners (and variants: PDL released after the wait, attention splits) and model.decode_step,
all graph-replayed, against the floor, and checks replay against eager bit for bit. It also
times the bare GEMV against its size: alone, back to back, and chained with PDL. Last, the
whole step at the bench's context against itself with one launch config changed at a time:
the evidence behind floorlab.kernels.default_config.
Every variant runs in its own try/except: one failure prints and the sweep goes on.
`--tiny` runs the same code on a tiny shape (on a CPU in Triton's interpreter).
"""
from __future__ import annotations

import argparse
import gc
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

from floorlab.device import describe_device, measure_bandwidth
from floorlab.fused import _rms_norm, relative_error
from floorlab.graphs import capture_graph
from floorlab.roofline import achieved_gbps, bytes_per_step, floor_ms
from floorlab.shapes import Qwen3Shape, get_shape
from floorlab.timing import time_ms

STEP_PRESETS, BATCHES, CONTEXT = ("qwen3-0.6b", "qwen3-8b"), (1, 8), 512
VARIANT_CONTEXT, VARIANT_MAX_CONTEXT = 32, 112  # the bench's prompt and cache: what the defaults serve
ATTENTION_SPLITS = (1, 2, 4, 8, 16)
SIZES = (256, 1024, 2048, 4096, 8192, 16384, 65536, 151936)  # GEMV rows N at K = hidden size
TINY = Qwen3Shape(64, 96, 2, 4, 2, 16, 97, False, rope_theta=10000.0, name="tiny")
MAX_REL_ERR = 2e-2  # a bf16 GEMV against float32 torch
EPS = 1e-6


def gemv_shapes(shape: Qwen3Shape) -> dict[str, tuple[int, int]]:
    """(weight rows N, K) of each GEMV of the step; gate_up's N counts gate and up rows."""
    h, d, i = shape.hidden_size, shape.head_dim, shape.intermediate_size
    return {"qkv": ((shape.num_heads + 2 * shape.num_kv_heads) * d, h), "o_proj": (h, shape.num_heads * d),
            "gate_up": (2 * i, h), "down": (h, i), "lm_head": (shape.vocab_size, h)}


def gemv_configs(name: str, batch: int, shape: Qwen3Shape, limit: int = 12):
    """At most `limit` GemvConfigs to try for one GEMV at one batch, the default first."""
    from floorlab.kernels import GemvConfig, default_config, shape_kwargs

    # (rows per program, block_k, warps, split_k, dot, tile_sums[, row_loop[, num_stages[, swap_ab[, fused_reduce]]]])
    if batch <= 2:  # products in registers; small programs fit more per SM
        grid = [(8, 1024, 4, 1, 0, 0, 1), (4, 1024, 2, 1, 0, 0, 1), (2, 1024, 1, 1, 0, 0, 1), (4, 4096, 8, 1, 0, 0, 1),
                (2, 512, 1, 1, 0, 0), (2, 1024, 1, 1, 0, 1), (2, 1024, 2, 1, 0, 1), (4, 1024, 2, 1, 0, 1),
                (4, 1024, 4, 1, 0, 1), (8, 512, 4, 1, 0, 1), (2, 2048, 2, 1, 0, 1), (4, 512, 4, 1, 0, 0),
                (1, 1024, 1, 1, 0, 1), (4, 4096, 4, 1, 0, 0)]
        if name == "lm_head":
            grid = [(16, 256, 4, 1, 0, 0), (8, 1024, 4, 1, 0, 1), (16, 1024, 4, 1, 0, 1), (16, 512, 4, 1, 0, 1),
                    (4, 1024, 2, 1, 0, 1), (32, 512, 8, 1, 0, 1), (8, 512, 4, 1, 0, 0), (16, 1024, 8, 1, 0, 1)]
        if name in ("o_proj", "down"):
            grid = grid[:8] + [(2, 1024, 1, 2, 0, 1), (4, 1024, 2, 2, 0, 1), (4, 4096, 4, 1, 0, 0)]
    else:  # tensor-core tiles, the batch padded to 16 rows, or each weight tile met by one row at a time
        # (swap_ab: the weight rows as the product's M, 64 rows and 4 warps for Hopper's warpgroup MMA)
        grid = [(64, 128, 4, 8, 1, 0, 0, 1, 1), (64, 256, 4, 4, 1, 0, 0, 1, 1, 1),
                (32, 256, 2, 1, 1, 0), (64, 256, 4, 2, 1, 0), (32, 128, 2, 1, 1, 0, 0, 6), (32, 64, 1, 1, 1, 0, 0, 4),
                (64, 128, 4, 8, 1, 0, 0, 2, 1), (64, 128, 4, 4, 1, 0, 0, 3, 1), (64, 128, 4, 1, 1, 0, 0, 3, 1),
                (64, 64, 4, 2, 1, 0, 0, 4, 1), (64, 64, 4, 1, 1, 0, 0, 4, 1), (64, 128, 4, 8, 1, 0, 0, 2, 1, 1),
                (64, 128, 4, 4, 1, 0, 0, 3, 1, 1), (128, 128, 8, 1, 1, 0, 0, 3, 1)]
        if name in ("o_proj", "down"):
            grid = [(64, 128, 4, 16, 1, 0, 0, 1, 1), (64, 256, 4, 12, 1, 0, 0, 1, 1),
                    (16, 128, 1, 8, 1, 0), (16, 128, 1, 4, 1, 0), (16, 128, 1, 8, 1, 0, 0, 3, 0, 1),
                    (16, 128, 1, 4, 1, 0, 0, 3, 0, 1), (64, 64, 4, 4, 1, 0, 0, 4, 1), (64, 64, 4, 4, 1, 0, 0, 4, 1, 1),
                    (64, 128, 4, 4, 1, 0, 0, 3, 1), (32, 128, 4, 4, 1, 0), (16, 64, 1, 16, 1, 0),
                    (16, 256, 1, 4, 1, 0), (16, 512, 2, 1, 1, 0)]
        if name == "lm_head":
            grid = [(64, 128, 1, 1, 1, 0, 0, 4), (64, 64, 1, 1, 1, 0, 0, 5), (64, 64, 4, 1, 1, 0, 0, 4, 1),
                    (64, 256, 4, 1, 1, 0, 0, 2, 1), (128, 64, 4, 1, 1, 0, 0, 4, 1), (64, 128, 2, 1, 1, 0),
                    (128, 128, 8, 1, 1, 0), (32, 64, 1, 1, 1, 0), (4, 1024, 2, 1, 0, 0, 1)]
    # SwiGLU needs each row's whole sum: gate_up splits K only with fused_reduce (its last split has them)
    grid = [(r, max(32, k), w, s, bool(d), bool(t), bool(rest and rest[0]), rest[1] if len(rest) > 1 else 3,
             len(rest) > 2 and bool(rest[2]), len(rest) > 3 and bool(rest[3]))
            for r, k, w, s, d, t, *rest in grid
            if s == 1 or name != "gate_up" or (len(rest) > 3 and rest[3])]
    first = getattr(default_config(batch, **shape_kwargs(shape)), name)
    configs = [first] + [c for c in (GemvConfig(*g) for g in grid) if c != first]
    return configs[:limit]


def _gemv_case(name: str, n: int, k: int, batch: int, copies: int, device, dtype, *, early: bool):
    """(weights, run(weight, config, pdl), reference(weight) in float32) for one GEMV as the step runs it.

    early: PDL as the step launches this batch of this shape (its default_config's early_launch).
    """
    from floorlab.kernels.matvec import gemv_counts, launch_gemv
    from floorlab.kernels.runtime import pdl_mode

    gen = torch.Generator(device=device).manual_seed(n + k)
    weights = [torch.randn(n, k, device=device, dtype=dtype, generator=gen) * k ** -0.5 for _ in range(copies)]
    x = torch.randn(batch, k, device=device, dtype=dtype, generator=gen)
    norm = 1 + 0.1 * torch.randn(k, device=device, dtype=dtype, generator=gen)
    rows = n // 2 if name == "gate_up" else n
    out = torch.empty(batch, rows, device=device, dtype=dtype)
    residual = torch.randn(batch, rows, device=device, dtype=dtype, generator=gen)
    kind = {"qkv": "norm", "lm_head": "norm", "gate_up": "swiglu", "o_proj": "residual", "down": "residual"}[name]
    # gate_up is RMSNorm'd too, as the step runs it

    counts = gemv_counts(rows, device)  # enough for any rows per program: made once, as the step does

    def run(weight, config, pdl):
        mode = pdl_mode(pdl, early)
        if kind == "residual":  # in place, as the step adds to x
            return launch_gemv(x, weight, out, config=config, residual=out, pdl=mode, counts=counts)
        return launch_gemv(x, weight, out, config=config, norm_weight=norm, eps=EPS, swiglu=kind == "swiglu",
                           pdl=mode, counts=counts)

    def check(config, pdl) -> float:
        out.copy_(residual)
        got = run(weights[0], config, pdl).float()
        w, xf = weights[0].float(), x.float()
        if kind == "norm":
            expected = _rms_norm(x, norm, EPS).float() @ w.T
        elif kind == "swiglu":
            gate, up = (_rms_norm(x, norm, EPS).float() @ w.T).chunk(2, dim=-1)
            expected = F.silu(gate) * up
        else:
            expected = residual.float() + xf @ w.T
        return relative_error(got, expected)

    return weights, run, check


def _time_per_call_ms(calls, device, warmup: int, repeats: int) -> float:
    """Median ms per call of calls() (a list of launches), replayed as one CUDA graph on a GPU."""
    def all_calls():
        for call in calls:
            call()

    fn = all_calls
    if device.type == "cuda":
        graph, _ = capture_graph(all_calls, warmup=1)
        fn = graph.replay
    return time_ms(fn, warmup=warmup, repeats=repeats, device=device).median_ms / len(calls)


def sweep_gemvs(shape: Qwen3Shape, batches, *, device, dtype, read_gbps: float, copies: int, warmup: int,
                repeats: int, limit: int, pdl_on: bool, errors: list) -> tuple[list[dict], dict]:
    """Rows (one per GEMV, batch, config, PDL) and the best config per (GEMV, batch) by time."""
    from floorlab.kernels import default_config, shape_kwargs

    rows, best = [], {}
    for batch in batches:
        early = default_config(batch, **shape_kwargs(shape)).early_launch  # PDL as the step launches it
        for name, (n, k) in gemv_shapes(shape).items():
            count = copies if name != "lm_head" else 1  # the head alone is far larger than L2
            try:
                weights, run, check = _gemv_case(name, n, k, batch, count, device, dtype, early=early)
            except Exception as err:  # noqa: BLE001 - e.g. out of memory: report and go on
                _report(errors, f"{name} b{batch} setup", err)
                continue
            nbytes = n * k * weights[0].element_size()
            variants = [(c, pdl_on) for c in gemv_configs(name, batch, shape, limit)]
            variants.append(("torch", False))
            done = {}
            for config, pdl in variants:
                row = {"gemv": name, "batch": batch, "n": n, "k": k, "bytes": nbytes, "pdl": pdl,
                       "config": config if config == "torch" else config.to_dict()}
                try:
                    if config == "torch":
                        x = torch.randn(batch, k, device=device, dtype=dtype)
                        calls = [lambda w=w, x=x: F.linear(x, w) for w in weights]
                        row["rel_err"] = 0.0
                    else:
                        row["rel_err"] = check(config, pdl)
                        calls = [lambda w=w, c=config, p=pdl: run(w, c, p) for w in weights]
                    row["us"] = 1e3 * _time_per_call_ms(calls, device, warmup, repeats)
                    row["gbps"] = achieved_gbps(nbytes, row["us"] / 1e3)
                    row["pct_read"] = 100 * row["gbps"] / read_gbps
                    row["ok"] = row["rel_err"] <= MAX_REL_ERR
                    if config != "torch":
                        done[config] = row
                except Exception as err:  # noqa: BLE001
                    row["error"] = _report(errors, f"{name} b{batch} {config}", err)
                rows.append(row)
            good = {c: r for c, r in done.items() if r["ok"]}
            if good:
                winner = min(good, key=lambda c: good[c]["us"])
                best[(name, batch)] = winner
                good[winner]["best"] = True
                if pdl_on:  # the same config without PDL, to see what PDL buys
                    row = {"gemv": name, "batch": batch, "n": n, "k": k, "bytes": nbytes, "pdl": False,
                           "config": winner.to_dict()}
                    try:
                        calls = [lambda w=w: run(w, winner, False) for w in weights]
                        row["us"] = 1e3 * _time_per_call_ms(calls, device, warmup, repeats)
                        row["gbps"] = achieved_gbps(nbytes, row["us"] / 1e3)
                        row["pct_read"] = 100 * row["gbps"] / read_gbps
                    except Exception as err:  # noqa: BLE001
                        row["error"] = _report(errors, f"{name} b{batch} pdl off", err)
                    rows.append(row)
            del weights
            _free()
    return rows, best


def sweep_sizes(sizes, k: int, *, device, dtype, read_gbps: float, copies: int, warmup: int, repeats: int,
                pdl_on: bool, config=None) -> list[dict]:
    """Bandwidth of the bare GEMV y = x @ W^T (batch 1) against its rows N, so against its grid size.

    Three ways per size: `alone` (one launch per graph replay: one GEMV with nothing around it),
    `serial` (copies launches on distinct weights, each waiting for the last to drain) and
    `chained` (the same launches with PDL, each loading weights while the last one finishes).
    """
    from floorlab.kernels import GemvConfig
    from floorlab.kernels.matvec import launch_gemv
    from floorlab.kernels.runtime import PDL_EARLY

    config = config or GemvConfig()
    rows = []
    for n in sizes:
        gen = torch.Generator(device=device).manual_seed(n)
        weights = [torch.randn(n, k, device=device, dtype=dtype, generator=gen) for _ in range(copies)]
        x = torch.randn(1, k, device=device, dtype=dtype, generator=gen)
        out = torch.empty(1, n, device=device, dtype=dtype)
        nbytes = n * k * weights[0].element_size()
        row = {"n": n, "k": k, "bytes": nbytes, "programs": -(-n // config.rows_per_program),
               "config": config.to_dict()}
        ways = {"alone": (weights[:1], False), "serial": (weights, False), "chained": (weights, pdl_on)}
        for way, (used, pdl) in ways.items():
            calls = [lambda w=w, p=pdl: launch_gemv(x, w, out, config=config, pdl=PDL_EARLY if p else 0)
                     for w in used]
            us = 1e3 * _time_per_call_ms(calls, device, warmup, repeats)
            row[f"{way}_us"] = us
            row[f"{way}_gbps"] = achieved_gbps(nbytes, us / 1e3)
            row[f"{way}_pct_read"] = 100 * row[f"{way}_gbps"] / read_gbps
        rows.append(row)
        del weights
        _free()
    return rows


def tuned_config(batch: int, best: dict, shape: Qwen3Shape, max_context: int):
    """default_config(batch) with every GEMV the sweep timed at this batch replaced by its best config."""
    from floorlab.kernels import GEMV_NAMES, default_config, shape_kwargs

    config = default_config(batch, max_context=max_context, **shape_kwargs(shape))
    for name in GEMV_NAMES:
        if (name, batch) in best:
            config = config.with_gemv(name, best[(name, batch)])
    return config


def _per_batch(model, configs: dict, pdl: bool | None = None):
    """A step that runs triton_step with configs[B] for a batch of B rows."""
    from floorlab.kernels import triton_step

    steps = {b: triton_step(model, config=c, pdl=pdl) for b, c in configs.items()}
    return lambda tokens, positions: steps[tokens.shape[0]](tokens, positions)


def _prefilled(model, batch: int, context: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens, positions) of one decode step after a fresh cache holds `context` random tokens per row."""
    device, vocab = model.embed.device, model.shape.vocab_size
    gen = torch.Generator().manual_seed(batch)
    prompt = torch.randint(0, vocab, (batch, context), generator=gen).to(device)
    tokens = torch.randint(0, vocab, (batch,), generator=gen).to(device)
    model.reset_cache()
    model.prefill(prompt)
    return tokens, torch.full((batch,), context, dtype=torch.long, device=device)


def time_steps(shape: Qwen3Shape, batches, context: int, *, device, dtype, floor_gbps: float, best: dict,
               warmup: int, repeats: int, errors: list) -> list[dict]:
    """Rows of plain and kernel steps at each batch: ms, x floor, and replay == eager on a GPU."""
    from floorlab.kernels import triton_step
    from floorlab.model import build_model

    rows = []
    max_context = context + 8
    model = build_model(shape, device=device, dtype=dtype, max_batch=max(batches), max_context=max_context)
    steps = {"plain": model.decode_step, "triton default": triton_step(model)}
    configs = {b: tuned_config(b, best, shape, max_context) for b in batches}
    steps["triton tuned"] = _per_batch(model, configs)
    steps["triton tuned, no PDL"] = _per_batch(model, configs, pdl=False)
    steps["triton tuned, PDL after wait"] = _per_batch(
        model, {b: replace(c, early_launch=False) for b, c in configs.items()})
    for splits in ATTENTION_SPLITS:  # flash-decoding splits of the context, at most one tile each
        if splits <= max(1, max_context // configs[batches[0]].attention.block_t):
            split_configs = {b: replace(c, attention=replace(c.attention, splits=splits)) for b, c in configs.items()}
            steps[f"triton tuned, {splits} split{'s' if splits > 1 else ''}"] = _per_batch(model, split_configs)
    runners = {}
    if device.type == "cuda":
        from floorlab.graphs import GraphRunner

        for path, fn in steps.items():
            try:
                runners[path] = GraphRunner(model, buckets=tuple(batches), step_fn=fn)
                runners[path].capture()
            except Exception as err:  # noqa: BLE001
                runners.pop(path, None)
                _report(errors, f"{shape.name} {path} capture", err)
    for batch in batches:
        tokens, positions = _prefilled(model, batch, context)
        moved = bytes_per_step(shape, batch, context + 1)
        floor = floor_ms(moved, floor_gbps)
        reference = None
        for path, fn in steps.items():
            row = {"preset": shape.name, "batch": batch, "context": context, "path": path,
                   "graph": path in runners, "bytes": moved, "floor_ms": floor}
            try:
                logits = fn(tokens, positions)
                if reference is None:
                    reference = logits.float()
                row["rel_err_vs_plain"] = relative_error(logits, reference)
                if path in runners:
                    runner = runners[path]
                    row["bit_identical"] = runner.check_bit_identical(tokens, positions)
                    row["max_abs_diff"] = runner.last_max_abs_diff
                    runner.step(tokens, positions)
                    timed = runner.replay_fn(batch)
                else:
                    def timed(fn=fn, tokens=tokens, positions=positions):
                        fn(tokens, positions)
                row["ms"] = time_ms(timed, warmup=warmup, repeats=repeats, device=device).median_ms
                row["x_floor"] = row["ms"] / floor
            except Exception as err:  # noqa: BLE001
                row["error"] = _report(errors, f"{shape.name} b{batch} {path}", err)
            rows.append(row)
        try:
            rows.append(time_attention(model, configs[batch].attention, positions, warmup=warmup, repeats=repeats,
                                       floor_gbps=floor_gbps))
        except Exception as err:  # noqa: BLE001
            _report(errors, f"{shape.name} b{batch} attention", err)
    del model, steps, runners
    _free()
    return rows


def step_variants(shape: Qwen3Shape, batch: int, max_context: int, *, tiny: bool = False) -> list[tuple]:
    """(label, part changed, StepConfig): default_config, then one launch config changed at a time."""
    from floorlab.kernels import AttentionConfig, GemvConfig, default_config, shape_kwargs

    base = default_config(batch, max_context=max_context, **shape_kwargs(shape))
    g = GemvConfig
    if batch <= 2:
        gemvs = {"qkv": [g(2, 1024, 1, tile_sums=True), g(8, 2048, 8, tile_sums=True), g(4, 1024, 4, tile_sums=True)],
                 "o_proj": [g(4, 2048, 2), g(2, 2048, 2, tile_sums=True)],
                 "gate_up": [g(2, 1024, 2, tile_sums=True), g(4, 1024, 2, tile_sums=True)],
                 "down": [g(4, 4096, 4, tile_sums=True), g(8, 4096, 8, tile_sums=True), g(4, 1024, 2, tile_sums=True)]}
        attention = [AttentionConfig(32, 1, 4), AttentionConfig(64, 1, 4), AttentionConfig(64, 2, 4),
                     AttentionConfig(32, 4, 4)]
    else:
        wide = g(64, 128, 4, dot=True, swap_ab=True)  # warpgroup MMA
        gemvs = {"qkv": [g(32, 256, 2, dot=True), g(64, 256, 4, 2, dot=True), replace(wide, split_k=8, num_stages=2),
                         replace(wide, split_k=4), replace(wide, block_k=64, split_k=2, num_stages=4)],
                 "o_proj": [g(16, 128, 1, 8, dot=True), g(16, 128, 1, 4, dot=True),
                            replace(wide, block_k=64, split_k=4, num_stages=4),
                            # one-warp programs of 16 rows on swapped operands, 1024-wide splits
                            g(16, 1024, 1, 2, dot=True, swap_ab=True, num_stages=1),
                            # 64-row warpgroup programs, one 128-wide tile each (the 0.6B's old default)
                            replace(wide, split_k=max(1, shape.num_heads * shape.head_dim // 128), num_stages=1)],
                 "gate_up": [g(32, 128, 2, dot=True, num_stages=6), g(32, 64, 1, dot=True, num_stages=4), wide,
                             replace(wide, block_k=64, num_stages=6),
                             replace(wide, split_k=8, num_stages=2, fused_reduce=True),
                             replace(wide, split_k=4, fused_reduce=True)],
                 "down": [g(16, 128, 1, 4, dot=True), g(16, 128, 1, 8, dot=True), replace(wide, split_k=4)],
                 "lm_head": [g(64, 128, 1, dot=True, num_stages=4), g(64, 64, 1, dot=True, num_stages=5),
                             replace(wide, block_k=64, num_stages=4), replace(wide, block_k=256, num_stages=2)]}
        attention = [AttentionConfig(64, 2, 8), AttentionConfig(64, 1, 4)]
    variants = [("default", "-", base)]
    variants += [(f"attention t{a.block_t} s{a.splits} w{a.num_warps}", "attention", replace(base, attention=a))
                 for a in attention if a != base.attention]
    variants.append((f"early launch {'off' if base.early_launch else 'on'}", "early_launch",
                     replace(base, early_launch=not base.early_launch)))
    for name, configs in gemvs.items():
        if getattr(base, name).split_k > 1:  # the same splits added up in the GEMV, without a second kernel
            configs = configs + [replace(getattr(base, name), fused_reduce=True)]
        variants += [(f"{name} {_config_text(c.to_dict())}", name, base.with_gemv(name, c))
                     for c in configs if c != getattr(base, name)]
    return variants[:3] if tiny else variants


def time_step_variants(shape: Qwen3Shape, batches, *, device, dtype, floor_gbps: float, warmup: int,
                       repeats: int, errors: list, tiny: bool = False) -> list[dict]:
    """Rows: the kernel step at the bench's context, default config and one-change variants, replayed.

    Each row holds ms, x floor, the ratio to the default's time in the same run, and replay == eager.
    """
    from floorlab.kernels import triton_step
    from floorlab.model import build_model

    context, max_context = (12, 16) if tiny else (VARIANT_CONTEXT, VARIANT_MAX_CONTEXT)
    model = build_model(shape, device=device, dtype=dtype, max_batch=max(batches), max_context=max_context)
    rows = []
    for batch in batches:
        tokens, positions = _prefilled(model, batch, context)
        floor = floor_ms(bytes_per_step(shape, batch, context + 1), floor_gbps)
        default_ms = None
        for label, part, config in step_variants(shape, batch, max_context, tiny=tiny):
            row = {"preset": shape.name, "batch": batch, "context": context, "variant": label, "part": part,
                   "floor_ms": floor, "config": config.to_dict()}
            try:
                step = triton_step(model, config=config)
                if device.type == "cuda":
                    from floorlab.graphs import GraphRunner

                    runner = GraphRunner(model, buckets=(batch,), step_fn=step)
                    runner.capture()
                    row["bit_identical"] = runner.check_bit_identical(tokens, positions)
                    timed = runner.replay_fn(batch)
                else:
                    def timed(step=step):
                        step(tokens, positions)
                row["ms"] = time_ms(timed, warmup=warmup, repeats=repeats, device=device).median_ms
                row["x_floor"] = row["ms"] / floor
                default_ms = default_ms or row["ms"]
                row["vs_default"] = row["ms"] / default_ms
            except Exception as err:  # noqa: BLE001
                row["error"] = _report(errors, f"{shape.name} b{batch} {label}", err)
            rows.append(row)
    del model
    _free()
    return rows


def time_attention(model, config, positions: torch.Tensor, *, warmup: int, repeats: int, floor_gbps: float) -> dict:
    """One row: the attention kernel of every layer back to back (PDL on where it can be), µs per layer."""
    from floorlab.kernels import pdl_supported
    from floorlab.kernels.attention import attention_counts, launch_attention
    from floorlab.kernels.runtime import PDL_EARLY

    s, device = model.shape, model.embed.device
    batch = positions.shape[0]
    qkv = torch.randn(batch, (s.num_heads + 2 * s.num_kv_heads) * s.head_dim, device=device, dtype=model.dtype)
    out = torch.empty(batch, s.num_heads * s.head_dim, device=device, dtype=model.dtype)
    counts = attention_counts(batch, s.num_kv_heads, device)
    mode = PDL_EARLY if pdl_supported(device) else 0
    calls = [lambda i=i, w=w: launch_attention(
        qkv, positions, w.q_norm, w.k_norm, model.rope_cos, model.rope_sin_signed, model.k_cache[i],
        model.v_cache[i], out, num_heads=s.num_heads, num_kv_heads=s.num_kv_heads, eps=s.rms_norm_eps,
        config=config, pdl=mode, counts=counts) for i, w in enumerate(model.layers)]
    us = 1e3 * _time_per_call_ms(calls, device, warmup, repeats)
    visible = int(positions.max().item()) + 1
    nbytes = 2 * batch * s.num_kv_heads * visible * s.head_dim * model.k_cache.element_size()
    return {"preset": s.name, "batch": batch, "path": "attention kernel, per layer", "kernel": "attention",
            "config": config.to_dict(), "us": us, "bytes": nbytes, "gbps": achieved_gbps(nbytes, us / 1e3),
            "pct_floor_bw": 100 * achieved_gbps(nbytes, us / 1e3) / floor_gbps}


def layer_kernel_rows(model, positions: torch.Tensor, *, read_gbps: float, warmup: int, repeats: int,
                      config=None) -> list[dict]:
    """The book's kernels of one layer (and the LM head), each timed over every layer back to back.

    Each kernel runs as the step runs it (its config, epilogue and PDL) on the model's own weights,
    one launch per layer in one CUDA graph, so no weight sits in L2. Rows: kernel, µs per launch,
    bytes it must read, GB/s and % of the read bandwidth, and µs beyond those bytes. Where PDL is
    on, each GEMV that does not split K is timed again without its wait (runtime.PDL_NO_WAIT:
    wrong results, a bound on what the wait costs): us_no_wait and pct_read_no_wait, else None.
    """
    from floorlab.kernels import default_config, pdl_supported, shape_kwargs
    from floorlab.kernels.matvec import gemv_counts, launch_gemv
    from floorlab.kernels.runtime import PDL_NO_WAIT, pdl_mode

    s, device, batch = model.shape, model.embed.device, positions.shape[0]
    config = config or default_config(batch, max_context=model.max_context, **shape_kwargs(s))
    mode = pdl_mode(pdl_supported(device), config.early_launch)
    kw = dict(device=device, dtype=model.dtype)
    x, attn = torch.randn(batch, s.hidden_size, **kw), torch.randn(batch, s.num_heads * s.head_dim, **kw)
    act = torch.randn(batch, s.intermediate_size, **kw)
    outs = {n: torch.zeros(batch, rows, **kw) for n, rows in (  # zeros: the residuals read them
        ("qkv", (s.num_heads + 2 * s.num_kv_heads) * s.head_dim), ("hidden", s.hidden_size),
        ("gate_up", s.intermediate_size), ("lm_head", s.vocab_size))}
    head = model.embed if model.lm_head is None else model.lm_head
    counts = gemv_counts(s.vocab_size, device)  # for split GEMVs that add their splits up themselves
    launches = {
        "qkv": lambda w, pdl: launch_gemv(x, w.qkv, outs["qkv"], config=config.qkv, norm_weight=w.input_norm,
                                          eps=s.rms_norm_eps, pdl=pdl, counts=counts),
        "o_proj": lambda w, pdl: launch_gemv(attn, w.o_proj, outs["hidden"], config=config.o_proj,
                                             residual=outs["hidden"], pdl=pdl, counts=counts),
        "gate_up": lambda w, pdl: launch_gemv(x, w.gate_up, outs["gate_up"], config=config.gate_up,
                                              norm_weight=w.post_norm, eps=s.rms_norm_eps, swiglu=True, pdl=pdl,
                                              counts=counts),
        "down": lambda w, pdl: launch_gemv(act, w.down, outs["hidden"], config=config.down,
                                           residual=outs["hidden"], pdl=pdl, counts=counts),
    }
    rows = []
    for name, launch in launches.items():
        weight, part = getattr(model.layers[0], name), getattr(config, name)
        nbytes = weight.numel() * weight.element_size()
        calls = [lambda w=w, launch=launch: launch(w, mode) for w in model.layers]
        row = _kernel_row(name, calls, nbytes, part, device, warmup, repeats, read_gbps)
        row["us_no_wait"] = row["pct_read_no_wait"] = None
        if mode and part.split_k == 1:  # split counters need the wait to count right
            calls = [lambda w=w, launch=launch: launch(w, PDL_NO_WAIT) for w in model.layers]
            row["us_no_wait"] = 1e3 * _time_per_call_ms(calls, device, warmup, repeats)
            row["pct_read_no_wait"] = 100 * achieved_gbps(nbytes, row["us_no_wait"] / 1e3) / read_gbps
        rows.append(row)
    attention = time_attention(model, config.attention, positions, warmup=warmup, repeats=repeats,
                               floor_gbps=read_gbps)
    rows.insert(1, {"kernel": "attention", "us": attention["us"], "bytes": attention["bytes"],
                    "gbps": attention["gbps"], "pct_read": attention["pct_floor_bw"],
                    "beyond_us": attention["us"] - 1e-3 * attention["bytes"] / read_gbps,
                    "config": config.attention.to_dict()})
    calls = [lambda: launch_gemv(x, head, outs["lm_head"], config=config.lm_head, norm_weight=model.final_norm,
                                 eps=s.rms_norm_eps, pdl=mode, counts=counts)]
    rows.append(_kernel_row("lm_head", calls, head.numel() * head.element_size(), config.lm_head, device,
                            warmup, repeats, read_gbps))
    return rows


def _kernel_row(name: str, calls, nbytes: int, config, device, warmup: int, repeats: int,
                read_gbps: float) -> dict:
    us = 1e3 * _time_per_call_ms(calls, device, warmup, repeats)
    gbps = achieved_gbps(nbytes, us / 1e3)
    return {"kernel": name, "us": us, "bytes": nbytes, "gbps": gbps, "pct_read": 100 * gbps / read_gbps,
            "beyond_us": us - 1e-3 * nbytes / read_gbps, "config": config.to_dict()}


def format_layer_table(rows: list[dict], num_layers: int) -> str:
    """The per-kernel table as text, with one layer's sum and the LM head."""
    waits = any(r.get("pct_read_no_wait") is not None for r in rows)

    def no_wait(row: dict) -> str:  # a column only where some GEMV was timed without its wait
        pct = row.get("pct_read_no_wait")
        return "" if not waits else f" {pct:9.1f}" if pct is not None else f" {'-':>9}"

    lines = [f"{'kernel':9} {'µs':>8} {'MB':>7} {'GB/s':>6} {'% read':>6} {'µs beyond bytes':>15}"
             + (f" {'% no wait':>9}" if waits else "")]
    lines += [f"{r['kernel']:9} {r['us']:8.2f} {r['bytes'] / 1e6:7.2f} {r['gbps']:6.0f} {r['pct_read']:6.1f} "
              f"{r['beyond_us']:15.2f}{no_wait(r)}" for r in rows]
    layer = [r for r in rows if r["kernel"] != "lm_head"]
    worst = max(layer, key=lambda r: r["beyond_us"])
    lines.append(f"one layer: {sum(r['us'] for r in layer):.2f} µs, {sum(r['beyond_us'] for r in layer):.2f} "
                 f"of them beyond its bytes (x {num_layers} layers)")
    lines.append(f"the most beyond its bytes: {worst['kernel']} ({worst['beyond_us']:.2f} µs)")
    if waits:
        lines.append("% no wait: launched without the PDL wait (wrong results; what the wait costs)")
    return "\n".join(lines)


def stored_sweep(name: str = "h200-kernel-sweep") -> dict:
    """The stored sweep lib/floorlab/reference/<name>.json, as the dict run_sweep returned."""
    from floorlab.paths import REFERENCE_DIR
    from floorlab.results import load_json

    return load_json(Path(REFERENCE_DIR) / f"{name}.json")


def size_sweep_here(device, shape: Qwen3Shape, *, read_gbps: float, reference: str):
    """(rows, source): the size sweep on this GPU; on a CPU, the stored run's rows.

    On a CPU the same code first runs in Triton's interpreter on two tiny sizes (where Triton
    is installed), which checks the launches but times nothing worth drawing.
    """
    from floorlab.kernels import default_config, kernels_unavailable, pdl_supported, shape_kwargs
    from floorlab.measure import source_for

    source = source_for(device, reference)
    if source.here:
        config = default_config(1, **shape_kwargs(shape)).qkv
        rows = sweep_sizes(SIZES, shape.hidden_size, device=device, dtype=torch.bfloat16, read_gbps=read_gbps,
                           copies=shape.num_layers, warmup=3, repeats=20, pdl_on=pdl_supported(device),
                           config=config)
        return rows, source
    if not kernels_unavailable(device):
        sweep_sizes((16, 64), 64, device=device, dtype=torch.float32, read_gbps=read_gbps, copies=2, warmup=0,
                    repeats=1, pdl_on=False)
    return source.run.facts["size_rows"], source


def layer_kernels_here(model, positions: torch.Tensor, *, read_gbps: float, reference: str):
    """(rows, source): layer_kernel_rows on this GPU; on a CPU, the stored run's rows."""
    from floorlab.measure import source_for

    source = source_for(model.embed.device, reference)
    if source.here:
        return layer_kernel_rows(model, positions, read_gbps=read_gbps, warmup=3, repeats=20), source
    return source.run.facts["layer_kernels"], source


def parity_with_plain(model, tokens: torch.Tensor, positions: torch.Tensor) -> float:
    """Relative error of the kernels' logits against model.decode_step from the same cache.

    The KV cache is left as the plain step leaves it (both steps write the same position).
    """
    from floorlab.fused import relative_error
    from floorlab.kernels import triton_step

    k0, v0 = model.k_cache.clone(), model.v_cache.clone()
    expected = model.decode_step(tokens, positions).float()
    k1, v1 = model.k_cache.clone(), model.v_cache.clone()
    model.k_cache.copy_(k0)
    model.v_cache.copy_(v0)
    got = triton_step(model)(tokens, positions).float()
    model.k_cache.copy_(k1)
    model.v_cache.copy_(v1)
    return relative_error(got, expected)


def _fits(shape: Qwen3Shape, device, dtype) -> bool:
    """True when the model's weights fit in free device memory with a third to spare."""
    if device.type != "cuda":
        return True
    free, _ = torch.cuda.mem_get_info(device)
    return shape.param_count() * torch.empty((), dtype=dtype).element_size() * 1.33 < free


def _report(errors: list, what: str, err: Exception) -> str:
    message = f"{what}: {type(err).__name__}: {err}".splitlines()[0][:300]
    print(f"  ! {message}", file=sys.stderr)
    traceback.print_exc(limit=2, file=sys.stderr)
    errors.append(message)
    return message


def _free() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _config_text(config) -> str:
    if not isinstance(config, dict):
        return str(config)
    text = f"r{config['rows_per_program']} k{config['block_k']} w{config['num_warps']}"
    text += f" s{config['split_k']}" if config.get("split_k", 1) > 1 else ""
    return (text + (" dot" if config.get("dot") else "") + (" ts" if config.get("tile_sums") else "")
            + (" rows" if config.get("row_loop") else "")
            + (f" st{config['num_stages']}" if config.get("num_stages", 3) != 3 else "")
            + (" swap" if config.get("swap_ab") else "") + (" fused" if config.get("fused_reduce") else ""))


def _line(head: str, row: dict, body) -> str:
    """One table line: head, then body(row), or the row's error where it failed."""
    return f"{head} error: {row['error'][:60]}" if "error" in row else f"{head} {body(row)}"


def format_table(result: dict) -> str:
    """The sweep as text: bandwidth, one line per GEMV variant (* = best), the best configs, the steps."""
    bw = result["bandwidth_gbps"]
    lines = [f"{result['device'].get('name')}: copy {bw['copy']:.0f} GB/s, read {bw['read']:.0f} GB/s "
             f"(floors use {result['floor_gbps']:.0f} GB/s)", "",
             f"{'preset':11} {'gemv':8} {'b':>2} {'config':21} {'pdl':>3} {'us':>8} {'GB/s':>7} {'%read':>6} "
             f"{'rel err':>8}"]
    for r in result["gemv_rows"]:
        head = f"{r.get('preset', ''):11} {r['gemv']:8} {r['batch']:>2} {_config_text(r['config']):21}"
        err = f"{r['rel_err']:.1e}" if "rel_err" in r else "-"
        lines.append(_line(head, r, lambda r: f"{'on' if r['pdl'] else 'off':>3} {r['us']:8.2f} {r['gbps']:7.0f} "
                                             f"{r['pct_read']:6.1f} {err:>8}{' *' if r.get('best') else ''}"))
    if result.get("size_rows"):
        lines += ["", f"{'rows N':>7} {'MB':>6} {'programs':>8} {'alone GB/s':>10} {'serial':>7} {'chained':>7}"]
        lines += [f"{r['n']:7d} {r['bytes'] / 1e6:6.1f} {r['programs']:8d} {r['alone_gbps']:10.0f} "
                  f"{r['serial_gbps']:7.0f} {r['chained_gbps']:7.0f}" for r in result["size_rows"]]
    lines += ["", "best config per GEMV:"]
    lines += [f"  {key}: {_config_text(c)}" for key, c in result["best"].items()]
    lines += ["", f"{'preset':12} {'b':>2} {'path':28} {'graph':>5} {'ms':>8} {'floor':>7} {'x floor':>7} "
                  f"{'rel err':>8} {'bit-id':>6}"]
    for r in result["step_rows"]:
        if r.get("kernel") == "attention":
            lines.append(f"{r['preset']:12} {r['batch']:>2} {r['path']:28} {'':>5} {r['us'] / 1e3:8.4f} "
                         f"({r['us']:.2f} µs, {r['gbps']:.0f} GB/s of KV)")
            continue
        head = f"{r['preset']:12} {r['batch']:>2} {r['path']:28} {'yes' if r['graph'] else 'no':>5}"
        lines.append(_line(head, r, lambda r: f"{r['ms']:8.3f} {r['floor_ms']:7.3f} {r['x_floor']:7.2f} "
                                             f"{r['rel_err_vs_plain']:8.1e} {str(r.get('bit_identical', '-')):>6}"))
    if result.get("variant_rows"):
        lines += ["", f"the step with one launch config changed (context {result['variant_rows'][0]['context']}):",
                  f"{'preset':12} {'b':>2} {'variant':34} {'ms':>8} {'x floor':>7} {'vs default':>10} {'bit-id':>6}"]
        for r in result["variant_rows"]:
            head = f"{r['preset']:12} {r['batch']:>2} {r['variant']:34}"
            lines.append(_line(head, r, lambda r: f"{r['ms']:8.4f} {r['x_floor']:7.2f} {r['vs_default']:10.3f} "
                                                 f"{str(r.get('bit_identical', '-')):>6}"))
    if result["errors"]:
        lines += ["", f"{len(result['errors'])} variants failed (see errors in the JSON)"]
    return "\n".join(lines)


def run_sweep(*, tiny: bool = False, batches=None, context: int | None = None, presets=None,
              repeats: int | None = None, limit: int = 12, skip_steps: bool = False,
              skip_variants: bool = False) -> dict:
    """Run the GEMV sweep and the step timings on this machine; returns the results dict (see format_table)."""
    from floorlab.kernels import kernels_interpreted, pdl_supported

    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    if device.type == "cpu" and not kernels_interpreted():
        raise RuntimeError("no CUDA GPU here and Triton's interpreter is off; run on a GPU, or on a CPU with "
                           "`TRITON_INTERPRET=1 python -m floorlab.kernel_sweep --tiny`")
    on_cuda = device.type == "cuda"
    dtype = torch.bfloat16 if on_cuda and not tiny else torch.float32  # tiny: a float32 check of every path
    start = time.perf_counter()
    batches = tuple(batches or ((1, 3) if tiny else BATCHES))
    context = context or (12 if tiny else CONTEXT)
    step_shapes = [TINY] if tiny else [get_shape(p) for p in (presets or STEP_PRESETS)]
    warmup, repeats = (3, repeats or 20) if on_cuda else (0, repeats or 1)
    size_mb = None if on_cuda else 16
    copy, read = (measure_bandwidth(device, kind=kind, size_mb=size_mb, repeats=5 if tiny else 20)
                  for kind in ("copy", "read"))
    result = {"what": "Triton GEMV sweep and kernel-step timings", "device": describe_device(device),
              "tiny": tiny, "dtype": str(dtype), "context": context, "batches": list(batches),
              "bandwidth_gbps": {"copy": copy.gbps, "read": read.gbps}, "floor_gbps": max(copy.gbps, read.gbps),
              "pdl": pdl_supported(device), "errors": []}
    print(f"bandwidth: copy {copy.gbps:.0f} GB/s, read {read.gbps:.0f} GB/s", flush=True)
    result["gemv_rows"], result["best"], result["step_rows"], result["variant_rows"] = [], {}, [], []
    for shape in step_shapes:  # each preset's GEMVs swept, then its steps timed with the winners
        if not _fits(shape, device, dtype):
            result["errors"].append(f"{shape.name}: skipped, its weights do not fit in free memory")
            continue
        rows, best = sweep_gemvs(shape, batches, device=device, dtype=dtype, read_gbps=read.gbps,
                                 copies=shape.num_layers, warmup=warmup, repeats=repeats, limit=limit,
                                 pdl_on=result["pdl"], errors=result["errors"])
        result["gemv_rows"] += [dict(row, preset=shape.name) for row in rows]
        result["best"].update({f"{shape.name} {name} b{batch}": c.to_dict() for (name, batch), c in best.items()})
        print(f"{shape.name} GEMV sweep done after {time.perf_counter() - start:.0f} s", flush=True)
        if shape == step_shapes[0]:
            try:
                result["size_rows"] = sweep_sizes(
                    (16, 64, 256) if tiny else SIZES, shape.hidden_size, device=device, dtype=dtype,
                    read_gbps=read.gbps, copies=shape.num_layers, warmup=warmup, repeats=repeats,
                    pdl_on=result["pdl"], config=best.get(("qkv", batches[0])))
            except Exception as err:  # noqa: BLE001
                _report(result["errors"], "size sweep", err)
        if skip_steps:
            continue
        try:
            result["step_rows"] += time_steps(shape, batches, context, device=device, dtype=dtype,
                                              floor_gbps=result["floor_gbps"], best=best, warmup=warmup,
                                              repeats=repeats, errors=result["errors"])
        except Exception as err:  # noqa: BLE001
            _report(result["errors"], f"{shape.name} steps", err)
        _free()
        print(f"{shape.name} steps done after {time.perf_counter() - start:.0f} s", flush=True)
        if skip_variants:
            continue
        try:
            result["variant_rows"] += time_step_variants(
                shape, batches, device=device, dtype=dtype, floor_gbps=result["floor_gbps"], warmup=warmup,
                repeats=repeats, errors=result["errors"], tiny=tiny)
        except Exception as err:  # noqa: BLE001
            _report(result["errors"], f"{shape.name} step variants", err)
        print(f"{shape.name} step variants done after {time.perf_counter() - start:.0f} s", flush=True)
    result["elapsed_s"] = time.perf_counter() - start
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m floorlab.kernel_sweep", description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the results as JSON to this path")
    parser.add_argument("--tiny", action="store_true", help="a tiny shape (runs on a CPU with TRITON_INTERPRET=1)")
    parser.add_argument("--batches", type=int, nargs="+", help="batch sizes (default 1 8)")
    parser.add_argument("--presets", nargs="+",
                        help=f"presets whose GEMVs are swept and steps timed (default {' '.join(STEP_PRESETS)})")
    parser.add_argument("--context", type=int, help=f"tokens already in the cache (default {CONTEXT})")
    parser.add_argument("--repeats", type=int, help="timed repeats (default 20 on a GPU)")
    parser.add_argument("--configs", type=int, default=12, help="at most this many configs per GEMV (default 12)")
    parser.add_argument("--skip-steps", action="store_true", help="only the GEMV sweep")
    parser.add_argument("--skip-variants", action="store_true",
                        help="leave out the step with one launch config changed at a time")
    args = parser.parse_args(argv)
    from floorlab.kernels import kernels_unavailable

    why_not = kernels_unavailable("cuda" if torch.cuda.is_available() else "cpu")
    if why_not:
        print(f"the kernel sweep cannot run here: {why_not}", file=sys.stderr)
        return 1
    result = run_sweep(tiny=args.tiny, batches=args.batches, context=args.context, presets=args.presets,
                       repeats=args.repeats, limit=args.configs, skip_steps=args.skip_steps or False,
                       skip_variants=args.skip_steps or args.skip_variants)
    print(format_table(result))
    if args.out:
        from floorlab.results import save_json

        print(f"wrote {save_json(result, args.out)}")
    print(f"done in {result['elapsed_s']:.0f} s")
    return 1 if result["errors"] else 0  # a failed variant fails the run


if __name__ == "__main__":
    sys.exit(main())
