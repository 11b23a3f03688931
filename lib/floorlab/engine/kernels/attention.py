"""Engine wing: decode attention over the visible context (flash-decoding splits, GQA rows padded to 16),
its prologue the q/k RMSNorm, RoPE and KV-cache write."""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .runtime import counters, launch_kwargs, pdl_start, pdl_wait

LOG2_E = 1.4426950408889634


@triton.jit
def norm_rope(row_ptr, heads, h_ok, offs_d, w, w_rolled, cos, sin, inv_d, eps, D: tl.constexpr):
    """RMSNorm (float32, cast, times weight) then RoPE x*cos + roll(x, D/2)*sin of heads [H, D]; returns float32.

    w, w_rolled: the norm weight and the same rolled by D/2; cos, sin: this position's rows (float32).
    """
    dtype = row_ptr.dtype.element_ty
    rolled = (offs_d + D // 2) % D
    x = tl.load(row_ptr + heads[:, None] * D + offs_d[None, :], mask=h_ok[:, None], other=0.0).to(tl.float32)
    inv = tl.rsqrt(tl.sum(x * x, axis=1) * inv_d + eps)
    xn = (x * inv[:, None]).to(dtype) * w[None, :]
    xr = tl.load(row_ptr + heads[:, None] * D + rolled[None, :], mask=h_ok[:, None], other=0.0).to(tl.float32)
    xrn = (xr * inv[:, None]).to(dtype) * w_rolled[None, :]
    first = (xn.to(tl.float32) * cos[None, :]).to(dtype).to(tl.float32)
    return (first + xrn.to(tl.float32) * sin[None, :]).to(dtype).to(tl.float32)


@triton.jit
def attend_tile(q, k_tile, v_tile, t, pos, end, k_new, v_new, m, l, acc, scale_log2):
    """Online-softmax update with positions t: cached K/V below pos, this token's k_new/v_new at pos.

    q is [heads padded to 16, D] in the cache dtype, so both products run on tensor cores.
    """
    is_new = (t == pos)[:, None]
    k = tl.where(is_new, k_new.to(k_tile.dtype), k_tile)
    v = tl.where(is_new, v_new.to(v_tile.dtype), v_tile)
    s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale_log2  # [heads, positions], log2 units
    s = tl.where((t < end)[None, :], s, float("-inf"))
    m_new = tl.maximum(m, tl.max(s, axis=1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # an empty split keeps m = -inf, l = 0
    p = tl.exp2(s - m_safe[:, None])
    alpha = tl.exp2(m - m_safe)
    l = l * alpha + tl.sum(p, axis=1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
    return m_new, l, acc


@triton.jit
def cached_tiles(kc, vc, t, end, pos, stride_ct, D: tl.constexpr):
    """The cached K and V [positions t, D] of one (row, KV head); zeros from pos on (not cached yet) and past end."""
    offs_d = tl.arange(0, D)
    cached = (t < end) & (t < pos)
    k = tl.load(kc + t[:, None] * stride_ct + offs_d[None, :], mask=cached[:, None], other=0.0)
    v = tl.load(vc + t[:, None] * stride_ct + offs_d[None, :], mask=cached[:, None], other=0.0)
    return k, v


@triton.jit
def new_token(row, kc, vc, kvh, pos, writes, qw, qw_rolled, kw, kw_rolled, cos, sin, eps, stride_ct,
              NQ: tl.constexpr, NKV: tl.constexpr, GROUP: tl.constexpr, GROUP_P: tl.constexpr, D: tl.constexpr):
    """(q [GROUP_P, D] in the cache dtype, k and v [1, D] in float32) of this token's row of qkv for one KV
    head, after the q/k norms and RoPE; k and v are written to the cache at pos where `writes`."""
    offs_d = tl.arange(0, D)
    g = tl.arange(0, GROUP_P)
    one = tl.arange(0, 1)
    q = norm_rope(row, kvh * GROUP + g, g < GROUP, offs_d, qw, qw_rolled, cos, sin, 1.0 / D, eps, D)
    k = norm_rope(row, NQ + kvh + one, one < 1, offs_d, kw, kw_rolled, cos, sin, 1.0 / D, eps, D)
    v = tl.load(row + (NQ + NKV + kvh) * D + one[:, None] * D + offs_d[None, :]).to(tl.float32)
    # (the scalar condition goes through tl.where: broadcast by &, it leaves an int32 mask in Triton
    # 3.9's interpreter)
    write = tl.where(writes, offs_d[None, :] < D, False)
    dst = pos * stride_ct + one[:, None] * D + offs_d[None, :]
    tl.store(kc + dst, k.to(kc.dtype.element_ty), mask=write)
    tl.store(vc + dst, v.to(vc.dtype.element_ty), mask=write)
    return q.to(kc.dtype.element_ty), k, v  # (the cast is exact: norm_rope rounds to the dtype)


@triton.jit
def attend_range(q, kc, vc, k_tile, v_tile, start, end, pos, k_new, v_new, scale_log2, stride_ct,
                 GROUP_P: tl.constexpr, D: tl.constexpr, BLOCK_T: tl.constexpr):
    """(m, l, acc): the online softmax of q over positions start..end-1, from their first tiles; each tile's
    successor loads before the tile is used."""
    m = tl.full([GROUP_P], float("-inf"), tl.float32)
    l = tl.zeros([GROUP_P], tl.float32)
    acc = tl.zeros([GROUP_P, D], tl.float32)
    for t0 in range(start, end, BLOCK_T):
        t = t0 + tl.arange(0, BLOCK_T)
        k_next, v_next = cached_tiles(kc, vc, t + BLOCK_T, end, pos, stride_ct, D)
        m, l, acc = attend_tile(q, k_tile, v_tile, t, pos, end, k_new, v_new, m, l, acc, scale_log2)
        k_tile, v_tile = k_next, v_next
    return m, l, acc


@triton.jit
def _attention_kernel(qkv_ptr, pos_ptr, qn_ptr, kn_ptr, cos_ptr, sin_ptr, kc_ptr, vc_ptr,
                      out_ptr, m_ptr, l_ptr, acc_ptr, counts_ptr,
                      stride_qkv, stride_cb, stride_ch, stride_ct, stride_rope, stride_ob,
                      max_context, eps, scale_log2,
                      NQ: tl.constexpr, NKV: tl.constexpr, GROUP: tl.constexpr, GROUP_P: tl.constexpr,
                      D: tl.constexpr, BLOCK_T: tl.constexpr, SPLITS: tl.constexpr, SPLITS_P: tl.constexpr,
                      USE_PDL: tl.constexpr):
    pdl_start(USE_PDL)
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    split = tl.program_id(2)
    offs_d = tl.arange(0, D)
    offs_t = tl.arange(0, BLOCK_T)
    pos = tl.minimum(tl.load(pos_ptr + b).to(tl.int32), max_context - 1)
    visible = pos + 1
    chunk = tl.cdiv(tl.cdiv(visible, SPLITS), BLOCK_T) * BLOCK_T
    start = split * chunk
    end = tl.minimum(start + chunk, visible)
    kc = kc_ptr + b * stride_cb + kvh * stride_ch
    vc = vc_ptr + b * stride_cb + kvh * stride_ch

    # before the wait, all that no earlier kernel writes: the norm weights, this position's rope
    # rows and the first cached tile (positions < pos, written by earlier steps)
    rolled = (offs_d + D // 2) % D
    qw, qw_rolled = tl.load(qn_ptr + offs_d), tl.load(qn_ptr + rolled)
    kw, kw_rolled = tl.load(kn_ptr + offs_d), tl.load(kn_ptr + rolled)
    cos = tl.load(cos_ptr + pos * stride_rope + offs_d).to(tl.float32)
    sin = tl.load(sin_ptr + pos * stride_rope + offs_d).to(tl.float32)
    k_tile, v_tile = cached_tiles(kc, vc, start + offs_t, end, pos, stride_ct, D)
    pdl_wait(USE_PDL)

    # every split holds this token's k and v in registers; split 0 alone writes them to the cache
    writes = (split == 0) & (tl.load(pos_ptr + b) < max_context)
    q, k_new, v_new = new_token(qkv_ptr + b * stride_qkv, kc, vc, kvh, pos, writes, qw, qw_rolled, kw, kw_rolled,
                                cos, sin, eps, stride_ct, NQ, NKV, GROUP, GROUP_P, D)
    m, l, acc = attend_range(q, kc, vc, k_tile, v_tile, start, end, pos, k_new, v_new, scale_log2, stride_ct,
                             GROUP_P, D, BLOCK_T)

    g = tl.arange(0, GROUP_P)
    heads = kvh * GROUP + g
    h_ok = (g < GROUP)[:, None]
    if SPLITS == 1:
        _store_rows(out_ptr + b * stride_ob, heads, h_ok, offs_d, acc / l[:, None], D)
    elif tl.cdiv(visible, chunk) == 1:  # a short context sits in split 0 alone: no partials to merge
        if split == 0:
            _store_rows(out_ptr + b * stride_ob, heads, h_ok, offs_d, acc / l[:, None], D)
    else:  # float32 partials [B, NQ, SPLITS] (+ D); the last split to finish merges them
        slot = (b * NQ + heads) * SPLITS + split
        tl.store(m_ptr + slot, m, mask=g < GROUP)
        tl.store(l_ptr + slot, l, mask=g < GROUP)
        tl.store(acc_ptr + slot[:, None] * D + offs_d[None, :], acc, mask=h_ok)
        tl.debug_barrier()  # every thread's partials are written before the counter says so
        count_ptr = counts_ptr + b * NKV + kvh
        if tl.atomic_add(count_ptr, 1, sem="acq_rel", scope="gpu") == SPLITS - 1:
            _merge_splits(m_ptr, l_ptr, acc_ptr, out_ptr + b * stride_ob, (b * NQ + heads) * SPLITS, heads,
                          g < GROUP, offs_d, D, SPLITS, SPLITS_P)
            tl.atomic_xchg(count_ptr, 0)  # ready for the next layer


@triton.jit
def _store_rows(out_row, heads, h_ok, offs_d, out, D: tl.constexpr):
    """out_row[heads, :] = out (heads x D), rounded to the output's dtype."""
    tl.store(out_row + heads[:, None] * D + offs_d[None, :], out.to(out_row.dtype.element_ty), mask=h_ok)


@triton.jit
def _merge_splits(m_ptr, l_ptr, acc_ptr, out_row, first_slot, heads, h_ok, offs_d,
                  D: tl.constexpr, SPLITS: tl.constexpr, SPLITS_P: tl.constexpr):
    """out[heads] = the splits' partial softmax sums merged (split 0 holds position 0: its max is finite)."""
    s = tl.arange(0, SPLITS_P)
    ok = h_ok[:, None] & (s < SPLITS)[None, :]
    slots = first_slot[:, None] + s[None, :]  # [heads, splits]
    m = tl.load(m_ptr + slots, mask=ok, other=float("-inf"), cache_modifier=".cg")
    l = tl.load(l_ptr + slots, mask=ok, other=0.0, cache_modifier=".cg")
    acc = tl.load(acc_ptr + slots[:, :, None] * D + offs_d[None, None, :], mask=ok[:, :, None], other=0.0,
                  cache_modifier=".cg")
    m_max = tl.max(m, axis=1)
    weight = tl.exp2(m - tl.where(h_ok, m_max, 0.0)[:, None])
    out = tl.sum(acc * weight[:, :, None], axis=1) / tl.where(h_ok, tl.sum(l * weight, axis=1), 1.0)[:, None]
    _store_rows(out_row, heads, h_ok[:, None], offs_d, out, D)


def launch_attention(qkv: torch.Tensor, positions: torch.Tensor, q_norm: torch.Tensor, k_norm: torch.Tensor,
                     rope_cos: torch.Tensor, rope_sin_signed: torch.Tensor, k_cache: torch.Tensor,
                     v_cache: torch.Tensor, out: torch.Tensor, *, num_heads: int, num_kv_heads: int, eps: float,
                     config, pdl: int = 0, counts: torch.Tensor | None = None) -> torch.Tensor:
    """Write out[B, heads*head_dim] and this token's K/V into the layer's caches [max_batch, kv, context, d];
    counts: int32 zeros per (row, KV head) for splits > 1 (None: fresh ones), left at zero."""
    batch = qkv.shape[0]
    head_dim, max_context = k_cache.shape[-1], k_cache.shape[-2]
    group = num_heads // num_kv_heads
    splits = config.splits
    if splits == 1:
        m = l = acc = counts = out
    else:
        m = torch.empty((batch, num_heads, splits), dtype=torch.float32, device=qkv.device)
        l = torch.empty_like(m)
        acc = torch.empty((batch, num_heads, splits, head_dim), dtype=torch.float32, device=qkv.device)
        if counts is None:
            counts = attention_counts(batch, num_kv_heads, qkv.device)
    _attention_kernel[(batch, num_kv_heads, splits)](
        qkv, positions, q_norm, k_norm, rope_cos, rope_sin_signed, k_cache, v_cache, out, m, l, acc, counts,
        qkv.stride(0), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), rope_cos.stride(0), out.stride(0),
        max_context, eps, LOG2_E / math.sqrt(head_dim),
        NQ=num_heads, NKV=num_kv_heads, GROUP=group, GROUP_P=max(16, triton.next_power_of_2(group)), D=head_dim,
        BLOCK_T=config.block_t, SPLITS=splits, SPLITS_P=triton.next_power_of_2(splits), USE_PDL=int(pdl),
        **launch_kwargs(config.num_warps, pdl))
    return out


def attention_counts(batch: int, num_kv_heads: int, device) -> torch.Tensor:
    """The zeroed int32 counters a split attention needs: one per (batch row, KV head)."""
    return counters(batch * num_kv_heads, device)
