"""Engine wing: batch buckets and padding shared by the graph runner and its eager twin: a batch pads
up to the nearest bucket, runs eagerly above the largest, and keep_padding_rows restores what padding writes."""
from __future__ import annotations

import threading
import warnings
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

import torch

from floorlab.core.numbers import whole_number, whole_numbers
from floorlab.engine.inputs import check_decode_inputs, resolved_device

DEFAULT_BUCKETS = (1, 2, 4, 8, 16)
PAD_TOKEN = 0  # what a padding row decodes
PAD_POSITION = 0  # where a padding row decodes: the cache slot it writes in its row

StepFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class EagerFallbackWarning(UserWarning):
    """A batch above the largest captured bucket ran eagerly, without a graph."""


class SharedBufferError(RuntimeError):
    """A second caller reached a runner's static buffers while a first still held them."""


def check_buckets(buckets: Iterable[int], max_batch: int | None = None) -> tuple[int, ...]:
    """The buckets sorted and de-duplicated; a ValueError saying how to fix a bad one."""
    ordered = tuple(sorted(set(whole_numbers(buckets, "buckets", hint="pass batch sizes such as (1, 2, 4, 8, 16)"))))
    if max_batch is not None and ordered[-1] > max_batch:
        raise ValueError(
            f"the largest bucket ({ordered[-1]}) is above the model's max_batch ({max_batch}); "
            f"build the model with max_batch >= {ordered[-1]} or pass smaller buckets")
    return ordered


def bucket_for(batch: int, buckets: Iterable[int]) -> int | None:
    """The smallest bucket >= batch, or None when batch is above the largest bucket."""
    batch = whole_number(batch, "batch", hint="a batch counts rows")
    return min((b for b in buckets if b >= batch), default=None)


@contextmanager
def keep_padding_rows(model, batch: int, bucket: int):
    """Put back, as the block ends, the KV-cache slot PAD_POSITION of rows
    batch..bucket-1 that padding rows write (model.cache_slots(rows, position) names
    them); without padding, nothing."""
    views: tuple[torch.Tensor, ...] = ()
    if bucket > batch:
        slots = getattr(model, "cache_slots", None)
        if slots is None:
            raise TypeError(
                f"a batch of {batch} padded to {bucket} writes the KV cache of "
                f"rows {batch}..{bucket - 1}, and {type(model).__name__} has no "
                "cache_slots(rows, position) to keep them; pass a batch equal to a "
                "bucket, or give the model cache_slots")
        views = tuple(slots(slice(batch, bucket), PAD_POSITION))
    with torch.no_grad():
        saved = [view.clone() for view in views]
    try:
        yield
    finally:
        with torch.no_grad():
            for view, old in zip(views, saved):
                view.copy_(old)


