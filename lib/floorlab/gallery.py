"""The room's cards side by side: every `python -m floorlab measure` run in one folder.

load_gallery reads each JSON file in a folder (results/gallery/ by default) as a Run
of kind "measure". A file that is not one is skipped with a sentence saying why, so
one bad file never stops the chapter. The reader's own latest run
(results/measure-*/run.json) joins the cards, marked as theirs; with no card at all,
the stored reference run of a named card stands in, marked as stored.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from floorlab import paths
from floorlab.card import KIND, best_row
from floorlab.prose import COLUMN, fmt_gbps, fmt_ms, fmt_times, sig
from floorlab.roofline import (
    BYTES_PER_GB,
    Floor,
    floor_ms,
    gap_ms,
    gap_verdict,
    is_below_floor,
    overhead_us_per_kernel,
    per_launch_us,
    predicted_ms,
)
from floorlab.runs import LAYOUT, Row, Run

GALLERY_DIR = paths.RESULTS_DIR / "gallery"
OWN_RUNS = "measure-*/run.json"  # where `python -m floorlab measure` writes the reader's runs
STORED = "h200-below-the-floor"  # shown, labelled, when no card is found, or none replayed
SUBMIT = "python -m floorlab measure --submit results/gallery"
GRAPH = "graph replay"
ORIGINS = ("gallery", "yours", "stored")


class NotACard(ValueError):
    """A file the gallery cannot show; the message says why and how to fix it."""


@dataclass
class Card:
    """One measured card as the gallery shows it: its Run, where it came from, whose it is."""

    run: Run
    path: Path | None = None
    origin: str = "gallery"  # "gallery", "yours" (the reader's own run) or "stored"
    number: int = 0  # 1, 2, ... when several cards share a name
    run_path: Path | None = None  # for the reader's card: their results/measure-*/run.json

    @property
    def name(self) -> str:
        """The device's name, e.g. 'NVIDIA H200'."""
        return str(self.run.device.get("name") or "unnamed device")

    @property
    def kind(self) -> str:
        """'cuda' or 'cpu'."""
        return str(self.run.device.get("kind") or "?")

    @property
    def torch(self) -> str:
        """The torch version the card was measured with."""
        return str(self.run.device.get("torch") or "?")

    @property
    def date(self) -> str:
        """The UTC date of the measurement, YYYY-MM-DD."""
        return str(self.run.stamp.get("date", ""))[:10]

    @property
    def mine(self) -> bool:
        """True for the reader's own run."""
        return self.origin == "yours"

    @property
    def tag(self) -> str:
        """'yours', 'stored' or '' for a card submitted by someone else."""
        return self.origin if self.origin != "gallery" else ""

    @property
    def label(self) -> str:
        """How sentences and tables name the card: 'NVIDIA H200 #2 (cuda, yours)'."""
        number = f" #{self.number}" if self.number else ""
        return f"{self.name}{number} ({', '.join(x for x in (self.kind, self.tag) if x)})"

    @property
    def floor(self) -> Floor:
        """The floor the card's own bandwidth gives."""
        return self.run.floor()

    @property
    def read_gbps(self) -> float:
        """The measured read-only bandwidth in GB/s."""
        return self.run.bandwidths.read.gbps

    @property
    def eager(self) -> Row:
        """The measured eager row."""
        return self.run.row("eager")

    @property
    def graph(self) -> Row | None:
        """The measured graph-replay row, or None where it did not run (a CPU has no graphs)."""
        return self.run.find(GRAPH)

    @property
    def graph_note(self) -> str:
        """Why there is no graph row ('' when there is one): the run's own note."""
        row = next((r for r in self.run.rows if r.path == GRAPH), None)
        if self.graph is not None:
            return ""
        return f"{row.status}: {row.note}" if row is not None else "not measured"

    @property
    def best(self) -> Row:
        """The measured row with the shortest median step."""
        return best_row(self.run)

    @property
    def launches(self) -> int:
        """Kernels (on a CPU, operators) in one eager step."""
        return self.run.launches["eager"].kernels

    @property
    def gap_per_launch_us(self) -> float:
        """µs of eager time above the floor per launch: (eager − floor) ÷ launches."""
        return per_launch_us(gap_ms(self.eager.median_ms, self.floor.floor_ms), self.launches)

    @property
    def verdict(self) -> str:
        """What holds eager above the floor (roofline.gap_verdict): "bytes", "dispatch", "operators"."""
        eager, line = self.eager, self.run.timelines.get("eager")
        on_gpu = self.kind == "cuda"  # on a CPU, issuing is computing: the busy time decides
        return gap_verdict(eager_ms=eager.median_ms, floor_ms=self.floor.floor_ms,
                           launches=self.launches, busy_ms=line.busy_ms if line else None,
                           issue_ms=eager.issue.median_ms if on_gpu and eager.issue else None)


