"""Engine wing: the book's kernels timed one launch pattern at a time, replayed as one CUDA graph on
distinct weights (no weight in L2), each time passing the floor test (check_timed); Triton loads lazily."""
from __future__ import annotations

import gc
from functools import lru_cache, partial
from pathlib import Path

import torch
import torch.nn.functional as F

from floorlab.core.prose import fmt_ms, sig
from floorlab.core.roofline import BelowFloorError, achieved_gbps, floor_ms, is_below_floor
from floorlab.core.timing import time_ms
from floorlab.engine.fused import relative_error, rms_norm
from floorlab.engine.graphs import capture_graph

from .config import GemvConfig

SIZES = (256, 1024, 2048, 4096, 8192, 16384, 65536, 151936)  # GEMV rows N at K = hidden size
MAX_REL_ERR = 2e-2  # a bf16 GEMV against float32 torch
EPS = 1e-6
SIZE_WAYS = ("alone", "serial", "chained")  # the ways sweep_sizes times each size
CPU_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")  # Linux's sizes of each cache level
UNITS = {"K": 2**10, "M": 2**20, "G": 2**30}


@lru_cache(maxsize=None)
def cache_bytes(device) -> int:
    """Bytes of the device's last-level cache (a GPU's L2, the CPU's largest level), 0 when unknown."""
    device = torch.device(device)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return int(getattr(torch.cuda.get_device_properties(index), "L2_cache_size", 0) or 0)
    sizes = []
    for path in CPU_CACHES.glob("index*/size"):
        try:
            text = path.read_text().strip()  # e.g. '32768K'
            sizes.append(int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text))
        except (OSError, ValueError, IndexError):
            continue
    return max(sizes, default=0)


def check_timed(ms: float, nbytes: float, floor_gbps: float, *, device, working_bytes: float | None = None) -> float:
    """ms, once moving nbytes in it does not beat floor_gbps beyond noise (else BelowFloorError); no test
    when working_bytes (default nbytes) fit the last-level cache."""
    if (nbytes if working_bytes is None else working_bytes) <= cache_bytes(device):
        return ms
    floor = floor_ms(nbytes, floor_gbps)
    if is_below_floor(ms / floor):
        raise BelowFloorError(
            f"below the floor: {fmt_ms(ms)} for {nbytes / 1e6:.3g} MB is {ms / floor:.2g}× its floor of "
            f"{fmt_ms(floor)} at {sig(floor_gbps)} GB/s, which no device can do: a timer that does not "
            "wait for the device, work that was skipped, or a result that was cached")
    return ms


def time_per_call_ms(calls, device, warmup: int, repeats: int) -> float:
    """Median ms per call of calls() (a list of launches), replayed as one CUDA graph on a GPU."""
    def all_calls():
        for call in calls:
            call()

    fn = all_calls
    if device.type == "cuda":
        graph, _ = capture_graph(all_calls, warmup=1)
        fn = graph.replay
    return time_ms(fn, warmup=warmup, repeats=repeats, device=device).median_ms / len(calls)


EMPTY_BLOCK = 1024  # values each empty launch reads from the one before it, as a GEMV reads x


def empty_launch_us(programs: int, num_warps: int, *, links: int, device, pdl: int, warmup: int,
                    repeats: int) -> float:
    """µs per launch of `links` empty launches of `programs` programs, each waiting for the one before
    and reading what it wrote, replayed as one CUDA graph with the step's PDL mode: a boundary alone."""
    from .boundary import launch_empty

    buffers = [torch.zeros(EMPTY_BLOCK, device=device) for _ in range(2)]
    calls = [partial(launch_empty, buffers[i % 2], buffers[(i + 1) % 2], programs, num_warps, pdl)
             for i in range(links)]
    return 1e3 * time_per_call_ms(calls, device, warmup, repeats)


def grid_barrier_us(programs: int, num_warps: int, *, rounds: int, device, warmup: int, repeats: int) -> dict:
    """µs per barrier across `programs` programs inside one launch, what a dependency costs a persistent
    kernel ({"us", "p10_us", "p90_us", "programs", "rounds"}): a launch of `rounds` barriers less one of a
    single barrier, over the rounds between them; the band from the longer launch's p10 and p90."""
    from .boundary import grid_barriers

    counter = torch.zeros(1, dtype=torch.int32, device=device)
    one, many = (time_ms(partial(grid_barriers, counter, n, programs, num_warps), warmup=warmup, repeats=repeats,
                         device=device) for n in (1, rounds))
    per = {key: 1e3 * (getattr(many, f"{q}_ms") - one.median_ms) / (rounds - 1)
           for key, q in (("us", "median"), ("p10_us", "p10"), ("p90_us", "p90"))}
    return {**per, "programs": programs, "rounds": rounds}


