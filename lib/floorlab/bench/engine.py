"""The book's engine, six ways: plain, fused (Inductor) and the book's Triton kernels, each eager
and replayed in a CUDA graph."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from floorlab.model import Qwen3Decoder, build_model

from .inputs import decode_inputs, prefill
from .rows import Case, Rows, error_text, measure_graph_row
from .settings import DTYPE, Settings

NO_GRAPHS = "CUDA graphs need a CUDA GPU"
NO_CPU_COMPILE = "skipped on the CPU: compiling the step here takes minutes"
NO_CPU_TRITON = "the Triton kernels run on a CUDA GPU (on the CPU only the tests' interpreter runs them)"
FUSED_GRAPH_NOTE = "bit-identical: replay vs the compiled step"


@dataclass
class Engine:
    """The engine after its rows: the model, its graphs and fused step, and each batch's inputs."""

    model: Qwen3Decoder
    data: dict[int, tuple] = field(default_factory=dict)
    runner: object | None = None
    fused: object | None = None
    fused_runner: object | None = None
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
        if self.fused is not None:
            def fused():
                return self.fused(tokens, positions)

            out["fused eager"] = (fused, None)
            if self.fused_runner is not None:
                out["fused graph"] = (self.fused_runner.replay_fn(batch), fused)
        if self.triton is not None:
            def triton():
                return self.triton(tokens, positions)

            out["triton eager"] = (triton, None)
            if self.triton_runner is not None:
                out["triton graph"] = (self.triton_runner.replay_fn(batch), triton)
        return out


def measure_engine(shape, cases: dict[int, Case], settings: Settings, rows: Rows, stage) -> Engine:
    """Build the engine and record its four paths at every batch; returns the Engine for what follows."""
    batches = sorted(cases)
    stage(f"{shape.name}: build the model")
    model = build_model(shape, device=settings.device, dtype=DTYPE, max_batch=max(batches),
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
    _fused(engine, cases, settings, rows, stage)
    _triton(engine, cases, settings, rows, stage)
    return engine


def _plain_graphs(engine: Engine, cases, settings: Settings, rows: Rows, stage) -> None:
    if not settings.on_cuda:
        for case in cases.values():
            rows.absent(case, "plain graph", NO_GRAPHS)
        return
    from floorlab.graphs import GraphRunner

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


def _fused(engine: Engine, cases, settings: Settings, rows: Rows, stage) -> None:
    if settings.skip_fused or not (settings.on_cuda or settings.compile_on_cpu):
        why = "skipped (--skip-fused)" if settings.skip_fused else NO_CPU_COMPILE
        for case in cases.values():
            rows.absent(case, "fused eager", why)
            rows.absent(case, "fused graph", why if settings.skip_fused else NO_GRAPHS)
        return
    stage(f"{engine.model.shape.name}: compile the fused step")
    try:
        compile_s = _compile_fused(engine, sorted(cases), settings.on_cuda)
    except Exception as err:
        engine.fused = engine.fused_runner = None
        for case in cases.values():
            rows.failed(case, "fused eager", f"compile: {error_text(err)}")
            rows.failed(case, "fused graph", f"compile: {error_text(err)}")
        return
    for b, case in cases.items():
        steps = engine.steps(b)
        stage(f"{engine.model.shape.name} b{b}: fused eager")
        prefill(engine.model, engine.data[b][0])
        rows.attempt(case, "fused eager", lambda: rows.measure(
            case, "fused eager", steps["fused eager"][0], compile_s=compile_s,
            note="compile_s covers every bucket"))
        stage(f"{engine.model.shape.name} b{b}: fused graph")
        if engine.fused_runner is None:
            rows.absent(case, "fused graph", NO_GRAPHS)
            continue
        prefill(engine.model, engine.data[b][0])
        rows.attempt(case, "fused graph", lambda: measure_graph_row(
            rows, case, "fused graph", engine.fused_runner, engine.data[b],
            steps["fused eager"][0], compile_s=compile_s, note=FUSED_GRAPH_NOTE))


def _compile_fused(engine: Engine, batches: list[int], on_cuda: bool) -> float:
    """Compile the fused step at every batch (and capture its graphs on a GPU); returns seconds."""
    from floorlab.fused import fused_step

    model = engine.model
    engine.fused = fused_step(model)
    start = time.perf_counter()
    if on_cuda:
        from floorlab.graphs import GraphRunner

        engine.fused_runner = GraphRunner(model, buckets=batches, step_fn=engine.fused)
        engine.fused_runner.capture()
    else:
        for b in batches:
            zeros = torch.zeros(b, dtype=torch.long, device=model.device)
            engine.fused(zeros, zeros)
        model.reset_cache()
    return time.perf_counter() - start


def _triton(engine: Engine, cases, settings: Settings, rows: Rows, stage) -> None:
    """The book's own Triton kernels for the step, eager and in a graph (CUDA only)."""
    if not settings.on_cuda:
        for case in cases.values():
            rows.absent(case, "triton eager", NO_CPU_TRITON)
            rows.absent(case, "triton graph", NO_CPU_TRITON)
        return
    from floorlab.graphs import GraphRunner
    from floorlab.kernels import triton_step

    stage(f"{engine.model.shape.name}: compile and capture the Triton step")
    start = time.perf_counter()
    try:
        engine.triton = triton_step(engine.model)
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
