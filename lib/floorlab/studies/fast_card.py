"""Studies wing: the chapter "The floor on a fast card": how far the stored runs of one card agree,
the bench's run beside the chapter's, and its challenges' plausible slips."""
from __future__ import annotations

from dataclasses import dataclass

from floorlab.core.checks import plausible_wrongs
from floorlab.core.prose import fmt_ms, fmt_times, sig
from floorlab.core.reference import every_stored_run, reference_dirs
from floorlab.core.roofline import bytes_per_step, crossover_gbps, floor_ms, kernels_per_layer_budget, predicted_ms
from floorlab.core.runs import Run
from floorlab.core.timing import Band, Timing, compare
from floorlab.studies.below_the_floor import whole_table_bytes
from floorlab.studies.below_the_floor_hosts import EAGER_PATHS, GRAPH_PATHS, first_row  # noqa: F401 (the chapter's names)

PREDICTION_TOLERANCE = 0.10  # one profiled step on each side: the model and the profiler agree within 10%


def prediction_reading(predicted_busy_ms: float, busy_ms: float) -> str:
    """What the fixed-price model's miss says of the kernels fusion kept: dearer than the plain step's average,
    cheaper, or the two agree within PREDICTION_TOLERANCE."""
    ratio = busy_ms / predicted_busy_ms
    if abs(ratio - 1) <= PREDICTION_TOLERANCE:
        return (f"Here the two agree within {PREDICTION_TOLERANCE:.0%} (the profiler measured {fmt_times(ratio)} the "
                "prediction): after fusion, a kernel still costs about the plain step's average beyond its bytes. "
                "One profiled step stands behind each number, so a closer reading would be noise.")
    if ratio > 1:
        return (f"The profiler measured {fmt_times(ratio)} the prediction, so the kernels that remain are not average "
                "ones: fusion removes the cheap elementwise kernels and keeps every matrix-vector product, and those "
                "cost more than the average.")
    return (f"The profiler measured only {fmt_times(ratio)} the prediction, so the kernels that remain cost less than "
            "the plain step's average beyond their bytes: the ones fusion took away were, on average, the dearer.")


# (what the lines call it, the chapter's path, the bench's path) for the paths both runs measure
SHARED_PATHS = (("eager step", "eager", "plain eager"), ("graph replay", "graph replay", "plain graph"),
                ("fused replay", "fused replay", "fused graph"))


@dataclass
class StoredSpread:
    """One path's median ms in each stored run of a card, by name, and the least share spent issuing."""
    medians_ms: dict[str, float]
    least_issue_share: float | None

    low_ms = property(lambda self: min(self.medians_ms.values()))
    high_ms = property(lambda self: max(self.medians_ms.values()))
    ratio = property(lambda self: self.high_ms / self.low_ms)

    def line(self, what: str) -> str:
        return (f"{what:<14} {fmt_ms(self.low_ms)} to {fmt_ms(self.high_ms)} "
                f"({fmt_times(self.ratio)} between them) over {len(self.medians_ms)} stored runs")


def steadier_sentence(eager: StoredSpread, graph: StoredSpread) -> str:
    """Which path's median moved more across the stored runs, in words."""
    return compare(Band.exact(eager.ratio), Band.exact(graph.ratio)).verdict(
        f"The replay moved less, {fmt_times(graph.ratio)} against eager's {fmt_times(eager.ratio)}, so this chapter "
        "reasons from what moves least: the replay, and the time the host needs to issue it.",
        "Here the replay moved more than eager, so neither path holds still across these runs.",
        "Both moved by the same factor across these runs.")


def stored_runs(prefix: str = "h200-") -> dict[str, Run]:
    """Every stored run named prefix*, by name (the first folder's copy); raw tables are left out."""
    found: dict[str, Run] = {}
    for path, run in every_stored_run(prefix).items():
        found.setdefault(path.stem, run)
    if not found:
        where = " or ".join(map(str, reference_dirs()))
        raise FileNotFoundError(f"no stored run named {prefix}*.json in {where}")
    return found


def stored_spread(path_names, *, preset: str, batch: int) -> StoredSpread:
    """How the median of one path (its chapter and bench names) moved across a card's stored runs."""
    rows = {name: row for name, run in stored_runs().items()
            if (row := first_row(run, path_names, preset, batch)) is not None}
    if not rows:
        raise ValueError(f"no stored run measured {path_names} for {preset} at batch {batch}")
    shares = [row.issue.median_ms / row.median_ms for row in rows.values() if row.issue]
    return StoredSpread({name: row.median_ms for name, row in rows.items()},
                        min(shares) if shares else None)


@dataclass
class PathDifference:
    """One quantity in two runs of one card: the chapter's timing and the bench's."""
    what: str
    chapter: Timing
    bench: Timing

    comparison = property(lambda self: compare(self.bench, self.chapter))
    change = property(lambda self: self.comparison.ratio - 1)  # the bench's median over the chapter's, less one

    @property
    def share(self) -> str:
        """The change as a percent of three figures, or 'under 0.1%' (less than a timer can vouch for)."""
        percent = abs(self.change) * 100
        return f"{sig(percent)}%" if percent >= 0.1 else "under 0.1%"

    def says(self) -> str:
        share = self.share
        way = "higher" if self.change > 0 else "lower"
        return self.comparison.verdict(
            f"the {self.what} is {share} higher in the bench's run, beyond both runs' spreads",
            f"the {self.what} is {share} lower in the bench's run, beyond both runs' spreads",
            f"the {self.what} is {share} {way} in the bench's run, within the two runs' spreads")

    def line(self) -> str:
        verdict = self.comparison.verdict("apart", "apart", "within the spreads")
        share = "<0.1%" if self.share.startswith("under") else ("+" if self.change >= 0 else "-") + self.share
        return (f"{self.what:<14} {sig(self.chapter.median_ms):>9} {sig(self.bench.median_ms):>9}"
                f" ms  {share:>7}  {verdict}")


