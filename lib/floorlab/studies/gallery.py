"""Studies wing: the chapter "A gallery of cards": what it prints and says about the room's cards,
the fixed-cost model priced from a card's graph replay, and its challenges."""
from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from html import escape

from floorlab.core.checks import NOT_ATTEMPTED, checked, read_number, refusal
from floorlab.core.prose import COLUMN, fmt_gbps, fmt_ms, fmt_times, sig
from floorlab.core.reference import reference_run
from floorlab.core.roofline import BYTES_PER_GB, Floor, floor_ms, is_below_floor, overhead_us_per_kernel, predicted_ms
from floorlab.core.runs import Row, Run
from floorlab.core.timing import Band, Comparison, compare, ratio_band, tally
from floorlab.studies.gallery_cards import GRAPH, STORED, Card
from floorlab.studies.gallery_folder import count_words


def format_floors(cards: list[Card]) -> str:
    """Each card's name on one line, its floor as arithmetic on the next."""
    return "\n".join(line for c in cards for line in (c.label, f"  floor = {c.floor.arithmetic()}"))


def same_bytes(cards: list[Card]) -> bool:
    """True when every card's floor counts the same bytes per step (same model and settings)."""
    return len({c.floor.bytes_per_step for c in cards}) == 1


def bytes_gb(cards: list[Card]) -> str:
    """The bytes per step the floors count: '1.20 GB', or a range when they differ."""
    low, high = (f({c.floor.bytes_per_step / BYTES_PER_GB for c in cards}) for f in (min, max))
    return f"{sig(low)} GB" if low == high else f"{sig(low)} to {sig(high)} GB"


def _fits(head: str, text: str) -> list[str]:
    """head + text, continued under text's first column when the line is too long."""
    return textwrap.wrap(text, COLUMN, initial_indent=head,
                         subsequent_indent=" " * len(head)) or [head.rstrip()]


def format_paths(card: Card) -> str:
    """The card's paths, one line each: median, multiple of the floor and spread, or why absent."""
    lines = [f"{card.label}, floor {fmt_ms(card.floor.floor_ms)}"]
    for row in card.run.rows:
        head = f"  {row.path:<15}"
        if row.measured:
            t = row.timing
            lines.append(f"{head}{fmt_ms(t.median_ms):>9}  {fmt_times(row.x_floor):>7} floor  "
                         f"p10-p90 {sig(t.p10_ms)}-{fmt_ms(t.p90_ms)}"
                         + (" (noisy)" if t.noisy else ""))
        else:
            lines += _fits(head, f"{row.status}: {row.note}")
    lines.append(f"  best: {card.best.path}")
    return "\n".join(lines)


def claims(cards: list[Card]) -> list[str]:
    """The gallery's claims, each with what the cards show (cards in order of bandwidth)."""
    rows = [(c, r) for c in cards for r in c.run.rows if r.measured]
    low_card, low = min(rows, key=lambda cr: cr[1].x_floor)
    below = [f"{c.label} {r.path}" for c, r in rows if is_below_floor(r.x_floor)]
    lines = ["expected: every measured path at or above its card's floor",
             f"observed: the lowest is {fmt_times(low.x_floor)} ({low_card.label}, {low.path})"
             + (f"; below the floor: {', '.join(below)}" if below else "")]
    if len(cards) > 1:
        fast = max(cards, key=lambda c: c.floor.bandwidth_gbps)
        furthest, second = sorted(cards, key=lambda c: -c.eager.x_floor)[:2]
        apart = compare(_in_floors(furthest), _in_floors(second))
        seen = f"observed: {furthest.label}, at {fmt_times(furthest.eager.x_floor)}"
        lines += [f"expected: the fastest card, {fast.label}, furthest above its floor when eager",
                  apart.verdict(seen, seen, f"{seen}, within the spread of {second.label} at "
                                f"{fmt_times(second.eager.x_floor)}, so not told apart")]
    pairs = replays(cards)
    lines.append("expected: graph replay faster than eager on every card that has it")
    if pairs:
        faster = [cmp.ratio for _, cmp in pairs if cmp.outcome == "more"]
        gains = f", eager ÷ replay {_span(faster)}" if faster else ""
        if len(pairs) == 1:
            (_, cmp), = pairs
            lines.append("observed: " + cmp.verdict(f"faster on the one card that has it{gains}",
                                                    "not faster on the one card that has it",
                                                    "too close to tell on the one card that has it"))
        else:
            lines.append("observed: " + tally(
                {c.label: cmp for c, cmp in pairs},
                f"faster on {{count}} of the {{of}} cards that have it{gains}", "not on {names}",
                "too close to tell on {names}"))
    else:
        lines.append("observed: no card here has a graph replay (CUDA graphs need a GPU)")
    return [line for text in lines for line in _fits("", text)]


