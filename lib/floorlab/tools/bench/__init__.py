"""Tools wing: `python -m floorlab bench`: every decode path of the book measured on this machine,
against its floor, as one Run (kind "bench"); a row that cannot run here says why."""
from .cli import main
from .run import run_bench
from .table import format_summary, format_table

__all__ = ["format_summary", "format_table", "main", "run_bench"]
