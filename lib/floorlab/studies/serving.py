"""Studies wing: the chapter "Serving": every bucket timed eager and as a graph, the graphs' memory,
and that graph side of a run, measured here or (without CUDA) the stored run of a named card."""
from __future__ import annotations

import itertools
import statistics
from dataclasses import asdict, dataclass, field

import torch

from floorlab.core.device import DeviceFacts
from floorlab.core.prose import fmt_ms, fmt_times, sig
from floorlab.core.reference import reference_run
from floorlab.core.roofline import Floor
from floorlab.core.runs import Row, Run
from floorlab.core.shapes import Qwen3Shape
from floorlab.core.stamp import Stamp
from floorlab.core.timelines import Timeline
from floorlab.core.timing import Band, compare, ratio_band, tally
from floorlab.engine.graphs import GraphMemory, GraphRunner
from floorlab.engine.measure import Source, measure_path, no_stored_run
from floorlab.studies.serving_buckets import BucketCosts
from floorlab.studies.serving_stream import StreamCost

REFERENCE = "h200-serving"  # the stored run a machine without CUDA shows
# A small model of the same family: a CPU decodes it in milliseconds, so the stream runs for real.
CPU_SHAPE = Qwen3Shape(hidden_size=256, intermediate_size=768, num_layers=4, num_heads=4,
                       num_kv_heads=2, head_dim=64, vocab_size=4096, tie_word_embeddings=True,
                       name="qwen3-small")
NO_STORED_RUN = no_stored_run(REFERENCE)  # what a machine without CUDA says when none is stored


def stored_run(name: str = REFERENCE) -> Run | None:
    """The stored reference run of this chapter, or None when none has been stored yet."""
    return reference_run(name, missing_ok=True)


def bucket_rows(model, tokens: torch.Tensor, positions: torch.Tensor, floors: dict[int, Floor],
                *, warmup: int, repeats: int, runner: GraphRunner | None = None
                ) -> tuple[dict[int, Row], dict[int, Row]]:
    """Eager and (given a captured runner) graph Rows at every bucket, each graph Row checked bit for bit."""
    eager, graph = {}, {}
    for batch, floor in floors.items():
        tok, pos = tokens[:batch], positions[:batch]
        eager[batch] = measure_path("eager", lambda: model.decode_step(tok, pos), floor, warmup=warmup,
                                    repeats=repeats, device=model.device, progress=f"eager, batch {batch}")
        if runner is not None:
            row = measure_path("graph", lambda: runner.step(tok, pos), floor, warmup=warmup,
                               repeats=repeats, device=model.device, progress=f"graph, batch {batch}")
            row.bit_identical = runner.check_bit_identical(tok, pos)
            row.max_abs_diff = runner.last_max_abs_diff
            graph[batch] = row
    return eager, graph


def speedup_lines(eager: dict[int, Row], graph: dict[int, Row]) -> str:
    """One line per bucket: eager, graph, the speed-up where the spreads allow, graph ÷ floor."""
    lines = [f"{'batch':>5}  {'eager':>10}  {'graph':>10}  {'speed-up':>9}  {'p10-p90':>11}  {'graph ÷ floor':>13}  "
             "bit-identical"]
    apart = {b: compare(eager[b], row) for b, row in graph.items()}
    for batch, row in graph.items():
        same = {True: "yes", False: "NO", None: "not checked"}[row.bit_identical]
        speedup = fmt_times(apart[batch].ratio) if apart[batch].meaningful else "overlap"
        band = ratio_band(eager[batch], row)
        noisy = "".join(f", {r.path} noisy" for r in (eager[batch], row) if r.timing.noisy)
        lines.append(f"{batch:>5}  {fmt_ms(eager[batch].median_ms):>10}  {fmt_ms(row.median_ms):>10}  "
                     f"{speedup:>9}  {sig(band.low) + '-' + sig(band.high):>11}  {fmt_times(row.x_floor):>13}  "
                     f"{same}{noisy}")
    if not all(c.meaningful for c in apart.values()):
        lines.append("overlap: eager and graph differ by less than their spreads there, so "
                     "that run cannot tell them apart")
    return "\n".join(lines)


