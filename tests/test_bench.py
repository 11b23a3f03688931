"""The bench on a tiny shape: typed rows, floors from decode_floor, absent rows say why, FAIL lines
say what caused them, the CLI refuses bad input. CPU tests never assert a time."""
import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from floorlab.core.device import DeviceFacts
from floorlab.core.roofline import decode_floor
from floorlab.core.runs import Row, Run
from floorlab.core.shapes import PRESETS, Qwen3Shape
from floorlab.core.timing import Timing
from floorlab.engine.model import build_model
from floorlab.tools.bench import format_table, run_bench
from floorlab.tools.bench.cli import default_out_path, device_slug, parse_args
from floorlab.tools.bench.engine import NO_GRAPHS
from floorlab.tools.bench.rows import GRAPH_COUNT_NOTE, Case, Rows, decode_inputs, measure_graph_row, prefill
from floorlab.tools.bench.run import partial_path
from floorlab.tools.bench.settings import PATHS, make_settings
from floorlab.tools.bench.targets import BATCH_TARGETS, FLOOR_TARGETS, GEMV_TARGETS, RACE_TARGETS, evaluate_targets

TINY = Qwen3Shape(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
                  head_dim=16, vocab_size=256, tie_word_embeddings=True, name="tiny")
UNTIED = Qwen3Shape(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
                    head_dim=16, vocab_size=512, tie_word_embeddings=False, name="untied")


@pytest.fixture(scope="module")
def cpu_run():
    return run_bench([TINY], [1], 8, repeats=2, warmup=1, device="cpu", progress=False)


def test_every_path_has_one_typed_row(cpu_run):
    assert isinstance(cpu_run, Run) and cpu_run.kind == "bench"
    assert [r.path for r in cpu_run.rows] == list(PATHS)
    for row in cpu_run.rows:
        assert isinstance(row, Row)
        assert (row.preset, row.batch) == ("tiny", 1)
        assert row.status in ("measured", "absent", "failed")


def test_cpu_measures_eager_rows(cpu_run):
    measured = {r.path: r for r in cpu_run.rows if r.measured}
    assert set(measured) == {"plain eager", "hf eager"}
    floor = cpu_run.floor("tiny", 1)
    for row in measured.values():
        assert row.timing.p10_ms <= row.median_ms <= row.timing.p90_ms
        assert row.issue is not None
        assert row.x_floor == pytest.approx(row.median_ms / floor.floor_ms)
        assert row.achieved_gbps > 0
        assert row.kernels > 0
        assert row.kernels_per_layer == pytest.approx(row.kernels / TINY.num_layers)
        assert cpu_run.launches[f"tiny b1 {row.path}"].kernels == row.kernels


def test_cpu_says_why_graph_rows_are_absent(cpu_run):
    absent = {r.path: r for r in cpu_run.rows if r.status == "absent"}
    for path in ("fused tuned eager", "fused tuned graph"):  # not asked for: minutes of tuning
        assert "--tuned-fused-for tiny" in absent[path].note
    for path in ("plain graph", "fused graph", "hf graph", "hf compile"):
        assert NO_GRAPHS in absent[path].note
        assert absent[path].timing is None and absent[path].x_floor is None
    assert "CPU" in absent["fused eager"].note
    table = format_table(cpu_run)
    assert f"absent: {NO_GRAPHS}" in table
    assert "targets:" in table


@pytest.fixture(scope="module")
def skipped_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    run = run_bench([UNTIED], [1, 3], 8, repeats=1, warmup=0, device="cpu", progress=False,
                    skip_transformers=True, skip_fused=True, save_to=out)
    return run, out


