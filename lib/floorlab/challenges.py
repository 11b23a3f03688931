"""Checks and worked answers for the chapters' challenges.

Each `check_*` returns a one-line verdict: "not attempted yet", "right", or
"not yet" with a hint. Each `answer_*` returns the worked answer, in numbers
taken from the run the reader just made.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from floorlab.graphs import bucket_for
from floorlab.roofline import DISPATCH_US, floor_ms, per_launch_us
from floorlab.shapes import get_shape

NOT_ATTEMPTED = "not attempted yet: edit the cell above, then run it and this check again."
OPS_TOLERANCE = 0.15  # an op count within 15% of the profiler's counts as the same count


class _Unreadable(Exception):
    """An answer that is not a usable number; the message says how to write it."""


def _number(value, name: str, *, fraction: bool = False) -> float:
    """The answer as a float; raises _Unreadable with a hint for strings, bools, percents or NaN."""
    if isinstance(value, bool):
        raise _Unreadable(f"not yet: {name} is {value}, a yes/no; write a number there.")
    if isinstance(value, str):
        raise _Unreadable(f"not yet: {name} is the text {value!r}; write the number itself, "
                          "without quotes (for example 17.5, not '17.5 µs').")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise _Unreadable(f"not yet: {name} should be a number, got {type(value).__name__} "
                          f"{value!r}.") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise _Unreadable(f"not yet: {name} is {value!r}; write a finite number.")
    if fraction and 1.0 < number <= 100.0:
        raise _Unreadable(f"not yet: {name} = {value!r} looks like a percent; write it as a "
                          f"fraction between 0 and 1 ({number / 100:.2f}, not {value!r}).")
    return number


def _checked(verdict: Callable[..., str]) -> Callable[..., str]:
    """Let a check answer an unreadable number with its hint instead of an exception."""
    def check(*args, **kwargs):
        try:
            return verdict(*args, **kwargs)
        except _Unreadable as problem:
            return str(problem)
    check.__name__, check.__doc__ = verdict.__name__, verdict.__doc__
    return check


def _close(value: float, expected: float, rel: float) -> bool:
    return abs(value - expected) <= rel * abs(expected)


# Challenge 1: count the ops of a real layer and redo the division.

@_checked
def check_ops_per_layer(ops_per_layer, my_per_launch_us, my_is_dispatch, *, gap_ms: float,
                        num_layers: int, counted_per_layer: float, dispatch: bool) -> str:
    """Verdict on the reader's op count per layer, the per-launch division and the dispatch verdict.

    dispatch is this run's own verdict (roofline.gap_verdict(...) == "dispatch").
    """
    if ops_per_layer is None or my_per_launch_us is None or my_is_dispatch is None:
        return NOT_ATTEMPTED
    ops = _number(ops_per_layer, "my_ops_per_layer")
    if not _close(ops, counted_per_layer, OPS_TOLERANCE):
        return (f"not yet: {ops:g} ops per layer is not what one layer of this model runs; "
                f"count every kernel in the profiler's list above (norms, RoPE, cache writes "
                "and copies included) and divide by the layers.")
    launches = ops * num_layers
    expected_us = per_launch_us(gap_ms, launches)
    if not _close(_number(my_per_launch_us, "my_per_launch_us"), expected_us, 0.05):
        return (f"not yet: with {ops:g} ops per layer the gap of {gap_ms:.2f} ms "
                f"over {launches:g} launches is not {my_per_launch_us} µs each.")
    if not isinstance(my_is_dispatch, bool):
        return "not yet: my_gap_is_dispatch should be True or False."
    if my_is_dispatch != dispatch:
        return (f"not yet: compare {expected_us:.1f} µs with the {DISPATCH_US[0]:.0f}-"
                f"{DISPATCH_US[1]:.0f} µs an eager dispatch costs, and with the issue and busy "
                "times above, and decide again.")
    what = "dispatch" if dispatch else "more than dispatch can explain"
    return f"right: {expected_us:.1f} µs per launch over {launches:g} launches, {what}."


def answer_ops_per_layer(*, gap_ms: float, num_layers: int, counted_per_layer: float,
                         issue_ms: float | None, eager_ms: float, dispatch: bool) -> str:
    """The worked answer to challenge 1, from the measured counts and this run's verdict."""
    launches = round(counted_per_layer * num_layers)
    us = per_launch_us(gap_ms, launches)
    lines = [
        f"The profiler counted {counted_per_layer:.1f} kernels per layer, "
        f"{launches} per step over {num_layers} layers.",
        f"gap ÷ launches = {gap_ms:.2f} ms ÷ {launches} = {us:.1f} µs per launch.",
    ]
    cost = f"{DISPATCH_US[0]:.0f}-{DISPATCH_US[1]:.0f} µs"
    if dispatch:
        lines.append(f"Set beside the {cost} an eager dispatch costs, and with the host busy "
                     "issuing for most of the step, the gap is dispatch "
                     "(my_gap_is_dispatch = True).")
    else:
        lines.append(f"Set beside the {cost} an eager dispatch costs, and with the operators "
                     "busy for most of the step, something besides dispatch is in the gap: "
                     "operators that run below streaming bandwidth (my_gap_is_dispatch = False).")
    if issue_ms is not None:
        lines.append(f"Cross-check: the host needed {issue_ms:.2f} ms to issue one step, "
                     f"against {eager_ms:.2f} ms for the whole step.")
    return "\n".join(lines)


