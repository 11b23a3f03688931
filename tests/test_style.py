"""The library and the tests pass ruff's checks as configured in pyproject.toml."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed here; pip install -r requirements.txt brings it")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "lib", "tests"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
