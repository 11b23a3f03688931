"""Engine wing: decode GEMVs y[B, N] = x[B, K] @ W[N, K]^T (B = 1..16), rows_per_program rows a program
over block_k tiles, a deferred RMSNorm prologue (scaled by 1/rms at the end) and fused residual or SwiGLU."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .runtime import counters, launch_kwargs, pdl_start, pdl_wait

# what the epilogue does with the float32 sums
STORE = tl.constexpr(0)
RESIDUAL = tl.constexpr(1)
SWIGLU = tl.constexpr(2)
REDUCE_BLOCK_N = 256


@triton.jit
def _x_tile(x_ptr, stride_xb, bidx, b_ok, k, k_ok, norm_ptr, sum_sq, NORM: tl.constexpr):
    """(x[:, k] in float32, sum_sq); with NORM, x * the norm's weight, its squares added to sum_sq."""
    mask = b_ok[:, None] & k_ok[None, :]
    xf = tl.load(x_ptr + bidx[:, None] * stride_xb + k[None, :], mask=mask, other=0.0).to(tl.float32)
    if NORM:
        nw = tl.load(norm_ptr + k, mask=k_ok, other=0.0)
        sum_sq += tl.sum(xf * xf, axis=1)
        xf = xf * nw.to(tl.float32)[None, :]
    return xf, sum_sq


@triton.jit
def _dot(acc, xv, w, DOT: tl.constexpr, TILE_SUMS: tl.constexpr):
    """Add this tile's x[B, k] * w[R, k] to acc.

    DOT == 1: acc[B, R] += x @ w^T on tensor cores (B padded to 16).
    DOT == 2: acc[R, B] += w @ x^T, the weight rows as the product's M dimension.
    TILE_SUMS: acc[B, R] += the tile's sums over k.
    Else acc[B, R, k] grows elementwise in float32 and is summed over k once,
    after the last tile (no shuffles between threads per tile).
    """
    if DOT == 2:
        out = tl.dot(w, tl.trans(xv.to(w.dtype)), acc, input_precision="ieee")
    elif DOT:
        out = tl.dot(xv.to(w.dtype), tl.trans(w), acc, input_precision="ieee")
    elif TILE_SUMS:
        out = acc + tl.sum(xv[:, None, :] * w.to(tl.float32)[None, :, :], axis=2)
    else:
        out = acc + xv[:, None, :] * w.to(tl.float32)[None, :, :]
    return out


@triton.jit
def _rows_tile(acc, acc_up, sum_sq, w, u, x_ptr, stride_xb, B, bidx, k, k_ok,
               norm_ptr, NORM: tl.constexpr, UP: tl.constexpr,
               BLOCK_B: tl.constexpr):
    """ROW_LOOP: add the tile's sums to acc[B, R] and acc_up, a row of x at a time.

    Each row of x (a few KB, from cache) is loaded in the layout the weight tile
    has, so the products stay 2-D and neither operand changes layout through
    shared memory. A batch of 8 streams the weights once, as batch 1 does.
    """
    wf = w.to(tl.float32)
    if UP:
        uf = u.to(tl.float32)
    if NORM:
        nw = tl.load(norm_ptr + k, mask=k_ok, other=0.0)
    for b in tl.static_range(BLOCK_B):
        here = bidx == b
        # (tl.where, not &: a scalar condition broadcast by & leaves a mask of
        # int32 in Triton 3.9's interpreter, which loads refuse)
        x_ok = tl.where(b < B, k_ok, False)
        xv = tl.load(x_ptr + b * stride_xb + k, mask=x_ok, other=0.0)
        xf = xv.to(tl.float32)
        if NORM:  # deferred: the caller scales the sums by 1/rms
            sum_sq += tl.where(here, tl.sum(xf * xf, axis=0), 0.0)
            xf = xf * nw.to(tl.float32)
        row = tl.sum(wf * xf[None, :], axis=1)
        acc += tl.where(here[:, None], row[None, :], 0.0)
        if UP:
            row_up = tl.sum(uf * xf[None, :], axis=1)
            acc_up += tl.where(here[:, None], row_up[None, :], 0.0)
    return acc, acc_up, sum_sq


