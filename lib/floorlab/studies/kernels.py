"""Studies wing: the chapter "Kernels": the GEMV against its size, one layer's kernels (here or stored), their parity
with the plain step, the stored sweep, and the published results beside them (ANCHORS); timing is engine.kernels'."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from floorlab.core.device import DeviceFacts
from floorlab.core.numbers import positive_number, whole_number
from floorlab.core.prose import sig
from floorlab.core.reference import reference_json
from floorlab.core.shapes import Qwen3Shape
from floorlab.engine.fused import relative_error
from floorlab.engine.kernels import (
    default_config,
    kernel_rows,
    kernels_unavailable,
    layer_kernel_rows,
    pdl_supported,
    shape_kwargs,
    triton_step,
)
from floorlab.engine.kernels.timing import SIZES, sweep_sizes
from floorlab.engine.measure import source_for


@dataclass(frozen=True)
class StoredSweep:
    """What the chapter reads of the stored kernel sweep (python -m floorlab sweep, kept as reference/<name>.json)."""
    name: str
    device: DeviceFacts
    batches: tuple[int, ...]
    floor_gbps: float  # the bandwidth every step row is floored with
    size_rows: list[dict]  # sweep_sizes rows
    step_rows: list[dict]  # whole steps
    variant_rows: list[dict]  # whole steps with one launch setting changed from the default
    best_configs: dict[str, dict]  # '<preset> <gemv> b<batch>': the fastest GemvConfig, as a dict

    @property
    def device_name(self) -> str:
        return self.device.name

    def best(self, preset: str, gemv: str, batch: int) -> dict:
        """The fastest config the sweep found for one GEMV at one batch, as GemvConfig.to_dict()."""
        key = f"{preset} {gemv} b{batch}"
        if key not in self.best_configs:
            raise ValueError(f"the stored sweep {self.name!r} has no best config for {gemv!r} of {preset!r} at "
                             f"batch {batch!r}; it has {sorted(self.best_configs)}")
        return self.best_configs[key]


def stored_sweep(name: str = "h200-kernel-sweep") -> StoredSweep:
    data = reference_json(name)
    return StoredSweep(name, DeviceFacts.from_dict(data["device"]), tuple(data["batches"]), data["floor_gbps"],
                       data["size_rows"], data["step_rows"], data["variant_rows"], data["best"])


# Llama-3.2-1B-Instruct's public config: 16 layers, hidden 2048, 32 query and 8 KV heads of 64,
# intermediate 8192, vocabulary 128256, the output head tied to the embedding (counted once), bf16
LLAMA_1B_BYTES = 2 * (16 * (2048 * (2048 + 512 + 512 + 2048) + 3 * 2048 * 8192 + 2 * 2048) + 128256 * 2048 + 2048)
RESULTS_URL = "https://github.com/msaroufim/megakernels-vs-cuda-graphs/blob/main/llama/docs/RESULTS.md"


@dataclass(frozen=True)
class Anchor:
    """One published batch-1 decode result, as its source states it: the step in µs, on what."""
    label: str
    source_url: str
    model: str
    card: str
    step_us: float  # one decode step (one token), µs
    weight_bytes: int  # the weights one step streams
    layers: int
    bandwidth_gbps: float | None  # the bandwidth the source measured; None where it states none

    def floor_us(self, bandwidth_gbps: float | None = None) -> float:
        """weight_bytes over the source's bandwidth, or over bandwidth_gbps where it states none (µs)."""
        gbps = positive_number(self.bandwidth_gbps or bandwidth_gbps, "bandwidth_gbps",
                               hint=f"{self.label}: its source states no bandwidth, so pass bandwidth_gbps "
                                    f"measured on a {self.card}")
        return self.weight_bytes / (gbps * 1e3)

    def beyond_us_per_layer(self, bandwidth_gbps: float | None = None) -> float:
        """(step - floor) / layers: µs per layer beyond what the weights cost at the bandwidth."""
        return (self.step_us - self.floor_us(bandwidth_gbps)) / self.layers

    def arithmetic(self, bandwidth_gbps: float | None = None) -> str:
        floor = self.floor_us(bandwidth_gbps)
        return (f"{sig(self.weight_bytes / 1e9)} GB ÷ {sig(self.bandwidth_gbps or bandwidth_gbps)} GB/s = "
                f"{sig(floor)} µs; ({sig(self.step_us)} − {sig(floor)}) ÷ {self.layers} layers = "
                f"{sig(self.beyond_us_per_layer(bandwidth_gbps))} µs per layer")


