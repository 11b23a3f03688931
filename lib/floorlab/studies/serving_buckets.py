"""Studies wing: the chapter "Serving", choosing the buckets: a choice's mean step over live batches,
the best choice within a memory budget, and the challenge that asks the reader for one."""
from __future__ import annotations

from dataclasses import dataclass
from statistics import median

from floorlab.core.checks import NOT_ATTEMPTED, Unreadable, checked, read_number
from floorlab.core.prose import fmt_ms, sig
from floorlab.engine.buckets import bucket_for, check_buckets

BUDGET_TOLERANCE = 0.01  # a bucket choice within 1% of the best mean step counts as the best


@dataclass
class BucketCosts:
    """Step time (ms) and graph memory (MB, own pool) at any batch, interpolated between buckets."""

    graph_ms: dict[int, float]
    eager_ms: dict[int, float]
    graph_mb: dict[int, float]

    def graph_step_ms(self, batch: int) -> float:
        return _interpolate(self.graph_ms, batch)

    def eager_step_ms(self, batch: int) -> float:
        return _interpolate(self.eager_ms, batch)

    def memory_mb(self, bucket: int) -> float:
        return max(_interpolate(self.graph_mb, bucket), 0.0)

    def table(self) -> str:
        lines = [f"{'batch':>5}  {'graph':>10}  {'eager':>10}  {'graph memory':>12}"]
        for b in sorted(self.graph_ms):
            lines.append(f"{b:>5}  {fmt_ms(self.graph_ms[b]):>10}  "
                         f"{fmt_ms(self.eager_step_ms(b)):>10}  {sig(self.memory_mb(b)):>9} MB")
        return "\n".join(lines)


def _interpolate(points: dict[int, float], x: float) -> float:
    xs = sorted(points)
    if x in points or len(xs) == 1:
        return points.get(x, points[xs[0]])
    lo, hi = next(((a, b) for a, b in zip(xs, xs[1:]) if x < b), (xs[-2], xs[-1]))  # beyond: the last
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
        return (f"buckets {self.buckets}: {sig(self.mean_ms)} ms per step, {sig(self.memory_mb)} MB, "
                f"{self.padded_share:.0%} padded rows, {self.fallback_share:.0%} of steps eager")


def score_buckets(buckets, histogram: dict[int, int], costs: BucketCosts) -> BucketScore:
    """How a bucket choice serves histogram ({live batch: steps})."""
    buckets = check_buckets(buckets)
    steps = sum(histogram.values())
    total_ms = padded = rows = falls = 0
    for batch, count in histogram.items():
        bucket = bucket_for(batch, buckets)
        if bucket is None:
            total_ms += count * costs.eager_step_ms(batch)
            falls += count
        else:
            total_ms += count * costs.graph_step_ms(bucket)
            padded += count * (bucket - batch)
        rows += count * (bucket or batch)
    memory = sum(costs.memory_mb(b) for b in buckets)
    return BucketScore(buckets, total_ms / steps, memory, padded / rows, falls / steps)


def best_buckets(histogram: dict[int, int], costs: BucketCosts, *, budget_mb: float,
                 max_bucket: int) -> BucketScore:
    """The bucket choice (sizes 1..max_bucket) with the fastest mean step within budget_mb: exact, over
    the sizes that occur, each candidate kept on a Pareto front of (memory, time)."""
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
        raise ValueError(f"no bucket fits a budget of {sig(budget_mb)} MB; raise the budget")
    return score_buckets(min(finished)[1], histogram, costs)


def _pareto(options):
    """The (memory, ms, buckets) options no other option beats on both memory and time."""
    front, best_ms = [], float("inf")
    for mem, ms, chosen in sorted(options):
        if ms < best_ms:
            front.append((mem, ms, chosen))
            best_ms = ms
    return front


# Serving, challenge 1: buckets for a distribution of live batches, within a memory budget.

def read_buckets(my_buckets, name: str = "my_buckets") -> tuple[int, ...]:
    """The reader's buckets as whole batch sizes from any sequence of numbers; Unreadable otherwise."""
    if isinstance(my_buckets, (str, bytes)) or not hasattr(my_buckets, "__iter__"):
        raise Unreadable(f"not yet: write {name} as a tuple of whole batch sizes, for example "
                         f"(2, 8, 20), not {my_buckets!r}.")
    sizes = [read_number(item, f"each bucket in {name}") for item in my_buckets]
    if bad := [size for size in sizes if size != int(size) or size < 1]:
        raise Unreadable(f"not yet: a bucket is a whole batch size of at least 1, got {bad[0]:g} in {name}.")
    return tuple(int(size) for size in sizes)


