"""Studies wing: the chapter "Serving", the padding trap: what a padded step writes into the
cache rows of requests that are not in the batch, with the guard and without it, and the
challenge that asks the reader to count those values.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from floorlab.core.checks import NOT_ATTEMPTED, checked, read_number
from floorlab.engine.buckets import PAD_POSITION, PAD_TOKEN

# ---------------------------------------------------------------- the padding trap

def _bits(t: torch.Tensor) -> torch.Tensor:
    """t's raw bits as integers, so NaNs compare equal to themselves."""
    kinds = {2: torch.int16, 4: torch.int32, 8: torch.int64}
    return t.contiguous().view(kinds[t.element_size()])


@dataclass
class TrapReport:
    """One padded step with poisoned padding rows, checked against the same step with clean ones."""

    batch: int
    bucket: int
    path: str
    outputs_equal: bool
    outputs_finite: bool
    live_cache_equal: bool
    other_rows_kept: bool

    @property
    def passed(self) -> bool:
        """True when the live rows saw nothing of the poison and no other row was written."""
        return (self.outputs_equal and self.outputs_finite and self.live_cache_equal
                and self.other_rows_kept)

    def summary(self) -> str:
        """The four checks, one per line."""
        checks = [("live logits equal to the clean step's", self.outputs_equal),
                  ("live logits finite", self.outputs_finite),
                  ("live rows' KV cache equal to the clean step's", self.live_cache_equal),
                  (f"rows {self.batch} on left bit for bit as they were", self.other_rows_kept)]
        return "\n".join(
            [f"batch {self.batch} in bucket {self.bucket} ({self.path}), every cache row "
             f"from {self.batch} on filled with NaN"]
            + [f"{what:<48} {'yes' if ok else 'NO'}" for what, ok in checks])

    def to_dict(self) -> dict:
        """Plain dict, ready for JSON."""
        return dict(vars(self))


def check_padding_trap(runner, tokens: torch.Tensor, positions: torch.Tensor, batch: int
                       ) -> TrapReport:
    """Run one padded step twice, from the same cache: once clean, once with every cache row from
    `batch` on (padding rows and rows beyond the bucket) filled with NaN, and the runner's
    static padding inputs with garbage. The model's cache is put back afterwards."""
    model = runner.model
    bucket = runner.bucket_for(batch)
    if bucket is None or bucket == batch:
        raise ValueError(f"batch {batch} needs padding for this check; pick one between two "
                         f"buckets of {runner.buckets}")
    tok, pos = tokens[:batch], positions[:batch]
    saved = model.k_cache.clone(), model.v_cache.clone()
    try:
        clean = runner.step(tok, pos)
        clean_k, clean_v = model.k_cache[:, :batch].clone(), model.v_cache[:, :batch].clone()
        _put_back(model, saved)
        with torch.no_grad():
            model.k_cache[:, batch:].fill_(float("nan"))
            model.v_cache[:, batch:].fill_(float("nan"))
        poisoned_k, poisoned_v = model.k_cache[:, batch:].clone(), model.v_cache[:, batch:].clone()
        _poison_static_inputs(runner, batch, bucket)
        out = runner.step(tok, pos)
        return TrapReport(
            batch, bucket, runner.path_name,
            outputs_equal=torch.equal(_bits(out), _bits(clean)),
            outputs_finite=bool(torch.isfinite(out).all()),
            live_cache_equal=(torch.equal(_bits(model.k_cache[:, :batch]), _bits(clean_k))
                              and torch.equal(_bits(model.v_cache[:, :batch]), _bits(clean_v))),
            other_rows_kept=(torch.equal(_bits(model.k_cache[:, batch:]), _bits(poisoned_k))
                             and torch.equal(_bits(model.v_cache[:, batch:]), _bits(poisoned_v))),
        )
    finally:
        _put_back(model, saved)


def overwritten_values(model, tokens: torch.Tensor, positions: torch.Tensor, batch: int,
                       bucket: int) -> int:
    """KV-cache values of rows batch.. that one padded step overwrites WITHOUT keep_padding_rows.

    Runs model.decode_step on the batch padded as the runners pad it (what a replay computes),
    after filling rows batch.. with +inf, a value no step writes (a row's keys and values are
    finite, or NaN once the inf reaches them), and counts the values that are no longer +inf.
    The model's cache is put back afterwards.
    """
    if bucket <= batch or bucket > model.max_batch:
        raise ValueError(f"bucket must be above batch ({batch}) and at most max_batch "
                         f"({model.max_batch}), got {bucket}")
    device = model.device
    pad = bucket - batch
    padded_tok = torch.cat([tokens[:batch].to(device),
                            torch.full((pad,), PAD_TOKEN, dtype=torch.long, device=device)])
    padded_pos = torch.cat([positions[:batch].to(device),
                            torch.full((pad,), PAD_POSITION, dtype=torch.long, device=device)])
    saved = model.k_cache.clone(), model.v_cache.clone()
    try:
        with torch.no_grad():
            model.k_cache[:, batch:].fill_(float("inf"))
            model.v_cache[:, batch:].fill_(float("inf"))
        model.decode_step(padded_tok, padded_pos)
        return sum(int((~torch.isposinf(cache[:, batch:])).sum())
                   for cache in (model.k_cache, model.v_cache))
    finally:
        _put_back(model, saved)


def values_padding_writes(shape, padded_rows: int) -> int:
    """KV-cache values padded_rows padding rows write in one step: one slot each, K and V, every layer."""
    return padded_rows * shape.num_layers * 2 * shape.num_kv_heads * shape.head_dim


def _put_back(model, saved) -> None:
    with torch.no_grad():
        model.k_cache.copy_(saved[0])
        model.v_cache.copy_(saved[1])


def _poison_static_inputs(runner, batch: int, bucket: int) -> None:
    """Garbage in a GraphRunner's static padding inputs and outputs (the runner must overwrite them)."""
    tokens = getattr(runner, "static_tokens", None)
    if tokens is None:
        return
    with torch.inference_mode():  # the captured outputs are inference tensors
        tokens[batch:bucket].fill_(runner.model.shape.vocab_size - 1)
        runner.static_positions[batch:bucket].fill_(runner.model.max_context - 1)
        runner.static_outputs[bucket][batch:].fill_(float("nan"))


# Serving, challenge 2: what padding overwrites without the guard.

@checked
def check_overwritten(my_values, expected: int, measured: int) -> str:
    """Verdict on the reader's count of cache values one padded step overwrites unguarded."""
    if my_values is None:
        return NOT_ATTEMPTED
    value = read_number(my_values, "my_overwritten_values")
    if value == expected:
        agree = "and" if measured == expected else "but"
        return (f"right: {expected:,} values, {agree} the step run without the guard "
                f"overwrote {measured:,}.")
    return ("not yet: each padding row writes one slot of its cache row, for K and for V, "
            "in every layer, for every KV head: head_dim values each.")
