"""Core wing: the one check every number the book's arithmetic takes goes through."""
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


def is_bool(value) -> bool:
    """True for Python's and NumPy's booleans (np.True_) and one-element bool tensors: a yes/no, not a number."""
    if isinstance(value, bool) or type(value).__name__ in ("bool_", "bool"):
        return True
    dtype = getattr(value, "dtype", None)
    if dtype is None or str(dtype) not in ("bool", "torch.bool"):
        return False
    count = value.numel() if callable(getattr(value, "numel", None)) else getattr(value, "size", 1)
    return count == 1


def number(value, name: str, *, hint: str = "", above: float | None = None,
           at_least: float | None = None) -> float:
    """value as a finite float, greater than `above` and not below `at_least` when given."""
    try:
        result = math.nan if is_bool(value) or isinstance(value, (str, bytes)) else float(value)
    except (TypeError, ValueError, OverflowError, RuntimeError):
        result = math.nan
    if not math.isfinite(result) or (above is not None and not result > above) or (
            at_least is not None and result < at_least):
        bound = f" greater than {above:g}" if above is not None else f" >= {at_least:g}" if at_least is not None else ""
        raise _refuse(name, f"a finite number{bound}", value, hint)
    return result


def positive_number(value, name: str, hint: str = "") -> float:
    """value as a finite float greater than 0 (a bandwidth, a time, an overhead), or a ValueError."""
    return number(value, name, hint=hint, above=0.0)


def nonnegative_number(value, name: str, hint: str = "") -> float:
    """value as a finite float >= 0 (bytes, a gap that may be empty), or a ValueError."""
    return number(value, name, hint=hint, at_least=0.0)


def whole_number(value, name: str, *, at_least: int = 1, at_most: int | None = None, int_only: bool = False,
                 hint: str = "") -> int:
    """value as an int from at_least (to at_most when given): a batch, a count of tokens or kernels, or a
    ValueError; 8.0 is taken unless int_only (a Triton launch setting, where 8.0 would be a float constant)."""
    try:
        whole = None if is_bool(value) or isinstance(value, (str, bytes)) else int(value)
        exact = whole == value and (type(value) is int or not int_only)
    except (TypeError, ValueError, OverflowError, RuntimeError):
        exact = False
    if not exact or whole < at_least or (at_most is not None and whole > at_most):
        bound = f"from {at_least} to {at_most}" if at_most is not None else f">= {at_least}"
        raise _refuse(name, f"a whole number {bound}" + (" (a Python int)" if int_only else ""), value, hint)
    return whole


def _refuse(name: str, wanted: str, value, hint: str) -> ValueError:
    return ValueError(f"{name} must be {wanted}, got {shown(value)}" + (f"; {hint}" if hint else ""))


DTYPE_BYTES = (1, 2, 4, 8)  # bytes per element of the dtypes the book's arithmetic takes (bf16 is 2)


def element_bytes(value, name: str = "dtype_bytes") -> int:
    """value as bytes per element, one of DTYPE_BYTES, or a ValueError that says which are taken."""
    try:
        ok = not is_bool(value) and not isinstance(value, (str, bytes)) and value in DTYPE_BYTES
    except (TypeError, ValueError, RuntimeError):
        ok = False
    if not ok:
        raise ValueError(f"{name} must be 1, 2, 4 or 8 (bf16 is 2), got {shown(value)}")
    return int(value)


def text(value, name: str, *, hint: str = "") -> str:
    """value as a non-empty line of text (a name, a label), or a ValueError that says what came."""
    if not isinstance(value, str) or not value.strip():
        raise _refuse(name, "a non-empty string", value, hint)
    return value


def a_path(value, name: str, *, hint: str = ""):
    """value as a Path (from text or a path object, not empty), or a ValueError that says what came."""
    from pathlib import Path

    if isinstance(value, bytes) or not isinstance(value, (str, Path)) or not str(value).strip():
        raise _refuse(name, "a path (text or a pathlib.Path)", value, hint)
    return Path(value)


def instance(value, kind, name: str, *, hint: str = ""):
    """value when it is a kind (a class, or a tuple of classes), else a ValueError naming the kind wanted."""
    if not isinstance(value, kind):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        wanted = " or ".join(f"a {k.__name__}" for k in kinds)
        raise _refuse(name, wanted, value, hint)
    return value


def function(value, name: str, *, hint: str = ""):
    """value when it can be called, else a ValueError (a function is what the caller must pass)."""
    if not callable(value):
        raise _refuse(name, "a function (something to call)", value, hint)
    return value


def whole_numbers(values, name: str, *, at_least: int = 1, hint: str = "") -> list[int]:
    """values as a non-empty list of whole numbers >= at_least, or a ValueError naming the first bad one."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise _refuse(name, f"a list of whole numbers >= {at_least}", values, hint)
    items = [whole_number(v, f"every item of {name}", at_least=at_least, hint=hint) for v in values]
    if not items:
        raise _refuse(name, f"a non-empty list of whole numbers >= {at_least}", values, hint)
    return items


def with_attributes(value, name: str, attributes: tuple[str, ...], *, hint: str = ""):
    """value when it has every named attribute (a model: device, shape), else a ValueError naming the first missing."""
    missing = [a for a in attributes if not hasattr(value, a)]
    if missing:
        raise _refuse(name, f"an object with .{', .'.join(attributes)}", value, hint)
    return value
