"""A one-off experiment, not part of the book (docs/kernel-notes.md, "A persistent MLP half", has its outcome).

The 0.6B MLP half of a layer (o_proj + residual, RMSNorm + gate_up + SwiGLU, down + residual) over
28 layers, two ways in one run on one card:
  book:   the book's three GEMV kernels a layer, chained with PDL, replayed as one CUDA graph;
  persist: one launch, one program per SM, two grid barriers a layer (o_proj and down share a row partition, so
           down(l) -> o_proj(l+1) needs none); PREFETCH=1 loads the next phase's weight slice into registers
           before each barrier, PREFETCH=2 into L2 only (prefetch.global.L2), 0 not at all.
Prints medians and p10-p90 of each, and the max difference of x against the book's result.
Usage, from the book's root: python docs/experiments/persist_mlp.py [--tiny] (tiny: Triton's interpreter,
one program, to check the kernel on a CPU)."""
import os
import sys

TINY = "--tiny" in sys.argv
if TINY:
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def _sync(counter_ptr, target, flag_ptr):
    tl.debug_barrier()
    tl.atomic_add(counter_ptr, 1, sem="release", scope="gpu")
    seen = tl.atomic_add(counter_ptr, 0, sem="acquire", scope="gpu")
    spins = 0
    while (seen < target) & (spins < 200_000):
        seen = tl.atomic_add(counter_ptr, 0, sem="acquire", scope="gpu")
        spins += 1
    if spins >= 200_000:
        tl.atomic_xchg(flag_ptr, 1)
    tl.debug_barrier()


@triton.jit
def _l2(ptrs):
    # one prefetch.global.L2 per element of ptrs (pass one pointer per 128-byte line)
    tl.inline_asm_elementwise("prefetch.global.L2 [$1]; mov.u32 $0, 0;", "=r,l", [ptrs], dtype=tl.int32,
                              is_pure=False, pack=1)


