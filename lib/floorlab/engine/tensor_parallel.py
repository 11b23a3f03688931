"""Engine wing: tensor parallelism for the decode step: each rank's shard is a Qwen3Decoder of its share
of the heads, the MLP and the vocabulary (qkv, gate_up by columns; o_proj, down by rows; head by vocabulary)."""
from __future__ import annotations

import math
from dataclasses import replace

import torch
import torch.distributed as dist
from torch import nn

from floorlab.core.memory import HEADROOM_BYTES, Fit, free_bytes
from floorlab.core.numbers import whole_number
from floorlab.core.shapes import Qwen3Shape, get_shape
from floorlab.engine.model import Qwen3Decoder, init_random_

COLLECTIVES_PER_LAYER = 2  # all-reduces after o_proj and after down


class SplitError(ValueError):
    """A shape whose heads, KV heads, MLP width or vocabulary do not divide by the ranks."""


def check_split(shape, ranks: int) -> Qwen3Shape:
    """The shape, once its heads, KV heads, MLP width and vocabulary all divide by ranks."""
    shape = get_shape(shape)
    try:
        ranks = whole_number(ranks, "ranks", hint="one process per share")
    except ValueError as err:
        raise SplitError(str(err)) from None
    counts = {"num_heads (query heads)": shape.num_heads,
              "num_kv_heads (KV heads)": shape.num_kv_heads,
              "intermediate_size (MLP width)": shape.intermediate_size,
              "vocab_size (vocabulary)": shape.vocab_size}
    left = [f"{name} = {count}" for name, count in counts.items() if count % ranks]
    if left:
        common = math.gcd(*counts.values())
        fits = [n for n in range(1, min(common, 8) + 1) if common % n == 0]
        raise SplitError(
            f"{shape.name} cannot be split over {ranks} ranks: {', '.join(left)} "
            f"{'does' if len(left) == 1 else 'do'} not divide by {ranks}. Every rank holds "
            f"whole heads, an equal slice of the MLP and of the vocabulary; pass a number of "
            f"ranks that divides all four (for this shape: {', '.join(map(str, fits))})")
    return shape


def shard_shape(shape, ranks: int) -> Qwen3Shape:
    """The shape of a rank's Qwen3Decoder: its heads and MLP slice, the whole vocabulary for the input
    lookup (its slice of the output head is held apart)."""
    s = check_split(shape, ranks)
    return replace(s, intermediate_size=s.intermediate_size // ranks,
                   num_heads=s.num_heads // ranks, num_kv_heads=s.num_kv_heads // ranks,
                   tie_word_embeddings=True, name=f"{s.name}/tp{ranks}")


