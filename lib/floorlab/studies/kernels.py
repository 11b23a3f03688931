"""Studies wing: the chapter "Kernels": the book's GEMV timed against its size, one layer's
kernels timed one by one, the kernels' parity with the plain step, the stored sweep, and the
published results the chapter sets its own beside (ANCHORS).

The command that sweeps launch configurations (`python -m floorlab sweep`) builds on this
module's timing machinery and lives in tools.sweep.
"""
from __future__ import annotations

import gc
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F

from floorlab.core.numbers import positive_number, whole_number
from floorlab.core.prose import fmt_ms, sig
from floorlab.core.roofline import BelowFloorError, achieved_gbps, floor_ms, is_below_floor
from floorlab.core.runs import reference_json
from floorlab.core.shapes import Qwen3Shape, get_shape
from floorlab.core.timing import time_ms
from floorlab.engine.fused import relative_error, rms_norm
from floorlab.engine.graphs import capture_graph
from floorlab.engine.kernels import (
    GemvConfig,
    default_config,
    kernels_unavailable,
    pdl_supported,
    shape_kwargs,
    triton_step,
)
from floorlab.engine.measure import source_for

SIZES = (256, 1024, 2048, 4096, 8192, 16384, 65536, 151936)  # GEMV rows N at K = hidden size
TINY = Qwen3Shape(64, 96, 2, 4, 2, 16, 97, False, rope_theta=10000.0, name="tiny")
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
    """ms, once it passes the book's floor test (roofline.is_below_floor): BelowFloorError when moving
    nbytes in ms beats floor_gbps beyond timer noise, so the row must fail, not be reported.

    working_bytes (default nbytes) is what one timed replay touches: when it fits in the device's
    last-level cache the bytes come from the cache, not from the memory the floor divides by, so
    there is no floor to test against."""
    if (nbytes if working_bytes is None else working_bytes) <= cache_bytes(device):
        return ms
    floor = floor_ms(nbytes, floor_gbps)
    if is_below_floor(ms / floor):
        raise BelowFloorError(
            f"below the floor: {fmt_ms(ms)} for {nbytes / 1e6:.3g} MB is {ms / floor:.2g}× its floor of "
            f"{fmt_ms(floor)} at {sig(floor_gbps)} GB/s, which no device can do: a timer that does not "
            "wait for the device, work that was skipped, or a result that was cached")
    return ms


def gemv_shapes(shape: Qwen3Shape) -> dict[str, tuple[int, int]]:
    """(weight rows N, K) of each GEMV of the step; gate_up's N counts gate and up rows."""
    shape = get_shape(shape)
    h, d, i = shape.hidden_size, shape.head_dim, shape.intermediate_size
    return {"qkv": ((shape.num_heads + 2 * shape.num_kv_heads) * d, h), "o_proj": (h, shape.num_heads * d),
            "gate_up": (2 * i, h), "down": (h, i), "lm_head": (shape.vocab_size, h)}


def gemv_case(name: str, n: int, k: int, batch: int, copies: int, device, dtype, *, early: bool):
    """(weights, run(weight, config, pdl), reference(weight) in float32) for one GEMV as the step runs it.

    early: PDL as the step launches this batch of this shape (its default_config's early_launch).
    """
    from floorlab.engine.kernels.matvec import gemv_counts, launch_gemv
    from floorlab.engine.kernels.runtime import pdl_mode

    gen = torch.Generator(device=device).manual_seed(n + k)
    weights = [torch.randn(n, k, device=device, dtype=dtype, generator=gen) * k ** -0.5 for _ in range(copies)]
    x = torch.randn(batch, k, device=device, dtype=dtype, generator=gen)
    norm = 1 + 0.1 * torch.randn(k, device=device, dtype=dtype, generator=gen)
    rows = n // 2 if name == "gate_up" else n
    out = torch.empty(batch, rows, device=device, dtype=dtype)
    residual = torch.randn(batch, rows, device=device, dtype=dtype, generator=gen)
    kind = {"qkv": "norm", "lm_head": "norm", "gate_up": "swiglu", "o_proj": "residual", "down": "residual"}[name]
    # gate_up is RMSNorm'd too, as the step runs it

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


