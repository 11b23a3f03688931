"""Studies wing: one card of the gallery: a measure run read from a stranger's file (read_card), what
the chapter reads of it (Card), and NotACard, saying why, when no such card can exist."""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from floorlab.core import paths
from floorlab.core.checks import close
from floorlab.core.files import UnreadableFile, read_regular
from floorlab.core.numbers import nonnegative_number, positive_number, shown, whole_number
from floorlab.core.prose import fmt_ms, fmt_times
from floorlab.core.roofline import Floor, bytes_per_step, floor_ms, gap_ms, gap_verdict, is_below_floor, per_launch_us
from floorlab.core.runs import CARD_KIND, LAYOUT, RUN_FIELDS, Row, Run
from floorlab.core.shapes import PRESETS

GALLERY_DIR = paths.RESULTS_DIR / "gallery"
STORED = "h200-below-the-floor"  # shown, labelled, when no card is found, or none replayed
GRAPH = "graph replay"
AGAIN = "measure the card again with python -m floorlab measure --submit results/gallery"
KINDS = ("cuda", "cpu")
MAX_TEXT_CHARS = 80  # a device name, a torch version or a date longer than this is not one
MAX_CARD_BYTES = 50_000_000  # a measure run is a few MB at most; larger is not a card
ROUNDING = 1e-3  # how far a stored floor or multiple may sit from its own arithmetic
NESTED = ("floors", "rows", "timelines", "launches")  # each holds JSON objects
DTYPE_BYTES = (1, 2, 4)  # the weight and cache widths a run may have been measured in
MAX_STEP_MS = 120_000.0  # no decode step of a known preset takes two minutes on a working machine
GBPS_RANGE = (0.1, 100_000.0)  # slower than any machine that runs torch; 20 times the fastest memory made
EARLIEST = datetime(2020, 1, 1, tzinfo=timezone.utc)  # before the book and the models it measures


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
        return str(self.run.device.name or "unnamed device")

    @property
    def kind(self) -> str:
        return str(self.run.device.kind or "?")

    @property
    def torch(self) -> str:
        return str(self.run.device.torch or "?")

    @property
    def date(self) -> str:
        """The UTC date of the measurement, YYYY-MM-DD."""
        return str(self.run.stamp.date or "")[:10]

    mine = property(lambda self: self.origin == "yours")
    tag = property(lambda self: self.origin if self.origin != "gallery" else "")  # '' for a stranger's

    @property
    def label(self) -> str:
        """How sentences and tables name the card: 'NVIDIA H200 #2 (cuda, yours)'."""
        number = f" #{self.number}" if self.number else ""
        return f"{self.name}{number} ({', '.join(x for x in (self.kind, self.tag) if x)})"

    floor = property(lambda self: self.run.floor())
    read_gbps = property(lambda self: self.run.bandwidths.read.gbps)
    eager = property(lambda self: self.run.row("eager"))
    graph = property(lambda self: self.run.find(GRAPH))  # None where no replay ran (a CPU's)
    best = property(lambda self: self.run.best_row())
    launches = property(lambda self: self.run.launches["eager"].kernels)  # kernels (a CPU's operators)

    @property
    def graph_note(self) -> str:
        """Why there is no graph row, in the run's own words ('' when there is one)."""
        row = next((r for r in self.run.rows if r.path == GRAPH), None)
        if self.graph is not None:
            return ""
        return f"{row.status}: {row.note}" if row is not None else "not measured"

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


def read_card(path, origin: str = "gallery") -> Card:
    """The Card stored at path; NotACard when the file is not a measure run the book can read."""
    path = Path(path)
    try:  # a regular file under the size limit only: a named pipe is refused, never waited on
        data = json.loads(read_regular(path, MAX_CARD_BYTES).decode("utf-8"))
    except UnreadableFile as err:
        raise NotACard(str(err)) from None
    except (OSError, UnicodeDecodeError) as err:
        raise NotACard(f"it cannot be read ({_why(err)})") from None
    except json.JSONDecodeError as err:
        raise NotACard(f"it is not valid JSON ({err}); copy it again, or delete it") from None
    except RecursionError:
        raise NotACard(f"it nests its brackets deeper than Python reads, far deeper than any run; {AGAIN}") from None
    except ValueError as err:  # e.g. an integer of more digits than Python converts
        raise NotACard(f"it holds a number Python will not read ({str(err).split(';')[0][:100]}); {AGAIN}") from None
    if not isinstance(data, dict):
        raise NotACard(f"it holds a JSON {type(data).__name__}, not a run")
    if data.get("layout") != LAYOUT:
        raise NotACard(f"it is stored in layout {shown(data.get('layout'), typed=False)} and the book reads "
                       f"layout {LAYOUT}; {AGAIN}")
    if data.get("kind") != CARD_KIND:
        raise NotACard(f"it is a run of kind {shown(data.get('kind'), typed=False)}, not one made by "
                       "python -m floorlab measure")
    for key, kind in RUN_FIELDS.items():  # kind, a str, is checked above
        value = data.get(key, kind())
        items = value.values() if isinstance(value, dict) else value
        if not isinstance(value, kind) or (key in NESTED and not all(isinstance(v, dict) for v in items)):
            holds = {dict: "a JSON object", list: "a JSON list"}[kind] + (" of JSON objects" if key in NESTED else "")
            raise NotACard(f"its {key} is {shown(value)}, where the book's run layout holds {holds}; {AGAIN}")
    try:
        run = Run.from_dict(data)
    except (KeyError, TypeError, AttributeError, RecursionError) as err:
        raise NotACard(f"it is not in the book's run layout ({_why(err)}); {AGAIN}") from None
    except ValueError as err:  # a Bandwidth, Floor or Row refused what no measurement gives
        raise NotACard(f"it holds what no measurement gives ({str(err)[:160]}); {AGAIN}") from None
    return card_from_run(run, path, origin)


