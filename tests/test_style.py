"""The library and the tests pass ruff's checks as configured in pyproject.toml."""
import ast
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


def _bound_names(init: Path, package: str) -> set[str]:
    """Names an __init__.py binds at its top level to anything but one of its own submodules."""
    bound = set()
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom):
            own = (node.level == 1 and not node.module) or node.module == package
            bound.update(a.asname or a.name for a in node.names if not own)
    return bound


def test_no_subpackage_exports_a_name_that_one_of_its_modules_would_replace():
    """A function kernels.gemv beside a module kernels/gemv.py turns into the module once anything imports it."""
    import floorlab

    root = Path(floorlab.__file__).parent
    for init in root.rglob("*/__init__.py"):
        package = ".".join(("floorlab",) + init.parent.relative_to(root).parts)
        stems = {p.stem for p in init.parent.glob("*.py") if not p.stem.startswith("_")}
        clashes = sorted(stems & _bound_names(init, package))
        assert not clashes, (f"{package} exports {clashes}, which importing the module of the same name "
                             "would replace; rename one of them")


def test_the_export_check_sees_a_function_named_after_a_module(tmp_path):
    init = tmp_path / "__init__.py"
    init.write_text("from . import gemv as kept\nfrom .gemv import gemv\ndef step(): pass\nlimit = 3\n")
    assert _bound_names(init, "floorlab.engine.kernels") == {"gemv", "step", "limit"}
