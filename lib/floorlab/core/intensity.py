"""Core wing: the roofline's arithmetic for prefill: FLOPs, arithmetic intensity and the knees."""
from __future__ import annotations

import math
from typing import Callable, Iterable

from floorlab.core.numbers import nonnegative_number, positive_number, whole_number
from floorlab.core.roofline import floor_ms, prefill_bytes
from floorlab.core.shapes import get_shape

LEVELLED = 2.0  # time per token within this multiple of its lowest has stopped falling
STILL_FALLING = -0.5  # a last log-log slope steeper than this: the sweep ended before levelling
PEAK_HINT = "pass a measured compute roof in TFLOP/s, e.g. measure_matmul_tflops().tflops"
GBPS_HINT = "pass a measured bandwidth in GB/s, e.g. measure_bandwidths().floor_gbps"


# ---- the arithmetic ---------------------------------------------------------------------

def flops_per_token(shape, context_tokens: int) -> int:
    """FLOPs one token costs when it attends to context_tokens tokens."""
    context_tokens = whole_number(context_tokens, "context_tokens", at_least=0)
    attention = 4 * shape.num_layers * shape.num_heads * shape.head_dim * context_tokens
    return 2 * shape.matmul_param_count() + attention


def prefill_flops(shape, prompt_tokens: int, batch: int = 1) -> int:
    """FLOPs of a causal prefill: every token through every matrix, token t attending to t + 1."""
    n = whole_number(prompt_tokens, "prompt_tokens")
    batch = whole_number(batch, "batch")
    attended = n * (n + 1) // 2  # 1 + 2 + ... + n
    per_row = n * 2 * shape.matmul_param_count()
    per_row += 4 * shape.num_layers * shape.num_heads * shape.head_dim * attended
    return batch * per_row


def intensity(flops: float, bytes_moved: float) -> float:
    """Arithmetic intensity in FLOPs per byte moved."""
    flops = nonnegative_number(flops, "flops", "pass e.g. prefill_flops(shape, prompt_tokens)")
    bytes_moved = positive_number(bytes_moved, "bytes_moved", "pass e.g. prefill_bytes(shape, prompt_tokens)")
    return flops / bytes_moved


def knee_intensity(peak_tflops: float, bandwidth_gbps: float) -> float:
    """FLOPs per byte where the compute roof meets the bandwidth slope: peak ÷ bandwidth."""
    peak_tflops = positive_number(peak_tflops, "peak_tflops", PEAK_HINT)
    bandwidth_gbps = positive_number(bandwidth_gbps, "bandwidth_gbps", GBPS_HINT)
    return peak_tflops * 1e12 / (bandwidth_gbps * 1e9)


def decode_against_knee(decode_flops_per_byte: float, knee_flops_per_byte: float) -> str:
    """One sentence on where decode sits against the knee of this machine's roofline."""
    decode = nonnegative_number(decode_flops_per_byte, "decode_flops_per_byte")
    knee = positive_number(knee_flops_per_byte, "knee_flops_per_byte", "pass knee_intensity(...)")
    if decode < knee / 4:
        return ("Decode sits far below it, so no amount of faster arithmetic would speed it "
                "up.")
    return ("On this machine decode does not sit below it: its arithmetic is slow enough, "
            "next to its bandwidth, that even one token waits on it. On a GPU the knee is a "
            "hundred FLOPs per byte or more, and decode is far below it.")


def achieved_tflops(flops: float, ms: float) -> float:
    """TFLOP/s that doing flops in ms milliseconds amounts to."""
    flops = nonnegative_number(flops, "flops", "pass e.g. prefill_flops(shape, prompt_tokens)")
    ms = positive_number(ms, "ms", "pass a measured time in milliseconds")
    return flops / (ms * 1e-3) / 1e12


def _first_tokens(reaches: Callable[[int], bool], limit: int = 2**24) -> int:
    """The smallest whole n >= 1 for which reaches(n) holds, reaches growing with n."""
    high = 1
    while not reaches(high):
        high *= 2
        if high > limit:
            raise ValueError(f"no prompt up to {limit:,} tokens gets there; check the inputs")
    low = high // 2  # reaches(low) is False, or low is 0
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if reaches(mid) else (mid, high)
    return high


def roofline_knee_tokens(shape, *, peak_tflops: float, bandwidth_gbps: float,
                         dtype_bytes: int = 2) -> int:
    """The shortest prompt whose prefill is compute-bound: intensity >= peak ÷ bandwidth."""
    knee = knee_intensity(peak_tflops, bandwidth_gbps)
    return _first_tokens(lambda n: intensity(prefill_flops(shape, n),
                                             prefill_bytes(shape, n, dtype_bytes=dtype_bytes)) >= knee)


