"""Studies wing: the two-cards chapter's crossover, printed and said from one run: of two GPUs where there is one,
else of this machine's CPU, and then it says that its ranks shared one memory."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from floorlab.core.prose import fmt_gbps, sig
from floorlab.studies.two_cards import TwoCards, mb_text

CPU_CAVEAT = ("These numbers come from this machine's CPU, where the ranks are two processes sharing one memory, not "
              "two cards, so they say nothing about what a second card would do.")


def break_even_text(mb: float) -> str:
    """'break-even: 160 MB per layer', or the words for none (ranks that share one memory)."""
    return f"break-even: {mb_text(mb)} per layer" if math.isfinite(mb) else mb_text(mb)


@dataclass
class CrossoverReading:
    """The lines printed above the crossover table, and the sentences about it."""

    lines: list[str] = field(default_factory=list)
    crossing: str = ""
    first: str = ""
    caveat: str = ""

    def text(self) -> str:
        return "\n".join(self.lines + [self.crossing, self.first, self.caveat])


def crossover_reading(src: TwoCards, *, here: bool) -> CrossoverReading:
    """What the crossover model built from src says (here: src is this machine's own run)."""
    model = src.model()
    out = CrossoverReading()
    out.lines = [f"from {'this machine' if here else src.run.label}: {fmt_gbps(model.card_gbps)} a card, all-reduce "
                 f"{sig(model.all_reduce_ms * 1e3)} µs, all_gather {sig(model.all_gather_ms * 1e3)} µs",
                 break_even_text(model.layer_mb())]
    reduce = src.collective(src.presets[-1])
    if reduce.noisy and math.isfinite(model.layer_mb()):
        low, high = (model.layer_mb() * ms / reduce.median_ms for ms in (reduce.p10_ms, reduce.p90_ms))
        out.lines.append(f"  (the all-reduce's p10-p90 is {sig(reduce.p10_ms * 1e3)}-{sig(reduce.p90_ms * 1e3)} µs, "
                         f"{reduce.spread_ms / reduce.median_ms:.0%} of its median: at either end the break-even "
                         f"would be {sig(low)} or {sig(high)} MB per layer)")
    out.lines += ["", model.table()]
    out.first, params = model.first_winner(), model.crossover_params()
    out.crossing = (f"near {sig(params / 1e9, 2)}B parameters" if params is not None else
                    "below the smallest preset" if out.first != "none" else "beyond every preset")
    if not src.on_gpu:
        shared = src.model(shared=True)
        out.lines += ["", f"with the bandwidth a rank gets while the other streams, {fmt_gbps(shared.rank_gbps)}: "
                      + break_even_text(shared.layer_mb())]
        assumed = (f"The table above assumes each rank streams at {fmt_gbps(model.card_gbps)}, the bandwidth of one "
                   "process alone")
        out.caveat = (f"{assumed}; at the bandwidth a rank gets while the other streams, the model has no break-even: "
                      "by its arithmetic the split loses at every preset. " if not math.isfinite(shared.layer_mb()) else
                      f"{assumed}; at the bandwidth a rank gets while the other streams, the break-even moves to "
                      f"{mb_text(shared.layer_mb())} per layer. ") + CPU_CAVEAT
    return out