@pytest.mark.parametrize("which", ["tied", "untied"])
def test_floors_are_decode_floor_of_each_configuration(which, cpu_run, skipped_run):
    run = cpu_run if which == "tied" else skipped_run[0]
    shape = TINY if which == "tied" else UNTIED
    batches = run.settings.batches
    settings = make_settings([shape], batches, 8, repeats=run.settings.repeats,
                             warmup=run.settings.warmup, device="cpu")
    assert [(f.preset, f.batch) for f in run.floors] == [(shape.name, b) for b in batches]
    for floor in run.floors:
        assert floor == decode_floor(shape, batch=floor.batch, prompt_tokens=8,
                                     bandwidths=run.bandwidths.as_gbps(),
                                     cache_tokens=settings.cache_tokens)
        assert floor.bandwidth_kind == run.bandwidths.floor_kind
    table = format_table(run)
    assert f"floors use the larger, {run.bandwidths.floor_kind}" in table
    for floor in run.floors:
        assert floor.arithmetic() in table and floor.reads_note() in table


def test_limits_and_parity(cpu_run):
    limits = cpu_run.facts["limits"]["tiny"]
    assert set(limits["gemv"]) == {"qkv", "o_proj", "gate_up", "down", "lm_head"}
    assert limits["largest_gemv"]["bytes"] == max(g["bytes"] for g in limits["gemv"].values())
    assert limits["gemv_only_ms"] > 0
    assert limits["verdict"]["path"] == "plain eager"
    assert "CUDA GPU" in limits["kernels_note"]
    parity = cpu_run.facts["parity"]["tiny"]
    for key in ("engine_bf16_vs_fp32", "hf_bf16_vs_fp32", "engine_fp32_vs_hf_fp32"):
        assert parity[key] >= 0
    assert parity["engine_fp32_vs_hf_fp32"] <= parity["fp32_tolerance"]
    assert parity["passed"] is True
    assert "(relative L2 vs transformers in float32): PASS" in format_table(cpu_run)


def test_run_round_trips_through_json(cpu_run, tmp_path):
    path = cpu_run.save(tmp_path / "bench.json")
    loaded = Run.load(path)
    assert [r.to_dict() for r in loaded.rows] == [r.to_dict() for r in cpu_run.rows]
    assert loaded.floors == cpu_run.floors
    assert format_table(loaded) == format_table(cpu_run)


def test_skip_flags_leave_rows_absent_and_json_is_saved(skipped_run):
    run, out = skipped_run
    notes = {r.path: r.note for r in run.rows}
    assert "--skip-transformers" in notes["hf eager"]
    assert "--skip-fused" in notes["fused eager"]
    assert run.facts["parity"] == {}
    assert "parity: not checked (--skip-transformers" in format_table(run)
    saved = Run.load(out)
    assert saved.facts["partial"] is False and not partial_path(out).exists()  # the partial moved to out
    assert len(saved.rows) == 2 * len(PATHS)
    assert "bandwidth: copy and read" in saved.facts["stage_s"]


def _case(preset="qwen3-0.6b", batch=1) -> Case:
    floor = decode_floor(PRESETS[preset], batch=batch, prompt_tokens=32,
                         bandwidths={"copy": 4200.0, "read": 4300.0})
    return Case(PRESETS[preset], floor, torch.device("cpu"), 0, 1)


def test_failed_and_absent_rows_say_what_and_why():
    rows, case = Rows(), _case()

    def broken():
        raise RuntimeError("out of memory\n  while capturing")

    failed = rows.attempt(case, "plain graph", broken)
    assert failed.status == "failed" and failed.timing is None
    assert failed.note == "failed: RuntimeError: out of memory while capturing"
    absent = rows.absent(case, "hf graph", NO_GRAPHS)
    assert (absent.status, absent.note) == ("absent", NO_GRAPHS)
    assert rows.rows == [failed, absent]


class _EagerRunner:
    """Stands in for a GraphRunner on the CPU: its 'replay' launches nothing the profiler sees."""

    def __init__(self, model):
        self.model, self.last_max_abs_diff = model, None

    def step(self, tokens, positions):
        return self.model.decode_step(tokens, positions)

    def replay_fn(self, batch):
        return lambda: None

    def check_bit_identical(self, tokens, positions):
        self.last_max_abs_diff = 0.0
        return True