# Challenge 2: padding cost at batch 5 with graphs at 1, 2, 4, 8, as the runner pads.

@dataclass
class PaddingAnswer:
    """What padding costs a replay, as GraphRunner pads: each padded row runs token 0 at position 0,
    and the masked attention reads every slot of its cache row, whatever the position."""
    batch: int
    bucket: int
    padded_rows: int
    cache_tokens: int
    padded_bytes_per_step: int
    padded_ms: float
    launch_saving_ms: float
    breakeven_cache_tokens: int


def padding_answer(*, batch: int, buckets, kv_bytes_per_token: int, cache_tokens: int,
                   bandwidth_gbps: float, launch_saving_ms: float) -> PaddingAnswer:
    """Padded rows for `batch`, their KV reads per step, and the cache length at which those
    reads cost as much as the launches the graph saves."""
    bucket = bucket_for(batch, buckets)
    if bucket is None:
        raise ValueError(f"batch {batch} is above the largest bucket {max(buckets)}; "
                         "pick a batch no larger than the largest bucket.")
    rows = bucket - batch
    per_slot = rows * kv_bytes_per_token
    padded_bytes = per_slot * cache_tokens
    breakeven = int(launch_saving_ms / floor_ms(per_slot, bandwidth_gbps)) if rows else 0
    return PaddingAnswer(batch, bucket, rows, cache_tokens, padded_bytes,
                         floor_ms(padded_bytes, bandwidth_gbps), launch_saving_ms, breakeven)


@_checked
def check_padding(padded_rows, breakeven_cache_tokens, expected: PaddingAnswer) -> str:
    """Verdict on the reader's padded-row count and break-even cache length."""
    if padded_rows is None or breakeven_cache_tokens is None:
        return NOT_ATTEMPTED
    if _number(padded_rows, "my_padded_rows") != expected.padded_rows:
        return (f"not yet: batch {expected.batch} pads up to bucket {expected.bucket}; "
                "how many rows are padding?")
    if not _close(_number(breakeven_cache_tokens, "my_breakeven_cache_tokens"),
                  expected.breakeven_cache_tokens, 0.10):
        return ("not yet: each padded row reads every slot of its KV-cache row; find the "
                "cache length at which those reads take as long as the launches the graph saves.")
    return (f"right: {expected.padded_rows} padded rows; padding costs more than the graph "
            f"saves once the static cache holds about {expected.breakeven_cache_tokens:,} tokens.")


