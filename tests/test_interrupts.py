"""Nothing measured is lost: JSON is written atomically, an unwritable --out or --submit is refused
before anything is measured, and a bench or measure stopped by a real Ctrl-C (SIGINT) leaves the
finished run it was to replace as it was, the bench keeping what it finished in a partial beside it."""
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from floorlab.core import paths
from floorlab.core.device import describe_device
from floorlab.core.files import load_json, save_json
from floorlab.core.runs import Run
from floorlab.core.settings import RunSettings
from floorlab.core.shapes import Qwen3Shape
from floorlab.tools import card
from floorlab.tools.bench import cli as bench_cli
from floorlab.tools.bench import run_bench
from floorlab.tools.bench.run import partial_path
from floorlab.tools.bench.settings import PATHS, make_settings
from floorlab.tools.cli import main

LIB = Path(__file__).resolve().parents[1] / "lib"
TINY = Qwen3Shape(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
                  head_dim=16, vocab_size=256, tie_word_embeddings=True, name="tiny")
# big enough that its rows take seconds on a CPU, so a stop sent while it runs lands inside it
MID = Qwen3Shape(hidden_size=256, intermediate_size=768, num_layers=4, num_heads=4, num_kv_heads=2,
                 head_dim=64, vocab_size=4096, tie_word_embeddings=True, name="mid")
SHAPES = ("from floorlab.core.shapes import PRESETS, Qwen3Shape\n"
          f"TINY, MID = {TINY!r}, {MID!r}\n")
BENCH = SHAPES + ("PRESETS['tiny'], PRESETS['mid'] = TINY, MID\n"
                  "import sys\nfrom floorlab.tools.bench.cli import main\nsys.exit(main(sys.argv[1:]))\n")
# the bench resumed with the bandwidths of the partial run in argv[1]
RESUME = SHAPES + ("PRESETS['tiny'], PRESETS['mid'] = TINY, MID\n"
                   "import sys\nfrom floorlab.core.runs import Run\nfrom floorlab.tools.bench import run\n"
                   "kept = Run.load(sys.argv[1])\nrun.measure_bandwidths = lambda *a, **k: kept.bandwidths\n"
                   "from floorlab.tools.bench.cli import main\nsys.exit(main(sys.argv[2:]))\n")
MEASURE = SHAPES + ("from floorlab.tools import card\ncard.PRESET = MID\n"
                    "import sys\nfrom floorlab.tools.cli import main\nsys.exit(main(sys.argv[1:]))\n")
BENCH_FLAGS = ["--presets", "tiny", "mid", "--batches", "1", "--context", "1", "--repeats", "1",
               "--skip-transformers", "--skip-fused"]
WAIT_S = 300  # this machine is shared: starting Python with torch alone can take a minute


# --- atomic writes -------------------------------------------------------------------------------