@pytest.mark.parametrize("fresh_prefill", [False, True])
def test_graph_row_counts_on_the_eager_step_and_checks_bits(fresh_prefill):
    model = build_model(TINY, max_batch=1, max_context=16)
    data = decode_inputs(TINY, 1, 4, "cpu")
    floor = decode_floor(TINY, batch=1, prompt_tokens=4, bandwidths={"copy": 20.0})
    case, rows = Case(TINY, floor, torch.device("cpu"), 0, 1), Rows()
    prefill(model, data[0])
    row = measure_graph_row(rows, case, "plain graph", _EagerRunner(model), data,
                            lambda: model.decode_step(*data[1:]),
                            model=model if fresh_prefill else None)
    assert row.measured and row.bit_identical is True and row.max_abs_diff == 0.0
    assert row.kernels > 0 and GRAPH_COUNT_NOTE in row.note
    assert rows.launches["tiny b1 plain graph"].kernels == row.kernels


def _row(path, ms, x_floor, preset="qwen3-0.6b", kernels=300, issue_ms=None, batch=1):
    timing = Timing.from_samples([ms])
    issue = Timing.from_samples([issue_ms]) if issue_ms is not None else None
    return Row(path=path, preset=preset, batch=batch, timing=timing, issue=issue, x_floor=x_floor,
               kernels=kernels, kernels_per_layer=kernels / 28)


def test_targets_pass_fail_and_explain_each_miss():
    rows = [_row("fused graph", 0.5, 1.8), _row("plain graph", 1.3, 4.6, kernels=400),
            _row("hf graph", 5.0, 18.0, issue_ms=4.5), _row("hf compile", 1.0, 3.5, kernels=250),
            _row("fused graph", 20.0, 5.3, preset="qwen3-8b")]
    limits = {"qwen3-8b": {"batch": 1, "gemv_only_x_floor": 3.4,
                           "kernels": {"fused graph": {"overhead_us_per_kernel": 12.5,
                                                       "gpu_idle_us": 40.0}}}}
    targets = {t["target"]: t for t in evaluate_targets(rows, limits)}
    assert len(targets) == len(FLOOR_TARGETS) + len(RACE_TARGETS) + len(BATCH_TARGETS) + len(GEMV_TARGETS)
    verdicts = {name: t["passed"] for name, t in targets.items()}
    assert verdicts["qwen3-0.6b b1: fused graph <= 2.0x the floor"] is True
    assert verdicts["qwen3-0.6b b1: plain graph <= 4.0x the floor"] is False
    assert verdicts["qwen3-8b b1: fused graph <= 1.25x the floor"] is False
    assert verdicts["qwen3-0.6b b1: fused graph faster than hf compile"] is True
    assert verdicts["qwen3-0.6b b1: plain graph faster than hf compile"] is False
    assert verdicts["qwen3-0.6b b1: plain graph faster than hf graph"] is True
    eight = targets["qwen3-8b b1: fused graph <= 1.25x the floor"]["note"]
    assert eight.startswith("missed: 5.30x; the library's GEMVs alone take 3.40x the floor")
    assert "12.5 µs each" in eight and eight.endswith("(limits)")
    race = targets["qwen3-0.6b b1: plain graph faster than hf compile"]["note"]
    assert race.startswith("missed: 1.30x hf compile's time;")
    assert "400 kernels" in race and "250 kernels" in race


