"""Every chapter's claim-making code, run against a family of runs (tests/run_family.py).

For each chapter, a function builds the text its study writes from one run: the sentences
about how measured numbers relate, and the tables and lines printed beside them. Each member
of the family must give text without inf or nan, without a number over three significant
figures, and without a comparative word that no timing.compare verdict chose. Perturbed and
simulated members are test inputs, named "simulated ...", never shown to a reader.
The planted tests at the end show that each check can fail.
"""
from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from floorlab.core.plan import CardFacts, plan_for
from floorlab.core.reference import reference_run
from floorlab.core.runs import Run
from floorlab.core.shapes import get_shape
from floorlab.core.timing import Band, compare, recorded_verdicts
from floorlab.engine.measure import Replay, Source
from floorlab.studies import (
    bigger_models,
    bigger_models_readings,
    fast_card,
    gallery,
    kernels,
    kernels_readings,
    prefill,
    prefill_readings,
    serving,
    serving_stream,
    serving_trap,
    two_cards,
    two_cards_readings,
)
from floorlab.studies.below_the_floor import profiled_against_timed
from floorlab.studies.gallery_cards import card_from_run
from run_family import RUNS, Member, family, is_eager, problems, scaled, tight, widened

BENCH = reference_run("h200-bench")


# ---- each chapter's claim code, from a run ---------------------------------------------------

def replay_text(run: Run) -> str:
    """below-the-floor and shared-buffers: the replay against eager, and the profiled step."""
    replay = Replay(Source(here=False, run=run), run.floor(), run.row("eager"), run.row("graph replay"),
                    run.timelines["graph replay"])
    text = [replay.summary(), replay.said()]
    for path, timeline in run.timelines.items():
        row = run.find(path)
        if row is not None:
            text.append(profiled_against_timed(timeline, row.timing))
    return "\n".join(text)


def bigger_models_text(run: Run) -> str:
    sizes = bigger_models.Sizes(run, Source(here=False, run=run), batch=run.settings.batch or 1)
    text = bigger_models.format_sizes(sizes)
    if all(sizes.graph(p) for p in sizes.presets):
        text += "\n" + bigger_models_readings.read_sizes(sizes, BENCH).text()
    return text + "\n" + bigger_models_readings.paths_reading(BENCH)


def fast_card_text(run: Run) -> str:
    differences = fast_card.bench_against_chapter(BENCH, run, preset="qwen3-0.6b", batch=1)
    return "\n".join([fast_card.differences_table(differences)] + [d.says() for d in differences]
                     + fast_card.noisy_rows(BENCH, batch=1) + [replay_text(run)]
                     + [fast_card.steadier_sentence(
                         fast_card.stored_spread(fast_card.EAGER_PATHS, preset="qwen3-0.6b", batch=1),
                         fast_card.stored_spread(fast_card.GRAPH_PATHS, preset="qwen3-0.6b", batch=1))])


def gallery_text(run: Run) -> str:
    cards = [card_from_run(run), card_from_run(reference_run("h200-below-the-floor"), origin="stored")]
    return "\n".join(gallery.claims(cards) + [gallery.format_paths(c) for c in cards]
                     + [gallery.eager_span(cards), gallery.replay_gain(cards), gallery.floor_span(cards)])


def kernels_text(run: Run) -> str:
    own, no_pdl, plain = (run.row(p) for p in ("triton replay", "triton replay, no PDL", "graph replay"))
    return "\n".join([compare(no_pdl, own).says("The replay without PDL", "the one with it"),
                      kernels.noise_notes({"with PDL": own, "without PDL": no_pdl}),
                      kernels_readings_text(run, own, plain)])


def kernels_readings_text(run: Run, own, plain) -> str:
    floor_ms, layers = run.floor().floor_ms, get_shape(own.preset).num_layers
    band = kernels_readings.beyond_band(own, floor_ms, layers)
    published = {a.label: a.beyond_us_per_layer(run.floor().bandwidth_gbps) for a in kernels.ANCHORS}
    return "\n".join([kernels_readings.against_published(band, published),
                      kernels_readings.against_plain(own, plain),
                      kernels_readings.distance_share(band.median / 2, layers, own, floor_ms),
                      kernels_readings.share_of_card(100.0, run.floor().bandwidth_gbps) + " the card's",
                      kernels_readings.whole_step_against_budget(band, band.median)])


