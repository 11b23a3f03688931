"""The tour's cases, by area: each throws one bad input (see tour.py for how outcomes are judged)."""

from __future__ import annotations

import json
import os
import sys
import threading
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import torch

from tour import INF, NAN, Case, verdict

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

BAD_NUMBERS = [0, -1, NAN, INF, -INF, "1", True, None, [], object()]
BAD_WHOLE = [0, -1, 2.5, NAN, INF, "8", True, None, [], object()]
BAD_TEXT = ["", "   ", 3, None, [], b"qwen3-0.6b", "no-such-name", "../../etc/passwd", "x" * 500]


def _tiny_shape():
    from floorlab.core.shapes import Qwen3Shape

    return Qwen3Shape(
        hidden_size=32,
        intermediate_size=64,
        num_layers=1,
        num_heads=2,
        num_kv_heads=1,
        head_dim=16,
        vocab_size=64,
        tie_word_embeddings=True,
        name="tour-tiny",
    )


def _swap(kwargs: dict, key: str, value) -> dict:
    return {**kwargs, key: value}


def each_argument(area, name, fn, good: dict, bad: dict[str, list]) -> list[Case]:
    """One case per (argument, bad value): fn(**good) with that one argument replaced."""
    return [
        Case(area, f"{name}({key}={value!r:.30})", partial(lambda k, v: fn(**_swap(good, k, v)), key, value))
        for key, values in bad.items()
        for value in values
    ]


