"""Figures wing: the stacked bar, time per token split into the floor and what lies above it."""
from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from floorlab.core.numbers import positive_number, shown
from floorlab.core.prose import fmt_ms, fmt_times
from floorlab.core.roofline import is_below_floor
from floorlab.core.timing import NOISY_SPREAD
from floorlab.figures.style import (
    ABOVE_FLOOR,
    FLOOR_BLUE,
    INK,
    REST_ORANGE,
    bar_axis,
    finish,
    new_figure,
    spread_handle,
    whiskers,
)

LABEL_REACH = 0.04  # a whisker longer than this share of the axis moves the label onto the bar's end


def _bar_values(bars) -> list[tuple[str, float, float, float]]:
    """(label, median, p10, p90) in ms from {label: Timing or ms} or [(label, Timing or ms)]."""
    if isinstance(bars, (str, bytes)) or not hasattr(bars, "__iter__"):
        raise ValueError(f"bars must be {{label: Timing or ms}}, got {shown(bars)}; e.g. {{'eager': time_ms(step)}}")
    items = list(bars.items()) if hasattr(bars, "items") else list(bars)
    if not items:
        raise ValueError("stacked_bar needs at least one bar, e.g. {'eager': time_ms(step)}")
    out = []
    for item in items:
        try:
            label, value = item
        except (TypeError, ValueError):
            raise ValueError(f"each bar is a (label, Timing or ms) pair, got {item!r}") from None
        what = f"the bar {label!r}"
        if hasattr(value, "median_ms"):
            out.append((str(label), *(positive_number(getattr(value, f), f"{what}'s {f}")
                                      for f in ("median_ms", "p10_ms", "p90_ms"))))
        else:
            ms = positive_number(value, what, "pass a Timing or a time in ms")
            out.append((str(label), ms, ms, ms))
    return out


