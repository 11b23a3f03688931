"""Tools wing: transformers' Qwen3ForCausalLM with the engine's weights, three ways: eager, replayed
from a CUDA graph, and compiled."""
from __future__ import annotations

import time

import torch

from floorlab.engine.graphs import GraphRunner
from floorlab.engine.kernels.timing import free_memory

from .rows import Case, Rows, decode_inputs, measure_graph_row, prefill
from .settings import Settings

NO_COMPILE_GRAPHS = "CUDA graphs need a CUDA GPU (mode='reduce-overhead' is torch.compile with CUDA graphs)"
COMPILE_CALLS = 3  # compile, then Inductor's graph warm-up and recording


def measure_transformers(hf, cases: dict[int, Case], settings: Settings, rows: Rows, stage) -> None:
    """Record transformers' three paths at every batch (graphs and compile only on a GPU)."""
    compiled = None
    for b, case in sorted(cases.items()):
        data = decode_inputs(hf.shape, b, settings.context, settings.device)
        prompt, tokens, positions = data

        def eager():
            return hf.decode_step(tokens, positions)

        stage(f"{hf.shape.name} b{b}: hf eager")
        prefill(hf, prompt)
        rows.attempt(case, "hf eager", lambda: rows.measure(case, "hf eager", eager))
        if not settings.plan.graphs:
            rows.absent(case, "hf graph", settings.plan.graphs_note)
            rows.absent(case, "hf compile", NO_COMPILE_GRAPHS)
            continue
        stage(f"{hf.shape.name} b{b}: hf graph")
        rows.attempt(case, "hf graph", lambda: _graph_row(rows, case, hf, data, eager))
        stage(f"{hf.shape.name} b{b}: hf compile")
        compiled = compiled or compile_hf(hf)
        prefill(hf, prompt)
        rows.attempt(case, "hf compile", lambda: _compile_row(rows, case, compiled, tokens, positions))
    compiled = None  # drop the compiled step, which holds the model
    if settings.on_cuda:
        torch._dynamo.reset()
    free_memory()


def _graph_row(rows: Rows, case: Case, hf, data, eager):
    """transformers' step replayed by the book's GraphRunner, checked from fresh prefills, in inference
    mode: transformers' cache tensors may be reset (and the graph's inputs written) only there."""
    with torch.inference_mode():
        prefill(hf, data[0])  # transformers' cache is sized by the batch of the last prefill
        runner = GraphRunner(hf, buckets=(case.batch,))
        runner.capture()
        prefill(hf, data[0])
        row = measure_graph_row(rows, case, "hf graph", runner, data, eager, model=hf,
                                note="bit-identical: each from a fresh prefill")
    del runner
    free_memory()
    return row


def compile_hf(hf):
    """transformers' decode step under torch.compile(mode="reduce-overhead", fullgraph=True): its body
    without the inference-mode decorator, which a graph cannot enter; the caller runs it in inference mode."""
    body = getattr(type(hf).decode_step, "__wrapped__", None)
    if body is None:
        fn = hf.decode_step
    else:
        def fn(tokens, positions):
            return body(hf, tokens, positions)
    return torch.compile(fn, mode="reduce-overhead", fullgraph=True, dynamic=False)


def _compile_row(rows: Rows, case: Case, compiled, tokens, positions):
    """The compiled step's Row; the seconds of its first COMPILE_CALLS calls kept apart as compile_s."""
    def step():
        with torch.inference_mode():
            torch.compiler.cudagraph_mark_step_begin()
            return compiled(tokens, positions)

    start = time.perf_counter()
    for _ in range(COMPILE_CALLS):
        step()
    torch.cuda.synchronize(case.device)  # a compiled graph runs on a CUDA GPU alone
    return rows.measure(case, "hf compile", step, compile_s=time.perf_counter() - start,
                        note=f"compile_s: first {COMPILE_CALLS} calls (compile, warm-up, record)")
