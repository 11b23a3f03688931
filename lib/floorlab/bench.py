"""One command that measures every decode path of the book on this machine: `python -m floorlab.bench`.

It measures the bandwidth, computes the floor of each configuration, times the
book's engine (eager, CUDA graph, fused, fused in a graph) and transformers
(eager, CUDA graph, torch.compile reduce-overhead), prints one table and writes
JSON (figures/bench-<device>.json). On a machine without CUDA it measures what
the CPU can run and says, row by row, why the rest is absent.
"""
from __future__ import annotations

import argparse
import gc
import re
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from floorlab import paths
from floorlab.device import describe_device, measure_bandwidth
from floorlab.launches import count_launches, kernel_table, profile_timeline
from floorlab.results import run_stamp, save_json
from floorlab.roofline import BelowFloorWarning, achieved_gbps, bytes_per_step, check_floor, floor_ms
from floorlab.shapes import PRESETS, Qwen3Shape, get_shape
from floorlab.timing import time_ms

GPU_PRESETS = ("qwen3-0.6b", "qwen3-8b")
CPU_PRESETS = ("qwen3-0.6b",)
GPU_BATCHES = (1, 8)
CPU_BATCHES = (1,)
DEFAULT_CONTEXT = 32
MAX_BATCH = 16
MAX_CONTEXT = 8192
GPU_WARMUP, GPU_REPEATS = 5, 30
CPU_WARMUP, CPU_REPEATS = 1, 5
DTYPE = torch.bfloat16
PARITY_TOLERANCE = 2e-2
EXTRA_CALLS = 16  # decode calls per row beyond warm-up and repeats: counting, checks, compiling

PATHS = ("plain eager", "plain graph", "fused eager", "fused graph",
         "hf eager", "hf graph", "hf compile")
ROW_KEYS = ("path", "preset", "batch", "context", "status", "median_ms", "p10_ms", "p90_ms",
            "spread_ms", "x_floor", "achieved_gbps", "kernels", "kernels_per_layer",
            "bit_identical", "max_abs_diff", "compile_s", "note")

NO_GRAPHS = "CUDA graphs need a CUDA GPU"
NO_COMPILE_GRAPHS = ("CUDA graphs need a CUDA GPU (mode='reduce-overhead' is torch.compile "
                     "with CUDA graphs)")
NO_CPU_COMPILE = "skipped on the CPU: compiling the step here takes minutes"

# (preset, batch, path, limit on x_floor) and (preset, batch, path, must be faster than path)
FLOOR_TARGETS = (("qwen3-0.6b", 1, "fused graph", 2.0),
                 ("qwen3-0.6b", 1, "plain graph", 4.0),
                 ("qwen3-8b", 1, "fused graph", 1.25))
RACE_TARGETS = (("qwen3-0.6b", 1, "fused graph", "hf graph"),
                ("qwen3-0.6b", 1, "fused graph", "hf compile"),
                ("qwen3-0.6b", 1, "plain graph", "hf graph"),
                ("qwen3-0.6b", 1, "plain graph", "hf compile"))


@dataclass
class Case:
    """One configuration: a shape at a batch and context, its bytes per step and its floor."""

    shape: Qwen3Shape
    batch: int
    context: int
    bytes_per_step: int
    floor_ms: float
    device: torch.device
    warmup: int
    repeats: int

    def row(self, path: str, **fields) -> dict:
        """A table row for this case with every ROW_KEYS key (absent values None)."""
        out = dict.fromkeys(ROW_KEYS)
        out.update(path=path, preset=self.shape.name, batch=self.batch, context=self.context,
                   note="")
        out.update(fields)
        return out

    def absent(self, path: str, reason: str) -> dict:
        """A row saying why this path was not measured."""
        return self.row(path, status="absent", note=reason)


# ---------------------------------------------------------------- measuring one row

def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _count(fn: Callable[[], object], case: Case, fallback_fn: Callable[[], object] | None = None):
    """(kernels, per_layer, note) of one call of fn; if the profiler misses a graph's kernels, of fallback_fn."""
    counted = count_launches(fn, num_layers=case.shape.num_layers, device=case.device)
    if counted.kernels > 0 and not counted.note:
        return counted.kernels, counted.per_layer, ""
    if fallback_fn is not None:
        eager = count_launches(fallback_fn, num_layers=case.shape.num_layers, device=case.device)
        return eager.kernels, eager.per_layer, "kernels counted on the eager step the graph replays"
    return None, None, counted.note or "the profiler saw no kernels"


def measure_row(case: Case, path: str, fn: Callable[[], object], *,
                count_fn: Callable[[], object] | None = None, fallback_fn=None,
                note: str = "", **fields) -> dict:
    """Time fn (CUDA events on GPU), count its kernels, and return its table row."""
    timing = time_ms(fn, warmup=case.warmup, repeats=case.repeats, device=case.device)
    notes = [note] if note else []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", BelowFloorWarning)
        x_floor = check_floor(timing.median_ms, case.floor_ms, what=f"{path} {case.shape.name}")
    if any(issubclass(w.category, BelowFloorWarning) for w in caught):
        notes.append("BELOW THE FLOOR: the timer or the step is suspect")
    kernels, per_layer, count_note = _count(count_fn or fn, case, fallback_fn)
    if count_note:
        notes.append(count_note)
    return case.row(path, status="measured", median_ms=timing.median_ms, p10_ms=timing.p10_ms,
                    p90_ms=timing.p90_ms, spread_ms=timing.spread_ms, x_floor=x_floor,
                    achieved_gbps=achieved_gbps(case.bytes_per_step, timing.median_ms),
                    kernels=kernels, kernels_per_layer=per_layer, note="; ".join(notes), **fields)


