"""Counting launches: how many kernels one step runs, and who waits for whom.

One call of a step function is profiled with torch.profiler after one warm-up
call. On a GPU the profiler sees both sides: the host's launch calls
(cudaLaunchKernel and friends, or one cudaGraphLaunch for a replayed graph) and
the kernels the GPU ran. On the CPU there are no kernels to launch, so the
count is of the operators the step dispatched.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from floorlab.device import resolve_device

KERNEL_LAUNCH_CALLS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel",
    "cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel",
})
GRAPH_LAUNCH_CALLS = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})
COPY_LAUNCH_CALLS = frozenset({
    "cudaMemcpyAsync", "cudaMemsetAsync", "cudaMemcpy2DAsync", "cudaMemcpyPeerAsync",
    "cuMemcpyAsync", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync",
    "cuMemsetD8Async", "cuMemsetD16Async", "cuMemsetD32Async",
})
LAUNCH_CALLS = KERNEL_LAUNCH_CALLS | GRAPH_LAUNCH_CALLS | COPY_LAUNCH_CALLS

# Operators that only make a new view of existing memory or reserve memory:
# they are dispatched, but they would launch no kernel on a GPU.
NO_KERNEL_OPS = frozenset({
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::_unsafe_view",
    "aten::type_as",
})

_VERSION_SUFFIX = re.compile(r"_v\d+$")


@dataclass
class LaunchCount:
    """Launches in one step: kernels, kernels per layer, host launch calls, kernel names."""

    kernels: int
    per_layer: float
    launch_calls: int
    kernel_names: dict[str, int]
    device: str
    other_ops: int = 0
    note: str = ""

    def __str__(self) -> str:
        text = (
            f"{self.kernels} kernels per step ({self.per_layer:.1f} per layer), "
            f"{self.launch_calls} launch calls on the host [{self.device}]"
        )
        return f"{text}; {self.note}" if self.note else text

    def to_dict(self) -> dict:
        """Plain dict, ready for JSON."""
        out = asdict(self)
        out["kernel_names"] = dict(self.kernel_names)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "LaunchCount":
        """Rebuild a LaunchCount from to_dict() output (e.g. a stored reference run)."""
        return cls(**data)


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
    """Who worked when during one step: a CPU row and a GPU row, times in us."""

    cpu: list[Interval]
    gpu: list[Interval]
    wall_us: float
    label: str
    note: str = ""

    @property
    def gpu_busy_us(self) -> float:
        """Time in us during which at least one GPU interval was running."""
        return _union_us(self.gpu)

    @property
    def cpu_busy_us(self) -> float:
        """Time in us during which at least one CPU interval was running."""
        return _union_us(self.cpu)

    @property
    def gpu_idle_us(self) -> float:
        """Time in us between the GPU row's first start and last end with nothing running."""
        if not self.gpu:
            return 0.0
        span = max(i.end_us for i in self.gpu) - min(i.start_us for i in self.gpu)
        return max(0.0, span - self.gpu_busy_us)

    def to_dict(self) -> dict:
        """Plain dict with both rows, wall_us, gpu_busy_us and gpu_idle_us, ready for JSON."""
        return {
            "label": self.label,
            "wall_us": self.wall_us,
            "gpu_busy_us": self.gpu_busy_us,
            "cpu_busy_us": self.cpu_busy_us,
            "gpu_idle_us": self.gpu_idle_us,
            "note": self.note,
            "cpu": [asdict(i) for i in self.cpu],
            "gpu": [asdict(i) for i in self.gpu],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Timeline":
        """Rebuild a Timeline from to_dict() output (e.g. a stored reference run)."""
        return cls(
            cpu=[Interval(**i) for i in data["cpu"]],
            gpu=[Interval(**i) for i in data["gpu"]],
            wall_us=float(data["wall_us"]),
            label=data["label"],
            note=data.get("note", ""),
        )


def _union_us(intervals: list[Interval]) -> float:
    total = 0.0
    end = None
    for iv in sorted(intervals, key=lambda i: i.start_us):
        if end is None or iv.start_us > end:
            total += iv.end_us - iv.start_us
            end = iv.end_us
        elif iv.end_us > end:
            total += iv.end_us - end
            end = iv.end_us
    return total


def _base_name(name: str) -> str:
    return _VERSION_SUFFIX.sub("", name)


def _is_gpu_event(event) -> bool:
    return (event.device_type == torch.autograd.DeviceType.CUDA
            and not getattr(event, "is_user_annotation", False)
            and getattr(event, "activity_type", None) != "gpu_user_annotation")


def _is_copy_or_set(name: str) -> bool:
    lowered = name.lower()
    return lowered.startswith("memcpy") or lowered.startswith("memset")


def _is_aten(event) -> bool:
    return event.device_type == torch.autograd.DeviceType.CPU and event.name.startswith("aten::")


def _is_working_op(event) -> bool:
    return _is_aten(event) and not _is_metadata_only(event.name)


def _has_working_descendant(event) -> bool:
    return any(_is_working_op(c) or _has_working_descendant(c) for c in event.cpu_children)


def _has_aten_ancestor(event) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if _is_aten(parent):
            return True
        parent = parent.cpu_parent
    return False


@lru_cache(maxsize=None)
def _is_metadata_only(name: str) -> bool:
    """True for an operator that only views or reserves memory, or returns no tensor at all.

    Such operators are dispatched but would launch no kernel on a GPU.
    """
    if name in NO_KERNEL_OPS:
        return True
    packet = getattr(torch.ops.aten, name.split("::", 1)[-1], None)
    if packet is None:
        return False
    try:
        schemas = [getattr(packet, o)._schema for o in packet.overloads()]
    except (AttributeError, RuntimeError):
        return False
    return bool(schemas) and all(_returns_no_new_tensor(s.returns) for s in schemas)


def _returns_no_new_tensor(returns) -> bool:
    """True when an overload returns no tensor, or only read-only views of its inputs."""
    if not any("Tensor" in str(r.type) for r in returns):
        return True
    return all(r.alias_info is not None and not r.alias_info.is_write for r in returns)


def _belongs_to_step(event) -> bool:
    """True for events the step itself caused: operators, CUDA API calls, GPU work."""
    if _is_gpu_event(event):
        return True
    return event.device_type == torch.autograd.DeviceType.CPU and (
        event.name.startswith(("aten::", "cuda", "cu"))
    )


def _profile_one_call(step_fn: Callable[[], object], device: torch.device):
    """Warm up once, then profile one call; returns the profiler's list of events."""
    step_fn()
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
        torch.cuda.synchronize(device)
    with profile(activities=activities) as prof:
        step_fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return list(prof.events())


def _check_num_layers(num_layers) -> int:
    if int(num_layers) != num_layers or num_layers < 1:
        raise ValueError(
            f"num_layers must be a whole number >= 1, got {num_layers!r}; "
            "pass the model's layer count, e.g. model.shape.num_layers"
        )
    return int(num_layers)


def _is_launch_call(event) -> bool:
    return (event.device_type == torch.autograd.DeviceType.CPU
            and _base_name(event.name) in LAUNCH_CALLS)


def _cuda_note(kernels: int, launch_names: list[str]) -> str:
    """Say when the profiler saw fewer kernels than the host must have caused."""
    kernel_launches = sum(n in KERNEL_LAUNCH_CALLS for n in launch_names)
    graph_launches = sum(n in GRAPH_LAUNCH_CALLS for n in launch_names)
    if graph_launches and kernels <= kernel_launches:
        return (
            f"the host issued {graph_launches} graph launch(es) but the profiler recorded no "
            "kernels inside the graph replay; kernel counts cover only work launched outside it"
        )
    if kernels == 0:
        return ("the profiler recorded no GPU kernels; check that CUPTI is available "
                "to torch.profiler on this machine")
    return ""


def count_launches(step_fn: Callable[[], object], *, num_layers: int, device=None) -> LaunchCount:
    """Count GPU kernels (on CPU: operators dispatched) and host launch calls in one call of step_fn."""
    num_layers = _check_num_layers(num_layers)
    device = resolve_device(device)
    events = _profile_one_call(step_fn, device)

    if device.type == "cuda":
        names = Counter()
        other = 0
        for e in events:
            if _is_gpu_event(e):
                if _is_copy_or_set(e.name):
                    other += 1
                else:
                    names[e.name] += 1
        launch_names = [_base_name(e.name) for e in events if _is_launch_call(e)]
        kernels = sum(names.values())
        launch_calls = len(launch_names)
        note = _cuda_note(kernels, launch_names)
    else:
        names = Counter()
        other = 0
        for e in events:
            if _is_working_op(e):
                if not _has_working_descendant(e):
                    names[e.name] += 1
            elif _is_aten(e) and not e.cpu_children:
                other += 1
        kernels = sum(names.values())
        launch_calls = kernels
        note = ""

    return LaunchCount(
        kernels=kernels,
        per_layer=kernels / num_layers,
        launch_calls=launch_calls,
        kernel_names=dict(names.most_common()),
        device=device.type,
        other_ops=other,
        note=note,
    )


def profile_timeline(step_fn: Callable[[], object], *, label: str, device=None) -> Timeline:
    """Profile one call of step_fn; returns a Timeline of host and GPU intervals in us."""
    device = resolve_device(device)
    events = _profile_one_call(step_fn, device)
    timed = [e for e in events if e.time_range.end >= e.time_range.start and _belongs_to_step(e)]
    if not timed:
        return Timeline(cpu=[], gpu=[], wall_us=0.0, label=label,
                        note="the profiler recorded no events for this call")
    note = ""
    if device.type == "cuda":
        cpu_events = [e for e in timed if _is_launch_call(e)]
        gpu_events = [e for e in timed if _is_gpu_event(e)]
        kernels = sum(not _is_copy_or_set(e.name) for e in gpu_events)
        note = _cuda_note(kernels, [_base_name(e.name) for e in cpu_events])
    else:
        cpu_events = [e for e in timed if _is_aten(e) and not _has_aten_ancestor(e)]
        gpu_events = []
    # The step starts at its first launch (or operator) and ends with its last kernel:
    # the profiler's own set-up calls before that are not part of the step.
    rows = cpu_events + gpu_events or timed
    origin = min(e.time_range.start for e in rows)
    wall_us = max(e.time_range.end for e in rows) - origin

    def interval(e) -> Interval:
        return Interval(e.name, e.time_range.start - origin, e.time_range.end - origin)

    cpu = sorted((interval(e) for e in cpu_events), key=lambda i: i.start_us)
    gpu = sorted((interval(e) for e in gpu_events), key=lambda i: i.start_us)
    return Timeline(cpu=cpu, gpu=gpu, wall_us=wall_us, label=label, note=note)


def kernel_table(timeline: Timeline, *, top: int = 12, row: str = "gpu") -> list[dict]:
    """Time per kernel (or, with row="cpu", per operator) in one step: count, total_us, mean_us, share; largest first."""
    if row not in ("gpu", "cpu"):
        raise ValueError(f"row must be 'gpu' or 'cpu', got {row!r}")
    rows: dict[str, dict] = {}
    for i in getattr(timeline, row):
        row = rows.setdefault(_short_kernel_name(i.name), {"count": 0, "total_us": 0.0})
        row["count"] += 1
        row["total_us"] += i.duration_us
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
