"""Core wing: the host is part of the run: its CPU, the book's version that measured it, and what
the host pays to dispatch one eager operation, measured here rather than taken from elsewhere."""
from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import torch

from floorlab.core import paths
from floorlab.core.device import cpu_name, cpuinfo, resolve_device
from floorlab.core.numbers import whole_number
from floorlab.core.prose import fmt_band, sig
from floorlab.core.timing import Comparison, Timing, compare

LAUNCHES_PER_SAMPLE = 200  # tiny launches timed together: one is too short for a clock to see
DISPATCH_SAMPLES = 30  # samples of that many launches, for the median and the p10-p90 band
SEED_DISPATCH_US = (5.0, 20.0)  # the laptop study's quoted cost of one eager dispatch: a lead, never a verdict


def read_cpu() -> dict:
    """The host CPU: its model, its logical cores and its clock in MHz (the highest where Linux reports one, else the
    current one; None where neither can be read)."""
    try:
        clock = int(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()) / 1e3
    except (OSError, ValueError):
        try:
            clock = float(cpuinfo()["cpu MHz"])
        except (KeyError, ValueError):
            clock = None
    return {"model": cpu_name() or None, "cores": os.cpu_count(), "clock_mhz": clock}


@lru_cache(maxsize=1)
def book_version() -> str:
    """The book that measured a run: `git describe` in a source checkout, else the package's version."""
    root = paths.source_checkout()
    if root is not None and (root / ".git").exists():
        try:
            done = subprocess.run(["git", "describe", "--always", "--dirty", "--tags"], cwd=root,
                                  capture_output=True, text=True, timeout=10)
            if done.returncode == 0 and done.stdout.strip():
                return f"git {done.stdout.strip()}"
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        return f"floorlab {metadata.version('floorlab')}"
    except metadata.PackageNotFoundError:
        return "unknown"


def measure_dispatch(device=None, *, launches: int = LAUNCHES_PER_SAMPLE,
                     samples: int = DISPATCH_SAMPLES) -> Timing:
    """What the host pays to launch one tiny eager operation (an in-place add on one element) from Python on device: a
    Timing in ms per launch (µs × 1e-3), over `samples` runs of `launches`."""
    device = resolve_device(device)
    x = torch.zeros(1, device=device)
    on_cuda = device.type == "cuda"

    def burst() -> float:
        if on_cuda:
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        for _ in range(launches):
            x.add_(1)
        return (time.perf_counter() - t0) * 1e3 / launches

    for _ in range(3):
        burst()
    timing = Timing.from_samples([burst() for _ in range(samples)])
    if on_cuda:
        torch.cuda.synchronize(device)
    return timing


@dataclass
class Host:
    """The machine behind the device: its CPU and, when measured, its cost per eager launch."""

    cpu: str | None
    cores: int | None
    clock_mhz: float | None = None
    dispatch: Timing | None = None  # ms per launch of a tiny op from Python (µs = × 1e3)
    dispatch_device: str | None = None  # where the launches went: "cuda" or "cpu"
    launches: int = LAUNCHES_PER_SAMPLE  # launches timed together in each sample of dispatch

    def __str__(self) -> str:
        clock = f", {sig(self.clock_mhz / 1e3)} GHz" if self.clock_mhz else ""
        return f"{self.cpu or 'an unnamed CPU'} ({self.cores or '?'} cores{clock})"

    def dispatch_line(self) -> str:
        """'4.93 µs (p10-p90 4.85-5.10, n=30 runs of 200), an add on cuda', or why there is none."""
        if self.dispatch is None:
            return "not measured on this host"
        d = self.dispatch
        return (f"{sig(d.median_ms * 1e3)} µs ({fmt_band(d.p10_ms * 1e3, d.p90_ms * 1e3)}, "
                f"n={len(d.samples_ms)} runs of {self.launches}), an add on {self.dispatch_device}")

    def dispatch_note(self) -> str:
        """A one-line warning, in µs, when the price per launch is noisy, else ''."""
        return self.dispatch.noise_note("the price per launch", scale=1e3, unit="µs") if self.dispatch else ""

    def to_dict(self) -> dict:
        return {"cpu": self.cpu, "cores": self.cores, "clock_mhz": self.clock_mhz,
                "dispatch": self.dispatch.to_dict() if self.dispatch else None,
                "dispatch_device": self.dispatch_device, "launches": self.launches}

    @classmethod
    def from_dict(cls, data: dict) -> "Host":
        data = dict(data)
        data["dispatch"] = Timing.from_dict(data["dispatch"]) if data.get("dispatch") else None
        return cls(**data)


def read_host(device=None, *, dispatch: bool = True) -> Host:
    """This host's CPU and, with dispatch=True, its measured cost per eager launch on device."""
    cpu = read_cpu()
    device = resolve_device(device)
    return Host(cpu=cpu["model"], cores=cpu["cores"], clock_mhz=cpu["clock_mhz"],
                dispatch=measure_dispatch(device) if dispatch else None,
                dispatch_device=device.type if dispatch else None)


# A step's gap per launch set beside the host's measured cost per launch.

def gap_per_launch(eager: Timing, floor_ms: float, launches: int) -> Timing:
    """The step's time above its floor spread over its launches, for each timed step: a Timing in
    ms per launch, so its band is the step's own band, moved and scaled."""
    launches = whole_number(launches, "launches", hint="pass the counted launches")
    samples = eager.samples_ms or [eager.p10_ms, eager.median_ms, eager.p90_ms]
    return Timing.from_samples([max(s - floor_ms, 0.0) / launches for s in samples])


@dataclass(frozen=True)
class DispatchComparison:
    """A gap per launch beside the host's measured cost per launch, and which outcome it is."""

    gap: Timing  # ms per launch
    dispatch: Timing  # ms per launch
    comparison: Comparison

    @property
    def outcome(self) -> str:
        """"larger" or "smaller" when the bands are apart; "consistent" when they overlap and
        neither is noisy; "cannot tell" when they overlap only because a band is wide."""
        if self.comparison.meaningful:
            return "larger" if self.comparison.ratio > 1 else "smaller"
        return "cannot tell" if self.comparison.noisy else "consistent"

    def says(self) -> str:
        """One or two sentences for this outcome, with the numbers behind it."""
        gap_us, cost_us = self.gap.median_ms * 1e3, self.dispatch.median_ms * 1e3
        head = (f"The gap per launch, {sig(gap_us)} µs, is {sig(self.comparison.ratio)}× what this "
                f"host was measured to pay per tiny launch ({sig(cost_us)} µs)")
        return head + {
            "consistent": ", and the two bands overlap: launches at this host's price are "
                          "enough to fill the gap.",
            "larger": ", beyond both spreads: the gap holds more than bare launches. The "
                      "step's own Python between its launches, or the operators themselves, "
                      "take the rest; the issue and busy times say which.",
            "smaller": ", below it beyond both spreads: the host's launches overlap the time "
                       "the device spends streaming the bytes, so part of their cost hides "
                       "under the floor.",
            "cannot tell": ", but a band is too wide to say more: this run cannot tell the gap "
                           "per launch from the host's cost per launch. Run it again on a quieter "
                           "machine.",
        }[self.outcome]


def compare_dispatch(gap: Timing, dispatch: Timing) -> DispatchComparison:
    """The gap per launch against the host's cost per launch, by the book's one rule (compare)."""
    return DispatchComparison(gap, dispatch, compare(gap, dispatch))
