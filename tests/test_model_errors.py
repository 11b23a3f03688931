"""Bad input fails with an error that names the problem and says how to fix it."""
import json
import pickle

import pytest
import torch

from floorlab.engine.hf import HFDecoder
from floorlab.engine.model import build_model
from floorlab.core.shapes import PRESETS, NotQwen3Error, Qwen3Shape, UnknownPresetError, get_shape, shape_from_hf_config
from floorlab.engine.weights import CheckpointError, load_pretrained

TINY = Qwen3Shape(64, 128, 1, 4, 2, 16, 100, True, name="tiny")


def write_config(folder, **overrides):
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({**TINY.to_hf_config_dict(), **overrides}))
    return folder


def test_unknown_preset_lists_known_names():
    with pytest.raises(UnknownPresetError) as err:
        get_shape("qwen3-0.5b")
    assert isinstance(err.value, ValueError)
    assert all(name in str(err.value) for name in PRESETS)
    assert "Qwen3Shape" in str(err.value)


def test_folder_without_config(tmp_path):
    with pytest.raises(CheckpointError, match="no config.json") as err:
        load_pretrained(tmp_path)
    assert "save_pretrained" in str(err.value)


def test_folder_with_config_but_no_safetensors(tmp_path):
    write_config(tmp_path)
    with pytest.raises(CheckpointError, match=r"no \*\.safetensors") as err:
        load_pretrained(tmp_path)
    assert "model.safetensors" in str(err.value) and "save_pretrained" in str(err.value)


def test_config_that_is_not_qwen3(tmp_path):
    write_config(tmp_path, model_type="llama", architectures=["LlamaForCausalLM"])
    (tmp_path / "model.safetensors").write_bytes(b"unused")
    with pytest.raises(NotQwen3Error) as err:
        load_pretrained(tmp_path)
    assert "'llama'" in str(err.value) and "qwen3" in str(err.value) and "Qwen/Qwen3-0.6B" in str(err.value)
    with pytest.raises(NotQwen3Error):
        shape_from_hf_config({"model_type": "qwen2"})


def test_pickle_checkpoint_is_refused_unread(tmp_path, monkeypatch):
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x04 these bytes are never read")

    def no_unpickling(*args, **kwargs):
        raise AssertionError("the loader tried to unpickle a checkpoint")

    monkeypatch.setattr(torch, "load", no_unpickling)
    monkeypatch.setattr(pickle, "load", no_unpickling)
    monkeypatch.setattr(pickle, "loads", no_unpickling)
    with pytest.raises(CheckpointError, match="pytorch_model.bin") as err:
        load_pretrained(tmp_path)
    message = str(err.value)
    assert "unpickle" in message and "save_pretrained" in message and "safetensors" in message


def test_index_naming_a_missing_shard(tmp_path):
    write_config(tmp_path)
    index = {"weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match="model-00001-of-00002.safetensors") as err:
        load_pretrained(tmp_path)
    assert "download every shard" in str(err.value)


def test_path_that_is_not_a_folder(tmp_path):
    with pytest.raises(CheckpointError, match="not a folder") as err:
        load_pretrained(tmp_path / "missing")
    assert "config.json" in str(err.value)


def test_incomplete_state_dict_names_the_missing_weights():
    model = build_model(TINY, dtype=torch.float32)
    state = {k: v.clone() for k, v in model.hf_state_dict().items()}
    del state["model.layers.0.mlp.up_proj.weight"]
    state["model.norm.weight"] = torch.ones(3)
    with pytest.raises(ValueError, match="missing model.layers.0.mlp.up_proj.weight") as err:
        model.load_state_dict_hf(state)
    assert "model.norm.weight has shape (3,)" in str(err.value)


@pytest.fixture(scope="module")
def decoders():
    ours = build_model(TINY, dtype=torch.float32, max_batch=2, max_context=8)
    return ours, HFDecoder.from_decoder(ours)


@pytest.mark.parametrize("which", [0, 1], ids=["ours", "transformers"])
def test_batch_larger_than_max_batch(decoders, which):
    model = decoders[which]
    with pytest.raises(ValueError, match=r"max_batch=2.*max_batch>=3"):
        model.prefill(torch.zeros(3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"max_batch>=3"):
        model.generate(torch.zeros(3, 4, dtype=torch.long), 2)
    with pytest.raises(ValueError, match=r"max_batch>=3"):
        model.decode_step(torch.zeros(3, dtype=torch.long), torch.zeros(3, dtype=torch.long))


@pytest.mark.parametrize("which", [0, 1], ids=["ours", "transformers"])
def test_context_larger_than_max_context(decoders, which):
    model = decoders[which]
    with pytest.raises(ValueError, match=r"max_context=8.*max_context>=9"):
        model.prefill(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match=r"max_context>=10"):
        model.generate(torch.zeros(1, 6, dtype=torch.long), 4)
    assert model.generate(torch.zeros(1, 6, dtype=torch.long), 2).shape == (1, 2)


def test_transformers_decode_needs_a_matching_prefill(decoders):
    _, hf = decoders
    hf.prefill(torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="call prefill with 2 rows first"):
        hf.decode_step(torch.zeros(2, dtype=torch.long), torch.full((2,), 3))


@pytest.mark.parametrize("kwargs, match", [({"max_batch": 0}, "max_batch"), ({"max_batch": -2}, "max_batch"),
                                           ({"max_context": 0}, "max_context"),
                                           ({"max_context": -1}, "max_context")])
def test_model_limits_must_be_positive(kwargs, match):
    with pytest.raises(ValueError, match=f"{match} must be a whole number >= 1"):
        build_model(TINY, dtype=torch.float32, **kwargs)


@pytest.mark.parametrize("which", [0, 1], ids=["ours", "transformers"])
def test_an_empty_batch_is_refused(decoders, which):
    with pytest.raises(ValueError, match="batch must be a whole number >= 1"):
        decoders[which].prefill(torch.zeros(0, 4, dtype=torch.long))


def test_a_decode_step_past_the_cache_says_how_big_to_build_it(decoders):
    ours, _ = decoders
    ours.prefill(torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"position 8 is outside the cache.*max_context>=9"):
        ours.decode_step(torch.zeros(1, dtype=torch.long), torch.tensor([8]))
    with pytest.raises(ValueError, match="outside the cache"):
        ours.decode_step(torch.zeros(1, dtype=torch.long), torch.tensor([-1]))
