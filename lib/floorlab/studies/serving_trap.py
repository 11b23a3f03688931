"""Studies wing: the chapter "Serving", the padding trap: what a padded step writes into the cache
rows of requests that are not in the batch, with the guard and without it, what the guard costs
beside a full bucket, and the challenge that asks the reader to count those values.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from floorlab.core.checks import check_number
from floorlab.core.prose import sig
from floorlab.core.runs import Row
from floorlab.core.timing import compare
from floorlab.engine.buckets import PAD_POSITION, PAD_TOKEN


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit for bit, so NaNs compare equal to themselves."""
    kinds = {2: torch.int16, 4: torch.int32, 8: torch.int64}
    return torch.equal(*(t.contiguous().view(kinds[t.element_size()]) for t in (a, b)))


@contextmanager
def _cache_put_back(model, fill: float | None = None, from_row: int = 0):
    """Yields (k_cache, v_cache), rows from_row.. filled with fill if given; both put back after."""
    caches = model.k_cache, model.v_cache
    saved = [c.clone() for c in caches]
    try:
        if fill is not None:
            with torch.no_grad():
                for cache in caches:
                    cache[:, from_row:].fill_(fill)
        yield caches
    finally:
        with torch.no_grad():
            for cache, kept in zip(caches, saved):
                cache.copy_(kept)


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

    def checks(self) -> dict[str, bool]:
        return {"live logits equal to the clean step's": self.outputs_equal,
                "live logits finite": self.outputs_finite,
                "live rows' KV cache equal to the clean step's": self.live_cache_equal,
                f"rows {self.batch} on left bit for bit as they were": self.other_rows_kept}

    passed = property(lambda self: all(self.checks().values()))

    def summary(self) -> str:
        return "\n".join(
            [f"batch {self.batch} in bucket {self.bucket} ({self.path}), every cache row "
             f"from {self.batch} on filled with NaN"]
            + [f"{what:<48} {'yes' if ok else 'NO'}" for what, ok in self.checks().items()])

    def to_dict(self) -> dict:
        return asdict(self)


def check_padding_trap(runner, tokens: torch.Tensor, positions: torch.Tensor, batch: int
                       ) -> TrapReport:
    """One padded step run clean, then with cache rows batch.. NaN and garbage padding inputs."""
    bucket = runner.bucket_for(batch)
    if bucket is None or bucket == batch:
        raise ValueError(f"batch {batch} needs padding for this check; pick one between two "
                         f"buckets of {runner.buckets}")
    tok, pos = tokens[:batch], positions[:batch]
    with _cache_put_back(runner.model) as caches:
        clean = runner.step(tok, pos)
        clean_live = [c[:, :batch].clone() for c in caches]
    with _cache_put_back(runner.model, float("nan"), from_row=batch) as caches:
        poisoned = [c[:, batch:].clone() for c in caches]
        if getattr(runner, "static_tokens", None) is not None:  # garbage the runner must overwrite
            with torch.inference_mode():  # the captured outputs are inference tensors
                runner.static_tokens[batch:bucket].fill_(runner.model.shape.vocab_size - 1)
                runner.static_positions[batch:bucket].fill_(runner.model.max_context - 1)
                runner.static_outputs[bucket][batch:].fill_(float("nan"))
        out = runner.step(tok, pos)
        return TrapReport(
            batch, bucket, runner.path_name,
            outputs_equal=_same(out, clean),
            outputs_finite=bool(torch.isfinite(out).all()),
            live_cache_equal=all(_same(c[:, :batch], kept) for c, kept in zip(caches, clean_live)),
            other_rows_kept=all(_same(c[:, batch:], kept) for c, kept in zip(caches, poisoned)))


def overwritten_values(model, tokens: torch.Tensor, positions: torch.Tensor, batch: int,
                       bucket: int) -> int:
    """KV-cache values of rows batch.. one padded step overwrites unguarded: rows filled with +inf
    (which no step writes), then counted once no longer +inf; the cache is put back."""
    if bucket <= batch or bucket > model.max_batch:
        raise ValueError(f"bucket must be above batch ({batch}) and at most max_batch "
                         f"({model.max_batch}), got {bucket}")
    pad = (0, bucket - batch)
    padded_tok = F.pad(tokens[:batch].to(model.device), pad, value=PAD_TOKEN)
    padded_pos = F.pad(positions[:batch].to(model.device), pad, value=PAD_POSITION)
    with _cache_put_back(model, float("inf"), from_row=batch) as caches:
        model.decode_step(padded_tok, padded_pos)
        return sum(int((~torch.isposinf(c[:, batch:])).sum()) for c in caches)


def values_padding_writes(shape, padded_rows: int) -> int:
    """KV-cache values padded_rows padding rows write in one step: one slot each, K and V, every layer."""
    return padded_rows * shape.num_layers * 2 * shape.num_kv_heads * shape.head_dim


def guard_cost_sentence(padded: Row, full: Row) -> str:
    """A padded step's time against a full bucket's: beyond the spreads, the guard's copies."""
    extra_us = sig((padded.median_ms - full.median_ms) * 1e3)
    return compare(padded, full).verdict(
        f"the padded step took {extra_us} µs longer, beyond both spreads; both compute every row of "
        "the bucket, so the guard's copies are the difference.",
        "the padded step was the faster one, beyond both spreads, though it computes the same rows and adds the "
        "guard's copies: the machine's load changed between the two timings, so re-run before pricing the guard.",
        "the two differ by less than their spreads, so on this run the guard costs too little to see.")


# Serving, challenge 2: what padding overwrites without the guard.

def named_together(right: float, wrong: dict[str, float], *, apart: float = 0.0) -> dict[str, float]:
    """wrong ({mistake: number}) less those within apart (a fraction) of right, mistakes that
    give one number named together ('A, or with B')."""
    named: dict[float, str] = {}
    for mistake, n in wrong.items():
        if abs(n - right) > apart * right:
            named[n] = f"{named[n]}, or with {mistake}" if n in named else mistake
    return {mistake: n for n, mistake in named.items()}


def overwrite_mistakes(shape, batch: int, bucket: int, cache_tokens: int) -> dict[str, int]:
    """The plausible wrong counts of what one padded step overwrites, {mistake: values}."""
    padded = bucket - batch
    right = values_padding_writes(shape, padded)
    per_row = right // padded
    return named_together(right, {
        "K or V alone, not both": right // 2,
        "one layer, not every layer": right // shape.num_layers,
        f"the {shape.num_heads} query heads instead of the {shape.num_kv_heads} KV heads":
            right // shape.num_kv_heads * shape.num_heads,
        f"every one of the {cache_tokens} slots of a padding row, not the one it writes":
            right * cache_tokens,
        f"the {bucket} rows of the bucket, live rows included": per_row * bucket,
        f"the {batch} live rows instead of the {padded} padding rows": per_row * batch,
    })


def check_overwritten(my_values, expected: int, measured: int, *, wrong: dict[str, int] | None = None) -> str:
    """Verdict on the reader's count of cache values one padded step overwrites unguarded."""
    verdict = check_number(my_values, expected, rel=0.0, wrong=wrong, name="my_overwritten_values",
                           hint="Each padding row writes one slot of its cache row, for K and for V, "
                                "in every layer, for every KV head: head_dim values each.")
    if not verdict.startswith("right"):
        return verdict
    agree = "and" if measured == expected else "but"
    return f"right: {expected:,} values, {agree} the step run without the guard overwrote {measured:,}."
