"""Studies wing: the chapter "Shared buffers": what a replay overwrites at a graph's fixed addresses,
how two callers corrupt each other, the fixes; StandInRunner gives a CPU the same buffers."""
from __future__ import annotations

import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass

import torch

from floorlab.engine.buckets import SharedBufferError, StepFn
from floorlab.engine.graphs import GraphRunner

Request = tuple[torch.Tensor, torch.Tensor]  # (tokens [B], positions [B])
KEEPS = ("view", "copy", "clone")


class StandInGraph:
    """One bucket's stand-in for torch.cuda.CUDAGraph: replay() runs fn on fixed inputs into a fixed output."""

    def __init__(self, fn: StepFn, tokens: torch.Tensor, positions: torch.Tensor):
        self.fn, self.tokens, self.positions = fn, tokens, positions
        self.output = fn(tokens, positions).clone()  # "recording" allocates the output once

    def replay(self) -> None:
        self.output.copy_(self.fn(self.tokens, self.positions))


class StandInRunner(GraphRunner):
    """GraphRunner with StandInGraphs for CUDA graphs, on any device: its buffers behave as a graph's
    do (GraphRunner's own code copies in and out); only the launch cost differs."""

    @staticmethod
    def _device_for(model) -> torch.device:
        return torch.device(model.device)

    def capture(self, *, warmup: int = 1, progress: str | None = None,
                shared_pool: bool = False) -> float:
        """Allocate the static inputs and one output per bucket; seconds taken (GraphRunner's signature)."""
        start_s = time.perf_counter()
        self.static_tokens = torch.zeros(self.largest_bucket, dtype=torch.long, device=self.device)
        self.static_positions = torch.zeros_like(self.static_tokens)
        with torch.no_grad():  # largest first, as GraphRunner captures
            self.graphs = {b: StandInGraph(self.step_fn, self.static_tokens[:b], self.static_positions[:b])
                           for b in reversed(self.buckets)}
        self.static_outputs = {b: graph.output for b, graph in self.graphs.items()}
        self._reset_model_cache()
        self.capture_s = time.perf_counter() - start_s
        return self.capture_s


def static_runner(model, buckets=(1,), *, debug: bool = False, guard: bool = False) -> GraphRunner:
    """A captured GraphRunner on a CUDA model, else a StandInRunner; each graph in a pool of its own,
    so a kept view shows one bucket's output, not whatever a later graph left there."""
    kind = GraphRunner if torch.device(model.device).type == "cuda" else StandInRunner
    runner = kind(model, buckets=buckets, debug=debug, guard=guard)
    runner.capture(shared_pool=False)
    return runner


def runner_kind(runner: GraphRunner) -> str:
    """How a printed line names a runner."""
    return "the stand-in (no CUDA here)" if isinstance(runner, StandInRunner) else "CUDA graphs"


def request(model, batch: int, position: int, *, seed: int) -> Request:
    """One caller's decode request: random tokens [batch] at one position, on the model's device."""
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, model.shape.vocab_size, (batch,), generator=gen)
    return tokens.to(model.device), torch.full((batch,), position, device=model.device)


# ---- the output buffer: a kept view, and the copies that fix it

@dataclass
class Kept:
    """What a caller kept of the first request's logits, after later requests ran."""

    keep: str                  # "view" (the bug), "copy" (into the caller's buffer) or "clone"
    at_the_time: torch.Tensor  # a clone taken while the first result was fresh
    kept: torch.Tensor         # what the caller kept
    later: list[torch.Tensor]  # the later requests' logits

    changed = property(lambda self: not torch.equal(self.kept, self.at_the_time))
    poisoned = property(lambda self: bool(torch.isnan(self.kept).any()))  # a debug runner's NaN

    def holds(self) -> int | None:
        """Which later request's logits the kept tensor now holds (0-based), or None."""
        found = [i for i, out in enumerate(self.later)
                 if out.shape == self.kept.shape and torch.equal(out, self.kept)]
        return found[-1] if found else None

    def swap_sentence(self) -> str:
        """What the caller samples from what it kept, against the first request's own top token: two sentences."""
        now, then = int(self.kept.argmax()), int(self.at_the_time.argmax())
        if now != then:
            return (f"the token it samples from them is {now} where A's own answer was {then}. In a server, "
                    "that becomes one user's answer written into another user's reply, in fluent text.")
        return (f"the token it samples from them happens to be {then}, A's own answer too: this run's random "
                "weights favour that token for both requests. The logits under it are B's all the same, so the "
                "match is luck. With other requests, or a sampler that looks past the top token, one user's "
                "answer gets written into another user's reply, in fluent text.")


