"""The book's figures, drawn from stand-in data."""
import dataclasses
import random

import matplotlib

matplotlib.use("Agg")

import pytest
from matplotlib.container import BarContainer, ErrorbarContainer

from floorlab.core.timelines import Interval, Timeline
from floorlab.core.timing import Timing
from floorlab.figures import scaling, stacked_bar, timeline

FLOOR_MS = 3.13
SEED_BARS = {"eager": Timing.from_samples([7.74, 7.80, 7.86]), "CUDA graph": 3.40}


def eager_timeline(launches=280, seed=0):
    """CPU launches of ~15 µs, each followed by a ~11 µs kernel that waited for it."""
    rng = random.Random(seed)
    cpu, gpu, t = [], [], 5.0
    for k in range(launches):
        c1 = t + rng.uniform(13, 17)
        cpu.append(Interval("cudaLaunchKernel", t, c1))
        gpu.append(Interval(f"kernel_{k % 10}", c1 + 2, c1 + 2 + rng.uniform(9, 13)))
        t = c1 + 12
    return Timeline(cpu, gpu, span_us=max(t, gpu[-1].end_us) + 5, label="eager")


def graph_timeline(kernels=280):
    """One replay call, then back-to-back kernels of 11 µs."""
    gpu = [Interval("kernel", 25 + 11 * k, 25 + 11 * (k + 1)) for k in range(kernels)]
    return Timeline([Interval("cudaGraphLaunch_v10000", 3, 21)], gpu, span_us=gpu[-1].end_us + 5,
                    label="CUDA graph", timed_ms=3.0)


def all_text(fig):
    return " ".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))


def by_gid(ax, gid):
    return [c for c in ax.collections if c.get_gid() == gid]


def test_stacked_bar_draws_one_bar_per_entry_split_at_the_floor():
    fig = stacked_bar(SEED_BARS, FLOOR_MS, title="one token")
    (ax,) = fig.axes
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert len(bars) == 2  # floor part and the rest
    floor_part, rest = bars
    assert len(floor_part) == len(rest) == 2
    assert [p.get_width() for p in floor_part] == pytest.approx([3.13, 3.13])
    assert [p.get_width() for p in rest] == pytest.approx([4.67, 0.27])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["eager", "CUDA graph"]


def test_stacked_bar_floor_line_is_dashed_at_floor_ms():
    fig = stacked_bar(SEED_BARS, FLOOR_MS)
    (ax,) = fig.axes
    dashed = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert len(dashed) == 1
    assert list(dashed[0].get_xdata()) == pytest.approx([FLOOR_MS, FLOOR_MS])
    assert "floor = bytes ÷ bandwidth = 3.13 ms" in all_text(fig)


def test_stacked_bar_labels_carry_ms_and_multiple_of_floor():
    text = all_text(stacked_bar(SEED_BARS, FLOOR_MS, note="stored reference run: NVIDIA H200"))
    assert "7.80 ms · 2.49× floor" in text
    assert "3.40 ms · 1.09× floor" in text
    assert "+4.67 ms" in text  # the gap, written inside the orange segment
    assert "stored reference run: NVIDIA H200" in text


def test_stacked_bar_spread_becomes_an_error_bar():
    (ax,) = stacked_bar(SEED_BARS, FLOOR_MS).axes
    errs = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(errs) == 1
    (whisker,) = errs[0].lines[2]
    (segment,) = whisker.get_segments()
    timing = SEED_BARS["eager"]
    assert segment[:, 0] == pytest.approx([timing.p10_ms, timing.p90_ms])


def test_stacked_bar_keeps_in_bar_labels_clear_of_a_wide_whisker():
    wide = {"eager on a noisy CPU": Timing.from_samples([400.0, 685.0, 1300.0])}
    (ax,) = stacked_bar(wide, 100.0).axes
    label = next(t for t in ax.texts if t.get_text() == "+585 ms")
    assert label.get_position()[0] < wide["eager on a noisy CPU"].p10_ms  # left of the whisker
    narrow = {"eager": Timing.from_samples([150.0, 685.0, 1300.0])}
    (ax,) = stacked_bar(narrow, 100.0).axes
    assert "+585 ms" not in [t.get_text() for t in ax.texts]  # no room beside the whisker


