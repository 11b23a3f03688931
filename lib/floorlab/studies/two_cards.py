"""Studies wing: the two-cards chapter: a twocards Run read by name, the split's bars, and the crossover model
(a rank's step is its share of the floor plus two all-reduces per layer and one all_gather, each a fixed latency)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from floorlab.core.bandwidth import Bandwidths
from floorlab.core.prose import fmt_gbps, fmt_ms, fmt_times, sig, wrap
from floorlab.core.reference import reference_run
from floorlab.core.roofline import BYTES_PER_GB, Floor, bytes_per_step, floor_ms
from floorlab.core.runs import Row, Run, row_key
from floorlab.core.shapes import PRESETS, Qwen3Shape
from floorlab.core.timelines import Timeline
from floorlab.core.timing import Timing, compare
from floorlab.engine.ranks import ALL_GATHER, ALL_REDUCE, IN_GRAPH
from floorlab.engine.tensor_parallel import all_reduces_per_step, rank_shape
from floorlab.figures.splits import SplitBar

KIND = "twocards"
REFERENCE = "h200x2-two-cards"  # the stored run of `python -m floorlab twocards` on two H200s
EAGER, GRAPH = "eager", "graph replay"
SHARED_GAIN = 1.25  # ranks on one CPU drawing more than this × one process's bandwidth: one was short of it


NO_STORED = (f"No run of two GPUs is stored with the book yet (lib/floorlab/reference/{REFERENCE}.json), so this "
             "page shows no GPU numbers: they appear once the chapter has run on a machine with two GPUs and its run "
             "is stored. Everything else here comes from this machine.")


def stored_run() -> Run | None:
    """The stored run of two H200s, or None while none is stored yet."""
    return reference_run(REFERENCE, missing_ok=True)


@dataclass
class TwoCards:
    """A twocards Run, read by name: one card against the split, shape by shape."""

    run: Run

    def __post_init__(self):
        if self.run.kind != KIND:
            raise ValueError(f"this run is of kind {self.run.kind!r}, not {KIND!r}; pass the run `python -m floorlab "
                             "twocards` wrote")

    @property
    def ranks(self) -> int:
        return int(self.run.settings.ranks)

    @property
    def on_gpu(self) -> bool:
        """True for a run on CUDA GPUs (NCCL), False on the CPU (gloo)."""
        return self.run.on_gpu

    @property
    def path(self) -> str:
        """The path the chapter reads: graph replay on GPUs, eager on a CPU (no graphs there)."""
        return GRAPH if self.on_gpu else EAGER

    @property
    def presets(self) -> list[str]:
        """The shapes measured for one card and for the split, smallest first."""
        found = self.run.find
        names = [n for n in self.run.settings.presets if found(EAGER, n) and found(EAGER, self.split_name(n))]
        return sorted(names, key=lambda n: self.shape(n).param_count())

    def shape(self, preset: str) -> Qwen3Shape:
        return Qwen3Shape(**self.run.facts["presets"][preset]["shape"])

    def split_name(self, preset: str) -> str:
        """The name rows give one rank's share of the preset, '<preset>/tp<ranks>'."""
        return self.run.facts["presets"][preset]["split"]

    def card_floor(self, preset: str) -> Floor:
        """One card's floor: the whole step's bytes over the card's bandwidth."""
        return self.run.floor(preset)

    def rank_floor(self, preset: str) -> Floor:
        """One rank's floor: its share of the bytes over its own bandwidth, measured alone."""
        return self.run.floor(self.split_name(preset))

    def card(self, preset: str) -> Row:
        """One card's measured Row of the chapter's path."""
        return self.run.row(self.path, preset)

    def split(self, preset: str) -> Row:
        """The split step's measured Row of the chapter's path, as rank 0 timed it."""
        return self.run.row(self.path, self.split_name(preset))

    def collective(self, preset: str, kind: str = ALL_REDUCE) -> Timing:
        """One collective's time in ms as the chapter's path pays it: in a replay on GPUs, eagerly on a CPU."""
        found = self.run.find(kind + IN_GRAPH, self.split_name(preset)) if self.on_gpu else None
        return (found or self.run.row(kind, self.split_name(preset))).timing

    def collectives_ms(self, preset: str) -> float:
        """ms of collectives in one split step: two all-reduces per layer and one all_gather."""
        return self.model(preset).cost_ms(self.shape(preset))

    def bandwidths(self, which: str) -> list[Bandwidths]:
        """Each rank's bandwidths, measured "alone" or "together" (every rank streaming at once)."""
        return [Bandwidths.from_dict(b) for b in self.run.facts[f"bandwidth_{which}"]]

    @property
    def card_gbps(self) -> float:
        return self.run.bandwidths.floor_gbps

    def slowest_gbps(self, which: str) -> float:
        """GB/s the slowest rank streams "alone" (its memory to itself) or "together" (every rank at once)."""
        return min(b.floor_gbps for b in self.bandwidths(which))

    def shared_floor_ms(self, preset: str) -> float:
        """One rank's floor at the bandwidth it gets while every rank streams, in ms."""
        return floor_ms(self.rank_floor(preset).bytes_per_step, self.slowest_gbps("together"))

    def timelines(self, preset: str) -> list[Timeline]:
        """Every rank's timeline of the split step, rank 0 first."""
        key = row_key(self.split_name(preset), self.run.floor(preset).batch, self.path)
        return [self.run.timelines[f"{key} rank {r}"] for r in range(self.ranks)]

    def bars(self, preset: str) -> list[SplitBar]:
        """One card's bar and the split's: each cut into its floor, the collectives and the rest."""
        card, split = self.card(preset), self.split(preset)
        alone = self.rank_floor(preset).floor_ms
        lost = max(self.shared_floor_ms(preset) - alone, 0.0)
        parts = [("floor", alone)] + ([("floor lost to shared memory", lost)] if lost else [])
        return [SplitBar(f"1 card, {self.path}", card.timing, (("floor", self.card_floor(preset).floor_ms),)),
                SplitBar(f"{self.ranks} ranks, {self.path}", split.timing,
                         tuple(parts + [("collectives", self.collectives_ms(preset))]))]

    def speedup(self, preset: str) -> float:
        """One card's median over the split's: above 1 the split is faster."""
        return self.card(preset).median_ms / self.split(preset).median_ms

    def says(self, preset: str) -> str:
        """One sentence comparing the split with one card; on a CPU it says the ranks share one memory."""
        seen = compare(self.split(preset), self.card(preset))
        if self.on_gpu:
            return seen.says(f"the split over {self.ranks} ranks", "one card")
        ranks = f"{self.ranks} ranks here are {self.ranks} processes sharing one CPU and one memory, not cards"
        return seen.verdict(
            f"the split took {{ratio}} the time of one process; {ranks}",
            f"the split took {{ratio}} the time of one process. That does not say a second card would speed up "
            f"{preset}: {ranks}, so what changed is how the CPU ran the work",
            f"the two differ by less than their spreads ({{ratio}} at the medians), so this run cannot tell them "
            f"apart; {ranks}")

    def model(self, preset: str | None = None, *, shared: bool = False) -> "Crossover":
        """The crossover model from this run's numbers, each rank at its bandwidth alone (shared: with every rank
        streaming)."""
        preset = preset or self.presets[-1]
        floor = self.run.floor(preset)
        return Crossover(self.ranks, self.card_gbps, self.slowest_gbps("together" if shared else "alone"),
                         self.collective(preset).median_ms, self.collective(preset, ALL_GATHER).median_ms,
                         floor.batch, floor.visible_tokens - 1)