class BucketRunner:
    """Buckets, padding and eager fallback for a model with decode_step, max_batch and device; guard=True
    refuses a second caller inside a step (SharedBufferError), debug=True also NaN-fills each lent output."""

    path_name = "bucket"

    def __init__(self, model, buckets: Iterable[int] = DEFAULT_BUCKETS, *,
                 step_fn: StepFn | None = None, debug: bool = False, guard: bool = False):
        self.model = model
        self.buckets = check_buckets(buckets, model.max_batch)
        self.step_fn: StepFn = step_fn if step_fn is not None else model.decode_step
        self.debug = bool(debug)
        self._stepping = threading.Lock() if guard or debug else None
        self._holder: str | None = None  # the thread inside a step
        # the model's device, or host tensors, which a step copies in
        self.input_devices = tuple(dict.fromkeys((resolved_device(model.device), torch.device("cpu"))))
        self.vocab_size = getattr(getattr(model, "shape", None), "vocab_size", None)  # None: unbounded
        self.max_context = getattr(model, "max_context", None)
        self.last_path: str | None = None
        self.last_padding: int = 0

    @property
    def largest_bucket(self) -> int:
        """The largest captured batch size (rows)."""
        return self.buckets[-1]

    def bucket_for(self, batch: int) -> int | None:
        """The smallest bucket >= batch, or None above the largest bucket."""
        return bucket_for(batch, self.buckets)

    def step(self, tokens: torch.Tensor,
             positions: torch.Tensor) -> torch.Tensor:
        """Logits [B, V] of one step padded to its bucket (eager above the largest),
        as a clone; cache rows beyond the live batch keep their values
        (keep_padding_rows)."""
        with self.borrow(tokens, positions) as logits:
            return logits.clone()  # the copy-out: the caller's own memory

    @contextmanager
    def borrow(self, tokens: torch.Tensor,
               positions: torch.Tensor) -> Iterator[torch.Tensor]:
        """Lend one step's logits [B, V] as a view, valid inside the `with` block
        only (debug mode fills it with NaN as the block ends)."""
        batch = self.check_inputs(tokens, positions)
        bucket = next((b for b in self.buckets if b >= batch), None)
        self._enter()
        held = None
        try:
            with torch.no_grad():
                if bucket is None:
                    warnings.warn(f"batch {batch} is above the largest captured "
                                  f"bucket {self.largest_bucket}; running eager",
                                  EagerFallbackWarning, stacklevel=3)
                    held = self.step_fn(tokens.to(self.model.device),
                                        positions.to(self.model.device))
                    self.last_path = (f"eager (batch {batch} > largest bucket "
                                      f"{self.largest_bucket})")
                else:
                    with keep_padding_rows(self.model, batch, bucket):
                        held = self._run_bucket(tokens, positions, bucket)
                    self.last_path = f"{self.path_name} (bucket {bucket})"
                self.last_padding = 0 if bucket is None else bucket - batch
            yield held[:batch]
        finally:
            if self.debug and held is not None and held.is_floating_point():
                with torch.inference_mode():  # the output may be an inference tensor
                    held.fill_(float("nan"))
            self._leave()

    def _run_bucket(self, tokens: torch.Tensor, positions: torch.Tensor,
                    bucket: int) -> torch.Tensor:
        """Logits [bucket, V] of the live rows padded to the bucket."""
        raise NotImplementedError

    def check_inputs(self, tokens: torch.Tensor, positions: torch.Tensor) -> int:
        """The batch B after engine.inputs.check_decode_inputs; host tensors are taken too (a step
        copies them in), their values checked before the copy, so a float id is never truncated."""
        return check_decode_inputs(tokens, positions, vocab_size=self.vocab_size, device=self.input_devices,
                                   max_batch=self.model.max_batch, max_context=self.max_context)

    def _enter(self) -> None:
        """Claim the static buffers for one step (a non-blocking host lock), or raise SharedBufferError."""
        if self._stepping is None:
            return
        me = threading.current_thread().name
        if not self._stepping.acquire(blocking=False):
            raise SharedBufferError(
                f"{me} stepped this runner while {self._holder} was inside a step, so one would replay "
                "the other's inputs and read its logits; give each thread or stream its own runner, or "
                "take a lock around every step")
        self._holder = me

    def _leave(self) -> None:
        if self._stepping is not None:
            self._holder = None
            self._stepping.release()


class PaddedEagerRunner(BucketRunner):
    """Pads a batch to its bucket as GraphRunner does and steps eagerly, on any device: what a replay
    (bit-identical to the step it recorded) would compute."""

    path_name = "padded eager"

    def _run_bucket(self, tokens, positions, bucket):
        batch = tokens.shape[0]
        device = self.model.device
        pad = bucket - batch
        tokens = torch.cat([tokens.to(device), tokens.new_full((pad,), PAD_TOKEN, device=device)])
        positions = torch.cat([positions.to(device),
                               positions.new_full((pad,), PAD_POSITION, device=device)])
        return self.step_fn(tokens, positions)
