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
    """`from floorlab import roofline` must give the module, not a function of the same name.

    The same holds in every subpackage: a function kernels.gemv and a module kernels/gemv.py
    would turn into the module as soon as anything imported it.
    """
    import importlib
    import types

    import floorlab

    root = Path(floorlab.__file__).parent
    for path in root.glob("*.py"):
        name = path.stem
        if name.startswith("_"):
            continue
        importlib.import_module(f"floorlab.{name}")
        assert isinstance(getattr(floorlab, name), types.ModuleType), (
            f"floorlab.{name} is {getattr(floorlab, name)!r}, not the module floorlab/{name}.py; "
            "rename what floorlab/__init__.py exports under that name")


def test_no_subpackage_exports_a_name_that_one_of_its_modules_would_replace():
    """A function kernels.gemv beside a module kernels/gemv.py turns into the module once anything imports it."""
    import floorlab

    root = Path(floorlab.__file__).parent
    for init in root.rglob("*/__init__.py"):
        package = ".".join(("floorlab",) + init.parent.relative_to(root).parts)
        stems = sorted(p.stem for p in init.parent.glob("*.py") if not p.stem.startswith("_"))
        probe = (f"import types, {package} as p; "
                 f"print([n for n in {stems!r} if n in vars(p) and not isinstance(vars(p)[n], types.ModuleType)])")
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip() == "[]", (
            f"{package} exports {done.stdout.strip()}, which importing the module of the same name would replace; "
            "rename one of them")