@triton.jit
def _persist(a_ptr, x_ptr, act_ptr, wo_ptr, wgu_ptr, wd_ptr, nw_ptr, counter_ptr, flag_ptr, base, L, eps,
             P: tl.constexpr, H: tl.constexpr, A: tl.constexpr, INTER: tl.constexpr,
             INTER_P: tl.constexpr, RO: tl.constexpr, RG: tl.constexpr, RG_P: tl.constexpr,
             PREFETCH: tl.constexpr):
    pid = tl.program_id(0)
    ro = pid * RO + tl.arange(0, RO)
    ro_ok = ro < H
    gl = tl.arange(0, RG_P)
    rg = pid * RG + gl
    rg_ok = (gl < RG) & (rg < INTER)
    kA = tl.arange(0, A)
    kH = tl.arange(0, H)
    kI = tl.arange(0, INTER_P)
    kI_ok = kI < INTER
    a = tl.load(a_ptr + kA).to(tl.float32)
    wo = tl.load(wo_ptr + ro[:, None] * A + kA[None, :], mask=ro_ok[:, None], other=0.0)
    n = base
    for layer in range(L):
        gu = wgu_ptr + layer * 2 * INTER * H
        wd_l = wd_ptr + layer * H * INTER
        if PREFETCH == 1:
            wg = tl.load(gu + rg[:, None] * H + kH[None, :], mask=rg_ok[:, None], other=0.0)
            wu = tl.load(gu + (INTER + rg)[:, None] * H + kH[None, :], mask=rg_ok[:, None], other=0.0)
        if PREFETCH == 2:
            lines = tl.arange(0, RG_P * (H // 64))  # 64 bf16 = 128 bytes a line
            row = lines // (H // 64)
            col = (lines % (H // 64)) * 64
            ok = (row < RG) & (pid * RG + row < INTER)
            _l2(tl.where(ok, gu + (pid * RG + row) * H + col, gu))
            _l2(tl.where(ok, gu + (INTER + pid * RG + row) * H + col, gu))
        # o_proj: x[ro] += wo @ a
        y = tl.sum(wo.to(tl.float32) * a[None, :], axis=1)
        xr = tl.load(x_ptr + ro, mask=ro_ok, other=0.0).to(tl.float32)
        tl.store(x_ptr + ro, (xr + y).to(x_ptr.dtype.element_ty), mask=ro_ok)
        n += P
        _sync(counter_ptr, n, flag_ptr)
        if PREFETCH == 1:
            wd = tl.load(wd_l + ro[:, None] * INTER + kI[None, :], mask=ro_ok[:, None] & kI_ok[None, :], other=0.0)
        else:
            if PREFETCH == 2:
                dl = tl.arange(0, RO * (INTER_P // 64))
                drow = dl // (INTER_P // 64)
                dcol = (dl % (INTER_P // 64)) * 64
                _l2(tl.where((pid * RO + drow < H) & (dcol < INTER), wd_l + (pid * RO + drow) * INTER + dcol, wd_l))
            wg = tl.load(gu + rg[:, None] * H + kH[None, :], mask=rg_ok[:, None], other=0.0)
            wu = tl.load(gu + (INTER + rg)[:, None] * H + kH[None, :], mask=rg_ok[:, None], other=0.0)
        # gate_up: act[rg] = silu(g) * u of h = rmsnorm(x) * nw
        x = tl.load(x_ptr + kH, cache_modifier=".cg").to(tl.float32)
        inv = tl.rsqrt(tl.sum(x * x, axis=0) / H + eps)
        nw = tl.load(nw_ptr + layer * H + kH).to(tl.float32)
        h = (x * inv).to(x_ptr.dtype.element_ty).to(tl.float32) * nw
        g = tl.sum(wg.to(tl.float32) * h[None, :], axis=1)
        u = tl.sum(wu.to(tl.float32) * h[None, :], axis=1)
        act = g / (1.0 + tl.exp(-g)) * u
        tl.store(act_ptr + rg, act.to(act_ptr.dtype.element_ty), mask=rg_ok)
        n += P
        _sync(counter_ptr, n, flag_ptr)
        if PREFETCH != 1:
            wd = tl.load(wd_l + ro[:, None] * INTER + kI[None, :], mask=ro_ok[:, None] & kI_ok[None, :], other=0.0)
        nxt = tl.minimum(layer + 1, L - 1)
        wo_next_ptr = wo_ptr + nxt * H * A
        if PREFETCH == 1:
            wo = tl.load(wo_next_ptr + ro[:, None] * A + kA[None, :], mask=ro_ok[:, None], other=0.0)
        if PREFETCH == 2:
            ol = tl.arange(0, RO * (A // 64))
            orow = ol // (A // 64)
            ocol = (ol % (A // 64)) * 64
            _l2(tl.where(pid * RO + orow < H, wo_next_ptr + (pid * RO + orow) * A + ocol, wo_next_ptr))
        # down: x[ro] += wd @ act
        act_all = tl.load(act_ptr + kI, mask=kI_ok, other=0.0, cache_modifier=".cg").to(tl.float32)
        y = tl.sum(wd.to(tl.float32) * act_all[None, :], axis=1)
        xr = tl.load(x_ptr + ro, mask=ro_ok, other=0.0).to(tl.float32)
        tl.store(x_ptr + ro, (xr + y).to(x_ptr.dtype.element_ty), mask=ro_ok)
        if PREFETCH != 1:
            wo = tl.load(wo_next_ptr + ro[:, None] * A + kA[None, :], mask=ro_ok[:, None], other=0.0)


def persist(a, x, act, wo, wgu, wd, nw, counter, flag, base, *, programs, prefetch, warps, eps=1e-6):
    L, H, A = wo.shape
    INTER = wd.shape[2]
    ro = triton.cdiv(H, programs)
    rg = triton.cdiv(INTER, programs)
    assert ro & (ro - 1) == 0, f"rows per program {ro} must be a power of two"
    _persist[(programs,)](a, x, act, wo, wgu, wd, nw, counter, flag, base, L, eps, P=programs, H=H, A=A,
                          INTER=INTER, INTER_P=triton.next_power_of_2(INTER), RO=ro, RG=rg,
                          RG_P=triton.next_power_of_2(rg), PREFETCH=prefetch, num_warps=warps)
    return base + programs * 2 * L


def main():
    torch.manual_seed(0)
    dev = "cpu" if TINY else "cuda"
    L, H, A, INTER = (2, 64, 128, 96) if TINY else (28, 1024, 2048, 3072)
    dt = torch.bfloat16
    wo = (torch.randn(L, H, A, device=dev) * 0.02).to(dt)
    wgu = (torch.randn(L, 2 * INTER, H, device=dev) * 0.02).to(dt)
    wd = (torch.randn(L, H, INTER, device=dev) * 0.02).to(dt)
    nw = (1 + 0.1 * torch.randn(L, H, device=dev)).to(dt)
    a = torch.randn(1, A, device=dev).to(dt)
    x0 = torch.randn(1, H, device=dev).to(dt)

    def reference():  # float32 math on the same bf16 roundings as the kernels
        x = x0.float().clone()
        for li in range(L):
            x = (x + a.float() @ wo[li].float().T).to(dt).float()
            h = (x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)).to(dt).float() * nw[li].float()
            gu = h @ wgu[li].float().T
            act = (torch.nn.functional.silu(gu[:, :INTER]) * gu[:, INTER:]).to(dt).float()
            x = (x + act @ wd[li].float().T).to(dt).float()
        return x

    ref = reference()
    counter = torch.zeros(1, dtype=torch.int32, device=dev)
    flag = torch.zeros(1, dtype=torch.int32, device=dev)
    act = torch.empty(1, INTER, dtype=dt, device=dev)
    if TINY:
        for prefetch in (0, 1):
            x = x0.clone()
            counter.zero_()
            persist(a, x, act, wo, wgu, wd, nw, counter, flag, 0, programs=1, prefetch=prefetch, warps=4)
            err, top = (x.float() - ref).abs().max().item(), ref.abs().max().item()
            print(f"tiny, prefetch {prefetch}: max |x - ref| = {err:.3g} (max |ref| {top:.3g})")
        return

    sys.path.insert(0, os.path.join(os.getcwd(), "lib"))
    from floorlab.engine.kernels.config import default_config
    from floorlab.engine.kernels.matvec import launch_gemv
    from floorlab.engine.kernels.runtime import pdl_mode
    cfg = default_config(1, hidden_size=H, attention_size=A, intermediate_size=INTER)
    mode = pdl_mode(True, cfg.early_launch)
    x = x0.clone()
    actb = torch.empty(1, INTER, dtype=dt, device=dev)

    def book():
        for li in range(L):
            launch_gemv(a, wo[li], x, config=cfg.o_proj, residual=x, pdl=mode)
            launch_gemv(x, wgu[li], actb, config=cfg.gate_up, norm_weight=nw[li], eps=1e-6, swiglu=True, pdl=mode)
            launch_gemv(actb, wd[li], x, config=cfg.down, residual=x, pdl=mode)

    book()
    torch.cuda.synchronize()
    print(f"book: max |x - ref| = {(x.float() - ref).abs().max().item():.3g}")
    graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        book()
        with torch.cuda.graph(graph, stream=s):
            book()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    nbytes = (wo.numel() + wgu.numel() + wd.numel()) * 2
    bw = 4356e9 if "H200" in torch.cuda.get_device_name() else 3090e9
    floor_us = nbytes / bw * 1e6
    print(f"{torch.cuda.get_device_name()}: {sms} SMs; {nbytes / 1e6:.0f} MB over {L} layers; "
          f"floor {floor_us:.1f} us at {bw / 1e9:.0f} GB/s (the book's read bandwidth of this card)")

    def timed(fn, reps=30, inner=10):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        out = []
        for _ in range(reps):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(inner):
                fn()
            e1.record()
            torch.cuda.synchronize()
            out.append(e0.elapsed_time(e1) * 1e3 / inner)
        out.sort()
        return out[len(out) // 2], out[len(out) // 10], out[(9 * len(out)) // 10]

    results = {"book (3 kernels a layer, PDL, graph)": timed(graph.replay)}
    state = {"base": 0}
    for programs in (sms - sms % 4, 2 * (sms - sms % 4)):
        for prefetch in (0, 1, 2):
            for warps in (4, 8, 16):
                name = f"persist P={programs} prefetch={prefetch} warps={warps}"
                try:
                    counter.zero_()
                    flag.zero_()
                    state["base"] = 0
                    x.copy_(x0)
                    state["base"] = persist(a, x, act, wo, wgu, wd, nw, counter, flag, state["base"],
                                            programs=programs, prefetch=prefetch, warps=warps)
                    torch.cuda.synchronize()
                    if flag.item():
                        print(f"{name}: a barrier timed out (programs not all resident); skipped")
                        continue
                    err = (x.float() - ref).abs().max().item()

                    def run():
                        state["base"] = persist(a, x, act, wo, wgu, wd, nw, counter, flag, state["base"],
                                                programs=programs, prefetch=prefetch, warps=warps)
                    results[name] = timed(run)
                    print(f"{name}: max |x - ref| = {err:.3g}", flush=True)
                except Exception as e:  # noqa: BLE001
                    print(f"{name}: failed: {str(e)[:300]}", flush=True)
    book_ms = results["book (3 kernels a layer, PDL, graph)"][0]
    for name, (med, p10, p90) in results.items():
        print(f"{name:44s} {med:8.1f} us (p10-p90 {p10:.1f}-{p90:.1f}) = {med / floor_us:.2f}x floor, "
              f"{med / book_ms:.3f}x book; {(med - floor_us) / L:.2f} us a layer beyond the bytes")


if __name__ == "__main__":
    main()
