"""Studies wing: the chapter "A gallery of cards", one card: a `python -m floorlab measure`
run read from a file (read_card), what the chapter reads of it (Card), and whether it is a
physically possible card at all (check_card).

The files come from strangers, so a file that is not a card, or not a possible one, raises
NotACard with a sentence saying why and how to measure again; gallery_folder skips it and
reads the rest.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from floorlab.core import paths
from floorlab.core.files import UnreadableFile, read_regular
from floorlab.core.launches import LaunchCount
from floorlab.core.numbers import nonnegative_number, positive_number, shown, whole_number
from floorlab.core.prose import fmt_ms, fmt_times
from floorlab.core.roofline import (
    Floor,
    floor_ms,
    gap_ms,
    gap_verdict,
    is_below_floor,
    per_launch_us,
)
from floorlab.core.runs import CARD_KIND, LAYOUT, Row, Run
from floorlab.core.timing import Timing
from floorlab.studies.gallery_checks import bytes_reason, range_reason

GALLERY_DIR = paths.RESULTS_DIR / "gallery"
STORED = "h200-below-the-floor"  # shown, labelled, when no card is found, or none replayed
SUBMIT = "python -m floorlab measure --submit results/gallery"
GRAPH = "graph replay"
ORIGINS = ("gallery", "yours", "stored")
KINDS = ("cuda", "cpu")
MAX_TEXT_CHARS = 80  # a device name, a torch version or a date longer than this is not one
MAX_CARD_BYTES = 50_000_000  # a measure run is a few MB at most; larger is not a card
ROUNDING = 1e-3  # how far a stored floor or multiple may sit from its own arithmetic
AGAIN = f"measure the card again with {SUBMIT}"
FIELDS = {"stamp": dict, "device": dict, "floors": list, "rows": list, "timelines": dict, "launches": dict,
          "facts": dict, "settings": dict}  # a run's fields and the JSON type each is stored as
NESTED = ("floors", "rows", "timelines", "launches")  # each holds JSON objects


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
    """A Card from a Run that has what the gallery draws; NotACard saying what is missing or impossible."""
    if origin not in ORIGINS:
        raise ValueError(f"origin must be one of {ORIGINS}, got {origin!r}")
    if run.bandwidths is None:
        raise NotACard("it holds no measured bandwidth; measure the card again")
    if len(run.floors) != 1:
        raise NotACard(f"it holds {len(run.floors)} floors where a card has one; "
                       "it is not a run of one card")
    if run.find("eager") is None or "eager" not in run.launches:
        raise NotACard(f"it has no measured eager step with its launches; {AGAIN}")
    card = Card(run, Path(path) if path is not None else None, origin)
    check_card(card)
    return card


def _text(value, what: str, *, optional: bool = False) -> None:
    """NotACard unless value is a short line of printable text (or None when optional)."""
    if value is None and optional:
        return
    if not isinstance(value, str) or not value.strip():
        raise NotACard(f"its {what} is {shown(value)}, where a card writes a line of text; {AGAIN}")
    if len(value) > MAX_TEXT_CHARS or not value.isprintable():
        raise NotACard(f"its {what} {shown(value, typed=False)} holds control characters or more than "
                       f"{MAX_TEXT_CHARS} characters ({len(value)}), which no device reports; {AGAIN}")


def _measure(check, value, what: str) -> float:
    """check(value, what) (positive_number or nonnegative_number), its ValueError as NotACard."""
    try:
        return check(value, what)
    except ValueError as err:
        raise NotACard(f"{err}: no measurement gives that; {AGAIN}") from None


def _close(value: float, expected: float) -> bool:
    return abs(value - expected) <= ROUNDING * abs(expected)


def _check_timing(timing, what: str, check) -> None:
    """NotACard unless timing is a Timing of finite numbers, min <= p10 <= median <= p90 <= max."""
    if not isinstance(timing, Timing):
        raise NotACard(f"its {what} timing is {shown(timing)}, not a Timing; {AGAIN}")
    low, p10, median, p90, high = (_measure(check, getattr(timing, f), f"{what} {f}")
                                   for f in ("min_ms", "p10_ms", "median_ms", "p90_ms", "max_ms"))
    if not low <= p10 <= median <= p90 <= high:
        raise NotACard(f"its {what} timing is out of order (min {low:g}, p10 {p10:g}, median "
                       f"{median:g}, p90 {p90:g}, max {high:g} ms); {AGAIN}")


def _check_row(row: Row, floor: Floor) -> None:
    """NotACard unless a measured row is a possible time at the card's floor: finite, ordered, not below it."""
    _text(row.path, "path name")
    if not isinstance(row.note, str):
        raise NotACard(f"the note of its {row.path} row is {shown(row.note)}, not text; {AGAIN}")
    if not row.measured:
        return
    if (row.preset, row.batch) != (floor.preset, floor.batch):
        raise NotACard(f"its {row.path} row is of {shown(row.preset, typed=False)} at batch "
                       f"{shown(row.batch, typed=False)}, but its floor of {floor.preset!r} at batch "
                       f"{floor.batch}; {AGAIN}")
    _check_timing(row.timing, row.path, positive_number)
    if row.issue is not None:
        _check_timing(row.issue, f"{row.path} issue", nonnegative_number)
    ratio = row.timing.median_ms / floor.floor_ms
    if is_below_floor(ratio):  # the book's one rule for a time faster than the bytes allow
        raise NotACard(f"its {row.path} step, {fmt_ms(row.timing.median_ms)}, is {fmt_times(ratio)} its "
                       f"floor of {fmt_ms(floor.floor_ms)}: below the floor, which no real step can "
                       f"be (a timer that does not wait for the device?); {AGAIN}")
    if not _close(_measure(positive_number, row.x_floor, f"{row.path} x_floor"), ratio):
        raise NotACard(f"its {row.path} row says {row.x_floor:.4g}× the floor, but its median "
                       f"over its floor is {ratio:.4g}×; {AGAIN}")
    if row.achieved_gbps is not None:
        _measure(positive_number, row.achieved_gbps, f"{row.path} achieved_gbps")