def card_from_run(run: Run, path=None, origin: str = "gallery") -> Card:
    """A Card from a Run that has what the gallery draws; NotACard saying what is missing."""
    if origin not in ORIGINS:
        raise ValueError(f"origin must be one of {ORIGINS}, got {origin!r}")
    if run.bandwidths is None:
        raise NotACard("it holds no measured bandwidth; measure the card again")
    if len(run.floors) != 1:
        raise NotACard(f"it holds {len(run.floors)} floors where a card has one; "
                       "it is not a run of one card")
    if run.find("eager") is None or "eager" not in run.launches:
        raise NotACard("it has no measured eager step with its launches; measure the card "
                       f"again with {SUBMIT}")
    return Card(run, Path(path) if path is not None else None, origin)


def read_card(path, origin: str = "gallery") -> Card:
    """The Card stored at path; NotACard when the file is not a measure run the book can read."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise NotACard(f"it cannot be read ({type(err).__name__}: {err})") from None
    except json.JSONDecodeError as err:
        raise NotACard(f"it is not valid JSON ({err}); copy it again, or delete it") from None
    if not isinstance(data, dict):
        raise NotACard(f"it holds a JSON {type(data).__name__}, not a run")
    if data.get("layout") != LAYOUT:
        raise NotACard(f"it is stored in layout {data.get('layout')!r} and the book reads "
                       f"layout {LAYOUT}; measure the card again with {SUBMIT}")
    if data.get("kind") != KIND:
        raise NotACard(f"it is a run of kind {data.get('kind')!r}, not one made by "
                       "python -m floorlab measure")
    try:
        run = Run.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise NotACard(f"it is not in the book's run layout ({type(err).__name__}: {err}); "
                       f"measure the card again with {SUBMIT}") from None
    return card_from_run(run, path, origin)


@dataclass(frozen=True)
class Skipped:
    """A file the gallery left out, and why."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"skipped {_shown(self.path)}: {self.reason}"


@dataclass
class Gallery:
    """The cards to show, in order of read bandwidth, and what was read to find them."""

    folder: Path
    cards: list[Card] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    files: int = 0  # JSON files found in the folder
    own: Card | None = None  # the reader's latest run, when there is one

    @property
    def stored(self) -> bool:
        """True when the only card is a stored reference run, for want of any other."""
        return bool(self.cards) and all(c.origin == "stored" for c in self.cards)

    def notes(self) -> list[str]:
        """What was read, what was skipped and why, whose run is whose: one line each."""
        room = [c for c in self.cards if c.path is not None and c.path.parent == self.folder]
        lines = [f"{_shown(self.folder)}: {_count(self.files, 'JSON file')}, "
                 f"{_count(len(room), 'card')} read"]
        lines += [str(s) for s in self.skipped]
        if self.own is not None:
            where = ("also submitted to the gallery" if any(self.own is c for c in room)
                     else "not submitted, shown beside the gallery's cards")
            lines.append(f"yours: {_shown(self.own.run_path)} ({where})")
        if self.stored:
            card = self.cards[0]
            lines.append(f"no card to show yet: the figures show the stored reference run of "
                         f"{card.run.label}, marked 'stored', not a card from this room")
        return lines

    def summary(self) -> str:
        """notes(), wrapped to the site's column."""
        from floorlab.prose import wrap

        return wrap("\n".join(self.notes()))


def _count(n: int, word: str) -> str:
    """'1 card', '3 cards'."""
    return f"{n} {word}" + ("" if n == 1 else "s")


def _shown(path: Path) -> str:
    """path relative to the book's folder when it lies inside it."""
    try:
        return str(Path(path).resolve().relative_to(paths.WORK_DIR))
    except ValueError:
        return str(path)


