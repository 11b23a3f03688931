"""The chapters' numbered prose runs in the kernel's order: a paragraph with this run's numbers is
a prose cell (fl.prose with an f-string, source hidden), never a MyST {eval} role, which JupyterLab
leaves unfilled after Run All. `python -m floorlab.tools.prose_cells` converts the roles."""
import ast
import json
from pathlib import Path

import pytest

from floorlab.core.prose import COLUMN
from floorlab.tools.prose_cells import HIDDEN, OPEN, blocks, convert, convert_cell, prose_source

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
CONVERT = "python -m floorlab.tools.prose_cells chapters/*.ipynb"


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapters_write_their_numbers_in_prose_cells(path):
    cells = _cells(path)
    raw = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and "{eval}" in "".join(c["source"])]
    assert not raw, f"{path.name}: markdown cells {raw} use {{eval}}, which JupyterLab's Run All leaves " \
                    f"unfilled; run {CONVERT}"
    for i, cell in enumerate(cells):
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or not source.startswith(OPEN):
            continue
        assert cell["metadata"].get("jupyter", {}).get("source_hidden") is True, (
            f"{path.name} cell {i}: a prose cell hides its source (metadata jupyter.source_hidden)")
        assert "remove-input" in cell["metadata"].get("tags", []), (
            f"{path.name} cell {i}: tag the prose cell remove-input, so the site shows only its text")
        call = ast.parse(source).body
        assert len(call) == 1 and isinstance(call[0].value.args[0], ast.JoinedStr), (
            f"{path.name} cell {i}: a prose cell is one fl.prose(f\"\"\"...\"\"\") call")


def test_a_paragraph_becomes_a_prose_cell_that_reads_the_same():
    markdown = ('## Eager decode\n\nNo number here, {braces} kept.\n\n'
                'It takes {eval}`fl.fmt_ms(t)`, {eval}`f"{x:.1f}"`× the floor of {a}\n'
                '{eval}`d["k"]`.\n\n$$\n\\frac{a}{b}\n$$')
    cells = convert_cell({"cell_type": "markdown", "id": "c1", "metadata": {}, "source": [markdown]})
    assert [c["cell_type"] for c in cells] == ["markdown", "code", "markdown"]
    assert [c["id"] for c in cells] == ["c1", "c1-1", "c1-2"]
    assert "".join(cells[0]["source"]) == "## Eager decode\n\nNo number here, {braces} kept."
    assert "".join(cells[1]["source"]) == ('fl.prose(f"""\nIt takes {fl.fmt_ms(t)}, {x:.1f}× the floor of '
                                           '{{a}}\n{d["k"]}.\n""")')
    assert cells[1]["metadata"] == HIDDEN and cells[1]["outputs"] == []
    assert "".join(cells[2]["source"]) == "$$\n\\frac{a}{b}\n$$"
    namespace = {"fl": type("fl", (), {"fmt_ms": staticmethod(lambda ms: f"{ms} ms")}), "t": 2, "x": 7.44,
                 "d": {"k": "v"}}
    shown = []
    namespace["fl"].prose = staticmethod(shown.append)
    exec("".join(cells[1]["source"]), namespace)
    assert shown == ["\nIt takes 2 ms, 7.4× the floor of {a}\nv.\n"]


def test_long_lines_wrap_to_the_column_between_words_and_never_start_a_list():
    words = " ".join(["word"] * 20)
    markdown = f"{words} {{eval}}`fl.fmt_ms(long_name_of_a_time)` - 1. {words}"
    code = prose_source(markdown)
    assert all(len(line) <= COLUMN for line in code.splitlines())
    assert not any(line.startswith(("- ", "1. ")) for line in code.splitlines())
    url = "[a link](https://example.org/" + "x" * 100 + ")"
    code = prose_source(f"See {url}.")
    assert all(len(line) <= COLUMN for line in code.splitlines()) and code.count("\\\n") == 1
    with pytest.raises(ValueError, match="backslash"):
        prose_source("{eval}`'\\n'.join(x)`")


def test_fences_and_math_stay_whole():
    text = "a\n\n```python\nx = 1\n\ny = 2\n```\n\n$$\nx\n\ny\n$$\n\n:::{note}\nn\n\nm\n:::\n\nb"
    assert blocks(text) == ["a", "```python\nx = 1\n\ny = 2\n```", "$$\nx\n\ny\n$$", ":::{note}\nn\n\nm\n:::", "b"]


def test_converting_is_idempotent(tmp_path):
    notebook = {"cells": [{"cell_type": "markdown", "id": "m", "metadata": {}, "source": ["It is {eval}`x`.\n"]},
                          {"cell_type": "code", "execution_count": None, "id": "c", "metadata": {}, "outputs": [],
                           "source": ["x = 1"]}],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "chapter.ipynb"
    path.write_text(json.dumps(notebook, indent=1) + "\n")
    assert convert(path) is True
    once = path.read_text()
    assert convert(path) is False and path.read_text() == once
    assert [c["cell_type"] for c in json.loads(once)["cells"]] == ["code", "code"]