def memory_says(tc: TwoCards, preset: str) -> str:
    """What the bandwidths measured say about the floor per rank, in a sentence or two."""
    together, alone = [b.floor_gbps for b in tc.bandwidths("together")], tc.slowest_gbps("alone")
    ideal, shared = fmt_ms(tc.rank_floor(preset).floor_ms), fmt_ms(tc.shared_floor_ms(preset))
    if tc.on_gpu:
        return (f"Each GPU streams from memory of its own: with every rank streaming at once the slowest still drew "
                f"{fmt_gbps(min(together))}, {min(together) / alone:.0%} of its bandwidth alone, so the "
                f"floor per rank is {shared} in practice against {ideal} on paper.")
    ratio = sum(together) / tc.card_gbps
    drew = f"Together the ranks drew {fmt_gbps(sum(together))}, {fmt_times(ratio)} what one card drew alone"
    split = (f"{drew}: they split one memory's bandwidth between them. A rank's floor in practice is {shared}, not "
             f"the {ideal} that halving the bytes promised.")
    return compare(ratio, SHARED_GAIN).verdict(
        f"{drew}: here one process did not reach what the memory can give, and two got closer. They still share "
        f"one memory: a rank's floor at the bandwidth it gets while the other streams is {shared}, against {ideal} "
        "on paper.", split, split)


