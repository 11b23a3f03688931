"""Core wing: what every challenge check shares: one line ("not attempted yet", "right", or "not yet" and a hint,
a named mistake refused by name), and worked answers kept hidden unless asked for or FLOORLAB_SHOW_ANSWERS=1."""
from __future__ import annotations

import contextlib
import enum
import io
import math
from typing import Callable, Iterator, Sequence

from floorlab.core.environment import flag
from floorlab.core.numbers import is_bool, number, text

SHOW_ANSWERS_ENV = "FLOORLAB_SHOW_ANSWERS"
HIDDEN = ("The worked answer is computed but kept hidden. To see it, set\n"
          "show_answer = True in the challenge cell above and run this cell again.")

NOT_ATTEMPTED = "not attempted yet: edit the cell above, then run it and this check again."


class Unreadable(Exception):
    """An answer that is not a usable number; the message says how to write it."""


def read_bool(value, name: str) -> bool:
    """The answer as True or False: Python's, NumPy's or a one-element tensor's boolean."""
    if is_bool(value):
        return bool(value)
    raise Unreadable(f"not yet: {name} should be True or False, got {type(value).__name__} "
                     f"{value!r}.")


def read_number(value, name: str, *, fraction: bool = False) -> float:
    """The answer as a float from any number type; raises Unreadable with a hint for strings,
    booleans, percents or NaN."""
    if is_bool(value):
        raise Unreadable(f"not yet: {name} is {value}, a yes/no; write a number there.")
    if isinstance(value, (str, bytes)):
        raise Unreadable(f"not yet: {name} is the text {value!r}; write the number itself, "
                          "without quotes (for example 17.5, not '17.5 µs').")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise Unreadable(f"not yet: {name} should be a number, got {type(value).__name__} "
                          f"{value!r}.") from None
    if not math.isfinite(number):
        raise Unreadable(f"not yet: {name} is {value!r}; write a finite number.")
    if fraction and 1.0 < number <= 100.0:
        raise Unreadable(f"not yet: {name} = {value!r} looks like a percent; write it as a "
                          f"fraction between 0 and 1 ({number / 100:.2f}, not {value!r}).")
    return number


def checked(verdict: Callable[..., str]) -> Callable[..., str]:
    """Let a check answer an unreadable number with its hint instead of an exception."""
    def check(*args, **kwargs):
        try:
            return verdict(*args, **kwargs)
        except Unreadable as problem:
            return str(problem)
    check.__name__, check.__doc__ = verdict.__name__, verdict.__doc__
    return check


def close(value: float, expected: float, rel: float) -> bool:
    """True when value lies within rel (a fraction) of expected."""
    return abs(value - expected) <= rel * abs(expected)


SAME_ANSWER = 0.005  # a wrong quantity within 0.5% of the right one gives the right answer anyway


def plausible_wrongs(expected, wrongs: dict[str, float | None], *, apart: float = SAME_ANSWER
                     ) -> dict[str, float]:
    """The named wrong answers worth refusing: those known and finite, each value once (under its first name), and more
    than apart (a fraction) from expected, one number or several right forms (a sequence or {form: number})."""
    kept: dict[str, float] = {}
    for mistake, value in wrongs.items():
        if (value is not None and math.isfinite(value) and value not in kept.values()
                and not any(close(value, right, apart) for right in _forms(expected))):
            kept[mistake] = value
    return kept


class Verdict(enum.Enum):
    """How a number read from the reader stands against the right answer (judge)."""
    RIGHT = "right"          # within the tolerance of the right answer
    WRONG = "wrong"          # within the tolerance of a named plausible mistake
    PRECISION = "precision"  # near the right answer, but not yet told apart from a mistake
    FAR = "far"              # none of these


def tolerance(expected: float, rel: float, wrong: dict[str, float] | None = None) -> float:
    """rel (a fraction) narrowed to half the distance from expected to the nearest wrong answer."""
    gaps = [abs(other - expected) / (2 * abs(expected)) for other in (wrong or {}).values() if other != expected]
    return min([rel, *gaps])


