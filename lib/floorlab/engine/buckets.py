"""Engine wing: batch buckets and padding, shared by the graph runner and its eager stand-in.

Graphs have fixed shapes, so a runner keeps one per bucket (1, 2, 4, 8, 16 by default), pads a
live batch up to the nearest bucket, and runs eagerly above the largest one. Padding rows are
real rows: they write the KV cache of rows the live batch does not use, so every padded step
runs inside keep_padding_rows, which puts those cache values back afterwards.
"""
from __future__ import annotations

import threading
import warnings
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

import torch

from floorlab.engine.inputs import check_decode_inputs, resolved_device

DEFAULT_BUCKETS = (1, 2, 4, 8, 16)
PAD_TOKEN = 0  # what a padding row decodes
PAD_POSITION = 0  # where a padding row decodes: the cache slot it writes in its row

StepFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class EagerFallbackWarning(UserWarning):
    """A batch above the largest captured bucket ran eagerly, without a graph."""


class SharedBufferError(RuntimeError):
    """In debug mode: a second caller reached a runner's static buffers while a first still held them."""


def check_buckets(buckets: Iterable[int], max_batch: int | None = None) -> tuple[int, ...]:
    """Return the buckets sorted and de-duplicated; raises ValueError saying how to fix a bad one."""
    try:
        items = list(buckets)
    except TypeError:
        raise ValueError(
            f"buckets must be a sequence of positive ints such as (1, 2, 4, 8, 16), got {buckets!r}"
        ) from None
    if not items:
        raise ValueError("buckets is empty; pass at least one batch size, e.g. (1, 2, 4, 8, 16)")
    for b in items:
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise ValueError(
                f"every bucket must be a positive int, got {b!r} in {tuple(items)!r}; "
                "pass batch sizes such as (1, 2, 4, 8, 16)"
            )
    ordered = tuple(sorted(set(items)))
    if max_batch is not None and ordered[-1] > max_batch:
        raise ValueError(
            f"the largest bucket ({ordered[-1]}) is above the model's max_batch ({max_batch}); "
            f"build the model with max_batch >= {ordered[-1]} or pass smaller buckets"
        )
    return ordered


