"""The book does not reuse the seed chapter's sentences.

The book grew from one seed chapter, kept outside the repository in ../shared/seed/ beside
the checkout (FLOORLAB_SEED_DIR names another folder). This test finds every run of 8 or
more consecutive words that the seed shares with the prose of the book: the markdown cells
and prose cells (fl.prose) of chapters/*.ipynb and the pages in PAGES. Case and punctuation
do not count: both sides are lowercased, apostrophes dropped and split into runs of letters and digits. Table
rows of figures are left out on both sides (markdown lines that start with `|`; in the seed
also lines with tabs or aligned columns, and lines that are mostly numbers). A run never
crosses a blank line, a dropped line or a cell boundary.

Where the seed is absent the test skips; nothing of the seed is stored here.
"""
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN = 8
SEED_ENV = "FLOORLAB_SEED_DIR"
PAGES = ["intro.md", "napkin.md", "facilitators.md"]

_APOSTROPHES = re.compile(r"['\u2019\u2018\u02bc]")
_WORD = re.compile(r"[^\W_]+")
_ALIGNED = re.compile(r"\S(?: {2,}|\t)\S")


@dataclass(frozen=True)
class Word:
    """One normalised word and where it stands: the file, the cell (None for a page) and the line."""
    text: str
    where: str
    cell: int | None
    line: int


def seed_folder() -> Path:
    """The folder the seed is read from: FLOORLAB_SEED_DIR, else ../shared/seed/ beside the checkout."""
    named = os.environ.get(SEED_ENV)
    return Path(named) if named else ROOT / ".." / "shared" / "seed"


def words(line: str) -> list[str]:
    """The line lowercased, apostrophes dropped, split into runs of letters and digits."""
    return _WORD.findall(_APOSTROPHES.sub("", line.lower()))


def is_markdown_table_row(line: str) -> bool:
    return line.lstrip().startswith("|")


def is_seed_figure_row(line: str) -> bool:
    """A seed line that is a table row or a column of figures rather than a sentence."""
    if is_markdown_table_row(line) or "\t" in line:
        return True
    if len(_ALIGNED.findall(line.strip())) >= 2:
        return True
    found = words(line)
    numeric = sum(any(ch.isdigit() for ch in w) for w in found)
    return bool(found) and numeric * 2 >= len(found)


def segments(text: str, where: str, cell: int | None, drop) -> list[list[Word]]:
    """The text's words in runs that stop at blank lines and at dropped lines."""
    out: list[list[Word]] = [[]]
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or drop(line):
            out.append([])
            continue
        out[-1].extend(Word(w, where, cell, number) for w in words(line))
    return [s for s in out if len(s) >= RUN]


def book_segments(root: Path) -> list[list[Word]]:
    """The book's prose: every chapter's markdown cells and prose cells, and the pages in PAGES."""
    found: list[list[Word]] = []
    for path in sorted((root / "chapters").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        name = path.relative_to(root).as_posix()
        for index, cell in enumerate(cells):
            source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            if cell.get("cell_type") != "markdown" and not source.startswith("fl.prose("):
                continue
            found += segments(source, name, index, is_markdown_table_row)
    for page in PAGES:
        path = root / page
        if path.is_file():
            found += segments(path.read_text(encoding="utf-8"), page, None, is_markdown_table_row)
    return found


def seed_runs(folder: Path) -> set[tuple[str, ...]]:
    """Every run of RUN consecutive words in the seed's .txt and .md files."""
    runs: set[tuple[str, ...]] = set()
    for path in sorted([*folder.glob("*.txt"), *folder.glob("*.md")]):
        for segment in segments(path.read_text(encoding="utf-8"), path.name, None, is_seed_figure_row):
            texts = [w.text for w in segment]
            runs.update(tuple(texts[i:i + RUN]) for i in range(len(texts) - RUN + 1))
    return runs


def shared_runs(seed: set[tuple[str, ...]], book: list[list[Word]]) -> list[list[Word]]:
    """The book's longest stretches of words whose every RUN-word window is also in the seed.

    Overlapping windows merge, so a copied sentence shows once, as its whole shared stretch.
    """
    found: list[list[Word]] = []
    for segment in book:
        texts = [w.text for w in segment]
        hits = [tuple(texts[i:i + RUN]) in seed for i in range(len(texts) - RUN + 1)]
        start = None
        for i, hit in enumerate([*hits, False]):
            if hit and start is None:
                start = i
            elif not hit and start is not None:
                found.append(segment[start:i - 1 + RUN])
                start = None
    return found


def describe(run: list[Word]) -> str:
    first = run[0]
    place = first.where if first.cell is None else f"{first.where}, cell {first.cell}"
    return f"{place}, line {first.line}: \"{' '.join(w.text for w in run)}\""


def test_the_finder_reports_a_shared_run_where_it_stands():
    """Made-up text: one planted nine-word run is found once, with its cell and line; tables are skipped."""
    source = ("A lamp on the desk. The quick grey heron waits by the cold river\n"
              "until dawn.\n\n| the quick grey heron waits by the cold river |")
    seed = ("Nothing here but the Quick, grey heron WAITS by the cold river, at its edge.\n"
            "one 2 3 4 5 6 7 8 9 10 11 12")
    seed_dir_runs: set[tuple[str, ...]] = set()
    for segment in segments(seed, "seed", None, is_seed_figure_row):
        texts = [w.text for w in segment]
        seed_dir_runs.update(tuple(texts[i:i + RUN]) for i in range(len(texts) - RUN + 1))
    found = shared_runs(seed_dir_runs, segments(source, "chapters/x.ipynb", 4, is_markdown_table_row))
    assert [describe(r) for r in found] == [
        'chapters/x.ipynb, cell 4, line 1: "the quick grey heron waits by the cold river"']
    assert is_seed_figure_row("one 2 3 4 5 6 7 8 9 10 11 12")
    assert is_seed_figure_row("Weights\t1.19 GB") and not is_seed_figure_row("A plain sentence, with 2 numbers.")


def test_no_run_of_eight_words_is_shared_with_the_seed():
    folder = seed_folder()
    if not folder.is_dir():
        if os.environ.get(SEED_ENV):
            pytest.skip(f"{SEED_ENV}={folder} is not a folder; nothing to compare")
        pytest.skip("the seed chapter is not beside this checkout (../shared/seed/); nothing to compare")
    seed = seed_runs(folder)
    if not seed:
        pytest.skip(f"no .txt or .md seed text in {folder}; nothing to compare")
    found = shared_runs(seed, book_segments(ROOT))
    if found:
        pytest.fail(f"{len(found)} passage(s) share {RUN} or more consecutive words with the seed chapter "
                    f"in {folder.resolve()}; rewrite each in fresh words:\n"
                    + "\n".join(describe(r) for r in found), pytrace=False)
