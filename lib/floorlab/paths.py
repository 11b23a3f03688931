"""Where the book keeps its figures and reference runs."""
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
ROOT = PACKAGE_DIR.parents[1]
FIGURES_DIR = ROOT / "figures"
REFERENCE_DIR = PACKAGE_DIR / "reference"
REFERENCE_FIGURES_DIR = FIGURES_DIR / "reference"
RESULTS_DIR = ROOT / "results"
