"""Tools wing: the bench run as text: device and bandwidths, each floor as arithmetic, the rows,
parity, limits, targets."""
from __future__ import annotations

from floorlab.core.prose import COLUMN, wrap
from floorlab.core.runs import Row, Run
from floorlab.core.summary import paths_table, preset_size
from floorlab.engine.kernels import format_layer_table

from . import parity
from .limits import verdict
from .targets import evaluate_targets

COLUMNS = (("path", "<17"), ("preset", "<11"), ("batch", ">5"), ("ms", ">9"), ("p10-p90 ms", ">17"),
           ("x floor", ">8"), ("GB/s", ">8"), ("kernels", ">7"), ("/layer", ">6"), ("bit-id", ">6"),
           ("issue ms", ">8"))
VERDICTS = {True: "PASS", False: "FAIL", None: "n/a "}


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _cells(r: Row) -> tuple:
    t = r.timing
    spread = f"{t.p10_ms:.3f}-{t.p90_ms:.3f}" if t is not None else "-"
    note = f"absent: {r.note}" if r.status == "absent" else r.note  # a failed note starts "failed:"
    if r.compile_s is not None:
        note = f"compile {r.compile_s:.1f} s" + (f"; {note}" if note else "")
    bit = {True: "yes", False: "no", None: "-"}[r.bit_identical]
    issue = r.issue.median_ms if r.issue is not None else None
    return (r.path, r.preset, r.batch, _fmt(r.median_ms, ".3f"), spread, _fmt(r.x_floor, ".2f"),
            _fmt(r.achieved_gbps, ".1f"), _fmt(r.kernels, "d"), _fmt(r.kernels_per_layer, ".1f"),
            bit, _fmt(issue, ".3f")), note


def _header(run: Run) -> list[str]:
    dev, facts = run.device, run.facts
    elapsed = facts.get("elapsed_s")
    lines = [f"Below the Floor bench on {dev.name} ({dev.kind}), torch {dev.torch}, "
             f"transformers {dev.transformers}"
             + (f"; {elapsed:.0f} s" if elapsed is not None else "")
             + (" (PARTIAL RUN)" if facts.get("partial") else "")]
    if facts.get("error"):
        lines.append(f"stopped by {facts['error']}")
    bw = run.bandwidths
    if bw is not None:
        lines.append(f"bandwidth: copy {bw.copy.gbps:.1f} GB/s, read {bw.read.gbps:.1f} GB/s; "
                     f"floors use the larger, {bw.floor_kind} ({bw.floor_gbps:.1f} GB/s)")
    for again in facts.get("resumed", []):  # each later process: what it kept, what it measured
        gbps = again["bandwidths_gbps"]
        lines.append(f"resumed {str(again['date'])[:16].replace('T', ' ')} UTC, keeping {', '.join(again['kept'])} "
                     f"(measured there: copy {gbps['copy']:.1f} GB/s, read {gbps['read']:.1f} GB/s, "
                     f"within {again['tolerance']:.0%} of the floors' bandwidth)")
    for f in sorted(run.floors, key=lambda f: preset_size(f.preset)):
        lines.append(f"floor {f.preset} b{f.batch}, {f.visible_tokens} visible tokens: {f.arithmetic()}")
        lines.append(f"  {f.reads_note()}")
    return lines


def format_table(run: Run) -> str:
    """The run as text, presets from small to large; every FAIL line of the targets says what
    the run measured as its cause."""
    if not isinstance(run, Run):
        raise TypeError(f"format_table takes a floorlab.core.runs.Run, got {type(run).__name__}; pass "
                        "run_bench()'s result or floorlab.core.reference.reference_run('h200-bench')")
    header = " ".join(format(name, spec) for name, spec in COLUMNS) + "  note"
    lines = _header(run) + ["", header, "-" * len(header)]
    for row in sorted(run.rows, key=lambda r: preset_size(r.preset)):  # stable: a preset keeps its row order
        cells, note = _cells(row)
        lines.append(" ".join(format(c, spec) for c, (_, spec) in zip(cells, COLUMNS)) + f"  {note}")
    lines.append("")
    for preset, facts in sorted(run.facts.get("parity", {}).items(), key=lambda item: preset_size(item[0])):
        lines.append(f"parity {preset} (relative L2 vs transformers in float32): {parity.summary(facts)}")
    if run.settings.value("skip_transformers"):
        lines.append("parity: not checked (--skip-transformers leaves transformers' model out)")
    limits = run.facts.get("limits", {})
    for preset, facts in sorted(limits.items(), key=lambda item: preset_size(item[0])):
        # the words are derived when shown, from the stored measurements
        text = verdict(facts, run.rows)["summary"] if "gemv_only_ms" in facts else \
            facts.get("error", "not measured")
        lines.append(f"limits {preset} b{facts.get('batch', '?')}: {text}")
        if facts.get("kernels_note"):
            lines.append(f"  {facts['kernels_note']}")
        if isinstance(facts.get("triton_kernels"), list):
            lines.append(f"  the book's kernels, {preset} b{facts.get('batch', '?')}, each over every layer:")
            lines += ["    " + line for line in format_layer_table(facts["triton_kernels"],
                                                                  facts.get("num_layers", 1)).splitlines()]
    return "\n".join(lines + _target_lines(run, limits))


def _target_lines(run: Run, limits: dict, indent: str = "  ", width: int | None = None) -> list[str]:
    """'targets:', then each target's verdict, value and the cause of a miss (wrapped to width when given)."""
    lines = ["", "targets:"]
    for t in evaluate_targets(run.rows, limits):
        value = "" if t["value"] is None else f": {t['value']:.2f}"
        line = f"{indent}{VERDICTS[t['passed']]} {t['target']}{value}" + (f" ({t['note']})" if t["note"] else "")
        lines.append(wrap(line, width) if width else line)
    return lines


def format_summary(run: Run, *, batch: int = 1, paths=None, targets: bool = True) -> str:
    """paths_table of the run at one batch size, then the targets with the cause of every miss
    (unless targets is False), wrapped to the page's column."""
    table = paths_table(run, batch=batch, paths=paths)
    if not targets:
        return table
    return "\n".join([table] + _target_lines(run, run.facts.get("limits", {}), indent="", width=COLUMN))
