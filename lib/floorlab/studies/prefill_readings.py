"""Studies wing: what the prefill chapter's runs say, each sentence chosen by timing.compare (one way, the other,
"this run cannot tell"); a line that does not rise with the context says so, never printing a negative price."""
from __future__ import annotations

import math
from dataclasses import dataclass

from floorlab.core.intensity import line_fit
from floorlab.core.prose import fmt_gbps, fmt_times, sig
from floorlab.core.timing import Band, Comparison, band_of, compare, ratio_band

AGREE = 0.1  # two predictions' ratios within this share of each other count as agreeing
NEARER = 2.0  # one prediction is nearer the observed knee when the other is this many times further (log scale)


@dataclass(frozen=True)
class ContextCost:
    """A decode step's median time against its context as fixed_ms + per_token_us × n, the cache's rate (None when the
    line does not rise), its largest miss (a share), and compare(longest, shortest) as `change`."""
    fixed_ms: float
    per_token_us: float
    cache_gbps: float | None
    worst_fit: float
    change: Comparison

    @property
    def apart(self) -> bool:
        """True when the longest and the shortest context's steps differ beyond their spreads."""
        return self.change.meaningful

    @property
    def rises(self) -> Comparison:
        """The price of a token of context against none."""
        return compare(Band.exact(self.per_token_us), Band.exact(0.0))


def context_cost(points) -> ContextCost:
    """The least-squares line through the median step times of prefill.ContextPoints (two or more)."""
    fixed, per_token_ms, worst = line_fit([p.context_tokens for p in points], [p.row.median_ms for p in points])
    kv = points[0].floor.kv_bytes_per_token
    cache_gbps = kv / per_token_ms / 1e6 if per_token_ms > 0 else None
    return ContextCost(fixed, per_token_ms * 1e3, cache_gbps, worst, compare(points[-1].row, points[0].row))


def context_lines(points, bandwidth_gbps: float) -> tuple[ContextCost, list[str]]:
    """The line through the steps, and the lines that print it as arithmetic."""
    cost = context_cost(points)
    lines = [cost.rises.verdict(
        f"  a line through them: {sig(cost.fixed_ms)} ms + {sig(abs(cost.per_token_us))} µs × "
        f"context, its largest miss {cost.worst_fit:.0%}",
        "  a line through them does not rise with the context: the longer contexts ran no "
        f"slower, so this run prices no token of context (the steps lie about "
        f"{sig(cost.fixed_ms)} ms, the largest miss {cost.worst_fit:.0%})",
        f"  a line through them is flat: {sig(cost.fixed_ms)} ms whatever the context")]
    lines.append(cost.change.verdict(
        "", "  (the longest context ran faster, beyond the spreads: the machine's load changed, "
        "so the line measures the load)",
        "  (the ends differ by less than their spreads, so the line says little)"))
    if cost.cache_gbps is not None:
        lines.append(f"  a token of context: {points[0].floor.kv_bytes_per_token:,} B in "
                     f"{sig(cost.per_token_us)} µs = {fmt_gbps(cost.cache_gbps)}, "
                     f"{cost.cache_gbps / bandwidth_gbps:.0%} of the bandwidth")
    return cost, [line for line in lines if line]


def context_reading(points, cost: ContextCost | None, bandwidth_gbps: float, where: str) -> str:
    """What a run's steps at several contexts say, as one or two sentences."""
    if cost is None:
        return f"{where}, only one context fitted, so there is no line to draw."
    a, b = points[0], points[-1]
    no_rise = "A line through the steps does not rise, so this run sees no cost per token of context."
    price = cost.rises.verdict(
        f"Each token of context adds {sig(cost.per_token_us)} µs, which reads its cache at "
        f"{fmt_gbps(cost.cache_gbps or 1.0)}, {(cost.cache_gbps or 0.0) / bandwidth_gbps:.0%} of "
        "the bandwidth the floor assumes.", no_rise, no_rise)
    multiple = [ratio_band(p.row, Band.exact(p.floor.floor_ms)) for p in (b, a)]
    further = compare(*multiple).verdict(
        "a longer context takes the step further from its floor.",
        "a longer context takes the step closer to its floor.",
        "within the spreads, the same distance from its floor.")
    return cost.change.verdict(
        f"{where}, the multiple of the floor goes from {fmt_times(a.row.x_floor)} at "
        f"{a.context_tokens:,} tokens to {fmt_times(b.row.x_floor)} at {b.context_tokens:,}: "
        f"{further} {price}",
        f"{where}, the step at {b.context_tokens:,} tokens ran faster than at {a.context_tokens:,}, "
        "beyond the spreads, though it reads more cache: the machine's load changed between the "
        "timings, so this run cannot price a token of context.",
        f"{where}, the steps at {a.context_tokens:,} and {b.context_tokens:,} tokens differ by less "
        "than their spreads, so they cannot say how the step changes with the context.")


def cache_verdict(evidence: list[tuple[ContextCost | None, float | None, str]]) -> str:
    """Whether the cache reads far below the floor's bandwidth, from the first (cost, bandwidth, where) whose line
    rises and whose longest context was slower beyond the spreads; '' when none."""
    found = next(((c, bw, w) for c, bw, w in evidence if c is not None and bw
                  and c.change.outcome == "more" and c.cache_gbps is not None), None)
    if found is None:
        return ""
    cost, bandwidth_gbps, where = found
    if cost.cache_gbps >= 0.5 * bandwidth_gbps:
        return (f"So on {where} the cache reads at {cost.cache_gbps / bandwidth_gbps:.0%} of the "
                "bandwidth the floor assumes: a token of context costs about its bytes.")
    return (f"So on {where} the cache costs this engine far more time than its bytes: a token of "
            f"context takes {fmt_times(bandwidth_gbps / cost.cache_gbps)} as long to read as its "
            "share of the floor allows, and that adds up with every token. Why the cache reads so "
            "slowly, these timings alone do not say; a profile of the step at a long context would.")


