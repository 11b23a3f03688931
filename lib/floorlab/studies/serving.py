"""Studies wing: the chapter "Serving": every bucket timed eager and as a graph, the memory each
graph holds, and the graph side of a run, measured here or stored. The stream of requests is in
serving_stream, the padding trap in serving_trap.

The runner is a GraphRunner on a GPU and a PaddedEagerRunner elsewhere. Both pad the
same way, so a stream's padding and fallbacks and the trap checks run for real on any
machine; only the graphs' own times and memory need CUDA, and a CPU reads those from
the stored run of a named card (stored_run), when one exists. Choosing the buckets lives
beside it, in serving_buckets.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from floorlab.core.prose import fmt_ms, fmt_times, sig
from floorlab.core.roofline import Floor
from floorlab.core.runs import Row, Run, reference_run
from floorlab.core.shapes import Qwen3Shape
from floorlab.core.timelines import Timeline
from floorlab.core.timing import Band, compare, ratio_band, tally
from floorlab.engine.graphs import GraphMemory, GraphRunner
from floorlab.engine.measure import Source, measure_path
from floorlab.studies.serving_buckets import BucketCosts
from floorlab.studies.serving_stream import StreamCost

REFERENCE = "h200-serving"  # the stored run a machine without CUDA shows
# A small model of the same family: a CPU decodes it in milliseconds, so the stream runs for real.
CPU_SHAPE = Qwen3Shape(hidden_size=256, intermediate_size=768, num_layers=4, num_heads=4,
                       num_kv_heads=2, head_dim=64, vocab_size=4096, tie_word_embeddings=True,
                       name="qwen3-small")


def stored_run(name: str = REFERENCE) -> Run | None:
    """The stored reference run of this chapter, or None when none has been stored yet."""
    try:
        return reference_run(name)
    except FileNotFoundError:
        return None


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
    """One printed line per bucket: eager, graph, the speed-up (only where the two spreads do not
    overlap, timing.compare) and the multiples of the floor; noisy timings are marked."""
    lines = [f"{'batch':>5}  {'eager':>10}  {'graph':>10}  {'speed-up':>9}  "
             f"{'graph ÷ floor':>13}  bit-identical"]
    for batch, row in graph.items():
        same = {True: "yes", False: "NO", None: "not checked"}[row.bit_identical]
        apart = compare(eager[batch], row)
        speedup = f"{fmt_times(apart.ratio):>9}" if apart.meaningful else f"{'overlap':>9}"
        noisy = [f"{r.path} noisy" for r in (eager[batch], row) if r.timing.noisy]
        lines.append(f"{batch:>5}  {fmt_ms(eager[batch].median_ms):>10}  "
                     f"{fmt_ms(row.median_ms):>10}  {speedup}  "
                     f"{fmt_times(row.x_floor):>13}  {same}" + "".join(f", {n}" for n in noisy))
    if any(not compare(eager[b], r).meaningful for b, r in graph.items()):
        lines.append("overlap: eager and graph differ by less than their spreads there, so "
                     "that run cannot tell them apart")
    return "\n".join(lines)


def speedup_sentence(eager: dict[int, Row], graph: dict[int, Row], batches) -> str:
    """'the replay is 3.9× as fast as eager at batch 1 and 3.6× at batch 16; the speed-up
    shrank ...': each speed-up, and how it moved from the first batch to the last, said by the
    book's one rule (timing.compare), with words for either way and for "cannot tell"."""
    parts = []
    for i, batch in enumerate(batches):
        lead = "as fast as eager " if i == 0 else ""
        parts.append(compare(eager[batch], graph[batch]).verdict(
            f"{{ratio}} {lead}at batch {batch}",
            f"slower than eager, {{inverse}} its time, at batch {batch}",
            f"no faster than eager beyond the spreads at batch {batch}"))
    text = "the replay is " + " and ".join(parts)
    first, last = batches[0], batches[-1]
    bands = [ratio_band(eager[b], graph[b]) for b in (first, last)]
    return text + "; " + compare(bands[1], bands[0]).verdict(
        "the speed-up grew with the batch, beyond the spreads, against the expectation",
        f"the speed-up shrank as the batch grew, to {{ratio}} of its value at batch {first}",
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
    """A sentence when the slope ms_per_row fits to these rows is not a row's price: a larger
    batch ran faster than a smaller one beyond both spreads (the machine's load changed), or the
    smallest and largest batch differ by less than their spreads; else ''."""
    batches = sorted(rows)
    for a in batches:
        for b in batches:
            if b > a and compare(rows[a], rows[b]).outcome == "more":
                return compare(rows[a], rows[b]).verdict(
                    f"Here batch {b} ran faster than batch {a}, beyond both spreads, which one more "
                    "row cannot cause: the machine's load changed during the run, so that slope "
                    "measures the load, not a row.", "", "")
    return compare(rows[batches[0]], rows[batches[-1]]).verdict("", "", (
        f"Here batch {batches[0]} and batch {batches[-1]} differ by less than their spreads, so a "
        "row costs too little for this run to see, and the slope is inside the noise."))


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
            lines.append(f"{m.bucket:>6}  {sig(m.reserved_mb):>6} MB  {sig(s.reserved_mb):>8} MB  "
                         f"{sig(s.allocated_mb):>8} MB")
        lines.append(f"{'all':>6}  {sig(self.private_mb):>6} MB  {sig(self.shared_mb):>8} MB")
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


def pool_sentence(memory) -> str:
    """How much of the graphs' own pools one shared pool saved (a GraphMemoryReport), in words."""
    return compare(Band.exact(memory.shared_mb), Band.exact(memory.private_mb / 2)).verdict(
        "a shared pool saved less than half of it here.",
        "a shared pool removed most of it here.",
        "a shared pool removed half of it here.")


# ---------------------------------------------------------------- the graph side, here or stored

NO_STORED_RUN = ("CUDA graphs need a CUDA GPU, and no stored run of this chapter on one exists "
                 "yet, so the graph numbers are absent here. Run the chapter once on a CUDA GPU "
                 "to measure them (the run is saved to figures/serving.json).")


@dataclass
class GraphSide:
    """The numbers only a GPU measures: per-bucket eager and graph rows, graph memory, the
    stream through the graphs and the timelines; from this machine or from a stored run."""

    source: object  # floorlab.engine.measure.Source
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
