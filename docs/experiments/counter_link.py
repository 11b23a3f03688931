"""A one-off experiment, not part of the book (docs/kernel-notes.md, "A boundary carried by a counter",
has its outcome).

A kernel boundary three ways, `links` launches chained in one CUDA graph:
  no PDL:   plain stream order;
  PDL wait: each launch releases the next at its start and waits with griddepcontrol.wait, as the
            book's step does;
  counter:  each launch releases the next at its start and never calls griddepcontrol.wait; it spins
            until every program of the launch before has counted itself done (release add, acquire
            poll on a counter in global memory), polled by one atomic a program or by every thread's
            ld.acquire.
Each launch reads the block the one before wrote and writes it on plus one, so a wrong order shows.
Usage, from the book's root: python docs/experiments/counter_link.py (on a CPU under TRITON_INTERPRET=1
it checks the counter way on two tiny grids)."""
import os

import torch
import triton
import triton.language as tl

from floorlab.core.timing import time_ms
from floorlab.engine.graphs import capture_graph

INTERP = os.environ.get("TRITON_INTERPRET") == "1"


@triton.jit
def ld_acquire(ptr):
    return tl.inline_asm_elementwise("ld.global.acquire.gpu.b32 $0, [$1];", "=r,l", [ptr], dtype=tl.int32,
                                     is_pure=False, pack=1)


@triton.jit
def _link(src, dst, wait_ptr, done_ptr, wait_for, BLOCK: tl.constexpr, MODE: tl.constexpr, POLL: tl.constexpr,
          GDC: tl.constexpr):
    if MODE >= 1 and GDC:
        tl.extra.cuda.gdc_launch_dependents()
    offs = tl.arange(0, BLOCK)
    if MODE == 1:
        tl.extra.cuda.gdc_wait()
    if MODE == 2:
        if POLL == 0:
            seen = tl.atomic_add(wait_ptr, 0, sem="acquire", scope="gpu")
            while seen < wait_for:
                seen = tl.atomic_add(wait_ptr, 0, sem="acquire", scope="gpu")
        else:
            seen = tl.max(ld_acquire(wait_ptr + offs * 0), axis=0)
            while seen < wait_for:
                seen = tl.max(ld_acquire(wait_ptr + offs * 0), axis=0)
    x = tl.load(src + offs)
    tl.store(dst + offs, x + 1.0, mask=tl.where(tl.program_id(0) == 0, offs < BLOCK, False))
    if MODE == 2:
        tl.debug_barrier()
        tl.atomic_add(done_ptr, 1, sem="release", scope="gpu")


def chain(links, programs, warps, mode, poll, device):
    bufs = [torch.zeros(1024, device=device) for _ in range(2)]
    counts = torch.zeros(links + 1, dtype=torch.int32, device=device)
    kw = {"num_warps": warps}
    if mode >= 1 and not INTERP:
        kw["launch_pdl"] = True

    def step():
        if mode == 2:
            counts.zero_()
        for i in range(links):
            # link 0 waits on slot 0 which nobody fills: it waits for 0 programs
            _link[(programs,)](bufs[i % 2], bufs[(i + 1) % 2], counts[i:], counts[i + 1:],
                               0 if i == 0 else programs, BLOCK=1024, MODE=mode, POLL=poll, GDC=not INTERP, **kw)
    return step, bufs, counts


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    links = 140 if device.type == "cuda" else 4
    programs_list = (1, 32, 132, 256, 512, 1536) if device.type == "cuda" else (1, 3)
    modes = ((0, 0, "no PDL"), (1, 0, "PDL wait"), (2, 0, "counter, atomic poll"), (2, 1, "counter, ld.acquire poll"))
    if device.type != "cuda":
        modes = ((2, 0, "counter, atomic poll"),)
    for warps in ((4,) if device.type != "cuda" else (2, 4, 8)):
        for programs in programs_list:
            line = []
            for mode, poll, name in modes:
                step, bufs, counts = chain(links, programs, warps, mode, poll, device)
                step()
                want = float(links)  # bufs start at 0; each link adds 1 to what the one before wrote
                got = bufs[links % 2][0].item()
                if device.type == "cuda":
                    torch.cuda.synchronize()
                    graph, _ = capture_graph(step, warmup=1)
                    for b in bufs:
                        b.zero_()
                    graph.replay()
                    torch.cuda.synchronize()
                    got = bufs[links % 2][0].item()
                    t = time_ms(graph.replay, warmup=20, repeats=200, device=device)
                    us = 1e3 * t.median_ms / links
                    band = f"{1e3 * t.p10_ms / links:.2f}-{1e3 * t.p90_ms / links:.2f}"
                else:
                    us, band = float("nan"), "-"
                ok = "ok" if got == want else f"WRONG {got} != {want}"
                line.append(f"{name}: {us:.3f} µs ({band}) {ok}")
            print(f"warps {warps} programs {programs:5d} | " + " | ".join(line), flush=True)


if __name__ == "__main__":
    main()
