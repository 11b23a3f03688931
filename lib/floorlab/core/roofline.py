"""Core wing: roofline arithmetic for one decode step: bytes moved, the floor, the gap.
Plain arithmetic, no torch; GB means 1e9 bytes, so 1.19 GB / 380 GB/s = 3.13 ms reads alike in code and on the page."""
from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from floorlab.core.host import SEED_DISPATCH_US, DispatchComparison
from floorlab.core.numbers import element_bytes, nonnegative_number, number, positive_number, shown, whole_number
from floorlab.core.prose import fmt_gb, fmt_gbps, fmt_ms, sig

BYTES_PER_GB = 1e9
BELOW_FLOOR_RATIO = 0.95  # a 5% allowance for timer noise before a result counts as below the floor
BANDWIDTH_KINDS = ("copy", "read")  # the two measured bandwidths a floor may divide by
MS_HINT = "pass a measured time in milliseconds"
FLOOR_HINT = "pass the floor from floor_ms(bytes, gbps) or decode_floor(...).floor_ms"
BYTES_HINT = "pass the bytes one step reads, e.g. bytes_per_step(shape, 1, 16)"
GBPS_HINT = "pass a measured bandwidth in GB/s, e.g. measure_bandwidth().gbps"
OVERHEAD_HINT = ("pass the measured µs per kernel, overhead_us_per_kernel(busy_ms, floor_ms, kernels); "
                 "an overhead of 0 means the kernels cost nothing beyond their bytes, so there is no "
                 "crossover or budget to find")
BANDWIDTHS_HINT = ("bandwidths should be a Bandwidths from fl.measure_bandwidths() or a dict "
                   "{'copy': GB/s, 'read': GB/s}")


class BelowFloorWarning(UserWarning):
    """A measurement came in below the roofline floor: the work cannot have happened."""


class BelowFloorError(RuntimeError):
    """A measurement came in below the roofline floor (raised when check_floor is strict)."""


def bytes_per_step(shape, batch_size: int, context_len: int, dtype_bytes: int = 2) -> int:
    """Bytes one decode step reads: the weights it streams (of an untied input table, the batch_size rows gathered)
    plus the KV cache of context_len tokens (prompt + the decoded token) for every row."""
    batch_size = whole_number(batch_size, "batch_size", hint="pass the rows decoded together, e.g. 1")
    context_len = whole_number(context_len, "context_len", at_least=0,
                               hint="pass the tokens each row attends to, e.g. prompt + 1")
    dtype_bytes = element_bytes(dtype_bytes)
    if not all(hasattr(shape, name) for name in ("weight_bytes", "kv_bytes_per_token")):
        raise ValueError(f"shape should be a model shape such as fl.get_shape('qwen3-0.6b'), "
                         f"got {shown(shape)}")
    streamed = getattr(shape, "streamed_weight_bytes", None)
    weights = int(streamed(batch_size, dtype_bytes) if streamed else shape.weight_bytes(dtype_bytes))
    kv = int(batch_size) * int(context_len) * int(shape.kv_bytes_per_token(dtype_bytes))
    return weights + kv


def prefill_bytes(shape, prompt_tokens: int, batch: int = 1, dtype_bytes: int = 2) -> int:
    """Bytes a prefill of batch prompts of prompt_tokens must move: the weights once, for every token at once, plus the
    KV cache it writes."""
    prompt_tokens = whole_number(prompt_tokens, "prompt_tokens")
    rows = whole_number(batch, "batch") * prompt_tokens
    return bytes_per_step(shape, rows, 0, dtype_bytes) + rows * int(shape.kv_bytes_per_token(dtype_bytes))


