"""Tests for floorlab.studies.serving and the padding guard: the stream's arithmetic and the bucket choice
on any machine, the padding trap through the eager twin of the runner on a CPU and through
the graphs on a CUDA GPU."""
import itertools
import random
import warnings
from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from floorlab.core import checks
from floorlab.core.roofline import decode_floor
from floorlab.core.runs import Row, Run
from floorlab.core.timing import Timing, time_once
from floorlab.engine import buckets
from floorlab.engine.buckets import EagerFallbackWarning, PaddedEagerRunner, keep_padding_rows
from floorlab.engine.graphs import GraphMemory
from floorlab.engine.measure import Source
from floorlab.engine.model import build_model, prefill_random
from floorlab.studies import serving_buckets, serving_trap
from floorlab.studies.serving import (
    CPU_SHAPE,
    GraphMemoryReport,
    GraphSide,
    ms_per_row,
    stored_run,
)
from floorlab.studies.serving_buckets import BucketCosts, best_buckets, score_buckets
from floorlab.studies.serving_stream import StreamCost, StreamStep, request_stream, serve_stream
from floorlab.studies.serving_trap import check_padding_trap, overwritten_values, values_padding_writes

BUCKETS = (1, 2, 4, 8, 16)
MAX_BATCH, MAX_CONTEXT, PROMPT = 20, 32, 8


def _bits(t):
    return t.contiguous().view({2: torch.int16, 4: torch.int32}[t.element_size()])


def _same(a, b):
    """Bit for bit, NaNs included."""
    return torch.equal(_bits(a), _bits(b))


# ---------------------------------------------------------------- the stream, arithmetic only

def test_request_stream_is_seeded_and_in_range():
    a = request_stream(200, largest=16, beyond=4, seed=3)
    assert a == request_stream(200, largest=16, beyond=4, seed=3)
    assert a != request_stream(200, largest=16, beyond=4, seed=4)
    assert min(a) >= 1 and max(a) <= 20
    assert sum(b == 1 for b in a) > sum(b == 20 for b in a)  # weight 1/B: small ones likelier


def test_the_chapters_stream_reaches_past_the_largest_bucket():
    stream = request_stream(48, largest=16, beyond=4, seed=0)
    assert any(b > 16 for b in stream) and any(b not in BUCKETS for b in stream)


@pytest.mark.parametrize("kw", [dict(steps=0, largest=16), dict(steps=4, largest=0),
                                dict(steps=4, largest=16, beyond=-1)])
def test_request_stream_rejects_bad_arguments(kw):
    with pytest.raises(ValueError):
        request_stream(**kw)


def test_stream_step_prices_padding_as_the_padded_rows_share_of_the_step():
    step = StreamStep(batch=5, bucket=8, ms=8.0)
    assert (step.padded_rows, step.rows, step.padding_ms) == (3, 8, 3.0)
    eager = StreamStep(batch=19, bucket=None, ms=15.0)
    assert (eager.padded_rows, eager.rows, eager.padding_ms) == (0, 19, 0.0)


def test_stream_cost_totals_and_round_trip():
    cost = StreamCost("graph", BUCKETS, [StreamStep(5, 8, 8.0), StreamStep(8, 8, 8.0),
                                         StreamStep(19, None, 20.0), StreamStep(5, 8, 8.0)])
    assert cost.total_ms == 44.0
    assert cost.padded_rows == 6 and cost.computed_rows == 8 + 8 + 19 + 8
    assert cost.padding_ms == 6.0
    assert [s.batch for s in cost.fallbacks] == [19] and cost.fallback_ms == 20.0
    assert cost.bucket_ms == 8.0
    assert cost.histogram() == {5: 2, 8: 1, 19: 1}
    again = StreamCost.from_dict(cost.to_dict())
    assert again == cost
    assert all(len(line) <= 84 for line in cost.summary(0.01).splitlines())


def test_ms_per_row_is_the_least_squares_slope():
    def rows(ms):
        return {b: Row("graph", "p", b, timing=Timing.from_samples([m])) for b, m in ms.items()}

    assert ms_per_row(rows({1: 3.0, 2: 5.0, 4: 9.0})) == pytest.approx(2.0)
    assert ms_per_row(rows({4: 2.5})) == 0.0  # one point has no slope
    assert ms_per_row(rows({b: 1.0 + 0.1 * b for b in BUCKETS})) == pytest.approx(0.1)
    assert ms_per_row(rows({b: 5.0 - 0.1 * b for b in BUCKETS})) == 0.0  # noise cannot make rows free of charge


