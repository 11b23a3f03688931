"""Engine wing: load a Qwen3 checkpoint (safetensors only) from a local folder or the Hugging Face
hub."""
from __future__ import annotations

from pathlib import Path

import torch

from floorlab.core.shapes import CheckpointError, shape_from_hf_config
from floorlab.engine.checkpoint import (
    INDEX_NAME,
    PICKLE_SUFFIXES,
    checkpoint_files,
    read_config,
    read_index,
    read_tensors,
)
from floorlab.engine.model import Qwen3Decoder


def _download(hub_id: str) -> Path:
    """The local snapshot folder of a hub model id (config.json and safetensors files only)."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(hub_id, allow_patterns=["config.json", "*.safetensors", INDEX_NAME]))
    except Exception as err:
        raise CheckpointError(
            f"{hub_id!r} is not a local folder and could not be fetched from the Hugging Face hub ({err}); "
            "pass the path of a folder holding config.json and *.safetensors, or a hub id such as Qwen/Qwen3-0.6B"
        ) from err


def _looks_like_path(text: str) -> bool:
    return text.startswith(("/", ".", "~")) or text.count("/") > 1 or Path(text).exists()


def load_pretrained(path_or_hub_id: str | Path, *, device="cpu", dtype: torch.dtype = torch.bfloat16,
                    max_batch: int = 16, max_context: int = 256) -> Qwen3Decoder:
    """A Qwen3Decoder holding a checkpoint's weights; never unpickles (*.bin/*.pt files are refused)."""
    folder = Path(path_or_hub_id).expanduser()
    if not folder.is_dir():
        if _looks_like_path(str(path_or_hub_id)):
            raise CheckpointError(
                f"{str(path_or_hub_id)!r} is not a folder; pass a folder holding config.json and *.safetensors"
            )
        folder = _download(str(path_or_hub_id))
    files = checkpoint_files(folder)
    pickles = [p.name for p in folder.iterdir() if p.suffix in PICKLE_SUFFIXES]
    if not files and pickles:
        raise CheckpointError(
            f"{folder} holds only pickle weights ({', '.join(sorted(pickles))}), which this loader refuses to "
            "unpickle; convert them once with transformers: "
            "AutoModelForCausalLM.from_pretrained(folder).save_pretrained(folder), which writes model.safetensors"
        )
    config = read_config(folder)
    shape = shape_from_hf_config(config, name=folder.name, source=str(folder / "config.json"))
    if not files:
        raise CheckpointError(
            f"{folder} has config.json but no *.safetensors weights; add model.safetensors "
            f"(or the shards and {INDEX_NAME}), e.g. with transformers' save_pretrained(folder)"
        )
    state = read_tensors(files, read_index(folder), folder)
    model = Qwen3Decoder(shape, max_batch=max_batch, max_context=max_context, device=device, dtype=dtype)
    try:
        model.load_state_dict_hf(state)
    except ValueError as err:
        raise CheckpointError(f"{folder}: {err}") from err
    return model
