"""The book's figures: time per token against the floor, who works when, size against the floor,
and the roofline.

Each function returns a matplotlib Figure (a notebook shows it when it is the
cell's last value) and saves a PNG when given a path. None touches global
matplotlib settings: the style lives in a context around each drawing.
"""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
from matplotlib.transforms import blended_transform_factory, offset_copy

from floorlab.prose import fmt_gbps, fmt_ms, fmt_times, sig
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
    return f"{fmt_times(ratio)} floor"


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
    floor_ms,
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
    band is drawn as a whisker. A dashed line marks floor_ms; a list of floors, one per
    bar (bars at different batch sizes), or floors={label: ms} for some bars (a prefill's
    per token), gives bars their own dashed marks. floor_label names the floor part.
    Returns the Figure.
    """
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

    with matplotlib.rc_context(STYLE):
        fig = _new_figure(1.55 + 0.62 * len(values))
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

        for y, t, hi, f in zip(ys, totals, highs, floors):
            ratio = t / f
            text = f"{fmt_ms(t)} · {_times_floor(ratio)}"
            if is_below_floor(ratio):
                text += " (below the floor: check the timer)"
            ax.annotate(text, xy=(t + hi, y), xytext=(6, 0), textcoords="offset points",
                        ha="left", va="center", color=INK, fontsize=9.5, annotation_clip=False,
                        zorder=5, bbox=dict(boxstyle="square,pad=0.15", fc="white", ec="none"))

        if one_floor:
            ax.axvline(floor_ms, color=INK, linestyle="--", linewidth=1.2, zorder=4,
                       label=f"floor = bytes ÷ bandwidth = {fmt_ms(floor_ms)}")
            floor_text = f"floor = bytes ÷ bandwidth = {fmt_ms(floor_ms)}"
        else:
            for y, f in zip(ys, floors):
                ax.plot([f, f], [y - 0.42, y + 0.42], color=INK, linestyle="--",
                        linewidth=1.2, zorder=4)
            floor_text = (f"floor = bytes ÷ bandwidth at each bar's batch, "
                          f"{fmt_ms(min(floors))} to {fmt_ms(max(floors))}")
        top = -0.95
        ax.set_ylim(len(values) - 0.45, top)
        on_left = floor_ms / xmax > 0.55
        ax.annotate(
            floor_text, xy=(floor_ms, top + 0.3),
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


def _bar_floors(floor_ms, bars: int) -> list[float]:
    """One floor in ms per bar, from a single floor or a list of one per bar."""
    floors = list(floor_ms) if isinstance(floor_ms, (list, tuple)) else [floor_ms] * bars
    if len(floors) != bars:
        raise ValueError(f"got {len(floors)} floors for {bars} bars; pass one floor, or one per bar")
    for f in floors:
        if not f or f <= 0:
            raise ValueError(
                f"floor_ms must be greater than 0, got {f!r}; compute it first with "
                "roofline.decode_floor(...) or roofline.floor_ms(bytes, gbps)"
            )
    return [float(f) for f in floors]


def timeline(
    timelines,
    *,
    path=None,
    title: str | None = None,
    note: str | None = None,
    max_us: float | None = None,
    min_us: float | None = None,
) -> Figure:
    """One panel per Timeline: a CPU row of calls and a GPU row of kernels, idle GPU time shaded.

    Each panel draws one steady-state step from its first kernel (or operator) to the
    next step's; host calls issued earlier, while the previous step ran, sit left of
    zero. A dotted mark shows the step's time without the profiler, when known.
    max_us and min_us crop the shared time axis (min_us=0 leaves out the launch calls
    before the first kernel). Returns the Figure.
    """
    timelines = list(timelines)
    if not timelines:
        raise ValueError("timeline needs at least one Timeline, e.g. from "
                         "floorlab.timelines.steady_timeline(...)")

    def extent(tl) -> tuple[float, float]:
        starts = [i.start_us for i in list(tl.cpu) + list(tl.gpu)]
        right = max([tl.span_us, (tl.timed_ms or 0.0) * 1e3])
        return min(starts + [0.0]), right

    left_us = min_us if min_us is not None else min(extent(tl)[0] for tl in timelines)
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


# ---- the gallery: many cards side by side ---------------------------------------------------

PATH_COLOURS = {"eager": REST_ORANGE, "graph replay": "#56B4E9", "best": "#009E73"}
GALLERY_PATHS = ("eager", "graph replay", "best")


def _cards(cards) -> list:
    cards = list(cards)
    if not cards:
        raise ValueError("draw at least one card, e.g. floorlab.gallery.load_gallery().cards")
    return cards


def _times_ticks(axis, low: float, high: float) -> None:
    """Ticks at 1, 2, 5, 10, ... within [low, high] on a log axis (ax.xaxis), written as '2×'."""
    ticks = [m * 10 ** e for e in range(-1, 5) for m in (1, 2, 5) if low <= m * 10 ** e <= high]
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))


def _card_tick(card) -> str:
    """A card's axis label: its name, then its kind and date (and whose it is)."""
    name = card.name + (f" #{card.number}" if card.number else "")
    return f"{name}\n{' · '.join(x for x in (card.kind, card.date, card.tag) if x)}"