# ---------------------------------------------------------------- choosing buckets

COSTS = BucketCosts({1: 2.0, 2: 2.0, 4: 2.1, 8: 2.3, 16: 2.7},
                    {1: 14.0, 2: 14.0, 4: 14.2, 8: 14.5, 16: 15.0},
                    {1: 2.0, 2: 2.0, 4: 4.0, 8: 22.0, 16: 24.0})


def test_bucket_costs_interpolate_between_and_extend_beyond_measured_sizes():
    assert COSTS.graph_step_ms(8) == 2.3
    assert COSTS.graph_step_ms(12) == pytest.approx(2.5)
    assert COSTS.graph_step_ms(20) == pytest.approx(2.9)
    assert COSTS.eager_step_ms(20) == pytest.approx(15.25)
    assert COSTS.memory_mb(6) == pytest.approx(13.0)


def test_score_buckets_by_hand():
    hist = {1: 2, 5: 1, 19: 1}
    score = score_buckets((1, 8), hist, COSTS)
    assert score.mean_ms == pytest.approx((2 * 2.0 + 2.3 + COSTS.eager_step_ms(19)) / 4)
    assert score.memory_mb == pytest.approx(24.0)
    assert score.padded_share == pytest.approx(3 / (2 + 8 + 19))
    assert score.fallback_share == 0.25
    assert "ms per step" in str(score)


def test_best_buckets_agrees_with_trying_every_choice():
    rng = random.Random(0)
    for _ in range(12):
        hist = {b: rng.randint(1, 6) for b in rng.sample(range(1, 13), rng.randint(2, 7))}
        budget = rng.uniform(5, 70)
        brute = None
        for k in range(1, 13):
            for combo in itertools.combinations(range(1, 13), k):
                s = score_buckets(combo, hist, COSTS)
                if s.memory_mb <= budget and (brute is None or s.mean_ms < brute.mean_ms):
                    brute = s
        best = best_buckets(hist, COSTS, budget_mb=budget, max_bucket=12)
        assert best.mean_ms == pytest.approx(brute.mean_ms)
        assert best.memory_mb <= budget


def test_best_buckets_says_when_nothing_fits():
    with pytest.raises(ValueError, match="budget"):
        best_buckets({3: 1}, COSTS, budget_mb=0.5, max_bucket=16)


def test_the_bucket_check_judges_budget_and_speed():
    hist, budget = {1: 6, 3: 3, 5: 2, 12: 1, 19: 1}, 60.0
    kw = dict(budget_mb=budget, max_bucket=20)
    best = best_buckets(hist, COSTS, **kw)
    assert serving_buckets.check_bucket_choice(None, hist, COSTS, **kw) == checks.NOT_ATTEMPTED
    assert serving_buckets.check_bucket_choice(best.buckets, hist, COSTS, **kw).startswith("right")
    assert serving_buckets.check_bucket_choice((1,), hist, COSTS, **kw).startswith("not yet")
    assert "over the" in serving_buckets.check_bucket_choice((1, 8, 12, 16, 19, 20), hist, COSTS, **kw)
    assert "no bucket can be" in serving_buckets.check_bucket_choice((24,), hist, COSTS, **kw)
    assert "tuple" in serving_buckets.check_bucket_choice("8", hist, COSTS, **kw)
    answer = serving_buckets.answer_bucket_choice(hist, COSTS, **kw)
    assert str(best.buckets) in answer
    # batch 19 lies past the measured buckets: the answer says its times come from the straight lines,
    # and sets the stream's own eager steps there beside them
    assert "the straight lines past batch 16 put an eager step there at" in answer and "stream's" not in answer
    assert "only if a bucket reaches 19" in answer  # max_bucket 20 allows one
    capped = serving_buckets.answer_bucket_choice(hist, COSTS, budget_mb=budget, max_bucket=16)
    assert "Batch 19 lies past the largest bucket allowed (16), so its steps run eagerly" in capped
    stream = StreamCost("graphs", (1, 2, 4, 8, 16), [StreamStep(19, None, 9.0), StreamStep(19, None, 8.0),
                                                     StreamStep(19, None, 8.5), StreamStep(3, 4, 1.0)])
    answer = serving_buckets.answer_bucket_choice(hist, COSTS, stream=stream, **kw)
    assert "(the stream's 3 eager steps there took 8.50 ms)" in answer