def prefill_text(run: Run) -> str:
    points, gbps = prefill.stored_contexts(run), run.bandwidths.floor_gbps
    text = [prefill.format_contexts(points)]
    if len({p.context_tokens for p in points}) > 1:
        cost, lines = prefill_readings.context_lines(points, gbps)
        text += lines + [prefill_readings.context_reading(points, cost, gbps, "Here"),
                         prefill_readings.cache_verdict([(cost, gbps, "this run")])]
    text.append(prefill_readings.converge_reading(prefill.stored_sweep(run, "eager"),
                                                  prefill.stored_sweep(run, "graph replay"), "There"))
    return "\n".join(text)


def serving_text(run: Run) -> str:
    card = serving.GraphSide.from_run(run)
    top = max(card.graph)
    text = [serving.speedup_lines(card.eager, card.graph),
            serving.speedup_sentence(card.eager, card.graph, (1, top)),
            serving.every_bucket_sentence(card.eager, card.graph), serving.slope_note(card.graph)]
    if card.stream is not None:
        row_ms = serving.ms_per_row(card.graph)
        text += [card.stream.summary(row_ms), serving_stream.pricing_sentence(card.stream, row_ms),
                 serving_stream.padding_against_fallbacks(card.stream, row_ms, "There")]
    if card.memory is not None:
        text.append(serving.pool_sentence(card.memory))
    padded = run.find("graph, padded")
    if padded is not None and padded.batch in card.graph:
        text.append(serving_trap.guard_cost_sentence(padded, card.graph[padded.batch]))
    return "\n".join(text)


def two_cards_text(run: Run) -> str:
    tc = two_cards.TwoCards(run)
    text = []
    for preset in tc.presets:
        text += [tc.says(preset), two_cards.memory_says(tc, preset), two_cards.threads_says(tc, preset)]
        text += two_cards.timeline_lines(tc, preset)
    text.append(two_cards_readings.crossover_reading(tc, here=True).text())
    text.append(two_cards.format_checked(two_cards.checked_against(tc, tc.model(shared=True))))
    return "\n".join(text)


# ---- the family of each chapter ----------------------------------------------------------------

def _set_timing(run: Run, path: str, value_ms: float, **where) -> Run:
    """A copy of run whose row `path` (at preset/batch where given) has a steady timing of value_ms."""
    out = copy.deepcopy(run)
    row = out.row(path, **where)
    row.x_floor, row.timing = row.x_floor * value_ms / row.median_ms, tight(value_ms)
    return out


def _bigger_models_family() -> list[Member]:
    members = family("h200-bigger-models", cpu="cpu-bigger-models")
    run = reference_run("h200-bigger-models")
    sizes = bigger_models.Sizes(run, Source(here=False, run=run))
    first, last = sizes.presets[0], sizes.presets[-1]
    quiet = _set_timing(_set_timing(run, "eager", 5 * sizes.graph(first).median_ms, preset=first),
                        "eager", 12 * sizes.graph(last).median_ms, preset=last)
    members.append(Member("simulated: the advantage grows with size, bands apart", quiet))
    shrink = _set_timing(_set_timing(run, "eager", 9 * sizes.graph(first).median_ms, preset=first),
                         "eager", 2 * sizes.graph(last).median_ms, preset=last)
    members.append(Member("simulated: the advantage shrinks with size, bands apart", shrink))
    return members


def _prefill_family() -> list[Member]:
    members = family("h200-prefill", cpu="cpu-prefill")
    run = reference_run("h200-prefill")
    data = run.to_dict()
    contexts = data["facts"]["contexts"]
    last_ms = contexts[-1]["row"]["timing"]["median_ms"]
    for i, point in enumerate(contexts):  # the shortest context costs the most, the longest the least
        point["row"]["timing"] = tight(last_ms * (1.5 - 0.5 * i / (len(contexts) - 1))).to_dict()
    sweep = [p for p in data["facts"]["prefill"] if p["path"] == "eager"]
    sweep[0]["timing"] = tight(sweep[-1]["timing"]["median_ms"] * 2).to_dict()
    members.append(Member("simulated: one token costs more than the long prompts", Run.from_dict(data)))
    return members


def _two_cards_family() -> list[Member]:
    members = family(two_cards.REFERENCE, cpu="cpu-two-cards")
    run = Run.load(RUNS / "cpu-two-cards.json")
    tc = two_cards.TwoCards(run)
    split = {(tc.split(p).path, tc.split(p).preset) for p in tc.presets}

    def is_split(row: dict) -> bool:
        return (row.get("path"), row.get("preset")) in split
    card_ms = tc.card(tc.presets[-1]).median_ms / tc.split(tc.presets[-1]).median_ms
    faster = scaled(run, 0.5, is_split)
    slower = scaled(run, 3.0 * card_ms, is_split)
    members += [Member("simulated from cpu-two-cards: two ranks faster than one card", faster),
                Member("simulated from cpu-two-cards: two ranks slower than one card", slower)]
    return members


