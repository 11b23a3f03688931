"""Tools wing: the kernel sweep's variants: the launch configurations each GEMV tries, the GEMV
sweep, the whole step timed with the winners, and the step with one launch choice changed at a time.
"""
from __future__ import annotations

import sys
import traceback
from dataclasses import replace

import torch
import torch.nn.functional as F

from floorlab.core.roofline import BelowFloorError, achieved_gbps, bytes_per_step, floor_ms
from floorlab.core.shapes import Qwen3Shape
from floorlab.core.timing import time_ms
from floorlab.engine.fused import relative_error
from floorlab.engine.graphs import GraphRunner
from floorlab.engine.kernels import (
    GEMV_NAMES,
    AttentionConfig,
    GemvConfig,
    default_config,
    gemv_shapes,
    shape_kwargs,
    triton_step,
)
from floorlab.engine.kernels.timing import (
    MAX_REL_ERR,
    SIZE_WAYS,
    check_timed,
    free_memory,
    gemv_case,
    time_attention,
    time_per_call_ms,
)
from floorlab.engine.model import build_model

VARIANT_CONTEXT, VARIANT_MAX_CONTEXT = 32, 112  # the bench's prompt and cache: what the defaults serve
ATTENTION_SPLITS = (1, 2, 4, 8, 16)


def gemv_configs(name: str, batch: int, shape: Qwen3Shape, limit: int = 12):
    """At most `limit` GemvConfigs to try for one GEMV at one batch, the default first."""

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


def sweep_gemvs(shape: Qwen3Shape, batches, *, device, dtype, read_gbps: float, copies: int, warmup: int,
                repeats: int, limit: int, pdl_on: bool, errors: list,
                floor_gbps: float | None = None) -> tuple[list[dict], dict]:
    """Rows (one per GEMV, batch, config, PDL) and the best config per (GEMV, batch) by time.

    A row timed below its floor (weight bytes at floor_gbps, default read_gbps) fails, never wins."""

    rows, best = [], {}
    floor_gbps = floor_gbps or read_gbps
    for batch in batches:
        early = default_config(batch, **shape_kwargs(shape)).early_launch  # PDL as the step launches it
        for name, (n, k) in gemv_shapes(shape).items():
            count = copies if name != "lm_head" else 1  # the head alone is far larger than L2
            try:
                weights, run, check = gemv_case(name, n, k, batch, count, device, dtype, early=early)
            except Exception as err:  # noqa: BLE001 - e.g. out of memory: report and go on
                report_error(errors, f"{name} b{batch} setup", err)
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
                    row["us"] = 1e3 * check_timed(time_per_call_ms(calls, device, warmup, repeats), nbytes,
                                                  floor_gbps, device=device, working_bytes=nbytes * count)
                    row["gbps"] = achieved_gbps(nbytes, row["us"] / 1e3)
                    row["pct_read"] = 100 * row["gbps"] / read_gbps
                    row["ok"] = row["rel_err"] <= MAX_REL_ERR
                    if config != "torch":
                        done[config] = row
                except Exception as err:  # noqa: BLE001
                    row = _failed(row, report_error(errors, f"{name} b{batch} {config_text(row['config'])}", err))
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
                        row["us"] = 1e3 * check_timed(time_per_call_ms(calls, device, warmup, repeats), nbytes,
                                                      floor_gbps, device=device, working_bytes=nbytes * count)
                        row["gbps"] = achieved_gbps(nbytes, row["us"] / 1e3)
                        row["pct_read"] = 100 * row["gbps"] / read_gbps
                    except Exception as err:  # noqa: BLE001
                        row = _failed(row, report_error(errors, f"{name} b{batch} pdl off", err))
                    rows.append(row)
            del weights
            free_memory()
    return rows, best


def tuned_config(batch: int, best: dict, shape: Qwen3Shape, max_context: int):
    """default_config(batch) with every GEMV the sweep timed at this batch replaced by its best config."""

    config = default_config(batch, max_context=max_context, **shape_kwargs(shape))
    for name in GEMV_NAMES:
        if (name, batch) in best:
            config = config.with_gemv(name, best[(name, batch)])
    return config


def _per_batch(model, configs: dict, pdl: bool | None = None):
    """A step that runs triton_step with configs[B] for a batch of B rows."""

    steps = {b: triton_step(model, config=c, pdl=pdl) for b, c in configs.items()}
    return lambda tokens, positions: steps[tokens.shape[0]](tokens, positions)


def prefilled(model, batch: int, context: int) -> tuple[torch.Tensor, torch.Tensor]:
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

        for path, fn in steps.items():
            try:
                runners[path] = GraphRunner(model, buckets=tuple(batches), step_fn=fn)
                runners[path].capture()
            except Exception as err:  # noqa: BLE001
                runners.pop(path, None)
                report_error(errors, f"{shape.name} {path} capture", err)
    for batch in batches:
        tokens, positions = prefilled(model, batch, context)
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
                row["ms"] = check_timed(time_ms(timed, warmup=warmup, repeats=repeats, device=device).median_ms,
                                        moved, floor_gbps, device=device)
                row["x_floor"] = row["ms"] / floor
            except Exception as err:  # noqa: BLE001
                row = _failed(row, report_error(errors, f"{shape.name} b{batch} {path}", err))
            rows.append(row)
        try:
            attention = time_attention(model, configs[batch].attention, positions, warmup=warmup,
                                       repeats=repeats, floor_gbps=floor_gbps)
            check_timed(attention["us"] / 1e3, attention["bytes"], floor_gbps, device=device,
                        working_bytes=attention["bytes"] * shape.num_layers)  # one launch per layer
            rows.append(attention)
        except BelowFloorError as err:
            rows.append(_failed(attention, report_error(errors, f"{shape.name} b{batch} attention", err)))
        except Exception as err:  # noqa: BLE001
            report_error(errors, f"{shape.name} b{batch} attention", err)
    del model, steps, runners
    free_memory()
    return rows