def test_the_bucket_cell_takes_a_numpy_array_and_an_unreadable_answer():
    hist, kw = {1: 6, 3: 3, 5: 2, 12: 1, 19: 1}, dict(budget_mb=60.0, max_bucket=20)
    best = best_buckets(hist, COSTS, **kw)
    as_array = np.array(best.buckets)
    assert serving_buckets.score_choice(as_array, hist, COSTS) == str(best)
    assert serving_buckets.check_bucket_choice(as_array, hist, COSTS, **kw).startswith("right")
    for unread in (None, "8", (), (1, 8.5)):
        assert serving_buckets.score_choice(unread, hist, COSTS) == ""


def test_the_overwrite_check():
    assert serving_trap.check_overwritten(None, 10, 10) == checks.NOT_ATTEMPTED
    assert serving_trap.check_overwritten(10, 10, 10).startswith("right")
    assert serving_trap.check_overwritten(12, 10, 10).startswith("not yet")
    assert serving_trap.check_overwritten("10", 10, 10).startswith("not yet")


# ---------------------------------------------------------------- the guard, on a CPU

@pytest.fixture(scope="module")
def small():
    """The chapter's CPU model in float32, 20 rows prefilled."""
    model = build_model(CPU_SHAPE, device="cpu", dtype=torch.float32, max_batch=MAX_BATCH,
                        max_context=MAX_CONTEXT)
    _, tokens, positions = prefill_random(model, MAX_BATCH, PROMPT)
    return model, tokens, positions


def test_keep_padding_rows_puts_back_what_the_block_writes(small):
    model, _, _ = small
    saved = model.k_cache.clone(), model.v_cache.clone()
    with keep_padding_rows(model, 5, 8):
        model.k_cache[:, 5:8].fill_(7.0)
        model.v_cache[:, 5:8, :, buckets.PAD_POSITION].fill_(7.0)
    assert not _same(model.k_cache, saved[0])  # only the padding slot is kept, by design
    assert _same(model.k_cache[:, :, :, buckets.PAD_POSITION], saved[0][:, :, :, buckets.PAD_POSITION])
    assert _same(model.v_cache, saved[1])
    model.k_cache.copy_(saved[0])


def test_keep_padding_rows_refuses_a_model_it_cannot_guard_and_ignores_full_buckets():
    opaque = SimpleNamespace()
    with keep_padding_rows(opaque, 8, 8):
        pass
    with pytest.raises(TypeError, match="cache_slots"):
        with keep_padding_rows(opaque, 5, 8):
            pass


def test_cache_slots_are_views_of_the_padding_slot(small):
    model, _, _ = small
    k, v = model.cache_slots(slice(5, 8), 0)
    assert k.shape == (CPU_SHAPE.num_layers, 3, CPU_SHAPE.num_kv_heads, CPU_SHAPE.head_dim)
    assert k.untyped_storage().data_ptr() == model.k_cache.untyped_storage().data_ptr()
    assert v.untyped_storage().data_ptr() == model.v_cache.untyped_storage().data_ptr()


@pytest.mark.parametrize("batch", [3, 5, 11])
def test_padded_step_matches_eager_at_the_live_batch_row_for_row(small, batch):
    model, tokens, positions = small
    runner = PaddedEagerRunner(model, BUCKETS)
    saved = model.k_cache.clone(), model.v_cache.clone()
    live = model.decode_step(tokens[:batch], positions[:batch])
    live_k = model.k_cache.clone()
    model.k_cache.copy_(saved[0])
    model.v_cache.copy_(saved[1])
    got = runner.step(tokens[:batch], positions[:batch])
    assert runner.last_padding == runner.bucket_for(batch) - batch
    assert got.shape == live.shape
    # (float32 GEMMs blocked for another batch size round differently: sums of 256 products
    # of order-one values differ by up to a few 1e-6, more on some CPUs' kernels than others)
    torch.testing.assert_close(got, live, rtol=1e-5, atol=1e-5)
    # padding left no trace: rows from the batch on exactly as the live step left them, and
    # the live rows as it wrote them, up to the rounding of a GEMM at another batch size
    assert _same(model.k_cache[:, batch:], live_k[:, batch:])
    torch.testing.assert_close(model.k_cache, live_k, rtol=1e-5, atol=1e-5)
    model.k_cache.copy_(saved[0])
    model.v_cache.copy_(saved[1])