def _in_floors(card: Card) -> Band:
    """The card's eager step in multiples of its floor, banded, so two cards' multiples compare."""
    return ratio_band(card.eager, Band.exact(card.floor.floor_ms))


def replays(cards: list[Card]) -> list[tuple[Card, Comparison]]:
    """Each card that replayed a graph, with its eager step compared to the replay."""
    return [(c, compare(c.eager, c.graph)) for c in cards if c.graph is not None]


def _span(ratios: list[float]) -> str:
    """One multiple when the ratios print alike ('4.00×'), else the range ('from 3.10× to 4.00×')."""
    low, high = fmt_times(min(ratios)), fmt_times(max(ratios))
    return low if low == high else f"from {low} to {high}"


def noisy_clause(cards: list[Card], row: str = "eager") -> str:
    """A sentence naming the cards whose `row` timing is noisy, or ''."""
    noisy = [c.label for c in cards if getattr(c, row) is not None and getattr(c, row).timing.noisy]
    these = "that card's" if len(noisy) == 1 else "those cards'"
    return "" if not noisy else (f" The {row} timing of {', '.join(noisy)} is noisy (its p10-p90 band is "
                                 f"wider than a quarter of its median), so read {these} figure loosely.")


def _cell(row: Row | None, *, path: bool = False) -> str:
    if row is None:
        return "absent"
    where = f"{row.path}: " if path else ""
    noisy = " (noisy)" if row.timing.noisy else ""
    return f"{where}{sig(row.median_ms)} · {fmt_times(row.x_floor)}{noisy}"


def floor_span(cards: list[Card]) -> str:
    """A sentence on how the floors spread, from the card of least bandwidth to the most."""
    slow = min(cards, key=lambda c: c.floor.bandwidth_gbps)
    fast = max(cards, key=lambda c: c.floor.bandwidth_gbps)
    if len(cards) == 1:
        return (f"The gallery holds one card so far, so its floor of {fmt_ms(slow.floor.floor_ms)} has nothing yet "
                "to stand beside; add a card and run the chapter again.")
    grows = fast.floor.bandwidth_gbps / slow.floor.bandwidth_gbps
    ratio = slow.floor.floor_ms / fast.floor.floor_ms
    if sig(grows) == "1.00" and same_bytes(cards):
        return (f"Every card here streams at about {fmt_gbps(fast.floor.bandwidth_gbps)}, so "
                f"they share one floor: {fmt_ms(fast.floor.floor_ms)}.")
    if not same_bytes(cards):
        return (f"From {slow.label} to {fast.label} the bandwidth grows {sig(grows)}-fold and the floor shrinks "
                f"{sig(ratio)}-fold, from {fmt_ms(slow.floor.floor_ms)} to {fmt_ms(fast.floor.floor_ms)}; the two "
                "differ because these runs counted different bytes.")
    return (f"From {slow.label} to {fast.label} the bandwidth grows {sig(grows)}-fold, and the floor shrinks by the "
            f"same factor: {fmt_ms(slow.floor.floor_ms)} ÷ {sig(grows)} = {fmt_ms(fast.floor.floor_ms)}.")