def library(work: Path) -> list[Case]:
    import floorlab as fl
    from floorlab.core.bandwidth import Bandwidth, Bandwidths
    from floorlab.core.runs import Run
    from floorlab.engine.kernels import gemv_shapes
    from floorlab.studies import kernels, prefill, prefill_checks, serving_stream

    shape = _tiny_shape()
    bw = Bandwidths(
        Bandwidth("copy", 900.0, 900.0, 900.0, 10**6, "cpu"), Bandwidth("read", 1000.0, 1000.0, 1000.0, 10**6, "cpu")
    )
    floor = fl.decode_floor(shape, batch=1, prompt_tokens=4, bandwidths=bw)
    folder = work / "a-folder.json"
    folder.mkdir()
    (work / "lib-file").write_text("")
    under_file = work / "lib-file" / "x.png"
    cases = []
    cases += each_argument(
        "library",
        "floor_ms",
        fl.floor_ms,
        {"bytes_moved": 1e9, "bandwidth_gbps": 100.0},
        {"bytes_moved": [-1, NAN, INF, "1", True, None, []], "bandwidth_gbps": BAD_NUMBERS},
    )
    cases += each_argument(
        "library",
        "fmt_ms",
        fl.fmt_ms,
        {"ms": 1.0},
        {"ms": [NAN, "1", None, [], True, object()], "digits": [0, -1, 2.5, "3", None]},
    )
    cases += each_argument(
        "library", "fmt_gbps", fl.fmt_gbps, {"gbps": 1.0}, {"gbps": [NAN, "1", None, [], True, -INF, object()]}
    )
    cases += each_argument(
        "library",
        "wrap",
        fl.wrap,
        {"text": "a line"},
        {"text": [3, None, [], b"x"], "width": [0, -1, 2.5, "84", None, NAN]},
    )
    cases += each_argument(
        "library", "get_shape", fl.get_shape, {"name_or_shape": "qwen3-0.6b"}, {"name_or_shape": BAD_TEXT}
    )
    cases += each_argument(
        "library",
        "decode_floor",
        fl.decode_floor,
        {"shape": shape, "batch": 1, "prompt_tokens": 4, "bandwidths": bw},
        {
            "shape": ["nope", 3, None],
            "batch": BAD_WHOLE,
            "prompt_tokens": [-1, 2.5, NAN, "4", None],
            "bandwidths": [None, 3, {"read": -1}, {}],
            "cache_tokens": [-1, 2.5, "8"],
            "dtype_bytes": [0, -2, 2.5, "2"],
        },
    )

    # build_model and prefill_random (engine/model.py) take their checks from the engine's one input
    # check, which is being gathered into one module; their arguments join this tour once it lands
    def tick():
        return None

    good = {"path": "eager", "fn": tick, "floor": floor, "warmup": 0, "repeats": 2, "device": "cpu"}
    cases += each_argument(
        "library",
        "measure_path",
        fl.measure_path,
        good,
        {
            "path": ["", 3, None],
            "fn": [None, 3, "tick"],
            "floor": [None, 3, "floor"],
            "warmup": [-1, 2.5, NAN, "1", None],
            "repeats": BAD_WHOLE,
            "device": ["gpu", 3],
        },
    )
    row = fl.measure_path(**good)
    cases += each_argument(
        "library",
        "profile_path",
        fl.profile_path,
        {"row": row, "fn": tick, "device": "cpu"},
        {"row": [None, 3, "eager"], "fn": [None, 3], "device": ["gpu", 3]},
    )
    cases += each_argument(
        "library",
        "measure_bandwidths",
        fl.measure_bandwidths,
        {"device": "cpu", "repeats": 1, "size_mb": 1},
        {"device": ["gpu", 3, "cuda:99"], "repeats": BAD_WHOLE, "size_mb": [0, -1, NAN, INF, "1", True]},
    )
    cases += each_argument(
        "library",
        "describe_device",
        fl.describe_device,
        {"device": "cpu"},
        {"device": ["gpu", 3, [], "cuda:99", "tpu"]},
    )
    cases += each_argument("library", "card_plan", fl.card_plan, {"device": "cpu"}, {"device": ["gpu", 3, [], "tpu"]})
    cases += each_argument(
        "library",
        "reference_run",
        fl.reference_run,
        {"name": "h200-below-the-floor"},
        {"name": BAD_TEXT + [str(folder)]},
    )
    cases += each_argument(
        "library", "reference_figure", fl.reference_figure, {"name": "h200-below-the-floor"}, {"name": BAD_TEXT}
    )
    cases += each_argument(
        "library", "Run.load", Run.load, {"path": work}, {"path": [folder, work / "none.json", 3, None, ""]}
    )
    cases += each_argument(
        "library",
        "Run.from_dict",
        Run.from_dict,
        {"data": {}},
        {"data": [None, [], "run", {"layout": 2}, {"layout": 2, "kind": 3, "stamp": [], "device": {}}]},
    )
    cases += [Case("library", f"show_source({v!r})", partial(fl.show_source, v)) for v in (3, None, "text", [])]
    bars = {"eager": row.timing}
    cases += each_argument(
        "library",
        "stacked_bar",
        fl.stacked_bar,
        {"bars": bars, "floor_ms": 1.0},
        {
            "bars": [None, {}, [], {"eager": -3}, {"eager": None}, "eager", {"eager": NAN}],
            "floor_ms": BAD_NUMBERS,
            "path": [folder, 3, under_file],
        },
    )
    cases += each_argument(
        "library",
        "timeline",
        fl.timeline,
        {"timelines": []},
        {"timelines": [None, 3, ["x"], [None]], "max_us": [-1, NAN, "1"], "min_us": [NAN, "1"], "path": [folder]},
    )
    cases += each_argument(
        "library",
        "check_number",
        fl.check_number,
        {"value": 1.0, "expected": 1.0, "hint": "h"},
        {"expected": BAD_NUMBERS[2:], "rel": [-1, NAN, INF, "0.05", None], "hint": [None, 3]},
    )
    import torch

    from floorlab.engine.model import build_model, prefill_random

    cases += each_argument(
        "library",
        "build_model",
        build_model,
        {"preset_or_shape": shape, "max_batch": 2, "max_context": 8},
        {"preset_or_shape": [None, 3, "nope"], "max_batch": BAD_WHOLE, "max_context": BAD_WHOLE,
         "dtype": [torch.int32, torch.bool, "bf16", None], "seed": [-1, 2.5, NAN, "0", None],
         "device": ["gpu0", 3.5, None, []]},
    )
    tiny = build_model(shape, max_batch=2, max_context=8)
    cases += each_argument(
        "library",
        "prefill_random",
        prefill_random,
        {"model": tiny, "batch": 1, "prompt_tokens": 4},
        {"model": [None, 3, "qwen3-0.6b"], "batch": BAD_WHOLE + [3], "prompt_tokens": BAD_WHOLE + [8, 100],
         "seed": [-1, 2.5, "0", None]},
    )
    cases += [
        Case("library", f"worked_answer({v!r})", partial(lambda v: fl.worked_answer(v).__enter__(), v))
        for v in ("no", "yes", None, 2, [], "False")
    ]
    cases += each_argument(
        "library",
        "kernels.beyond_per_layer_us",
        kernels.beyond_per_layer_us,
        {"step_ms": 2.0, "floor_ms": 1.0, "num_layers": 2},
        {"step_ms": BAD_NUMBERS[1:], "floor_ms": BAD_NUMBERS, "num_layers": BAD_WHOLE},
    )
    cases += each_argument(
        "library", "kernels.gemv_shapes", gemv_shapes, {"shape": shape}, {"shape": [None, 3, "nope"]}
    )
    cases += each_argument(
        "library", "prefill.kv_share", prefill.kv_share, {"floor": floor}, {"floor": [None, 3, "nope", {}, []]}
    )
    cases += each_argument(
        "library",
        "prefill.stream_shapes",
        prefill.stream_shapes,
        {"lengths": [16, 16, 100]},
        {"lengths": [[], [0], [2.5], ["16"], "16", None, 3], "buckets": [[], [0], [2.5], "128", 3, [4]]},
    )
    stand_in = SimpleNamespace(device=torch.device("cpu"), shape=shape)  # what random_prompt reads of a model
    cases += each_argument(
        "library",
        "prefill.random_prompt",
        prefill.random_prompt,
        {"model": stand_in, "prompt_tokens": 4},
        {"model": [None, 3, "qwen3-0.6b"], "prompt_tokens": BAD_WHOLE, "seed": [-1, 2.5, "0", None, NAN]},
    )
    cases += each_argument(
        "library",
        "serving_stream.request_stream",
        serving_stream.request_stream,
        {"steps": 10, "largest": 4},
        {"steps": BAD_WHOLE, "largest": BAD_WHOLE, "beyond": [-1, 2.5, "4", NAN]},
    )
    cases += each_argument(
        "library",
        "prefill_checks.fixed_cost_answer",
        prefill_checks.fixed_cost_answer,
        {"shape": shape, "peak_tflops": 100.0, "step_ms": 1.0},
        {"shape": [None, "nope"], "peak_tflops": BAD_NUMBERS, "step_ms": BAD_NUMBERS},
    )
    return cases


