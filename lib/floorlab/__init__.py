"""floorlab: the library behind the book Below the Floor.

The chapters import what they use from here; each name lives in one module.

On a machine without a CUDA GPU, importing floorlab turns on Triton's interpreter
(TRITON_INTERPRET=1) unless the variable is already set, so the book's Triton kernels run,
slowly, on the CPU. It must be on before Triton is first imported, which importing
transformers or torch.compile does.
"""
import os

import torch

if "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
from floorlab import challenges
from floorlab.buffers import (Between, Kept, LockedRunner, StandInRunner, between, keep_first,
                              request, runner_kind, static_runner)
from floorlab.challenges import NOT_ATTEMPTED
from floorlab.device import (Bandwidths, MatmulRate, default_device, describe_device,
                             measure_bandwidth, measure_bandwidths, measure_matmul_tflops)
from floorlab.figures import (gallery_bars, gallery_scatter, gemv_sizes, roofline_plot, scaling,
                              stacked_bar, timeline)
from floorlab.graphs import DEFAULT_BUCKETS, GraphRunner, SharedBufferError, capture_graph
from floorlab.launches import LaunchCount, count_launches
from floorlab.measure import (Replay, Source, graph_replay, measure_path, no_stored_run,
                              profile_path, source_for)
from floorlab.memory import Fit, MetaCount, check_fits, count_on_meta, free_bytes, model_bytes
from floorlab.model import Qwen3Decoder, build_model, prefill_random, with_context
from floorlab.fused import fused_step, relative_error
from floorlab.paths import FIGURES_DIR
from floorlab.prose import fmt_gbps, fmt_ms, fmt_times, show_source, sig, wrap
from floorlab.prefill import (ContextPoint, PrefillPoint, achieved_tflops, attainable_tflops,
                              fixed_cost_knee_tokens, flops_per_token, format_sweep, intensity,
                              knee_intensity, measure_decode_contexts, measure_prefill,
                              observed_knee_tokens, padded_share, powers_of_two, prefill_bound_ms,
                              prefill_flops, prompt_stream, roofline_knee_tokens)
from floorlab.results import reference_figure, reference_run, run_stamp, stored_figure, stored_run
from floorlab.roofline import (BelowFloorError, Floor, bytes_per_step, check_floor, crossover_gbps,
                               decode_floor, diagnose_gap, floor_ms, gap_ms, gap_verdict,
                               kernels_per_layer_budget, looks_like_dispatch,
                               overhead_us_per_kernel, per_launch_us, predicted_ms, prefill_bytes,
                               what_if_ms)
from floorlab.runs import Row, Run, measured_row
from floorlab.sizes import (CostModel, Sizes, fit_cost_model, format_sizes, measure_sizes,
                              measured_sizes, stored_sizes, x_floor_points)
from floorlab.shapes import PRESETS, Qwen3Shape, get_shape
from floorlab.text import (WEIGHTS_ENV, Generation, generate_text, how_to_get_weights,
                           load_text_model, weights_source)
from floorlab.timelines import Timeline, kernel_table, steady_timeline
from floorlab.timing import StepTimes, Timing, time_ms, time_with_issue, unsynchronised_time_ms

from floorlab.bench import format_summary, format_table  # noqa: E402  (the bench uses the above)

__all__ = [
    "challenges", "fused_step", "relative_error", "FIGURES_DIR", "wrap", "bytes_per_step",
    "crossover_gbps", "kernels_per_layer_budget", "overhead_us_per_kernel", "predicted_ms",
    "format_summary", "format_table", "NOT_ATTEMPTED", "Bandwidths", "default_device",
    "describe_device", "measure_bandwidth", "measure_bandwidths", "stacked_bar", "timeline",
    "gallery_bars", "gallery_scatter", "fmt_times", "DEFAULT_BUCKETS", "GraphRunner",
    "capture_graph", "LaunchCount", "count_launches", "Replay", "Source", "graph_replay",
    "measure_path", "profile_path", "source_for", "Qwen3Decoder", "build_model", "prefill_random",
    "fmt_gbps", "fmt_ms", "show_source", "sig", "reference_figure", "reference_run", "run_stamp",
    "BelowFloorError", "Floor", "gap_verdict", "check_floor", "decode_floor", "diagnose_gap", "floor_ms", "gap_ms",
    "looks_like_dispatch", "per_launch_us", "what_if_ms", "Row", "Run", "measured_row", "PRESETS",
    "Qwen3Shape", "get_shape", "Timeline", "kernel_table", "steady_timeline", "StepTimes", "Timing",
    "time_ms", "time_with_issue", "unsynchronised_time_ms",
    "Between", "Kept", "LockedRunner", "StandInRunner", "between", "keep_first", "request",
    "runner_kind", "static_runner", "SharedBufferError", "no_stored_run",
    "WEIGHTS_ENV", "Generation", "generate_text", "how_to_get_weights", "load_text_model",
    "weights_source",
    "scaling", "Fit", "MetaCount", "check_fits", "count_on_meta", "free_bytes", "model_bytes",
    "CostModel", "Sizes", "fit_cost_model", "format_sizes", "measure_sizes", "measured_sizes",
    "stored_sizes", "x_floor_points",
    "MatmulRate", "measure_matmul_tflops", "roofline_plot", "with_context", "ContextPoint",
    "PrefillPoint", "achieved_tflops", "attainable_tflops", "fixed_cost_knee_tokens",
    "flops_per_token", "format_sweep", "intensity", "knee_intensity", "measure_decode_contexts",
    "measure_prefill", "observed_knee_tokens", "padded_share", "powers_of_two", "prefill_bound_ms",
    "prefill_flops", "prompt_stream", "roofline_knee_tokens", "stored_figure", "stored_run",
    "prefill_bytes", "gemv_sizes",
]
