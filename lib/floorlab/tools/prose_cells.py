"""Tools wing: turn the chapters' MyST {eval} paragraphs into prose cells the kernel fills in order.

A markdown paragraph with {eval}`expr` becomes a hidden code cell that shows the same paragraph as an
f-string through `fl.prose`; paragraphs without {eval} stay markdown. Idempotent: a chapter with no
{eval} is left byte for byte (docs/maintaining.md says why the chapters need this).

Usage: python -m floorlab.tools.prose_cells chapters/*.ipynb
"""
from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

from floorlab.core.prose import COLUMN  # a prose cell is chapter code: its lines keep to the column

EVAL_ROLE = re.compile(r"\{eval\}`([^`]+)`")
FENCE = re.compile(r"^(`{3,}|~{3,}|:{3,}|\$\$)")
HIDDEN = {"jupyter": {"source_hidden": True}, "tags": ["remove-input"]}
OPEN, CLOSE = "fl.prose(", ")"
# A word that, first on a line, would start a heading, list item, quote or underline.
STARTS_BLOCK = re.compile(r"^(#+|>|[*+-]|\d+[.)]|=+|-+)$")


def blocks(markdown: str) -> list[str]:
    """The markdown's blocks, split at blank lines; a fenced block or $$ math stays whole."""
    found, current, fence = [], [], None
    for line in markdown.split("\n"):
        stripped = line.strip()
        if fence is None:
            opener = FENCE.match(stripped)
            if opener and not (opener.group(1) == "$$" and stripped.count("$$") > 1):
                fence = opener.group(1)
        elif (stripped.endswith("$$") if fence == "$$"
              else stripped.startswith(fence) and set(stripped) == {fence[0]}):
            fence = None
        if not stripped and fence is None:
            if current:
                found.append("\n".join(current))
            current = []
        else:
            current.append(line)
    if current:
        found.append("\n".join(current))
    return found


def _field(expression: str) -> str:
    """The f-string field for one {eval} expression; an expression that is itself a plain
    f-string ("f'{x:.1f}×'") gives its body, which formats the same."""
    if "\\" in expression or "#" in expression:
        raise ValueError(f"{{eval}}`{expression}`: an f-string field takes no backslash or '#' "
                         "before Python 3.12; compute it in a code cell and name the result")
    single = re.fullmatch(r'f"([^"\\]*)"', expression) or re.fullmatch(r"f'([^'\\]*)'", expression)
    return single.group(1) if single else "{" + expression + "}"


