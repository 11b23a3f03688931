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
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    html = tmp_path / "_build" / "html"
    for page in ("index.html", "chapters/below-the-floor.html", "chapters/fast-card.html",
                 "facilitators.html"):
        text = (html / page).read_text()
        assert "{glue" not in text, f"{page}: a glue reference did not render"
        assert "{eval}" not in text, f"{page}: a prose number did not render"
        assert "Traceback" not in text, f"{page}: a cell raised"
