"""The bench on a tiny shape: every row has its keys, absent rows say why, the CLI refuses bad input."""
import json
from pathlib import Path

import pytest
import torch

from floorlab import bench
from floorlab.results import load_json, save_json
from floorlab.shapes import PRESETS, Qwen3Shape

TINY = Qwen3Shape(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
                  head_dim=16, vocab_size=256, tie_word_embeddings=True, name="tiny")


@pytest.fixture(scope="module")
def cpu_result():
    return bench.run_bench([TINY], [1], 8, repeats=2, warmup=1, device="cpu", progress=False)


def test_every_path_has_a_row_with_every_key(cpu_result):
    rows = cpu_result["rows"]
    assert sorted(r["path"] for r in rows) == sorted(bench.PATHS)
    for row in rows:
        assert set(bench.ROW_KEYS) <= set(row)
        assert row["preset"] == "tiny" and row["batch"] == 1 and row["context"] == 8
        assert row["status"] in ("measured", "absent", "failed")


def test_cpu_measures_eager_rows(cpu_result):
    measured = {r["path"]: r for r in cpu_result["rows"] if r["status"] == "measured"}
    assert set(measured) == {"plain eager", "hf eager"}
    for row in measured.values():
        assert row["p10_ms"] <= row["median_ms"] <= row["p90_ms"]
        assert row["x_floor"] == pytest.approx(row["median_ms"] / cpu_result["configs"][0]["floor_ms"])
        assert row["achieved_gbps"] > 0
        assert row["kernels"] > 0
        assert row["kernels_per_layer"] == pytest.approx(row["kernels"] / TINY.num_layers)


def test_cpu_says_why_graph_rows_are_absent(cpu_result):
    absent = {r["path"]: r["note"] for r in cpu_result["rows"] if r["status"] == "absent"}
    for path in ("plain graph", "fused graph", "hf graph", "hf compile"):
        assert bench.NO_GRAPHS in absent[path]
    assert "CPU" in absent["fused eager"]
    table = bench.format_table(cpu_result)
    assert bench.NO_GRAPHS in table
    assert "targets:" in table


def test_floor_bandwidth_and_targets(cpu_result):
    config = cpu_result["configs"][0]
    copy_gbps = cpu_result["bandwidth"]["copy"]["gbps"]
    assert config["floor_ms"] == pytest.approx(config["bytes_per_step"] / (copy_gbps * 1e9) * 1e3)
    assert cpu_result["floor_bandwidth"] == "copy"
    assert len(cpu_result["targets"]) == len(bench.FLOOR_TARGETS) + len(bench.RACE_TARGETS)
    assert all(t["passed"] is None for t in cpu_result["targets"])  # no preset measured


def test_diagnose_and_parity(cpu_result):
    d = cpu_result["diagnose"]["tiny"]
    assert set(d["gemv"]) == {"qkv", "o_proj", "gate_up", "down", "lm_head"}
    assert d["largest_gemv"]["bytes"] == max(g["bytes"] for g in d["gemv"].values())
    assert d["gemv_only_ms"] > 0
    assert d["limits"]["path"] == "plain eager"
    parity = cpu_result["parity"]["tiny"]
    assert parity["plain_vs_hf"] <= parity["tolerance"]


def test_result_round_trips_through_json(cpu_result, tmp_path):
    path = save_json(cpu_result, tmp_path / "bench.json")
    loaded = load_json(path)
    assert loaded["rows"] == json.loads(json.dumps(cpu_result["rows"]))
    assert loaded["device"]["kind"] == "cpu"


def test_skip_flags_leave_rows_absent_and_json_is_saved(tmp_path):
    out = tmp_path / "bench.json"
    result = bench.run_bench([TINY], [2], 4, repeats=1, warmup=0, device="cpu", progress=False,
                             skip_transformers=True, skip_fused=True, save_to=out)
    notes = {r["path"]: r["note"] for r in result["rows"]}
    assert "--skip-transformers" in notes["hf eager"]
    assert "--skip-fused" in notes["fused eager"]
    assert result["parity"] == {}
    saved = load_json(out)
    assert saved["partial"] is False
    assert len(saved["rows"]) == len(bench.PATHS)
    assert "bandwidth: copy" in saved["stage_s"]