def floor_timing(run: Run, preset: str, batch: int) -> Timing:
    """A run's floor as a Timing in ms, its band from its bandwidth's p90 and p10."""
    floor = run.floor(preset, batch)
    measured = getattr(run.bandwidths, floor.bandwidth_kind)
    fast, slow = (floor_ms(floor.bytes_per_step, g) for g in (measured.p90_gbps, measured.p10_gbps))
    return Timing(median_ms=floor.floor_ms, p10_ms=fast, p90_ms=slow, min_ms=fast, max_ms=slow)


def bench_against_chapter(bench: Run, chapter: Run, *, preset: str, batch: int) -> list[PathDifference]:
    """The floor and every path both runs measured, the chapter's run against the bench's."""
    found = [PathDifference("floor", floor_timing(chapter, preset, batch), floor_timing(bench, preset, batch))]
    for what, ours, theirs in SHARED_PATHS:
        mine, other = chapter.find(ours, preset, batch), bench.find(theirs, preset, batch)
        if mine is not None and other is not None:
            found.append(PathDifference(what, mine.timing, other.timing))
    return found


def differences_table(differences: list[PathDifference]) -> str:
    head = f"{'':<14} {'chapter':>9} {'bench':>9} {'':<3} {'change':>7}"
    return "\n".join([head] + [d.line() for d in differences])


def noisy_rows(run: Run, *, batch: int) -> list[str]:
    """A noise note for each measured row at this batch whose timing is noisy."""
    return [row.timing.noise_note(f"{row.path} ({row.preset})") for row in run.rows
            if row.batch == batch and row.measured and row.timing.noisy]


def _overhead_slips(*, kernels: int, busy_ms: float, profiled_ms: float, card_floor_ms: float) -> dict[str, float]:
    """µs per kernel that two slips give, from the plain replay's GPU busy time and profiled step."""
    return {"the GPU busy time per kernel instead of its cost beyond the bytes": busy_ms * 1e3 / kernels,
            "the whole profiled step instead of the GPU busy time": (profiled_ms - card_floor_ms) * 1e3 / kernels}


def crossover_wrongs(*, bytes_per_step: int, kernels: int, overhead_us: float, busy_ms: float,
                     profiled_ms: float, card_floor_ms: float, fused_kernels: int) -> dict[str, float]:
    """Crossover bandwidths (GB/s) that plausible slips give."""
    slips = _overhead_slips(kernels=kernels, busy_ms=busy_ms, profiled_ms=profiled_ms, card_floor_ms=card_floor_ms)
    wrong = {slip: crossover_gbps(bytes_per_step, kernels, us) for slip, us in slips.items()}
    wrong["the fused step's kernel count instead of the plain replay's"] = crossover_gbps(
        bytes_per_step, fused_kernels, overhead_us)
    return plausible_wrongs(crossover_gbps(bytes_per_step, kernels, overhead_us), wrong)


def budget_wrongs(*, card_floor_ms: float, overhead_us: float, num_layers: int, busy_ms: float,
                  profiled_ms: float, kernels: int) -> dict[str, float]:
    """Kernel budgets per layer that plausible slips give."""
    def budget(multiple: float = 2.0, us: float = overhead_us, layers: int = num_layers) -> float:
        return kernels_per_layer_budget(card_floor_ms, multiple, us, layers)

    slips = _overhead_slips(kernels=kernels, busy_ms=busy_ms, profiled_ms=profiled_ms, card_floor_ms=card_floor_ms)
    wrong = {"twice the floor as the time for fixed costs instead of the floor once more": budget(3.0)}
    wrong.update({slip: budget(us=us) for slip, us in slips.items()})
    wrong["the budget of the whole step instead of one layer's"] = budget(layers=1)
    return plausible_wrongs(budget(), wrong)


@dataclass
class BigMultiple:
    """The fixed-cost model's fused replay of a bigger shape ÷ its floor, and what slips give."""
    floor_ms: float
    kernels: int
    multiple: float
    wrong: dict[str, float]


def big_multiple(shape, *, batch: int, visible_tokens: int, bandwidth_gbps: float,
                 small_layers: int, fused_kernels: int, plain_kernels: int,
                 overhead_us: float) -> BigMultiple:
    """Predicted fused replay ÷ floor for a bigger shape, fused_kernels scaled from small_layers to its layers."""
    def multiple(moved: int, kernels: int) -> float:
        floor = floor_ms(moved, bandwidth_gbps)
        return predicted_ms(floor, kernels, overhead_us) / floor

    moved = bytes_per_step(shape, batch, visible_tokens)
    kernels = round(fused_kernels / small_layers * shape.num_layers)
    right = multiple(moved, kernels)
    wrong = plausible_wrongs(right, {
        "the whole input table instead of the rows a step gathers":
            multiple(whole_table_bytes(shape, batch, visible_tokens), kernels),
        "the small model's kernel count, not scaled to this shape's layers":
            multiple(moved, fused_kernels),
        "the plain replay's kernels per layer instead of the fused step's":
            multiple(moved, round(plain_kernels / small_layers * shape.num_layers)),
    })
    return BigMultiple(floor_ms(moved, bandwidth_gbps), kernels, right, wrong)
