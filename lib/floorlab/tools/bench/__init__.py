"""Tools wing: `python -m floorlab bench`: every decode path of the book measured on this machine.

Both bandwidths, each configuration's floor, the engine's paths (plain, fused, tuned, Triton; eager
and replayed) and transformers', what holds each above its floor and parity against float32, as one
Run (kind "bench"). Without CUDA it measures what the CPU runs, and each absent row says why.
"""
from .cli import main
from .run import run_bench
from .table import format_summary, format_table

__all__ = ["format_summary", "format_table", "main", "run_bench"]
