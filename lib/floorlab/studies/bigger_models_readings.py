"""Studies wing: what a run of several model sizes says, as the chapter's sentences, each with words for one way,
the other and "this run cannot tell", chosen by timing.compare."""
from __future__ import annotations

from dataclasses import dataclass, field

from floorlab.core.prose import fmt_times, sig
from floorlab.core.runs import Run
from floorlab.core.shapes import get_shape
from floorlab.core.timelines import PROFILED_AS_TIMED
from floorlab.core.timing import Band, compare, ratio_band
from floorlab.studies.bigger_models import BENCH_EAGER, BENCH_GRAPH, Sizes


def x_floor_band(sizes: Sizes, preset: str) -> Band:
    """A replay's median and p10-p90 band as multiples of its floor."""
    return ratio_band(sizes.graph(preset), Band.exact(sizes.floor(preset).floor_ms))


@dataclass
class SizeReadings:
    """The chapter's sentences about one run of several sizes, each chosen by timing.compare."""

    first: str
    last: str
    run: str = "this run"  # "this run", or "the stored run" where the sizes are not the reader's
    lines: list[str] = field(default_factory=list)  # printed under the table: claim, then seen
    replay: str = ""
    price: str = ""
    eager: str = ""
    bench: str = ""
    advantage: str = ""
    gain: str = ""  # which end of the family gains more from graphs, for the take-away
    floor_wins: str = ""  # whether a replay closed in on its floor, for the take-away

    def text(self) -> str:
        return "\n".join(self.lines + [self.replay, self.price, self.eager, self.bench, self.advantage, self.gain,
                                       self.floor_wins])


def read_sizes(sizes: Sizes, bench: Run | None = None) -> SizeReadings:
    """The sentences a run of sizes supports (bench: the stored bench, read beside it)."""
    first, last = sizes.presets[0], sizes.presets[-1]
    out = SizeReadings(first, last, "this run" if sizes.source.here else "the stored run")
    if sizes.graph(first) is None or sizes.graph(last) is None or first == last:
        out.replay = "This run has no replay at two sizes, so it cannot say how a replay changes with size."
        return out
    _replay_lines(sizes, out)
    _eager_lines(sizes, out, bench)
    _advantage(sizes, out, bench)
    return out


def _replay_lines(sizes: Sizes, out: SizeReadings) -> None:
    first, last, run = out.first, out.last, out.run
    fall = compare(x_floor_band(sizes, last), x_floor_band(sizes, first))
    a, b = sizes.graph(first).x_floor, sizes.graph(last).x_floor
    out.lines += ["claim: a replay's multiple of the floor falls as the model grows",
                  f"seen:  {first} {fmt_times(a)} → {last} {fmt_times(b)}, p10-p90 bands "
                  + fall.verdict("apart: it rose", "apart", "overlapping")]
    out.replay = fall.verdict(
        f"Their p10-p90 bands lie apart, and the multiple rose: on {run} the larger model sits further from its "
        "floor, the opposite of the claim.",
        "Replays are steady, and their p10-p90 bands lie apart, so that fall is real.",
        f"Their p10-p90 bands overlap, so {run} cannot say that the multiple fell.")
    out.floor_wins = fall.verdict(
        f"On {run} it did not: the larger model's replay sat further from its floor.",
        f"On {run} it did: the floor wins. It wins slowly, because every layer brings its own kernels, and each "
        "kernel keeps a price of its own.",
        f"On {run} the spreads are too wide to show it.")
    us = sizes.per_kernel_us(first), sizes.per_kernel_us(last)
    if None in us:
        return
    kernels = sizes.timeline(first).kernels, sizes.timeline(last).kernels
    out.lines.append(f"       beyond the floor: {kernels[0]} kernels × {sig(us[0].median)} µs → {kernels[1]} "
                     f"kernels × {sig(us[1].median)} µs")
    # each price comes from one profiled step, with no spread of its own: PROFILED_AS_TIMED is what it vouches for
    vouch = f"the {PROFILED_AS_TIMED:.0%} that one profiled step at each size can vouch for"
    profiled = Band(us[1].median, *(us[1].median * (1 + k * PROFILED_AS_TIMED) for k in (-1, 1)))
    moved = f"The price per kernel came out {{ratio}} its value at {first}, more than {vouch}."
    out.price = compare(profiled, Band.exact(us[0].median)).verdict(
        moved, moved, f"Within {vouch}, the price per kernel did not change while the floor rose: a fixed cost on a "
        "growing floor, which is why a replay closes in on its floor.")


