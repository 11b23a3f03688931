"""Core wing: where the reference runs live, and where a reader's figures and results go: the source checkout, else
the working directory; FLOORLAB_FIGURES names another, and an unwritable one falls back to a temporary folder."""
from __future__ import annotations

import tempfile
from pathlib import Path

from floorlab.core.environment import writable_folder

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # lib/floorlab: paths.py sits in core/
REFERENCE_DIR = PACKAGE_DIR / "reference"
REFERENCE_FIGURES_DIR = REFERENCE_DIR / "figures"


def source_checkout(package_dir: Path = PACKAGE_DIR) -> Path | None:
    """The repository root when the package sits in the book's source tree (lib/), else None."""
    root = package_dir.parents[1]
    if package_dir.parent.name == "lib" and (root / "_toc.yml").is_file():
        return root
    return None


FIGURES_ENV = "FLOORLAB_FIGURES"
WORK_DIR = source_checkout() or Path.cwd()  # the checkout, or where an installed package runs
# a read-only checkout, or a value of FLOORLAB_FIGURES that names no folder, sends figures to a
# temporary folder, and one line at import says where
FIGURES_DIR = writable_folder(FIGURES_ENV, WORK_DIR / "figures",
                              Path(tempfile.gettempdir()) / "floorlab-figures", what="figures")
RESULTS_DIR = WORK_DIR / "results"
