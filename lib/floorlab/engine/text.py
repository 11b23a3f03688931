"""Engine wing: real text from a Qwen3 checkpoint named by FLOORLAB_QWEN3_PATH and its tokenizer (random
weights move the same bytes, so every timing holds for both)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from floorlab.core.environment import expand_folder
from floorlab.core.numbers import a_path
from floorlab.core.shapes import CheckpointError
from floorlab.engine.checkpoint import load_pretrained, tokenizer_files
from floorlab.engine.model import greedy_tokens

WEIGHTS_ENV = "FLOORLAB_QWEN3_PATH"
HUB_ID = "Qwen/Qwen3-0.6B"


def weights_source(environ=None) -> str | None:
    """The checkpoint folder (or hub id) FLOORLAB_QWEN3_PATH names, or None when it is unset."""
    value = (os.environ if environ is None else environ).get(WEIGHTS_ENV, "").strip()
    return value or None


def how_to_get_weights() -> str:
    """One line: how a reader gets the Qwen3-0.6B weights and tells the book where they are."""
    return (f"No Qwen3-0.6B weights named here. To see real text, download them once "
            f"(hf download {HUB_ID} --local-dir ~/qwen3-0.6b) and start Jupyter with "
            f"{WEIGHTS_ENV}=~/qwen3-0.6b.")


def load_text_model(source: str | Path, *, device="cpu", dtype: torch.dtype = torch.bfloat16,
                    max_batch: int = 1, max_context: int = 256):
    """(Qwen3Decoder, tokenizer) from a checkpoint folder, or from the hub when given a hub id."""
    from transformers import AutoTokenizer

    a_path(source, "source", hint=f"a checkpoint folder or a hub id such as {HUB_ID!r}; {how_to_get_weights()}")
    folder = expand_folder(str(source), WEIGHTS_ENV)
    local = folder.is_dir()
    if not local and str(source).startswith(("/", ".", "~")):
        raise FileNotFoundError(f"{WEIGHTS_ENV}={source} is not a folder; point it at the folder "
                                "holding config.json, the *.safetensors and the tokenizer files")
    if local:
        tokenizer_files(folder)
    model = load_pretrained(folder if local else str(source), device=device, dtype=dtype,
                            max_batch=max_batch, max_context=max_context)
    tokenizer = AutoTokenizer.from_pretrained(str(folder if local else source),
                                              local_files_only=local)
    if not 1 < len(tokenizer) <= model.shape.vocab_size:
        raise CheckpointError(
            f"the tokenizer of {source} has {len(tokenizer)} tokens, but the model's vocabulary has "
            f"{model.shape.vocab_size} ids; a tokenizer must have between 2 and vocab_size tokens, so "
            "copy the tokenizer files that came with these weights")
    return model, tokenizer


@dataclass
class Generation:
    """A prompt and the greedy continuation the engine wrote for it."""

    prompt: str
    prompt_ids: list[int]
    new_ids: list[int]
    text: str  # the new tokens, decoded


def generate_text(model, tokenizer, prompt: str, new_tokens: int = 24, *,
                  decode_step: Callable | None = None) -> Generation:
    """Greedy continuation of prompt, new_tokens long; decode_step replaces model.decode_step (a GraphRunner's
    step, say)."""
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"].to(model.device)
    if ids.numel() == 0:
        raise ValueError(f"the prompt {prompt!r} encodes to no tokens; pass text with at least one token")
    with torch.no_grad():
        new = greedy_tokens(model, ids, new_tokens, decode_step=decode_step)[0].tolist()
    return Generation(prompt, ids[0].tolist(), new,
                      tokenizer.decode(new, skip_special_tokens=True))
