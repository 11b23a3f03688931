"""Tools wing: the book's engine, eight ways: plain, fused with Inductor, fused with Inductor's tuning
and the book's Triton kernels, each eager and replayed in a CUDA graph."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from floorlab.core.plan import NO_GRAPHS  # noqa: F401  (the note of a card without graphs, re-exported)
from floorlab.engine.fused import fused_step
from floorlab.engine.graphs import GraphRunner
from floorlab.engine.kernels import triton_step
from floorlab.engine.model import Qwen3Decoder, build_model

from .rows import Case, Rows, decode_inputs, error_text, measure_graph_row, prefill
from .settings import Settings

NO_CPU_COMPILE = "skipped on the CPU: compiling the step here takes minutes"
NO_CPU_TRITON = "the Triton kernels run on a CUDA GPU (on the CPU only the tests' interpreter runs them)"
FUSED, TUNED, TRITON = "fused", "fused tuned", "triton"  # the path prefixes of the compiled steps


@dataclass
class Engine:
    """The model, each batch's inputs, and each step built: path prefix -> (step, its GraphRunner or None)."""

    model: Qwen3Decoder
    data: dict[int, tuple]
    built: dict[str, tuple] = field(default_factory=dict)

    def steps(self, batch: int) -> dict[str, tuple]:
        """{path: (step fn, the eager fn a graph replays, or None)} for each path built at this batch."""
        _, tokens, positions = self.data[batch]
        out = {}
        for prefix, (fn, runner) in self.built.items():
            def eager(fn=fn):
                return fn(tokens, positions)

            out[f"{prefix} eager"] = (eager, None)
            if runner is not None:
                out[f"{prefix} graph"] = (runner.replay_fn(batch), eager)
        return out


def _captured(model, batches, step_fn=None) -> GraphRunner:
    runner = GraphRunner(model, buckets=batches, step_fn=step_fn)
    runner.capture()
    return runner


def measure_engine(shape, cases: dict[int, Case], settings: Settings, rows: Rows, stage) -> Engine:
    """Build the engine and record its paths at every batch; returns the Engine for what follows."""
    plan, batches = settings.plan, sorted(cases)
    stage(f"{shape.name}: build the model")
    model = build_model(shape, device=settings.device, dtype=plan.dtype, max_batch=max(batches),
                        max_context=settings.cache_tokens)
    engine = Engine(model, {b: decode_inputs(shape, b, settings.context, settings.device) for b in batches})
    engine.built["plain"] = (model.decode_step, None)
    _measure(engine, cases, rows, stage, "plain", graph=False)
    if not plan.graphs:
        _absent(cases, rows, "plain", graph=plan.graphs_note)
    elif _build(engine, cases, rows, stage, "plain", lambda: (model.decode_step, _captured(model, batches)),
                "graph capture", graph_only=True) is not None:
        _measure(engine, cases, rows, stage, "plain", eager=False)

    compiles = settings.on_cuda or settings.compile_on_cpu
    for prefix in (FUSED, TUNED):
        why = ("skipped (--skip-fused)" if settings.skip_fused else
               settings.tuned_skip_reason(shape.name) if prefix == TUNED else "")
        if why or not compiles:
            _absent(cases, rows, prefix, eager=why or NO_CPU_COMPILE, graph=why or plan.graphs_note)
            continue
        compile_s = _build(engine, cases, rows, stage, prefix, lambda: _compile_fused(model, batches, plan.graphs,
                                                                                      prefix == TUNED))
        if compile_s is None:
            continue
        step = engine.built[prefix][0]
        options = "; Inductor options: " + ", ".join(sorted(step.options)) if prefix == TUNED else ""
        _measure(engine, cases, rows, stage, prefix, compile_s=compile_s,
                 notes=("compile_s covers every bucket" + options,
                        "bit-identical: replay vs the compiled step" + options))
        if engine.built[prefix][1] is None:
            _absent(cases, rows, prefix, graph=plan.graphs_note)

    if plan.triton != "compiled":
        why = NO_CPU_TRITON if plan.device.type == "cpu" and plan.triton == "interpreter" else plan.triton_note
        _absent(cases, rows, TRITON, eager=why, graph=why)
        return engine

    def triton():
        step = triton_step(model, pdl=plan.pdl)
        return step, _captured(model, batches, step)

    compile_s = _build(engine, cases, rows, stage, TRITON, triton)
    if compile_s is not None:
        _measure(engine, cases, rows, stage, TRITON, compile_s=compile_s,
                 notes=("compile_s: Triton's first compile and capture of every bucket",
                        "bit-identical: replay vs the same kernels run eagerly"))
    return engine


def _absent(cases, rows: Rows, prefix: str, *, eager: str = "", graph: str = "") -> None:
    """Absent rows of prefix's eager and graph paths, each where a reason is given."""
    for kind, why in (("eager", eager), ("graph", graph)):
        if why:
            rows.mark(cases.values(), [f"{prefix} {kind}"], why)


def _build(engine: Engine, cases, rows: Rows, stage, prefix: str, make, failed: str = "compile",
           graph_only: bool = False) -> float | None:
    """engine.built[prefix] = make(), and the seconds it took; None, with failed rows, when it raises."""
    stage(f"{engine.model.shape.name}: build the {prefix} step")
    start = time.perf_counter()
    try:
        engine.built[prefix] = make()
    except Exception as err:
        kinds = ("graph",) if graph_only else ("eager", "graph")
        rows.mark(cases.values(), [f"{prefix} {k}" for k in kinds], f"{failed}: {error_text(err)}", failed=True)
        return None
    return time.perf_counter() - start


def _measure(engine: Engine, cases, rows: Rows, stage, prefix: str, *, eager: bool = True, graph: bool = True,
             compile_s: float | None = None, notes=("", "")) -> None:
    """Time prefix's eager step and its replay (where built) at every batch, each after a fresh prefill."""
    runner = engine.built[prefix][1]
    extra = {} if compile_s is None else {"compile_s": compile_s}
    for b, case in cases.items():
        eager_fn = engine.steps(b)[f"{prefix} eager"][0]
        for kind, wanted, note in (("eager", eager, notes[0]), ("graph", graph and runner is not None, notes[1])):
            if not wanted:
                continue
            path = f"{prefix} {kind}"
            stage(f"{engine.model.shape.name} b{b}: {path}")
            prefill(engine.model, engine.data[b][0])
            if kind == "eager":
                rows.attempt(case, path, lambda: rows.measure(case, path, eager_fn, note=note, **extra))
            else:
                rows.attempt(case, path, lambda: measure_graph_row(rows, case, path, runner, engine.data[b],
                                                                   eager_fn, note=note, **extra))


def _compile_fused(model, batches: list[int], graphs: bool, tuned: bool) -> tuple:
    """(the step compiled with Inductor, its GraphRunner or None): compiled at every batch, captured where graphs."""
    step = fused_step(model, tuned=tuned)
    if graphs:
        return step, _captured(model, batches, step)
    for b in batches:
        zeros = torch.zeros(b, dtype=torch.long, device=model.device)
        step(zeros, zeros)
    model.reset_cache()
    return step, None