def threads_says(tc: TwoCards, preset: str) -> str:
    """On a CPU, when the split gained more than its bytes allow: why, in two sentences; else ''."""
    if tc.on_gpu:
        return ""
    card, split = tc.card(preset), tc.split(preset)
    bytes_ms = tc.card_floor(preset).floor_ms - tc.shared_floor_ms(preset)
    gained = card.median_ms - split.median_ms
    if not compare(split, card).meaningful or gained <= max(bytes_ms, 0.0) + card.timing.spread_ms:
        return ""
    threads = tc.run.settings.value("threads_per_rank")
    return (f"The split gained {fmt_ms(gained)}, more than the {fmt_ms(max(bytes_ms, 0.0))} its bytes allow at the "
            f"bandwidth each rank got. The rest is the CPU's doing: one card ran as one process of "
            f"{threads * tc.ranks} threads, each rank as a process of {threads}, and a CPU runs those differently, "
            "the more so when other work shares its cores. It says nothing about cards.")


def timeline_lines(tc: TwoCards, preset: str) -> list[str]:
    """One line per rank on what its timeline shows, then the collectives timed alone."""
    lines = []
    for rank, tl in enumerate(tc.timelines(preset)):
        if tl.gpu:
            ours = [i for i in tl.gpu if "nccl" in i.name.lower()]
            lines.append(f"rank {rank}: {tl.kernels} kernels, {len(ours)} of them NCCL collectives: "
                         f"{sig(sum(i.duration_us for i in ours))} µs of a {sig(tl.span_us)} µs step")
        else:
            lines.append(f"rank {rank}: operators busy {tl.busy_share:.0%} of a {fmt_ms(tl.profiled_ms)} profiled "
                         f"step, gaps {fmt_ms((tl.span_us - tl.cpu_busy_us) / 1e3)}")
    n, ar = all_reduces_per_step(tc.shape(preset)), tc.collective(preset)
    lines.append(f"collectives timed alone: {n} all-reduces × {sig(ar.median_ms * 1e3)} µs + one all_gather = "
                 f"{fmt_ms(tc.collectives_ms(preset))}")
    return lines