def _no_measuring(fn):
    """fn with every command's measurement replaced by one that fails the case (nothing is measured)."""

    def run():
        from floorlab.tools import card, sweep
        from floorlab.tools.bench import cli as bench_cli

        def measured(*args, **kwargs):
            raise AssertionError("measured despite a bad flag")

        saved = (card.measure_card, bench_cli.run_bench, sweep.run_sweep)
        card.measure_card = bench_cli.run_bench = sweep.run_sweep = measured
        try:
            return fn()
        finally:
            card.measure_card, bench_cli.run_bench, sweep.run_sweep = saved

    return run


def command_line(work: Path) -> list[Case]:
    from floorlab.tools import cli, redraw, sweep, twocards
    from floorlab.tools.bench import cli as bench_cli

    afile = work / "cli-file"
    afile.write_text("")
    under_file, folder = afile / "sub", work / "cli-folder"
    folder.mkdir()
    flags = {
        "measure": (
            cli.main,
            ["measure", "--device", "cpu"],
            {
                "--repeats": ["0", "-1", "x", "2.5", ""],
                "--warmup": ["-1", "x", "nan"],
                "--device": ["gpu", "tpu"],
                "--out": [str(afile), str(under_file), str(work / "x.json"), str(work / "x.png")],
                "--submit": [str(afile), str(under_file), str(work / "s.json")],
            },
        ),
        "bench": (
            bench_cli.main,
            ["--presets", "qwen3-0.6b"],
            {
                "--presets": ["nope", "", ","],
                "--batches": ["0", "-1", "x", "999", ""],
                "--context": ["0", "x", "10**9"],
                "--repeats": ["0", "x"],
                "--out": [str(folder), str(work / "b.txt"), str(under_file / "b.json"), str(afile)],
                "--transformers-for": ["qwen3-32b"],
                "--tuned-fused-for": ["nope"],
            },
        ),
        "sweep": (
            sweep.main,
            ["--tiny"],
            {
                "--batches": ["0", "x"],
                "--presets": ["nope"],
                "--context": ["0", "x"],
                "--repeats": ["0"],
                "--configs": ["0", "x"],
                "--out": [str(folder), str(work / "s.txt"), str(under_file / "s.json")],
            },
        ),
        "redraw": (
            redraw.main,
            [],
            {"--only": ["nope", "x.png"], "--out": [str(afile), str(under_file), str(work / "r.json")]},
        ),
        "twocards": (
            twocards.main,
            ["--device", "cpu"],
            {
                "--ranks": ["0", "9", "x"],
                "--presets": ["nope"],
                "--warmup": ["-1"],
                "--repeats": ["0"],
                "--device": ["gpu"],
                "--out": [str(afile), str(under_file), str(work / "t.json")],
            },
        ),
    }
    cases = []
    for command, (main, base, options) in flags.items():
        for flag, values in options.items():
            for value in values:
                argv = [*base, flag, value]
                cases.append(
                    Case("command line", f"{command} {flag} {value[-30:]!r}", _no_measuring(partial(main, argv)))
                )
    cases += [
        Case("command line", f"python -m floorlab {argv}", _no_measuring(partial(cli.main, argv)))
        for argv in (
            ["nope"],
            [],
            ["measure", "--nope"],
            ["bench", "--nope"],
            ["sweep", "--nope"],
            ["redraw", "--nope"],
            ["twocards", "--nope"],
            ["measure", "extra"],
        )
    ]
    return cases


