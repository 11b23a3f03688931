"""Engine wing: a Qwen3 checkpoint (safetensors only, never unpickled) from a local folder or the hub;
every failure is a CheckpointError naming the file and saying how to fix it."""
from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

import torch
from safetensors import SafetensorError, safe_open

from floorlab.core.shapes import CheckpointError, shape_from_hf_config
from floorlab.engine.model import Qwen3Decoder

INDEX_NAME = "model.safetensors.index.json"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
TOKENIZER_FILES = ("tokenizer.json", "vocab.json + merges.txt", "tokenizer.model")


def load_pretrained(path_or_hub_id: str | Path, *, device="cpu", dtype: torch.dtype = torch.bfloat16,
                    max_batch: int = 16, max_context: int = 256) -> Qwen3Decoder:
    """A Qwen3Decoder holding a checkpoint's weights; never unpickles (*.bin/*.pt files are refused)."""
    folder = Path(path_or_hub_id).expanduser()
    if not folder.is_dir():
        if _looks_like_path(str(path_or_hub_id)):
            raise CheckpointError(f"{str(path_or_hub_id)!r} is not a folder; pass a folder holding "
                                  "config.json and *.safetensors")
        folder = _download(str(path_or_hub_id))
    weight_map = read_index(folder)
    files = checkpoint_files(folder, weight_map)
    pickles = [p.name for p in folder.iterdir() if p.suffix in PICKLE_SUFFIXES]
    if not files and pickles:
        raise CheckpointError(
            f"{folder} holds only pickle weights ({', '.join(sorted(pickles))}), which this loader refuses to "
            "unpickle; convert them once with transformers: AutoModelForCausalLM.from_pretrained(folder)"
            ".save_pretrained(folder), which writes model.safetensors")
    config = read_config(folder)
    shape = shape_from_hf_config(config, name=folder.name, source=str(folder / "config.json"))
    if not files:
        raise CheckpointError(f"{folder} has config.json but no *.safetensors weights; add model.safetensors "
                              f"(or the shards and {INDEX_NAME}), e.g. with transformers' save_pretrained(folder)")
    state = read_tensors(files, weight_map, folder)
    model = Qwen3Decoder(shape, max_batch=max_batch, max_context=max_context, device=device, dtype=dtype)
    try:
        model.load_state_dict_hf(state)
    except ValueError as err:
        raise CheckpointError(f"{folder}: {err}") from err
    return model


def read_json(path: Path, what: str):
    """The parsed JSON of path; a CheckpointError naming the file when it is not valid JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{path} is not valid JSON ({err.msg} at line {err.lineno}, column {err.colno}); "
                              f"restore the {what} the checkpoint came with") from err
    except (UnicodeDecodeError, OSError) as err:
        raise CheckpointError(f"{path} cannot be read as text ({err}); restore the {what} the checkpoint "
                              "came with") from err


def read_config(folder: Path) -> dict:
    """config.json of a checkpoint folder as a dict."""
    path = folder / "config.json"
    if not path.exists():
        raise CheckpointError(f"{folder} has no config.json; copy the model's config.json next to its weights "
                              "(save_pretrained writes both)")
    return read_json(path, "config.json")


def read_index(folder: Path) -> dict[str, str] | None:
    """The index's weight_map {tensor name: shard name}, or None without an index; every shard name is checked."""
    path = folder / INDEX_NAME
    if not path.exists():
        return None
    index = read_json(path, INDEX_NAME)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(f"{path} has no weight_map of tensor names to shard files; restore the index "
                              "save_pretrained writes, or remove it beside a single model.safetensors")
    for tensor, shard in weight_map.items():  # a plain .safetensors name inside the folder, nothing else
        if (not isinstance(shard, str) or not shard.endswith(".safetensors") or "\\" in shard
                or PurePosixPath(shard).is_absolute() or ".." in PurePosixPath(shard).parts):
            raise CheckpointError(
                f"{path} maps {tensor} to {shard!r}, which is not a .safetensors file inside "
                f"{path.parent}; shard names must be plain relative names (no '..', no absolute paths), "
                "so restore the index save_pretrained wrote")
    return weight_map


