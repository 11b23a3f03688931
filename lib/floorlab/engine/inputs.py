"""Engine wing: the one check of what a decode step or a prompt is given (check_decode_inputs), called by
the model, the transformers adapter, the runners and the Triton step."""
from __future__ import annotations

import torch

from floorlab.core.numbers import whole_number


def check_limits(batch: int, tokens: int, *, max_batch: int, max_context: int) -> int:
    """The batch, once it and a row's token count fit a model's limits; else a ValueError saying how to fix it."""
    batch = whole_number(batch, "batch", hint="pass at least one row")
    if batch > max_batch:
        raise ValueError(f"batch {batch} is larger than max_batch={max_batch}; "
                         f"build the model with max_batch>={batch}")
    whole_number(tokens, "tokens", at_least=0, hint="it counts the tokens a row holds")
    if tokens > max_context:
        raise ValueError(f"{tokens} tokens do not fit in max_context={max_context}; "
                         f"build the model with max_context>={tokens}")
    return batch


ID_DTYPES = (torch.int64, torch.int32)  # what F.embedding and cache indexing take


def check_decode_inputs(tokens, positions, *, vocab_size: int | None, device,
                        max_batch: int, max_context: int | None) -> int:
    """The batch B of a decode step (tokens [B], positions [B]) or prompt (tokens [B, T], positions None).
    Metadata is checked on every call; values (ids, positions) only on the host, outside torch.compile."""
    accepted = device if type(device) is tuple else (device,)
    try:  # the common case, in about as few operations as the checks before this one took
        on_host = tokens.is_cpu, positions.is_cpu
        plain = (tokens.dtype in ID_DTYPES and positions.dtype in ID_DTYPES and tokens.dim() == 1 == positions.dim()
                 and tokens.device in accepted and positions.device in accepted
                 and 0 < tokens.shape[0] == positions.shape[0] <= max_batch)
    except AttributeError:  # not tensors, or a prompt (positions None)
        on_host, plain = None, False
    batch = tokens.shape[0] if plain else _check_metadata(tokens, positions, accepted, max_batch, max_context)
    if on_host is None:
        on_host = tokens.is_cpu, positions is not None and positions.is_cpu
    if True in on_host and not torch.compiler.is_compiling():
        if on_host[0]:
            _check_token_values(tokens, vocab_size)
        if on_host[1]:
            _check_position_values(positions, max_context)
    return batch


def resolved_device(device) -> torch.device:
    """The device with its index: 'cuda' becomes the current CUDA device, as tensors made there land."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return device


def _check_metadata(tokens, positions, accepted: tuple, max_batch: int, max_context: int | None) -> int:
    """The batch B, or the ValueError that says which metadata check failed and how to fix it."""
    prompt = positions is None
    _check_ids_tensor("tokens", tokens, accepted, 2 if prompt else 1)
    batch = tokens.shape[0]
    if not prompt:
        _check_ids_tensor("positions", positions, accepted, 1)
        if positions.shape[0] != batch:
            raise ValueError(
                f"tokens has {batch} rows but positions has {positions.shape[0]}; "
                "pass one position per token, two 1-D tensors of the same length")
    length = tokens.shape[1] if prompt else 0
    if prompt and length < 1:
        raise ValueError(f"the prompt has shape {tuple(tokens.shape)}, with no tokens; "
                         "pass at least one token per row")
    check_limits(batch, length, max_batch=max_batch, max_context=max_context or length)
    return batch


def _check_ids_tensor(name: str, value, accepted: tuple, dims: int) -> None:
    """Refuse a value that is not an integer tensor of `dims` dimensions on an accepted device."""
    want = "[B, T]" if dims == 2 else "[B]"
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name} must be a torch tensor {want} of whole numbers, got "
                         f"{type(value).__name__}; pass torch.tensor(...) on the model's device")
    if value.dtype not in ID_DTYPES:
        raise ValueError(f"{name} has dtype {value.dtype}, but {name} must be whole numbers "
                         "(an integer dtype: torch.long or torch.int); a float is not rounded for you: "
                         "pass a torch.long tensor")
    if value.dim() != dims:
        raise ValueError(f"{name} has shape {tuple(value.shape)}, expected {want}; "
                         + ("pass tokens[None] for a single prompt" if dims == 2
                            else "pass a 1-D tensor, one entry per row"))
    if not any(_same_device(value.device, d) for d in accepted):
        names = " or ".join(str(d) for d in accepted)
        raise ValueError(f"{name} is on {value.device}, but the model runs on {names}; "
                         f"pass {name}.to({str(accepted[0])!r})")


def _same_device(actual: torch.device, want) -> bool:
    want = want if isinstance(want, torch.device) else torch.device(want)
    return actual.type == want.type and (want.index is None or actual.index == want.index)


def _check_token_values(tokens: torch.Tensor, vocab_size: int | None) -> None:
    """Refuse host token ids outside [0, vocab_size)."""
    if not tokens.numel():
        return
    low, high = (int(v) for v in torch.aminmax(tokens))
    if low < 0:
        raise ValueError(f"token id {low} is negative; ids count from 0, "
                         f"so pass ids this model's tokenizer gives")
    if vocab_size is not None and high >= vocab_size:
        raise ValueError(f"token id {high} is outside the vocabulary of {vocab_size} ids "
                         f"(0..{vocab_size - 1}); pass ids this model's tokenizer gives")


def _check_position_values(positions: torch.Tensor, max_context: int | None) -> None:
    """Refuse host positions outside a cache of max_context slots."""
    if not positions.numel():
        return
    low, high = (int(v) for v in torch.aminmax(positions))
    if max_context is not None and high >= max_context:
        raise ValueError(f"position {high} is outside the cache of max_context={max_context} slots "
                         f"(0..{max_context - 1}); build the model with max_context>={high + 1}")
    if low < 0:
        raise ValueError(f"position {low} is outside the cache; positions count from 0")
