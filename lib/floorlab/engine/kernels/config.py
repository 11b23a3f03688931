"""Engine wing: launch parameters of the book's Triton kernels, plain dataclasses without triton; the
tuning notes behind the defaults are default_config's docstring."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from floorlab.core.numbers import instance, shown, whole_number
from floorlab.core.shapes import Qwen3Shape, get_shape

GEMV_NAMES = ("qkv", "o_proj", "gate_up", "down", "lm_head")
TINY = Qwen3Shape(64, 96, 2, 4, 2, 16, 97, False, rope_theta=10000.0, name="tiny")  # small enough to interpret


def _check_int(config, name: str, hint: str = "", *, least: int = 1, most: int = 2**31,
               power_of_two: bool = False) -> None:
    """Refuse a launch setting that is not a Python int from least to most, or (power_of_two) not a power of
    two, through core.numbers' one whole-number check (Triton takes it as a constant)."""
    value = getattr(config, name)
    label = f"{type(config).__name__}.{name}"
    whole_number(value, label, at_least=least, at_most=most, int_only=True, hint=hint)
    if power_of_two and value & (value - 1):
        raise ValueError(f"{label} must be a power of two (Triton tiles are powers of two), got {shown(value)}")


@dataclass(frozen=True)
class GemvConfig:
    """One GEMV launch: output rows per program, K tile (elements), warps, K splits (1 = no split)."""

    rows_per_program: int = 4
    block_k: int = 256
    num_warps: int = 4
    split_k: int = 1
    dot: bool = False  # each tile on tensor cores, the batch padded to 16 rows (rows_per_program >= 16)
    tile_sums: bool = False  # sum each tile's products at once (default: elementwise, summed at the end)
    row_loop: bool = False  # each weight tile met by one batch row at a time (2-D products, no padding)
    num_stages: int = 3  # K tiles Triton's software pipeline keeps in flight
    swap_ab: bool = False  # (with dot) w @ x^T, weight rows as M: 64 rows on 4 warps make warpgroup MMA
    fused_reduce: bool = False  # (with split_k > 1) the last split of a row block adds the splits up

    def check(self) -> "GemvConfig":
        """Return self after checking every field; raises ValueError saying how to fix a bad one."""
        for name in ("rows_per_program", "block_k", "num_warps"):
            _check_int(self, name, power_of_two=True)
        _check_int(self, "num_stages", "K tiles in flight", most=8)
        _check_int(self, "split_k", "1 means no split")
        rules = (
            (self.dot and (self.rows_per_program < 16 or self.block_k < 16),
             f"dot=True needs rows_per_program >= 16 and block_k >= 16 (a tensor-core tile), got "
             f"{self.rows_per_program} and {self.block_k}; raise them or pass dot=False"),
            (self.dot and self.tile_sums, "dot=True already sums each tile on tensor cores; pass tile_sums=False"),
            (self.swap_ab and not self.dot,
             "swap_ab=True swaps the operands of the tensor-core product; pass dot=True with it"),
            (self.fused_reduce and self.split_k < 2,
             "fused_reduce=True adds up the sums of K splits; pass split_k >= 2 with it, or leave it False"),
            (self.row_loop and (self.dot or self.tile_sums),
             "row_loop=True sums each batch row's tile at once, so it takes neither dot=True nor tile_sums=True; "
             "pass only one of the three"))
        for broken, fix in rules:
            if broken:
                raise ValueError(f"GemvConfig: {fix}")
        return self

    def to_dict(self) -> dict:
        """Plain dict, ready for JSON."""
        return asdict(self)


@dataclass(frozen=True)
class AttentionConfig:
    """Decode attention: context tile (positions), context splits (flash-decoding), warps; o_proj_rows > 0
    fuses o_proj in, that many rows a program over the whole context (splits=1)."""

    block_t: int = 32
    splits: int = 1
    num_warps: int = 4
    o_proj_rows: int = 0

    def check(self) -> "AttentionConfig":
        """Return self after checking every field; raises ValueError saying how to fix a bad one."""
        _check_int(self, "block_t", "a tensor-core tile", least=16, power_of_two=True)
        _check_int(self, "num_warps", power_of_two=True)
        _check_int(self, "splits", most=64)
        if self.o_proj_rows:
            _check_int(self, "o_proj_rows", power_of_two=True)
            if self.splits != 1:
                raise ValueError(f"AttentionConfig(o_proj_rows={self.o_proj_rows}) attends the whole context in "
                                 f"each program; pass splits=1 with it (got {self.splits}), or o_proj_rows=0")
        return self

    def to_dict(self) -> dict:
        """Plain dict, ready for JSON; o_proj_rows only when fused (runs stored before it existed read the same)."""
        out = asdict(self)
        if not self.o_proj_rows:
            del out["o_proj_rows"]
        return out