def bucket_for(batch: int, buckets: Iterable[int]) -> int | None:
    """Return the smallest bucket >= batch, or None when batch is above the largest bucket."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive int, got {batch!r}")
    fitting = [b for b in buckets if b >= batch]
    return min(fitting) if fitting else None


def padding_waste(batch: int, buckets: Iterable[int]) -> int:
    """Return the padded rows (bucket - batch) a graph replay computes for nothing; 0 above the
    largest bucket (eager)."""
    bucket = bucket_for(batch, buckets)
    return 0 if bucket is None else bucket - batch


@contextmanager
def keep_padding_rows(model, batch: int, bucket: int):
    """Put back, as the block ends, every KV-cache value that padding rows write.

    A padding row decodes PAD_TOKEN at PAD_POSITION, so a padded step writes that
    slot of cache rows batch..bucket-1 in every layer, rows another sequence may
    hold. The model names those values with cache_slots(rows, position); they are
    saved before the block and copied back after it. Without padding: nothing.
    """
    views: tuple[torch.Tensor, ...] = ()
    if bucket > batch:
        slots = getattr(model, "cache_slots", None)
        if slots is None:
            raise TypeError(
                f"a batch of {batch} padded to {bucket} writes the KV cache of "
                f"rows {batch}..{bucket - 1}, and {type(model).__name__} has no "
                "cache_slots(rows, position) to keep them; pass a batch equal to a "
                "bucket, or give the model cache_slots"
            )
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
    """What every runner shares: the buckets, the bucket a batch pads to, eager above them.

    `model` needs decode_step(tokens[B], positions[B]) -> logits[B, V], max_batch,
    device and shape.vocab_size; `step_fn` replaces model.decode_step. A subclass
    says how a padded bucket runs (_run_bucket); borrow() and step() do the rest.
    debug=True fills the output with NaN after each copy-out and raises
    SharedBufferError when two callers overlap (see borrow()).
    """

    path_name = "bucket"

    def __init__(self, model, buckets: Iterable[int] = DEFAULT_BUCKETS, *,
                 step_fn: StepFn | None = None, debug: bool = False):
        self.model = model
        self.buckets = check_buckets(buckets, model.max_batch)
        self.step_fn: StepFn = step_fn if step_fn is not None else model.decode_step
        self.debug = bool(debug)
        self._guard = threading.Lock()
        self._holder: str | None = None  # the thread holding the static buffers (debug mode)
        # the model's device, or host tensors, which a step copies in
        self.input_devices = tuple(dict.fromkeys((resolved_device(model.device), torch.device("cpu"))))
        self.input_limits = (getattr(getattr(model, "shape", None), "vocab_size", None),
                             getattr(model, "max_context", None))  # (vocab_size, max_context); None: unbounded
        self.last_path: str | None = None
        self.last_padding: int = 0

    @property
    def largest_bucket(self) -> int:
        """The largest captured batch size (rows)."""
        return self.buckets[-1]

    def bucket_for(self, batch: int) -> int | None:
        """Return the smallest bucket >= batch, or None above the largest bucket."""
        return bucket_for(batch, self.buckets)

    def padding_waste(self, batch: int) -> int:
        """Return the padding rows (bucket - batch) a step at this batch computes; 0 when it runs eagerly."""
        return padding_waste(batch, self.buckets)

    def step(self, tokens: torch.Tensor,
             positions: torch.Tensor) -> torch.Tensor:
        """Logits [B, V] for one decode step: the bucket's step padded to the
        bucket, or eager above the largest bucket.

        Padding rows B..bucket-1 run PAD_TOKEN at PAD_POSITION and write that slot
        of cache rows B..bucket-1; keep_padding_rows puts those values back, so a
        sequence held in a row beyond the live batch keeps its cache. The result is
        a clone, never a view of a buffer the next step overwrites.
        """
        with self.borrow(tokens, positions) as logits:
            return logits.clone()  # the copy-out: the caller's own memory

    @contextmanager
    def borrow(self, tokens: torch.Tensor,
               positions: torch.Tensor) -> Iterator[torch.Tensor]:
        """Lend one step's logits [B, V] for a `with` block: a view, no copy.

        The view is valid inside the block only: the next step of the bucket
        overwrites it. In debug mode the runner fills the output with NaN as the
        block ends, so a view kept past it reads NaN at once, and a second caller
        arriving while the first holds the buffers gets SharedBufferError.
        """
        batch = self.check_inputs(tokens, positions)
        bucket = self.bucket_for(batch)
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
        """Return the batch B after engine.inputs.check_decode_inputs against the model's limits.

        Host tensors are accepted as well as the model's device (a step copies them in);
        their values are checked there, before the copy, so a float id is never truncated.
        """
        return check_decode_inputs(tokens, positions, vocab_size=self.input_limits[0], device=self.input_devices,
                                   max_batch=self.model.max_batch, max_context=self.input_limits[1])

    def _enter(self) -> None:
        """In debug mode, claim the static buffers for this thread, or raise SharedBufferError."""
        if not self.debug:
            return
        me = threading.current_thread().name
        with self._guard:
            if self._holder is not None:
                raise SharedBufferError(
                    f"{me} reached this runner's static buffers while {self._holder} still "
                    "holds them, so one caller would replay the other's inputs; give each "
                    "thread or stream its own runner, or take a lock around every step")
            self._holder = me

    def _leave(self) -> None:
        if self.debug:
            with self._guard:
                self._holder = None


class PaddedEagerRunner(BucketRunner):
    """Pads a live batch to its bucket as GraphRunner does and runs the step eagerly there.

    The same padding rows and the same guard as a replay, on any device, CPU included:
    a replay is bit-identical to the eager step it recorded, so this computes what
    the graph would.
    """

    path_name = "padded eager"

    def _run_bucket(self, tokens, positions, bucket):
        batch = tokens.shape[0]
        device = self.model.device
        pad = bucket - batch
        tokens = torch.cat([tokens.to(device), tokens.new_full((pad,), PAD_TOKEN, device=device)])
        positions = torch.cat([positions.to(device),
                               positions.new_full((pad,), PAD_POSITION, device=device)])
        return self.step_fn(tokens, positions)
