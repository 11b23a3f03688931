"""Tools wing: the whole bench in one process, as one Run (kind "bench"); kept after each preset at
partial_path(save_to) and resumable there, only the finished run replaces save_to."""
from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

import torch

from floorlab.core.bandwidth import measure_bandwidths
from floorlab.core.device import DeviceFacts, describe_device
from floorlab.core.files import save_or_keep
from floorlab.core.host import read_host
from floorlab.core.progress import Stages
from floorlab.core.roofline import decode_floor
from floorlab.core.runs import Run, run_stamp
from floorlab.engine.hf import HFDecoder
from floorlab.engine.kernels.timing import free_memory

from . import parity
from .engine import FUSED, TUNED, measure_engine
from .limits import measure_limits, triton_kernel_table
from .rows import Case, Rows, decode_logits, error_text
from .settings import DEFAULT_CONTEXT, HF_PATHS, PATHS, Settings, make_settings
from .targets import evaluate_targets
from .transformers_paths import measure_transformers

STAGES_PER_PRESET = 8  # model, plain graphs, fused and tuned compiles, limits, bf16 logits, transformers, float32
BANDWIDTH_REPEATS = {"cuda": 20, "cpu": 5}
UNREADABLE = (ValueError, KeyError, TypeError, AttributeError, OSError)  # what a file that holds no run raises
RESUME_BANDWIDTH_TOLERANCE = 0.03  # a resumed run keeps its floors only where the card measures the same


def partial_path(path) -> Path:
    """Where a bench run bound for path is kept until it ends: <stem>.partial.json beside it."""
    path = Path(path)
    return path.with_name(f"{path.stem}.partial{path.suffix or '.json'}")


def finished_presets(run: Run) -> list[str]:
    """The presets a bench run measured to the end: every batch of its settings, every path."""
    batches = run.settings.batches
    whole = len(batches) * len(PATHS) if isinstance(batches, list) and batches else None
    counts = Counter(row.preset for row in run.rows)
    return [name for name, count in counts.items() if whole is not None and count == whole]


def kept_partial(path) -> list[str] | None:
    """The finished presets of the partial run at path; None when no readable partial is there."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        return finished_presets(Run.load(path))
    except UNREADABLE:
        return None


def run_bench(presets=None, batches=None, context: int = DEFAULT_CONTEXT, *, progress: bool = True, save_to=None,
              resume_from: Run | None = None, **settings) -> Run:
    """The Run of every path for every preset (a name or a Qwen3Shape) and batch, saved to save_to when it
    ends; settings as make_settings takes them; resume_from: a partial bench Run of the same settings and card,
    whose finished presets are kept."""
    settings = make_settings(presets, batches, context, **settings)
    device_facts = describe_device(settings.device)
    done = _resumable(resume_from, settings, device_facts) if resume_from is not None else []
    stage = Stages(1 + (len(settings.shapes) - len(done)) * (STAGES_PER_PRESET + len(PATHS) * len(settings.batches)),
                   progress)
    run = Run(kind="bench", stamp=run_stamp(), device=device_facts, host=read_host(settings.device),
              settings=settings.to_dict(),
              facts={"partial": True, "parity": {}, "limits": {}, "targets": [],
                     "stage_s": stage.seconds})
    rows, start = Rows(), time.perf_counter()
    names = [s.name for s in settings.shapes]
    earlier_s = resume_from.facts.get("elapsed_s", 0.0) if done else 0.0

    def checkpoint() -> None:
        run.rows = sorted(rows.rows, key=lambda r: (names.index(r.preset), r.batch,
                                                    PATHS.index(r.path)))
        run.floors.sort(key=lambda f: (names.index(f.preset), f.batch))
        run.launches = dict(rows.launches)
        run.facts["targets"] = evaluate_targets(run.rows, run.facts["limits"])
        run.facts["elapsed_s"] = earlier_s + time.perf_counter() - start
        if save_to is None:
            return
        if run.facts["partial"]:
            before = kept_partial(partial_path(save_to))  # never replaced by a run that holds less
            if before is not None and len(finished_presets(run)) < len(before):
                return
            _, note = save_or_keep(run, partial_path(save_to))
        else:  # the run is whole: only now does it replace the file at save_to
            where, note = save_or_keep(run, save_to)
            if where == Path(save_to):
                partial_path(save_to).unlink(missing_ok=True)
        if note:
            print(note, file=sys.stderr, flush=True)

    try:  # nothing is saved until this passes: a refused resume leaves its file as it was
        stage("bandwidth: copy and read")
        run.bandwidths = measure_bandwidths(settings.device,
                                            repeats=BANDWIDTH_REPEATS[settings.device.type])
        if done:
            _keep_finished(resume_from, done, run, rows, stage)
    except BaseException:
        stage.close()
        raise
    try:
        for shape in settings.shapes:
            if shape.name in done:
                continue
            cases = {b: Case(shape, decode_floor(
                shape, batch=b, prompt_tokens=settings.context,
                bandwidths=run.bandwidths.as_gbps(), cache_tokens=settings.cache_tokens),
                settings.device, settings.warmup, settings.repeats) for b in settings.batches}
            run.floors += [case.floor for case in cases.values()]
            _measure_preset(shape, cases, settings, rows, run, stage)
            checkpoint()
    except BaseException as err:
        run.facts["error"] = error_text(err)
        checkpoint()
        raise
    finally:
        stage.close()
    run.facts["partial"] = False
    checkpoint()
    return run


def _resumable(previous: Run, settings: Settings, device_facts: DeviceFacts) -> list[str]:
    """The presets that `previous` measured to the end; ValueError where it cannot be resumed."""
    if previous.kind != "bench":
        raise ValueError(f"only a bench run can be resumed; this one is a {previous.kind!r} run")
    if not previous.facts.get("partial"):
        raise ValueError("this bench run is complete, so there is nothing to resume; "
                         "run again without resuming, or with another --out")
    old, new = previous.settings.to_dict(), settings.to_dict()
    differ = sorted(key for key in set(old) | set(new) if old.get(key) != new.get(key))
    if differ:
        said = "; ".join(f"{key}: {old.get(key)!r} there, {new.get(key)!r} here" for key in differ)
        raise ValueError(f"the run to resume was made with other settings ({said}); "
                         "pass the same flags as the first run")
    if previous.device.name != device_facts.name:
        raise ValueError(f"the run to resume was made on {previous.device.name}, "
                         f"not on this {device_facts.name}; start a new run here")
    finished = finished_presets(previous)
    return [shape.name for shape in settings.shapes if shape.name in finished]


def _preset_of(key: str) -> str:
    """The preset a row's key ('qwen3-8b b1 plain graph') or a stage ('qwen3-8b: limits') is about."""
    return key.split(" ")[0].rstrip(":")


