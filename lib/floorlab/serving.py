"""Serving through buckets: a stream of live batches, what padding and eager fallbacks cost,
the memory each graph holds, the padding trap, and choosing the buckets.

The runner is a GraphRunner on a GPU and a PaddedEagerRunner elsewhere. Both pad the
same way, so a stream's padding and fallbacks and the trap checks run for real on any
machine; only the graphs' own times and memory need CUDA, and a CPU reads those from
the stored run of a named card (stored_run), when one exists.
"""
from __future__ import annotations

import random
import warnings
from collections import Counter
from dataclasses import dataclass, field

import torch

from floorlab.graphs import (
    PAD_POSITION,
    PAD_TOKEN,
    EagerFallbackWarning,
    GraphMemory,
    GraphRunner,
    bucket_for,
    check_buckets,
)
from floorlab.measure import measure_path
from floorlab.prose import fmt_ms
from floorlab.results import reference_run
from floorlab.roofline import Floor
from floorlab.runs import Row, Run
from floorlab.shapes import Qwen3Shape
from floorlab.timelines import Timeline
from floorlab.timing import time_once

REFERENCE = "h200-serving"  # the stored run a machine without CUDA shows
# A small model of the same family: a CPU decodes it in milliseconds, so the stream runs for real.
CPU_SHAPE = Qwen3Shape(hidden_size=256, intermediate_size=768, num_layers=4, num_heads=4,
                       num_kv_heads=2, head_dim=64, vocab_size=4096, tie_word_embeddings=True,
                       name="qwen3-small")
BUDGET_TOLERANCE = 0.01  # a bucket choice within 1% of the best mean step counts as the best


def stored_run(name: str = REFERENCE) -> Run | None:
    """The stored reference run of this chapter, or None when none has been stored yet."""
    try:
        return reference_run(name)
    except FileNotFoundError:
        return None


# ---------------------------------------------------------------- the stream

def request_stream(steps: int, *, largest: int, beyond: int = 4, seed: int = 0) -> list[int]:
    """Live batch sizes for `steps` decode steps, drawn from 1..largest+beyond with weight 1/B.

    Small batches are the common case, and a few exceed the largest bucket. Seeded: the
    same arguments give the same stream everywhere.
    """
    if int(steps) != steps or steps < 1:
        raise ValueError(f"steps must be a whole number >= 1, got {steps!r}")
    if int(largest) != largest or largest < 1 or int(beyond) != beyond or beyond < 0:
        raise ValueError(f"largest must be >= 1 and beyond >= 0, got {largest!r} and {beyond!r}")
    sizes = range(1, int(largest) + int(beyond) + 1)
    return random.Random(seed).choices(sizes, weights=[1 / b for b in sizes], k=int(steps))


@dataclass
class StreamStep:
    """One step of a stream: its live batch, the bucket it ran in (None: eager) and its time in ms."""

    batch: int
    bucket: int | None
    ms: float

    @property
    def padded_rows(self) -> int:
        """Rows computed for no request (bucket - batch); 0 for an eager step."""
        return 0 if self.bucket is None else self.bucket - self.batch

    @property
    def rows(self) -> int:
        """Rows the step computed: its bucket, or its batch when it ran eagerly."""
        return self.batch if self.bucket is None else self.bucket

    @property
    def padding_ms(self) -> float:
        """The padded rows' share of the step: padded rows × (ms ÷ rows computed)."""
        return self.padded_rows * self.ms / self.rows