def gallery(work: Path) -> list[Case]:
    from floorlab.core.files import save_json
    from floorlab.studies import gallery_cards, gallery_folder
    from test_gallery import card_run

    room = work / "gallery"
    room.mkdir()
    good = card_run().to_dict()

    def edited(**changes):
        data = json.loads(json.dumps(good))
        for dotted, value in changes.items():
            *parents, last = dotted.split(".")
            place = data
            for key in parents:
                place = place[int(key)] if isinstance(place, list) else place[key]
            if isinstance(place, list):
                place[int(last)] = value
            else:
                place[last] = value
        return data

    inflated = edited(
        **{
            "floors.0.bytes_per_step": int(good["floors"][0]["bytes_per_step"] * 2.4),
            "floors.0.floor_ms": good["floors"][0]["floor_ms"] * 2.4,
        }
    )
    for row in inflated["rows"]:
        if row.get("timing"):
            row["x_floor"] = row["timing"]["median_ms"] / inflated["floors"][0]["floor_ms"]
    files = {
        "empty": b"",
        "binary": bytes(range(256)),
        "not-json": b"{nope",
        "list": b"[1, 2]",
        "null": b"null",
        "string": b'"card"',
        "deep": b"[" * 100_000 + b"]" * 100_000,
        "huge-int": b'{"layout": ' + b"9" * 5000 + b"}",
        "nan": json.dumps(edited(**{"floors.0.floor_ms": NAN})).encode(),
        "inf-bandwidth": json.dumps(edited(**{"bandwidths.read.gbps": INF})).encode(),
        "inflated-bytes": json.dumps(inflated).encode(),
        "unknown-preset": json.dumps(edited(**{"floors.0.preset": "qwen9"})).encode(),
        "bad-date": json.dumps(edited(**{"stamp.date": "someday"})).encode(),
        "future-date": json.dumps(edited(**{"stamp.date": "2999-01-01"})).encode(),
        "two-eager": json.dumps({**good, "rows": good["rows"] + good["rows"][:1]}).encode(),
        "negative-time": json.dumps(edited(**{"rows.0.timing.median_ms": -1})).encode(),
        "string-time": json.dumps(edited(**{"rows.0.timing.median_ms": "1"})).encode(),
        "bool-kernels": json.dumps(edited(**{"launches.eager.kernels": True})).encode(),
        "no-rows": json.dumps(edited(rows=[])).encode(),
        "rows-dict": json.dumps(edited(rows={})).encode(),
        "kind-bench": json.dumps(edited(kind="bench")).encode(),
        "layout-1": json.dumps(edited(layout=1)).encode(),
        "device-list": json.dumps(edited(device=[])).encode(),
        "name-control": json.dumps(edited(**{"device.name": "H200\x1b[2J"})).encode(),
        "name-long": json.dumps(edited(**{"device.name": "H" * 1000})).encode(),
        "kind-tpu": json.dumps(edited(**{"device.kind": "tpu"})).encode(),
        "below-floor": json.dumps(edited(**{"rows.0.timing.median_ms": 1e-6})).encode(),
        "slow-step": json.dumps(edited(**{"bandwidths.read.gbps": 0.001})).encode(),
        "settings-batch": json.dumps(edited(settings={"batch": 8})).encode(),
        "two-floors": json.dumps({**good, "floors": good["floors"] * 2}).encode(),
        "utf16": json.dumps(good).encode("utf-16"),
    }
    cases = []
    for name, data in files.items():
        (room / f"{name}.json").write_bytes(data)
        cases.append(Case("gallery", f"read_card({name})", partial(gallery_cards.read_card, room / f"{name}.json")))
    os.mkfifo(room / "pipe.json")
    (room / "folder.json").mkdir()
    (room / "devzero.json").symlink_to("/dev/zero")
    (room / "dangling.json").symlink_to(room / "nowhere")
    for name in ("pipe", "folder", "devzero", "dangling"):
        cases.append(Case("gallery", f"read_card({name})", partial(gallery_cards.read_card, room / f"{name}.json")))
    save_json(good, room / "good.json")

    def whole_room():
        g = gallery_folder.load_gallery(room, results_dir=work / "no-own")
        return g

    def all_skipped_but_one(g) -> str:
        return (
            ""
            if len(g.cards) == 1 and len(g.skipped) == len(files) + 4
            else f"showed {len(g.cards)} cards, skipped {len(g.skipped)}"
        )

    cases.append(Case("gallery", "load_gallery(a room of bad files)", whole_room, all_skipped_but_one))
    for bad in (3, work / "cli-file", work / "no-such-folder"):
        cases.append(
            Case(
                "gallery",
                f"load_gallery({str(bad)[-20:]!r})",
                partial(gallery_folder.load_gallery, bad, results_dir=work / "no-own", stored=None),
                lambda g: "" if not g.cards else "showed cards from nowhere",
            )
        )
    return cases


