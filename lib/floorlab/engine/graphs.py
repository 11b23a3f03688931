"""Engine wing: CUDA graphs of the decode step, captured once per batch bucket (engine.buckets) and
replayed from static input buffers; step() hands back a clone of the output, borrow() the view itself."""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from functools import partial
from typing import Callable, Iterable

import torch

from floorlab.core.numbers import whole_number
from floorlab.core.progress import progress_bar
from floorlab.engine.buckets import DEFAULT_BUCKETS, PAD_POSITION, PAD_TOKEN, BucketRunner, StepFn
from floorlab.engine.inputs import resolved_device


@dataclass
class GraphMemory:
    """GPU memory one captured graph added, measured around its capture: allocated (tensors it keeps
    alive) and reserved (segments its memory pool holds), in bytes."""

    bucket: int
    allocated_bytes: int
    reserved_bytes: int
    shared_pool: bool

    @property
    def reserved_mb(self) -> float:
        """Reserved bytes in MB (1e6 bytes)."""
        return self.reserved_bytes / 1e6

    @property
    def allocated_mb(self) -> float:
        """Allocated bytes in MB (1e6 bytes)."""
        return self.allocated_bytes / 1e6

    def to_dict(self) -> dict:
        """Plain dict, ready for JSON (from_dict reads it back)."""
        return dict(vars(self))

    @classmethod
    def from_dict(cls, data: dict) -> "GraphMemory":
        return cls(**data)


def _memory_now(device) -> tuple[int, int]:
    """(allocated, reserved) bytes on device once garbage and cached free blocks are released."""
    gc.collect()  # torch.cuda.graph collects and empties the cache too: measure after both
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    return torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device)


def capture_graph(fn: Callable[[], object], *, warmup: int = 3, pool=None,
                  stream: torch.cuda.Stream | None = None):
    """Record one call of fn into a CUDA graph after `warmup` calls on the capture
    stream (a fresh side stream unless given); returns (graph, output), the output
    static: each replay overwrites it."""
    side = stream if stream is not None else torch.cuda.Stream()
    if warmup:
        _warm_up([fn] * int(warmup), side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool, stream=side), torch.no_grad():
        out = fn()  # recorded, not run: the kernels run at replay()
    return graph, out


def _warm_up(calls, side: torch.cuda.Stream, device=None) -> None:
    """Run each call on the side stream, as capture requires, then wait for the device."""
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side), torch.no_grad():
        for call in calls:
            call()
    torch.cuda.current_stream(device).wait_stream(side)
    torch.cuda.synchronize(device)


