"""load_pretrained reads what transformers' save_pretrained writes, single-file and sharded, and refuses,
naming the file, every checkpoint it cannot read or would compute wrongly."""
import json
import math
import re

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import Qwen3Config, Qwen3ForCausalLM

from floorlab.core.shapes import (
    HF_FIELDS_READ,
    HF_FIELDS_WITHOUT_EFFECT,
    NotQwen3Error,
    Qwen3Shape,
    shape_from_hf_config,
)
from floorlab.engine.checkpoint import INDEX_NAME, CheckpointError, load_pretrained

MAX_REL_ERR = 1e-4


def tiny_hf(tied: bool) -> Qwen3ForCausalLM:
    shape = Qwen3Shape(64, 128, 2, 4, 2, 16, 512, tied)
    config = Qwen3Config(**shape.to_hf_config_dict(), dtype="float32")
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config).eval()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 1:
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))
    return model


@pytest.mark.parametrize("sharded", [False, True], ids=["single-file", "sharded"])
@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_load_pretrained_matches_transformers(tmp_path, sharded, tied):
    hf = tiny_hf(tied)
    hf.save_pretrained(tmp_path, **({"max_shard_size": "200KB"} if sharded else {}))
    shards = sorted(tmp_path.glob("*.safetensors"))
    if sharded:
        assert (tmp_path / INDEX_NAME).exists() and len(shards) > 1
    else:
        assert [p.name for p in shards] == ["model.safetensors"]
    model = load_pretrained(tmp_path, device="cpu", dtype=torch.float32, max_batch=2, max_context=32)
    assert model.shape.tie_word_embeddings == tied and model.shape.vocab_size == 512
    prompt = torch.randint(0, 512, (2, 10), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = hf(prompt).logits
    got = model.prefill(prompt)
    assert ((got - expected).abs().max() / expected.abs().max()).item() <= MAX_REL_ERR
    model.prefill(prompt[:, :9])
    step = model.decode_step(prompt[:, 9].contiguous(), torch.full((2,), 9))
    assert ((step - expected[:, -1]).abs().max() / expected.abs().max()).item() <= MAX_REL_ERR


def test_load_pretrained_casts_to_the_requested_dtype(tmp_path):
    hf = tiny_hf(tied=True)
    hf.save_pretrained(tmp_path)
    model = load_pretrained(tmp_path, dtype=torch.bfloat16)
    assert all(p.dtype == torch.bfloat16 for p in model.parameters())
    expected = hf.model.embed_tokens.weight.to(torch.bfloat16)
    assert torch.equal(model.embed, expected)


def test_loader_reads_only_the_shards_the_index_names(tmp_path):
    hf = tiny_hf(tied=False)
    hf.save_pretrained(tmp_path, max_shard_size="200KB")
    index = json.loads((tmp_path / INDEX_NAME).read_text())
    assert set(index["weight_map"].values()) == {p.name for p in tmp_path.glob("*.safetensors")}
    model = load_pretrained(tmp_path, dtype=torch.float32)
    assert torch.equal(model.lm_head, hf.lm_head.weight)


# ---------------------------------------------------------------- checkpoints the loader refuses, by name

SHAPE = Qwen3Shape(64, 128, 2, 4, 2, 16, 512, True)


def saved(folder, tied: bool = True, **config) -> Qwen3ForCausalLM:
    """A tiny Qwen3ForCausalLM that transformers builds from config (SHAPE plus overrides) and saves in folder."""
    settings = {**Qwen3Shape(64, 128, 2, 4, 2, 16, 512, tied).to_hf_config_dict(), **config}
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(**settings, dtype="float32")).eval()
    model.save_pretrained(folder)
    return model


def edit_config(folder, **changes):
    path = folder / "config.json"
    cfg = json.loads(path.read_text())
    for key, value in changes.items():
        if value is DROP:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    path.write_text(json.dumps(cfg))


DROP = object()


def refused(folder, *patterns):
    with pytest.raises(CheckpointError) as err:
        load_pretrained(folder, dtype=torch.float32)
    message = str(err.value)
    for pattern in patterns:
        assert re.search(pattern, message), f"{pattern!r} not in: {message}"
    return message


