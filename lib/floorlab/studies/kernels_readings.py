"""Studies wing: what the kernels chapter's runs say, each sentence chosen by timing.compare, with
words for one way, the other and "this run cannot tell"."""
from __future__ import annotations

from floorlab.core.prose import fmt_gbps, fmt_times, sig
from floorlab.core.timing import Band, compare
from floorlab.studies.kernels import beyond_per_layer_us


def beyond_band(row, floor_ms: float, num_layers: int) -> Band:
    """µs per layer a replay spends beyond its floor: its median and its p10-p90 band."""
    t = row.timing
    return Band(*(beyond_per_layer_us(ms, floor_ms, num_layers) for ms in (t.median_ms, t.p10_ms, t.p90_ms)))


def against_published(mine: Band, published_us: dict[str, float]) -> str:
    """Where the book's µs per layer sits against the published results' range."""
    low, high = min(published_us.values()), max(published_us.values())
    return compare(mine, Band((low + high) / 2, low, high)).verdict(
        "above every one of them, even at its p10", "below every one of them, even at its p90",
        "within their range")


def against_plain(own, plain) -> str:
    """The book's kernels against a replay of the plain step (the library's GEMVs and its other kernels), on the
    same floor."""
    times = f"{fmt_times(own.x_floor)} against {fmt_times(plain.x_floor)} the floor"
    return compare(own, plain).verdict(
        f"On this run they leave the 0.6B step further from its floor than a replay of the plain step ({times})",
        f"They bring the 0.6B step closer to its floor than a replay of the plain step ({times})",
        "On this run they and a replay of the plain step differ by less than their spreads "
        f"({fmt_times(own.x_floor)} and {fmt_times(plain.x_floor)} the floor)")


def whole_step_against_budget(step: Band, budget_us: float) -> str:
    """Whether the whole replay's µs per layer beyond the floor (head and gaps included) fits a per-layer budget."""
    said = (f"The whole replay, its output head and the gaps between kernels included, spends "
            f"{sig(step.median)} µs per layer beyond the floor (p10–p90 {sig(step.low)}–{sig(step.high)})")
    return compare(step, Band.exact(budget_us)).verdict(
        f"{said}: over the budget, even at its p10.", f"{said}: within the budget, even at its p90.",
        f"{said}: the budget lies inside its spread, so this run cannot tell whether it fits.")


def distance_share(layer_beyond_us: float, num_layers: int, row, floor_ms: float) -> str:
    """What share of the replay's distance from its floor the layers' time beyond their bytes is."""
    gap = beyond_band(row, floor_ms, num_layers)
    half = Band(gap.median / 2, gap.low / 2, gap.high / 2)
    return compare(Band.exact(layer_beyond_us), half).verdict(
        "most of the distance between the replay and its floor",
        "less than half of the distance between the replay and its floor",
        "about half of the distance between the replay and its floor, within its spread")


def share_of_card(gbps: float, card_gbps: float) -> str:
    """'more than half of', 'less than half of' or 'half of': a kernel's rate against the card's."""
    return compare(Band.exact(gbps), Band.exact(card_gbps / 2)).verdict(
        "more than half of", "less than half of", "half of")


IMPLAUSIBLE_SHARE = 0.10  # a stream this far above the read test did not move all its bytes


def beyond_read_test(rows: list[dict], card_gbps: float) -> str:
    """'' when every GEMV of the size sweep streamed no faster than the card's read test; else what a faster one
    means: the test's own error (a little above) or a measurement that did not move its bytes (far above)."""
    fastest = max(r[k] for r in rows for k in ("alone_gbps", "serial_gbps", "chained_gbps"))
    over = fastest / card_gbps - 1
    if over <= 0:
        return ""
    head = f"The fastest of these streams ran at {fmt_gbps(fastest)}, {sig(100 * over, 2)}% above the read test's"
    if over > IMPLAUSIBLE_SHARE:
        return (f"{head} {fmt_gbps(card_gbps)}: more than a bandwidth test misses, so that timing did not move all "
                "its bytes. Re-run the chapter before reading these rates.")
    return (f"{head} {fmt_gbps(card_gbps)}. The read test is a measurement too, so the floors built on it are good to "
            "about that much.")


def wait_reading(rows) -> str:
    """What launching each GEMV without its PDL wait showed: the rest of its loss is its own start and drain, or,
    for those no faster without the wait (single timings, so within their noise), nothing the table can see."""
    timed = [r for r in rows if r.us_no_wait is not None]
    if not timed:
        return ("This run did not time the GEMVs without their wait, so it cannot split the wait from each "
                "kernel's own start and drain.")
    said = ("Part of that is the wait for the kernel before; the column without the wait shows the rest, each "
            "kernel's own start and drain, which no early load can hide.")
    same = [r.kernel for r in timed if r.us_no_wait >= r.us]
    if same:
        said += (f" Without its wait, {' and '.join(f'`{k}`' for k in same)} ran no faster, so there the wait costs "
                 "less than one timing's noise.")
    return said