def token_cost_reading(decode, longest) -> str:
    """A decode token against one token of the longest prefill (its time over its prompt), by spreads."""
    whole, n = band_of(longest), longest.prompt_tokens
    per_token = Band(whole.median / n, whole.low / n, whole.high / n)
    return compare(decode, per_token).verdict(
        f"A decode token costs {{ratio}} as much as a token of the {n:,}-token prefill, beyond "
        "both spreads: the prefill reads the weights once for all its tokens.",
        f"This run measured a token of the {n:,}-token prefill dearer than a decode token, beyond "
        "both spreads. The weights are read once for the whole prompt, so that should not happen; "
        "a machine busy with other work can do it. Run the sweep again before reading more into it.",
        f"A decode token and a token of the {n:,}-token prefill differ by less than their spreads, "
        "so this run cannot tell which costs more. A machine busy with other work blurs them; "
        "run the sweep again.")


def converge_reading(eager, graphed, where: str) -> str:
    """Eager prefill against its replay at the sweep's shortest and longest prompts."""
    if not eager or not graphed:
        return ""
    one = f"an eager prefill of {eager[0].prompt_tokens} token"
    short = compare(eager[0], graphed[0]).verdict(
        f"{one} takes {{ratio}} as long as its replay", f"{one} takes only {{ratio}} as long as its replay",
        f"{one} and its replay differ by less than their spreads")
    long = compare(eager[-1], graphed[-1]).verdict(
        "it takes {ratio} as long.", "it takes only {ratio} as long.",
        "the two differ by less than their spreads.")
    return f"{where}, {short}; at {eager[-1].prompt_tokens:,} tokens {long}"


def share_text(share: float) -> str:
    """A share of the FLOPs as a sentence prints it: a whole percent, or 'under 1%' for a smaller one."""
    return f"{share:.0%}" if share >= 0.005 else "under 1%"


def attention_moves_knee(ratios: dict, knees) -> bool:
    """True when leaving attention out moves the fixed-cost prediction by AGREE or more of it."""
    return abs(ratios["straight_tokens"] / knees.fixed_cost_tokens - 1) >= AGREE


def knee_reading(ratios: dict, knees) -> tuple[str, str]:
    """(agreement, attention): whether the matrix products alone predict the fixed-cost knee to within AGREE, and
    whether attention moves that prediction at all."""
    at_fixed = share_text(ratios["at_fixed"])
    if not attention_moves_knee(ratios, knees):
        agreement = "close to" if abs(ratios["straight"] / ratios["step"] - 1) < AGREE else "still far from"
        return agreement, (
            f"Attention moves nothing here: at {knees.fixed_cost_tokens:,} tokens it is {at_fixed} of a "
            "prefill's FLOPs, so the matrix products alone make the prediction.")
    if abs(ratios["straight"] / ratios["step"] - 1) < AGREE:
        return "close to", (
            "Attention makes the difference. Its FLOPs grow with the square of the prompt, from "
            f"{share_text(ratios['at_roof'])} of a prefill's at {knees.roofline_tokens:,} tokens to "
            f"{at_fixed} at {knees.fixed_cost_tokens:,}, so the arithmetic overtakes a large fixed cost "
            "sooner than a straight line would.")
    return "still far from", (
        f"So on this machine more than attention parts them: at {knees.fixed_cost_tokens:,} "
        f"tokens attention is {at_fixed} of a prefill's FLOPs, and predictions this "
        "short also round to whole tokens.")


def without_attention_answer(ratios: dict, knees) -> str:
    """What leaving attention out does to challenge 3's answer: too many tokens, or the same prompt."""
    if attention_moves_knee(ratios, knees):
        return (f"{ratios['straight_tokens']:,.0f} tokens, too many: at {knees.fixed_cost_tokens:,} tokens "
                f"attention is already {share_text(ratios['at_fixed'])} of the FLOPs.")
    return (f"{ratios['straight_tokens']:,.0f} tokens, about the same prompt: at {knees.fixed_cost_tokens:,} "
            f"tokens attention is {share_text(ratios['at_fixed'])} of the FLOPs, too little to move the answer.")


def nearer_reading(knees) -> str:
    """Which prediction the observed knee sits nearer, on a log scale: the roofline's, the fixed cost's, or neither
    by a factor of NEARER (or no knee observed)."""
    if knees.observed_tokens is None:
        return ("Here the time per token still fell at the longest prompt timed, so this run cannot say which "
                "prediction it sits nearer.")
    roof, fixed = (abs(math.log(knees.observed_tokens / t)) for t in (knees.roofline_tokens, knees.fixed_cost_tokens))
    if roof * NEARER <= fixed:
        return ("Here it sits nearer the roofline's: the prompt's own arithmetic takes over sooner than the "
                "shortest prompt's fixed cost would let it.")
    if fixed * NEARER <= roof:
        return ("Here it sits nearer the fixed cost's: a short prefill is mostly the fixed cost of its launches, and "
                "the arithmetic must grow to match it.")
    return ("Here it sits between them, nearer neither by a factor of two on a scale of ratios, so this run cannot "
            "say which it follows.")
