"""The chapters stay reviewable: no outputs in git except the outputs nbval checks."""
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
CHECKED = "nbval-check-output"  # the cell tag that makes nbval compare a cell's stored output


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_only_checked_cells_carry_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if CHECKED in cell.metadata.get("tags", []):
            assert cell.outputs, f"{path.name}: a {CHECKED} cell needs its expected output stored"
            assert cell.execution_count == 1, f"{path.name}: nbval compares only cells that were run"
            assert all(o.output_type == "stream" for o in cell.outputs)
        else:
            assert not cell.outputs, f"{path.name}: strip the outputs of cell {cell.source[:40]!r}"
            assert cell.execution_count is None, f"{path.name}: strip the execution count"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_chapter_is_in_the_table_of_contents(path):
    toc = (ROOT / "_toc.yml").read_text()
    assert f"chapters/{path.stem}" in toc, f"add chapters/{path.stem} to _toc.yml, or the site skips it"


def test_there_are_chapters():
    assert CHAPTERS, "chapters/ holds no notebooks"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_chapter_installs_the_book_where_it_is_missing(path):
    """The launch buttons (Colab) open a chapter in a runtime without the book: its first code
    cell must install floorlab from the repository that _config.yml names, and only then.
    The address may sit in BOOK_REPO, which %pip expands, so the line keeps to prose.COLUMN."""
    import yaml

    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    first = next(c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
    assert "except ImportError" in first.source, f"{path.name}: install only when the import fails"
    named = (f'BOOK_REPO = "git+{url}"', '%pip install -q "floorlab @ {BOOK_REPO}"')
    assert (f'%pip install -q "floorlab @ git+{url}"' in first.source
            or all(line in first.source for line in named)), (
        f"{path.name}: the first code cell must install floorlab from {url}")


def test_library_code_a_chapter_shows_fits_the_page():
    """show_source(obj) prints library code in the page: its lines keep to prose.COLUMN."""
    import importlib
    import re

    import floorlab
    from floorlab.core.prose import COLUMN, source

    namespace = dict(vars(floorlab))
    for path in (ROOT / "lib" / "floorlab").rglob("*.py"):
        if not path.stem.startswith("_"):
            parts = path.relative_to(ROOT / "lib").with_suffix("").parts
            try:
                module = importlib.import_module(".".join(parts))
            except ModuleNotFoundError as err:  # the kernels' modules, where Triton has no wheel
                if err.name != "triton":
                    raise
                continue  # a chapter names their code in strings, which source() reads without importing
            namespace.update(vars(module))
            namespace[path.stem] = module  # `from floorlab.engine.kernels import matvec` in a chapter
    shown = {(chapter.name, name.strip()) for chapter in CHAPTERS
             for cell in nbformat.read(chapter, as_version=4).cells if cell.cell_type == "code"
             for call in re.findall(r"show_source\(([^)]*)\)", cell.source)
             for name in call.split(",") if name.strip()}
    assert shown, "no chapter shows library code any more: drop this test"
    for chapter, name in sorted(shown):
        wide = [line for line in source(eval(name, namespace)).splitlines() if len(line) > COLUMN]
        assert not wide, f"{chapter} shows {name}, whose line runs past {COLUMN}: {wide[0]!r}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_code_fits_the_page(path):
    """A code cell's lines keep to prose.COLUMN, so the site shows them without a scroll bar
    (the browser test measures the same thing on the built page, much later)."""
    from floorlab.core.prose import COLUMN

    wide = [(index, line) for index, cell in enumerate(nbformat.read(path, as_version=4).cells)
            if cell.cell_type == "code" for line in cell.source.splitlines() if len(line) > COLUMN]
    assert not wide, (f"{path.name}: {len(wide)} code lines run past {COLUMN} characters, "
                      f"the first in cell {wide[0][0]}: {wide[0][1]!r}")


def test_source_by_name_reads_a_module_without_importing_it():
    import sys

    from floorlab.core.prose import source

    loaded = sys.modules.pop("floorlab.engine.kernels.runtime", None)
    try:
        text = source("floorlab.engine.kernels.runtime.pdl_wait")
        assert "floorlab.engine.kernels.runtime" not in sys.modules
    finally:
        if loaded is not None:
            sys.modules["floorlab.engine.kernels.runtime"] = loaded
    assert text.startswith("@triton.jit\ndef pdl_wait(") and "gdc_wait()" in text
    with pytest.raises(ValueError, match="no top-level function or class 'nope'"):
        source("floorlab.engine.kernels.runtime.nope")
    with pytest.raises(ValueError, match="no module"):
        source("floorlab.nothing_here.f")


def _worked_answer_cells(nb) -> list[int]:
    """Indices of the cells the site folds behind 'Show the worked answer'."""
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
            and c.metadata.get("mystnb", {}).get("code_prompt_show") == "Show the worked answer"]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_worked_answers_wait_to_be_asked_for(path):
    """Every worked answer runs inside worked_answer(show_answer), so JupyterLab prints it only
    when the reader sets show_answer = True; the site keeps its toggle (hide-cell)."""
    nb = nbformat.read(path, as_version=4)
    cells = _worked_answer_cells(nb)
    for i in cells:
        cell = nb.cells[i]
        assert "with fl.worked_answer(show_answer" in cell.source, (
            f"{path.name} cell {i}: wrap the worked answer in `with fl.worked_answer(show_answer):`")
        assert "hide-cell" in cell.metadata.get("tags", []), f"{path.name} cell {i}: tag it hide-cell"
    if cells:
        assert "show_answer = False" in "\n".join(c.source for c in nb.cells if c.cell_type == "code")


def test_no_worked_answer_shows_after_run_all(monkeypatch):
    """Run a chapter top to bottom as JupyterLab's Run All does: each worked-answer cell prints
    only the line that says how to see it."""
    from nbclient import NotebookClient

    from floorlab.core.checks import HIDDEN, SHOW_ANSWERS_ENV

    monkeypatch.delenv(SHOW_ANSWERS_ENV, raising=False)
    path = ROOT / "chapters" / "gallery.ipynb"  # the quickest chapter with worked answers
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, resources={"metadata": {"path": str(path.parent)}}).execute()
    cells = _worked_answer_cells(nb)
    assert cells, "the gallery chapter has worked answers to check"
    for i in cells:
        shown = "".join(o.get("text", "") for o in nb.cells[i].outputs if o.output_type == "stream")
        rich = [o for o in nb.cells[i].outputs if o.output_type != "stream"]
        assert shown.strip() == HIDDEN and not rich, f"cell {i} printed its answer: {shown[:200]!r}"
