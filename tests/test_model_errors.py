"""Bad input fails with an error that names the problem and says how to fix it."""
import json
import pickle

import pytest
import torch

from floorlab.engine.hf import HFDecoder
from floorlab.engine.model import build_model
from floorlab.core.shapes import PRESETS, NotQwen3Error, Qwen3Shape, UnknownPresetError, get_shape, shape_from_hf_config
from floorlab.engine.checkpoint import CheckpointError, load_pretrained

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


# ---------------------------------------------------------------- every bad decode input, every stepper

def _runners(ours):
    from floorlab.engine.buckets import PaddedEagerRunner
    from floorlab.studies.shared_buffers import StandInRunner

    stand_in = StandInRunner(ours, buckets=(1, 2))
    stand_in.capture()
    return {"stand-in": stand_in, "padded eager": PaddedEagerRunner(ours, buckets=(1, 2))}


@pytest.fixture(scope="module")
def steppers(decoders):
    """name -> (decode step, the engine under it or None): the engine, transformers and two runners."""
    ours, hf = decoders
    runners = _runners(ours)
    return {"engine": (ours.decode_step, ours), "transformers": (hf.decode_step, None),
            "stand-in": (runners["stand-in"].step, ours), "padded eager": (runners["padded eager"].step, ours)}


LONG = dict(dtype=torch.long)
BAD_STEPS = {  # (tokens, positions) for TINY (vocab 100), max_batch 2, max_context 8 -> what the error says
    "id equal to vocab": (lambda: (torch.tensor([100]), torch.tensor([3])), r"token id 100 is outside the "
                          r"vocabulary of 100 ids \(0\.\.99\)"),
    "negative id": (lambda: (torch.tensor([-1]), torch.tensor([3])), "token id -1 is negative"),
    "float tokens": (lambda: (torch.tensor([99.7]), torch.tensor([3])),
                     r"tokens has dtype torch.float32.*whole numbers.*not rounded"),
    "bool tokens": (lambda: (torch.tensor([True]), torch.tensor([3])), "tokens has dtype torch.bool"),
    "int16 tokens": (lambda: (torch.tensor([5], dtype=torch.int16), torch.tensor([3])),
                     r"tokens has dtype torch.int16.*torch.long or torch.int"),
    "float positions": (lambda: (torch.tensor([5]), torch.tensor([3.0])), "positions has dtype torch.float32"),
    "lengths differ": (lambda: (torch.tensor([5, 6]), torch.tensor([3])),
                       "tokens has 2 rows but positions has 1"),
    "2-D tokens": (lambda: (torch.tensor([[5]]), torch.tensor([3])), r"tokens has shape \(1, 1\), expected \[B\]"),
    "0-D positions": (lambda: (torch.tensor([5]), torch.tensor(3)), r"positions has shape \(\), expected \[B\]"),
    "meta tokens": (lambda: (torch.zeros(1, device="meta", **LONG), torch.tensor([3])),
                    "tokens is on meta, but the model runs on cpu"),
    "meta positions": (lambda: (torch.tensor([5]), torch.zeros(1, device="meta", **LONG)),
                       "positions is on meta"),
    "a list": (lambda: ([5], torch.tensor([3])), "tokens must be a torch tensor.*got list"),
    "position past the cache": (lambda: (torch.tensor([5]), torch.tensor([8])),
                                r"position 8 is outside the cache of max_context=8.*max_context>=9"),
    "negative position": (lambda: (torch.tensor([5]), torch.tensor([-1])), "position -1 is outside the cache"),
    "batch above max_batch": (lambda: (torch.zeros(3, **LONG), torch.full((3,), 3)), r"max_batch>=3"),
    "empty batch": (lambda: (torch.zeros(0, **LONG), torch.zeros(0, **LONG)), "batch must be a whole number >= 1"),
}


@pytest.mark.parametrize("case", list(BAD_STEPS))
@pytest.mark.parametrize("which", ["engine", "transformers", "stand-in", "padded eager"])
def test_every_bad_decode_input_is_one_clear_value_error(decoders, steppers, which, case):
    ours, hf = decoders
    ours.prefill(torch.zeros(1, 3, **LONG))
    hf.prefill(torch.zeros(1, 3, **LONG))
    step, engine = steppers[which]
    before = None if engine is None else (engine.k_cache.clone(), engine.v_cache.clone())
    make, match = BAD_STEPS[case]
    with pytest.raises(ValueError, match=match):
        step(*make())
    if before is not None:  # refused before anything ran: not one cache value written
        assert torch.equal(engine.k_cache, before[0]) and torch.equal(engine.v_cache, before[1])
    good = step(torch.tensor([5]), torch.tensor([3]))  # and the stepper still works
    assert good.shape == (1, TINY.vocab_size) and torch.isfinite(good).all()


