"""Engine wing: the chapters' measurements, one call each: measured here when this machine can, else a
named card's stored run, labelled as that card's and never as the reader's."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from floorlab.core.numbers import function, instance, text
from floorlab.core.prose import fmt_ms, fmt_times, sig, wrap
from floorlab.core.reference import reference_run
from floorlab.core.roofline import Floor
from floorlab.core.runs import Row, Run, measured_row
from floorlab.core.timelines import Timeline, steady_timeline
from floorlab.core.timing import compare, ratio_band, time_with_issue
from floorlab.engine.buckets import DEFAULT_BUCKETS
from floorlab.engine.graphs import GraphRunner


@dataclass
class Source:
    """Where a chapter's numbers come from: this machine, or a stored run of another card."""

    here: bool
    run: Run | None = None

    @property
    def label(self) -> str:
        """'this machine' or 'the stored run of <card>, <date>'."""
        return "this machine" if self.here else f"the stored run of {self.run.label}"

    def says(self) -> str:
        """A phrase for a sentence or a figure note: where the numbers were measured."""
        if self.here:
            return "measured on this machine"
        return f"from the stored reference run ({self.run.label}), not your machine"

    def on(self) -> str:
        """The start of a sentence: 'On this machine' or 'On the stored <card> run (<date>; ...)'."""
        if self.here:
            return "On this machine"
        device, date = self.run.label.split(", ")
        return f"On the stored {device} run ({date}; not your machine)"


def source_for(device, reference: str, *, missing_ok: bool = False) -> Source:
    """This machine when it has CUDA, else the stored reference run of that name (None with missing_ok
    when it is not stored yet)."""
    if torch.device(device).type == "cuda":
        return Source(here=True)
    return Source(here=False, run=reference_run(reference, missing_ok=missing_ok))


def no_stored_run(reference: str) -> str:
    """What a chapter says on a CPU when the stored run it would show has not been made yet."""
    return (f"No stored GPU run of this chapter exists yet (lib/floorlab/reference/"
            f"{reference}.json), so there are no graph numbers to show here. They appear "
            "once the chapter has run on a CUDA card and its run is stored "
            "(bash .ci/gpu-reference); everything else below runs on this machine.")


def measure_path(path: str, fn: Callable[[], object], floor: Floor, *, warmup: int, repeats: int,
                 device, progress: str | None = None, **fields) -> Row:
    """Time fn and its host issue time in one loop; returns its Row against floor."""
    text(path, "path", hint="name the path being measured, e.g. 'eager'")
    function(fn, "fn", hint="pass the step to time, e.g. lambda: model.decode_step(tokens, positions)")
    instance(floor, Floor, "floor", hint="pass the Floor that fl.decode_floor returns")
    times = time_with_issue(fn, warmup=warmup, repeats=repeats, device=device, progress=progress)
    return measured_row(path, floor, times.step, issue=times.issue, **fields)


def profile_path(row: Row, fn: Callable[[], object], *, device) -> Timeline:
    """The steady-state timeline of a measured path, labelled with its path and timed median."""
    instance(row, Row, "row", hint="pass the Row that fl.measure_path returned for this fn")
    function(fn, "fn", hint="pass the step that was timed")
    return steady_timeline(fn, label=row.path, device=device, timed_ms=row.median_ms)


@dataclass
class Replay:
    """Graph replay against eager, on one card: this machine's, or the stored run's."""

    source: Source
    floor: Floor
    eager: Row
    graph: Row
    timeline: Timeline
    runner: GraphRunner | None = None

    @property
    def speedup(self) -> float:
        """Eager time over replay time (medians) on the same card."""
        return self.eager.median_ms / self.graph.median_ms

    def said(self) -> str:
        """'On this machine, a replay takes 2.08 ms, 3.88× as fast as eager on the same card.', or the
        words for timing.compare's other outcomes."""
        return (f"{self.source.on()}, a replay takes {fmt_ms(self.graph.median_ms)}, "
                + compare(self.eager, self.graph).verdict(
                    "{ratio} as fast as eager on the same card.",
                    "slower than eager on the same card, which took {ratio} of its time.",
                    "and eager and replay differ by less than their spreads there, so that run "
                    "cannot tell them apart."))

    def summary(self) -> str:
        """A few printed lines: the replay, its bit-identity, speed-up and multiple of the floor."""
        same = {True: "yes", False: "NO", None: "not checked"}[self.graph.bit_identical]
        lines = [wrap(self.source.says()),
                 f"{self.graph.path:<22} {self.graph.timing}",
                 f"bit-identical          {same} (against the same step without a graph)"]
        if self.graph.bit_identical is False and self.graph.max_abs_diff is not None:
            lines.append(f"largest difference     {self.graph.max_abs_diff:g}")
        band = ratio_band(self.eager, self.graph)
        return "\n".join(lines + [
            f"plain eager            {self.eager.timing}",
            f"speed-up over eager    {fmt_ms(self.eager.median_ms)} ÷ {fmt_ms(self.graph.median_ms)} = "
            f"{fmt_times(self.speedup)} (p10-p90 {sig(band.low)}-{fmt_times(band.high)})",
            f"multiple of the floor  {fmt_times(self.graph.x_floor)} ({fmt_ms(self.floor.floor_ms)})",
        ])


def graph_replay(model, tokens: torch.Tensor, positions: torch.Tensor, *, floor: Floor, eager: Row,
                 warmup: int, repeats: int, reference: str, buckets=DEFAULT_BUCKETS,
                 restore: Callable[[], object] | None = None, path: str = "graph replay",
                 step_fn=None, missing_ok: bool = False) -> Replay | None:
    """Capture, time and check the decode step's replay (restore() runs after capture zeroes the cache); on a
    CPU the stored run, or None with missing_ok when it does not exist yet."""
    source = source_for(model.device, reference, missing_ok=missing_ok)
    if not source.here:
        if source.run is None:
            return None
        ref = source.run
        return Replay(source, ref.floor(), ref.row("eager"), ref.row(path), ref.timelines[path])
    runner = GraphRunner(model, buckets=buckets, step_fn=step_fn)
    runner.capture(progress="capturing graphs")
    if restore is not None:
        restore()
    row = measure_path(path, lambda: runner.step(tokens, positions), floor, warmup=warmup,
                       repeats=repeats, device=model.device, progress=path)
    row.bit_identical = runner.check_bit_identical(tokens, positions)
    row.max_abs_diff = runner.last_max_abs_diff
    timeline = profile_path(row, runner.replay_fn(tokens.shape[0]), device=model.device)
    return Replay(source, floor, eager, row, timeline, runner)
