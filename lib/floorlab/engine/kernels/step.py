"""Engine wing: one decode step from the book's kernels: embedding, five kernels a layer (qkv, attention,
o_proj, gate_up+SwiGLU, down; norms fused in), norm + LM head, on the model's weights and cache."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .attention import attention_counts, launch_attention
from .attention_o_proj import fused_counts, launch_attention_o_proj
from .config import StepConfig, default_config, shape_kwargs
from .matvec import gemv_counts, launch_gemv
from .runtime import launch_kwargs, pdl_mode, pdl_start, pdl_wait

EMBED_BLOCK = 1024


@triton.jit
def _embedding_kernel(tokens_ptr, embed_ptr, x_ptr, H, V, stride_e, stride_x,
                      BLOCK_H: tl.constexpr, USE_PDL: tl.constexpr):
    pdl_start(USE_PDL)
    b = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    token = tl.load(tokens_ptr + b)
    # a token outside the vocabulary reads nothing (tl.where, not &, for the scalar
    # condition: broadcast by &, it leaves an int32 mask in Triton 3.9's interpreter)
    ok = tl.where((token >= 0) & (token < V), offs < H, False)
    row = tl.load(embed_ptr + token.to(tl.int64) * stride_e + offs, mask=ok, other=0.0)
    pdl_wait(USE_PDL)  # x may still be read by the kernel before this one
    tl.store(x_ptr + b * stride_x + offs, row, mask=offs < H)


def launch_embedding(tokens: torch.Tensor, embed: torch.Tensor, out: torch.Tensor, *, pdl: int) -> torch.Tensor:
    """Write out[B, hidden] = embed[tokens] (rows of an out-of-range token are zeros)."""
    hidden = embed.shape[1]
    block = min(EMBED_BLOCK, triton.next_power_of_2(hidden))
    _embedding_kernel[(tokens.shape[0], triton.cdiv(hidden, block))](
        tokens, embed, out, hidden, embed.shape[0], embed.stride(0), out.stride(0),
        BLOCK_H=block, USE_PDL=int(pdl), **launch_kwargs(4, pdl))
    return out


def build_step(model, *, pdl: bool, config: StepConfig | None):
    """A step (tokens[B], positions[B]) -> logits[B, vocab] running the kernels; positions must be < max_context."""
    s = model.shape
    nq, nkv, d, eps = s.num_heads, s.num_kv_heads, s.head_dim, s.rms_norm_eps
    head = model.head_weight()
    chosen = {}

    def config_for(batch: int) -> StepConfig:
        if config is not None:
            return config
        if batch not in chosen:
            chosen[batch] = default_config(batch, max_context=model.max_context, **shape_kwargs(s))
        return chosen[batch]

    def step(tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Logits [B, vocab] in the model's dtype; writes K/V at (row, position) of every layer's cache."""
        batch = model.check_inputs(tokens, positions)
        cfg = config_for(batch)
        mode = pdl_mode(pdl, cfg.early_launch)
        kw = dict(dtype=model.dtype, device=model.embed.device)
        x = torch.empty((batch, s.hidden_size), **kw)
        qkv = torch.empty((batch, (nq + 2 * nkv) * d), **kw)
        attn = torch.empty((batch, nq * d), **kw)
        act = torch.empty((batch, s.intermediate_size), **kw)
        logits = torch.empty((batch, s.vocab_size), **kw)
        counts = attention_counts(batch, nkv, x.device) if cfg.attention.splits > 1 else None
        rows = cfg.attention.o_proj_rows
        fused = fused_counts(-(-s.hidden_size // rows), x.device) if rows else None
        out_rows = {"qkv": qkv.shape[1], "o_proj": s.hidden_size, "gate_up": s.intermediate_size,
                    "down": s.hidden_size, "lm_head": s.vocab_size}
        blocks = [-(-n // getattr(cfg, name).rows_per_program) for name, n in out_rows.items()
                  if getattr(cfg, name).fused_reduce]  # one counter per row block, shared in turn
        gemv = dict(pdl=mode, counts=gemv_counts(max(blocks), x.device) if blocks else None)
        launch_embedding(tokens, model.embed, x, pdl=mode)
        for i, w in enumerate(model.layers):
            launch_gemv(x, w.qkv, qkv, config=cfg.qkv, norm_weight=w.input_norm, eps=eps, **gemv)
            tables = (model.rope_cos, model.rope_sin_signed, model.k_cache[i], model.v_cache[i])
            if fused is not None:  # attention and o_proj in one kernel
                launch_attention_o_proj(qkv, positions, w.q_norm, w.k_norm, *tables, w.o_proj, x, num_heads=nq,
                                        num_kv_heads=nkv, eps=eps, config=cfg.attention, pdl=mode, counts=fused)
            else:
                launch_attention(qkv, positions, w.q_norm, w.k_norm, *tables, attn, num_heads=nq, num_kv_heads=nkv,
                                 eps=eps, config=cfg.attention, pdl=mode, counts=counts)
                launch_gemv(attn, w.o_proj, x, config=cfg.o_proj, residual=x, **gemv)
            launch_gemv(x, w.gate_up, act, config=cfg.gate_up, norm_weight=w.post_norm, eps=eps,
                        swiglu=True, **gemv)
            launch_gemv(act, w.down, x, config=cfg.down, residual=x, **gemv)
        launch_gemv(x, head, logits, config=cfg.lm_head, norm_weight=model.final_norm, eps=eps, **gemv)
        return logits

    return step