def speedup_sentence(eager: dict[int, Row], graph: dict[int, Row], batches) -> str:
    """Each batch's speed-up of the replay over eager, and how it moved from the first batch to the last."""
    parts = [compare(eager[batch], graph[batch]).verdict(
        f"{{ratio}} {'as fast as eager ' if i == 0 else ''}at batch {batch}",
        f"slower than eager, {{inverse}} its time, at batch {batch}",
        f"no faster than eager beyond the spreads at batch {batch}") for i, batch in enumerate(batches)]
    first, last = batches[0], batches[-1]
    bands = [ratio_band(eager[b], graph[b]) for b in (first, last)]
    faster = [b for b in batches[1:] if compare(eager[first], eager[b]).outcome == "more"]
    load = (f", though eager at batch {first} ran slower than at batch {faster[0]}, beyond the spreads, which more "
            f"rows cannot cause: something besides the rows, most likely the host's load, set batch {first}'s eager "
            "pace, so the shrink is not the batch's alone") if faster else ""
    return "the replay is " + " and ".join(parts) + "; " + compare(bands[1], bands[0]).verdict(
        "the speed-up grew with the batch, beyond the spreads, against the expectation",
        f"the speed-up shrank as the batch grew, to {{ratio}} of its value at batch {first}{load}",
        f"the spreads cannot tell whether the speed-up changed from batch {first} to {last}")


def every_bucket_sentence(eager: dict[int, Row], graph: dict[int, Row]) -> str:
    """Whether the replay beat eager beyond the spreads at every bucket, said either way."""
    named = {str(b): compare(eager[b], row) for b, row in graph.items()}
    if all(c.outcome == "more" for c in named.values()):
        return tally(named, "Beyond the spreads the replay beat eager at every bucket, so a server "
                     "that pads can count on a graph at every bucket, not only at the batch size "
                     "that benchmarks quote.", "", "")
    return tally(named, "", "At batch {names} the replay was the slower, beyond the spreads",
                 "at batch {names} the replay did not beat eager beyond the spreads") + (
                     ". On this run a graph pays at some buckets only.")


def slope_note(rows: dict[int, Row]) -> str:
    """A sentence when ms_per_row's slope is not a row's price (load, or noise), else ''."""
    batches = sorted(rows)
    for a, b in itertools.combinations(batches, 2):
        if compare(rows[a], rows[b]).outcome == "more":
            return compare(rows[a], rows[b]).verdict(
                f"Here batch {b} ran faster than batch {a}, beyond both spreads, which more rows alone cannot cause: "
                "something besides the rows set those times (the machine's load, or other kernels chosen at another "
                "shape), so that slope measures it, not a row.", "", "")
    return compare(rows[batches[0]], rows[batches[-1]]).verdict("", "", (
        f"Here batch {batches[0]} and batch {batches[-1]} differ by less than their spreads, so a "
        "row costs too little for this run to see, and the slope is inside the noise."))


def marginal_price_sentence(rows: dict[int, Row], padded_rows: int, total_ms: float) -> str:
    """The slope's price of the padding as arithmetic, after slope_note; said as a figure the run cannot vouch
    for where the slope measures the load or the noise."""
    row_ms = ms_per_row(rows)
    cost = (f"{padded_rows:,} × {sig(row_ms * 1e3)} µs = {fmt_ms(padded_rows * row_ms)}, "
            f"{padded_rows * row_ms / total_ms:.1%} of the stream")
    note = slope_note(rows)
    if note:
        return (f"{note} Priced that way all the same, the padding would cost {cost}, a figure this run "
                "cannot vouch for.")
    return f"Priced that way the padding cost {cost}."


def ms_per_row(rows: dict[int, Row]) -> float:
    """ms one more row adds to a step: the least-squares slope of median over batch, at least 0."""
    if len(rows) < 2:
        return 0.0
    return max(statistics.linear_regression(list(rows), [r.median_ms for r in rows.values()]).slope, 0.0)