@dataclass
class StreamCost:
    """A stream of live batches run through a runner: where its time went, in ms."""

    path: str
    buckets: tuple[int, ...]
    steps: list[StreamStep] = field(default_factory=list)

    @property
    def total_ms(self) -> float:
        """Time of every step of the stream."""
        return sum(s.ms for s in self.steps)

    @property
    def padded_rows(self) -> int:
        """Padding rows computed over the stream."""
        return sum(s.padded_rows for s in self.steps)

    @property
    def computed_rows(self) -> int:
        """Rows computed over the stream, padding included."""
        return sum(s.rows for s in self.steps)

    @property
    def padding_ms(self) -> float:
        """The padded rows' share of each step, summed: padded rows × step time per row."""
        return sum(s.padding_ms for s in self.steps)

    @property
    def fallbacks(self) -> list[StreamStep]:
        """The steps above the largest bucket, which ran eagerly."""
        return [s for s in self.steps if s.bucket is None]

    @property
    def fallback_ms(self) -> float:
        """Time of the eager fallback steps."""
        return sum(s.ms for s in self.fallbacks)

    @property
    def bucket_ms(self) -> float:
        """Mean time of a step that ran in a bucket (nan when none did)."""
        timed = [s.ms for s in self.steps if s.bucket is not None]
        return sum(timed) / len(timed) if timed else float("nan")

    def histogram(self) -> dict[int, int]:
        """How many steps had each live batch size."""
        return dict(sorted(Counter(s.batch for s in self.steps).items()))

    def summary(self, ms_per_row: float | None = None) -> str:
        """A few printed lines: steps, padding (as a share and, given ms_per_row, at its marginal
        cost) and the eager fallbacks."""
        n, total = len(self.steps), self.total_ms
        falls = self.fallbacks
        lines = [
            f"{n} steps through {self.path}, buckets {self.buckets}: {fmt_ms(total)} in all",
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
        """Plain dict, ready for JSON."""
        return {"path": self.path, "buckets": list(self.buckets),
                "steps": [vars(s) for s in self.steps]}

    @classmethod
    def from_dict(cls, data: dict) -> "StreamCost":
        """Rebuild a StreamCost from to_dict() output."""
        return cls(data["path"], tuple(data["buckets"]),
                   [StreamStep(**s) for s in data["steps"]])


def serve_stream(runner, batches, tokens: torch.Tensor, positions: torch.Tensor, *, device,
                 progress: str | None = None) -> StreamCost:
    """Run each live batch B of the stream through runner.step on rows 0..B-1 of tokens and
    positions: the whole stream once to warm up, then once more, each step timed on its own."""
    batches = list(batches)
    if max(batches) > tokens.shape[0]:
        raise ValueError(f"the stream reaches batch {max(batches)} but only {tokens.shape[0]} "
                         "rows were prefilled; prefill at least as many rows as the largest batch")
    cost = StreamCost(runner.path_name, runner.buckets)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EagerFallbackWarning)  # counted, not repeated
        for batch in batches:
            runner.step(tokens[:batch], positions[:batch])
        for batch in _progress(batches, progress):
            ms = time_once(lambda: runner.step(tokens[:batch], positions[:batch]), device=device)
            cost.steps.append(StreamStep(batch, runner.bucket_for(batch), ms))
    return cost


# ---------------------------------------------------------------- every bucket, eager and graph

def bucket_rows(model, tokens: torch.Tensor, positions: torch.Tensor, floors: dict[int, Floor],
                *, warmup: int, repeats: int, runner: GraphRunner | None = None
                ) -> tuple[dict[int, Row], dict[int, Row]]:
    """Eager and (given a captured runner) graph Rows at every bucket, on the same rows.

    Each graph Row is checked bit for bit against the eager step at its batch.
    """
    eager, graph = {}, {}
    for batch, floor in floors.items():
        tok, pos = tokens[:batch], positions[:batch]
        eager[batch] = measure_path("eager", lambda: model.decode_step(tok, pos), floor,
                                    warmup=warmup, repeats=repeats, device=model.device,
                                    progress=f"eager, batch {batch}")
        if runner is not None:
            row = measure_path("graph", lambda: runner.step(tok, pos), floor, warmup=warmup,
                               repeats=repeats, device=model.device,
                               progress=f"graph, batch {batch}")
            row.bit_identical = runner.check_bit_identical(tok, pos)
            row.max_abs_diff = runner.last_max_abs_diff
            graph[batch] = row
    return eager, graph


def speedup_lines(eager: dict[int, Row], graph: dict[int, Row]) -> str:
    """One printed line per bucket: eager, graph, the speed-up and the multiples of the floor."""
    lines = [f"{'batch':>5}  {'eager':>10}  {'graph':>10}  {'speed-up':>9}  "
             f"{'graph ÷ floor':>13}  bit-identical"]
    for batch, row in graph.items():
        same = {True: "yes", False: "NO", None: "not checked"}[row.bit_identical]
        lines.append(f"{batch:>5}  {fmt_ms(eager[batch].median_ms):>10}  "
                     f"{fmt_ms(row.median_ms):>10}  "
                     f"{eager[batch].median_ms / row.median_ms:>8.2f}×  "
                     f"{row.x_floor:>12.2f}×  {same}")
    return "\n".join(lines)