@triton.jit
def _tile(acc, acc_up, sum_sq, w, u, x_ptr, stride_xb, B, bidx, b_ok, k, k_ok, norm_ptr,
          NORM: tl.constexpr, UP: tl.constexpr, DOT: tl.constexpr, TILE_SUMS: tl.constexpr,
          ROW_LOOP: tl.constexpr, BLOCK_B: tl.constexpr):
    """One K tile: the weight tile w (and u, the up rows, with UP) times x, added to the sums."""
    if ROW_LOOP:
        acc, acc_up, sum_sq = _rows_tile(acc, acc_up, sum_sq, w, u, x_ptr, stride_xb, B, bidx, k, k_ok,
                                         norm_ptr, NORM, UP, BLOCK_B)
    else:
        xv, sum_sq = _x_tile(x_ptr, stride_xb, bidx, b_ok, k, k_ok, norm_ptr, sum_sq, NORM)
        acc = _dot(acc, xv, w, DOT, TILE_SUMS)
        if UP:
            acc_up = _dot(acc_up, xv, u, DOT, TILE_SUMS)
    return acc, acc_up, sum_sq


@triton.jit
def _weight_tile(w_rows, u_rows, k, k_end, row_ok, EVEN_K: tl.constexpr, UP: tl.constexpr):
    """(w, u, k_ok): the weight tile at columns k, and with UP the up rows' tile (else u is w); columns
    from k_end on read as zeros."""
    k_ok = k < k_end
    if EVEN_K:
        w_mask = row_ok[:, None]
    else:
        w_mask = row_ok[:, None] & k_ok[None, :]
    w = tl.load(w_rows + k[None, :], mask=w_mask, other=0.0)
    if UP:
        u = tl.load(u_rows + k[None, :], mask=w_mask, other=0.0)
    else:
        u = w
    return w, u, k_ok


