"""Studies wing: the first chapter's first three challenges, each refusing plausible slips by name,
and the sentence that sets the profiled step against the timed one."""
from __future__ import annotations

from dataclasses import dataclass, field

from floorlab.core.checks import (
    NOT_ATTEMPTED,
    Verdict,
    checked,
    close,
    judge,
    plausible_wrongs,
    read_bool,
    read_number,
    refusal,
)
from floorlab.core.prose import fmt_ms, sig
from floorlab.core.roofline import DISPATCH_US, floor_ms, per_launch_us
from floorlab.core.timelines import Timeline
from floorlab.core.timing import Timing, compare
from floorlab.engine.buckets import bucket_for

OPS_TOLERANCE = 0.15  # an op count within 15% of the profiler's counts as the same count


def whole_table_bytes(shape, batch: int, visible_tokens: int) -> int:
    """Bytes a bf16 step would read counting its untied input table whole (the slip), not only its rows."""
    return shape.weight_bytes() + int(batch) * int(visible_tokens) * shape.kv_bytes_per_token()


def other_bandwidth(bandwidths) -> tuple[str, float]:
    """(kind, GB/s) of the measured bandwidth the floor does not divide by."""
    kind = "read" if bandwidths.floor_kind == "copy" else "copy"
    return kind, bandwidths.as_gbps()[kind]


def profiled_against_timed(timeline: Timeline, timed: Timing) -> str:
    """Whether the profiled step came out longer or shorter than the timed ones, beyond their spread."""
    profiled_ms = timeline.profiled_ms
    if profiled_ms <= 0:
        return f"The profiler recorded no {timeline.label} step to set against the timed one."
    head = (f"The profiled {timeline.label} step took {fmt_ms(profiled_ms)}, against a timed "
            f"median of {fmt_ms(timed.median_ms)} ({{ratio}})")
    band = f"{sig(timed.p10_ms)}-{sig(timed.p90_ms)} ms"
    return compare(Timing.from_samples([profiled_ms]), timed).verdict(
        f"{head}: longer, beyond the timed steps' p10-p90 band ({band}). The likeliest cost is the "
        "profiler's own, recording every call.",
        f"{head}: shorter, below even the timed steps' p10-p90 band ({band}). A profiler cannot "
        "make work faster, so it was the timed steps that ran slow: the machine was busier while "
        "they were timed than during the one step drawn.",
        f"{head}, inside the timed steps' own p10-p90 band ({band}). The difference is within the "
        "spread, so this run cannot tell the profiler's cost from the machine's own variation.")


# Challenge 1: count the ops of a real layer and redo the division.

@checked
def check_ops_per_layer(ops_per_layer, my_per_launch_us, my_is_dispatch, *, gap_ms: float,
                        num_layers: int, counted_per_layer: float, dispatch: bool,
                        eager_ms: float | None = None, host_us: float | None = None) -> str:
    """Verdict on the op count per layer, the per-launch division and the dispatch verdict (this run's
    gap_verdict); eager_ms names one slip, host_us is this host's µs per tiny launch."""
    if ops_per_layer is None or my_per_launch_us is None or my_is_dispatch is None:
        return NOT_ATTEMPTED
    ops = read_number(ops_per_layer, "my_ops_per_layer")
    if not close(ops, counted_per_layer, OPS_TOLERANCE):
        return (f"not yet: {ops:g} ops per layer is not what one layer of this model runs; count every kernel in the "
                "profiler's list above (norms, RoPE, cache writes and copies included) and divide by the layers.")
    launches = ops * num_layers
    expected_us = per_launch_us(gap_ms, launches)
    wrong = plausible_wrongs(expected_us, {
        "the whole step instead of the gap above the floor":
            None if eager_ms is None else per_launch_us(eager_ms, launches),
        "the laptop study's 280 launches instead of your own count": per_launch_us(gap_ms, 280),
        "one layer's ops instead of the whole step's (ops per layer not times the layers)":
            per_launch_us(gap_ms, ops),
    })
    hint = (f"with {ops:g} ops per layer the gap of {gap_ms:.2f} ms is spread over "
            f"{ops:g} × {num_layers} = {launches:g} launches.")
    if refused := refusal(read_number(my_per_launch_us, "my_per_launch_us"), expected_us, rel=0.05,
                          wrong=wrong, hint=hint, name="my_per_launch_us"):
        return refused
    if read_bool(my_is_dispatch, "my_gap_is_dispatch") != dispatch:
        return (f"not yet: compare {expected_us:.1f} µs with {_dispatch_cost(host_us)}, and with "
                "the issue and busy times above, and decide again.")
    what = "dispatch" if dispatch else "more than dispatch can explain"
    return f"right: {expected_us:.1f} µs per launch over {launches:g} launches, {what}."


def _dispatch_cost(host_us: float | None) -> str:
    """What a launch costs: this host's measured price, or the laptop study's lead."""
    if host_us is not None:
        return f"the {sig(host_us)} µs this host was measured to pay per tiny launch"
    return f"the {DISPATCH_US[0]:.0f}-{DISPATCH_US[1]:.0f} µs the laptop study quoted for an eager dispatch"


