"""Tools wing: `python -m floorlab twocards`: one card against the same step split over several
ranks (tensor parallelism), measured in processes of its own, written as one Run (kind
"twocards").

The ranks start together (engine.ranks.run_ranks) and take turns: rank 0 alone first runs
the book's single-process engine on all the cores or its one GPU; then each rank's
bandwidth is measured alone and with every rank streaming at once; then every rank runs
its shard: the all-reduce and the all_gather at the step's sizes, timed alone, then the
whole split step, eager and (on CUDA) replayed from a CUDA graph, and its timeline. The
parent turns what they return into Rows against their floors.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch
import torch.distributed as dist

from floorlab.core import paths
from floorlab.core.bandwidth import Bandwidths, measure_bandwidths
from floorlab.core.device import default_device, describe_device, device_slug
from floorlab.core.files import folder_problem
from floorlab.core.memory import check_fits
from floorlab.core.prose import sig
from floorlab.core.roofline import decode_floor
from floorlab.core.runs import Row, Run, measured_row, row_key, run_stamp, save_or_keep
from floorlab.core.shapes import PRESETS, Qwen3Shape, get_shape
from floorlab.core.timelines import Timeline, steady_timeline
from floorlab.core.timing import StepTimes, Timing, time_with_issue
from floorlab.engine.graphs import GraphRunner
from floorlab.engine.model import build_model, prefill_random
from floorlab.engine.ranks import (
    ALL_GATHER,
    ALL_REDUCE,
    BACKENDS,
    IN_GRAPH,
    RankError,
    TooFewDevicesError,
    check_devices,
    control_group,
    rank_device,
    run_ranks,
    time_collective,
    time_collective_in_graph,
    time_in_step,
)
from floorlab.engine.tensor_parallel import (
    SplitError,
    all_reduces_per_step,
    build_shard,
    check_split,
    gather_bytes,
    host_fit,
    message_bytes,
    rank_shape,
    shard_fit,
)
from floorlab.tools.bench.cli import unwritable, whole_arg

KIND = "twocards"
# a CPU measures a small shape: the 0.6B model's widths, 4 of its layers, a 32k vocabulary
SMALL = Qwen3Shape(1024, 3072, 4, 16, 8, 128, 32768, True, name="small")
TINY = Qwen3Shape(64, 128, 2, 4, 2, 16, 256, True, rope_theta=10000.0, name="tiny")  # for tests
SHAPES = {SMALL.name: SMALL, TINY.name: TINY}
GPU_PRESETS = ("qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b")
BATCH, PROMPT_TOKENS, MAX_CONTEXT = 1, 32, 128
WARMUP = {"cuda": 10, "cpu": 1}
REPEATS = {"cuda": 50, "cpu": 5}
COLLECTIVE_REPEATS = {"cuda": 100, "cpu": 20}
BANDWIDTH = {"cuda": {"repeats": 20}, "cpu": {"repeats": 5, "size_mb": 64}}
EAGER, GRAPH = "eager", "graph replay"
NO_GRAPHS = "not measured: no CUDA GPU"
JSON_NAME = "run.json"


def shape_named(name: str) -> Qwen3Shape:
    """The preset of that name, or the command's own "small" or "tiny" shape."""
    return SHAPES[name] if name in SHAPES else get_shape(name)


def split_name(shape, ranks: int) -> str:
    """How rows and floors name one rank's share of the shape: '<preset>/tp<ranks>'."""
    return rank_shape(shape, ranks).name


def _release(device) -> None:
    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


def _times(times: StepTimes | None) -> dict | None:
    return None if times is None else times.to_dict()


def _threads(count: int) -> None:
    torch.set_num_threads(max(1, int(count)))