# Challenge 3: the floor and the gap for a 7B-class shape on the same card.

@dataclass
class ScaleAnswer:
    """Floor, per-op gap and the gap's share of a token for a larger shape."""
    name: str
    bytes_per_step: int
    floor_ms: float
    launches: int
    gap_ms: float
    launch_fraction: float
    dispatch: bool


def scale_answer(*, name: str, bytes_per_step: int, bandwidth_gbps: float,
                 num_layers: int, kernels_per_layer: float, per_launch_us: float,
                 dispatch: bool) -> ScaleAnswer:
    """Floor and per-op gap of a shape whose op count scales with its layers.

    dispatch is this run's verdict on its own gap (roofline.gap_verdict).
    """
    launches = round(kernels_per_layer * num_layers)
    floor = floor_ms(bytes_per_step, bandwidth_gbps)
    gap = launches * per_launch_us / 1000.0
    return ScaleAnswer(name, bytes_per_step, floor, launches, gap, gap / (floor + gap), dispatch)


@_checked
def check_scale(my_floor_ms, my_launch_fraction, expected: ScaleAnswer) -> str:
    """Verdict on the reader's floor and gap fraction for the larger shape."""
    if my_floor_ms is None or my_launch_fraction is None:
        return NOT_ATTEMPTED
    if not _close(_number(my_floor_ms, "my_big_floor_ms"), expected.floor_ms, 0.05):
        return (f"not yet: the floor is the bytes {expected.name} streams per step (an untied "
                "input table only in the rows it gathers) over this card's bandwidth.")
    fraction = _number(my_launch_fraction, "my_big_launch_fraction", fraction=True)
    if not _close(fraction, expected.launch_fraction, 0.10):
        return ("not yet: the per-op cost grows with the layer count, not with the bytes; "
                "the fraction is gap ÷ (floor + gap).")
    return (f"right: {expected.floor_ms:.2f} ms floor; the per-op gap is "
            f"{expected.launch_fraction:.0%} of the token.")


def answer_scale(small_name: str, small_fraction: float, big: ScaleAnswer, *,
                 small_bytes: int, layer_ratio: float) -> str:
    """The worked answer to challenge 3, conditioned on whether this run's gap is dispatch."""
    lines = [f"{small_name}: the per-op gap is {small_fraction:.0%} of the token.",
             f"{big.name}: floor {big.floor_ms:.3f} ms, gap {big.gap_ms:.3f} ms over "
             f"{big.launches} ops, {big.launch_fraction:.0%} of the token.",
             f"The bytes grow {big.bytes_per_step / small_bytes:.1f}×, the ops only "
             f"{layer_ratio:.2f}×, so the fixed per-op cost is a smaller share of a big model."]
    if big.dispatch:
        lines.append("Here that cost is dispatch, which graphs remove: small models at small "
                     "batch, the interactive end of serving, gain most from them.")
    else:
        lines.append("On this machine, though, the per-op cost is not dispatch: the operators "
                     "themselves run below the streaming bandwidth, and a slow operator grows "
                     "with the bytes it moves, so this fixed-cost estimate understates the 8B "
                     "gap. Graphs would not remove it; faster operators would.")
    return "\n".join(lines)


# Challenge 4: the buffer-reuse bug.

def reused_buffer_step(step: Callable) -> Callable:
    """Wrap a decode step so it returns a view of one static buffer, as a graph runner without clone() would."""
    state = {}

    def leaky(tokens, positions):
        logits = step(tokens, positions)
        out = state.get("out")
        if out is None or out.shape != logits.shape:
            out = state["out"] = torch.empty_like(logits)
        out.copy_(logits)
        return out

    return leaky


