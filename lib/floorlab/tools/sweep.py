"""Tools wing: the kernel sweep, sweep the book's Triton GEMVs over launch configs, then time the
kernel step: `python -m floorlab sweep`.

For each preset's layer shapes (qwen3-0.6b and qwen3-8b) at batch 1 and 8 it times each GEMV
(with the epilogue the step really runs) over a few configs, inside a CUDA graph of one launch
per layer on distinct weights, so no weight sits in L2. Then it times triton_step with the
winners (and variants: PDL released after the wait, attention splits) and model.decode_step,
all graph-replayed, against the floor, and checks replay against eager bit for bit. It also
times the bare GEMV against its size: alone, back to back, and chained with PDL. Last, the
whole step at the bench's context against itself with one launch config changed at a time:
the evidence behind floorlab.engine.kernels.default_config.
Every variant runs in its own try/except: one failure prints and the sweep goes on. Every timed
row whose bytes outgrow the device's last-level cache meets the book's floor test
(roofline.is_below_floor): one faster than its bytes allow is marked failed, not reported, and any
failed variant makes the command exit with status 1.
`--tiny` runs the same code on a tiny shape (on a CPU in Triton's interpreter).

The timing machinery it shares with the kernels chapter lives in engine.kernels.timing.

The configurations it tries and the step timings are in tools.sweep_steps.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import torch

from floorlab.core.bandwidth import measure_bandwidth
from floorlab.core.device import describe_device
from floorlab.core.files import file_problem, save_or_keep
from floorlab.core.memory import check_fits
from floorlab.core.numbers import whole_number
from floorlab.core.shapes import PRESETS, get_shape
from floorlab.engine.kernels import TINY, kernels_unavailable, pdl_supported
from floorlab.engine.kernels.timing import SIZES, cache_bytes, free_memory, sweep_sizes
from floorlab.tools.bench.cli import whole_arg
from floorlab.tools.sweep_steps import (
    check_size_rows,
    config_text,
    report_error,
    sweep_gemvs,
    time_step_variants,
    time_steps,
)

STEP_PRESETS, BATCHES, CONTEXT = ("qwen3-0.6b", "qwen3-8b"), (1, 8), 512


def sweep_device():
    """The device the sweep runs on: the current CUDA GPU, else the CPU (Triton's interpreter)."""
    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")


def preset_arg(text: str) -> str:
    """An argparse type: a preset the book knows (core.shapes.PRESETS), or an error listing them."""
    if text not in PRESETS:
        raise argparse.ArgumentTypeError(f"unknown preset {text!r}; use one of: {', '.join(sorted(PRESETS))}")
    return text


def exit_status(result: dict) -> int:
    """0 when every variant ran and passed the floor test, else 1."""
    return 1 if result["errors"] else 0


def _whole(value, name: str):
    """value as a whole number >= 1, None left as None (the default)."""
    return None if value is None else whole_number(value, name)


def _check_args(batches, context, presets, repeats, limit) -> None:
    """ValueError for a run_sweep argument no sweep can use (the command line checks its flags alike)."""
    if batches is not None:
        if isinstance(batches, (str, bytes)) or not isinstance(batches, Sequence) or not batches:
            raise ValueError(f"batches must be a list of whole numbers >= 1, e.g. [1, 8], got {batches!r}")
        for batch in batches:
            whole_number(batch, "each of batches")
    for value, name in ((context, "context"), (repeats, "repeats"), (limit, "limit")):
        _whole(value, name)
    for preset in presets or ():
        get_shape(preset)


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
    result = {"what": "Triton GEMV sweep and kernel-step timings", "device": describe_device(device),
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
        if skip_steps:
            continue
        try:
            result["step_rows"] += time_steps(shape, batches, context, device=device, dtype=dtype,
                                              floor_gbps=result["floor_gbps"], best=best, warmup=warmup,
                                              repeats=repeats, errors=result["errors"])
        except Exception as err:  # noqa: BLE001
            report_error(result["errors"], f"{shape.name} steps", err)
        free_memory()
        print(f"{shape.name} steps done after {time.perf_counter() - start:.0f} s", flush=True)
        if skip_variants:
            continue
        try:
            result["variant_rows"] += time_step_variants(
                shape, batches, device=device, dtype=dtype, floor_gbps=result["floor_gbps"], warmup=warmup,
                repeats=repeats, errors=result["errors"], tiny=tiny)
        except Exception as err:  # noqa: BLE001
            report_error(result["errors"], f"{shape.name} step variants", err)
        print(f"{shape.name} step variants done after {time.perf_counter() - start:.0f} s", flush=True)
    result["elapsed_s"] = time.perf_counter() - start
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m floorlab sweep", description=__doc__.splitlines()[0])
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
    return exit_status(result)


if __name__ == "__main__":
    sys.exit(main())
