"""Studies wing: one card, several model sizes: each size's floor, eager step and graph replay, measured one
model at a time (measure_sizes), read by preset (Sizes), and carried to other sizes (CostModel)."""
from __future__ import annotations

import gc
from dataclasses import dataclass, replace
from functools import partial

import torch

from floorlab.core import roofline
from floorlab.core.device import describe_device, resolve_device
from floorlab.core.memory import check_fits
from floorlab.core.progress import progress_bar
from floorlab.core.prose import fmt_ms, sig
from floorlab.core.reference import reference_run
from floorlab.core.roofline import Floor
from floorlab.core.runs import Row, Run, row_key, run_stamp
from floorlab.core.shapes import get_shape
from floorlab.core.timelines import Timeline
from floorlab.core.timing import Band, band_of, ratio_band
from floorlab.engine.measure import Source, graph_replay, measure_path, profile_path
from floorlab.engine.model import build_model, prefill_random
from floorlab.studies.prefill import noise_lines

KIND = "chapter:bigger-models"
REFERENCE = "h200-bigger-models"  # the stored run of measure_sizes on an H200
EAGER, GRAPH = "eager", "graph replay"  # the paths measure_sizes records
BENCH_EAGER, BENCH_GRAPH = "plain eager", "plain graph"  # the same engine's paths in the bench
NO_GRAPHS = "not measured: CUDA graphs need a CUDA GPU"
THRESHOLD = 1.1  # graphs stop mattering once eager takes less than this multiple of a replay


def measure_sizes(presets, *, device, bandwidths, warmup: int, repeats: int,
                  batch: int = 1, prompt_tokens: int = 32,
                  max_context: int = 128) -> Run:
    """A Run of eager and graph replay of each preset, one model in memory at once;
    a preset that does not fit is skipped before anything is allocated (rows absent,
    noted), and without CUDA the eager step is profiled."""
    device = resolve_device(device)
    presets = [get_shape(p) for p in presets]
    settings = {"presets": [s.name for s in presets],
                "params": {s.name: s.param_count() for s in presets},
                "batch": batch, "prompt_tokens": prompt_tokens,
                "max_context": max_context, "warmup": warmup, "repeats": repeats}
    run = Run(kind=KIND, stamp=run_stamp(), device=describe_device(device),
              bandwidths=bandwidths, settings=settings)
    for shape in progress_bar(presets, label="model sizes", total=len(presets)):
        floor = roofline.decode_floor(
            shape, batch=batch, prompt_tokens=prompt_tokens,
            bandwidths=bandwidths, cache_tokens=max_context)
        run.floors.append(floor)
        fit = check_fits(shape, device, max_batch=batch, max_context=max_context)
        if not fit.ok:
            run.rows += [Row(path, shape.name, batch, status="absent",
                             note=fit.message()) for path in (EAGER, GRAPH)]
            continue
        try:
            _measure_size(run, shape, floor, device, warmup=warmup, repeats=repeats,
                          prompt_tokens=prompt_tokens, max_context=max_context)
        except torch.cuda.OutOfMemoryError as err:
            why = " ".join(str(err).split())
            note = f"failed: out of memory although the check passed ({why})"
            run.rows += [Row(path, shape.name, batch, status="failed",
                             note=note[:240]) for path in (EAGER, GRAPH)
                         if run.find(path, shape.name, batch) is None]
        finally:  # hand the model's memory back before the next is built
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return run


def _measure_size(run: Run, shape, floor: Floor, device, *, warmup: int, repeats: int,
                  prompt_tokens: int, max_context: int) -> None:
    """Build one model and add its rows and timeline to run; the model is freed when this returns."""
    batch = floor.batch
    model = build_model(shape, device=device, max_batch=batch, max_context=max_context)
    prompt, tokens, positions = prefill_random(model, batch, prompt_tokens)
    step = partial(model.decode_step, tokens, positions)
    eager = measure_path(EAGER, step, floor, warmup=warmup, repeats=repeats, device=device,
                         progress=f"{shape.name} eager")
    run.rows.append(eager)
    if device.type != "cuda":  # no graphs: profile the eager step instead
        run.rows.append(Row(GRAPH, shape.name, batch, status="absent", note=NO_GRAPHS))
        path, timeline = EAGER, profile_path(eager, step, device=device)
    else:
        replay = graph_replay(model, tokens, positions, floor=floor, eager=eager, warmup=warmup,
                              repeats=repeats, reference=REFERENCE, buckets=(batch,),
                              restore=lambda: model.prefill(prompt))
        run.rows.append(replay.graph)
        path, timeline = GRAPH, replay.timeline
    run.timelines[row_key(shape.name, batch, path)] = replace(timeline, label=f"{path}, {shape.name}")


def params_of(run: Run, preset: str) -> int:
    """Parameters of one of a run's presets: as the run recorded them, else from the preset's shape."""
    recorded = run.settings.value("params", {}).get(preset)
    return int(recorded) if recorded else get_shape(preset).param_count()


