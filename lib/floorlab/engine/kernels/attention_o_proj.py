"""Engine wing: decode attention fused into o_proj, one program per (o_proj row block, KV head); the last
program of a row block adds the heads' sums to the residual in a fixed order (replays give the same bits)."""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .attention import LOG2_E, attend_range, cached_tiles, new_token
from .runtime import counters, launch_kwargs, pdl_start, pdl_wait


@triton.jit
def _row_inputs(pos_ptr, b, cos_ptr, sin_ptr, kc, vc, stride_cb, stride_ct, stride_rope, max_context,
                D: tl.constexpr, BLOCK_T: tl.constexpr):
    """(pos, cos, sin, first K tile, first V tile) of batch row b: nothing an earlier kernel of the step writes."""
    offs_d = tl.arange(0, D)
    pos = tl.minimum(tl.load(pos_ptr + b).to(tl.int32), max_context - 1)
    cos = tl.load(cos_ptr + pos * stride_rope + offs_d).to(tl.float32)
    sin = tl.load(sin_ptr + pos * stride_rope + offs_d).to(tl.float32)
    k_tile, v_tile = cached_tiles(kc + b * stride_cb, vc + b * stride_cb, tl.arange(0, BLOCK_T), pos + 1, pos,
                                  stride_ct, D)
    return pos, cos, sin, k_tile, v_tile


