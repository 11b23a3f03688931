"""Core wing: the machinery every challenge check shares.

Each check returns a one-line verdict: "not attempted yet", "right", or "not yet" with a
hint. A check reads the reader's answer with read_number, which turns text, yes/no values,
percents and NaN into a hint rather than an exception.
"""
from __future__ import annotations

from typing import Callable

NOT_ATTEMPTED = "not attempted yet: edit the cell above, then run it and this check again."


class Unreadable(Exception):
    """An answer that is not a usable number; the message says how to write it."""


def read_number(value, name: str, *, fraction: bool = False) -> float:
    """The answer as a float; raises Unreadable with a hint for strings, bools, percents or NaN."""
    if isinstance(value, bool):
        raise Unreadable(f"not yet: {name} is {value}, a yes/no; write a number there.")
    if isinstance(value, str):
        raise Unreadable(f"not yet: {name} is the text {value!r}; write the number itself, "
                          "without quotes (for example 17.5, not '17.5 µs').")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise Unreadable(f"not yet: {name} should be a number, got {type(value).__name__} "
                          f"{value!r}.") from None
    if number != number or number in (float("inf"), float("-inf")):
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
    return abs(value - expected) <= rel * abs(expected)


# Generic numeric answers (used by the chapter "The floor on a fast card").

@checked
def check_number(value, expected: float, *, rel: float = 0.05, hint: str, unit: str = "",
                 name: str = "your answer", fraction: bool = False) -> str:
    """Verdict on one numeric answer: right within rel, or a hint."""
    if value is None:
        return NOT_ATTEMPTED
    if close(read_number(value, name, fraction=fraction), expected, rel):
        return f"right: {expected:,.3g}{unit}."
    return f"not yet: {hint}"