def cloned_step(step: Callable) -> Callable:
    """Wrap a decode step so each caller gets its own copy, the fix."""
    leaky = reused_buffer_step(step)
    return lambda tokens, positions: leaky(tokens, positions).clone()


def check_detector(detector, step: Callable, tokens_a, tokens_b, positions) -> str:
    """Verdict on a reader's detector: it must flag the reused buffer and pass the copying step."""
    if detector is None:
        return NOT_ATTEMPTED
    flags_leaky = detector(reused_buffer_step(step), tokens_a, tokens_b, positions)
    flags_safe = detector(cloned_step(step), tokens_a, tokens_b, positions)
    if flags_leaky is None or flags_safe is None:
        return NOT_ATTEMPTED
    if flags_leaky and not flags_safe:
        return "right: your check flags the reused buffer and passes the copying step."
    if not flags_leaky:
        return ("not yet: the reused buffer slipped through; keep the first result, run a "
                "second request, and look at the first result again.")
    return "not yet: your check also flags the step that copies its output."


def answer_detector(step: Callable, tokens_a, tokens_b, positions) -> bool:
    """Worked detector: True if a result changes after a later request, i.e. the buffer is shared."""
    first = step(tokens_a, positions)
    kept = first.clone()
    step(tokens_b, positions)
    return not torch.equal(first, kept)


# Generic numeric answers (used by the chapter "The floor on a fast card").

@_checked
def check_number(value, expected: float, *, rel: float = 0.05, hint: str, unit: str = "",
                 name: str = "your answer", fraction: bool = False) -> str:
    """Verdict on one numeric answer: right within rel, or a hint."""
    if value is None:
        return NOT_ATTEMPTED
    if _close(_number(value, name, fraction=fraction), expected, rel):
        return f"right: {expected:,.3g}{unit}."
    return f"not yet: {hint}"


# The gallery: which card pays least, and how much.

@_checked
def check_smallest(my_name, my_value, values: dict[str, float], *, names: tuple[str, str],
                   unit: str, hint: str) -> str:
    """Verdict on naming the smallest of values ({label: number}), by any part of its label,
    and giving its number; names are the two answer variables, for the hints."""
    if my_name is None or my_value is None:
        return NOT_ATTEMPTED
    if not isinstance(my_name, str) or not my_name.strip():
        return (f"not yet: {names[0]} should be part of a card's name in quotes, as the "
                "table writes it.")
    least = min(values.values())
    named = [label for label in values if my_name.strip().lower() in label.lower()]
    if not named:
        return f"not yet: no card's name contains {my_name!r}; copy part of one from the table."
    right = [label for label in named if values[label] == least]
    if not right:
        return f"not yet: {my_name!r} is not the card that pays least; {hint}"
    if not _close(_number(my_value, names[1]), least, 0.05):
        return f"not yet: that is the card, but {my_value!r} is not its figure; {hint}"
    return f"right: {right[0]}, {least:.1f}{unit}."

# Serving, challenge 1: buckets for a distribution of live batches, within a memory budget.

