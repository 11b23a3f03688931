"""Core wing: Qwen3 model shapes: the numbers that fix how many bytes a decode step must move."""
from __future__ import annotations

from dataclasses import dataclass

from floorlab.core.numbers import is_bool, positive_number, whole_number


class UnknownPresetError(ValueError):
    """A preset name that PRESETS does not know."""


class CheckpointError(ValueError):
    """A checkpoint (config.json, weights, tokenizer) that cannot, or will not, be read; the message names the file."""


class NotQwen3Error(CheckpointError):
    """A config.json that does not describe a Qwen3 model."""


HF_HEAD_DIM = 128  # transformers' Qwen3Config default when config.json has no head_dim
HF_ROPE_THETA = 10_000.0  # transformers' default_theta


@dataclass(frozen=True)
class Qwen3Shape:
    """The sizes of a Qwen3 decoder; every count below follows from them."""

    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    rope_theta: float = 1e6
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 40960
    name: str = "custom"

    def layer_param_count(self) -> int:
        """Parameters in one decoder layer (attention, MLP and the four norms)."""
        h, d = self.hidden_size, self.head_dim
        attention = h * (self.num_heads + 2 * self.num_kv_heads) * d + self.num_heads * d * h
        mlp = 3 * h * self.intermediate_size
        norms = 2 * h + 2 * d
        return attention + mlp + norms

    def matmul_param_count(self) -> int:
        """Parameters one token multiplies through: every layer's matrices and the output head."""
        h, d = self.hidden_size, self.head_dim
        norms = 2 * h + 2 * d
        return self.num_layers * (self.layer_param_count() - norms) + self.vocab_size * h

    def param_count(self) -> int:
        """Total parameters, counting a tied embedding/LM head once."""
        embed = self.vocab_size * self.hidden_size
        head = 0 if self.tie_word_embeddings else embed
        return embed + self.num_layers * self.layer_param_count() + self.hidden_size + head

    def weight_bytes(self, dtype_bytes: int = 2) -> int:
        """Bytes of all weights at dtype_bytes per parameter (2 for bf16)."""
        return self.param_count() * dtype_bytes

    def streamed_weight_bytes(self, batch_size: int = 1, dtype_bytes: int = 2) -> int:
        """Weight bytes one decode step reads: every matrix whole, but an untied input table only
        in the batch_size rows the lookup gathers (a tied table is read whole by the output head)."""
        if self.tie_word_embeddings:
            return self.weight_bytes(dtype_bytes)
        table = self.vocab_size * self.hidden_size * dtype_bytes
        return self.weight_bytes(dtype_bytes) - table + int(batch_size) * self.hidden_size * dtype_bytes

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """Bytes of K and V cache one token occupies across all layers."""
        return self.num_layers * 2 * self.num_kv_heads * self.head_dim * dtype_bytes

    def to_hf_config_dict(self) -> dict:
        """The Qwen3 config.json dict (model_type "qwen3") for this shape."""
        return {
            "architectures": ["Qwen3ForCausalLM"],
            "model_type": "qwen3",
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "vocab_size": self.vocab_size,
            "tie_word_embeddings": self.tie_word_embeddings,
            "rope_theta": self.rope_theta,
            "rms_norm_eps": self.rms_norm_eps,
            "max_position_embeddings": self.max_position_embeddings,
            "hidden_act": "silu",
            "attention_bias": False,
            "attention_dropout": 0.0,
            "use_sliding_window": False,
        }


def _preset(name: str, hidden: int, inter: int, layers: int, heads: int, tied: bool) -> Qwen3Shape:
    return Qwen3Shape(hidden, inter, layers, heads, 8, 128, 151936, tied, name=name)


PRESETS: dict[str, Qwen3Shape] = {
    "qwen3-0.6b": _preset("qwen3-0.6b", 1024, 3072, 28, 16, tied=True),
    "qwen3-1.7b": _preset("qwen3-1.7b", 2048, 6144, 28, 16, tied=True),
    "qwen3-4b": _preset("qwen3-4b", 2560, 9728, 36, 32, tied=True),
    "qwen3-8b": _preset("qwen3-8b", 4096, 12288, 36, 32, tied=False),
    # from Qwen/Qwen3-14B's and Qwen/Qwen3-32B's public config.json
    "qwen3-14b": _preset("qwen3-14b", 5120, 17408, 40, 40, tied=False),
    "qwen3-32b": _preset("qwen3-32b", 5120, 25600, 64, 64, tied=False),
}


def get_shape(name_or_shape: str | Qwen3Shape) -> Qwen3Shape:
    """The Qwen3Shape itself, or the preset of that name."""
    if isinstance(name_or_shape, Qwen3Shape):
        return name_or_shape
    if name_or_shape in PRESETS:
        return PRESETS[name_or_shape]
    known = ", ".join(sorted(PRESETS))
    raise UnknownPresetError(
        f"unknown preset {name_or_shape!r}; use one of: {known}, or pass a Qwen3Shape(...) for a custom size"
    )


