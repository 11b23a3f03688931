"""Tools wing: the book's targets, checked as ratios measured in the same run; a miss carries its
measured cause."""
from __future__ import annotations

from floorlab.core.roofline import BUSY_SHARE
from floorlab.core.runs import Row
from floorlab.engine.kernels import KernelRow, kernel_rows
from floorlab.engine.kernels.layer_rows import LAYER_GEMVS

# (preset, batch, path, most x the floor) and (preset, batch, path, the path it must beat)
FLOOR_TARGETS = (("qwen3-0.6b", 1, "fused graph", 2.0),
                 ("qwen3-0.6b", 1, "plain graph", 4.0),
                 ("qwen3-8b", 1, "fused graph", 1.25),
                 ("qwen3-0.6b", 1, "triton graph", 1.5),
                 ("qwen3-8b", 1, "triton graph", 1.05))
# (preset, path, batch, most x the same path's batch-1 time): a few more rows should cost little
BATCH_TARGETS = (("qwen3-0.6b", "triton graph", 8, 1.15), ("qwen3-8b", "triton graph", 8, 1.15))
# (preset, least % of the read bandwidth each of the book's GEMV kernels of one layer reaches)
GEMV_TARGETS = (("qwen3-0.6b", 75.0),)
RACE_TARGETS = (("qwen3-0.6b", 1, "fused graph", "hf graph"),
                ("qwen3-0.6b", 1, "fused graph", "hf compile"),
                ("qwen3-0.6b", 1, "plain graph", "hf graph"),
                ("qwen3-0.6b", 1, "plain graph", "hf compile"))


def find_row(rows: list[Row], preset: str, batch: int, path: str) -> Row | None:
    return next((r for r in rows if r.preset == preset and r.batch == batch and r.path == path), None)


def _missing(row: Row | None, path: str) -> str:
    """Why a target could not be judged: the row's own note, or that the run left it out."""
    if row is None:
        return f"{path} was not measured in this run"
    return f"{path} {row.status}: {row.note}" if row.note else f"{path} {row.status}"


def _kernels(row: Row) -> str:
    if row.kernels is None:
        return "an uncounted number of kernels"
    return f"{row.kernels} kernels ({row.kernels_per_layer:.1f} per layer)"


def _host_bound(row: Row) -> str:
    """A clause when the host needs most of the step just to issue it, else ''."""
    if row.issue is None or row.issue.median_ms < BUSY_SHARE * row.median_ms:
        return ""
    return (f"the host needs {row.issue.median_ms:.3f} ms to issue its {row.median_ms:.3f} ms "
            "step, so the device waits for it")


def floor_cause(row: Row, limits: dict | None, most: float | None = None) -> str:
    """Why a measured row sits where it does above its floor, in words, from the run's limits; most: the
    target's multiple of the floor, whose room beyond it the book's kernels are set against."""
    causes = [_host_bound(row)]
    if limits and limits.get("batch") == row.batch and "gemv_only_x_floor" in limits:
        if not row.path.startswith("triton"):  # the Triton step has GEMVs of its own
            causes.append(f"the library's GEMVs alone take {limits['gemv_only_x_floor']:.2f}x "
                          "the floor")
        elif isinstance(limits.get("triton_kernels"), list):
            budget = (None if most is None or "floor_ms" not in limits
                      else (most, 1e3 * (most - 1) * limits["floor_ms"] / limits.get("num_layers", 1)))
            causes.append(layer_cause(limits["triton_kernels"], limits.get("num_layers", 1),
                                      barrier=limits.get("grid_barrier"), budget=budget))
        kernel = limits.get("kernels", {}).get(row.path, {})
        if kernel.get("overhead_us_per_kernel") is not None:
            causes.append(f"its {_kernels(row)} cost {kernel['overhead_us_per_kernel']:.1f} µs each "
                          f"beyond their bytes, with the GPU idle {kernel['gpu_idle_us']:.0f} µs")
        else:
            causes.append(f"it runs {_kernels(row)}")
        return "; ".join(c for c in causes if c) + " (limits)"
    causes.append(f"it runs {_kernels(row)}; no limits were measured at this batch")
    return "; ".join(c for c in causes if c)


