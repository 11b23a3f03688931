"""Tools wing: `python -m floorlab sweep`: the book's Triton GEMVs over launch configs, then the step with
the winners and one change at a time (evidence for default_config); below the floor fails, exit 1."""
from __future__ import annotations

import argparse
import sys
import time

import torch
import torch.nn.functional as F

from floorlab.core.bandwidth import measure_bandwidth
from floorlab.core.device import DeviceFacts, describe_device
from floorlab.core.files import file_problem, save_or_keep
from floorlab.core.memory import check_fits
from floorlab.core.numbers import whole_number, whole_numbers
from floorlab.core.roofline import BelowFloorError, achieved_gbps
from floorlab.core.shapes import PRESETS, Qwen3Shape, get_shape
from floorlab.engine.kernels import (
    TINY,
    GemvConfig,
    default_config,
    gemv_shapes,
    kernels_unavailable,
    pdl_supported,
    shape_kwargs,
)
from floorlab.engine.kernels.timing import (
    MAX_REL_ERR,
    SIZE_WAYS,
    SIZES,
    cache_bytes,
    check_timed,
    free_memory,
    gemv_case,
    sweep_sizes,
    time_per_call_ms,
)
from floorlab.tools.cli import whole_arg
from floorlab.tools.sweep_steps import config_text, failed_row, report_error, time_step_variants, time_steps

STEP_PRESETS, BATCHES, CONTEXT = ("qwen3-0.6b", "qwen3-8b"), (1, 8), 512


def sweep_device():
    """The device the sweep runs on: the current CUDA GPU, else the CPU (Triton's interpreter)."""
    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")


def preset_arg(text: str) -> str:
    """An argparse type: a preset the book knows (core.shapes.PRESETS), or an error listing them."""
    if text not in PRESETS:
        raise argparse.ArgumentTypeError(f"unknown preset {text!r}; use one of: {', '.join(sorted(PRESETS))}")
    return text


def _check_args(batches, context, presets, repeats, limit) -> None:
    """ValueError for a run_sweep argument no sweep can use (the command line checks its flags alike)."""
    if batches is not None:
        whole_numbers(batches, "batches", hint="pass batch sizes such as [1, 8]")
    for value, name in ((context, "context"), (repeats, "repeats"), (limit, "limit")):
        if value is not None:
            whole_number(value, name)
    for preset in presets or ():
        get_shape(preset)


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
    """Rows (one per GEMV, batch, config, PDL) and the best config per (GEMV, batch) by time; a row below
    its floor (weight bytes at floor_gbps, default read_gbps) fails, never wins."""
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

            def timed(config, pdl: bool, what: str) -> dict:
                """The row of config (or "torch") with PDL on or off: its error, then its time per call."""
                row = {"gemv": name, "batch": batch, "n": n, "k": k, "bytes": nbytes, "pdl": pdl,
                       "config": config if config == "torch" else config.to_dict()}
                try:
                    if config == "torch":
                        x = torch.randn(batch, k, device=device, dtype=dtype)
                        calls = [lambda w=w, x=x: F.linear(x, w) for w in weights]
                        row["rel_err"] = 0.0
                    else:
                        if what != "pdl off":
                            row["rel_err"] = check(config, pdl)
                        calls = [lambda w=w: run(w, config, pdl) for w in weights]
                    row["us"] = 1e3 * check_timed(time_per_call_ms(calls, device, warmup, repeats), nbytes,
                                                  floor_gbps, device=device, working_bytes=nbytes * count)
                    row["gbps"] = achieved_gbps(nbytes, row["us"] / 1e3)
                    row["pct_read"] = 100 * row["gbps"] / read_gbps
                    if "rel_err" in row:
                        row["ok"] = row["rel_err"] <= MAX_REL_ERR
                except Exception as err:  # noqa: BLE001
                    row = failed_row(row, report_error(errors, f"{name} b{batch} {what}", err))
                rows.append(row)
                return row

            done = {c: timed(c, pdl_on, config_text(c.to_dict())) for c in gemv_configs(name, batch, shape, limit)}
            timed("torch", False, "torch")
            good = {c: r for c, r in done.items() if r.get("ok")}
            if good:
                winner = min(good, key=lambda c: good[c]["us"])
                best[(name, batch)] = winner
                good[winner]["best"] = True
                if pdl_on:  # the same config without PDL, to see what PDL buys
                    timed(winner, False, "pdl off")
            weights = None  # dropped before the next GEMV's are made
            free_memory()
    return rows, best


