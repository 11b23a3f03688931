"""Engine wing: where the kernels can run: triton present, interpreter or GPU, and whether PDL
(Hopper+) is on."""
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


def interpreter_broken() -> bool:
    """True when our kernels are interpreted but Triton's own library is not (Triton was imported first)."""
    from triton.language import standard

    combine = getattr(standard, "_sum_combine", None)
    return interpreting() and combine is not None and type(combine).__name__ != "InterpretedFunction"


def interpreter_too_old() -> bool:
    """True when the kernels are interpreted by a Triton before 3.7 under NumPy 2.4 or newer.

    (Those interpreters take a loop's bound as int() of a one-element array, which NumPy 2.4 refuses.)
    """
    import numpy

    def minor(version: str) -> tuple[int, ...]:
        return tuple(int(part) for part in version.split(".")[:2])

    return interpreting() and minor(triton.__version__) < (3, 7) and minor(numpy.__version__) >= (2, 4)


def pdl_supported(device) -> bool:
    """True when a launch on device can use PDL: compiled kernels, gdc in Triton, compute capability >= 9.0."""
    import torch

    device = torch.device(device)
    if interpreting() or not HAS_GDC or device.type != "cuda" or not torch.cuda.is_available():
        return False
    return torch.cuda.get_device_capability(device) >= PDL_MIN_CAPABILITY


def launch_kwargs(num_warps: int, pdl: int, num_stages: int | None = None) -> dict:
    """Launch options: warps, software-pipeline stages when given, and launch_pdl only when PDL is on.

    (The interpreter knows no launch_pdl option.)
    """
    kwargs = {"num_warps": num_warps}
    if num_stages is not None:
        kwargs["num_stages"] = num_stages
    if pdl:
        kwargs["launch_pdl"] = True
    return kwargs


# how a kernel uses programmatic dependent launch: the USE_PDL its launcher passes
PDL_OFF, PDL_AFTER_WAIT, PDL_EARLY = 0, 1, 2
# released at its start and never waiting: its reads race the kernel before it, so its results are
# wrong. Only for timing what the wait costs (kernel_sweep.layer_kernel_rows), never for a step
PDL_NO_WAIT = 3


def pdl_mode(pdl: bool, early: bool) -> int:
    """USE_PDL for the kernels: off, next kernel released after this one's wait, or released at its start."""
    return (PDL_EARLY if early else PDL_AFTER_WAIT) if pdl else PDL_OFF


@triton.jit
def pdl_start(USE_PDL: tl.constexpr):
    """PDL_EARLY (and PDL_NO_WAIT): let the next kernel launch now.

    Safe: before its own wait, the next kernel loads only weights.
    """
    if USE_PDL >= 2:
        tl.extra.cuda.gdc_launch_dependents()


@triton.jit
def pdl_wait(USE_PDL: tl.constexpr):
    """Wait for the previous kernel's writes to be visible.

    PDL_AFTER_WAIT then lets the next kernel launch and start loading its weights.
    """
    if USE_PDL == 1 or USE_PDL == 2:  # (PDL_NO_WAIT skips it)
        tl.extra.cuda.gdc_wait()
        if USE_PDL == 1:
            tl.extra.cuda.gdc_launch_dependents()
