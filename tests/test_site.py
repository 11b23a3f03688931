"""The site builds (Sphinx raises no warning; tests/conftest.py says where the chapters ran) and every
page of it reads well in a browser: images load, prose numbers render, no error shows, no printed line overflows,
and the formulas render from the site's own copy of MathJax with the network off.

The pages come from `_toc.yml`, so a chapter added there is checked without touching this file.
"""
import importlib.util
import os
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
LAPTOP_WIDTH_PX = 1280
OVERFLOW_TOLERANCE_PX = 2
# Text that only shows when MyST left a role unrendered: {eval}, {glue} or any `{role}` + backtick.
RAW_ROLE = re.compile(r"\{(?:eval|glue)[\w:]*\}?|\{[a-z][\w:.+-]*\}`")
# What a cell error, a stderr stream or a docutils error looks like once rendered.
ERROR_SELECTORS = (".output.stderr", ".output.traceback", ".output.error", ".system-message",
                   ".problematic")
# What a cell shows when IPython has no image for the figure it returned.
FIGURE_REPR = re.compile(r"<Figure size \d+x\d+ with \d+ Axes>")
ERROR_TEXT = ("Traceback (most recent call last)", "CellExecutionError")


def toc_pages(toc_path: Path = ROOT / "_toc.yml") -> list[str]:
    """Every page of the book as its path without suffix ("intro", "chapters/below-the-floor")."""
    toc = yaml.safe_load(toc_path.read_text())
    pages = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                pages.append(entry["file"])
            for key in ("parts", "chapters", "sections"):
                walk(entry.get(key))

    walk([{key: toc[key]} for key in ("parts", "chapters", "sections") if key in toc])
    return [os.path.splitext(page)[0] for page in pages]


PAGES = toc_pages()


def _first_error(log: str) -> str:
    """The log around the first cell error (a failing cell prints it long before the build stops)."""
    marks = [i for i in (log.find("CellExecutionError"), log.find("Traceback")) if i >= 0]
    start = max(min(marks) - 1000, 0) if marks else max(len(log) - 6000, 0)
    return log[start:start + 6000]


def _page_html(built_site, page: str) -> Path:
    """The built HTML file of a page named in _toc.yml, or a failure that says the page is missing."""
    html = built_site.html / f"{page}.html"
    if not html.is_file():
        pytest.fail(f"{page}: not in the built site ({html}); see the build test for why", pytrace=False)
    return html


def test_toc_pages_are_read_from_every_level(tmp_path):
    toc = tmp_path / "_toc.yml"
    toc.write_text("format: jb-book\nroot: intro\nparts:\n  - caption: One\n    chapters:\n"
                   "      - file: a/one.ipynb\n        sections:\n          - file: a/one-more\n"
                   "  - caption: Two\n    chapters:\n      - file: two.md\n")
    assert toc_pages(toc) == ["intro", "a/one", "a/one-more", "two"]


def test_the_book_builds_without_warnings(built_site):
    assert built_site.returncode == 0, _first_error(built_site.log)


# What myst-nb logs for each notebook it executes during a build.
BUILD_EXECUTED = re.compile(r"^.*(?:Executed notebook|Starting inline execution).*$", flags=re.MULTILINE)


def test_a_build_from_nbval_executes_no_chapter_again(built_site):
    """Each chapter executes once per run: when nbval ran them all, the build only reads its notebooks."""
    if not built_site.from_nbval:
        pytest.skip("the build executed the chapters: nbval did not run every chapter in _toc.yml here")
    again = BUILD_EXECUTED.findall(built_site.log)
    assert not again, "the site build executed chapters nbval already ran:\n" + "\n".join(again)


@pytest.mark.parametrize("page", PAGES)
def test_page_html_has_no_raw_roles_or_tracebacks(built_site, page):
    text = _page_html(built_site, page).read_text()
    assert not RAW_ROLE.search(text), f"{page}: a MyST role did not render: {RAW_ROLE.search(text)[0]!r}"
    for error in ERROR_TEXT:
        assert error not in text, f"{page}: a cell raised ({error!r} is in the page)"