@dataclass(frozen=True)
class Floor:
    """The floor of one configuration: bytes over the larger measured bandwidth, in ms.
    visible_tokens is what the floor counts per row; cache_tokens what masked attention reads."""

    preset: str
    batch: int
    visible_tokens: int
    bytes_per_step: int
    bandwidth_gbps: float
    bandwidth_kind: str
    floor_ms: float
    cache_tokens: int | None = None
    kv_bytes_per_token: int = 0

    def __post_init__(self):
        """Refuse a floor no measurement could have: wrong types, NaN, zero or negative numbers."""
        if not isinstance(self.preset, str):
            raise ValueError(f"preset must be the model's name, got {shown(self.preset)}")
        for name in ("batch", "visible_tokens", "bytes_per_step"):
            whole_number(getattr(self, name), name)
        for name in ("cache_tokens", "kv_bytes_per_token"):
            if getattr(self, name) is not None:
                whole_number(getattr(self, name), name, at_least=0)
        positive_number(self.bandwidth_gbps, "bandwidth_gbps", GBPS_HINT)
        positive_number(self.floor_ms, "floor_ms", FLOOR_HINT)
        if self.bandwidth_kind not in BANDWIDTH_KINDS:
            raise ValueError(f"bandwidth_kind must be one of {BANDWIDTH_KINDS}, got "
                             f"{shown(self.bandwidth_kind)}")

    @property
    def bytes_read_by_engine(self) -> int | None:
        """Bytes the step reads when attention scans the whole static cache (None if unknown)."""
        if self.cache_tokens is None:
            return None
        extra = self.batch * (self.cache_tokens - self.visible_tokens) * self.kv_bytes_per_token
        return self.bytes_per_step + max(extra, 0)

    def arithmetic(self) -> str:
        """The floor as one line of arithmetic, e.g. '1.196 GB ÷ 4347 GB/s (read) = 0.275 ms'."""

        return (f"{fmt_gb(self.bytes_per_step)} ÷ {fmt_gbps(self.bandwidth_gbps)} "
                f"({self.bandwidth_kind}) = {fmt_ms(self.floor_ms)}")

    def reads_note(self) -> str:
        """One sentence on what the floor counts against what the engine reads."""
        read = self.bytes_read_by_engine
        if read is None or read == self.bytes_per_step:
            return f"The floor counts {self.visible_tokens} visible tokens per row, as the step reads them."
        return (f"The floor counts the {self.visible_tokens} tokens each row can see; the engine's "
                f"masked attention reads all {self.cache_tokens} slots of its static cache, "
                f"{fmt_gb(read)} per step, {read / self.bytes_per_step - 1:.1%} more.")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Floor":
        return cls(**data)


def floor_bandwidth(bandwidths) -> tuple[float, str]:
    """(GB/s, kind) the floor divides by: the larger measured bandwidth, since a floor is a lower bound."""
    if hasattr(bandwidths, "as_gbps"):
        bandwidths = bandwidths.as_gbps()
    if not isinstance(bandwidths, Mapping):
        raise ValueError(f"{BANDWIDTHS_HINT}; got {shown(bandwidths)}")
    if not bandwidths:
        raise ValueError(f"pass at least one measured bandwidth: {BANDWIDTHS_HINT}, e.g. "
                         "{'copy': 4200.0, 'read': 4300.0}")
    values = {}
    for kind, bw in bandwidths.items():  # every value checked, whatever the order of the keys
        if kind not in BANDWIDTH_KINDS:
            raise ValueError(f"{BANDWIDTHS_HINT}; got the key {shown(kind)}")
        values[kind] = positive_number(getattr(bw, "gbps", bw), f"bandwidths[{kind!r}]",
                                       f"{GBPS_HINT} (GB/s, measured, never looked up)")
    kind = max(values, key=values.get)
    return values[kind], kind


def decode_floor(shape, *, batch: int, prompt_tokens: int, bandwidths,
                 cache_tokens: int | None = None, dtype_bytes: int = 2) -> Floor:
    """The floor of one decode step after prompt_tokens, by the book's one policy."""
    visible = whole_number(prompt_tokens, "prompt_tokens", at_least=0) + 1
    gbps, kind = floor_bandwidth(bandwidths)
    moved = bytes_per_step(shape, batch, visible, dtype_bytes)
    if cache_tokens is not None:
        cache_tokens = whole_number(cache_tokens, "cache_tokens",
                                    hint="pass the static cache's slots per row, or None")
    return Floor(preset=getattr(shape, "name", "custom"), batch=int(batch), visible_tokens=visible,
                 bytes_per_step=moved, bandwidth_gbps=gbps, bandwidth_kind=kind,
                 floor_ms=floor_ms(moved, gbps), cache_tokens=cache_tokens,
                 kv_bytes_per_token=int(shape.kv_bytes_per_token(dtype_bytes)))


def floor_ms(bytes_moved: float, bandwidth_gbps: float) -> float:
    """Fastest possible time in ms to move bytes_moved at bandwidth_gbps (GB = 1e9 bytes)."""
    bytes_moved = nonnegative_number(bytes_moved, "bytes_moved", BYTES_HINT)
    bandwidth_gbps = positive_number(bandwidth_gbps, "bandwidth_gbps", GBPS_HINT)
    return bytes_moved / (bandwidth_gbps * BYTES_PER_GB) * 1e3


def achieved_gbps(bytes_moved: float, ms: float) -> float:
    """Bandwidth in GB/s that moving bytes_moved in ms milliseconds amounts to."""
    bytes_moved = nonnegative_number(bytes_moved, "bytes_moved", BYTES_HINT)
    ms = positive_number(ms, "ms", MS_HINT)
    return bytes_moved / (ms * 1e-3) / BYTES_PER_GB


def gap_ms(measured_ms: float, floor_ms: float) -> float:
    """Time in ms the measurement spends above the floor (negative if it beat the floor)."""
    measured_ms = nonnegative_number(measured_ms, "measured_ms", MS_HINT)
    floor = nonnegative_number(floor_ms, "floor_ms", FLOOR_HINT)
    return measured_ms - floor


