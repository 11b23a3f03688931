"""Tools wing: `python -m floorlab <command>`: measure this card, check this machine, run the bench
or the sweep, redraw the stored figures."""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from floorlab.core import paths
from floorlab.core.device import describe_device, device_slug
from floorlab.core.files import folder_problem, save_or_keep
from floorlab.core.numbers import shown, whole_number

COMMANDS = {"measure": "measure this card in a minute or two: floor, eager, graph replay",
            "doctor": "check this machine before a workshop: GPU, memory, versions, run times",
            "bench": "the full bench of every decode path (pass its flags after 'bench')",
            "sweep": "the kernel sweep: launch configurations of the book's GEMVs (flags after 'sweep')",
            "redraw": "draw the stored H200 figures again from their stored runs, on the CPU (flags after 'redraw')",
            "twocards": "one card against the step split over ranks (flags after 'twocards')"}

# the commands that parse their own flags, and the module whose main() does it
PASSTHROUGH = {"bench": "floorlab.tools.bench.cli", "sweep": "floorlab.tools.sweep",
               "redraw": "floorlab.tools.redraw", "twocards": "floorlab.tools.twocards"}


def whole_arg(label: str, lowest: int, highest: int | None, example: str):
    """An argparse type: a whole number from lowest to highest (core.numbers.whole_number), or an error
    that quotes the text as typed."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = text
        try:
            return whole_number(value, label, at_least=lowest, at_most=highest, hint=f"for example {example}")
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err).replace(f"got {shown(value)}", f"got {text}")) from None
    return parse


def build_parser() -> argparse.ArgumentParser:
    """The parser of `python -m floorlab`, one sub-command each."""
    parser = argparse.ArgumentParser(prog="python -m floorlab",
                                     description="The commands of the book Below the Floor.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, text in COMMANDS.items():
        sub.add_parser(name, help=text, description=text, add_help=name not in PASSTHROUGH)
    measure = sub.choices["measure"]
    measure.add_argument("--repeats", type=whole_arg("--repeats", 1, None, "5"),
                         help="timed steps per path (default 50 on a GPU, 5 on a CPU)")
    measure.add_argument("--warmup", type=whole_arg("--warmup", 0, None, "1"),
                         help="untimed steps first (default 10 on a GPU, 1 on a CPU)")
    measure.add_argument("--fused", action="store_true",
                         help="also compile and replay the fused and the Triton step (GPU only)")
    measure.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda when visible")
    measure.add_argument("--out", type=Path, metavar="DIR",
                         help="folder for run.json and the figures "
                              "(default results/measure-<device>/)")
    measure.add_argument("--submit", type=Path, metavar="DIR",
                         help="also copy run.json into this shared folder under a unique name")
    measure.add_argument("--name", help="who measured (optional; put in the submitted file name)")
    return parser


def _check_folder(parser, flag: str, folder: Path | None) -> None:
    """Exit 2 with a message when folder is a file, names one (x.json), or cannot be made or written."""
    problem = folder_problem(folder, flag) if folder is not None else ""
    if problem:
        parser.error(problem)


def measure_main(args, parser) -> int:
    """Measure, print the table, write the run and its figures, submit a copy when asked."""
    from floorlab.tools.card import JSON_NAME, format_card, measure_card, submit_run, write_card

    _check_folder(parser, "--out", args.out)  # both folders are made and tried before anything is measured
    _check_folder(parser, "--submit", args.submit)
    try:
        facts = describe_device(args.device)
    except ValueError as err:
        parser.error(f"--device {args.device}: {err}")
    out = args.out or Path(paths.RESULTS_DIR) / f"measure-{device_slug(facts)}"
    if args.out is None:
        _check_folder(parser, "--out", out)
    print(f"measuring {facts.name}; the run is written to {out} when it ends", flush=True)
    try:
        run = measure_card(args.device, warmup=args.warmup, repeats=args.repeats, fused=args.fused)
    except KeyboardInterrupt:
        print(f"\nstopped before the end: nothing was written, {out} is as it was", file=sys.stderr)
        return 130
    print(format_card(run), flush=True)  # what was measured is on the screen before any write
    try:
        written = write_card(run, out)
    except OSError as err:
        kept, note = save_or_keep(run, out / JSON_NAME)
        print(f"\n{note or f'the run is written to {kept}'}; its figures could not be drawn "
              f"({type(err).__name__}: {err})", file=sys.stderr)
        return 1
    print(f"\nrun and figures written to {out}")
    if args.submit is not None:
        try:
            print(f"submitted as {submit_run(written['json'], args.submit, args.name)}")
        except OSError as err:
            print(f"the run is at {written['json']} but could not be submitted to {args.submit} "
                  f"({type(err).__name__}: {err}); copy it there by hand", file=sys.stderr)
            return 1
    return 0


def main(argv=None) -> int:
    """Run one command; returns its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv[:1] and argv[0] in PASSTHROUGH:  # a command with flags of its own: loaded only when asked for
        return importlib.import_module(PASSTHROUGH[argv[0]]).main(argv[1:])
    args = parser.parse_args(argv)
    if args.command is None:
        parser.error(f"name a command: {', '.join(COMMANDS)} (e.g. python -m floorlab measure)")
    if args.command == "measure":
        return measure_main(args, parser)
    from floorlab.tools.doctor import main as doctor_main

    return doctor_main()
