"""Tools wing: `python -m floorlab measure`: one card in a minute or two, for workshops: bandwidths, the
0.6B's floor, eager decode and, as the card's plan allows, its replays, as one Run (kind "measure")."""
from __future__ import annotations

import time
import uuid
from pathlib import Path

import torch

from floorlab.core.bandwidth import measure_bandwidths
from floorlab.core.device import DeviceFacts, describe_device, device_slug, resolve_device
from floorlab.core.files import load_json, save_json
from floorlab.core.host import read_host
from floorlab.core.launches import count_launches
from floorlab.core.numbers import whole_number
from floorlab.core.plan import card_plan
from floorlab.core.progress import Stages
from floorlab.core.prose import fmt_ms
from floorlab.core.roofline import decode_floor
from floorlab.core.runs import CARD_KIND, Row, Run, run_stamp
from floorlab.core.shapes import get_shape
from floorlab.engine.fused import fused_step
from floorlab.engine.kernels import triton_step
from floorlab.engine.measure import graph_replay, measure_path, profile_path
from floorlab.engine.model import build_model, prefill_random
from floorlab.figures import stacked_bar, timeline
from floorlab.tools.bench.engine import NO_CPU_COMPILE
from floorlab.tools.bench.rows import error_text
from floorlab.tools.bench.run import BANDWIDTH_REPEATS

PRESET, BATCH, PROMPT_TOKENS, MAX_CONTEXT = "qwen3-0.6b", 1, 32, 128
REFERENCE = "h200-below-the-floor"  # graph_replay's stored run: unused, as a CPU skips replay
WARMUP, REPEATS = {"cuda": 10, "cpu": 1}, {"cuda": 50, "cpu": 5}  # untimed and timed steps per path
FUSED_PATHS = ("fused replay", "triton replay")
STAGES = ("bandwidth", "model", "eager decode", "launches", "eager timeline", "graph replay",
          *FUSED_PATHS)
JSON_NAME, BAR_NAME, TIMELINE_NAME = "run.json", "stacked-bar.png", "timeline.png"


def _not_run(floor, path: str, note: str, status: str = "absent") -> Row:
    return Row(path=path, preset=floor.preset, batch=floor.batch, status=status, note=note)


def measure_card(device=None, *, warmup: int | None = None, repeats: int | None = None,
                 fused: bool = False, progress: bool = True) -> Run:
    """Measure this machine (kind "measure"); defaults: 10 + 50 steps on a GPU, 1 + 5 on a CPU."""
    dev = resolve_device(device)
    plan = card_plan(dev)
    warmup = whole_number(WARMUP[dev.type] if warmup is None else warmup, "warmup", at_least=0,
                          hint="pass e.g. warmup=1")
    repeats = whole_number(REPEATS[dev.type] if repeats is None else repeats, "repeats", hint="pass e.g. repeats=5")
    stage = Stages(len(STAGES), progress, label="measure")
    start = time.perf_counter()
    run = Run(kind=CARD_KIND, stamp=run_stamp(), device=describe_device(dev), host=read_host(dev),
              settings={"preset": get_shape(PRESET).name, "batch": BATCH,
                        "prompt_tokens": PROMPT_TOKENS, "max_context": MAX_CONTEXT,
                        "warmup": warmup, "repeats": repeats, "fused": fused},
              facts={"stage_s": stage.seconds, "plan": plan.to_dict()})
    try:
        with torch.no_grad():
            _measure(run, dev, plan, warmup, repeats, fused, stage)
    finally:
        stage.close()
        run.facts["elapsed_s"] = time.perf_counter() - start
    best = run.best_row()
    run.facts["best"] = best.path if best else None
    return run


