"""Tools wing: what each rank of `python -m floorlab twocards` measures in its own process: one card's step
(rank 0), bandwidths alone and together, then its shard; each returns a JSON-able dict."""
from __future__ import annotations

import time

import torch
import torch.distributed as dist

from floorlab.core.bandwidth import measure_bandwidths
from floorlab.core.device import describe_device
from floorlab.core.memory import check_fits
from floorlab.core.shapes import Qwen3Shape, get_shape
from floorlab.core.timelines import steady_timeline
from floorlab.core.timing import StepTimes, time_with_issue
from floorlab.engine.graphs import GraphRunner
from floorlab.engine.kernels.timing import free_memory
from floorlab.engine.model import build_model, prefill_random
from floorlab.engine.ranks import (
    ALL_GATHER,
    ALL_REDUCE,
    IN_GRAPH,
    control_group,
    rank_device,
    time_collective,
    time_collective_in_graph,
    time_in_step,
)
from floorlab.engine.tensor_parallel import all_reduces_per_step, build_shard, shard_fit

# a CPU measures a small shape: the 0.6B model's widths, 4 of its layers, a 32k vocabulary
SMALL = Qwen3Shape(1024, 3072, 4, 16, 8, 128, 32768, True, name="small")
TINY = Qwen3Shape(64, 128, 2, 4, 2, 16, 256, True, rope_theta=10000.0, name="tiny")  # for tests
SHAPES = {SMALL.name: SMALL, TINY.name: TINY}
BATCH, PROMPT_TOKENS, MAX_CONTEXT = 1, 32, 128
BANDWIDTH = {"cuda": {"repeats": 20}, "cpu": {"repeats": 5, "size_mb": 64}}
EAGER, GRAPH = "eager", "graph replay"


def shape_named(name: str) -> Qwen3Shape:
    """The preset of that name, or the command's own "small" or "tiny" shape."""
    return SHAPES[name] if name in SHAPES else get_shape(name)


def _times(times: StepTimes | None) -> dict | None:
    return None if times is None else times.to_dict()

def measure_rank(rank: int, ranks: int, settings: dict) -> dict:
    """Everything rank `rank` measures, as a JSON-able dict (see the module's docstring)."""
    dev = rank_device(settings["device"], rank)
    control = control_group()
    warmup, repeats = settings["warmup"], settings["repeats"]
    threads = settings["threads_per_rank"]
    shapes = [shape_named(n) for n in settings["presets"]]
    out = {"rank": rank, "device": describe_device(dev).to_dict(), "presets": {}}
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
            torch.set_num_threads(max(1, threads * ranks))
            out["bandwidth_card"] = measure_bandwidths(dev, **BANDWIDTH[dev.type]).to_dict()
            for shape in shapes:
                if not skipped[shape.name]:
                    out["presets"][shape.name] = {"card": _measure_card(shape, dev, warmup, repeats)}
                    free_memory()
        dist.barrier(group=control)
        lap("one card")
        torch.set_num_threads(max(1, threads))
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
            free_memory()
            lap(shape.name)
    return out


def _measure_card(shape, dev, warmup: int, repeats: int) -> dict:
    """One card's logits and its steps (_measure_steps), timed alone."""
    model = build_model(shape, device=dev, max_batch=BATCH, max_context=MAX_CONTEXT)
    prompt, tokens, positions = prefill_random(model, BATCH, PROMPT_TOKENS)
    found = {"logits": model.prefill(prompt)[:, -1].float().cpu().tolist()}
    return found | _measure_steps(model, prompt, tokens, positions, dev, "1 card",
                                  lambda fn: time_with_issue(fn, warmup=warmup, repeats=repeats, device=dev))


def _measure_steps(model, prompt, tokens, positions, dev, label: str, timer, after=lambda: None) -> dict:
    """The eager step and, on CUDA, its graph replay (checked against eager bit for bit), each timed by timer
    and profiled; after() runs once eager is timed."""
    def step():
        return model.decode_step(tokens, positions)

    eager = timer(step)
    after()
    timed_ms = eager.step.median_ms if eager is not None else None  # a CPU's other ranks time nothing
    found = {EAGER: _times(eager), f"{EAGER} timeline": steady_timeline(
        step, label=f"{label}, {EAGER}", device=dev, timed_ms=timed_ms).to_dict()}
    if dev.type != "cuda":
        return found
    runner = GraphRunner(model, buckets=(BATCH,))
    runner.capture()
    model.prefill(prompt)  # capture leaves the cache zeroed
    same = runner.check_bit_identical(tokens, positions)
    times = timer(lambda: runner.step(tokens, positions))
    timeline = steady_timeline(runner.replay_fn(BATCH), label=f"{label}, {GRAPH}", device=dev,
                               timed_ms=times.step.median_ms)
    return found | {GRAPH: _times(times), "bit_identical": same, "max_abs_diff": runner.last_max_abs_diff,
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

    def together(fn):
        return time_in_step(fn, rank=rank, warmup=warmup, repeats=repeats, device=dev, control=control)

    return found | _measure_steps(shard, prompt, tokens, positions, dev, f"rank {rank}", together,
                                  after=lambda: dist.barrier(group=control))