def check_card(card: Card) -> None:
    """NotACard unless the card is physically consistent: text where text belongs, finite
    positive numbers, a floor equal to its bytes over its bandwidth, no time below the floor."""
    run = card.run
    if not isinstance(run.device, dict) or not isinstance(run.stamp, dict):
        raise NotACard(f"its device and stamp are {shown(run.device)} and {shown(run.stamp)}, "
                       f"where a card holds the facts of its device and its date; {AGAIN}")
    _text(run.device.get("name"), "device name", optional=True)  # None: an unnamed device
    if run.device.get("kind") not in KINDS:
        raise NotACard(f"its device kind is {shown(run.device.get('kind'))}, not one of {KINDS}; {AGAIN}")
    _text(run.device.get("torch"), "torch version", optional=True)
    _text(run.stamp.get("date"), "date")
    floor, bandwidths = run.floors[0], run.bandwidths
    if not isinstance(floor, Floor) or not isinstance(run.rows, list):
        raise NotACard(f"its floor is {shown(floor)}, not a Floor; {AGAIN}")
    if not _close(floor.bandwidth_gbps, bandwidths.floor_gbps):
        raise NotACard(f"its floor divides by {floor.bandwidth_gbps:.6g} GB/s, but the larger of its "
                       f"measured bandwidths is {bandwidths.floor_gbps:.6g} GB/s; {AGAIN}")
    if not _close(floor.floor_ms, floor_ms(floor.bytes_per_step, floor.bandwidth_gbps)):
        raise NotACard(f"its floor of {floor.floor_ms:.6g} ms is not its bytes over its bandwidth, "
                       f"{floor.bytes_per_step / 1e9:.4g} GB ÷ {floor.bandwidth_gbps:.6g} GB/s; {AGAIN}")
    for row in run.rows:
        _check_row(row, floor)
    count = run.launches["eager"]
    if not isinstance(count, LaunchCount) or isinstance(count.kernels, (bool, float)):
        raise NotACard(f"its eager launch count is {shown(count)}; {AGAIN}")
    _measure(whole_number, count.kernels, "eager kernels")
    for key in ("eager", GRAPH):
        line = run.timelines.get(key)
        if line is not None:
            try:
                kernels, busy = line.kernels, line.busy_ms
            except (TypeError, ValueError, AttributeError) as err:
                raise NotACard(f"its {key} timeline cannot be read ({type(err).__name__}: "
                               f"{str(err)[:100]}); {AGAIN}") from None
            _measure(positive_number if kernels else nonnegative_number, busy, f"{key} busy_ms")
    reason = bytes_reason(run) or range_reason(run)  # against the physics, not only itself
    if reason:
        raise NotACard(f"{reason}; {AGAIN}")
    try:  # what the chapter reads of every card, so that nothing fails later
        card.verdict, card.gap_per_launch_us, card.label, card.graph_note
    except (TypeError, ValueError, AttributeError, KeyError) as err:
        raise NotACard(f"the gallery cannot read it ({type(err).__name__}: {str(err)[:120]}); "
                       f"{AGAIN}") from None


