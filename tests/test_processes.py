"""Processes and threads: a SIGINT to the process that started the ranks ends the ranks too; a runner
stepped from a second thread while another is inside a step refuses."""
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "lib"
WAIT_S = 300  # a shared machine: starting Python with torch in three processes can take a minute

SLEEPER = '''
import os, time
from pathlib import Path

def sleeper(rank, ranks, folder):
    Path(folder, f"rank{rank}.pid").write_text(str(os.getpid()))
    time.sleep(3600)
'''


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie left for its parent to reap has ended too
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_sigint_to_the_starter_ends_the_ranks(tmp_path):
    (tmp_path / "sleepers.py").write_text(SLEEPER)
    script = textwrap.dedent(f"""
        import sys
        from sleepers import sleeper
        from floorlab.engine.ranks import run_ranks
        try:
            run_ranks(sleeper, 2, device="cpu", args=({str(tmp_path)!r},))
        except KeyboardInterrupt:
            sys.exit(130)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(LIB)]), CUDA_VISIBLE_DEVICES="")
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = [tmp_path / f"rank{r}.pid" for r in range(2)]
    deadline = time.monotonic() + WAIT_S
    while not all(p.is_file() and p.read_text() for p in pids):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the ranks never started: {proc.communicate()[1][-2000:]}")
        time.sleep(0.1)
    ranks = [int(p.read_text()) for p in pids]
    os.kill(proc.pid, signal.SIGINT)  # the starter alone, not its process group
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        for pid in ranks:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        pytest.fail("the starter did not end after SIGINT")
    assert proc.returncode == 130, proc.stderr.read()[-2000:]
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in ranks) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in ranks if _alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"ranks {left} outlived the process that started them"


# --- a runner stepped from two threads -------------------------------------------------------------

def _stand_in(guard: bool = True, debug: bool = False):
    import torch

    from floorlab.core.shapes import Qwen3Shape
    from floorlab.engine.model import build_model, prefill_random
    from floorlab.studies.shared_buffers import static_runner

    shape = Qwen3Shape(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=1,
                       head_dim=16, vocab_size=64, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = build_model(shape, dtype=torch.float32, max_batch=2, max_context=16)
    runner = static_runner(model, (1,), debug=debug, guard=guard)
    _, tokens, positions = prefill_random(model, 1, 4)
    return runner, (tokens, positions)


@pytest.mark.parametrize("debug", [False, True])
def test_a_second_thread_inside_a_step_is_refused_by_default(debug):
    import threading

    from floorlab.engine.buckets import SharedBufferError

    runner, request = _stand_in(guard=True, debug=debug)
    inside, release, errors = threading.Event(), threading.Event(), []
    load = runner._load_inputs

    def paused(*args):
        load(*args)
        if threading.current_thread().name == "first":
            inside.set()
            release.wait(60)

    runner._load_inputs = paused

    def first():
        runner.step(*request)

    def second():
        inside.wait(60)
        try:
            runner.step(*request)
        except SharedBufferError as err:
            errors.append(str(err))
        finally:
            release.set()

    threads = [threading.Thread(target=first, name="first"), threading.Thread(target=second, name="second")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(errors) == 1 and ("own runner" in errors[0])
    runner.step(*request)  # free again once the first step ended


def test_a_refused_or_failed_step_lets_the_runner_go(monkeypatch):
    runner, request = _stand_in()
    tokens, positions = request
    with pytest.raises(ValueError):
        runner.step(tokens.float(), positions)  # refused before the guard
    monkeypatch.setattr(runner, "_run_bucket", lambda *a: (_ for _ in ()).throw(RuntimeError("boom")))
    with pytest.raises(RuntimeError, match="boom"):
        runner.step(*request)
    monkeypatch.undo()
    runner.step(*request)