def layer_cause(kernels: list, num_layers: int, barrier: dict | None = None,
                budget: tuple[float, float] | None = None) -> str:
    """The book's kernels of one layer (KernelRows or stored dicts) in words: µs beyond their bytes,
    the kernel that holds most, what their launches take empty against budget (the target's multiple,
    the µs a layer it leaves beyond the floor), and (barrier: grid_barrier_us's dict) what the same
    dependencies would take inside one persistent launch."""
    layer = [k for k in kernel_rows(kernels) if k.kernel != "lm_head"]
    worst = sorted(layer, key=lambda k: -k.beyond_us)[:2]
    beyond = sum(k.beyond_us for k in layer)
    empty = "" if any(k.empty_us is None for k in layer) else (
        f"; their {len(layer)} launches, made empty with the same grids, take "
        f"{sum(k.empty_us for k in layer):.1f} µs a layer alone" + _budget_clause(layer, budget)
        + _barrier_clause(layer, barrier))
    return (f"its kernels of one layer take {sum(k.us for k in layer):.1f} µs, {beyond:.1f} beyond their "
            f"bytes ({num_layers * beyond / 1e3:.3f} ms over {num_layers} layers), most in "
            + " and ".join(f"{k.kernel} ({k.beyond_us:.1f} µs)" for k in worst) + empty)


def _budget_clause(layer: list[KernelRow], budget: tuple[float, float] | None) -> str:
    """', ' + the layer's empty launches set against the µs a layer the target leaves beyond the floor, or ''."""
    if budget is None:
        return ""
    most, room_us = budget
    launches = sum(k.empty_us for k in layer)
    return (f", {'more than' if launches > room_us else 'within'} the {room_us:.1f} µs a layer beyond the "
            f"floor that {most:g}x leaves")


def _barrier_clause(layer: list[KernelRow], barrier: dict | None) -> str:
    """'; ' + the layer's dependencies as barriers inside one launch against its empty launches, or ''."""
    if not isinstance(barrier, dict) or "us" not in barrier:
        return ""
    n, launches = len(layer), sum(k.empty_us for k in layer)
    low, mid, high = (n * barrier[key] for key in ("p10_us", "us", "p90_us"))
    if high < launches:
        how = f"less than the launches: a persistent step could win back up to {launches - mid:.1f} µs a layer"
    elif low > launches:
        how = "more than the launches, so one persistent launch would not win the boundaries back"
    else:
        how = ("as much as the launches within the spread, so only fewer dependent steps a layer, "
               "not one launch, would win the boundaries back")
    return (f"; inside one launch, a barrier across its {barrier['programs']} programs takes "
            f"{barrier['us']:.2f} µs, {mid:.1f} µs for {n} a layer ({low:.1f}-{high:.1f}), {how}")


def batch_cause(limits: dict | None, batch: int) -> str:
    """'; ' + how the book's kernels of one layer grow from batch 1 to batch, or '' without both tables."""
    limits = limits or {}
    single, many = limits.get("triton_kernels"), limits.get("triton_kernels_at", {}).get(str(batch))
    if limits.get("batch") != 1 or not isinstance(single, list) or not isinstance(many, list):
        return ""
    at_one = {k.kernel: k.us for k in kernel_rows(single) if k.kernel != "lm_head"}
    many = [k for k in kernel_rows(many) if k.kernel in at_one]
    growth = {k.kernel: k.us - at_one[k.kernel] for k in many}
    most = sorted(growth, key=lambda name: -growth[name])[:2]
    layer = sum(k.us for k in many)
    return (f"; its kernels of one layer take {layer:.1f} µs at batch {batch} against "
            f"{sum(at_one.values()):.1f} at batch 1, most of the growth in "
            + " and ".join(f"{name} ({growth[name]:+.1f} µs)" for name in most))


