"""Core wing: Qwen3 model shapes: the numbers that fix how many bytes a decode step must move."""
from __future__ import annotations

from dataclasses import dataclass


class UnknownPresetError(ValueError):
    """A preset name that PRESETS does not know."""


class NotQwen3Error(ValueError):
    """A config.json that does not describe a Qwen3 model."""


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
        """Parameters one token multiplies through: every layer's matrices and the output head.

        Norms, which scale rather than multiply, and the input table, which is gathered,
        are left out; a tied table counts once, as the output head.
        """
        h, d = self.hidden_size, self.head_dim
        layer = h * (self.num_heads + 2 * self.num_kv_heads) * d + self.num_heads * d * h
        layer += 3 * h * self.intermediate_size
        return self.num_layers * layer + self.vocab_size * h

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


def shape_from_hf_config(cfg: dict, name: str = "custom") -> Qwen3Shape:
    """The Qwen3Shape a transformers config.json dict describes."""
    model_type = cfg.get("model_type")
    if model_type != "qwen3":
        raise NotQwen3Error(
            f"config.json has model_type {model_type!r}, but this model supports only 'qwen3' "
            "(Qwen3ForCausalLM); pick a Qwen3 checkpoint such as Qwen/Qwen3-0.6B"
        )
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if rope.get("rope_type", rope.get("type", "default")) != "default":
        raise ValueError(
            f"rope scaling {rope!r} is not supported; use a checkpoint with plain RoPE (rope_type 'default')"
        )
    heads = cfg["num_attention_heads"]
    return Qwen3Shape(
        hidden_size=cfg["hidden_size"],
        intermediate_size=cfg["intermediate_size"],
        num_layers=cfg["num_hidden_layers"],
        num_heads=heads,
        num_kv_heads=cfg.get("num_key_value_heads") or heads,
        head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads,
        vocab_size=cfg["vocab_size"],
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        rope_theta=float(cfg.get("rope_theta") or rope.get("rope_theta") or 10000.0),
        rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        max_position_embeddings=int(cfg.get("max_position_embeddings", 32768)),
        name=name,
    )