def _attempt(rows: list[dict], case: Case, path: str, measure: Callable[[], dict]) -> dict:
    """Run measure() and append its row; a failure becomes a row saying what failed."""
    try:
        row = measure()
    except Exception as err:  # one broken path must not cost the rest of the run
        message = " ".join(str(err).split())[:240]
        row = case.row(path, status="failed", note=f"failed: {type(err).__name__}: {message}")
    rows.append(row)
    return row


# ---------------------------------------------------------------- the engines

def _inputs(shape: Qwen3Shape, batch: int, context: int, device: torch.device, seed: int = 0):
    """(prompt [B, context], tokens [B], positions [B]) made the same way on every run."""
    gen = torch.Generator().manual_seed(seed + batch)
    prompt = torch.randint(0, shape.vocab_size, (batch, context), generator=gen)
    tokens = torch.randint(0, shape.vocab_size, (batch,), generator=gen)
    positions = torch.full((batch,), context, dtype=torch.long)
    return prompt.to(device), tokens.to(device), positions.to(device)


def _prefill(model, prompt: torch.Tensor) -> None:
    """Fill the cache with the prompt so a decode step attends over `context` real tokens."""
    with torch.inference_mode():  # transformers' cache tensors are made in inference mode
        model.reset_cache()
        model.prefill(prompt)
    _sync(torch.device(model.device))