def read_card(path, origin: str = "gallery") -> Card:
    """The Card stored at path; NotACard when the file is not a measure run the book can read."""
    path = Path(path)
    try:  # a regular file under the size limit only: a named pipe is refused, never waited on
        data = json.loads(read_regular(path, MAX_CARD_BYTES).decode("utf-8"))
    except UnreadableFile as err:
        raise NotACard(str(err)) from None
    except (OSError, UnicodeDecodeError) as err:
        raise NotACard(f"it cannot be read ({type(err).__name__}: {str(err)[:120]})") from None
    except json.JSONDecodeError as err:
        raise NotACard(f"it is not valid JSON ({err}); copy it again, or delete it") from None
    except RecursionError:
        raise NotACard(f"it nests its brackets deeper than Python reads, far deeper than any run; "
                       f"{AGAIN}") from None
    except ValueError as err:  # e.g. an integer of more digits than Python converts
        raise NotACard(f"it holds a number Python will not read ({str(err).split(';')[0][:100]}); "
                       f"{AGAIN}") from None
    if not isinstance(data, dict):
        raise NotACard(f"it holds a JSON {type(data).__name__}, not a run")
    if data.get("layout") != LAYOUT:
        raise NotACard(f"it is stored in layout {shown(data.get('layout'), typed=False)} and the book reads "
                       f"layout {LAYOUT}; {AGAIN}")
    if data.get("kind") != CARD_KIND:
        raise NotACard(f"it is a run of kind {shown(data.get('kind'), typed=False)}, not one made by "
                       "python -m floorlab measure")
    for key, kind in FIELDS.items():
        value = data.get(key, kind())
        items = value.values() if isinstance(value, dict) else value
        if not isinstance(value, kind) or (key in NESTED and not all(isinstance(v, dict) for v in items)):
            holds = {dict: "a JSON object", list: "a JSON list"}[kind] + (" of JSON objects" if key in NESTED else "")
            raise NotACard(f"its {key} is {shown(value)}, where the book's run layout holds {holds}; {AGAIN}")
    try:
        run = Run.from_dict(data)
    except (KeyError, TypeError, AttributeError, RecursionError) as err:
        raise NotACard(f"it is not in the book's run layout ({type(err).__name__}: {str(err)[:120]}); "
                       f"{AGAIN}") from None
    except ValueError as err:  # a Bandwidth, Floor or Row refused what no measurement gives
        raise NotACard(f"it holds what no measurement gives ({str(err)[:160]}); {AGAIN}") from None
    return card_from_run(run, path, origin)
