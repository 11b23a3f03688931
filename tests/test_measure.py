"""`python -m floorlab measure` on the CPU, on a tiny shape: one Run, its figures, a submitted copy
with a unique file-safe name, the table, and clear errors for bad arguments. No timed assertions."""
import contextlib
import io
import re
import subprocess
import sys

import pytest
import torch

from floorlab.core.reference import reference_run
from floorlab.core.runs import Run
from floorlab.core.shapes import Qwen3Shape
from floorlab.tools import card
from floorlab.tools.bench.engine import NO_GRAPHS
from floorlab.tools.cli import main

TINY = Qwen3Shape(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
                  head_dim=16, vocab_size=256, tie_word_embeddings=True, name="tiny")
SAFE_NAME = re.compile(r"^[a-z0-9-]+\.json$")


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """(stdout, out folder, shared folder) of one measure --submit run on the tiny shape."""
    base = tmp_path_factory.mktemp("measure")
    out, shared = base / "out", base / "shared"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(card, "PRESET", TINY)
        patch.setenv("MPLBACKEND", "Agg")
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            code = main(["measure", "--device", "cpu", "--repeats", "2", "--warmup", "0",
                         "--out", str(out), "--submit", str(shared), "--name", "Ann B."])
    assert code == 0
    return text.getvalue(), out, shared


def test_measure_writes_one_run_and_both_figures(measured):
    _, out, _ = measured
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [card.JSON_NAME, card.BAR_NAME, card.TIMELINE_NAME])
    run = Run.load(out / card.JSON_NAME)
    assert run.kind == "measure" and not run.on_gpu
    floor = run.floor()
    assert (floor.preset, floor.batch, floor.visible_tokens) == ("tiny", 1, card.PROMPT_TOKENS + 1)
    assert floor.bandwidth_gbps == run.bandwidths.floor_gbps
    eager = run.row("eager")
    assert eager.x_floor == pytest.approx(eager.median_ms / floor.floor_ms)
    assert eager.kernels == run.launches["eager"].kernels > 0
    assert "eager" in run.timelines
    assert run.facts["best"] == "eager" and run.facts["elapsed_s"] > 0
    assert set(run.facts["stage_s"]) >= {"bandwidth", "model", "eager decode", "launches"}
    absent = {r.path: r for r in run.rows if not r.measured}
    assert NO_GRAPHS in absent["graph replay"].note
    assert set(absent) == {"graph replay", *card.FUSED_PATHS}


def test_measure_prints_each_path_against_the_floor(measured):
    text, _, _ = measured
    assert "x floor" in text and "p10-p90" in text
    assert re.search(r"^eager\s+\d+\.\d{3}\s+\d", text, re.M)
    assert "absent: " + NO_GRAPHS in text


def test_submit_copies_the_run_under_a_unique_safe_name(measured, tmp_path):
    _, out, shared = measured
    [submitted] = list(shared.iterdir())
    assert SAFE_NAME.match(submitted.name) and "ann-b" in submitted.name
    assert Run.load(submitted).to_dict() == Run.load(out / card.JSON_NAME).to_dict()
    again = {card.submit_run(out / card.JSON_NAME, tmp_path).name for _ in range(3)}
    assert len(again) == 3 and all(SAFE_NAME.match(n) for n in again)


def test_the_table_reads_a_stored_chapter_run():
    text = card.format_card(reference_run("h200-below-the-floor"))
    assert "graph replay" in text and "x floor" in text and "best path   graph replay" in text


@pytest.mark.parametrize("argv, says", [
    (["measure", "--repeats", "0"], "--repeats must be a whole number >= 1, got 0"),
    (["measure", "--warmup", "x"], "--warmup must be a whole number"),
    (["measure", "--device", "tpu"], "invalid choice"),
    ([], "name a command"),
    (["launch"], "invalid choice"),
])
def test_bad_arguments_say_how_to_fix_them(argv, says, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert says in capsys.readouterr().err


def test_a_file_where_a_folder_belongs_is_refused(tmp_path, capsys):
    afile = tmp_path / "taken"
    afile.write_text("")
    for flag in ("--out", "--submit"):
        with pytest.raises(SystemExit):
            main(["measure", flag, str(afile)])
        assert f"{flag} {afile} is a file" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_asking_for_cuda_without_a_gpu_says_so(capsys):
    with pytest.raises(SystemExit):
        main(["measure", "--device", "cuda"])
    assert "no CUDA GPU is visible" in capsys.readouterr().err


def test_bench_is_still_reachable_both_ways(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "--repeats", "0"])
    assert exit_.value.code == 2 and "repeats must be a whole number >= 1" in capsys.readouterr().err
    done = subprocess.run([sys.executable, "-m", "floorlab.tools.bench", "--help"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "--skip-fused" in done.stdout