def _free() -> None:
    """Collect dropped objects and hand cached GPU memory back (call after del-ing the references)."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _graph_row(case: Case, path: str, runner, tokens, positions, eager_fn, *,
               fresh_prompt=None, model=None, **fields) -> dict:
    """Row of a GraphRunner step, with the replay checked bit for bit against eager_fn's step.

    With fresh_prompt, eager and replay each start from a fresh prefill of model
    (for a cache that moves on with every call); else runner.check_bit_identical.
    """
    def step():
        return runner.step(tokens, positions)

    row = measure_row(case, path, step, count_fn=runner.replay_fn(case.batch),
                      fallback_fn=eager_fn, **fields)
    if fresh_prompt is None:
        row["bit_identical"] = runner.check_bit_identical(tokens, positions)
        row["max_abs_diff"] = runner.last_max_abs_diff
    else:
        _prefill(model, fresh_prompt)
        eager = eager_fn().clone()
        _prefill(model, fresh_prompt)
        replay = step()
        row["bit_identical"] = bool(torch.equal(eager, replay))
        row["max_abs_diff"] = (eager.float() - replay.float()).abs().max().item()
    return row


def bench_engine(shape: Qwen3Shape, cases: dict[int, Case], *, skip_fused: bool,
                 compile_on_cpu: bool, rows: list[dict], bar) -> dict:
    """Measure the book's engine at every batch; returns {"model", "logits", "diagnose"}.

    "logits" holds the plain (and fused) logits at the first batch, for the parity check.
    """
    from floorlab.model import build_model

    first = next(iter(cases.values()))
    device, batches = first.device, sorted(cases)
    max_context = bench_max_context(first.context, first.warmup, first.repeats)
    bar.stage(f"{shape.name}: build the model")
    model = build_model(shape, device=device, dtype=DTYPE, max_batch=max(batches),
                        max_context=max_context)
    data = {b: _inputs(shape, b, first.context, device) for b in batches}
    parity: dict = {}

    for b in batches:
        bar.stage(f"{shape.name} b{b}: plain eager")
        prompt, tokens, positions = data[b]
        _prefill(model, prompt)
        _attempt(rows, cases[b], "plain eager",
                 lambda: measure_row(cases[b], "plain eager",
                                     lambda: model.decode_step(tokens, positions)))

    on_cuda = device.type == "cuda"
    runner = fused = fused_runner = None
    if on_cuda:
        from floorlab.graphs import GraphRunner

        bar.stage(f"{shape.name}: capture plain graphs")
        capture_error = ""
        try:
            runner = GraphRunner(model, buckets=batches)
            runner.capture()
        except Exception as err:
            runner = None
            capture_error = f"capture failed: {type(err).__name__}: {err}"[:240]
        for b in batches:
            bar.stage(f"{shape.name} b{b}: plain graph")
            prompt, tokens, positions = data[b]
            if runner is None:
                rows.append(cases[b].row("plain graph", status="failed", note=capture_error))
                continue
            _prefill(model, prompt)
            _attempt(rows, cases[b], "plain graph",
                     lambda: _graph_row(cases[b], "plain graph", runner, tokens, positions,
                                        lambda: model.decode_step(tokens, positions),
                                        compile_s=None))
    else:
        rows.extend(cases[b].absent("plain graph", NO_GRAPHS) for b in batches)

    if skip_fused:
        for b in batches:
            rows.append(cases[b].absent("fused eager", "skipped (--skip-fused)"))
            rows.append(cases[b].absent("fused graph", "skipped (--skip-fused)"))
    elif not on_cuda and not compile_on_cpu:
        for b in batches:
            rows.append(cases[b].absent("fused eager", NO_CPU_COMPILE))
            rows.append(cases[b].absent("fused graph", NO_GRAPHS))
    else:
        fused, fused_runner, compile_s, compile_error = _compile_fused(model, batches, on_cuda, bar)
        for b in batches:
            prompt, tokens, positions = data[b]
            bar.stage(f"{shape.name} b{b}: fused eager")
            if compile_error:
                rows.append(cases[b].row("fused eager", status="failed", note=compile_error))
            else:
                _prefill(model, prompt)
                _attempt(rows, cases[b], "fused eager",
                         lambda: measure_row(cases[b], "fused eager", lambda: fused(tokens, positions),
                                             compile_s=compile_s,
                                             note="compile_s covers every bucket"))
            bar.stage(f"{shape.name} b{b}: fused graph")
            if not on_cuda:
                rows.append(cases[b].absent("fused graph", NO_GRAPHS))
            elif compile_error or fused_runner is None:
                rows.append(cases[b].row("fused graph", status="failed",
                                         note=compile_error or "fused capture failed"))
            else:
                _prefill(model, prompt)
                _attempt(rows, cases[b], "fused graph",
                         lambda: _graph_row(cases[b], "fused graph", fused_runner, tokens, positions,
                                            lambda: fused(tokens, positions), compile_s=compile_s,
                                            note="bit-identical: replay vs the compiled step"))

    bar.stage(f"{shape.name}: diagnose")
    try:
        diagnosis = diagnose(model, cases[batches[0]], runner=runner, fused=fused,
                             fused_runner=fused_runner, data=data[batches[0]] if on_cuda else None)
    except Exception as err:
        diagnosis = {"error": f"{type(err).__name__}: {err}"[:240]}

    bar.stage(f"{shape.name}: parity logits")
    prompt, tokens, positions = data[batches[0]]
    _prefill(model, prompt)
    with torch.no_grad():
        parity["plain"] = model.decode_step(tokens, positions).float().cpu()
        if fused is not None:
            _prefill(model, prompt)
            parity["fused"] = fused(tokens, positions).float().cpu()
    del runner, fused_runner, fused
    _free()
    return {"model": model, "logits": parity, "diagnose": diagnosis}


def bench_max_context(context: int, warmup: int, repeats: int) -> int:
    """Cache length for a row: context, plus one slot per decode call a row makes, in multiples of 16.

    transformers' StaticCache writes each call at its own running count, whatever
    position it is given, so every call of a row takes a fresh slot.
    """
    return _round_up(context + 1 + warmup + repeats + EXTRA_CALLS, 16)


def _compile_fused(model, batches, on_cuda: bool, bar):
    """(fused step, its GraphRunner or None, seconds to compile and capture, error text or "")."""
    from floorlab.fused import fused_step

    bar.stage(f"{model.shape.name}: compile the fused step")
    fused = fused_step(model)
    start = time.perf_counter()
    try:
        if on_cuda:
            from floorlab.graphs import GraphRunner

            runner = GraphRunner(model, buckets=batches, step_fn=fused)
            runner.capture()
        else:
            runner = None
            for b in batches:
                zeros = torch.zeros(b, dtype=torch.long, device=model.device)
                fused(zeros, zeros)
            model.reset_cache()
    except Exception as err:
        return None, None, None, f"compile failed: {type(err).__name__}: {err}"[:240]
    return fused, runner, time.perf_counter() - start, ""


def bench_transformers(engine: dict, cases: dict[int, Case], *, rows: list[dict], bar) -> dict:
    """Measure transformers (eager, graph, compiled) with the engine's weights; returns parity errors.

    Takes engine["model"] out of the dict and frees it once transformers holds a copy of its weights.
    """
    from floorlab.fused import relative_error
    from floorlab.hf import HFDecoder

    ours, parity = engine.pop("model"), engine["logits"]
    shape = ours.shape
    first = next(iter(cases.values()))
    device, batches = first.device, sorted(cases)
    bar.stage(f"{shape.name}: build transformers")
    hf = HFDecoder.from_decoder(ours)
    del ours
    _free()
    if device.type == "cuda":
        torch._dynamo.reset()
    data = {b: _inputs(shape, b, first.context, device) for b in batches}

    prompt, tokens, positions = data[batches[0]]
    _prefill(hf, prompt)
    with torch.no_grad():
        reference = hf.decode_step(tokens, positions).float().cpu()
    errors = {f"{name}_vs_hf": relative_error(logits, reference) for name, logits in parity.items()}
    errors["tolerance"] = PARITY_TOLERANCE
    errors["metric"] = "L2 norm of the logit difference over the L2 norm of transformers' logits"
    errors["passed"] = all(v <= errors["tolerance"] for k, v in errors.items() if k.endswith("_vs_hf"))

    on_cuda = device.type == "cuda"
    compiled = None
    for b in batches:
        case = cases[b]
        prompt, tokens, positions = data[b]

        def eager():
            return hf.decode_step(tokens, positions)

        bar.stage(f"{shape.name} b{b}: hf eager")
        _prefill(hf, prompt)
        _attempt(rows, case, "hf eager", lambda: measure_row(case, "hf eager", eager))
        if not on_cuda:
            rows.append(case.absent("hf graph", NO_GRAPHS))
            rows.append(case.absent("hf compile", NO_COMPILE_GRAPHS))
            continue

        bar.stage(f"{shape.name} b{b}: hf graph")
        _prefill(hf, prompt)
        _attempt(rows, case, "hf graph", lambda: _hf_graph_row(case, hf, prompt, tokens, positions, eager))

        bar.stage(f"{shape.name} b{b}: hf compile")
        if compiled is None:
            compiled = _compile_hf(hf)
        _prefill(hf, prompt)
        _attempt(rows, case, "hf compile",
                 lambda: _hf_compile_row(case, compiled, tokens, positions))
    del hf, compiled
    if on_cuda:
        torch._dynamo.reset()
    _free()
    return errors


def _hf_graph_row(case: Case, hf, prompt, tokens, positions, eager) -> dict:
    """transformers' decode step in a CUDA graph: floorlab's GraphRunner, else a graph made here.

    Runs in inference mode: transformers' cache tensors are inference tensors, which
    may be reset (and the graph's inputs written) only there.
    """
    from floorlab.graphs import GraphRunner

    with torch.inference_mode():
        try:
            runner = GraphRunner(hf, buckets=(case.batch,))
            runner.capture()
        except (AttributeError, TypeError, ValueError):
            runner = _DirectGraph(hf.decode_step, tokens, positions)
        _prefill(hf, prompt)
        row = _graph_row(case, "hf graph", runner, tokens, positions, eager,
                         fresh_prompt=prompt, model=hf,
                         note="bit-identical: each from a fresh prefill")
    if isinstance(runner, _DirectGraph):
        row["note"] = "; ".join(filter(None, ["captured with torch.cuda.CUDAGraph", row["note"]]))
    del runner
    _free()
    return row


class _DirectGraph:
    """A single CUDA graph of step(tokens, positions) at one batch, with GraphRunner's step/replay/check."""

    def __init__(self, step_fn, tokens, positions):
        self.step_fn = step_fn
        self.tokens, self.positions = tokens.clone(), positions.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():
            for _ in range(3):
                step_fn(self.tokens, self.positions)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph), torch.no_grad():
            self.out = step_fn(self.tokens, self.positions)
        self.last_max_abs_diff = None

    def step(self, tokens, positions):
        self.tokens.copy_(tokens)
        self.positions.copy_(positions)
        self.graph.replay()
        return self.out.clone()

    def replay_fn(self, batch):
        return self.graph.replay

    def check_bit_identical(self, tokens, positions) -> bool:
        with torch.no_grad():
            eager = self.step_fn(tokens, positions).clone()
        graph = self.step(tokens, positions)
        self.last_max_abs_diff = (eager.float() - graph.float()).abs().max().item()
        return bool(torch.equal(eager, graph))