def free_memory() -> None:
    """Collect garbage and hand the CUDA allocator's cached blocks back, between timed cases."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def gemv_case(name: str, n: int, k: int, batch: int, copies: int, device, dtype, *, early: bool):
    """(weights, run(weight, config, pdl), check(config, pdl) -> relative error against float32 torch) for
    one GEMV as the step runs it; early: the early_launch of the step's default_config."""
    from .matvec import gemv_counts, launch_gemv
    from .runtime import pdl_mode

    gen = torch.Generator(device=device).manual_seed(n + k)
    weights = [torch.randn(n, k, device=device, dtype=dtype, generator=gen) * k ** -0.5 for _ in range(copies)]
    x = torch.randn(batch, k, device=device, dtype=dtype, generator=gen)
    norm = 1 + 0.1 * torch.randn(k, device=device, dtype=dtype, generator=gen)
    rows = n // 2 if name == "gate_up" else n
    out = torch.empty(batch, rows, device=device, dtype=dtype)
    residual = torch.randn(batch, rows, device=device, dtype=dtype, generator=gen)
    # gate_up is RMSNorm'd too, as the step runs it
    kind = {"qkv": "norm", "lm_head": "norm", "gate_up": "swiglu", "o_proj": "residual", "down": "residual"}[name]

    counts = gemv_counts(rows, device)  # enough for any rows per program: made once, as the step does

    def run(weight, config, pdl):
        mode = pdl_mode(pdl, early)
        if kind == "residual":  # in place, as the step adds to x
            return launch_gemv(x, weight, out, config=config, residual=out, pdl=mode, counts=counts)
        return launch_gemv(x, weight, out, config=config, norm_weight=norm, eps=EPS, swiglu=kind == "swiglu",
                           pdl=mode, counts=counts)

    def check(config, pdl) -> float:
        out.copy_(residual)
        got = run(weights[0], config, pdl).float()
        w, xf = weights[0].float(), x.float()
        if kind == "norm":
            expected = rms_norm(x, norm, EPS).float() @ w.T
        elif kind == "swiglu":
            gate, up = (rms_norm(x, norm, EPS).float() @ w.T).chunk(2, dim=-1)
            expected = F.silu(gate) * up
        else:
            expected = residual.float() + xf @ w.T
        return relative_error(got, expected)

    return weights, run, check


def sweep_sizes(sizes, k: int, *, device, dtype, read_gbps: float, copies: int, warmup: int, repeats: int,
                pdl_on: bool, config=None) -> list[dict]:
    """Bandwidth of the bare GEMV at batch 1 against its rows N, three ways (alone, serial on `copies`
    weights, chained with PDL); a dict per size: n, k, bytes, programs, config, <way>_us/_gbps/_pct_read."""
    from .matvec import launch_gemv
    from .runtime import PDL_EARLY

    config = config or GemvConfig()
    rows = []
    for n in sizes:
        gen = torch.Generator(device=device).manual_seed(n)
        weights = [torch.randn(n, k, device=device, dtype=dtype, generator=gen) for _ in range(copies)]
        x = torch.randn(1, k, device=device, dtype=dtype, generator=gen)
        out = torch.empty(1, n, device=device, dtype=dtype)
        nbytes = n * k * weights[0].element_size()
        row = {"n": n, "k": k, "bytes": nbytes, "programs": -(-n // config.rows_per_program),
               "config": config.to_dict()}
        ways = dict(zip(SIZE_WAYS, ((weights[:1], False), (weights, False), (weights, pdl_on))))
        for way, (used, pdl) in ways.items():
            calls = [lambda w=w, p=pdl: launch_gemv(x, w, out, config=config, pdl=PDL_EARLY if p else 0)
                     for w in used]
            us = 1e3 * time_per_call_ms(calls, device, warmup, repeats)
            row[f"{way}_us"] = us
            row[f"{way}_gbps"] = achieved_gbps(nbytes, us / 1e3)
            row[f"{way}_pct_read"] = 100 * row[f"{way}_gbps"] / read_gbps
        rows.append(row)
        del weights
        free_memory()
    return rows


def time_attention(model, config, positions: torch.Tensor, *, warmup: int, repeats: int, floor_gbps: float) -> dict:
    """One row: the attention kernel of every layer back to back (PDL on where it can be), µs per layer,
    the cached keys and values it reads (bytes), GB/s and % of floor_gbps (pct_floor_bw)."""
    from .attention import attention_counts, launch_attention
    from .runtime import PDL_EARLY, pdl_supported

    s, device = model.shape, model.embed.device
    batch = positions.shape[0]
    qkv = torch.randn(batch, (s.num_heads + 2 * s.num_kv_heads) * s.head_dim, device=device, dtype=model.dtype)
    out = torch.empty(batch, s.num_heads * s.head_dim, device=device, dtype=model.dtype)
    counts = attention_counts(batch, s.num_kv_heads, device)
    mode = PDL_EARLY if pdl_supported(device) else 0
    calls = [lambda i=i, w=w: launch_attention(
        qkv, positions, w.q_norm, w.k_norm, model.rope_cos, model.rope_sin_signed, model.k_cache[i],
        model.v_cache[i], out, num_heads=s.num_heads, num_kv_heads=s.num_kv_heads, eps=s.rms_norm_eps,
        config=config, pdl=mode, counts=counts) for i, w in enumerate(model.layers)]
    us = 1e3 * time_per_call_ms(calls, device, warmup, repeats)
    visible = int(positions.max().item()) + 1
    nbytes = 2 * batch * s.num_kv_heads * visible * s.head_dim * model.k_cache.element_size()
    return {"preset": s.name, "batch": batch, "path": "attention kernel, per layer", "kernel": "attention",
            "config": config.to_dict(), "us": us, "bytes": nbytes, "gbps": achieved_gbps(nbytes, us / 1e3),
            "pct_floor_bw": 100 * achieved_gbps(nbytes, us / 1e3) / floor_gbps}
