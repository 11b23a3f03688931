"""Tools wing: one bench row: the step timed against its floor, its kernels counted; a path that raises
becomes a failed row, one that cannot run here an absent row, and the run goes on."""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import torch

from floorlab.core.launches import LaunchCount, count_launches
from floorlab.core.roofline import BelowFloorWarning, Floor, is_below_floor
from floorlab.core.runs import Row, row_key
from floorlab.core.shapes import Qwen3Shape
from floorlab.engine.measure import measure_path

NOTE_CHARS = 240  # an error message in a row's note is cut to this length
GRAPH_COUNT_NOTE = "kernels counted on the eager step the graph replays"


def decode_inputs(shape: Qwen3Shape, batch: int, context: int, device, seed: int = 0):
    """(prompt [batch, context], tokens [batch], positions [batch]) from a fixed seed: every path gets the same."""
    gen = torch.Generator().manual_seed(seed + batch)
    prompt = torch.randint(0, shape.vocab_size, (batch, context), generator=gen)
    tokens = torch.randint(0, shape.vocab_size, (batch,), generator=gen)
    positions = torch.full((batch,), context, dtype=torch.long)
    return prompt.to(device), tokens.to(device), positions.to(device)


def prefill(model, prompt: torch.Tensor) -> None:
    """Fill a fresh cache with the prompt, so a decode step attends over its tokens."""
    with torch.inference_mode():  # transformers' cache tensors are made in inference mode
        model.reset_cache()
        model.prefill(prompt)
    if torch.device(model.device).type == "cuda":
        torch.cuda.synchronize(model.device)


def decode_logits(model, data, step=None) -> torch.Tensor:
    """Logits [B, vocab] of one decode step (model's, or step) after a fresh prefill, float32 on the CPU."""
    prompt, tokens, positions = data
    prefill(model, prompt)
    with torch.no_grad():
        return (step or model.decode_step)(tokens, positions).float().cpu()


@dataclass(frozen=True)
class Case:
    """One configuration: a shape at a batch, its floor, where it runs and how many steps to time."""

    shape: Qwen3Shape
    floor: Floor
    device: torch.device
    warmup: int
    repeats: int

    @property
    def batch(self) -> int:
        return self.floor.batch

    def key(self, path: str) -> str:
        """'<preset> b<batch> <path>': how the run's launches and timelines name this row."""
        return row_key(self.shape.name, self.batch, path)


def error_text(err: BaseException) -> str:
    """'Type: message' on one line, cut to NOTE_CHARS."""
    return f"{type(err).__name__}: {' '.join(str(err).split())}"[:NOTE_CHARS]


class Rows:
    """The rows of a run as they are measured, with the launch count behind each row's kernels."""

    def __init__(self):
        self.rows: list[Row] = []
        self.launches: dict[str, LaunchCount] = {}

    def absent(self, case: Case, path: str, reason: str) -> Row:
        return self._add(Row(path=path, preset=case.shape.name, batch=case.batch, status="absent", note=reason))

    def failed(self, case: Case, path: str, what: str) -> Row:
        return self._add(Row(path=path, preset=case.shape.name, batch=case.batch, status="failed",
                             note=f"failed: {what}"))

    def mark(self, cases, paths, note: str, *, failed: bool = False) -> None:
        """An absent row (a failed one, note saying what failed) of every path at every case."""
        for case in cases:
            for path in paths:
                (self.failed if failed else self.absent)(case, path, note)

    def attempt(self, case: Case, path: str, measure: Callable[[], Row]) -> Row:
        """Record measure()'s row; an exception becomes a failed row naming it."""
        try:
            row = measure()
        except Exception as err:  # one broken path must not cost the rest of the run
            return self.failed(case, path, error_text(err))
        return self._add(row)

    def measure(self, case: Case, path: str, fn: Callable[[], object], *,
                count_fn: Callable[[], object] | None = None,
                fallback_fn: Callable[[], object] | None = None, note: str = "", **fields) -> Row:
        """fn's Row: step and issue ms from one loop, x floor, GB/s, and kernels counted on count_fn
        (default fn), or on fallback_fn (the eager step a graph replays) where the profiler sees none."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BelowFloorWarning)  # said in the row's note instead
            row = measure_path(path, fn, case.floor, warmup=case.warmup, repeats=case.repeats,
                               device=case.device, **fields)
        layers, count_note = case.shape.num_layers, ""
        counted = count_launches(count_fn or fn, num_layers=layers, device=case.device)
        if (not counted.kernels or counted.note) and fallback_fn is not None:
            counted, count_note = count_launches(fallback_fn, num_layers=layers, device=case.device), GRAPH_COUNT_NOTE
        elif not counted.kernels or counted.note:
            counted, count_note = None, counted.note or "the profiler saw no kernels"
        if counted is not None:
            self.launches[case.key(path)] = counted
            row.kernels, row.kernels_per_layer = counted.kernels, counted.per_layer
        step = row.timing
        notes = ("BELOW THE FLOOR: the timer or the step is suspect" if is_below_floor(row.x_floor) else "",
                 note, count_note,
                 f"noisy: p10-p90 is {step.spread_ms / step.median_ms:.0%} of the median" if step.noisy else "",
                 row.issue_note())
        row.note = "; ".join(n for n in notes if n)
        return row

    def _add(self, row: Row) -> Row:
        self.rows.append(row)
        return row


def measure_graph_row(rows: Rows, case: Case, path: str, runner, data, eager_fn, *,
                      model=None, **fields) -> Row:
    """The Row of a GraphRunner's step, its replay checked bit for bit against eager_fn's step: with
    model (whose cache moves on with every call) each from a fresh prefill, else runner.check_bit_identical."""
    prompt, tokens, positions = data

    def step():
        return runner.step(tokens, positions)

    row = rows.measure(case, path, step, count_fn=runner.replay_fn(case.batch), fallback_fn=eager_fn, **fields)
    if model is None:
        row.bit_identical = runner.check_bit_identical(tokens, positions)
        row.max_abs_diff = runner.last_max_abs_diff
        return row
    prefill(model, prompt)
    eager = eager_fn().clone()
    prefill(model, prompt)
    replay = step()
    row.bit_identical = bool(torch.equal(eager, replay))
    row.max_abs_diff = (eager.float() - replay.float()).abs().max().item()
    return row
