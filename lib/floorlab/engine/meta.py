"""Engine wing: a model counted on the meta device (sizes, no storage), confirming core.memory's
arithmetic against the tensors build_model really makes."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from floorlab.engine.model import build_model


@dataclass(frozen=True)
class MetaCount:
    """A model's tensors as build_model makes them, counted on the meta device (sizes, no storage)."""

    preset: str
    params: int
    weight_bytes: int
    cache_bytes: int
    other_bytes: int
    on_meta: bool


def count_on_meta(preset_or_shape, *, max_batch: int = 1, max_context: int = 128,
                  dtype: torch.dtype = torch.bfloat16) -> MetaCount:
    """Build the model on the meta device and count its parameters and bytes; allocates nothing."""
    model = build_model(preset_or_shape, device="meta", dtype=dtype, max_batch=max_batch,
                        max_context=max_context)
    params = list(model.parameters())
    buffers = dict(model.named_buffers())
    cache = [buffers.pop("k_cache"), buffers.pop("v_cache")]

    def size(tensors) -> int:
        return sum(t.numel() * t.element_size() for t in tensors)

    return MetaCount(preset=model.shape.name, params=sum(p.numel() for p in params),
                     weight_bytes=size(params), cache_bytes=size(cache),
                     other_bytes=size(buffers.values()),
                     on_meta=all(t.is_meta for t in [*params, *cache, *buffers.values()]))
