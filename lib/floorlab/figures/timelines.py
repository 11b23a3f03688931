"""Figures wing: the timeline, who works when, host calls above and GPU kernels below."""
from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import blended_transform_factory

from floorlab.core.launches import base_name
from floorlab.core.numbers import instance, number
from floorlab.core.numbers import shown as shown_value
from floorlab.core.prose import fmt_ms
from floorlab.core.timelines import Timeline
from floorlab.figures.style import (
    CPU_GREY,
    GPU_BLUE,
    IDLE_ALPHA,
    IDLE_RED,
    INK,
    MUTED,
    finish,
    new_figure,
)


def timeline(timelines, *, path=None, title: str | None = None, note: str | None = None,
             max_us: float | None = None, min_us: float | None = None) -> Figure:
    """One panel per Timeline: a CPU row of calls, a GPU row of kernels (overlapping ones in turn in its halves), idle
    GPU time shaded; max_us and min_us crop the shared axis (min_us=0 drops the calls before the first kernel)."""
    if isinstance(timelines, (str, bytes, Timeline)) or not hasattr(timelines, "__iter__"):
        raise ValueError(f"timelines must be a list of Timelines, got {shown_value(timelines)}; wrap one in a "
                         "list: timeline([steady_timeline(...)])")
    timelines = [instance(tl, Timeline, "every item of timelines", hint="pass what steady_timeline or "
                          "fl.profile_path returns") for tl in timelines]
    for name, value in (("max_us", max_us), ("min_us", min_us)):
        if value is not None:
            number(value, name)
    if not timelines:
        raise ValueError("timeline needs at least one Timeline, e.g. from "
                         "floorlab.core.timelines.steady_timeline(...)")

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

    with new_figure(height_in) as fig:
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
                if _overlapping(gpu):  # (PDL) kernels in turn take the upper and lower half of the row
                    ordered = sorted(gpu, key=lambda i: i.start_us)
                    for lane, gid in enumerate(("gpu", "gpu-overlap")):
                        ax.broken_barh(bars(ordered[lane::2]), (y_gpu - lane * row_h / 2, row_h / 2),
                                       facecolors=GPU_BLUE, edgecolors="white", linewidth=0.5,
                                       gid=gid, zorder=2)
                else:
                    ax.broken_barh(bars(gpu), (y_gpu - row_h / 2, row_h), facecolors=GPU_BLUE,
                                   linewidth=0, gid="gpu", zorder=2)
                idle = f"GPU idle {tl.gpu_idle_share:.0%} of the step"
                if tl.timed_idle_share is not None:  # the profiler stretched the step: say both
                    idle = f"GPU idle {tl.gpu_idle_share:.0%} as profiled, {tl.timed_idle_share:.0%} timed"
                ax.set_title(idle, loc="right",
                             color=IDLE_RED, fontsize=9.5, pad=4)
                # the profiled step's length sits in the note under the row when a timed step came with it
                head = f"{tl.label} · {tl.kernels} kernels" + (
                    "" if tl.timed_ms else f" · step {fmt_ms(tl.profiled_ms)} profiled")
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
                        ax.annotate(base_name(i.name), xy=(i.end_us / scale, y_cpu),
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
            lanes = any(_overlapping(tl.gpu) for tl in timelines)
            handles += [Patch(color=GPU_BLUE, label="GPU: kernel running" + (
                            "; overlapping ones take turns in two halves" if lanes else "")),
                        Patch(color=IDLE_RED, alpha=IDLE_ALPHA, label="GPU idle")]
        handles.append(Line2D([], [], color=MUTED, linewidth=0.9, label="next step starts"))
        if any_timed:
            handles.append(Line2D([], [], color=INK, linewidth=1.1, linestyle=":",
                                  label="step time without the profiler"))
        if title:
            axes[0].annotate(title, xy=(0, 1), xycoords="axes fraction", xytext=(0, 22),
                             textcoords="offset points", ha="left", va="bottom",
                             fontsize=11, color=INK)
        return finish(fig, axes[-1], handles, title=None, note=note, path=path, ncol=min(len(handles), 3))


def _overlapping(intervals) -> bool:
    """True when some interval starts before the one before it ends (kernels under PDL)."""
    ordered = sorted(intervals, key=lambda i: i.start_us)
    return any(b.start_us < a.end_us for a, b in zip(ordered, ordered[1:]))
