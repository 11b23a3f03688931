"""Studies wing: the first chapter's fourth challenge, the buffer-reuse bug: the steps a reader's
detector meets (two that share their output buffer, two that do not), the check that runs the
detector against all four, and the worked detector.
"""
from __future__ import annotations

from typing import Callable

import torch

from floorlab.core.checks import NOT_ATTEMPTED, checked, read_bool


def reused_buffer_step(step: Callable) -> Callable:
    """Wrap a decode step so it returns its one static buffer, as a graph runner without clone() would."""
    state = {}

    def leaky(tokens, positions):
        logits = step(tokens, positions)
        out = state.get("out")
        if out is None or out.shape != logits.shape:
            out = state["out"] = torch.empty_like(logits)
        out.copy_(logits)
        return out

    return leaky


def cloned_step(step: Callable) -> Callable:
    """Wrap a decode step so each caller gets its own copy, the fix."""
    leaky = reused_buffer_step(step)
    return lambda tokens, positions: leaky(tokens, positions).clone()


def fresh_view_step(step: Callable) -> Callable:
    """Wrap a decode step so each call returns a new tensor object over one shared buffer: as
    leaky as reused_buffer_step, though no two results are the same Python object."""
    leaky = reused_buffer_step(step)

    def viewed(tokens, positions):
        out = leaky(tokens, positions)
        return out.view(out.shape)  # a new tensor object over the same memory

    return viewed


def equal_copies_step(step: Callable, tokens, positions) -> Callable:
    """A safe step whose every call returns a fresh copy of one fixed result: two requests get
    equal values, yet nothing a caller holds is ever overwritten."""
    fixed = step(tokens, positions).clone()
    return lambda tokens_, positions_: fixed.clone()


def _flag(value, what: str):
    """A detector's answer as True or False (None stays None); tensors of one boolean count."""
    if value is None:
        return None
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.dtype == torch.bool:
        return bool(value.item())
    return read_bool(value, f"your detector's answer for {what}")


DETECTOR_MISSES = {
    "reused": ("not yet: the reused buffer slipped through; keep the first result, run a "
               "second request, and look at the first result again."),
    "view": ("not yet: your check missed a step that hands out a new tensor object over the "
             "same buffer each time, so comparing objects (`is`) is not enough; see whether "
             "the first result itself changes when a second request runs."),
    "copy": "not yet: your check also flags the step that copies its output.",
    "equal": ("not yet: your check flagged a step whose fresh copies merely hold equal values; "
              "equal answers are not shared ones, so see whether the first result itself "
              "changes when a second request runs."),
}


@checked
def check_detector(detector, step: Callable, tokens_a, tokens_b, positions) -> str:
    """Verdict on a reader's detector, run against four steps: it must flag the two that share
    their output buffer (the same tensor each call, or a new view of it each call) and pass the
    two that do not (a copy each call, or fresh copies that merely hold equal values)."""
    if detector is None:
        return NOT_ATTEMPTED
    cases = {  # name: (step, shares its buffer, what the reader is told it is)
        "reused": (reused_buffer_step(step), True, "the step that returns its one buffer"),
        "view": (fresh_view_step(step), True, "the step that returns views of its one buffer"),
        "copy": (cloned_step(step), False, "the step that returns a copy"),
        "equal": (equal_copies_step(step, tokens_a, positions), False,
                  "the step whose fresh copies hold equal values"),
    }
    for name, (fn, shared, what) in cases.items():
        flag = _flag(detector(fn, tokens_a, tokens_b, positions), what)
        if flag is None:
            return (f"not yet: your detector returned nothing (None) for {what}; end it with "
                    "`return` and True (the buffer is shared) or False.")
        if flag != shared:
            return DETECTOR_MISSES[name]
    return ("right: your check flags both steps that share a buffer and passes both that hand "
            "out tensors of their own.")


def answer_detector(step: Callable, tokens_a, tokens_b, positions) -> bool:
    """Worked detector: True if a result changes after a later request, i.e. the buffer is shared."""
    first = step(tokens_a, positions)
    kept = first.clone()
    step(tokens_b, positions)
    return not torch.equal(first, kept)
