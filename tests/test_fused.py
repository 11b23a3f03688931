"""The fused step computes what the plain step computes; on a GPU its graph replay is bit-identical."""
import pytest
import torch

from floorlab.core.shapes import Qwen3Shape
from floorlab.engine.fused import TUNED_OPTIONS, fused_forward, fused_step, relative_error
from floorlab.engine.model import build_model

TINY = Qwen3Shape(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
                  head_dim=16, vocab_size=256, tie_word_embeddings=True, name="tiny")
# the 0.6B layer, four layers deep: real kernel shapes, short compiles
SMALL = Qwen3Shape(hidden_size=1024, intermediate_size=3072, num_layers=4, num_heads=16,
                   num_kv_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=True,
                   name="qwen3-0.6b-4-layers")
STEPS = 3


def _decode_both(shape, device, dtype, batch=3, prompt_len=5, max_context=32, tuned=False):
    """Greedy steps of the plain and the fused step from the same prefill: (plain, fused, caches equal)."""
    torch.manual_seed(0)
    model = build_model(shape, device=device, dtype=dtype, max_batch=4, max_context=max_context)
    prompt = torch.randint(0, shape.vocab_size, (batch, prompt_len), device=device)
    fused = fused_step(model, tuned=tuned)
    runs = {}
    for name, step in (("plain", model.decode_step), ("fused", fused)):
        model.reset_cache()
        token = model.prefill(prompt)[:, -1].argmax(-1)
        logits = []
        for i in range(STEPS):
            positions = torch.full((batch,), prompt_len + i, device=device)
            out = step(token.clone(), positions)
            logits.append(out)
            token = out.argmax(-1)
        runs[name] = (torch.stack(logits), model.k_cache.clone(), model.v_cache.clone())
    return runs["plain"], runs["fused"]


@pytest.mark.parametrize("tuned", [False, True])
def test_fused_matches_plain_on_cpu_float32(tuned):
    (plain, k_plain, v_plain), (fused, k_fused, v_fused) = _decode_both(TINY, "cpu", torch.float32, tuned=tuned)
    assert fused.shape == plain.shape == (STEPS, 3, TINY.vocab_size)
    assert (fused - plain).abs().max().item() <= 1e-4
    assert relative_error(fused, plain) <= 1e-4
    assert (k_fused - k_plain).abs().max().item() <= 1e-4
    assert (v_fused - v_plain).abs().max().item() <= 1e-4


def test_fused_forward_uncompiled_matches_plain():
    model = build_model(TINY, dtype=torch.float32, max_batch=4, max_context=16)
    model.prefill(torch.randint(0, TINY.vocab_size, (2, 4)))
    k, v = model.k_cache.clone(), model.v_cache.clone()
    tokens, positions = torch.tensor([3, 7]), torch.tensor([4, 4])
    plain = model.decode_step(tokens, positions)
    model.k_cache.copy_(k)
    model.v_cache.copy_(v)
    with torch.no_grad():
        fused = fused_forward(model, tokens, positions)
    assert (fused - plain).abs().max().item() <= 1e-5


def test_relative_error():
    a = torch.tensor([3.0, 4.0])
    assert relative_error(a, a) == 0.0
    assert relative_error(torch.tensor([3.0, 4.5]), a) == pytest.approx(0.1)


def test_reduce_overhead_is_refused():
    model = build_model(TINY, dtype=torch.float32, max_batch=2, max_context=16)
    with pytest.raises(ValueError, match="GraphRunner"):
        fused_step(model, mode="reduce-overhead")


def test_tuned_step_sets_inductor_options_and_takes_no_mode():
    model = build_model(TINY, dtype=torch.float32, max_batch=2, max_context=16)
    step = fused_step(model, tuned=True)
    assert step.options and set(step.options) <= set(TUNED_OPTIONS)
    assert step.options["coordinate_descent_tuning"] is True
    assert fused_step(model).options == {}
    with pytest.raises(ValueError, match="takes no mode"):
        fused_step(model, mode="max-autotune-no-cudagraphs", tuned=True)


def test_other_models_are_refused():
    with pytest.raises(TypeError, match="build_model"):
        fused_step(torch.nn.Linear(2, 2))


def test_batch_above_max_batch_is_refused():
    model = build_model(TINY, dtype=torch.float32, max_batch=2, max_context=16)
    step = fused_step(model)
    with pytest.raises(ValueError, match="max_batch"):
        step(torch.zeros(3, dtype=torch.long), torch.zeros(3, dtype=torch.long))


# ---------------------------------------------------------------- GPU

@pytest.mark.gpu
def test_fused_graph_replay_is_bit_identical_at_buckets_1_and_8():
    from floorlab.engine.graphs import GraphRunner

    model = build_model(SMALL, device="cuda", max_batch=8, max_context=64)
    fused = fused_step(model)
    runner = GraphRunner(model, buckets=(1, 8), step_fn=fused)
    runner.capture()
    for batch in (1, 8):
        model.reset_cache()
        model.prefill(torch.randint(0, SMALL.vocab_size, (batch, 16), device="cuda"))
        tokens = torch.randint(0, SMALL.vocab_size, (batch,), device="cuda")
        positions = torch.full((batch,), 16, device="cuda")
        assert runner.check_bit_identical(tokens, positions), runner.last_max_abs_diff


@pytest.mark.gpu
def test_fused_matches_plain_on_gpu_bf16():
    (plain, *_), (fused, *_) = _decode_both(SMALL, "cuda", torch.bfloat16, max_context=64)
    assert relative_error(fused[0], plain[0]) <= 2e-2


@pytest.mark.gpu
def test_fused_matches_transformers_bf16():
    from floorlab.engine.hf import HFDecoder

    model = build_model(SMALL, device="cuda", max_batch=2, max_context=64)
    hf = HFDecoder.from_decoder(model)
    fused = fused_step(model)
    prompt = torch.randint(0, SMALL.vocab_size, (2, 8), device="cuda")
    token = hf.prefill(prompt)[:, -1].argmax(-1)
    model.prefill(prompt)
    for i in range(STEPS):
        positions = torch.full((2,), 8 + i, device="cuda")
        expected = hf.decode_step(token, positions)
        got = fused(token, positions)
        assert relative_error(got, expected) <= 2e-2, i
        token = expected.argmax(-1)
