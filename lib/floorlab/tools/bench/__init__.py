"""Tools wing: one command that measures every decode path of the book on this machine: `python -m
floorlab bench`.

It measures both bandwidths, computes the floor of each configuration, times the
book's engine (plain, fused with Inductor, fused with Inductor's tuning where asked for,
and the book's own Triton kernels, each eager and replayed in a CUDA graph) and transformers
(eager, CUDA graph, torch.compile reduce-overhead), says what holds each path
above its floor, checks parity against a float32 reference, and returns a
floorlab.core.runs.Run (kind "bench"). On a machine without CUDA it measures what the
CPU can run and says, row by row, why the rest is absent.
"""
from .cli import main
from .run import run_bench
from .table import format_summary, format_table

__all__ = ["format_summary", "format_table", "main", "run_bench"]
