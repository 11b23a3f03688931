"""Figures wing: a schematic, not a measurement: one layer's operations, one kernel each, then
folded into five (RMSNorm as a GEMV's prologue, SiLU·mul and residual adds as epilogues)."""
from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Patch

from floorlab.core.numbers import whole_numbers
from floorlab.figures.style import (
    FLOOR_BLUE,
    INK,
    MUTED,
    REST_ORANGE,
    finish,
    new_figure,
)

KINDS = {  # kind: (colour, legend label)
    "gemv": (FLOOR_BLUE, "GEMV: streams a weight matrix"),
    "elementwise": (REST_ORANGE, "elementwise: reads and writes activations only"),
    "attention": ("#009E73", "attention: reads the KV cache"),
}
LAYER_OPS = (  # one decode layer, in order: (operation, kind)
    ("RMSNorm", "elementwise"), ("QKV", "gemv"), ("q/k norm, RoPE, cache write", "elementwise"),
    ("attention", "attention"), ("o_proj", "gemv"), ("+ residual", "elementwise"),
    ("RMSNorm", "elementwise"), ("gate_up", "gemv"), ("SiLU·mul", "elementwise"), ("down", "gemv"),
    ("+ residual", "elementwise"),
)
BOOK_KERNELS = (2, 2, 2, 3, 2)  # how many of LAYER_OPS, in order, each of the book's kernels holds


def kernel_groups(ops=LAYER_OPS, kernels=BOOK_KERNELS) -> list[list[tuple[str, str]]]:
    """The operations split into kernels: kernels[i] consecutive ops go to kernel i."""
    ops = list(ops)
    if not ops:
        raise ValueError("fusion_schematic needs at least one (operation, kind) pair, e.g. LAYER_OPS")
    for op in ops:
        if not (isinstance(op, tuple) and len(op) == 2 and op[1] in KINDS):
            raise ValueError(f"each operation is a (name, kind) pair with kind one of {sorted(KINDS)}, got {op!r}")
    hint = f"give how many operations each kernel holds, summing to {len(ops)}, the operations drawn"
    sizes = whole_numbers(kernels, "kernels", hint=hint)
    if sum(sizes) != len(ops):
        raise ValueError(f"kernels gives how many operations each kernel holds (whole numbers >= 1 summing to "
                         f"{len(ops)}, the operations drawn), got {tuple(sizes)!r}")
    groups, first = [], 0
    for n in sizes:
        groups.append(ops[first:first + n])
        first += n
    return groups


def fusion_schematic(ops=LAYER_OPS, kernels=BOOK_KERNELS, *, title: str | None = None, path=None,
                     note: str | None = "schematic: one layer's operations, not timed") -> Figure:
    """Two rows of the same operations: one kernel each, then grouped into `kernels` (see kernel_groups)."""
    groups = kernel_groups(ops, kernels)
    rows = {"one kernel per operation": [[op] for group in groups for op in group],
            "folded into the GEMVs": groups}
    box_w, gap_op, gap_kernel, box_h = 1.25, 0.08, 0.24, 0.62
    with new_figure(3.4) as fig:
        ax = fig.subplots()
        widest = 0.0
        for y, (label, groups) in zip((1.3, 0.0), rows.items()):
            x = 0.0
            for group in groups:
                left = x
                heavy = next((i for i, (_, kind) in enumerate(group) if kind != "elementwise"), 0)
                for i, (name, kind) in enumerate(group):
                    if kind == "elementwise" and len(group) > 1:  # folded: before or after the heavy op
                        ax.text(x + box_w / 2, y - box_h / 2 - 0.12, "prologue" if i < heavy else "epilogue",
                                ha="center", va="top", fontsize=7.5, color=MUTED, fontstyle="italic")
                    ax.add_patch(FancyBboxPatch((x, y - box_h / 2), box_w, box_h,
                                                boxstyle="round,pad=0,rounding_size=0.06", facecolor=KINDS[kind][0],
                                                edgecolor="white", linewidth=0.8, gid=kind))
                    ax.text(x + box_w / 2, y, name.replace(", ", ",\n"), ha="center", va="center",
                            fontsize=7.4, color="white" if kind != "elementwise" else INK, wrap=True)
                    x += box_w + gap_op
                x -= gap_op
                ax.add_patch(FancyBboxPatch((left - 0.05, y - box_h / 2 - 0.07), x - left + 0.1, box_h + 0.14,
                                            boxstyle="round,pad=0,rounding_size=0.1", facecolor="none",
                                            edgecolor=INK, linewidth=1.1, gid="kernel"))
                x += gap_kernel
            widest = max(widest, x)
            n = len(groups)
            ax.text(-0.05, y + box_h / 2 + 0.16, f"{label}: {n} kernels, {n - 1} boundaries inside the layer",
                    ha="left", va="bottom", fontsize=9.5, color=INK)
        ax.set_xlim(-0.2, widest)
        ax.set_ylim(-0.62, 2.05)
        ax.set_aspect("auto")
        ax.axis("off")
        handles = [Patch(color=colour, label=text) for colour, text in KINDS.values()]
        handles.append(Patch(facecolor="none", edgecolor=INK, label="one kernel"))
        return finish(fig, ax, handles, title=title, note=note, path=path, ncol=2, below_pt=4)
