"""The chapter works in JupyterLab as a reader runs it: the notebook opens with JupyterLab's
default settings, Run All from the Run menu executes every cell, and each prose cell (an f-string
that fl.prose shows as Markdown, its source hidden) shows the numbers the kernel computes.

JupyterLab's default windowing leaves cells far below the first screen unrendered until they
scroll into view, and jupyterlab-myst's {eval} role read its expressions from the rendered cell:
after Run All such cells showed their expressions as code, and the others waited for the whole
chapter to run. Prose cells run in the kernel's order, like any code cell.

A JupyterLab server runs headless on a free port, with no token, on a copy of the chapter;
Chromium drives it. Only the news and update checks are off (no internet here); the notebook's
settings are JupyterLab's defaults.
"""
import ast
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "chapters" / "below-the-floor.ipynb"
SERVER_START_S = 120
RUN_ALL_S = 900
SHOWN_S = 30
# JupyterLab's defaults, but for the news and update checks, which would reach the internet.
LAB_SETTINGS = {"@jupyterlab/apputils-extension/notification.jupyterlab-settings":
                {"fetchNews": "false", "checkForUpdates": False}}


def _free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _log_tail(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)"


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory):
    """A JupyterLab server on a copy of the chapter; yields its base URL and stops it at the end."""
    pytest.importorskip("jupyterlab", reason="JupyterLab is not installed here; pip install -r requirements.txt")
    base = tmp_path_factory.mktemp("lab")
    notebooks, settings = base / "notebooks", base / "settings"
    (notebooks / "chapters").mkdir(parents=True)
    shutil.copy(CHAPTER, notebooks / "chapters" / CHAPTER.name)
    for name, values in LAB_SETTINGS.items():
        (settings / name).parent.mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(json.dumps(values))
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(settings),
           "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"), "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "lib"), os.environ.get("PYTHONPATH")]))}
    env.pop("MPLBACKEND", None)  # the kernel draws figures inline, as for a reader
    port = _free_port()
    log = base / "server.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}",
             "--ServerApp.port_retries=0", "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=",
             "--ServerApp.password=", f"--ServerApp.root_dir={notebooks}",
             "--LabApp.expose_app_in_browser=True"],
            env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if server.poll() is not None:
                pytest.fail(f"jupyter lab exited with {server.returncode}:\n{_log_tail(log)}", pytrace=False)
            try:
                with urllib.request.urlopen(f"{url}/api/status", timeout=5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"jupyter lab did not answer in {SERVER_START_S} s:\n{_log_tail(log)}",
                                pytrace=False)
                time.sleep(1)
        yield url
    finally:
        server.terminate()  # the server shuts its kernels down on SIGTERM
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()



# The open notebook's kernel, once the page has a notebook with a running session.
KERNEL_JS = """() => { const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  return panel && panel.sessionContext && panel.sessionContext.session
         && panel.sessionContext.session.kernel; }"""
CELLS_JS = "() => window.jupyterapp.shell.currentWidget.content.widgets"
# Each cell's type, execution count, errors and whether its source is hidden; markdown cells'
# text. The reader's scrolling comes first, so the cell's text is laid out (innerText).
CELL_JS = """(i) => { const cell = (%s)()[i], model = cell.model;
  const seen = {index: i, type: model.type, hidden: cell.inputHidden, errors: [],
                text: model.type === 'markdown' ? cell.node.innerText : ''};
  const area = cell.node.querySelector('.jp-OutputArea');
  seen.output = area ? area.innerText : '';
  seen.code = area ? Array.from(area.querySelectorAll('code')).map(c => c.innerText) : [];
  if (model.type === 'code') {
    seen.executionCount = model.executionCount;
    for (let k = 0; k < model.outputs.length; k++) {
      const out = model.outputs.get(k).toJSON();
      if (out.output_type === 'error') seen.errors.push(out.ename + ': ' + out.evalue);
    }
  }
  return seen; }""" % CELLS_JS
SHOWS_TEXT_JS = """(i) => { const area = (%s)()[i].node.querySelector('.jp-OutputArea');
  return area !== null && area.innerText.trim().length > 0; }""" % CELLS_JS
