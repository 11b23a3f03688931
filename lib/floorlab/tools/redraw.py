"""Tools wing: `python -m floorlab redraw`: every stored H200 figure drawn again, on a CPU in seconds, by
its chapter's figure cell (as on a GPU) fed from the stored run instead of a live measurement."""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from matplotlib.figure import Figure

from floorlab.core.files import folder_problem
from floorlab.core.intensity import achieved_tflops, flops_per_token, prefill_bound_ms
from floorlab.core.reference import figure_dirs, reference_run
from floorlab.core.runs import Run
from floorlab.core.shapes import get_shape
from floorlab.engine.measure import Source
from floorlab.figures import gemv_sizes, roofline_plot, scaling, stacked_bar, timeline
from floorlab.studies.bigger_models import Sizes, x_floor_points
from floorlab.studies.prefill import roofline_points, stored_contexts, stored_rate, stored_sweep

PREFIX = "h200"  # the card the stored runs and figures are named after
BENCH = f"{PREFIX}-bench"  # the stored bench that the kernels and bigger-models chapters read
PREFILL_TIMELINE_TOKENS = 1024  # the prefill chapter's TIMELINE_TOKENS on a GPU
REPLAY_TITLE = "One decode token as the profiler saw it, {preset}"


def measured_on(run: Run) -> str:
    """'measured on <device>, <date>': the note a chapter writes under a figure it measured."""
    return f"measured on {run.label}"


def eager_label(run: Run, prefix: str = "") -> str:
    """'eager (cuda)': the chapter's f"eager ({dev.type})" for the device the run was made on."""
    return f"{prefix}eager ({run.device.kind})"


def preset_batch(run: Run) -> tuple[str, int]:
    """(preset, batch) the run was measured at, as its chapter's PRESET and BATCH."""
    return run.settings.preset, run.settings.batch or 1


# ---- the eager step against its replays, and timelines --------------------------------

def replay_bars(paths: dict[str, str]):
    """A recipe: the eager step, then each {label: path} replayed (below-the-floor, shared-buffers, fast-card)."""
    def draw(run: Run, *, path=None) -> Figure:
        preset, batch = preset_batch(run)
        bars = {eager_label(run): run.row("eager").timing, **{k: run.row(p).timing for k, p in paths.items()}}
        return stacked_bar(bars, run.floor().floor_ms, title=f"One decode token, {preset}, batch {batch}",
                           note=measured_on(run), path=path)
    return draw


def timelines(keys: tuple[str, ...], title: str, **window):
    """A recipe: the run's stored timelines of keys, top to bottom, under title (its {preset} filled in)."""
    def draw(run: Run, *, path=None) -> Figure:
        return timeline([run.timelines[k] for k in keys], title=title.format(preset=run.settings.preset),
                        note=measured_on(run), path=path, **window)
    return draw


# ---- kernels ----------------------------------------------------------------------------

def kernels_bars(run: Run, bench: Run, *, path=None) -> Figure:
    """kernels cell 26: eager, the replay, the stored bench's fused rows, the book's kernels."""
    preset, batch = preset_batch(run)
    stored = {"fused + graph (stored bench)": bench.row("fused graph", preset, batch)}
    tuned = bench.find("fused tuned graph", preset, batch)
    if tuned is not None:
        stored["fused, tuned + graph (stored bench)"] = tuned
    bars = {eager_label(run): run.row("eager").timing, "graph replay": run.row("graph replay").timing}
    bars.update({name: row.timing for name, row in stored.items()})
    bars.update({"book kernels, no PDL": run.row("triton replay, no PDL").timing,
                 "book kernels + PDL": run.row("triton replay").timing})
    fused_floor = {name: row.median_ms / row.x_floor for name, row in stored.items()}
    return stacked_bar(bars, run.floor().floor_ms, floors=fused_floor,
                       title=f"One decode token, {preset}, batch {batch}", note=measured_on(run), path=path)


def kernels_gemv_sizes(run: Run, *, path=None) -> Figure:
    """kernels cell 8: the size sweep against the card's read bandwidth (the chapter's note has no date)."""
    return gemv_sizes(run.facts["size_rows"], run.bandwidths.as_gbps()["read"],
                      title="The book's GEMV at batch 1", note=f"measured on {run.device.name}",
                      path=path)


# ---- prefill ----------------------------------------------------------------------------

