"""Engine wing: the book's own Triton kernels: triton_step(model) (about five kernels a layer), the bare
gemv, and layer_kernel_rows; Triton loads at the first launch (on a CPU, its interpreter)."""
from __future__ import annotations

import torch

from .config import (GEMV_NAMES, TINY, AttentionConfig, GemvConfig, StepConfig, default_block_k, default_config,
                     gemv_shapes, shape_kwargs)
from .layer_rows import KernelRow, format_layer_table, kernel_rows, layer_kernel_rows
from .timing import grid_barrier_us

DTYPES = (torch.bfloat16, torch.float16, torch.float32)

__all__ = ["GEMV_NAMES", "TINY", "TRITON_REQUIREMENT", "AttentionConfig", "GemvConfig", "KernelRow", "StepConfig",
           "default_config", "format_layer_table", "gemv", "gemv_shapes", "grid_barrier_us", "how_to_get_triton",
           "kernel_rows", "kernels_unavailable", "layer_kernel_rows", "pdl_supported", "shape_kwargs", "triton_step"]
# the Triton releases the kernels are tested with, as requirements.txt asks for them
TRITON_REQUIREMENT = "triton>=3.6,<3.10"


def how_to_get_triton() -> str:
    """How to install Triton on this machine, or why it cannot be: PyPI has wheels for Linux alone."""
    import platform

    system, machine = platform.system(), platform.machine()
    if system == "Linux" and machine in ("x86_64", "aarch64"):
        return f"install it with `pip install -r requirements.txt` or `pip install \"{TRITON_REQUIREMENT}\"`"
    return (f"Triton publishes wheels for Linux on x86_64 and aarch64 only, not for {system} {machine}: "
            "the book's kernels run only there (the rest of the book runs here)")


def _runtime():
    """The kernels' runtime module; raises RuntimeError saying how to get Triton when it is missing."""
    try:
        from . import runtime
    except ImportError as err:
        raise RuntimeError(f"the book's kernels need Triton (on a CPU too, where they run in its interpreter), "
                           f"which does not import here ({err}); {how_to_get_triton()}") from None
    return runtime


def kernels_unavailable(device) -> str:
    """Why the kernels cannot run on device here, or '' when they can (compiled or interpreted)."""
    device = torch.device(device)
    if device.type not in ("cpu", "cuda"):
        return f"the kernels run on CUDA GPUs (or the CPU interpreter), not on {device}"
    try:
        runtime = _runtime()
    except RuntimeError as err:
        return str(err)
    if device.type == "cpu" and not runtime.interpreting():
        return ("on a CPU Triton runs kernels only in its interpreter: set TRITON_INTERPRET=1 before "
                "Python first loads the kernels (restart the kernel after setting it), or use device='cuda'")
    if runtime.interpreter_broken():
        return ("Triton was imported before TRITON_INTERPRET=1 was set, so its interpreter cannot run "
                "the kernels: restart the kernel and import floorlab first, or set the variable "
                "before starting Python")
    if runtime.interpreter_too_old():
        return (f"Triton {runtime.triton.__version__}'s interpreter cannot run the kernels' loops with NumPy 2.4 "
                "or newer (Triton 3.7 fixed that): `pip install \"numpy<2.4\"`, or with a CPU build of torch "
                "`pip install \"triton>=3.7,<3.10\"`")
    return ""


def pdl_supported(device) -> bool:
    """True when kernels on device can use programmatic dependent launch (compiled, compute capability >= 9.0)."""
    return _runtime().pdl_supported(device)


def _launch_pdl(pdl: bool | None, device: torch.device, what: str) -> bool:
    """Whether launches on device use PDL (None: where supported), once the kernels can run there at all."""
    why = kernels_unavailable(device)
    if why:
        raise RuntimeError(f"{what} is on {device}, where the kernels cannot run: {why}")
    supported = pdl_supported(device)
    if pdl and not supported:
        raise ValueError(
            f"pdl=True needs compiled kernels on a CUDA GPU of compute capability >= 9.0 and a Triton with "
            f"tl.extra.cuda.gdc_wait; {device} here does not qualify (interpreter on: "
            f"{_runtime().interpreting()}); pass pdl=None or pdl=False")
    return supported if pdl is None else bool(pdl)