def keep_first(runner: GraphRunner, first: Request, later: list[Request], *,
               keep: str = "view") -> Kept:
    """Borrow the first request's logits, keep them as `keep` says, run the rest."""
    if keep not in KEEPS:
        raise ValueError(f"keep must be one of {KEEPS}, got {keep!r}")
    with runner.borrow(*first) as logits:
        at_the_time = logits.clone()
        if keep == "view":
            kept = logits                    # the bug: the view outlives its block
        elif keep == "copy":
            kept = torch.empty_like(logits)  # the caller's buffer, allocated once
            kept.copy_(logits)
        else:
            kept = logits.clone()
    results = [runner.step(*request) for request in later]
    return Kept(keep, at_the_time, kept, results)


# ---- the input buffers: two callers, one runner

class LockedRunner:
    """A runner behind a lock, one caller at a time; on CUDA the next holder's stream also waits for
    the last holder's event, so a copy-in cannot overtake a replay on another stream."""

    def __init__(self, runner: GraphRunner):
        self.runner = runner
        self._lock = threading.Lock()
        self._done: torch.cuda.Event | None = None
        self.waited = threading.Event()  # set once a caller has had to wait

    def step(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """The runner's step, one caller at a time; logits [B, V], the caller's copy."""
        if not self._lock.acquire(blocking=False):
            self.waited.set()
            self._lock.acquire()
        try:
            cuda = self.runner.device.type == "cuda"
            if cuda and self._done is not None:
                torch.cuda.current_stream(self.runner.device).wait_event(self._done)
            out = self.runner.step(tokens, positions)
            if cuda:
                self._done = torch.cuda.Event()
                self._done.record(torch.cuda.current_stream(self.runner.device))
            return out
        finally:
            self._lock.release()


@dataclass
class Between:
    """What two callers got when B's whole step ran between A's copy-in and A's replay."""

    how: str
    a: torch.Tensor | None
    b: torch.Tensor | None
    a_alone: torch.Tensor
    b_alone: torch.Tensor
    b_error: str | None = None

    a_is_own = property(lambda self: _got(self.a, self.a_alone))
    a_got_b = property(lambda self: _got(self.a, self.b_alone))  # the corruption
    b_is_own = property(lambda self: _got(self.b, self.b_alone))

    def verdict(self) -> str:
        """One line: what A and B got."""
        a = "its own logits" if self.a_is_own else ("B's logits" if self.a_got_b else "other logits")
        b = "its own logits" if self.b_is_own else "other logits"
        return f"{self.how:<24} A: {a}; B: {'refused (SharedBufferError)' if self.b_error else b}"


def _got(logits: torch.Tensor | None, alone: torch.Tensor) -> bool:
    return logits is not None and torch.equal(logits, alone)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()


def between(how: str, caller_a, caller_b, request_a: Request, request_b: Request, *,
            streams: bool = False, alone: tuple[torch.Tensor, torch.Tensor] | None = None,
            timeout_s: float = 120.0) -> Between:
    """Callers A and B (runners or LockedRunners) on two threads, B's whole step (or its refusal, or
    its wait at A's lock) forced between A's copy-in and replay: deterministic, never a race."""
    lock = caller_a if isinstance(caller_a, LockedRunner) else None
    runner_a = caller_a.runner if lock is not None else caller_a
    device = runner_a.device
    a_alone, b_alone = alone or (caller_a.step(*request_a), caller_b.step(*request_b))
    _sync(device)  # the requests and answers exist before either thread's stream reads them
    loaded, b_done = threading.Event(), threading.Event()
    out: dict[str, object] = {}
    load = runner_a._load_inputs

    def wait(event_ok, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not event_ok():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} did not happen within {timeout_s:g} s")
            time.sleep(0.0005)

    def paused_load(tokens, positions, bucket):
        load(tokens, positions, bucket)
        if threading.current_thread() is thread_a:
            _sync(device)
            loaded.set()
            wait(lambda: b_done.is_set() or (lock is not None and lock.waited.is_set()),
                 "B's step (or B queueing at the lock)")

    def run(name: str, caller, request):
        try:
            if name == "b":
                wait(loaded.is_set, "A's copy-in")
            with torch.cuda.stream(torch.cuda.Stream(device)) if streams else nullcontext():
                out[name] = caller.step(*request)
                _sync(device)
        except Exception as err:  # handed to the caller below
            out[name + "_error"] = err
        finally:
            if name == "b":
                b_done.set()

    thread_a = threading.Thread(target=run, args=("a", caller_a, request_a), name="thread A")
    thread_b = threading.Thread(target=run, args=("b", caller_b, request_b), name="thread B")
    runner_a._load_inputs = paused_load
    try:
        for thread in (thread_a, thread_b):
            thread.start()
        for thread in (thread_a, thread_b):
            thread.join()
    finally:
        del runner_a._load_inputs  # back to the class's method
    b_error = out.get("b_error")
    for err in (out.get("a_error"), b_error):
        if err is not None and not (err is b_error and isinstance(err, SharedBufferError)):
            raise err  # only B's refusal by a debug runner is a result
    return Between(how, out.get("a"), out.get("b"), a_alone, b_alone,
                   None if b_error is None else f"{type(b_error).__name__}: {b_error}")
