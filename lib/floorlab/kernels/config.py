"""Launch parameters of the book's Triton kernels: tile sizes, rows per program, warps, splits.

Plain dataclasses without triton, so a sweep can build, print and store them anywhere.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

GEMV_NAMES = ("qkv", "o_proj", "gate_up", "down", "lm_head")


def _power_of_two(name: str, value: int, owner: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value & (value - 1):
        raise ValueError(f"{owner}.{name} must be a power of two >= 1 (Triton tiles are powers of two), "
                         f"got {value!r}")


@dataclass(frozen=True)
class GemvConfig:
    """One GEMV launch: output rows per program, K tile (elements), warps, K splits (1 = no split)."""

    rows_per_program: int = 4
    block_k: int = 256
    num_warps: int = 4
    split_k: int = 1

    def check(self) -> "GemvConfig":
        """Return self after checking every field; raises ValueError saying how to fix a bad one."""
        for name in ("rows_per_program", "block_k", "num_warps"):
            _power_of_two(name, getattr(self, name), "GemvConfig")
        if isinstance(self.split_k, bool) or not isinstance(self.split_k, int) or self.split_k < 1:
            raise ValueError(f"GemvConfig.split_k must be a whole number >= 1 (1 means no split), "
                             f"got {self.split_k!r}")
        return self

    def to_dict(self) -> dict:
        """Plain dict, ready for JSON."""
        return asdict(self)


@dataclass(frozen=True)
class AttentionConfig:
    """Decode attention: context tile (positions), splits of the visible context (flash-decoding), warps."""

    block_t: int = 32
    splits: int = 1
    num_warps: int = 4

    def check(self) -> "AttentionConfig":
        """Return self after checking every field; raises ValueError saying how to fix a bad one."""
        for name in ("block_t", "num_warps"):
            _power_of_two(name, getattr(self, name), "AttentionConfig")
        if isinstance(self.splits, bool) or not isinstance(self.splits, int) or not 1 <= self.splits <= 64:
            raise ValueError(f"AttentionConfig.splits must be a whole number from 1 to 64, got {self.splits!r}")
        return self

    def to_dict(self) -> dict:
        """Plain dict, ready for JSON."""
        return asdict(self)


@dataclass(frozen=True)
class StepConfig:
    """Every launch of one decode step: a GemvConfig per weight matrix and the attention's config."""

    qkv: GemvConfig = field(default_factory=GemvConfig)
    o_proj: GemvConfig = field(default_factory=GemvConfig)
    gate_up: GemvConfig = field(default_factory=GemvConfig)
    down: GemvConfig = field(default_factory=GemvConfig)
    lm_head: GemvConfig = field(default_factory=lambda: GemvConfig(rows_per_program=8))
    attention: AttentionConfig = field(default_factory=AttentionConfig)

    def check(self) -> "StepConfig":
        """Return self after checking every part; gate_up cannot split K (its SwiGLU needs whole sums)."""
        for name in GEMV_NAMES:
            part = getattr(self, name)
            if not isinstance(part, GemvConfig):
                raise ValueError(f"StepConfig.{name} must be a GemvConfig, got {type(part).__name__}")
            part.check()
        if self.gate_up.split_k != 1:
            raise ValueError("StepConfig.gate_up.split_k must be 1: SwiGLU needs each row's whole sum; "
                             "split the down projection instead")
        if not isinstance(self.attention, AttentionConfig):
            raise ValueError(f"StepConfig.attention must be an AttentionConfig, got {type(self.attention).__name__}")
        self.attention.check()
        return self

    def with_gemv(self, name: str, config: GemvConfig) -> "StepConfig":
        """A copy with one GEMV's config replaced (name is one of GEMV_NAMES)."""
        if name not in GEMV_NAMES:
            raise ValueError(f"unknown GEMV {name!r}; use one of {GEMV_NAMES}")
        return replace(self, **{name: config})

    def to_dict(self) -> dict:
        """Plain dict, ready for JSON."""
        return asdict(self)


def default_block_k(batch: int) -> int:
    """K tile (elements) that keeps a [batch, rows, block_k] float32 product near 64 registers per thread."""
    return 512 if batch <= 2 else 256 if batch <= 8 else 128 if batch <= 16 else 64


def default_config(batch: int, *, num_kv_heads: int = 8, max_context: int = 256) -> StepConfig:
    """A reasonable StepConfig for a batch (rows); a sweep (floorlab.kernel_sweep) finds better ones per card."""
    block_k = default_block_k(batch)
    narrow = GemvConfig(rows_per_program=2, block_k=block_k)
    wide = GemvConfig(rows_per_program=4, block_k=block_k)
    # enough attention programs to fill a large GPU, but never splits shorter than a few tiles
    block_t = 32
    splits = max(1, min(16, 128 // max(1, batch * num_kv_heads), max_context // (4 * block_t)))
    return StepConfig(qkv=wide, o_proj=narrow, gate_up=wide, down=narrow,
                      lm_head=GemvConfig(rows_per_program=8, block_k=block_k),
                      attention=AttentionConfig(block_t=block_t, splits=splits))
