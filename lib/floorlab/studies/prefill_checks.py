"""Studies wing: the challenges of the chapter "Prefill against decode": each answer as (rights,
wrong), what was done → the number, for checks.check_number (several right forms, slips by name)."""
from __future__ import annotations

from floorlab.core.checks import plausible_wrongs
from floorlab.core.intensity import (
    fixed_cost_knee_tokens,
    fixed_cost_root_tokens,
    knee_intensity,
    matmul_only_tokens,
    roofline_knee_tokens,
)
from floorlab.core.roofline import decode_floor, floor_ms
from floorlab.studies.below_the_floor import other_bandwidth, whole_table_bytes

APART = 0.01  # a wrong answer within 1% of a right one is not refused: the digits cannot tell them apart


def _other_bandwidth(bandwidths) -> tuple[str, float]:
    """('the copy bandwidth instead of the read bandwidth', the copy GB/s): the floor's other one."""
    kind, gbps = other_bandwidth(bandwidths)
    return f"the {kind} bandwidth instead of the {bandwidths.floor_kind} bandwidth", gbps


def knee_answer(shape, *, peak_tflops: float, bandwidths) -> tuple[dict, dict]:
    """Challenge 1: the knee's height in FLOPs per byte, or the first compute-bound prompt; wrong: the other measured
    bandwidth, or 2 FLOPs per byte."""
    mistake, other_gbps = _other_bandwidth(bandwidths)
    knee = knee_intensity(peak_tflops, bandwidths.floor_gbps)
    first = roofline_knee_tokens(shape, peak_tflops=peak_tflops, bandwidth_gbps=bandwidths.floor_gbps)
    rights = {"the knee's height": knee, "the first compute-bound prompt": first}
    wrong = {mistake: knee_intensity(peak_tflops, other_gbps),
             "2 FLOPs per byte for each token (a bf16 weight is 2 bytes, and 2 FLOPs)": knee / 2}
    return rights, plausible_wrongs(rights, wrong, apart=APART)


def fixed_cost_answer(shape, *, peak_tflops: float, step_ms: float) -> tuple[dict, dict]:
    """Challenge 3: the prompt whose FLOPs, attention included, take step_ms at peak_tflops (the root, or the first
    whole prompt past it); wrong: attention left out."""
    given = {"peak_tflops": peak_tflops, "step_ms": step_ms}
    rights = {"the root": fixed_cost_root_tokens(shape, **given),
              "the first whole prompt": fixed_cost_knee_tokens(shape, **given)}
    wrong = {"the matrix products' FLOPs alone, without attention": matmul_only_tokens(shape, **given)}
    return rights, plausible_wrongs(rights, wrong, apart=APART)


def floor_mistakes(shape, context_tokens: int, bandwidths) -> dict[str, float]:
    """Floors in ms (batch 1) that slips give: the other bandwidth, and an untied input table whole."""
    floor = decode_floor(shape, batch=1, prompt_tokens=context_tokens - 1, bandwidths=bandwidths)
    mistake, other_gbps = _other_bandwidth(bandwidths)
    wrong = {mistake: floor_ms(floor.bytes_per_step, other_gbps)}
    if not shape.tie_word_embeddings:
        wrong["the whole input table instead of the one row looked up"] = floor_ms(
            whole_table_bytes(shape, 1, context_tokens), floor.bandwidth_gbps)
    return plausible_wrongs(floor.floor_ms, wrong, apart=APART)
