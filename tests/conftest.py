"""Shared test setup.

Tests marked `gpu` skip on machines without CUDA. Without CUDA, Triton kernels can only run
in Triton's CPU interpreter, which must be on before the kernels are first loaded: so it is
switched on here, and only then.

`built_site` builds the book once per test session, for every test that reads the site. Its build
executes every chapter, so a run that builds the site leaves the chapters' nbval items out
(_chapters_left_to_the_site_build): each chapter runs once per run.
`chromium` is headless Chromium driven by Playwright, for the tests marked `browser`: they
skip where there is no Chromium, or fail when FLOORLAB_REQUIRE_BROWSER=1 (as in `.ci/run`).
"""
import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
INSTALL_CHROMIUM = ("install Chromium (Debian/Ubuntu: apt-get install chromium) and the Python package "
                    "playwright (pip install -r requirements.txt), or name another Chromium in "
                    "FLOORLAB_CHROMIUM; deselect these tests with -m 'not browser'")


def _cuda_available() -> bool:
    """Return True when torch is importable and sees a CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


SITE_BUILD_TEST = "tests/test_site.py::test_the_book_builds_without_warnings"


def _chapters_left_to_the_site_build(config, items) -> None:
    """Drop the chapters' nbval items when this run also builds the site, which executes every chapter.

    The site's {eval} numbers need myst-nb's live kernel, so the build cannot reuse nbval's outputs;
    instead one execution, the build's, serves both. tests/test_site.py fails on a cell that raises
    (the build stops, naming the notebook) and compares the cells nbval would compare. A run that
    collects chapters without the build test (`pytest chapters/NAME.ipynb`) runs them under nbval.
    """
    if importlib.util.find_spec("jupyter_book") is None:
        return  # the build test skips, so nbval is the only run of the chapters
    if not any(item.nodeid == SITE_BUILD_TEST for item in items):
        return
    chapters = [item for item in items if type(item).__name__ == "IPyNbCell"]
    if chapters:
        items[:] = [item for item in items if type(item).__name__ != "IPyNbCell"]
        config.hook.pytest_deselected(items=chapters)
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"chapters: executed once, by the site build ({len(chapters)} nbval cells "
                                "deselected; pytest chapters/ runs them under nbval)")


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected theirs
def pytest_collection_modifyitems(config, items):
    _chapters_left_to_the_site_build(config, items)
    if _cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip_gpu)


if not _cuda_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@dataclass(frozen=True)
class SiteBuild:
    """One `jupyter-book build -W` of the book: its exit status, its log and the HTML folder."""
    returncode: int
    log: str
    html: Path


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> SiteBuild:
    """Build the book once (every chapter executes; warnings are errors) for all site tests."""
    pytest.importorskip("jupyter_book", reason="jupyter-book is not installed here")
    # FLOORLAB_SITE_OUT keeps the built site (the GPU runner archives it with --collect)
    out = Path(os.environ["FLOORLAB_SITE_OUT"]) if os.environ.get("FLOORLAB_SITE_OUT") \
        else tmp_path_factory.mktemp("site")
    cli = "from jupyter_book.cli.main import main; main()"
    result = subprocess.run(
        [sys.executable, "-c", cli, "build", str(ROOT), "--path-output", str(out), "-W", "-n", "--keep-going"],
        capture_output=True, text=True, timeout=1800)
    return SiteBuild(result.returncode, result.stdout + result.stderr, out / "_build" / "html")


def _chromium_path() -> tuple[str | None, str]:
    """The Chromium to drive (FLOORLAB_CHROMIUM, else `chromium` on PATH) or None, and why not."""
    named = os.environ.get("FLOORLAB_CHROMIUM")
    if named:
        return (named, "") if Path(named).is_file() else (None, f"FLOORLAB_CHROMIUM={named} is not a file")
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    return found, "" if found else "no chromium on PATH"


def _missing_browser(why: str):
    """Skip (a reader's machine) or fail (FLOORLAB_REQUIRE_BROWSER=1, as in CI) for want of a browser."""
    message = f"{why}: {INSTALL_CHROMIUM}"
    from floorlab.core.environment import flag

    if flag("FLOORLAB_REQUIRE_BROWSER"):
        pytest.fail(f"FLOORLAB_REQUIRE_BROWSER=1 but {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def chromium():
    """A headless Chromium browser (Playwright's Browser) with a fresh profile, closed at the end."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing_browser("the Python package playwright is not installed")
    executable, why_not = _chromium_path()
    if executable is None:
        _missing_browser(why_not)
    with sync_playwright() as playwright:
        # Playwright starts Chromium with a fresh, temporary user-data dir of its own.
        browser = playwright.chromium.launch(executable_path=executable, headless=True,
                                             args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def screenshots_dir() -> Path:
    """Where browser tests keep their screenshots: FLOORLAB_SCREENSHOTS, else results/screenshots/."""
    folder = Path(os.environ.get("FLOORLAB_SCREENSHOTS", ROOT / "results" / "screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder
