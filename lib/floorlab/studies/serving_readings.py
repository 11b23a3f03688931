"""Studies wing: what a stream of requests through the buckets says, in the chapter's words.

Padding priced two ways, and padding against the eager fallbacks: each sentence is chosen by
timing.compare, with words for either way, so it holds on the reader's run and a stored one.
"""
from __future__ import annotations

from floorlab.core.timing import Band, compare
from floorlab.studies.serving import StreamCost


def pricing_sentence(stream: StreamCost, ms_per_row: float) -> str:
    """Whether the even share of each step (the accounting price of padding) overstates what the
    padded rows add at the slope of step time over batch, or understates it."""
    marginal = stream.padded_rows * ms_per_row
    if stream.padded_rows == 0:
        return "This stream needed no padding, so there is nothing to price."
    return compare(Band.exact(stream.padding_ms), Band.exact(marginal)).verdict(
        "That is an accounting answer, and it overstates the cost: dropping the padding would "
        "not give that time back, because a step with fewer rows costs less only by the slope "
        "below.",
        "That is an accounting answer, and here it understates the cost: by the slope below, a "
        "row adds more than its even share of a step.",
        "That is an accounting answer, and here it agrees with the slope below.")


def padding_against_fallbacks(stream: StreamCost, ms_per_row: float, where: str) -> str:
    """Which cost the stream more, its padding (at what a row adds) or its eager fallbacks."""
    marginal = stream.padded_rows * ms_per_row
    if not stream.fallbacks:
        return f"{where} no step missed every bucket, so the stream had no fallback to price."
    return compare(Band.exact(stream.fallback_ms), Band.exact(marginal)).verdict(
        f"{where} the padding cost less than the steps that missed every bucket and ran "
        "eagerly, so the largest bucket belongs at the largest batch the server admits.",
        f"{where} the padding cost more than the steps that missed every bucket: there, more "
        "buckets pay before a larger one does.",
        f"{where} the padding and the fallbacks cost the same.")


def pool_sentence(memory) -> str:
    """How much of the graphs' own pools one shared pool saved (a GraphMemoryReport), in words."""
    return compare(Band.exact(memory.shared_mb), Band.exact(memory.private_mb / 2)).verdict(
        "a shared pool saved less than half of it here.",
        "a shared pool removed most of it here.",
        "a shared pool removed half of it here.")