ALL_RAN_JS = ("() => (%s)().every(c => c.model.type !== 'code' || c.model.executionCount !== null)"
              % CELLS_JS)
# The kernel's text for each field, asked for as user_expressions (the kernel's own format()).
EVALUATE_JS = """async (expressions) => {
  const kernel = (%s)();
  const request = {code: '', silent: true, store_history: false, user_expressions: {}};
  expressions.forEach((e, i) => { request.user_expressions['e' + i] = e; });
  const reply = await kernel.requestExecute(request).done;
  return expressions.map((e, i) => reply.content.user_expressions['e' + i]); }""" % KERNEL_JS
PROSE_CALL = "fl.prose"


def prose_fields(notebook: Path) -> dict[int, list[tuple[str, str]]]:
    """The fields of each prose cell (a code cell that calls fl.prose with an f-string), by cell
    index, in reading order: (the field as an f-string of its own, the expression in it)."""
    spots = {}
    for i, cell in enumerate(json.loads(notebook.read_text())["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or not source.startswith(PROSE_CALL + "("):
            continue
        text = ast.parse(source).body[0].value.args[0]
        assert isinstance(text, ast.JoinedStr), f"{notebook.name} cell {i}: fl.prose takes an f-string"
        spots[i] = [(ast.unparse(ast.JoinedStr(values=[field])), ast.unparse(field.value))
                    for field in text.values if isinstance(field, ast.FormattedValue)]
    return spots


def _kernel_value(answer: dict, expression: str) -> str:
    """The text of one user_expressions answer (the repr of a str), or an AssertionError that says why not."""
    assert answer["status"] == "ok", f"the kernel could not evaluate {expression!r}: {answer}"
    return ast.literal_eval(answer["data"]["text/plain"])


def rendering_problems(cell: dict, expressions: list[str], values: list[str]) -> list[str]:
    """What is wrong with one prose cell as shown: its source in view, an expression shown as code,
    or a value missing or out of order (each value must follow the previous one, as whole words)."""
    where = f"{CHAPTER.name}, prose cell {cell['index']}"
    problems = [] if cell.get("hidden", True) else [f"{where}: shows its source; hide it (jupyter.source_hidden)"]
    problems += [f"{where}: shows {{eval}} as text"] if "{eval}" in cell["text"] else []
    problems += [f"{where}: shows the expression {e!r} instead of its value" for e in expressions
                 if e in cell["code"]]
    text, start = " ".join(cell["text"].split()), 0
    for expression, value in zip(expressions, values):
        found = re.compile(rf"(?<![\w.]){re.escape(' '.join(value.split()))}(?!\w)").search(text, start)
        if found is None:
            problems.append(f"{where}: {expression!r} is {value!r} in the kernel, but the text after "
                            f"{text[max(start - 40, 0):start]!r} does not show it: {text[start:start + 300]!r}")
        else:
            start = found.end()
    return problems


@pytest.mark.browser
def test_the_chapter_runs_in_jupyterlab_and_its_prose_numbers_render(lab_server, chromium, screenshots_dir):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    spots = prose_fields(CHAPTER)
    assert spots, f"{CHAPTER.name} has no prose cells to check"
    tab = chromium.new_page(viewport={"width": 1280, "height": 1000})
    try:
        # As a reader: open the chapter, wait for its kernel to start, then Run > Run All Cells.
        tab.goto(f"{lab_server}/lab/tree/chapters/{CHAPTER.name}", wait_until="domcontentloaded")
        tab.wait_for_function(f"() => {{ const k = ({KERNEL_JS})(); return k && k.status === 'idle'; }}",
                              timeout=SERVER_START_S * 1000, polling=500)
        tab.locator(".lm-MenuBar-item").filter(has_text=re.compile(r"^Run$")).click()
        tab.locator(".lm-Menu-item").filter(has_text="Run All Cells").first.click()
        # ... reads the first paragraph with numbers as soon as its cell has run (later cells may
        # still be running), and watches until the last cell has its count.
        first = min(spots)
        tab.wait_for_function(f"(i) => ({CELLS_JS})()[i].model.executionCount !== null", arg=first,
                              timeout=RUN_ALL_S * 1000, polling=500)
        tab.evaluate(f"(i) => ({CELLS_JS})()[i].node.scrollIntoView()", first)
        try:  # the Markdown renders a moment after the output arrives
            tab.wait_for_function(SHOWS_TEXT_JS, arg=first, timeout=SHOWN_S * 1000, polling=200)
        except PlaywrightTimeout:
            pytest.fail(f"{CHAPTER.name}: prose cell {first} ran but showed no text within {SHOWN_S} s",
                        pytrace=False)
        early = tab.evaluate(CELL_JS, first)
        tab.wait_for_function(ALL_RAN_JS, timeout=RUN_ALL_S * 1000, polling=1000)
        count = tab.evaluate(f"() => ({CELLS_JS})().length")
        cells = []
        for i in range(count):  # scroll through, reading each cell
            tab.evaluate(f"(i) => ({CELLS_JS})()[i].node.scrollIntoView()", i)
            if i in spots:
                tab.wait_for_timeout(200)
                tab.screenshot(path=screenshots_dir / f"jupyterlab--{CHAPTER.stem}--cell-{i}.png")
            cells.append(tab.evaluate(CELL_JS, i))
        answers = {i: tab.evaluate(EVALUATE_JS, [field for field, _ in fields]) for i, fields in spots.items()}
    finally:
        tab.close()

    failed = [f"cell {c['index']}: {error}" for c in cells for error in c["errors"]]
    assert not failed, f"{CHAPTER.name}: cells raised in JupyterLab: {failed}"
    not_run = [c["index"] for c in cells if c["type"] == "code" and c["executionCount"] is None]
    assert not not_run, f"{CHAPTER.name}: Run All did not run code cells {not_run}"
    raw = [c["index"] for c in cells if c["type"] == "markdown" and "{eval}" in c["text"]]
    assert not raw, f"{CHAPTER.name}: markdown cells {raw} show {{eval}}: write each as a prose cell"
    assert " ".join(early["output"].split()) == " ".join(cells[first]["output"].split()), (
        f"{CHAPTER.name}: prose cell {first} read {early['output'][:300]!r} when it had run, "
        f"but {cells[first]['output'][:300]!r} after Run All")
    problems = []
    for i, fields in spots.items():
        values = [_kernel_value(a, field) for a, (field, _) in zip(answers[i], fields)]
        shown = {**cells[i], "text": cells[i]["output"]}
        problems += rendering_problems(shown, [expression for _, expression in fields], values)
    assert not problems, "\n".join(problems)


def test_prose_fields_are_read_from_the_prose_cells(tmp_path):
    prose = ['fl.prose(f"""\\n', "It takes {fl.fmt_ms(t)}, {x:.1f} times.\\n", '""")']
    cells = [{"cell_type": "markdown", "source": ["{eval}`x`"]}, {"cell_type": "code", "source": ["print(1)"]},
             {"cell_type": "code", "source": prose}]
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    assert prose_fields(path) == {2: [("f'{fl.fmt_ms(t)}'", "fl.fmt_ms(t)"), ("f'{x:.1f}'", "x")]}


def test_rendering_problems_name_what_did_not_render():
    cell = {"index": 3, "text": "It takes 2.08 ms,\n7.4 times the floor.", "code": ["floor.x"]}
    assert rendering_problems(cell, ["t", "x"], ["2.08 ms", "7.4"]) == []
    problems = rendering_problems(cell, ["x", "t", "floor.x"], ["7.4", "2.08 ms", "1.0"])
    assert len(problems) == 3, problems
    assert "shows the expression 'floor.x'" in problems[0]
    assert "'t' is '2.08 ms' in the kernel" in problems[1]
    assert "'floor.x' is '1.0'" in problems[2]
    assert rendering_problems({**cell, "text": "7.45 and 17.4"}, ["x"], ["7.4"]) != []
    assert rendering_problems({**cell, "text": "{eval}`x`", "code": []}, [], []) != []
    assert "shows its source" in rendering_problems({**cell, "hidden": False}, [], [])[0]
