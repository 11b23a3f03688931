"""The book's two figures: time per token against the floor, and who works when.

Both functions return a matplotlib Figure (a notebook shows it when it is the
cell's last value) and save a PNG when given a path. Neither touches global
matplotlib settings: the style lives in a context around each drawing.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import blended_transform_factory, offset_copy

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
DPI = 150
BELOW_FLOOR_RATIO = 0.95  # same 5% noise allowance as roofline.check_floor

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


def stacked_bar(
    bars: list[dict],
    floor_ms: float,
    *,
    title: str | None = None,
    path=None,
    note: str | None = None,
    xlabel: str = "time per decode token (ms)",
) -> Figure:
    """Horizontal bars of time per token in ms, each split into the floor and the rest.

    bars: dicts with "label", "total_ms" and optionally "p10_ms" and "p90_ms"
    (or a symmetric "spread_ms"), drawn as a whisker. A dashed line marks floor_ms.
    Returns the Figure.
    """
    if not bars:
        raise ValueError("stacked_bar needs at least one bar, e.g. [{'label': 'eager', 'total_ms': 7.8}]")
    if not floor_ms or floor_ms <= 0:
        raise ValueError(
            f"floor_ms must be greater than 0, got {floor_ms!r}; "
            "compute it first with roofline.floor_ms(bytes_moved, bandwidth_gbps)"
        )
    for bar in bars:
        if "label" not in bar or "total_ms" not in bar:
            raise ValueError(f"each bar needs 'label' and 'total_ms', got {bar!r}")

    labels = [str(b["label"]) for b in bars]
    totals = [float(b["total_ms"]) for b in bars]
    lows = [t - float(b["p10_ms"]) if "p10_ms" in b else float(b.get("spread_ms") or 0.0) / 2
            for t, b in zip(totals, bars)]
    highs = [float(b["p90_ms"]) - t if "p90_ms" in b else float(b.get("spread_ms") or 0.0) / 2
             for t, b in zip(totals, bars)]
    spreads = [lo + hi for lo, hi in zip(lows, highs)]
    floor_parts = [min(t, floor_ms) for t in totals]
    rest_parts = [max(t - floor_ms, 0.0) for t in totals]
    ys = list(range(len(bars)))
    right_ms = max(max(t + hi for t, hi in zip(totals, highs)), floor_ms)
    xmax = right_ms * 1.32

    with matplotlib.rc_context(STYLE):
        fig = _new_figure(1.55 + 0.62 * len(bars))
        ax = fig.subplots()
        height = 0.58
        below = [t / floor_ms < BELOW_FLOOR_RATIO for t in totals]
        floor_bars = ax.barh(ys, floor_parts, height=height, color=FLOOR_BLUE,
                             label="memory traffic (the floor)")
        for patch, is_below in zip(floor_bars, below):
            if is_below:  # impossible time: drawn hollow, since no real traffic fits in it
                patch.set_facecolor("white")
                patch.set_edgecolor(FLOOR_BLUE)
                patch.set_hatch("///")
        ax.barh(ys, rest_parts, height=height, left=floor_parts, color=REST_ORANGE,
                label="everything else: launches, gaps, overhead")

        handles = [
            Patch(color=FLOOR_BLUE, label="memory traffic (the floor)"),
            Patch(color=REST_ORANGE, label="everything else: launches, gaps, overhead"),
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

        # Values inside the segments when they fit: the arithmetic, drawn.
        min_width = 0.13 * xmax
        for y, f, r, is_below in zip(ys, floor_parts, rest_parts, below):
            if f >= min_width and not is_below:
                ax.text(f / 2, y, f"{f:.2f} ms", ha="center", va="center", color="white", fontsize=9)
            if r >= min_width:
                ax.text(f + r / 2, y, f"{r:.2f} ms", ha="center", va="center", color=INK, fontsize=9)

        for y, t, hi in zip(ys, totals, highs):
            ratio = t / floor_ms
            text = f"{t:.2f} ms · {_times_floor(ratio)}"
            if ratio < BELOW_FLOOR_RATIO:
                text += " (below the floor: check the timer)"
            ax.annotate(text, xy=(t + hi, y), xytext=(6, 0), textcoords="offset points",
                        ha="left", va="center", color=INK, fontsize=9.5, annotation_clip=False,
                        zorder=5, bbox=dict(boxstyle="square,pad=0.15", fc="white", ec="none"))

        ax.axvline(floor_ms, color=INK, linestyle="--", linewidth=1.2, zorder=4,
                   label=f"floor = bytes ÷ bandwidth = {floor_ms:.2f} ms")
        top = -0.95
        ax.set_ylim(len(bars) - 0.45, top)
        on_left = floor_ms / xmax > 0.55
        ax.annotate(
            f"floor = bytes ÷ bandwidth = {floor_ms:.2f} ms", xy=(floor_ms, top + 0.3),
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


def _merged(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Union of (start, end) spans, sorted and non-overlapping."""
    out: list[list[float]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


def gpu_idle_spans_us(gpu, step_us: float) -> list[tuple[float, float]]:
    """(start_us, end_us) spans within [0, step_us] where no kernel runs.

    Counts the whole step, so the wait for the first launch is idle time too.
    """
    busy = _merged([(max(i.start_us, 0.0), min(i.end_us, step_us)) for i in gpu
                    if i.end_us > 0 and i.start_us < step_us])
    idle, cursor = [], 0.0
    for start, end in busy:
        if start > cursor:
            idle.append((cursor, start))
        cursor = max(cursor, end)
    if cursor < step_us:
        idle.append((cursor, step_us))
    return idle


def _step_us(tl) -> float:
    """Length of the step in µs: the wall time, stretched to cover any late interval."""
    ends = [i.end_us for i in list(tl.cpu) + list(tl.gpu)]
    return max([float(tl.wall_us or 0.0)] + ends)


def timeline(
    timelines,
    *,
    path=None,
    title: str | None = None,
    note: str | None = None,
    max_us: float | None = None,
) -> Figure:
    """One panel per timeline: a CPU row of calls and a GPU row of kernels, idle GPU time shaded.

    Each timeline needs label, cpu, gpu (intervals with name, start_us, end_us)
    and wall_us. max_us crops the shared time axis. Returns the Figure.
    """
    timelines = list(timelines)
    if not timelines:
        raise ValueError("timeline needs at least one Timeline, e.g. from launches.profile_timeline(...)")

    span_us = max_us if max_us else max(_step_us(tl) for tl in timelines)
    in_ms = span_us >= 2000
    scale = 1000.0 if in_ms else 1.0
    unit = "ms" if in_ms else "µs"
    row_h = 0.62
    y_cpu, y_gpu = 1.0, 0.0
    any_gpu = any(len(tl.gpu) for tl in timelines)

    # Layout in inches, so panels keep their size whatever their number.
    n = len(timelines)
    panel_in, gap_in, top_in, bottom_in = 1.0, 0.85, 0.45 if title else 0.3, 0.5
    height_in = n * panel_in + (n - 1) * gap_in + top_in + bottom_in

    with matplotlib.rc_context(STYLE):
        fig = _new_figure(height_in)
        axes = fig.subplots(n, 1, sharex=True, squeeze=False)[:, 0]
        fig.subplots_adjust(top=1 - top_in / height_in, bottom=bottom_in / height_in,
                            hspace=gap_in / panel_in)
        for ax, tl in zip(axes, timelines):
            cpu, gpu = list(tl.cpu), list(tl.gpu)
            step_us = _step_us(tl)
            wall_ms = float(tl.wall_us) / 1000.0

            def bars(intervals):
                return [(i.start_us / scale, max(i.end_us - i.start_us, 0.0) / scale) for i in intervals]

            ax.broken_barh(bars(cpu), (y_cpu - row_h / 2, row_h), facecolors=CPU_GREY,
                           linewidth=0, gid="cpu", zorder=2)
            if gpu:
                idle = gpu_idle_spans_us(gpu, step_us)
                idle_us = sum(b - a for a, b in idle)
                ax.broken_barh([(a / scale, (b - a) / scale) for a, b in idle],
                               (y_gpu - row_h / 2, row_h), facecolors=IDLE_RED, alpha=IDLE_ALPHA,
                               linewidth=0, gid="gpu-idle", zorder=1)
                ax.broken_barh(bars(gpu), (y_gpu - row_h / 2, row_h), facecolors=GPU_BLUE,
                               linewidth=0, gid="gpu", zorder=2)
                idle_pct = 100.0 * idle_us / step_us if step_us > 0 else 0.0
                ax.set_title(f"GPU idle {idle_pct:.0f}% of the step", loc="right",
                             color=IDLE_RED, fontsize=9.5, pad=4)
                kernels = sum(not i.name.lower().startswith(("memcpy", "memset")) for i in gpu)
                head = f"{tl.label} · {kernels} kernels · wall {wall_ms:.2f} ms"
            else:
                ax.text(0.01, y_gpu, "no GPU row: operators run on the CPU",
                        transform=blended_transform_factory(ax.transAxes, ax.transData),
                        ha="left", va="center", color=MUTED, fontstyle="italic", fontsize=9)
                head = f"{tl.label} · {len(cpu)} CPU operators · wall {wall_ms:.2f} ms"
            ax.set_title(head, loc="left", color=INK, pad=4)
            if float(tl.wall_us) <= span_us:
                ax.axvline(float(tl.wall_us) / scale, color=MUTED, linewidth=0.9, zorder=3)

            # A few CPU calls (a graph replay) get their names written beside them.
            if 0 < len(cpu) <= 3:
                for i in cpu:
                    if i.name and i.start_us < span_us:
                        ax.annotate(i.name, xy=(i.end_us / scale, y_cpu), xytext=(5, 0),
                                    textcoords="offset points", ha="left", va="center",
                                    fontsize=8.5, color=CPU_GREY)

            ax.set_ylim(-0.6, 1.6)
            ax.set_yticks([y_cpu, y_gpu], ["CPU", "GPU"])
            ax.tick_params(axis="y", length=0, pad=6)
            ax.tick_params(axis="x", labelbottom=True)
            ax.spines["left"].set_visible(False)
            ax.set_xlim(0, span_us / scale)

        shown = f"time since the step began ({unit})"
        if max_us:
            shown += f", first {max_us / scale:g} {unit} shown"
        axes[-1].set_xlabel(shown)
        handles = [Patch(color=CPU_GREY, label="CPU: launch call or operator")]
        if any_gpu:
            handles += [Patch(color=GPU_BLUE, label="GPU: kernel running"),
                        Patch(color=IDLE_RED, alpha=IDLE_ALPHA, label="GPU idle")]
        handles.append(Line2D([], [], color=MUTED, linewidth=0.9, label="end of the step"))
        if title:
            axes[0].annotate(title, xy=(0, 1), xycoords="axes fraction", xytext=(0, 22),
                             textcoords="offset points", ha="left", va="bottom",
                             fontsize=11, color=INK)
        _legend_and_note(axes[-1], handles, ncol=len(handles), note=note, below_pt=36)
        _save(fig, path)
    return fig