def check_size_rows(rows: list[dict], floor_gbps: float, errors: list, *, device, copies: int) -> None:
    """Mark each size-sweep row failed (in place) where a way of timing it beats its floor
    ("alone" launches one weight, the other ways `copies`)."""
    for i, row in enumerate(rows):
        for way in SIZE_WAYS:
            try:
                check_timed(row[f"{way}_us"] / 1e3, row["bytes"], floor_gbps, device=device,
                            working_bytes=row["bytes"] * (1 if way == "alone" else copies))
            except BelowFloorError as err:
                rows[i] = failed_row(row, report_error(errors, f"size sweep N={row['n']} {way}", err))
                break


def _line(head: str, row: dict, body) -> str:
    """One table line: head, then body(row), or the row's error where it failed."""
    return f"{head} error: {row['error'][:60]}" if "error" in row else f"{head} {body(row)}"


def format_table(result: dict) -> str:
    """The sweep as text: bandwidth, one line per GEMV variant (* = best), the best configs, the steps."""
    bw = result["bandwidth_gbps"]
    lines = [f"{DeviceFacts.from_dict(result['device']).name}: copy {bw['copy']:.0f} GB/s, read {bw['read']:.0f} GB/s "
             f"(floors use {result['floor_gbps']:.0f} GB/s)", "",
             f"{'preset':11} {'gemv':8} {'b':>2} {'config':21} {'pdl':>3} {'us':>8} {'GB/s':>7} {'%read':>6} "
             f"{'rel err':>8}"]
    for r in result["gemv_rows"]:
        head = f"{r.get('preset', ''):11} {r['gemv']:8} {r['batch']:>2} {config_text(r['config']):21}"
        err = f"{r['rel_err']:.1e}" if "rel_err" in r else "-"
        lines.append(_line(head, r, lambda r: f"{'on' if r['pdl'] else 'off':>3} {r['us']:8.2f} {r['gbps']:7.0f} "
                                             f"{r['pct_read']:6.1f} {err:>8}{' *' if r.get('best') else ''}"))
    if result.get("size_rows"):
        lines += ["", f"{'rows N':>7} {'MB':>6} {'programs':>8} {'alone GB/s':>10} {'serial':>7} {'chained':>7}"]
        lines += [_line(f"{r['n']:7d} {r['bytes'] / 1e6:6.1f} {r['programs']:8d}", r,
                        lambda r: f"{r['alone_gbps']:10.0f} {r['serial_gbps']:7.0f} {r['chained_gbps']:7.0f}")
                  for r in result["size_rows"]]
    lines += ["", "best config per GEMV:"]
    lines += [f"  {key}: {config_text(c)}" for key, c in result["best"].items()]
    lines += ["", f"{'preset':12} {'b':>2} {'path':28} {'graph':>5} {'ms':>8} {'floor':>7} {'x floor':>7} "
                  f"{'rel err':>8} {'bit-id':>6}"]
    for r in result["step_rows"]:
        if r.get("kernel") == "attention":
            lines.append(_line(f"{r['preset']:12} {r['batch']:>2} {r['path']:28} {'':>5}", r,
                               lambda r: f"{r['us'] / 1e3:8.4f} ({r['us']:.2f} µs, {r['gbps']:.0f} GB/s of KV)"))
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
    if "cache_bytes" in result:
        lines += ["", f"floor test: every row whose bytes outgrow the {result['cache_bytes'] / 2**20:.0f} MiB "
                      "cache; a row below its floor fails"]
    if result["errors"]:
        lines += ["", f"{len(result['errors'])} variants failed:"] + [f"  {e}" for e in result["errors"]]
    return "\n".join(lines)