def sweep_sizes(sizes, k: int, *, device, dtype, read_gbps: float, copies: int, warmup: int, repeats: int,
                pdl_on: bool, config=None) -> list[dict]:
    """Bandwidth of the bare GEMV y = x @ W^T (batch 1) against its rows N, so against its grid size.

    Three ways per size: `alone` (one launch per graph replay: one GEMV with nothing around it),
    `serial` (copies launches on distinct weights, each waiting for the last to drain) and
    `chained` (the same launches with PDL, each loading weights while the last one finishes).
    """
    from floorlab.engine.kernels.matvec import launch_gemv
    from floorlab.engine.kernels.runtime import PDL_EARLY

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
    """One row: the attention kernel of every layer back to back (PDL on where it can be), µs per layer."""
    from floorlab.engine.kernels.attention import attention_counts, launch_attention
    from floorlab.engine.kernels.runtime import PDL_EARLY

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


def layer_kernel_rows(model, positions: torch.Tensor, *, read_gbps: float, warmup: int, repeats: int,
                      config=None) -> list[dict]:
    """The book's kernels of one layer (and the LM head), each timed over every layer back to back.

    Each kernel runs as the step runs it (its config, epilogue and PDL) on the model's own weights,
    one launch per layer in one CUDA graph, so no weight sits in L2. Rows: kernel, µs per launch,
    bytes it must read, GB/s and % of the read bandwidth, and µs beyond those bytes. Where PDL is
    on, each GEMV that does not split K is timed again without its wait (runtime.PDL_NO_WAIT:
    wrong results, a bound on what the wait costs): us_no_wait and pct_read_no_wait, else None.
    """
    from floorlab.engine.kernels.matvec import gemv_counts, launch_gemv
    from floorlab.engine.kernels.runtime import PDL_NO_WAIT, pdl_mode

    s, device, batch = model.shape, model.embed.device, positions.shape[0]
    config = config or default_config(batch, max_context=model.max_context, **shape_kwargs(s))
    mode = pdl_mode(pdl_supported(device), config.early_launch)
    kw = dict(device=device, dtype=model.dtype)
    x, attn = torch.randn(batch, s.hidden_size, **kw), torch.randn(batch, s.num_heads * s.head_dim, **kw)
    act = torch.randn(batch, s.intermediate_size, **kw)
    outs = {n: torch.zeros(batch, rows, **kw) for n, rows in (  # zeros: the residuals read them
        ("qkv", (s.num_heads + 2 * s.num_kv_heads) * s.head_dim), ("hidden", s.hidden_size),
        ("gate_up", s.intermediate_size), ("lm_head", s.vocab_size))}
    head = model.embed if model.lm_head is None else model.lm_head
    counts = gemv_counts(s.vocab_size, device)  # for split GEMVs that add their splits up themselves
    launches = {
        "qkv": lambda w, pdl: launch_gemv(x, w.qkv, outs["qkv"], config=config.qkv, norm_weight=w.input_norm,
                                          eps=s.rms_norm_eps, pdl=pdl, counts=counts),
        "o_proj": lambda w, pdl: launch_gemv(attn, w.o_proj, outs["hidden"], config=config.o_proj,
                                             residual=outs["hidden"], pdl=pdl, counts=counts),
        "gate_up": lambda w, pdl: launch_gemv(x, w.gate_up, outs["gate_up"], config=config.gate_up,
                                              norm_weight=w.post_norm, eps=s.rms_norm_eps, swiglu=True, pdl=pdl,
                                              counts=counts),
        "down": lambda w, pdl: launch_gemv(act, w.down, outs["hidden"], config=config.down,
                                           residual=outs["hidden"], pdl=pdl, counts=counts),
    }
    rows = []
    for name, launch in launches.items():
        weight, part = getattr(model.layers[0], name), getattr(config, name)
        nbytes = weight.numel() * weight.element_size()
        calls = [lambda w=w, launch=launch: launch(w, mode) for w in model.layers]
        row = _kernel_row(name, calls, nbytes, part, device, warmup, repeats, read_gbps)
        row["us_no_wait"] = row["pct_read_no_wait"] = None
        if mode and part.split_k == 1:  # split counters need the wait to count right
            calls = [lambda w=w, launch=launch: launch(w, PDL_NO_WAIT) for w in model.layers]
            row["us_no_wait"] = 1e3 * time_per_call_ms(calls, device, warmup, repeats)
            row["pct_read_no_wait"] = 100 * achieved_gbps(nbytes, row["us_no_wait"] / 1e3) / read_gbps
        rows.append(row)
    attention = time_attention(model, config.attention, positions, warmup=warmup, repeats=repeats,
                               floor_gbps=read_gbps)
    rows.insert(1, {"kernel": "attention", "us": attention["us"], "bytes": attention["bytes"],
                    "gbps": attention["gbps"], "pct_read": attention["pct_floor_bw"],
                    "beyond_us": attention["us"] - 1e-3 * attention["bytes"] / read_gbps,
                    "config": config.attention.to_dict()})
    calls = [lambda: launch_gemv(x, head, outs["lm_head"], config=config.lm_head, norm_weight=model.final_norm,
                                 eps=s.rms_norm_eps, pdl=mode, counts=counts)]
    rows.append(_kernel_row("lm_head", calls, head.numel() * head.element_size(), config.lm_head, device,
                            warmup, repeats, read_gbps))
    return rows