@triton.jit
def _attention_o_proj_kernel(qkv_ptr, pos_ptr, qn_ptr, kn_ptr, cos_ptr, sin_ptr, kc_ptr, vc_ptr,
                             w_ptr, x_ptr, part_ptr, counts_ptr, N,
                             stride_qkv, stride_cb, stride_ch, stride_ct, stride_rope, stride_wn, stride_x,
                             max_context, eps, scale_log2,
                             B: tl.constexpr, NQ: tl.constexpr, NKV: tl.constexpr, GROUP: tl.constexpr,
                             GROUP_P: tl.constexpr, GROUP_W: tl.constexpr, D: tl.constexpr,
                             BLOCK_T: tl.constexpr, ROWS: tl.constexpr, USE_PDL: tl.constexpr):
    pdl_start(USE_PDL)
    pid_n = tl.program_id(0)
    kvh = tl.program_id(1)
    offs_d = tl.arange(0, D)
    rows = pid_n * ROWS + tl.arange(0, ROWS)
    row_ok = rows < N
    gw = tl.arange(0, GROUP_W)
    g = tl.arange(0, GROUP_P)
    kc = kc_ptr + kvh * stride_ch
    vc = vc_ptr + kvh * stride_ch

    # before the wait, all that no earlier kernel writes: this program's o_proj slice
    # [rows, group, head_dim], the norm weights, and batch row 0's rope rows and first cached tile
    cols = (kvh * GROUP + gw)[None, :, None] * D + offs_d[None, None, :]
    w_mask = row_ok[:, None, None] & (gw < GROUP)[None, :, None]
    w = tl.load(w_ptr + rows[:, None, None].to(tl.int64) * stride_wn + cols, mask=w_mask, other=0.0)
    rolled = (offs_d + D // 2) % D
    qw, qw_rolled = tl.load(qn_ptr + offs_d), tl.load(qn_ptr + rolled)
    kw, kw_rolled = tl.load(kn_ptr + offs_d), tl.load(kn_ptr + rolled)
    pos0, cos0, sin0, k0, v0 = _row_inputs(pos_ptr, 0, cos_ptr, sin_ptr, kc, vc, stride_cb, stride_ct,
                                           stride_rope, max_context, D, BLOCK_T)
    pdl_wait(USE_PDL)

    dtype = kc_ptr.dtype.element_ty
    for b in tl.static_range(B):
        if b == 0:
            pos, cos, sin, k_tile, v_tile = pos0, cos0, sin0, k0, v0
        else:
            pos, cos, sin, k_tile, v_tile = _row_inputs(pos_ptr, b, cos_ptr, sin_ptr, kc, vc, stride_cb,
                                                        stride_ct, stride_rope, max_context, D, BLOCK_T)
        visible = pos + 1
        # the first row block's program alone writes this token's k and v to the cache; the others
        # read only positions below it
        writes = (pid_n == 0) & (tl.load(pos_ptr + b) < max_context)
        kc_row, vc_row = kc + b * stride_cb, vc + b * stride_cb
        q, k_new, v_new = new_token(qkv_ptr + b * stride_qkv, kc_row, vc_row, kvh, pos, writes, qw, qw_rolled, kw,
                                    kw_rolled, cos, sin, eps, stride_ct, NQ, NKV, GROUP, GROUP_P, D)
        m, total_p, acc = attend_range(q, kc_row, vc_row, k_tile, v_tile, 0, visible, pos, k_new, v_new, scale_log2,
                                       stride_ct, GROUP_P, D, BLOCK_T)
        # rounded as the two-kernel path stores it, then the query heads of the group picked out
        out = (acc / total_p[:, None]).to(dtype).to(tl.float32)
        heads = tl.sum(tl.where(gw[:, None, None] == g[None, :, None], out[None, :, :], 0.0), axis=1)
        partial = tl.sum(tl.sum(w.to(tl.float32) * heads[None, :, :], axis=2), axis=1)
        tl.store(part_ptr + (kvh * B + b) * N + rows, partial, mask=row_ok)

    tl.debug_barrier()  # every thread's sums are written before the counter says so
    count_ptr = counts_ptr + pid_n
    if tl.atomic_add(count_ptr, 1, sem="acq_rel", scope="gpu") == NKV - 1:
        for b in tl.static_range(B):  # the KV heads' sums in a fixed order: a replay gives the same bits
            total = tl.zeros([ROWS], tl.float32)
            for h in range(0, NKV):
                total += tl.load(part_ptr + (h * B + b) * N + rows, mask=row_ok, other=0.0, cache_modifier=".cg")
            x_ptrs = x_ptr + b * stride_x + rows
            res = tl.load(x_ptrs, mask=row_ok, other=0.0).to(tl.float32)
            tl.store(x_ptrs, (res + total).to(x_ptr.dtype.element_ty), mask=row_ok)
        tl.atomic_xchg(count_ptr, 0)  # ready for the next layer


def launch_attention_o_proj(qkv: torch.Tensor, positions: torch.Tensor, q_norm: torch.Tensor, k_norm: torch.Tensor,
                            rope_cos: torch.Tensor, rope_sin_signed: torch.Tensor, k_cache: torch.Tensor,
                            v_cache: torch.Tensor, o_proj: torch.Tensor, x: torch.Tensor, *, num_heads: int,
                            num_kv_heads: int, eps: float, config, pdl: int = 0,
                            counts: torch.Tensor | None = None) -> torch.Tensor:
    """x += o_proj(attention(qkv)) in place, this token's K/V written to the caches; config.o_proj_rows > 0
    rows a program; counts: int32 zeros, one per row block at least (fused_counts), left at zero."""
    batch = qkv.shape[0]
    head_dim, max_context = k_cache.shape[-1], k_cache.shape[-2]
    n_rows = o_proj.shape[0]
    rows = config.o_proj_rows
    blocks = triton.cdiv(n_rows, rows)
    counts = counters(blocks, qkv.device, counts, "fused_counts")
    group = num_heads // num_kv_heads
    partial = torch.empty((num_kv_heads, batch, n_rows), dtype=torch.float32, device=qkv.device)
    _attention_o_proj_kernel[(blocks, num_kv_heads)](
        qkv, positions, q_norm, k_norm, rope_cos, rope_sin_signed, k_cache, v_cache, o_proj, x, partial, counts,
        n_rows, qkv.stride(0), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), rope_cos.stride(0),
        o_proj.stride(0), x.stride(0), max_context, eps, LOG2_E / math.sqrt(head_dim),
        B=batch, NQ=num_heads, NKV=num_kv_heads, GROUP=group, GROUP_P=max(16, triton.next_power_of_2(group)),
        GROUP_W=triton.next_power_of_2(group), D=head_dim, BLOCK_T=config.block_t, ROWS=rows, USE_PDL=int(pdl),
        **launch_kwargs(config.num_warps, pdl))
    return x


def fused_counts(blocks: int, device) -> torch.Tensor:
    """The zeroed int32 counters the fused kernel needs: one per block of o_proj rows."""
    return counters(blocks, device)
