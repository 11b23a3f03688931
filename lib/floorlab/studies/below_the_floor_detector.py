"""Studies wing: the first chapter's fourth challenge, the buffer-reuse bug: four steps (two share
their output buffer), the check that runs a reader's detector on them, and the answer."""
from __future__ import annotations

from typing import Callable

import torch

from floorlab.core.checks import NOT_ATTEMPTED, checked, read_bool


def reused_buffer_step(step: Callable) -> Callable:
    """step returning its one static buffer each call, as a graph runner without clone() would."""
    state = {}

    def leaky(tokens, positions):
        logits = step(tokens, positions)
        out = state.get("out")
        if out is None or out.shape != logits.shape:
            out = state["out"] = torch.empty_like(logits)
        return out.copy_(logits)

    return leaky


def cloned_step(step: Callable) -> Callable:
    """step handing each caller its own copy: the fix."""
    leaky = reused_buffer_step(step)
    return lambda tokens, positions: leaky(tokens, positions).clone()


def fresh_view_step(step: Callable) -> Callable:
    """step returning a new tensor object over one shared buffer each call: leaky, though never `is`."""
    leaky = reused_buffer_step(step)
    return lambda tokens, positions: leaky(tokens, positions)[:]  # a new view of the same memory


def equal_copies_step(step: Callable, tokens, positions) -> Callable:
    """A safe step whose every call returns a fresh copy of one fixed result: equal, never shared."""
    fixed = step(tokens, positions).clone()
    return lambda tokens_, positions_: fixed.clone()


LOOK_AGAIN = "see whether the first result itself changes when a second request runs."


@checked
def check_detector(detector, step: Callable, tokens_a, tokens_b, positions) -> str:
    """Verdict on a reader's detector: it flags the two steps that share their output buffer, passes the others."""
    if detector is None:
        return NOT_ATTEMPTED
    cases = [  # (step, shares its buffer, what it is, what a wrong answer is told)
        (reused_buffer_step(step), True, "the step that returns its one buffer",
         "the reused buffer slipped through; keep the first result, run a second request, and look "
         "at the first result again."),
        (fresh_view_step(step), True, "the step that returns views of its one buffer",
         "your check missed a step that hands out a new tensor object over the same buffer each "
         f"time, so comparing objects (`is`) is not enough; {LOOK_AGAIN}"),
        (cloned_step(step), False, "the step that returns a copy",
         "your check also flags the step that copies its output."),
        (equal_copies_step(step, tokens_a, positions), False, "the step whose fresh copies hold equal values",
         "your check flagged a step whose fresh copies merely hold equal values; equal answers are "
         f"not shared ones, so {LOOK_AGAIN}"),
    ]
    for fn, shared, what, miss in cases:
        flag = detector(fn, tokens_a, tokens_b, positions)
        if flag is None:
            return (f"not yet: your detector returned nothing (None) for {what}; end it with "
                    "`return` and True (the buffer is shared) or False.")
        if read_bool(flag, f"your detector's answer for {what}") != shared:
            return f"not yet: {miss}"
    return ("right: your check flags both steps that share a buffer and passes both that hand "
            "out tensors of their own.")


def answer_detector(step: Callable, tokens_a, tokens_b, positions) -> bool:
    """Worked detector: True when a result changes after a later request (the buffer is shared)."""
    first = step(tokens_a, positions)
    kept = first.clone()
    step(tokens_b, positions)
    return not torch.equal(first, kept)