def judge(value: float, expected: float, *, rel: float, wrong: dict[str, float] | None = None
          ) -> tuple[Verdict, str]:
    """(Verdict, the mistake it names or "") for a number read from the reader; the tolerance shrinks to half the
    distance to the nearest wrong answer, so no answer is both right and wrong."""
    wrong = {mistake: other for mistake, other in (wrong or {}).items() if other != expected}
    tight = tolerance(expected, rel, wrong)
    if close(value, expected, tight):
        return Verdict.RIGHT, ""
    for mistake, other in wrong.items():
        if close(value, other, tight):
            return Verdict.WRONG, mistake
    if close(value, expected, rel):
        return Verdict.PRECISION, min(wrong, key=lambda m: abs(wrong[m] - value))
    return Verdict.FAR, ""


def refusal(value: float, expected: float | Sequence[float] | dict[str, float], *, rel: float, hint: str,
            name: str = "your answer", what: str = "number", wrong: dict[str, float] | None = None,
            lead: str = "") -> str | None:
    """None when value is within rel of expected (or of a right form), narrowed so no mistake in wrong passes; else the
    line refusing it: the mistake it matches and the hint, a request for more digits, or the hint alone."""
    judged: dict[Verdict, tuple[str, float]] = {}
    for right in _forms(expected):
        verdict, mistake = judge(value, right, rel=rel, wrong=wrong)
        judged.setdefault(verdict, (mistake, right))
    verdict = next(v for v in Verdict if v in judged)  # the best: Verdict runs from right to far
    mistake, right = judged[verdict]
    if verdict is Verdict.RIGHT:
        return None
    if verdict is Verdict.WRONG:
        return f"not yet: {lead}that is the {what} you get with {mistake}. {_sentence(hint)}"
    if verdict is Verdict.PRECISION:
        return (f"not yet: {lead}close, but give more digits: the {what} made with {mistake} lies "
                f"near the right one, so this check needs {name} within "
                f"{tolerance(right, rel, wrong) * 100:.2g}% of it.")
    return f"not yet: {lead}{hint}"


def _forms(expected) -> list:
    """The right answer's forms: a list or tuple as given, a dict's values ({form: number}), or one number alone."""
    if isinstance(expected, dict):
        return list(expected.values())
    return list(expected) if isinstance(expected, (list, tuple)) else [expected]


def _sentence(hint: str) -> str:
    """hint as a sentence of its own: a first plain word gets its capital ("my_x" keeps its case)."""
    first = hint.split(" ", 1)[0]
    return hint[:1].upper() + hint[1:] if first.isalpha() else hint


@checked
def check_number(value, expected: float | Sequence[float] | dict[str, float], *, rel: float = 0.05, hint: str,
                 unit: str = "", name: str = "your answer", fraction: bool = False,
                 wrong: dict[str, float] | None = None) -> str:
    """Verdict on one numeric answer: right within rel of expected, or of any one of several right forms (narrowed so no
    plausible wrong answer in `wrong` also passes), the named mistake, a request for more digits, or the hint."""
    how = "pass the right answer, computed from this run (a number, or a list of its right forms)"
    rights = [number(r, "expected", hint=how) for r in _forms(expected)]
    if not rights:
        raise ValueError(f"expected is empty ({expected!r}); {how}")
    rel = number(rel, "rel", at_least=0.0, hint="pass a tolerance from 0 (exact) to 1, e.g. rel=0.05")
    text(hint, "hint", hint="say how to get the answer")
    if value is None:
        return NOT_ATTEMPTED
    refused = refusal(read_number(value, name, fraction=fraction), rights, rel=rel, hint=hint,
                      name=name, wrong=wrong)
    return refused or f"right: {' or '.join(dict.fromkeys(f'{r:,.4g}' for r in rights))}{unit}."


def answers_shown(show: bool = False) -> bool:
    """True when worked answers print: asked for (show), or on the built site (the env variable)."""
    if not (is_bool(show) or (isinstance(show, int) and show in (0, 1))):
        raise ValueError(f"show_answer should be True or False, got {type(show).__name__} {show!r}; "
                         "write show_answer = True (no quotes) to see the worked answer")
    return bool(show) or flag(SHOW_ANSWERS_ENV)


@contextlib.contextmanager
def worked_answer(show: bool = False) -> Iterator[None]:
    """Keep a worked answer's printed output and figures back unless the reader asked for them."""
    if answers_shown(show):
        yield
        return
    try:
        from IPython.utils.capture import capture_output
    except ImportError:  # plain Python: stdout is all there is
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    else:
        with capture_output(display=True):
            yield
    print(HIDDEN)
