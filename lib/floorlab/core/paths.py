"""Core wing: where the book keeps its reference runs, and where a reader's figures and results go.

The stored reference runs and their figures ship inside the package (reference/); floorlab.core.runs
decides which folder a stored run is read from (FLOORLAB_REFERENCE_DIR can name another).
A reader's figures and results go under the source checkout when floorlab runs from
one (an editable install), else under the current working directory; the
environment variable FLOORLAB_FIGURES names another folder for figures.
"""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # lib/floorlab: paths.py sits in core/
REFERENCE_DIR = PACKAGE_DIR / "reference"
REFERENCE_FIGURES_DIR = REFERENCE_DIR / "figures"


def source_checkout(package_dir: Path = PACKAGE_DIR) -> Path | None:
    """The repository root when the package sits in the book's source tree (lib/), else None."""
    root = package_dir.parents[1]
    if package_dir.parent.name == "lib" and (root / "_toc.yml").is_file():
        return root
    return None


WORK_DIR = source_checkout() or Path.cwd()  # the checkout, or where an installed package runs
FIGURES_DIR = Path(os.environ.get("FLOORLAB_FIGURES") or WORK_DIR / "figures").expanduser()
RESULTS_DIR = WORK_DIR / "results"