@pytest.mark.parametrize("batch", [3, 5, 11])
def test_nan_poisoned_padding_reaches_no_live_row(small, batch):
    model, tokens, positions = small
    before = model.k_cache.clone()
    report = check_padding_trap(PaddedEagerRunner(model, BUCKETS), tokens, positions, batch)
    assert report.passed, report.summary()
    assert _same(model.k_cache, before)  # the check puts the cache back


def test_sequences_beyond_the_padded_batch_keep_their_cache(small):
    """Rows 5..19 hold other sequences; a step of 5 live rows in bucket 8 must not touch them."""
    model, tokens, positions = small
    saved = model.k_cache.clone(), model.v_cache.clone()
    PaddedEagerRunner(model, BUCKETS).step(tokens[:5], positions[:5])
    assert _same(model.k_cache[:, 5:], saved[0][:, 5:])
    assert _same(model.v_cache[:, 5:], saved[1][:, 5:])
    model.k_cache.copy_(saved[0])
    model.v_cache.copy_(saved[1])


def test_without_the_guard_padding_overwrites_other_sequences(small, monkeypatch):
    """The converse, so the checks above can fail: the unguarded step writes every padding slot."""
    model, tokens, positions = small
    assert overwritten_values(model, tokens, positions, 5, 8) == values_padding_writes(CPU_SHAPE, 3)

    @contextmanager
    def no_guard(*args):
        yield

    monkeypatch.setattr(buckets, "keep_padding_rows", no_guard)
    report = check_padding_trap(PaddedEagerRunner(model, BUCKETS), tokens, positions, 5)
    assert not report.other_rows_kept and not report.passed


def test_values_padding_writes_counts_one_slot_per_row_layer_head_k_and_v():
    assert values_padding_writes(CPU_SHAPE, 3) == 3 * 4 * 2 * 2 * 64


def test_check_padding_trap_needs_a_padded_batch(small):
    model, tokens, positions = small
    with pytest.raises(ValueError, match="padding"):
        check_padding_trap(PaddedEagerRunner(model, BUCKETS), tokens, positions, 8)


def test_padded_eager_runner_falls_back_and_warns_above_the_largest_bucket(small):
    model, tokens, positions = small
    runner = PaddedEagerRunner(model, BUCKETS)
    with pytest.warns(EagerFallbackWarning, match="batch 19 is above the largest captured bucket 16"):
        out = runner.step(tokens[:19], positions[:19])
    assert out.shape == (19, CPU_SHAPE.vocab_size)
    assert runner.last_path == "eager (batch 19 > largest bucket 16)"


def test_serve_stream_runs_every_step_and_counts_fallbacks(small):
    model, tokens, positions = small
    runner = PaddedEagerRunner(model, BUCKETS)
    stream = [1, 5, 19, 3, 16]
    with warnings.catch_warnings():
        warnings.simplefilter("error", EagerFallbackWarning)  # serve_stream keeps them quiet
        cost = serve_stream(runner, stream, tokens, positions, device="cpu")
    assert [s.batch for s in cost.steps] == stream
    assert [s.bucket for s in cost.steps] == [1, 8, None, 4, 16]
    assert cost.padded_rows == 3 + 1 and len(cost.fallbacks) == 1
    assert all(s.ms > 0 for s in cost.steps)
    with pytest.raises(ValueError, match="prefill"):
        serve_stream(runner, [21], tokens, positions, device="cpu")


@pytest.mark.parametrize("stream, match", [([], "non-empty list"), (iter(()), "non-empty list"),
                                           (None, "sequence of live"), ([1, 0], "got int 0"), ([-1], "got int -1"),
                                           ([2.5], "got float 2.5"), ([True], "got bool True")])
def test_serve_stream_refuses_an_empty_or_bad_stream(small, stream, match):
    with pytest.raises(ValueError, match=match):
        serve_stream(PaddedEagerRunner(small[0], BUCKETS), stream, small[1], small[2], device="cpu")