def prefill_roofline(run: Run, *, path=None) -> Figure:
    """prefill cell 12: both prefill sweeps and the eager decode step under the roofline."""
    preset = run.settings.preset
    shape, floor, peak = get_shape(preset), run.floor(), stored_rate(run).tflops
    decode_flops = flops_per_token(shape, int(run.settings.value("decode_context")))
    decode_point = (decode_flops / floor.bytes_per_step,
                    achieved_tflops(decode_flops, run.row("eager").median_ms), "")
    series = {"prefill, eager (tokens)": roofline_points(stored_sweep(run, "eager"))}
    graphed = stored_sweep(run, "graph replay")
    if graphed:
        series["prefill, graph replay"] = [(x, y, "") for x, y, _ in roofline_points(graphed)]
    series["decode, eager"] = [decode_point]
    return roofline_plot(series, bandwidth_gbps=floor.bandwidth_gbps, peak_tflops=peak,
                         title=f"Prefill and decode on the roofline, {preset}, batch 1",
                         note=measured_on(run), path=path)


def prefill_bars(run: Run, *, path=None) -> Figure:
    """prefill cell 20: decode eager and replayed against every other prefill length, per token."""
    preset = run.settings.preset
    shape, floor, peak = get_shape(preset), run.floor(), stored_rate(run).tflops
    bars = {eager_label(run, "decode, "): run.row("eager").timing,
            "decode, graph replay": stored_contexts(run)[0].row.timing}
    bar_floors = {}
    for point in stored_sweep(run, "eager")[2::2]:
        label = f"prefill, {point.prompt_tokens} tokens"
        bars[label] = point.per_token()
        bound_ms = prefill_bound_ms(shape, point.prompt_tokens, bandwidth_gbps=floor.bandwidth_gbps,
                                    peak_tflops=peak)
        bar_floors[label] = bound_ms / point.prompt_tokens
    return stacked_bar(bars, floor.floor_ms, floors=bar_floors,
                       title=f"One token, decode against prefill, {preset}, batch 1",
                       xlabel="time per token (ms)", note=measured_on(run),
                       floor_label="the floor: bytes ÷ bandwidth, or FLOPs ÷ FLOP/s", path=path)


# ---- serving ----------------------------------------------------------------------------

def serving_bars(run: Run, *, path=None) -> Figure:
    """serving cell 16: eager and graph at every bucket, each against its batch's floor."""
    preset = run.settings.preset
    bars, bar_floors = {}, []
    for b in run.settings.value("buckets"):
        floor_ms = run.floor(preset, b).floor_ms
        bars[f"eager, batch {b}"] = run.row("eager", preset, b).timing
        bars[f"graph, batch {b}"] = run.row("graph", preset, b).timing
        bar_floors += [floor_ms, floor_ms]
    return stacked_bar(bars, bar_floors, note=measured_on(run),
                       title=f"One decode step at every bucket, {preset}", path=path)


# ---- bigger-models ----------------------------------------------------------------------

def stored_sizes_of(run: Run) -> Sizes:
    """The chapter's `mine`, read from its stored run."""
    return Sizes(run, Source(here=False, run=run), batch=run.settings.batch or 1)


def bigger_models_bars(run: Run, *, path=None) -> Figure:
    """bigger-models cell 15: eager and replay of the largest size measured."""
    sizes = stored_sizes_of(run)
    big = sizes.presets[-1]
    bars = {eager_label(run): sizes.eager(big).timing, "graph replay": sizes.graph(big).timing}
    return stacked_bar(bars, sizes.floor(big).floor_ms, title=f"One decode token, {big}, batch {sizes.batch}",
                       note=measured_on(run), path=path)


def bigger_models_timeline(run: Run, *, path=None) -> Figure:
    """bigger-models cell 15: the replays of the smallest and the largest size."""
    sizes = stored_sizes_of(run)
    panels = [sizes.timeline(p) for p in dict.fromkeys([sizes.presets[0], sizes.presets[-1]])]
    return timeline(panels, title="A replayed token, smallest and largest size", note=measured_on(run),
                    path=path)


def bigger_models_scaling(run: Run, bench: Run, *, path=None) -> Figure:
    """bigger-models cell 16: eager and replay by size, and the stored bench's fused and Triton replays;
    the note names the card where the chapter says "measured on this machine"."""
    sizes = stored_sizes_of(run)
    lines = {"eager": sizes.points(sizes.eager_path), "graph replay": sizes.points(sizes.graph_path)}
    stored = {f"{name} (stored bench)": x_floor_points(bench, path_name, batch=sizes.batch)
              for name, path_name in (("fused + graph", "fused graph"), ("triton + graph", "triton graph"))}
    return scaling({**lines, **stored}, stored=set(stored),
                   title=f"Time per token as a multiple of its floor, batch {sizes.batch}",
                   note=f"solid: {measured_on(run)}; dashed: the stored bench ({bench.label})", path=path)


# ---- the recipes and the command --------------------------------------------------------

