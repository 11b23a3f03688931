"""Studies wing: the chapter "Prefill against decode": prompts timed against the roofline, why prefill is not
graphed, and decode at longer contexts. The arithmetic lives in core.intensity."""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import partial
from typing import Iterable

import torch

from floorlab.core.bandwidth import MatmulRate
from floorlab.core.device import resolve_device
from floorlab.core.intensity import (
    LEVELLED,
    achieved_tflops,
    fixed_cost_knee_tokens,
    intensity,
    observed_knee_tokens,
    prefill_flops,
    prefill_workspace_bytes,
    roofline_knee_tokens,
)
from floorlab.core.memory import fits_bytes
from floorlab.core.numbers import instance, whole_number, whole_numbers, with_attributes
from floorlab.core.progress import progress_bar
from floorlab.core.prose import fmt_gbps, fmt_ms, sig
from floorlab.core.roofline import Floor, decode_floor, prefill_bytes
from floorlab.core.runs import Row
from floorlab.core.timing import Timing, time_ms
from floorlab.engine.buckets import bucket_for
from floorlab.engine.graphs import GraphRunner, capture_graph
from floorlab.engine.measure import measure_path
from floorlab.engine.model import with_context

MEMORY_SHARE = 0.8  # the share of free memory a measurement may plan to use
REFERENCE = "h200-prefill"  # the stored run of this chapter on an NVIDIA H200
NO_STORED_RUN = ("No stored H200 run of this chapter exists yet; the book stores one the next time the chapter "
                 "runs on that card. Until then only this machine's numbers appear here.")


# ---- prompts in a stream: why prefill is not graphed ---------------------------------------

def prompt_stream(requests: int, *, seed: int = 0, shortest: int = 16, longest: int = 8192) -> list[int]:
    """Prompt lengths in tokens of a seeded stream of requests, log-uniform in [shortest, longest]."""
    rng = random.Random(seed)
    low, high = math.log(shortest), math.log(longest)
    return [min(max(round(math.exp(rng.uniform(low, high))), shortest), longest) for _ in range(int(requests))]