def card_from_run(run: Run, path=None, origin: str = "gallery") -> Card:
    """A Card from a Run; NotACard saying what is missing or impossible."""
    if run.bandwidths is None:
        raise NotACard("it holds no measured bandwidth; measure the card again")
    if len(run.floors) != 1:
        raise NotACard(f"it holds {len(run.floors)} floors where a card has one; it is not a run of one card")
    if run.find("eager") is None or "eager" not in run.launches:
        raise NotACard(f"it has no measured eager step with its launches; {AGAIN}")
    card = Card(run, Path(path) if path is not None else None, origin)
    check_card(card)
    return card


def check_card(card: Card) -> None:
    """NotACard unless the card is possible: text where text belongs, finite positive numbers, a
    floor of its preset's bytes over its bandwidth, no time below it."""
    run = card.run
    _text(run.device.name, "device name", optional=True)  # None: an unnamed device
    if run.device.kind not in KINDS:
        raise NotACard(f"its device kind is {shown(run.device.kind)}, not one of {KINDS}; {AGAIN}")
    _text(run.device.torch, "torch version", optional=True)
    _text(run.stamp.date, "date")
    floor = run.floors[0]
    if not close(floor.bandwidth_gbps, run.bandwidths.floor_gbps, ROUNDING):
        raise NotACard(f"its floor divides by {floor.bandwidth_gbps:.6g} GB/s, but the larger of its "
                       f"measured bandwidths is {run.bandwidths.floor_gbps:.6g} GB/s; {AGAIN}")
    if not close(floor.floor_ms, floor_ms(floor.bytes_per_step, floor.bandwidth_gbps), ROUNDING):
        raise NotACard(f"its floor of {floor.floor_ms:.6g} ms is not its bytes over its bandwidth, "
                       f"{floor.bytes_per_step / 1e9:.4g} GB ÷ {floor.bandwidth_gbps:.6g} GB/s; {AGAIN}")
    for row in run.rows:
        _check_row(row, floor)
    _measure(whole_number, run.launches["eager"].kernels, "eager kernels")
    for key in ("eager", GRAPH):
        line = run.timelines.get(key)
        if line is not None:
            try:
                kernels, busy = line.kernels, line.busy_ms
            except (TypeError, ValueError, AttributeError) as err:
                raise NotACard(f"its {key} timeline cannot be read ({_why(err, 100)}); {AGAIN}") from None
            _measure(positive_number if kernels else nonnegative_number, busy, f"{key} busy_ms")
    reason = bytes_reason(run) or range_reason(run)  # against the physics, not only itself
    if reason:
        raise NotACard(f"{reason}; {AGAIN}")
    try:  # what the chapter reads of every card, so that nothing fails later
        card.verdict, card.gap_per_launch_us, card.label, card.graph_note
    except (TypeError, ValueError, AttributeError, KeyError) as err:
        raise NotACard(cannot_read(err)) from None


def _why(err: Exception, chars: int = 120) -> str:
    """'TypeError: what it said', cut to chars."""
    return f"{type(err).__name__}: {str(err)[:chars]}"


def cannot_read(err: Exception) -> str:
    """Why the gallery skips a file that failed in a way no check foresaw."""
    return f"the gallery cannot read it ({_why(err)}); {AGAIN}"


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
    """check(value, what) (a core.numbers check), its ValueError as NotACard."""
    try:
        return check(value, what)
    except ValueError as err:
        raise NotACard(f"{err}: no measurement gives that; {AGAIN}") from None


