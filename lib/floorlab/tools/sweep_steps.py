"""Tools wing: the kernel sweep's whole steps (with each GEMV's winning config, and with one launch choice
changed at a time) and the rows' shared helpers."""
from __future__ import annotations

import statistics
import sys
import traceback
from dataclasses import replace
from functools import partial

import torch

from floorlab.core.roofline import BelowFloorError, bytes_per_step, floor_ms
from floorlab.core.shapes import Qwen3Shape
from floorlab.core.timing import time_ms
from floorlab.engine.fused import relative_error
from floorlab.engine.graphs import GraphRunner
from floorlab.engine.kernels import GEMV_NAMES, AttentionConfig, GemvConfig, default_config, shape_kwargs, triton_step
from floorlab.engine.kernels.timing import check_timed, free_memory, time_attention
from floorlab.engine.model import build_model

VARIANT_CONTEXT, VARIANT_MAX_CONTEXT = 32, 112  # the bench's prompt and cache: what the defaults serve
ATTENTION_SPLITS = (1, 2, 4, 8, 16)


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


def set_ms(row: dict, ms: float, moved: int, floor_gbps: float, *, device) -> None:
    """row's ms, refused below the floor of `moved` bytes (BelowFloorError), and its x_floor."""
    row["ms"] = check_timed(ms, moved, floor_gbps, device=device)
    row["x_floor"] = row["ms"] / row["floor_ms"]


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
                timed = runners[path].replay_fn(batch) if path in runners else partial(fn, tokens, positions)
                set_ms(row, time_ms(timed, warmup=warmup, repeats=repeats, device=device).median_ms, moved,
                       floor_gbps, device=device)
            except Exception as err:  # noqa: BLE001
                row = failed_row(row, report_error(errors, f"{shape.name} b{batch} {path}", err))
            rows.append(row)
        try:
            attention = time_attention(model, configs[batch].attention, positions, warmup=warmup,
                                       repeats=repeats, floor_gbps=floor_gbps)
            check_timed(attention["us"] / 1e3, attention["bytes"], floor_gbps, device=device,
                        working_bytes=attention["bytes"] * shape.num_layers)  # one launch per layer
            rows.append(attention)
        except BelowFloorError as err:
            rows.append(failed_row(attention, report_error(errors, f"{shape.name} b{batch} attention", err)))
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


def time_configs(model, heads: list[tuple[dict, object]], tokens, positions, moved: int, floor_gbps: float, *,
                 device, warmup: int, repeats: int, errors: list, vs: str, rounds: int = 1,
                 reference=None) -> list[dict]:
    """Each (row head, StepConfig)'s row: triton_step replayed on CUDA (bit-identity checked) or run eagerly,
    timed in `rounds` interleaved rounds (ms: their median, refused below the floor of `moved` bytes), x floor,
    `vs` the first timed row, and with a reference the relative error of its logits; a failure a failed row."""
    rows, timed, cache = [], {}, (model.k_cache.clone(), model.v_cache.clone())
    for head, config in heads:
        row = dict(head)
        try:
            model.k_cache.copy_(cache[0])  # each variant starts from the same prefilled cache
            model.v_cache.copy_(cache[1])
            step = triton_step(model, config=config)
            if reference is not None:
                row["rel_err_vs_plain"] = relative_error(step(tokens, positions), reference)
            timed[id(row)] = partial(step, tokens, positions)
            if device.type == "cuda":
                runner = GraphRunner(model, buckets=(tokens.shape[0],), step_fn=step)
                runner.capture()
                row["bit_identical"] = runner.check_bit_identical(tokens, positions)
                timed[id(row)] = runner.replay_fn(tokens.shape[0])
        except Exception as err:  # noqa: BLE001
            row = failed_row(row, report_error(errors, f"{model.shape.name} b{len(tokens)} {row['variant']}", err))
        rows.append(row)
    ms_rounds = {key: [] for key in timed}
    for _ in range(rounds):  # A B C, A B C, ...: the spread between rounds says what a difference must beat
        for key, fn in timed.items():
            ms_rounds[key].append(time_ms(fn, warmup=warmup, repeats=repeats, device=device).median_ms)
    first_ms = None
    for i, row in enumerate(rows):
        if id(row) not in timed:
            continue
        try:
            if rounds > 1:
                row["ms_rounds"] = ms_rounds[id(row)]
            set_ms(row, statistics.median(ms_rounds[id(row)]), moved, floor_gbps, device=device)
            first_ms = first_ms or row["ms"]
            row[vs] = row["ms"] / first_ms
        except BelowFloorError as err:
            rows[i] = failed_row(row, report_error(errors, f"{model.shape.name} b{len(tokens)} {row['variant']}", err))
    return rows


def time_step_variants(shape: Qwen3Shape, batches, *, device, dtype, floor_gbps: float, warmup: int,
                       repeats: int, errors: list, tiny: bool = False) -> list[dict]:
    """Rows of the kernel step at the bench's context, default config then one change at a time, replayed:
    ms, x floor, vs_default (the ratio to the default's time in the same run) and replay == eager."""
    context, max_context = (12, 16) if tiny else (VARIANT_CONTEXT, VARIANT_MAX_CONTEXT)
    model = build_model(shape, device=device, dtype=dtype, max_batch=max(batches), max_context=max_context)
    rows = []
    for batch in batches:
        tokens, positions = prefilled(model, batch, context)
        moved = bytes_per_step(shape, batch, context + 1)
        heads = [({"preset": shape.name, "batch": batch, "context": context, "variant": label, "part": part,
                   "floor_ms": floor_ms(moved, floor_gbps), "config": config.to_dict()}, config)
                 for label, part, config in step_variants(shape, batch, max_context, tiny=tiny)]
        rows += time_configs(model, heads, tokens, positions, moved, floor_gbps, device=device, warmup=warmup,
                             repeats=repeats, errors=errors, vs="vs_default")
    del model
    free_memory()
    return rows


TIMED_KEYS = ("us", "gbps", "pct_read", "ms", "ms_rounds", "x_floor", "vs_default", "vs_two_kernels", "pct_floor_bw",
              "ok", "best")


def failed_row(row: dict, error: str) -> dict:
    """The row marked failed: its error, and none of the timings a failed row must not report."""
    kept = {k: v for k, v in row.items() if k not in TIMED_KEYS and not k.endswith(("_us", "_gbps", "_pct_read"))}
    return dict(kept, error=error)


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