def test_time_once_times_one_call():
    calls = []
    assert time_once(lambda: calls.append(1), device="cpu") >= 0
    assert calls == [1]


# ---------------------------------------------------------------- the stored run's layout

def _side():
    shape = CPU_SHAPE
    floors = {b: decode_floor(shape, batch=b, prompt_tokens=PROMPT,
                              bandwidths={"copy": 100.0, "read": 120.0}) for b in (1, 2)}

    def row(path, b, ms):
        return Row(path, shape.name, b, timing=Timing.from_samples([ms, ms * 1.1]))

    memory = GraphMemoryReport([GraphMemory(2, 4096, 2_097_152, True), GraphMemory(1, 2048, 0, True)],
                               [GraphMemory(2, 4096, 2_097_152, False),
                                GraphMemory(1, 2048, 2_097_152, False)])
    return GraphSide(Source(here=True), shape.name, floors,
                     eager={1: row("eager", 1, 10.0), 2: row("eager", 2, 10.5)},
                     graph={1: row("graph", 1, 2.0), 2: row("graph", 2, 2.2)},
                     padded=row("graph, padded", 1, 2.3), memory=memory,
                     stream=StreamCost("graph", (1, 2), [StreamStep(1, 1, 2.0), StreamStep(3, None, 11.0)]))


def test_graph_side_survives_a_stored_run(tmp_path):
    side = _side()
    run = side.to_run(stamp={"date": "2026-12-01"}, device={"name": "a card", "kind": "cuda"},
                      bandwidths=None, settings={"max_batch": 20}, facts={"trap": {"batch": 5}})
    again = GraphSide.from_run(Run.load(run.save(tmp_path / "serving.json")))
    assert not again.source.here and again.source.run.label == "a card, 2026-12-01"
    assert again.floors == side.floors
    for path in ("eager", "graph"):
        assert {b: r.median_ms for b, r in getattr(again, path).items()} == pytest.approx(
            {b: r.median_ms for b, r in getattr(side, path).items()})
    assert again.padded.median_ms == side.padded.median_ms
    assert again.memory.private_mb == pytest.approx(2 * 2.097152)
    assert again.memory.shared_mb == pytest.approx(2.097152)
    assert again.stream == side.stream
    assert again.costs().memory_mb(2) == pytest.approx(2.097152)
    assert all(len(line) <= 84 for line in again.memory.summary().splitlines())


def test_stored_run_is_none_until_one_is_stored(monkeypatch, tmp_path):
    from floorlab.core import paths

    monkeypatch.setattr(paths, "REFERENCE_DIR", tmp_path)
    assert stored_run() is None


# ---------------------------------------------------------------- GPU: the graphs themselves

def _mid_shape():
    from floorlab.core.shapes import Qwen3Shape

    return Qwen3Shape(hidden_size=512, intermediate_size=1536, num_layers=4, num_heads=8,
                      num_kv_heads=4, head_dim=64, vocab_size=8192, tie_word_embeddings=True,
                      name="serving-test-mid")


@pytest.fixture(scope="module")
def served():
    """A bf16 model with 20 rows prefilled and graphs at 1..16 in one pool (memory measured
    against own pools too)."""
    from floorlab.studies.serving import capture_runner

    model = build_model(_mid_shape(), device="cuda", dtype=torch.bfloat16, max_batch=MAX_BATCH,
                        max_context=MAX_CONTEXT)
    prompt, tokens, positions = prefill_random(model, MAX_BATCH, PROMPT)
    runner, memory = capture_runner(model, BUCKETS)
    model.prefill(prompt)
    yield model, runner, memory, tokens, positions
    del runner, model
    torch.cuda.empty_cache()


@pytest.mark.gpu
@pytest.mark.parametrize("batch", [3, 5, 11])
def test_gpu_nan_poisoned_padding_reaches_no_live_row(served, batch):
    model, runner, _, tokens, positions = served
    report = check_padding_trap(runner, tokens, positions, batch)
    assert report.path == "graph"
    assert report.passed, report.summary()