def _compile_hf(hf):
    """transformers' decode step under torch.compile(mode="reduce-overhead", fullgraph=True).

    The compiled function is decode_step's body without its inference-mode
    decorator (the compiler refuses to enter inference mode inside a graph); the
    caller runs it in inference mode, where transformers' cache tensors live.
    """
    body = getattr(type(hf).decode_step, "__wrapped__", None)
    if body is None:
        fn = hf.decode_step
    else:
        def fn(tokens, positions):
            return body(hf, tokens, positions)
    return torch.compile(fn, mode="reduce-overhead", fullgraph=True, dynamic=False)


def _hf_compile_row(case: Case, compiled, tokens, positions) -> dict:
    """transformers' decode step under torch.compile(mode="reduce-overhead"); compile time kept apart."""
    def step():
        with torch.inference_mode():
            torch.compiler.cudagraph_mark_step_begin()
            return compiled(tokens, positions)

    start = time.perf_counter()
    for _ in range(3):  # compile, then Inductor's graph warm-up and recording
        step()
    _sync(case.device)
    compile_s = time.perf_counter() - start
    return measure_row(case, "hf compile", step, compile_s=compile_s,
                       note="compile_s: first three calls (compile, warm-up, record)")


# ---------------------------------------------------------------- what limits a path

