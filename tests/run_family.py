"""A family of runs for the claim tests, and the checks every chapter's sentences must pass.

Members: each stored run as it is, a CPU run stored with the tests (tests/runs/), and copies
perturbed or simulated from them. A perturbed or simulated member is a test input, labelled
"simulated" in its name; it is never shown to a reader as measured.

The checks read the text a chapter's claim code builds from a member:
- no `inf` or `nan`;
- no time, bandwidth, size or ratio over three significant figures (exact counts, written
  without a unit of time, bandwidth, size or a multiple, stay whole);
- no typed claim: once every sentence timing.compare chose is taken out, no comparative
  word is left (faster, slower, grows, shrinks, within, beyond, most, least, ...).
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path

from floorlab.core.reference import other_host_dirs, reference_run
from floorlab.core.runs import Run
from floorlab.core.timing import Timing

RUNS = Path(__file__).resolve().parent / "runs"
NOISY = (0.5, 0.7, 0.9, 1.0, 1.0, 1.0, 1.1, 1.4, 1.8, 2.0)  # a noisy timing's samples, × its median

# a number and the unit after it; a count (bytes, parameters, kernels, tokens) has none of these
UNITS = r"(?:ms|µs|us|ns|s|GB/s|TB/s|MB/s|TFLOP/s|GB|MB|KB|kB|TB|×|%|times)"
MEASURE = re.compile(r"(?<![\w.,])(-?\d[\d,]*(?:\.\d+)?)\s?" + UNITS + r"(?![\w/])")
NOT_FINITE = re.compile(r"\b(?:inf|nan|infinity)\b", re.IGNORECASE)
COMPARATIVES = re.compile(
    r"\b(?:faster|slower|quicker|grows?|grew|growing|shrinks?|shrank|within|beyond|most|least|"
    r"closer|further|as fast as|more than|less than|fewer than|cheaper|dearer|falls?|fell|rises?|"
    r"rose|halve[sd]?|double[sd]?|dominates?|outpaces?|overtakes?|apart|overlap(?:s|ping)?|"
    r"nearly|almost|about as)\b", re.IGNORECASE)

EXPECTATIONS = ("claim:", "expected:")  # a line stating what a cell expects before it measures
NOT_COMPARISONS = ("beyond the floor", "beyond its floor", "beyond their bytes", "beyond its bytes",
                   "beyond the bytes")  # the time above the floor, a quantity, not a comparison


@dataclass(frozen=True)
class Member:
    """One run of the family: a name that says what it is, and the Run."""

    name: str
    run: Run

    @property
    def simulated(self) -> bool:
        """True for a perturbed or simulated copy: a test input, never a measurement."""
        return self.name.startswith("simulated")


def _timing_dict(data: dict, change) -> dict:
    return change(Timing.from_dict(data)).to_dict()


def _walk(node, change, select, row: dict | None = None):
    """node with every timing dict under a row that select(row) accepts passed through change;
    a changed row's multiple of the floor and GB/s follow its median."""
    if isinstance(node, list):
        return [_walk(item, change, select, row) for item in node]
    if not isinstance(node, dict):
        return node
    if "median_ms" in node and "p10_ms" in node:
        return _timing_dict(node, change) if select(row or {}) else node
    row = node if isinstance(node.get("path"), str) else row
    out = {key: _walk(value, change, select, row) for key, value in node.items()}
    timing = node.get("timing")
    if isinstance(timing, dict) and "median_ms" in timing and select(row or {}):
        factor = out["timing"]["median_ms"] / timing["median_ms"] if timing["median_ms"] else 1.0
        if out.get("x_floor") is not None:
            out["x_floor"] = node["x_floor"] * factor
        if out.get("achieved_gbps") is not None:
            out["achieved_gbps"] = node["achieved_gbps"] / factor
    return out


def changed(run: Run, change, select=lambda row: True) -> Run:
    """A copy of run with change(Timing) -> Timing applied to the timings of the rows (dicts with a
    path) that select(row) accepts."""
    return Run.from_dict(_walk(copy.deepcopy(run.to_dict()), change, select))


def scaled(run: Run, factor: float, select=lambda row: True) -> Run:
    """Every selected timing times factor, its spread kept in proportion."""
    return changed(run, lambda t: Timing.from_samples([s * factor for s in t.samples_ms or
                                                        [t.p10_ms, t.median_ms, t.p90_ms]]), select)


def widened(run: Run, select=lambda row: True) -> Run:
    """Every selected timing's spread widened to noisy, its median kept."""
    return changed(run, lambda t: Timing.from_samples([t.median_ms * f for f in NOISY]), select)


def tight(value_ms: float) -> Timing:
    """A steady timing of value_ms (p10-p90 within 1%)."""
    return Timing.from_samples([value_ms * f for f in (0.995, 1.0, 1.0, 1.005)])


def is_eager(row: dict) -> bool:
    """True for a row of an eager path."""
    return "eager" in row.get("path", "")


def family(name: str, *, cpu: str | None = None) -> list[Member]:
    """The stored run `name`, the CPU run tests/runs/<cpu>.json when given, and simulated copies:
    the eager step ×0.5 and ×2, and every spread widened to noisy."""
    members = []
    try:
        run = reference_run(name)
    except FileNotFoundError:
        run = None
    if run is not None:
        members += [Member(f"stored {name}", run),
                    Member(f"simulated from {name}: eager ×0.5", scaled(run, 0.5, is_eager)),
                    Member(f"simulated from {name}: eager ×2", scaled(run, 2.0, is_eager)),
                    Member(f"simulated from {name}: every spread noisy", widened(run))]
    for folder in other_host_dirs():  # the same chapter stored on other H200 hosts
        if (folder / f"{name}.json").is_file():
            members.append(Member(f"stored {folder.name}/{name}", Run.load(folder / f"{name}.json")))
    if cpu is not None:
        own = Run.load(RUNS / f"{cpu}.json")
        members += [Member(f"cpu run {cpu}", own),
                    Member(f"simulated from {cpu}: every spread noisy", widened(own))]
    return members


def significant_figures(number: str) -> int:
    """Significant figures written in a number as printed: '1330' 3, '0.0275' 3, '7.80' 3."""
    digits = number.replace(",", "").lstrip("-")
    if "." in digits:
        return len(digits.replace(".", "").lstrip("0")) or 1
    return len(digits.strip("0")) or 1


def problems(text: str, said: list[tuple[str, object]]) -> list[str]:
    """What is wrong with a chapter's text: inf or nan, a measure over three significant figures,
    or a comparative word outside every sentence timing.compare chose (said)."""
    found = [f"not finite: {m.group(0)!r}" for m in NOT_FINITE.finditer(text)]
    for m in MEASURE.finditer(text):
        if significant_figures(m.group(1)) > 3:
            found.append(f"over three figures: {m.group(0)!r}")
    rest = " ".join(" ".join(line for line in text.splitlines()
                             if not line.lstrip().startswith(EXPECTATIONS)).split())
    for sentence, _ in sorted(said, key=lambda s: -len(s[0])):
        if sentence.strip():
            rest = re.sub(re.escape(" ".join(sentence.split())), " ", rest, count=1, flags=re.IGNORECASE)
    for phrase in NOT_COMPARISONS:
        rest = rest.replace(phrase, " ")
    found += [f"typed claim: ...{rest[max(m.start() - 50, 0):m.end() + 30]!r}..."
              for m in COMPARATIVES.finditer(rest)]
    return found
