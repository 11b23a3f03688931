"""Studies wing: attention and o_proj as two kernels or as one, from a stored comparison (python -m
floorlab.tools.fusion): per preset and batch, the two-kernel step beside the fastest fused variant."""
from __future__ import annotations

from dataclasses import dataclass

from floorlab.core.prose import sig
from floorlab.core.reference import reference_json
from floorlab.core.stamp import Stamp

TWO_KERNELS = "two kernels"


@dataclass(frozen=True)
class FusionPair:
    """One preset and batch: the two-kernel row, the fastest fused row and every fused row, as stored."""
    preset: str
    batch: int
    two: dict
    best: dict
    fused: tuple[dict, ...]

    @property
    def ratio(self) -> float:
        """The fastest fused step's time over the two-kernel step's (above 1: fusing is slower)."""
        return self.best["ms"] / self.two["ms"]

    @property
    def extra_us_per_layer(self) -> float:
        """µs a layer the fastest fused step spends beyond the two-kernel step (negative: it saves)."""
        return self.best["beyond_us_per_layer"] - self.two["beyond_us_per_layer"]


@dataclass(frozen=True)
class StoredFusion:
    """A stored comparison: its card, date and pairs."""
    name: str
    device: str
    date: str
    pairs: tuple[FusionPair, ...]

    def pair(self, preset: str, batch: int) -> FusionPair:
        if found := [p for p in self.pairs if (p.preset, p.batch) == (preset, batch)]:
            return found[0]
        raise ValueError(f"the stored comparison {self.name!r} has no {preset!r} at batch {batch!r}; it has "
                         f"{[(p.preset, p.batch) for p in self.pairs]}")

    def says(self) -> str:
        return f"stored run {self.name!r}, {self.device}, {self.date}"

    def lines(self) -> list[str]:
        """One line per variant: x floor, time over the two kernels, µs beyond the bytes per layer."""
        out = [f"{'preset':<11} {'b':>2}  {'variant':<13} {'x floor':>7} {'vs two':>6} {'µs/layer':>8}"]
        for p in self.pairs:
            for r in (p.two, *p.fused):
                out.append(f"{p.preset:<11} {p.batch:>2}  {r['variant']:<13} {sig(r['x_floor']):>7} "
                           f"{sig(r['ms'] / p.two['ms']):>6} {sig(r['beyond_us_per_layer']):>8}")
        return out


def stored_fusion(name: str = "h200-fusion") -> StoredFusion:
    """The stored comparison lib/floorlab/reference/<name>.json, its rows paired."""
    data = reference_json(name)
    rows = [r for r in data["rows"] if "ms" in r]
    pairs = []
    for key in dict.fromkeys((r["preset"], r["batch"]) for r in rows):
        here = [r for r in rows if (r["preset"], r["batch"]) == key]
        two = next(r for r in here if r["variant"] == TWO_KERNELS)
        fused = tuple(r for r in here if r["variant"] != TWO_KERNELS)
        pairs.append(FusionPair(*key, two=two, best=min(fused, key=lambda r: r["ms"]), fused=fused))
    date = str(Stamp.from_dict(data["stamp"]).date)[:10]
    return StoredFusion(name=name, device=data["device"], date=date, pairs=tuple(pairs))
