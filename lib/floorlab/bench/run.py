"""The whole bench in one process: bandwidths, floors, then each preset's paths, limits and parity.

The run is a floorlab.runs.Run (kind "bench"), written to save_to after every
preset with facts["partial"] true until the last one is done.
"""
from __future__ import annotations

import time

import torch

from floorlab.device import describe_device, measure_bandwidths
from floorlab.progress import Stages
from floorlab.results import run_stamp
from floorlab.roofline import decode_floor
from floorlab.runs import Run

from . import parity
from .engine import measure_engine
from .inputs import decode_logits, free_memory
from .limits import measure_limits, triton_kernel_table
from .rows import Case, Rows, error_text
from .settings import DEFAULT_CONTEXT, HF_PATHS, PATHS, Settings, make_settings
from .targets import evaluate_targets
from .transformers_paths import measure_transformers

STAGES_PER_PRESET = 8  # model, plain graphs, fused and tuned compiles, limits, bf16 logits, transformers, float32
BANDWIDTH_REPEATS = {"cuda": 20, "cpu": 5}


def run_bench(presets=None, batches=None, context: int = DEFAULT_CONTEXT, *,
              repeats: int | None = None, warmup: int | None = None, device=None,
              skip_transformers: bool = False, skip_fused: bool = False, transformers_for=None,
              tuned_fused_for=(), compile_on_cpu: bool = False, progress: bool = True, save_to=None) -> Run:
    """Measure every path for every preset (a name or a Qwen3Shape) and batch; returns the Run.

    Defaults: qwen3-0.6b and qwen3-8b at batch 1 and 8, 5 warm-up and 30 timed steps on
    a GPU; qwen3-0.6b at batch 1 with 1 and 5 on the CPU, where graph rows are absent.
    tuned_fused_for: presets that also get the fused step compiled with Inductor's tuning.
    """
    settings = make_settings(presets, batches, context, repeats=repeats, warmup=warmup,
                             device=device, skip_transformers=skip_transformers,
                             skip_fused=skip_fused, compile_on_cpu=compile_on_cpu,
                             transformers_for=transformers_for, tuned_fused_for=tuned_fused_for)
    stage = Stages(1 + len(settings.shapes) * (STAGES_PER_PRESET + len(PATHS) * len(settings.batches)),
                   progress)
    run = Run(kind="bench", stamp=run_stamp(), device=describe_device(settings.device),
              settings=settings.to_dict(),
              facts={"partial": True, "parity": {}, "limits": {}, "targets": [],
                     "stage_s": stage.seconds})
    rows, start = Rows(), time.perf_counter()
    names = [s.name for s in settings.shapes]

    def checkpoint() -> None:
        run.rows = sorted(rows.rows, key=lambda r: (names.index(r.preset), r.batch,
                                                    PATHS.index(r.path)))
        run.launches = dict(rows.launches)
        run.facts["targets"] = evaluate_targets(run.rows, run.facts["limits"])
        run.facts["elapsed_s"] = time.perf_counter() - start
        if save_to is not None:
            run.save(save_to)

    try:
        stage("bandwidth: copy and read")
        run.bandwidths = measure_bandwidths(settings.device,
                                            repeats=BANDWIDTH_REPEATS[settings.device.type])
        for shape in settings.shapes:
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
        for case in cases.values():
            for path in HF_PATHS:
                rows.absent(case, path, skipped)
        del engine
        _reset_compiled(settings)
        return
    stage(f"{shape.name}: parity, bf16 logits")
    data = engine.data[first.batch]
    bf16 = {"engine": decode_logits(engine.model, data)}
    for prefix, (step, _) in engine.compiled.items():  # the fused step, and the tuned one where built
        bf16[prefix.replace(" ", "_")] = decode_logits(engine.model, data, step)
    model = engine.model
    del engine  # its graphs and compiled step
    _reset_compiled(settings)
    stage(f"{shape.name}: build transformers")
    try:
        from floorlab.hf import HFDecoder

        hf = HFDecoder.from_decoder(model)
    except Exception as err:
        for case in cases.values():
            for path in HF_PATHS:
                rows.failed(case, path, f"building transformers' model: {error_text(err)}")
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
    """Drop compiled code that holds the model, then hand its memory back."""
    if settings.on_cuda or settings.compile_on_cpu:
        torch._dynamo.reset()
    free_memory()