def eager_span(cards: list[Card]) -> str:
    """A sentence naming the cards farthest from and nearest to their floors when eager, spreads allowing."""
    far = max(cards, key=lambda c: c.eager.x_floor)
    near = min(cards, key=lambda c: c.eager.x_floor)
    noisy = noisy_clause(cards)
    if len(cards) == 1:
        return f"An eager token takes {fmt_times(far.eager.x_floor)} the floor on {far.label}.{noisy}"
    if fmt_times(far.eager.x_floor) == fmt_times(near.eager.x_floor):
        return f"An eager token takes {fmt_times(far.eager.x_floor)} the floor on every card here.{noisy}"
    spans = (f"An eager token takes from {fmt_times(near.eager.x_floor)} to "
             f"{fmt_times(far.eager.x_floor)} the floor, but the cards' spreads overlap, so "
             f"this gallery cannot say which card sits farthest above its floor.{noisy}")
    ends = (f"An eager token takes {fmt_times(far.eager.x_floor)} the floor on {far.label}, the farthest of any card "
            f"here, and {fmt_times(near.eager.x_floor)} on {near.label}, the nearest.{noisy}")
    return compare(_in_floors(far), _in_floors(near)).verdict(ends, ends, spans)


def replay_gain(cards: list[Card]) -> str:
    """A sentence on how many times as long eager took as graph replay, on each card that has it."""
    pairs = replays(cards)
    if not pairs:
        return ("No card here replayed the step as a CUDA graph: that needs a GPU, and the "
                "gallery has no GPU run yet.")
    noisy = noisy_clause([c for c, _ in pairs]) + noisy_clause([c for c, _ in pairs], "graph")
    if len(pairs) == 1:
        (card, cmp), = pairs
        head = f"{card.label} is the one card here that replayed the step as a CUDA graph"
        return head + cmp.verdict(
            ", and its eager step took {ratio} as long as the replay.",
            ", and there the replay was the slower: eager took {ratio} as long.",
            ", and there eager and replay differ by less than their spreads ({ratio} at the "
            "medians), so this run cannot tell them apart.") + noisy
    head = f"{count_words(len(pairs), 'card')} here replayed the step as a CUDA graph"
    times = _span([cmp.ratio for _, cmp in pairs if cmp.outcome == "more"] or [1.0])
    return f"{head}. " + tally(
        {c.label: cmp for c, cmp in pairs},
        f"On {{names}} the eager step took {times} as long as the replay",
        "on {names} the replay was the slower, beyond the spreads",
        "on {names} eager and replay differ by less than their spreads, so those runs cannot "
        "tell them apart") + f".{noisy}"


TABLE_HEAD = ("card", "kind", "torch", "floor GB/s", "floor ms", "eager ms · ×",
              "graph ms · ×", "best path ms · ×", "date")
NOWRAP = (3, 4, 5, 6, 8)  # the columns of numbers and the date


def gallery_table(cards: list[Card]) -> str:
    """The cards as an HTML table (device, software, floor, each path's median ms · multiple of the
    floor), every text escaped: the cards come from strangers' files."""
    def row(cells, tag="td"):  # numbers and dates stay on one line; names may wrap
        opened = [f'<{tag} style="white-space: nowrap">' if tag == "td" and i in NOWRAP
                  else f"<{tag}>" for i in range(len(cells))]
        return "<tr>" + "".join(f"{o}{cell}</{tag}>" for o, cell in zip(opened, cells)) + "</tr>"

    body = []
    for c in cards:
        name = escape(c.name) + (f" #{c.number}" if c.number else "")
        name += f" (<b>{escape(c.tag)}</b>)" if c.tag else ""
        cells = [escape(text) for text in (
            c.kind, c.torch, f"{sig(c.floor.bandwidth_gbps)} ({c.floor.bandwidth_kind})", sig(c.floor.floor_ms),
            _cell(c.eager), _cell(c.graph), _cell(c.best, path=True), c.date)]
        body.append(row([name, *cells]))
    return ('<table style="font-size: 0.85em">\n<thead>' + row(TABLE_HEAD, "th") + "</thead>\n<tbody>\n"
            + "\n".join(body) + "\n</tbody>\n</table>")


@dataclass(frozen=True)
class ReplayCost:
    """The fixed-cost model priced on one card: what each replayed kernel costs beyond its bytes."""

    label: str
    kernels: int
    busy_ms: float
    floor: Floor
    overhead_us: float
    measured_x_floor: float
    stored: bool

    def x_floor_at(self, bandwidth_gbps: float) -> float:
        """The replay's predicted multiple of the floor on a card streaming bandwidth_gbps."""
        floor = floor_ms(self.floor.bytes_per_step, bandwidth_gbps)
        return predicted_ms(floor, self.kernels, self.overhead_us) / floor


