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


def test_no_name_in_the_package_hides_one_of_its_modules():
    """`from floorlab import roofline` must give the module, not a function of the same name."""
    import importlib
    import types

    import floorlab

    package = Path(floorlab.__file__).parent
    for path in package.glob("*.py"):
        name = path.stem
        if name.startswith("_"):
            continue
        importlib.import_module(f"floorlab.{name}")
        assert isinstance(getattr(floorlab, name), types.ModuleType), (
            f"floorlab.{name} is {getattr(floorlab, name)!r}, not the module floorlab/{name}.py; "
            "rename what floorlab/__init__.py exports under that name")
