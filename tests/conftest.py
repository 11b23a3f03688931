"""Shared test setup.

Tests marked `gpu` skip on machines without CUDA. Without CUDA, Triton kernels can only run
in Triton's CPU interpreter, which must be on before the kernels are first loaded: so it is
switched on here, and only then.

Each chapter executes once per run, under nbval. Its cells run before the first test that reads the
site, with worked answers shown as the site shows them; what each cell printed is kept in the notebook,
and a chapter whose every code cell ran and passed is written out whole. `built_site` builds the book
once per test session, for every test that reads the site: from those executed chapters with execution
off when nbval ran every chapter the site shows, else (`pytest tests/test_site.py` alone, a chapter
that failed) executing them in the build. One line of the output says which.
`chromium` is headless Chromium driven by Playwright, for the tests marked `browser`: they
skip where there is no Chromium, or fail when FLOORLAB_REQUIRE_BROWSER=1 (as in `.ci/run`).
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# A test run started in the background (bash's `pytest &`) inherits SIGINT ignored, and so would
# every process the tests start; the tests that stop a process as Ctrl-C does need it delivered.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
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


def _is_chapter_cell(item) -> bool:
    return type(item).__name__ == "IPyNbCell"


def _chapters_before_the_site(items) -> None:
    """Move the chapters' nbval items just before the first test that reads the built site, so
    the site can be built from the notebooks nbval executed (tests/ come before chapters/)."""
    site = next((i for i, item in enumerate(items) if "built_site" in getattr(item, "fixturenames", ())), None)
    chapters = [item for item in items if _is_chapter_cell(item)]
    if site is None or not chapters or items.index(chapters[0]) < site:
        return
    rest = [item for item in items if not _is_chapter_cell(item)]
    cut = rest.index(items[site])
    items[:] = rest[:cut] + chapters + rest[cut:]


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected theirs
def pytest_collection_modifyitems(config, items):
    _chapters_before_the_site(items)
    if _cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip_gpu)


EXECUTED = pytest.StashKey[Path]()  # the folder of the chapters nbval executed whole in this run
EXECUTED_CELLS = pytest.StashKey[dict]()  # per notebook: cells passed so far, and whether one failed


class ExecutedChapters:
    """Keeps what nbval's chapter cells print. A plugin of its own, not conftest hooks: pytest calls a
    conftest's test hooks only for the tests under its folder, and the chapters are not under tests/."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item):
        """The chapters' kernel starts with worked answers shown, as the site shows them (_ext/)."""
        if not _is_chapter_cell(item):
            yield
            return
        from floorlab.core.checks import SHOW_ANSWERS_ENV

        before = os.environ.get(SHOW_ANSWERS_ENV)
        os.environ[SHOW_ANSWERS_ENV] = "1"
        try:
            yield
        finally:
            if before is None:
                os.environ.pop(SHOW_ANSWERS_ENV, None)
            else:
                os.environ[SHOW_ANSWERS_ENV] = before

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        """Store each chapter cell's outputs in its notebook; once every code cell of a chapter has run
        and passed, write the executed chapter where `built_site` builds the site from."""
        report = (yield).get_result()
        if not _is_chapter_cell(item) or report.when != "call":
            return
        notebook = item.parent
        state = notebook.stash.setdefault(EXECUTED_CELLS, {"passed": 0, "failed": False})
        if not report.passed or item.test_outputs is None:
            state["failed"] = True
            return
        state["passed"] += 1
        item.cell.outputs = item.test_outputs
        item.cell.execution_count = state["passed"]
        for output in item.cell.outputs:
            if output.get("output_type") == "execute_result":
                output["execution_count"] = state["passed"]
        code_cells = sum(cell.cell_type == "code" for cell in notebook.nb.cells)
        if not state["failed"] and state["passed"] == code_cells:
            import nbformat

            if EXECUTED not in item.config.stash:
                item.config.stash[EXECUTED] = Path(tempfile.mkdtemp(prefix="floorlab-executed-"))
            nbformat.validate(notebook.nb)
            nbformat.write(notebook.nb, item.config.stash[EXECUTED] / Path(str(notebook.fspath)).name)

    def pytest_unconfigure(self, config):
        if EXECUTED in config.stash:
            shutil.rmtree(config.stash[EXECUTED], ignore_errors=True)