# ---- what each rank does (runs in the spawned processes) ------------------------------------
def measure_rank(rank: int, ranks: int, settings: dict) -> dict:
    """Everything rank `rank` measures, as a JSON-able dict (see the module's docstring)."""
    dev = rank_device(settings["device"], rank)
    control = control_group()
    warmup, repeats = settings["warmup"], settings["repeats"]
    threads = settings["threads_per_rank"]
    shapes = [shape_named(n) for n in settings["presets"]]
    out = {"rank": rank, "device": describe_device(dev), "presets": {}}
    fits = {s.name: shard_fit(s, ranks, dev, max_batch=BATCH, max_context=MAX_CONTEXT)
            for s in shapes}
    if rank == 0:
        fits.update({f"{s.name} card": check_fits(s, dev, max_batch=BATCH, max_context=MAX_CONTEXT)
                     for s in shapes})
    every = [None] * ranks
    dist.all_gather_object(every, {k: (f.ok, f.message()) for k, f in fits.items()}, group=control)
    skipped = {s.name: [m for r in every for k, (ok, m) in r.items() if not ok and k.startswith(s.name)]
               for s in shapes}
    stage = out["stage_s"] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        stage[name] = time.perf_counter() - clock
        clock = time.perf_counter()

    with torch.no_grad():
        dist.barrier(group=control)
        if rank == 0:  # one card: the engine of every chapter, alone on the machine or its GPU
            _threads(threads * ranks)
            out["bandwidth_card"] = measure_bandwidths(dev, **BANDWIDTH[dev.type]).to_dict()
            for shape in shapes:
                if not skipped[shape.name]:
                    out["presets"][shape.name] = {"card": _measure_card(shape, dev, warmup, repeats)}
                    _release(dev)
        dist.barrier(group=control)
        lap("one card")
        _threads(threads)
        # each GPU's own bandwidth, the others waiting; a CPU's ranks share the card's memory
        out["bandwidth_alone"] = out.get("bandwidth_card")
        for turn in range(1, ranks) if dev.type == "cuda" else ():
            dist.barrier(group=control)
            if turn == rank:
                out["bandwidth_alone"] = measure_bandwidths(dev, **BANDWIDTH[dev.type]).to_dict()
        dist.barrier(group=control)  # then every rank streaming at once
        out["bandwidth_together"] = measure_bandwidths(dev, **BANDWIDTH[dev.type]).to_dict()
        lap("bandwidths")
        for shape in shapes:
            entry = out["presets"].setdefault(shape.name, {})
            if skipped[shape.name]:
                entry["skipped"] = skipped[shape.name]
                continue
            entry["split"] = _measure_split(shape, rank, ranks, dev, control, warmup, repeats,
                                            settings["collective_repeats"], entry.get("card"))
            _release(dev)
            lap(shape.name)
    return out


def _measure_card(shape, dev, warmup: int, repeats: int) -> dict:
    """One card's eager step, and on CUDA its graph replay; both with their timelines."""
    model = build_model(shape, device=dev, max_batch=BATCH, max_context=MAX_CONTEXT)
    prompt, tokens, positions = prefill_random(model, BATCH, PROMPT_TOKENS)
    found = {"logits": model.prefill(prompt)[:, -1].float().cpu().tolist()}

    def step():
        return model.decode_step(tokens, positions)

    eager = time_with_issue(step, warmup=warmup, repeats=repeats, device=dev)
    found[EAGER] = _times(eager)
    found[f"{EAGER} timeline"] = steady_timeline(step, label=f"1 card, {EAGER}", device=dev,
                                                 timed_ms=eager.step.median_ms).to_dict()
    if dev.type == "cuda":
        def alone(fn):
            return time_with_issue(fn, warmup=warmup, repeats=repeats, device=dev)

        found.update(_measure_graph(model, prompt, tokens, positions, dev, alone, "1 card"))
    return found


def _measure_graph(model, prompt, tokens, positions, dev, timer, label: str) -> dict:
    """A graph of the decode step: captured, checked against eager bit for bit, timed, profiled."""
    runner = GraphRunner(model, buckets=(BATCH,))
    runner.capture()
    model.prefill(prompt)  # capture leaves the cache zeroed
    same = runner.check_bit_identical(tokens, positions)
    times = timer(lambda: runner.step(tokens, positions))
    timeline = steady_timeline(runner.replay_fn(BATCH), label=f"{label}, {GRAPH}", device=dev,
                               timed_ms=times.step.median_ms)
    return {GRAPH: _times(times), "bit_identical": same, "max_abs_diff": runner.last_max_abs_diff,
            f"{GRAPH} timeline": timeline.to_dict()}


