"""Tools wing: the decode inputs every path gets, made the same way on every run, and the memory
between paths."""
from __future__ import annotations

import gc

import torch

from floorlab.core.shapes import Qwen3Shape


def decode_inputs(shape: Qwen3Shape, batch: int, context: int, device, seed: int = 0):
    """(prompt [batch, context], tokens [batch], positions [batch]) from a fixed seed."""
    gen = torch.Generator().manual_seed(seed + batch)
    prompt = torch.randint(0, shape.vocab_size, (batch, context), generator=gen)
    tokens = torch.randint(0, shape.vocab_size, (batch,), generator=gen)
    positions = torch.full((batch,), context, dtype=torch.long)
    return prompt.to(device), tokens.to(device), positions.to(device)


def sync(device) -> None:
    """Wait for the device to finish its queued work (nothing to wait for on the CPU)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def prefill(model, prompt: torch.Tensor) -> None:
    """Fill the cache with the prompt, so a decode step attends over the prompt's tokens."""
    with torch.inference_mode():  # transformers' cache tensors are made in inference mode
        model.reset_cache()
        model.prefill(prompt)
    sync(model.device)


def decode_logits(model, data, step=None) -> torch.Tensor:
    """Logits [B, vocab] of one decode step (model's, or step) after a fresh prefill, float32 on the CPU."""
    prompt, tokens, positions = data
    prefill(model, prompt)
    with torch.no_grad():
        return (step or model.decode_step)(tokens, positions).float().cpu()


def free_memory() -> None:
    """Collect dropped objects and hand cached GPU memory back (call after del-ing the references)."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
