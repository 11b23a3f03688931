"""Studies wing: the checks of the chapter "Shared buffers": which snippets keep their logits (run
on the reader's runner), what a kept view holds, and what the copy-out costs."""
from __future__ import annotations

import torch

from floorlab.core.checks import NOT_ATTEMPTED, Unreadable, checked
from floorlab.studies.serving_trap import named_together

BORROW = "with runner.borrow(tokens, positions) as logits:\n    "
SNIPPETS = {  # {letter: (code, why it keeps or loses its logits)}
    "a": ("out = runner.step(tokens, positions)",
          "step() hands back a clone, memory the caller owns"),
    "b": (BORROW + "out = logits", "the view is the static output itself, which the next replay rewrites"),
    "c": (BORROW + "out = logits.argmax(-1)", "argmax writes a new tensor while the logits are still fresh"),
    "d": (BORROW + "out = logits[:, :8]", "a slice is another view of the same static memory"),
    "e": (BORROW + "out = logits.detach()", "detach() drops autograd history but shares the memory"),
    "f": (BORROW + "out = torch.empty_like(logits)\n    out.copy_(logits)",
          "copy_ moves the logits into memory the caller owns"),
}


def snippets_keep(runner, first, second) -> dict[str, bool]:
    """{letter: its `out` unchanged} once every snippet ran the first request and one more ran."""
    tokens, positions = first
    outs = {}
    for name, (code, _) in SNIPPETS.items():
        scope = {"runner": runner, "torch": torch, "tokens": tokens, "positions": positions}
        exec(code, scope)  # the book's snippets above, never the reader's text
        outs[name] = (scope["out"], scope["out"].clone())
    runner.step(*second)
    return {name: bool(torch.equal(out, at_the_time)) for name, (out, at_the_time) in outs.items()}


def _letters(value, name: str) -> set[str]:
    if isinstance(value, str):
        items = [c for c in value.lower() if c.isalpha()]
    else:
        try:
            items = [str(v).strip().lower() for v in value]
        except TypeError:
            raise Unreadable(f"not yet: {name} should be letters such as {{'a', 'b'}}, got {value!r}.") from None
    unknown = sorted(set(items) - set(SNIPPETS))
    if unknown:
        raise Unreadable(f"not yet: {', '.join(unknown)} is not a snippet; pick from {', '.join(SNIPPETS)}.")
    return set(items)


@checked
def check_safe_snippets(answer, keeps: dict[str, bool]) -> str:
    """Verdict on the reader's set of safe snippets, against what each one did in this run."""
    if answer is None:
        return NOT_ATTEMPTED
    chosen = _letters(answer, "my_safe_snippets")
    safe = {k for k, ok in keeps.items() if ok}
    if chosen == safe:
        return f"right: {', '.join(sorted(safe))} keep their logits; the others do not."
    missed, wrong = sorted(safe - chosen), sorted(chosen - safe)
    hint = [f"{', '.join(wrong)} still point into the static output"] if wrong else []
    hint += [f"{', '.join(missed)} own their memory"] if missed else []
    return "not yet: " + "; ".join(hint) + ". Ask of each: whose memory is `out`?"


def kept_holds_mistakes(names, buckets, expected: str) -> dict[str, str]:
    """{name: why it is wrong} for 'whose logits does A's view hold?', given each name's bucket."""
    mine, why = buckets[0], {}
    for i, (name, bucket) in enumerate(zip(names, buckets)):
        if bucket != mine:
            last = "It ran last, but " if i == len(names) - 1 else ""
            why[name] = (f"{last}{name} replays bucket {bucket}, which writes a static output "
                         f"of its own, not bucket {mine}'s.")
        else:
            why[name] = (f"{name} did replay bucket {mine}, but a later request replayed it "
                         "again." if i else f"A's view is bucket {mine}'s static output itself, "
                         "and a later request replayed that bucket.")
    why.pop(expected, None)
    return why


@checked
def check_kept_holds(answer, expected: str, names, *, wrong: dict[str, str] | None = None) -> str:
    """Verdict on whose logits the reader predicts a kept view holds; wrong: {name: why}."""
    if answer is None:
        return NOT_ATTEMPTED
    if not isinstance(answer, str) or answer.strip().upper() not in names:
        return f"not yet: answer with one request's name, one of {', '.join(names)}."
    chosen = answer.strip().upper()
    if chosen == expected:
        return f"right: the view holds {expected}'s logits."
    why = (wrong or {}).get(chosen)
    return (f"not yet: {why + ' ' if why else ''}Each bucket has its own static output; which "
            "request last replayed the bucket the kept view belongs to?")


def copy_mistakes(copy_us: float, *, rows: int, bandwidths, floor_gbps: float,
                  logit_bytes: int) -> dict[str, float]:
    """The plausible wrong µs for the copy-out, {mistake: µs}; none within 1%, which prints alike."""
    wrong = {
        "each byte counted once, not read and then written": copy_us / 2,
        f"one row of logits instead of {rows}": copy_us / rows,
        "GB taken as 2^30 bytes instead of 10^9": copy_us * 1e9 / 2**30,
        "milliseconds where microseconds are asked for": copy_us / 1e3,
    }
    for kind, gbps in bandwidths.as_gbps().items():  # the smaller one, where they differ
        wrong[f"the {kind} bandwidth, not the larger one the floor divides by"] = (
            copy_us * floor_gbps / gbps)
    wrong[f"2 bytes per logit where these logits take {logit_bytes}"] = copy_us * 2 / logit_bytes
    return named_together(copy_us, wrong, apart=0.01)