def _kernel_row(name: str, calls, nbytes: int, config, device, warmup: int, repeats: int,
                read_gbps: float) -> dict:
    us = 1e3 * time_per_call_ms(calls, device, warmup, repeats)
    gbps = achieved_gbps(nbytes, us / 1e3)
    return {"kernel": name, "us": us, "bytes": nbytes, "gbps": gbps, "pct_read": 100 * gbps / read_gbps,
            "beyond_us": us - 1e-3 * nbytes / read_gbps, "config": config.to_dict()}


def format_layer_table(rows: list[dict], num_layers: int) -> str:
    """The per-kernel table as text, with one layer's sum and the LM head."""
    waits = any(r.get("pct_read_no_wait") is not None for r in rows)

    def no_wait(row: dict) -> str:  # a column only where some GEMV was timed without its wait
        pct = row.get("pct_read_no_wait")
        return "" if not waits else f" {sig(pct):>9}" if pct is not None else f" {'-':>9}"

    lines = [f"{'kernel':9} {'µs':>8} {'MB':>7} {'GB/s':>6} {'% read':>6} {'µs beyond bytes':>15}"
             + (f" {'% no wait':>9}" if waits else "")]
    lines += [f"{r['kernel']:9} {sig(r['us']):>8} {sig(r['bytes'] / 1e6):>7} {sig(r['gbps']):>6} "
              f"{sig(r['pct_read']):>6} {sig(r['beyond_us']):>15}{no_wait(r)}" for r in rows]
    layer = [r for r in rows if r["kernel"] != "lm_head"]
    worst = max(layer, key=lambda r: r["beyond_us"])
    lines.append(f"one layer: {sig(sum(r['us'] for r in layer))} µs, {sig(sum(r['beyond_us'] for r in layer))} "
                 f"of them beyond its bytes (x {num_layers} layers)")
    lines.append(f"the most beyond its bytes: {worst['kernel']} ({sig(worst['beyond_us'])} µs)")
    if waits:
        lines.append("% no wait: launched without the PDL wait (wrong results; what the wait costs)")
    return "\n".join(lines)