def powers_of_two(longest: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to the first power of two >= longest: buckets a padded prefill could use."""
    return tuple(2**k for k in range(math.ceil(math.log2(max(int(longest), 1))) + 1))


@dataclass
class StreamShapes:
    """What a stream of prompts asks of CUDA graphs: its distinct shapes and padded buckets."""
    requests: int
    shortest: int
    longest: int
    distinct: int
    buckets_used: int
    padded_share: float


def stream_shapes(lengths: Iterable[int], buckets: Iterable[int] | None = None) -> StreamShapes:
    """Distinct prompt shapes of a stream, its buckets (powers of two unless given) and the tokens padding adds."""
    lengths = whole_numbers(lengths, "lengths", hint="pass prompt lengths in tokens, e.g. prompt_stream(1000)")
    hint = "pass bucket sizes in tokens, e.g. (256, 1024, 8192), or None for powers of two"
    buckets = powers_of_two(max(lengths)) if buckets is None else tuple(whole_numbers(buckets, "buckets", hint=hint))
    used = {bucket_for(n, buckets) for n in lengths}
    return StreamShapes(len(lengths), min(lengths), max(lengths), len(set(lengths)), len(used),
                        padded_share(lengths, buckets))


def padded_share(lengths: Iterable[int], buckets: Iterable[int]) -> float:
    """Extra tokens a prefill padded up to the buckets computes, as a share of the real ones."""
    lengths, buckets = list(lengths), tuple(buckets)
    padded = [bucket_for(int(n), buckets) for n in lengths]
    if None in padded:
        raise ValueError(f"a prompt of {max(lengths)} tokens is longer than the largest bucket "
                         f"{max(buckets)}; pass buckets that reach it")
    return sum(padded) / sum(lengths) - 1


# ---- measured prefills ------------------------------------------------------------------

@dataclass
class PrefillPoint:
    """One timed prefill of prompt_tokens at batch 1 on a path ("eager" or "graph replay")."""
    path: str
    prompt_tokens: int
    timing: Timing
    flops: int
    bytes_moved: int

    @property
    def ms_per_token(self) -> float:
        return self.timing.median_ms / self.prompt_tokens

    @property
    def tflops(self) -> float:
        return achieved_tflops(self.flops, self.timing.median_ms)

    @property
    def flops_per_byte(self) -> float:
        return intensity(self.flops, self.bytes_moved)

    def per_token(self) -> Timing:
        """The timing divided by the prompt's tokens: ms per token, median and spread."""
        return Timing.from_samples([s / self.prompt_tokens for s in self.timing.samples_ms])

    def to_dict(self) -> dict:
        return {**vars(self), "timing": self.timing.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> "PrefillPoint":
        return cls(data["path"], int(data["prompt_tokens"]), Timing.from_dict(data["timing"]), int(data["flops"]),
                   int(data["bytes_moved"]))


def random_prompt(model, prompt_tokens: int, *, seed: int = 0) -> torch.Tensor:
    """A seeded random prompt [1, prompt_tokens] on the model's device."""
    with_attributes(model, "model", ("device", "shape"), hint="pass the model fl.build_model returns")
    prompt_tokens = whole_number(prompt_tokens, "prompt_tokens", hint="pass the prompt's length in tokens, e.g. 16")
    seed = whole_number(seed, "seed", at_least=0, hint="pass a whole number to seed the prompt, e.g. 0")
    gen = torch.Generator(device=model.device).manual_seed(seed)
    return torch.randint(0, model.shape.vocab_size, (1, prompt_tokens), device=model.device, generator=gen)


def measure_prefill(model, prompt_tokens: Iterable[int], *, warmup: int, repeats: int,
                    graphs: bool = False, progress: str | None = None) -> list[PrefillPoint]:
    """Time model.prefill at each prompt length (batch 1), eagerly or as a CUDA graph captured, timed and freed per
    length (an instrument that takes the host out, not how a server prefills); lengths that do not fit are left out."""
    lengths = whole_numbers(prompt_tokens, "prompt_tokens", hint="pass prompt lengths in tokens, e.g. (1, 4, 16)")
    if too_long := [n for n in lengths if n > model.max_context]:
        raise ValueError(f"prompts of {too_long} tokens do not fit in max_context="
                         f"{model.max_context}; build the model with max_context>={max(too_long)}")
    if graphs and model.device.type != "cuda":
        raise ValueError("graphs=True needs the model on a CUDA device; on a CPU time it eagerly")
    dtype_bytes = torch.empty((), dtype=model.dtype).element_size()
    points = []
    for n in progress_bar(lengths, label=progress, total=len(lengths)) if progress else lengths:
        if not fits_bytes(prefill_workspace_bytes(model.shape, n, dtype_bytes), model.device, share=MEMORY_SHARE):
            continue
        call = partial(model.prefill, random_prompt(model, n))
        if graphs:
            graph = capture_graph(call, warmup=warmup)[0]  # its output is not needed
            timing = time_ms(graph.replay, warmup=1, repeats=repeats, device=model.device)
            del graph  # frees the graph's memory pool before the next length
            torch.cuda.empty_cache()
        else:
            timing = time_ms(call, warmup=warmup, repeats=repeats, device=model.device)
        points.append(PrefillPoint("graph replay" if graphs else "eager", n, timing, prefill_flops(model.shape, n),
                                   prefill_bytes(model.shape, n, dtype_bytes=dtype_bytes)))
    return points


def roofline_points(points: list[PrefillPoint]) -> list[tuple[float, float, str]]:
    """(FLOPs per byte, TFLOP/s, prompt length) of each point, as figures.roofline draws them."""
    return [(p.flops_per_byte, p.tflops, f"{p.prompt_tokens}") for p in points]


def stored_sweep(run, path: str) -> list[PrefillPoint]:
    """The prefill points a chapter run stored for a path ("eager" or "graph replay")."""
    return [PrefillPoint.from_dict(d) for d in run.facts.get("prefill", []) if d["path"] == path]


def stored_rate(run) -> MatmulRate:
    """The matmul rate a chapter run stored: the compute roof of its card."""
    return MatmulRate.from_dict(run.facts["matmul"])


@dataclass
class Knees:
    """Where a sweep's prefill turns compute-bound, in tokens: by the roofline, by the shortest prompt's real cost
    (step_ms), and observed (None while time per token still fell at the longest prompt)."""
    path: str
    roofline_tokens: int
    step_ms: float
    fixed_cost_tokens: int
    observed_tokens: float | None
    longest_tokens: int
    step_note: str = ""  # says so when the shortest prompt's timing is noisy

    def observed_phrase(self) -> str:
        """'from about 950 tokens', or 'beyond 256 tokens, the longest prompt timed'."""
        if self.observed_tokens is None:
            return f"beyond {self.longest_tokens:,} tokens, the longest prompt timed"
        return f"from about {self.observed_tokens:,.0f} tokens"

    def summary(self) -> str:
        return "\n".join([
            f"{self.path}: expected near {self.roofline_tokens:,} tokens (the roofline's knee),",
            f"  or near {self.fixed_cost_tokens:,} tokens with the shortest prompt's "
            f"{fmt_ms(self.step_ms)} as the fixed cost",
            f"  observed: levelled off (within {LEVELLED:g}× of its lowest time per token)",
            f"  {self.observed_phrase()}",
        ] + ([f"  {self.step_note}"] if self.step_note else []))

    def to_dict(self) -> dict:
        return dict(vars(self))


def find_knees(shape, points: list[PrefillPoint], *, peak_tflops: float, bandwidth_gbps: float,
               dtype_bytes: int = 2) -> Knees:
    """The knees of one sweep: from the roofline, from its shortest prompt's time, observed."""
    if not points:
        raise ValueError("pass the points of a sweep, e.g. measure_prefill(model, (1, 4, 16), ...)")
    shortest = points[0].timing.median_ms
    return Knees(
        points[0].path,
        roofline_knee_tokens(shape, peak_tflops=peak_tflops, bandwidth_gbps=bandwidth_gbps, dtype_bytes=dtype_bytes),
        shortest, fixed_cost_knee_tokens(shape, peak_tflops=peak_tflops, step_ms=shortest),
        observed_knee_tokens([p.prompt_tokens for p in points], [p.ms_per_token for p in points]),
        points[-1].prompt_tokens,
        "".join(line[2:] for line in noise_lines([("the shortest prompt", points[0].timing)])))


def format_sweep(points: list[PrefillPoint], *, peak_tflops: float) -> str:
    """A table of a sweep: tokens, ms, ms per token, TFLOP/s, FLOPs per byte, share of the roof."""
    lines = [f"{'tokens':>7} {'prefill ms':>11} {'ms/token':>10} {'TFLOP/s':>9} {'FLOP/B':>8} {'of roof':>8}"]
    for p in points:
        lines.append(f"{p.prompt_tokens:>7} {_ms(p.timing):>11} {sig(p.ms_per_token):>10} {sig(p.tflops):>9} "
                     f"{sig(p.flops_per_byte):>8} {p.tflops / peak_tflops:>8.0%}")
    return "\n".join(lines + noise_lines([(f"{p.prompt_tokens} tokens", p.timing) for p in points]))


def _ms(timing: Timing) -> str:
    """A median in ms to three figures; a noisy one to two, starred: '6.46', '39*'."""
    return f"{sig(timing.median_ms, 2)}*" if timing.noisy else sig(timing.median_ms)


def noise_lines(timings: list[tuple[str, Timing]]) -> list[str]:
    """One line per noisy (label, Timing): its p10-p90 band and its share of the median."""
    return [f"* noisy: {label}, p10-p90 {sig(t.p10_ms)}-{sig(t.p90_ms)} ms, "
            f"{t.spread_ms / t.median_ms:.0%} of its median" for label, t in timings if t.noisy]


# ---- decode at a context --------------------------------------------------------------

@dataclass
class ContextPoint:
    """A decode step timed at a context: its floor and its measured Row."""
    floor: Floor
    row: Row

    @property
    def context_tokens(self) -> int:
        """Tokens the step attends to, the decoded one included."""
        return self.floor.visible_tokens

    @property
    def kv_share(self) -> float:
        return kv_share(self.floor)

    def to_dict(self) -> dict:
        return {"floor": self.floor.to_dict(), "row": self.row.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> "ContextPoint":
        return cls(floor=Floor.from_dict(data["floor"]), row=Row.from_dict(data["row"]))


def kv_share(floor: Floor) -> float:
    """The KV cache's share of a decode floor's bytes."""
    instance(floor, Floor, "floor", hint="pass the Floor that fl.decode_floor returns")
    return floor.batch * floor.visible_tokens * floor.kv_bytes_per_token / floor.bytes_per_step


def stored_contexts(run) -> list[ContextPoint]:
    """The decode steps at several contexts a chapter run stored."""
    return [ContextPoint.from_dict(d) for d in run.facts.get("contexts", [])]


def format_contexts(points: list[ContextPoint]) -> str:
    """A table of decode steps at contexts: floor, measured, multiple of the floor, GB/s, KV share."""
    lines = [f"{'context':>8} {'path':>13} {'floor':>10} {'measured':>10} {'× floor':>8} {'GB/s':>10} {'KV share':>9}"]
    for p in points:
        lines.append(f"{p.context_tokens:>8} {p.row.path:>13} {fmt_ms(p.floor.floor_ms):>10} "
                     f"{_ms(p.row.timing) + ' ms':>10} {sig(p.row.x_floor):>8} "
                     f"{fmt_gbps(p.row.achieved_gbps):>10} {p.kv_share:>9.0%}")
    return "\n".join(lines + noise_lines([(f"context {p.context_tokens}", p.row.timing) for p in points]))


def measure_decode_contexts(model, contexts: Iterable[int], *, bandwidths, warmup: int, repeats: int,
                            graphs: bool = False, progress: str | None = None) -> list[ContextPoint]:
    """Time one decode step (batch 1) at the last slot of a twin of the model with a cache of each context's length;
    contexts whose twin (a second set of weights while it is made, and its cache) does not fit are left out."""
    device = resolve_device(model.device)
    dtype_bytes = torch.empty((), dtype=model.dtype).element_size()
    contexts = whole_numbers(contexts, "contexts", hint="pass context lengths in tokens, e.g. (128, 1024)")
    points = []
    for context in progress_bar(contexts, label=progress, total=len(contexts)) if progress else contexts:
        needed = model.shape.weight_bytes(dtype_bytes) + context * model.shape.kv_bytes_per_token(dtype_bytes)
        if not fits_bytes(needed, device, share=MEMORY_SHARE):
            continue
        twin = with_context(model, context)
        tokens = torch.ones(1, dtype=torch.long, device=device)
        positions = torch.full((1,), context - 1, dtype=torch.long, device=device)
        floor = decode_floor(model.shape, batch=1, prompt_tokens=context - 1, bandwidths=bandwidths,
                             cache_tokens=context, dtype_bytes=dtype_bytes)
        if graphs:
            runner = GraphRunner(twin, buckets=(1,))
            runner.capture()
            call = runner.step
        else:
            call = twin.decode_step
        row = measure_path("graph replay" if graphs else "eager", partial(call, tokens, positions), floor,
                           warmup=warmup, repeats=repeats, device=device)
        points.append(ContextPoint(floor, row))
        twin = runner = call = None  # this context's cache goes before the next one is made
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return points