class GraphRunner(BucketRunner):
    """Runs a model's decode step (or step_fn, which must add no CUDA graphs) through graphs captured at
    batch buckets; guard=False lets a second caller in, only to show the wrong logits it would get."""

    path_name = "graph"

    def __init__(self, model, buckets: Iterable[int] = DEFAULT_BUCKETS, *,
                 step_fn: StepFn | None = None, debug: bool = False, guard: bool = True):
        super().__init__(model, buckets, step_fn=step_fn, debug=debug, guard=guard)
        self.device = self._device_for(model)
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.static_outputs: dict[int, torch.Tensor] = {}
        self.static_tokens: torch.Tensor | None = None
        self.static_positions: torch.Tensor | None = None
        self.capture_s: float | None = None
        self.memory: dict[int, GraphMemory] = {}
        self.last_max_abs_diff: float | None = None

    @staticmethod
    def _device_for(model) -> torch.device:
        """The CUDA device of the model; an error saying how to fix a missing GPU or a CPU model."""
        if not torch.cuda.is_available():
            raise RuntimeError("CUDA graphs need a CUDA GPU and none is visible here, so on this machine "
                               "the book's CPU path shows a stored reference run instead.")
        device = torch.device(model.device)
        if device.type != "cuda":
            raise ValueError(f"GraphRunner needs the model on a CUDA device, but it is on {device}; "
                             "build or move the model with device='cuda'")
        return resolved_device(device)

    @property
    def captured(self) -> bool:
        """True once capture() has recorded a graph for every bucket."""
        return len(self.graphs) == len(self.buckets)

    def capture(self, *, warmup: int = 3, progress: str | None = None,
                shared_pool: bool = True) -> float:
        """Warm up and capture one graph per bucket, largest first, in one shared memory pool (or a pool each);
        keeps each graph's memory in memory[bucket], clears the KV cache after, returns seconds taken."""
        warmup = whole_number(warmup, "warmup", hint="capture needs at least one warm-up call")
        start_s = time.perf_counter()
        self.graphs, self.static_outputs, self.memory = {}, {}, {}
        largest = self.largest_bucket
        with torch.cuda.device(self.device), torch.no_grad():
            self.static_tokens = torch.zeros(largest, dtype=torch.long, device=self.device)
            self.static_positions = torch.zeros(largest, dtype=torch.long, device=self.device)

            side = torch.cuda.Stream(device=self.device)
            order = list(reversed(self.buckets))
            _warm_up([partial(self.step_fn, self.static_tokens[:b], self.static_positions[:b])
                      for b in order for _ in range(warmup)], side, self.device)
            pool = torch.cuda.graph_pool_handle() if shared_pool else None
            for bucket in progress_bar(order, label=progress, total=len(order)) if progress else order:
                allocated, reserved = _memory_now(self.device)
                self.graphs[bucket], self.static_outputs[bucket] = capture_graph(
                    lambda: self.step_fn(self.static_tokens[:bucket], self.static_positions[:bucket]),
                    warmup=0, pool=pool, stream=side)
                allocated_after, reserved_after = _memory_now(self.device)
                self.memory[bucket] = GraphMemory(bucket, allocated_after - allocated,
                                                  reserved_after - reserved, shared_pool)
            torch.cuda.synchronize(self.device)
        self._reset_model_cache()
        self.capture_s = time.perf_counter() - start_s
        return self.capture_s

    def _run_bucket(self, tokens, positions, bucket):
        self._require_captured()
        self._load_inputs(tokens, positions, bucket)  # copy in, pad
        self.graphs[bucket].replay()
        return self.static_outputs[bucket]

    def replay_fn(self, batch: int) -> Callable[[], None]:
        """A no-argument callable replaying the bucket's graph on the inputs the last step loaded, padding
        rows included and not restored (for timing and profiling)."""
        bucket = self.bucket_for(batch)
        if bucket is None:
            raise ValueError(f"batch {batch} is above the largest captured bucket {self.largest_bucket}; "
                             "pass a batch <= that bucket or capture larger buckets")
        self._require_captured()

        def replay() -> None:
            self.graphs[bucket].replay()

        return replay

    def check_bit_identical(self, tokens: torch.Tensor, positions: torch.Tensor) -> bool:
        """True when a replay gives exactly the eager step's logits (torch.equal); B must be a bucket.
        The largest absolute logit difference is kept in last_max_abs_diff."""
        batch = self.check_inputs(tokens, positions)
        if batch not in self.buckets:
            raise ValueError(f"check_bit_identical needs a batch equal to a bucket {self.buckets}, got {batch}; "
                             "pass tokens and positions with that many rows")
        self._require_captured()
        tokens, positions = tokens.to(self.device), positions.to(self.device)
        with torch.no_grad():
            eager = self.step_fn(tokens, positions).clone()
            self._load_inputs(tokens, positions, batch)
            self.graphs[batch].replay()
            graph = self.static_outputs[batch].clone()
        self.last_max_abs_diff = (eager.float() - graph.float()).abs().max().item()
        return bool(torch.equal(eager, graph))

    def _load_inputs(self, tokens: torch.Tensor, positions: torch.Tensor, bucket: int) -> None:
        batch = tokens.shape[0]
        self.static_tokens[:batch].copy_(tokens)
        self.static_positions[:batch].copy_(positions)
        if bucket > batch:
            self.static_tokens[batch:bucket].fill_(PAD_TOKEN)
            self.static_positions[batch:bucket].fill_(PAD_POSITION)

    def _require_captured(self) -> None:
        if not self.captured:
            raise RuntimeError("this GraphRunner has no graphs yet; call runner.capture() first")

    def _reset_model_cache(self) -> None:
        reset = getattr(self.model, "reset_cache", None)
        if reset is None:
            return
        before = _buffer_addresses(self.model)
        reset()
        after = _buffer_addresses(self.model)
        moved = [name for name, ptr in before.items() if after.get(name) != ptr]
        if moved:
            self.graphs, self.static_outputs = {}, {}
            raise RuntimeError(f"model.reset_cache() replaced buffers {moved}, so the captured graphs would "
                               "read freed memory; make reset_cache() clear them in place (tensor.zero_())")


def _buffer_addresses(model) -> dict[str, int]:
    """Device addresses of a torch module's buffers by name; empty for other objects."""
    if not isinstance(model, torch.nn.Module):
        return {}
    return {name: buf.data_ptr() for name, buf in model.named_buffers()}