@pytest.mark.gpu
def test_gpu_replay_leaves_sequences_beyond_the_live_batch_alone(served):
    model, runner, _, tokens, positions = served
    saved = model.k_cache.clone(), model.v_cache.clone()
    runner.step(tokens[:5], positions[:5])
    assert runner.last_path == "graph (bucket 8)"
    assert _same(model.k_cache[:, 5:], saved[0][:, 5:])
    assert _same(model.v_cache[:, 5:], saved[1][:, 5:])
    model.k_cache.copy_(saved[0])
    model.v_cache.copy_(saved[1])


@pytest.mark.gpu
def test_gpu_replay_without_the_guard_overwrites_other_sequences(served, monkeypatch):
    model, runner, _, tokens, positions = served

    @contextmanager
    def no_guard(*args):
        yield

    monkeypatch.setattr(buckets, "keep_padding_rows", no_guard)
    report = check_padding_trap(runner, tokens, positions, 5)
    assert not report.other_rows_kept
    assert report.outputs_equal and report.outputs_finite  # the live rows never see it


@pytest.mark.gpu
def test_gpu_graph_memory_is_measured_for_every_bucket(served):
    model, runner, memory, _, _ = served
    assert [m.bucket for m in memory.private] == list(BUCKETS)
    assert [m.bucket for m in memory.shared] == list(BUCKETS)
    assert all(not m.shared_pool and m.reserved_bytes > 0 for m in memory.private)
    assert all(m.shared_pool for m in memory.shared)
    assert memory.shared_mb <= memory.private_mb
    for m in memory.shared:  # each graph keeps its logits alive
        out = runner.static_outputs[m.bucket]
        assert m.allocated_bytes >= out.numel() * out.element_size()


@pytest.mark.gpu
def test_gpu_stream_through_the_graphs(served):
    model, runner, _, tokens, positions = served
    stream = [1, 5, 19, 3, 16, 20]
    cost = serve_stream(runner, stream, tokens, positions, device=model.device)
    assert cost.path == "graph"
    assert [s.bucket for s in cost.steps] == [1, 8, None, 4, 16, None]
    assert cost.padded_rows == 4 and len(cost.fallbacks) == 2
    assert all(s.ms > 0 for s in cost.steps)


@pytest.mark.gpu
def test_gpu_unguarded_padding_overwrites_exactly_its_slots(served):
    model, _, _, tokens, positions = served
    before = model.k_cache.clone()
    assert overwritten_values(model, tokens, positions, 5, 8) == values_padding_writes(
        model.shape, 3)
    assert _same(model.k_cache, before)


# ---------------------------------------------------------------- the checks: any number type, mistakes by name

def test_the_bucket_check_reads_any_number_type():
    import numpy as np

    hist, kw = {1: 6, 3: 3, 5: 2, 12: 1, 19: 1}, dict(budget_mb=60.0, max_bucket=20)
    best = best_buckets(hist, COSTS, **kw).buckets
    for given in (best, list(best), np.array(best), tuple(np.int64(b) for b in best),
                  tuple(float(b) for b in best), set(best)):
        assert serving_buckets.check_bucket_choice(given, hist, COSTS, **kw).startswith("right")
    assert "whole batch size" in serving_buckets.check_bucket_choice((1, 8.5), hist, COSTS, **kw)
    assert "tuple" in serving_buckets.check_bucket_choice(8, hist, COSTS, **kw)
    assert "yes/no" in serving_buckets.check_bucket_choice((1, True), hist, COSTS, **kw)
    assert "at least one" in serving_buckets.check_bucket_choice((), hist, COSTS, **kw)


def test_the_bucket_check_names_the_default_buckets():
    hist, kw = {1: 6, 3: 3, 5: 2, 12: 1, 19: 1}, dict(budget_mb=60.0, max_bucket=20)
    default = (1, 2, 4, 16)  # within budget, but every step at 19 runs eagerly
    assert score_buckets(default, hist, COSTS).memory_mb <= 60.0
    verdict = serving_buckets.check_bucket_choice(default, hist, COSTS, default=default, **kw)
    assert verdict.startswith("not yet: those are the default buckets")
    assert "default" not in serving_buckets.check_bucket_choice((1, 2), hist, COSTS,
                                                                default=default, **kw)


