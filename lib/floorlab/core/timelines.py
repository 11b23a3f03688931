"""Core wing: who worked when during one step, in the steady state the timing loop sees (the middle of
back-to-back calls, so a launch that overlaps the previous step shows as overlap, not idle time)."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Callable

import torch

from floorlab.core.device import resolve_device
from floorlab.core.numbers import whole_number
from floorlab.core.prose import fmt_ms, sig
from floorlab.core.launches import (STEP_MARK, base_name, cuda_note, has_aten_ancestor, is_aten,
                               is_gpu_event, is_launch_call, profile_calls, is_kernel_name,
                               merged_spans)

STEADY_STEPS = 5  # back-to-back calls a timeline profiles; it keeps the middle one
PROFILED_AS_TIMED = 0.1  # a profiled step within 10% of the timed one is the same step, drawn


@dataclass
class Interval:
    """One event on a timeline row; times in us relative to the profiled call's start."""

    name: str
    start_us: float
    end_us: float

    @property
    def duration_us(self) -> float:
        """Length of the interval in us."""
        return self.end_us - self.start_us


@dataclass
class Timeline:
    """A CPU row and a GPU row, µs from the step's start; span_us runs to the next step's first kernel (or operator),
    and timed_ms is the step timed without the profiler."""

    cpu: list[Interval]
    gpu: list[Interval]
    span_us: float
    label: str
    note: str = ""
    timed_ms: float | None = None

    @property
    def kernels(self) -> int:
        """GPU kernels in the step (memcpy and memset left out)."""
        return sum(is_kernel_name(i.name) for i in self.gpu)

    def _busy_spans(self, row: list[Interval]) -> list[tuple[float, float]]:
        clipped = [(max(i.start_us, 0.0), min(i.end_us, self.span_us)) for i in row]
        return merged_spans((a, b) for a, b in clipped if b > a)

    @property
    def gpu_busy_us(self) -> float:
        """µs of the span during which at least one GPU interval runs."""
        return sum(b - a for a, b in self._busy_spans(self.gpu))

    @property
    def cpu_busy_us(self) -> float:
        """µs of the span during which at least one CPU interval runs."""
        return sum(b - a for a, b in self._busy_spans(self.cpu))

    def gpu_idle_spans(self) -> list[tuple[float, float]]:
        """(start_us, end_us) spans of the step in which no GPU interval runs; [] without a GPU row."""
        if not self.gpu:
            return []
        idle, cursor = [], 0.0
        for start, end in self._busy_spans(self.gpu):
            if start > cursor:
                idle.append((cursor, start))
            cursor = max(cursor, end)
        if cursor < self.span_us:
            idle.append((cursor, self.span_us))
        return idle

    @property
    def gpu_idle_us(self) -> float:
        """µs of the span with no GPU interval running (0 without a GPU row)."""
        return sum(b - a for a, b in self.gpu_idle_spans())

    @property
    def gpu_idle_share(self) -> float:
        """gpu_idle_us over span_us (0 without a GPU row)."""
        return self.gpu_idle_us / self.span_us if self.span_us > 0 else 0.0

    @property
    def timed_idle_share(self) -> float | None:
        """The GPU's idle share of a timed step (1 - busy ÷ timed), where the profiler stretched or shrank the
        step beyond 10% of it; None where the two agree, or nothing was timed."""
        if not self.gpu or not self.timed_ms or self._profiled_as_timed():
            return None
        return max(0.0, 1 - self.busy_ms / self.timed_ms)

    @property
    def busy_share(self) -> float:
        """Share of the span the device (the GPU, or on a CPU the operators) is busy."""
        busy = self.gpu_busy_us if self.gpu else self.cpu_busy_us
        return busy / self.span_us if self.span_us > 0 else 0.0

    @property
    def busy_ms(self) -> float:
        """ms the device works in one timed step: the kernels' own time on a GPU; on a CPU, whose
        host the profiler slows down, the operators' share of the profiled step times timed_ms."""
        if self.gpu:
            return self.gpu_busy_us / 1000.0
        return self.busy_share * (self.timed_ms or self.profiled_ms)

    @property
    def profiled_ms(self) -> float:
        """The step's span under the profiler, in ms."""
        return self.span_us / 1000.0

    def _profiled_as_timed(self) -> bool:
        """True when the profiled step lies within PROFILED_AS_TIMED of the timed one (timed_ms must be set)."""
        return abs(self.profiled_ms / self.timed_ms - 1) <= PROFILED_AS_TIMED

    def profiler_note(self) -> str:
        """One sentence comparing the profiled step with the timed one ('' when timed_ms is unknown)."""
        if not self.timed_ms:
            return ""
        ratio = self.profiled_ms / self.timed_ms
        if self._profiled_as_timed():
            how = f"within {PROFILED_AS_TIMED:.0%} of"
        elif ratio > 1:
            how = f"{sig(ratio)}× as long as"
        else:  # one step drawn can beat the timed median on a busy machine
            how = f"shorter ({sig(ratio)}×) than"
        return (f"profiled step {fmt_ms(self.profiled_ms)}, {how} the {fmt_ms(self.timed_ms)} "
                "timed without the profiler")

    def to_dict(self) -> dict:
        return {
            "label": self.label, "span_us": self.span_us, "note": self.note,
            "timed_ms": self.timed_ms, "kernels": self.kernels, "gpu_busy_us": self.gpu_busy_us,
            "cpu_busy_us": self.cpu_busy_us, "gpu_idle_us": self.gpu_idle_us,
            "cpu": [asdict(i) for i in self.cpu], "gpu": [asdict(i) for i in self.gpu],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Timeline":
        return cls(cpu=[Interval(**i) for i in data["cpu"]], gpu=[Interval(**i) for i in data["gpu"]],
                   span_us=float(data["span_us"]), label=data["label"], note=data.get("note", ""),
                   timed_ms=data.get("timed_ms"))


def _within(event, mark) -> bool:
    return mark.time_range.start <= event.time_range.start <= mark.time_range.end


def steady_timeline(step_fn: Callable[[], object], *, label: str, device=None,
                    steps: int = STEADY_STEPS, timed_ms: float | None = None) -> Timeline:
    """Profile `steps` back-to-back calls and return the middle one as a Timeline (µs)."""
    device = resolve_device(device)
    steps = whole_number(steps, "steps", at_least=3,
                         hint="pass 3 or more: one step before and one after the step drawn")
    events = profile_calls(step_fn, device, calls=steps)
    marks = sorted((e for e in events if e.device_type == torch.autograd.DeviceType.CPU
                    and e.name.startswith(STEP_MARK)), key=lambda e: int(e.name[len(STEP_MARK):]))
    middle = steps // 2
    if len(marks) != steps:
        return Timeline(cpu=[], gpu=[], span_us=0.0, label=label, timed_ms=timed_ms,
                        note="the profiler recorded no step marks for this call")
    mark = marks[middle]
    note = ""
    if device.type == "cuda":
        gpu_all = sorted((e for e in events if is_gpu_event(e)), key=lambda e: e.time_range.start)
        per_step = len(gpu_all) // steps
        if per_step == 0:
            return Timeline(cpu=[], gpu=[], span_us=0.0, label=label, timed_ms=timed_ms,
                            note="the profiler recorded no GPU work; check that CUPTI is available")
        if len(gpu_all) % steps:
            note = (f"{len(gpu_all)} GPU events over {steps} steps do not divide evenly; "
                    "the step drawn may be cut at its edges")
        gpu_events = gpu_all[middle * per_step:(middle + 1) * per_step]
        origin = gpu_events[0].time_range.start
        following = gpu_all[(middle + 1) * per_step].time_range.start
        cpu_events = [e for e in events if is_launch_call(e) and _within(e, mark)]
        note = note or cuda_note(sum(is_kernel_name(e.name) for e in gpu_events),
                                  [base_name(e.name) for e in cpu_events])
    else:
        gpu_events = []
        origin = mark.time_range.start
        following = marks[middle + 1].time_range.start
        cpu_events = [e for e in events if is_aten(e) and not has_aten_ancestor(e)
                      and _within(e, mark)]

    def row(chosen) -> list[Interval]:
        return sorted((Interval(e.name, e.time_range.start - origin, e.time_range.end - origin) for e in chosen),
                      key=lambda i: i.start_us)

    return Timeline(cpu=row(cpu_events), gpu=row(gpu_events), span_us=following - origin, label=label, note=note,
                    timed_ms=timed_ms)


def kernel_table(timeline: Timeline, *, top: int = 12, row: str = "gpu") -> list[dict]:
    """Time per kernel (or, with row="cpu", per operator) in one step: count, total_us, mean_us,
    share; largest first."""
    if row not in ("gpu", "cpu"):
        raise ValueError(f"row must be 'gpu' or 'cpu', got {row!r}")
    rows: dict[str, dict] = {}
    for i in getattr(timeline, row):
        entry = rows.setdefault(_short_kernel_name(i.name), {"count": 0, "total_us": 0.0})
        entry["count"] += 1
        entry["total_us"] += i.duration_us
    busy = sum(r["total_us"] for r in rows.values()) or 1.0
    table = [{"kernel": name, **r, "mean_us": r["total_us"] / r["count"], "share": r["total_us"] / busy}
             for name, r in rows.items()]
    return sorted(table, key=lambda r: -r["total_us"])[:top]


def _short_kernel_name(name: str) -> str:
    """A kernel's name without namespaces and template arguments, plus the functor of a generic kernel."""
    text = name.replace("(anonymous namespace)", "").removeprefix("void ")
    head = text.split("(")[0].split("<")[0].rsplit("::", 1)[-1].strip() or name[:60]
    if "elementwise_kernel" in head:
        generic = {"gpu_kernel_impl", "gpu_kernel_impl_nocast", "gpu_index_kernel"}
        found = [m for m in re.findall(r"(\w+(?:Functor|_kernel|_impl))\b", text.partition("<")[2])
                 if m not in generic]
        if found:
            head = f"{head}[{found[0]}]"
    return head
