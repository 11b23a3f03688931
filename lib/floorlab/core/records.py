"""Core wing: a frozen record read from a stored JSON object that keeps what it does not name, so
writing it back gives the same object."""
from __future__ import annotations

from dataclasses import fields

from floorlab.core.numbers import shown

KEPT = ("extra", "absent")  # every record's own fields: keys it does not name, named keys the object lacked


class StoredRecord:
    """Mixin for a frozen dataclass of optional named fields plus `extra: dict` (stored keys it does
    not name) and `absent: frozenset` (named keys the stored object lacked, left out again by to_dict)."""

    @classmethod
    def named(cls) -> tuple[str, ...]:
        """The stored keys this record names, in field order."""
        return tuple(f.name for f in fields(cls) if f.name not in KEPT)

    @classmethod
    def from_dict(cls, data: dict):
        """The record of a stored JSON object: a missing named key becomes None, an unknown key stays in extra."""
        if not isinstance(data, dict):
            raise ValueError(f"a {cls.__name__} is stored as a JSON object, got {shown(data)}")
        names = cls.named()
        return cls(**{k: data[k] for k in names if k in data},
                   extra={k: v for k, v in data.items() if k not in names},
                   absent=frozenset(k for k in names if k not in data))

    def to_dict(self) -> dict:
        """The stored JSON object: the named keys it had, then the extra ones, as from_dict read them."""
        out = {k: getattr(self, k) for k in self.named() if k not in self.absent}
        out.update(self.extra)
        return out
