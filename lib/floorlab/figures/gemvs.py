"""Figures wing: one GEMV's achieved bandwidth against its weight size."""
from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from floorlab.core.prose import fmt_gbps
from floorlab.figures.style import (
    INK,
    SERIES_COLOURS,
    SERIES_MARKERS,
    finish,
    new_figure,
)

GEMV_WAYS = {"alone": "one GEMV alone", "serial": "back to back, no PDL",
             "chained": "back to back, chained with PDL"}


def gemv_sizes(rows, read_gbps: float, *, title: str | None = None, path=None,
               note: str | None = None) -> Figure:
    """Achieved GB/s of one GEMV against its weight size, one line per way of launching it (rows from
    engine.kernels.timing.sweep_sizes); a dashed line marks read_gbps."""
    rows = sorted(rows, key=lambda r: r["bytes"])
    if not rows:
        raise ValueError("gemv_sizes needs rows from floorlab.engine.kernels.timing.sweep_sizes, got none")
    if read_gbps <= 0:
        raise ValueError(f"read_gbps must be above 0, got {read_gbps}")
    mb = [r["bytes"] / 1e6 for r in rows]
    with new_figure(4.4) as fig:
        ax = fig.subplots()
        ax.set_xscale("log")
        handles = []
        for k, (way, label) in enumerate(GEMV_WAYS.items()):
            (line,) = ax.plot(mb, [r[f"{way}_gbps"] for r in rows], color=SERIES_COLOURS[k],
                              marker=SERIES_MARKERS[k], markersize=6, linewidth=1.6, label=label,
                              gid=way, zorder=3)
            handles.append(line)
        ax.axhline(read_gbps, color=INK, linestyle="--", linewidth=1.1, zorder=2)
        ax.annotate(f"read bandwidth, {fmt_gbps(read_gbps)}", xy=(0.0, read_gbps),
                    xycoords=("axes fraction", "data"), xytext=(4, -4), textcoords="offset points",
                    ha="left", va="top", fontsize=9, color=INK)
        ax.set_xticks(mb, [f"{m:.3g}" for m in mb])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_ylim(0, read_gbps * 1.12)
        ax.set_xlabel("weight matrix, MB (log scale; rows × 1024 columns, bf16)")
        ax.set_ylabel("achieved GB/s")
        return finish(fig, ax, handles, title=title, note=note, path=path, ncol=2)
