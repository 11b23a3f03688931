"""Engine wing: an empty launch, to time what a kernel boundary costs alone (engine.kernels.timing)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .runtime import launch_kwargs, pdl_start, pdl_wait


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