@dataclass(frozen=True)
class StepConfig:
    """Every launch of one decode step: a GemvConfig per weight matrix and the attention's config;
    early_launch: with PDL, each kernel releases the next at its start."""

    qkv: GemvConfig = field(default_factory=GemvConfig)
    o_proj: GemvConfig = field(default_factory=GemvConfig)
    gate_up: GemvConfig = field(default_factory=GemvConfig)
    down: GemvConfig = field(default_factory=GemvConfig)
    lm_head: GemvConfig = field(default_factory=lambda: GemvConfig(rows_per_program=8))
    attention: AttentionConfig = field(default_factory=AttentionConfig)
    early_launch: bool = True

    def check(self) -> "StepConfig":
        """Return self after checking every part; gate_up splits K only with fused_reduce (SwiGLU needs whole sums)."""
        for name in GEMV_NAMES:
            instance(getattr(self, name), GemvConfig, f"StepConfig.{name}").check()
        if self.gate_up.split_k != 1 and not self.gate_up.fused_reduce:
            raise ValueError("StepConfig.gate_up.split_k > 1 needs fused_reduce=True: SwiGLU needs each row's "
                             "whole sum, which only the last split to finish has; or split the down projection")
        instance(self.attention, AttentionConfig, "StepConfig.attention").check()
        return self

    def with_gemv(self, name: str, config: GemvConfig) -> "StepConfig":
        """A copy with one GEMV's config replaced (name is one of GEMV_NAMES)."""
        if name not in GEMV_NAMES:
            raise ValueError(f"unknown GEMV {name!r}; use one of {GEMV_NAMES}")
        return replace(self, **{name: config})

    def to_dict(self) -> dict:
        """Plain dict, ready for JSON."""
        return {**asdict(self), "attention": self.attention.to_dict()}


def default_block_k(batch: int, rows_per_program: int = 4) -> int:
    """K tile (elements, 64..1024) whose [batch, rows, block_k] float32 accumulator is ~64 registers a thread."""
    padded = 1 << max(0, batch - 1).bit_length()
    block_k = 8192 // (padded * rows_per_program)
    return max(64, min(1024, 1 << (block_k.bit_length() - 1)))