def answer_ops_per_layer(*, gap_ms: float, num_layers: int, counted_per_layer: float,
                         issue_ms: float | None, eager_ms: float, dispatch: bool,
                         host_us: float | None = None, counted: str = "kernels") -> str:
    """The worked answer to challenge 1, from the measured counts (counted: "kernels" on a GPU, "operators" on a
    CPU, each launched by the host) and this run's verdict."""
    launches = round(counted_per_layer * num_layers)
    us = per_launch_us(gap_ms, launches)
    verdict = ("the host busy issuing for most of the step, the gap is dispatch "
               "(my_gap_is_dispatch = True)." if dispatch else
               "the operators busy for most of the step, something besides dispatch is in the gap: "
               "operators that run below streaming bandwidth (my_gap_is_dispatch = False).")
    lines = [f"The profiler counted {sig(counted_per_layer)} {counted} per layer, "
             f"{launches:,} per step over {num_layers} layers.",
             f"gap ÷ launches = {fmt_ms(gap_ms)} ÷ {launches:,} = {sig(us)} µs per launch.",
             f"Set beside {_dispatch_cost(host_us)}, and with {verdict}"]
    if issue_ms is not None:
        lines.append(f"Cross-check: the host needed {fmt_ms(issue_ms)} to issue one step, "
                     f"against {fmt_ms(eager_ms)} for the whole step.")
    return "\n".join(lines)


# Challenge 2: padding cost at batch 5 with graphs at 1, 2, 4, 8, as the runner pads.

@dataclass
class PaddingAnswer:
    """Padding as GraphRunner pads, the cache length at which its reads cost what the graph saves,
    and the lengths plausible slips give (wrong)."""
    batch: int
    bucket: int
    padded_rows: int
    cache_tokens: int
    padded_bytes_per_step: int
    padded_ms: float
    launch_saving_ms: float
    breakeven_cache_tokens: int
    wrong: dict[str, float] = field(default_factory=dict)


def padding_answer(*, batch: int, buckets, kv_bytes_per_token: int, cache_tokens: int,
                   bandwidth_gbps: float, launch_saving_ms: float,
                   other_bandwidth: tuple[str, float] | None = None,
                   eager_ms: float | None = None) -> PaddingAnswer:
    """Padded rows for batch and their break-even cache length; other_bandwidth and eager_ms name slips."""
    bucket = bucket_for(batch, buckets)
    if bucket is None:
        raise ValueError(f"batch {batch} is above the largest bucket {max(buckets)}; "
                         "pick a batch no larger than the largest bucket.")
    rows = bucket - batch

    def breakeven(saving_ms: float, rows_: int, gbps: float = bandwidth_gbps) -> float:
        return saving_ms / floor_ms(rows_ * kv_bytes_per_token, gbps)

    padded_bytes = rows * kv_bytes_per_token * cache_tokens
    answer = PaddingAnswer(batch, bucket, rows, cache_tokens, padded_bytes, floor_ms(padded_bytes, bandwidth_gbps),
                           launch_saving_ms, int(breakeven(launch_saving_ms, rows)) if rows else 0)
    if rows:
        wrong = {"every row of the bucket instead of the padded ones": breakeven(launch_saving_ms, bucket),
                 "the batch's own rows instead of the padded ones": breakeven(launch_saving_ms, batch),
                 "the whole eager step instead of what the graph saves":
                     None if eager_ms is None else breakeven(eager_ms, rows)}
        if other_bandwidth is not None:
            kind, other_gbps = other_bandwidth
            wrong[f"the {kind} bandwidth instead of the one printed"] = breakeven(launch_saving_ms, rows,
                                                                                  other_gbps)
        answer.wrong = plausible_wrongs(answer.breakeven_cache_tokens, wrong)
    return answer


@checked
def check_padding(padded_rows, breakeven_cache_tokens, expected: PaddingAnswer) -> str:
    """Verdict on the padded-row count and the break-even cache length (slips refused by name)."""
    if padded_rows is None or breakeven_cache_tokens is None:
        return NOT_ATTEMPTED
    if read_number(padded_rows, "my_padded_rows") != expected.padded_rows:
        return (f"not yet: batch {expected.batch} pads up to bucket {expected.bucket}; how many rows are padding?")
    hint = ("each padded row reads every slot of its KV-cache row; find the cache length at "
            "which those reads take as long as the launches the graph saves.")
    if refused := refusal(read_number(breakeven_cache_tokens, "my_breakeven_cache_tokens"),
                          expected.breakeven_cache_tokens, rel=0.10, wrong=expected.wrong, hint=hint,
                          name="my_breakeven_cache_tokens", what="length"):
        return refused
    return (f"right: {expected.padded_rows} padded rows; padding costs more than the graph "
            f"saves once the static cache holds about {expected.breakeven_cache_tokens:,} tokens.")


# Challenge 3: the floor and the gap for a 7B-class shape on the same card.

@dataclass
class ScaleAnswer:
    """Floor, per-op gap and the gap's share of a token for a larger shape, and what slips give."""
    name: str
    bytes_per_step: int
    floor_ms: float
    launches: int
    gap_ms: float
    launch_fraction: float
    dispatch: bool
    wrong_floors: dict[str, float] = field(default_factory=dict)
    wrong_fractions: dict[str, float] = field(default_factory=dict)


def scale_answer(*, name: str, bytes_per_step: int, bandwidth_gbps: float,
                 num_layers: int, kernels_per_layer: float, per_launch_us: float,
                 dispatch: bool, whole_table_bytes: int | None = None,
                 other_bandwidth: tuple[str, float] | None = None,
                 small_num_layers: int | None = None) -> ScaleAnswer:
    """Floor and per-op gap of a shape whose op count scales with its layers; optional inputs name slips."""
    launches = round(kernels_per_layer * num_layers)
    floor = floor_ms(bytes_per_step, bandwidth_gbps)
    gap = launches * per_launch_us / 1000.0
    fraction = gap / (floor + gap)
    floors = {"the whole input table instead of the rows a step gathers":
              None if whole_table_bytes is None else floor_ms(whole_table_bytes, bandwidth_gbps)}
    if other_bandwidth is not None:
        floors[f"the {other_bandwidth[0]} bandwidth instead of the one printed"] = floor_ms(
            bytes_per_step, other_bandwidth[1])
    small_gap = (None if small_num_layers is None
                 else round(kernels_per_layer * small_num_layers) * per_launch_us / 1000.0)
    fractions = {
        "the small model's gap, not scaled to this shape's layers":
            None if small_gap is None else small_gap / (floor + small_gap),
        "gap ÷ floor instead of gap ÷ (floor + gap)": gap / floor,
        "the floor's share of the token instead of the gap's": floor / (floor + gap),
    }
    return ScaleAnswer(name, bytes_per_step, floor, launches, gap, fraction, dispatch,
                       plausible_wrongs(floor, floors), plausible_wrongs(fraction, fractions))


@checked
def check_scale(my_floor_ms, my_launch_fraction, expected: ScaleAnswer) -> str:
    """Verdict on the floor and the gap's share of a token for the larger shape."""
    if my_floor_ms is None or my_launch_fraction is None:
        return NOT_ATTEMPTED
    floor_hint = (f"the floor is the bytes {expected.name} streams per step (an untied input "
                  "table only in the rows it gathers) over this card's bandwidth.")
    if refused := refusal(read_number(my_floor_ms, "my_big_floor_ms"), expected.floor_ms, rel=0.05,
                          wrong=expected.wrong_floors, hint=floor_hint, name="my_big_floor_ms",
                          what="floor"):
        return refused
    fraction_hint = ("the per-op cost grows with the layer count, not with the bytes; the "
                     "fraction is gap ÷ (floor + gap).")
    raw = read_number(my_launch_fraction, "my_big_launch_fraction")
    judged = dict(rel=0.10, wrong=expected.wrong_fractions)
    if (judge(raw, expected.launch_fraction, **judged)[0] is Verdict.FAR
            and close(raw / 100, expected.launch_fraction, 0.10)):
        return (f"not yet: my_big_launch_fraction = {my_launch_fraction!r} looks like a percent; "
                f"write it as a fraction between 0 and 1 ({sig(raw / 100)}).")
    if refused := refusal(raw, expected.launch_fraction, **judged, hint=fraction_hint,
                          name="my_big_launch_fraction", what="share"):
        return refused
    return (f"right: {sig(expected.floor_ms)} ms floor; the per-op gap is "
            f"{expected.launch_fraction:.0%} of the token.")


def answer_scale(small_name: str, small_fraction: float, big: ScaleAnswer, *,
                 small_bytes: int, layer_ratio: float, replay_removed: float | None = None) -> str:
    """The worked answer to challenge 3, conditioned on whether this run's gap is dispatch; replay_removed: the
    share of this run's eager gap that its graph replay took away (None: no replay on this machine)."""
    kept = ("" if replay_removed is None else
            f" The replay above took {replay_removed:.0%} of this token's gap away; what it keeps is each kernel's "
            "own price beyond its bytes.")
    lines = [f"{small_name}: the per-op gap is {small_fraction:.0%} of the token.",
             f"{big.name}: floor {sig(big.floor_ms)} ms, gap {sig(big.gap_ms)} ms over "
             f"{big.launches} ops, {big.launch_fraction:.0%} of the token.",
             f"The bytes grow {sig(big.bytes_per_step / small_bytes)}×, the ops only "
             f"{sig(layer_ratio)}×, so the fixed per-op cost is a smaller share of a big model.",
             "Here that cost is dispatch, which graphs remove: small models at small batch, the "
             "interactive end of serving, gain most from them." + kept if big.dispatch else
             "On this machine, though, the per-op cost is not dispatch: the operators themselves run below the "
             "streaming bandwidth, and a slow operator grows with the bytes it moves, so this fixed-cost estimate "
             "understates the 8B gap. Graphs would not remove it; faster operators would."]
    return "\n".join(lines)