def diagnose(model, case: Case, *, runner=None, fused=None, fused_runner=None, data=None) -> dict:
    """What limits a preset: kernels per layer, GPU us per kernel, and each GEMV's GB/s alone."""
    out: dict = {"preset": case.shape.name, "batch": case.batch, "floor_ms": case.floor_ms}
    gemvs = {}
    layers = list(model.layers)
    head = model.embed if model.lm_head is None else model.lm_head
    groups = {name: [getattr(layer, name) for layer in layers]
              for name in ("qkv", "o_proj", "gate_up", "down")}
    groups["lm_head"] = [head]
    for name, weights in groups.items():
        gemvs[name] = _gemv(weights, case)
    out["gemv"] = gemvs
    largest = max(gemvs, key=lambda n: gemvs[n]["bytes"])
    out["largest_gemv"] = {"name": largest, **gemvs[largest]}
    per_layer_ms = sum(gemvs[n]["ms"] for n in ("qkv", "o_proj", "gate_up", "down"))
    out["gemv_only_ms"] = model.shape.num_layers * per_layer_ms + gemvs["lm_head"]["ms"]
    out["gemv_only_x_floor"] = out["gemv_only_ms"] / case.floor_ms

    if data is not None:
        _, tokens, positions = data
        steps = {"plain eager": (lambda: model.decode_step(tokens, positions), None)}
        if runner is not None:
            steps["plain graph"] = (runner.replay_fn(case.batch), steps["plain eager"][0])
        if fused is not None:
            steps["fused eager"] = (lambda: fused(tokens, positions), None)
        if fused_runner is not None:
            steps["fused graph"] = (fused_runner.replay_fn(case.batch), steps["fused eager"][0])
        out["kernels"] = {}
        for name, (fn, fallback) in steps.items():
            try:
                out["kernels"][name] = _kernel_time(name, fn, fallback, case)
            except Exception as err:
                out["kernels"][name] = {"error": f"{type(err).__name__}: {err}"[:240]}
    return out


def _gemv(weights: list[torch.Tensor], case: Case) -> dict:
    """Median ms per F.linear on a [batch, in] input and its GB/s, one call per weight in a row, as in a step.

    On a GPU the calls are captured in one CUDA graph, so the time is the kernels' own and not
    the host's launches; the weights are the model's own, one per layer, so no cache holds them.
    """
    x = torch.randn(case.batch, weights[0].shape[1], dtype=weights[0].dtype, device=case.device)

    def all_layers():
        for weight in weights:
            F.linear(x, weight)

    fn = all_layers
    if case.device.type == "cuda":
        all_layers()
        torch.cuda.synchronize(case.device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            all_layers()
        fn = graph.replay
    timing = time_ms(fn, warmup=case.warmup, repeats=case.repeats, device=case.device)
    per_call_ms = timing.median_ms / len(weights)
    nbytes = weights[0].numel() * weights[0].element_size()
    return {"shape": list(weights[0].shape), "bytes": nbytes, "ms": per_call_ms,
            "gbps": achieved_gbps(nbytes, per_call_ms)}


def _kernel_time(label: str, fn, fallback, case: Case) -> dict:
    """Kernels, GPU busy and idle us, and us per kernel of one call (fallback if a graph hides them)."""
    timeline = profile_timeline(fn, label=label, device=case.device)
    note = ""
    if not timeline.gpu and fallback is not None:
        timeline = profile_timeline(fallback, label=label, device=case.device)
        note = "profiled on the eager step the graph replays"
    kernels = sum(not i.name.lower().startswith(("memcpy", "memset")) for i in timeline.gpu)
    busy_us = timeline.gpu_busy_us if timeline.gpu else None
    return {"kernels": kernels if timeline.gpu else None,
            "kernels_per_layer": kernels / case.shape.num_layers if timeline.gpu else None,
            "gpu_busy_us": busy_us, "gpu_idle_us": timeline.gpu_idle_us if timeline.gpu else None,
            "gpu_us_per_kernel": busy_us / kernels if kernels else None,
            "wall_us": timeline.wall_us, "note": note or timeline.note,
            "top_kernels": kernel_table(timeline, top=8)}


def _limits(rows: list[dict], diagnosis: dict) -> dict:
    """What a preset's fused graph row spends beyond the floor: GEMVs, and everything else per kernel."""
    preset, batch = diagnosis.get("preset"), diagnosis.get("batch")
    best = next((r for r in rows if r["preset"] == preset and r["batch"] == batch
                 and r["path"] == "fused graph" and r["status"] == "measured"), None)
    for fallback in ("plain graph", "fused eager", "plain eager"):
        best = best or next((r for r in rows if r["preset"] == preset and r["batch"] == batch
                             and r["path"] == fallback and r["status"] == "measured"), None)
    if best is None or "gemv_only_ms" not in diagnosis:
        return {}
    other_ms = best["median_ms"] - diagnosis["gemv_only_ms"]
    kernels = best["kernels"]
    gemv_kernels = 4 * diagnosis.get("num_layers", 0) + 1
    out = {"path": best["path"], "ms": best["median_ms"], "x_floor": best["x_floor"],
           "gemv_only_ms": diagnosis["gemv_only_ms"], "other_ms": other_ms,
           "kernels_per_layer": best["kernels_per_layer"]}
    if kernels:
        out["other_us_per_non_gemv_kernel"] = other_ms * 1e3 / max(1, kernels - gemv_kernels)
    largest = diagnosis["largest_gemv"]
    out["summary"] = (
        f"{best['path']} {best['median_ms']:.3f} ms = {best['x_floor']:.2f}x the floor; its GEMVs "
        f"alone take {diagnosis['gemv_only_ms']:.3f} ms ({diagnosis['gemv_only_x_floor']:.2f}x), "
        f"the largest ({largest['name']}) reaches {largest['gbps']:.0f} GB/s; the other "
        f"{other_ms:.3f} ms go to {kernels if kernels is not None else '?'} kernels "
        f"({best['kernels_per_layer'] or 0:.1f} per layer) and the gaps between them"
    )
    return out


# ---------------------------------------------------------------- targets

def evaluate_targets(rows: list[dict]) -> list[dict]:
    """Pass/fail of each target of the book against measured rows (passed None when not measured)."""
    def find(preset, batch, path):
        return next((r for r in rows if r["preset"] == preset and r["batch"] == batch
                     and r["path"] == path and r["status"] == "measured"), None)

    out = []
    for preset, batch, path, limit in FLOOR_TARGETS:
        row = find(preset, batch, path)
        value = row["x_floor"] if row else None
        out.append({"target": f"{preset} b{batch}: {path} <= {limit}x the floor",
                    "preset": preset, "batch": batch, "path": path, "limit": limit, "value": value,
                    "passed": None if value is None else value <= limit,
                    "note": "" if row else "not measured in this run"})
    for preset, batch, path, rival in RACE_TARGETS:
        row, other = find(preset, batch, path), find(preset, batch, rival)
        value = row["median_ms"] / other["median_ms"] if row and other else None
        out.append({"target": f"{preset} b{batch}: {path} faster than {rival}",
                    "preset": preset, "batch": batch, "path": path, "limit": 1.0, "value": value,
                    "passed": None if value is None else value < 1.0,
                    "note": "" if value is not None else "not measured in this run"})
    return out


# ---------------------------------------------------------------- the whole run

class _Progress:
    """A tqdm bar over the run's stages (none when progress is off); stage_s keeps each stage's seconds."""

    def __init__(self, total: int, enabled: bool):
        self.bar = None
        self.stage_s: dict[str, float] = {}
        self._label, self._start = None, time.perf_counter()
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc="bench", unit="stage")

    def stage(self, label: str) -> None:
        self._lap()
        self._label = label
        if self.bar is not None:
            self.bar.set_postfix_str(label, refresh=False)
            self.bar.update(1)

    def _lap(self) -> None:
        now = time.perf_counter()
        if self._label is not None:
            self.stage_s[self._label] = now - self._start
        self._start = now

    def close(self) -> None:
        self._lap()
        self._label = None
        if self.bar is not None:
            self.bar.update(self.bar.total - self.bar.n)  # stages a CPU run leaves out
            self.bar.close()


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _check_settings(shapes, batches, context, repeats, warmup) -> None:
    for b in batches:
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= MAX_BATCH:
            raise ValueError(f"batch sizes must be whole numbers from 1 to {MAX_BATCH}, got {b!r}")
    if isinstance(context, bool) or not isinstance(context, int) or not 1 <= context <= MAX_CONTEXT:
        raise ValueError(f"context must be a whole number of tokens from 1 to {MAX_CONTEXT}, "
                         f"got {context!r}")
    if repeats is not None and (not isinstance(repeats, int) or repeats < 1):
        raise ValueError(f"repeats must be a whole number >= 1, got {repeats!r}")
    if warmup is not None and (not isinstance(warmup, int) or warmup < 0):
        raise ValueError(f"warmup must be a whole number >= 0, got {warmup!r}")
    if not shapes or not batches:
        raise ValueError("pass at least one preset and one batch size")


