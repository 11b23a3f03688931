"""Core wing: a run's decode paths side by side, as a page prints them: ms and multiple of the
floor."""
from __future__ import annotations

from floorlab.core.prose import COLUMN, fmt_ms, fmt_times
from floorlab.core.runs import Run
from floorlab.core.shapes import PRESETS


def preset_size(preset: str) -> float:
    """A preset's parameter count, for ordering presets small to large (unknown names last)."""

    return PRESETS[preset].param_count() if preset in PRESETS else float("inf")


def paths_table(run: Run, *, batch: int = 1, paths=None) -> str:
    """Each path's (or those in paths) time and multiple of the floor at one batch size, presets side by side in the
    page's column; presets that do not fit go to further blocks below."""
    presets = sorted(dict.fromkeys(r.preset for r in run.rows), key=preset_size)
    paths = list(paths or dict.fromkeys(r.path for r in run.rows))
    table = {}
    for path in paths:
        for preset in presets:
            row = run.find(path, preset, batch)
            measured = row is not None and row.median_ms is not None
            table[path, preset] = (f"{fmt_ms(row.median_ms)} ({fmt_times(row.x_floor)})" if measured
                                  else "-")
    width = max(len(text) for text in [*presets, *table.values()])
    name = max(len(text) for text in ["path", *paths])
    # as many presets side by side as the column holds; more go to further blocks of even size
    fits = max(1, (COLUMN - name) // (width + 1))
    blocks = -(-len(presets) // fits)
    size = -(-len(presets) // blocks)
    lines = []
    for first in range(0, len(presets), size):
        some = presets[first:first + size]
        lines += [""] if first else []
        lines.append(f"{'path':<{name}} " + " ".join(f"{p:>{width}}" for p in some))
        lines += [f"{path:<{name}} " + " ".join(f"{table[path, p]:>{width}}" for p in some)
                  for path in paths if any(table[path, p] != "-" for p in some)]
    return "\n".join(lines)
