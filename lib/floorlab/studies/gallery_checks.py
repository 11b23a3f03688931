"""Studies wing: the chapter "A gallery of cards", what a stranger's card must agree with: the physics.

A card's numbers can be consistent with each other and still be impossible: bytes per step
inflated with the floor, the multiple and the bandwidth made to match. So a card is also
checked against what the book computes itself: the bytes of its preset at its batch and
context, a preset the book knows, times and bandwidths a machine can give, a date that
parses, one row per path. Each check returns the reason a card is impossible, or "".
"""
from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone

from floorlab.core.roofline import bytes_per_step
from floorlab.core.runs import Run
from floorlab.core.shapes import PRESETS

DTYPE_BYTES = (1, 2, 4)  # the weight and cache widths a run may have been measured in
MAX_STEP_MS = 120_000.0  # no decode step of a known preset takes two minutes on a working machine
MAX_GBPS = 100_000.0  # 20 times the fastest memory made; more is a typo or an invention
MIN_GBPS = 0.1  # slower than any machine that runs torch
EARLIEST = datetime(2020, 1, 1, tzinfo=timezone.utc)  # before the book and the models it measures
ROUNDING = 1e-3


def _close(value: float, expected: float) -> bool:
    return abs(value - expected) <= ROUNDING * abs(expected)


def bytes_reason(run: Run) -> str:
    """Why the run's floor cannot be of its preset at its batch and context, or ""."""
    floor = run.floors[0]
    shape = PRESETS.get(floor.preset)
    if shape is None:
        return (f"its preset {floor.preset!r} is not one the book knows ({', '.join(PRESETS)}), so its "
                "bytes per step cannot be checked")
    fits = [d for d in DTYPE_BYTES
            if _close(floor.bytes_per_step, bytes_per_step(shape, floor.batch, floor.visible_tokens, d))
            and floor.kv_bytes_per_token in (0, shape.kv_bytes_per_token(d))]
    if not fits:
        expected = bytes_per_step(shape, floor.batch, floor.visible_tokens, 2)
        return (f"its floor counts {floor.bytes_per_step / 1e9:.4g} GB per step, but {floor.preset} at batch "
                f"{floor.batch} after {floor.visible_tokens - 1} prompt tokens moves "
                f"{expected / 1e9:.4g} GB in bf16 ({floor.bytes_per_step / expected:.3g}× that)")
    settings = run.settings if isinstance(run.settings, dict) else {}
    said = {"preset": floor.preset, "batch": floor.batch, "prompt_tokens": floor.visible_tokens - 1}
    differ = [f"{k} {settings[k]!r}" for k, v in said.items() if k in settings and settings[k] != v]
    if differ:
        return (f"its settings say {', '.join(differ)}, but its floor is of {floor.preset} at batch "
                f"{floor.batch} after {floor.visible_tokens - 1} prompt tokens")
    return ""


def range_reason(run: Run) -> str:
    """Why the run's times, bandwidths, date or rows are outside what a machine gives, or ""."""
    for bandwidth in (run.bandwidths.copy, run.bandwidths.read):
        if not MIN_GBPS <= bandwidth.gbps <= MAX_GBPS:
            return (f"its {bandwidth.kind} bandwidth of {bandwidth.gbps:.4g} GB/s is outside what any "
                    f"machine gives ({MIN_GBPS:g} to {MAX_GBPS:,.0f} GB/s)")
    for row in run.rows:
        if row.measured and row.timing.max_ms > MAX_STEP_MS:
            return (f"its {row.path} step takes up to {row.timing.max_ms / 1e3:.4g} s, longer than any "
                    f"decode step of a known preset ({MAX_STEP_MS / 1e3:g} s)")
    twice = sorted(path for path, n in Counter(row.path for row in run.rows).items() if n > 1)
    if twice:
        return f"it holds more than one row for {', '.join(map(repr, twice))}, where a card has one per path"
    return date_reason(run.stamp.get("date"))


def date_reason(text) -> str:
    """Why text is not the UTC date a run is stamped with (ISO 8601, past, not before 2020), or ""."""
    try:
        when = datetime.fromisoformat(str(text))
    except ValueError:
        return f"its date {str(text)[:40]!r} does not parse as a date (ISO 8601, as run_stamp writes it)"
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    if not EARLIEST <= when <= datetime.now(timezone.utc) + timedelta(days=1):
        return f"its date {when.date()} is before {EARLIEST.year} or in the future"
    return ""
