"""Figures wing: the look every figure shares (colours, fonts, sizes) and the small drawing helpers.
No function touches global matplotlib settings: the style lives in a context around each drawing."""
from __future__ import annotations

import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from io import BytesIO

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
from matplotlib.transforms import offset_copy

from floorlab.core.files import write_whole

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
NOTE_CHARS_PER_IN = 12  # 8.5-point italic: a note wraps at the figure's width, never past its edge

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


def png_bytes(fig: Figure) -> bytes:
    """fig as PNG bytes at its own dpi, as the notebook's inline backend would draw it."""
    buffer = BytesIO()
    fig.savefig(buffer, format="png", dpi="figure", bbox_inches="tight", facecolor="white")
    return buffer.getvalue()


def show_as_png_in_ipython() -> None:
    """Let IPython show a Figure as a PNG under any backend (under Agg a cell would print only "<Figure ...>")."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    png = shell.display_formatter.formatters["image/png"]
    try:
        png.lookup_by_type(Figure)
    except KeyError:
        png.for_type(Figure, png_bytes)


@contextmanager
def new_figure(height_in: float) -> Iterator[Figure]:
    """A Figure drawn in STYLE that a notebook shows when returned, but not again at the end of the cell."""
    import matplotlib
    import matplotlib.pyplot as plt  # loads the notebook's display backend

    show_as_png_in_ipython()
    with matplotlib.rc_context(STYLE):
        fig = plt.figure(figsize=(FIG_WIDTH_IN, height_in))
        plt.close(fig)  # pyplot forgets it: shown once, as the returned value
        yield fig


def save_png(fig: Figure, path) -> None:
    """Write fig as a PNG at path (dpi 150, tight box), whole or not at all (core.files.write_whole)."""
    if path is None:
        return
    write_whole(path, lambda stream: fig.savefig(stream, format="png", dpi=DPI, bbox_inches="tight",
                                                 facecolor="white"))


def finish(fig: Figure, ax, handles, *, title: str | None, note: str | None, path, ncol: int,
           below_pt: float = 36) -> Figure:
    """The title (when given) at ax's top left, the legend below_pt points under ax and the note under it, the PNG at
    path; returns fig."""
    if title:
        ax.set_title(title, loc="left", color=INK, pad=8)
    anchor = offset_copy(ax.transAxes, fig=ax.figure, y=-below_pt, units="points")
    legend = ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.0, 0.0), bbox_transform=anchor, ncol=ncol,
                       borderaxespad=0.0, handlelength=1.6, columnspacing=1.6)
    if note:
        width = int(ax.figure.get_figwidth() * NOTE_CHARS_PER_IN)
        ax.annotate("\n".join(textwrap.wrap(note, width)), xy=(0.0, 0.0), xycoords=legend, xytext=(0, -6),
                    textcoords="offset points", ha="left", va="top", fontsize=8.5, color=MUTED, fontstyle="italic",
                    annotation_clip=False)
    save_png(fig, path)
    return fig


def times_ticks(axis, low: float, high: float) -> None:
    """Ticks at 1, 2, 5, 10, ... within [low, high] on a log axis (ax.xaxis), written as '2×'."""
    ticks = [m * 10 ** e for e in range(-1, 5) for m in (1, 2, 5) if low <= m * 10 ** e <= high]
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))


def bar_axis(ax, labels, *, pad: float = 6) -> None:
    """Horizontal rows' y axis: one label per row from y = 0 up, no ticks, no spine."""
    ax.set_yticks(range(len(labels)), labels)
    ax.tick_params(axis="y", length=0, pad=pad)
    ax.spines["left"].set_visible(False)


def whiskers(ax, xs, ys, lows, highs) -> None:
    """p10-p90 whiskers at (xs, ys), reaching lows to the left and highs to the right."""
    ax.errorbar(xs, ys, xerr=[lows, highs], fmt="none", ecolor=INK, elinewidth=1.0, capsize=3,
                capthick=1.0, zorder=3)


def spread_handle() -> Line2D:
    """The legend's entry for a p10-p90 whisker."""
    return Line2D([], [], color=INK, lw=1.0, marker="|", markersize=7, label="p10–p90 spread")


# Okabe-Ito colours and distinct markers for the paths of the scaling figure, in drawing order.
SERIES_COLOURS = ("#D55E00", "#0072B2", "#009E73", "#CC79A7", "#E69F00", "#56B4E9")
SERIES_MARKERS = ("o", "s", "^", "D", "v", "P")


def label_ends(ax, ends) -> None:
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