ANCHORS = (
    Anchor("CUDA graphs + PDL over ordinary kernels", RESULTS_URL, "Llama-3.2-1B-Instruct", "H200",
           step_us=794.74, weight_bytes=LLAMA_1B_BYTES, layers=16, bandwidth_gbps=None),
    Anchor("Hazy Research's megakernel, run in the same study", RESULTS_URL, "Llama-3.2-1B-Instruct", "H200",
           step_us=759.83, weight_bytes=LLAMA_1B_BYTES, layers=16, bandwidth_gbps=None),
    Anchor("a Qwen3-0.6B megakernel", "https://blog.alpindale.net/posts/5090_decode_optimization", "Qwen3-0.6B",
           "RTX 5090", step_us=1000.0, weight_bytes=1_192_000_000, layers=28, bandwidth_gbps=1674.0),
)


def beyond_per_layer_us(step_ms: float, floor_ms: float, num_layers: int) -> float:
    """(step_ms - floor_ms) * 1000 / num_layers: µs per layer beyond the bytes."""
    step_ms, floor_ms = positive_number(step_ms, "step_ms"), positive_number(floor_ms, "floor_ms")
    return (step_ms - floor_ms) * 1e3 / whole_number(num_layers, "num_layers")


def noise_notes(timings: dict) -> str:
    """One warning line per noisy timing ({what: Timing or Row}), '' when none is noisy."""
    notes = [getattr(t, "timing", t).noise_note(what) for what, t in timings.items()
             if getattr(t, "timing", t) is not None]
    return "\n".join(note for note in notes if note)


def size_sweep_here(device, shape: Qwen3Shape, *, read_gbps: float, reference: str):
    """(rows, source): the size sweep on this GPU; on a CPU the stored run's rows, after the same code has run in
    Triton's interpreter on two tiny sizes (where Triton is installed)."""
    source = source_for(device, reference)
    if source.here:
        config = default_config(1, **shape_kwargs(shape)).qkv
        return sweep_sizes(SIZES, shape.hidden_size, device=device, dtype=torch.bfloat16, read_gbps=read_gbps,
                           copies=shape.num_layers, warmup=3, repeats=20, pdl_on=pdl_supported(device),
                           config=config), source
    if not kernels_unavailable(device):
        sweep_sizes((16, 64), 64, device=device, dtype=torch.float32, read_gbps=read_gbps, copies=2, warmup=0,
                    repeats=1, pdl_on=False)
    return source.run.facts["size_rows"], source


def layer_kernels_here(model, positions: torch.Tensor, *, read_gbps: float, reference: str):
    """(rows, source): layer_kernel_rows on this GPU; on a CPU, the stored run's rows, as KernelRows."""
    source = source_for(model.embed.device, reference)
    if source.here:
        return layer_kernel_rows(model, positions, read_gbps=read_gbps, warmup=3, repeats=20), source
    return kernel_rows(source.run.facts["layer_kernels"]), source


def parity_with_plain(model, tokens: torch.Tensor, positions: torch.Tensor) -> float:
    """Relative error of the kernels' logits against model.decode_step from the same cache, which is left as the
    plain step leaves it."""
    k0, v0 = model.k_cache.clone(), model.v_cache.clone()
    expected = model.decode_step(tokens, positions).float()
    k1, v1 = model.k_cache.clone(), model.v_cache.clone()
    model.k_cache.copy_(k0)
    model.v_cache.copy_(v0)
    got = triton_step(model)(tokens, positions).float()
    model.k_cache.copy_(k1)
    model.v_cache.copy_(v1)
    return relative_error(got, expected)