def per_launch_us(gap_ms: float, launches: int) -> float:
    """Microseconds of the gap that fall to each launch: gap_ms / launches, in us."""
    gap = number(gap_ms, "gap_ms",
                 hint="pass measured_ms - floor_ms; a negative gap means the measurement beat the floor")
    launches = positive_number(
        launches, "launches",
        "pass the number of launches per step, e.g. count_launches(...).kernels or 28 * 10")
    return gap / launches * 1e3


def check_floor(measured_ms: float, floor_ms: float, *, what: str = "decode step",
                strict: bool = False) -> float:
    """Return measured_ms / floor_ms; warn (or raise when strict) if the measurement beats the floor."""
    measured_ms = nonnegative_number(measured_ms, "measured_ms", MS_HINT)
    floor = positive_number(floor_ms, "floor_ms", FLOOR_HINT)
    ratio = measured_ms / floor
    if is_below_floor(ratio):

        message = (
            f"{what}: measured {fmt_ms(measured_ms)} is below the roofline floor of "
            f"{fmt_ms(floor)} ({ratio:.2g}× the floor). The work cannot have happened in that "
            "time: look for a timer that does not wait for the device, work that was "
            "skipped, or a result that was cached."
        )
        if strict:
            raise BelowFloorError(message)
        warnings.warn(message, BelowFloorWarning, stacklevel=2)
    return ratio


def is_below_floor(ratio: float) -> bool:
    """True when a measured/floor ratio is below the floor beyond timer noise (BELOW_FLOOR_RATIO)."""
    return nonnegative_number(ratio, "ratio", "pass measured_ms / floor_ms") < BELOW_FLOOR_RATIO


def what_if_ms(step_ms: float, *, saved_ms: float, issue_ms: float | None = None) -> float:
    """Step time in ms once a fix removes saved_ms of device work: never below the host's issue time,
    never above step_ms."""
    step_ms = positive_number(step_ms, "step_ms", "pass a measured step time in ms")
    saved_ms = nonnegative_number(saved_ms, "saved_ms", "pass the ms the fix removes")
    remaining = max(step_ms - saved_ms, 0.0)
    if issue_ms is not None:
        issue_ms = nonnegative_number(issue_ms, "issue_ms", "pass time_with_issue(...).issue.median_ms")
        remaining = max(remaining, issue_ms)
    return min(remaining, step_ms)


DISPATCH_US = SEED_DISPATCH_US  # the laptop study's quoted dispatch cost: only where a run measured none
NEAR_FLOOR = 1.25  # a step within this multiple of its floor has hardly a gap to explain
BUSY_SHARE = 0.8  # a host or device busy for this share of the step sets its pace


def looks_like_dispatch(per_launch_us: float, versus: DispatchComparison | None = None) -> bool:
    """True when a gap per launch (µs) is what launches can fill: not beyond this host's measured cost per launch
    (versus: host.compare_dispatch), or, for a run that measured none, within the laptop study's quoted DISPATCH_US."""
    if versus is None:
        return per_launch_us <= DISPATCH_US[1]
    if versus.outcome == "cannot tell":
        return versus.comparison.ratio <= 1
    return versus.outcome != "larger"


def gap_verdict(*, eager_ms: float, floor_ms: float, launches: int,
                issue_ms: float | None = None, busy_ms: float | None = None,
                dispatch: DispatchComparison | None = None) -> str:
    """Which candidate explains the gap: "bytes" (no real gap), "dispatch" or "operators"."""
    eager_ms = positive_number(eager_ms, "eager_ms", MS_HINT)
    floor_ms = positive_number(floor_ms, "floor_ms", FLOOR_HINT)
    if issue_ms is not None:
        issue_ms = nonnegative_number(issue_ms, "issue_ms", MS_HINT)
    if busy_ms is not None:
        busy_ms = nonnegative_number(busy_ms, "busy_ms", MS_HINT)
    if eager_ms < NEAR_FLOOR * floor_ms:
        return "bytes"
    if issue_ms is not None and issue_ms >= BUSY_SHARE * eager_ms:
        return "dispatch"
    if busy_ms is not None and busy_ms >= BUSY_SHARE * eager_ms:
        return "operators"
    us = per_launch_us(gap_ms(eager_ms, floor_ms), launches)
    return "dispatch" if looks_like_dispatch(us, dispatch) else "operators"


