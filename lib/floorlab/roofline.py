"""Roofline arithmetic for one decode step: bytes moved, the floor, the gap.

Plain arithmetic, no torch. GB means 1e9 bytes throughout, so that
1.19 GB / 380 GB/s = 3.13 ms reads the same in code as on the page.
"""
from __future__ import annotations

import math
import warnings

BYTES_PER_GB = 1e9
NOISE_TOLERANCE = 0.95


class BelowFloorWarning(UserWarning):
    """A measurement came in below the roofline floor: the work cannot have happened."""


class BelowFloorError(RuntimeError):
    """A measurement came in below the roofline floor (raised when check_floor is strict)."""


def _require_number(name: str, value: float, *, positive: bool, hint: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}; {hint}") from None
    if math.isnan(number) or math.isinf(number):
        raise ValueError(f"{name} must be finite, got {value!r}; {hint}")
    if positive and number <= 0:
        raise ValueError(f"{name} must be greater than 0, got {value!r}; {hint}")
    if not positive and number < 0:
        raise ValueError(f"{name} must not be negative, got {value!r}; {hint}")
    return number


def bytes_per_step(shape, batch_size: int, context_len: int, dtype_bytes: int = 2) -> int:
    """Bytes one decode step must read: every weight once plus the KV cache of every sequence."""
    if int(batch_size) != batch_size or batch_size < 1:
        raise ValueError(f"batch_size must be a whole number >= 1, got {batch_size!r}")
    if int(context_len) != context_len or context_len < 0:
        raise ValueError(
            f"context_len must be a whole number >= 0 (tokens already in the cache), got {context_len!r}"
        )
    if dtype_bytes not in (1, 2, 4, 8):
        raise ValueError(f"dtype_bytes must be 1, 2, 4 or 8 (bf16 is 2), got {dtype_bytes!r}")
    weights = int(shape.weight_bytes(dtype_bytes))
    kv = int(batch_size) * int(context_len) * int(shape.kv_bytes_per_token(dtype_bytes))
    return weights + kv


def floor_ms(bytes_moved: float, bandwidth_gbps: float) -> float:
    """Fastest possible time in ms to move bytes_moved at bandwidth_gbps (GB = 1e9 bytes)."""
    bytes_moved = _require_number(
        "bytes_moved", bytes_moved, positive=False,
        hint="pass the bytes one step reads, e.g. bytes_per_step(shape, 1, 16)",
    )
    bandwidth_gbps = _require_number(
        "bandwidth_gbps", bandwidth_gbps, positive=True,
        hint="pass a measured bandwidth in GB/s, e.g. measure_bandwidth().gbps",
    )
    return bytes_moved / (bandwidth_gbps * BYTES_PER_GB) * 1e3


def achieved_gbps(bytes_moved: float, ms: float) -> float:
    """Bandwidth in GB/s that moving bytes_moved in ms milliseconds amounts to."""
    bytes_moved = _require_number(
        "bytes_moved", bytes_moved, positive=False,
        hint="pass the bytes one step reads, e.g. bytes_per_step(shape, 1, 16)",
    )
    ms = _require_number("ms", ms, positive=True, hint="pass a measured time in milliseconds")
    return bytes_moved / (ms * 1e-3) / BYTES_PER_GB


def gap_ms(measured_ms: float, floor_ms: float) -> float:
    """Time in ms the measurement spends above the floor (negative if it beat the floor)."""
    measured_ms = _require_number(
        "measured_ms", measured_ms, positive=False, hint="pass a measured time in milliseconds"
    )
    floor = _require_number(
        "floor_ms", floor_ms, positive=False, hint="pass the floor from floor_ms(bytes, gbps)"
    )
    return measured_ms - floor


def per_launch_us(gap_ms: float, launches: int) -> float:
    """Microseconds of the gap that fall to each launch: gap_ms / launches, in us."""
    gap = _require_number(
        "gap_ms", gap_ms, positive=False,
        hint="pass measured_ms - floor_ms; a negative gap means the measurement beat the floor",
    )
    launches = _require_number(
        "launches", launches, positive=True,
        hint="pass the number of launches per step, e.g. count_launches(...).kernels or 28 * 10",
    )
    return gap / launches * 1e3


