"""The site builds: every chapter executes and Sphinx raises no warning (jupyter-book build -W)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_book_builds_without_warnings(tmp_path):
    pytest.importorskip("jupyter_book", reason="jupyter-book is not installed here")
    cli = "from jupyter_book.cli.main import main; main()"
    result = subprocess.run(
        [sys.executable, "-c", cli, "build", str(ROOT), "--path-output", str(tmp_path), "-W", "-n", "--keep-going"],
        capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, _first_error(result.stdout + result.stderr)
    html = tmp_path / "_build" / "html"
    for page in ("index.html", "chapters/below-the-floor.html", "chapters/fast-card.html",
                 "chapters/prefill.html", "facilitators.html"):
        text = (html / page).read_text()
        assert "{glue" not in text, f"{page}: a glue reference did not render"
        assert "{eval}" not in text, f"{page}: a prose number did not render"
        assert "Traceback" not in text, f"{page}: a cell raised"


def _first_error(log: str) -> str:
    """The log around the first cell error (a failing cell prints it long before the build stops)."""
    marks = [i for i in (log.find("CellExecutionError"), log.find("Traceback")) if i >= 0]
    start = max(min(marks) - 1000, 0) if marks else max(len(log) - 6000, 0)
    return log[start:start + 6000]
