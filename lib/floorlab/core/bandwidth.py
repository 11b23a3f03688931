"""Core wing: measured bandwidth and matmul rate, the denominators of every floor in the book.
Measured, never looked up: a copy (read + write) and a reduction (read) far beyond any cache; GB = 1e9 bytes."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from floorlab.core.device import resolve_device
from floorlab.core.numbers import positive_number, shown, whole_number
from floorlab.core.prose import fmt_band, fmt_gb, sig
from floorlab.core.roofline import BANDWIDTH_KINDS, floor_bandwidth
from floorlab.core.timing import time_ms

MIB = 2**20
CUDA_DEFAULT_SIZE_MB = 1024
CPU_DEFAULT_SIZE_MB = 256


@dataclass
class Bandwidth:
    """A measured bandwidth: median and p10/p90 in GB/s, bytes moved per repeat."""

    kind: str
    gbps: float
    p10_gbps: float
    p90_gbps: float
    bytes_per_rep: int
    device: str

    def __post_init__(self):
        """Refuse a bandwidth no measurement gives: an unknown kind, NaN, infinite, zero or negative."""
        if self.kind not in BANDWIDTH_KINDS:
            raise ValueError(f"kind must be one of {BANDWIDTH_KINDS}, got {shown(self.kind)}")
        for name in ("gbps", "p10_gbps", "p90_gbps"):
            positive_number(getattr(self, name), f"{self.kind} {name}", "measure it with measure_bandwidth()")
        whole_number(self.bytes_per_rep, "bytes_per_rep")
        if not isinstance(self.device, str):
            raise ValueError(f"device must be the device's name, e.g. 'cuda:0', got {shown(self.device)}")

    def __str__(self) -> str:
        return (f"{self.kind} bandwidth {sig(self.gbps)} GB/s ({fmt_band(self.p10_gbps, self.p90_gbps)}, "
                f"{fmt_gb(self.bytes_per_rep)} per repeat) on {self.device}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Bandwidths:
    """Both measured bandwidths of one run; the floor divides by the larger (floor_gbps)."""

    copy: Bandwidth
    read: Bandwidth

    def __post_init__(self):
        """Refuse anything but a measured copy and read bandwidth (measure_bandwidths())."""
        for kind in BANDWIDTH_KINDS:
            value = getattr(self, kind)
            if not isinstance(value, Bandwidth) or value.kind != kind:
                raise ValueError(f"{kind} must be the measured {kind} Bandwidth "
                                 f"(measure_bandwidth(kind={kind!r})), got {shown(value)}")

    @property
    def floor_gbps(self) -> float:
        """GB/s the floor uses: the larger measured bandwidth."""
        return floor_bandwidth(self)[0]

    @property
    def floor_kind(self) -> str:
        """Which measurement floor_gbps came from: "copy" or "read"."""
        return floor_bandwidth(self)[1]

    def drift_note(self, later: "Bandwidths", *, tolerance: float = 0.2) -> str:
        """A warning when a later measurement's floor bandwidth differs by more than tolerance, else ''."""
        if not isinstance(later, Bandwidths):
            raise ValueError(f"later must be a Bandwidths from measure_bandwidths(), got {shown(later)}")
        tolerance = positive_number(tolerance, "tolerance", "pass a fraction, e.g. 0.2 for 20%")
        change = later.floor_gbps / self.floor_gbps - 1
        if abs(change) <= tolerance:
            return ""
        return (f"warning: the bandwidth moved from {sig(self.floor_gbps)} to {sig(later.floor_gbps)} "
                f"GB/s ({change:+.0%}) while this notebook ran; something else is using the "
                "machine, so re-run before trusting these ratios.")

    def as_gbps(self) -> dict[str, float]:
        """{"copy": GB/s, "read": GB/s}."""
        return {"copy": self.copy.gbps, "read": self.read.gbps}

    def __str__(self) -> str:
        return f"{self.copy}\n{self.read}"

    def to_dict(self) -> dict:
        return {"copy": self.copy.to_dict(), "read": self.read.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> "Bandwidths":
        try:
            return cls(copy=Bandwidth(**data["copy"]), read=Bandwidth(**data["read"]))
        except (KeyError, TypeError) as err:
            raise ValueError(f"bandwidths should hold a measured 'copy' and 'read' Bandwidth "
                             f"({type(err).__name__}: {err}); measure them with measure_bandwidths()") from None


def _timed_band(make, amount: float, *, repeats: int, device: torch.device) -> tuple[float, float, float]:
    """(median, p10, p90) of amount per second over repeats timed calls of make(); the p10 rate is the p90 time's.
    The call's buffers are freed before the CUDA cache is emptied."""
    fn = make()
    timing = time_ms(fn, warmup=3, repeats=repeats, device=device)
    fn = None
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return tuple(amount / (ms * 1e-3) for ms in (timing.median_ms, timing.p90_ms, timing.p10_ms))


def measure_bandwidth(device=None, *, kind: str = "copy", size_mb: float | None = None,
                      repeats: int = 20) -> Bandwidth:
    """Memory bandwidth in GB/s: kind="copy" counts read+write, kind="read" a reduction; size_mb in MiB."""
    if kind not in BANDWIDTH_KINDS:
        raise ValueError(f"kind must be one of {BANDWIDTH_KINDS}, got {kind!r}")
    if size_mb is not None:
        size_mb = positive_number(size_mb, "size_mb", f"a number of MiB; leave it None for the default "
                                  f"({CUDA_DEFAULT_SIZE_MB} on CUDA, {CPU_DEFAULT_SIZE_MB} on CPU)")
    repeats = whole_number(repeats, "repeats")
    device = resolve_device(device)
    buffers = 2 if kind == "copy" else 1
    if size_mb is None and device.type == "cuda":  # as large as fits, up to the default
        size_mb = max(1, min(CUDA_DEFAULT_SIZE_MB, int(torch.cuda.mem_get_info(device)[0] // (4 * buffers * MIB))))
    numel = max(1, int((size_mb or CPU_DEFAULT_SIZE_MB) * MIB) // 4)  # float32 elements
    bytes_per_rep = buffers * numel * 4
    gbps = _timed_band(lambda: _bandwidth_step(kind, numel, device), bytes_per_rep / 1e9, repeats=repeats,
                       device=device)
    return Bandwidth(kind, *gbps, bytes_per_rep=bytes_per_rep, device=str(device))


def _bandwidth_step(kind: str, numel: int, device: torch.device):
    """A call that copies (kind "copy") or sums ("read") numel float32s; its buffers go with it."""
    src = torch.ones(numel, dtype=torch.float32, device=device)
    if kind == "copy":
        dst = torch.zeros_like(src)
        return lambda: dst.copy_(src)
    out = torch.empty((), dtype=torch.float32, device=device)
    return lambda: torch.sum(src, dim=0, out=out)


def measure_bandwidths(device=None, *, repeats: int = 20, size_mb: float | None = None) -> Bandwidths:
    """Measure the copy and the read bandwidth back to back (see measure_bandwidth)."""
    return Bandwidths(copy=measure_bandwidth(device, kind="copy", repeats=repeats, size_mb=size_mb),
                      read=measure_bandwidth(device, kind="read", repeats=repeats, size_mb=size_mb))


# ---- the compute roof: what a large matrix product reaches on this device ------------------

CUDA_MATMUL_SIZE = 8192  # 1.1e12 FLOPs per product: about a millisecond on a data-centre card
CPU_MATMUL_SIZE = 1024


@dataclass
class MatmulRate:
    """A measured matrix-product rate: median and p10/p90 in TFLOP/s (1e12 FLOP/s)."""

    tflops: float
    p10_tflops: float
    p90_tflops: float
    size: int
    dtype: str
    device: str

    def __str__(self) -> str:
        return (f"matmul {sig(self.tflops)} TFLOP/s ({fmt_band(self.p10_tflops, self.p90_tflops)}, "
                f"{self.size}×{self.size} {self.dtype}) on {self.device}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "MatmulRate":
        return cls(**data)


def measure_matmul_tflops(device=None, *, dtype: torch.dtype | None = None, size: int | None = None,
                          repeats: int = 10) -> MatmulRate:
    """The compute roof in TFLOP/s: one n×n product (2·n³ FLOPs) in dtype (bf16 on CUDA, float32 on a CPU), the
    second read transposed as F.linear reads a weight (a CPU's row-major bf16 product is ~15× slower)."""

    device = resolve_device(device)
    if dtype is None:
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    if size is None:
        size = CUDA_MATMUL_SIZE if device.type == "cuda" else CPU_MATMUL_SIZE
    size = whole_number(size, "size", hint="pass the matrices' side, e.g. 1024")
    repeats = whole_number(repeats, "repeats")
    tflops = _timed_band(lambda: _product(size, dtype, device), 2 * size**3 / 1e12, repeats=repeats, device=device)
    return MatmulRate(*tflops, size=size, dtype=str(dtype).removeprefix("torch."), device=str(device))


def _product(size: int, dtype: torch.dtype, device: torch.device):
    """A call of one size × size product, the second matrix read transposed as F.linear reads a weight."""
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(size, size, device=device, dtype=dtype, generator=gen)
    weight = torch.randn(size, size, device=device, dtype=dtype, generator=gen)
    out = torch.empty(size, size, device=device, dtype=dtype)
    return lambda: torch.mm(a, weight.t(), out=out)