@triton.jit
def _gemv_kernel(x_ptr, w_ptr, norm_ptr, res_ptr, out_ptr, part_ptr, sq_ptr, counts_ptr,
                 B, N, K, stride_xb, stride_wn, stride_rb, stride_ob, stride_os, k_per_split, eps,
                 BLOCK_B: tl.constexpr, ROWS: tl.constexpr, BLOCK_K: tl.constexpr,
                 NORM: tl.constexpr, EPILOGUE: tl.constexpr, EVEN_K: tl.constexpr,
                 DOT: tl.constexpr, TILE_SUMS: tl.constexpr, ROW_LOOP: tl.constexpr, USE_PDL: tl.constexpr,
                 SPLIT: tl.constexpr, FUSED_REDUCE: tl.constexpr):
    pdl_start(USE_PDL)
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rows = pid_n * ROWS + tl.arange(0, ROWS)
    row_ok = rows < N
    bidx = tl.arange(0, BLOCK_B)
    b_ok = bidx < B
    offs_k = tl.arange(0, BLOCK_K)
    k_start = pid_k * k_per_split
    k_end = tl.minimum(k_start + k_per_split, K)
    w_rows = w_ptr + rows[:, None].to(tl.int64) * stride_wn
    u_rows = w_rows + N * stride_wn  # SwiGLU: the up rows sit N rows below the gate rows

    # first weight tile: independent of the previous kernel, so it loads before the wait
    k = k_start + offs_k
    w, u, k_ok = _weight_tile(w_rows, u_rows, k, k_end, row_ok, EVEN_K, EPILOGUE == SWIGLU)
    pdl_wait(USE_PDL)
    out_mask = b_ok[:, None] & row_ok[None, :]
    res = tl.zeros([BLOCK_B, ROWS], tl.float32)  # (no residual)
    if EPILOGUE == RESIDUAL and not SPLIT:  # res may be out itself: read before any program writes
        res = tl.load(res_ptr + bidx[:, None] * stride_rb + rows[None, :], mask=out_mask, other=0.0)

    sum_sq = tl.zeros([BLOCK_B], tl.float32)  # of x over this program's K range, with NORM
    if DOT == 2:  # transposed back after the last tile
        acc = tl.zeros([ROWS, BLOCK_B], tl.float32)
        acc_up = tl.zeros([ROWS, BLOCK_B], tl.float32)
    elif DOT or TILE_SUMS or ROW_LOOP:
        acc = tl.zeros([BLOCK_B, ROWS], tl.float32)
        acc_up = tl.zeros([BLOCK_B, ROWS], tl.float32)
    else:
        acc = tl.zeros([BLOCK_B, ROWS, BLOCK_K], tl.float32)
        acc_up = tl.zeros([BLOCK_B, ROWS, BLOCK_K], tl.float32)
    acc, acc_up, sum_sq = _tile(acc, acc_up, sum_sq, w, u, x_ptr, stride_xb, B, bidx, b_ok, k, k_ok, norm_ptr,
                                NORM, EPILOGUE == SWIGLU, DOT, TILE_SUMS, ROW_LOOP, BLOCK_B)
    for k0 in range(k_start + BLOCK_K, k_end, BLOCK_K):
        k = k0 + offs_k
        w, u, k_ok = _weight_tile(w_rows, u_rows, k, k_end, row_ok, EVEN_K, EPILOGUE == SWIGLU)
        acc, acc_up, sum_sq = _tile(acc, acc_up, sum_sq, w, u, x_ptr, stride_xb, B, bidx, b_ok, k, k_ok, norm_ptr,
                                    NORM, EPILOGUE == SWIGLU, DOT, TILE_SUMS, ROW_LOOP, BLOCK_B)

    if DOT == 2:
        acc = tl.trans(acc)
        if EPILOGUE == SWIGLU:
            acc_up = tl.trans(acc_up)
    if not DOT and not TILE_SUMS and not ROW_LOOP:
        acc = tl.sum(acc, axis=2)
        if EPILOGUE == SWIGLU:
            acc_up = tl.sum(acc_up, axis=2)
    out_ptrs = out_ptr + bidx[:, None] * stride_ob + rows[None, :]
    if not SPLIT:  # one pass over x: its sum of squares grew with the tiles
        _finish(acc, acc_up, sum_sq, K, eps, res, x_ptr, out_ptrs, out_mask, NORM, EPILOGUE)
    else:  # float32 sums of this K split, [splits, B, N] (with SWIGLU gate then up: [splits, 2, B, N])
        part_ptrs = part_ptr + bidx[:, None] * N + rows[None, :]
        tl.store(part_ptrs + pid_k * stride_os, acc, mask=out_mask)
        if EPILOGUE == SWIGLU:
            tl.store(part_ptrs + B * N + pid_k * stride_os, acc_up, mask=out_mask)
        # with NORM, this split's sum of squares of x, [splits, row blocks, B]: each row block keeps its own
        sq_ptrs = sq_ptr + (pid_k * tl.num_programs(0) + pid_n) * B + bidx
        if NORM:
            tl.store(sq_ptrs, sum_sq, mask=b_ok)
        if FUSED_REDUCE:  # the last split of these rows to finish adds them up, as _splitk_reduce_kernel would
            tl.debug_barrier()  # every thread's sums are written before the counter says so
            count_ptr = counts_ptr + pid_n
            if tl.atomic_add(count_ptr, 1, sem="acq_rel", scope="gpu") == tl.num_programs(1) - 1:
                total = tl.zeros([BLOCK_B, ROWS], tl.float32)
                total_up = tl.zeros([BLOCK_B, ROWS], tl.float32)
                total_sq = tl.zeros([BLOCK_B], tl.float32)
                for split in range(0, tl.num_programs(1)):
                    total += tl.load(part_ptrs + split * stride_os, mask=out_mask, other=0.0, cache_modifier=".cg")
                    if EPILOGUE == SWIGLU:
                        total_up += tl.load(part_ptrs + B * N + split * stride_os, mask=out_mask, other=0.0,
                                            cache_modifier=".cg")
                    if NORM:
                        total_sq += tl.load(sq_ptrs + (split - pid_k) * tl.num_programs(0) * B, mask=b_ok,
                                            other=0.0, cache_modifier=".cg")
                res_now = total  # (no residual)
                if EPILOGUE == RESIDUAL:  # res may be out itself: these rows are read and written here alone
                    res_now = tl.load(res_ptr + bidx[:, None] * stride_rb + rows[None, :], mask=out_mask, other=0.0)
                _finish(total, total_up, total_sq, K, eps, res_now, x_ptr, out_ptrs, out_mask, NORM, EPILOGUE)
                tl.atomic_xchg(count_ptr, 0)  # ready for the next GEMV