def x_floor_points(run: Run, path: str, *, batch: int = 1) -> list[tuple[int, float]]:
    """(parameters, multiple of the floor) of each measured row of path, smallest model first."""
    return sorted((params_of(run, r.preset), r.x_floor) for r in run.rows
                  if r.path == path and r.batch == batch and r.measured)


@dataclass
class Sizes:
    """The book's engine at several sizes on one card: eager and graph-replay rows by preset."""

    run: Run
    source: Source
    batch: int = 1
    eager_path, graph_path = EAGER, GRAPH

    @property
    def presets(self) -> list[str]:
        """Presets with a measured eager row, smallest first."""
        names = {r.preset for r in self.run.rows if r.path == self.eager_path and r.measured}
        return sorted(names, key=lambda name: params_of(self.run, name))

    @property
    def not_measured(self) -> list[Row]:
        """The eager rows of presets that were skipped or failed, each with its note."""
        return [r for r in self.run.rows if r.path == self.eager_path and not r.measured]

    def eager(self, preset: str) -> Row | None:
        return self.run.find(self.eager_path, preset, self.batch)

    def graph(self, preset: str) -> Row | None:
        return self.run.find(self.graph_path, preset, self.batch)

    def floor(self, preset: str) -> Floor:
        return self.run.floor(preset, self.batch)

    def timeline(self, preset: str, path: str | None = None) -> Timeline | None:
        """The timeline behind a row (the graph replay's unless path is given), or None."""
        return self.run.timelines.get(row_key(preset, self.batch, path or self.graph_path))

    def speedup(self, preset: str) -> float | None:
        """Eager median over replay median, or None without both rows."""
        eager, graph = self.eager(preset), self.graph(preset)
        return eager.median_ms / graph.median_ms if eager and graph else None

    def speedup_band(self, preset: str) -> tuple[float, float] | None:
        """(eager p10 ÷ replay p90, eager p90 ÷ replay p10) when either timing is noisy, else None."""
        eager, graph = self.eager(preset), self.graph(preset)
        if not (eager and graph) or not (eager.timing.noisy or graph.timing.noisy):
            return None
        band = ratio_band(eager, graph)
        return band.low, band.high

    def per_kernel_us(self, preset: str) -> Band | None:
        """µs each kernel of a replay costs beyond the floor (median from the profiled busy time, band from the
        replay's timing); None without a profiled replay."""
        replay, row = self.timeline(preset), self.graph(preset)
        if replay is None or not replay.kernels or row is None:
            return None
        busy, floor_ms = band_of(row), self.floor(preset).floor_ms
        return Band(*(roofline.overhead_us_per_kernel(ms * replay.busy_ms / busy.median, floor_ms, replay.kernels)
                      for ms in (busy.median, busy.low, busy.high)))

    def fixed_us_per_kernel(self, preset: str) -> float | None:
        band = self.per_kernel_us(preset)
        return None if band is None else band.median

    def verdict(self, preset: str) -> str:
        """What holds the eager step above its floor (roofline.gap_verdict)."""
        eager = self.eager(preset)
        replay, own = self.timeline(preset), self.timeline(preset, self.eager_path)
        launches = replay.kernels if replay else len(own.cpu) if own else 1
        on_cpu = replay is None and own is not None  # on a CPU the operators are the host
        issue = None if on_cpu or eager.issue is None else eager.issue.median_ms
        return roofline.gap_verdict(eager_ms=eager.median_ms, floor_ms=self.floor(preset).floor_ms,
                                    launches=max(launches, 1), issue_ms=issue, busy_ms=own.busy_ms if on_cpu else None)

    def points(self, path: str) -> list[tuple[int, float]]:
        return x_floor_points(self.run, path, batch=self.batch)


def measured_sizes(run: Run, *, here: bool = True) -> Sizes:
    """The Sizes of a run of measure_sizes: made on this machine (here) or stored."""
    source = Source(here=True) if here else Source(here=False, run=run)
    return Sizes(run, source, batch=run.settings.batch or 1)


def stored_sizes() -> Sizes:
    """The stored H200 run of measure_sizes."""
    return measured_sizes(reference_run(REFERENCE), here=False)


def _billions(params: int) -> str:
    """'0.60B', '14.8B'; a model under 0.1B in millions, '1.2M'."""
    if params < 1e8:
        return f"{params / 1e6:.1f}M"
    return f"{params / 1e9:.2f}B" if params < 1e10 else f"{params / 1e9:.1f}B"


def _cell(row: Row | None) -> str:
    """'2.07 ms (7.43×)'; a noisy timing to two figures and starred, '39 ms (49×)*'."""
    if row is None:
        return "-"
    digits = 2 if row.timing.noisy else 3
    return f"{fmt_ms(row.median_ms, digits)} ({sig(row.x_floor, digits)}×){'*' * row.timing.noisy}"


def times_text(band: tuple[float, float] | None, median: float | None) -> str:
    """'6.90×', or '2.4-11×' when the speed-up is a band."""
    return "-" if median is None else f"{sig(median)}×" if band is None else f"{sig(band[0], 2)}-{sig(band[1], 2)}×"


