"""floorlab: the library behind the book Below the Floor, and the chapters' door.

It exports the names every chapter shares; a chapter imports its own study by name. Imports go
one way: core <- engine <- studies; figures draw from core; tools may import anything, and this
door never imports tools. Without a CUDA GPU it turns on Triton's interpreter (TRITON_INTERPRET=1)
before Triton is first imported, so the book's kernels run, slowly, on the CPU.
"""
import os

import torch

if "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

from floorlab.core.bandwidth import measure_bandwidths  # noqa: E402  (after the interpreter switch)
from floorlab.core.checks import NOT_ATTEMPTED, check_number, worked_answer  # noqa: E402
from floorlab.core.device import default_device, describe_device  # noqa: E402
from floorlab.core.paths import FIGURES_DIR  # noqa: E402
from floorlab.core.plan import card_plan  # noqa: E402
from floorlab.core.prose import fmt_gbps, fmt_ms, prose, show_source, wrap  # noqa: E402
from floorlab.core.roofline import decode_floor, floor_ms  # noqa: E402
from floorlab.core.reference import reference_figure, reference_run  # noqa: E402
from floorlab.core.runs import Run, run_stamp  # noqa: E402
from floorlab.core.shapes import get_shape  # noqa: E402
from floorlab.engine.measure import graph_replay, measure_path, profile_path  # noqa: E402
from floorlab.engine.model import build_model, prefill_random  # noqa: E402
from floorlab.figures import stacked_bar, timeline  # noqa: E402

__all__ = [
    "FIGURES_DIR", "NOT_ATTEMPTED", "Run", "build_model", "card_plan", "check_number", "decode_floor",
    "default_device", "describe_device", "floor_ms", "fmt_gbps", "fmt_ms", "get_shape",
    "graph_replay", "measure_bandwidths", "measure_path", "prefill_random", "profile_path", "prose",
    "reference_figure", "reference_run", "run_stamp", "show_source", "stacked_bar", "timeline",
    "worked_answer", "wrap",
]