def test_evaluate_targets_pass_and_fail():
    def row(path, ms, x_floor, preset="qwen3-0.6b"):
        return {"path": path, "preset": preset, "batch": 1, "status": "measured",
                "median_ms": ms, "x_floor": x_floor}

    rows = [row("fused graph", 0.5, 1.8), row("plain graph", 1.3, 4.6),
            row("hf graph", 5.0, 18.0), row("hf compile", 1.0, 3.5),
            row("fused graph", 4.0, 1.3, preset="qwen3-8b")]
    verdicts = {t["target"]: t["passed"] for t in bench.evaluate_targets(rows)}
    assert verdicts["qwen3-0.6b b1: fused graph <= 2.0x the floor"] is True
    assert verdicts["qwen3-0.6b b1: plain graph <= 4.0x the floor"] is False
    assert verdicts["qwen3-8b b1: fused graph <= 1.25x the floor"] is False
    assert verdicts["qwen3-0.6b b1: fused graph faster than hf compile"] is True
    assert verdicts["qwen3-0.6b b1: plain graph faster than hf compile"] is False
    assert verdicts["qwen3-0.6b b1: plain graph faster than hf graph"] is True


def test_device_slug_and_default_path():
    assert bench.device_slug({"kind": "cuda", "name": "NVIDIA H200"}) == "nvidia-h200"
    assert bench.device_slug({"kind": "cpu", "name": "AMD EPYC 7B13"}) == "cpu-amd-epyc-7b13"
    path = bench.default_out_path({"kind": "cuda", "name": "NVIDIA H200"})
    assert path.name == "bench-nvidia-h200.json" and path.parent.name == "figures"


def test_cli_parses_lists():
    args = bench.parse_args(["--presets", "qwen3-0.6b,qwen3-8b", "--batches", "8", "1",
                             "--context", "16", "--repeats", "3", "--skip-fused"])
    assert args.presets == ["qwen3-0.6b", "qwen3-8b"]
    assert args.batches == [1, 8]
    assert (args.context, args.repeats, args.skip_fused, args.skip_transformers) == (16, 3, True, False)


def test_cli_unknown_preset_lists_known_ones(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(["--presets", "qwen3-9b"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "qwen3-9b" in err
    assert all(name in err for name in PRESETS)


@pytest.mark.parametrize("argv, message", [
    (["--batches", "0"], "from 1 to 16"),
    (["--batches", "17"], "from 1 to 16"),
    (["--batches", "eight"], "whole numbers"),
    (["--context", "0"], "context must be"),
    (["--context", "many"], "context must be a whole number"),
    (["--repeats", "0"], "repeats must be"),
])
def test_cli_bad_values_say_how_to_fix(argv, message, capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(argv)
    assert message in capsys.readouterr().err


def test_cli_out_folder_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(["--out", str(tmp_path)])
    assert "is a folder" in capsys.readouterr().err


@pytest.mark.parametrize("kwargs", [{"batches": [0]}, {"context": 0}, {"repeats": 0}])
def test_run_bench_refuses_bad_settings(kwargs):
    settings = {"presets": [TINY], "batches": [1], "context": 4, "device": "cpu", "progress": False}
    settings.update(kwargs)
    with pytest.raises(ValueError):
        bench.run_bench(**settings)


@pytest.mark.gpu
def test_gpu_bench_small_shape_measures_every_path():
    small = Qwen3Shape(1024, 3072, 4, 16, 8, 128, 151936, True, name="small")
    result = bench.run_bench([small], [1], 16, repeats=5, warmup=2, progress=False)
    rows = {r["path"]: r for r in result["rows"]}
    failed = {p: r["note"] for p, r in rows.items() if r["status"] != "measured"}
    assert not failed
    assert rows["plain graph"]["bit_identical"] is True
    assert rows["fused graph"]["bit_identical"] is True
    assert rows["fused graph"]["median_ms"] < rows["plain eager"]["median_ms"]
    assert result["parity"]["small"]["passed"]
    assert Path(bench.default_out_path(result["device"])).suffix == ".json"
    assert torch.cuda.is_available()
