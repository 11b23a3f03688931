"""Engine wing: an empty launch, to time what a kernel boundary costs alone, and a barrier across one
launch's programs, what the same dependency costs inside a persistent kernel (engine.kernels.timing)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .runtime import interpreting, launch_kwargs, pdl_start, pdl_wait


@triton.jit
def _empty_kernel(src_ptr, dst_ptr, BLOCK: tl.constexpr, USE_PDL: tl.constexpr):
    # wait for the launch before, read the BLOCK values it wrote; program 0 writes them on, plus one
    pdl_start(USE_PDL)
    offs = tl.arange(0, BLOCK)
    pdl_wait(USE_PDL)
    x = tl.load(src_ptr + offs)
    tl.store(dst_ptr + offs, x + 1.0, mask=tl.where(tl.program_id(0) == 0, offs < BLOCK, False))


def launch_empty(src: torch.Tensor, dst: torch.Tensor, programs: int, num_warps: int, pdl: int) -> torch.Tensor:
    """dst = src + 1 (float32, one power of two of values), with `programs` programs of num_warps warps."""
    _empty_kernel[(programs,)](src, dst, BLOCK=src.numel(), USE_PDL=int(pdl), **launch_kwargs(num_warps, pdl))
    return dst


@triton.jit
def _grid_barrier_kernel(counter_ptr, rounds, PROGRAMS: tl.constexpr):
    # each round every program arrives (release), then spins until all of them have (acquire)
    for r in range(rounds):
        tl.debug_barrier()
        tl.atomic_add(counter_ptr, 1, sem="release", scope="gpu")
        seen = tl.atomic_add(counter_ptr, 0, sem="acquire", scope="gpu")
        while seen < (r + 1) * PROGRAMS:
            seen = tl.atomic_add(counter_ptr, 0, sem="acquire", scope="gpu")


def grid_barriers(counter: torch.Tensor, rounds: int, programs: int, num_warps: int) -> torch.Tensor:
    """`rounds` barriers across `programs` programs in one launch, counted in counter (one int32, zeroed here).

    Every program must be resident at once (one per SM always is). Triton's interpreter runs programs one
    after another, so there only programs=1 can finish.
    """
    if programs > 1 and interpreting():
        raise ValueError(f"grid_barriers(programs={programs}) spins until every program arrives, which Triton's "
                         "interpreter, running one program after another, never lets happen; pass programs=1")
    counter.zero_()
    _grid_barrier_kernel[(programs,)](counter, rounds, PROGRAMS=programs, num_warps=num_warps)
    return counter
