"""Core wing: what a model needs in memory, known before a byte of it is allocated."""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from floorlab.core.device import resolve_device
from floorlab.core.numbers import element_bytes, nonnegative_number, positive_number, shown, whole_number
from floorlab.core.prose import fmt_gb
from floorlab.core.shapes import get_shape

HEADROOM_BYTES = 1_000_000_000  # activations, logits, library workspaces and a graph's pool


def model_bytes(shape, *, max_batch: int, max_context: int, dtype_bytes: int = 2) -> int:
    """Bytes of a model's weights plus its static KV cache of max_batch rows × max_context slots."""
    max_batch = whole_number(max_batch, "max_batch", hint="pass the most rows the cache holds, e.g. 8")
    max_context = whole_number(max_context, "max_context", hint="pass the cache's slots per row, e.g. 128")
    dtype_bytes = element_bytes(dtype_bytes)
    cache = max_batch * max_context * shape.kv_bytes_per_token(dtype_bytes)
    return shape.weight_bytes(dtype_bytes) + cache


def free_bytes(device=None) -> int | None:
    """Bytes free for a new model: on a GPU the driver's free memory plus what torch's cache holds unused; on a CPU the
    host's available memory. None when it cannot be read."""
    device = resolve_device(device)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int(free + cached)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def fits_bytes(bytes_needed: float, device=None, *, share: float = 1.0) -> bool:
    """True when bytes_needed is within `share` of the bytes free on the device now (or free is unknown)."""
    bytes_needed = nonnegative_number(bytes_needed, "bytes_needed", "pass a count of bytes, e.g. model_bytes(...)")
    share = positive_number(share, "share", "pass the fraction of free memory to use, e.g. 0.8")
    if share > 1:
        raise ValueError(f"share must be a fraction of the free memory, at most 1, got {shown(share)}")
    free = free_bytes(device)
    return free is None or bytes_needed <= share * free


@dataclass(frozen=True)
class Fit:
    """Whether a model fits a device: what it needs and what is free, in bytes."""

    preset: str
    weight_bytes: int
    cache_bytes: int
    headroom_bytes: int
    free_bytes: int | None
    where: str

    @property
    def need_bytes(self) -> int:
        """Weights + KV cache + headroom, in bytes."""
        return self.weight_bytes + self.cache_bytes + self.headroom_bytes

    @property
    def ok(self) -> bool:
        """True when the need fits in the free memory (or the free memory is unknown)."""
        return self.free_bytes is None or self.need_bytes <= self.free_bytes

    def message(self) -> str:
        """One sentence: the GB needed, the GB free and, when it does not fit, what to do."""
        need = (f"{self.preset} needs {fmt_gb(self.need_bytes)} ({fmt_gb(self.weight_bytes)} of bf16 weights, "
                f"{fmt_gb(self.cache_bytes)} of KV cache, {fmt_gb(self.headroom_bytes)} to work in)")
        if self.free_bytes is None:
            return f"{need}; the free {self.where} memory could not be read, so it is tried anyway."
        free = f"{fmt_gb(self.free_bytes)} of {self.where} memory is free"
        if self.ok:
            return f"{need}; {free}: it fits."
        return (f"{need}, but only {free}: skipped before anything was allocated. Close other "
                f"programs or notebooks that hold {self.where} memory, or use a device with "
                f"{fmt_gb(self.need_bytes)} free.")


def check_fits(preset_or_shape, device, *, max_batch: int, max_context: int,
               free: int | None = None, headroom_bytes: int = HEADROOM_BYTES) -> Fit:
    """Whether the model fits the device's free memory (read now unless `free` is given)."""
    shape = get_shape(preset_or_shape)
    device = torch.device(device)
    if free is not None:
        free = whole_number(free, "free", at_least=0, hint="pass the free bytes, or None to read them now")
    headroom_bytes = whole_number(headroom_bytes, "headroom_bytes", at_least=0)
    weights = shape.weight_bytes(2)
    cache = model_bytes(shape, max_batch=max_batch, max_context=max_context) - weights
    return Fit(preset=shape.name, weight_bytes=weights, cache_bytes=cache,
               headroom_bytes=int(headroom_bytes),
               free_bytes=free_bytes(device) if free is None else int(free),
               where="GPU" if device.type == "cuda" else "host")