@triton.jit
def _finish(acc, acc_up, sum_sq, K, eps, res, x_ptr, out_ptrs, out_mask, NORM: tl.constexpr,
            EPILOGUE: tl.constexpr):
    """Scale the float32 sums by 1/rms of x (the deferred norm, with NORM), then store them at out_ptrs:
    as they are, added to res, or as silu(gate) * up."""
    if NORM:
        scale = tl.rsqrt(sum_sq / K + eps)[:, None]
        acc = acc * scale
        if EPILOGUE == SWIGLU:
            acc_up = acc_up * scale
    dtype = x_ptr.dtype.element_ty
    if EPILOGUE == STORE:
        tl.store(out_ptrs, acc.to(out_ptrs.dtype.element_ty), mask=out_mask)
    elif EPILOGUE == RESIDUAL:  # one rounding after the add, as addmm does
        tl.store(out_ptrs, (res.to(tl.float32) + acc).to(out_ptrs.dtype.element_ty), mask=out_mask)
    else:  # SWIGLU: silu(gate) * up, each rounded to the dtype as the plain step rounds them
        gate = acc.to(dtype).to(tl.float32)
        up = acc_up.to(dtype).to(tl.float32)
        silu = (gate * tl.sigmoid(gate)).to(dtype).to(tl.float32)
        tl.store(out_ptrs, (silu * up).to(out_ptrs.dtype.element_ty), mask=out_mask)


@triton.jit
def _splitk_reduce_kernel(part_ptr, sq_ptr, res_ptr, out_ptr, N, K, stride_ps, stride_ss, stride_rb, stride_ob,
                          eps, SPLIT_K: tl.constexpr, BLOCK_N: tl.constexpr, HAS_RES: tl.constexpr,
                          NORM: tl.constexpr, USE_PDL: tl.constexpr):
    pdl_start(USE_PDL)
    b = tl.program_id(1)
    n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = n < N
    pdl_wait(USE_PDL)
    acc = tl.zeros([BLOCK_N], tl.float32)
    sum_sq = 0.0
    for s in tl.static_range(SPLIT_K):
        acc += tl.load(part_ptr + s * stride_ps + b * N + n, mask=ok, other=0.0)
        if NORM:  # the first row block's sums of squares (every row block stored the same ones)
            sum_sq += tl.load(sq_ptr + s * stride_ss + b)
    if NORM:  # the deferred RMSNorm, as the GEMV scales its sums without a split
        acc = acc * tl.rsqrt(sum_sq / K + eps)
    if HAS_RES:
        acc += tl.load(res_ptr + b * stride_rb + n, mask=ok, other=0.0).to(tl.float32)
    tl.store(out_ptr + b * stride_ob + n, acc.to(out_ptr.dtype.element_ty), mask=ok)


def gemv_grid(n_rows: int, k_size: int, config) -> tuple[tuple[int, int], int, int]:
    """((row blocks, K splits), block_k, k_per_split): how a GEMV of n_rows output rows over k_size columns
    launches under config."""
    block_k = max(16 if config.dot else 1, min(config.block_k, triton.next_power_of_2(k_size)))
    k_per_split = triton.cdiv(triton.cdiv(k_size, config.split_k), block_k) * block_k
    return (triton.cdiv(n_rows, config.rows_per_program), triton.cdiv(k_size, k_per_split)), block_k, k_per_split