@dataclass(frozen=True)
class StoredSweep:
    """The stored kernel sweep (python -m floorlab sweep, kept as lib/floorlab/reference/<name>.json)."""

    name: str
    device: dict
    batches: tuple[int, ...]
    context: int
    floor_gbps: float  # the bandwidth every step row is floored with
    size_rows: list[dict]  # sweep_sizes rows
    gemv_rows: list[dict]  # one per GEMV, batch and config timed
    step_rows: list[dict]  # whole steps
    variant_rows: list[dict]  # whole steps with one launch setting changed from the default
    best_configs: dict[str, dict]  # '<preset> <gemv> b<batch>': the fastest GemvConfig, as a dict

    @property
    def device_name(self) -> str:
        """The card the sweep ran on, e.g. 'NVIDIA H200'."""
        return self.device["name"]

    def best(self, preset: str, gemv: str, batch: int) -> dict:
        """The fastest config the sweep found for one GEMV at one batch, as GemvConfig.to_dict()."""
        key = f"{preset} {gemv} b{batch}"
        if key not in self.best_configs:
            raise ValueError(f"the stored sweep {self.name!r} has no best config for {gemv!r} of {preset!r} at "
                             f"batch {batch!r}; it has {sorted(self.best_configs)}")
        return self.best_configs[key]


def stored_sweep(name: str = "h200-kernel-sweep") -> StoredSweep:
    """The stored sweep lib/floorlab/reference/<name>.json, read into a StoredSweep."""
    data = reference_json(name)
    return StoredSweep(name=name, device=data["device"], batches=tuple(data["batches"]), context=data["context"],
                       floor_gbps=data["floor_gbps"], size_rows=data["size_rows"], gemv_rows=data["gemv_rows"],
                       step_rows=data["step_rows"], variant_rows=data["variant_rows"], best_configs=data["best"])


# Llama-3.2-1B-Instruct's public config: 16 layers, hidden 2048, 32 query and 8 KV heads of 64,
# intermediate 8192, vocabulary 128256, the output head tied to the embedding (counted once), bf16
LLAMA_1B_BYTES = 2 * (16 * (2048 * (2048 + 512 + 512 + 2048) + 3 * 2048 * 8192 + 2 * 2048) + 128256 * 2048 + 2048)
RESULTS_URL = "https://github.com/msaroufim/megakernels-vs-cuda-graphs/blob/main/llama/docs/RESULTS.md"


@dataclass(frozen=True)
class Anchor:
    """One published batch-1 decode result, as its source states it: the step in µs, on what."""

    label: str
    source_url: str
    model: str
    card: str
    step_us: float  # one decode step (one token), µs
    weight_bytes: int  # the weights one step streams
    layers: int
    bandwidth_gbps: float | None  # the bandwidth the source measured; None where it states none

    def floor_us(self, bandwidth_gbps: float | None = None) -> float:
        """weight_bytes over the source's bandwidth, or over bandwidth_gbps where it states none (µs)."""
        gbps = self.bandwidth_gbps or bandwidth_gbps
        if gbps is None or gbps <= 0:
            raise ValueError(f"{self.label}: its source states no bandwidth, so pass bandwidth_gbps (GB/s above 0) "
                             f"measured on a {self.card}, got {bandwidth_gbps!r}")
        return self.weight_bytes / (gbps * 1e3)

    def beyond_us_per_layer(self, bandwidth_gbps: float | None = None) -> float:
        """(step - floor) / layers: µs per layer beyond what the weights cost at the bandwidth."""
        return (self.step_us - self.floor_us(bandwidth_gbps)) / self.layers

    def arithmetic(self, bandwidth_gbps: float | None = None) -> str:
        """The floor and the µs beyond it per layer, as arithmetic."""
        gbps = self.bandwidth_gbps or bandwidth_gbps
        floor = self.floor_us(bandwidth_gbps)
        return (f"{sig(self.weight_bytes / 1e9)} GB ÷ {sig(gbps)} GB/s = {sig(floor)} µs; "
                f"({sig(self.step_us)} − {sig(floor)}) ÷ {self.layers} layers = "
                f"{sig(self.beyond_us_per_layer(bandwidth_gbps))} µs per layer")


