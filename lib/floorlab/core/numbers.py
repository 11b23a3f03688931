"""Core wing: the one check every number the book's arithmetic takes goes through.

A number is finite, of a number type (not text, not a yes/no), and on the right side of
zero; anything else raises a ValueError that names it, says what came and how to fix it.
"""
from __future__ import annotations

import math

SHOWN_CHARS = 40  # how much of a refused value an error message quotes


def shown(value, *, typed: bool = True) -> str:
    """A refused value as an error message quotes it: its type (when typed), then a short repr ('int 300')."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an int of about {int(value.bit_length() * math.log10(2))} digits"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a repr that fails still gets a message
        text = "?"
    if len(text) > SHOWN_CHARS:
        text = text[: SHOWN_CHARS - 3] + "..."
    return f"{type(value).__name__} {text}" if typed else text


def _is_bool(value) -> bool:
    return isinstance(value, bool) or type(value).__name__ in ("bool_", "bool")


def number(value, name: str, *, hint: str = "", above: float | None = None,
           at_least: float | None = None) -> float:
    """value as a finite float, greater than `above` and not below `at_least` when given.

    Accepts Python, NumPy and 0-d torch numbers; refuses text, booleans, NaN and infinities.
    """
    bound = (f" greater than {above:g}" if above is not None else
             f" >= {at_least:g}" if at_least is not None else "")
    why = f"{name} must be a finite number{bound}, got {{}}" + (f"; {hint}" if hint else "")
    if _is_bool(value) or isinstance(value, (str, bytes)) or value is None:
        raise ValueError(why.format(shown(value)))
    try:
        result = float(value)
    except (TypeError, ValueError, OverflowError, RuntimeError):
        raise ValueError(why.format(shown(value))) from None
    if not math.isfinite(result):
        raise ValueError(why.format(shown(value)))
    if (above is not None and not result > above) or (at_least is not None and result < at_least):
        raise ValueError(why.format(shown(value)))
    return result


def positive_number(value, name: str, hint: str = "") -> float:
    """value as a finite float greater than 0 (a bandwidth, a time, an overhead), or a ValueError."""
    return number(value, name, hint=hint, above=0.0)


def nonnegative_number(value, name: str, hint: str = "") -> float:
    """value as a finite float >= 0 (bytes, a gap that may be empty), or a ValueError."""
    return number(value, name, hint=hint, at_least=0.0)


def whole_number(value, name: str, *, at_least: int = 1, hint: str = "") -> int:
    """value as an int >= at_least (a batch, a count of tokens or kernels), or a ValueError.

    A float is taken when it is whole (8.0); 2.5, text, booleans and NaN are refused.
    """
    why = f"{name} must be a whole number >= {at_least}, got {{}}" + (f"; {hint}" if hint else "")
    if _is_bool(value) or isinstance(value, (str, bytes)) or value is None:
        raise ValueError(why.format(shown(value)))
    try:
        whole = int(value)
        exact = whole == value
    except (TypeError, ValueError, OverflowError, RuntimeError):
        raise ValueError(why.format(shown(value))) from None
    if not exact or whole < at_least:
        raise ValueError(why.format(shown(value)))
    return whole
