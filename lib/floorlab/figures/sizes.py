"""Figures wing: the multiple of the floor against model size, one line per decode path."""
from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from floorlab.figures.style import (
    INK,
    SERIES_COLOURS,
    SERIES_MARKERS,
    finish,
    label_ends,
    new_figure,
    times_ticks,
)


def _billions_label(params: float) -> str:
    """'0.6B', '8.2B', '33B': a model size for a tick."""
    return f"{params / 1e9:.1f}B" if params < 1e10 else f"{params / 1e9:.0f}B"


def scaling(lines, *, stored=(), title: str | None = None, path=None, note: str | None = None,
            xlabel: str = "model size, parameters (log scale)") -> Figure:
    """Multiple of the floor against model size, log-log: lines {label: [(parameters, x_floor), ...]};
    labels in `stored` come from another run and are drawn dashed."""
    lines = {str(k): sorted((float(x), float(y)) for x, y in v) for k, v in dict(lines).items()}
    points = [p for v in lines.values() for p in v]
    if not points:
        raise ValueError("scaling needs at least one (parameters, x_floor) point, e.g. "
                         "{'graph replay': [(596e6, 7.5), (8.19e9, 1.7)]}")
    bad = [p for p in points if p[0] <= 0 or p[1] <= 0]
    if bad:
        raise ValueError(f"parameters and multiples of the floor must be above 0 on log axes, "
                         f"got {bad[:3]}")
    xs = sorted({x for x, _ in points})
    top = max(max(y for _, y in points), 1.0)

    with new_figure(4.4) as fig:
        ax = fig.subplots()
        ax.set_xscale("log")
        ax.set_yscale("log")
        handles, ends = [], []
        for k, (label, data) in enumerate(lines.items()):
            if not data:
                continue
            colour = SERIES_COLOURS[k % len(SERIES_COLOURS)]
            style = "--" if label in stored else "-"
            (line,) = ax.plot([x for x, _ in data], [y for _, y in data], linestyle=style,
                              color=colour, marker=SERIES_MARKERS[k % len(SERIES_MARKERS)],
                              markersize=6, linewidth=1.6, label=label, gid=label, zorder=3)
            handles.append(line)
            ends.append((*data[-1], colour))
        ax.axhline(1.0, color=INK, linestyle="--", linewidth=1.1, zorder=2)
        ax.annotate("the floor: bytes ÷ bandwidth (1×)", xy=(0.0, 1.0),
                    xycoords=("axes fraction", "data"), xytext=(4, 4),
                    textcoords="offset points", ha="left", va="bottom", fontsize=9, color=INK)
        ax.set_xlim(xs[0] / 1.6, xs[-1] * 2.2)
        ax.set_ylim(0.8, top * 1.5)
        ax.set_xticks(xs, [_billions_label(x) for x in xs])
        ax.xaxis.set_minor_locator(NullLocator())
        times_ticks(ax.yaxis, 0.8, top * 1.5)
        label_ends(ax, ends)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("time per token ÷ the floor (log scale)")
        return finish(fig, ax, handles, title=title, note=note, path=path, ncol=min(len(handles), 2))