# In the browser: the article's text outside printed blocks, broken images, error blocks and
# printed lines wider than their box, each with enough text to find it on the page.
INSPECT_PAGE_JS = """([selectors, tolerance]) => {
  const article = document.querySelector('article') || document.body;
  const prose = article.cloneNode(true);
  prose.querySelectorAll('pre').forEach(e => e.remove());
  document.body.appendChild(prose);
  const proseText = prose.innerText;
  prose.remove();
  const brokenImages = Array.from(document.images)
    .filter(i => !i.complete || i.naturalWidth === 0).map(i => i.getAttribute('src'));
  const errors = Array.from(article.querySelectorAll(selectors.join(',')))
    .map(e => e.className + ': ' + e.innerText.trim().slice(0, 300));
  const overflowing = Array.from(article.querySelectorAll('pre'))
    .filter(e => e.scrollWidth > e.clientWidth + tolerance)
    .map(e => {
      // textContent: a folded answer's block (a closed <details>) has no innerText
      const longest = e.textContent.split('\\n').reduce((a, l) => (l.length > a.length ? l : a), '');
      const where = e.closest('.cell_output') ? 'output' : 'code';
      return `${where} block ${e.scrollWidth}px in a ${e.clientWidth}px box, ` +
             `longest line (${longest.length} chars): ${longest}`;
    });
  return {proseText, brokenImages, errors, overflowing, text: article.innerText};
}"""


def browser_problems(chromium, url: str, name: str, screenshot: Path) -> list[str]:
    """Open one page at laptop width, keep a full-page screenshot and list what reads badly on it."""
    tab = chromium.new_page(viewport={"width": LAPTOP_WIDTH_PX, "height": 900})
    try:
        tab.goto(url, wait_until="load")
        tab.evaluate("document.querySelectorAll('img[loading=lazy]').forEach(i => i.loading = 'eager')")
        tab.wait_for_function("Array.from(document.images).every(i => i.complete)", timeout=30_000)
        tab.screenshot(path=screenshot, full_page=True)
        seen = tab.evaluate(INSPECT_PAGE_JS, [list(ERROR_SELECTORS), OVERFLOW_TOLERANCE_PX])
    finally:
        tab.close()
    problems = [f"{name}: an image did not load: {src}" for src in seen["brokenImages"]]
    problems += [f"{name}: a MyST role shows unrendered: {raw!r}"
                 for raw in RAW_ROLE.findall(seen["proseText"])]
    problems += [f"{name}: error output shows: {error}" for error in seen["errors"]]
    problems += [f"{name}: a cell raised ({error!r} shows on the page)"
                 for error in ERROR_TEXT if error in seen["text"]]
    problems += [f"{name}: a figure shows as its text, not as an image: {line.strip()!r}"
                 for line in seen["text"].splitlines() if FIGURE_REPR.search(line)]
    problems += [f"{name}: a printed line overflows the content column at {LAPTOP_WIDTH_PX}px: {block}"
                 for block in seen["overflowing"]]
    return problems


@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES)
def test_page_reads_well_in_a_browser(built_site, chromium, screenshots_dir, page):
    html = _page_html(built_site, page)
    shot = screenshots_dir / f"{page.replace('/', '--')}.png"
    problems = browser_problems(chromium, html.as_uri(), page, shot)
    assert not problems, "\n".join(problems)


BAD_PAGE = """<html><body><article class="bd-article">
<p>The floor is {eval}`f"{floor_ms:.3f}"` ms and {doc}`intro` is a link.</p>
<img src="missing.png">
<div class="cell_output"><div class="output stderr"><pre>Traceback (most recent call last):
UserWarning: slow</pre></div></div>
<div class="cell_input"><pre>print(f"{x}")  # braces in code are fine</pre></div>
<div class="cell_output"><pre>%s</pre></div>
<div class="cell_output"><pre>&lt;Figure size 900x279 with 1 Axes&gt;</pre></div>
</article></body></html>"""


@pytest.mark.browser
def test_the_browser_check_names_each_problem(chromium, tmp_path):
    page = tmp_path / "bad.html"
    page.write_text(BAD_PAGE % ("0123456789 " * 40))
    problems = browser_problems(chromium, page.as_uri(), "bad", tmp_path / "bad.png")
    assert len(problems) == 7, problems
    for expected in ("missing.png", "{eval}", "{doc}`", "UserWarning: slow", "a cell raised",
                     "0123456789 0123456789", "a figure shows as its text"):
        assert any(expected in problem for problem in problems), (expected, problems)
    assert (tmp_path / "bad.png").stat().st_size > 0


