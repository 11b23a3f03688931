"""Figures wing: the split bar, time per token cut into named parts (the floor, the collectives) and
the rest, one bar per way of running the step."""
from __future__ import annotations

from dataclasses import dataclass

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from floorlab.core.prose import fmt_ms
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

PART_COLOURS = (FLOOR_BLUE, "#009E73", "#CC79A7", "#56B4E9")  # Okabe-Ito, after the floor's blue


@dataclass(frozen=True)
class SplitBar:
    """One bar: its label, its measured time (a Timing, or ms) and the named parts it is cut
    into, in ms, left to right; what the parts leave of the time is drawn as the rest."""

    label: str
    time: object
    parts: tuple[tuple[str, float], ...]

    @property
    def median_ms(self) -> float:
        """The bar's length in ms."""
        return float(getattr(self.time, "median_ms", self.time))

    def band_ms(self) -> tuple[float, float]:
        """(p10, p90) in ms; both the median for a plain number."""
        return (float(getattr(self.time, "p10_ms", self.median_ms)),
                float(getattr(self.time, "p90_ms", self.median_ms)))


def _check(bars) -> list[SplitBar]:
    bars = list(bars)
    if not bars:
        raise ValueError("split_bar needs at least one SplitBar(label, timing, parts)")
    for bar in bars:
        if not isinstance(bar, SplitBar):
            raise ValueError(f"each bar is a SplitBar(label, timing, parts), got {bar!r}")
        if any(ms < 0 for _, ms in bar.parts) or bar.median_ms <= 0:
            raise ValueError(f"bar {bar.label!r}: times must be positive and parts not negative, "
                             f"got {bar.median_ms} ms and parts {bar.parts}")
    return bars


def split_bar(bars, *, title: str | None = None, note: str | None = None, path=None,
              xlabel: str = "time per decode token (ms)",
              rest_label: str = ABOVE_FLOOR) -> Figure:
    """Horizontal bars of time per token, each cut into its named parts and the rest."""
    bars = _check(bars)
    names = list(dict.fromkeys(name for bar in bars for name, _ in bar.parts))
    if len(names) > len(PART_COLOURS):
        raise ValueError(f"at most {len(PART_COLOURS)} named parts, got {names}")
    colour = dict(zip(names, PART_COLOURS))
    right = max(max(b.band_ms()[1], sum(ms for _, ms in b.parts)) for b in bars) * 1.36
    with new_figure(1.55 + 0.62 * len(bars)) as fig:
        ax = fig.subplots()
        for y, bar in enumerate(bars):
            left = 0.0
            for name, ms in bar.parts:
                ax.barh(y, ms, left=left, height=0.58, color=colour[name])
                if ms >= 0.12 * right:
                    ax.text(left + ms / 2, y, fmt_ms(ms), ha="center", va="center",
                            color="white", fontsize=9)
                left += ms
            rest = bar.median_ms - left
            if rest > 0:
                ax.barh(y, rest, left=left, height=0.58, color=REST_ORANGE)
            else:  # the parts alone reach past the measured time: mark where the bar ends
                ax.plot([bar.median_ms] * 2, [y - 0.36, y + 0.36], color=INK, linewidth=1.4)
            p10, p90 = bar.band_ms()
            if p90 > p10:
                whiskers(ax, [bar.median_ms], [y], [bar.median_ms - p10], [p90 - bar.median_ms])
            ax.annotate(fmt_ms(bar.median_ms), xy=(max(p90, left), y), xytext=(6, 0),
                        textcoords="offset points", ha="left", va="center", color=INK,
                        fontsize=9.5, annotation_clip=False)
        ax.set_ylim(len(bars) - 0.45, -0.6)
        ax.set_xlim(0, right)
        bar_axis(ax, [b.label for b in bars])
        ax.set_xlabel(xlabel)
        handles = [Patch(color=colour[n], label=n) for n in names]
        handles.append(Patch(color=REST_ORANGE, label=rest_label))
        if any(b.band_ms()[1] > b.band_ms()[0] for b in bars):
            handles.append(spread_handle())
        return finish(fig, ax, handles, title=title, note=note, path=path, ncol=2)
