"""Core wing: numbers and code as the chapters print them: fixed notation, honest precision, real
source."""
from __future__ import annotations

import inspect
import math
import textwrap
from pathlib import Path

from floorlab.core.numbers import instance, number, positive_number, whole_number

COLUMN = 84  # characters a printed line may take in the site's content column (see _static)


def sig(value: float, digits: int = 3) -> str:
    """value to `digits` significant figures, never in scientific notation: 1330, 7.80, 0.275."""
    digits = whole_number(digits, "digits", hint="pass how many significant figures to print, e.g. 3")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{value} has no significant figures to print; say in words what it "
                         "means (no slope, nothing measured) instead of printing it")
    if value == 0:
        return "0"
    exponent = math.floor(math.log10(abs(value)))
    decimals = digits - 1 - exponent
    if decimals >= 0:
        text = f"{value:.{decimals}f}"
        if abs(float(text)) >= 10 ** (exponent + 1) and decimals > 0:  # 9.996 rounds up to 10.00
            text = f"{value:.{decimals - 1}f}"
        return text
    return f"{round(value, decimals):.0f}"


def fmt_ms(ms: float, digits: int = 3) -> str:
    """A time in ms as '7.80 ms', '1330 ms' or '0.275 ms'."""
    ms = number(ms, "ms", hint="pass a time in ms, e.g. fl.fmt_ms(row.median_ms)")
    return f"{sig(ms, digits)} ms"


def fmt_gbps(gbps: float) -> str:
    """A bandwidth at three significant figures: '7.40 GB/s', '4350 GB/s'."""
    gbps = positive_number(gbps, "gbps", hint="pass a measured bandwidth in GB/s")
    return f"{sig(gbps)} GB/s"


def fmt_band(p10: float, p90: float) -> str:
    """A p10-p90 band at three significant figures: 'p10-p90 2.07-2.09'."""
    return f"p10-p90 {sig(p10)}-{sig(p90)}"


def fmt_gb(nbytes: float) -> str:
    """Bytes as GB (1e9 bytes) at three significant figures: '1.20 GB'."""
    return f"{sig(nbytes / 1e9)} GB"


def fmt_times(ratio: float) -> str:
    """A multiple at three significant figures: '17.3×', '1.81×', '0.150×'."""
    return f"{sig(ratio)}×"


def prose(markdown: str) -> None:
    """Show a paragraph of the chapter, this run's numbers already in it, as Markdown."""
    text = textwrap.dedent(markdown).strip("\n")
    try:
        from IPython.display import Markdown, display
    except ImportError:  # plain Python: the text as it reads
        print(text)
        return
    display(Markdown(text))


def wrap(text: str, width: int = COLUMN) -> str:
    """Text re-wrapped to the site's column, paragraph by paragraph (lines kept where they break); a long line
    goes on two spaces under its own indent, so an aligned column stays aligned."""
    instance(text, str, "text", hint="pass the text to wrap; str(value) turns a number into text")
    width = whole_number(width, "width", hint=f"pass a line width in characters, e.g. {COLUMN}")
    def indent(line: str) -> str:
        return " " * min(len(line) - len(line.lstrip()) + 2, width // 2)
    return "\n".join(textwrap.fill(line, width, subsequent_indent=indent(line), break_on_hyphens=False)
                     if len(line) > width else line for line in text.splitlines())


def source(obj) -> str:
    """The source of a library function or class, as it runs, for a chapter to show."""
    if isinstance(obj, str):
        return _source_by_name(obj)
    return textwrap.dedent(inspect.getsource(getattr(obj, "fn", obj)))


def _source_by_name(dotted: str) -> str:
    """The decorators and body of the top-level function or class `dotted` names, from its file."""
    import ast
    import importlib.util

    module, _, name = dotted.rpartition(".")
    spec = importlib.util.find_spec(module) if module else None
    if spec is None or not spec.origin:
        raise ValueError(f"no module {module!r} to read {name!r} from; pass a name such as "
                         "'floorlab.engine.kernels.runtime.pdl_wait'")
    text = Path(spec.origin).read_text()
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return "\n".join(text.splitlines()[first - 1:node.end_lineno]) + "\n"
    raise ValueError(f"{module} has no top-level function or class {name!r}")


def show_source(*objs):
    """Display the source of library objects as highlighted code, in JupyterLab and in the site."""
    from IPython.display import Markdown

    blocks = [f"```python\n{source(obj).rstrip()}\n```" for obj in objs]
    return Markdown("\n\n".join(blocks))
