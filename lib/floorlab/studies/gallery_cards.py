"""Studies wing: the chapter "A gallery of cards", reading the cards: every
`python -m floorlab measure` run in one folder, side by side.

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

from floorlab.core import paths
from floorlab.core.prose import wrap
from floorlab.core.roofline import (
    Floor,
    gap_ms,
    gap_verdict,
    per_launch_us,
)
from floorlab.core.runs import CARD_KIND, LAYOUT, Row, Run, reference_run

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
        return self.run.best_row()

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
    if data.get("kind") != CARD_KIND:
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
        lines = [f"{_shown(self.folder)}: {count_words(self.files, 'JSON file')}, "
                 f"{count_words(len(room), 'card')} read"]
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

        return wrap("\n".join(self.notes()))


def count_words(n: int, word: str) -> str:
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