def _check_row(row: Row, floor: Floor) -> None:
    """NotACard unless a measured row is a possible time at the card's floor."""
    _text(row.path, "path name")
    if not isinstance(row.note, str):
        raise NotACard(f"the note of its {row.path} row is {shown(row.note)}, not text; {AGAIN}")
    if not row.measured:
        return
    if (row.preset, row.batch) != (floor.preset, floor.batch):
        raise NotACard(f"its {row.path} row is of {shown(row.preset, typed=False)} at batch "
                       f"{shown(row.batch, typed=False)}, but its floor of {floor.preset!r} at batch "
                       f"{floor.batch}; {AGAIN}")
    for timing, what, check in ((row.timing, row.path, positive_number),
                                (row.issue, f"{row.path} issue", nonnegative_number)):
        if timing is None:
            continue
        names = ("min", "p10", "median", "p90", "max")
        fields = [_measure(check, getattr(timing, f"{n}_ms"), f"{what} {n}_ms") for n in names]
        if fields != sorted(fields):
            shown_ms = ", ".join(f"{n} {v:g}" for n, v in zip(names, fields))
            raise NotACard(f"its {what} timing is out of order ({shown_ms} ms); {AGAIN}")
    ratio = row.timing.median_ms / floor.floor_ms
    if is_below_floor(ratio):  # the book's one rule for a time faster than the bytes allow
        raise NotACard(f"its {row.path} step, {fmt_ms(row.timing.median_ms)}, is {fmt_times(ratio)} its "
                       f"floor of {fmt_ms(floor.floor_ms)}: below the floor, which no real step can "
                       f"be (a timer that does not wait for the device?); {AGAIN}")
    if not close(_measure(positive_number, row.x_floor, f"{row.path} x_floor"), ratio, ROUNDING):
        raise NotACard(f"its {row.path} row says {row.x_floor:.4g}× the floor, but its median "
                       f"over its floor is {ratio:.4g}×; {AGAIN}")
    if row.achieved_gbps is not None:
        _measure(positive_number, row.achieved_gbps, f"{row.path} achieved_gbps")


def bytes_reason(run: Run) -> str:
    """Why the run's floor cannot be of its preset at its batch and context, or ""."""
    floor = run.floors[0]
    shape = PRESETS.get(floor.preset)
    if shape is None:
        return (f"its preset {floor.preset!r} is not one the book knows ({', '.join(PRESETS)}), so its "
                "bytes per step cannot be checked")
    if not any(close(floor.bytes_per_step, bytes_per_step(shape, floor.batch, floor.visible_tokens, d), ROUNDING)
               and floor.kv_bytes_per_token in (0, shape.kv_bytes_per_token(d)) for d in DTYPE_BYTES):
        expected = bytes_per_step(shape, floor.batch, floor.visible_tokens, 2)
        return (f"its floor counts {floor.bytes_per_step / 1e9:.4g} GB per step, but {floor.preset} at batch "
                f"{floor.batch} after {floor.visible_tokens - 1} prompt tokens moves "
                f"{expected / 1e9:.4g} GB in bf16 ({floor.bytes_per_step / expected:.3g}× that)")
    said = {"preset": floor.preset, "batch": floor.batch, "prompt_tokens": floor.visible_tokens - 1}
    differ = [f"{k} {run.settings.value(k)!r}" for k, v in said.items() if run.settings.value(k, v) != v]
    if differ:
        return (f"its settings say {', '.join(differ)}, but its floor is of {floor.preset} at batch "
                f"{floor.batch} after {floor.visible_tokens - 1} prompt tokens")
    return ""


def range_reason(run: Run) -> str:
    """Why the run's bandwidths, times, rows or date are outside what a machine gives, or ""."""
    low, high = GBPS_RANGE
    for bandwidth in (run.bandwidths.copy, run.bandwidths.read):
        if not low <= bandwidth.gbps <= high:
            return (f"its {bandwidth.kind} bandwidth of {bandwidth.gbps:.4g} GB/s is outside what any "
                    f"machine gives ({low:g} to {high:,.0f} GB/s)")
    for row in run.rows:
        if row.measured and row.timing.max_ms > MAX_STEP_MS:
            return (f"its {row.path} step takes up to {row.timing.max_ms / 1e3:.4g} s, longer than any "
                    f"decode step of a known preset ({MAX_STEP_MS / 1e3:g} s)")
    twice = sorted(path for path, n in Counter(row.path for row in run.rows).items() if n > 1)
    if twice:
        return f"it holds more than one row for {', '.join(map(repr, twice))}, where a card has one per path"
    try:
        when = datetime.fromisoformat(str(run.stamp.date))
    except ValueError:
        return (f"its date {str(run.stamp.date)[:40]!r} does not parse as a date (ISO 8601, as "
                "run_stamp writes it)")
    when = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
    if not EARLIEST <= when <= datetime.now(timezone.utc) + timedelta(days=1):
        return f"its date {when.date()} is before {EARLIEST.year} or in the future"
    return ""