def diagnose_gap(*, eager_ms: float, floor_ms: float, launches: int,
                 issue_ms: float | None = None, busy_ms: float | None = None,
                 dispatch: DispatchComparison | None = None) -> str:
    """A few sentences naming which candidate the numbers support: dispatch or slow work."""
    gap = gap_ms(eager_ms, floor_ms)
    us = per_launch_us(gap, launches)
    verdict = gap_verdict(eager_ms=eager_ms, floor_ms=floor_ms, launches=launches,
                          issue_ms=issue_ms, busy_ms=busy_ms, dispatch=dispatch)
    head = f"gap per launch: {fmt_ms(gap)} ÷ {launches:,} = {sig(us)} µs"
    lines = [f"{head}.", dispatch.says()] if dispatch is not None else [
        f"{head} (the laptop study quoted {DISPATCH_US[0]:.0f}-{DISPATCH_US[1]:.0f} µs for an eager dispatch; "
        "this run measured none of its own)."]
    if verdict == "bytes":
        lines.append(f"The step runs at {eager_ms / floor_ms:.2f}× the floor: there is hardly "
                     "a gap to explain. Verdict: on this machine the bytes set the pace and "
                     "the launches are cheap beside them.")
    elif verdict == "dispatch" and issue_ms is not None and issue_ms >= BUSY_SHARE * eager_ms:
        share = "as long as" if issue_ms >= eager_ms else f"{issue_ms / eager_ms:.0%} of"
        lines.append(f"The host needs {fmt_ms(issue_ms)} just to issue the step, {share} "
                     f"the {fmt_ms(eager_ms)} the step takes: the device waits for the CPU. "
                     "Verdict: the floor holds and the gap is dispatch.")
        if busy_ms is not None:
            lines.append(f"The device is busy for {fmt_ms(busy_ms)} of it, "
                         f"{busy_ms / floor_ms:.1f}× the floor: after the launches, "
                         "its own kernels are the next cost.")
    elif verdict == "dispatch" and dispatch is not None:
        lines.append("Verdict: the gap is consistent with launch overhead at this host's price.")
    elif verdict == "dispatch":
        lines.append("That is about what a dispatch costs. Verdict: the gap is consistent "
                     "with launch overhead, as in the laptop study.")
    else:
        lines.append(f"The operators are busy for {fmt_ms(busy_ms)} of the {fmt_ms(eager_ms)} step."
                     if busy_ms is not None else "That is more than a dispatch costs here.")
        lines.append("Launches cannot fill the gap. Verdict: the time is inside the operators "
                     "themselves, which run well below the streaming bandwidth.")
    return "\n".join(lines)


# ---- the fixed-cost model of a replayed step: the floor plus a price per kernel -------------

def overhead_us_per_kernel(busy_ms: float, floor_ms: float, kernels: int) -> float:
    """µs each kernel costs beyond its share of the bytes: (GPU busy − floor) ÷ kernels."""
    busy_ms = positive_number(busy_ms, "busy_ms", "pass the GPU busy time of one step")
    floor = nonnegative_number(floor_ms, "floor_ms", "pass the step's floor in ms")
    kernels = positive_number(kernels, "kernels", "pass the kernels in one step")
    return max(busy_ms - floor, 0.0) * 1e3 / kernels


def predicted_ms(floor_ms: float, kernels: int, overhead_us: float) -> float:
    """Step time in ms if each of `kernels` adds overhead_us beyond the floor's bytes."""
    floor = positive_number(floor_ms, "floor_ms", FLOOR_HINT)
    kernels = nonnegative_number(kernels, "kernels", "pass the kernels in one step")
    overhead_us = nonnegative_number(overhead_us, "overhead_us", OVERHEAD_HINT)
    return floor + kernels * overhead_us / 1e3


def crossover_gbps(bytes_per_step: int, kernels: int, overhead_us: float) -> float:
    """Bandwidth in GB/s at which the kernels' fixed cost equals the time to stream the bytes."""
    moved = positive_number(bytes_per_step, "bytes_per_step", BYTES_HINT)
    kernels = positive_number(kernels, "kernels", "pass the kernels in one step")
    overhead_us = positive_number(overhead_us, "overhead_us", OVERHEAD_HINT)
    return moved / (kernels * overhead_us * 1e-6) / BYTES_PER_GB


def kernels_per_layer_budget(floor_ms: float, target_multiple: float, overhead_us: float,
                             num_layers: int) -> float:
    """Most kernels per layer whose fixed cost keeps a step within target_multiple × the floor."""
    floor = positive_number(floor_ms, "floor_ms", FLOOR_HINT)
    target_multiple = number(target_multiple, "target_multiple", above=1.0,
                             hint="a step cannot be faster than its floor; pass e.g. 2.0 for 2× the floor")
    overhead_us = positive_number(overhead_us, "overhead_us", OVERHEAD_HINT)
    num_layers = whole_number(num_layers, "num_layers", hint="pass the model's layers, e.g. shape.num_layers")
    return (target_multiple - 1.0) * floor * 1e3 / overhead_us / num_layers