def check_floor(measured_ms: float, floor_ms: float, *, what: str = "decode step",
                strict: bool = False) -> float:
    """Return measured_ms / floor_ms; warn (or raise when strict) if the measurement beats the floor."""
    measured_ms = _require_number(
        "measured_ms", measured_ms, positive=False, hint="pass a measured time in milliseconds"
    )
    floor = _require_number(
        "floor_ms", floor_ms, positive=True, hint="pass the floor from floor_ms(bytes, gbps)"
    )
    ratio = measured_ms / floor
    if ratio < NOISE_TOLERANCE:
        message = (
            f"{what}: measured {measured_ms:.3f} ms is below the roofline floor of "
            f"{floor:.3f} ms ({ratio:.2f}x the floor). The work cannot have happened in that "
            "time: look for an unsynchronised timer that does not wait for the GPU, "
            "work that was skipped, or a result that was cached."
        )
        if strict:
            raise BelowFloorError(message)
        warnings.warn(message, BelowFloorWarning, stacklevel=2)
    return ratio


def what_if_ms(step_ms: float, *, saved_ms: float, issue_ms: float | None = None) -> float:
    """Step time in ms once a fix removes saved_ms of device work; never below the host's issue time."""
    step_ms = _require_number("step_ms", step_ms, positive=True, hint="pass a measured step time in ms")
    saved_ms = _require_number("saved_ms", saved_ms, positive=False, hint="pass the ms the fix removes")
    remaining = max(step_ms - saved_ms, 0.0)
    if issue_ms is None:
        return remaining
    issue_ms = _require_number("issue_ms", issue_ms, positive=False, hint="pass issue_time_ms(...).median_ms")
    return max(remaining, issue_ms)


DISPATCH_US = (5.0, 20.0)  # what eager PyTorch pays to dispatch one operation, per the laptop study


def diagnose_gap(*, eager_ms: float, floor_ms: float, launches: int,
                 issue_ms: float | None = None, busy_ms: float | None = None) -> str:
    """A few sentences naming which candidate the numbers support: dispatch or slow work."""
    gap = gap_ms(eager_ms, floor_ms)
    us = per_launch_us(gap, launches)
    lines = [f"gap per launch: {gap:.3f} ms ÷ {launches} = {us:.1f} µs "
             f"(eager dispatch costs {DISPATCH_US[0]:.0f}-{DISPATCH_US[1]:.0f} µs)."]
    if eager_ms < 1.25 * floor_ms:
        lines.append(f"The step runs at {eager_ms / floor_ms:.2f}× the floor: there is hardly "
                     "a gap to explain. Verdict: on this machine the bytes set the pace and "
                     "the launches are cheap beside them.")
    elif issue_ms is not None and issue_ms >= 0.8 * eager_ms:
        share = "as long as" if issue_ms >= eager_ms else f"{issue_ms / eager_ms:.0%} of"
        lines.append(f"The host needs {issue_ms:.2f} ms just to issue the step, {share} "
                     f"the {eager_ms:.2f} ms the step takes: the device waits for the CPU. "
                     "Verdict: the floor holds and the gap is dispatch.")
        if busy_ms is not None:
            lines.append(f"The device is busy for {busy_ms:.2f} ms of it, "
                         f"{busy_ms / floor_ms:.1f}× the floor: after the launches, "
                         "its own kernels are the next cost.")
    elif us <= 2 * DISPATCH_US[1]:
        lines.append("That is about what a dispatch costs. Verdict: the gap is consistent "
                     "with launch overhead, as in the laptop study.")
    else:
        lines.append("That is far more than a dispatch costs, so launches cannot fill the "
                     "gap. Verdict: the time is inside the operators themselves, which run "
                     "well below the streaming bandwidth.")
        if busy_ms is not None:
            lines.append(f"Operators are busy for {busy_ms:.2f} ms of the "
                         f"{eager_ms:.2f} ms step.")
    return "\n".join(lines)
