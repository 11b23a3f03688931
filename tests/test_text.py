"""Real text: a tiny checkpoint and tokenizer saved here, read back, and greedy text that
matches transformers' own generate on the same weights. Nothing touches the network."""
import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from floorlab.core.shapes import CheckpointError, Qwen3Shape
from floorlab.engine import text

VOCAB = 512
CORPUS = ["the floor is bytes over bandwidth", "a graph replays the launches it recorded",
          "decode reads every weight once per token", "the bus waits for the host"] * 20


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A folder holding a tiny Qwen3ForCausalLM (float32) and a tiny BPE tokenizer."""
    folder = tmp_path_factory.mktemp("tiny-qwen3")
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=300,
                                                        special_tokens=["<unk>", "<eos>"]))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, unk_token="<unk>", eos_token="<eos>")
    tokenizer.backend_tokenizer.decoder = decoders.ByteLevel()
    tokenizer.save_pretrained(folder)
    shape = Qwen3Shape(64, 128, 2, 4, 2, 16, VOCAB, True)
    config = Qwen3Config(**shape.to_hf_config_dict(), dtype="float32")
    torch.manual_seed(0)
    hf = Qwen3ForCausalLM(config).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0.0, 0.5 if p.ndim == 2 else 0.1).add_(1.0 if p.ndim == 1 else 0.0)
    hf.save_pretrained(folder)
    return folder, hf, tokenizer


def test_the_source_comes_from_the_environment_only():
    assert text.weights_source({}) is None
    assert text.weights_source({text.WEIGHTS_ENV: "  "}) is None
    assert text.weights_source({text.WEIGHTS_ENV: "/models/q"}) == "/models/q"
    line = text.how_to_get_weights()
    assert text.WEIGHTS_ENV in line and text.HUB_ID in line and "\n" not in line


def test_a_missing_folder_says_what_to_point_at(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        text.load_text_model(tmp_path / "absent")


def test_generated_text_matches_transformers_greedy_generate(checkpoint):
    folder, hf, tokenizer = checkpoint
    model, loaded = text.load_text_model(folder, dtype=torch.float32, max_context=64)
    prompt = "the floor is"
    out = text.generate_text(model, loaded, prompt, new_tokens=8)
    assert out.prompt_ids == tokenizer(prompt)["input_ids"]
    ids = torch.tensor([out.prompt_ids])
    with torch.no_grad():
        expected = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8,
                               min_new_tokens=8, do_sample=False)[0, ids.shape[1]:].tolist()
    assert out.new_ids == expected
    assert out.text == tokenizer.decode(expected, skip_special_tokens=True)
    assert isinstance(out.text, str) and len(out.new_ids) == 8


def test_a_replacement_decode_step_is_used(checkpoint):
    folder, _, _ = checkpoint
    model, tokenizer = text.load_text_model(folder, dtype=torch.float32, max_context=64)
    calls = []

    def counted(tokens, positions):
        calls.append(int(positions[0]))
        return model.decode_step(tokens, positions)

    plain = text.generate_text(model, tokenizer, "the bus", new_tokens=5)
    again = text.generate_text(model, tokenizer, "the bus", new_tokens=5, decode_step=counted)
    assert again.new_ids == plain.new_ids
    start = len(plain.prompt_ids)
    assert calls == list(range(start, start + 4))  # the first new token comes from prefill


def test_a_prompt_too_long_for_the_cache_is_refused(checkpoint):
    folder, _, _ = checkpoint
    model, tokenizer = text.load_text_model(folder, dtype=torch.float32, max_context=8)
    with pytest.raises(ValueError, match="max_context"):
        text.generate_text(model, tokenizer, "the floor is bytes over bandwidth", new_tokens=8)


def _weights_only(checkpoint, folder):
    """A copy of the checkpoint's weights and config, without its tokenizer files."""
    source, _, _ = checkpoint
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(source / name, folder / name)
    return folder


def test_a_folder_without_a_tokenizer_names_the_files_it_needs(checkpoint, tmp_path):
    folder = _weights_only(checkpoint, tmp_path / "weights-only")
    with pytest.raises(CheckpointError) as err:
        text.load_text_model(folder, dtype=torch.float32)
    message = str(err.value)
    assert str(folder) in message and "no tokenizer" in message
    assert all(name in message for name in ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer.model"))


def test_a_tokenizer_larger_than_the_vocabulary_is_refused(checkpoint, tmp_path):
    source, _, tokenizer = checkpoint
    small = len(tokenizer) - 10
    folder = tmp_path / "small-vocab"
    shutil.copytree(source, folder)
    cfg = json.loads((folder / "config.json").read_text())
    state = load_file(folder / "model.safetensors")
    cfg["vocab_size"] = small
    state["model.embed_tokens.weight"] = state["model.embed_tokens.weight"][:small].clone()
    (folder / "config.json").write_text(json.dumps(cfg))
    save_file(state, folder / "model.safetensors")
    expected = f"has {len(tokenizer)} tokens, but the model's vocabulary has {small} ids"
    with pytest.raises(CheckpointError, match=expected):
        text.load_text_model(folder, dtype=torch.float32)


def test_a_prompt_of_no_tokens_is_refused(checkpoint):
    folder, _, _ = checkpoint
    model, tokenizer = text.load_text_model(folder, dtype=torch.float32, max_context=64)
    with pytest.raises(ValueError, match="encodes to no tokens"):
        text.generate_text(model, tokenizer, "", new_tokens=2)