def test_kernel_targets_name_the_kernel_that_holds_the_step():
    kernels = [{"kernel": k, "us": us, "bytes": 1, "gbps": 1.0, "pct_read": pct, "beyond_us": beyond, "config": {}}
               for k, us, pct, beyond in (("qkv", 3.7, 52.0, 1.8), ("attention", 7.3, 7.0, 7.0),
                                          ("o_proj", 2.1, 80.0, 0.2), ("gate_up", 4.2, 76.0, 1.2),
                                          ("down", 3.2, 46.0, 1.7), ("lm_head", 75.0, 96.0, 3.0))]
    at_eight = [dict(k, us=k["us"] + grow) for k, grow in zip(kernels, (3.0, 0.5, 1.0, 6.0, 0.0, 9.0))]
    rows = [_row("triton graph", 0.7, 2.5), _row("triton graph", 1.6, 4.1, batch=8)]
    limits = {"qwen3-0.6b": {"batch": 1, "gemv_only_x_floor": 3.0, "num_layers": 28, "kernels": {},
                             "triton_kernels": kernels, "triton_kernels_at": {"8": at_eight}}}
    targets = {t["target"]: t for t in evaluate_targets(rows, limits)}
    floor = targets["qwen3-0.6b b1: triton graph <= 1.5x the floor"]
    assert floor["passed"] is False and "most in attention (7.0 µs) and qkv (1.8 µs)" in floor["note"]
    assert "the library's GEMVs" not in floor["note"] and "made empty" not in floor["note"]
    # a table that timed each grid launched empty says what the launches alone take a layer
    empty = [dict(k, empty_us=us) for k, us in zip(kernels, (1.4, 0.8, 1.0, 1.2, 1.0, 1.1))]
    limits["qwen3-0.6b"]["triton_kernels"] = empty
    with_empty = {t["target"]: t for t in evaluate_targets(rows, limits)}
    assert ("their 5 launches, made empty with the same grids, take 5.4 µs a layer alone"
            in with_empty["qwen3-0.6b b1: triton graph <= 1.5x the floor"]["note"])
    # with the floor known, the launches are set against the room 1.5x leaves a layer: both ways
    for floor_ms, says in ((0.28, "more than the 5.0 µs a layer beyond the floor that 1.5x leaves"),
                           (0.56, "within the 10.0 µs a layer beyond the floor that 1.5x leaves")):
        limits["qwen3-0.6b"]["floor_ms"] = floor_ms
        note = {t["target"]: t for t in evaluate_targets(rows, limits)}[
            "qwen3-0.6b b1: triton graph <= 1.5x the floor"]["note"]
        assert "5.4 µs a layer alone, " + says in note, note
    del limits["qwen3-0.6b"]["floor_ms"]
    # with a barrier timed inside one launch: the same five dependencies there, a sentence for each way
    # they fall against the 5.4 µs of launches, the band deciding
    for (p10, us, p90), says in (((0.5, 0.6, 0.7), "a persistent step could win back up to 2.4 µs a layer"),
                                 ((1.0, 1.1, 1.2), "only fewer dependent steps a layer"),
                                 ((1.2, 1.3, 1.4), "one persistent launch would not win the boundaries back")):
        limits["qwen3-0.6b"]["grid_barrier"] = {"us": us, "p10_us": p10, "p90_us": p90, "programs": 132,
                                                "rounds": 140}
        note = {t["target"]: t for t in evaluate_targets(rows, limits)}[
            "qwen3-0.6b b1: triton graph <= 1.5x the floor"]["note"]
        assert f"a barrier across its 132 programs takes {us:.2f} µs, {5 * us:.1f} µs for 5 a layer" in note
        assert says in note, note
    limits["qwen3-0.6b"]["grid_barrier"] = {"error": "RuntimeError: no GPU"}  # not timed: no clause
    assert "barrier" not in {t["target"]: t for t in evaluate_targets(rows, limits)}[
        "qwen3-0.6b b1: triton graph <= 1.5x the floor"]["note"]
    del limits["qwen3-0.6b"]["grid_barrier"]
    limits["qwen3-0.6b"]["triton_kernels"] = kernels
    batch = targets["qwen3-0.6b: triton graph at batch 8 <= 1.15x its batch-1 time"]
    assert batch["passed"] is False and batch["value"] == pytest.approx(1.6 / 0.7)
    # the layer (lm_head left out) grows from 20.5 to 31.0 µs, most in gate_up, then qkv
    assert batch["note"].endswith("its kernels of one layer take 31.0 µs at batch 8 against 20.5 at batch 1, "
                                  "most of the growth in gate_up (+6.0 µs) and qkv (+3.0 µs)")
    gemv = targets["qwen3-0.6b b1: each of the book's layer GEMVs >= 75% of the read bandwidth"]
    assert gemv["passed"] is False and gemv["value"] == 46.0
    assert gemv["note"] == "missed: qkv 52%, o_proj 80%, gate_up 76%, down 46%"
    assert targets["qwen3-8b: triton graph at batch 8 <= 1.15x its batch-1 time"]["passed"] is None
    # a table that timed the unsplit GEMVs without their PDL wait says how far that brings them
    no_wait = {"qkv": 70.4, "o_proj": 84.0, "down": 55.5}  # (gate_up split: not timed so)
    waited = [dict(k, pct_read_no_wait=no_wait.get(k["kernel"])) for k in kernels]
    limits["qwen3-0.6b"]["triton_kernels"] = waited
    gemv = {t["target"]: t for t in evaluate_targets(rows, limits)}[gemv["target"]]
    assert gemv["note"] == ("missed: qkv 52%, o_proj 80%, gate_up 76%, down 46%; launched without the PDL wait "
                            "(results wrong, timing only) qkv 70%, o_proj 84%, down 56%")