@dataclass(frozen=True)
class Recipe:
    """How one stored figure is drawn: its stored runs (the chapter's first) and the drawing."""

    runs: tuple[str, ...]
    draw: Callable[..., Figure]

    def redraw(self, path=None) -> Figure:
        """Draw the figure from its stored runs; saved as a PNG at path when given."""
        return self.draw(*(reference_run(name) for name in self.runs), path=path)


FIGURES = (  # (chapter, figure, recipe, whether it also reads the stored bench)
    ("below-the-floor", "stacked-bar", replay_bars({"graph replay": "graph replay"}), False),
    ("below-the-floor", "timeline", timelines(("eager", "graph replay"), REPLAY_TITLE), False),
    ("bigger-models", "stacked-bar", bigger_models_bars, False),
    ("bigger-models", "timeline", bigger_models_timeline, False),
    ("bigger-models", "scaling", bigger_models_scaling, True),
    ("fast-card", "stacked-bar", replay_bars({"graph replay": "graph replay", "fused + graph": "fused replay"}),
     False),
    ("fast-card", "timeline", timelines(("graph replay", "fused replay"), "Two replays of one token, {preset}"),
     False),
    ("kernels", "stacked-bar", kernels_bars, True),
    ("kernels", "timeline", timelines(("triton replay", "triton replay, no PDL"), "The first layers of a token, "
                                      "{preset}, the book's kernels", min_us=0, max_us=60), False),
    ("kernels", "gemv-sizes", kernels_gemv_sizes, False),
    ("prefill", "stacked-bar", prefill_bars, False),
    ("prefill", "timeline", timelines(("prefill",), f"One prefill of {PREFILL_TIMELINE_TOKENS} tokens, {{preset}}"),
     False),
    ("prefill", "roofline", prefill_roofline, False),
    ("serving", "stacked-bar", serving_bars, False),
    ("serving", "timeline", timelines(("full bucket", "padded"), "A full bucket and a padded one, {preset}"), False),
    ("shared-buffers", "stacked-bar", replay_bars({"graph replay": "graph replay"}), False),
    ("shared-buffers", "timeline", timelines(("eager", "graph replay"), REPLAY_TITLE), False),
)
RECIPES: dict[str, Recipe] = {
    f"{PREFIX}-{chapter}-{figure}": Recipe((f"{PREFIX}-{chapter}",) + ((BENCH,) if bench else ()), draw)
    for chapter, figure, draw, bench in FIGURES
}


def stored_without_recipe(folder=None) -> list[str]:
    """Names of the stored figures (PNGs in reference/figures/, or in FLOORLAB_REFERENCE_DIR's
    figures/ when set) that no recipe draws."""
    folder = Path(folder or figure_dirs()[0])
    return sorted(p.stem for p in folder.glob("*.png") if p.stem not in RECIPES)


def figure_names(names=None) -> list[str]:
    """The named stored figures (all by default; a trailing .png is taken), else a ValueError listing them."""
    names = [n[: -len(".png")] if n.endswith(".png") else n for n in names or RECIPES]
    unknown = [n for n in names if n not in RECIPES]
    if unknown:
        raise ValueError(f"--only {' '.join(unknown)}: no stored figure of that name. "
                         f"Pass one of: {', '.join(RECIPES)}")
    return names


def redraw(names=None, out=None) -> list[Path]:
    """Draw the named figures (all by default) into out; returns the PNGs. out defaults to figures/ beside
    FLOORLAB_REFERENCE_DIR's runs when set, else the package's reference/figures/."""
    names = figure_names(names)
    out = Path(out or figure_dirs()[0])
    written = []
    for name in names:
        written.append(out / f"{name}.png")
        RECIPES[name].redraw(written[-1])
        print(f"{written[-1]}  (from {' + '.join(RECIPES[name].runs)})", flush=True)
    return written


def main(argv=None) -> int:
    """`python -m floorlab redraw [--out DIR] [--only NAME ...]`; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m floorlab redraw",
        description="Draw every stored H200 figure again from its stored run, on the CPU.")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="folder for the PNGs (default: figures/ in FLOORLAB_REFERENCE_DIR's folder "
                             "when set, else the package's reference/figures/)")
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help="only these figures, e.g. --only h200-kernels-stacked-bar")
    args = parser.parse_args(argv)
    if args.out is not None and (problem := folder_problem(args.out, "--out")):
        parser.error(problem.replace("nothing was measured", "nothing was drawn"))
    try:
        names = figure_names(args.only)
    except ValueError as err:
        parser.error(str(err))
    started = time.perf_counter()
    written = redraw(names, args.out)
    for name in stored_without_recipe():
        print(f"no recipe draws {name}.png: left as it is", file=sys.stderr)
    print(f"{len(written)} figures redrawn from the stored runs in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
