"""Tools wing: the book's engine, eight ways: plain, fused (Inductor), fused with Inductor's
tuning, and the
book's Triton kernels, each eager and replayed in a CUDA graph."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from floorlab.core.plan import NO_GRAPHS  # noqa: F401  (the note of a card without graphs, re-exported)
from floorlab.engine.fused import fused_step
from floorlab.engine.graphs import GraphRunner
from floorlab.engine.kernels import triton_step
from floorlab.engine.model import Qwen3Decoder, build_model

from .inputs import decode_inputs, prefill
from .rows import Case, Rows, error_text, measure_graph_row
from .settings import Settings

NO_CPU_COMPILE = "skipped on the CPU: compiling the step here takes minutes"
NO_CPU_TRITON = "the Triton kernels run on a CUDA GPU (on the CPU only the tests' interpreter runs them)"
FUSED_GRAPH_NOTE = "bit-identical: replay vs the compiled step"
FUSED = "fused"  # the path prefixes of the two compiled steps
TUNED = "fused tuned"


@dataclass
class Engine:
    """The engine after its rows: the model, its graphs and fused step, and each batch's inputs."""

    model: Qwen3Decoder
    data: dict[int, tuple] = field(default_factory=dict)
    runner: object | None = None
    compiled: dict[str, tuple] = field(default_factory=dict)  # path prefix -> (step, GraphRunner or None)
    triton: object | None = None
    triton_runner: object | None = None

    def steps(self, batch: int) -> dict[str, tuple]:
        """{path: (step fn, eager fn it replays or None)} for each path built at this batch."""
        _, tokens, positions = self.data[batch]

        def plain():
            return self.model.decode_step(tokens, positions)

        out = {"plain eager": (plain, None)}
        if self.runner is not None:
            out["plain graph"] = (self.runner.replay_fn(batch), plain)
        built = dict(self.compiled)
        if self.triton is not None:
            built["triton"] = (self.triton, self.triton_runner)
        for prefix, (fn, runner) in built.items():
            def eager(fn=fn):
                return fn(tokens, positions)

            out[f"{prefix} eager"] = (eager, None)
            if runner is not None:
                out[f"{prefix} graph"] = (runner.replay_fn(batch), eager)
        return out


def measure_engine(shape, cases: dict[int, Case], settings: Settings, rows: Rows, stage) -> Engine:
    """Build the engine and record its four paths at every batch; returns the Engine for what follows."""
    batches = sorted(cases)
    stage(f"{shape.name}: build the model")
    model = build_model(shape, device=settings.device, dtype=settings.plan.dtype, max_batch=max(batches),
                        max_context=settings.cache_tokens)
    engine = Engine(model, {b: decode_inputs(shape, b, settings.context, settings.device)
                            for b in batches})
    for b in batches:
        stage(f"{shape.name} b{b}: plain eager")
        prompt, tokens, positions = engine.data[b]
        prefill(model, prompt)
        rows.attempt(cases[b], "plain eager", lambda: rows.measure(
            cases[b], "plain eager", lambda: model.decode_step(tokens, positions)))
    _plain_graphs(engine, cases, settings, rows, stage)
    _fused(engine, cases, settings, rows, stage, FUSED)
    _fused(engine, cases, settings, rows, stage, TUNED)
    _triton(engine, cases, settings, rows, stage)
    return engine


def _plain_graphs(engine: Engine, cases, settings: Settings, rows: Rows, stage) -> None:
    if not settings.plan.graphs:
        for case in cases.values():
            rows.absent(case, "plain graph", settings.plan.graphs_note)
        return

    stage(f"{engine.model.shape.name}: capture plain graphs")
    try:
        engine.runner = GraphRunner(engine.model, buckets=sorted(cases))
        engine.runner.capture()
    except Exception as err:
        engine.runner = None
        for case in cases.values():
            rows.failed(case, "plain graph", f"graph capture: {error_text(err)}")
        return
    for b, case in cases.items():
        stage(f"{engine.model.shape.name} b{b}: plain graph")
        eager = engine.steps(b)["plain eager"][0]
        prefill(engine.model, engine.data[b][0])
        rows.attempt(case, "plain graph", lambda: measure_graph_row(
            rows, case, "plain graph", engine.runner, engine.data[b], eager))