def _measure(run: Run, dev, plan, warmup: int, repeats: int, fused: bool, stage) -> None:
    stage("bandwidth")
    run.bandwidths = measure_bandwidths(dev, repeats=BANDWIDTH_REPEATS[dev.type])
    shape = get_shape(PRESET)
    floor = decode_floor(shape, batch=BATCH, prompt_tokens=PROMPT_TOKENS,
                         bandwidths=run.bandwidths, cache_tokens=MAX_CONTEXT)
    run.floors = [floor]
    stage("model")
    model = build_model(shape, device=dev, dtype=plan.dtype, max_batch=BATCH, max_context=MAX_CONTEXT)
    prompt, tokens, positions = prefill_random(model, BATCH, PROMPT_TOKENS)

    def step():
        return model.decode_step(tokens, positions)

    stage("eager decode")
    eager = measure_path("eager", step, floor, warmup=warmup, repeats=repeats, device=dev)
    run.rows.append(eager)
    stage("launches")
    counted = count_launches(step, num_layers=model.shape.num_layers, device=dev)
    eager.kernels, eager.kernels_per_layer = counted.kernels, counted.per_layer
    run.launches["eager"] = counted
    stage("eager timeline")
    run.timelines["eager"] = profile_path(eager, step, device=dev)
    makers = {"graph replay": None, "fused replay": fused_step,
              "triton replay": lambda m: triton_step(m, pdl=plan.pdl)}
    for path, make in makers.items():
        why = ("not asked for (--fused)" if make is not None and not fused else
               plan.graphs_note if make is None and not plan.graphs else
               NO_CPU_COMPILE if not plan.graphs else
               plan.triton_note if path == "triton replay" and plan.triton != "compiled" else "")
        if why:
            run.rows.append(_not_run(floor, path, why))
            continue
        stage(path)
        try:
            replay = graph_replay(model, tokens, positions, floor=floor, eager=eager,
                                  warmup=warmup, repeats=repeats, reference=REFERENCE,
                                  buckets=(BATCH,), restore=lambda: model.prefill(prompt),
                                  step_fn=make(model) if make else None, path=path)
        except Exception as err:  # a step that does not compile here must not cost the rest
            run.rows.append(_not_run(floor, path, f"failed: {error_text(err)}", status="failed"))
            continue
        run.rows.append(replay.graph)
        run.timelines[path] = replay.timeline


def timing_cells(r: Row, num=lambda ms: f"{ms:.3f}") -> str:
    """A row's median ms, p10-p90 ms and x floor in 9, 17 and 8 columns; dashes where it was not measured."""
    if not r.measured:
        return f"{'-':>9} {'-':>17} {'-':>8}"
    t, x = r.timing, "" if r.x_floor is None else f"{r.x_floor:.2f}"
    return f"{num(t.median_ms):>9} {f'{num(t.p10_ms)}-{num(t.p90_ms)}':>17} {x:>8}"


def format_card(run: Run) -> str:
    """The run as a short table: bandwidths, the floor, then each path's ms, p10-p90 and x floor."""
    floor = run.floor()
    bw, dev = run.bandwidths, run.device
    lines = [f"{dev.name} ({dev.kind}), torch {dev.torch}",
             f"bandwidth   copy {bw.copy.gbps:.1f} GB/s, read {bw.read.gbps:.1f} GB/s",
             f"floor       {floor.preset} b{floor.batch}: {floor.arithmetic()}"]
    if "eager" in run.launches:
        lines.append(f"launches    {run.launches['eager']}")
    lines += ["", f"{'path':<14} {'ms':>9} {'p10-p90 ms':>17} {'x floor':>8}  note", "-" * 60]
    for r in run.rows:
        note = r.note if r.status != "absent" else f"absent: {r.note}"
        lines.append(f"{r.path:<14} {timing_cells(r)}  {note}".rstrip())
    best = run.best_row()
    if best is not None:
        lines.append(f"\nbest path   {best.path}, {fmt_ms(best.median_ms)} = "
                     f"{best.x_floor:.2f}x the floor")
    if run.facts.get("elapsed_s") is not None:
        lines.append(f"measured in {run.facts['elapsed_s']:.0f} s")
    return "\n".join(lines)


def write_card(run: Run, folder) -> dict[str, Path]:
    """Write the run's JSON and its two figures into folder; returns {"json", "bar", "timeline"}."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"{folder} is a file; pass a folder to write the run into")
    floor = run.floor()
    note = f"measured on {run.label}"
    bars = {r.path: r.timing for r in run.rows if r.measured}
    out = {"json": run.save(folder / JSON_NAME), "bar": folder / BAR_NAME,
           "timeline": folder / TIMELINE_NAME}
    stacked_bar(bars, floor.floor_ms, path=out["bar"], note=note,
                title=f"One decode token, {floor.preset}, batch {floor.batch}")
    timeline(list(run.timelines.values()), path=out["timeline"], note=note,
             title=f"One decode token as the profiler saw it, {floor.preset}")
    return out


def submit_name(run: Run, name: str | None = None) -> str:
    """A unique, file-safe name for a submitted run: <device>-[<name>-]<UTC time>-<random>.json."""
    stamp = "".join(ch for ch in str(run.stamp.date or "")[:19] if ch.isalnum()).lower()
    who = device_slug(DeviceFacts(kind="person", name=name)) if name else ""
    parts = [device_slug(run.device), who, stamp or "undated", uuid.uuid4().hex[:6]]
    return "-".join(p for p in parts if p) + ".json"


def submit_run(json_path, folder, name: str | None = None) -> Path:
    """Copy a run's JSON into a shared folder under submit_name(), atomically; returns the new path."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"--submit {folder} is a file; pass the shared folder instead")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / submit_name(Run.load(json_path), name)
    return save_json(load_json(json_path), target)
