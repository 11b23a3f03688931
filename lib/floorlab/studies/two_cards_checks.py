"""Studies wing: the two-cards chapter's challenges: right numbers, plausible wrong ones by name, checks and worked
answers, from the run the chapter reads (two GPUs, or this machine's CPU ranks)."""
from __future__ import annotations

import math
from dataclasses import replace

from floorlab.core.checks import NOT_ATTEMPTED, check_number, checked, plausible_wrongs, read_number, refusal
from floorlab.core.prose import fmt_ms, sig
from floorlab.core.shapes import PRESETS
from floorlab.engine.ranks import ALL_REDUCE
from floorlab.studies.two_cards import NO_BREAK_EVEN, TwoCards, mb_text

SLOWER_LINK = 4  # challenge 2: a link whose every all-reduce takes this many times as long
BIG_BATCH, BIG_CONTEXT = 16, 4096  # challenge 3: a serving batch with long contexts
BIG = dict(batch=BIG_BATCH, prompt_tokens=BIG_CONTEXT - 1)


def crossover_wrong(tc: TwoCards, preset: str | None = None) -> dict[str, float]:
    """The plausible wrong break-even MB per layer, each named by its mistake."""
    model = tc.model(preset)
    right = model.layer_mb()
    eager_ms = tc.run.row(ALL_REDUCE, tc.split_name(preset or tc.presets[-1])).median_ms
    return plausible_wrongs(right, {
        "one all-reduce per layer instead of two": right / 2,
        "the bandwidth a rank gets while every rank streams": tc.model(preset, shared=True).layer_mb(),
        "the eager all-reduce instead of the one inside a replay": replace(model, all_reduce_ms=eager_ms).layer_mb(),
        "the all-reduce's ms read as µs": right / 1000,
    })


@checked
def check_crossover(my_layer_mb, my_first_preset, tc: TwoCards, *, presets=PRESETS) -> str:
    """Verdict on challenge 1: the break-even MB per layer, then the first preset the split speeds up."""
    if my_layer_mb is None and my_first_preset is None:
        return NOT_ATTEMPTED
    model = tc.model()
    if not math.isfinite(right := model.layer_mb()):
        return f"this run has {NO_BREAK_EVEN}; the first preset it speeds up is {model.first_winner(presets)}."
    if refused := refusal(read_number(my_layer_mb, "my_layer_mb"), right, rel=0.05, wrong=crossover_wrong(tc),
                          name="my_layer_mb", what="MB per layer",
                          hint="per layer the split saves bytes × (1/card − 1/(ranks × rank)) seconds and adds "
                               "two all-reduces; solve for the bytes, in MB."):
        return refused
    first = model.first_winner(presets)
    if not isinstance(my_first_preset, str) or my_first_preset.strip().lower() != first:  # 'Qwen3-0.6B' too
        return ("not yet: the MB per layer is right; now compare each preset's gain: the floor it saves, its output "
                "head included, less 2 × layers all-reduces and one all_gather.")
    return f"right: {sig(right)} MB per layer; the first preset the split speeds up is {first}."


def answer_crossover(tc: TwoCards, *, presets=PRESETS) -> str:
    """The worked answer to challenge 1, as arithmetic."""
    m = tc.model()
    lines = [f"per layer: 2 × {sig(m.all_reduce_ms * 1e3)} µs ÷ (1/{sig(m.card_gbps)} − 1/({m.ranks} × "
             f"{sig(m.rank_gbps)})) s per GB: {mb_text(m.layer_mb())} per layer", "", m.table(presets), ""]
    params, first = m.crossover_params(presets), m.first_winner(presets)
    if params is not None:
        lines.append(f"The gain crosses zero near {sig(params / 1e9)}B parameters; the first preset that gains is "
                     f"{first}.")
    elif first == "none":
        lines.append("No preset gains: the floor a rank saves never pays for its collectives.")
    else:
        lines.append(f"Every preset gains, {first} included: the crossover lies below it.")
    return "\n".join(lines)


def slower_link_answer(tc: TwoCards) -> float:
    """Challenge 2: the break-even MB per layer if every all-reduce took SLOWER_LINK times as long."""
    return SLOWER_LINK * tc.model().layer_mb()


def check_slower_link(my_slow_layer_mb, tc: TwoCards) -> str:
    """Verdict on challenge 2: the break-even MB per layer on a link SLOWER_LINK times slower."""
    if not math.isfinite(right := slower_link_answer(tc)):
        return f"this run has {NO_BREAK_EVEN}; there is nothing to scale here."
    now = tc.model().layer_mb()
    wrong = plausible_wrongs(right, {"the crossover left where it was (as if only the link's GB/s mattered)": now,
                                     "the crossover divided instead of multiplied": now / SLOWER_LINK})
    return check_number(my_slow_layer_mb, right, rel=0.05, name="my_slow_layer_mb", wrong=wrong,
                        hint="the break-even is proportional to the all-reduce's latency.")


def big_batch_gain_ms(tc: TwoCards, preset: str = "qwen3-0.6b") -> float:
    """Challenge 3: the split's gain per step at BIG_BATCH rows of BIG_CONTEXT tokens, in ms."""
    return tc.model().gain_ms(PRESETS[preset], **BIG)


def big_batch_wrong(tc: TwoCards, preset: str = "qwen3-0.6b") -> dict[str, float]:
    """Challenge 3's plausible wrong answers, by name."""
    m, shape = tc.model(), PRESETS[preset]
    return plausible_wrongs(big_batch_gain_ms(tc, preset), {
        "the saving alone, without the collectives": m.saving_ms(shape, **BIG),
        "the KV cache left out (only the weights' saving)": m.gain_ms(shape, batch=BIG_BATCH, prompt_tokens=0)})


def answer_big_batch(tc: TwoCards, preset: str = "qwen3-0.6b") -> str:
    """The worked answer to challenge 3, as arithmetic."""
    m, shape, at = tc.model(), PRESETS[preset], BIG
    kv_gb = BIG_BATCH * BIG_CONTEXT * shape.kv_bytes_per_token() / 1e9
    return (f"At batch {BIG_BATCH} × {BIG_CONTEXT} tokens the step reads {sig(kv_gb)} GB of KV cache besides "
            f"{sig(shape.weight_bytes() / 1e9)} GB of weights, and each rank reads its share of both. Saved: "
            f"{fmt_ms(m.saving_ms(shape, **at))}; collectives: {fmt_ms(m.cost_ms(shape))}, as at batch 1 while the "
            f"messages stay small; gain {fmt_ms(m.gain_ms(shape, **at))}, against {fmt_ms(m.gain_ms(shape))} at "
            "batch 1. Batch 1 has the fewest bytes to share per collective, so it is where splitting pays least.")
