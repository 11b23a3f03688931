"""Studies wing: what only the first chapter, "Below the floor", needs: its challenges.

Each check returns a one-line verdict; each answer works the challenge through in numbers
taken from the run the reader just made.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from floorlab.core.checks import NOT_ATTEMPTED, checked, close, read_number
from floorlab.core.roofline import DISPATCH_US, floor_ms, per_launch_us
from floorlab.engine.buckets import bucket_for

OPS_TOLERANCE = 0.15  # an op count within 15% of the profiler's counts as the same count


# Challenge 1: count the ops of a real layer and redo the division.

@checked
def check_ops_per_layer(ops_per_layer, my_per_launch_us, my_is_dispatch, *, gap_ms: float,
                        num_layers: int, counted_per_layer: float, dispatch: bool) -> str:
    """Verdict on the reader's op count per layer, the per-launch division and the dispatch verdict.

    dispatch is this run's own verdict (roofline.gap_verdict(...) == "dispatch").
    """
    if ops_per_layer is None or my_per_launch_us is None or my_is_dispatch is None:
        return NOT_ATTEMPTED
    ops = read_number(ops_per_layer, "my_ops_per_layer")
    if not close(ops, counted_per_layer, OPS_TOLERANCE):
        return (f"not yet: {ops:g} ops per layer is not what one layer of this model runs; "
                f"count every kernel in the profiler's list above (norms, RoPE, cache writes "
                "and copies included) and divide by the layers.")
    launches = ops * num_layers
    expected_us = per_launch_us(gap_ms, launches)
    if not close(read_number(my_per_launch_us, "my_per_launch_us"), expected_us, 0.05):
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


@checked
def check_padding(padded_rows, breakeven_cache_tokens, expected: PaddingAnswer) -> str:
    """Verdict on the reader's padded-row count and break-even cache length."""
    if padded_rows is None or breakeven_cache_tokens is None:
        return NOT_ATTEMPTED
    if read_number(padded_rows, "my_padded_rows") != expected.padded_rows:
        return (f"not yet: batch {expected.batch} pads up to bucket {expected.bucket}; "
                "how many rows are padding?")
    if not close(read_number(breakeven_cache_tokens, "my_breakeven_cache_tokens"),
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


@checked
def check_scale(my_floor_ms, my_launch_fraction, expected: ScaleAnswer) -> str:
    """Verdict on the reader's floor and gap fraction for the larger shape."""
    if my_floor_ms is None or my_launch_fraction is None:
        return NOT_ATTEMPTED
    if not close(read_number(my_floor_ms, "my_big_floor_ms"), expected.floor_ms, 0.05):
        return (f"not yet: the floor is the bytes {expected.name} streams per step (an untied "
                "input table only in the rows it gathers) over this card's bandwidth.")
    fraction = read_number(my_launch_fraction, "my_big_launch_fraction", fraction=True)
    if not close(fraction, expected.launch_fraction, 0.10):
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