def _same_run(a: Run, b: Run) -> bool:
    """True when two files hold one measurement (a submitted copy of a run, say)."""
    return a.stamp == b.stamp and a.device == b.device


def latest_own_run(results_dir=None, skipped: list | None = None) -> Card | None:
    """The reader's newest readable run in results/measure-*/run.json, as a Card, or None."""
    folder = Path(results_dir) if results_dir is not None else paths.RESULTS_DIR
    cards = []
    for path in sorted(folder.glob(OWN_RUNS)):
        try:
            cards.append(read_card(path, origin="yours"))
        except NotACard as err:
            if skipped is not None:
                skipped.append(Skipped(path, f"your own run, but {err}"))
    if not cards:
        return None
    own = max(cards, key=lambda c: str(c.run.stamp.get("date", "")))
    own.run_path = own.path
    return own


def load_gallery(folder=None, *, results_dir=None, stored: str | None = STORED) -> Gallery:
    """Every card in folder (default results/gallery/) plus the reader's own latest run.

    Files that are not measure runs are skipped with a reason; a duplicate submission is
    skipped too. With no card at all, the stored reference run `stored` stands in (None:
    an empty gallery).
    """
    folder = Path(folder) if folder is not None else GALLERY_DIR
    gallery = Gallery(folder=folder)
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    gallery.files = len(files)
    for path in files:
        try:
            card = read_card(path)
        except NotACard as err:
            gallery.skipped.append(Skipped(path, str(err)))
            continue
        twin = next((c for c in gallery.cards if _same_run(c.run, card.run)), None)
        if twin is not None:
            gallery.skipped.append(Skipped(path, f"the same run as {twin.path.name}"))
            continue
        gallery.cards.append(card)
    own = latest_own_run(results_dir, gallery.skipped)
    if own is not None:
        twin = next((c for c in gallery.cards if _same_run(c.run, own.run)), None)
        if twin is not None:
            twin.origin, twin.run_path = "yours", own.path
            own = twin
        else:
            gallery.cards.append(own)
        gallery.own = own
    if not gallery.cards and stored:
        from floorlab.results import reference_run

        gallery.cards.append(card_from_run(reference_run(stored), origin="stored"))
    gallery.cards.sort(key=lambda c: c.read_gbps)
    _number_namesakes(gallery.cards)
    return gallery


def _number_namesakes(cards: list[Card]) -> None:
    """Give cards that share a name and kind the numbers 1, 2, ... so labels stay apart."""
    for card in cards:
        same = [c for c in cards if (c.name, c.kind) == (card.name, card.kind)]
        card.number = same.index(card) + 1 if len(same) > 1 else 0


# ---- what the chapter prints ------------------------------------------------------------

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
    return (f"On the {_count(len(wins), 'card')} that replayed the step as a CUDA graph, "
            f"the replay took between {min(wins):.1f} and {max(wins):.1f} times less "
            "time than the eager step.")


TABLE_HEAD = ("card", "kind", "torch", "read GB/s", "floor ms", "eager ms · ×",
              "graph ms · ×", "best path ms · ×", "date")
NOWRAP = (3, 4, 5, 6, 8)  # the columns of numbers and the date


def gallery_table(cards: list[Card]) -> str:
    """The cards as an HTML table (it renders alike in JupyterLab and the site): device,
    software, read bandwidth, floor, and each path's median ms · multiple of the floor."""
    from html import escape

    def row(cells, tag="td"):  # numbers and dates stay on one line; names may wrap
        opened = [f'<{tag} style="white-space: nowrap">' if tag == "td" and i in NOWRAP
                  else f"<{tag}>" for i in range(len(cells))]
        return "<tr>" + "".join(f"{o}{cell}</{tag}>" for o, cell in zip(opened, cells)) + "</tr>"

    body = []
    for c in cards:
        name = escape(c.name) + (f" #{c.number}" if c.number else "")
        name += f" (<b>{c.tag}</b>)" if c.tag else ""
        cells = [name, c.kind, escape(c.torch), fmt_gbps(c.read_gbps).removesuffix(" GB/s"),
                 sig(c.floor.floor_ms), _cell(c.eager), _cell(c.graph),
                 escape(_cell(c.best, path=True)), c.date]
        body.append(row(cells))
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
    from floorlab.results import reference_run

    run = reference_run(stored)
    return replay_cost(run, f"the stored run of {run.label}", stored=True)
