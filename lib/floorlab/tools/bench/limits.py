"""Tools wing: what holds a path above its floor: each GEMV's own bandwidth (every layer's weights in one
CUDA graph) and each engine path's kernels, busy and idle µs from its steady timeline."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from floorlab.core.roofline import achieved_gbps, overhead_us_per_kernel
from floorlab.core.runs import Row
from floorlab.core.timelines import Timeline, kernel_table, steady_timeline
from floorlab.core.timing import time_ms
from floorlab.engine.graphs import capture_graph
from floorlab.engine.kernels import grid_barrier_us, layer_kernel_rows
from floorlab.engine.kernels.layer_rows import LAYER_GEMVS

from .rows import Case, error_text
from .settings import ENGINE_PATHS
from .targets import find_row

GEMV_NAMES = ("qkv", "o_proj", "gate_up", "down")
REPLAYED_NOTE = "profiled on the eager step the graph replays"
NO_TIMELINE = ("GPU busy and idle time need a CUDA GPU: on the CPU the operators run on the host "
               "that issues them")


def gemv_facts(weights: list[torch.Tensor], case: Case) -> dict:
    """ms and GB/s of one F.linear on a [batch, in] input: the mean over every layer's weight, back to back."""
    x = torch.randn(case.batch, weights[0].shape[1], dtype=weights[0].dtype, device=case.device)

    def all_layers():
        for weight in weights:
            F.linear(x, weight)

    fn = all_layers
    if case.device.type == "cuda":
        graph, _ = capture_graph(all_layers, warmup=1)
        fn = graph.replay
    ms = time_ms(fn, warmup=case.warmup, repeats=case.repeats, device=case.device).median_ms
    per_call_ms = ms / len(weights)
    nbytes = weights[0].numel() * weights[0].element_size()
    return {"shape": list(weights[0].shape), "bytes": nbytes, "ms": per_call_ms,
            "gbps": achieved_gbps(nbytes, per_call_ms)}


def kernel_facts(label: str, fn, fallback, case: Case, timed_ms: float | None) -> tuple[dict, Timeline]:
    """Kernels, GPU busy and idle µs and µs per kernel beyond the floor, from fn's steady timeline."""
    timeline = steady_timeline(fn, label=label, device=case.device, timed_ms=timed_ms)
    note = ""
    if timeline.kernels == 0 and fallback is not None:
        timeline = steady_timeline(fallback, label=label, device=case.device, timed_ms=timed_ms)
        note = REPLAYED_NOTE
    kernels, busy_us = timeline.kernels, timeline.gpu_busy_us
    overhead = (overhead_us_per_kernel(busy_us / 1e3, case.floor.floor_ms, kernels)
                if kernels and busy_us > 0 else None)
    return {"kernels": kernels or None,
            "kernels_per_layer": kernels / case.shape.num_layers if kernels else None,
            "gpu_busy_us": busy_us, "gpu_idle_us": timeline.gpu_idle_us, "span_us": timeline.span_us,
            "overhead_us_per_kernel": overhead,
            "note": "; ".join(n for n in (note, timeline.note, timeline.profiler_note()) if n),
            "top_kernels": kernel_table(timeline, top=8)}, timeline