def _keep_finished(previous: Run, done: list[str], run: Run, rows: Rows, stage) -> None:
    """Carry the finished presets of `previous` into run, after checking this card's bandwidth."""
    old, new = previous.bandwidths.floor_gbps, run.bandwidths.floor_gbps
    if abs(new / old - 1) > RESUME_BANDWIDTH_TOLERANCE:
        raise ValueError(
            f"this card measures {new:.0f} GB/s where the run to resume measured {old:.0f} (more than "
            f"{RESUME_BANDWIDTH_TOLERANCE:.0%} apart), so the floors of the kept presets ({', '.join(done)}) "
            "and of the rest would stand on different bandwidths. If something else is using the card, "
            "stop it and resume again; otherwise run again without --resume to measure every preset "
            "over this card's bandwidth (the finished run at --out stays until the new one ends)")
    here = run.bandwidths
    run.stamp, run.bandwidths = previous.stamp, previous.bandwidths  # every floor over the first run's
    ours = [key for key in set(previous.timelines) | set(previous.launches) if _preset_of(key) in done]
    run.floors = [f for f in previous.floors if f.preset in done]
    run.timelines = {k: t for k, t in previous.timelines.items() if k in ours}
    rows.rows = [r for r in previous.rows if r.preset in done]
    rows.launches = {k: c for k, c in previous.launches.items() if k in ours}
    for key in ("limits", "parity"):
        run.facts[key] = {name: v for name, v in previous.facts.get(key, {}).items() if name in done}
    stage.seconds.update({k: v for k, v in previous.facts.get("stage_s", {}).items() if _preset_of(k) in done})
    run.facts["resumed"] = previous.facts.get("resumed", []) + [{
        "date": run_stamp().date, "kept": done, "bandwidths_gbps": here.as_gbps(),
        "tolerance": RESUME_BANDWIDTH_TOLERANCE,
        "stopped_by": previous.facts.get("error", "the process ended before its last preset")}]


def _measure_preset(shape, cases: dict[int, Case], settings: Settings, rows: Rows, run: Run,
                    stage) -> None:
    """Engine rows, limits at the first batch, then transformers' rows and parity (unless skipped)."""
    first = cases[min(cases)]
    engine = measure_engine(shape, cases, settings, rows, stage)
    stage(f"{shape.name}: limits")
    try:
        run.facts["limits"][shape.name], timelines = measure_limits(engine, first, rows.rows)
        run.timelines.update(timelines)
    except Exception as err:
        run.facts["limits"][shape.name] = {"batch": first.batch, "error": error_text(err)}
    if settings.on_cuda:  # the kernel table at the other batches too, to say what grows with the batch
        run.facts["limits"][shape.name]["triton_kernels_at"] = {
            str(case.batch): triton_kernel_table(engine, case) for case in cases.values() if case is not first}
    skipped = settings.transformers_skip_reason(shape.name)
    if skipped:
        rows.mark(cases.values(), HF_PATHS, skipped)
        del engine
        _reset_compiled(settings)
        return
    stage(f"{shape.name}: parity, bf16 logits")
    data = engine.data[first.batch]
    bf16 = {"engine": decode_logits(engine.model, data)}
    for prefix in (FUSED, TUNED):  # the fused step, and the tuned one where built
        if prefix in engine.built:
            bf16[prefix.replace(" ", "_")] = decode_logits(engine.model, data, engine.built[prefix][0])
    model = engine.model
    del engine  # its graphs and compiled step
    _reset_compiled(settings)
    stage(f"{shape.name}: build transformers")
    try:
        hf = HFDecoder.from_decoder(model)
    except Exception as err:
        rows.mark(cases.values(), HF_PATHS, f"building transformers' model: {error_text(err)}", failed=True)
        run.facts["parity"][shape.name] = {"passed": None, "error": error_text(err)}
        return
    del model
    free_memory()
    measure_transformers(hf, cases, settings, rows, stage)
    stage(f"{shape.name}: parity, float32 reference")
    try:
        bf16["hf"] = decode_logits(hf, data)
        short = parity.memory_shortfall(shape, settings.device)
        if short:
            run.facts["parity"][shape.name] = {"passed": None, "note": f"no float32 reference: {short}"}
            return
        ours32 = parity.upcast(hf)
        del hf
        free_memory()
        run.facts["parity"][shape.name] = parity.parity_facts(bf16, parity.float32_logits(ours32, data))
    except Exception as err:
        run.facts["parity"][shape.name] = {"passed": None, "error": error_text(err)}
    free_memory()


def _reset_compiled(settings: Settings) -> None:
    """Drop compiled code, which holds the model, then hand its memory back."""
    if settings.on_cuda or settings.compile_on_cpu:
        torch._dynamo.reset()
    free_memory()