def gallery_bars(cards, *, path=None, title: str | None = None, note: str | None = None) -> Figure:
    """Each card's eager, graph-replay and best step as a multiple of its own floor.

    One group of three bars per card (floorlab.gallery.Card), starting at the floor (1×)
    on a log axis. A path a card could not run is written as absent, not drawn as zero.
    Returns the Figure.
    """
    cards = _cards(cards)
    bars = []  # (y, ratio or None, colour, text)
    for g, card in enumerate(cards):
        rows = {"eager": card.eager, "graph replay": card.graph, "best": card.best}
        for k, key in enumerate(GALLERY_PATHS):
            row, y = rows[key], g + (k - 1) * 0.28
            name = f"best: {row.path}" if key == "best" else key
            if row is None:
                bars.append((y, None, PATH_COLOURS[key], f"{key} {card.graph_note}"))
            else:
                bars.append((y, row.x_floor, PATH_COLOURS[key], f"{fmt_times(row.x_floor)}  {name}"))
    ratios = [r for _, r, _, _ in bars if r is not None]
    low = min(0.7, min(ratios) / 1.3)
    high = max(max(ratios), 3.0) ** (1 / 0.68) * low ** (1 - 1 / 0.68)  # tallest bar at 68%

    with matplotlib.rc_context(STYLE):
        fig = _new_figure(0.95 + 1.0 * len(cards))
        ax = fig.subplots()
        ax.set_xscale("log")
        for y, ratio, colour, text in bars:
            if ratio is None:
                ax.text(1.0, y, f"  {text}", ha="left", va="center", color=MUTED,
                        fontstyle="italic", fontsize=8.5)
                continue
            ax.barh(y, ratio - 1.0, left=1.0, height=0.24, color=colour)
            ax.annotate(text, xy=(ratio, y), xytext=(5, 0), textcoords="offset points",
                        ha="left", va="center", color=INK, fontsize=9, annotation_clip=False)
        ax.axvline(1.0, color=INK, linestyle="--", linewidth=1.2, zorder=4)
        ax.annotate("the floor (1×)", xy=(1.0, -0.62), xytext=(-4, 0), textcoords="offset points",
                    ha="right", va="center", fontsize=9, color=INK)
        ax.set_xlim(low, high)
        _times_ticks(ax.xaxis, low, high)
        ax.set_ylim(len(cards) - 0.5, -0.75)
        ax.set_yticks(range(len(cards)), [_card_tick(c) for c in cards])
        for tick, card in zip(ax.get_yticklabels(), cards):
            if card.mine:
                tick.set_fontweight("bold")
        for g in range(1, len(cards)):
            ax.axhline(g - 0.5, color="#DDDDDD", linewidth=0.8)
        ax.tick_params(axis="y", length=0, pad=6)
        ax.spines["left"].set_visible(False)
        ax.set_xlabel("time per decode token, as a multiple of the card's own floor (log scale)")
        if title:
            ax.set_title(title, loc="left", color=INK, pad=8)
        handles = [Patch(color=PATH_COLOURS[k], label=k if k != "best" else "best path")
                   for k in GALLERY_PATHS]
        _legend_and_note(ax, handles, ncol=3, note=note, below_pt=36)
        _save(fig, path)
    return fig


