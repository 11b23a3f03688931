"""Studies wing: the gallery itself: every card in one folder, the reader's own latest run beside
them, and each file skipped with why; with no card at all, a stored reference run, marked so."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from floorlab.core import paths
from floorlab.core.numbers import a_path
from floorlab.core.prose import wrap
from floorlab.core.reference import reference_run
from floorlab.studies.gallery_cards import GALLERY_DIR, STORED, Card, NotACard, cannot_read, card_from_run, read_card

OWN_RUNS = "measure-*/run.json"  # where `python -m floorlab measure` writes the reader's runs


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

    stored = property(lambda self: bool(self.cards) and all(c.origin == "stored" for c in self.cards))

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
        return wrap("\n".join(self.notes()))


def count_words(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")  # '1 card', '3 cards'


def _shown(path: Path) -> str:
    """path relative to the book's folder when it lies inside it."""
    try:
        return str(Path(path).resolve().relative_to(paths.WORK_DIR))
    except ValueError:
        return str(path)


def card_or_skip(path: Path, origin: str, skipped: list[Skipped], why: str = "") -> Card | None:
    """read_card(path, origin), or None with the reason the file was skipped added to skipped."""
    try:
        return read_card(path, origin)
    except NotACard as err:
        reason = str(err)
    except Exception as err:  # noqa: BLE001 - a stranger's file the checks did not foresee
        reason = cannot_read(err)
    skipped.append(Skipped(path, why + reason))
    return None


def latest_own_run(results_dir, skipped: list[Skipped]) -> Card | None:
    """The reader's newest readable run in results/measure-*/run.json, as a Card, or None."""
    folder = Path(results_dir) if results_dir is not None else paths.RESULTS_DIR
    found = (card_or_skip(path, "yours", skipped, "your own run, but ") for path in sorted(folder.glob(OWN_RUNS)))
    cards = [card for card in found if card is not None]
    own = max(cards, key=lambda c: str(c.run.stamp.date or ""), default=None)
    if own is not None:
        own.run_path = own.path
    return own


def load_gallery(folder=None, *, results_dir=None, stored: str | None = STORED) -> Gallery:
    """Every card in folder (default results/gallery/) and the reader's latest run, a duplicate once;
    with none, the stored reference run `stored` (None: an empty gallery)."""
    folder = a_path(folder, "folder") if folder is not None else GALLERY_DIR
    gallery = Gallery(folder=folder)
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    gallery.files = len(files)
    for path in files:  # each file on its own: one that fails is skipped, never the gallery
        card = card_or_skip(path, "gallery", gallery.skipped)
        if card is None:
            continue
        if (twin := _twin(gallery.cards, card)) is not None:
            gallery.skipped.append(Skipped(path, f"the same run as {twin.path.name}"))
        else:
            gallery.cards.append(card)
    own = latest_own_run(results_dir, gallery.skipped)
    if own is not None:
        if (twin := _twin(gallery.cards, own)) is not None:
            twin.origin, twin.run_path = "yours", own.path
            own = twin
        else:
            gallery.cards.append(own)
        gallery.own = own
    if not gallery.cards and stored:
        gallery.cards.append(card_from_run(reference_run(stored), origin="stored"))
    gallery.cards.sort(key=lambda c: c.read_gbps)
    for card in gallery.cards:  # cards that share a name and kind are numbered 1, 2, ... to tell apart
        same = [c for c in gallery.cards if (c.name, c.kind) == (card.name, card.kind)]
        card.number = same.index(card) + 1 if len(same) > 1 else 0
    return gallery


def _twin(cards: list[Card], card: Card) -> Card | None:
    """The card among cards that holds the same measurement (a submitted copy of a run), or None."""
    return next((c for c in cards if (c.run.stamp, c.run.device) == (card.run.stamp, card.run.device)), None)
