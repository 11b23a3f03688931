"""Checks and worked answers for the chapters' challenges.

Each `check_*` returns a one-line verdict: "not attempted yet", "right", or
"not yet" with a hint. Each `answer_*` returns the worked answer, in numbers
taken from the run the reader just made.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from floorlab.roofline import DISPATCH_US, floor_ms, per_launch_us

NOT_ATTEMPTED = "not attempted yet: edit the cell above, then run it and this check again."


def _close(value: float, expected: float, rel: float) -> bool:
    return abs(value - expected) <= rel * abs(expected)


# Challenge 1: count the ops of a real layer and redo the division.

def check_ops_per_layer(ops_per_layer, my_per_launch_us, *, gap_ms: float,
                        num_layers: int, counted_per_layer: float) -> str:
    """Verdict on the reader's op count per layer and the per-launch division built on it."""
    if ops_per_layer is None or my_per_launch_us is None:
        return NOT_ATTEMPTED
    if not 0.5 * counted_per_layer <= ops_per_layer <= 2.0 * counted_per_layer:
        return (f"not yet: {ops_per_layer} ops per layer is far from the "
                f"{counted_per_layer:.1f} kernels the profiler counted; count every kernel, "
                "norms and reshapes that copy included.")
    expected_us = per_launch_us(gap_ms, ops_per_layer * num_layers)
    if not _close(my_per_launch_us, expected_us, 0.05):
        return (f"not yet: with {ops_per_layer} ops per layer the gap of {gap_ms:.2f} ms "
                f"over {ops_per_layer * num_layers} launches is {expected_us:.1f} µs each, "
                f"not {my_per_launch_us}.")
    return f"right: {expected_us:.1f} µs per launch over {ops_per_layer * num_layers} launches."


def answer_ops_per_layer(*, gap_ms: float, num_layers: int, counted_per_layer: float,
                         issue_ms: float | None, eager_ms: float) -> str:
    """The worked answer to challenge 1, from the measured counts (issue_ms None on a CPU)."""
    launches = round(counted_per_layer * num_layers)
    us = per_launch_us(gap_ms, launches)
    lines = [
        f"The profiler counted {counted_per_layer:.1f} kernels per layer, "
        f"{launches} per step over {num_layers} layers.",
        f"gap ÷ launches = {gap_ms:.2f} ms ÷ {launches} = {us:.1f} µs per launch.",
    ]
    dispatch = f"{DISPATCH_US[0]:.0f}-{DISPATCH_US[1]:.0f} µs"
    if us <= 2 * DISPATCH_US[1]:  # the same line diagnose_gap draws
        lines.append(f"That is about the {dispatch} an eager dispatch costs: the gap still "
                     "looks like dispatch.")
    else:
        lines.append(f"That is well above the {dispatch} an eager dispatch costs: something "
                     "besides dispatch is in the gap, most likely kernels that run below "
                     "streaming bandwidth.")
    if issue_ms is not None:
        lines.append(f"Cross-check: the host needed {issue_ms:.2f} ms just to issue one step, "
                     f"against {eager_ms:.2f} ms for the whole step.")
    return "\n".join(lines)


# Challenge 2: padding cost at batch 5 with graphs at 1, 2, 4, 8.

@dataclass
class PaddingAnswer:
    """The padding arithmetic for one batch: rows, bytes and the break-even context."""
    batch: int
    bucket: int
    padded_rows: int
    padded_bytes_per_token_of_context: int
    launch_saving_ms: float
    breakeven_context: int


def padding_answer(*, batch: int, buckets, kv_bytes_per_token: int,
                   bandwidth_gbps: float, launch_saving_ms: float) -> PaddingAnswer:
    """Padding rows for `batch`, and the context length at which their KV reads cost more than graphs save."""
    bucket = min((b for b in sorted(buckets) if b >= batch), default=None)
    if bucket is None:
        raise ValueError(f"batch {batch} is above the largest bucket {max(buckets)}; "
                         "pick a batch no larger than the largest bucket.")
    rows = bucket - batch
    if rows == 0:
        return PaddingAnswer(batch, bucket, 0, 0, launch_saving_ms, 0)
    bytes_per_context_token = rows * kv_bytes_per_token
    breakeven = launch_saving_ms / floor_ms(bytes_per_context_token, bandwidth_gbps)
    return PaddingAnswer(batch, bucket, rows, bytes_per_context_token, launch_saving_ms,
                         int(breakeven))


