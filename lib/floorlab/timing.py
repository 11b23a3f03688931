"""Timing a step the honest way: warm up, wait for the device, report a median and a spread.

On CUDA each repeat is timed with a pair of CUDA events, so the time is the
GPU's own; on the CPU, which is synchronous, a wall clock is enough.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import torch

from floorlab.device import resolve_device


@dataclass
class Timing:
    """Summary of repeated timings, every field in milliseconds."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    min_ms: float
    max_ms: float
    samples_ms: list[float] = field(default_factory=list)

    @property
    def spread_ms(self) -> float:
        """Width of the p10-p90 band in ms."""
        return self.p90_ms - self.p10_ms

    def __str__(self) -> str:
        return (
            f"{self.median_ms:.2f} ms (p10-p90 {self.p10_ms:.2f}-{self.p90_ms:.2f}, "
            f"n={len(self.samples_ms)})"
        )

    def to_dict(self) -> dict:
        """Plain dict of every field plus spread_ms, ready for JSON."""
        out = asdict(self)
        out["spread_ms"] = self.spread_ms
        return out

    @classmethod
    def from_samples(cls, samples_ms: list[float]) -> "Timing":
        """Build a Timing from raw samples in ms."""
        if not samples_ms:
            raise ValueError("need at least one sample; pass repeats >= 1")
        samples = [float(s) for s in samples_ms]
        return cls(
            median_ms=statistics.median(samples),
            p10_ms=_percentile(samples, 10),
            p90_ms=_percentile(samples, 90),
            min_ms=min(samples),
            max_ms=max(samples),
            samples_ms=samples,
        )


def _percentile(samples: list[float], q: float) -> float:
    """Linear-interpolated q-th percentile (the same rule as numpy's default)."""
    ordered = sorted(samples)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _check_counts(warmup: int, repeats: int) -> None:
    if int(warmup) != warmup or warmup < 0:
        raise ValueError(f"warmup must be a whole number >= 0, got {warmup!r}")
    if int(repeats) != repeats or repeats < 1:
        raise ValueError(f"repeats must be a whole number >= 1, got {repeats!r}")


def _repeat_range(repeats: int, progress: str | None):
    if progress is None:
        return range(repeats)
    from tqdm import tqdm  # a text bar: works in a terminal, JupyterLab and nbval alike

    return tqdm(range(repeats), desc=str(progress), leave=False)


def time_ms(fn: Callable[[], object], *, warmup: int = 3, repeats: int = 20, device=None,
            progress: str | None = None) -> Timing:
    """Time fn() repeats times after warmup calls; returns a Timing in ms (CUDA events on GPU)."""
    _check_counts(warmup, repeats)
    device = resolve_device(device)
    on_cuda = device.type == "cuda"

    for _ in range(warmup):
        fn()
    if on_cuda:
        torch.cuda.synchronize(device)

    samples: list[float] = []
    if on_cuda:
        events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(repeats)
        ]
        stream = torch.cuda.current_stream(device)
        for i in _repeat_range(repeats, progress):
            start, end = events[i]
            start.record(stream)
            fn()
            end.record(stream)
        torch.cuda.synchronize(device)
        samples = [start.elapsed_time(end) for start, end in events]
    else:
        for _ in _repeat_range(repeats, progress):
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e3)
    return Timing.from_samples(samples)


def issue_time_ms(fn: Callable[[], object], *, warmup: int = 3, repeats: int = 20,
                  device=None) -> Timing:
    """Host time in ms to issue fn() without waiting for the GPU to finish it; returns a Timing."""
    _check_counts(warmup, repeats)
    device = resolve_device(device)
    on_cuda = device.type == "cuda"

    for _ in range(warmup):
        fn()
    samples: list[float] = []
    for _ in range(repeats):
        if on_cuda:
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        if on_cuda:
            torch.cuda.synchronize(device)
        samples.append((t1 - t0) * 1e3)
    return Timing.from_samples(samples)


def unsynchronised_time_ms(fn: Callable[[], object], *, repeats: int = 20) -> float:
    """Mean ms per call from a wall clock around a loop, never waiting for the GPU.

    Wrong on purpose: on a GPU it measures how fast the host queues work, not how
    fast the work runs, so it can beat the roofline floor. The floor test catches it.
    """
    if int(repeats) != repeats or repeats < 1:
        raise ValueError(f"repeats must be a whole number >= 1, got {repeats!r}")
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - t0) * 1e3 / repeats
