"""A Sphinx extension for the book's site build.

- The chapters' worked answers print. In JupyterLab a worked answer stays hidden until the
  reader asks for it (floorlab.core.checks.worked_answer). The site hides each one behind a
  toggle instead, so the build sets FLOORLAB_SHOW_ANSWERS=1 before any chapter's kernel starts;
  kernels inherit the builder's environment.
- The napkin calculator (napkin.md) gets its script and style on its own page only, and its
  numbers from the library: once every chapter has run, the build writes
  _static/napkin/napkin-data.js with the shapes of floorlab.core.shapes and the presets of
  floorlab.tools.napkin (this machine's run of the first chapter when it made one).
"""
import os
from pathlib import Path

NAPKIN_PAGE = "napkin"
NAPKIN_STATIC = "napkin/"  # under _static/
NAPKIN_DATA = NAPKIN_STATIC + "napkin-data.js"


def _file_name(entry) -> str:
    return entry[0] if isinstance(entry, (tuple, list)) else str(entry)


def _napkin_files_off_other_pages(app, config):
    """Jupyter Book adds every .js and .css under _static/ to every page: keep the napkin's off."""
    for key in ("html_js_files", "html_css_files"):
        setattr(config, key, [f for f in getattr(config, key) if not _file_name(f).startswith(NAPKIN_STATIC)])


def _napkin_files_on_its_page(app, pagename, templatename, context, doctree):
    if pagename == NAPKIN_PAGE:
        app.add_css_file(NAPKIN_STATIC + "napkin.css")
        app.add_js_file(NAPKIN_DATA)
        app.add_js_file(NAPKIN_STATIC + "napkin.js")


def _write_napkin_data(app, exception):
    """After the chapters ran (and saved their runs): the napkin's shapes and presets, as JavaScript."""
    if exception is not None or app.builder.format != "html":
        return
    from floorlab.tools.napkin import write_napkin_js

    write_napkin_js(Path(app.outdir) / "_static" / NAPKIN_DATA)


def setup(app):
    os.environ["FLOORLAB_SHOW_ANSWERS"] = "1"
    app.connect("config-inited", _napkin_files_off_other_pages)
    app.connect("html-page-context", _napkin_files_on_its_page)
    app.connect("build-finished", _write_napkin_data)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
