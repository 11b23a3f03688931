"""Where the kernels can run: triton present, interpreter or GPU, and whether PDL (Hopper+) is on."""
from __future__ import annotations

import triton
import triton.language as tl


def _has_gdc() -> bool:
    """True when this Triton has grid dependency control (tl.extra.cuda.gdc_wait, Triton 3.4 and later)."""
    cuda = getattr(getattr(tl, "extra", None), "cuda", None)
    return hasattr(cuda, "gdc_wait") and hasattr(cuda, "gdc_launch_dependents")


HAS_GDC = _has_gdc()
PDL_MIN_CAPABILITY = (9, 0)


@triton.jit
def _probe():
    pass


def interpreting() -> bool:
    """True when this module's kernels were made for Triton's CPU interpreter (TRITON_INTERPRET=1 at import)."""
    return type(_probe).__name__ == "InterpretedFunction"


def pdl_supported(device) -> bool:
    """True when a launch on device can use PDL: compiled kernels, gdc in Triton, compute capability >= 9.0."""
    import torch

    device = torch.device(device)
    if interpreting() or not HAS_GDC or device.type != "cuda" or not torch.cuda.is_available():
        return False
    return torch.cuda.get_device_capability(device) >= PDL_MIN_CAPABILITY


def launch_kwargs(num_warps: int, pdl: bool) -> dict:
    """Launch options: warps, and launch_pdl only when PDL is on (the interpreter knows no such option)."""
    return {"num_warps": num_warps, "launch_pdl": True} if pdl else {"num_warps": num_warps}


@triton.jit
def pdl_wait(USE_PDL: tl.constexpr):
    """Wait for the previous kernel's writes, then let the next kernel start loading its weights."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
