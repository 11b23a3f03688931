"""Engine wing: where the kernels can run (Triton's interpreter or a GPU) and programmatic dependent
launch (PDL, compute capability 9.0 and up)."""
from __future__ import annotations

import triton
import triton.language as tl

# grid dependency control (tl.extra.cuda.gdc_wait) came with Triton 3.4
_CUDA = getattr(getattr(tl, "extra", None), "cuda", None)
HAS_GDC = hasattr(_CUDA, "gdc_wait") and hasattr(_CUDA, "gdc_launch_dependents")
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
    """True under a Triton before 3.7 with NumPy 2.4 or newer, whose interpreter takes a loop bound as int()
    of a one-element array, which that NumPy refuses."""
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


def counters(n: int, device, given=None, maker: str = "counters"):
    """given, once it holds n int32 counters or more on device, else n fresh zeroed ones (given None);
    split programs count on them and leave them at zero."""
    import torch

    if given is None:
        return torch.zeros(n, dtype=torch.int32, device=device)
    if given.numel() < n or given.dtype != torch.int32 or given.device != torch.device(device):
        raise ValueError(f"counts must be {maker}({n}) or longer on {device} (one per row block), got "
                         f"{given.numel()} {given.dtype} on {given.device}")
    return given


def launch_kwargs(num_warps: int, pdl: int, num_stages: int | None = None) -> dict:
    """Launch options: warps, pipeline stages when given, launch_pdl only with PDL (the interpreter knows none)."""
    kwargs = {"num_warps": num_warps}
    if num_stages is not None:
        kwargs["num_stages"] = num_stages
    if pdl:
        kwargs["launch_pdl"] = True
    return kwargs


# a kernel's USE_PDL: off, the next kernel released after this one's wait, or at its start
PDL_OFF, PDL_AFTER_WAIT, PDL_EARLY = 0, 1, 2
# released at its start and never waiting: its reads race the kernel before it, so its results are
# wrong. Only for timing what the wait costs (layer_rows.layer_kernel_rows), never for a step
PDL_NO_WAIT = 3


def pdl_mode(pdl: bool, early: bool) -> int:
    """The USE_PDL a step's kernels take."""
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