def run_sweep(*, tiny: bool = False, batches=None, context: int | None = None, presets=None,
              repeats: int | None = None, limit: int = 12, skip_steps: bool = False,
              skip_variants: bool = False) -> dict:
    """Run the GEMV sweep and the step timings on this machine; returns the results dict (see format_table)."""
    _check_args(batches, context, presets, repeats, limit)
    device = sweep_device()
    why = kernels_unavailable(device)
    if why:
        raise RuntimeError(f"the sweep times the book's Triton kernels, and they cannot run here: {why}; on a "
                           "CPU run `TRITON_INTERPRET=1 python -m floorlab sweep --tiny`")
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
    result = {"what": "Triton GEMV sweep and kernel-step timings", "device": describe_device(device).to_dict(),
              "tiny": tiny, "dtype": str(dtype), "context": context, "batches": list(batches),
              "bandwidth_gbps": {"copy": copy.gbps, "read": read.gbps}, "floor_gbps": max(copy.gbps, read.gbps),
              "pdl": pdl_supported(device), "cache_bytes": cache_bytes(device), "errors": []}
    print(f"bandwidth: copy {copy.gbps:.0f} GB/s, read {read.gbps:.0f} GB/s", flush=True)
    result["gemv_rows"], result["best"], result["step_rows"], result["variant_rows"] = [], {}, [], []
    for shape in step_shapes:  # each preset's GEMVs swept, then its steps timed with the winners
        fit = check_fits(shape, device, max_batch=max(batches), max_context=context)
        if not fit.ok:
            result["errors"].append(fit.message())
            continue
        rows, best = sweep_gemvs(shape, batches, device=device, dtype=dtype, read_gbps=read.gbps,
                                 floor_gbps=result["floor_gbps"],
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
                check_size_rows(result["size_rows"], result["floor_gbps"], result["errors"], device=device,
                                copies=shape.num_layers)
            except Exception as err:  # noqa: BLE001
                report_error(result["errors"], "size sweep", err)
        timed = dict(device=device, dtype=dtype, floor_gbps=result["floor_gbps"], warmup=warmup, repeats=repeats,
                     errors=result["errors"])
        for what, key, skip, rows_of in (
                ("steps", "step_rows", skip_steps, lambda: time_steps(shape, batches, context, best=best, **timed)),
                ("step variants", "variant_rows", skip_steps or skip_variants,
                 lambda: time_step_variants(shape, batches, tiny=tiny, **timed))):
            if skip:
                break
            try:
                result[key] += rows_of()
            except Exception as err:  # noqa: BLE001
                report_error(result["errors"], f"{shape.name} {what}", err)
            free_memory()
            print(f"{shape.name} {what} done after {time.perf_counter() - start:.0f} s", flush=True)
    result["elapsed_s"] = time.perf_counter() - start
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m floorlab sweep",
                                     description="Sweep the book's Triton GEMVs over launch configs, then "
                                                 "time the kernel step.")
    parser.add_argument("--out", help="write the results as JSON to this path")
    parser.add_argument("--tiny", action="store_true", help="a tiny shape (runs on a CPU with TRITON_INTERPRET=1)")
    parser.add_argument("--batches", type=whole_arg("--batches", 1, None, "1 or 8"), nargs="+",
                        help="batch sizes (default 1 8)")
    parser.add_argument("--presets", nargs="+", type=preset_arg,
                        help=f"presets whose GEMVs are swept and steps timed (default {' '.join(STEP_PRESETS)})")
    parser.add_argument("--context", type=whole_arg("--context", 1, None, "512"),
                        help=f"tokens already in the cache (default {CONTEXT})")
    parser.add_argument("--repeats", type=whole_arg("--repeats", 1, None, "20"),
                        help="timed repeats (default 20 on a GPU)")
    parser.add_argument("--configs", type=whole_arg("--configs", 1, None, "12"), default=12,
                        help="at most this many configs per GEMV (default 12)")
    parser.add_argument("--skip-steps", action="store_true", help="only the GEMV sweep")
    parser.add_argument("--skip-variants", action="store_true",
                        help="leave out the step with one launch config changed at a time")
    args = parser.parse_args(argv)
    if args.out and (problem := file_problem(args.out, "--out")):  # before the sweep, not after it
        parser.error(problem)
    if why := kernels_unavailable(sweep_device()):  # e.g. no Triton: say how to install it
        parser.error(why)
    result = run_sweep(tiny=args.tiny, batches=args.batches, context=args.context, presets=args.presets,
                       repeats=args.repeats, limit=args.configs, skip_steps=args.skip_steps or False,
                       skip_variants=args.skip_steps or args.skip_variants)
    print(format_table(result))
    if args.out:
        where, note = save_or_keep(result, args.out)
        print(note or f"wrote {where}", file=sys.stderr if note else sys.stdout)
    print(f"done in {result['elapsed_s']:.0f} s")
    return 1 if result["errors"] else 0  # a variant failed, or beat its floor


if __name__ == "__main__":
    sys.exit(main())