@pytest.mark.parametrize("cut", ["half", "header", "empty"])
def test_a_truncated_safetensors_file_is_named(tmp_path, cut):
    saved(tmp_path)
    weights = tmp_path / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes({"half": data[: len(data) // 2], "header": data[:6], "empty": b""}[cut])
    refused(tmp_path, re.escape(str(weights)), "not a readable safetensors file", "truncated or corrupt")


def test_a_corrupt_safetensors_file_is_named(tmp_path):
    saved(tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"\xff" * 4096)
    refused(tmp_path, re.escape(str(weights)), "download it again")


def test_a_config_that_is_not_json_is_named(tmp_path):
    saved(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "qwen3", ')
    refused(tmp_path, re.escape(str(tmp_path / "config.json")), "is not valid JSON", "line 1")


@pytest.mark.parametrize("field", ["hidden_size", "vocab_size", "num_hidden_layers"])
def test_a_config_without_a_size_names_it(tmp_path, field):
    saved(tmp_path)
    edit_config(tmp_path, **{field: DROP})
    refused(tmp_path, "config.json has no " + field, "save_pretrained")


@pytest.mark.parametrize("changes, pattern", [
    ({"hidden_size": "64"}, "hidden_size must be a positive whole number, got '64'"),
    ({"num_key_value_heads": 3}, "num_attention_heads=4 is not a multiple of num_key_value_heads=3"),
    ({"tie_word_embeddings": "yes"}, "tie_word_embeddings must be true or false"),
    ({"rms_norm_eps": -1}, "rms_norm_eps must be a positive finite number"),
    ({"rms_norm_eps": math.inf}, "rms_norm_eps must be a positive finite number, got inf"),
    ({"rope_parameters": {"rope_type": "default", "rope_theta": math.inf}}, "rope_theta must be a positive finite"),
    ({"rms_norm_eps": math.nan}, "rms_norm_eps must be a positive finite number, got nan"),
])
def test_a_config_with_a_bad_value_names_it(tmp_path, changes, pattern):
    saved(tmp_path)
    edit_config(tmp_path, **changes)
    refused(tmp_path, "config.json", pattern)


@pytest.mark.parametrize("config, pattern", [
    ({"attention_bias": True}, "attention_bias is true"),
    ({"hidden_act": "gelu"}, "hidden_act is 'gelu'"),
    ({"use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1}, "use_sliding_window is true"),
    ({"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}}, "rope scaling"),
], ids=["attention bias", "gelu", "sliding window", "linear rope"])
def test_a_config_the_engine_does_not_implement_is_refused(tmp_path, config, pattern):
    """transformers saves each of these happily; the engine would compute other logits, so it refuses."""
    saved(tmp_path, **config)
    message = refused(tmp_path, re.escape(str(tmp_path / "config.json")), pattern, "does not implement")
    assert "logits would be wrong" in message


def test_a_sliding_window_that_no_layer_uses_is_accepted(tmp_path):
    saved(tmp_path, use_sliding_window=True, sliding_window=4, max_window_layers=2)  # both layers full
    assert load_pretrained(tmp_path, dtype=torch.float32).shape.num_layers == 2


@pytest.mark.parametrize("changes, pattern", [
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "rope scaling"),
    ({"layer_types": ["full_attention", "sliding_attention"]}, "layer_types holds"),
    ({"quantization_config": {"quant_method": "fp8"}}, "quantization_config is set"),
])
def test_an_edited_config_the_engine_does_not_implement_is_refused(tmp_path, changes, pattern):
    saved(tmp_path)
    edit_config(tmp_path, **changes)
    refused(tmp_path, pattern)


def test_every_qwen3config_field_is_read_or_changes_no_logits():
    known = set(HF_FIELDS_READ) | set(HF_FIELDS_WITHOUT_EFFECT)
    assert set(Qwen3Config.__annotations__) <= known, set(Qwen3Config.__annotations__) - known


def test_missing_head_dim_means_what_it_means_to_transformers():
    cfg = SHAPE.to_hf_config_dict()
    del cfg["head_dim"]
    assert shape_from_hf_config(cfg).head_dim == Qwen3Config(**cfg).head_dim == 128


def test_a_stray_tensor_is_refused(tmp_path):
    saved(tmp_path)
    weights = tmp_path / "model.safetensors"
    state = load_file(weights)
    save_file({**state, "model.layers.0.self_attn.q_proj.bias": torch.zeros(64)}, weights)
    refused(tmp_path, r"unused model\.layers\.0\.self_attn\.q_proj\.bias", "no place for it")


def test_a_tied_head_must_be_the_table(tmp_path):
    hf = saved(tmp_path, tied=True)
    weights = tmp_path / "model.safetensors"
    state = load_file(weights)
    save_file({**state, "lm_head.weight": state["model.embed_tokens.weight"].clone()}, weights)
    assert torch.equal(load_pretrained(tmp_path, dtype=torch.float32).embed, hf.model.embed_tokens.weight)
    save_file({**state, "lm_head.weight": torch.randn(512, 64)}, weights)
    refused(tmp_path, "lm_head.weight differs from model.embed_tokens.weight")


def test_a_stale_second_safetensors_without_an_index_is_refused(tmp_path):
    saved(tmp_path)
    stale = {k: torch.full_like(v, float("nan")) for k, v in load_file(tmp_path / "model.safetensors").items()}
    save_file(stale, tmp_path / "model-old.safetensors")
    refused(tmp_path, r"holds 2 \.safetensors files \(model-old\.safetensors, model\.safetensors\)",
            "an index is needed")


def test_a_file_beside_the_shards_that_the_index_does_not_name_is_never_read(tmp_path):
    hf = tiny_hf(tied=False)
    hf.save_pretrained(tmp_path, max_shard_size="200KB")
    (tmp_path / "stale.safetensors").write_bytes(b"\xff" * 64)  # reading it would raise
    model = load_pretrained(tmp_path, dtype=torch.float32)
    assert torch.equal(model.lm_head, hf.lm_head.weight)


@pytest.mark.parametrize("shard", ["../outside/x.safetensors", "/abs/x.safetensors", "sub/../../x.safetensors",
                                   "config.json"])
def test_an_index_cannot_point_outside_the_folder(tmp_path, shard):
    folder = tmp_path / "ckpt"
    hf = tiny_hf(tied=False)
    hf.save_pretrained(folder, max_shard_size="200KB")
    outside = tmp_path / "outside"
    outside.mkdir()
    save_file({k: v.contiguous() for k, v in hf.state_dict().items()}, outside / "x.safetensors")
    index = json.loads((folder / INDEX_NAME).read_text())
    index["weight_map"]["model.norm.weight"] = shard
    (folder / INDEX_NAME).write_text(json.dumps(index))
    refused(folder, re.escape(repr(shard)), r"not a \.safetensors file inside", "no '\\.\\.', no absolute paths")


def test_shards_that_disagree_with_their_index_are_refused(tmp_path):
    hf = tiny_hf(tied=False)
    hf.save_pretrained(tmp_path, max_shard_size="200KB")
    index = json.loads((tmp_path / INDEX_NAME).read_text())
    first, second = sorted(set(index["weight_map"].values()))[:2]
    moved = next(name for name, shard in index["weight_map"].items() if shard == first)
    index["weight_map"][moved] = second
    (tmp_path / INDEX_NAME).write_text(json.dumps(index))
    refused(tmp_path, re.escape(first), re.escape(moved), "does not place there", "different saves")


def test_an_index_that_is_not_json_or_has_no_weight_map_is_named(tmp_path):
    hf = tiny_hf(tied=False)
    hf.save_pretrained(tmp_path, max_shard_size="200KB")
    (tmp_path / INDEX_NAME).write_text("{")
    refused(tmp_path, re.escape(str(tmp_path / INDEX_NAME)), "not valid JSON")
    (tmp_path / INDEX_NAME).write_text(json.dumps({"metadata": {}}))
    refused(tmp_path, "has no weight_map")


def test_every_checkpoint_error_is_a_value_error():
    assert issubclass(CheckpointError, ValueError) and issubclass(NotQwen3Error, CheckpointError)


def test_shards_in_a_subfolder_named_by_the_index_load(tmp_path):
    """transformers loads an index whose shard names lead into a subfolder; so does the book."""
    hf = tiny_hf(tied=False)
    hf.save_pretrained(tmp_path, max_shard_size="200KB")
    (tmp_path / "weights").mkdir()
    index = json.loads((tmp_path / INDEX_NAME).read_text())
    for shard in set(index["weight_map"].values()):
        (tmp_path / shard).rename(tmp_path / "weights" / shard)
    index["weight_map"] = {name: f"weights/{shard}" for name, shard in index["weight_map"].items()}
    (tmp_path / INDEX_NAME).write_text(json.dumps(index))
    model = load_pretrained(tmp_path, dtype=torch.float32)
    assert torch.equal(model.lm_head, hf.lm_head.weight)


@pytest.mark.parametrize("dtype", [torch.int32, torch.bool, torch.int8])
def test_an_integer_or_bool_tensor_where_weights_belong_is_named(tmp_path, dtype):
    saved(tmp_path)
    weights = tmp_path / "model.safetensors"
    state = load_file(weights)
    name = "model.layers.0.mlp.up_proj.weight"
    state[name] = torch.ones_like(state[name], dtype=dtype)
    save_file(state, weights, metadata={"format": "pt"})
    refused(tmp_path, re.escape(name), "floating-point", "download the original weights")