ANCHORS = (
    Anchor("CUDA graphs + PDL over ordinary kernels", RESULTS_URL, "Llama-3.2-1B-Instruct", "H200",
           step_us=794.74, weight_bytes=LLAMA_1B_BYTES, layers=16, bandwidth_gbps=None),
    Anchor("Hazy Research's megakernel, run in the same study", RESULTS_URL, "Llama-3.2-1B-Instruct", "H200",
           step_us=759.83, weight_bytes=LLAMA_1B_BYTES, layers=16, bandwidth_gbps=None),
    Anchor("a Qwen3-0.6B megakernel", "https://blog.alpindale.net/posts/5090_decode_optimization", "Qwen3-0.6B",
           "RTX 5090", step_us=1000.0, weight_bytes=1_192_000_000, layers=28, bandwidth_gbps=1674.0),
)


def beyond_per_layer_us(step_ms: float, floor_ms: float, num_layers: int) -> float:
    """(step_ms - floor_ms) * 1000 / num_layers: µs per layer beyond the bytes."""
    step_ms, floor_ms = positive_number(step_ms, "step_ms"), positive_number(floor_ms, "floor_ms")
    num_layers = whole_number(num_layers, "num_layers")
    return (step_ms - floor_ms) * 1e3 / num_layers


def noise_notes(timings: dict) -> str:
    """One warning line per noisy timing ({what: Timing or Row}), '' when none is noisy."""
    notes = [getattr(t, "timing", t).noise_note(what) for what, t in timings.items()
             if getattr(t, "timing", t) is not None]
    return "\n".join(note for note in notes if note)


def size_sweep_here(device, shape: Qwen3Shape, *, read_gbps: float, reference: str):
    """(rows, source): the size sweep on this GPU; on a CPU, the stored run's rows.

    On a CPU the same code first runs in Triton's interpreter on two tiny sizes (where Triton
    is installed), which checks the launches but times nothing worth drawing.
    """

    source = source_for(device, reference)
    if source.here:
        config = default_config(1, **shape_kwargs(shape)).qkv
        rows = sweep_sizes(SIZES, shape.hidden_size, device=device, dtype=torch.bfloat16, read_gbps=read_gbps,
                           copies=shape.num_layers, warmup=3, repeats=20, pdl_on=pdl_supported(device),
                           config=config)
        return rows, source
    if not kernels_unavailable(device):
        sweep_sizes((16, 64), 64, device=device, dtype=torch.float32, read_gbps=read_gbps, copies=2, warmup=0,
                    repeats=1, pdl_on=False)
    return source.run.facts["size_rows"], source


def layer_kernels_here(model, positions: torch.Tensor, *, read_gbps: float, reference: str):
    """(rows, source): layer_kernel_rows on this GPU; on a CPU, the stored run's rows."""

    source = source_for(model.embed.device, reference)
    if source.here:
        return layer_kernel_rows(model, positions, read_gbps=read_gbps, warmup=3, repeats=20), source
    return source.run.facts["layer_kernels"], source


def parity_with_plain(model, tokens: torch.Tensor, positions: torch.Tensor) -> float:
    """Relative error of the kernels' logits against model.decode_step from the same cache.

    The KV cache is left as the plain step leaves it (both steps write the same position).
    """

    k0, v0 = model.k_cache.clone(), model.v_cache.clone()
    expected = model.decode_step(tokens, positions).float()
    k1, v1 = model.k_cache.clone(), model.v_cache.clone()
    model.k_cache.copy_(k0)
    model.v_cache.copy_(v0)
    got = triton_step(model)(tokens, positions).float()
    model.k_cache.copy_(k1)
    model.v_cache.copy_(v1)
    return relative_error(got, expected)


def free_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
