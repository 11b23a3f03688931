"""Tools wing: `python -m floorlab twocards`: one card against the step split over ranks (tensor parallelism);
the ranks measure in their own processes (twocards_rank), and this turns their results into one Run."""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

from floorlab.core import paths
from floorlab.core.bandwidth import Bandwidths
from floorlab.core.device import DeviceFacts, default_device, describe_device, device_slug
from floorlab.core.files import folder_problem, save_or_keep, unwritable_folder
from floorlab.core.memory import check_fits
from floorlab.core.prose import sig
from floorlab.core.roofline import decode_floor
from floorlab.core.runs import Row, Run, measured_row, row_key, run_stamp
from floorlab.core.shapes import PRESETS
from floorlab.core.timelines import Timeline
from floorlab.core.timing import Timing
from floorlab.engine.ranks import (
    ALL_GATHER,
    ALL_REDUCE,
    BACKENDS,
    IN_GRAPH,
    RankError,
    TooFewDevicesError,
    check_devices,
    run_ranks,
)
from floorlab.engine.tensor_parallel import (
    SplitError,
    all_reduces_per_step,
    check_split,
    gather_bytes,
    host_fit,
    message_bytes,
    rank_shape,
)
from floorlab.tools.card import REPEATS, WARMUP, timing_cells
from floorlab.tools.cli import whole_arg
from floorlab.tools.twocards_rank import (
    BATCH,
    EAGER,
    GRAPH,
    MAX_CONTEXT,
    PROMPT_TOKENS,
    SHAPES,
    SMALL,
    measure_rank,
    shape_named,
)

KIND = "twocards"
GPU_PRESETS = ("qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b")
COLLECTIVE_REPEATS = {"cuda": 100, "cpu": 20}
NO_GRAPHS = "not measured: ranks on the CPU"  # graphs need a CUDA GPU for each rank
JSON_NAME = "run.json"


class DoesNotFitError(ValueError):
    """No shape asked for fits the memory of this machine's devices."""