BAD_PROMPTS = {
    "float prompt": (lambda: torch.tensor([[1.5, 2.0]]), "tokens has dtype torch.float32"),
    "1-D prompt": (lambda: torch.tensor([1, 2]), r"tokens has shape \(2,\), expected \[B, T\].*tokens\[None\]"),
    "id equal to vocab": (lambda: torch.tensor([[1, 100]]), "token id 100 is outside the vocabulary"),
    "negative id": (lambda: torch.tensor([[-3, 1]]), "token id -3 is negative"),
    "meta prompt": (lambda: torch.zeros(1, 2, device="meta", **LONG), "tokens is on meta"),
    "no tokens": (lambda: torch.zeros(1, 0, **LONG), r"the prompt has shape \(1, 0\), with no tokens"),
}


@pytest.mark.parametrize("case", list(BAD_PROMPTS))
@pytest.mark.parametrize("which", [0, 1], ids=["ours", "transformers"])
def test_every_bad_prompt_is_one_clear_value_error(decoders, which, case):
    make, match = BAD_PROMPTS[case]
    with pytest.raises(ValueError, match=match):
        decoders[which].prefill(make())
    with pytest.raises(ValueError, match=match):
        decoders[which].generate(make(), 2)


def test_engine_positions_are_per_row_and_any_order(decoders):
    """The engine's static cache keeps no count: each row decodes at its own slot, repeated or not."""
    ours, _ = decoders
    ours.prefill(torch.zeros(2, 5, **LONG))
    for positions in ([5, 2], [5, 2], [7, 0]):
        assert ours.decode_step(torch.tensor([1, 2]), torch.tensor(positions)).shape == (2, TINY.vocab_size)


def test_transformers_decode_refuses_skipped_slots_rows_that_differ_and_a_full_cache(decoders):
    _, hf = decoders
    hf.prefill(torch.zeros(2, 3, **LONG))
    with pytest.raises(ValueError, match=r"position 5 skips cache slots: the cache holds 3 tokens.*in order"):
        hf.decode_step(torch.tensor([1, 2]), torch.full((2,), 5))
    with pytest.raises(ValueError, match="positions run from 3 to 4.*same position in each row"):
        hf.decode_step(torch.tensor([1, 2]), torch.tensor([3, 4]))
    for position in range(3, 8):  # slots 3..7 fill the cache of 8
        hf.decode_step(torch.tensor([1, 2]), torch.full((2,), position))
    assert hf.cache_tokens == 8
    with pytest.raises(ValueError, match=r"the StaticCache is full: its max_context=8 slots.*call prefill again"):
        hf.decode_step(torch.tensor([1, 2]), torch.full((2,), 7))
    hf.prefill(torch.zeros(2, 3, **LONG))
    assert hf.cache_tokens == 3
    hf.decode_step(torch.tensor([1, 2]), torch.full((2,), 3))  # a fresh prefill starts over


def test_transformers_decode_lets_a_timing_loop_repeat_one_step(decoders):
    """The bench times one step over and over; each call takes a fresh slot, as its cache size allows."""
    _, hf = decoders
    hf.prefill(torch.zeros(1, 3, **LONG))
    for _ in range(4):
        hf.decode_step(torch.tensor([1]), torch.tensor([3]))
    assert hf.cache_tokens == 7
    hf.reset_cache()
    assert hf.cache_tokens == 0


def test_the_checks_trace_whole_under_torch_compile(decoders):
    """The bench compiles transformers' decode body with fullgraph=True: the checks must add no graph
    break and no recompile (host bookkeeping stays out of the traced graph)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    _, hf = decoders
    body = type(hf).decode_step.__wrapped__
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(lambda t, p: body(hf, t, p), backend="eager", fullgraph=True, dynamic=False)
    tokens, positions = torch.tensor([1]), torch.tensor([3])
    with torch.inference_mode():
        hf.prefill(torch.zeros(1, 3, **LONG))
        eager = hf.decode_step(tokens, positions)
        hf.prefill(torch.zeros(1, 3, **LONG))
        got = [compiled(tokens, positions) for _ in range(3)][0]
    assert torch.allclose(got, eager, rtol=1e-5, atol=1e-6)
    assert counters["stats"]["unique_graphs"] == 1 and not counters["graph_break"]
    torch._dynamo.reset()
