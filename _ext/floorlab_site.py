"""A Sphinx extension for the book's site build: the chapters' worked answers print.

In JupyterLab a worked answer stays hidden until the reader asks for it
(floorlab.core.checks.worked_answer). The site hides each one behind a toggle instead, so
the build sets FLOORLAB_SHOW_ANSWERS=1 before any chapter's kernel starts; kernels inherit
the builder's environment.
"""
import os


def setup(app):
    os.environ["FLOORLAB_SHOW_ANSWERS"] = "1"
    return {"parallel_read_safe": True, "parallel_write_safe": True}
