"""load_pretrained reads what transformers' save_pretrained writes, single-file and sharded."""
import json
import math

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from floorlab.core.shapes import Qwen3Shape
from floorlab.engine.weights import INDEX_NAME, load_pretrained

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