def fixed_cost_knee_tokens(shape, *, peak_tflops: float, step_ms: float) -> int:
    """The shortest prompt whose FLOPs need longer than step_ms at peak_tflops."""
    peak_tflops = positive_number(peak_tflops, "peak_tflops", PEAK_HINT)
    step_ms = positive_number(step_ms, "step_ms", "pass a measured step time, or a floor, in ms")
    return _first_tokens(lambda n: prefill_flops(shape, n) / (peak_tflops * 1e12) * 1e3 >= step_ms)


def fixed_cost_root_tokens(shape, *, peak_tflops: float, step_ms: float) -> float:
    """The prompt length, not rounded, whose FLOPs (attention included) take step_ms at peak_tflops."""
    shape = get_shape(shape)
    step_ms = positive_number(step_ms, "step_ms", "pass a measured step")
    peak_tflops = positive_number(peak_tflops, "peak_tflops", PEAK_HINT)
    budget = step_ms * 1e-3 * peak_tflops * 1e12
    pair = 2 * shape.num_layers * shape.num_heads * shape.head_dim
    linear = 2 * shape.matmul_param_count() + pair
    return (math.sqrt(linear**2 + 4 * pair * budget) - linear) / (2 * pair)


def matmul_only_tokens(shape, *, peak_tflops: float, step_ms: float) -> float:
    """The prompt length whose matrix products alone, 2 FLOPs per parameter per token, take step_ms."""
    return step_ms * 1e-3 * peak_tflops * 1e12 / (2 * shape.matmul_param_count())


def attention_share(shape, prompt_tokens: int) -> float:
    """Attention's share of a prefill's FLOPs (prefill_flops): it grows with the prompt."""
    total = prefill_flops(shape, prompt_tokens)
    return 1 - int(prompt_tokens) * 2 * shape.matmul_param_count() / total


def line_fit(xs: Iterable[float], ys: Iterable[float]) -> tuple[float, float, float]:
    """(intercept, slope, largest miss as a share of y) of the least-squares line through the points."""
    xs, ys = [float(x) for x in xs], [float(y) for y in ys]
    if len(xs) != len(ys) or len(set(xs)) < 2:
        raise ValueError(f"a line needs points at two x values or more, got x = {xs}")
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)
    intercept = mean_y - slope * mean_x
    return intercept, slope, max(abs(intercept + slope * x - y) / abs(y) for x, y in zip(xs, ys))


def observed_knee_tokens(prompt_tokens: Iterable[int], ms_per_token: Iterable[float], *,
                         within: float = LEVELLED) -> float | None:
    """The prompt length where time per token stops falling, or None if it never did."""
    xs = [positive_number(n, "prompt_tokens[]", "pass the sweep's prompt lengths") for n in prompt_tokens]
    ys = [positive_number(t, "ms_per_token[]", "pass the measured ms per token") for t in ms_per_token]
    within = positive_number(within, "within", "pass a multiple of the lowest time, e.g. 2.0")
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError("pass at least two prompt lengths and one time per token for each")
    lowest = min(ys)
    if ys[-1] == lowest and _log_slope(xs[-2:], ys[-2:]) < STILL_FALLING:
        return None
    target = within * lowest
    if ys[0] <= target:
        return xs[0]
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if y1 <= target:
            share = math.log(y0 / target) / math.log(y0 / y1)
            return math.exp(math.log(x0) + share * math.log(x1 / x0))
    return None  # unreachable: the lowest point itself is within the target


def _log_slope(xs: list[float], ys: list[float]) -> float:
    return math.log(ys[1] / ys[0]) / math.log(xs[1] / xs[0])


def prefill_bound_ms(shape, prompt_tokens: int, *, bandwidth_gbps: float, peak_tflops: float,
                     dtype_bytes: int = 2) -> float:
    """The roofline's lower bound on a prefill in ms: the larger of bytes ÷ bandwidth and FLOPs ÷ the compute roof."""
    peak_tflops = positive_number(peak_tflops, "peak_tflops", PEAK_HINT)
    moved = prefill_bytes(shape, prompt_tokens, dtype_bytes=dtype_bytes)
    compute_ms = prefill_flops(shape, prompt_tokens) / (peak_tflops * 1e12) * 1e3
    return max(floor_ms(moved, bandwidth_gbps), compute_ms)


def prefill_workspace_bytes(shape, prompt_tokens: int, dtype_bytes: int = 2) -> int:
    """Bytes a prefill allocates beyond the weights and the cache, at most: the logits of every
    token, one layer's activations, and the attention scores if they are materialised."""
    n = whole_number(prompt_tokens, "prompt_tokens")
    rows = shape.vocab_size + 2 * shape.intermediate_size + 4 * shape.hidden_size
    rows += (shape.num_heads + 2 * shape.num_kv_heads) * shape.head_dim
    return n * rows * dtype_bytes + shape.num_heads * n * n * 4