def pytest_configure(config):
    config.pluginmanager.register(ExecutedChapters(), "floorlab-executed-chapters")


if not _cuda_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@dataclass(frozen=True)
class SiteBuild:
    """One `jupyter-book build -W` of the book: its exit status, its log, the HTML folder, and whether
    it was built from the chapters nbval executed (execution off) rather than executing them."""
    returncode: int
    log: str
    html: Path
    from_nbval: bool = False


def toc_chapters(root: Path = ROOT) -> list[str]:
    """The notebooks the site shows, as paths from the book's root ("chapters/gallery.ipynb")."""
    import yaml

    def files(entry):
        yield from [entry["file"]] if "file" in entry else []
        for key in ("parts", "chapters", "sections"):
            for child in entry.get(key) or []:
                yield from files(child)

    named = files(yaml.safe_load((root / "_toc.yml").read_text()))
    return [f"{os.path.splitext(page)[0]}.ipynb" for page in named
            if (root / f"{os.path.splitext(page)[0]}.ipynb").is_file()]


def book_from_executed(executed: Path, book: Path) -> Path:
    """A copy of the book (links to its files) whose chapters are the notebooks in `executed`, and whose
    _config.yml turns execution off; returns the copy's root."""
    import yaml

    book.mkdir(parents=True, exist_ok=True)
    for entry in ROOT.iterdir():
        if entry.name.startswith(".") or entry.name in ("_build", "_config.yml", "chapters"):
            continue
        (book / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    (book / "chapters").mkdir()
    for entry in (ROOT / "chapters").iterdir():
        ran = executed / entry.name
        if ran.is_file():
            shutil.copyfile(ran, book / "chapters" / entry.name)
        elif not entry.name.startswith("."):
            (book / "chapters" / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["execute"]["execute_notebooks"] = "off"
    (book / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    return book


@pytest.fixture(scope="session")
def built_site(request, tmp_path_factory) -> SiteBuild:
    """Build the book once (warnings are errors) for all site tests: from the chapters nbval executed
    in this run when it executed every one the site shows, else executing them in the build."""
    pytest.importorskip("jupyter_book", reason="jupyter-book is not installed here")
    from floorlab.core import paths

    # FLOORLAB_SITE_OUT keeps the built site (the GPU runner archives it with --collect)
    out = Path(os.environ["FLOORLAB_SITE_OUT"]) if os.environ.get("FLOORLAB_SITE_OUT") \
        else tmp_path_factory.mktemp("site")
    executed = request.config.stash.get(EXECUTED, None)
    chapters = toc_chapters()
    missing = [c for c in chapters if executed is None or not (executed / Path(c).name).is_file()]
    if missing:
        source = ROOT
        why = "nbval ran no chapter" if executed is None else f"nbval did not run {', '.join(missing)} to the end"
        how = f"site: built executing every chapter in the build, since {why} in this run"
    else:
        source = book_from_executed(executed, tmp_path_factory.mktemp("book") / "book")
        how = f"site: built with execution off from the {len(chapters)} chapters nbval executed in this run"
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():  # a fixture's output is captured otherwise
            reporter.ensure_newline()
            reporter.write_line(how)
    # the napkin page reads this machine's runs where the chapters' kernels wrote them
    env = dict(os.environ, FLOORLAB_FIGURES=str(paths.FIGURES_DIR))
    cli = "from jupyter_book.cli.main import main; main()"
    result = subprocess.run(
        [sys.executable, "-c", cli, "build", str(source), "--path-output", str(out), "-W", "-n", "--keep-going"],
        capture_output=True, text=True, timeout=1800, env=env)
    return SiteBuild(result.returncode, f"{how}\n{result.stdout}{result.stderr}", out / "_build" / "html",
                     from_nbval=not missing)


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


@pytest.fixture
def first_host_runs(monkeypatch):
    """Read the stored H200 runs of reference/first-host/ (2026-11-30 to 12-01) as the package's own.

    Tests that pin numbers a stored run gives (a noisy eager step starred to two figures, a knee
    ratio) need one fixed run to pin them against; the package's main runs are re-measured."""
    from floorlab.core import paths

    monkeypatch.setenv("FLOORLAB_REFERENCE_DIR", str(Path(paths.REFERENCE_DIR) / "first-host"))