def _without_wait(gemvs: list[KernelRow]) -> str:
    """'; launched without the PDL wait ...' from the rows timed without it, or '' when none was."""
    timed = [k for k in gemvs if k.pct_read_no_wait is not None]
    if not timed:
        return ""
    return ("; launched without the PDL wait (results wrong, timing only) " + ", ".join(
        f"{k.kernel} {k.pct_read_no_wait:.0f}%" for k in timed))


def race_cause(row: Row, rival: Row) -> str:
    """Why row is not faster than rival, in words: kernels and issue time side by side."""
    causes = [f"{row.path} runs {_kernels(row)} against {rival.path}'s {_kernels(rival)}",
              _host_bound(row)]
    if row.x_floor is not None and rival.x_floor is not None:
        causes.append(f"{row.x_floor:.2f}x against {rival.x_floor:.2f}x the floor")
    return "; ".join(c for c in causes if c)


def _judged(target: str, preset: str, batch: int, path: str, limit: float, needed, judge, absent: str = "") -> dict:
    """The target's row of the run: judge() -> (value, passed, why missed) once every needed (row, path)
    was measured, else why not (absent, or the first one missing)."""
    head = {"target": target, "preset": preset, "batch": batch, "path": path, "limit": limit}
    missing = next(((row, name) for row, name in needed if row is None or not row.measured), None)
    if absent or missing is not None:
        return dict(head, value=None, passed=None, note=absent or _missing(*missing))
    value, passed, why = judge()
    return dict(head, value=value, passed=passed, note="" if passed else f"missed: {why}")


def evaluate_targets(rows: list[Row], limits: dict[str, dict] | None = None) -> list[dict]:
    """Each target's value, passed (None when not measured) and a note: the cause of a miss, or why absent."""
    limits = limits or {}
    out = []
    for preset, batch, path, most in FLOOR_TARGETS:
        row = find_row(rows, preset, batch, path)
        out.append(_judged(f"{preset} b{batch}: {path} <= {most}x the floor", preset, batch, path, most,
                           [(row, path)], lambda: (row.x_floor, row.x_floor <= most, f"{row.x_floor:.2f}x; "
                                                   f"{floor_cause(row, limits.get(preset), most)}")))
    for preset, path, batch, most in BATCH_TARGETS:
        row, single = find_row(rows, preset, batch, path), find_row(rows, preset, 1, path)
        out.append(_judged(
            f"{preset}: {path} at batch {batch} <= {most}x its batch-1 time", preset, batch, path, most,
            [(row, path), (single, path)], lambda: (
                row.median_ms / single.median_ms, row.median_ms / single.median_ms <= most,
                f"{row.median_ms:.3f} ms against {single.median_ms:.3f} ms at batch 1; "
                f"{_kernels(row)}{batch_cause(limits.get(preset), batch)}")))
    for preset, least in GEMV_TARGETS:
        target = f"{preset} b1: each of the book's layer GEMVs >= {least:.0f}% of the read bandwidth"
        kernels = limits.get(preset, {}).get("triton_kernels")
        measured = isinstance(kernels, list)
        why = "" if measured else (kernels or {}).get("error", "the per-kernel table was not measured in this run")
        gemvs = [k for k in kernel_rows(kernels) if k.kernel in LAYER_GEMVS] if measured else []
        out.append(_judged(target, preset, 1, "triton kernels", least, [], lambda: (
            min(k.pct_read for k in gemvs), all(k.pct_read >= least for k in gemvs),
            ", ".join(f"{k.kernel} {k.pct_read:.0f}%" for k in gemvs) + _without_wait(gemvs)), absent=why))
    for preset, batch, path, rival_path in RACE_TARGETS:
        row, rival = find_row(rows, preset, batch, path), find_row(rows, preset, batch, rival_path)
        out.append(_judged(f"{preset} b{batch}: {path} faster than {rival_path}", preset, batch, path, 1.0,
                           [(row, path), (rival, rival_path)], lambda: (
                               row.median_ms / rival.median_ms, row.median_ms < rival.median_ms,
                               f"{row.median_ms / rival.median_ms:.2f}x {rival_path}'s time; "
                               f"{race_cause(row, rival)}")))
    return out