def shape_from_hf_config(cfg: dict, name: str = "custom", source: str = "config.json") -> Qwen3Shape:
    """The Qwen3Shape a transformers config.json dict describes; CheckpointError naming `source` otherwise."""
    if not isinstance(cfg, dict):
        raise CheckpointError(f"{source} holds a {type(cfg).__name__}, not a JSON object; "
                              "pass the config.json that save_pretrained writes")
    model_type = cfg.get("model_type")
    if model_type != "qwen3":
        raise NotQwen3Error(
            f"{source} has model_type {model_type!r}, but this model supports only 'qwen3' "
            "(Qwen3ForCausalLM); pick a Qwen3 checkpoint such as Qwen/Qwen3-0.6B"
        )
    missing = [k for k in _REQUIRED if k not in cfg]
    if missing:
        raise CheckpointError(f"{source} has no {', '.join(missing)}; a Qwen3 config.json needs "
                              f"{', '.join(_REQUIRED)} (save_pretrained writes them all)")
    _refuse_unsupported(cfg, source)
    sizes = {k: _config_int(cfg[k], k, source) for k in _REQUIRED}
    heads = sizes["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads")
    kv_heads = heads if kv_heads is None else _config_int(kv_heads, "num_key_value_heads", source)
    if heads % kv_heads:
        raise CheckpointError(f"{source}: num_attention_heads={heads} is not a multiple of "
                              f"num_key_value_heads={kv_heads}; each KV head must serve a whole group of heads")
    head_dim = cfg.get("head_dim", HF_HEAD_DIM)  # null: hidden_size // heads, as transformers' attention reads it
    head_dim = sizes["hidden_size"] // heads if head_dim is None else _config_int(head_dim, "head_dim", source)
    if head_dim % 2:
        raise CheckpointError(f"{source}: head_dim={head_dim} is odd; RoPE rotates pairs, so it must be even")
    rope = _rope_parameters(cfg)
    return Qwen3Shape(
        hidden_size=sizes["hidden_size"],
        intermediate_size=sizes["intermediate_size"],
        num_layers=sizes["num_hidden_layers"],
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        vocab_size=sizes["vocab_size"],
        tie_word_embeddings=_config_bool(cfg, "tie_word_embeddings", False, source),
        rope_theta=_config_float(rope.get("rope_theta") or cfg.get("rope_theta") or HF_ROPE_THETA,
                                 "rope_theta", source),
        rms_norm_eps=_config_float(cfg.get("rms_norm_eps", 1e-6), "rms_norm_eps", source),
        max_position_embeddings=_config_int(cfg.get("max_position_embeddings", 32768),
                                            "max_position_embeddings", source),
        name=name,
    )


_REQUIRED = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
# every field of transformers' Qwen3Config is read (and refused where the engine lacks it) or changes no logits
HF_FIELDS_READ = _REQUIRED + (
    "model_type", "num_key_value_heads", "head_dim", "hidden_act", "max_position_embeddings", "rms_norm_eps",
    "tie_word_embeddings", "rope_parameters", "rope_scaling", "rope_theta", "attention_bias",
    "use_sliding_window", "sliding_window", "max_window_layers", "layer_types", "quantization_config")
HF_FIELDS_WITHOUT_EFFECT = ("initializer_range", "use_cache", "attention_dropout",  # training and generation
                            "pad_token_id", "bos_token_id", "eos_token_id")


def _rope_parameters(cfg: dict) -> dict:
    """The RoPE dict as transformers reads it: rope_scaling when set, else rope_parameters."""
    rope = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    return rope if isinstance(rope, dict) else {"rope_type": rope}


def _refuse_unsupported(cfg: dict, source: str) -> None:
    """Raise CheckpointError for a Qwen3Config feature the engine does not compute."""
    problems = []
    if cfg.get("attention_bias", False):
        problems.append("attention_bias is true (q/k/v/o projections with biases)")
    act = cfg.get("hidden_act", "silu")
    if act != "silu":
        problems.append(f"hidden_act is {act!r} (the engine's MLP uses silu)")
    layers = cfg.get("layer_types") or []
    sliding = [t for t in layers if t != "full_attention"]
    count, first = cfg.get("num_hidden_layers", 0), cfg.get("max_window_layers", 28)
    if cfg.get("use_sliding_window", False) and cfg.get("sliding_window") is not None and (
            sliding or (not layers and isinstance(count, int) and isinstance(first, int) and first < count)):
        problems.append(f"use_sliding_window is true with sliding_window={cfg.get('sliding_window')} "
                        "(the engine attends over every cached token)")
    elif sliding:
        problems.append(f"layer_types holds {sorted(set(sliding))} (the engine has full attention only)")
    rope = _rope_parameters(cfg)
    if any(isinstance(v, dict) for v in rope.values()):
        problems.append("RoPE parameters are given per layer type")
    elif rope.get("rope_type", rope.get("type", "default")) != "default":
        problems.append(f"rope scaling {rope!r} (the engine has plain RoPE, rope_type 'default')")
    if cfg.get("quantization_config"):
        problems.append("quantization_config is set (the engine reads bf16/fp16/fp32 weights)")
    if problems:
        raise CheckpointError(f"{source} asks for what the engine does not implement: {'; '.join(problems)}; "
                              "its logits would be wrong, so pick a checkpoint without these "
                              "(Qwen/Qwen3-0.6B and its larger siblings have none)")


def _config_int(value, key: str, source: str) -> int:
    try:
        return whole_number(value, key)
    except ValueError:
        raise CheckpointError(f"{source}: {key} must be a positive whole number, got {value!r}") from None


def _config_float(value, key: str, source: str) -> float:
    try:
        return positive_number(value, key)
    except ValueError:
        raise CheckpointError(f"{source}: {key} must be a positive finite number, got {value!r}; "
                              "restore the config.json the checkpoint came with") from None


def _config_bool(cfg: dict, key: str, default: bool, source: str) -> bool:
    value = cfg.get(key, default)
    if not is_bool(value):
        raise CheckpointError(f"{source}: {key} must be true or false, got {value!r}")
    return value