def rank_shape(shape, ranks: int) -> Qwen3Shape:
    """What one rank streams in a step, as a shape (decode_floor of it is the floor per rank): its heads,
    its MLP slice and its slice of the output head, counted once as a tied head."""
    s = check_split(shape, ranks)
    return replace(shard_shape(s, ranks), vocab_size=s.vocab_size // ranks)


def message_bytes(shape, batch: int, dtype_bytes: int = 2) -> int:
    """Bytes one all-reduce of the decode step adds up: batch rows of hidden_size values."""
    return int(batch) * get_shape(shape).hidden_size * int(dtype_bytes)


def gather_bytes(shape, batch: int, ranks: int, dtype_bytes: int = 2) -> int:
    """Bytes of logits one rank sends to the all_gather at the end of a step."""
    return int(batch) * get_shape(shape).vocab_size // int(ranks) * int(dtype_bytes)


def all_reduces_per_step(shape) -> int:
    """All-reduces in one decode step: two per layer (after o_proj and after down)."""
    return COLLECTIVES_PER_LAYER * get_shape(shape).num_layers


def shard_fit(shape, ranks: int, device, *, max_batch: int, max_context: int,
              free: int | None = None) -> Fit:
    """Whether one rank's shard fits its device: its weights (the input table whole), its KV
    cache, and room to draw the largest whole matrix while build_shard cuts it."""
    s = get_shape(shape)
    shard, share = shard_shape(s, ranks), rank_shape(s, ranks)
    head = 0 if s.tie_word_embeddings else share.vocab_size * s.hidden_size * 2
    rows = max(s.vocab_size, 2 * s.intermediate_size, (s.num_heads + 2 * s.num_kv_heads) * s.head_dim)
    device = torch.device(device)
    return Fit(preset=f"{s.name} on {ranks} ranks, each", weight_bytes=shard.weight_bytes() + head,
               cache_bytes=int(max_batch) * int(max_context) * share.kv_bytes_per_token(),
               headroom_bytes=HEADROOM_BYTES + 2 * s.hidden_size * rows,
               free_bytes=free_bytes(device) if free is None else int(free),
               where="GPU" if device.type == "cuda" else "host")


def host_fit(shape, ranks: int, *, max_batch: int, max_context: int) -> Fit:
    """Whether every rank's shard fits the host's memory at once (a CPU run's ranks share it)."""
    one = shard_fit(shape, ranks, "cpu", max_batch=max_batch, max_context=max_context)
    return Fit(preset=f"{get_shape(shape).name} on {ranks} ranks", weight_bytes=ranks * one.weight_bytes,
               cache_bytes=ranks * one.cache_bytes, headroom_bytes=ranks * one.headroom_bytes,
               free_bytes=one.free_bytes, where="host")


class TPDecoder(Qwen3Decoder):
    """One rank's shard of a Qwen3 decoder: the engine's step over its share of the heads, the MLP and
    the vocabulary; its logits [B, vocab] are whole on every rank."""

    def __init__(self, shape, *, rank: int, ranks: int, group=None, max_batch: int = 16,
                 max_context: int = 256, device="cpu", dtype: torch.dtype = torch.bfloat16):
        full = check_split(shape, ranks)
        ranks = int(ranks)
        rank = whole_number(rank, "rank", at_least=0, at_most=ranks - 1,
                            hint=f"ranks count from 0 to {ranks - 1}")
        super().__init__(shard_shape(full, ranks), max_batch=max_batch,
                         max_context=max_context, device=device, dtype=dtype)
        self.rank, self.ranks, self.group = rank, ranks, group
        self.vocab_per_rank = full.vocab_size // ranks
        # the output head's slice: rows of the input table when tied, its own weight otherwise
        self.head = None if full.tie_word_embeddings else nn.Parameter(
            torch.empty(self.vocab_per_rank, full.hidden_size, device=self.device, dtype=dtype),
            requires_grad=False)

    def head_weight(self) -> torch.Tensor:
        """This rank's slice of the output head [vocab / ranks, hidden] (a view when tied)."""
        return self.head if self.head is not None else _rows(self.embed, self.rank, self.ranks)

    def all_gather_vocab(self, local: torch.Tensor) -> torch.Tensor:
        """Every rank's logits [..., vocab / ranks] joined along the vocabulary: [..., vocab]."""
        lead, width = local.shape[:-1], local.shape[-1]
        rows = local.reshape(-1, width).contiguous()
        out = torch.empty((self.ranks * rows.shape[0], width), device=rows.device, dtype=rows.dtype)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        gather(out, rows, group=self.group)
        return out.view(self.ranks, -1, width).transpose(0, 1).reshape(*lead, self.ranks * width)

    def project_back(self, x2d: torch.Tensor, inputs: torch.Tensor, weight: torch.Tensor) -> None:
        """Row-parallel o_proj and down: this rank's partial product, summed over ranks (one all-reduce),
        added to the residual, which is whole on every rank."""
        partial = torch.mm(inputs, weight.t())
        dist.all_reduce(partial, group=self.group)
        x2d.add_(partial)

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.all_gather_vocab(super()._logits(x))

    def hf_state_dict(self) -> dict[str, torch.Tensor]:
        """Not available: a shard holds a share of each matrix, not the checkpoint's tensors."""
        raise NotImplementedError("a tensor-parallel shard holds slices of the checkpoint's "
                                  "matrices; load the whole model, then cut it with shard_model")

    def load_state_dict_hf(self, hf_state) -> None:
        """Not available: load the whole model with load_pretrained, then cut it with shard_model."""
        self.hf_state_dict()


def _rows(t: torch.Tensor, rank: int, ranks: int) -> torch.Tensor:
    n = t.shape[0] // ranks
    return t[rank * n:(rank + 1) * n]


def _cols(t: torch.Tensor, rank: int, ranks: int) -> torch.Tensor:
    n = t.shape[1] // ranks
    return t[:, rank * n:(rank + 1) * n]


def cut(name: str, full: torch.Tensor, shape, rank: int, ranks: int) -> torch.Tensor:
    """Rank `rank`'s slice of the whole model's parameter `name`: qkv and gate_up by part, o_proj and down
    by columns, the output head by vocabulary rows; norms and the input table stay whole."""
    s = get_shape(shape)
    leaf = name.rsplit(".", 1)[-1]
    if leaf == "qkv":
        d, nq, nkv = s.head_dim, s.num_heads, s.num_kv_heads
        q, k, v = full.split([nq * d, nkv * d, nkv * d])
        return torch.cat([_rows(part, rank, ranks) for part in (q, k, v)])
    if leaf == "gate_up":
        return torch.cat([_rows(part, rank, ranks) for part in full.chunk(2)])
    if leaf in ("o_proj", "down"):
        return _cols(full, rank, ranks)
    if leaf == "lm_head":
        return _rows(full, rank, ranks)
    return full


def _target(shard: TPDecoder, name: str) -> torch.Tensor:
    """The shard's tensor that the whole model's parameter `name` is cut into."""
    return shard.head if name == "lm_head" else shard.get_parameter(name)


def shard_model(full: Qwen3Decoder, *, rank: int, ranks: int, group=None) -> TPDecoder:
    """Rank `rank`'s TPDecoder, its weights cut from a whole model's (same device, dtype, sizes)."""
    shard = TPDecoder(full.shape, rank=rank, ranks=ranks, group=group, max_batch=full.max_batch,
                      max_context=full.max_context, device=full.device, dtype=full.dtype)
    with torch.no_grad():
        for name, tensor in full.named_parameters():
            _target(shard, name).copy_(cut(name, tensor, full.shape, rank, ranks))
    return shard


def build_shard(preset_or_shape, *, rank: int, ranks: int, group=None, device="cpu",
                dtype: torch.dtype = torch.bfloat16, max_batch: int = 16, max_context: int = 256,
                seed: int = 0) -> TPDecoder:
    """Rank `rank`'s shard of build_model(preset_or_shape, seed=seed) on the same device, cut
    as each whole weight is drawn, so no more than one whole matrix is ever held."""
    shape = get_shape(preset_or_shape)
    shard = TPDecoder(shape, rank=rank, ranks=ranks, group=group, max_batch=max_batch,
                      max_context=max_context, device=device, dtype=dtype)
    whole = Qwen3Decoder(shape, max_batch=1, max_context=1, device="meta", dtype=dtype)

    def drawn():  # build_model's parameters in its order; each is cut once init_random_ fills it
        for name, meta in whole.named_parameters():
            tensor = torch.empty(meta.shape, device=shard.device, dtype=dtype)
            yield name, tensor
            _target(shard, name).copy_(cut(name, tensor, shape, rank, ranks))

    with torch.no_grad():
        init_random_(drawn(), seed=seed, device=shard.device)
    return shard