def ms_per_row(rows: dict[int, Row]) -> float:
    """What one more row adds to a step, in ms: the least-squares slope of median time over batch.

    A row cannot make a step faster, so a negative slope (noise) reads as 0.
    """
    return max(linear_fit({b: r.median_ms for b, r in rows.items()})[1], 0.0)


def linear_fit(points: dict[int, float]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through {x: y}; slope 0 for a single point."""
    if not points:
        raise ValueError("linear_fit needs at least one point")
    n = len(points)
    mean_x, mean_y = sum(points) / n, sum(points.values()) / n
    spread = sum((x - mean_x) ** 2 for x in points)
    if spread == 0:
        return mean_y, 0.0
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points.items()) / spread
    return mean_y - slope * mean_x, slope


# ---------------------------------------------------------------- graph memory

@dataclass
class GraphMemoryReport:
    """What each bucket's graph added to GPU memory, captured into one shared pool and each into its own."""

    shared: list[GraphMemory]
    private: list[GraphMemory]

    @property
    def shared_mb(self) -> float:
        """MB reserved by all graphs in one shared pool."""
        return sum(m.reserved_mb for m in self.shared)

    @property
    def private_mb(self) -> float:
        """MB reserved by all graphs, each in its own pool."""
        return sum(m.reserved_mb for m in self.private)

    def private_mb_at(self) -> dict[int, float]:
        """{bucket: MB reserved by its graph in a pool of its own}."""
        return {m.bucket: m.reserved_mb for m in self.private}

    def summary(self) -> str:
        """A table of MB reserved per graph, own pool against shared pool, with the totals."""
        shared = {m.bucket: m for m in self.shared}
        lines = [f"{'bucket':>6}  {'own pool':>9}  {'shared pool':>11}  {'output kept':>11}"]
        for m in sorted(self.private, key=lambda m: m.bucket):
            s = shared[m.bucket]
            lines.append(f"{m.bucket:>6}  {m.reserved_mb:>6.1f} MB  {s.reserved_mb:>8.1f} MB  "
                         f"{s.allocated_mb:>8.1f} MB")
        lines.append(f"{'all':>6}  {self.private_mb:>6.1f} MB  {self.shared_mb:>8.1f} MB")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """Plain dict, ready for JSON."""
        return {"shared": [m.to_dict() for m in self.shared],
                "private": [m.to_dict() for m in self.private]}

    @classmethod
    def from_dict(cls, data: dict) -> "GraphMemoryReport":
        """Rebuild a report from to_dict() output."""
        return cls([GraphMemory.from_dict(m) for m in data["shared"]],
                   [GraphMemory.from_dict(m) for m in data["private"]])


def capture_runner(model, buckets, *, progress: str | None = None
                   ) -> tuple[GraphRunner, GraphMemoryReport]:
    """A GraphRunner captured into one shared pool, and what its graphs hold in memory, measured
    against the same graphs captured each into a pool of its own (captured first, then freed)."""
    private = GraphRunner(model, buckets)
    private.capture(shared_pool=False, progress=progress and f"{progress}, own pools")
    own = [private.memory[b] for b in private.buckets]
    del private
    torch.cuda.empty_cache()
    runner = GraphRunner(model, buckets)
    runner.capture(shared_pool=True, progress=progress and f"{progress}, one pool")
    return runner, GraphMemoryReport([runner.memory[b] for b in runner.buckets], own)


# ---------------------------------------------------------------- the padding trap

def _bits(t: torch.Tensor) -> torch.Tensor:
    """t's raw bits as integers, so NaNs compare equal to themselves."""
    kinds = {2: torch.int16, 4: torch.int32, 8: torch.int64}
    return t.contiguous().view(kinds[t.element_size()])


@dataclass
class TrapReport:
    """One padded step with poisoned padding rows, checked against the same step with clean ones."""

    batch: int
    bucket: int
    path: str
    outputs_equal: bool
    outputs_finite: bool
    live_cache_equal: bool
    other_rows_kept: bool

    @property
    def passed(self) -> bool:
        """True when the live rows saw nothing of the poison and no other row was written."""
        return (self.outputs_equal and self.outputs_finite and self.live_cache_equal
                and self.other_rows_kept)

    def summary(self) -> str:
        """The four checks, one per line."""
        checks = [("live logits equal to the clean step's", self.outputs_equal),
                  ("live logits finite", self.outputs_finite),
                  ("live rows' KV cache equal to the clean step's", self.live_cache_equal),
                  (f"rows {self.batch} on left bit for bit as they were", self.other_rows_kept)]
        return "\n".join(
            [f"batch {self.batch} in bucket {self.bucket} ({self.path}), every cache row "
             f"from {self.batch} on filled with NaN"]
            + [f"{what:<48} {'yes' if ok else 'NO'}" for what, ok in checks])

    def to_dict(self) -> dict:
        """Plain dict, ready for JSON."""
        return dict(vars(self))


def check_padding_trap(runner, tokens: torch.Tensor, positions: torch.Tensor, batch: int
                       ) -> TrapReport:
    """Run one padded step twice, from the same cache: once clean, once with every cache row from
    `batch` on (padding rows and rows beyond the bucket) filled with NaN, and the runner's
    static padding inputs with garbage. The model's cache is put back afterwards."""
    model = runner.model
    bucket = runner.bucket_for(batch)
    if bucket is None or bucket == batch:
        raise ValueError(f"batch {batch} needs padding for this check; pick one between two "
                         f"buckets of {runner.buckets}")
    tok, pos = tokens[:batch], positions[:batch]
    saved = model.k_cache.clone(), model.v_cache.clone()
    try:
        clean = runner.step(tok, pos)
        clean_k, clean_v = model.k_cache[:, :batch].clone(), model.v_cache[:, :batch].clone()
        _put_back(model, saved)
        with torch.no_grad():
            model.k_cache[:, batch:].fill_(float("nan"))
            model.v_cache[:, batch:].fill_(float("nan"))
        poisoned_k, poisoned_v = model.k_cache[:, batch:].clone(), model.v_cache[:, batch:].clone()
        _poison_static_inputs(runner, batch, bucket)
        out = runner.step(tok, pos)
        return TrapReport(
            batch, bucket, runner.path_name,
            outputs_equal=torch.equal(_bits(out), _bits(clean)),
            outputs_finite=bool(torch.isfinite(out).all()),
            live_cache_equal=(torch.equal(_bits(model.k_cache[:, :batch]), _bits(clean_k))
                              and torch.equal(_bits(model.v_cache[:, :batch]), _bits(clean_v))),
            other_rows_kept=(torch.equal(_bits(model.k_cache[:, batch:]), _bits(poisoned_k))
                             and torch.equal(_bits(model.v_cache[:, batch:]), _bits(poisoned_v))),
        )
    finally:
        _put_back(model, saved)


def overwritten_values(model, tokens: torch.Tensor, positions: torch.Tensor, batch: int,
                       bucket: int) -> int:
    """KV-cache values of rows batch.. that one padded step overwrites WITHOUT keep_padding_rows.

    Runs model.decode_step on the batch padded as the runners pad it (what a replay computes),
    after filling rows batch.. with +inf, a value no step writes (a row's keys and values are
    finite, or NaN once the inf reaches them), and counts the values that are no longer +inf.
    The model's cache is put back afterwards.
    """
    if bucket <= batch or bucket > model.max_batch:
        raise ValueError(f"bucket must be above batch ({batch}) and at most max_batch "
                         f"({model.max_batch}), got {bucket}")
    device = model.device
    pad = bucket - batch
    padded_tok = torch.cat([tokens[:batch].to(device),
                            torch.full((pad,), PAD_TOKEN, dtype=torch.long, device=device)])
    padded_pos = torch.cat([positions[:batch].to(device),
                            torch.full((pad,), PAD_POSITION, dtype=torch.long, device=device)])
    saved = model.k_cache.clone(), model.v_cache.clone()
    try:
        with torch.no_grad():
            model.k_cache[:, batch:].fill_(float("inf"))
            model.v_cache[:, batch:].fill_(float("inf"))
        model.decode_step(padded_tok, padded_pos)
        return sum(int((~torch.isposinf(cache[:, batch:])).sum())
                   for cache in (model.k_cache, model.v_cache))
    finally:
        _put_back(model, saved)


def values_padding_writes(shape, padded_rows: int) -> int:
    """KV-cache values padded_rows padding rows write in one step: one slot each, K and V, every layer."""
    return padded_rows * shape.num_layers * 2 * shape.num_kv_heads * shape.head_dim


def _put_back(model, saved) -> None:
    with torch.no_grad():
        model.k_cache.copy_(saved[0])
        model.v_cache.copy_(saved[1])


def _poison_static_inputs(runner, batch: int, bucket: int) -> None:
    """Garbage in a GraphRunner's static padding inputs and outputs (the runner must overwrite them)."""
    tokens = getattr(runner, "static_tokens", None)
    if tokens is None:
        return
    with torch.inference_mode():  # the captured outputs are inference tensors
        tokens[batch:bucket].fill_(runner.model.shape.vocab_size - 1)
        runner.static_positions[batch:bucket].fill_(runner.model.max_context - 1)
        runner.static_outputs[bucket][batch:].fill_(float("nan"))


# ---------------------------------------------------------------- choosing buckets

@dataclass
class BucketCosts:
    """Step time and graph memory at any batch size, interpolated from measured buckets.

    graph_ms and eager_ms map a measured batch to its median step in ms; graph_mb maps a
    bucket to the MB its graph reserves in a pool of its own. Between measured sizes the
    values are interpolated on a straight line, beyond them extended along the last one.
    """

    graph_ms: dict[int, float]
    eager_ms: dict[int, float]
    graph_mb: dict[int, float]

    def graph_step_ms(self, batch: int) -> float:
        """ms of a graph replay at this bucket."""
        return _interpolate(self.graph_ms, batch)

    def eager_step_ms(self, batch: int) -> float:
        """ms of an eager step at this batch."""
        return _interpolate(self.eager_ms, batch)

    def memory_mb(self, bucket: int) -> float:
        """MB a graph at this bucket reserves in a pool of its own (never below 0)."""
        return max(_interpolate(self.graph_mb, bucket), 0.0)

    def table(self) -> str:
        """The measured points: per bucket, graph and eager ms and the graph's MB (own pool)."""
        lines = [f"{'batch':>5}  {'graph':>10}  {'eager':>10}  {'graph memory':>12}"]
        for b in sorted(self.graph_ms):
            lines.append(f"{b:>5}  {fmt_ms(self.graph_ms[b]):>10}  "
                         f"{fmt_ms(self.eager_step_ms(b)):>10}  {self.memory_mb(b):>9.1f} MB")
        return "\n".join(lines)


def _interpolate(points: dict[int, float], x: float) -> float:
    xs = sorted(points)
    if len(xs) == 1:
        return points[xs[0]]
    if x in points:
        return points[x]
    lo, hi = (xs[0], xs[1]) if x < xs[0] else (xs[-2], xs[-1])
    for a, b in zip(xs, xs[1:]):
        if a <= x <= b:
            lo, hi = a, b
            break
    return points[lo] + (points[hi] - points[lo]) * (x - lo) / (hi - lo)


@dataclass
class BucketScore:
    """How a choice of buckets serves a distribution of live batches."""

    buckets: tuple[int, ...]
    mean_ms: float  # mean step time over the distribution
    memory_mb: float  # graph memory, each graph in its own pool
    padded_share: float  # padded rows over computed rows
    fallback_share: float  # steps that run eagerly

    def __str__(self) -> str:
        return (f"buckets {self.buckets}: {self.mean_ms:.3f} ms per step, "
                f"{self.memory_mb:.1f} MB, {self.padded_share:.0%} padded rows, "
                f"{self.fallback_share:.0%} of steps eager")


def score_buckets(buckets, histogram: dict[int, int], costs: BucketCosts) -> BucketScore:
    """Mean step ms, graph MB (own pools), padded-row share and eager share of a bucket choice."""
    buckets = check_buckets(buckets)
    steps = sum(histogram.values())
    total_ms = padded = rows = falls = 0
    for batch, count in histogram.items():
        bucket = bucket_for(batch, buckets)
        if bucket is None:
            total_ms += count * costs.eager_step_ms(batch)
            rows += count * batch
            falls += count
        else:
            total_ms += count * costs.graph_step_ms(bucket)
            rows += count * bucket
            padded += count * (bucket - batch)
    memory = sum(costs.memory_mb(b) for b in buckets)
    return BucketScore(buckets, total_ms / steps, memory, padded / rows, falls / steps)


def best_buckets(histogram: dict[int, int], costs: BucketCosts, *, budget_mb: float,
                 max_bucket: int) -> BucketScore:
    """The bucket choice (sizes 1..max_bucket) with the fastest mean step within budget_mb.

    Only sizes that occur are worth a bucket: any other serves the same batches as the
    next occurring size below it, slower and larger. Each candidate set is kept on a
    Pareto front of (memory, time), so the search is exact and quick.
    """
    sizes = sorted(b for b in histogram if b <= max_bucket)

    def served(lo: int, hi: int) -> float:  # batches in (lo, hi] replayed at bucket hi
        return sum(n * costs.graph_step_ms(hi) for b, n in histogram.items() if lo < b <= hi)

    def eager_above(lo: int) -> float:
        return sum(n * costs.eager_step_ms(b) for b, n in histogram.items() if b > lo)

    fronts: dict[int, list[tuple[float, float, tuple[int, ...]]]] = {0: [(0.0, 0.0, ())]}
    for size in sizes:
        options = [(mem + costs.memory_mb(size), ms + served(last, size), chosen + (size,))
                   for last, front in fronts.items() for mem, ms, chosen in front
                   if mem + costs.memory_mb(size) <= budget_mb]
        fronts[size] = _pareto(options)
    finished = [(ms + eager_above(last), chosen) for last, front in fronts.items()
                for _, ms, chosen in front if chosen]
    if not finished:
        raise ValueError(f"no bucket fits a budget of {budget_mb:.1f} MB; raise the budget")
    return score_buckets(min(finished)[1], histogram, costs)


def _pareto(options):
    """The options no other option beats on both memory and time."""
    front, best_ms = [], float("inf")
    for mem, ms, chosen in sorted(options):
        if ms < best_ms:
            front.append((mem, ms, chosen))
            best_ms = ms
    return front


def _progress(items, label: str | None):
    if label is None:
        return items
    from floorlab.progress import progress_bar

    return progress_bar(items, label=label, total=len(items))


# ---------------------------------------------------------------- the graph side, here or stored

NO_STORED_RUN = ("CUDA graphs need a CUDA GPU, and no stored run of this chapter on one exists "
                 "yet, so the graph numbers are absent here. Run the chapter once on a CUDA GPU "
                 "to measure them (the run is saved to figures/serving.json).")


@dataclass
class GraphSide:
    """The numbers only a GPU measures: per-bucket eager and graph rows, graph memory, the
    stream through the graphs and the timelines; from this machine or from a stored run."""

    source: object  # floorlab.measure.Source
    preset: str
    floors: dict[int, Floor] = field(default_factory=dict)
    eager: dict[int, Row] = field(default_factory=dict)
    graph: dict[int, Row] = field(default_factory=dict)
    padded: Row | None = None
    memory: GraphMemoryReport | None = None
    stream: StreamCost | None = None
    timelines: dict[str, Timeline] = field(default_factory=dict)

    @property
    def speedups(self) -> dict[int, float]:
        """Eager median over graph median at each bucket."""
        return {b: self.eager[b].median_ms / r.median_ms for b, r in self.graph.items()}

    def costs(self) -> BucketCosts:
        """Step times and graph memory per bucket, for choosing buckets."""
        return BucketCosts({b: r.median_ms for b, r in self.graph.items()},
                           {b: r.median_ms for b, r in self.eager.items()},
                           self.memory.private_mb_at())

    @classmethod
    def from_run(cls, run: Run) -> "GraphSide":
        """The graph side of a stored run of this chapter."""
        from floorlab.measure import Source

        rows = [r for r in run.rows if r.measured]
        return cls(Source(here=False, run=run), run.settings["preset"],
                   floors={f.batch: f for f in run.floors},
                   eager={r.batch: r for r in rows if r.path == "eager"},
                   graph={r.batch: r for r in rows if r.path == "graph"},
                   padded=next((r for r in rows if r.path == "graph, padded"), None),
                   memory=GraphMemoryReport.from_dict(run.facts["graph_memory"]),
                   stream=StreamCost.from_dict(run.facts["stream"]),
                   timelines=dict(run.timelines))

    def to_run(self, *, stamp: dict, device: dict, bandwidths, settings: dict,
               facts: dict | None = None) -> Run:
        """This machine's graph side as a Run (kind chapter:serving), ready to save."""
        rows = [*self.eager.values(), *self.graph.values()]
        rows += [self.padded] if self.padded is not None else []
        return Run(kind="chapter:serving", stamp=stamp, device=device, bandwidths=bandwidths,
                   floors=list(self.floors.values()), rows=rows, timelines=dict(self.timelines),
                   facts={"graph_memory": self.memory.to_dict(), "stream": self.stream.to_dict(),
                          **(facts or {})},
                   settings={"preset": self.preset, **settings})