def default_config(batch: int, *, hidden_size: int = 1024, num_kv_heads: int = 8, max_context: int = 256,
                   attention_size: int = 2048, intermediate_size: int = 3072) -> StepConfig:
    """A StepConfig for a batch (rows), chosen on an H200 for the qwen3-0.6b and qwen3-8b shapes.

    attention_size is heads x head_dim, o_proj's K. Chosen from the kernel sweep (python -m floorlab
    sweep) and whole steps timed with one setting changed at a time: the whole step decides, and in
    reference/h200-kernel-sweep.json no one-change variant beats its default by more than 1%
    (tests/test_reference_runs.py keeps it so). Batch 1-2: every GEMV meets each weight tile one
    row of x at a time (row_loop; 2-D products, so after the PDL wait no operand changes layout
    through shared memory), except an o_proj with K over 3072. Above: tensor cores. On the 0.6B
    (hidden_size <= 1024) each layer GEMV is one K tile per program (num_stages=1: no loop to
    pipeline) in 64-row warpgroup programs (swap_ab); its o_proj takes one-warp 16-row programs of
    1024-wide splits (slower alone, faster in the step), and its gate_up splits K with fused_reduce,
    the last split applying SwiGLU (fused_reduce elsewhere was slower in every stored step). Wider
    shapes use swap_ab for qkv, gate_up, o_proj and the LM head, and 16-row one-warp programs in four
    K splits for down. early_launch pays at batch 1-2 and, above, only with the 0.6B's split gate_up.
    Attention fused into o_proj stays off: on an H200 (reference/h200-fusion.json) it took 1.11-1.12x
    the two kernels at batch 1 and nearly 3x at batch 8. Other cards may prefer others: run the sweep.
    """
    def whole(k_size: int, most: int) -> int:  # a K tile of the whole row, up to `most` elements
        return min(most, 1 << (k_size - 1).bit_length())

    if batch <= 2:  # float32 sums in registers, each weight tile met by the x row in its own layout
        if hidden_size <= 1024:  # one tile per row: the smallest programs fill the SMs best
            qkv = GemvConfig(rows_per_program=8, block_k=1024, num_warps=4, row_loop=True)
            gate_up = GemvConfig(rows_per_program=4, block_k=1024, num_warps=2, row_loop=True)
        else:  # longer rows: a whole row to a program of 8 warps, up to 4096 elements
            qkv = GemvConfig(rows_per_program=4, block_k=whole(hidden_size, 4096), num_warps=8, row_loop=True)
            gate_up = GemvConfig(rows_per_program=2, block_k=1024, num_warps=1, row_loop=True)
        if attention_size <= 3072:  # o_proj: the whole row in one tile, loaded before the PDL wait
            o_proj = GemvConfig(rows_per_program=4, block_k=whole(attention_size, 4096), row_loop=True)
        else:  # (the row loop was slower here)
            o_proj = GemvConfig(rows_per_program=4, block_k=512)
        if intermediate_size <= 4096:
            down = GemvConfig(rows_per_program=4, block_k=whole(intermediate_size, 4096), num_warps=8, row_loop=True)
        else:
            down = GemvConfig(rows_per_program=8, block_k=4096, num_warps=8, row_loop=True)
        head = GemvConfig(rows_per_program=16, block_k=1024, row_loop=True)
    else:
        wide = GemvConfig(rows_per_program=64, block_k=128, num_warps=4, dot=True, swap_ab=True)
        if hidden_size <= 1024:  # one K tile per program; qkv's 512-wide splits timed a little faster
            one = replace(wide, num_stages=1)
            qkv = replace(one, block_k=512, split_k=max(1, hidden_size // 512))
            o_proj = replace(one, rows_per_program=16, num_warps=1, block_k=1024,
                             split_k=max(1, attention_size // 1024))
            gate_up_splits = max(1, hidden_size // 256)
            gate_up = replace(one, block_k=256, split_k=gate_up_splits, fused_reduce=gate_up_splits > 1)
            down = replace(one, block_k=256, split_k=max(1, intermediate_size // 256))
            head = GemvConfig(rows_per_program=64, block_k=64, num_warps=1, dot=True, num_stages=5)
        else:  # longer rows: the warpgroup tiles stream them best, o_proj's split in four
            qkv = replace(wide, split_k=4)
            gate_up = wide
            head = replace(wide, block_k=64, num_stages=4)
            o_proj = replace(wide, block_k=64, split_k=4, num_stages=4)
            down = GemvConfig(rows_per_program=16, block_k=128, num_warps=1, split_k=4, dot=True)
    # a context of one 64-position tile needs no split; longer ones split into whole tiles, up to
    # about two programs per SM of a large GPU at batch 1-2 (larger batches have programs enough)
    block_t = 64
    tiles = -(-max_context // block_t) if batch <= 2 else -(-max_context // (4 * block_t))
    splits = max(1, min(32, 256 // max(1, batch * num_kv_heads), tiles))
    return StepConfig(qkv=qkv, o_proj=o_proj, gate_up=gate_up, down=down, lm_head=head,
                      attention=AttentionConfig(block_t=block_t, splits=splits, num_warps=8),
                      early_launch=batch <= 2 or hidden_size <= 1024)


def shape_kwargs(shape) -> dict:
    """default_config's keyword arguments for a Qwen3Shape (all but max_context)."""
    return {"hidden_size": shape.hidden_size, "num_kv_heads": shape.num_kv_heads,
            "attention_size": shape.num_heads * shape.head_dim, "intermediate_size": shape.intermediate_size}


def gemv_shapes(shape) -> dict[str, tuple[int, int]]:
    """(weight rows N, K) of each GEMV of the step; gate_up's N counts gate and up rows."""
    shape = get_shape(shape)
    h, d, i = shape.hidden_size, shape.head_dim, shape.intermediate_size
    return {"qkv": ((shape.num_heads + 2 * shape.num_kv_heads) * d, h), "o_proj": (h, shape.num_heads * d),
            "gate_up": (2 * i, h), "down": (h, i), "lm_head": (shape.vocab_size, h)}