def _measure_split(shape, rank: int, ranks: int, dev, control, warmup: int, repeats: int,
                   collective_repeats: int, card: dict | None) -> dict:
    """This rank's shard: its collectives alone, its eager step, its replay (CUDA), timelines."""
    shard = build_shard(shape, rank=rank, ranks=ranks, device=dev, max_batch=BATCH,
                        max_context=MAX_CONTEXT)
    prompt, tokens, positions = prefill_random(shard, BATCH, PROMPT_TOKENS)
    logits = shard.prefill(prompt)[:, -1].float().cpu()
    found: dict = {}
    if card is not None:  # rank 0: the split step's logits against one card's, same prompt
        one = torch.tensor(card["logits"])
        found["rel_err_vs_card"] = float((logits - one).abs().max() / one.abs().max())
    dtype = shard.dtype
    timed = {ALL_REDUCE: ("all_reduce", BATCH * shape.hidden_size),
             ALL_GATHER: ("all_gather", BATCH * shape.vocab_size // ranks)}
    for path, (kind, numel) in timed.items():
        found[path] = time_collective(kind, numel, device=dev, dtype=dtype, control=control,
                                      repeats=collective_repeats).to_dict()
        if dev.type == "cuda":
            found[path + IN_GRAPH] = time_collective_in_graph(  # as many as a step's all-reduces
                kind, numel, count=all_reduces_per_step(shape), device=dev, dtype=dtype,
                control=control).to_dict()

    def step():
        return shard.decode_step(tokens, positions)

    eager = time_in_step(step, rank=rank, warmup=warmup, repeats=repeats, device=dev,
                         control=control)
    found[EAGER] = _times(eager)
    dist.barrier(group=control)
    timed_ms = eager.step.median_ms if eager is not None else None
    found[f"{EAGER} timeline"] = steady_timeline(step, label=f"rank {rank}, {EAGER}", device=dev,
                                                 timed_ms=timed_ms).to_dict()
    if dev.type == "cuda":
        def together(fn):
            return time_in_step(fn, rank=rank, warmup=warmup, repeats=repeats, device=dev,
                                control=control)

        found.update(_measure_graph(shard, prompt, tokens, positions, dev, together,
                                    f"rank {rank}"))
    return found


# ---- the parent: check, start the ranks, turn what they return into a Run ----------------------
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
                    check_fits(shape, "cpu", max_batch=BATCH,
                                                        max_context=MAX_CONTEXT)]
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
    run = Run(kind=KIND, stamp=run_stamp(), device=first["device"], bandwidths=card_bw,
              settings=settings)
    run.facts = {"ranks": ranks, "backend": settings["backend"], "elapsed_s": elapsed_s,
                 "devices": [r["device"].get("name") for r in results],
                 "bandwidth_alone": [b.to_dict() for b in alone],
                 "bandwidth_together": [r["bandwidth_together"] for r in results],
                 "stage_s": [r["stage_s"] for r in results],
                 "presets": {}}
    for name in settings["presets"]:
        shape = shape_named(name)
        split = split_name(shape, ranks)
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
            note = " ".join(entries[0]["skipped"])
            run.rows += [Row(p, n, BATCH, status="absent", note=note)
                         for n in (name, split) for p in (EAGER, GRAPH)]
            continue
        _card_rows(run, floors[0], entries[0]["card"])
        _split_rows(run, floors[1], entries, facts)
    for name, notes in settings.get("skipped", {}).items():
        run.rows += [Row(p, name, BATCH, status="absent", note=" ".join(notes))
                     for p in (EAGER, GRAPH)]
    return run


def _card_rows(run: Run, floor, card: dict) -> None:
    name = floor.preset
    run.rows.append(_row(EAGER, floor, card[EAGER]))
    run.timelines[row_key(name, BATCH, EAGER)] = Timeline.from_dict(card[f"{EAGER} timeline"])
    if GRAPH not in card:
        run.rows.append(Row(GRAPH, name, BATCH, status="absent", note=NO_GRAPHS))
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
        run.rows.append(Row(GRAPH, split, BATCH, status="absent", note=NO_GRAPHS))
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
    ranks = run.settings["ranks"]
    def gbps(found) -> str:
        return ", ".join(f"{Bandwidths.from_dict(b).floor_gbps:.1f}" for b in found) + " GB/s"

    lines = [f"{ranks} ranks over {run.settings['backend']} on {run.device.get('name')}, "
             f"torch {run.device.get('torch')}",
             f"bandwidth   one card {run.bandwidths.floor_gbps:.1f} GB/s",
             f"            per rank alone {gbps(run.facts['bandwidth_alone'])}",
             f"            per rank, every rank at once {gbps(run.facts['bandwidth_together'])}"]
    for floor in run.floors:
        lines.append(f"floor       {floor.preset}: {floor.arithmetic()}")
    lines += ["", f"{'shape':<16} {'path':<21} {'ms':>9} {'p10-p90 ms':>17} {'x floor':>8}",
              "-" * 75]
    for r in run.rows:
        if r.measured:
            t = r.timing
            x = f"{r.x_floor:>8.2f}" if r.x_floor is not None else f"{'':>8}"
            lines.append(f"{r.preset:<16} {r.path:<21} {sig(t.median_ms):>9} "
                         f"{f'{sig(t.p10_ms)}-{sig(t.p90_ms)}':>17} {x}")
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
        if unwritable(out):
            parser.error(f"{out}: {unwritable(out)}; pass --out with a folder you can write to")
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
