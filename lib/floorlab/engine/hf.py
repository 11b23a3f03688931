"""Engine wing: transformers' Qwen3ForCausalLM with a StaticCache, behind the same interface as
floorlab's Qwen3Decoder."""
from __future__ import annotations

import inspect

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM, StaticCache

from floorlab.core.shapes import Qwen3Shape, get_shape
from floorlab.engine.model import Qwen3Decoder, init_random_


def _empty_hf(shape: Qwen3Shape, device, dtype: torch.dtype, attn_implementation: str) -> Qwen3ForCausalLM:
    """A Qwen3ForCausalLM with uninitialised weights on the device (built on meta, so nothing is allocated twice)."""
    config = Qwen3Config(**shape.to_hf_config_dict())
    config._attn_implementation = attn_implementation
    config.dtype = dtype
    with torch.device("meta"):
        model = Qwen3ForCausalLM(config)
    model = model.to(dtype).to_empty(device=device)
    if shape.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    # to_empty left the rotary frequencies uninitialised: rebuild them (in float32, as transformers does)
    model.model.rotary_emb = type(model.model.rotary_emb)(config).to(device)
    return model.eval().requires_grad_(False)


class HFDecoder:
    """prefill / decode_step / generate / reset_cache around transformers' model and StaticCache, which keeps
    one position for all rows and writes at its own counter (cache_tokens): step once per position, in order."""

    def __init__(self, model: Qwen3ForCausalLM, shape: Qwen3Shape, *, max_batch: int = 16, max_context: int = 256):
        self.model, self.shape = model, shape
        self.max_batch, self.max_context = max_batch, max_context
        weight = model.model.embed_tokens.weight
        self.device, self.dtype = weight.device, weight.dtype
        self.input_device = self.device
        forward_args = inspect.signature(model.forward).parameters
        self._cache_arg = "cache" if "cache" in forward_args else "past_key_values"
        self._pass_cache_position = "cache_position" in forward_args
        self.cache: StaticCache | None = None
        self.cache_batch = 0
        self.cache_tokens = 0  # slots the StaticCache has written since its last reset

    @classmethod
    def from_decoder(cls, ours: Qwen3Decoder, *, attn_implementation: str = "sdpa") -> "HFDecoder":
        """An HFDecoder computing the same function as ours: same shape, device, dtype, limits and weights."""
        model = _empty_hf(ours.shape, ours.device, ours.dtype, attn_implementation)
        model.load_state_dict(ours.hf_state_dict(), strict=True)
        return cls(model, ours.shape, max_batch=ours.max_batch, max_context=ours.max_context)

    check_inputs = Qwen3Decoder.check_inputs  # reads shape, input_device, max_batch and max_context

    def _check_order(self, positions: torch.Tensor) -> None:
        """Refuse a step the StaticCache has no slot for, and host positions that differ by row or skip slots
        (a repeated position passes: timing loops repeat one step)."""
        filled = self.cache_tokens
        if filled >= self.max_context:
            raise ValueError(
                f"the StaticCache is full: its max_context={self.max_context} slots hold tokens and "
                "transformers writes every decode step at the next slot; call prefill again, or build "
                f"with max_context>={filled + 1}")
        if positions.device.type != "cpu" or not positions.numel():
            return
        low, high = (int(v) for v in torch.aminmax(positions))
        if low != high:
            raise ValueError(
                f"positions run from {low} to {high}, but transformers' StaticCache keeps one position "
                "for every row; pass the same position in each row")
        if high > filled:
            raise ValueError(
                f"position {high} skips cache slots: the cache holds {filled} tokens, so the next position "
                f"is {filled}; transformers writes each step at its next slot whatever position it is "
                "given, so pass positions in order")

    def _forward(self, input_ids, position_ids, cache_position) -> torch.Tensor:
        kwargs = {self._cache_arg: self.cache, "use_cache": True, "position_ids": position_ids}
        if self._pass_cache_position:
            kwargs["cache_position"] = cache_position
        return self.model(input_ids=input_ids, **kwargs).logits

    @torch.inference_mode()
    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits [B, T, vocab] for tokens [B, T] at positions 0..T-1; starts a fresh cache for B rows."""
        self.check_inputs(tokens, None)
        batch, length = tokens.shape
        if self.cache is None or batch != self.cache_batch:
            self.cache = StaticCache(config=self.model.config, max_cache_len=self.max_context)
            self.cache_batch = batch
        else:
            self.cache.reset()
        self.cache_tokens = length
        positions = torch.arange(length, device=self.device)
        return self._forward(tokens, positions.expand(batch, length), positions)

    @torch.inference_mode()
    def decode_step(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Logits [B, vocab] for one token per row; positions must be the same for every row (and, outside
        torch.compile, which the bench wraps this body in, follow the slots the cache has filled)."""
        batch = self.check_inputs(tokens, positions)
        if self.cache is None or batch != self.cache_batch:
            raise ValueError(f"decode_step got {batch} rows but the cache holds {self.cache_batch}; "
                             f"call prefill with {batch} rows first (the StaticCache is sized by the prefill)")
        if not torch.compiler.is_compiling():
            self._check_order(positions)
            self.cache_tokens += 1
        return self._forward(tokens[:, None], positions[:, None], positions[:1])[:, -1]

    generate = Qwen3Decoder.generate

    @torch.inference_mode()
    def reset_cache(self) -> None:
        """Zero the StaticCache in place (its tensors keep their addresses; they were made in inference mode)."""
        if self.cache is not None:
            self.cache.reset()
        self.cache_tokens = 0


def build_hf(preset_or_shape, *, device="cpu", dtype: torch.dtype = torch.bfloat16, max_batch: int = 16,
             max_context: int = 256, seed: int = 0, attn_implementation: str = "sdpa") -> HFDecoder:
    """An HFDecoder with random weights (normal, std 0.02; norms 1) made directly on the device."""
    shape = get_shape(preset_or_shape)
    model = _empty_hf(shape, device, dtype, attn_implementation)
    if torch.device(device).type != "meta":
        init_random_(model.named_parameters(), seed=seed, device=device)
    return HFDecoder(model, shape, max_batch=max_batch, max_context=max_context)
