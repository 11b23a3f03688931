"""Figures wing: the roofline, achieved TFLOP/s against arithmetic intensity."""
from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from floorlab.core.numbers import positive_number
from floorlab.core.prose import fmt_gbps, sig
from floorlab.figures.style import (
    INK,
    MUTED,
    SERIES_COLOURS,
    SERIES_MARKERS,
    finish,
    new_figure,
)


def roofline_plot(series, *, bandwidth_gbps: float, peak_tflops: float, path=None, title: str | None = None,
                  note: str | None = None) -> Figure:
    """Achieved TFLOP/s against FLOPs per byte, log-log, under the roofline.
    series: {label: [(flops_per_byte, tflops, text), ...]}; a non-empty text labels its point."""
    groups = [(str(label), [(float(x), float(y), str(t)) for x, y, t in points])
              for label, points in (series.items() if hasattr(series, "items") else series)]
    points = [p for _, pts in groups for p in pts]
    if not points:
        raise ValueError("roofline needs at least one point, e.g. {'decode': [(1.0, 0.5, '')]}")
    bandwidth_gbps = positive_number(bandwidth_gbps, "bandwidth_gbps", "pass the measured bandwidth")
    peak_tflops = positive_number(peak_tflops, "peak_tflops", "pass the card's peak (or measured) TFLOP/s")
    if any(x <= 0 or y <= 0 for x, y, _ in points):
        raise ValueError("every point needs an intensity and a rate greater than 0 (log scales)")
    slope = bandwidth_gbps * 1e9 / 1e12  # TFLOP/s per FLOP/byte
    knee = peak_tflops / slope
    x_lo = min([x for x, _, _ in points] + [knee]) / 4
    x_hi = max([x for x, _, _ in points] + [knee]) * 4
    y_lo = min([y for _, y, _ in points] + [slope * x_lo]) / 3
    y_hi = peak_tflops * 3

    with new_figure(4.6) as fig:
        ax = fig.subplots()
        ax.set_xscale("log")
        ax.set_yscale("log")
        steps = 200
        xs = [x_lo * (x_hi / x_lo) ** (k / steps) for k in range(steps + 1)]
        ax.plot(xs, [min(peak_tflops, slope * x) for x in xs], color=INK, linewidth=1.6, zorder=2)
        ax.axvline(knee, color=MUTED, linestyle=":", linewidth=1.0, zorder=1)
        ax.annotate(f"knee: {knee:,.0f} FLOPs per byte", xy=(knee, y_lo), xytext=(4, 6),
                    textcoords="offset points", ha="left", va="bottom", fontsize=9, color=MUTED)
        ax.annotate(f"compute roof: {sig(peak_tflops)} TFLOP/s (measured matmul)",
                    xy=(x_hi, peak_tflops), xytext=(-4, 5), textcoords="offset points",
                    ha="right", va="bottom", fontsize=9, color=INK)
        x_text = x_lo * 1.6  # the label sits under the slope, which rises away from it
        ax.annotate(f"memory slope: {fmt_gbps(bandwidth_gbps)} × FLOPs per byte",
                    xy=(x_text, slope * x_text), xytext=(10, -6), textcoords="offset points",
                    ha="left", va="top", fontsize=9, color=INK)

        handles = [Line2D([], [], color=INK, linewidth=1.6, label="roofline: most a kernel can reach")]
        for k, (label, pts) in enumerate(groups):
            colour, marker = SERIES_COLOURS[k % len(SERIES_COLOURS)], SERIES_MARKERS[k % len(SERIES_MARKERS)]
            ax.plot([x for x, _, _ in pts], [y for _, y, _ in pts], color=colour, marker=marker,
                    markersize=6, linewidth=0.9, alpha=0.9, zorder=3)
            for x, y, text in pts:
                if text:
                    ax.annotate(text, xy=(x, y), xytext=(5, -11), textcoords="offset points",
                                fontsize=8, color=colour)
            handles.append(Line2D([], [], color=colour, marker=marker, linewidth=0.9, label=label))

        ax.set_xlim(x_lo, x_hi)
        ax.set_ylim(y_lo, y_hi)
        ax.set_xlabel("arithmetic intensity (FLOPs per byte of the floor)")
        ax.set_ylabel("achieved TFLOP/s")
        return finish(fig, ax, handles, title=title, note=note, path=path, ncol=min(len(handles), 3))
