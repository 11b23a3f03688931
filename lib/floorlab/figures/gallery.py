"""Figures wing: the gallery's figures, many cards side by side, each against its own floor."""
from __future__ import annotations

import math

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from floorlab.core.prose import fmt_gbps, fmt_times
from floorlab.figures.style import INK, MUTED, REST_ORANGE, bar_axis, finish, new_figure, times_ticks

# ---- the gallery: many cards side by side ---------------------------------------------------

PATH_COLOURS = {"eager": REST_ORANGE, "graph replay": "#56B4E9", "best": "#009E73"}
GALLERY_PATHS = ("eager", "graph replay", "best")


def _cards(cards) -> list:
    cards = list(cards)
    if not cards:
        raise ValueError("draw at least one card, e.g. floorlab.studies.gallery_folder.load_gallery().cards")
    return cards


def _plain(text: str) -> str:
    """text as matplotlib draws it letter for letter: a '$' in a stranger's device name is no math."""
    return str(text).replace("$", r"\$")


def _card_name(card) -> str:
    return card.name + (f" #{card.number}" if card.number else "")


def _card_tick(card) -> str:
    """A card's axis label: its name, then its kind and date (and whose it is)."""
    return _plain(f"{_card_name(card)}\n{' · '.join(x for x in (card.kind, card.date, card.tag) if x)}")


def gallery_bars(cards, *, path=None, title: str | None = None, note: str | None = None) -> Figure:
    """Each card's eager, graph-replay and best step as a multiple of its own floor."""
    cards = _cards(cards)
    bars = []  # (y, ratio or None, colour, text)
    for g, card in enumerate(cards):
        rows = {"eager": card.eager, "graph replay": card.graph, "best": card.best}
        for k, key in enumerate(GALLERY_PATHS):
            row, y = rows[key], g + (k - 1) * 0.28
            name = f"best: {row.path}" if key == "best" else key
            if row is None:
                bars.append((y, None, PATH_COLOURS[key], _plain(f"{key} {card.graph_note}")))
            else:
                bars.append((y, row.x_floor, PATH_COLOURS[key], _plain(f"{fmt_times(row.x_floor)}  {name}")))
    ratios = [r for _, r, _, _ in bars if r is not None]
    low = min(0.7, min(ratios) / 1.3)
    high = max(max(ratios), 3.0) ** (1 / 0.68) * low ** (1 - 1 / 0.68)  # tallest bar at 68%

    with new_figure(0.95 + 1.0 * len(cards)) as fig:
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
        times_ticks(ax.xaxis, low, high)
        ax.set_ylim(len(cards) - 0.5, -0.75)
        bar_axis(ax, [_card_tick(c) for c in cards])
        for tick, card in zip(ax.get_yticklabels(), cards):
            if card.mine:
                tick.set_fontweight("bold")
        for g in range(1, len(cards)):
            ax.axhline(g - 0.5, color="#DDDDDD", linewidth=0.8)
        ax.set_xlabel("time per decode token, as a multiple of the card's own floor (log scale)")
        handles = [Patch(color=PATH_COLOURS[k], label=k if k != "best" else "best path")
                   for k in GALLERY_PATHS]
        return finish(fig, ax, handles, title=title, note=note, path=path, ncol=3)


def gallery_scatter(cards, *, cost=None, path=None, title: str | None = None,
                    note: str | None = None) -> Figure:
    """Floor bandwidth (GB/s) against multiple of the floor: each card's eager and best path."""
    cards = _cards(cards)
    gbps = [c.floor.bandwidth_gbps for c in cards]
    span = gbps + ([cost.floor.bandwidth_gbps] if cost is not None else [])
    left, right = min(span) / 2.2, max(span) * 2.2
    ys = [c.eager.x_floor for c in cards] + [c.best.x_floor for c in cards]

    with new_figure(4.6) as fig:
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
                ax.annotate(_plain(f"graph replay of\n{cost.label}"), xy=(cost.floor.bandwidth_gbps,
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
            name = _card_name(card) + (f" ({card.tag})" if card.tag else "")
            if card.best.path == "eager":  # nothing beat eager: one point says both
                name += "\neager is its best path"
            else:
                ax.plot([x, x], [eager, best], color=MUTED, linewidth=1.0, zorder=2)
                ax.scatter([x], [best], s=80, marker="D", color=PATH_COLOURS["best"], zorder=3,
                           **edge)
            near = sum(abs(math.log10(x / p)) < 0.08 for p in placed)
            placed.append(x)
            on_right = math.log(x / left) / math.log(right / left) < 0.72
            ax.annotate(_plain(f"{name}\n{fmt_gbps(x)}"), xy=(x, (eager * best) ** 0.5),
                        xytext=(9 if on_right else -9, -30 * near), textcoords="offset points",
                        ha="left" if on_right else "right", va="center", fontsize=8.5,
                        color=INK, fontweight="bold" if card.mine else "normal")
        low, high = min(min(ys), 1.0) / 1.6, max(ys) * 2.0
        ax.axhline(1.0, color=INK, linestyle="--", linewidth=1.2, zorder=1)
        ax.annotate("the floor (1×)", xy=(left, 1.0), xytext=(4, 4), textcoords="offset points",
                    ha="left", va="bottom", fontsize=9, color=INK)
        ax.set_xlim(left, right)
        ax.set_ylim(low, high)
        times_ticks(ax.yaxis, low, high)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("the bandwidth each floor divides by: the larger of copy and read "
                      "(GB/s, log scale)")
        ax.set_ylabel("time per token ÷ the card's floor")
        handles = [Line2D([], [], marker="o", linestyle="", markersize=8,
                          color=PATH_COLOURS["eager"], label="eager"),
                   Line2D([], [], marker="D", linestyle="", markersize=7,
                          color=PATH_COLOURS["best"], label="best path")] + handles
        return finish(fig, ax, handles, title=title, note=note, path=path, ncol=2, below_pt=40)
