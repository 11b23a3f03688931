"""Figures wing: a schematic of programmatic dependent launch, kernels without and with it.
Not a measurement: the durations are illustrative, and the figure says so."""
from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from floorlab.core.launches import merged_spans
from floorlab.core.numbers import positive_number, whole_number
from floorlab.figures.style import (
    CPU_GREY,
    FLOOR_BLUE,
    IDLE_ALPHA,
    IDLE_RED,
    INK,
    MUTED,
    REST_ORANGE,
    bar_axis,
    finish,
    new_figure,
)

PHASES = {  # phase: (colour, hatch, legend label)
    "start": (CPU_GREY, "", "starts or drains: no weights move"),
    "drain": (CPU_GREY, "", "starts or drains: no weights move"),
    "stream": (FLOOR_BLUE, "", "streams its weights"),
    "early": (REST_ORANGE, "", "weights loaded before the wait (PDL)"),
    "wait": ("white", "///", "waits for the kernel before it"),
}


def _positive(name: str, value) -> float:
    return positive_number(value, f"pdl_schematic's {name}", "pass a duration in µs above 0, e.g. 1.0")


def pdl_phases(kernels: int = 2, *, start_us: float = 1.0, stream_us: float = 4.0, drain_us: float = 1.0,
               early_us: float = 0.7) -> dict[str, list[list[tuple[str, float, float]]]]:
    """{'without PDL': kernels, 'with PDL': kernels}, each kernel a list of (phase, start µs, end µs); with PDL a kernel
    starts while the one before streams, loads early_us of weights, waits for it to end, then streams the rest."""
    kernels = whole_number(kernels, "kernels", at_least=2, hint="pdl_schematic draws a chain of at least 2 kernels")
    start_us, stream_us = _positive("start_us", start_us), _positive("stream_us", stream_us)
    drain_us, early_us = _positive("drain_us", drain_us), _positive("early_us", early_us)
    if early_us >= stream_us:
        raise ValueError(f"early_us ({early_us:g}) is the part of stream_us ({stream_us:g}) loaded before "
                         "the wait, so it must be smaller; pass a smaller early_us")
    serial, chained, t = [], [], 0.0
    for _ in range(kernels):
        serial.append([("start", t, t + start_us), ("stream", t + start_us, t + start_us + stream_us),
                       ("drain", t + start_us + stream_us, t + start_us + stream_us + drain_us)])
        t += start_us + stream_us + drain_us
    before_end = stream_end = None  # where the previous kernel ends, and where it stops streaming
    for k in range(kernels):
        if k == 0:
            phases = [("start", 0.0, start_us), ("stream", start_us, start_us + stream_us)]
            end_stream = start_us + stream_us
        else:  # started early: its start hides under the previous kernel's stream
            begin = stream_end - start_us
            loaded = stream_end + min(early_us, drain_us)
            resume = max(loaded, before_end)
            phases = [("start", begin, stream_end), ("early", stream_end, loaded)]
            if resume > loaded:
                phases.append(("wait", loaded, resume))
            end_stream = resume + stream_us - (loaded - stream_end)
            phases.append(("stream", resume, end_stream))
        phases.append(("drain", end_stream, end_stream + drain_us))
        chained.append(phases)
        stream_end, before_end = end_stream, end_stream + drain_us
    return {"without PDL": serial, "with PDL": chained}


def bus_idle_share(kernels: list[list[tuple[str, float, float]]]) -> float:
    """Share (0-1) of the chain's span in which no kernel moves weights."""
    span = max(b for phases in kernels for _, _, b in phases) - min(a for phases in kernels for _, a, _ in phases)
    return 1.0 - sum(b - a for a, b in _moving(kernels)) / span


def _moving(kernels) -> list[tuple[float, float]]:
    """The spans in which some kernel moves weights, merged."""
    return merged_spans((a, b) for phases in kernels for name, a, b in phases if name in ("stream", "early"))


def pdl_schematic(kernels: int = 2, *, start_us: float = 1.0, stream_us: float = 4.0, drain_us: float = 1.0,
                  early_us: float = 0.7, title: str | None = None, path=None,
                  note: str | None = "schematic: durations are illustrative, not measured") -> Figure:
    """Two panels, a chain of kernels without and with PDL, and below each the memory bus's idle time."""
    panels = pdl_phases(kernels, start_us=start_us, stream_us=stream_us, drain_us=drain_us, early_us=early_us)
    right = max(b for chain in panels.values() for phases in chain for _, _, b in phases)
    row_h = 0.6
    with new_figure(1.2 + 1.05 * (kernels + 1)) as fig:
        axes = fig.subplots(2, 1, sharex=True)
        fig.subplots_adjust(hspace=0.55)
        for ax, (label, chain) in zip(axes, panels.items()):
            for k, phases in enumerate(chain):
                y = kernels - k
                for name, a, b in phases:
                    colour, hatch, _ = PHASES[name]
                    ax.broken_barh([(a, b - a)], (y - row_h / 2, row_h), facecolors=colour, hatch=hatch,
                                   edgecolor=INK if name == "wait" else "white", linewidth=0.6, gid=name)
            moving = _moving(chain)
            gaps = [(end, start - end) for (_, end), (start, _) in zip(moving, moving[1:])]
            ax.broken_barh([(a, b - a) for a, b in moving], (-row_h / 2, row_h), facecolors=FLOOR_BLUE,
                           linewidth=0, gid="bus")
            ax.broken_barh(gaps, (-row_h / 2, row_h), facecolors=IDLE_RED, alpha=IDLE_ALPHA, linewidth=0,
                           gid="bus idle")
            bar_axis(ax, ["memory bus"] + [f"kernel {kernels - y + 1}" for y in range(1, kernels + 1)],
                     pad=3.5)  # matplotlib's own pad
            ax.set_ylim(-0.6, kernels + 0.6)
            ax.set_xlim(0, right * 1.02)
            ax.set_title(label, loc="left", color=INK, fontsize=10, pad=4)
            if label == "with PDL":  # each wait returns as the kernel before it ends
                for phases in chain[:-1]:
                    ax.axvline(phases[-1][2], color=INK, linestyle=":", linewidth=1.0, zorder=1)
            ax.text(1.0, 1.02, f"bus idle {bus_idle_share(chain):.0%} of the span", transform=ax.transAxes,
                    ha="right", va="bottom", fontsize=9, color=MUTED)
        axes[-1].set_xlabel("time (µs, illustrative)")
        if title:
            fig.suptitle(title, x=0.125, ha="left", color=INK, fontsize=10.5)
        handles = [Patch(facecolor=c, hatch=h, edgecolor=INK if h else c, label=text)
                   for c, h, text in dict.fromkeys(PHASES.values())]
        handles.append(Patch(facecolor=IDLE_RED, alpha=IDLE_ALPHA, label="bus idle: no weights move"))
        handles.append(Line2D([], [], color=INK, linestyle=":", linewidth=1.0,
                              label="the kernel before ends; the wait returns"))
        return finish(fig, axes[-1], handles, title=None, note=note, path=path, ncol=2, below_pt=34)
