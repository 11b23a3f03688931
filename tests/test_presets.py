"""Presets: sizes, parameter counts equal to transformers', fast random weights, nothing allocated on meta."""
import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from floorlab.core.shapes import PRESETS, Qwen3Shape, get_shape, shape_from_hf_config
from floorlab.engine.hf import build_hf
from floorlab.engine.model import build_model

TINY = Qwen3Shape(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
                  head_dim=16, vocab_size=500, tie_word_embeddings=False, name="tiny")


def test_qwen3_06b_facts():
    shape = get_shape("qwen3-0.6b")
    assert shape.param_count() == 596_049_920
    assert shape.weight_bytes() == 1_192_099_840
    assert shape.kv_bytes_per_token() == 28 * 2 * 8 * 128 * 2 == 114_688
    assert get_shape("qwen3-8b").tie_word_embeddings is False


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_param_count_equals_transformers(name):
    shape = PRESETS[name]
    with torch.device("meta"):
        hf = Qwen3ForCausalLM(Qwen3Config(**shape.to_hf_config_dict()))
    hf_count = sum(p.numel() for p in hf.parameters())
    ours = build_model(shape, device="meta")
    assert hf_count == shape.param_count()
    assert sum(p.numel() for p in ours.parameters()) == hf_count
    assert {n: tuple(t.shape) for n, t in ours.hf_state_dict().items()} == {
        n: tuple(t.shape) for n, t in hf.state_dict().items()}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_meta_builds_allocate_nothing(name):
    ours = build_model(name, device="meta")
    hf = build_hf(name, device="meta")
    tensors = [*ours.parameters(), *ours.buffers(), *hf.model.parameters()]
    assert all(t.is_meta for t in tensors)
    assert sum(p.numel() for p in hf.model.parameters()) == PRESETS[name].param_count()


def test_random_weights_are_seeded_and_scaled():
    a = build_model(TINY, dtype=torch.float32, seed=1)
    b = build_model(TINY, dtype=torch.float32, seed=1)
    c = build_model(TINY, dtype=torch.float32, seed=2)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.layers[0].qkv, c.layers[0].qkv)
    assert torch.all(a.layers[1].k_norm == 1) and torch.all(a.final_norm == 1)
    assert abs(a.embed.std().item() - 0.02) < 0.002
    assert a.lm_head is not None and not torch.equal(a.lm_head, a.embed)


def test_build_hf_random_weights():
    hf = build_hf(TINY, dtype=torch.float32, seed=3)
    params = dict(hf.model.named_parameters())
    assert torch.all(params["model.layers.0.self_attn.q_norm.weight"] == 1)
    assert abs(params["lm_head.weight"].std().item() - 0.02) < 0.002
    tied = build_hf(Qwen3Shape(64, 128, 1, 4, 2, 16, 500, True), dtype=torch.float32)
    assert tied.model.lm_head.weight is tied.model.model.embed_tokens.weight


def test_hf_config_round_trip():
    for shape in [TINY, *PRESETS.values()]:
        assert shape_from_hf_config(shape.to_hf_config_dict(), name=shape.name) == shape
    # a config as transformers writes it (rope_theta inside rope_parameters)
    saved = Qwen3Config(**PRESETS["qwen3-1.7b"].to_hf_config_dict()).to_dict()
    assert shape_from_hf_config(saved, name="qwen3-1.7b") == PRESETS["qwen3-1.7b"]


def test_get_shape_passes_shapes_through():
    assert get_shape(TINY) is TINY
    assert get_shape("qwen3-4b").num_layers == 36