def replay_cost(run: Run, label: str, *, stored: bool = False) -> ReplayCost | None:
    """The fixed cost per kernel of a run's profiled graph replay, or None without one."""
    line, row = run.timelines.get(GRAPH), run.find(GRAPH)
    if line is None or row is None or not line.kernels:
        return None
    floor = run.floor(row.preset, row.batch)
    return ReplayCost(label, line.kernels, line.busy_ms, floor,
                      overhead_us_per_kernel(line.busy_ms, floor.floor_ms, line.kernels),
                      row.x_floor, stored)


def fixed_cost(cards: list[Card], stored: str = STORED) -> ReplayCost:
    """The fastest card's replay cost, or the stored run `stored`'s when no card replayed."""
    for card in sorted(cards, key=lambda c: -c.read_gbps):
        cost = replay_cost(card.run, card.label, stored=card.origin == "stored")
        if cost is not None:
            return cost
    run = reference_run(stored)
    return replay_cost(run, f"the stored run of {run.label}", stored=True)


def launch_mistakes(cards: list[Card]) -> dict[str, dict[str, float]]:
    """The plausible wrong ways to price a launch, each as {card label: µs it gives}."""
    return {
        "the whole eager step shared out, the floor not taken off first":
            {c.label: c.eager.median_ms * 1e3 / c.launches for c in cards},
        "the gap in ms where µs are asked for": {c.label: c.gap_per_launch_us / 1e3 for c in cards},
        "the whole gap, not shared out over the launches":
            {c.label: c.gap_per_launch_us * c.launches for c in cards},
    }


@checked
def check_smallest(my_name, my_value, values: dict[str, float], *, names: tuple[str, str],
                   unit: str, hint: str, wrong: dict[str, dict[str, float]] | None = None,
                   rel: float = 0.05) -> str:
    """Challenge 1: the reader names the least of values ({label: number}) by whole words of its label,
    and its number within rel; wrong ({mistake: {label: number}}) is refused by name."""
    if my_name is None or my_value is None:
        return NOT_ATTEMPTED
    if not isinstance(my_name, str) or not my_name.strip():
        return (f"not yet: {names[0]} should be part of a card's name in quotes, as the table writes it.")
    wrong = wrong or {}
    least = min(values.values())
    words = re.compile(rf"(?<![a-z0-9]){re.escape(my_name.strip().lower())}(?![a-z0-9])")
    named = [label for label in values if words.search(label.lower())]  # whole words: not "a" in "cuda"
    exact = [label for label in named if my_name.strip().lower() == label.lower()]
    if not named:
        return (f"not yet: no card's name contains {my_name!r} as whole words; copy part of one from the table.")
    if len(named) > 1 and not exact:
        return (f"not yet: {my_name!r} is part of {len(named)} cards' names ({', '.join(named[:4])}"
                f"{', ...' if len(named) > 4 else ''}); copy enough of one to tell it apart.")
    named = exact or named
    right = [label for label in named if values[label] == least]
    if not right:
        misled = [m for m, given in wrong.items() if given and min(given, key=given.get) in named]
        if misled:
            return (f"not yet: {my_name!r} pays least only by the numbers you get with {misled[0]}; {hint}")
        return f"not yet: {my_name!r} is not the card that pays least; {hint}"
    label = right[0]
    number = read_number(my_value, names[1])
    return refusal(number, least, rel=rel, hint=hint, name=names[1], lead="that is the card; ",
                   wrong={m: given[label] for m, given in wrong.items() if label in given}
                   ) or f"right: {label}, {sig(least)}{unit}."


def replay_mistakes(cost: ReplayCost, bandwidth_gbps: float) -> dict[str, float]:
    """Challenge 2's plausible wrong answers: the replay's multiple of the floor at bandwidth_gbps."""
    floor = floor_ms(cost.floor.bytes_per_step, bandwidth_gbps)
    right = cost.x_floor_at(bandwidth_gbps)
    return {
        f"the bandwidth of {cost.label} instead of {fmt_gbps(bandwidth_gbps)}":
            cost.x_floor_at(cost.floor.bandwidth_gbps),
        "the kernels' fixed cost alone, the floor's own 1× left out": right - 1.0,
        "the replayed step in ms where its multiple of the floor is asked for": right * floor,
        f"the multiple measured on {cost.label}": cost.measured_x_floor,
    }