def gallery_scatter(cards, *, cost=None, path=None, title: str | None = None,
                    note: str | None = None) -> Figure:
    """Floor bandwidth (GB/s) against multiple of the floor: each card's eager and best path.

    A line joins a card's two points: what graphs and fusion won back. cost, a
    floorlab.gallery.ReplayCost, adds the fixed-cost model's graph replay across
    bandwidths. Both axes are logarithmic. Returns the Figure.
    """
    cards = _cards(cards)
    gbps = [c.floor.bandwidth_gbps for c in cards]
    span = gbps + ([cost.floor.bandwidth_gbps] if cost is not None else [])
    left, right = min(span) / 2.2, max(span) * 2.2
    ys = [c.eager.x_floor for c in cards] + [c.best.x_floor for c in cards]

    with matplotlib.rc_context(STYLE):
        fig = _new_figure(4.6)
        ax = fig.subplots()
        ax.set_xscale("log")
        ax.set_yscale("log")
        handles = []
        if cost is not None:
            import numpy as np

            xs = np.geomspace(left, right, 80)
            model = [cost.x_floor_at(x) for x in xs]
            ys += [model[0], model[-1]]
            ax.plot(xs, model, color=PATH_COLOURS["graph replay"], linewidth=1.6, zorder=1)
            ax.scatter([cost.floor.bandwidth_gbps], [cost.measured_x_floor], s=70,
                       facecolor="white", edgecolor=PATH_COLOURS["graph replay"], linewidth=2,
                       zorder=3)
            ys.append(cost.measured_x_floor)
            if cost.stored and not any(c.origin == "stored" for c in cards):  # not a card here
                ax.annotate(f"graph replay of\n{cost.label}", xy=(cost.floor.bandwidth_gbps,
                            cost.measured_x_floor), xytext=(-10, 0), textcoords="offset points",
                            ha="right", va="center", fontsize=8.5, color=MUTED,
                            fontstyle="italic")
            handles += [Line2D([], [], color=PATH_COLOURS["graph replay"], linewidth=1.6,
                               label=f"graph replay, predicted: floor + {cost.kernels} "
                                     f"kernels × {cost.overhead_us:.2f} µs"),
                        Line2D([], [], marker="o", linestyle="", markersize=8,
                               markerfacecolor="white", markeredgewidth=2,
                               color=PATH_COLOURS["graph replay"],
                               label="graph replay, measured where the price comes from")]
        placed = []  # bandwidths already labelled: near ones stack their labels downwards
        for card in cards:
            x, eager, best = card.floor.bandwidth_gbps, card.eager.x_floor, card.best.x_floor
            edge = dict(edgecolor=INK, linewidth=1.8) if card.mine else dict(edgecolor="white")
            ax.scatter([x], [eager], s=70, color=PATH_COLOURS["eager"], zorder=3, **edge)
            name = card.name + (f" #{card.number}" if card.number else "")
            name += f" ({card.tag})" if card.tag else ""
            if card.best.path == "eager":  # nothing beat eager: one point says both
                name += "\neager is its best path"
            else:
                ax.plot([x, x], [eager, best], color=MUTED, linewidth=1.0, zorder=2)
                ax.scatter([x], [best], s=80, marker="D", color=PATH_COLOURS["best"], zorder=3,
                           **edge)
            near = sum(abs(math.log10(x / p)) < 0.08 for p in placed)
            placed.append(x)
            on_right = math.log(x / left) / math.log(right / left) < 0.72
            ax.annotate(f"{name}\n{fmt_gbps(x)}", xy=(x, (eager * best) ** 0.5),
                        xytext=(9 if on_right else -9, -30 * near), textcoords="offset points",
                        ha="left" if on_right else "right", va="center", fontsize=8.5,
                        color=INK, fontweight="bold" if card.mine else "normal")
        low, high = min(min(ys), 1.0) / 1.6, max(ys) * 2.0
        ax.axhline(1.0, color=INK, linestyle="--", linewidth=1.2, zorder=1)
        ax.annotate("the floor (1×)", xy=(left, 1.0), xytext=(4, 4), textcoords="offset points",
                    ha="left", va="bottom", fontsize=9, color=INK)
        ax.set_xlim(left, right)
        ax.set_ylim(low, high)
        _times_ticks(ax.yaxis, low, high)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("the bandwidth each floor divides by: the larger of copy and read "
                      "(GB/s, log scale)")
        ax.set_ylabel("time per token ÷ the card's floor")
        if title:
            ax.set_title(title, loc="left", color=INK, pad=8)
        handles = [Line2D([], [], marker="o", linestyle="", markersize=8,
                          color=PATH_COLOURS["eager"], label="eager"),
                   Line2D([], [], marker="D", linestyle="", markersize=7,
                          color=PATH_COLOURS["best"], label="best path")] + handles
        _legend_and_note(ax, handles, ncol=2, note=note, below_pt=40)
        _save(fig, path)
    return fig