def score_choice(my_buckets, histogram: dict[int, int], costs) -> str:
    """The reader's buckets scored as one printed line, or '' with no readable answer yet."""
    try:
        chosen = read_buckets(my_buckets) if my_buckets is not None else ()
    except Unreadable:
        return ""
    return str(score_buckets(chosen, histogram, costs)) if chosen else ""


@checked
def check_bucket_choice(my_buckets, histogram: dict[int, int], costs, *, budget_mb: float,
                        max_bucket: int, default=None) -> str:
    """Verdict on the reader's buckets: within budget, and within BUDGET_TOLERANCE of the best mean step."""
    if my_buckets is None:
        return NOT_ATTEMPTED
    chosen = read_buckets(my_buckets)
    if not chosen:
        return "not yet: choose at least one bucket."
    if max(chosen) > max_bucket:
        return (f"not yet: the model's cache holds {max_bucket} rows, so no bucket can be larger than {max_bucket}.")
    mine = score_buckets(chosen, histogram, costs)
    if mine.memory_mb > budget_mb:
        return (f"not yet: those graphs reserve {sig(mine.memory_mb)} MB, over the "
                f"{sig(budget_mb)} MB budget; drop a bucket or pick smaller ones.")
    best = best_buckets(histogram, costs, budget_mb=budget_mb, max_bucket=max_bucket)
    if mine.mean_ms <= best.mean_ms * (1 + BUDGET_TOLERANCE):
        return (f"right: {sig(mine.mean_ms)} ms per step on average, within "
                f"{BUDGET_TOLERANCE:.0%} of the best choice within budget.")
    hint = ("some steps still run eagerly: what does one of them cost against a replay?"
            if mine.fallback_share else
            "no step falls back; now trade padding for the memory you have left.")
    same = default is not None and mine.buckets == check_buckets(default)
    start = "those are the default buckets the chapter captured: " if same else ""
    return (f"not yet: {start}{sig(mine.mean_ms)} ms per step on average; a choice within budget "
            f"reaches {sig(best.mean_ms)} ms. {hint}")


def answer_bucket_choice(histogram: dict[int, int], costs, *, budget_mb: float, max_bucket: int,
                         default=(1, 2, 4, 8, 16), stream=None) -> str:
    """The worked answer: the best choice within budget, set beside the default buckets; stream (a StreamCost):
    its eager steps at the largest batch, beside the straight line's estimate where that lies past the buckets."""
    rows = {"best within budget": best_buckets(histogram, costs, budget_mb=budget_mb,
                                               max_bucket=max_bucket),
            "the default buckets": score_buckets(default, histogram, costs)}
    lines = [f"{'':20s} {'ms/step':>8s} {'MB':>7s} {'padded':>7s} {'eager':>6s}  buckets"]
    for name, s in rows.items():
        lines.append(f"{name:20s} {sig(s.mean_ms):>8} {sig(s.memory_mb):>7} {s.padded_share:7.0%} "
                     f"{s.fallback_share:6.0%}  {s.buckets}")
    largest = max(histogram)
    eager_ms, replay_ms = sig(costs.eager_step_ms(largest)), sig(costs.graph_step_ms(largest))
    if largest <= max(costs.eager_ms):
        cost = f"an eager step costs {eager_ms} ms there against a replay's {replay_ms} ms"
    else:
        cost = (f"the straight lines past batch {max(costs.eager_ms)} put an eager step there at {eager_ms} ms "
                f"and a replay at {replay_ms} ms")
        ran = [step.ms for step in (stream.steps if stream else ()) if step.batch == largest and step.bucket is None]
        if ran:
            cost += f" (the stream's {len(ran)} eager step{'s' * (len(ran) > 1)} there took {sig(median(ran))} ms)"
    if largest > max_bucket:
        lines.append(f"Batch {largest} lies past the largest bucket allowed ({max_bucket}), so its steps run eagerly "
                     f"whatever the choice; {cost}.")
    else:
        lines.append(f"Every step up to batch {largest} runs in a graph only if a bucket reaches {largest}; {cost}.")
    return "\n".join(lines)
