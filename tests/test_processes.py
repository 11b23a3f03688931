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