# TeX that shows as typed when MathJax did not typeset a formula: its delimiters and common macros.
RAW_TEX = re.compile(r"\\[\[\]()]|\\(?:text|frac|mathrm)\b")
MATHJAX_WAIT_MS = 30_000
# MathJax's startup promise settles once the page's formulas are typeset; then count what it drew
# and read the article's text outside printed blocks.
TYPESET_JS = """async (waitMs) => {
  const mj = window.MathJax;
  const loaded = Boolean(mj && mj.startup && mj.startup.promise);
  if (loaded) await Promise.race([mj.startup.promise, new Promise(r => setTimeout(r, waitMs))]);
  const article = document.querySelector('article') || document.body;
  const prose = article.cloneNode(true);
  prose.querySelectorAll('pre').forEach(e => e.remove());
  document.body.appendChild(prose);
  const text = prose.innerText;
  prose.remove();
  return {loaded, typeset: document.querySelectorAll('mjx-container').length, text};
}"""


def offline_math_problems(chromium, url: str, name: str) -> list[str]:
    """Open one page with every request but file:, data: and blob: aborted, as in a room without
    internet, and list what shows that its formulas were not typeset."""
    tab = chromium.new_page(viewport={"width": LAPTOP_WIDTH_PX, "height": 900})
    blocked = []

    def no_network(route):
        if urlsplit(route.request.url).scheme in ("file", "data", "blob"):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    try:
        tab.route("**/*", no_network)
        tab.goto(url, wait_until="load")
        seen = tab.evaluate(TYPESET_JS, MATHJAX_WAIT_MS)
    finally:
        tab.close()
    problems = []
    if not seen["loaded"]:
        problems.append(f"{name}: MathJax did not load with the network off; requests blocked: "
                        f"{blocked or 'none'}")
    if not seen["typeset"]:
        problems.append(f"{name}: no formula was typeset (no mjx-container on the page)")
    problems += [f"{name}: a formula shows as raw TeX: {raw!r}"
                 for raw in sorted(set(RAW_TEX.findall(seen["text"])))]
    return problems


def test_the_site_loads_mathjax_from_its_own_files(built_site):
    text = _page_html(built_site, "intro").read_text()
    sources = re.findall(r"<script[^>]*\bsrc=\"([^\"]*mathjax[^\"]*)\"", text, flags=re.IGNORECASE)
    assert sources, "intro: no MathJax script in the page"
    for src in sources:
        assert not urlsplit(src).scheme, f"intro: MathJax comes from {src}, not from the site"
        # a rebuild into the same folder adds Sphinx's checksum query (?v=...)
        path = urlsplit(src).path
        assert (built_site.html / path).is_file(), f"intro: MathJax script {path} is not in the built site"


@pytest.mark.browser
def test_formulas_render_without_network(built_site, chromium):
    problems = offline_math_problems(chromium, _page_html(built_site, "intro").as_uri(), "intro")
    assert not problems, "\n".join(problems)


MATH_PAGE = """<html><head>
<script>window.MathJax = {"options": {"processHtmlClass": "math"}}</script>
<script defer src="%s"></script>
</head><body class="tex2jax_ignore"><article>
<div class="math">\\[\\text{floor} = \\frac{\\text{bytes moved per step}}{\\text{memory bandwidth}}\\]</div>
<pre>print("\\frac in code is fine")</pre>
</article></body></html>"""


@pytest.mark.browser
def test_the_offline_math_check_fails_on_mathjax_from_a_cdn(chromium, tmp_path):
    page = tmp_path / "cdn.html"
    page.write_text(MATH_PAGE % "https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js")
    problems = offline_math_problems(chromium, page.as_uri(), "cdn")
    assert len(problems) == 6, problems
    for expected in ("cdn.jsdelivr.net", "no mjx-container", "'\\\\['", "'\\\\text'", "'\\\\frac'"):
        assert any(expected in problem for problem in problems), (expected, problems)


@pytest.mark.browser
def test_the_offline_math_check_passes_on_the_bundled_mathjax(chromium, tmp_path):
    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    if spec is None:
        pytest.skip("sphinx-mathjax-offline is not installed here; pip install -r requirements.txt brings it")
    script = Path(spec.origin).parent / "static" / "mathjax" / "tex-chtml.js"
    page = tmp_path / "bundled.html"
    page.write_text(MATH_PAGE % script.as_uri())
    assert offline_math_problems(chromium, page.as_uri(), "bundled") == []