def _kernels_family() -> list[Member]:
    members = family("h200-kernels")
    run = reference_run("h200-kernels")
    no_pdl = copy.deepcopy(run)  # a card without PDL runs the same kernels either way
    no_pdl.row("triton replay, no PDL").timing = copy.deepcopy(run.row("triton replay").timing)
    members.append(Member("simulated: a card without PDL", no_pdl))
    return members


CHAPTERS = {
    "below-the-floor": (replay_text, lambda: family("h200-below-the-floor")),
    "shared-buffers": (replay_text, lambda: family("h200-shared-buffers")),
    "bigger-models": (bigger_models_text, _bigger_models_family),
    "fast-card": (fast_card_text, lambda: family("h200-fast-card")),
    "gallery": (gallery_text, lambda: family("h200-below-the-floor")),
    "kernels": (kernels_text, _kernels_family),
    "prefill": (prefill_text, _prefill_family),
    "serving": (serving_text, lambda: family("h200-serving")),
    "two-cards": (two_cards_text, _two_cards_family),
}


def _cases():
    for chapter, (text_of, members) in CHAPTERS.items():
        for member in members():
            yield pytest.param(text_of, member, id=f"{chapter}: {member.name}")


@pytest.mark.parametrize("text_of, member", list(_cases()))
def test_every_chapter_says_only_what_each_run_supports(text_of, member):
    with recorded_verdicts() as said:
        text = text_of(member.run)
    assert not problems(text, said), f"{member.name}:\n" + "\n".join(problems(text, said)) + "\n\n" + text


@pytest.mark.parametrize("facts", [
    CardFacts("Tesla T4 (simulated)", "cuda", compute_capability=(7, 5), memory_gb=15.0),
    CardFacts("NVIDIA A100 (simulated, no PDL)", "cuda", compute_capability=(8, 0), memory_gb=80.0),
    CardFacts("a CPU (simulated)", "cpu")], ids=["float16-only card", "card without PDL", "cpu"])
def test_a_card_plan_prints_plain_numbers(facts):
    with recorded_verdicts() as said:
        text = str(plan_for(facts))
    assert not problems(text, said), text


# ---- the claims the issue found wrong, each way round ----------------------------------------------

def test_bigger_models_says_the_advantage_grows_when_it_grows_and_shrinks_when_it_shrinks():
    members = {m.name: m.run for m in _bigger_models_family()}
    grows = bigger_models_text(members["simulated: the advantage grows with size, bands apart"])
    shrinks = bigger_models_text(members["simulated: the advantage shrinks with size, bands apart"])
    assert "advantage grows with size" in grows and "cannot" not in grows.split("advantage")[-1]
    assert "larger model" in grows and "small model" not in grows
    assert "advantage shrinks with size" in shrinks and "small model, qwen3-0.6b, gained more" in shrinks


def test_prefill_says_a_falling_line_in_words():
    members = {m.name: m.run for m in _prefill_family()}
    text = prefill_text(members["simulated: one token costs more than the long prompts"])
    assert "+ -" not in text and "does not rise" in text
    assert "ran faster than at" in text or "cannot" in text


def test_two_ranks_on_a_cpu_are_never_read_as_two_cards():
    members = {m.name: m.run for m in _two_cards_family()}
    for name in ("cpu run cpu-two-cards", "simulated from cpu-two-cards: two ranks faster than one card"):
        tc = two_cards.TwoCards(members[name])
        said = tc.says(tc.presets[-1])
        assert "sharing one CPU and one memory, not cards" in said
    fast = two_cards.TwoCards(members["simulated from cpu-two-cards: two ranks faster than one card"])
    assert "does not say a second card would speed up" in fast.says(fast.presets[-1])


def test_serving_says_how_the_speedup_moved_either_way():
    run = reference_run("h200-serving")
    eager_top = serving.GraphSide.from_run(run).eager
    top = max(eager_top)
    halved = _set_timing(_set_timing(run, "eager", 8.0, batch=1), "eager", 4.0, batch=top)
    halved = _set_timing(_set_timing(halved, "graph", 2.0, batch=1), "graph", 2.0, batch=top)
    card = serving.GraphSide.from_run(halved)
    assert "shrank as the batch grew" in serving.speedup_sentence(card.eager, card.graph, (1, top))
    grew = _set_timing(halved, "eager", 16.0, batch=top)
    card = serving.GraphSide.from_run(grew)
    assert "grew with the batch" in serving.speedup_sentence(card.eager, card.graph, (1, top))


# ---- the checks can fail ------------------------------------------------------------------------------

