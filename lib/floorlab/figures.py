"""The book's figures: time per token against the floor, who works when, and the roofline.

Each function returns a matplotlib Figure (a notebook shows it when it is the
cell's last value) and saves a PNG when given a path. None touches global
matplotlib settings: the style lives in a context around each drawing.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import blended_transform_factory, offset_copy

from floorlab.prose import fmt_gbps, fmt_ms, sig
from floorlab.roofline import is_below_floor

# Okabe-Ito colours: distinguishable with every common colour-vision deficiency.
FLOOR_BLUE = "#0072B2"
REST_ORANGE = "#E69F00"
CPU_GREY = "#4D4D4D"
GPU_BLUE = "#0072B2"
IDLE_RED = "#D55E00"
IDLE_ALPHA = 0.3
INK = "#222222"
MUTED = "#666666"

FIG_WIDTH_IN = 9.0
ABOVE_FLOOR = "above the floor: launches, gaps, slow kernels"
DPI = 150

STYLE = {
    "font.size": 10,
    "axes.titlesize": 10.5,
    "axes.labelsize": 10,
    "axes.edgecolor": MUTED,
    "axes.labelcolor": INK,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": False,
    "xtick.color": MUTED,
    "ytick.color": INK,
    "xtick.labelcolor": INK,
    "legend.frameon": False,
    "legend.fontsize": 9,
    "savefig.dpi": DPI,
    "figure.dpi": 100,
    "figure.facecolor": "white",
}


def _new_figure(height_in: float) -> Figure:
    """A Figure that a notebook shows when returned, but not again at the end of the cell."""
    import matplotlib.pyplot as plt  # loads the notebook's display backend

    fig = plt.figure(figsize=(FIG_WIDTH_IN, height_in))
    plt.close(fig)  # pyplot forgets it: shown once, as the returned value
    return fig


def _save(fig: Figure, path) -> None:
    """Write fig as a PNG at path (dpi 150, tight box), creating parent folders."""
    if path is None:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight", facecolor="white")


def _legend_and_note(ax, handles, *, ncol: int, note: str | None, below_pt: float) -> None:
    """Put a legend below ax (below_pt points under its bottom edge) and the note under it."""
    anchor = offset_copy(ax.transAxes, fig=ax.figure, y=-below_pt, units="points")
    legend = ax.legend(
        handles=handles, loc="upper left", bbox_to_anchor=(0.0, 0.0),
        bbox_transform=anchor, ncol=ncol, borderaxespad=0.0, handlelength=1.6,
        columnspacing=1.6,
    )
    if note:
        ax.annotate(
            note, xy=(0.0, 0.0), xycoords=legend, xytext=(0, -6),
            textcoords="offset points", ha="left", va="top",
            fontsize=8.5, color=MUTED, fontstyle="italic", annotation_clip=False,
        )


def _times_floor(ratio: float) -> str:
    """'2.5× floor' for big ratios, '1.09× floor' near 1, where the digits matter."""
    return f"{ratio:.1f}× floor" if ratio >= 2 else f"{ratio:.2f}× floor"


def _bar_values(bars) -> list[tuple[str, float, float, float]]:
    """(label, median, p10, p90) in ms from {label: Timing or ms} or [(label, Timing or ms)]."""
    items = list(bars.items()) if hasattr(bars, "items") else list(bars)
    if not items:
        raise ValueError("stacked_bar needs at least one bar, e.g. {'eager': time_ms(step)}")
    out = []
    for item in items:
        try:
            label, value = item
        except (TypeError, ValueError):
            raise ValueError(f"each bar is a (label, Timing or ms) pair, got {item!r}") from None
        if hasattr(value, "median_ms"):
            out.append((str(label), float(value.median_ms), float(value.p10_ms), float(value.p90_ms)))
        else:
            ms = float(value)
            out.append((str(label), ms, ms, ms))
    return out


def stacked_bar(
    bars,
    floor_ms: float,
    *,
    title: str | None = None,
    path=None,
    note: str | None = None,
    xlabel: str = "time per decode token (ms)",
    floors: dict | None = None,
    floor_label: str = "memory traffic (the floor)",
) -> Figure:
    """Horizontal bars of time per token in ms, each split into the floor and the rest.

    bars: {label: Timing} (or a plain ms value), in drawing order; a Timing's p10-p90
    band is drawn as a whisker. A dashed line marks floor_ms. floors gives a bar its own
    floor in ms by label (a prefill's per token), and floor_label names the floor part.
    Returns the Figure.
    """
    values = _bar_values(bars)
    if not floor_ms or floor_ms <= 0:
        raise ValueError(
            f"floor_ms must be greater than 0, got {floor_ms!r}; "
            "compute it first with roofline.decode_floor(...) or roofline.floor_ms(bytes, gbps)"
        )
    labels = [v[0] for v in values]
    totals = [v[1] for v in values]
    own = [float((floors or {}).get(label, floor_ms)) for label in labels]
    if not all(f > 0 for f in own):
        raise ValueError(f"every floor must be greater than 0, got {floors!r}")
    lows = [max(t - p10, 0.0) for _, t, p10, _ in values]
    highs = [max(p90 - t, 0.0) for _, t, _, p90 in values]
    spreads = [lo + hi for lo, hi in zip(lows, highs)]
    floor_parts = [min(t, f) for t, f in zip(totals, own)]
    rest_parts = [max(t - f, 0.0) for t, f in zip(totals, own)]
    ys = list(range(len(values)))
    right_ms = max(max(t + hi for t, hi in zip(totals, highs)), floor_ms)
    xmax = right_ms * 1.32

    with matplotlib.rc_context(STYLE):
        fig = _new_figure(1.55 + 0.62 * len(values))
        ax = fig.subplots()
        height = 0.58
        below = [is_below_floor(t / f) for t, f in zip(totals, own)]
        floor_bars = ax.barh(ys, floor_parts, height=height, color=FLOOR_BLUE, label=floor_label)
        for patch, is_below in zip(floor_bars, below):
            if is_below:  # impossible time: drawn hollow, since no real traffic fits in it
                patch.set_facecolor("white")
                patch.set_edgecolor(FLOOR_BLUE)
                patch.set_hatch("///")
        ax.barh(ys, rest_parts, height=height, left=floor_parts, color=REST_ORANGE,
                label=ABOVE_FLOOR)

        handles = [
            Patch(color=FLOOR_BLUE, label=floor_label),
            Patch(color=REST_ORANGE, label=ABOVE_FLOOR),
        ]
        if any(spreads):
            xs = [t for t, s in zip(totals, spreads) if s > 0]
            yw = [y for y, s in zip(ys, spreads) if s > 0]
            errs = [[lo for lo, s in zip(lows, spreads) if s > 0],
                    [hi for hi, s in zip(highs, spreads) if s > 0]]
            ax.errorbar(xs, yw, xerr=errs, fmt="none", ecolor=INK, elinewidth=1.0,
                        capsize=3, capthick=1.0, zorder=3)
            handles.append(Line2D([], [], color=INK, lw=1.0, marker="|", markersize=7,
                                  label="p10–p90 spread"))

        # Values inside the segments when they fit beside the whisker: the arithmetic, drawn.
        min_width = 0.13 * xmax
        for y, f, r, lo, is_below in zip(ys, floor_parts, rest_parts, lows, below):
            if f >= min_width and not is_below and f <= f + r - lo:
                ax.text(f / 2, y, fmt_ms(f), ha="center", va="center", color="white", fontsize=9)
            free = r - lo  # the part of the orange segment left of the whisker
            if free >= min_width:
                ax.text(f + free / 2, y, f"+{fmt_ms(r)}", ha="center", va="center", color=INK,
                        fontsize=9)

        for y, t, hi, f in zip(ys, totals, highs, own):
            ratio = t / f
            text = f"{fmt_ms(t)} · {_times_floor(ratio)}"
            if is_below_floor(ratio):
                text += " (below the floor: check the timer)"
            ax.annotate(text, xy=(t + hi, y), xytext=(6, 0), textcoords="offset points",
                        ha="left", va="center", color=INK, fontsize=9.5, annotation_clip=False,
                        zorder=5, bbox=dict(boxstyle="square,pad=0.15", fc="white", ec="none"))

        ax.axvline(floor_ms, color=INK, linestyle="--", linewidth=1.2, zorder=4,
                   label=f"floor = bytes ÷ bandwidth = {fmt_ms(floor_ms)}")
        top = -0.95
        ax.set_ylim(len(values) - 0.45, top)
        on_left = floor_ms / xmax > 0.55
        ax.annotate(
            f"floor = bytes ÷ bandwidth = {fmt_ms(floor_ms)}", xy=(floor_ms, top + 0.3),
            xytext=(-5 if on_left else 5, 0), textcoords="offset points",
            ha="right" if on_left else "left", va="center", fontsize=9, color=INK,
        )

        ax.set_xlim(0, xmax)
        ax.set_yticks(ys, labels)
        ax.tick_params(axis="y", length=0, pad=6)
        ax.spines["left"].set_visible(False)
        ax.set_xlabel(xlabel)
        if title:
            ax.set_title(title, loc="left", color=INK, pad=8)
        _legend_and_note(ax, handles, ncol=len(handles), note=note, below_pt=36)
        _save(fig, path)
    return fig


def timeline(
    timelines,
    *,
    path=None,
    title: str | None = None,
    note: str | None = None,
    max_us: float | None = None,
) -> Figure:
    """One panel per Timeline: a CPU row of calls and a GPU row of kernels, idle GPU time shaded.

    Each panel draws one steady-state step from its first kernel (or operator) to the
    next step's; host calls issued earlier, while the previous step ran, sit left of
    zero. A dotted mark shows the step's time without the profiler, when known.
    max_us crops the shared time axis. Returns the Figure.
    """
    timelines = list(timelines)
    if not timelines:
        raise ValueError("timeline needs at least one Timeline, e.g. from "
                         "floorlab.timelines.steady_timeline(...)")

    def extent(tl) -> tuple[float, float]:
        starts = [i.start_us for i in list(tl.cpu) + list(tl.gpu)]
        right = max([tl.span_us, (tl.timed_ms or 0.0) * 1e3])
        return min(starts + [0.0]), right

    left_us = min(extent(tl)[0] for tl in timelines)
    right_us = max_us if max_us else max(extent(tl)[1] for tl in timelines)
    in_ms = right_us - left_us >= 2000
    scale = 1000.0 if in_ms else 1.0
    unit = "ms" if in_ms else "µs"
    row_h = 0.62
    y_cpu, y_gpu = 1.0, 0.0
    any_gpu = any(len(tl.gpu) for tl in timelines)
    any_timed = any(tl.timed_ms for tl in timelines)

    # Layout in inches, so panels keep their size whatever their number.
    n = len(timelines)
    panel_in, gap_in, top_in, bottom_in = 1.0, 1.05, 0.45 if title else 0.3, 0.5
    height_in = n * panel_in + (n - 1) * gap_in + top_in + bottom_in

    with matplotlib.rc_context(STYLE):
        fig = _new_figure(height_in)
        axes = fig.subplots(n, 1, sharex=True, squeeze=False)[:, 0]
        fig.subplots_adjust(top=1 - top_in / height_in, bottom=bottom_in / height_in,
                            hspace=gap_in / panel_in)
        for ax, tl in zip(axes, timelines):
            cpu, gpu = list(tl.cpu), list(tl.gpu)

            def bars(intervals):
                return [(i.start_us / scale, max(i.end_us - i.start_us, 0.0) / scale) for i in intervals]

            ax.broken_barh(bars(cpu), (y_cpu - row_h / 2, row_h), facecolors=CPU_GREY,
                           linewidth=0, gid="cpu", zorder=2)
            if gpu:
                idle = tl.gpu_idle_spans()
                ax.broken_barh([(a / scale, (b - a) / scale) for a, b in idle],
                               (y_gpu - row_h / 2, row_h), facecolors=IDLE_RED, alpha=IDLE_ALPHA,
                               linewidth=0, gid="gpu-idle", zorder=1)
                ax.broken_barh(bars(gpu), (y_gpu - row_h / 2, row_h), facecolors=GPU_BLUE,
                               linewidth=0, gid="gpu", zorder=2)
                ax.set_title(f"GPU idle {tl.gpu_idle_share:.0%} of the step", loc="right",
                             color=IDLE_RED, fontsize=9.5, pad=4)
                head = f"{tl.label} · {tl.kernels} kernels · step {fmt_ms(tl.profiled_ms)} profiled"
            else:
                ax.text(0.01, y_gpu, "no GPU row: operators run on the CPU",
                        transform=blended_transform_factory(ax.transAxes, ax.transData),
                        ha="left", va="center", color=MUTED, fontstyle="italic", fontsize=9)
                head = (f"{tl.label} · {len(cpu)} top-level operators · "
                        f"step {fmt_ms(tl.profiled_ms)} profiled")
            ax.set_title(head, loc="left", color=INK, pad=4)
            if tl.span_us <= right_us:
                ax.axvline(tl.span_us / scale, color=MUTED, linewidth=0.9, zorder=3)
            if tl.timed_ms and tl.timed_ms * 1e3 <= right_us:
                ax.axvline(tl.timed_ms * 1e3 / scale, color=INK, linewidth=1.1, linestyle=":",
                           zorder=3)
            if tl.timed_ms:
                ax.text(1.0, -0.72, tl.profiler_note(), transform=blended_transform_factory(
                    ax.transAxes, ax.transData), ha="right", va="center", fontsize=8.5,
                    color=MUTED, fontstyle="italic")

            # A few CPU calls (a graph replay) get their names written beside them.
            if 0 < len(cpu) <= 3:
                for i in cpu:
                    if i.name and i.start_us < right_us:
                        ax.annotate(_base_call_name(i.name), xy=(i.end_us / scale, y_cpu),
                                    xytext=(5, 0), textcoords="offset points", ha="left",
                                    va="center", fontsize=8.5, color=CPU_GREY)

            ax.set_ylim(-0.95, 1.6)
            ax.set_yticks([y_cpu, y_gpu], ["CPU", "GPU"])
            ax.tick_params(axis="y", length=0, pad=6)
            ax.tick_params(axis="x", labelbottom=True)
            ax.spines["left"].set_visible(False)
            ax.set_xlim(left_us / scale, right_us / scale)

        shown = f"time since the step's first {'kernel' if any_gpu else 'operator'} ({unit})"
        if max_us:
            shown += f", first {max_us / scale:g} {unit} shown"
        axes[-1].set_xlabel(shown)
        handles = [Patch(color=CPU_GREY, label="CPU: launch call or operator")]
        if any_gpu:
            handles += [Patch(color=GPU_BLUE, label="GPU: kernel running"),
                        Patch(color=IDLE_RED, alpha=IDLE_ALPHA, label="GPU idle")]
        handles.append(Line2D([], [], color=MUTED, linewidth=0.9, label="next step starts"))
        if any_timed:
            handles.append(Line2D([], [], color=INK, linewidth=1.1, linestyle=":",
                                  label="step time without the profiler"))
        if title:
            axes[0].annotate(title, xy=(0, 1), xycoords="axes fraction", xytext=(0, 22),
                             textcoords="offset points", ha="left", va="bottom",
                             fontsize=11, color=INK)
        _legend_and_note(axes[-1], handles, ncol=min(len(handles), 3), note=note, below_pt=36)
        _save(fig, path)
    return fig


def _base_call_name(name: str) -> str:
    """A host call's name without the driver's version suffix (cudaGraphLaunch_v10000 -> cudaGraphLaunch)."""
    head, _, tail = name.rpartition("_v")
    return head if head and tail.isdigit() else name


SERIES_COLOURS = (IDLE_RED, FLOOR_BLUE, "#009E73", "#CC79A7", REST_ORANGE)  # Okabe-Ito again
SERIES_MARKERS = ("o", "s", "^", "D", "v")


def roofline(
    series,
    *,
    bandwidth_gbps: float,
    peak_tflops: float,
    path=None,
    title: str | None = None,
    note: str | None = None,
) -> Figure:
    """Achieved TFLOP/s against arithmetic intensity (FLOPs per byte), log-log, under the roofline.

    series: {label: [(flops_per_byte, tflops, text), ...]} in drawing order; a non-empty
    text is written beside its point. The slope is bandwidth × intensity, the roof
    peak_tflops; they meet at the knee, peak ÷ bandwidth FLOPs per byte. Returns the Figure.
    """
    groups = [(str(label), [(float(x), float(y), str(t)) for x, y, t in points])
              for label, points in (series.items() if hasattr(series, "items") else series)]
    points = [p for _, pts in groups for p in pts]
    if not points:
        raise ValueError("roofline needs at least one point, e.g. {'decode': [(1.0, 0.5, '')]}")
    if not bandwidth_gbps > 0 or not peak_tflops > 0:
        raise ValueError(f"bandwidth_gbps and peak_tflops must be greater than 0, got "
                         f"{bandwidth_gbps!r} and {peak_tflops!r}; pass measured values")
    if any(x <= 0 or y <= 0 for x, y, _ in points):
        raise ValueError("every point needs an intensity and a rate greater than 0 (log scales)")
    slope = bandwidth_gbps * 1e9 / 1e12  # TFLOP/s per FLOP/byte
    knee = peak_tflops / slope
    x_lo = min([x for x, _, _ in points] + [knee]) / 4
    x_hi = max([x for x, _, _ in points] + [knee]) * 4
    y_lo = min([y for _, y, _ in points] + [slope * x_lo]) / 3
    y_hi = peak_tflops * 3

    with matplotlib.rc_context(STYLE):
        fig = _new_figure(4.6)
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
        if title:
            ax.set_title(title, loc="left", color=INK, pad=8)
        _legend_and_note(ax, handles, ncol=min(len(handles), 3), note=note, below_pt=36)
        _save(fig, path)
    return fig