def checks(work: Path) -> list[Case]:
    import floorlab as fl
    from floorlab.studies import below_the_floor_detector, gallery, shared_buffers_checks

    cases = [
        Case("checks", f"check_number({v!r:.20})", partial(fl.check_number, v, 10.0, hint="h"), verdict)
        for v in ("10", "10 ms", NAN, INF, True, [], [10.0], {"a": 1}, object(), b"10", "", -10.0, 1e300)
    ]
    gaps = {"Intel Xeon (cpu)": 415.0, "NVIDIA H200 (cuda)": 14.2, "NVIDIA H100 (cuda)": 12.0, "RTX 4090 (cuda)": 9.1}
    for name in ("a", "c", "cuda", "nvidia", " ", "", 3, None, ["4090"], "(cuda)", "x"):
        cases.append(
            Case(
                "checks",
                f"check_smallest({name!r})",
                partial(gallery.check_smallest, name, 9.1, gaps, names=("c", "g"), unit=" µs", hint="h"),
                lambda r: "" if r is None or verdict(r) == "" else verdict(r),
            )
        )
    for value in ("9.1", NAN, True, None, []):
        cases.append(
            Case(
                "checks",
                f"check_smallest('4090', {value!r})",
                partial(gallery.check_smallest, "4090", value, gaps, names=("c", "g"), unit=" µs", hint="h"),
                verdict,
            )
        )
    keeps = {"a": True, "b": False, "c": True, "d": False}
    for answer in ("abcd", "", 3, None, ["a", 3], "zz", "a,c,e", {"a"}):
        cases.append(
            Case(
                "checks",
                f"check_safe_snippets({answer!r})",
                partial(shared_buffers_checks.check_safe_snippets, answer, keeps),
                verdict,
            )
        )
    shape = _tiny_shape()
    model = fl.build_model(shape, dtype=torch.float32, max_batch=2, max_context=8)
    model.prefill(torch.zeros(1, 2, dtype=torch.long))
    step = (model.decode_step, torch.tensor([1]), torch.tensor([7]), torch.tensor([2]))
    detectors = {
        "returns None": lambda *a: None,
        "returns 'yes'": lambda *a: "yes",
        "returns 1": lambda *a: 1,
        "returns a list": lambda *a: [True],
        "is not callable": 3,
    }
    for what, detector in detectors.items():
        cases.append(
            Case(
                "checks",
                f"check_detector(a detector that {what})",
                partial(below_the_floor_detector.check_detector, detector, *step),
                verdict,
            )
        )
    return cases