def test_a_planted_typed_claim_fails():
    run = reference_run("h200-below-the-floor")
    with recorded_verdicts() as said:
        text = replay_text(run) + "\nThe replay is faster than eager on every card."
    assert any("typed claim" in p and "faster" in p for p in problems(text, said))


def test_a_planted_inf_and_a_planted_four_figure_number_fail():
    with recorded_verdicts() as said:
        text = replay_text(reference_run("h200-below-the-floor"))
    assert not problems(text, said)
    assert any("not finite" in p for p in problems(text + "\nread at inf GB/s", said))
    assert any("three figures" in p for p in problems(text + "\nfloor 1415.543 ms", said))
    assert any("three figures" in p for p in problems(text + "\n1082.441 ms ÷ 1140", said))


def test_a_sentence_a_verdict_chose_is_no_typed_claim():
    with recorded_verdicts() as said:
        text = compare(Band.exact(2.0), Band.exact(1.0)).verdict("it grew", "it shrank", "cannot tell")
    assert text == "it grew" and not problems(text, said)
    assert problems("it grew", [])


def test_the_family_labels_every_made_up_run():
    for _, (_, members) in CHAPTERS.items():
        for member in members():
            assert member.simulated == ("simulated" in member.name)
            assert member.name.startswith(("stored ", "cpu run ", "simulated"))


def test_the_stored_cpu_run_is_a_run_of_this_book():
    data = json.loads((RUNS / "cpu-two-cards.json").read_text())
    run = Run.from_dict(data)
    assert run.settings.value("device") == "cpu" and not two_cards.TwoCards(run).on_gpu


def test_widened_runs_are_noisy_and_keep_their_medians():
    run = reference_run("h200-below-the-floor")
    wide = widened(run)
    for a, b in zip(run.rows, wide.rows):
        assert b.timing.noisy and b.median_ms == pytest.approx(a.median_ms)
    half = scaled(run, 0.5, is_eager)
    assert half.row("eager").median_ms == pytest.approx(run.row("eager").median_ms / 2, rel=0.02)
    assert half.row("graph replay").median_ms == run.row("graph replay").median_ms


def test_kernel_readings_say_each_way_a_step_meets_its_budget_and_a_stream_its_read_test():
    from floorlab.core.timing import Band

    step = Band(7.4, 7.3, 7.5)
    assert "over the budget" in kernels_readings.whole_step_against_budget(step, 6.9)
    assert "within the budget" in kernels_readings.whole_step_against_budget(step, 8.0)
    assert "cannot tell" in kernels_readings.whole_step_against_budget(step, 7.45)
    rows = [{"alone_gbps": 2600.0, "serial_gbps": 3000.0, "chained_gbps": c} for c in (3050.0, 3133.0)]
    assert kernels_readings.beyond_read_test(rows[:1], 3090.0) == ""
    assert "good to about that much" in kernels_readings.beyond_read_test(rows, 3090.0)
    assert "did not move all its bytes" in kernels_readings.beyond_read_test(rows, 2500.0)


def test_the_wait_reading_names_a_gemv_no_faster_without_its_wait():
    from floorlab.engine.kernels.layer_rows import KernelRow

    def row(kernel, us, no_wait):
        return KernelRow(kernel, us, 1, 1.0, 1.0, 0.5, {}, us_no_wait=no_wait)

    said = kernels_readings.wait_reading([row("qkv", 3.5, 3.3), row("down", 2.7, 2.8)])
    assert "own start and drain" in said and "`down` ran no faster" in said and "`qkv`" not in said.split("Without")[1]
    assert "ran no faster" not in kernels_readings.wait_reading([row("qkv", 3.5, 3.3)])
    assert "did not time" in kernels_readings.wait_reading([row("qkv", 3.5, None)])


@pytest.mark.parametrize("busy_ms, words", [(1.19, "agree within 10%"), (1.5, "not average ones"),
                                            (0.9, "the ones fusion took away were")])
def test_the_fixed_price_model_is_read_each_way_it_can_miss(busy_ms, words):
    assert words in fast_card.prediction_reading(1.21, busy_ms)


def test_the_stored_bench_is_the_same_card_only_when_its_device_is():
    sizes = bigger_models.stored_sizes()
    same = bigger_models_readings.read_sizes(sizes, BENCH).bench
    other_run = copy.deepcopy(sizes.run)
    other_run.device = dataclasses.replace(other_run.device, name="NVIDIA H100 80GB HBM3")
    other = bigger_models_readings.read_sizes(bigger_models.Sizes(other_run, sizes.source, batch=sizes.batch),
                                              BENCH).bench
    if BENCH.device.name == sizes.run.device.name:
        assert "on the same card" in same
    assert "another card, not the NVIDIA H100 80GB HBM3" in other and "same card" not in other
