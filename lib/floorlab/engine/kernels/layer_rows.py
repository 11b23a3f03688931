"""Engine wing: one layer's kernels and the LM head timed one by one (KernelRow; stored as to_dict's
layout), and the table the kernels chapter and the bench print."""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from functools import partial

import torch

from floorlab.core.prose import sig
from floorlab.core.roofline import achieved_gbps

from .config import GEMV_NAMES, default_config, gemv_shapes, shape_kwargs
from .timing import empty_launch_us, time_attention, time_per_call_ms

LAYER_GEMVS = GEMV_NAMES[:4]  # the GEMVs each layer runs; the LM head runs once per step
NO_WAIT_KEYS = ("us_no_wait", "pct_read_no_wait")
EMPTY_KEY = "empty_us"  # stored only where timed: runs before it read the same
STORED_KEYS = ("kernel", "us", "bytes", "gbps", "pct_read", "beyond_us", "config")


@dataclass(frozen=True)
class KernelRow:
    """One kernel of the per-kernel table, timed over every layer back to back (units in the names)."""

    kernel: str  # 'qkv', 'attention', 'o_proj', 'gate_up', 'down' or 'lm_head'
    us: float  # µs per launch
    bytes: int  # what one launch must read: its weights (attention: the cached keys and values)
    gbps: float  # bytes / us
    pct_read: float  # gbps as % of the read bandwidth the table was given
    beyond_us: float  # us minus the bytes' time at that read bandwidth
    config: dict  # the launch config, as GemvConfig.to_dict() or AttentionConfig.to_dict()
    us_no_wait: float | None = None  # the same launches without the PDL wait (wrong results); None: not timed
    pct_read_no_wait: float | None = None
    empty_us: float | None = None  # the same grid launched empty, chained as the step chains it: the boundary

    @classmethod
    def from_dict(cls, data: dict) -> "KernelRow":
        """A row as stored in a run's facts (to_dict's layout)."""
        if isinstance(data, cls):
            return data
        missing = [key for key in STORED_KEYS if key not in data] if isinstance(data, dict) else list(STORED_KEYS)
        if missing:
            raise ValueError(f"a per-kernel row needs {', '.join(missing)}, got {data!r}; pass rows written by "
                             "floorlab.engine.kernels.layer_kernel_rows (or KernelRow.to_dict)")
        return cls(**{key: data[key] for key in STORED_KEYS},
                   **{key: data.get(key) for key in (*NO_WAIT_KEYS, EMPTY_KEY)})

    def to_dict(self) -> dict:
        """The row as runs store it: the no-wait keys on the layer's GEMVs alone (None where not timed)."""
        data = asdict(self)
        if self.kernel not in LAYER_GEMVS:
            for key in NO_WAIT_KEYS:
                data.pop(key)
        if self.empty_us is None:
            data.pop(EMPTY_KEY)
        return data


def kernel_rows(rows) -> list[KernelRow]:
    """rows (KernelRows, or dicts as a stored run holds them) as KernelRows."""
    return [KernelRow.from_dict(row) for row in rows]


def _kernel_row(name: str, us: float, nbytes: int, config, read_gbps: float) -> KernelRow:
    gbps = achieved_gbps(nbytes, us / 1e3)
    return KernelRow(name, us, nbytes, gbps, 100 * gbps / read_gbps, us - 1e-3 * nbytes / read_gbps,
                     config.to_dict())