def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = save_json({"rows": [1, 2, 3]}, tmp_path / "run.json")
    before = path.read_bytes()

    def disk_full(handle):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("floorlab.core.files.os.fsync", disk_full)  # the bytes are written, not yet synced
    with pytest.raises(OSError, match="No space left"):
        save_json({"rows": [4, 5, 6]}, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_an_unstorable_object_leaves_the_old_file_and_no_temporary(tmp_path):
    path = save_json({"floor_ms": 3.13}, tmp_path / "run.json")
    before = path.read_bytes()
    with pytest.raises(TypeError, match="convert it"):
        save_json({"floor_ms": 3.2, "z": object()}, path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_an_atomic_write_keeps_the_usual_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        path = save_json({"a": 1}, tmp_path / "shared.json")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644  # others can read a submitted run, as with a plain write


def test_a_cut_off_json_file_says_so(tmp_path):
    path = tmp_path / "cut.json"
    path.write_text('{"rows": [1,')
    with pytest.raises(ValueError, match="holds no complete JSON"):
        load_json(path)


def test_submit_writes_through_save_json(tmp_path, monkeypatch):
    source = save_json(Run.load(Path(paths.REFERENCE_DIR) / "h200-below-the-floor.json").to_dict(),
                       tmp_path / "run.json")
    written = []
    monkeypatch.setattr(card, "save_json", lambda obj, path: written.append(path) or save_json(obj, path))
    target = card.submit_run(source, tmp_path / "shared", "Ann")
    assert written == [target] and load_json(target) == load_json(source)


# --- unwritable folders refused before anything is measured ---------------------------------------

@pytest.fixture
def never_measure(monkeypatch):
    def measured(*args, **kwargs):
        raise AssertionError("measured before the folders were checked")

    monkeypatch.setattr(card, "measure_card", measured)
    monkeypatch.setattr(bench_cli, "run_bench", measured)


def _unmakeable(tmp_path) -> Path:
    """A folder nobody can make, root included: its parent is a regular file."""
    (tmp_path / "afile").write_text("")
    return tmp_path / "afile" / "sub"


@pytest.mark.parametrize("flag", ["--out", "--submit"])
def test_measure_refuses_a_folder_it_cannot_make_before_measuring(flag, tmp_path, never_measure, capsys):
    folder = _unmakeable(tmp_path)
    argv = ["measure", "--device", "cpu", flag, str(folder)]
    if flag == "--submit":
        argv += ["--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"{flag} {folder}: it cannot be written" in err and "nothing was measured" in err
    assert f"Pass {flag} with a folder you can write to" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_measure_refuses_a_read_only_folder_before_measuring(tmp_path, never_measure, capsys):
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(SystemExit) as exit_:
            main(["measure", "--device", "cpu", "--out", str(folder)])
    finally:
        folder.chmod(0o755)
    assert exit_.value.code == 2 and "PermissionError" in capsys.readouterr().err


def test_measure_makes_its_folders_before_measuring(tmp_path, never_measure):
    out, shared = tmp_path / "new" / "out", tmp_path / "new" / "shared"
    with pytest.raises(AssertionError, match="measured before"):
        main(["measure", "--device", "cpu", "--out", str(out), "--submit", str(shared)])
    assert out.is_dir() and shared.is_dir()
    assert not list(out.iterdir()) and not list(shared.iterdir())  # the write test leaves nothing


def test_bench_refuses_an_out_it_cannot_write_before_measuring(tmp_path, never_measure, capsys):
    out = _unmakeable(tmp_path) / "bench.json"
    with pytest.raises(SystemExit) as exit_:
        bench_cli.main(["--presets", "qwen3-0.6b", "--out", str(out)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"--out {out}: the folder {out.parent} will not take the run" in err
    assert "pass --out with a path in a folder you can write to" in err


# --- the bench keeps a partial beside --out ----------------------------------------------------------

def test_a_complete_run_at_out_cannot_be_resumed_and_says_what_to_do(tmp_path):
    out = tmp_path / "bench.json"
    shutil.copyfile(Path(paths.REFERENCE_DIR) / "h200-bench.json", out)
    with pytest.raises(SystemExit, match="is complete .* run again without --resume .* or pass another --out"):
        bench_cli.main(["--resume", "--out", str(out), "--presets", "qwen3-0.6b"])


def test_resume_reads_the_partial_beside_out_and_else_an_older_partial_at_out(tmp_path, monkeypatch, capsys):
    out, seen = tmp_path / "bench.json", []
    older = Run.load(Path(paths.REFERENCE_DIR) / "h200-bench.json")
    older.facts["partial"] = True
    older.save(out)  # where runs were kept before the partial moved beside out

    def stopped(*args, resume_from=None, **kwargs):
        seen.append(resume_from)
        raise KeyboardInterrupt

    monkeypatch.setattr(bench_cli, "run_bench", stopped)
    argv = ["--resume", "--out", str(out), "--presets", "qwen3-0.6b"]
    assert bench_cli.main(argv) == 130
    assert "nothing was measured to keep" in capsys.readouterr().err
    beside = Run.from_dict(older.to_dict())
    beside.stamp = replace(beside.stamp, date="2030-01-01T00:00:00+00:00")
    beside.save(partial_path(out))
    assert bench_cli.main(argv) == 130
    assert [run.stamp.date for run in seen] == [older.stamp.date, "2030-01-01T00:00:00+00:00"]
    assert f"kept at {partial_path(out)}" in capsys.readouterr().err


def test_a_partial_with_nothing_finished_resumes_without_comparing_bandwidths(tmp_path, monkeypatch):
    """Stopped in its first preset, a run keeps no floor, so another bandwidth here takes nothing apart."""
    out = tmp_path / "bench.json"
    settings = dict(repeats=1, warmup=0, device="cpu", skip_transformers=True, skip_fused=True)
    empty = Run.load(Path(paths.REFERENCE_DIR) / "h200-bench.json")  # an H200's bandwidth, far from a CPU's
    empty.settings = RunSettings.from_dict(make_settings([TINY], [1], 8, **settings).to_dict())
    empty.device = describe_device("cpu")
    empty.rows, empty.floors, empty.facts = [], [], {"partial": True, "error": "KeyboardInterrupt"}
    run = run_bench([TINY], [1], 8, save_to=out, resume_from=empty, progress=False, **settings)
    assert run.facts["partial"] is False and "resumed" not in run.facts
    assert run.bandwidths.floor_gbps != empty.bandwidths.floor_gbps  # the floors stand on this run's
    assert Run.load(out).facts["partial"] is False and not partial_path(out).exists()


# --- a real Ctrl-C --------------------------------------------------------------------------------

def _env() -> dict:
    """The environment of the scripts these tests run: the book's library, on the CPU alone."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(LIB), os.environ.get("PYTHONPATH", "")]),
                TRITON_INTERPRET="1", MPLBACKEND="Agg", CUDA_VISIBLE_DEVICES="")


def _start(script: str, argv: list[str]):
    """A Python process running script with argv, and a queue of its stdout lines."""
    proc = subprocess.Popen([sys.executable, "-c", script, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env())
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout] and None, daemon=True).start()
    return proc, lines


def _stop(proc) -> str:
    """Send SIGINT, as Ctrl-C does, and return the process's stderr once it has ended."""
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return err


def _wait_for(condition, proc, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"the process ended (exit {proc.returncode}) before {what}: {proc.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {what} after {WAIT_S} s")
        time.sleep(0.05)


def test_a_stopped_bench_keeps_the_finished_run_and_a_resumable_partial(tmp_path):
    out = tmp_path / "bench.json"
    shutil.copyfile(Path(paths.REFERENCE_DIR) / "h200-bench.json", out)  # an earlier, complete run
    before = out.read_bytes()
    partial = partial_path(out)
    proc, _ = _start(BENCH, [*BENCH_FLAGS, "--out", str(out)])
    _wait_for(partial.is_file, proc, "a partial run (tiny finished)")  # now measuring mid
    err = _stop(proc)
    assert proc.returncode == 130, err
    assert "stopped before the end" in err and f"kept at {partial}" in err and "--resume" in err
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([out.name, partial.name])  # no temporary
    kept = Run.load(partial)
    assert kept.facts["partial"] is True and "KeyboardInterrupt" in kept.facts["error"]
    assert [r.path for r in kept.rows] == list(PATHS) and {r.preset for r in kept.rows} == {"tiny"}

    # resumed where the stopped run measured (_start hides any GPU, so also on a CUDA machine);
    # this shared machine's bandwidth moves between processes, so the resume is handed the kept
    # bandwidths (the refusal of a drift is tested apart)
    resumed = subprocess.run([sys.executable, "-c", RESUME, str(partial), *BENCH_FLAGS, "--out", str(out),
                              "--resume"], capture_output=True, text=True, env=_env(), timeout=WAIT_S)
    assert resumed.returncode == 0, resumed.stderr
    done = Run.load(out)
    assert done.facts["partial"] is False and not partial.exists()
    assert [r.to_dict() for r in done.rows if r.preset == "tiny"] == [r.to_dict() for r in kept.rows]
    assert [r.path for r in done.rows if r.preset == "mid"] == list(PATHS)
    assert done.facts["resumed"][0]["kept"] == ["tiny"]


def test_a_stopped_measure_leaves_the_earlier_run_as_it_was(tmp_path):
    out = tmp_path / "out"
    earlier = save_json(load_json(Path(paths.REFERENCE_DIR) / "h200-below-the-floor.json"), out / card.JSON_NAME)
    before = earlier.read_bytes()
    proc, lines = _start(MEASURE, ["measure", "--device", "cpu", "--repeats", "1", "--warmup", "0",
                                   "--out", str(out)])
    said: list[str] = []

    def measuring() -> bool:
        while not lines.empty():
            said.append(lines.get())
        return any(line.startswith("measuring ") for line in said)

    _wait_for(measuring, proc, "the line that says measuring has begun")
    time.sleep(0.5)  # inside the bandwidth stage, which takes seconds on a CPU
    err = _stop(proc)
    assert proc.returncode == 130, err
    assert f"nothing was written, {out} is as it was" in err
    assert earlier.read_bytes() == before
    assert [p.name for p in out.iterdir()] == [card.JSON_NAME]  # no figure, no temporary