# Okabe-Ito colours and distinct markers for the paths of the scaling figure, in drawing order.
SERIES_COLOURS = ("#D55E00", "#0072B2", "#009E73", "#CC79A7", "#E69F00", "#56B4E9")
SERIES_MARKERS = ("o", "s", "^", "D", "v", "P")


def _billions_label(params: float) -> str:
    """'0.6B', '8.2B', '33B': a model size for a tick."""
    return f"{params / 1e9:.1f}B" if params < 1e10 else f"{params / 1e9:.0f}B"


def scaling(
    lines,
    *,
    stored=(),
    title: str | None = None,
    path=None,
    note: str | None = None,
    xlabel: str = "model size, parameters (log scale)",
) -> Figure:
    """Multiple of the floor against model size, one line per path, both axes logarithmic.

    lines: {label: [(parameters, x_floor), ...]} in drawing order. Labels in `stored` come
    from another run and are drawn dashed. A dashed line marks the floor (1×), and each
    line's largest model is labelled with its multiple. Returns the Figure.
    """
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

    with matplotlib.rc_context(STYLE):
        fig = _new_figure(4.4)
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
        ticks = [t for t in (1, 2, 5, 10, 20, 50, 100, 200, 500) if t <= top * 1.5]
        ax.set_yticks(ticks, [f"{t:g}×" for t in ticks])
        ax.yaxis.set_minor_locator(NullLocator())
        _label_ends(ax, ends)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("time per token ÷ the floor (log scale)")
        if title:
            ax.set_title(title, loc="left", color=INK, pad=8)
        _legend_and_note(ax, handles, ncol=min(len(handles), 2), note=note, below_pt=36)
        _save(fig, path)
    return fig


GEMV_WAYS = {"alone": "one GEMV alone", "serial": "back to back, no PDL",
             "chained": "back to back, chained with PDL"}


def gemv_sizes(rows, read_gbps: float, *, title: str | None = None, path=None,
               note: str | None = None) -> Figure:
    """Achieved GB/s of one GEMV against its weight size, one line per way of launching it.

    rows: floorlab.kernel_sweep.sweep_sizes rows (bytes and <way>_gbps for alone, serial,
    chained). A dashed line marks read_gbps, the bandwidth the floor assumes. Returns the Figure.
    """
    rows = sorted(rows, key=lambda r: r["bytes"])
    if not rows:
        raise ValueError("gemv_sizes needs rows from floorlab.kernel_sweep.sweep_sizes, got none")
    if read_gbps <= 0:
        raise ValueError(f"read_gbps must be above 0, got {read_gbps}")
    mb = [r["bytes"] / 1e6 for r in rows]
    with matplotlib.rc_context(STYLE):
        fig = _new_figure(4.4)
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
        if title:
            ax.set_title(title, loc="left", color=INK, pad=8)
        _legend_and_note(ax, handles, ncol=2, note=note, below_pt=36)
        _save(fig, path)
    return fig


def _label_ends(ax, ends) -> None:
    """Write each line's last multiple beside its last point, nudged apart where they would touch."""
    pixels = ax.transData.transform([(x, y) for x, y, _ in ends])
    gap_px = 11 * ax.figure.dpi / 72  # one line of 9-point text
    placed: list[tuple[float, float]] = []  # (x, y) in pixels of the labels written so far
    for i in sorted(range(len(ends)), key=lambda i: pixels[i][1]):
        x_px, y_px = pixels[i]
        for px, py in placed:
            if abs(px - x_px) < 1 and y_px < py + gap_px:
                y_px = py + gap_px
        placed.append((x_px, y_px))
        x, y, colour = ends[i]
        ax.annotate(f"{y:.1f}×" if y >= 2 else f"{y:.2f}×", xy=(x, y),
                    xytext=(7, (y_px - pixels[i][1]) * 72 / ax.figure.dpi),
                    textcoords="offset points", ha="left", va="center", fontsize=9,
                    color=colour)


def roofline_plot(
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