def check_padding(padded_rows, breakeven_context, expected: PaddingAnswer) -> str:
    """Verdict on the reader's padded-row count and break-even context length."""
    if padded_rows is None or breakeven_context is None:
        return NOT_ATTEMPTED
    if padded_rows != expected.padded_rows:
        return (f"not yet: batch {expected.batch} pads up to bucket {expected.bucket}; "
                "how many rows are padding?")
    if not _close(breakeven_context, expected.breakeven_context, 0.10):
        return ("not yet: each padded row reads its own KV cache; find the context at which "
                "those reads take as long as the launch overhead the graph saves.")
    return (f"right: {expected.padded_rows} padded rows; padding costs more than it saves "
            f"past about {expected.breakeven_context:,} tokens of context.")


# Challenge 3: the floor and the gap for a 7B-class shape on the same card.

@dataclass
class ScaleAnswer:
    """Floor, launch gap and the launch share of a token for a larger shape."""
    name: str
    bytes_per_step: int
    floor_ms: float
    launches: int
    gap_ms: float
    launch_fraction: float


def scale_answer(*, name: str, bytes_per_step: int, bandwidth_gbps: float,
                 num_layers: int, kernels_per_layer: float, per_launch_us: float) -> ScaleAnswer:
    """Floor and launch gap of a shape whose launch count scales with its layers."""
    launches = round(kernels_per_layer * num_layers)
    floor = floor_ms(bytes_per_step, bandwidth_gbps)
    gap = launches * per_launch_us / 1000.0
    return ScaleAnswer(name, bytes_per_step, floor, launches, gap, gap / (floor + gap))


def check_scale(my_floor_ms, my_launch_fraction, expected: ScaleAnswer) -> str:
    """Verdict on the reader's floor and launch fraction for the larger shape."""
    if my_floor_ms is None or my_launch_fraction is None:
        return NOT_ATTEMPTED
    if not _close(my_floor_ms, expected.floor_ms, 0.05):
        return (f"not yet: the floor is every weight byte of {expected.name} over this "
                "card's measured bandwidth.")
    if not _close(my_launch_fraction, expected.launch_fraction, 0.10):
        return ("not yet: launches grow with the layer count, not with the bytes; "
                "the fraction is gap ÷ (floor + gap).")
    return (f"right: {expected.floor_ms:.2f} ms floor; launches are "
            f"{expected.launch_fraction:.0%} of the token.")


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

def check_number(value, expected: float, *, rel: float = 0.05, hint: str, unit: str = "") -> str:
    """Verdict on one numeric answer: right within rel, or a hint."""
    if value is None:
        return NOT_ATTEMPTED
    if _close(float(value), expected, rel):
        return f"right: {expected:,.3g}{unit}."
    return f"not yet: {hint}"


def crossover_gbps(bytes_per_step: int, kernels: int, per_kernel_us: float) -> float:
    """Bandwidth in GB/s at which the kernels' fixed cost equals the floor: bytes / (kernels x per-kernel time)."""
    return bytes_per_step / (kernels * per_kernel_us * 1e-6) / 1e9


def kernels_per_layer_budget(floor_ms: float, target_multiple: float, per_kernel_us: float,
                             num_layers: int) -> float:
    """Most kernels per layer whose fixed cost keeps a step within target_multiple x the floor."""
    return (target_multiple - 1.0) * floor_ms * 1e3 / per_kernel_us / num_layers


def predicted_ms(floor_ms: float, kernels: int, per_kernel_us: float) -> float:
    """Step time in ms if every kernel adds a fixed per_kernel_us to the floor."""
    return floor_ms + kernels * per_kernel_us / 1e3
