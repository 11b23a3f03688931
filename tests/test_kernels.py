"""The book's Triton kernels compute what the plain step computes.

Without a GPU they run in Triton's CPU interpreter (tests/conftest.py turns it on), in
float32 on tiny odd shapes; on a GPU the same tests run compiled, and the `gpu` tests add
bf16 on the real 0.6B layer shape and graph replay.
"""
import math
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from floorlab.core.shapes import Qwen3Shape  # noqa: E402
from floorlab.engine.fused import relative_error  # noqa: E402
from floorlab.engine.kernels import (GEMV_NAMES, AttentionConfig, GemvConfig, default_config, gemv,  # noqa: E402
                                     how_to_get_triton, kernels_unavailable, shape_kwargs, triton_step)
from floorlab.engine.model import build_model  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# no Triton here (none installed, or no wheel for this platform) or an interpreter that cannot run the kernels
WHY_NOT = kernels_unavailable(DEVICE)
if WHY_NOT:
    pytest.skip(WHY_NOT, allow_module_level=True)

GQA_TIED = Qwen3Shape(64, 96, 2, 4, 2, 16, 97, True, rope_theta=10000.0, name="gqa-tied")
MHA_UNTIED = Qwen3Shape(64, 96, 2, 2, 2, 16, 97, False, rope_theta=10000.0, name="mha-untied")
SMALL = Qwen3Shape(hidden_size=1024, intermediate_size=3072, num_layers=4, num_heads=16, num_kv_heads=8,
                   head_dim=128, vocab_size=151936, tie_word_embeddings=True, name="qwen3-0.6b-4-layers")
MAX_REL_ERR = 1e-5
LIB = Path(__file__).resolve().parents[1] / "lib"


