"""Our decoder computes the same function as transformers' Qwen3ForCausalLM (float32, CPU, tiny shapes)."""
import math

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from floorlab.core.shapes import Qwen3Shape
from floorlab.engine.hf import HFDecoder
from floorlab.engine.model import build_model

MAX_REL_ERR = 1e-4
STEPS = 16

SHAPES = [  # heads / kv heads / head_dim / tied
    Qwen3Shape(64, 128, 2, 4, 2, 16, 500, True, rope_theta=10000.0, name="gqa2-tied"),
    Qwen3Shape(64, 128, 2, 4, 4, 32, 500, False, name="mha-untied"),
    Qwen3Shape(64, 96, 2, 8, 2, 16, 512, False, rope_theta=10000.0, name="gqa4-untied"),
    Qwen3Shape(64, 128, 2, 8, 2, 32, 500, True, name="gqa4-tied"),
]


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max()).item()


def spread_weights_(params, seed: int = 0) -> None:
    """Weights with O(1) activations and non-trivial norms, so a wrong rotation or norm shows in the logits."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in params:
            if p.ndim == 1:
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))


def make_pair(shape: Qwen3Shape, max_batch: int = 4):
    ours = build_model(shape, dtype=torch.float32, max_batch=max_batch, max_context=64)
    spread_weights_(ours.parameters())
    return ours, HFDecoder.from_decoder(ours)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_prefill_and_greedy_decode_match_transformers(shape):
    ours, hf = make_pair(shape)
    prompt = torch.randint(0, shape.vocab_size, (1, 7), generator=torch.Generator().manual_seed(1))
    a, b = ours.prefill(prompt), hf.prefill(prompt)
    assert a.shape == (1, 7, shape.vocab_size)
    assert rel_err(a, b) <= MAX_REL_ERR
    token = a[:, -1].argmax(-1)
    assert torch.equal(token, b[:, -1].argmax(-1))
    sequence = torch.cat([prompt, token[:, None]], dim=1)
    for step in range(STEPS):
        positions = torch.full((1,), 7 + step)
        a, b = ours.decode_step(token, positions), hf.decode_step(token, positions)
        assert a.shape == (1, shape.vocab_size)
        assert rel_err(a, b) <= MAX_REL_ERR, f"step {step}"
        token = a.argmax(-1)
        assert torch.equal(token, b.argmax(-1)), f"greedy tokens differ at step {step}"
        sequence = torch.cat([sequence, token[:, None]], dim=1)
    # independent of any cache: one full forward over the whole sequence
    with torch.no_grad():
        full = hf.model(sequence[:, :-1]).logits[:, -1]
    assert rel_err(a, full) <= MAX_REL_ERR
    assert len(set(sequence[0, 7:].tolist())) > 1, "greedy output is constant: the weights are too flat to test"


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_transformers_weights_load_into_ours(attn_implementation):
    shape = SHAPES[2]
    config = Qwen3Config(**shape.to_hf_config_dict(), dtype="float32")
    config._attn_implementation = attn_implementation
    torch.manual_seed(0)
    hf = Qwen3ForCausalLM(config).eval()
    spread_weights_(hf.parameters(), seed=5)
    ours = build_model(shape, dtype=torch.float32, max_context=64)
    ours.load_state_dict_hf(hf.state_dict())
    prompt = torch.randint(0, shape.vocab_size, (2, 12), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = hf(prompt).logits
    assert rel_err(ours.prefill(prompt), expected) <= MAX_REL_ERR
    ours.prefill(prompt[:, :11])
    last = ours.decode_step(prompt[:, 11].contiguous(), torch.full((2,), 11))
    assert rel_err(last, expected[:, -1]) <= MAX_REL_ERR


def test_batch_generate_matches_transformers():
    shape = SHAPES[3]
    ours, hf = make_pair(shape)
    prompt = torch.randint(0, shape.vocab_size, (3, 5), generator=torch.Generator().manual_seed(3))
    ours_tokens = ours.generate(prompt, STEPS)
    assert ours_tokens.shape == (3, STEPS)
    assert torch.equal(ours_tokens, hf.generate(prompt, STEPS))
    assert not torch.equal(ours_tokens[0], ours_tokens[1]), "rows should differ for different prompts"


def test_batch_rows_are_independent_with_own_positions():
    """Each row of a batched decode step gives the logits it gives alone, at its own position."""
    shape = SHAPES[0]
    ours, _ = make_pair(shape)
    gen = torch.Generator().manual_seed(4)
    prompts = [torch.randint(0, shape.vocab_size, (1, n), generator=gen) for n in (3, 6, 9)]
    alone = []
    for p in prompts:
        ours.prefill(p)
        alone.append(ours.decode_step(p[:, -1], torch.tensor([p.shape[1] - 1])))
    # rows sit at different positions: fill each row's cache by prefilling it alone into a batch of one,
    # then copy that row into place
    k_rows, v_rows = [], []
    for p in prompts:
        ours.reset_cache()
        ours.prefill(p[:, :-1])
        k_rows.append(ours.k_cache[:, 0].clone())
        v_rows.append(ours.v_cache[:, 0].clone())
    for row, (k, v) in enumerate(zip(k_rows, v_rows)):
        ours.k_cache[:, row] = k
        ours.v_cache[:, row] = v
    tokens = torch.stack([p[0, -1] for p in prompts])
    positions = torch.tensor([p.shape[1] - 1 for p in prompts])
    batched = ours.decode_step(tokens, positions)
    assert rel_err(batched, torch.cat(alone)) <= MAX_REL_ERR
