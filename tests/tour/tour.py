"""A tour of bad inputs: what a new user, or a hostile file, throws at the book, and how each is answered.

Each case throws one bad input at the library, the command line, the gallery, the checks, the
environment, the files or the processes, and its outcome is one of:
  clear   refused (or answered "not yet") with a message that names the problem;
  raw     an internal error: a traceback that says nothing about the fix;
  silent  accepted without a word, or a hang;
  lost    a finished measurement or a file lost or damaged.
`python tests/tour/tour.py` prints the table; tests/tour/test_tour.py holds the book to it.
Everything runs in this process on tiny shapes, so the tour takes seconds, not minutes.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import re
import sys
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

AREAS = ("library", "command line", "gallery", "checks", "environment", "files", "processes")
OUTCOMES = ("clear", "raw", "silent", "lost")
# exception messages that come from Python or torch internals, not from the book
RAW = re.compile(
    r"unsupported operand|not subscriptable|object is not iterable|takes \d+ positional|"
    r"unexpected keyword|could not convert|invalid literal|must be real number|"
    r"not supported between|has no len|cannot unpack|math domain|object has no attribute|"
    r"division by zero|list index out of range|"
    r"(?-i:^Expected )|size mismatch|must be Tensor|argument .* must be|too many values",
    re.I,
)
INTERNAL = (
    AttributeError,
    KeyError,
    IndexError,
    ZeroDivisionError,
    AssertionError,
    RecursionError,
    NameError,
    UnboundLocalError,
    NotImplementedError,
    StopIteration,
    OverflowError,
)
HANG_S = 20.0
NAN, INF = math.nan, math.inf


@dataclass
class Case:
    area: str
    what: str
    run: Callable[[], object]
    # given what run returned, "" when that return is a fine answer, else why it is silent (or "lost: ...")
    judge: Callable[[object], str] | None = None


def refuse(_result) -> str:
    return "returned without a word"


def verdict(result) -> str:
    """A check's answer: a 'not yet' or 'not attempted' line is clear; 'right' for a bad input is silent."""
    if isinstance(result, str) and result.startswith(("not yet", "not attempted")):
        return ""
    return f"answered {str(result)[:60]!r}"


def classify(case: Case) -> tuple[str, str]:
    """(outcome, detail) for one case, run in a thread so that a hang is seen, not suffered."""
    box: dict = {}
    err_text = io.StringIO()

    def go():
        try:
            with contextlib.redirect_stderr(err_text), contextlib.redirect_stdout(io.StringIO()):
                box["result"] = case.run()
        except BaseException as err:  # noqa: BLE001 - every outcome is classified
            box["error"] = err

    worker = threading.Thread(target=go, daemon=True)
    worker.start()
    worker.join(HANG_S)
    if worker.is_alive():
        return "silent", f"still running after {HANG_S:g} s"
    if "error" not in box:
        problem = (case.judge or refuse)(box.get("result"))
        if problem.startswith("lost"):
            return "lost", problem
        return ("silent", problem) if problem else ("clear", "answered")
    err = box["error"]
    text = str(err)
    if isinstance(err, SystemExit):
        said = err_text.getvalue().strip().splitlines()
        message = said[-1] if said else str(err.code)
        if err.code in (0, None) or len(message) < 20:
            return "raw", f"exit {err.code} {message[:80]}"
        return "clear", message[:100]
    if isinstance(err, KeyboardInterrupt):
        return "raw", "KeyboardInterrupt"
    if case.judge is not None:
        try:  # a judge that looks at files says whether the failure cost one
            problem = case.judge(err)
        except Exception:  # noqa: BLE001 - a judge of results only
            problem = ""
        if problem.startswith("lost"):
            return "lost", problem
    name = type(err).__name__
    if isinstance(err, INTERNAL) or RAW.search(text) or len(text) < 20:
        return "raw", f"{name}: {text[:100]}"
    if isinstance(err, (ValueError, TypeError, OSError, LookupError, RuntimeError, Warning)):
        return "clear", f"{name}: {text[:100]}"
    return "raw", f"{name}: {text[:100]}"


def run_tour(cases: list[Case]) -> list[tuple[Case, str, str]]:
    return [(case, *classify(case)) for case in cases]


def table(results) -> str:
    counts = Counter((case.area, outcome) for case, outcome, _ in results)
    lines = [f"{'area':<14}" + "".join(f"{o:>8}" for o in OUTCOMES) + f"{'total':>8}"]
    for area in AREAS:
        row = [counts[(area, o)] for o in OUTCOMES]
        lines.append(f"{area:<14}" + "".join(f"{n:>8}" for n in row) + f"{sum(row):>8}")
    total = [sum(counts[(a, o)] for a in AREAS) for o in OUTCOMES]
    lines.append(f"{'all':<14}" + "".join(f"{n:>8}" for n in total) + f"{sum(total):>8}")
    return "\n".join(lines)


def all_cases(work: Path) -> list[Case]:
    from tour_cases import cases_for  # beside this file

    return cases_for(work)


def main() -> int:
    sys.path.insert(0, str(Path(__file__).parent))
    with tempfile.TemporaryDirectory(prefix="floorlab-tour-") as work:
        results = run_tour(all_cases(Path(work)))
    print(table(results))
    verbose = "-v" in sys.argv
    for case, outcome, detail in results:
        if outcome != "clear" or verbose:
            print(f"{outcome:<7} {case.area:<13} {case.what}: {detail}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    sys.exit(main())