def _spread(model, seed=0):
    """O(1) activations and non-trivial norms, so a wrong rotation or norm shows in the logits."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            new = 1.0 + 0.3 * torch.randn(p.shape, generator=gen) if p.ndim == 1 else \
                torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1])
            p.copy_(new)
    return model


def _model(shape, max_batch=4, max_context=40):
    return _spread(build_model(shape, device=DEVICE, dtype=torch.float32, max_batch=max_batch,
                               max_context=max_context))


# ---------------------------------------------------------------- (a) the GEMVs

@pytest.mark.parametrize("batch, n, k, kwargs", [
    (1, 37, 64, {}),
    (3, 97, 96, {"block_k": 32, "rows_per_program": 8}),
    (3, 64, 96, {"block_k": 16, "split_k": 3}),
    (3, 97, 96, {"block_k": 32, "rows_per_program": 16, "dot": True}),
    (2, 40, 64, {"block_k": 16, "rows_per_program": 32, "split_k": 2, "dot": True}),
    (3, 97, 96, {"block_k": 16, "rows_per_program": 16, "dot": True, "num_stages": 5}),
    (3, 97, 96, {"block_k": 32, "rows_per_program": 64, "dot": True, "swap_ab": True, "num_warps": 4}),
    (2, 64, 96, {"block_k": 16, "rows_per_program": 16, "split_k": 2, "dot": True, "swap_ab": True}),
    (3, 97, 96, {"block_k": 64, "rows_per_program": 2, "tile_sums": True}),
    (3, 97, 96, {"block_k": 32, "rows_per_program": 4, "row_loop": True}),
    (2, 64, 96, {"block_k": 32, "rows_per_program": 2, "split_k": 2, "row_loop": True}),
])
def test_gemv_matches_torch(batch, n, k, kwargs):
    gen = torch.Generator().manual_seed(batch + n)
    x, w = torch.randn(batch, k, generator=gen).to(DEVICE), torch.randn(n, k, generator=gen).to(DEVICE)
    y = gemv(x, w, **kwargs)
    assert y.shape == (batch, n) and y.dtype == torch.float32
    assert relative_error(y, x @ w.T) < MAX_REL_ERR


@pytest.mark.parametrize("split_k, tile_sums, row_loop, swap_ab", [
    (1, False, False, False), (2, False, False, False), (1, True, False, False), (1, False, True, False),
    (2, False, True, False), (1, False, False, True), (2, False, False, True)])
def test_fused_epilogues_match_torch(split_k, tile_sums, row_loop, swap_ab):
    from floorlab.engine.fused import rms_norm
    from floorlab.engine.kernels.matvec import launch_gemv

    gen = torch.Generator().manual_seed(split_k)
    x, res = torch.randn(3, 96, generator=gen), torch.randn(3, 33, generator=gen)
    w, norm = torch.randn(66, 96, generator=gen), 1 + 0.3 * torch.randn(96, generator=gen)
    x, res, w, norm = (t.to(DEVICE) for t in (x, res, w, norm))
    dot = (split_k == 2 and not row_loop) or swap_ab  # the tensor-core tiles, their batch padded to 16 rows
    config = GemvConfig(rows_per_program=16 if dot else 2, block_k=32, split_k=split_k, dot=dot, tile_sums=tile_sums,
                        row_loop=row_loop, swap_ab=swap_ab)
    out = launch_gemv(x, w[:33], res.clone(), config=config, residual=None, norm_weight=norm, eps=1e-6)
    assert relative_error(out, rms_norm(x, norm, 1e-6) @ w[:33].T) < MAX_REL_ERR
    inplace = res.clone()
    launch_gemv(x, w[:33], inplace, config=config, residual=inplace)
    assert relative_error(inplace, res + x @ w[:33].T) < MAX_REL_ERR
    if split_k == 1:
        out = launch_gemv(x, w, torch.empty_like(res), config=config, swiglu=True)
        gate, up = (x @ w.T).chunk(2, dim=-1)
        assert relative_error(out, torch.nn.functional.silu(gate) * up) < MAX_REL_ERR


# ---------------------------------------------------------------- (b, c) the whole step and its cache writes

def _compare_with_plain(model, tokens, positions, config=None):
    """Run both steps from the same cache; return (rel err of logits, max |cache difference|)."""
    model.prefill(torch.randint(0, model.shape.vocab_size, (tokens.shape[0], 6), device=DEVICE,
                                generator=torch.Generator(DEVICE).manual_seed(1)))
    k0, v0 = model.k_cache.clone(), model.v_cache.clone()
    expected = model.decode_step(tokens, positions)
    k_plain, v_plain = model.k_cache.clone(), model.v_cache.clone()
    model.k_cache.copy_(k0)
    model.v_cache.copy_(v0)
    got = triton_step(model, config=config)(tokens, positions)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    cache_diff = max((model.k_cache - k_plain).abs().max().item(), (model.v_cache - v_plain).abs().max().item())
    return relative_error(got, expected), cache_diff


def test_step_gqa_tied_rows_at_different_positions():
    model = _model(GQA_TIED)
    tokens, positions = (torch.tensor(v, device=DEVICE) for v in ([5, 7, 96], [6, 3, 37]))
    err, cache_diff = _compare_with_plain(model, tokens, positions)
    assert err < MAX_REL_ERR
    assert cache_diff < 1e-5


def test_step_mha_untied_batch_1_with_split_context_and_split_k():
    model = _model(MHA_UNTIED)
    base = default_config(1)
    config = replace(base, attention=AttentionConfig(block_t=16, splits=3),
                     down=GemvConfig(rows_per_program=2, block_k=32, split_k=3))
    tokens, positions = (torch.tensor(v, device=DEVICE) for v in ([11], [21]))
    err, cache_diff = _compare_with_plain(model, tokens, positions, config)
    assert err < MAX_REL_ERR
    assert cache_diff < 1e-5


def test_step_with_every_gemv_on_swapped_tensor_core_operands():
    model = _model(GQA_TIED)
    swapped = GemvConfig(rows_per_program=16, block_k=32, num_stages=4, dot=True, swap_ab=True)
    config = default_config(3)
    for name in GEMV_NAMES:
        config = config.with_gemv(name, replace(swapped, split_k=2 if name == "down" else 1))
    tokens, positions = (torch.tensor(v, device=DEVICE) for v in ([5, 7, 96], [6, 3, 37]))
    err, cache_diff = _compare_with_plain(model, tokens, positions, config)
    assert err < MAX_REL_ERR
    assert cache_diff < 1e-5


@pytest.mark.parametrize("residual, dot", [(False, False), (True, False), (True, True)])
def test_fused_reduce_adds_the_splits_as_the_reduce_kernel_does_and_leaves_the_counters_at_zero(residual, dot):
    from floorlab.engine.kernels.matvec import gemv_counts, launch_gemv

    gen = torch.Generator().manual_seed(7)
    x, res, w = (torch.randn(*size, generator=gen).to(DEVICE) for size in ((3, 96), (3, 40), (40, 96)))
    config = GemvConfig(rows_per_program=16, block_k=16, split_k=3, dot=dot, swap_ab=dot)
    counts = gemv_counts(8, DEVICE)
    outs = []
    for fused in (False, True, True):  # the second fused run reuses the counters the first one left behind
        out = res.clone()
        launch_gemv(x, w, out, config=replace(config, fused_reduce=fused), residual=out if residual else None,
                    counts=counts)
        outs.append(out)
    expected = (res if residual else 0) + x @ w.T
    assert relative_error(outs[0], expected) < MAX_REL_ERR
    assert torch.equal(outs[1], outs[0]) and torch.equal(outs[2], outs[0])  # the same sums in the same order
    assert not counts.any()


@pytest.mark.parametrize("swiglu", [False, True])
def test_a_split_gemv_scales_its_added_sums_by_the_whole_rows_norm(swiglu):
    """Each split stores the sum of squares of its own K range; the reduce scales the total."""
    from floorlab.engine.fused import rms_norm
    from floorlab.engine.kernels.matvec import gemv_counts, launch_gemv

    gen = torch.Generator().manual_seed(9)
    x, w = torch.randn(3, 96, generator=gen).to(DEVICE), torch.randn(80, 96, generator=gen).to(DEVICE)
    norm = (1 + 0.3 * torch.randn(96, generator=gen)).to(DEVICE)
    config = GemvConfig(rows_per_program=16, block_k=16, split_k=3, dot=True, swap_ab=True)
    counts, outs = gemv_counts(8, DEVICE), []
    for fused in (True,) if swiglu else (False, True):  # SwiGLU splits only with fused_reduce
        out = torch.empty(3, 40 if swiglu else 80, device=DEVICE)
        outs.append(launch_gemv(x, w, out, config=replace(config, fused_reduce=fused), norm_weight=norm,
                                eps=1e-6, swiglu=swiglu, counts=counts))
    y = rms_norm(x, norm, 1e-6) @ w.T
    if swiglu:
        gate, up = y.chunk(2, dim=-1)
        y = torch.nn.functional.silu(gate) * up
    assert relative_error(outs[0], y) < MAX_REL_ERR
    assert torch.equal(outs[-1], outs[0]) and not counts.any()  # both reduces: the same sums in the same order


def test_a_split_swiglu_gemv_adds_gate_and_up_in_its_last_split():
    from floorlab.engine.kernels.matvec import gemv_counts, launch_gemv

    gen = torch.Generator().manual_seed(8)
    x, w = torch.randn(3, 96, generator=gen).to(DEVICE), torch.randn(80, 96, generator=gen).to(DEVICE)
    config = GemvConfig(rows_per_program=16, block_k=16, split_k=3, dot=True, swap_ab=True)
    with pytest.raises(ValueError, match="needs fused_reduce=True"):
        launch_gemv(x, w, torch.empty(3, 40, device=DEVICE), config=config, swiglu=True)
    counts, outs = gemv_counts(4, DEVICE), []
    for _ in range(2):
        outs.append(launch_gemv(x, w, torch.empty(3, 40, device=DEVICE), config=replace(config, fused_reduce=True),
                                swiglu=True, counts=counts))
    gate, up = (x @ w.T).chunk(2, dim=-1)
    assert relative_error(outs[0], torch.nn.functional.silu(gate) * up) < MAX_REL_ERR
    assert torch.equal(outs[1], outs[0]) and not counts.any()


def test_fused_reduce_needs_splits_and_enough_counters():
    from floorlab.engine.kernels.matvec import gemv_counts, launch_gemv

    with pytest.raises(ValueError, match="pass split_k >= 2"):
        GemvConfig(fused_reduce=True).check()
    x, w = torch.zeros(2, 64, device=DEVICE), torch.zeros(64, 64, device=DEVICE)
    config = GemvConfig(rows_per_program=16, block_k=16, split_k=2, fused_reduce=True)
    with pytest.raises(ValueError, match=re.escape("counts must be gemv_counts(4) or longer")):
        launch_gemv(x, w, torch.empty(2, 64, device=DEVICE), config=config, counts=gemv_counts(3, DEVICE))


def test_step_with_split_gemvs_reducing_in_their_last_split():
    model = _model(MHA_UNTIED)
    config = default_config(3)
    for name in GEMV_NAMES:
        config = config.with_gemv(name, GemvConfig(rows_per_program=16, block_k=16, split_k=3, dot=True,
                                                   fused_reduce=True))
    tokens, positions = (torch.tensor(v, device=DEVICE) for v in ([5, 7, 96], [6, 3, 37]))
    err, cache_diff = _compare_with_plain(model, tokens, positions, config)
    assert err < MAX_REL_ERR
    assert cache_diff < 1e-5


def test_split_attention_merges_in_its_last_split_and_leaves_the_counters_at_zero():
    from floorlab.engine.kernels.attention import attention_counts, launch_attention

    model = _model(GQA_TIED)
    s, layer = model.shape, model.layers[0]
    gen = torch.Generator().manual_seed(3)
    qkv = torch.randn(3, (s.num_heads + 2 * s.num_kv_heads) * s.head_dim, generator=gen).to(DEVICE)
    positions = torch.tensor([0, 17, 39], device=DEVICE)  # one split holds all of row 0; row 2 fills the cache
    outs, counts = [], attention_counts(3, s.num_kv_heads, DEVICE)
    for splits in (1, 4, 4):  # the second split run reuses the counters the first one left behind
        out = torch.empty(3, s.num_heads * s.head_dim, device=DEVICE)
        launch_attention(qkv, positions, layer.q_norm, layer.k_norm, model.rope_cos, model.rope_sin_signed,
                         model.k_cache[0], model.v_cache[0], out, num_heads=s.num_heads,
                         num_kv_heads=s.num_kv_heads, eps=s.rms_norm_eps, config=AttentionConfig(16, splits),
                         counts=counts)
        outs.append(out)
    assert counts.tolist() == [0] * (3 * s.num_kv_heads)
    assert relative_error(outs[1], outs[0]) < MAX_REL_ERR
    assert torch.equal(outs[1], outs[2])


def test_step_matches_transformers():
    from floorlab.engine.hf import HFDecoder

    model = _model(GQA_TIED)
    hf = HFDecoder.from_decoder(model)
    gen = torch.Generator(DEVICE).manual_seed(2)
    prompt = torch.randint(0, GQA_TIED.vocab_size, (3, 9), device=DEVICE, generator=gen)
    token = hf.prefill(prompt)[:, -1].argmax(-1)
    model.prefill(prompt)
    positions = torch.full((3,), 9, device=DEVICE)
    expected = hf.decode_step(token, positions)
    assert relative_error(triton_step(model)(token, positions), expected) < 1e-4


# ---------------------------------------------------------------- (d) errors that say how to fix them

def test_a_row_loop_config_takes_neither_tensor_cores_nor_tile_sums():
    with pytest.raises(ValueError, match="row_loop=True"):
        GemvConfig(rows_per_program=16, block_k=32, dot=True, row_loop=True).check()
    with pytest.raises(ValueError, match="row_loop=True"):
        GemvConfig(tile_sums=True, row_loop=True).check()


def test_swapped_operands_need_the_tensor_cores():
    with pytest.raises(ValueError, match="swap_ab=True"):
        GemvConfig(swap_ab=True).check()


@pytest.mark.parametrize("stages", [0, 9, True, 2.0])
def test_num_stages_outside_one_to_eight_is_refused(stages):
    with pytest.raises(ValueError, match="num_stages must be a whole number from 1 to 8"):
        GemvConfig(num_stages=stages).check()


def test_default_config_at_batch_8_keeps_its_warpgroup_tiles_warpgroup_shaped():
    small = default_config(8)
    large = default_config(8, hidden_size=4096, attention_size=4096, intermediate_size=12288)
    for config in (small.qkv, small.gate_up, large.qkv, large.o_proj, large.gate_up, large.lm_head):
        assert config.swap_ab and config.dot and (config.rows_per_program, config.num_warps) == (64, 4)
        config.check()
    small.check(), large.check()
    assert small.qkv.split_k * small.qkv.block_k == 1024  # the 0.6B's qkv: one K tile per split, no loop
    # the 0.6B's gate_up splits K too, its last split adding up and applying SwiGLU: no reduce kernel
    assert small.gate_up.split_k * small.gate_up.block_k == 1024 and small.gate_up.fused_reduce
    assert not large.gate_up.fused_reduce and large.gate_up.split_k == 1
    assert small.lm_head.num_stages > 3 and large.lm_head.num_stages > 3  # pipelined K loops
    assert default_config(1).gate_up.num_stages == 3  # batch 1 loads whole rows: no K loop to pipeline


def test_default_config_at_batch_1_meets_each_weight_tile_one_x_row_at_a_time():
    """Batch 1 takes the row loop: 2-D products, so no operand changes layout through shared memory."""
    for config in (default_config(1), default_config(1, hidden_size=4096, attention_size=2048)):
        for name in ("qkv", "o_proj", "gate_up", "down", "lm_head"):
            part = getattr(config, name)
            assert part.row_loop and not (part.dot or part.tile_sums) and part.split_k == 1, name
    wide = default_config(1, hidden_size=4096, attention_size=4096, intermediate_size=12288)
    assert not wide.o_proj.row_loop  # (slower there on the H200) and the rest still row loops
    assert all(getattr(wide, name).row_loop for name in ("qkv", "gate_up", "down", "lm_head"))


def test_default_config_at_batch_8_gives_the_06b_one_k_tile_a_program_without_pipeline_stages():
    small = default_config(8)
    for name in ("qkv", "o_proj", "gate_up", "down"):
        part = getattr(small, name)
        assert part.num_stages == 1 and part.swap_ab, name
    assert small.o_proj.split_k * small.o_proj.block_k == 2048 and small.down.split_k * small.down.block_k == 3072
    tiny = default_config(8, hidden_size=64, attention_size=64, intermediate_size=128)
    assert tiny.check().gate_up.split_k == 1 and not tiny.gate_up.fused_reduce  # too short to split


def test_default_early_launch_is_on_where_it_was_timed_faster():
    assert default_config(1).early_launch and default_config(2, hidden_size=4096).early_launch
    assert default_config(8).early_launch  # the 0.6B's batch 8, with its split gate_up
    assert not default_config(8, hidden_size=4096, attention_size=4096, intermediate_size=12288).early_launch


def test_default_attention_splits_only_contexts_longer_than_one_tile():
    short, long = default_config(1, max_context=64).attention, default_config(1, max_context=520).attention
    assert short.splits == 1 and long.splits == -(-520 // long.block_t)
    assert default_config(8, max_context=112).attention.splits == 1


def test_bad_inputs_are_refused():
    model = _model(GQA_TIED, max_batch=2, max_context=16)
    step = triton_step(model)
    ok = torch.zeros(2, dtype=torch.long, device=DEVICE)
    with pytest.raises(ValueError, match="max_batch"):
        step(torch.zeros(3, dtype=torch.long, device=DEVICE), torch.zeros(3, dtype=torch.long, device=DEVICE))
    with pytest.raises(ValueError, match="one position per token"):
        step(ok, ok[:1])
    with pytest.raises(ValueError, match="integer"):
        step(ok.float(), ok)
    with pytest.raises(TypeError, match="build_model"):
        triton_step(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="split the down"):
        triton_step(model, config=replace(default_config(1), gate_up=GemvConfig(split_k=2)))
    with pytest.raises(ValueError, match="power of two"):
        gemv(torch.ones(1, 8, device=DEVICE), torch.ones(4, 8, device=DEVICE), block_k=48)
    with pytest.raises(ValueError, match="same K"):
        gemv(torch.ones(1, 8, device=DEVICE), torch.ones(4, 9, device=DEVICE))
    if DEVICE == "cpu":
        with pytest.raises(ValueError, match="pdl=None"):
            triton_step(model, pdl=True)


def test_missing_triton_and_cpu_without_interpreter_say_how_to_fix():
    script = (
        "import sys, torch\n"
        "from floorlab.engine.model import build_model\n"
        "from floorlab.core.shapes import Qwen3Shape\n"
        "model = build_model(Qwen3Shape(64, 96, 1, 4, 2, 16, 97, True), dtype=torch.float32, max_context=8)\n"
        "import floorlab.engine.kernels as k\n"
        "try:\n    k.triton_step(model)\nexcept RuntimeError as e:\n    print('CPU:', e)\n"
        "for name in [m for m in sys.modules if m.startswith(('triton', 'floorlab.engine.kernels.'))]:\n"
        "    del sys.modules[name]\n"
        "    vars(k).pop(name.rpartition('.')[2], None)\n"
        "sys.modules['triton'] = None\n"
        "try:\n    k.triton_step(model)\nexcept RuntimeError as e:\n    print('MISSING:', e)\n"
    )
    env = {**os.environ, "TRITON_INTERPRET": "0", "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": os.pathsep.join([str(LIB), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "CPU:" in done.stdout and "TRITON_INTERPRET=1" in done.stdout
    assert "MISSING:" in done.stdout and how_to_get_triton() in done.stdout


# ---------------------------------------------------------------- GPU

@pytest.mark.gpu
def test_bf16_step_matches_plain_on_the_real_layer_shape():
    torch.manual_seed(0)
    model = build_model(SMALL, device="cuda", max_batch=8, max_context=128)
    for batch in (1, 8):
        model.reset_cache()
        model.prefill(torch.randint(0, SMALL.vocab_size, (batch, 40), device="cuda"))
        tokens = torch.randint(0, SMALL.vocab_size, (batch,), device="cuda")
        positions = 40 - torch.arange(batch, device="cuda")  # rows at different positions
        k0, v0 = model.k_cache.clone(), model.v_cache.clone()
        expected = model.decode_step(tokens, positions)
        base = default_config(batch, max_context=model.max_context, **shape_kwargs(SMALL))
        fused = replace(base, attention=replace(base.attention, splits=1, o_proj_rows=32))
        for pdl, config in ((False, None), (None, None), (None, fused)):
            model.k_cache.copy_(k0)
            model.v_cache.copy_(v0)
            got = triton_step(model, pdl=pdl, config=config)(tokens, positions)
            assert relative_error(got, expected) <= 2e-2, (batch, pdl, config)


@pytest.mark.gpu
def test_graph_replay_is_bit_identical_at_buckets_1_and_8():
    from floorlab.engine.graphs import GraphRunner

    model = build_model(SMALL, device="cuda", max_batch=8, max_context=64)
    for o_proj_rows in (0, 32):  # attention and o_proj as two kernels, and as one
        configs = {b: default_config(b, max_context=model.max_context, **shape_kwargs(SMALL)) for b in (1, 8)}
        configs = {b: replace(c, attention=replace(c.attention, splits=1 if o_proj_rows else c.attention.splits,
                                                   o_proj_rows=o_proj_rows)) for b, c in configs.items()}
        steps = {b: triton_step(model, config=c) for b, c in configs.items()}
        runner = GraphRunner(model, buckets=(1, 8), step_fn=lambda t, p: steps[t.shape[0]](t, p))
        runner.capture()
        for batch in (1, 8):
            model.reset_cache()
            model.prefill(torch.randint(0, SMALL.vocab_size, (batch, 16), device="cuda"))
            tokens = torch.randint(0, SMALL.vocab_size, (batch,), device="cuda")
            positions = torch.full((batch,), 16, device="cuda")
            assert runner.check_bit_identical(tokens, positions), (o_proj_rows, batch, runner.last_max_abs_diff)


def test_kernel_sweep_runs_on_a_tiny_shape(tmp_path, capsys):
    from floorlab.tools.sweep import main
    from floorlab.core.files import load_json

    assert main(["--tiny", "--batches", "1", "--configs", "1", "--out", str(tmp_path / "sweep.json")]) == 0
    result = load_json(tmp_path / "sweep.json")
    assert result["errors"] == []
    assert {r["gemv"] for r in result["gemv_rows"]} == {"qkv", "o_proj", "gate_up", "down", "lm_head"}
    assert all(r.get("rel_err", 0.0) < 1e-4 for r in result["gemv_rows"])
    steps = {r["path"]: r for r in result["step_rows"]}
    assert steps["triton default"]["rel_err_vs_plain"] < 1e-4
    variants = result["variant_rows"]  # the step with one launch config changed at a time
    assert [r["variant"] for r in variants][0] == "default" and len({r["part"] for r in variants}) >= 2
    assert all(r["batch"] == 1 and r["vs_default"] > 0 for r in variants)
    assert "best config per GEMV" in capsys.readouterr().out


@pytest.mark.parametrize("flags, error", [
    (["--batches", "0"], "--batches must be a whole number >= 1, got 0"),
    (["--batches", "1", "0"], "--batches must be a whole number >= 1, got 0"),
    (["--batches", "x"], "--batches must be a whole number >= 1, got x; for example 1 or 8"),
    (["--repeats", "0"], "--repeats must be a whole number >= 1, got 0"),
    (["--repeats", "2.5"], "--repeats must be a whole number >= 1, got 2.5; for example 20"),
    (["--configs", "0"], "--configs must be a whole number >= 1, got 0"),
    (["--context", "0"], "--context must be a whole number >= 1, got 0"),
    (["--presets", "qwen3-9b"], "unknown preset 'qwen3-9b'; use one of: qwen3-0.6b"),
])
def test_kernel_sweep_refuses_bad_flags_before_it_times_anything(flags, error, capsys, monkeypatch):
    from floorlab.tools import sweep

    monkeypatch.setattr(sweep, "run_sweep", lambda **kw: pytest.fail("the sweep ran with a bad flag"))
    with pytest.raises(SystemExit) as exited:
        sweep.main(["--tiny", *flags])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "usage: python -m floorlab sweep" in err and f"error: argument {flags[0]}: {error}" in err


@pytest.mark.parametrize("kwargs, name", [({"batches": [1, 0]}, "every item of batches"), ({"batches": 8}, "batches"),
                                          ({"repeats": 0}, "repeats"), ({"limit": 0}, "limit"),
                                          ({"context": 2.5}, "context"), ({"presets": ["qwen3-9b"]}, "qwen3-9b")])
def test_run_sweep_refuses_what_no_sweep_can_use(kwargs, name, monkeypatch):
    from floorlab.tools import sweep

    monkeypatch.setattr(sweep, "measure_bandwidth", lambda *a, **kw: pytest.fail("the sweep ran"))
    with pytest.raises(ValueError, match=name):
        sweep.run_sweep(tiny=True, **kwargs)


def test_kernel_sweep_without_triton_says_how_to_install_it():
    script = ("import sys\nsys.modules['triton'] = None\n"
              "from floorlab.tools.sweep import main\nsys.exit(main(['--tiny']))\n")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": os.pathsep.join([str(LIB), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "error: the book's kernels need Triton" in done.stderr and how_to_get_triton() in done.stderr
    assert "Traceback" not in done.stderr


def test_the_floor_test_holds_a_time_to_its_bytes_unless_they_fit_in_the_cache(monkeypatch):
    from floorlab.core.roofline import BelowFloorError
    from floorlab.engine.kernels import timing

    assert timing.cache_bytes("cpu") >= 0  # read from /sys where Linux has it, else 0
    monkeypatch.setattr(timing, "cache_bytes", lambda device: 2**20)
    check = timing.check_timed
    assert check(1.0, 1e9, 1000.0, device="cpu") == 1.0  # 1 GB at 1000 GB/s: 1 ms, on the floor
    assert check(0.96, 1e9, 1000.0, device="cpu") == 0.96  # within the rule's allowance for noise
    with pytest.raises(BelowFloorError, match="below the floor: 0.500 ms for 1e.03 MB is 0.5× its floor"):
        check(0.5, 1e9, 1000.0, device="cpu")
    assert check(1e-6, 1e5, 1000.0, device="cpu") == 1e-6  # 100 kB sit in the 1 MiB cache: no floor
    with pytest.raises(BelowFloorError):  # unless a timed replay touches more than the cache holds
        check(1e-6, 1e5, 1000.0, device="cpu", working_bytes=28e5)


def test_kernel_sweep_fails_a_row_timed_below_its_floor_and_exits_non_zero(tmp_path, capsys, monkeypatch):
    from floorlab.core.files import load_json
    from floorlab.engine.kernels import timing
    from floorlab.tools import sweep

    # an impossibly fast timer (a nanosecond per GEMV), and a size row as fast on one of its ways; the
    # tiny shape's weights fit in any cache, where no floor applies: here the device has none
    monkeypatch.setattr(timing, "cache_bytes", lambda device: 0)
    monkeypatch.setattr(sweep, "time_per_call_ms", lambda *a, **kw: 1e-6)
    size_row = {"n": 16, "k": 64, "bytes": 4096, "programs": 4, "config": {}, "alone_us": 1e3, "alone_gbps": 0.004,
                "serial_us": 1e3, "serial_gbps": 0.004, "chained_us": 1e-6, "chained_gbps": 4e6}
    monkeypatch.setattr(sweep, "sweep_sizes", lambda *a, **kw: [dict(size_row)])
    out = tmp_path / "sweep.json"
    assert sweep.main(["--tiny", "--batches", "1", "--configs", "1", "--skip-steps", "--out", str(out)]) == 1
    result = load_json(out)
    assert result["gemv_rows"] and all("below the floor" in r["error"] for r in result["gemv_rows"])
    assert not any(key in r for r in result["gemv_rows"] for key in ("us", "gbps", "pct_read", "best"))
    assert result["best"] == {}  # a row that failed never wins
    (size,) = result["size_rows"]
    assert "chained" in size["error"] and "below the floor" in size["error"] and "alone_gbps" not in size
    assert len(result["errors"]) == len(result["gemv_rows"]) + 1
    text = capsys.readouterr().out
    assert f"{len(result['errors'])} variants failed:" in text and "error: qkv b1" in text


@pytest.mark.parametrize("batch", [1, 8])
def test_layer_kernel_table_times_each_kernel_with_the_steps_own_config(batch):
    from floorlab.engine.kernels import layer_kernel_rows

    model = _model(GQA_TIED, max_batch=8)
    config = default_config(batch, max_context=model.max_context, **shape_kwargs(GQA_TIED))
    rows = layer_kernel_rows(model, torch.full((batch,), 12, device=DEVICE), read_gbps=100.0, warmup=0,
                             repeats=1)
    assert [r.kernel for r in rows] == ["qkv", "attention", "o_proj", "gate_up", "down", "lm_head"]
    for r in rows:
        expected = config.attention if r.kernel == "attention" else getattr(config, r.kernel)
        assert r.config == expected.to_dict()
        assert r.us > 0 and r.bytes > 0


def test_layer_kernel_table_shares_one_counter_buffer_as_the_step_does(monkeypatch):
    """A split GEMV that adds its splits up itself must not zero fresh counters at every launch of the table."""
    from floorlab.engine.kernels import layer_kernel_rows, matvec

    made = []
    real = matvec.gemv_counts
    monkeypatch.setattr(matvec, "gemv_counts", lambda *a, **kw: made.append(a) or real(*a, **kw))
    model = _model(GQA_TIED, max_batch=8)
    split = GemvConfig(rows_per_program=16, block_k=16, split_k=2, dot=True, fused_reduce=True)
    config = replace(default_config(8, max_context=model.max_context, **shape_kwargs(GQA_TIED)),
                     **{name: split for name in ("qkv", "o_proj", "gate_up", "down")})
    layer_kernel_rows(model, torch.full((8,), 12, device=DEVICE), read_gbps=100.0, warmup=0, repeats=1,
                      config=config)
    assert len(made) == 1  # the table's own buffer, shared by every launch


def test_layer_kernel_table_times_unsplit_gemvs_again_without_the_pdl_wait(monkeypatch):
    """Where PDL is on, each GEMV that does not split K is timed a second time in PDL_NO_WAIT mode;
    a split one is not (its counters need the wait). Without PDL (the interpreter) nothing is."""
    from floorlab.engine.kernels import format_layer_table, layer_kernel_rows, layer_rows, matvec, runtime
    from floorlab.engine.kernels.runtime import PDL_NO_WAIT

    model = _model(GQA_TIED, max_batch=8)
    positions = torch.full((1,), 12, device=DEVICE)
    monkeypatch.setattr(runtime, "pdl_supported", lambda device: False)  # as in the interpreter, on any card
    plain = layer_kernel_rows(model, positions, read_gbps=100.0, warmup=0, repeats=1)
    assert all(r.us_no_wait is None for r in plain)  # no PDL
    assert "no wait" not in format_layer_table(plain, 2)

    modes = []
    real = matvec.launch_gemv

    def recorded(*args, config, pdl=0, **kw):  # run without PDL, which the interpreter lacks
        modes.append((config.split_k, pdl))
        return real(*args, config=config, pdl=0, **kw)

    monkeypatch.setattr(matvec, "launch_gemv", recorded)
    monkeypatch.setattr(runtime, "pdl_supported", lambda device: True)
    monkeypatch.setattr(layer_rows, "time_attention", lambda *a, **kw: {
        "us": 1.0, "bytes": 10, "gbps": 0.01, "pct_floor_bw": 0.01})
    monkeypatch.setattr(layer_rows, "empty_launch_us", lambda *a, **kw: None)  # (its own test below)
    split = GemvConfig(rows_per_program=16, block_k=16, split_k=2, dot=True)
    config = default_config(1, max_context=model.max_context, **shape_kwargs(GQA_TIED)).with_gemv("qkv", split)
    rows = {r.kernel: r for r in layer_kernel_rows(model, positions, read_gbps=100.0, warmup=0, repeats=1,
                                                  config=config)}
    assert rows["qkv"].us_no_wait is None and rows["attention"].us_no_wait is None
    for name in ("o_proj", "gate_up", "down"):
        assert rows[name].us_no_wait > 0 and rows[name].pct_read_no_wait > 0
    assert (2, PDL_NO_WAIT) not in modes and (1, PDL_NO_WAIT) in modes
    table = format_layer_table(list(rows.values()), 2).splitlines()
    assert table[0].endswith("% no wait") and table[1].split()[-1] == "-"  # qkv: split, not timed
    assert table[-1].startswith("% no wait: launched without the PDL wait")


def test_parity_with_plain_leaves_the_cache_as_the_plain_step_leaves_it():
    from floorlab.studies.kernels import parity_with_plain
    from floorlab.engine.kernels import kernels_unavailable

    assert kernels_unavailable(DEVICE) == ""
    model = _model(GQA_TIED)
    model.prefill(torch.randint(0, GQA_TIED.vocab_size, (2, 6), device=DEVICE,
                                generator=torch.Generator(DEVICE).manual_seed(2)))
    tokens, positions = torch.tensor([3, 9], device=DEVICE), torch.tensor([6, 6], device=DEVICE)
    before = model.k_cache.clone()
    assert parity_with_plain(model, tokens, positions) < MAX_REL_ERR
    written = (model.k_cache != before).nonzero()[:, 3].unique().tolist()  # the positions written
    assert written == [6]


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU floorlab leaves Triton compiled")
def test_importing_floorlab_turns_the_interpreter_on_without_a_gpu_unless_told_otherwise():
    probe = "import os, floorlab; print(os.environ.get('TRITON_INTERPRET'))"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(LIB)
    for preset, expected in ((None, "1"), ("0", "0")):
        run_env = dict(env, **({"TRITON_INTERPRET": preset} if preset else {}))
        done = subprocess.run([sys.executable, "-c", probe], env=run_env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip() == expected


# ---------------------------------------------------------------- attention fused into o_proj

@pytest.mark.parametrize("shape, rows, tokens, positions", [
    (GQA_TIED, 16, [5, 7, 96], [6, 3, 37]),  # rows at different positions, more than one tile of context
    (MHA_UNTIED, 32, [11], [21]),
])
def test_step_with_attention_fused_into_o_proj_matches_plain_and_leaves_the_counters_at_zero(
        shape, rows, tokens, positions, monkeypatch):
    from floorlab.engine.kernels import attention_o_proj

    made = []
    real = attention_o_proj.fused_counts
    monkeypatch.setattr(attention_o_proj, "fused_counts", lambda *a, **kw: made.append(real(*a, **kw)) or made[-1])
    from floorlab.engine.kernels import step as step_module
    monkeypatch.setattr(step_module, "fused_counts", attention_o_proj.fused_counts)
    model = _model(shape)
    base = default_config(len(tokens))
    config = replace(base, attention=AttentionConfig(block_t=16, o_proj_rows=rows))
    tokens, positions = (torch.tensor(v, device=DEVICE) for v in (tokens, positions))
    err, cache_diff = _compare_with_plain(model, tokens, positions, config)
    assert err < MAX_REL_ERR
    assert cache_diff < 1e-5
    assert len(made) == 1 and made[0].numel() == -(-shape.hidden_size // rows) and not made[0].any()


def test_fused_o_proj_attends_the_whole_context_in_one_split():
    with pytest.raises(ValueError, match="splits=1"):
        AttentionConfig(splits=2, o_proj_rows=16).check()
    with pytest.raises(ValueError, match="power of two"):
        AttentionConfig(o_proj_rows=24).check()


def test_grid_barrier_counts_every_program_each_round_and_refuses_a_grid_the_interpreter_cannot_finish():
    """A launch of barriers counts programs x rounds arrivals; timed, a barrier costs what a launch of many
    takes beyond a launch of one, over the rounds between. In the interpreter only one program can finish."""
    from floorlab.engine.kernels import grid_barrier_us
    from floorlab.engine.kernels.boundary import grid_barriers
    from floorlab.engine.kernels.runtime import interpreting

    counter = torch.full((1,), 99, dtype=torch.int32, device=DEVICE)
    programs = 1 if interpreting() else torch.cuda.get_device_properties(0).multi_processor_count
    assert int(grid_barriers(counter, 5, programs, 4)) == 5 * programs  # zeroed first
    timed = grid_barrier_us(programs, 4, rounds=4, device=DEVICE, warmup=0, repeats=2)
    assert set(timed) == {"us", "p10_us", "p90_us", "programs", "rounds"}
    assert timed["programs"] == programs and timed["rounds"] == 4 and timed["p10_us"] <= timed["p90_us"]
    if interpreting():
        with pytest.raises(ValueError, match="pass programs=1"):
            grid_barriers(counter, 1, 2, 4)


def test_layer_kernel_table_times_each_grid_launched_empty(monkeypatch):
    """Each row carries its grid launched empty, chained once per layer as the step chains it, with the
    step's PDL mode; the table shows the column and the launches' sum a layer; stored rows without it
    read and write back as before."""
    from floorlab.engine.kernels import format_layer_table, kernel_rows, layer_kernel_rows, layer_rows
    from floorlab.engine.kernels.layer_rows import launch_grids
    from floorlab.engine.kernels.matvec import gemv_grid

    model = _model(GQA_TIED, max_batch=8)
    config = default_config(1, max_context=model.max_context, **shape_kwargs(GQA_TIED))
    grids = launch_grids(GQA_TIED, 1, config)
    assert grids["attention"] == (GQA_TIED.num_kv_heads * config.attention.splits, config.attention.num_warps)
    (blocks, splits), _, _ = gemv_grid(GQA_TIED.intermediate_size, GQA_TIED.hidden_size, config.gate_up)
    assert grids["gate_up"] == (blocks * splits, config.gate_up.num_warps)  # SwiGLU: the gate's rows
    asked = []
    real = layer_rows.empty_launch_us
    monkeypatch.setattr(layer_rows, "empty_launch_us", lambda *a, **kw: asked.append((a, kw)) or real(*a, **kw))
    rows = layer_kernel_rows(model, torch.full((1,), 12, device=DEVICE), read_gbps=100.0, warmup=0, repeats=1)
    assert all(r.empty_us > 0 for r in rows)
    assert sorted(a for a, _ in asked) == sorted(grids[r.kernel] for r in rows)
    assert all(kw["links"] == GQA_TIED.num_layers and kw["pdl"] == 0 for _, kw in asked)  # no PDL on a CPU
    table = format_layer_table(rows, GQA_TIED.num_layers).splitlines()
    assert table[0].endswith("µs empty") and table[-1].startswith("µs empty: the same grid launched empty")
    stored = [r.to_dict() for r in rows]
    assert all("empty_us" in d for d in stored) and kernel_rows(stored) == rows
    older = [{k: v for k, v in d.items() if k != "empty_us"} for d in stored]
    assert [r.to_dict() for r in kernel_rows(older)] == older
    assert "µs empty" not in format_layer_table(older, GQA_TIED.num_layers)