def test_the_overwrite_check_reads_any_number_type_and_names_each_mistake():
    import numpy as np

    batch, bucket = 5, 8
    right = values_padding_writes(CPU_SHAPE, bucket - batch)
    mistakes = serving_trap.overwrite_mistakes(CPU_SHAPE, batch, bucket, MAX_CONTEXT)
    assert right == 3 * 4 * 2 * 2 * 64 and right not in mistakes.values()
    assert len(set(mistakes.values())) == len(mistakes) >= 5

    def check(value):
        return serving_trap.check_overwritten(value, right, right, wrong=mistakes)

    for value in (right, np.int64(right), np.float32(right), float(right), torch.tensor(right)):
        assert check(value).startswith("right: 3,072 values, and"), value
    for mistake, value in mistakes.items():
        verdict = check(value)
        assert verdict.startswith(f"not yet: that is the number you get with {mistake}.")
        assert "every KV head" in verdict  # the hint still follows
    assert check(right + 1).startswith("not yet: Each padding row")
    assert serving_trap.check_overwritten(right, right, 0).startswith("right: 3,072 values, but")


def _row(path, batch, ms, spread=0.01):
    return Row(path, "p", batch, x_floor=ms,
               timing=Timing(ms, ms * (1 - spread), ms * (1 + spread), ms * 0.9, ms * 1.1, [ms]))


def test_speedups_are_said_only_beyond_the_spreads():
    from floorlab.studies.serving import speedup_lines, speedup_sentence

    eager = {1: _row("eager", 1, 8.0), 16: _row("eager", 16, 8.0, spread=0.3)}
    graph = {1: _row("graph", 1, 2.0), 16: _row("graph", 16, 7.0)}
    text = speedup_sentence(eager, graph, (1, 16))
    assert text == ("the replay is 4.00× as fast as eager at batch 1 and no faster than eager "
                    "beyond the spreads at batch 16; the speed-up shrank as the batch grew, to "
                    "0.286× of its value at batch 1")
    assert "the host's load" not in text
    slow_first = {1: _row("eager", 1, 16.0), 16: _row("eager", 16, 8.0)}
    said = speedup_sentence(slow_first, {1: _row("graph", 1, 2.0), 16: _row("graph", 16, 2.0)}, (1, 16))
    assert "shrank as the batch grew" in said and "ran slower than at batch 16" in said
    lines = speedup_lines(eager, graph).splitlines()
    assert "4.00×" in lines[1] and "overlap" not in lines[1] and "noisy" not in lines[1]
    assert "overlap" in lines[2] and lines[2].endswith("eager noisy")
    assert lines[-1].startswith("overlap: eager and graph differ by less than their spreads")
    assert "overlap" not in speedup_lines({1: eager[1]}, {1: graph[1]})


def test_the_padding_priced_by_the_slope_is_vouched_for_only_where_the_slope_is_a_rows_price():
    from floorlab.studies.serving import marginal_price_sentence

    rising = {b: _row("eager", b, 10.0 + b) for b in (1, 2, 4, 8, 16)}
    assert marginal_price_sentence(rising, 78, 200.0).startswith("Priced that way the padding cost 78 × ")
    dipping = {**rising, 8: _row("eager", 8, 5.0)}
    said = marginal_price_sentence(dipping, 78, 200.0)
    assert "slope measures it, not a row" in said and "would cost 78 × " in said and "cannot vouch for" in said


def test_the_slope_note_says_when_the_slope_is_not_a_rows_price():
    from floorlab.studies.serving import slope_note

    rising = {b: _row("eager", b, 10.0 + b) for b in (1, 2, 4, 8, 16)}
    assert slope_note(rising) == ""
    drifting = {**rising, 4: _row("eager", 4, 40.0)}  # batch 4 slower than 8 and 16
    assert "batch 8 ran faster than batch 4" in slope_note(drifting)
    assert "the machine's load" in slope_note(drifting)
    flat = {b: _row("eager", b, 10.0, spread=0.2) for b in (1, 16)}
    assert "inside the noise" in slope_note(flat)


def test_the_guard_cost_sentence_follows_the_spreads():
    full = _row("graph", 8, 2.0)
    said = serving_trap.guard_cost_sentence(_row("graph, padded", 5, 2.2), full)
    assert "guard's copies are the difference" in said and "200 µs longer" in said  # a µs difference, not 1.10×
    assert "too little to see" in serving_trap.guard_cost_sentence(_row("graph, padded", 5, 2.01), full)
    assert "load changed" in serving_trap.guard_cost_sentence(_row("graph, padded", 5, 1.5), full)