def layer_kernel_rows(model, positions: torch.Tensor, *, read_gbps: float, warmup: int, repeats: int,
                      config=None) -> list[KernelRow]:
    """Each kernel of a layer (and the LM head) as the step runs it, one launch per layer in one CUDA graph
    (no weight in L2); with PDL, unsplit GEMVs are timed again without the wait (wrong results)."""
    from .matvec import gemv_counts, launch_gemv
    from .runtime import PDL_NO_WAIT, pdl_mode, pdl_supported

    s, device, batch = model.shape, model.embed.device, positions.shape[0]
    config = config or default_config(batch, max_context=model.max_context, **shape_kwargs(s))
    mode = pdl_mode(pdl_supported(device), config.early_launch)
    kw = dict(device=device, dtype=model.dtype)
    x, attn = torch.randn(batch, s.hidden_size, **kw), torch.randn(batch, s.num_heads * s.head_dim, **kw)
    act = torch.randn(batch, s.intermediate_size, **kw)
    outs = {n: torch.zeros(batch, rows, **kw) for n, rows in (  # zeros: the residuals read them
        ("qkv", (s.num_heads + 2 * s.num_kv_heads) * s.head_dim), ("hidden", s.hidden_size),
        ("gate_up", s.intermediate_size), ("lm_head", s.vocab_size))}
    head = model.head_weight()
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

    def us(calls) -> float:
        return 1e3 * time_per_call_ms(calls, device, warmup, repeats)

    rows = []
    for name, launch in launches.items():
        weight, part = getattr(model.layers[0], name), getattr(config, name)
        nbytes = weight.numel() * weight.element_size()
        row = _kernel_row(name, us([partial(launch, w, mode) for w in model.layers]), nbytes, part, read_gbps)
        if mode and part.split_k == 1:  # split counters need the wait to count right
            no_wait = _kernel_row(name, us([partial(launch, w, PDL_NO_WAIT) for w in model.layers]), nbytes,
                                  part, read_gbps)
            row = replace(row, us_no_wait=no_wait.us, pct_read_no_wait=no_wait.pct_read)
        rows.append(row)
    attention = time_attention(model, config.attention, positions, warmup=warmup, repeats=repeats,
                               floor_gbps=read_gbps)
    rows.insert(1, _kernel_row("attention", attention["us"], attention["bytes"], config.attention, read_gbps))
    head_us = us([lambda: launch_gemv(x, head, outs["lm_head"], config=config.lm_head, norm_weight=model.final_norm,
                                      eps=s.rms_norm_eps, pdl=mode, counts=counts)])
    rows.append(_kernel_row("lm_head", head_us, head.numel() * head.element_size(), config.lm_head, read_gbps))
    grids = launch_grids(s, batch, config)
    return [replace(r, empty_us=empty_launch_us(*grids[r.kernel], links=len(model.layers), device=device, pdl=mode,
                                                warmup=warmup, repeats=repeats)) for r in rows]


def launch_grids(shape, batch: int, config) -> dict[str, tuple[int, int]]:
    """{kernel: (programs, warps)} of each kernel of the step under config (a split GEMV's first launch)."""
    from .matvec import gemv_grid

    grids = {}
    for name, (n_rows, k_size) in gemv_shapes(shape).items():
        part = getattr(config, name)
        (blocks, splits), _, _ = gemv_grid(n_rows // 2 if name == "gate_up" else n_rows, k_size, part)
        grids[name] = (blocks * splits, part.num_warps)
    grids["attention"] = (batch * shape.num_kv_heads * config.attention.splits, config.attention.num_warps)
    return grids


def format_layer_table(rows, num_layers: int) -> str:
    """The per-kernel table as text (rows: KernelRows or stored dicts), with one layer's sum and the LM head."""
    rows = kernel_rows(rows)
    waits = any(r.pct_read_no_wait is not None for r in rows)
    empty = all(r.empty_us is not None for r in rows)

    def no_wait(row: KernelRow) -> str:  # a column only where some GEMV was timed without its wait
        pct = row.pct_read_no_wait
        return "" if not waits else f" {sig(pct):>9}" if pct is not None else f" {'-':>9}"

    lines = [f"{'kernel':9} {'µs':>8} {'MB':>7} {'GB/s':>6} {'% read':>6} {'µs beyond bytes':>15}"
             + (f" {'% no wait':>9}" if waits else "") + (f" {'µs empty':>8}" if empty else "")]
    lines += [f"{r.kernel:9} {sig(r.us):>8} {sig(r.bytes / 1e6):>7} {sig(r.gbps):>6} "
              f"{sig(r.pct_read):>6} {sig(r.beyond_us):>15}{no_wait(r)}"
              + (f" {sig(r.empty_us):>8}" if empty else "") for r in rows]
    layer = [r for r in rows if r.kernel != "lm_head"]
    worst = max(layer, key=lambda r: r.beyond_us)
    lines.append(f"one layer: {sig(sum(r.us for r in layer))} µs, {sig(sum(r.beyond_us for r in layer))} "
                 f"of them beyond its bytes (x {num_layers} layers)")
    lines.append(f"the most beyond its bytes: {worst.kernel} ({sig(worst.beyond_us)} µs)")
    if waits:
        lines.append("% no wait: launched without the PDL wait (wrong results; what the wait costs)")
    if empty:
        lines.append(f"µs empty: the same grid launched empty, one launch waiting for the other: "
                     f"{sig(sum(r.empty_us for r in layer))} µs a layer for the launches alone")
    return "\n".join(lines)