@_checked
def check_bucket_choice(my_buckets, histogram: dict[int, int], costs, *, budget_mb: float,
                        max_bucket: int) -> str:
    """Verdict on the reader's buckets: within budget, and within BUDGET_TOLERANCE of the best mean step."""
    from floorlab.serving import BUDGET_TOLERANCE, best_buckets, score_buckets

    if my_buckets is None:
        return NOT_ATTEMPTED
    if isinstance(my_buckets, (int, str)) or not all(
            isinstance(b, int) and not isinstance(b, bool) and b >= 1 for b in my_buckets):
        return ("not yet: write the buckets as a tuple of whole batch sizes, "
                "for example (2, 8, 20).")
    if not my_buckets:
        return "not yet: choose at least one bucket."
    if max(my_buckets) > max_bucket:
        return (f"not yet: the model's cache holds {max_bucket} rows, so no bucket can be "
                f"larger than {max_bucket}.")
    mine = score_buckets(tuple(my_buckets), histogram, costs)
    if mine.memory_mb > budget_mb:
        return (f"not yet: those graphs reserve {mine.memory_mb:.1f} MB, over the "
                f"{budget_mb:.1f} MB budget; drop a bucket or pick smaller ones.")
    best = best_buckets(histogram, costs, budget_mb=budget_mb, max_bucket=max_bucket)
    if mine.mean_ms <= best.mean_ms * (1 + BUDGET_TOLERANCE):
        return (f"right: {mine.mean_ms:.3f} ms per step on average, within "
                f"{BUDGET_TOLERANCE:.0%} of the best choice within budget.")
    hint = ("some steps still run eagerly: what does one of them cost against a replay?"
            if mine.fallback_share else
            "no step falls back; now trade padding for the memory you have left.")
    return (f"not yet: {mine.mean_ms:.3f} ms per step on average; a choice within budget "
            f"reaches {best.mean_ms:.3f} ms. {hint}")


def answer_bucket_choice(histogram: dict[int, int], costs, *, budget_mb: float, max_bucket: int,
                         default=(1, 2, 4, 8, 16)) -> str:
    """The worked answer: the best choice within budget, set beside the default buckets."""
    from floorlab.serving import best_buckets, score_buckets

    best = best_buckets(histogram, costs, budget_mb=budget_mb, max_bucket=max_bucket)
    rows = [("best within budget", best), ("the default buckets",
                                           score_buckets(default, histogram, costs))]
    lines = [f"{'':20s} {'ms/step':>8s} {'MB':>7s} {'padded':>7s} {'eager':>6s}  buckets"]
    for name, s in rows:
        lines.append(f"{name:20s} {s.mean_ms:8.3f} {s.memory_mb:7.1f} {s.padded_share:7.0%} "
                     f"{s.fallback_share:6.0%}  {s.buckets}")
    largest = max(b for b in histogram)
    lines.append(f"Every step up to batch {largest} runs in a graph only if a bucket reaches "
                 f"{largest}; an eager step costs {costs.eager_step_ms(largest):.2f} ms there "
                 f"against a replay's {costs.graph_step_ms(largest):.2f} ms.")
    return "\n".join(lines)


# Serving, challenge 2: what padding overwrites without the guard.

@_checked
def check_overwritten(my_values, expected: int, measured: int) -> str:
    """Verdict on the reader's count of cache values one padded step overwrites unguarded."""
    if my_values is None:
        return NOT_ATTEMPTED
    value = _number(my_values, "my_overwritten_values")
    if value == expected:
        agree = "and" if measured == expected else "but"
        return (f"right: {expected:,} values, {agree} the step run without the guard "
                f"overwrote {measured:,}.")
    return ("not yet: each padding row writes one slot of its cache row, for K and for V, "
            "in every layer, for every KV head: head_dim values each.")

# Chapter "Shared buffers": which snippets keep their logits, and what a kept view holds.

SNIPPETS = {
    "a": "out = runner.step(tokens, positions)",
    "b": "with runner.borrow(tokens, positions) as logits:\n    out = logits",
    "c": "with runner.borrow(tokens, positions) as logits:\n    out = logits.argmax(-1)",
    "d": "with runner.borrow(tokens, positions) as logits:\n    out = logits[:, :8]",
    "e": "with runner.borrow(tokens, positions) as logits:\n    out = logits.detach()",
    "f": ("with runner.borrow(tokens, positions) as logits:\n"
          "    out = torch.empty_like(logits)\n    out.copy_(logits)"),
}
SNIPPET_WHY = {
    "a": "step() hands back a clone, memory the caller owns",
    "b": "the view is the static output itself, which the next replay rewrites",
    "c": "argmax writes a new tensor while the logits are still fresh",
    "d": "a slice is another view of the same static memory",
    "e": "detach() drops autograd history but shares the memory",
    "f": "copy_ moves the logits into memory the caller owns",
}