def format_sizes(sizes: Sizes) -> str:
    """Per preset: floor, eager and replay (× floor), speed-up and gap verdict; a noisy timing starred and to
    two figures, its speed-up a band, its spread on a line below."""
    lines = [f"{'preset':<11}{'params':>7}{'floor':>10}{'eager':>17}{'graph replay':>17}{'speed-up':>10}  gap"]
    for preset in sizes.presets:
        speedup = times_text(sizes.speedup_band(preset), sizes.speedup(preset))
        lines.append(f"{preset:<11}{_billions(params_of(sizes.run, preset)):>7}"
                     f"{fmt_ms(sizes.floor(preset).floor_ms):>10}{_cell(sizes.eager(preset)):>17}"
                     f"{_cell(sizes.graph(preset)):>17}{speedup:>10}  {sizes.verdict(preset)}")
    rows = [r for p in sizes.presets for r in (sizes.eager(p), sizes.graph(p)) if r]
    return "\n".join(lines + noise_lines([(f"{r.preset} {r.path}", r.timing) for r in rows]))


@dataclass(frozen=True)
class CostModel:
    """Step times in ms at any size on one card, fitted on one preset: a replay is the floor plus overhead_us per
    kernel, eager the slower of the host's issue time and that replay (both assumed to grow with the layers)."""

    preset: str
    bandwidth_gbps: float
    kernels_per_layer: float
    overhead_us: float
    issue_ms_per_layer: float
    batch: int = 1
    visible_tokens: int = 33

    def kernels(self, shape) -> int:
        return round(self.kernels_per_layer * get_shape(shape).num_layers)

    def floor_ms(self, shape) -> float:
        moved = roofline.bytes_per_step(get_shape(shape), self.batch, self.visible_tokens)
        return roofline.floor_ms(moved, self.bandwidth_gbps)

    def graph_ms(self, shape) -> float:
        return roofline.predicted_ms(self.floor_ms(shape), self.kernels(shape), self.overhead_us)

    def eager_ms(self, shape) -> float:
        return max(self.issue_ms_per_layer * get_shape(shape).num_layers, self.graph_ms(shape))

    def speedup(self, shape) -> float:
        return self.eager_ms(shape) / self.graph_ms(shape)

    def multiple_mistakes(self, shape) -> dict[str, float]:
        """Replay ÷ floor of shape made with the fitted preset's kernels: a plausible mistake."""
        wrong_ms = roofline.predicted_ms(self.floor_ms(shape), self.kernels(self.preset), self.overhead_us)
        return {f"the kernels of {self.preset} instead of {get_shape(shape).name}'s": wrong_ms / self.floor_ms(shape)}

    @property
    def fixed_ms_per_layer(self) -> float:
        """ms a layer's kernels cost beyond its bytes: kernels per layer × overhead_us."""
        return self.kernels_per_layer * self.overhead_us / 1e3

    def stream_ms_per_layer(self, threshold: float = THRESHOLD) -> float:
        """ms a layer's bytes must stream for eager ÷ replay = issue ÷ (stream + fixed) to fall to threshold."""
        return max(self.issue_ms_per_layer / threshold - self.fixed_ms_per_layer, 0.0)

    def layer_speedup(self, layer_bytes: float) -> float:
        """Eager ÷ replay of a layer of layer_bytes: issue ÷ (stream + fixed), at least 1 (the worked answer's rule)."""
        replay_ms = layer_bytes / (self.bandwidth_gbps * 1e6) + self.fixed_ms_per_layer
        return max(self.issue_ms_per_layer, replay_ms) / replay_ms

    def layer_bytes(self, threshold: float = THRESHOLD) -> float:
        """Bytes per layer from which eager takes less than threshold × a replay."""
        return self.stream_ms_per_layer(threshold) * 1e-3 * self.bandwidth_gbps * 1e9


def fit_cost_model(sizes: Sizes, preset: str | None = None) -> CostModel:
    """The CostModel of sizes' card, fitted on preset (default: the largest with a profiled replay)."""
    fitted = [p for p in sizes.presets if sizes.graph(p) and sizes.timeline(p)]
    if preset is None:
        if not fitted:
            raise ValueError("no preset here has a measured and profiled graph replay to fit on; "
                             "measure one on a CUDA GPU, or use stored_sizes()")
        preset = fitted[-1]
    elif preset not in fitted:
        raise ValueError(f"{preset} has no measured and profiled graph replay here; "
                         f"pick one of: {', '.join(fitted) or 'none'}")
    layers, floor, eager = get_shape(preset).num_layers, sizes.floor(preset), sizes.eager(preset)
    issue_ms = eager.issue.median_ms if eager.issue is not None else eager.median_ms
    return CostModel(preset, floor.bandwidth_gbps, sizes.timeline(preset).kernels / layers,
                     sizes.fixed_us_per_kernel(preset), issue_ms / layers, floor.batch, floor.visible_tokens)
