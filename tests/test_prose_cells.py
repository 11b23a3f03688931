"""The chapters' numbered prose runs in the kernel's order: a paragraph with this run's numbers is
a prose cell (fl.prose with an f-string, source hidden), never a MyST {eval} role, which JupyterLab
leaves unfilled after Run All."""
import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
OPEN = "fl.prose("  # how a prose cell starts
WRITE = 'write the paragraph as a prose cell, fl.prose(f"""...""") with its source hidden'


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapters_write_their_numbers_in_prose_cells(path):
    cells = _cells(path)
    raw = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and "{eval}" in "".join(c["source"])]
    assert not raw, f"{path.name}: markdown cells {raw} use {{eval}}, which JupyterLab's Run All leaves " \
                    f"unfilled; {WRITE}"
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