def run_bench(presets=None, batches=None, context: int = DEFAULT_CONTEXT, *,
              repeats: int | None = None,
              warmup: int | None = None, device=None, skip_transformers: bool = False,
              skip_fused: bool = False, compile_on_cpu: bool = False, progress: bool = True,
              save_to=None) -> dict:
    """Measure every path for every preset (a name or a Qwen3Shape) and batch; returns the results dict.

    Defaults: qwen3-0.6b and qwen3-8b at batch 1 and 8, 5 warm-up and 30 timed steps on
    a GPU; qwen3-0.6b at batch 1 with 1 and 5 on the CPU, where graph rows are absent.
    With save_to, the JSON is written after every preset ("partial": true until the end).
    """
    device = torch.device(device) if device is not None else torch.device(
        "cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    on_cuda = device.type == "cuda"
    shapes = [get_shape(p) for p in (presets or (GPU_PRESETS if on_cuda else CPU_PRESETS))]
    batches = sorted(set(batches or (GPU_BATCHES if on_cuda else CPU_BATCHES)))
    _check_settings(shapes, batches, context, repeats, warmup)
    warmup = warmup if warmup is not None else (GPU_WARMUP if on_cuda else CPU_WARMUP)
    repeats = repeats or (GPU_REPEATS if on_cuda else CPU_REPEATS)
    start = time.perf_counter()
    names = [shape.name for shape in shapes]
    bar = _Progress(2 + len(shapes) * (6 + 7 * len(batches)), progress)
    rows: list[dict] = []
    result = {
        "book": "Below the Floor",
        "what": "decode-step bench: floors, every path's time, kernels and bit-identity",
        "device": describe_device(device),
        "stamp": run_stamp(),
        "settings": {"presets": names, "batches": batches, "context": context,
                     "warmup": warmup, "repeats": repeats, "dtype": str(DTYPE).replace("torch.", ""),
                     "graph_buckets": batches, "skip_transformers": skip_transformers,
                     "skip_fused": skip_fused,
                     "max_context": bench_max_context(context, warmup, repeats),
                     "max_context_note": ("attention reads the whole static cache under a mask; "
                                          "the floor counts only the context tokens")},
        "floor_bandwidth": "copy", "configs": [], "rows": [], "parity": {}, "diagnose": {},
        "targets": [], "partial": True, "stage_s": bar.stage_s,
    }

    def checkpoint() -> None:
        result["rows"] = sorted(rows, key=lambda r: (names.index(r["preset"]), r["batch"],
                                                     PATHS.index(r["path"])))
        result["targets"] = evaluate_targets(rows)
        result["elapsed_s"] = time.perf_counter() - start
        if save_to is not None:
            save_json(result, save_to)

    try:
        bar.stage("bandwidth: copy")
        bw_repeats = 20 if on_cuda else 5
        copy = measure_bandwidth(device, kind="copy", repeats=bw_repeats)
        bar.stage("bandwidth: read")
        read = measure_bandwidth(device, kind="read", repeats=bw_repeats)
        result["bandwidth"] = {"copy": copy.to_dict(), "read": read.to_dict()}

        for shape in shapes:
            cases = {}
            for b in batches:
                moved = bytes_per_step(shape, b, context)
                cases[b] = Case(shape, b, context, moved, floor_ms(moved, copy.gbps), device,
                                warmup, repeats)
                result["configs"].append({"preset": shape.name, "batch": b, "context": context,
                                          "bytes_per_step": moved, "floor_ms": cases[b].floor_ms,
                                          "floor_ms_read": floor_ms(moved, read.gbps)})
            engine = bench_engine(shape, cases, skip_fused=skip_fused,
                                  compile_on_cpu=compile_on_cpu, rows=rows, bar=bar)
            diagnosis = engine["diagnose"]
            diagnosis["num_layers"] = shape.num_layers
            if skip_transformers:
                for b in batches:
                    rows.extend(cases[b].absent(p, "skipped (--skip-transformers)")
                                for p in ("hf eager", "hf graph", "hf compile"))
            else:
                result["parity"][shape.name] = bench_transformers(engine, cases, rows=rows, bar=bar)
            del engine
            if on_cuda:
                torch._dynamo.reset()
            _free()
            diagnosis["limits"] = _limits(rows, diagnosis)
            result["diagnose"][shape.name] = diagnosis
            checkpoint()
    except BaseException as err:
        result["error"] = f"{type(err).__name__}: {err}"[:480]
        checkpoint()
        raise
    finally:
        bar.close()
    result["partial"] = False
    checkpoint()
    return result


# ---------------------------------------------------------------- the table

def _fmt(value, spec: str, missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def format_table(result: dict) -> str:
    """The run as text: device and bandwidth, floors, one line per row, then the targets."""
    dev, bw = result["device"], result["bandwidth"]
    lines = [
        f"Below the Floor bench on {dev['name']} ({dev['kind']}), torch {dev['torch']}, "
        f"transformers {dev.get('transformers')}; {result['elapsed_s']:.0f} s"
        + (" (PARTIAL RUN)" if result.get("partial") else ""),
        f"bandwidth: copy {bw['copy']['gbps']:.1f} GB/s, read {bw['read']['gbps']:.1f} GB/s; "
        f"floors use the {result['floor_bandwidth']} bandwidth",
    ]
    for c in result["configs"]:
        lines.append(f"floor {c['preset']} b{c['batch']} ctx{c['context']}: "
                     f"{c['bytes_per_step'] / 1e9:.3f} GB / {bw['copy']['gbps']:.1f} GB/s = "
                     f"{c['floor_ms']:.3f} ms")
    header = (f"{'path':<12} {'preset':<11} {'batch':>5} {'ms':>9} {'p10-p90 ms':>17} "
              f"{'x floor':>8} {'GB/s':>8} {'kernels':>7} {'/layer':>6} {'bit-id':>6}  note")
    lines += ["", header, "-" * len(header)]
    for r in result["rows"]:
        spread = (f"{r['p10_ms']:.3f}-{r['p90_ms']:.3f}" if r["p10_ms"] is not None else "-")
        bit = {True: "yes", False: "no", None: "-"}[r["bit_identical"]]
        note = r["note"] if r["status"] != "absent" else f"absent: {r['note']}"
        if r.get("compile_s") is not None:
            note = f"compile {r['compile_s']:.1f} s; {note}" if note else f"compile {r['compile_s']:.1f} s"
        lines.append(
            f"{r['path']:<12} {r['preset']:<11} {r['batch']:>5} {_fmt(r['median_ms'], '9.3f'):>9} "
            f"{spread:>17} {_fmt(r['x_floor'], '8.2f'):>8} {_fmt(r['achieved_gbps'], '8.1f'):>8} "
            f"{_fmt(r['kernels'], 'd'):>7} {_fmt(r['kernels_per_layer'], '6.1f'):>6} {bit:>6}  {note}")
    for preset, errors in result.get("parity", {}).items():
        shown = ", ".join(f"{k} {v:.2e}" for k, v in errors.items() if k.endswith("_vs_hf"))
        lines.append(f"parity {preset}: {shown} (tolerance {errors['tolerance']:.0e})")
    for preset, d in result.get("diagnose", {}).items():
        if d.get("limits", {}).get("summary"):
            lines.append(f"limits {preset}: {d['limits']['summary']}")
    lines += ["", "targets:"]
    for t in result["targets"]:
        verdict = {True: "PASS", False: "FAIL", None: "n/a "}[t["passed"]]
        value = "" if t["value"] is None else f": {t['value']:.2f}"
        lines.append(f"  {verdict} {t['target']}{value}{' (' + t['note'] + ')' if t['note'] else ''}")
    return "\n".join(lines)


def device_slug(device_facts: dict) -> str:
    """A file-name-safe name for the device, e.g. 'nvidia-h200' or 'cpu-amd-epyc'."""
    name = re.sub(r"[^a-z0-9]+", "-", str(device_facts.get("name") or "").lower()).strip("-")
    if device_facts.get("kind") == "cpu":
        return f"cpu-{name}" if name else "cpu"
    return name or str(device_facts.get("kind") or "device")


def default_out_path(device_facts: dict) -> Path:
    """figures/bench-<device-slug>.json"""
    return Path(paths.FIGURES_DIR) / f"bench-{device_slug(device_facts)}.json"


# ---------------------------------------------------------------- the command line

def _list_arg(text: str) -> list[str]:
    return [item for item in re.split(r"[,\s]+", text.strip()) if item]


def _batch_arg(text: str) -> list[int]:
    out = []
    for item in _list_arg(text):
        try:
            value = int(item)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"batch sizes are whole numbers such as 1 or 8, got {item!r}") from None
        if not 1 <= value <= MAX_BATCH:
            raise argparse.ArgumentTypeError(
                f"batch sizes must be from 1 to {MAX_BATCH} (the largest graph bucket), got {value}")
        out.append(value)
    return out


def _positive_int(label: str, largest: int | None = None):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{label} must be a whole number, got {text!r}") from None
        if value < 1 or (largest is not None and value > largest):
            bound = f"from 1 to {largest}" if largest else ">= 1"
            raise argparse.ArgumentTypeError(f"{label} must be {bound}, got {value}")
        return value
    return parse


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of `python -m floorlab.bench`."""
    parser = argparse.ArgumentParser(
        prog="python -m floorlab.bench",
        description="Measure bandwidth, floors and every decode path; print a table, write JSON.")
    parser.add_argument("--presets", nargs="+", metavar="NAME",
                        help=f"model shapes (default on a GPU: {' '.join(GPU_PRESETS)}; on the CPU: "
                             f"{' '.join(CPU_PRESETS)}); known: {', '.join(PRESETS)}")
    parser.add_argument("--batches", nargs="+", type=_batch_arg, metavar="B",
                        help="batch sizes (default on a GPU: 1 8; on the CPU: 1)")
    parser.add_argument("--context", type=_positive_int("context", MAX_CONTEXT),
                        default=DEFAULT_CONTEXT,
                        help=f"tokens already in the cache (default {DEFAULT_CONTEXT})")
    parser.add_argument("--repeats", type=_positive_int("repeats"),
                        help=f"timed steps per row (default {GPU_REPEATS} on a GPU, "
                             f"{CPU_REPEATS} on the CPU)")
    parser.add_argument("--out", type=Path, help="JSON path (default figures/bench-<device>.json)")
    parser.add_argument("--skip-transformers", action="store_true", help="leave out the transformers rows")
    parser.add_argument("--skip-fused", action="store_true", help="leave out the fused (compiled) rows")
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    """Parsed and checked arguments; a bad value exits with a message saying how to fix it."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.presets:
        names = [n for item in args.presets for n in _list_arg(item)]
        for name in names:
            if name not in PRESETS:
                parser.error(f"unknown preset {name!r}; known presets: {', '.join(PRESETS)} "
                             "(pass one or more, e.g. --presets qwen3-0.6b qwen3-8b)")
        args.presets = names
    if args.batches:
        args.batches = sorted({b for group in args.batches for b in group})
    if args.out is not None and args.out.is_dir():
        parser.error(f"--out {args.out} is a folder; pass a file path such as {args.out / 'bench.json'}")
    return args


def main(argv=None) -> int:
    """Run the bench from the command line; prints the table and the JSON path, returns 0."""
    args = parse_args(argv)
    out = args.out or default_out_path(describe_device())
    result = run_bench(args.presets, args.batches, args.context, repeats=args.repeats,
                       skip_transformers=args.skip_transformers, skip_fused=args.skip_fused,
                       save_to=out)
    print(format_table(result))
    print(f"\nJSON written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