def environment(work: Path) -> list[Case]:
    from floorlab.core import checks as core_checks
    from floorlab.core.environment import expand_folder, flag, writable_folder
    from floorlab.engine import text

    cases = [
        Case(
            "environment",
            f"FLOORLAB_SHOW_ANSWERS={v!r}",
            partial(flag, "FLOORLAB_SHOW_ANSWERS", {"FLOORLAB_SHOW_ANSWERS": v}),
        )
        for v in ("maybe", "2", "y", "n", "-1", "tru", "enable", "yes please", "☃", "0x1")
    ]
    said: list[str] = []

    def folder_case(value):
        said.clear()
        found = writable_folder(
            "FLOORLAB_FIGURES",
            work / "figs",
            work / "fallback",
            what="figures",
            environ={"FLOORLAB_FIGURES": value},
            say=said.append,
        )
        return found, list(said)

    def told(result) -> str:
        found, lines = result
        return (
            ""
            if found == work / "fallback"
            and len(lines) == 1
            and "FLOORLAB_FIGURES" in lines[0] + str(found)
            or (found == work / "fallback" and len(lines) == 1)
            else f"figures went to {found} with {lines}"
        )

    afile = work / "env-file"
    afile.write_text("")
    for value in (
        "~nosuchuser/x",
        "~nosuchuser",
        str(afile),
        str(afile / "sub"),
        "/proc/1/nope",
        "a\x00b",
        "/dev/null",
    ):
        cases.append(Case("environment", f"FLOORLAB_FIGURES={value!r}", partial(folder_case, value), told))
    for value in ("~nosuchuser/x", "a\x00b"):
        cases.append(Case("environment", f"expand_folder({value!r})", partial(expand_folder, value, "FLOORLAB_X")))
    for value in ("~nosuchuser/qwen", "/no/such/folder", str(afile), "", "   ", "./nope"):
        cases.append(Case("environment", f"FLOORLAB_QWEN3_PATH={value!r}", partial(text.load_text_model, value)))

    def shown_with(value):
        old = os.environ.get("FLOORLAB_SHOW_ANSWERS")
        os.environ["FLOORLAB_SHOW_ANSWERS"] = value
        try:
            return core_checks.answers_shown(False)
        finally:
            os.environ.pop("FLOORLAB_SHOW_ANSWERS") if old is None else os.environ.__setitem__(
                "FLOORLAB_SHOW_ANSWERS", old
            )

    cases += [
        Case("environment", f"answers_shown with FLOORLAB_SHOW_ANSWERS={v!r}", partial(shown_with, v))
        for v in ("maybe", "2", "si")
    ]
    return cases