def triton_step(model, *, pdl: bool | None = None, config: StepConfig | None = None):
    """A decode step (tokens[B], positions[B]) -> logits[B, vocab] from the book's kernels, sharing model's
    cache; pdl=None: PDL where supported, config=None: default_config(B). GraphRunner can capture it."""
    if not all(hasattr(model, name) for name in ("layers", "k_cache", "rope_cos", "embed", "shape")):
        raise TypeError(f"triton_step needs a floorlab Qwen3Decoder (floorlab.engine.model.build_model), got "
                        f"{type(model).__name__}")
    s = model.shape
    if s.head_dim & (s.head_dim - 1) or s.num_heads % s.num_kv_heads:
        raise ValueError(f"the attention kernel needs a power-of-two head_dim and num_heads divisible by "
                         f"num_kv_heads, got head_dim={s.head_dim}, heads={s.num_heads}, kv heads={s.num_kv_heads}")
    if model.dtype not in DTYPES:
        raise ValueError(f"the kernels take weights in {DTYPES}, got {model.dtype}; build the model with one of them")
    use_pdl = _launch_pdl(pdl, model.embed.device, "the model")
    if config is not None:
        if not isinstance(config, StepConfig):
            raise TypeError(f"config must be a StepConfig (floorlab.engine.kernels.default_config(batch)), "
                            f"got {type(config).__name__}")
        config.check()
    from .step import build_step

    return build_step(model, pdl=use_pdl, config=config)


def gemv(x: torch.Tensor, weight: torch.Tensor, *, out: torch.Tensor | None = None,
         rows_per_program: int = 4, block_k: int | None = None, num_warps: int = 4, split_k: int = 1,
         dot: bool = False, tile_sums: bool = False, row_loop: bool = False, num_stages: int = 3,
         swap_ab: bool = False, fused_reduce: bool = False, pdl: bool | None = False) -> torch.Tensor:
    """y[B, N] = x[B, K] @ weight[N, K]^T in x's dtype (float32 sums) from the bare GEMV kernel, launched as
    GemvConfig says; block_k=None picks default_block_k(B)."""
    if x.dim() != 2 or weight.dim() != 2 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"gemv needs x [B, K] and weight [N, K] with the same K, got {tuple(x.shape)} and "
                         f"{tuple(weight.shape)}; reshape x to two dimensions")
    if x.dtype != weight.dtype or x.device != weight.device:
        raise ValueError(f"x ({x.dtype}, {x.device}) and weight ({weight.dtype}, {weight.device}) must share "
                         "dtype and device; convert one with .to(...)")
    if x.stride(1) != 1 or weight.stride(1) != 1:
        raise ValueError("x and weight need contiguous rows (stride 1 along K); pass .contiguous() tensors")
    use_pdl = _launch_pdl(pdl, x.device, "x")
    config = GemvConfig(rows_per_program, block_k or default_block_k(x.shape[0]), num_warps, split_k, dot,
                        tile_sums, row_loop, num_stages, swap_ab, fused_reduce).check()
    if out is None:
        out = torch.empty((x.shape[0], weight.shape[0]), dtype=x.dtype, device=x.device)
    elif out.shape != (x.shape[0], weight.shape[0]) or out.device != x.device or out.stride(1) != 1:
        raise ValueError(f"out must be a [B, N] = {(x.shape[0], weight.shape[0])} tensor with contiguous rows "
                         f"on {x.device}, got {tuple(out.shape)} on {out.device}")
    from .matvec import launch_gemv

    return launch_gemv(x, weight, out, config=config, pdl=use_pdl)
