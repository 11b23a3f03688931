"""Tools wing: what one bench run measures (presets, batches, context and step counts), checked once,
so the command line and run_bench() refuse the same things in the same words."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from floorlab.core.device import resolve_device
from floorlab.core.memory import HEADROOM_BYTES, model_bytes
from floorlab.core.numbers import whole_number
from floorlab.core.plan import CardPlan, card_plan
from floorlab.core.shapes import Qwen3Shape, get_shape
from floorlab.core.timelines import STEADY_STEPS
from floorlab.core.timing import SETTLE_MAX_CALLS

GPU_PRESETS, CPU_PRESETS = ("qwen3-0.6b", "qwen3-8b"), ("qwen3-0.6b",)
GPU_BATCHES, CPU_BATCHES = (1, 8), (1,)
DEFAULT_CONTEXT, MAX_BATCH, MAX_CONTEXT = 32, 16, 8192
GPU_WARMUP, GPU_REPEATS = 5, 30
CPU_WARMUP, CPU_REPEATS = 1, 5
# decode calls a row makes beyond warm-up and repeats: a CPU settling, a launch count,
# a steady timeline, bit-identity checks and compiling
EXTRA_CALLS = SETTLE_MAX_CALLS + 2 + (STEADY_STEPS + 1) + 8

ENGINE_PATHS = ("plain eager", "plain graph", "fused eager", "fused graph", "fused tuned eager",
                "fused tuned graph", "triton eager", "triton graph")
HF_PATHS = ("hf eager", "hf graph", "hf compile")
PATHS = ENGINE_PATHS + HF_PATHS


@dataclass(frozen=True)
class Settings:
    """One run's checked settings."""

    shapes: tuple[Qwen3Shape, ...]
    batches: tuple[int, ...]
    context: int
    warmup: int
    repeats: int
    device: torch.device
    plan: CardPlan  # what this card runs: dtype, graphs, Triton, PDL (floorlab.core.plan)
    skip_transformers: bool = False
    transformers_for: tuple[str, ...] | None = None  # presets with transformers' rows (None: all)
    skip_fused: bool = False
    compile_on_cpu: bool = False
    tuned_fused_for: tuple[str, ...] = ()  # presets with the tuned fused rows (minutes of tuning each)

    @property
    def on_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def cache_tokens(self) -> int:
        """Cache slots per row, in 16s: context plus a slot per call, since transformers' StaticCache
        writes each call at its own running count, whatever position it is given."""
        return -(-(self.context + 1 + self.warmup + self.repeats + EXTRA_CALLS) // 16) * 16

    def to_dict(self) -> dict:
        """Plain dict, ready for JSON (Run.settings)."""
        return {"presets": [s.name for s in self.shapes], "batches": list(self.batches),
                "context": self.context, "warmup": self.warmup, "repeats": self.repeats,
                "dtype": self.plan.dtype_name, "graph_buckets": list(self.batches),
                "cache_tokens": self.cache_tokens, "skip_transformers": self.skip_transformers,
                "transformers_for": list(self.transformers_for) if self.transformers_for else None,
                "skip_fused": self.skip_fused, "tuned_fused_for": list(self.tuned_fused_for)}

    def transformers_skip_reason(self, preset: str) -> str:
        """Why transformers' rows are left out for preset, or '' when they run."""
        if self.skip_transformers:
            return "skipped (--skip-transformers)"
        if self.transformers_for is not None and preset not in self.transformers_for:
            return f"skipped (--transformers-for {' '.join(self.transformers_for)})"
        return ""

    def tuned_skip_reason(self, preset: str) -> str:
        """Why the tuned fused rows are left out for preset, or '' when they run."""
        if preset in self.tuned_fused_for:
            return ""
        return f"not asked for: Inductor's tuning takes minutes per batch size; pass --tuned-fused-for {preset}"


def presets_in(names, measured, what: str) -> tuple[str, ...]:
    """names, each a preset of measured (names or shapes), else a ValueError naming the stray ones."""
    measured = [getattr(p, "name", p) for p in measured]
    stray = [p for p in names if p not in measured]
    if stray:
        raise ValueError(f"{what} names {', '.join(stray)}, which this run does not measure; "
                         f"pick from {', '.join(measured)}")
    return tuple(names)


def shapes_of(presets) -> tuple[Qwen3Shape, ...]:
    """Each preset's shape (a name or a Qwen3Shape); a ValueError when none is given or one is unknown."""
    if not presets:
        raise ValueError("no preset given; pass one or more, e.g. qwen3-0.6b qwen3-8b")
    return tuple(get_shape(p) for p in presets)


def default_presets(device: torch.device, batches, context: int = DEFAULT_CONTEXT) -> tuple[str, ...]:
    """GPU_PRESETS whose weights and cache fit the card's whole memory with headroom (a 16 GB card holds
    the 0.6B, not the 8B's 16.4 GB of bf16 weights); a line says which are left out."""
    total = torch.cuda.get_device_properties(device).total_memory
    kept = []
    for name in GPU_PRESETS:
        slots = context + 1 + GPU_WARMUP + GPU_REPEATS + EXTRA_CALLS
        need = model_bytes(get_shape(name), max_batch=max(batches), max_context=slots) + HEADROOM_BYTES
        if need <= total:
            kept.append(name)
        else:
            print(f"bench: leaving {name} out: it needs {need / 1e9:.1f} GB and this card has "
                  f"{total / 1e9:.1f} GB (pass --presets {name} to try it anyway)")
    return tuple(kept) or GPU_PRESETS[:1]


def make_settings(presets=None, batches=None, context: int = DEFAULT_CONTEXT, *,
                  repeats: int | None = None, warmup: int | None = None, device=None,
                  skip_transformers: bool = False, skip_fused: bool = False,
                  compile_on_cpu: bool = False, transformers_for=None, tuned_fused_for=()) -> Settings:
    """Checked Settings; None picks the device's defaults (GPU: 0.6B and 8B at b1, b8)."""
    device = resolve_device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    on_cuda = device.type == "cuda"
    batches = batches if batches is not None else (GPU_BATCHES if on_cuda else CPU_BATCHES)
    if presets is None:
        presets = default_presets(device, batches, context) if on_cuda else CPU_PRESETS
    shapes = shapes_of(presets)
    if not batches:
        raise ValueError("pass at least one preset and one batch size, e.g. presets=['qwen3-0.6b'], batches=[1]")
    if transformers_for is not None:
        transformers_for = presets_in(transformers_for, shapes, "transformers_for")
    bucket = f"the largest graph bucket is {MAX_BATCH}; pass sizes such as 1 or 8"
    batches = [whole_number(b, "every batch size", at_most=MAX_BATCH, hint=bucket) for b in batches]
    prompt = "it counts the prompt tokens already in the cache"
    context = whole_number(context, "context", at_most=MAX_CONTEXT, hint=prompt)
    if repeats is not None:
        repeats = whole_number(repeats, "repeats", hint="it counts the timed steps per row")
    if warmup is not None:
        warmup = whole_number(warmup, "warmup", at_least=0, hint="it counts the untimed steps before a row is timed")
    return Settings(
        shapes=shapes, batches=tuple(sorted(set(batches))), context=context,
        warmup=warmup if warmup is not None else (GPU_WARMUP if on_cuda else CPU_WARMUP),
        repeats=repeats or (GPU_REPEATS if on_cuda else CPU_REPEATS), device=device, plan=card_plan(device),
        skip_transformers=skip_transformers, skip_fused=skip_fused, compile_on_cpu=compile_on_cpu,
        transformers_for=transformers_for, tuned_fused_for=presets_in(tuned_fused_for or (), shapes, "tuned_fused_for"))
