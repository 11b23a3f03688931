"""Core wing: one typed record for every measured run: a chapter's run and the bench's run share
this layout (where stored runs are found: core.reference)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from floorlab.core.bandwidth import Bandwidths
from floorlab.core.device import DeviceFacts
from floorlab.core.files import load_json, save_json
from floorlab.core.host import Host
from floorlab.core.launches import LaunchCount
from floorlab.core.numbers import shown
from floorlab.core.roofline import Floor, achieved_gbps, check_floor
from floorlab.core.settings import RunSettings
from floorlab.core.stamp import Stamp, run_stamp  # noqa: F401  (run_stamp: read from here too)
from floorlab.core.timelines import Timeline
from floorlab.core.timing import StepTimes, Timing

LAYOUT = 2  # bump when the stored layout changes; Run.from_dict refuses other layouts
STATUSES = ("measured", "absent", "failed")
CARD_KIND = "measure"  # the kind of a Run that `python -m floorlab measure` writes: one card


@dataclass
class Row:
    """One decode path at one configuration: its timing, multiple of the floor and checks."""

    path: str
    preset: str
    batch: int
    status: str = "measured"
    timing: Timing | None = None
    issue: Timing | None = None
    x_floor: float | None = None
    achieved_gbps: float | None = None
    kernels: int | None = None
    kernels_per_layer: float | None = None
    bit_identical: bool | None = None
    max_abs_diff: float | None = None
    compile_s: float | None = None
    note: str = ""

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    @property
    def median_ms(self) -> float | None:
        """The median step time in ms, or None when the path was not measured."""
        return self.timing.median_ms if self.timing is not None else None

    @property
    def measured(self) -> bool:
        """True when the path ran and was timed."""
        return self.status == "measured" and self.timing is not None

    def issue_note(self) -> str:
        """A warning when the host's issue time exceeds the step beyond its spread, else ''."""
        if self.timing is None or self.issue is None:
            return ""
        return StepTimes(step=self.timing, issue=self.issue).note()

    def to_dict(self) -> dict:
        out = dict(vars(self))
        out["timing"] = self.timing.to_dict() if self.timing else None
        out["issue"] = self.issue.to_dict() if self.issue else None
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Row":
        data = dict(data)
        for key in ("timing", "issue"):
            data[key] = Timing.from_dict(data[key]) if data.get(key) else None
        return cls(**data)


def row_key(preset: str, batch: int, path: str) -> str:
    """'<preset> b<batch> <path>': how a run names the timeline or launch count behind a row."""
    return f"{preset} b{batch} {path}"


def measured_row(path: str, floor: Floor, timing: Timing, *, issue: Timing | None = None,
                 **fields) -> Row:
    """A measured Row: the timing against its floor (check_floor warns below it) and its GB/s."""
    return Row(path=path, preset=floor.preset, batch=floor.batch, timing=timing, issue=issue,
               x_floor=check_floor(timing.median_ms, floor.floor_ms, what=f"{path} {floor.preset}"),
               achieved_gbps=achieved_gbps(floor.bytes_per_step, timing.median_ms), **fields)