@dataclass
class GraphMemoryReport:
    """What each bucket's graph added to GPU memory, in one shared pool and each in its own (MB)."""

    shared: list[GraphMemory]
    private: list[GraphMemory]

    shared_mb = property(lambda self: sum(m.reserved_mb for m in self.shared))
    private_mb = property(lambda self: sum(m.reserved_mb for m in self.private))

    def summary(self) -> str:
        shared = {m.bucket: m for m in self.shared}
        lines = [f"{'bucket':>6}  {'own pool':>9}  {'shared pool':>11}  {'output kept':>11}"]
        for m in sorted(self.private, key=lambda m: m.bucket):
            s = shared[m.bucket]
            lines.append(f"{m.bucket:>6}  {sig(m.reserved_mb):>6} MB  {sig(s.reserved_mb):>8} MB  "
                         f"{sig(s.allocated_mb):>8} MB")
        lines.append(f"{'all':>6}  {sig(self.private_mb):>6} MB  {sig(self.shared_mb):>8} MB")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "GraphMemoryReport":
        return cls([GraphMemory.from_dict(m) for m in data["shared"]],
                   [GraphMemory.from_dict(m) for m in data["private"]])


def capture_runner(model, buckets, *, progress: str | None = None
                   ) -> tuple[GraphRunner, GraphMemoryReport]:
    """A GraphRunner captured into one shared pool, and its memory against own pools (captured, freed)."""
    private = GraphRunner(model, buckets)
    private.capture(shared_pool=False, progress=progress and f"{progress}, own pools")
    own = [private.memory[b] for b in private.buckets]
    del private
    torch.cuda.empty_cache()
    runner = GraphRunner(model, buckets)
    runner.capture(shared_pool=True, progress=progress and f"{progress}, one pool")
    return runner, GraphMemoryReport([runner.memory[b] for b in runner.buckets], own)


def pool_sentence(memory: GraphMemoryReport) -> str:
    """How much of the graphs' own pools one shared pool saved, in words."""
    return compare(Band.exact(memory.shared_mb), Band.exact(memory.private_mb / 2)).verdict(
        "a shared pool saved less than half of it here.",
        "a shared pool removed most of it here.",
        "a shared pool removed half of it here.")


@dataclass
class GraphSide:
    """The numbers only a GPU measures, from this machine or from a stored run."""

    source: Source
    preset: str
    floors: dict[int, Floor] = field(default_factory=dict)
    eager: dict[int, Row] = field(default_factory=dict)
    graph: dict[int, Row] = field(default_factory=dict)
    padded: Row | None = None
    memory: GraphMemoryReport | None = None
    stream: StreamCost | None = None
    timelines: dict[str, Timeline] = field(default_factory=dict)

    def costs(self) -> BucketCosts:
        return BucketCosts({b: r.median_ms for b, r in self.graph.items()},
                           {b: r.median_ms for b, r in self.eager.items()},
                           {m.bucket: m.reserved_mb for m in self.memory.private})

    @classmethod
    def from_run(cls, run: Run) -> "GraphSide":
        rows = [r for r in run.rows if r.measured]
        return cls(Source(here=False, run=run), run.settings.preset,
                   floors={f.batch: f for f in run.floors},
                   eager={r.batch: r for r in rows if r.path == "eager"},
                   graph={r.batch: r for r in rows if r.path == "graph"},
                   padded=next((r for r in rows if r.path == "graph, padded"), None),
                   memory=GraphMemoryReport.from_dict(run.facts["graph_memory"]),
                   stream=StreamCost.from_dict(run.facts["stream"]),
                   timelines=dict(run.timelines))

    def to_run(self, *, stamp: Stamp, device: DeviceFacts, bandwidths, settings: dict,
               facts: dict | None = None) -> Run:
        """This machine's graph side as a Run (kind chapter:serving), ready to save."""
        rows = [*self.eager.values(), *self.graph.values(), *([self.padded] if self.padded is not None else [])]
        return Run(kind="chapter:serving", stamp=stamp, device=device, bandwidths=bandwidths,
                   floors=list(self.floors.values()), rows=rows, timelines=dict(self.timelines),
                   facts={"graph_memory": self.memory.to_dict(), "stream": self.stream.to_dict(),
                          **(facts or {})},
                   settings={"preset": self.preset, **settings})