def test_format_table_explains_every_fail_line(cpu_run):
    rows = [_row("fused graph", 0.9, 3.1), _row("plain graph", 1.3, 4.6, kernels=400),
            _row("hf compile", 1.0, 3.5, kernels=250, issue_ms=0.95)]
    run = Run(kind="bench", stamp=cpu_run.stamp, device=cpu_run.device,
              bandwidths=cpu_run.bandwidths, rows=rows,
              facts={"targets": evaluate_targets(rows), "partial": False})
    fails = [line for line in format_table(run).splitlines() if line.strip().startswith("FAIL")]
    assert len(fails) == 3
    for line in fails:
        assert "(missed: " in line and "kernels" in line
    assert all("not measured" not in line for line in fails)


def test_format_table_lists_presets_small_to_large_whatever_order_they_ran_in(first_host_runs):
    """A run may measure its largest model first (a resumed run puts the slowest compile last);
    the table still reads from the smallest model up, each preset's rows in their own order."""
    from floorlab.core.reference import reference_run

    run = reference_run("h200-bench")
    assert run.settings.presets[0] == "qwen3-8b"  # the stored run measured 8B first
    lines = format_table(run).splitlines()
    order = list(dict.fromkeys(line.split()[1] for line in lines if line.startswith("floor ")))
    assert order == ["qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b"]
    header = next(i for i, line in enumerate(lines) if line.startswith("path "))
    body = lines[header + 2:header + 2 + len(run.rows)]
    presets = [next(word for word in line.split() if word in order) for line in body]
    assert list(dict.fromkeys(presets)) == order
    assert presets == sorted(presets, key=order.index)


def test_format_summary_keeps_every_preset_inside_the_page_column(first_host_runs):
    """Four presets (the first stored bench measured four) with every path do not fit side by side:
    they go to even blocks, each line inside the column, every measured cell still shown once, and
    paths with nothing in a block left out of it."""
    from floorlab.core.prose import COLUMN
    from floorlab.core.reference import reference_run
    from floorlab.tools.bench import format_summary

    run = reference_run("h200-bench")
    text = format_summary(run, batch=1, targets=False)
    lines = text.splitlines()
    assert all(len(line) <= COLUMN for line in lines)
    heads = [line.split()[1:] for line in lines if line.startswith("path ")]
    assert len(heads) == 2 and [len(h) for h in heads] == [2, 2]
    assert sum(heads, []) == ["qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b"]
    measured = [r for r in run.rows if r.batch == 1 and r.median_ms is not None]
    assert text.count(" ms (") == len(measured)
    second = lines[lines.index("", 1) + 1:]
    assert not any(line.startswith("fused tuned") for line in second)  # 0.6B only


def test_format_table_refuses_an_old_dict():
    with pytest.raises(TypeError, match="floorlab.core.runs.Run"):
        format_table({"rows": []})


