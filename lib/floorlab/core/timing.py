"""Core wing: timing a step the honest way: warm up, wait for the device, report a median and a spread.
CUDA events time the GPU's own work (a wall clock on a CPU); the host's time to issue a step comes from one loop."""
from __future__ import annotations

import math
import statistics
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Callable

import torch

from floorlab.core.device import resolve_device
from floorlab.core.numbers import nonnegative_number, whole_number
from floorlab.core.progress import progress_bar
from floorlab.core.prose import fmt_band, fmt_times, sig

IN_FLIGHT = 2  # calls the timing loop lets the host queue ahead of the device
SETTLE_MAX_CALLS = 20  # most extra warm-up calls on a CPU before timing starts anyway
SETTLE_MAX_S = 2.0  # most seconds of extra warm-up on a CPU: slow calls settle in a few
SETTLE_TOLERANCE = 0.15  # three calls within 15% of each other count as settled
NOISY_SPREAD = 0.25  # a p10-p90 band wider than this share of the median is flagged as noisy


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

    @property
    def noisy(self) -> bool:
        """True when the p10-p90 band is wider than NOISY_SPREAD of the median (Band.noisy)."""
        return band_of(self).noisy

    def noise_note(self, what: str = "this timing", *, scale: float = 1.0, unit: str = "ms") -> str:
        """A one-line warning for a noisy timing, its band in unit (scale per ms), else ''."""
        if not self.noisy:
            return ""
        return (f"warning: {what} is noisy ({fmt_band(self.p10_ms * scale, self.p90_ms * scale)} {unit}, "
                f"{self.spread_ms / self.median_ms:.0%} of the median): a busy machine, or a "
                "step too short to time steadily, spreads it. Re-run it before reading much into it.")

    def __str__(self) -> str:
        """'2.08 ms (p10-p90 2.07-2.09, n=50)': three significant figures, all a spread allows."""
        return f"{sig(self.median_ms)} ms ({fmt_band(self.p10_ms, self.p90_ms)}, n={len(self.samples_ms)})"

    def to_dict(self) -> dict:
        out = asdict(self)
        out["spread_ms"] = self.spread_ms
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Timing":
        fields = {k: data[k] for k in ("median_ms", "p10_ms", "p90_ms", "min_ms", "max_ms")}
        return cls(**fields, samples_ms=list(data.get("samples_ms", [])))

    @classmethod
    def from_samples(cls, samples_ms: list[float]) -> "Timing":
        """Build a Timing from raw samples in ms (each finite and not negative)."""
        if isinstance(samples_ms, (str, bytes)) or not hasattr(samples_ms, "__len__") or not samples_ms:
            raise ValueError("need a list of at least one sample in ms; pass repeats >= 1")
        try:
            samples = [float(s) for s in samples_ms]
        except (TypeError, ValueError):
            raise ValueError(f"samples must be numbers of ms, got {list(samples_ms)[:3]!r}...") from None
        for s in samples:
            nonnegative_number(s, f"every one of the {len(samples)} samples in ms",
                               hint="check the clock that made them")
        return cls(statistics.median(samples), _percentile(samples, 10), _percentile(samples, 90), min(samples),
                   max(samples), samples)


@dataclass(frozen=True)
class Band:
    """A measured quantity that is not one timing: its median and the p10-p90 band around it."""

    median: float
    low: float
    high: float

    @classmethod
    def exact(cls, value: float) -> "Band":
        """A value known exactly (a floor, a threshold): a band of zero width."""
        return cls(float(value), float(value), float(value))

    @property
    def noisy(self) -> bool:
        """True when the band is wider than NOISY_SPREAD of the median."""
        return self.high - self.low > NOISY_SPREAD * abs(self.median)


def band_of(value) -> Band:
    """A Timing, a Row (its timing), a Band or a plain number, as a Band."""
    timing = getattr(value, "timing", value)
    if timing is None:
        raise ValueError("compare needs two measured timings; a row that was not measured has none")
    if isinstance(timing, Band):
        return timing
    if isinstance(timing, Timing):
        return Band(timing.median_ms, timing.p10_ms, timing.p90_ms)
    return Band.exact(timing)