def files(work: Path) -> list[Case]:
    from floorlab.core import files as core_files
    from floorlab.core.files import save_json
    from floorlab.core.reference import reference_run
    from floorlab.core.runs import Run
    from floorlab.tools import card
    from floorlab.tools.bench import cli as bench_cli
    from floorlab.tools.bench.run import partial_path

    folder = work / "files"
    folder.mkdir()
    target = save_json({"rows": [1, 2, 3]}, folder / "run.json")
    before = target.read_bytes()

    def unchanged(_result) -> str:
        return "" if target.read_bytes() == before else "lost: the old file changed"

    def half(stream):
        stream.write(b'{"rows": [')
        raise OSError(28, "No space left on device")

    def failed_png():
        from matplotlib.figure import Figure

        from floorlab.figures.style import save_png

        class Broken(Figure):
            def savefig(self, stream, **kwargs):
                stream.write(b"\x89PNG")
                raise OSError(28, "No space left on device")

        save_png(Broken(), target)

    cases = [
        Case("files", "a write failing halfway", partial(core_files.write_whole, target, half), unchanged),
        Case("files", "a PNG failing halfway over a file", failed_png, unchanged),
        Case("files", "save_json of an unstorable object", partial(save_json, {"a": object()}, target), unchanged),
        Case("files", "save_json to a folder", partial(save_json, {"a": 1}, folder)),
        Case("files", "save_json under a file", partial(save_json, {"a": 1}, target / "x.json"), unchanged),
        Case("files", "Run.load of a cut-off file", partial(Run.load, _cut(folder))),
        Case("files", "submit_run into a file", partial(card.submit_run, target, target)),
    ]
    stored = reference_run("h200-below-the-floor")

    def rescue() -> str:
        where, note = __import__("floorlab.core.runs", fromlist=["save_or_keep"]).save_or_keep(
            stored, target / "sub.json"
        )
        return where, note

    def kept(result) -> str:
        where, note = result
        if not Path(where).is_file() or Run.load(where).to_dict() != stored.to_dict() or str(where) not in note:
            return "lost: the run is nowhere"
        return ""

    cases.append(Case("files", "a run its folder refuses", rescue, kept))
    out = folder / "bench.json"
    for text in ("[1]", "{", '{"kind": "bench", "facts": 3}', "null", '"x"', "{}", '{"layout": 2, "kind": "bench"}'):

        def resume(text=text):
            partial_path(out).write_text(text)
            return bench_cli.main(["--resume", "--out", str(out), "--presets", "qwen3-0.6b"])

        cases.append(Case("files", f"bench --resume over a partial holding {text!r}", resume))
    return cases


def _cut(folder: Path) -> Path:
    path = folder / "cut.json"
    path.write_text('{"layout": 2, "kind": "measure", "rows": [')
    return path


def processes(work: Path) -> list[Case]:
    from floorlab.engine.ranks import check_devices
    from floorlab.studies.shared_buffers import static_runner

    cases = [
        Case("processes", f"check_devices({r!r}, {d!r})", partial(check_devices, r, d))
        for r, d in (
            (0, "cpu"),
            (-1, "cpu"),
            (2.5, "cpu"),
            ("2", "cpu"),
            (10**6, "cpu"),
            (2, "tpu"),
            (2, "cuda"),
            (True, "cpu"),
        )
    ]
    shape = _tiny_shape()
    import floorlab as fl

    model = fl.build_model(shape, dtype=torch.float32, max_batch=2, max_context=16)
    runner = static_runner(model, (1,), guard=True)
    _, tokens, positions = fl.prefill_random(model, 1, 4)

    def two_threads():
        inside, release = threading.Event(), threading.Event()
        load = runner._load_inputs

        def paused(*args):
            load(*args)
            if threading.current_thread().name == "tour-first":
                inside.set()
                release.wait(10)

        runner._load_inputs = paused

        def first():
            runner.step(tokens, positions)

        try:
            t = threading.Thread(target=first, name="tour-first")
            t.start()
            inside.wait(10)
            try:
                return runner.step(tokens, positions)
            finally:
                release.set()
                t.join(10)
        finally:
            del runner._load_inputs

    cases.append(Case("processes", "a second thread steps a runner inside a step", two_threads))
    return cases


def cases_for(work: Path) -> list[Case]:
    return (
        library(work)
        + command_line(work)
        + gallery(work)
        + checks(work)
        + environment(work)
        + files(work)
        + processes(work)
    )