def snippets_keep(runner, first, second) -> dict[str, bool]:
    """Run every snippet for the first request, then one second request; which kept their `out`.

    All the snippets replay the same request, so only the second request changes a
    static output: a snippet keeps its logits when its `out` is unchanged after it.
    """
    tokens, positions = first
    outs = {}
    for name, code in SNIPPETS.items():
        scope = {"runner": runner, "torch": torch, "tokens": tokens, "positions": positions}
        exec(code, scope)  # the book's snippets above, never the reader's text
        outs[name] = (scope["out"], scope["out"].clone())
    runner.step(*second)
    return {name: bool(torch.equal(out, at_the_time)) for name, (out, at_the_time) in outs.items()}


def _letters(value, name: str) -> set[str]:
    if isinstance(value, str):
        items = [c for c in value.lower() if c.isalpha()]
    else:
        try:
            items = [str(v).strip().lower() for v in value]
        except TypeError:
            raise _Unreadable(f"not yet: {name} should be letters such as {{'a', 'b'}}, "
                              f"got {value!r}.") from None
    unknown = sorted(set(items) - set(SNIPPETS))
    if unknown:
        raise _Unreadable(f"not yet: {', '.join(unknown)} is not a snippet; pick from "
                          f"{', '.join(SNIPPETS)}.")
    return set(items)


@_checked
def check_safe_snippets(answer, keeps: dict[str, bool]) -> str:
    """Verdict on the reader's set of safe snippets, against what each one did in this run."""
    if answer is None:
        return NOT_ATTEMPTED
    chosen = _letters(answer, "my_safe_snippets")
    safe = {k for k, ok in keeps.items() if ok}
    if chosen == safe:
        return f"right: {', '.join(sorted(safe))} keep their logits; the others do not."
    missed, wrong = sorted(safe - chosen), sorted(chosen - safe)
    hint = []
    if wrong:
        hint.append(f"{', '.join(wrong)} still point into the static output")
    if missed:
        hint.append(f"{', '.join(missed)} own their memory")
    return "not yet: " + "; ".join(hint) + ". Ask of each: whose memory is `out`?"


@_checked
def check_kept_holds(answer, expected: str, names) -> str:
    """Verdict on whose logits the reader predicts a kept view holds."""
    if answer is None:
        return NOT_ATTEMPTED
    if not isinstance(answer, str) or answer.strip().upper() not in names:
        return f"not yet: answer with one request's name, one of {', '.join(names)}."
    if answer.strip().upper() == expected:
        return f"right: the view holds {expected}'s logits."
    return ("not yet: each bucket has its own static output; which request last "
            "replayed the bucket the kept view belongs to?")


# Chapter "Bigger models": the size at which graph replay stops mattering.

@dataclass
class GraphsMatterAnswer:
    """Where graphs stop mattering on one card: the bytes per layer, and the first shape there."""
    threshold: float
    layer_bytes: float
    first_preset: str  # "none" when no shape in layer_bytes_by_preset gets there
    layer_bytes_by_preset: dict[str, int]


def graphs_matter_answer(model, presets, *, threshold: float) -> GraphsMatterAnswer:
    """Bytes per layer at which eager falls under threshold × a replay (sizes.CostModel), and
    the first of presets (smallest first) whose bf16 layers are that large."""
    shapes = [get_shape(p) for p in presets]
    by_preset = {s.name: s.layer_param_count() * 2 for s in shapes}
    need = model.layer_bytes(threshold)
    first = next((name for name, size in by_preset.items() if size >= need), "none")
    return GraphsMatterAnswer(threshold, need, first, by_preset)