def plan(device: str | None = None, *, ranks: int = 2, presets=None, warmup: int | None = None,
         repeats: int | None = None) -> dict:
    """The run's settings, once the ranks fit the machine's devices and each shape splits."""
    device = device or default_device().type
    check_devices(ranks, device)
    names = list(presets or (GPU_PRESETS if device == "cuda" else (SMALL.name,)))
    shapes = [check_split(shape_named(n), ranks) for n in names]
    skipped = {}
    if device == "cpu":  # the ranks share the host's memory: all shards at once, or one card
        for shape in shapes:
            fits = [host_fit(shape, ranks, max_batch=BATCH, max_context=MAX_CONTEXT),
                    check_fits(shape, "cpu", max_batch=BATCH, max_context=MAX_CONTEXT)]
            if not all(f.ok for f in fits):
                skipped[shape.name] = [f.message() for f in fits if not f.ok]
        if len(skipped) == len(shapes):
            raise DoesNotFitError(" ".join(m for ms in skipped.values() for m in ms))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"device": device, "ranks": int(ranks), "backend": BACKENDS[device],
            "presets": [s.name for s in shapes if s.name not in skipped],
            "skipped": skipped, "batch": BATCH, "prompt_tokens": PROMPT_TOKENS,
            "max_context": MAX_CONTEXT, "dtype": "bfloat16",
            "warmup": WARMUP[device] if warmup is None else int(warmup),
            "repeats": REPEATS[device] if repeats is None else int(repeats),
            "collective_repeats": COLLECTIVE_REPEATS[device],
            "threads_per_rank": max(1, (cores or 1) // ranks)}


def measure_planned(settings: dict) -> Run:
    """Start the ranks a plan() asks for, measure, and return the Run (kind "twocards")."""
    start = time.perf_counter()
    results = run_ranks(measure_rank, settings["ranks"], device=settings["device"],
                        args=(settings,))
    return assemble(results, settings, elapsed_s=time.perf_counter() - start)


def _absent(names, note: str, paths=(EAGER, GRAPH)) -> list[Row]:
    return [Row(p, n, BATCH, status="absent", note=note) for n in names for p in paths]


def _row(path: str, floor, times: dict, **fields) -> Row:
    return measured_row(path, floor, Timing.from_dict(times["step"]),
                        issue=Timing.from_dict(times["issue"]), **fields)


def assemble(results: list[dict], settings: dict, *, elapsed_s: float | None = None) -> Run:
    """The Run the ranks' results make: floors for one card and per rank, Rows, timelines."""
    ranks, first = settings["ranks"], results[0]
    card_bw = Bandwidths.from_dict(first["bandwidth_card"])
    # a CPU's ranks share one memory: alone, each has what the card has
    alone = [Bandwidths.from_dict(r["bandwidth_alone"] or first["bandwidth_alone"])
             for r in results]
    run = Run(kind=KIND, stamp=run_stamp(), device=DeviceFacts.from_dict(first["device"]), bandwidths=card_bw,
              settings=settings)
    run.facts = {"ranks": ranks, "backend": settings["backend"], "elapsed_s": elapsed_s,
                 "devices": [DeviceFacts.from_dict(r["device"]).name for r in results],
                 "bandwidth_alone": [b.to_dict() for b in alone],
                 "bandwidth_together": [r["bandwidth_together"] for r in results],
                 "stage_s": [r["stage_s"] for r in results],
                 "presets": {}}
    for name in settings["presets"]:
        shape = shape_named(name)
        split = rank_shape(shape, ranks).name  # '<preset>/tp<ranks>'
        floors = [decode_floor(s, batch=BATCH, prompt_tokens=PROMPT_TOKENS, bandwidths=bw,
                               cache_tokens=MAX_CONTEXT)
                  for s, bw in ((shape, card_bw), (rank_shape(shape, ranks), alone[0]))]
        run.floors += floors
        entries = [r["presets"][name] for r in results]
        facts = run.facts["presets"][name] = {
            "split": split, "shape": asdict(shape), "params": shape.param_count(),
            "layers": shape.num_layers,
            "all_reduces_per_step": all_reduces_per_step(shape),
            "message_bytes": message_bytes(shape, BATCH),
            "gather_bytes": gather_bytes(shape, BATCH, ranks)}
        if "skipped" in entries[0]:
            run.rows += _absent((name, split), " ".join(entries[0]["skipped"]))
            continue
        _card_rows(run, floors[0], entries[0]["card"])
        _split_rows(run, floors[1], entries, facts)
    for name, notes in settings.get("skipped", {}).items():
        run.rows += _absent((name,), " ".join(notes))
    return run


def _card_rows(run: Run, floor, card: dict) -> None:
    name = floor.preset
    run.rows.append(_row(EAGER, floor, card[EAGER]))
    run.timelines[row_key(name, BATCH, EAGER)] = Timeline.from_dict(card[f"{EAGER} timeline"])
    if GRAPH not in card:
        run.rows += _absent((name,), NO_GRAPHS, (GRAPH,))
        return
    run.rows.append(_row(GRAPH, floor, card[GRAPH], bit_identical=card["bit_identical"],
                         max_abs_diff=card["max_abs_diff"]))
    run.timelines[row_key(name, BATCH, GRAPH)] = Timeline.from_dict(card[f"{GRAPH} timeline"])


def _split_rows(run: Run, floor, entries: list[dict], facts: dict) -> None:
    split, lead = floor.preset, entries[0]["split"]
    run.rows.append(_row(EAGER, floor, lead[EAGER]))
    if GRAPH in lead:
        same = all(e["split"]["bit_identical"] for e in entries)
        run.rows.append(_row(GRAPH, floor, lead[GRAPH], bit_identical=same,
                             max_abs_diff=max(e["split"]["max_abs_diff"] for e in entries)))
    else:
        run.rows += _absent((split,), NO_GRAPHS, (GRAPH,))
    for path in (ALL_REDUCE, ALL_GATHER, ALL_REDUCE + IN_GRAPH, ALL_GATHER + IN_GRAPH):
        if path in lead:
            size = facts["gather_bytes" if path.startswith(ALL_GATHER) else "message_bytes"]
            run.rows.append(Row(path, split, BATCH, timing=Timing.from_dict(lead[path]),
                                note=f"{size} bytes per rank, timed alone"))
            facts[f"{path} per rank"] = [e["split"][path] for e in entries]
    for rank, entry in enumerate(entries):
        for path in (EAGER, GRAPH):
            if f"{path} timeline" in entry["split"]:
                run.timelines[f"{row_key(split, BATCH, path)} rank {rank}"] = Timeline.from_dict(
                    entry["split"][f"{path} timeline"])
    facts["rel_err_vs_card"] = lead.get("rel_err_vs_card")


def format_twocards(run: Run) -> str:
    """The run as a short table: bandwidths, then per shape the floors and each path's ms."""
    ranks = run.settings.ranks
    def gbps(found) -> str:
        return ", ".join(f"{Bandwidths.from_dict(b).floor_gbps:.1f}" for b in found) + " GB/s"

    lines = [f"{ranks} ranks over {run.settings.backend} on {run.device.name}, "
             f"torch {run.device.torch}",
             f"bandwidth   one card {run.bandwidths.floor_gbps:.1f} GB/s",
             f"            per rank alone {gbps(run.facts['bandwidth_alone'])}"
             + ("" if run.on_gpu else " (one process's figure: a CPU's ranks are not timed one at a time)"),
             f"            per rank, every rank at once {gbps(run.facts['bandwidth_together'])}"]
    for floor in run.floors:
        lines.append(f"floor       {floor.preset}: {floor.arithmetic()}")
    lines += ["", f"{'shape':<16} {'path':<21} {'ms':>9} {'p10-p90 ms':>17} {'x floor':>8}",
              "-" * 75]
    for r in run.rows:
        if r.measured:
            lines.append(f"{r.preset:<16} {r.path:<21} {timing_cells(r, sig)}")
        else:
            lines.append(f"{r.preset:<16} {r.path:<21} {'-':>9}  {r.note[:34]}")
    if run.facts.get("elapsed_s") is not None:
        lines.append(f"\nmeasured in {run.facts['elapsed_s']:.0f} s")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The parser of `python -m floorlab twocards`."""
    parser = argparse.ArgumentParser(
        prog="python -m floorlab twocards",
        description="One card against the same decode step split over several ranks "
                    "(tensor parallelism over torch.distributed: NCCL on GPUs, gloo on the CPU).")
    parser.add_argument("--ranks", type=whole_arg("--ranks", 1, 8, "2"), default=2,
                        help="processes, one per GPU on CUDA (default 2)")
    parser.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda when visible")
    parser.add_argument("--presets", nargs="+", metavar="NAME",
                        choices=sorted(PRESETS) + sorted(SHAPES),
                        help=f"shapes to measure (default {' '.join(GPU_PRESETS)} on CUDA, "
                             f"{SMALL.name} on a CPU)")
    parser.add_argument("--warmup", type=whole_arg("--warmup", 0, None, "1"),
                        help="untimed steps first (default 10 on a GPU, 1 on a CPU)")
    parser.add_argument("--repeats", type=whole_arg("--repeats", 1, None, "5"),
                        help="timed steps per path (default 50 on a GPU, 5 on a CPU)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="folder for run.json (default results/twocards-<device>/)")
    return parser


def main(argv=None) -> int:
    """Run the command; returns its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    out = args.out
    if out is not None and (problem := folder_problem(out, "--out")):
        parser.error(problem)
    try:
        settings = plan(args.device, ranks=args.ranks, presets=args.presets,
                        warmup=args.warmup, repeats=args.repeats)
    except (TooFewDevicesError, SplitError, DoesNotFitError, ValueError) as err:
        parser.error(str(err))
    if out is None:
        out = Path(paths.RESULTS_DIR) / f"twocards-{device_slug(describe_device(settings['device']))}"
        if problem := unwritable_folder(out):
            parser.error(f"{out}: {problem}; pass --out with a folder you can write to")
    print(f"starting {settings['ranks']} ranks ({settings['backend']}) for "
          f"{', '.join(settings['presets'])}; the run is written to {out} when it ends", flush=True)
    try:
        run = measure_planned(settings)
    except RankError as err:
        print(f"a rank stopped, so nothing was written: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\nstopped before the end: nothing was written, {out} is as it was", file=sys.stderr)
        return 130
    print(format_twocards(run), flush=True)  # on the screen before any write
    written, note = save_or_keep(run, Path(out) / JSON_NAME)
    print(f"\n{note}" if note else f"\nrun written to {written}", file=sys.stderr if note else sys.stdout)
    return 1 if note else 0
