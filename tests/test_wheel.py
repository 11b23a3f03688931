"""The package works installed outside the repository: a built wheel carries the reference runs and
figures, declares the packages it needs (and the book's in its [book] extra), and a reader's figures
land in the working folder, not in site-packages."""
import os
import re
import shutil
import subprocess
import sys
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = "below-the-floor.ipynb"
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
RUNTIME = {"torch", "transformers", "safetensors", "matplotlib", "tqdm"}
BOOK = {"jupyter-book", "myst-nb", "nbval", "jupyterlab", "jupyterlab-myst", "ipywidgets"}

CHECK = """
import pathlib, sys
import floorlab
from floorlab.core import paths
from floorlab.core.reference import reference_figure, reference_run
site = pathlib.Path(sys.argv[1]).resolve()
assert pathlib.Path(floorlab.__file__).resolve().is_relative_to(site), floorlab.__file__
assert reference_run('h200-below-the-floor').kind == 'chapter:below-the-floor'
assert reference_figure('h200-below-the-floor-stacked-bar').stat().st_size > 0
assert paths.source_checkout() is None
assert paths.FIGURES_DIR == pathlib.Path.cwd() / 'figures', paths.FIGURES_DIR
assert not paths.FIGURES_DIR.resolve().is_relative_to(site)
print('ok')
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel built from lib/ and pyproject.toml, from a copy so the checkout gets no build/ folder."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    source = tmp_path / "source"
    shutil.copytree(ROOT / "lib", source / "lib",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(ROOT / "pyproject.toml", source)
    wheels = tmp_path / "wheels"
    subprocess.run(PIP + ["wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), "."],
                   cwd=source, check=True, timeout=120)
    [built] = wheels.glob("floorlab-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """(site, env): the built wheel installed into site, outside the repository."""
    site = tmp_path_factory.mktemp("site")
    subprocess.run(PIP + ["install", "--no-deps", "--target", str(site), str(wheel)], check=True,
                   timeout=120)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FLOORLAB_FIGURES")}
    # the wheel first; keep other entries (a machine may bring nbval that way), not the checkout's lib
    kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if p and Path(p).resolve() != (ROOT / "lib").resolve()]
    env["PYTHONPATH"] = os.pathsep.join([str(site), *kept])
    return site, env


def _metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return Parser().parsestr(archive.read(name).decode())


def _name(requirement: str) -> str:
    """The normalised project name a Requires-Dist line starts with ("Jupyter_Book>=1" -> "jupyter-book")."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group()).lower()


def test_the_wheel_declares_what_floorlab_and_the_book_need(wheel):
    """pip install floorlab brings the runtime packages; floorlab[book] adds what builds and reads the book."""
    metadata = _metadata(wheel)
    requires = metadata.get_all("Requires-Dist") or []
    runtime = {_name(r) for r in requires if "extra ==" not in r}
    assert RUNTIME <= runtime, f"missing from dependencies in pyproject.toml: {sorted(RUNTIME - runtime)}"
    assert "book" in (metadata.get_all("Provides-Extra") or []), "pyproject.toml declares no [book] extra"
    book = {_name(r) for r in requires if re.search(r"""extra\s*==\s*["']book["']""", r)}
    assert BOOK <= book, f"missing from the book extra in pyproject.toml: {sorted(BOOK - book)}"
    jupyter_book = next(r for r in requires if _name(r) == "jupyter-book")
    assert "<2" in jupyter_book.replace(" ", ""), f"the book is built with Jupyter Book 1.x: {jupyter_book}"


def test_an_installed_wheel_finds_its_reference_data(installed, tmp_path):
    site, env = installed
    done = subprocess.run([sys.executable, "-c", CHECK, str(site)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"


def test_a_chapter_runs_from_another_folder_with_the_installed_wheel(installed, tmp_path):
    """The first chapter, copied alone into an empty folder, runs top to bottom under nbval
    against the installed wheel, and writes its figures into that folder's figures/."""
    pytest.importorskip("nbval", reason="nbval is not installed here")
    site, env = installed
    shutil.copy(ROOT / "chapters" / CHAPTER, tmp_path)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # not the checkout's settings
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
         "--nbval-current-env", CHAPTER],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert (tmp_path / "figures").is_dir(), "the chapter wrote no figures/ beside itself"
    written = [p for p in (site / "floorlab").rglob("*") if p.is_file() and p.suffix in (".png", ".json")
               and "reference" not in p.parts]
    assert not written, f"the chapter wrote into the installed package: {written[:3]}"


def test_the_checkout_keeps_readers_figures_in_figures():
    from floorlab.core import paths

    assert paths.source_checkout() == ROOT
    assert (ROOT / "figures" / "README.md").is_file()
    assert not paths.source_checkout(Path("/tmp/site-packages/floorlab"))
