"""Studies wing: what the kernels chapter's runs say, each sentence chosen by timing.compare, with
words for one way, the other and "this run cannot tell"."""
from __future__ import annotations

from floorlab.core.prose import fmt_times
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
    """The book's kernels against a plain replay of the library's GEMVs, on the same floor."""
    times = f"{fmt_times(own.x_floor)} against {fmt_times(plain.x_floor)} the floor"
    return compare(own, plain).verdict(
        f"On this run they leave the 0.6B step further from its floor than a plain replay of the library's GEMVs "
        f"({times})",
        f"They bring the 0.6B step closer to its floor than a plain replay of the library's GEMVs ({times})",
        "On this run they and a plain replay of the library's GEMVs differ by less than their spreads "
        f"({fmt_times(own.x_floor)} and {fmt_times(plain.x_floor)} the floor)")


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
