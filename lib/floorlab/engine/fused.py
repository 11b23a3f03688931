"""Engine wing: the decode step written for torch.compile (Inductor) to fuse its elementwise work into few
kernels; compiled without Inductor's CUDA graphs, so GraphRunner(model, step_fn=fused) captures it."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

StepFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

ALLOWED_MODES = (None, "default", "max-autotune-no-cudagraphs")
RECOMPILE_LIMIT = 64
# Inductor options of the tuned step: coordinate-descent tuning of each generated kernel's launch
# config (in every direction), and programmatic dependent launch between its Triton kernels
TUNED_OPTIONS = {"coordinate_descent_tuning": True, "coordinate_descent_check_all_directions": True,
                 "triton.enable_pdl": True}


def tuned_options() -> dict:
    """The TUNED_OPTIONS this torch's Inductor knows (older versions lack triton.enable_pdl)."""
    from torch._inductor import config

    def known(name: str) -> bool:
        owner = config
        *parents, leaf = name.split(".")
        for part in parents:
            owner = getattr(owner, part, None)
        return owner is not None and hasattr(owner, leaf)

    return {name: value for name, value in TUNED_OPTIONS.items() if known(name)}


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim, computed in float32 and cast back before the weight (as Qwen3 does)."""
    x32 = x.float()
    normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return normed.to(x.dtype) * weight


def _rope(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
    """RoPE in the rotate_half convention: x*cos + roll(x, d/2)*sin_signed."""
    return x * cos + x.roll(x.shape[-1] // 2, dims=-1) * sin_signed


def fused_forward(model, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Logits [B, vocab] for one token per row, the decode_step math written for Inductor to fuse."""
    s = model.shape
    batch = tokens.shape[0]
    nq, nkv, d, eps = s.num_heads, s.num_kv_heads, s.head_dim, s.rms_norm_eps
    rows = model.row_index[:batch]
    visible = model.context_index <= positions[:, None]
    mask = torch.where(visible, model.mask_zero, float("-inf")).view(batch, 1, 1, model.max_context)
    cos = model.rope_cos[positions].view(batch, 1, d)
    sin_signed = model.rope_sin_signed[positions].view(batch, 1, d)

    x = F.embedding(tokens, model.embed)
    for i, w in enumerate(model.layers):
        qkv = F.linear(rms_norm(x, w.input_norm, eps), w.qkv).view(batch, nq + 2 * nkv, d)
        q = _rope(rms_norm(qkv[:, :nq], w.q_norm, eps), cos, sin_signed)
        k = _rope(rms_norm(qkv[:, nq:nq + nkv], w.k_norm, eps), cos, sin_signed)
        # index the whole cache, not a one-layer view, so the write happens in place
        layer = torch.full((1,), i, dtype=torch.long, device=rows.device)
        model.k_cache[layer, rows, :, positions] = k
        model.v_cache[layer, rows, :, positions] = qkv[:, nq + nkv:]
        # the query heads sharing a KV head become that head's query rows
        attn = F.scaled_dot_product_attention(
            q.view(batch, nkv, nq // nkv, d), model.k_cache[i, :batch], model.v_cache[i, :batch],
            attn_mask=mask)
        x = x + F.linear(attn.reshape(batch, nq * d), w.o_proj)
        gate, up = F.linear(rms_norm(x, w.post_norm, eps), w.gate_up).chunk(2, dim=-1)
        x = x + F.linear(F.silu(gate) * up, w.down)
    return F.linear(rms_norm(x, model.final_norm, eps), model.head_weight())


def fused_step(model, *, mode: str | None = None, tuned: bool = False) -> StepFn:
    """A compiled step (tokens[B], positions[B]) -> logits [B, vocab], one compile per batch size; mode is
    Inductor's (never reduce-overhead), tuned=True takes tuned_options() instead (minutes per batch size)."""
    if not hasattr(model, "k_cache") or not hasattr(model, "layers"):
        raise TypeError(f"fused_step needs a floorlab Qwen3Decoder (floorlab.engine.model.build_model), got "
                        f"{type(model).__name__}; for transformers' model call torch.compile on it directly")
    if mode not in ALLOWED_MODES:
        raise ValueError(f"mode {mode!r} is not supported; use one of {ALLOWED_MODES}. The fused step is captured "
                         "by floorlab.engine.graphs.GraphRunner, so Inductor must not add CUDA graphs of its own")
    import torch._dynamo

    # every batch bucket is its own compiled graph, and several models may share this code
    limit = getattr(torch._dynamo.config, "recompile_limit", None)
    if limit is not None and limit < RECOMPILE_LIMIT:
        torch._dynamo.config.recompile_limit = RECOMPILE_LIMIT

    def forward(tokens, positions):
        return fused_forward(model, tokens, positions)

    if tuned and mode not in (None, "default"):
        raise ValueError(f"tuned=True sets Inductor's options itself and takes no mode, got mode={mode!r}; "
                         "pass one or the other")
    options = tuned_options() if tuned else None
    if options:
        compiled = torch.compile(forward, fullgraph=True, dynamic=False, options=options)
    else:
        compiled = torch.compile(forward, fullgraph=True, dynamic=False, mode=None if mode == "default" else mode)

    def step(tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Logits [B, vocab] from the compiled step (no host syncs: capturable in a CUDA graph)."""
        model.check_inputs(tokens, positions)
        with torch.no_grad():
            return compiled(tokens, positions)

    step.compiled = compiled
    step.options = options or {}
    return step


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """L2 norm of (actual - expected) over the L2 norm of expected, in float32 (0.0 is identical)."""
    diff = (actual.float() - expected.float()).norm()
    return float(diff / expected.float().norm().clamp_min(torch.finfo(torch.float32).tiny))
