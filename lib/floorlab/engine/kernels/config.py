"""Engine wing: launch parameters of the book's Triton kernels: tile sizes, rows per program,
warps, splits.

Plain dataclasses without triton, so a sweep can build, print and store them anywhere.

Why the defaults are what they are. default_config() was chosen on an H200, from the kernel sweep
(python -m floorlab sweep) and from whole decode steps timed with one launch setting changed at a
time. The whole step, not a kernel timed alone, decides: in the stored sweep
(reference/h200-kernel-sweep.json) no variant that changes one launch setting beats its step's
default by more than 1%, and tests/test_reference_runs.py keeps it that way.

At batch 1 and 2 every GEMV uses row_loop, except o_proj where its K (heads x head_dim) is over
3072, as on the 8B: each weight tile meets one row of x at a time. The products stay
two-dimensional, so after the PDL wait neither operand has to change layout through shared
memory, as the three-dimensional products of tile_sums made Triton do.

Above batch 2 the GEMVs multiply on tensor cores. On the 0.6B shape (hidden_size <= 1024) every
layer GEMV uses swap_ab: the weight rows become the product's M dimension, 64 rows to a program
of 4 warps, so Hopper's warpgroup MMA reads them from shared memory. K is split so that each
program covers a single K tile, with num_stages=1: with no K loop there is nothing to pipeline,
and more stages would only reserve shared memory. The 0.6B's o_proj differs in tile size:
one-warp programs of 16 rows (mma.sync instead of warpgroup MMA) in 1024-wide K splits. Timed
alone over every layer in the stored sweep it is slower than 64-row programs of 128-wide splits,
but the whole step was faster with it. On wider shapes swap_ab is used for qkv, gate_up, o_proj
and the LM head, and down takes one-warp programs of 16 rows in four K splits. Where a program
does loop over K tiles, more stay in flight: 5 for the 0.6B's LM head, 4 for the wider shapes'
LM head and o_proj, Triton's usual 3 elsewhere.

The 0.6B's gate_up above batch 2 also splits K, with fused_reduce: the last split to finish adds
the splits' sums up, in the order a separate reduce kernel would, and applies SwiGLU itself, so
no second kernel is launched. fused_reduce on qkv, o_proj or down was slower than the default in
every step the stored sweep timed, so no default uses it there.

Where an RMS norm comes before a split GEMV (qkv and gate_up), each split stores the sum of
squares of its own share of x next to its partial sums, and whatever adds the splits up applies
the norm's scale to the total. No program has to read the whole row of x before its first tile;
with that in place, the 0.6B's qkv timed best in 512-wide splits (two at hidden size 1024).

early_launch (each kernel lets the next one launch at its start, not after its PDL wait) is on at
batch 1 and 2 for every shape, and above that only where hidden_size <= 1024 (the 0.6B), where it
pays together with the split gate_up (without that split, the same early release slowed the
step). The 8B's batch-8 step is slower with it, so wider shapes keep it off there.

Attention fused into o_proj (AttentionConfig.o_proj_rows > 0) is off everywhere: replayed
side by side on an H200 (python -m floorlab.tools.fusion, stored as reference/h200-fusion.json),
its best program size took 1.11-1.12 times the two-kernel step at batch 1 on both shapes and
nearly three times at batch 8, since every block of o_proj rows computes its head's attention again.

Other cards and shapes may prefer other settings: run the sweep on them and pass its best.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from floorlab.core.shapes import Qwen3Shape, get_shape

GEMV_NAMES = ("qkv", "o_proj", "gate_up", "down", "lm_head")
TINY = Qwen3Shape(64, 96, 2, 4, 2, 16, 97, False, rope_theta=10000.0, name="tiny")  # small enough to interpret


def _power_of_two(name: str, value: int, owner: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value & (value - 1):
        raise ValueError(f"{owner}.{name} must be a power of two >= 1 (Triton tiles are powers of two), "
                         f"got {value!r}")


@dataclass(frozen=True)
class GemvConfig:
    """One GEMV launch: output rows per program, K tile (elements), warps, K splits (1 = no split).

    dot=True multiplies each tile on tensor cores, the batch padded to 16 rows (needs rows_per_program >= 16).
    tile_sums=True sums each tile's products at once (fewer registers, so larger tiles); by default they
    pile up elementwise and are summed once at the end. row_loop=True meets each weight tile with the
    batch rows one at a time, summing each at once: a batch of 8 without tensor-core padding.
    num_stages: how many K tiles Triton's software pipeline keeps in flight where it can (the tensor-core
    tiles of a K loop, copied to shared memory asynchronously); more stages put more bytes in flight.
    swap_ab=True (with dot=True) multiplies w @ x^T, the weight rows as the product's M dimension: with 4
    warps and 64 rows Triton can use Hopper's warpgroup MMA, its operands in shared memory; the batch
    pads to 8 rows there (the MMA's N), not 16. fused_reduce=True (with split_k > 1) has the last K split
    of each row block to finish add the splits' sums up, in the order a second kernel would, instead of
    launching one.

    Where each is a default (default_config; the module docstring says why): row_loop at batch 1-2;
    swap_ab above batch 2 for the 0.6B's layer GEMVs and the wider shapes' qkv, gate_up, o_proj and
    LM head; num_stages=1 for the 0.6B's one-tile programs there; fused_reduce only for the 0.6B's
    split gate_up; 16 rows and 1 warp for the 0.6B's o_proj there (slower alone, faster in the step).
    """

    rows_per_program: int = 4
    block_k: int = 256
    num_warps: int = 4
    split_k: int = 1
    dot: bool = False
    tile_sums: bool = False
    row_loop: bool = False
    num_stages: int = 3
    swap_ab: bool = False
    fused_reduce: bool = False

    def check(self) -> "GemvConfig":
        """Return self after checking every field; raises ValueError saying how to fix a bad one."""
        for name in ("rows_per_program", "block_k", "num_warps"):
            _power_of_two(name, getattr(self, name), "GemvConfig")
        if isinstance(self.num_stages, bool) or not isinstance(self.num_stages, int) or not 1 <= self.num_stages <= 8:
            raise ValueError(f"GemvConfig.num_stages must be a whole number from 1 to 8 (K tiles in flight), "
                             f"got {self.num_stages!r}")
        if isinstance(self.split_k, bool) or not isinstance(self.split_k, int) or self.split_k < 1:
            raise ValueError(f"GemvConfig.split_k must be a whole number >= 1 (1 means no split), "
                             f"got {self.split_k!r}")
        if self.dot and (self.rows_per_program < 16 or self.block_k < 16):
            raise ValueError(f"GemvConfig(dot=True) needs rows_per_program >= 16 and block_k >= 16 (a tensor-core "
                             f"tile), got {self.rows_per_program} and {self.block_k}; raise them or pass dot=False")
        if self.dot and self.tile_sums:
            raise ValueError("GemvConfig(dot=True) already sums each tile on tensor cores; pass tile_sums=False")
        if self.swap_ab and not self.dot:
            raise ValueError("GemvConfig(swap_ab=True) swaps the operands of the tensor-core product; "
                             "pass dot=True with it")
        if self.fused_reduce and self.split_k < 2:
            raise ValueError("GemvConfig(fused_reduce=True) adds up the sums of K splits; pass split_k >= 2 "
                             "with it, or leave it False")
        if self.row_loop and (self.dot or self.tile_sums):
            raise ValueError("GemvConfig(row_loop=True) sums each batch row's tile at once, so it takes neither "
                             "dot=True nor tile_sums=True; pass only one of the three")
        return self

    def to_dict(self) -> dict:
        """Plain dict, ready for JSON."""
        return asdict(self)


@dataclass(frozen=True)
class AttentionConfig:
    """Decode attention: context tile (positions), splits of the visible context (flash-decoding), warps.

    o_proj_rows > 0 fuses o_proj into the attention (attention_o_proj.py): each program attends one KV
    head over the whole context (splits=1) and multiplies by that many rows of o_proj; 0 keeps o_proj a
    GEMV of its own (StepConfig.o_proj), the two-kernel path.
    """

    block_t: int = 32
    splits: int = 1
    num_warps: int = 4
    o_proj_rows: int = 0

    def check(self) -> "AttentionConfig":
        """Return self after checking every field; raises ValueError saying how to fix a bad one."""
        for name in ("block_t", "num_warps"):
            _power_of_two(name, getattr(self, name), "AttentionConfig")
        if self.block_t < 16:
            raise ValueError(f"AttentionConfig.block_t must be at least 16 (a tensor-core tile), got {self.block_t}")
        if isinstance(self.splits, bool) or not isinstance(self.splits, int) or not 1 <= self.splits <= 64:
            raise ValueError(f"AttentionConfig.splits must be a whole number from 1 to 64, got {self.splits!r}")
        if self.o_proj_rows:
            _power_of_two("o_proj_rows", self.o_proj_rows, "AttentionConfig")
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
    """Every launch of one decode step: a GemvConfig per weight matrix and the attention's config."""

    qkv: GemvConfig = field(default_factory=GemvConfig)
    o_proj: GemvConfig = field(default_factory=GemvConfig)
    gate_up: GemvConfig = field(default_factory=GemvConfig)
    down: GemvConfig = field(default_factory=GemvConfig)
    lm_head: GemvConfig = field(default_factory=lambda: GemvConfig(rows_per_program=8))
    attention: AttentionConfig = field(default_factory=AttentionConfig)
    # with PDL, each kernel lets the next one launch at its start, not after its wait; default_config
    # turns it on at batch 1-2, and above only for hidden_size <= 1024 (the 8B's batch 8 is slower with it)
    early_launch: bool = True

    def check(self) -> "StepConfig":
        """Return self after checking every part; gate_up splits K only with fused_reduce (SwiGLU needs whole sums)."""
        for name in GEMV_NAMES:
            part = getattr(self, name)
            if not isinstance(part, GemvConfig):
                raise TypeError(f"StepConfig.{name} must be a GemvConfig, got {type(part).__name__}")
            part.check()
        if self.gate_up.split_k != 1 and not self.gate_up.fused_reduce:
            raise ValueError("StepConfig.gate_up.split_k > 1 needs fused_reduce=True: SwiGLU needs each row's "
                             "whole sum, which only the last split to finish has; or split the down projection")
        if not isinstance(self.attention, AttentionConfig):
            raise TypeError(f"StepConfig.attention must be an AttentionConfig, got {type(self.attention).__name__}")
        self.attention.check()
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
    """K tile (elements, 64..1024) whose [batch, rows, block_k] float32 accumulator is ~64 registers a thread.

    (At 4 warps; the accumulator of the register-product GEMV, not of dot=True.)
    """
    padded = 1 << max(0, batch - 1).bit_length()
    block_k = 8192 // (padded * rows_per_program)
    return max(64, min(1024, 1 << (block_k.bit_length() - 1)))


def default_config(batch: int, *, hidden_size: int = 1024, num_kv_heads: int = 8, max_context: int = 256,
                   attention_size: int = 2048, intermediate_size: int = 3072) -> StepConfig:
    """A StepConfig for a batch (rows), chosen from H200 sweeps of the qwen3-0.6b and qwen3-8b shapes.

    (floorlab.tools.sweep, and whole steps timed with one launch config changed at a time;
    attention_size is heads x head_dim, the o_proj's K.) Other cards and shapes may do better
    with other configs: run the sweep and pass its best.
    """
    def whole(k_size: int, most: int) -> int:  # a K tile of the whole row, up to `most` elements
        return min(most, 1 << (k_size - 1).bit_length())

    if batch <= 2:  # float32 sums in registers, each weight tile met by the x row in its own layout
        # (row_loop: 2-D products, so neither operand passes through shared memory to change layout)
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
    else:  # tensor cores; small programs, or warpgroup MMA (swap_ab) over K splits, fill the SMs best
        # K loops of tensor-core tiles are software-pipelined by Triton: num_stages tiles in flight
        wide = GemvConfig(rows_per_program=64, block_k=128, num_warps=4, dot=True, swap_ab=True)
        if hidden_size <= 1024:  # every layer GEMV in programs of one K tile each, no K loop: one
            # stage, which whole-step timings preferred (no pipeline buffers for a loop that never
            # runs); 64-row warpgroup programs but for o_proj. down splits K into 256-wide tiles,
            # qkv into 512-wide ones (timed a little faster than 128 or 256 once the norm no longer
            # read the whole row first); gate_up into 256-wide ones too, added up by the last split
            # to finish (fused_reduce), which then applies SwiGLU. o_proj takes one-warp programs of
            # 16 rows (mma.sync on swapped operands) in 1024-wide splits: slower by itself than
            # 64-row programs of 128-wide splits, but whole steps with it timed faster on the H200
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
            # down: few rows, so split K for programs enough
            down = GemvConfig(rows_per_program=16, block_k=128, num_warps=1, split_k=4, dot=True)
    # a context of one 64-position tile needs no split; longer ones split into whole tiles, up
    # to about two programs per SM of a large GPU at batch 1-2 (larger batches have programs enough)
    block_t = 64
    tiles = -(-max_context // block_t) if batch <= 2 else -(-max_context // (4 * block_t))
    splits = max(1, min(32, 256 // max(1, batch * num_kv_heads), tiles))
    # releasing the next kernel at a kernel's start helps the small programs of batch 1-2, and the
    # 0.6B's batch 8 with its split gate_up (without the split gate_up, the same release slows that
    # step); at larger batches of wider shapes early neighbours only slow the kernels down. The
    # kernel sweep's one-change variants time both ways on each shape
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