@dataclass(frozen=True)
class Crossover:
    """Where the split starts to win: the floor it saves against the collectives it adds."""

    ranks: int
    card_gbps: float
    rank_gbps: float
    all_reduce_ms: float
    all_gather_ms: float
    batch: int = 1
    prompt_tokens: int = 32

    def saving_ms(self, shape, *, batch: int | None = None, prompt_tokens: int | None = None) -> float:
        """ms of floor the split saves: one card's floor less one rank's."""
        b, p = batch or self.batch, self.prompt_tokens if prompt_tokens is None else prompt_tokens
        whole = bytes_per_step(shape, b, p + 1)
        share = bytes_per_step(rank_shape(shape, self.ranks), b, p + 1)
        return floor_ms(whole, self.card_gbps) - floor_ms(share, self.rank_gbps)

    def cost_ms(self, shape) -> float:
        """ms of collectives the split adds per step."""
        return all_reduces_per_step(shape) * self.all_reduce_ms + self.all_gather_ms

    def gain_ms(self, shape, **at) -> float:
        """saving_ms less cost_ms (negative: the split loses)."""
        return self.saving_ms(shape, **at) - self.cost_ms(shape)

    def layer_mb(self) -> float:
        """MB (1e6 bytes) per layer at which a layer's saved floor equals its two all-reduces; infinite when a rank
        streams no faster than its share of one card."""
        per_byte_s = 1 / (self.card_gbps * BYTES_PER_GB) - 1 / (self.ranks * self.rank_gbps * BYTES_PER_GB)
        if per_byte_s <= 0:
            return math.inf
        return 2 * self.all_reduce_ms * 1e-3 / per_byte_s / 1e6

    def first_winner(self, presets=PRESETS) -> str:
        """The smallest preset whose split step gains over one card, or "none"."""
        return next((s.name for s in _by_size(presets) if self.gain_ms(s) > 0), "none")

    def crossover_params(self, presets=PRESETS) -> float | None:
        """Parameters at which the gain crosses zero, linear between the presets beside it; None if all or none gain."""
        shapes = _by_size(presets)
        gains = [self.gain_ms(s) for s in shapes]
        for (a, ga), (b, gb) in zip(zip(shapes, gains), zip(shapes[1:], gains[1:])):
            if ga <= 0 < gb:
                pa, pb = a.param_count(), b.param_count()
                return pa + (pb - pa) * (-ga) / (gb - ga)
        return None

    def table(self, presets=PRESETS) -> str:
        """Per preset: its MB per layer, the floor saved, the collectives and the gain, in ms."""
        lines = [f"{'preset':<11}{'MB/layer':>9}{'saved ms':>11}{'collectives':>12}{'gain ms':>11}"]
        for s in _by_size(presets):
            cells = [sig(v) for v in (self.saving_ms(s), self.cost_ms(s), self.gain_ms(s))]
            mb = sig(s.layer_param_count() * 2 / 1e6)
            lines.append(f"{s.name:<11}{mb:>9}{cells[0]:>11}{cells[1]:>12}{cells[2]:>11}")
        return "\n".join(lines)


def _by_size(presets) -> list[Qwen3Shape]:
    return sorted(presets.values(), key=lambda s: s.param_count())


def checked_against(tc: TwoCards, model: Crossover) -> list[dict]:
    """Per measured preset: the split's ms predicted (one card's measured ms less model's gain) beside the measured
    one, and both verdicts ("cannot tell" within the spreads)."""
    out = []
    for preset in tc.presets:
        card, split = tc.card(preset), tc.split(preset)
        predicted_ms = card.median_ms - model.gain_ms(tc.shape(preset))
        measured = compare(split, card).verdict("slower", "faster", "cannot tell")
        predicted = compare(predicted_ms, card.median_ms).verdict("slower", "faster", "the same")
        out.append({"preset": preset, "card_ms": card.median_ms, "predicted_ms": predicted_ms,
                    "measured_ms": split.median_ms, "predicted": predicted, "measured": measured,
                    "agrees": None if measured == "cannot tell" else measured == predicted,
                    "in_band": split.timing.p10_ms <= predicted_ms <= split.timing.p90_ms})
    return out


def format_checked(rows: list[dict]) -> str:
    """checked_against as a table, times in ms."""
    lines = [f"{'preset':<12}{'1 card':>10}{'split, predicted':>18}{'measured':>10}  split is"]
    for r in rows:
        lines.append(f"{r['preset']:<12}{sig(r['card_ms']):>10}{sig(r['predicted_ms']) + ' ' + r['predicted']:>18}"
                     f"{sig(r['measured_ms']):>10}  {r['measured']}")
    for r in rows:
        if not r.get("in_band", True) and r["predicted_ms"] > 0:
            held = {True: "its direction held, its size did not", False: "neither its direction nor its size held",
                    None: "the spreads cannot check its direction"}[r["agrees"]]
            lines.append(wrap(f"{r['preset']}: the split took {fmt_times(r['measured_ms'] / r['predicted_ms'])} the "
                              f"model's time, outside its own p10-p90 band: {held}"))
    return "\n".join(lines)


NO_BREAK_EVEN = "no break-even: a rank streams no faster than its share of one card, so every layer loses"


def mb_text(mb: float) -> str:
    """A break-even as '160 MB', or in words when it is infinite (ranks that share one memory)."""
    return f"{sig(mb)} MB" if math.isfinite(mb) else NO_BREAK_EVEN