def ratio_band(top, bottom) -> Band:
    """top over bottom (Timings, Rows or Bands), banded by their spreads: p10 ÷ p90 to p90 ÷ p10."""
    a, b = band_of(top), band_of(bottom)
    return Band(a.median / b.median, a.low / b.high, a.high / b.low)


_said: list | None = None  # (sentence, Comparison) for each verdict, while recorded_verdicts() runs


@contextmanager
def recorded_verdicts():
    """Collect every sentence Comparison.verdict chooses, with its Comparison, while the block runs."""
    global _said
    outer, _said = _said, []
    try:
        yield _said
    finally:
        heard, _said = _said, outer
        if outer is not None:
            outer.extend(heard)


@dataclass(frozen=True)
class Comparison:
    """Two measured quantities set side by side: the ratio of their medians, and whether it means
    anything (the book's one rule: their p10-p90 bands do not overlap)."""

    ratio: float  # first median over second median (nan when the second is 0)
    meaningful: bool  # their p10-p90 bands do not overlap
    noisy: bool  # either is noisy (p10-p90 wider than NOISY_SPREAD of its median)
    above: bool | None = None  # the first median above the second (None: read it from ratio)

    @property
    def outcome(self) -> str:
        """'more' when the first lies above the second beyond both bands, 'less' when below,
        'untold' when the bands overlap."""
        if not self.meaningful:
            return "untold"
        above = self.ratio > 1 if self.above is None else self.above
        return "more" if above else "less"

    def verdict(self, more: str, less: str, untold: str) -> str:
        """The one of three sentences this run supports (see outcome); each may hold {ratio} (first ÷ second) and
        {inverse}, written as multiples ('1.81×')."""
        chosen = {"more": more, "less": less, "untold": untold}[self.outcome]
        if "{ratio}" in chosen or "{inverse}" in chosen:
            chosen = chosen.format(ratio=fmt_times(self.ratio), inverse=fmt_times(1 / self.ratio))
        if _said is not None:
            _said.append((chosen, self))
        return chosen

    def says(self, first: str, second: str) -> str:
        """One sentence: the ratio when it means something, else why it does not."""
        taken = f"{first} takes {{ratio}} the time of {second}"
        return self.verdict(taken, taken, f"{first} and {second} differ by less than their spreads "
                            "({ratio} at the medians), so this run cannot tell them apart")


def tally(named: dict, more: str, less: str, untold: str) -> str:
    """Several comparisons at once: a clause per outcome that occurred (more, less, untold), joined by '; '; each
    may hold {names} (the items with that outcome), {count} and {of} (how many in all); an empty one is left out."""
    groups = {"more": [], "less": [], "untold": []}
    for name, comparison in named.items():
        groups[comparison.outcome].append(name)
    clauses = [form.format(names=", ".join(groups[key]), count=len(groups[key]), of=len(named))
               for key, form in (("more", more), ("less", less), ("untold", untold))
               if groups[key] and form]
    sentence = "; ".join(clauses)
    if _said is not None:
        _said.append((sentence, tuple(named.values())))
    return sentence


def compare(first, second) -> Comparison:
    """The book's one rule for comparing two measured quantities (Timings, Rows, Bands or exact
    numbers): a difference means something only when the two p10-p90 bands do not overlap."""
    a, b = band_of(first), band_of(second)
    apart = a.low > b.high or b.low > a.high
    ratio = a.median / b.median if b.median else math.nan
    return Comparison(ratio=ratio, meaningful=apart, noisy=a.noisy or b.noisy, above=a.median > b.median)


