"""Tools wing: `python -m floorlab bench`: the flags, their checks, and where the JSON goes."""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from floorlab.core import paths
from floorlab.core.device import DeviceFacts, describe_device, device_slug
from floorlab.core.files import file_problem
from floorlab.core.runs import Run
from floorlab.core.shapes import PRESETS
from floorlab.tools.cli import whole_arg

from .run import UNREADABLE, kept_partial, partial_path, run_bench
from .settings import (CPU_PRESETS, CPU_REPEATS, DEFAULT_CONTEXT, GPU_PRESETS, GPU_REPEATS, MAX_BATCH, MAX_CONTEXT,
                       presets_in, shapes_of)
from .table import format_table


def default_out_path(device_facts: DeviceFacts) -> Path:
    """figures/bench-<device-slug>.json"""
    return Path(paths.FIGURES_DIR) / f"bench-{device_slug(device_facts)}.json"


def _items(texts) -> list[str]:
    """Names or numbers given apart or joined by commas ('1,8' or 1 8)."""
    return [item for text in texts for item in re.split(r"[,\s]+", text.strip()) if item]


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of `python -m floorlab bench`."""
    parser = argparse.ArgumentParser(
        prog="python -m floorlab bench",
        description="Measure bandwidth, floors and every decode path; print a table, write JSON.")
    batch = whole_arg(f"batch sizes (the largest graph bucket is {MAX_BATCH})", 1, MAX_BATCH, "1 or 8")
    parser.add_argument("--presets", nargs="+", metavar="NAME",
                        help=f"model shapes (default on a GPU: {' '.join(GPU_PRESETS)}; on the CPU: "
                             f"{' '.join(CPU_PRESETS)}); known: {', '.join(PRESETS)}")
    parser.add_argument("--batches", nargs="+", type=lambda text: [batch(b) for b in _items([text])], metavar="B",
                        help="batch sizes (default on a GPU: 1 8; on the CPU: 1)")
    parser.add_argument("--context", type=whole_arg("context", 1, MAX_CONTEXT, "32"), default=DEFAULT_CONTEXT,
                        help=f"prompt tokens already in the cache (default {DEFAULT_CONTEXT})")
    parser.add_argument("--repeats", type=whole_arg("repeats", 1, None, "30"),
                        help=f"timed steps per row (default {GPU_REPEATS} on a GPU, {CPU_REPEATS} on the CPU)")
    parser.add_argument("--out", type=Path, help="JSON path (default figures/bench-<device>.json)")
    parser.add_argument("--skip-transformers", action="store_true",
                        help="leave out the transformers rows and the parity check")
    parser.add_argument("--transformers-for", nargs="+", metavar="NAME",
                        help="run transformers' rows only for these presets (default: every preset)")
    parser.add_argument("--skip-fused", action="store_true", help="leave out the fused (compiled) rows")
    parser.add_argument("--tuned-fused-for", nargs="+", metavar="NAME",
                        help="also compile the fused step with Inductor's coordinate-descent tuning and PDL "
                             "for these presets (minutes of tuning per batch size; default: none)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the partial run kept beside --out (<out>.partial.json, made with the "
                             "same flags on the same card, stopped before its last preset): keep its finished "
                             "presets, measure the rest")
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    """Parsed and checked arguments (settings.py's checks, in its words); a bad value exits saying how to fix it."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.presets is not None:
            args.presets = [s.name for s in shapes_of(_items(args.presets))]
        for flag, default in (("transformers_for", PRESETS), ("tuned_fused_for", GPU_PRESETS)):
            if getattr(args, flag):
                names = presets_in(_items(getattr(args, flag)), args.presets or default, f"--{flag.replace('_', '-')}")
                setattr(args, flag, list(names))
    except ValueError as err:
        parser.error(str(err))
    if args.batches is not None:
        args.batches = sorted({b for group in args.batches for b in group})
        if not args.batches:
            parser.error("--batches got no batch size; pass one or more, e.g. --batches 1 8")
    if args.out is not None and (problem := file_problem(args.out, "--out")):
        parser.error(problem.replace("will not take the file", "will not take the run"))
    return args


def _run_to_resume(out: Path) -> Run:
    """The partial run kept beside out (or at out itself, where older runs kept it), or an exit saying why none."""
    partial = partial_path(out)
    path = partial if partial.is_file() else out if out.is_file() else None
    if path is None:
        raise SystemExit(f"--resume: no partial bench run at {partial}; start one without --resume (and the same "
                         "--out), then resume it with the same flags")
    try:
        run = Run.load(path)  # Run.from_dict refuses facts, settings or device that are not tables
    except UNREADABLE as err:
        raise SystemExit(f"--resume: {path} holds no bench run this book can read ({type(err).__name__}: "
                         f"{err}); run again without --resume (the new run replaces it once it has "
                         "finished as many presets), or move it aside first") from None
    if path == out and not run.facts.get("partial"):
        raise SystemExit(f"--resume: the bench run at {out} is complete and no partial run is kept beside it "
                         f"({partial}), so there is nothing to resume; run again without --resume to measure "
                         f"anew ({out} is replaced only when the new run ends), or pass another --out")
    return run


def main(argv=None) -> int:
    """Run the bench from the command line; prints the table and the JSON path, returns 0 (130 when stopped)."""
    args = parse_args(argv)
    out = args.out or default_out_path(describe_device())
    if args.out is None and (problem := file_problem(out, "--out")):
        build_parser().error(problem.replace("will not take the file", "will not take the run"))
    previous = _run_to_resume(out) if args.resume else None
    partial = partial_path(out)
    if previous is None and partial.is_file():
        print(f"a partial run is kept at {partial}; this run replaces it once it has finished as many "
              "presets (stop now and pass --resume to continue it instead)", flush=True)
    print(f"measuring: the run is kept at {partial} after each preset and moves to {out} when the "
          "last one is done", flush=True)
    try:
        run = run_bench(args.presets, args.batches, args.context, repeats=args.repeats,
                        skip_transformers=args.skip_transformers, skip_fused=args.skip_fused,
                        transformers_for=args.transformers_for, tuned_fused_for=args.tuned_fused_for or (),
                        save_to=out, resume_from=previous)
    except (ValueError, TypeError, AttributeError) as err:
        if previous is None:
            raise
        raise SystemExit(f"--resume {out}: {err}") from None
    except KeyboardInterrupt:
        finished = kept_partial(partial)  # what the disk holds now, not what this run hoped to keep
        kept = (f"the partial run kept at {partial} holds {', '.join(finished) or 'no finished preset'}; "
                "continue it with the same flags and --resume" if finished is not None
                else "nothing was measured to keep")
        print(f"\nstopped before the end: {out} is as it was before this run; {kept}", file=sys.stderr)
        return 130
    print(format_table(run))
    if out.is_file() and Run.load(out).stamp == run.stamp:
        print(f"\nJSON written to {out}")
    return 0