def _escaped(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _atoms(line: str) -> list[str]:
    """One markdown line as f-string text, cut into the words it may wrap between (a field is one)."""
    pieces, last = [], 0
    for role in EVAL_ROLE.finditer(line):
        pieces += [_escaped(line[last:role.start()]), _field(role.group(1)).replace(" ", "\0")]
        last = role.end()
    pieces.append(_escaped(line[last:]))
    return [atom.replace("\0", " ") for atom in "".join(pieces).split(" ")]


def _fit(line: str, width: int, continuation: bool) -> list[str]:
    """An f-string line re-wrapped to `width` between words, as markdown joins them again. No line
    may then start as a heading, list item or quote; a word wider than the page is cut with a
    backslash-newline, which a (non-raw) string drops."""
    indent = line[:len(line) - len(line.lstrip(" "))]
    atoms = _atoms(line.lstrip(" "))
    if len(indent + " ".join(atoms)) <= width:
        return [indent + " ".join(atoms)]
    lines, current = [], []
    for atom in atoms:
        if current and len(indent + " ".join(current + [atom])) > width:
            carried = []
            while current and len(current) > 1 and STARTS_BLOCK.match(atom if not carried else carried[0]):
                carried.insert(0, current.pop())
            lines.append(indent + " ".join(current))
            current = carried
        current.append(atom)
    lines.append(indent + " ".join(current))
    out = []
    for text in lines:
        while len(text) > width:
            if not continuation or "{" in text[width - 1:] or "}" in text[width - 1:]:
                raise ValueError(f"a prose line cannot keep to {width} characters: {text!r}")
            out.append(text[:width - 1] + "\\")
            text = text[width - 1:]
        out.append(text)
    return out


def prose_source(markdown: str, width: int = COLUMN) -> str:
    """The code cell that shows `markdown` with its {eval} roles as f-string fields."""
    raw = "\\" in markdown
    body = "\n".join(fitted for line in markdown.split("\n") for fitted in _fit(line, width, not raw))
    if '"""' in body:
        raise ValueError(f"a paragraph cannot sit in an f-string: {markdown[:60]!r}")
    code = f'{OPEN}{"rf" if raw else "f"}"""\n{body}\n"""{CLOSE}'
    _same_paragraph(markdown, code)
    return code


def _parts(node: ast.JoinedStr) -> list:
    """An f-string's parts, adjacent text joined, each field as its expression's dump."""
    out = []
    for part in node.values:
        if isinstance(part, ast.Constant):
            if out and isinstance(out[-1], str):
                out[-1] += part.value
            else:
                out.append(part.value)
        else:
            spec = part.format_spec and ast.dump(part.format_spec)
            out.append((ast.dump(part.value), part.conversion, spec))
    return out


def _same_paragraph(markdown: str, code: str) -> None:
    """Raise unless `code` shows `markdown` exactly: the same text, the same expressions."""
    made = ast.parse(code).body[0].value.args[0]
    expected = ast.JoinedStr(values=[])
    last = 0
    for role in EVAL_ROLE.finditer(markdown):
        expected.values.append(ast.Constant(markdown[last:role.start()]))
        value = ast.parse(role.group(1), mode="eval").body
        inner = value.values if isinstance(value, ast.JoinedStr) else [
            ast.FormattedValue(value=value, conversion=-1, format_spec=None)]
        expected.values.extend(inner)
        last = role.end()
    expected.values.append(ast.Constant(markdown[last:]))
    want, got = _parts(expected), _parts(made)
    for parts in (want, got):  # fl.prose strips the f-string's opening and closing newline
        if parts and isinstance(parts[0], str):
            parts[0] = parts[0].lstrip("\n")
        if parts and isinstance(parts[-1], str):
            parts[-1] = parts[-1].rstrip("\n")
    # re-wrapping moves line breaks, which markdown reads as spaces
    want, got = ([re.sub(r"\s+", " ", p) if isinstance(p, str) else p for p in parts] for parts in (want, got))
    want, got = [p for p in want if p != ""], [p for p in got if p != ""]
    if want != got:
        raise ValueError(f"the prose cell would not read as the paragraph does: {markdown[:60]!r}")


def convert_cell(cell: dict) -> list[dict]:
    """One markdown cell as markdown cells and prose cells, in order; any other cell as it is."""
    text = "".join(cell["source"])
    if cell["cell_type"] != "markdown" or not EVAL_ROLE.search(text):
        return [cell]
    runs: list[tuple[bool, list[str]]] = []
    for block in blocks(text):
        filled = bool(EVAL_ROLE.search(block))
        if runs and runs[-1][0] == filled:
            runs[-1][1].append(block)
        else:
            runs.append((filled, [block]))
    cells = []
    for number, (filled, run) in enumerate(runs):
        markdown = "\n\n".join(run)
        ident = cell["id"] if number == 0 else f"{cell['id']}-{number}"
        if filled:
            cells.append({"cell_type": "code", "execution_count": None, "id": ident,
                          "metadata": json.loads(json.dumps(HIDDEN)), "outputs": [],
                          "source": prose_source(markdown).splitlines(keepends=True)})
        else:
            cells.append({"cell_type": "markdown", "id": ident,
                          "metadata": cell["metadata"] if number == 0 else {},
                          "source": markdown.splitlines(keepends=True)})
    return cells


def convert(path: Path) -> bool:
    """Rewrite the notebook at `path` with prose cells; True if it changed."""
    before = path.read_text()
    notebook = json.loads(before)
    notebook["cells"] = [new for cell in notebook["cells"] for new in convert_cell(cell)]
    after = json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"
    if after != before:
        path.write_text(after)
    return after != before


def main(argv: list[str] | None = None) -> int:
    paths = [Path(p) for p in (sys.argv[1:] if argv is None else argv)]
    if not paths:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    for path in paths:
        print(f"{path}: {'prose cells written' if convert(path) else 'no {eval} left'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
