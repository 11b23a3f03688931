"""Studies wing: the chapter "A gallery of cards": what it prints about the room's cards, the
fixed-cost model priced from a card's graph replay, and its challenge. Reading the cards is in
gallery_cards.
"""
from __future__ import annotations

from dataclasses import dataclass
from html import escape

from floorlab.core.checks import NOT_ATTEMPTED, checked, close, read_number
from floorlab.core.prose import COLUMN, fmt_gbps, fmt_ms, fmt_times, sig
from floorlab.core.roofline import (
    BYTES_PER_GB,
    Floor,
    floor_ms,
    is_below_floor,
    overhead_us_per_kernel,
    predicted_ms,
)
from floorlab.core.runs import Row, Run, reference_run
from floorlab.studies.gallery_cards import GRAPH, STORED, Card, count_words


def format_floors(cards: list[Card]) -> str:
    """Each card's floor as arithmetic, the card's name on one line and its floor on the next."""
    lines = []
    for card in cards:
        lines += [card.label, f"  floor = {card.floor.arithmetic()}"]
    return "\n".join(lines)


def same_bytes(cards: list[Card]) -> bool:
    """True when every card's floor counts the same bytes per step (same model and settings)."""
    return len({c.floor.bytes_per_step for c in cards}) == 1


def bytes_gb(cards: list[Card]) -> str:
    """The bytes per step the floors count, in GB ('1.196 GB', or a range when they differ)."""
    counted = sorted({c.floor.bytes_per_step / BYTES_PER_GB for c in cards})
    if len(counted) == 1:
        return f"{counted[0]:.3f} GB"
    return f"{counted[0]:.3f} to {counted[-1]:.3f} GB"


def _fits(head: str, text: str) -> list[str]:
    """head + text, continued under text's first column when the line is too long."""
    import textwrap

    return textwrap.wrap(text, COLUMN, initial_indent=head,
                         subsequent_indent=" " * len(head)) or [head.rstrip()]


def format_paths(card: Card) -> str:
    """The card's paths, one line each: median, multiple of the floor, spread (flagged when
    noisy); or why the path is absent."""
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
             f"observed: the lowest is {fmt_times(low.x_floor)} "
             f"({low_card.label}, {low.path})"
             + (f"; below the floor: {', '.join(below)}" if below else "")]
    if len(cards) > 1:
        fast, furthest = cards[-1], max(cards, key=lambda c: c.eager.x_floor)
        lines += [f"expected: the fastest card, {fast.label}, furthest above its floor when eager",
                  f"observed: {furthest.label}, at {fmt_times(furthest.eager.x_floor)}"]
    pairs = [(c, c.graph) for c in cards if c.graph is not None]
    lines.append("expected: graph replay faster than eager on every card that has it")
    if pairs:
        slower = [c.label for c, g in pairs if g.median_ms >= c.eager.median_ms]
        speedups = [c.eager.median_ms / g.median_ms for c, g in pairs]
        lines.append(f"observed: {len(pairs) - len(slower)} of {len(pairs)} cards, eager ÷ "
                     f"replay from {min(speedups):.1f}× to {max(speedups):.1f}×"
                     + (f"; not on {', '.join(slower)}" if slower else ""))
    else:
        lines.append("observed: no card here has a graph replay (CUDA graphs need a GPU)")
    return [line for text in lines for line in _fits("", text)]


def _cell(row: Row | None, *, path: bool = False) -> str:
    if row is None:
        return "absent"
    where = f"{row.path}: " if path else ""
    return f"{where}{sig(row.median_ms)} · {fmt_times(row.x_floor)}"


def floor_span(cards: list[Card]) -> str:
    """A sentence on how far the floors spread, from the slowest card to the fastest."""
    slow, fast = cards[0], cards[-1]
    if len(cards) == 1:
        return ("The gallery holds one card so far, so there is nothing yet to set beside "
                "it; add one and run the chapter again.")
    ratio = slow.floor.floor_ms / fast.floor.floor_ms
    return (f"From {slow.label} to {fast.label} the bandwidth grows {ratio:.1f}-fold, and "
            f"the floor shrinks by the same factor: {fmt_ms(slow.floor.floor_ms)} ÷ "
            f"{ratio:.1f} = {fmt_ms(fast.floor.floor_ms)}.")