def _eager_lines(sizes: Sizes, out: SizeReadings, bench: Run | None) -> None:
    first, last = out.first, out.last
    change = compare(sizes.eager(last), sizes.eager(first))
    said = change.says(f"eager at {last}", f"eager at {first}")
    out.lines += ["", "claim: the eager step grows with the layers, not the bytes", "seen:  " + said]
    eagers = [sizes.eager(p) for p in sizes.presets]
    shares = [i / s for r in eagers if r.issue for i, s in zip(r.issue.samples_ms, r.timing.samples_ms)]
    if shares:
        out.lines.append(f"       the host's issue time: {min(shares):.0%} or more of every eager step")
    layers = get_shape(first).num_layers, get_shape(last).num_layers
    growth = sizes.floor(last).bytes_per_step / sizes.floor(first).bytes_per_step
    noisy = [p for p, r in zip(sizes.presets, eagers) if r.timing.noisy]
    untold = said[0].upper() + said[1:] + "."
    if noisy:
        widest = max(r.timing.spread_ms / r.median_ms for r in eagers)
        untold = (f"At {', '.join(noisy)} its p10-p90 band spans up to {widest:.0%} of its median: the host was "
                  "busy with other work, and its delays set those times. " + untold)
    grown = (f"Between {first} and {last} the bytes grew {sig(growth)}-fold and the layers from {layers[0]} to "
             f"{layers[1]}, while {said}." + against_layers(ratio_band(sizes.eager(last), sizes.eager(first)), layers))
    out.eager = change.verdict(grown, grown, untold) + _same_layers(sizes, eagers)
    bench_eager = [bench.find(BENCH_EAGER, p, sizes.batch) for p in (first, last)] if bench else []
    if not bench_eager or not all(bench_eager):
        return
    seen = compare(*bench_eager[::-1])
    out.lines.append(f"       the stored bench ({bench.label}): " + seen.says(f"eager at {last}", f"eager at {first}"))
    here = sizes.run.device.name
    card = "the same card" if bench.device.name == here else f"another card, not the {here}"
    per_layer = against_layers(ratio_band(*bench_eager[::-1]), layers)
    out.bench = (f"The stored bench ({bench.label}) timed the same engine on {card}: there "
                 + seen.says(f"eager at {last}", f"eager at {first}")
                 + f", with {layers[1]} layers against {layers[0]}.") + seen.verdict(
        per_layer,
        " A host paying for each layer would have taken longer at the larger size, so that run does not show it "
        "doing so.", "")


def against_layers(growth: Band, layers: tuple[int, int]) -> str:
    """One sentence setting an eager step's growth between two sizes (a ratio band) against their layers' ratio."""
    times = f"{sig(layers[1] / layers[0])}×"
    return compare(growth, Band.exact(layers[1] / layers[0])).verdict(
        f" That is more than the layers' {times} alone, beyond the spreads: the bytes, or a host busy with other "
        "work, added to a price per layer.",
        f" That is less than the layers' {times}, beyond the spreads, so part of the step did not grow with the "
        "layers.",
        f" That is about the layers' {times}, within the spreads: a host paying for each layer.")


def _same_layers(sizes: Sizes, eagers) -> str:
    """A sentence when two sizes with the same layers ran eager steps apart beyond the spreads, else ''."""
    presets = sizes.presets
    for i, a in enumerate(presets):
        for b in presets[i + 1:]:
            n = get_shape(a).num_layers
            seen = compare(eagers[presets.index(b)], eagers[i])
            if get_shape(b).num_layers == n and seen.meaningful:
                moved = (f" Both {a} and {b} have {n} layers, yet eager at {b} takes {{ratio}} the time of eager at "
                         f"{a}, beyond the spreads: there the bytes, or the host's load, moved the eager step too.")
                return seen.verdict(moved, moved, "")
    return ""