def _fused(engine: Engine, cases, settings: Settings, rows: Rows, stage, prefix: str) -> None:
    """The step compiled with Inductor (prefix FUSED) or with its tuning on (TUNED), eager and in a graph."""
    eager_path, graph_path = f"{prefix} eager", f"{prefix} graph"
    tuned = prefix == TUNED
    why = ""
    if settings.skip_fused:
        why = "skipped (--skip-fused)"
    elif tuned:
        why = settings.tuned_skip_reason(engine.model.shape.name)
    if why or not (settings.on_cuda or settings.compile_on_cpu):
        for case in cases.values():
            rows.absent(case, eager_path, why or NO_CPU_COMPILE)
            rows.absent(case, graph_path, why or settings.plan.graphs_note)
        return
    stage(f"{engine.model.shape.name}: compile the {prefix} step")
    try:
        compile_s = _compile_fused(engine, sorted(cases), settings.plan.graphs, prefix)
    except Exception as err:
        engine.compiled.pop(prefix, None)
        for case in cases.values():
            rows.failed(case, eager_path, f"compile: {error_text(err)}")
            rows.failed(case, graph_path, f"compile: {error_text(err)}")
        return
    step, runner = engine.compiled[prefix]
    options = "; Inductor options: " + ", ".join(sorted(step.options)) if tuned else ""
    for b, case in cases.items():
        steps = engine.steps(b)
        stage(f"{engine.model.shape.name} b{b}: {eager_path}")
        prefill(engine.model, engine.data[b][0])
        rows.attempt(case, eager_path, lambda: rows.measure(
            case, eager_path, steps[eager_path][0], compile_s=compile_s,
            note="compile_s covers every bucket" + options))
        stage(f"{engine.model.shape.name} b{b}: {graph_path}")
        if runner is None:
            rows.absent(case, graph_path, settings.plan.graphs_note)
            continue
        prefill(engine.model, engine.data[b][0])
        rows.attempt(case, graph_path, lambda: measure_graph_row(
            rows, case, graph_path, runner, engine.data[b],
            steps[eager_path][0], compile_s=compile_s, note=FUSED_GRAPH_NOTE + options))


def _compile_fused(engine: Engine, batches: list[int], graphs: bool, prefix: str = FUSED) -> float:
    """Compile a fused step at every batch (and capture its graphs where the plan has them) into compiled[prefix].

    Returns the seconds it took.
    """

    model = engine.model
    step, runner = fused_step(model, tuned=prefix == TUNED), None
    start = time.perf_counter()
    if graphs:

        runner = GraphRunner(model, buckets=batches, step_fn=step)
        runner.capture()
    else:
        for b in batches:
            zeros = torch.zeros(b, dtype=torch.long, device=model.device)
            step(zeros, zeros)
        model.reset_cache()
    engine.compiled[prefix] = (step, runner)
    return time.perf_counter() - start


def _triton(engine: Engine, cases, settings: Settings, rows: Rows, stage) -> None:
    """The book's own Triton kernels for the step, eager and in a graph (where the plan compiles them)."""
    plan = settings.plan
    if plan.triton != "compiled":
        why = NO_CPU_TRITON if plan.device.type == "cpu" and plan.triton == "interpreter" else plan.triton_note
        for case in cases.values():
            rows.absent(case, "triton eager", why)
            rows.absent(case, "triton graph", why)
        return

    stage(f"{engine.model.shape.name}: compile and capture the Triton step")
    start = time.perf_counter()
    try:
        engine.triton = triton_step(engine.model, pdl=settings.plan.pdl)
        engine.triton_runner = GraphRunner(engine.model, buckets=sorted(cases),
                                           step_fn=engine.triton)
        engine.triton_runner.capture()
    except Exception as err:
        engine.triton = engine.triton_runner = None
        for case in cases.values():
            rows.failed(case, "triton eager", f"compile: {error_text(err)}")
            rows.failed(case, "triton graph", f"compile: {error_text(err)}")
        return
    compile_s = time.perf_counter() - start
    for b, case in cases.items():
        steps = engine.steps(b)
        stage(f"{engine.model.shape.name} b{b}: triton eager")
        prefill(engine.model, engine.data[b][0])
        rows.attempt(case, "triton eager", lambda: rows.measure(
            case, "triton eager", steps["triton eager"][0], compile_s=compile_s,
            note="compile_s: Triton's first compile and capture of every bucket"))
        stage(f"{engine.model.shape.name} b{b}: triton graph")
        prefill(engine.model, engine.data[b][0])
        rows.attempt(case, "triton graph", lambda: measure_graph_row(
            rows, case, "triton graph", engine.triton_runner, engine.data[b],
            steps["triton eager"][0], compile_s=compile_s,
            note="bit-identical: replay vs the same kernels run eagerly"))