def checkpoint_files(folder: Path, weight_map: dict[str, str] | None) -> list[Path]:
    """The safetensors files to read: the shards the index names, or the folder's one .safetensors file."""
    if weight_map is not None:
        names = sorted(set(weight_map.values()))
        missing = [n for n in names if not (folder / n).is_file()]
        if missing:
            raise CheckpointError(f"{folder / INDEX_NAME} names shards that are not in the folder: "
                                  f"{', '.join(missing)}; download every shard listed in the index into the folder")
        return [folder / n for n in names]
    files = sorted(folder.glob("*.safetensors"))
    if len(files) > 1:
        raise CheckpointError(
            f"{folder} holds {len(files)} .safetensors files ({', '.join(p.name for p in files)}) and no "
            f"{INDEX_NAME}; with more than one file an index is needed to say which to read, so remove the "
            "stale files or add the index that save_pretrained writes with the shards")
    return files


def read_tensors(files: list[Path], weight_map: dict[str, str] | None = None,
                 folder: Path | None = None) -> dict[str, torch.Tensor]:
    """Every tensor of the files by name, each file's names those weight_map (relative to folder) gives it;
    an integer or bool tensor is refused by name."""
    state: dict[str, torch.Tensor] = {}
    for path in files:
        try:
            with safe_open(str(path), framework="pt") as f:
                names = list(f.keys())
                _check_names(path, names, state, weight_map, Path(folder) if folder else path.parent)
                for name in names:
                    state[name] = f.get_tensor(name)
        except (SafetensorError, OSError) as err:
            raise CheckpointError(f"{path} is not a readable safetensors file ({err}); it may be truncated "
                                  "or corrupt: download it again") from err
        not_float = [f"{n} ({str(state[n].dtype).replace('torch.', '')})" for n in names
                     if not state[n].is_floating_point()]
        if not_float:
            raise CheckpointError(f"{path} holds {', '.join(not_float[:4])} where the model's weights are "
                                  "floating-point numbers; this is not a bf16/fp16/fp32 Qwen3 checkpoint (a "
                                  "quantized or damaged file): download the original weights again")
    return state


def _check_names(path: Path, names: list[str], state: dict, weight_map: dict[str, str] | None,
                 folder: Path) -> None:
    twice = [n for n in names if n in state]
    if twice:
        raise CheckpointError(f"{path} holds {', '.join(twice[:4])}, already read from another shard; "
                              "remove the duplicate file or restore the index that names one shard per tensor")
    if weight_map is None:
        return
    listed = {n for n, shard in weight_map.items() if (folder / shard) == path}
    stray, absent = sorted(set(names) - listed), sorted(listed - set(names))
    if stray or absent:
        said = [f"holds {', '.join(stray[:4])} that {INDEX_NAME} does not place there"] if stray else []
        said += [f"lacks {', '.join(absent[:4])} that {INDEX_NAME} places there"] if absent else []
        raise CheckpointError(f"{path} {' and '.join(said)}; the shards and the index come from different "
                              "saves: download them again together")


def tokenizer_files(folder: Path) -> None:
    """Refuse a local folder that holds none of the files a tokenizer is loaded from."""
    if (folder / "tokenizer.json").is_file() or (folder / "tokenizer.model").is_file():
        return
    if (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file():
        return
    raise CheckpointError(
        f"{folder} has no tokenizer: expected {' or '.join(TOKENIZER_FILES)} (with tokenizer_config.json); "
        "copy the model's tokenizer files next to its weights (hf download fetches them with the weights)")


def _download(hub_id: str) -> Path:
    """The local snapshot folder of a hub model id (config.json and safetensors files only)."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(hub_id, allow_patterns=["config.json", "*.safetensors", INDEX_NAME]))
    except Exception as err:
        raise CheckpointError(
            f"{hub_id!r} is not a local folder and could not be fetched from the Hugging Face hub ({err}); "
            "pass the path of a folder holding config.json and *.safetensors, or a hub id such as "
            "Qwen/Qwen3-0.6B") from err


def _looks_like_path(text: str) -> bool:
    return text.startswith(("/", ".", "~")) or text.count("/") > 1 or Path(text).exists()