def _percentile(samples: list[float], q: float) -> float:
    """Linear-interpolated q-th percentile (the same rule as numpy's default)."""
    ordered = sorted(samples)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _wall_ms(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def _settle(fn: Callable[[], object]) -> int:
    """On a CPU, call fn until three calls in a row agree within SETTLE_TOLERANCE (a CPU fresh from a compile
    runs its first calls slow); returns the calls made."""
    recent: list[float] = []
    start = time.perf_counter()
    for calls in range(1, SETTLE_MAX_CALLS + 1):
        recent = (recent + [_wall_ms(fn)])[-3:]
        settled = max(recent) <= (1 + SETTLE_TOLERANCE) * min(recent)
        if len(recent) == 3 and (settled or time.perf_counter() - start >= SETTLE_MAX_S):
            return calls
    return SETTLE_MAX_CALLS


def _timed_loop(fn: Callable[[], object], *, warmup: int, repeats: int, device,
                progress: str | None) -> tuple[list[float], list[float]]:
    """(step ms, host issue ms) for each of `repeats` back-to-back calls after warm-up; at most IN_FLIGHT calls queue
    ahead of the device, so the host never stalls on a full launch queue and the issue time stays its own."""
    whole_number(warmup, "warmup", at_least=0, hint="pass how many untimed calls to run first, e.g. 3")
    whole_number(repeats, "repeats", hint="pass how many timed calls to run, e.g. 20")
    device = resolve_device(device)
    repeat = range(repeats) if progress is None else progress_bar(range(repeats), label=progress, total=repeats)
    for _ in range(warmup):
        fn()
    if device.type != "cuda":
        _settle(fn)
        samples = [_wall_ms(fn) for _ in repeat]
        return samples, list(samples)

    torch.cuda.synchronize(device)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(repeats)]
    stream = torch.cuda.current_stream(device)
    issue: list[float] = []
    for i in repeat:
        if i >= IN_FLIGHT:
            events[i - IN_FLIGHT][1].synchronize()
        start, end = events[i]
        start.record(stream)
        t0 = time.perf_counter()
        fn()
        issue.append((time.perf_counter() - t0) * 1e3)
        end.record(stream)
    torch.cuda.synchronize(device)
    return [start.elapsed_time(end) for start, end in events], issue


def time_ms(fn: Callable[[], object], *, warmup: int = 3, repeats: int = 20, device=None,
            progress: str | None = None) -> Timing:
    """Time fn() repeats times after warm-up; returns a Timing in ms (CUDA events on a GPU)."""
    steps, _ = _timed_loop(fn, warmup=warmup, repeats=repeats, device=device, progress=progress)
    return Timing.from_samples(steps)


@dataclass
class StepTimes:
    """The step's time and the host's time to issue it, from the same loop (both Timings in ms)."""

    step: Timing
    issue: Timing

    @property
    def issue_exceeds_step(self) -> bool:
        """True when issuing took longer than the step beyond its spread: a suspect run."""
        return self.issue.median_ms > self.step.p90_ms

    def note(self) -> str:
        """A warning when issuing outlasts the step, which no steady state allows, else ''."""
        if not self.issue_exceeds_step:
            return ""
        return (f"warning: issuing took {sig(self.issue.median_ms)} ms, longer than the "
                f"{sig(self.step.median_ms)} ms step (p90 {sig(self.step.p90_ms)}); the host "
                "was disturbed during this run, so re-run before trusting the what-ifs.")

    def to_dict(self) -> dict:
        return {"step": self.step.to_dict(), "issue": self.issue.to_dict()}


def time_with_issue(fn: Callable[[], object], *, warmup: int = 3, repeats: int = 20, device=None,
                    progress: str | None = None) -> StepTimes:
    """Time fn() on the device and its issue on the host in one steady-state loop; returns StepTimes."""
    steps, issue = _timed_loop(fn, warmup=warmup, repeats=repeats, device=device, progress=progress)
    return StepTimes(step=Timing.from_samples(steps), issue=Timing.from_samples(issue))


def time_once(fn: Callable[[], object], *, device=None) -> float:
    """ms one call of fn takes, without warm-up (a CUDA event pair on a GPU, a wall clock on a CPU)."""
    device = resolve_device(device)
    if device.type != "cuda":
        return _wall_ms(fn)
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    stream = torch.cuda.current_stream(device)
    start.record(stream)
    fn()
    end.record(stream)
    end.synchronize()
    return start.elapsed_time(end)


def unsynchronised_time_ms(fn: Callable[[], object], *, repeats: int = 20) -> float:
    """Median ms of a wall clock around each call, never waiting for the GPU: wrong on purpose, it can
    beat the roofline floor, and the floor test catches it."""
    repeats = whole_number(repeats, "repeats", hint="pass how many timed calls to run, e.g. 20")
    return statistics.median(_wall_ms(fn) for _ in range(repeats))