def eager_span(cards: list[Card]) -> str:
    """A sentence naming the cards farthest from and nearest to their floors when eager."""
    far = max(cards, key=lambda c: c.eager.x_floor)
    near = min(cards, key=lambda c: c.eager.x_floor)
    text = f"An eager token takes {fmt_times(far.eager.x_floor)} the floor on {far.label}"
    if len(cards) == 1:
        return text + "."
    return (f"{text}, the farthest of any card here, and {fmt_times(near.eager.x_floor)} on "
            f"{near.label}, the nearest.")


def replay_gain(cards: list[Card]) -> str:
    """A sentence on how much less time graph replay took than eager, where a card had it."""
    wins = [c.eager.median_ms / c.graph.median_ms for c in cards if c.graph is not None]
    if not wins:
        return ("No card here replayed the step as a CUDA graph: that needs a GPU, and the "
                "gallery has no GPU run yet.")
    return (f"On the {count_words(len(wins), 'card')} that replayed the step as a CUDA graph, "
            f"the replay took between {min(wins):.1f} and {max(wins):.1f} times less "
            "time than the eager step.")


TABLE_HEAD = ("card", "kind", "torch", "read GB/s", "floor ms", "eager ms · ×",
              "graph ms · ×", "best path ms · ×", "date")
NOWRAP = (3, 4, 5, 6, 8)  # the columns of numbers and the date


def gallery_table(cards: list[Card]) -> str:
    """The cards as an HTML table (it renders alike in JupyterLab and the site): device,
    software, read bandwidth, floor, and each path's median ms · multiple of the floor.

    Every text in it is escaped: the cards come from strangers' files."""
    def row(cells, tag="td"):  # numbers and dates stay on one line; names may wrap
        opened = [f'<{tag} style="white-space: nowrap">' if tag == "td" and i in NOWRAP
                  else f"<{tag}>" for i in range(len(cells))]
        return "<tr>" + "".join(f"{o}{cell}</{tag}>" for o, cell in zip(opened, cells)) + "</tr>"

    body = []
    for c in cards:
        name = escape(c.name) + (f" #{c.number}" if c.number else "")
        name += f" (<b>{escape(c.tag)}</b>)" if c.tag else ""
        cells = [escape(text) for text in (
            c.kind, c.torch, fmt_gbps(c.read_gbps).removesuffix(" GB/s"), sig(c.floor.floor_ms),
            _cell(c.eager), _cell(c.graph), _cell(c.best, path=True), c.date)]
        body.append(row([name, *cells]))
    return ('<table style="font-size: 0.85em">\n<thead>' + row(TABLE_HEAD, "th") + "</thead>\n<tbody>\n"
            + "\n".join(body) + "\n</tbody>\n</table>")


# ---- the fixed-cost model, priced from a card's graph replay ------------------------------

@dataclass(frozen=True)
class ReplayCost:
    """What each kernel of a replayed step costs beyond its bytes, on one card."""

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


# The gallery: which card pays least, and how much.

@checked
def check_smallest(my_name, my_value, values: dict[str, float], *, names: tuple[str, str],
                   unit: str, hint: str) -> str:
    """Verdict on naming the smallest of values ({label: number}), by any part of its label,
    and giving its number; names are the two answer variables, for the hints."""
    if my_name is None or my_value is None:
        return NOT_ATTEMPTED
    if not isinstance(my_name, str) or not my_name.strip():
        return (f"not yet: {names[0]} should be part of a card's name in quotes, as the "
                "table writes it.")
    least = min(values.values())
    named = [label for label in values if my_name.strip().lower() in label.lower()]
    if not named:
        return f"not yet: no card's name contains {my_name!r}; copy part of one from the table."
    right = [label for label in named if values[label] == least]
    if not right:
        return f"not yet: {my_name!r} is not the card that pays least; {hint}"
    if not close(read_number(my_value, names[1]), least, 0.05):
        return f"not yet: that is the card, but {my_value!r} is not its figure; {hint}"
    return f"right: {right[0]}, {least:.1f}{unit}."