def gemv_counts(programs: int, device) -> torch.Tensor:
    """The zeroed int32 counters a fused_reduce GEMV needs, one per row block; each GEMV leaves them zeroed."""
    return counters(programs, device)


def launch_gemv(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, *, config,
                norm_weight: torch.Tensor | None = None, eps: float = 1e-6,
                residual: torch.Tensor | None = None, swiglu: bool = False, pdl: int = 0,
                counts: torch.Tensor | None = None) -> torch.Tensor:
    """Write out[B, N] (N = weight rows, half with swiglu; shapes checked by the caller), RMSNorm'd first
    with norm_weight, plus residual, or SwiGLU'd; counts: gemv_counts for fused_reduce (None: fresh)."""
    batch, k_size = x.shape
    n_rows = weight.shape[0] // 2 if swiglu else weight.shape[0]
    grid, block_k, k_per_split = gemv_grid(n_rows, k_size, config)
    splits = grid[1]
    if splits > 1 and swiglu and not config.fused_reduce:
        raise ValueError("split_k > 1 for the SwiGLU GEMV needs fused_reduce=True: silu needs each row's "
                         "whole sum, which only the last split to finish has")
    # the batch pads to the tensor-core tile's side: 16 rows of mma.sync's M, or 8 of warpgroup MMA's N
    block_b = max(8 if config.swap_ab else 16 if config.dot else 1, triton.next_power_of_2(batch))
    has_norm = norm_weight is not None
    common = dict(BLOCK_B=block_b, ROWS=config.rows_per_program, BLOCK_K=block_k, NORM=has_norm,
                  EVEN_K=k_size % block_k == 0,
                  DOT=2 if config.swap_ab else int(config.dot), TILE_SUMS=config.tile_sums,
                  ROW_LOOP=config.row_loop, USE_PDL=int(pdl), SPLIT=splits > 1,
                  EPILOGUE=(SWIGLU if swiglu else RESIDUAL if residual is not None else STORE).value)
    norm = norm_weight if has_norm else weight
    res = residual if residual is not None else out
    if splits == 1:
        _gemv_kernel[grid](x, weight, norm, res, out, out, out, out, batch, n_rows, k_size, x.stride(0),
                           weight.stride(0), res.stride(0), out.stride(0), 0, k_per_split, eps,
                           FUSED_REDUCE=False, **common, **launch_kwargs(config.num_warps, pdl, config.num_stages))
        return out
    partial = torch.empty((splits, 2 if swiglu else 1, batch, n_rows), dtype=torch.float32, device=x.device)
    # each split's sum of squares of x over its K range, per row block: the deferred norm's scale
    sum_sq = torch.empty((splits, grid[0], batch) if has_norm else (1, 1, 1), dtype=torch.float32, device=x.device)
    if config.fused_reduce:
        counts = counters(grid[0], x.device, counts, "gemv_counts")
    _gemv_kernel[grid](x, weight, norm, res, out, partial, sum_sq, counts if config.fused_reduce else partial, batch,
                       n_rows, k_size, x.stride(0), weight.stride(0), res.stride(0), out.stride(0),
                       partial.stride(0), k_per_split, eps, FUSED_REDUCE=config.fused_reduce, **common,
                       **launch_kwargs(config.num_warps, pdl, config.num_stages))
    if config.fused_reduce:
        return out
    _splitk_reduce_kernel[(triton.cdiv(n_rows, REDUCE_BLOCK_N), batch)](
        partial, sum_sq, res, out, n_rows, k_size, partial.stride(0), sum_sq.stride(0), res.stride(0),
        out.stride(0), eps, SPLIT_K=splits, BLOCK_N=REDUCE_BLOCK_N, HAS_RES=residual is not None, NORM=has_norm,
        USE_PDL=int(pdl), **launch_kwargs(4, pdl))
    return out
