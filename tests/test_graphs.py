"""Tests for floorlab.engine.graphs: bucket arithmetic on any machine, graph replay on a CUDA GPU."""
from types import SimpleNamespace

import pytest
import torch

from floorlab.engine import graphs
from floorlab.engine.buckets import EagerFallbackWarning, bucket_for, check_buckets
from floorlab.engine.graphs import GraphRunner

BUCKETS = (1, 2, 4, 8, 16)


# ---------------------------------------------------------------- CPU: pure logic

@pytest.mark.parametrize(
    "batch, bucket",
    [(1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (8, 8), (9, 16), (16, 16), (17, None), (100, None)],
)
def test_bucket_for_picks_smallest_bucket_at_or_above(batch, bucket):
    assert bucket_for(batch, BUCKETS) == bucket


def test_bucket_for_does_not_need_sorted_buckets():
    assert bucket_for(3, (16, 4, 1, 8, 2)) == 4


@pytest.mark.parametrize("batch", [0, -1, 2.5, True, "2"])
def test_bucket_for_rejects_a_batch_that_is_not_a_whole_number_above_zero(batch):
    with pytest.raises(ValueError, match="batch must be a whole number >= 1"):
        bucket_for(batch, BUCKETS)


def test_check_buckets_sorts_and_deduplicates():
    assert check_buckets((16, 4, 4, 1)) == (1, 4, 16)


@pytest.mark.parametrize("bad", [(), (0,), (1, -2), (1, 2.5), (True,), ("4",), None])
def test_check_buckets_rejects_invalid(bad):
    with pytest.raises(ValueError, match="bucket"):
        check_buckets(bad)


def test_check_buckets_rejects_bucket_above_max_batch():
    with pytest.raises(ValueError, match="max_batch >= 16"):
        check_buckets(BUCKETS, max_batch=8)


def test_eager_fallback_warning_is_a_user_warning():
    assert issubclass(EagerFallbackWarning, UserWarning)


# ---------------------------------------------------------------- CPU: construction errors

def _stand_in(device="cpu", max_batch=16, vocab_size=32):
    """An object with the decode interface, computing nothing useful."""

    def decode_step(tokens, positions):
        return torch.zeros(tokens.shape[0], vocab_size)

    return SimpleNamespace(
        decode_step=decode_step,
        max_batch=max_batch,
        device=torch.device(device),
        shape=SimpleNamespace(vocab_size=vocab_size, num_layers=2),
    )


def test_runner_without_cuda_says_cuda_is_needed(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="CUDA") as err:
        GraphRunner(_stand_in())
    assert "reference run" in str(err.value)


def test_runner_with_cuda_but_cpu_model_says_move_it(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(ValueError, match="device='cuda'"):
        GraphRunner(_stand_in(device="cpu"))


@pytest.mark.parametrize("bad", [(), (0, 1), (1, 2.5)])
def test_runner_rejects_invalid_buckets(bad):
    with pytest.raises(ValueError, match="bucket"):
        GraphRunner(_stand_in(), buckets=bad)


def test_runner_rejects_bucket_above_model_max_batch():
    with pytest.raises(ValueError, match="max_batch"):
        GraphRunner(_stand_in(max_batch=4), buckets=BUCKETS)


def test_runner_on_tiny_cpu_model_says_cuda_is_needed(monkeypatch):
    model_mod = pytest.importorskip("floorlab.engine.model")
    from floorlab.core.shapes import Qwen3Shape

    tiny = Qwen3Shape(
        hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
        head_dim=16, vocab_size=256, tie_word_embeddings=True,
    )
    model = model_mod.build_model(tiny, device="cpu", dtype=torch.float32, max_batch=16,
                                  max_context=32)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="CUDA"):
        GraphRunner(model)


@pytest.mark.parametrize("tokens, positions, match", [
    (torch.tensor([3.7]), torch.tensor([0]), "tokens has dtype torch.float32"),
    (torch.tensor([32]), torch.tensor([0]), "token id 32 is outside the vocabulary of 32 ids"),
    (torch.tensor([-2]), torch.tensor([0]), "token id -2 is negative"),
    (torch.tensor([1, 2]), torch.tensor([0]), "tokens has 2 rows but positions has 1"),
    (torch.zeros(1, dtype=torch.long, device="meta"), torch.tensor([0]), "tokens is on meta"),
    (torch.tensor([1]), torch.tensor([-1]), "position -1 is outside the cache"),
])
def test_padded_eager_runner_checks_inputs_of_a_model_without_max_context(tokens, positions, match):
    """The graph path's CPU twin refuses bad inputs before it pads them, even for a bare decode interface."""
    from floorlab.engine.buckets import PaddedEagerRunner

    calls = []
    model = _stand_in()
    model.decode_step = lambda t, p: calls.append(t) or torch.zeros(t.shape[0], 32)
    runner = PaddedEagerRunner(model, buckets=(1, 2))
    with pytest.raises(ValueError, match=match):
        runner.step(tokens, positions)
    assert calls == []
    assert runner.step(torch.tensor([1]), torch.tensor([500])).shape == (1, 32)  # no max_context: no bound


# ---------------------------------------------------------------- GPU: replay

MAX_CONTEXT = 64


def _mid_shape():
    from floorlab.core.shapes import Qwen3Shape

    return Qwen3Shape(
        hidden_size=512, intermediate_size=1536, num_layers=4, num_heads=8, num_kv_heads=4,
        head_dim=64, vocab_size=8192, tie_word_embeddings=True, name="graphs-test-mid",
    )


def _inputs(model, batch, *, offset=0):
    """Random tokens and distinct in-range positions, one per row, on the model's device."""
    tokens = torch.randint(0, model.shape.vocab_size, (batch,), device=model.device)
    positions = (torch.arange(batch, device=model.device) + offset) % model.max_context
    return tokens, positions


@pytest.fixture(scope="module")
def mid():
    """A mid-size bf16 model (max_batch 32) with graphs captured at 1, 2, 4, 8, 16."""
    from floorlab.engine.model import build_model

    torch.manual_seed(0)
    model = build_model(_mid_shape(), device="cuda", dtype=torch.bfloat16, max_batch=32,
                        max_context=MAX_CONTEXT)
    runner = GraphRunner(model, buckets=BUCKETS)
    runner.capture()
    yield model, runner
    del runner, model
    torch.cuda.empty_cache()


@pytest.fixture(scope="module")
def preset():
    """The qwen3-0.6b preset in bf16 with one graph at batch 1."""
    from floorlab.engine.model import build_model

    model = build_model("qwen3-0.6b", device="cuda", dtype=torch.bfloat16, max_batch=1,
                        max_context=MAX_CONTEXT)
    runner = GraphRunner(model, buckets=(1,))
    runner.capture()
    yield model, runner
    del runner, model
    torch.cuda.empty_cache()


@pytest.mark.gpu
def test_capture_records_time_and_one_graph_per_bucket(mid):
    _, runner = mid
    assert runner.captured
    assert sorted(runner.graphs) == list(BUCKETS)
    assert runner.capture_s is not None and runner.capture_s > 0


@pytest.mark.gpu
@pytest.mark.parametrize("batch", BUCKETS)
def test_replay_is_bit_identical_to_eager(mid, batch):
    model, runner = mid
    tokens, positions = _inputs(model, batch, offset=1)
    assert runner.check_bit_identical(tokens, positions), (
        f"replay differs from eager at batch {batch}: max abs diff {runner.last_max_abs_diff}"
    )


@pytest.fixture(scope="module")
def mid32():
    """The mid-size model in float32 (max_batch 32), graphs at 1, 2, 4, 8, 16: float32 GEMMs
    at two batch sizes differ by rounding only, so a padded row can be held to its live twin."""
    from floorlab.engine.model import build_model

    torch.manual_seed(0)
    model = build_model(_mid_shape(), device="cuda", dtype=torch.float32, max_batch=32,
                        max_context=MAX_CONTEXT)
    runner = GraphRunner(model, buckets=BUCKETS)
    runner.capture()
    yield model, runner
    del runner, model
    torch.cuda.empty_cache()


@pytest.mark.gpu
@pytest.mark.parametrize("batch, bucket", [(5, 8), (3, 4), (11, 16)])
def test_padded_batch_matches_eager_at_the_live_batch(mid32, batch, bucket):
    """Row for row, the live rows of a padded replay are what eager gives at the live batch."""
    model, runner = mid32
    tokens, positions = _inputs(model, batch, offset=2)
    saved = model.k_cache.clone(), model.v_cache.clone()
    with torch.no_grad():
        live = model.decode_step(tokens, positions).clone()
    live_k, live_v = model.k_cache.clone(), model.v_cache.clone()
    model.k_cache.copy_(saved[0])
    model.v_cache.copy_(saved[1])

    got = runner.step(tokens, positions)
    assert runner.last_path == f"graph (bucket {bucket})"
    assert runner.last_padding == bucket - batch
    assert got.shape == live.shape == (batch, model.shape.vocab_size)
    torch.testing.assert_close(got, live, rtol=1e-4, atol=1e-4 * float(live.abs().max()))
    # and the cache ends as the live batch leaves it: padding left no trace
    torch.testing.assert_close(model.k_cache, live_k, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(model.v_cache, live_v, rtol=1e-4, atol=1e-5)
    assert torch.equal(model.k_cache[:, batch:], live_k[:, batch:])


@pytest.mark.gpu
@pytest.mark.parametrize("batch, bucket", [(5, 8), (3, 4), (11, 16)])
def test_padded_replay_is_bit_identical_to_eager_at_the_bucket(mid, batch, bucket):
    """What the graph computes for a padded batch is the eager step at the bucket, bit for bit."""
    model, runner = mid
    tokens, positions = _inputs(model, batch, offset=2)
    got = runner.step(tokens, positions)
    assert got.shape == (batch, model.shape.vocab_size)

    pad = bucket - batch
    padded_tokens = torch.cat([tokens, tokens.new_zeros(pad)])
    padded_positions = torch.cat([positions, positions.new_zeros(pad)])
    with torch.no_grad():
        eager = model.decode_step(padded_tokens, padded_positions)[:batch]
    assert torch.equal(got, eager)


@pytest.mark.gpu
def test_returned_logits_survive_later_replays(mid):
    model, runner = mid
    batch, bucket = 5, 8
    tokens, positions = _inputs(model, batch, offset=3)
    first = runner.step(tokens, positions)
    saved = first.clone()

    static = runner.static_outputs[bucket]
    assert first.data_ptr() != static.data_ptr()
    assert first.untyped_storage().data_ptr() != static.untyped_storage().data_ptr()

    for shift in (1, 2, 3):
        other = (tokens + shift) % model.shape.vocab_size
        later = runner.step(other, positions)
        runner.step(*_inputs(model, 2, offset=shift))
    assert not torch.equal(later, saved), "the later steps should have produced other logits"
    assert torch.equal(static[:batch], later)
    assert torch.equal(first, saved)


@pytest.mark.gpu
def test_above_largest_bucket_runs_eager_and_warns(mid):
    model, runner = mid
    batch = 20
    tokens, positions = _inputs(model, batch, offset=4)
    with pytest.warns(EagerFallbackWarning, match="batch 20 is above the largest captured bucket 16"):
        got = runner.step(tokens, positions)
    assert got.shape == (batch, model.shape.vocab_size)
    assert runner.last_path == "eager (batch 20 > largest bucket 16)"
    assert runner.last_padding == 0
    with torch.no_grad():
        assert torch.equal(got, model.decode_step(tokens, positions))


def test_replay_fn_keeps_its_runner_and_so_the_graphs_static_inputs_alive():
    """A graph reads the runner's static tokens and positions: the replay callable must outlive neither."""
    import gc
    import weakref

    replays = []
    runner = object.__new__(graphs.GraphRunner)  # no GPU here: a runner with stand-in graphs
    runner.buckets = (1, 4)
    runner.graphs = {b: SimpleNamespace(replay=lambda b=b: replays.append(b)) for b in runner.buckets}
    replay = runner.replay_fn(3)
    alive = weakref.ref(runner)
    del runner
    gc.collect()
    assert alive() is not None
    replay()
    assert replays == [4]


@pytest.mark.gpu
def test_replay_fn_rejects_batch_above_largest_bucket(mid):
    _, runner = mid
    with pytest.raises(ValueError, match="largest captured bucket"):
        runner.replay_fn(17)


@pytest.mark.gpu
def test_preset_replay_is_bit_identical_at_batch_1(preset):
    model, runner = preset
    tokens, positions = _inputs(model, 1, offset=5)
    assert runner.check_bit_identical(tokens, positions), (
        f"replay differs from eager: max abs diff {runner.last_max_abs_diff}"
    )


@pytest.mark.gpu
def test_preset_replay_is_faster_than_eager_at_batch_1(preset):
    from floorlab.core.timing import time_ms

    model, runner = preset
    tokens, positions = _inputs(model, 1, offset=6)
    runner.step(tokens, positions)  # leave the graph's static inputs holding real values

    def eager():
        with torch.no_grad():
            model.decode_step(tokens, positions)

    eager_t = time_ms(eager, warmup=3, repeats=20, device=model.device)
    graph_t = time_ms(runner.replay_fn(1), warmup=3, repeats=20, device=model.device)
    assert graph_t.median_ms < eager_t.median_ms, f"graph {graph_t} vs eager {eager_t}"


@pytest.mark.gpu
def test_the_input_check_never_synchronises_and_still_refuses_bad_metadata(mid):
    """On CUDA the check reads no values: a decode step and a replayed step run under sync-error mode."""
    model, runner = mid
    tokens, positions = _inputs(model, 3, offset=1)
    host_tokens, float_tokens, float_positions = tokens.cpu(), tokens.float(), positions.float()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with torch.no_grad():
            model.decode_step(tokens, positions)
        with runner.borrow(tokens, positions):
            pass
        with pytest.raises(ValueError, match="tokens has dtype torch.float32"):
            model.decode_step(float_tokens, positions)
        with pytest.raises(ValueError, match="tokens is on cpu, but the model runs on cuda"):
            model.decode_step(host_tokens, positions)
        with pytest.raises(ValueError, match="positions has dtype torch.float32"):
            runner.step(tokens, float_positions)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_module_exports_defaults():
    assert graphs.DEFAULT_BUCKETS == BUCKETS