def _advantage(sizes: Sizes, out: SizeReadings, bench: Run | None) -> None:
    first, last, run = out.first, out.last, out.run
    bands = {p: ratio_band(sizes.eager(p), sizes.graph(p)) for p in sizes.presets}
    weakest = min(bands, key=lambda p: bands[p].low)  # the size where a replay's lead is least sure
    w = bands[weakest]
    lead = compare(w, Band.exact(1.0)).verdict(
        f"A replay beats eager at every size on {run}: even eager's fastest tenth takes {fmt_times(w.low)} a replay's "
        "slowest. ",
        f"At {weakest} eager beats a replay, the bands apart ({fmt_times(w.median)} at the medians), so a replay "
        "does not win everywhere. ",
        f"At {weakest} {run} cannot tell eager and a replay apart ({fmt_times(w.median)} at the medians, the "
        "bands overlapping), so it cannot say a replay wins everywhere. ")
    a, b = bands[first], bands[last]
    span = f"{sig(a.low, 2)}-{sig(a.high, 2)}× at {first}, {sig(b.low, 2)}-{sig(b.high, 2)}× at {last}"
    move = compare(b, a)
    def shown(band: Band) -> str:
        return f"{sig(band.low, 2)}-{sig(band.high, 2)}×" if band.noisy else fmt_times(band.median)
    ends = f"from {shown(a)} at {first} to {shown(b)} at {last}, the bands apart."
    outside = [p for p in sizes.presets[1:-1] if compare(bands[p], a).outcome == compare(bands[p], b).outcome
               and compare(bands[p], a).meaningful]
    if outside and move.meaningful:
        p = outside[0]
        ends = ends[:-1] + (f", though not steadily: at {p} it was {shown(bands[p])}, beyond the "
                            "bands of both ends.")
    out.advantage = lead + move.verdict(
        f"The advantage grows with size, {ends}", f"The advantage shrinks with size, {ends}",
        f"The spreads do not let {run} say whether that advantage grows or shrinks with size: {span}.")
    out.gain = move.verdict(
        f"On {run} the larger model, {last}, gained more from graphs than {first}.",
        f"On {run} the small model, {first}, gained more from graphs than {last}.",
        f"On {run} the spreads do not say whether {first} or {last} gained more from graphs.")
    if move.meaningful or not bench:
        return
    pairs = [(bench.find(BENCH_EAGER, p, sizes.batch), bench.find(BENCH_GRAPH, p, sizes.batch))
             for p in (first, last)]
    if not all(all(p) for p in pairs):
        return
    there = [ratio_band(*p) for p in pairs]
    ends = f"from {fmt_times(there[0].median)} to {fmt_times(there[1].median)}."
    out.advantage += compare(there[1], there[0]).verdict(
        f" In the stored bench, with quieter eager steps, it grew {ends}",
        f" In the stored bench, with quieter eager steps, it fell {ends}", "")


def paths_reading(bench: Run, small: str = "qwen3-0.6b", large: str = "qwen3-8b", *, batch: int = 1) -> str:
    """Whether the plain replay and the book's Triton step come closer at the larger size."""
    rows = {p: (bench.find(BENCH_GRAPH, p, batch), bench.find("triton graph", p, batch)) for p in (small, large)}
    if not all(all(pair) for pair in rows.values()):
        return ""
    gaps = {p: ratio_band(*pair) for p, pair in rows.items()}
    times = (f"the plain replay takes {fmt_times(gaps[large].median)} the Triton step's time, against "
             f"{fmt_times(gaps[small].median)} at {small}")
    return compare(gaps[large], gaps[small]).verdict(
        f"At {large} the paths move further apart: {times}.",
        f"At {large} the paths come closer: {times}. Once the weights take milliseconds to stream, the kernels' "
        "fixed costs are a smaller share of the step, but they do not vanish.",
        f"Between {small} and {large} the spreads do not say whether the paths come closer: {times}.")
