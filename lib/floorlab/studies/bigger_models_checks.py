"""Studies wing: the challenge of the chapter "Bigger models": the size at which graph replay stops mattering, by
the CostModel fitted on one measured size; a noisy issue time makes the answer a band from its p10 to its p90."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from floorlab.core.checks import NOT_ATTEMPTED, checked, read_number, refusal
from floorlab.core.prose import fmt_gbps, sig
from floorlab.core.shapes import get_shape
from floorlab.core.timing import Timing
from floorlab.studies.bigger_models import times_text

NO_FIXED_COST = "the stream time without the kernels' fixed cost"  # a named wrong answer


@dataclass
class GraphsMatterAnswer:
    """Where graphs stop mattering on one card: the bytes per layer and the first shape there; wrong_gb: GB per layer
    of named mistakes; band: (GB, first shape) at a noisy issue's p10, p90."""
    threshold: float
    layer_bytes: float
    first_preset: str  # "none" when no shape in layer_bytes_by_preset gets there
    layer_bytes_by_preset: dict[str, int]
    wrong_gb: dict[str, float] = field(default_factory=dict)
    band: dict[str, tuple[float, str]] = field(default_factory=dict)


def graphs_matter_answer(model, presets, *, threshold: float, issue: Timing | None = None) -> GraphsMatterAnswer:
    """Bytes per layer at which eager falls under threshold × a replay, the first of presets (smallest first) whose
    bf16 layers are that large, and the same at a noisy issue's p10 and p90."""
    by_preset = {get_shape(p).name: get_shape(p).layer_param_count() * 2 for p in presets}

    def first(need: float) -> str:
        return next((name for name, size in by_preset.items() if size >= need), "none")

    need = model.layer_bytes(threshold)
    bare_gb = model.issue_ms_per_layer / threshold * model.bandwidth_gbps / 1e3
    band = {}
    if issue is not None and issue.noisy:
        layers = get_shape(model.preset).num_layers
        for end, ms in (("p10", issue.p10_ms), ("p90", issue.p90_ms)):
            at = replace(model, issue_ms_per_layer=ms / layers).layer_bytes(threshold)
            band[end] = (at / 1e9, first(at))
    return GraphsMatterAnswer(threshold, need, first(need), by_preset, {NO_FIXED_COST: bare_gb}, band)


@checked
def check_graphs_matter(my_layer_gb, my_first_preset, expected: GraphsMatterAnswer) -> str:
    """Verdict on the reader's bytes per layer (GB) and the first shape that reaches them."""
    if my_layer_gb is None or my_first_preset is None:
        return NOT_ATTEMPTED
    gb, want_gb = read_number(my_layer_gb, "my_layer_gb"), expected.layer_bytes / 1e9
    hint = (f"per layer, eager ÷ replay = issue time ÷ (stream time + kernels × µs per kernel). Set that to "
            f"{expected.threshold:g}, solve for the stream time, multiply by the bandwidth.")
    refused = refusal(gb, want_gb, rel=0.10, wrong=expected.wrong_gb, hint=hint, name="my_layer_gb")
    if abs(gb - want_gb) > 0.005 and refused:
        return refused
    if not isinstance(my_first_preset, str):
        return "not yet: my_first_preset is a preset's name in quotes, or 'none'."
    if my_first_preset.strip().lower() != expected.first_preset:
        return ("not yet: set each shape's GB per layer beside yours and write the first that reaches it, or 'none' "
                "if none does.")
    where = ("no Qwen3 shape here gets there" if expected.first_preset == "none"
             else f"{expected.first_preset} is the first shape there")
    return f"right: {sig(want_gb)} GB per layer, and {where}."


def answer_graphs_matter(model, expected: GraphsMatterAnswer, sizes) -> str:
    """The worked answer: the arithmetic, each shape's prediction, what the issue's spread does."""
    fixed_ms = model.fixed_ms_per_layer
    layers = get_shape(model.preset).num_layers
    stream_ms = model.stream_ms_per_layer(expected.threshold)
    lines = [
        f"Fitted on {model.preset}, {sizes.source.label}:",
        f"  issue time per layer  {sig(model.issue_ms_per_layer * layers)} ms ÷ {layers} = "
        f"{sig(model.issue_ms_per_layer)} ms{' (a noisy median: see below)' if expected.band else ''}",
        f"  fixed cost per layer  {sig(model.kernels_per_layer)} kernels × {sig(model.overhead_us)} µs = "
        f"{sig(fixed_ms)} ms",
        f"eager ÷ replay = {sig(model.issue_ms_per_layer)} ÷ (stream + {sig(fixed_ms)}) = {expected.threshold:g} "
        "when",
        f"  stream = {sig(model.issue_ms_per_layer)} ms ÷ {expected.threshold:g} − {sig(fixed_ms)} ms = "
        f"{sig(stream_ms)} ms per layer",
        f"  bytes  = {sig(stream_ms)} ms × {fmt_gbps(model.bandwidth_gbps)} = {sig(expected.layer_bytes / 1e9)} GB "
        "per layer",
        "",
        f"{'preset':<11}{'GB per layer':>14}{'eager ÷ replay, predicted':>27}{'measured':>12}",
        "(predicted for a layer of that size by the rule above; measured for the whole step)",
    ]
    for name, size in expected.layer_bytes_by_preset.items():
        measured = times_text(sizes.speedup_band(name), sizes.speedup(name)) if name in sizes.presets else "-"
        lines.append(f"{name:<11}{sig(size / 1e9):>14}{sig(model.layer_speedup(size)):>26}×{measured:>12}")
    lines.append("")
    firsts = {expected.first_preset} | {first for _, first in expected.band.values()}
    if expected.band:
        (lo_gb, lo_first), (hi_gb, hi_first) = expected.band["p10"], expected.band["p90"]
        lines.append(f"The issue time is noisy, so the answer is a band: {sig(lo_gb)} GB per layer at its p10 (first "
                     f"shape: {lo_first}), {sig(hi_gb)} GB at its p90 (first shape: {hi_first}).")
    if len(firsts) > 1:
        lines.append("Across that band the first shape changes: this run cannot say where.")
    elif expected.first_preset == "none":
        lines.append(f"No shape of the family gets there: under this model, on this card at batch 1, a replay stays "
                     f"more than {expected.threshold:g}× as fast as eager at every size, for the model charges the "
                     "host per layer.")
    else:
        lines.append(f"From {expected.first_preset} on, under this model, a layer streams for long enough that "
                     f"eager comes within {expected.threshold:g}× of a replay.")
    verdict = sizes.verdict(model.preset)
    if verdict != "dispatch":
        lines.append(f"Note: roofline.gap_verdict calls {model.preset}'s eager gap '{verdict}', not dispatch, so the "
                     "host's issue time is not what sets the eager step here, and the prediction above leans on it.")
    return "\n".join(lines)
