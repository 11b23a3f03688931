"""Studies wing: the chapter "Serving", a stream of requests through the buckets, each step timed,
and what its padding and eager fallbacks cost."""
from __future__ import annotations

import random
import warnings
from collections import Counter
from dataclasses import dataclass, field

import torch

from floorlab.core.numbers import whole_number, whole_numbers
from floorlab.core.progress import progress_bar
from floorlab.core.prose import fmt_ms
from floorlab.core.timing import Band, compare, time_once
from floorlab.engine.buckets import EagerFallbackWarning


def request_stream(steps: int, *, largest: int, beyond: int = 4, seed: int = 0) -> list[int]:
    """Live batch sizes for `steps` steps from 1..largest+beyond, weighted 1/B, seeded."""
    steps, largest = whole_number(steps, "steps"), whole_number(largest, "largest")
    sizes = range(1, largest + whole_number(beyond, "beyond", at_least=0) + 1)
    return random.Random(seed).choices(sizes, weights=[1 / b for b in sizes], k=steps)


@dataclass
class StreamStep:
    """One step of a stream: its live batch, the bucket it ran in (None: eager) and its time in ms."""

    batch: int
    bucket: int | None
    ms: float

    rows = property(lambda self: self.batch if self.bucket is None else self.bucket)  # computed
    padded_rows = property(lambda self: self.rows - self.batch)
    padding_ms = property(lambda self: self.padded_rows * self.ms / self.rows)  # their even share


@dataclass
class StreamCost:
    """A stream of live batches run through a runner; totals are sums over its steps (ms, rows)."""

    path: str
    buckets: tuple[int, ...]
    steps: list[StreamStep] = field(default_factory=list)

    total_ms = property(lambda self: sum(s.ms for s in self.steps))
    padded_rows = property(lambda self: sum(s.padded_rows for s in self.steps))
    computed_rows = property(lambda self: sum(s.rows for s in self.steps))
    padding_ms = property(lambda self: sum(s.padding_ms for s in self.steps))
    fallback_ms = property(lambda self: sum(s.ms for s in self.fallbacks))
    fallbacks = property(lambda self: [s for s in self.steps if s.bucket is None])  # ran eagerly

    @property
    def bucket_ms(self) -> float:
        """Mean time of a step that ran in a bucket (nan when none did)."""
        timed = [s.ms for s in self.steps if s.bucket is not None]
        return sum(timed) / len(timed) if timed else float("nan")

    def histogram(self) -> dict[int, int]:
        return dict(sorted(Counter(s.batch for s in self.steps).items()))

    def summary(self, ms_per_row: float | None = None) -> str:
        """Printed lines: steps, padding (even share, and at ms_per_row if given), eager fallbacks."""
        total, falls = self.total_ms, self.fallbacks
        lines = [
            f"{len(self.steps)} steps through {self.path}, buckets {self.buckets}: {fmt_ms(total)} in all",
            f"padding rows    {self.padded_rows} of {self.computed_rows} computed "
            f"({self.padded_rows / self.computed_rows:.0%})",
            f"padding, as a share of each step   {fmt_ms(self.padding_ms)} "
            f"({self.padding_ms / total:.1%} of the stream)",
        ]
        if ms_per_row is not None:
            marginal = self.padded_rows * ms_per_row
            lines.append(f"padding, at what a row adds        {self.padded_rows} × "
                         f"{fmt_ms(ms_per_row)} = {fmt_ms(marginal)} ({marginal / total:.1%})")
        mean = f", {fmt_ms(self.fallback_ms / len(falls))} each" if falls else ""
        lines += [f"eager fallbacks {len(falls)} steps above batch {self.buckets[-1]}: "
                  f"{fmt_ms(self.fallback_ms)}{mean}",
                  f"                {self.fallback_ms / total:.1%} of the stream; a step in "
                  f"a bucket took {fmt_ms(self.bucket_ms)} on average"]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"path": self.path, "buckets": list(self.buckets), "steps": [vars(s) for s in self.steps]}

    @classmethod
    def from_dict(cls, data: dict) -> "StreamCost":
        return cls(data["path"], tuple(data["buckets"]), [StreamStep(**s) for s in data["steps"]])


def serve_stream(runner, batches, tokens: torch.Tensor, positions: torch.Tensor, *, device,
                 progress: str | None = None) -> StreamCost:
    """Each live batch B through runner.step on rows 0..B-1: once to warm up, once more timed per step."""
    batches = whole_numbers(batches, "the stream's live batches",
                            hint="pass a sequence of live batch sizes such as [1, 3, 5]")
    if max(batches) > tokens.shape[0]:
        raise ValueError(f"the stream reaches batch {max(batches)} but only {tokens.shape[0]} "
                         "rows were prefilled; prefill at least as many rows as the largest batch")
    cost = StreamCost(runner.path_name, runner.buckets)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EagerFallbackWarning)  # counted, not repeated
        for batch in batches:
            runner.step(tokens[:batch], positions[:batch])
        for batch in progress_bar(batches, label=progress, total=len(batches)) if progress else batches:
            ms = time_once(lambda: runner.step(tokens[:batch], positions[:batch]), device=device)
            cost.steps.append(StreamStep(batch, runner.bucket_for(batch), ms))
    return cost


def pricing_sentence(stream: StreamCost, ms_per_row: float) -> str:
    """Whether padding's even share of each step over- or understates what its rows add at ms_per_row."""
    if stream.padded_rows == 0:
        return "This stream needed no padding, so there is nothing to price."
    return compare(Band.exact(stream.padding_ms), Band.exact(stream.padded_rows * ms_per_row)).verdict(
        "That is an accounting answer, and it overstates the cost: dropping the padding would not give that time "
        "back, because a step with fewer rows costs less only by the slope below.",
        "That is an accounting answer, and here it understates the cost: by the slope below, a "
        "row adds more than its even share of a step.",
        "That is an accounting answer, and here it agrees with the slope below.")


def padding_against_fallbacks(stream: StreamCost, ms_per_row: float, where: str) -> str:
    """Which cost the stream more, its padding (at what a row adds) or its eager fallbacks."""
    if not stream.fallbacks:
        return f"{where} no step missed every bucket, so the stream had no fallback to price."
    return compare(Band.exact(stream.fallback_ms), Band.exact(stream.padded_rows * ms_per_row)).verdict(
        f"{where} the padding cost less than the steps that missed every bucket and ran "
        "eagerly, so the largest bucket belongs at the largest batch the server admits.",
        f"{where} the padding cost more than the steps that missed every bucket: there, more "
        "buckets pay before a larger one does.",
        f"{where} the padding and the fallbacks cost the same.")