def step_variants(shape: Qwen3Shape, batch: int, max_context: int, *, tiny: bool = False) -> list[tuple]:
    """(label, part changed, StepConfig): default_config, then one launch config changed at a time."""

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
        variants += [(f"{name} {config_text(c.to_dict())}", name, base.with_gemv(name, c))
                     for c in configs if c != getattr(base, name)]
    return variants[:3] if tiny else variants


def time_step_variants(shape: Qwen3Shape, batches, *, device, dtype, floor_gbps: float, warmup: int,
                       repeats: int, errors: list, tiny: bool = False) -> list[dict]:
    """Rows: the kernel step at the bench's context, default config and one-change variants, replayed.

    Each row holds ms, x floor, the ratio to the default's time in the same run, and replay == eager.
    """

    context, max_context = (12, 16) if tiny else (VARIANT_CONTEXT, VARIANT_MAX_CONTEXT)
    model = build_model(shape, device=device, dtype=dtype, max_batch=max(batches), max_context=max_context)
    rows = []
    for batch in batches:
        tokens, positions = prefilled(model, batch, context)
        moved = bytes_per_step(shape, batch, context + 1)
        floor = floor_ms(moved, floor_gbps)
        default_ms = None
        for label, part, config in step_variants(shape, batch, max_context, tiny=tiny):
            row = {"preset": shape.name, "batch": batch, "context": context, "variant": label, "part": part,
                   "floor_ms": floor, "config": config.to_dict()}
            try:
                step = triton_step(model, config=config)
                if device.type == "cuda":

                    runner = GraphRunner(model, buckets=(batch,), step_fn=step)
                    runner.capture()
                    row["bit_identical"] = runner.check_bit_identical(tokens, positions)
                    timed = runner.replay_fn(batch)
                else:
                    def timed(step=step):
                        step(tokens, positions)
                row["ms"] = check_timed(time_ms(timed, warmup=warmup, repeats=repeats, device=device).median_ms,
                                        moved, floor_gbps, device=device)
                row["x_floor"] = row["ms"] / floor
                default_ms = default_ms or row["ms"]
                row["vs_default"] = row["ms"] / default_ms
            except Exception as err:  # noqa: BLE001
                row = _failed(row, report_error(errors, f"{shape.name} b{batch} {label}", err))
            rows.append(row)
    del model
    free_memory()
    return rows


TIMED_KEYS = ("us", "gbps", "pct_read", "ms", "x_floor", "vs_default", "pct_floor_bw", "ok", "best")


def _failed(row: dict, error: str) -> dict:
    """The row marked failed: its error, and none of the timings a failed row must not report."""
    kept = {k: v for k, v in row.items() if k not in TIMED_KEYS and not k.endswith(("_us", "_gbps", "_pct_read"))}
    return dict(kept, error=error)


def check_size_rows(rows: list[dict], floor_gbps: float, errors: list, *, device, copies: int) -> None:
    """Mark each size-sweep row failed (in place) where a way of timing it beats its floor
    ("alone" launches one weight, the other ways `copies`)."""
    for i, row in enumerate(rows):
        for way in SIZE_WAYS:
            try:
                check_timed(row[f"{way}_us"] / 1e3, row["bytes"], floor_gbps, device=device,
                            working_bytes=row["bytes"] * (1 if way == "alone" else copies))
            except BelowFloorError as err:
                rows[i] = _failed(row, report_error(errors, f"size sweep N={row['n']} {way}", err))
                break


def report_error(errors: list, what: str, err: Exception) -> str:
    """Print and keep one line on a failed variant: what, and why (a row below its floor says so itself)."""
    why = str(err) if isinstance(err, BelowFloorError) else f"{type(err).__name__}: {err}"
    message = f"{what}: {why}".splitlines()[0][:300]
    print(f"  ! {message}", file=sys.stderr)
    if not isinstance(err, BelowFloorError):  # the message says it all; elsewhere, where it came from
        traceback.print_exc(limit=2, file=sys.stderr)
    errors.append(message)
    return message


def config_text(config) -> str:
    if not isinstance(config, dict):
        return str(config)
    text = f"r{config['rows_per_program']} k{config['block_k']} w{config['num_warps']}"
    text += f" s{config['split_k']}" if config.get("split_k", 1) > 1 else ""
    return (text + (" dot" if config.get("dot") else "") + (" ts" if config.get("tile_sums") else "")
            + (" rows" if config.get("row_loop") else "")
            + (f" st{config['num_stages']}" if config.get("num_stages", 3) != 3 else "")
            + (" swap" if config.get("swap_ab") else "") + (" fused" if config.get("fused_reduce") else ""))