def stacked_bar(bars, floor_ms, *, title: str | None = None, path=None, note: str | None = None,
                xlabel: str = "time per decode token (ms)", floors: dict | None = None,
                floor_label: str = "memory traffic (the floor)") -> Figure:
    """Horizontal bars of time per token in ms from {label: Timing or ms}, each split into the floor and the rest, a
    p10-p90 whisker on each Timing; floor_ms is one floor or one per bar, floors {label: ms} for some."""
    values = _bar_values(bars)
    labels = [v[0] for v in values]
    totals = [v[1] for v in values]
    if floors:  # some bars' own floors by label, the rest at floor_ms
        floor_ms = [floors.get(label, floor_ms) for label in labels]
    floors = _bar_floors(floor_ms, len(values))
    one_floor = len(set(floors)) == 1
    floor_ms = floors[0] if one_floor else min(floors)
    lows = [max(t - p10, 0.0) for _, t, p10, _ in values]
    highs = [max(p90 - t, 0.0) for _, t, _, p90 in values]
    spreads = [lo + hi for lo, hi in zip(lows, highs)]
    floor_parts = [min(t, f) for t, f in zip(totals, floors)]
    rest_parts = [max(t - f, 0.0) for t, f in zip(totals, floors)]
    ys = list(range(len(values)))
    right_ms = max(max(t + hi for t, hi in zip(totals, highs)), max(floors))
    xmax = right_ms * 1.32

    with new_figure(1.55 + 0.62 * len(values)) as fig:
        ax = fig.subplots()
        height = 0.58
        below = [is_below_floor(t / f) for t, f in zip(totals, floors)]
        floor_bars = ax.barh(ys, floor_parts, height=height, color=FLOOR_BLUE, label=floor_label)
        for patch, is_below in zip(floor_bars, below):
            if is_below:  # impossible time: drawn hollow, since no real traffic fits in it
                patch.set_facecolor("white")
                patch.set_edgecolor(FLOOR_BLUE)
                patch.set_hatch("///")
        ax.barh(ys, rest_parts, height=height, left=floor_parts, color=REST_ORANGE,
                label=ABOVE_FLOOR)

        handles = [Patch(color=FLOOR_BLUE, label=floor_label), Patch(color=REST_ORANGE, label=ABOVE_FLOOR)]
        if any(spreads):
            xs = [t for t, s in zip(totals, spreads) if s > 0]
            yw = [y for y, s in zip(ys, spreads) if s > 0]
            whiskers(ax, xs, yw, [lo for lo, s in zip(lows, spreads) if s > 0],
                     [hi for hi, s in zip(highs, spreads) if s > 0])
            handles.append(spread_handle())

        # Values inside the segments when they fit beside the whisker: the arithmetic, drawn.
        min_width = 0.13 * xmax
        for y, f, r, lo, is_below in zip(ys, floor_parts, rest_parts, lows, below):
            if f >= min_width and not is_below and f <= f + r - lo:
                ax.text(f / 2, y, fmt_ms(f), ha="center", va="center", color="white", fontsize=9)
            free = r - lo  # the part of the orange segment left of the whisker
            if free >= min_width:
                ax.text(f + free / 2, y, f"+{fmt_ms(r)}", ha="center", va="center", color=INK,
                        fontsize=9)

        for y, t, lo, hi, f in zip(ys, totals, lows, highs, floors):
            ratio = t / f
            text = f"{fmt_ms(t)} · {fmt_times(ratio)} floor"
            if lo + hi > NOISY_SPREAD * t:  # the book's one noise rule, said where the number is
                text += " (noisy)"
            if is_below_floor(ratio):
                text += " (below the floor: check the timer)"
            # at the bar's own end; a whisker longer than a short reach puts the label just above
            # it, so the number stays beside the bar it describes, not beyond the spread
            above = hi > LABEL_REACH * xmax
            ax.annotate(text, xy=(t if above else t + hi, y - 0.2 if above else y), xytext=(6, 0),
                        textcoords="offset points", ha="left", va="center", color=INK,
                        fontsize=9.5, annotation_clip=False, zorder=5,
                        bbox=dict(boxstyle="square,pad=0.15", fc="white", ec="none"))

        if one_floor:
            floor_text = f"floor = bytes ÷ bandwidth = {fmt_ms(floor_ms)}"
            ax.axvline(floor_ms, color=INK, linestyle="--", linewidth=1.2, zorder=4, label=floor_text)
        else:
            for y, f in zip(ys, floors):
                ax.plot([f, f], [y - 0.42, y + 0.42], color=INK, linestyle="--",
                        linewidth=1.2, zorder=4)
            floor_text = _floors_text(floors)
        top = -0.95
        ax.set_ylim(len(values) - 0.45, top)
        on_left = floor_ms / xmax > 0.55
        ax.annotate(
            floor_text, xy=(floor_ms, top + 0.3),
            xytext=(-5 if on_left else 5, 0), textcoords="offset points",
            ha="right" if on_left else "left", va="center", fontsize=9, color=INK,
        )

        ax.set_xlim(0, xmax)
        bar_axis(ax, labels)
        ax.set_xlabel(xlabel)
        return finish(fig, ax, handles, title=title, note=note, path=path, ncol=len(handles))


def _floors_text(floors: list[float]) -> str:
    """The dashed marks' label: the floors' range, or one value where they print alike."""
    low, high = fmt_ms(min(floors)), fmt_ms(max(floors))
    if low == high:  # apart only beyond the digits shown (each bar's own run): no range of equals
        return f"floor = bytes ÷ bandwidth ≈ {low} for every bar (each from its own run)"
    return f"floor = bytes ÷ bandwidth for each bar, {low} to {high}"


def _bar_floors(floor_ms, bars: int) -> list[float]:
    """One floor in ms per bar, from a single floor or a list of one per bar."""
    floors = list(floor_ms) if isinstance(floor_ms, (list, tuple)) else [floor_ms] * bars
    if len(floors) != bars:
        raise ValueError(f"got {len(floors)} floors for {bars} bars; pass one floor, or one per bar")
    return [positive_number(f, "floor_ms", "compute it first with roofline.decode_floor(...) or "
                            "roofline.floor_ms(bytes, gbps)") for f in floors]
