"""A measurement is never lost: printed before it is written, kept in a named temporary folder when
its folder refuses it, every output checked before measuring, and a partial bench run never replaced
by one that holds less."""
from pathlib import Path

import pytest

from floorlab.core import paths
from floorlab.core.device import describe_device
from floorlab.core.files import KEPT_PREFIX
from floorlab.core.runs import Run
from floorlab.core.shapes import Qwen3Shape
from floorlab.tools import card, sweep
from floorlab.tools.bench import cli as bench_cli
from floorlab.tools.bench import run as bench_run
from floorlab.tools.bench.run import finished_presets, partial_path
from floorlab.tools.cli import main

TINY = Qwen3Shape(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
                  head_dim=16, vocab_size=256, tie_word_embeddings=True, name="tiny")
SETTINGS = dict(repeats=1, warmup=0, device="cpu", skip_transformers=True, skip_fused=True, progress=False)


def _stored_card() -> Run:
    return Run.load(Path(paths.REFERENCE_DIR) / "h200-below-the-floor.json")


@pytest.fixture
def never_measure(monkeypatch):
    def measured(*args, **kwargs):
        raise AssertionError("measured before the output was checked")

    monkeypatch.setattr(card, "measure_card", measured)
    monkeypatch.setattr(bench_cli, "run_bench", measured)
    monkeypatch.setattr(sweep, "run_sweep", measured)


def test_measure_out_naming_a_json_file_is_refused_and_no_folder_made(tmp_path, never_measure, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["measure", "--device", "cpu", "--out", str(tmp_path / "x.json")])
    assert exit_.value.code == 2 and "names a file" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("out", ["folder", "x.txt"])
def test_sweep_checks_out_before_sweeping(out, tmp_path, never_measure, capsys):
    (tmp_path / "folder").mkdir()
    with pytest.raises(SystemExit) as exit_:
        sweep.main(["--tiny", "--out", str(tmp_path / out)])
    assert exit_.value.code == 2 and "--out" in capsys.readouterr().err


def test_measure_prints_the_table_then_keeps_a_run_its_folder_refuses(tmp_path, monkeypatch, capsys):
    run = _stored_card()
    monkeypatch.setattr(card, "measure_card", lambda *a, **k: run)

    def full_disk(run, folder):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(card, "write_card", full_disk)
    out = tmp_path / "out"
    real = bench_run.save_or_keep.__globals__["write_or_keep"]

    def refuse_out(path, write):  # the folder refuses, the temporary folder takes it
        if Path(path).parent == out:
            return real(tmp_path / "afile" / "no" / Path(path).name, write)
        return real(path, write)

    (tmp_path / "afile").write_text("")
    monkeypatch.setitem(bench_run.save_or_keep.__globals__, "write_or_keep", refuse_out)
    assert main(["measure", "--device", "cpu", "--out", str(out)]) == 1
    said = capsys.readouterr()
    assert card.format_card(run).splitlines()[0] in said.out  # the table came first
    kept = [word.rstrip(":;,") for word in said.err.split() if KEPT_PREFIX in word]
    assert kept and Run.load(kept[0]).to_dict() == run.to_dict()
    Path(kept[0]).unlink()
    Path(kept[0]).parent.rmdir()


def _finished_partial(out: Path) -> bytes:
    """A partial bench run at partial_path(out) that finished the preset tiny; returns its bytes."""
    done = bench_run.run_bench([TINY], [1], 8, save_to=out.with_name("whole.json"), **SETTINGS)
    done.facts["partial"] = True
    done.save(partial_path(out))
    assert finished_presets(done) == ["tiny"]
    return partial_path(out).read_bytes()


def test_a_stop_over_a_saved_partial_keeps_its_finished_presets(tmp_path, monkeypatch, capsys):
    out = tmp_path / "bench.json"
    before = _finished_partial(out)

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(bench_run, "_measure_preset", stopped)
    with pytest.raises(KeyboardInterrupt):
        bench_run.run_bench([TINY], [1], 8, save_to=out, **SETTINGS)
    assert partial_path(out).read_bytes() == before

    monkeypatch.setattr(bench_cli, "run_bench", lambda *a, **k: stopped())
    monkeypatch.setattr(bench_cli, "describe_device", lambda *a: describe_device("cpu"))
    assert bench_cli.main(["--presets", "qwen3-0.6b", "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert f"the partial run kept at {partial_path(out)} holds tiny" in err  # what the disk holds


@pytest.mark.parametrize("text", ["[1, 2]", '{"kind": "bench", "facts": 3}', "{", '"run"', "null"])
def test_resume_with_a_malformed_partial_says_so(text, tmp_path):
    out = tmp_path / "bench.json"
    partial_path(out).write_text(text)
    with pytest.raises(SystemExit, match="--resume: .* holds no bench run this book can read"):
        bench_cli.main(["--resume", "--out", str(out), "--presets", "qwen3-0.6b"])