def measure_limits(engine, case: Case, rows: list[Row]) -> tuple[dict, dict[str, Timeline]]:
    """(facts, timelines) of the engine at case's batch: GEMVs, each path's kernels, the verdict."""
    model = engine.model
    head = model.embed if model.lm_head is None else model.lm_head
    groups = {name: [getattr(layer, name) for layer in model.layers] for name in GEMV_NAMES}
    groups["lm_head"] = [head]
    gemv = {name: gemv_facts(weights, case) for name, weights in groups.items()}
    largest = max(gemv, key=lambda n: gemv[n]["bytes"])
    gemv_only_ms = (case.shape.num_layers * sum(gemv[n]["ms"] for n in GEMV_NAMES)
                    + gemv["lm_head"]["ms"])
    facts = {"preset": case.shape.name, "batch": case.batch, "floor_ms": case.floor.floor_ms,
             "floor_gbps": case.floor.bandwidth_gbps, "num_layers": case.shape.num_layers,
             "gemv": gemv, "largest_gemv": {"name": largest, **gemv[largest]},
             "gemv_only_ms": gemv_only_ms, "gemv_only_x_floor": gemv_only_ms / case.floor.floor_ms,
             "kernels": {}}
    timelines: dict[str, Timeline] = {}
    if case.device.type != "cuda":
        facts["kernels_note"] = NO_TIMELINE
    else:
        for path, (fn, fallback) in engine.steps(case.batch).items():
            row = find_row(rows, case.shape.name, case.batch, path)
            try:
                facts["kernels"][path], timelines[case.key(path)] = kernel_facts(
                    case.key(path), fn, fallback, case, row.median_ms if row else None)
            except Exception as err:
                facts["kernels"][path] = {"error": error_text(err)}
        facts["triton_kernels"] = triton_kernel_table(engine, case)
        facts["grid_barrier"] = grid_barrier_facts(case)
    facts["verdict"] = verdict(facts, rows)
    return facts, timelines


def triton_kernel_table(engine, case: Case) -> list[dict] | dict:
    """The book's kernels of one layer, each timed over every layer, as the run stores them, or {"error": ...}."""
    try:
        _, _, positions = engine.data[case.batch]
        rows = layer_kernel_rows(engine.model, positions, read_gbps=case.floor.bandwidth_gbps,
                                 warmup=case.warmup, repeats=case.repeats)
        return [row.to_dict() for row in rows]
    except Exception as err:
        return {"error": error_text(err)}


def grid_barrier_facts(case: Case) -> dict:
    """A barrier across one program per SM inside one launch, as many rounds as the book's step has
    dependent launches (its layers' kernels), or {"error": ...}: the persistent kernel's boundary."""
    try:
        sms = torch.cuda.get_device_properties(case.device).multi_processor_count
        return grid_barrier_us(sms, 4, rounds=(len(LAYER_GEMVS) + 1) * case.shape.num_layers, device=case.device,
                               warmup=case.warmup, repeats=case.repeats)
    except Exception as err:
        return {"error": error_text(err)}


def verdict(facts: dict, rows: list[Row]) -> dict:
    """What the fastest engine path spends beyond the floor: its GEMVs, then everything else."""
    engine = [r for r in rows if r.measured and r.path in ENGINE_PATHS
              and r.preset == facts["preset"] and r.batch == facts["batch"]]
    best = min(engine, key=lambda r: r.median_ms, default=None)
    if best is None:
        return {"summary": "no engine path was measured at this batch, so nothing to explain"}
    other_ms = best.median_ms - facts["gemv_only_ms"]
    largest = facts["largest_gemv"]
    kernel = facts["kernels"].get(best.path, {})
    text = (f"{best.path} {best.median_ms:.3f} ms = {best.x_floor:.2f}x the floor; the library's "
            f"GEMVs alone (cuBLAS, back to back) take {facts['gemv_only_ms']:.3f} ms "
            f"({facts['gemv_only_x_floor']:.2f}x), the largest ({largest['name']}) reaching "
            f"{largest['gbps']:.0f} of the {facts['floor_gbps']:.0f} GB/s the floor assumes; ")
    if other_ms <= 0:
        text += ("the step beats those GEMVs, so what holds it is how close its own kernels "
                 "stream to the bandwidth")
    else:
        text += (f"the other {other_ms:.3f} ms go to {best.kernels if best.kernels else '?'} "
                 f"kernels ({best.kernels_per_layer or 0:.1f} per layer) and the gaps between them")
    if kernel.get("overhead_us_per_kernel") is not None:
        text += (f" (GPU busy {kernel['gpu_busy_us'] / 1e3:.3f} ms, idle "
                 f"{kernel['gpu_idle_us'] / 1e3:.3f} ms; {kernel['overhead_us_per_kernel']:.1f} µs "
                 "per kernel beyond the floor's bytes)")
    return {"path": best.path, "ms": best.median_ms, "x_floor": best.x_floor,
            "gemv_only_ms": facts["gemv_only_ms"], "other_ms": other_ms,
            "kernels": best.kernels, "kernels_per_layer": best.kernels_per_layer, "summary": text}
