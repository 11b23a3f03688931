"""Core wing: counting launches after one warm-up call: on a GPU the kernels the device ran and the host's
launch calls; on the CPU the operators the step dispatched."""
from __future__ import annotations

import contextlib
import os
import re
import sys
import warnings
from collections import Counter
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Callable

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from floorlab.core.device import resolve_device
from floorlab.core.numbers import whole_number
from floorlab.core.prose import sig

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
STEP_MARK = "floorlab.step."  # the record_function label around each profiled call
IN_FLIGHT = 2  # as in timing: calls the host may queue ahead of the device


def is_kernel_name(name: str) -> bool:
    """True for a GPU event that is a kernel, False for a memcpy or memset."""
    return not name.lower().startswith(("memcpy", "memset"))


def merged_spans(spans) -> list[tuple[float, float]]:
    """Union of (start, end) spans: sorted, non-overlapping, touching spans joined."""
    out: list[list[float]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


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
            f"{self.kernels} kernels per step ({sig(self.per_layer)} per layer), "
            f"{self.launch_calls} launch calls on the host [{self.device}]"
        )
        return f"{text}; {self.note}" if self.note else text

    def to_dict(self) -> dict:
        out = asdict(self)
        out["kernel_names"] = dict(self.kernel_names)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "LaunchCount":
        return cls(**data)


def base_name(name: str) -> str:
    return _VERSION_SUFFIX.sub("", name)


def is_gpu_event(event) -> bool:
    return (event.device_type == torch.autograd.DeviceType.CUDA
            and not getattr(event, "is_user_annotation", False)
            and getattr(event, "activity_type", None) != "gpu_user_annotation")


def is_aten(event) -> bool:
    return event.device_type == torch.autograd.DeviceType.CPU and event.name.startswith("aten::")


def _is_working_op(event) -> bool:
    return is_aten(event) and not _is_metadata_only(event.name)


def _has_working_descendant(event) -> bool:
    return any(_is_working_op(c) or _has_working_descendant(c) for c in event.cpu_children)


def has_aten_ancestor(event) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if is_aten(parent):
            return True
        parent = parent.cpu_parent
    return False


@lru_cache(maxsize=None)
def _is_metadata_only(name: str) -> bool:
    """True for an operator that only views or reserves memory, or returns no tensor at all."""
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


@contextlib.contextmanager
def _quiet_stderr():
    """Send file descriptor 2 to /dev/null: the profiler's C++ layers print set-up chatter there; and hold back
    its warning that one cycle's events are cleared at the next (one cycle is all a profile here has)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null, warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Profiler clears events", category=UserWarning)
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def profile_calls(step_fn: Callable[[], object], device: torch.device, calls: int = 1):
    """Warm up once, then profile `calls` back-to-back calls, each marked STEP_MARK<i>; returns the events."""
    step_fn()
    activities = [ProfilerActivity.CPU]
    on_cuda = device.type == "cuda"
    if on_cuda:
        activities.append(ProfilerActivity.CUDA)
        torch.cuda.synchronize(device)
    ends = []
    with _quiet_stderr(), profile(activities=activities) as prof:
        for i in range(calls):
            if on_cuda and i >= IN_FLIGHT:
                ends[i - IN_FLIGHT].synchronize()
            with record_function(f"{STEP_MARK}{i}"):
                step_fn()
            if on_cuda:
                ends.append(torch.cuda.Event())
                ends[-1].record()
        if on_cuda:
            torch.cuda.synchronize(device)
    with _quiet_stderr():
        return list(prof.events())


def is_launch_call(event) -> bool:
    return (event.device_type == torch.autograd.DeviceType.CPU
            and base_name(event.name) in LAUNCH_CALLS)


def cuda_note(kernels: int, launch_names: list[str]) -> str:
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
    num_layers = whole_number(num_layers, "num_layers", hint="pass the model's layers, e.g. model.shape.num_layers")
    device = resolve_device(device)
    events = profile_calls(step_fn, device)
    if device.type == "cuda":
        gpu = [e.name for e in events if is_gpu_event(e)]
        names = Counter(n for n in gpu if is_kernel_name(n))
        other = len(gpu) - sum(names.values())
        launch_names = [base_name(e.name) for e in events if is_launch_call(e)]
        launch_calls, note = len(launch_names), cuda_note(sum(names.values()), launch_names)
    else:  # the innermost working operators are what a GPU would launch
        names = Counter(e.name for e in events if _is_working_op(e) and not _has_working_descendant(e))
        other = sum(is_aten(e) and not _is_working_op(e) and not e.cpu_children for e in events)
        launch_calls, note = sum(names.values()), ""
    kernels = sum(names.values())
    return LaunchCount(kernels=kernels, per_layer=kernels / num_layers, launch_calls=launch_calls,
                       kernel_names=dict(names.most_common()), device=device.type, other_ops=other, note=note)


