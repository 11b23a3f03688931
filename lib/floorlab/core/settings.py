"""Core wing: what a run was asked to measure (its settings), as a typed record."""
from __future__ import annotations

from dataclasses import dataclass, field

from floorlab.core.records import StoredRecord


@dataclass(frozen=True)
class RunSettings(StoredRecord):
    """A run's settings: the model (preset, or presets), the batch (or batches), the prompt, the timing
    counts and, for two cards, the ranks; None where a run's kind has none. Each kind's own keys
    (the bench's paths, the serving chapter's buckets, ...) stay in extra, read through value()."""

    preset: str | None = None
    presets: list | None = None
    batch: int | None = None
    batches: list | None = None
    prompt_tokens: int | None = None
    max_context: int | None = None
    dtype: str | None = None
    warmup: int | None = None
    repeats: int | None = None
    ranks: int | None = None
    backend: str | None = None
    extra: dict = field(default_factory=dict, hash=False)
    absent: frozenset = field(default=frozenset(), repr=False)

    def value(self, key: str, default=None):
        """The stored value of key, named or kept in extra; default when the run has none."""
        if key in self.named():
            found = getattr(self, key)
            return default if found is None else found
        return self.extra.get(key, default)