@dataclass
class Run:
    """A measured run of a chapter or of the bench, in the book's one layout."""

    kind: str
    stamp: Stamp
    device: DeviceFacts
    bandwidths: Bandwidths | None = None
    floors: list[Floor] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    timelines: dict[str, Timeline] = field(default_factory=dict)
    launches: dict[str, LaunchCount] = field(default_factory=dict)
    facts: dict = field(default_factory=dict)
    settings: RunSettings = field(default_factory=RunSettings)
    host: Host | None = None  # the CPU behind the device and its measured cost per eager launch

    def __post_init__(self):
        if isinstance(self.stamp, dict):  # a stamp, device facts or settings given as stored JSON
            self.stamp = Stamp.from_dict(self.stamp)
        if isinstance(self.device, dict):
            self.device = DeviceFacts.from_dict(self.device)
        if isinstance(self.settings, dict):
            self.settings = RunSettings.from_dict(self.settings)

    @property
    def label(self) -> str:
        """'<device name>, <date>': how a figure or a sentence names this run."""
        return f"{self.device.name}, {str(self.stamp.date or '')[:10]}"

    @property
    def on_gpu(self) -> bool:
        """True when the run was made on a CUDA device."""
        return self.device.kind == "cuda"

    def floor(self, preset: str | None = None, batch: int | None = None) -> Floor:
        """The Floor of a configuration (the only one when the run has one)."""
        found = [f for f in self.floors if preset in (None, f.preset) and batch in (None, f.batch)]
        if len(found) != 1:
            known = ", ".join(f"{f.preset} b{f.batch}" for f in self.floors) or "none"
            raise KeyError(f"{len(found)} floors match preset={preset!r} batch={batch!r}; "
                           f"this run has: {known}")
        return found[0]

    def find(self, path: str, preset: str | None = None, batch: int | None = None) -> Row | None:
        """The measured Row of a path (and preset, batch), or None."""
        return next((r for r in self.rows if r.path == path and r.measured
                     and preset in (None, r.preset) and batch in (None, r.batch)), None)

    def row(self, path: str, preset: str | None = None, batch: int | None = None) -> Row:
        """The measured Row of a path; KeyError naming the paths this run has otherwise."""
        found = self.find(path, preset, batch)
        if found is None:
            known = sorted({r.path for r in self.rows if r.measured}) or ["none"]
            raise KeyError(f"no measured row {path!r} (preset={preset!r}, batch={batch!r}); "
                           f"this run measured: {', '.join(known)}")
        return found

    def best_row(self) -> Row | None:
        """The measured row with the shortest median step, or None when nothing was measured."""
        return min((r for r in self.rows if r.measured), key=lambda r: r.median_ms, default=None)

    def to_dict(self) -> dict:
        return {
            "layout": LAYOUT, "kind": self.kind, "stamp": self.stamp.to_dict(),
            "device": self.device.to_dict(),
            "bandwidths": self.bandwidths.to_dict() if self.bandwidths else None,
            "floors": [f.to_dict() for f in self.floors],
            "rows": [r.to_dict() for r in self.rows],
            "timelines": {k: t.to_dict() for k, t in self.timelines.items()},
            "launches": {k: c.to_dict() for k, c in self.launches.items()},
            "facts": self.facts, "settings": self.settings.to_dict(),
            "host": self.host.to_dict() if self.host else None,
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Run":
        """Rebuild a Run; a file in another layout gets an error saying how to remake it."""
        if not isinstance(data, dict):
            raise ValueError(f"a run is stored as a JSON object, got {shown(data)}; pass the dict that "
                             "Run.to_dict() or load_json(path) of a saved run gives")
        if data.get("layout") != LAYOUT:
            raise ValueError(f"this run is stored in layout {data.get('layout')!r}, but the book "
                             f"reads layout {LAYOUT}; measure it again to store it anew")
        problems = [f"no {key}" for key in ("kind", "stamp", "device") if key not in data]
        problems += [f"a wrong type for {key} ({shown(data[key])})" for key, kind in RUN_FIELDS.items()
                     if key in data and not isinstance(data[key], kind)]
        if problems:
            raise ValueError(f"this run has {', '.join(problems)}; it is not in the book's run layout, so "
                             "measure it again to store it anew")
        return cls(
            kind=data["kind"], stamp=Stamp.from_dict(data["stamp"]), device=DeviceFacts.from_dict(data["device"]),
            bandwidths=Bandwidths.from_dict(data["bandwidths"]) if data.get("bandwidths") else None,
            floors=[Floor.from_dict(f) for f in data.get("floors", [])],
            rows=[Row.from_dict(r) for r in data.get("rows", [])],
            timelines={k: Timeline.from_dict(t) for k, t in data.get("timelines", {}).items()},
            launches={k: LaunchCount.from_dict(c) for k, c in data.get("launches", {}).items()},
            facts=data.get("facts", {}), settings=RunSettings.from_dict(data.get("settings", {})),
            host=Host.from_dict(data["host"]) if data.get("host") else None,  # runs before it: None
        )

    def save(self, path) -> Path:
        """Write the run as JSON at path; returns the path."""
        return save_json(self.to_dict(), path)

    @classmethod
    def load(cls, path) -> "Run":
        """Read a run written by save()."""
        return cls.from_dict(load_json(path))


RUN_FIELDS = {"kind": str, "stamp": dict, "device": dict, "floors": list, "rows": list, "timelines": dict,
              "launches": dict, "facts": dict, "settings": dict}  # a stored run's fields, by JSON type