def test_device_slug_and_default_path():
    assert device_slug(DeviceFacts(kind="cuda", name="NVIDIA H200")) == "nvidia-h200"
    assert device_slug(DeviceFacts(kind="cpu", name="AMD EPYC 7B13")) == "cpu-amd-epyc-7b13"
    path = default_out_path(DeviceFacts(kind="cuda", name="NVIDIA H200"))
    assert path.name == "bench-nvidia-h200.json" and path.parent.name == "figures"


def test_cli_parses_lists():
    args = parse_args(["--presets", "qwen3-0.6b,qwen3-8b", "--batches", "8", "1",
                       "--context", "16", "--repeats", "3", "--skip-fused"])
    assert args.presets == ["qwen3-0.6b", "qwen3-8b"]
    assert args.batches == [1, 8]
    assert (args.context, args.repeats, args.skip_fused, args.skip_transformers) == (16, 3, True, False)


def test_cli_unknown_preset_lists_known_ones(capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["--presets", "qwen3-9b"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "qwen3-9b" in err
    assert all(name in err for name in PRESETS)


@pytest.mark.parametrize("argv, message", [
    (["--batches", "0"], "from 1 to 16"),
    (["--batches", "17"], "from 1 to 16"),
    (["--batches", "eight"], "from 1 to 16, got eight; for example 1 or 8"),
    (["--context", "0"], "context must be a whole number from 1 to 8192, got 0"),
    (["--context", "many"], "context must be a whole number"),
    (["--repeats", "0"], "repeats must be a whole number >= 1, got 0"),
    (["--out", "bench.txt"], "should end in .json"),
    (["--presets", ","], "no preset given"),
])
def test_cli_bad_values_say_how_to_fix(argv, message, capsys):
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert message in capsys.readouterr().err


def test_cli_out_folder_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        parse_args(["--out", str(tmp_path)])
    assert "is a folder" in capsys.readouterr().err


@pytest.mark.parametrize("kwargs, message", [
    ({"batches": [0]}, "every batch size must be a whole number from 1 to 16"),
    ({"batches": [17]}, "every batch size must be a whole number from 1 to 16"),
    ({"batches": [2.5]}, "every batch size must be a whole number from 1 to 16"),
    ({"batches": []}, "at least one preset and one batch size"),
    ({"context": 0}, "context must be a whole number from 1 to"),
    ({"repeats": 0}, "repeats must be a whole number >= 1"),
    ({"presets": ["qwen3-9b"]}, "unknown preset 'qwen3-9b'"),
])
def test_run_bench_refuses_bad_settings(kwargs, message):
    settings = {"presets": [TINY], "batches": [1], "context": 4, "device": "cpu", "progress": False}
    settings.update(kwargs)
    with pytest.raises(ValueError, match=message):
        run_bench(**settings)


@pytest.mark.gpu
def test_gpu_bench_small_shape_measures_every_path(tmp_path):
    small = Qwen3Shape(1024, 3072, 4, 16, 8, 128, 151936, True, name="small")
    run = run_bench([small], [1, 2], 16, repeats=5, warmup=2, progress=False,
                    save_to=tmp_path / "bench.json")
    rows = {(r.path, r.batch): r for r in run.rows}
    tuned = {key for key in rows if key[0].startswith("fused tuned")}  # not asked for: minutes of tuning
    assert all(rows[key].status == "absent" for key in tuned)
    failed = {key: r.note for key, r in rows.items() if not r.measured and key not in tuned}
    assert not failed
    for batch in (1, 2):
        assert rows["plain graph", batch].bit_identical is True
        assert rows["fused graph", batch].bit_identical is True
        assert rows["fused graph", batch].median_ms < rows["plain eager", batch].median_ms
    assert run.facts["parity"]["small"]["passed"], run.facts["parity"]["small"]
    limits = run.facts["limits"]["small"]
    assert set(limits["kernels"]) == {"plain eager", "plain graph", "fused eager", "fused graph",
                                      "triton eager", "triton graph"}
    for batch in (1, 2):
        assert rows["triton graph", batch].bit_identical is True
    assert all(k.get("kernels") for k in limits["kernels"].values()), limits["kernels"]
    assert "small b1 fused graph" in run.timelines
    assert Run.load(tmp_path / "bench.json").facts["partial"] is False
    assert Path(default_out_path(run.device)).suffix == ".json"


def test_tuned_fused_rows_compile_where_asked_for():
    run = run_bench([TINY], [1], 8, repeats=1, warmup=0, device="cpu", progress=False, skip_transformers=True,
                    compile_on_cpu=True, tuned_fused_for=["tiny"])
    rows = {r.path: r for r in run.rows}
    for prefix in ("fused", "fused tuned"):
        assert rows[f"{prefix} eager"].measured, rows[f"{prefix} eager"].note
        assert rows[f"{prefix} graph"].status == "absent"  # no CUDA graphs on the CPU
    assert "coordinate_descent_tuning" in rows["fused tuned eager"].note
    assert "coordinate_descent_tuning" not in rows["fused eager"].note


def test_tuned_fused_rows_are_asked_for_by_preset(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--presets", "qwen3-0.6b", "--tuned-fused-for", "qwen3-8b"])
    assert "--tuned-fused-for names qwen3-8b, which this run does not measure" in capsys.readouterr().err
    assert parse_args(["--tuned-fused-for", "qwen3-0.6b"]).tuned_fused_for == ["qwen3-0.6b"]
    with pytest.raises(ValueError, match="tuned_fused_for names qwen3-8b"):
        make_settings(["qwen3-0.6b"], [1], device="cpu", tuned_fused_for=["qwen3-8b"])
    settings = make_settings(["qwen3-0.6b", "qwen3-1.7b"], [1], device="cpu", tuned_fused_for=["qwen3-1.7b"])
    assert settings.tuned_skip_reason("qwen3-1.7b") == ""
    assert "--tuned-fused-for qwen3-0.6b" in settings.tuned_skip_reason("qwen3-0.6b")
    assert settings.to_dict()["tuned_fused_for"] == ["qwen3-1.7b"]


def test_transformers_rows_can_be_kept_to_some_presets(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--presets", "qwen3-0.6b", "--transformers-for", "qwen3-8b"])
    assert "--transformers-for names qwen3-8b, which this run does not measure" in capsys.readouterr().err
    with pytest.raises(ValueError, match="transformers_for names qwen3-8b"):
        make_settings(["qwen3-0.6b"], [1], device="cpu", transformers_for=["qwen3-8b"])
    settings = make_settings(["qwen3-0.6b", "qwen3-1.7b"], [1], device="cpu", transformers_for=["qwen3-0.6b"])
    assert settings.transformers_skip_reason("qwen3-0.6b") == ""
    assert settings.transformers_skip_reason("qwen3-1.7b") == "skipped (--transformers-for qwen3-0.6b)"
    assert settings.to_dict()["transformers_for"] == ["qwen3-0.6b"]


def _stopped_after_first_preset(tmp_path):
    """A run of TINY then UNTIED, kept beside out as if its process had ended after TINY; (out, run)."""
    out = tmp_path / "bench.json"
    whole = run_bench([TINY, UNTIED], [1], 8, repeats=1, warmup=0, device="cpu", progress=False,
                      skip_transformers=True, skip_fused=True)
    stopped = Run.from_dict(whole.to_dict())
    stopped.rows = [r for r in stopped.rows if r.preset == "tiny"]
    stopped.floors = [f for f in stopped.floors if f.preset == "tiny"]
    stopped.facts["limits"].pop("untied")
    stopped.facts["partial"] = True
    stopped.save(partial_path(out))
    return out, stopped


def _same_bandwidths(run, scale=1.0):
    from dataclasses import replace as copy_with

    from floorlab.core.bandwidth import Bandwidths

    kept = Bandwidths(copy=copy_with(run.bandwidths.copy, gbps=run.bandwidths.copy.gbps * scale),
                      read=copy_with(run.bandwidths.read, gbps=run.bandwidths.read.gbps * scale))
    return lambda *args, **kwargs: kept


RESUME = dict(repeats=1, warmup=0, device="cpu", progress=False, skip_transformers=True, skip_fused=True)


def test_a_resumed_run_keeps_the_finished_presets_and_measures_the_rest(tmp_path, monkeypatch):
    out, stopped = _stopped_after_first_preset(tmp_path)
    monkeypatch.setattr("floorlab.tools.bench.run.measure_bandwidths", _same_bandwidths(stopped, 1.01))
    run = run_bench([TINY, UNTIED], [1], 8, save_to=out, resume_from=Run.load(partial_path(out)), **RESUME)
    assert run.facts["partial"] is False and Run.load(out).facts["partial"] is False
    assert not partial_path(out).exists()
    assert [r.to_dict() for r in run.rows if r.preset == "tiny"] == [r.to_dict() for r in stopped.rows]
    assert [r.path for r in run.rows if r.preset == "untied"] == list(PATHS)
    assert [(f.preset, f.batch) for f in run.floors] == [("tiny", 1), ("untied", 1)]
    assert run.bandwidths.to_dict() == stopped.bandwidths.to_dict()  # every floor over the first run's
    assert run.stamp == stopped.stamp and set(run.facts["limits"]) == {"tiny", "untied"}
    (resumed,) = run.facts["resumed"]
    assert resumed["kept"] == ["tiny"]
    assert resumed["bandwidths_gbps"]["read"] == pytest.approx(stopped.bandwidths.read.gbps * 1.01)
    assert "resumed " in format_table(run) and "keeping tiny (measured there: copy" in format_table(run)


@pytest.mark.parametrize("change, message", [
    ("complete", "complete, so there is nothing to resume"),
    ("settings", "other settings (repeats: 1 there, 2 here)"),
    ("device", "not on this"),
    ("bandwidth", "more than 3% apart"),
    ("bandwidth", "otherwise run again without --resume to measure every preset over this card's bandwidth"),
])
def test_a_resume_that_cannot_hold_is_refused_and_leaves_the_file_alone(change, message, tmp_path,
                                                                       monkeypatch):
    out, stopped = _stopped_after_first_preset(tmp_path)
    previous = Run.load(partial_path(out))
    kwargs = dict(RESUME)
    if change == "complete":
        previous.facts["partial"] = False
    elif change == "settings":
        kwargs["repeats"] = 2
    elif change == "device":
        previous.device = replace(previous.device, name="another card")
    monkeypatch.setattr("floorlab.tools.bench.run.measure_bandwidths",
                        _same_bandwidths(stopped, 1.5 if change == "bandwidth" else 1.0))
    before = partial_path(out).read_bytes()
    with pytest.raises(ValueError, match=re.escape(message)):
        run_bench([TINY, UNTIED], [1], 8, save_to=out, resume_from=previous, **kwargs)
    assert partial_path(out).read_bytes() == before and not out.exists()


def test_cli_resume_without_a_run_says_how_to_start_one(tmp_path):
    from floorlab.tools.bench.cli import main

    with pytest.raises(SystemExit, match="no partial bench run at .*start one without --resume"):
        main(["--resume", "--out", str(tmp_path / "none.json"), "--presets", "qwen3-0.6b"])


@pytest.mark.parametrize("card_gb, expected", [(16, ("qwen3-0.6b",)), (141, ("qwen3-0.6b", "qwen3-8b"))])
def test_the_default_presets_leave_out_a_model_the_card_cannot_hold(card_gb, expected, monkeypatch, capsys):
    from types import SimpleNamespace

    from floorlab.tools.bench.settings import default_presets

    card = SimpleNamespace(total_memory=card_gb * 10**9)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: card)
    assert default_presets(torch.device("cuda", 0), (1, 8)) == expected
    said = capsys.readouterr().out
    assert ("leaving qwen3-8b out" in said) == (len(expected) == 1)