@_checked
def check_graphs_matter(my_layer_gb, my_first_preset, expected: GraphsMatterAnswer) -> str:
    """Verdict on the reader's bytes per layer (GB) and the first shape that reaches them."""
    if my_layer_gb is None or my_first_preset is None:
        return NOT_ATTEMPTED
    gb, want_gb = _number(my_layer_gb, "my_layer_gb"), expected.layer_bytes / 1e9
    if abs(gb - want_gb) > max(0.10 * want_gb, 0.005):
        return (f"not yet: per layer, eager ÷ replay = issue time ÷ (stream time + kernels × µs "
                f"per kernel). Set that to {expected.threshold:g}, solve for the stream time, "
                "and multiply it by the bandwidth.")
    if not isinstance(my_first_preset, str):
        return "not yet: my_first_preset is a preset's name in quotes, or 'none'."
    if my_first_preset.strip().lower() != expected.first_preset:
        return ("not yet: set each shape's GB per layer beside yours and write the first that "
                "reaches it, or 'none' if none does.")
    where = ("no Qwen3 shape here gets there" if expected.first_preset == "none"
             else f"{expected.first_preset} is the first shape there")
    return f"right: {want_gb:.2f} GB per layer, and {where}."


def answer_graphs_matter(model, expected: GraphsMatterAnswer, sizes) -> str:
    """The worked answer: the arithmetic from the fitted preset, then each shape's prediction."""
    from floorlab.prose import fmt_gbps

    fixed_ms = model.kernels_per_layer * model.overhead_us / 1e3
    layers = get_shape(model.preset).num_layers
    stream_ms = model.stream_ms_per_layer(expected.threshold)
    lines = [
        f"Fitted on {model.preset}, {sizes.source.label}:",
        f"  issue time per layer  {model.issue_ms_per_layer * layers:.2f} ms ÷ {layers} = "
        f"{model.issue_ms_per_layer:.3f} ms",
        f"  fixed cost per layer  {model.kernels_per_layer:.1f} kernels × "
        f"{model.overhead_us:.2f} µs = {fixed_ms:.3f} ms",
        f"eager ÷ replay = {model.issue_ms_per_layer:.3f} ÷ (stream + {fixed_ms:.3f}) "
        f"= {expected.threshold:g} when",
        f"  stream = {model.issue_ms_per_layer:.3f} ms ÷ {expected.threshold:g} − "
        f"{fixed_ms:.3f} ms = {stream_ms:.3f} ms per layer",
        f"  bytes  = {stream_ms:.3f} ms × {fmt_gbps(model.bandwidth_gbps)} = "
        f"{expected.layer_bytes / 1e9:.2f} GB per layer",
        "",
        f"{'preset':<11}{'GB per layer':>14}{'eager ÷ replay, predicted':>27}{'measured':>10}",
    ]
    for name, size in expected.layer_bytes_by_preset.items():
        measured = sizes.speedup(name) if name in sizes.presets else None
        lines.append(f"{name:<11}{size / 1e9:>14.3f}{model.speedup(name):>26.2f}×"
                     f"{f'{measured:.2f}×' if measured else '-':>10}")
    lines.append("")
    if expected.first_preset == "none":
        lines.append("No shape of the family gets there: on this card, at batch 1, a replay stays "
                     f"more than {expected.threshold:g}× as fast as eager at every size. The host "
                     "pays per layer, so a model that grows by adding layers keeps paying; only "
                     "wider layers, with more bytes each, let the floor hide the launches.")
    else:
        lines.append(f"From {expected.first_preset} on, a layer streams for long enough to hide "
                     "its own launches, and eager comes within "
                     f"{expected.threshold:g}× of a replay: there graphs stop mattering.")
    verdict = sizes.verdict(model.preset)
    if verdict != "dispatch":
        lines.append(f"Note: roofline.gap_verdict calls {model.preset}'s eager gap "
                     f"'{verdict}', not dispatch, so the host's issue time is not what sets "
                     "the eager step here, and the prediction above leans on it.")
    return "\n".join(lines)