def test_stacked_bar_takes_any_number_of_bars_and_flags_impossible_times():
    bars = list(SEED_BARS.items()) + [("fused", 3.2), ("transformers", 12.9), ("no sync", 1.0)]
    fig = stacked_bar(bars, FLOOR_MS)
    floor_part = next(c for c in fig.axes[0].containers if isinstance(c, BarContainer))
    assert len(floor_part) == 5
    assert "below the floor" in all_text(fig)


def test_stacked_bar_writes_png(tmp_path):
    path = tmp_path / "deep" / "folder" / "bar.png"
    stacked_bar(SEED_BARS, FLOOR_MS, path=path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("bars, floor", [({}, 3.13), (SEED_BARS, 0.0), ([1.0], 3.13)])
def test_stacked_bar_rejects_bad_input(bars, floor):
    with pytest.raises(ValueError):
        stacked_bar(bars, floor)


def test_timeline_one_panel_per_timeline_two_rows_each():
    fig = timeline([eager_timeline(), graph_timeline()], title="one token")
    assert len(fig.axes) == 2
    for ax in fig.axes:
        assert [t.get_text() for t in ax.get_yticklabels()] == ["CPU", "GPU"]
    eager_ax, graph_ax = fig.axes
    assert eager_ax.get_title(loc="left").startswith("eager · 280 kernels · step")
    # a timed step puts the profiled step's length in the note under the row instead
    assert graph_ax.get_title(loc="left") == "CUDA graph · 280 kernels"
    assert "as long as" in all_text(fig) or "within 10% of" in all_text(fig)


def test_timeline_one_rectangle_per_interval():
    eager, graph = eager_timeline(), graph_timeline()
    eager_ax, graph_ax = timeline([eager, graph]).axes
    (cpu,), (gpu,) = by_gid(eager_ax, "cpu"), by_gid(eager_ax, "gpu")
    assert len(cpu.get_paths()) == 280 and len(gpu.get_paths()) == 280
    (cpu,), (gpu,) = by_gid(graph_ax, "cpu"), by_gid(graph_ax, "gpu")
    assert len(cpu.get_paths()) == 1 and len(gpu.get_paths()) == 280
    assert "cudaGraphLaunch" in all_text(graph_ax.figure)


def test_timeline_draws_every_boundary_of_overlapping_kernels_in_two_halves_of_the_row():
    """Under PDL each kernel starts before the one before it ends: one solid bar would hide the boundaries."""
    kernels = [Interval(f"k{i}", 3.0 * i, 3.0 * i + 4.0) for i in range(7)]
    fig = timeline([Timeline([Interval("cudaGraphLaunch", -5.0, -1.0)], kernels, span_us=25.0, label="pdl")])
    (ax,) = fig.axes
    (upper,), (lower,) = by_gid(ax, "gpu"), by_gid(ax, "gpu-overlap")
    assert len(upper.get_paths()) == 4 and len(lower.get_paths()) == 3
    assert "overlapping ones take turns in two halves" in all_text(fig)
    (ax,) = timeline([graph_timeline()]).axes  # back to back, no overlap: one row as before
    assert by_gid(ax, "gpu-overlap") == []


def test_timeline_shades_and_reports_gpu_idle_time():
    eager = eager_timeline()
    eager_ax, graph_ax = timeline([eager, graph_timeline()]).axes
    idle_us = sum(b - a for a, b in eager.gpu_idle_spans())
    busy_us = sum(i.end_us - i.start_us for i in eager.gpu)
    assert idle_us == pytest.approx(eager.span_us - busy_us) == pytest.approx(eager.gpu_idle_us)
    assert eager_ax.get_title(loc="right") == f"GPU idle {idle_us / eager.span_us:.0%} of the step"
    assert len(by_gid(eager_ax, "gpu-idle")[0].get_paths()) == 281  # before, between, after
    # Back-to-back kernels leave idle time only before the first and after the last.
    assert len(by_gid(graph_ax, "gpu-idle")[0].get_paths()) == 2
    # a step the profiler stretched past 10% of the timed one says the timed step's idle share too
    stretched = dataclasses.replace(eager, timed_ms=eager.profiled_ms / 2)
    (ax,) = timeline([stretched]).axes
    timed_idle = 1 - busy_us / 1e3 / stretched.timed_ms
    assert ax.get_title(loc="right") == f"GPU idle {idle_us / eager.span_us:.0%} as profiled, {timed_idle:.0%} timed"


def test_timeline_cpu_only_says_there_is_no_gpu_row():
    ops = [Interval("aten::mm", 40 * i, 40 * i + 30) for i in range(50)]
    fig = timeline([Timeline(ops, [], span_us=2000.0, label="eager on the CPU")])
    (ax,) = fig.axes
    assert by_gid(ax, "gpu") == []
    assert len(by_gid(ax, "cpu")[0].get_paths()) == 50
    assert "no GPU row: operators run on the CPU" in all_text(fig)


def test_timeline_picks_ms_for_long_steps_and_us_for_short_ones():
    (ax,) = timeline([eager_timeline()]).axes
    assert "(ms)" in ax.get_xlabel()
    assert ax.get_xlim()[1] == pytest.approx(eager_timeline().span_us / 1000)
    (ax,) = timeline([eager_timeline()], max_us=500).axes
    assert "(µs)" in ax.get_xlabel() and ax.get_xlim() == pytest.approx((0, 500))


def test_timeline_handles_thousands_of_intervals_and_writes_png(tmp_path):
    path = tmp_path / "figs" / "timeline.png"
    fig = timeline([eager_timeline(launches=5000)], path=path, note="stand-in data")
    assert len(by_gid(fig.axes[0], "gpu")[0].get_paths()) == 5000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_timeline_says_how_the_profiled_step_compares_with_the_timed_one():
    graph = graph_timeline()
    (ax,) = timeline([graph]).axes
    assert graph.profiler_note() in all_text(ax.figure)
    dotted = [line for line in ax.lines if line.get_linestyle() == ":"]
    assert list(dotted[0].get_xdata()) == pytest.approx([3.0, 3.0])  # ms: the span is over 2 ms


def test_timeline_needs_at_least_one_timeline():
    with pytest.raises(ValueError):
        timeline([])


def test_stacked_bar_gives_each_bar_its_own_floor_when_given_one_per_bar():
    bars = {"eager, batch 1": 7.8, "graph, batch 1": 3.4, "graph, batch 16": 4.0}
    fig = stacked_bar(bars, [3.13, 3.13, 3.5])
    (ax,) = fig.axes
    floor_part = next(c for c in ax.containers if isinstance(c, BarContainer))
    assert [p.get_width() for p in floor_part] == pytest.approx([3.13, 3.13, 3.5])
    dashed = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert sorted(line.get_xdata()[0] for line in dashed) == pytest.approx([3.13, 3.13, 3.5])
    assert "4.00 ms · 1.14× floor" in all_text(fig)  # the ratio to its own floor
    with pytest.raises(ValueError, match="one per bar"):
        stacked_bar(bars, [3.13, 3.5])


SIZES = {"eager": [(0.6e9, 54.0), (8.2e9, 4.2)], "graph replay": [(0.6e9, 7.6), (8.2e9, 1.7)],
         "fused (stored)": [(8.2e9, 1.42), (0.6e9, 5.3)]}


def test_scaling_draws_one_line_per_path_on_log_axes():
    fig = scaling(SIZES, stored={"fused (stored)"}, title="by size")
    (ax,) = fig.axes
    assert ax.get_xscale() == ax.get_yscale() == "log"
    drawn = {line.get_gid(): line for line in ax.get_lines() if line.get_gid() in SIZES}
    assert set(drawn) == set(SIZES)
    assert list(drawn["fused (stored)"].get_xdata()) == [0.6e9, 8.2e9]  # sorted by size
    assert list(drawn["graph replay"].get_ydata()) == [7.6, 1.7]
    assert drawn["fused (stored)"].get_linestyle() == "--"
    assert drawn["eager"].get_linestyle() == "-"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.6B", "8.2B"]
    text = all_text(fig)
    assert "4.2×" in text and "1.70×" in text and "the floor" in text


def test_scaling_keeps_end_labels_apart():
    fig = scaling({"a": [(1e9, 1.40)], "b": [(1e9, 1.42)]})
    (ax,) = fig.axes
    labels = [t for t in ax.texts if t.get_text() in ("1.40×", "1.42×")]
    fig.canvas.draw()
    boxes = [t.get_window_extent() for t in labels]
    assert len(boxes) == 2 and not boxes[0].overlaps(boxes[1])


def test_scaling_writes_png_and_rejects_bad_input(tmp_path):
    scaling(SIZES, path=tmp_path / "sizes.png", note="stand-in data")
    assert (tmp_path / "sizes.png").stat().st_size > 0
    with pytest.raises(ValueError, match="at least one"):
        scaling({"eager": []})
    with pytest.raises(ValueError, match="above 0"):
        scaling({"eager": [(1e9, 0.0)]})


def test_stacked_bar_gives_a_bar_its_own_floor():
    bars = {"decode": 3.0, "prefill, 256 tokens": 0.02}
    fig = stacked_bar(bars, 1.0, floors={"prefill, 256 tokens": 0.01}, floor_label="the floor")
    text = all_text(fig)
    assert "2.00× floor" in text  # the prefill bar against its own floor, not decode's
    assert "below the floor" not in text
    assert "the floor" in text


def test_roofline_draws_the_slope_the_roof_and_every_point(tmp_path):
    from floorlab.figures import roofline_plot

    series = {"prefill": [(1.0, 4.0, "1"), (256.0, 500.0, "256")], "decode": [(1.0, 0.5, "")]}
    fig = roofline_plot(series, bandwidth_gbps=4000.0, peak_tflops=800.0, title="roofline",
                   path=tmp_path / "roofline.png")
    (ax,) = fig.axes
    assert ax.get_xscale() == ax.get_yscale() == "log"
    text = all_text(fig)
    assert "knee: 200 FLOPs per byte" in text and "800 TFLOP/s" in text and "256" in text
    assert len(ax.lines) == 1 + 1 + 2  # the roofline, the knee, one line per series
    assert (tmp_path / "roofline.png").stat().st_size > 0
    with pytest.raises(ValueError, match="greater than 0"):
        roofline_plot({"x": [(0.0, 1.0, "")]}, bandwidth_gbps=1.0, peak_tflops=1.0)


def test_gemv_sizes_draws_each_way_against_the_read_bandwidth(tmp_path):
    from floorlab.figures import gemv_sizes

    rows = [{"bytes": b, "alone_gbps": a, "serial_gbps": s, "chained_gbps": c}
            for b, a, s, c in ((8e6, 800.0, 1900.0, 2300.0), (5e5, 30.0, 280.0, 360.0))]
    fig = gemv_sizes(rows, 4360.0, title="sizes", note="stand-in data", path=tmp_path / "g.png")
    (ax,) = fig.axes
    drawn = {line.get_gid(): line for line in ax.get_lines() if line.get_gid()}
    assert set(drawn) == {"alone", "serial", "chained"}
    assert list(drawn["chained"].get_xdata()) == [0.5, 8.0]  # MB, sorted by size
    assert list(drawn["alone"].get_ydata()) == [30.0, 800.0]
    assert "read bandwidth, 4360 GB/s" in all_text(fig)
    assert (tmp_path / "g.png").stat().st_size > 0
    with pytest.raises(ValueError, match="sweep_sizes"):
        gemv_sizes([], 4360.0)
    with pytest.raises(ValueError, match="above 0"):
        gemv_sizes(rows, 0.0)


def test_timeline_can_start_at_the_first_kernel():
    fig = timeline([graph_timeline()], min_us=0, max_us=50)
    assert fig.axes[0].get_xlim() == (0.0, 50.0)


def test_stacked_bar_floors_that_print_alike_are_not_a_range_of_equals():
    bars = {"here": 0.50, "stored": 1.49}
    text = all_text(stacked_bar(bars, 0.2786, floors={"stored": 0.2794}))
    assert "0.279 ms to 0.279 ms" not in text
    assert "0.279 ms for every bar" in text
    text = all_text(stacked_bar(bars, 0.25, floors={"stored": 0.2794}))
    assert "0.250 ms to 0.279 ms" in text


def test_pdl_schematic_hides_the_second_kernels_start_and_first_loads_under_the_first(tmp_path):
    from floorlab.figures import pdl_schematic
    from floorlab.figures.pdl import bus_idle_share, pdl_phases

    panels = pdl_phases(2, start_us=1.0, stream_us=4.0, drain_us=1.0, early_us=0.5)
    serial, chained = panels["without PDL"], panels["with PDL"]
    assert serial[1][0][1] == serial[0][-1][2]  # without PDL: starts when the first has drained
    second = dict((name, (a, b)) for name, a, b in chained[1])
    first_end = chained[0][-1][2]
    assert second["start"][0] < chained[0][1][2]  # started while the first still streams
    assert second["early"][0] < first_end  # weights loaded before the first one ends
    assert second["wait"][1] == first_end  # and the wait returns as it ends
    assert chained[1][-1][2] < serial[1][-1][2]  # the chain ends sooner
    assert bus_idle_share(chained) < bus_idle_share(serial)
    fig = pdl_schematic(title="pdl", path=tmp_path / "pdl.png")
    assert len(fig.axes) == 2
    assert "schematic" in all_text(fig) and "bus idle" in all_text(fig)
    assert (tmp_path / "pdl.png").stat().st_size > 0
    with pytest.raises(ValueError, match="at least 2"):
        pdl_schematic(1)
    with pytest.raises(ValueError, match="above 0"):
        pdl_schematic(stream_us=0)
    with pytest.raises(ValueError, match="smaller"):
        pdl_schematic(stream_us=1.0, early_us=2.0)


def test_fusion_schematic_counts_kernels_and_boundaries_both_ways(tmp_path):
    from floorlab.figures import fusion_schematic
    from floorlab.figures.fusion import BOOK_KERNELS, LAYER_OPS, kernel_groups

    groups = kernel_groups()
    assert len(groups) == 5 and [op for g in groups for op in g] == list(LAYER_OPS)
    assert [name for name, kind in groups[3]] == ["RMSNorm", "gate_up", "SiLU·mul"]
    fig = fusion_schematic(title="fusion", path=tmp_path / "f.png")
    text = all_text(fig)
    n = len(LAYER_OPS)
    assert f"{n} kernels, {n - 1} boundaries" in text and "5 kernels, 4 boundaries" in text
    assert "prologue" in text and "epilogue" in text and "schematic" in text
    (ax,) = fig.axes
    assert sum(p.get_gid() == "kernel" for p in ax.patches) == n + len(BOOK_KERNELS)
    assert (tmp_path / "f.png").stat().st_size > 0
    with pytest.raises(ValueError, match="summing to"):
        fusion_schematic(kernels=(2, 2))
    with pytest.raises(ValueError, match="kind one of"):
        fusion_schematic(ops=[("norm", "magic")], kernels=(1,))
    with pytest.raises(ValueError, match="at least one"):
        fusion_schematic(ops=[], kernels=())


def test_a_returned_figure_shows_as_a_png_under_any_backend():
    """Under Agg (MPLBACKEND=Agg) IPython knows no image for a Figure and a chapter would print
    "<Figure size ...>" where its figure belongs, in JupyterLab and on the site alike."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.display_formatter.formatters["image/png"].pop(matplotlib.figure.Figure, None)
        fig = stacked_bar({"eager": 2.5, "graph replay": 1.2}, 1.0)
        data, _ = shell.display_formatter.format(fig)
        assert data["image/png"][:8] == b"\x89PNG\r\n\x1a\n", "a figure would show as its text repr"
    finally:
        InteractiveShell.clear_instance()
