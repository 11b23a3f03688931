"""The chapter works in JupyterLab as a reader runs it: Run All executes every cell, and
jupyterlab-myst fills each `{eval}` number in the prose with the value the kernel computes.

A JupyterLab server runs headless on a free port, with no token and its own settings (the
notebook keeps every cell in the page), on a copy of the chapter; Chromium drives it.
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
# Every cell stays in the page (not only those scrolled into view), so all can be read.
LAB_SETTINGS = {"@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
                "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
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
# Each code cell's execution count and errors; each markdown cell's rendered text and inline code.
CELLS_JS = """() => window.jupyterapp.shell.currentWidget.content.widgets.map((cell, index) => {
  const model = cell.model, seen = {index, type: model.type, text: cell.node.innerText, errors: []};
  seen.code = Array.from(cell.node.querySelectorAll('code')).map(c => c.innerText);
  if (model.type === 'code') {
    seen.executionCount = model.executionCount;
    for (let i = 0; i < model.outputs.length; i++) {
      const out = model.outputs.get(i).toJSON();
      if (out.output_type === 'error') seen.errors.push(out.ename + ': ' + out.evalue);
    }
  }
  return seen; })"""
# The kernel's str() of each expression, asked for as jupyterlab-myst asks (user_expressions).
EVALUATE_JS = """async (expressions) => {
  const kernel = (%s)();
  const request = {code: '', silent: true, store_history: false, user_expressions: {}};
  expressions.forEach((e, i) => { request.user_expressions['e' + i] = 'str(' + e + ')'; });
  const reply = await kernel.requestExecute(request).done;
  return expressions.map((e, i) => reply.content.user_expressions['e' + i]); }""" % KERNEL_JS
EVAL_ROLE = re.compile(r"\{eval\}`([^`]+)`")


def eval_spots(notebook: Path) -> dict[int, list[str]]:
    """The {eval} expressions of each markdown cell that has some, by cell index, in reading order."""
    cells = json.loads(notebook.read_text())["cells"]
    spots = {i: EVAL_ROLE.findall("".join(cell["source"])) for i, cell in enumerate(cells)
             if cell["cell_type"] == "markdown"}
    return {i: found for i, found in spots.items() if found}


def _kernel_value(answer: dict, expression: str) -> str:
    """The text of one user_expressions answer (the repr of a str), or an AssertionError that says why not."""
    assert answer["status"] == "ok", f"the kernel could not evaluate {expression!r}: {answer}"
    return ast.literal_eval(answer["data"]["text/plain"])


def rendering_problems(cell: dict, expressions: list[str], values: list[str]) -> list[str]:
    """What is wrong with one rendered markdown cell: an expression still shown, or a value missing
    or out of order (each value must follow the previous one, as whole words)."""
    where = f"{CHAPTER.name}, markdown cell {cell['index']}"
    problems = [f"{where}: shows {{eval}} as text"] if "{eval}" in cell["text"] else []
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
    spots = eval_spots(CHAPTER)
    assert spots, f"{CHAPTER.name} has no {{eval}} numbers to check"
    tab = chromium.new_page(viewport={"width": 1280, "height": 1000})
    try:
        tab.goto(f"{lab_server}/lab/tree/chapters/{CHAPTER.name}", wait_until="domcontentloaded")
        tab.wait_for_function(f"() => {{ const k = ({KERNEL_JS})(); return k && k.status === 'idle'; }}",
                              timeout=SERVER_START_S * 1000, polling=500)
        tab.evaluate("() => { window.ranAll = undefined; window.jupyterapp.commands"
                     ".execute('notebook:run-all-cells').then(ok => { window.ranAll = ok; }); }")
        tab.wait_for_function("() => window.ranAll !== undefined", timeout=RUN_ALL_S * 1000, polling=1000)
        tab.wait_for_function(f"() => ({KERNEL_JS})().status === 'idle'", timeout=60_000, polling=500)
        ran_all = tab.evaluate("() => window.ranAll")
        cells = tab.evaluate(CELLS_JS)
        answers = {i: tab.evaluate(EVALUATE_JS, expressions) for i, expressions in spots.items()}
        for i in spots:
            tab.evaluate("(i) => window.jupyterapp.shell.currentWidget.content.widgets[i].node"
                         ".scrollIntoView()", i)
            tab.screenshot(path=screenshots_dir / f"jupyterlab--{CHAPTER.stem}--cell-{i}.png")
    finally:
        tab.close()

    failed = [f"cell {c['index']}: {error}" for c in cells for error in c["errors"]]
    assert not failed, f"{CHAPTER.name}: cells raised in JupyterLab: {failed}"
    not_run = [c["index"] for c in cells if c["type"] == "code" and c["executionCount"] is None]
    assert ran_all is True and not not_run, f"{CHAPTER.name}: Run All did not run code cells {not_run}"
    problems = []
    for i, expressions in spots.items():
        values = [_kernel_value(a, e) for a, e in zip(answers[i], expressions)]
        problems += rendering_problems(cells[i], expressions, values)
    assert not problems, "\n".join(problems)


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
