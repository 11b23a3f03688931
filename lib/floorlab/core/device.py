"""Core wing: facts about the device the book measures on, and which device that is."""
from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import torch

from floorlab.core.numbers import shown
from floorlab.core.records import StoredRecord


def default_device() -> torch.device:
    """The device the book measures on: cuda if a GPU is visible, else cpu."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def resolve_device(device) -> torch.device:
    """A torch.device for 'cuda' or 'cpu'; None means the default device. Clear error for a missing GPU."""
    if device is None:
        return default_device()
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"device must be 'cuda', 'cpu' or a torch.device, got {shown(device)}; "
                         "pass device='cpu', or leave device=None for the default") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            "device is 'cuda' but no CUDA GPU is visible; pass device='cpu' or leave device=None"
        )
    if device.type not in ("cuda", "cpu"):
        raise ValueError(f"device must be 'cuda' or 'cpu', got {str(device)!r}")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ValueError(f"device {str(device)!r} names a GPU this machine does not have (it has "
                         f"{torch.cuda.device_count()}); pass device='cuda' or a lower index")
    return device


def package_version(name: str) -> str | None:
    """The installed version of a package, or None where it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def cpuinfo() -> dict[str, str]:
    """The first processor's fields in /proc/cpuinfo (Linux), {} elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return {}
    return {key.strip(): value.strip() for key, _, value in
            (line.partition(":") for line in text.split("\n\n")[0].splitlines())}


def cpu_name() -> str:
    """The host CPU's model, as Linux (or else the platform) names it."""
    info = cpuinfo()
    return info.get("model name") or info.get("Model") or platform.processor() or platform.machine()


def _host_memory_gb() -> float | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    except (ValueError, OSError, AttributeError):
        return None


@dataclass(frozen=True)
class DeviceFacts(StoredRecord):
    """Facts about the device a run was made on and its software; None where a stored run lacks one.
    memory_gb in 1e9 bytes; torch_threads on a CPU only. Stored keys it does not name stay in extra."""

    kind: str | None = None  # 'cuda' or 'cpu'
    name: str | None = None
    memory_gb: float | None = None
    compute_capability: str | None = None  # 'major.minor' on a CUDA card
    cpu_count: int | None = None
    torch_threads: int | None = None
    torch: str | None = None
    transformers: str | None = None
    cuda: str | None = None
    python: str | None = None
    extra: dict = field(default_factory=dict, hash=False)
    absent: frozenset = field(default=frozenset(), repr=False)


def describe_device(device=None) -> DeviceFacts:
    """Facts about the device and software: kind, name, memory_gb (1e9 bytes), versions."""
    device = resolve_device(device)
    facts = {
        "kind": device.type,
        "name": None,
        "memory_gb": None,
        "compute_capability": None,
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "transformers": package_version("transformers"),
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
    }
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        facts["name"] = props.name
        facts["memory_gb"] = round(props.total_memory / 1e9, 1)
        facts["compute_capability"] = f"{props.major}.{props.minor}"
    else:
        facts["name"] = cpu_name()
        memory = _host_memory_gb()
        facts["memory_gb"] = round(memory, 1) if memory is not None else None
        facts["torch_threads"] = torch.get_num_threads()
    return DeviceFacts.from_dict(facts)  # a CUDA card's facts store no torch_threads


def device_slug(device_facts: DeviceFacts) -> str:
    """A file-name-safe name for the device, e.g. 'nvidia-h200' or 'cpu-amd-epyc'."""
    name = re.sub(r"[^a-z0-9]+", "-", str(device_facts.name or "").lower()).strip("-")
    if device_facts.kind == "cpu":
        return f"cpu-{name}" if name else "cpu"
    return name or str(device_facts.kind or "device")
