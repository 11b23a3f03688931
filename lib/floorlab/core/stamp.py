"""Core wing: when and with what software a run was made (its stamp), as a typed record."""
from __future__ import annotations

import platform
from dataclasses import dataclass, field
from datetime import datetime, timezone

from floorlab.core.device import package_version
from floorlab.core.host import book_version
from floorlab.core.records import StoredRecord


@dataclass(frozen=True)
class Stamp(StoredRecord):
    """A run's stamp: UTC ISO date and versions (the book's own, python, torch, transformers,
    floorlab); None where a stored run lacks one. Stored keys it does not name stay in extra."""

    date: str | None = None
    book: str | None = None
    python: str | None = None
    torch: str | None = None
    transformers: str | None = None
    floorlab: str | None = None
    extra: dict = field(default_factory=dict, hash=False)
    absent: frozenset = field(default=frozenset(), repr=False)


def run_stamp() -> Stamp:
    """When and with what software a run was made: UTC ISO date and versions, the book's own
    (git describe in a checkout, else the package's version) among them; no machine names."""
    return Stamp(
        book=book_version(),
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        python=platform.python_version(),
        torch=package_version("torch"),
        transformers=package_version("transformers"),
        floorlab=package_version("floorlab"),
    )
