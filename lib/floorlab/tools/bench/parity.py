"""Tools wing: parity: each bf16 path and transformers' bf16 against transformers in float32 with the
same weights (two bf16 models differ by both their roundings); the engine in float32 must match it."""
from __future__ import annotations

import torch

from floorlab.core.memory import free_bytes
from floorlab.engine.fused import relative_error
from floorlab.engine.hf import HFDecoder
from floorlab.engine.model import Qwen3Decoder

from .rows import decode_logits

BF16_MARGIN = 1.25  # the engine's bf16 may be this much farther from float32 than transformers' bf16
FP32_TOLERANCE = 1e-3  # engine float32 vs transformers float32, relative L2
MEMORY_MARGIN = 1.1  # free GPU memory a float32 copy needs, over its weight bytes
METRIC = "L2 norm of the logit difference over the L2 norm of the float32 reference's logits"


def memory_shortfall(shape, device, copies: int = 1) -> str:
    """'' when `copies` float32 copies of the weights fit on the device, else a sentence saying why not."""
    device = torch.device(device)
    if device.type != "cuda":
        return ""
    need = copies * shape.weight_bytes(4) * MEMORY_MARGIN  # float32 weights
    free = free_bytes(device)  # the book's one answer to "how much is free"
    if free is None or free >= need:
        return ""
    return (f"the float32 reference needs {need / 1e9:.1f} GB of GPU memory and {free / 1e9:.1f} GB "
            "are free; run the bench with fewer presets at a time or on a larger GPU")


def upcast(model) -> Qwen3Decoder:
    """The engine in float32 with model's weights (an engine or an HFDecoder), for one decode row."""
    state = model.hf_state_dict() if isinstance(model, Qwen3Decoder) else model.model.state_dict()
    ours = Qwen3Decoder(model.shape, max_batch=model.max_batch, max_context=model.max_context,
                        device=model.device, dtype=torch.float32)
    ours.load_state_dict_hf(state)
    return ours


def float32_logits(ours32: Qwen3Decoder, data) -> dict[str, torch.Tensor | str]:
    """{"engine_fp32", "hf_fp32"} logits of data's decode step; "hf_fp32" holds a reason when memory is short."""
    out: dict[str, torch.Tensor | str] = {"engine_fp32": decode_logits(ours32, data)}
    short = memory_shortfall(ours32.shape, ours32.device)
    if short:
        out["hf_fp32"] = short
        return out
    hf32 = HFDecoder.from_decoder(ours32)
    out["hf_fp32"] = decode_logits(hf32, data)
    return out


def parity_facts(bf16: dict[str, torch.Tensor], fp32: dict[str, torch.Tensor | str]) -> dict:
    """Relative errors of each bf16 path against transformers' float32 logits, and the verdict."""
    reference = fp32.get("hf_fp32")
    facts = {"metric": METRIC, "bf16_margin": BF16_MARGIN, "fp32_tolerance": FP32_TOLERANCE}
    if not isinstance(reference, torch.Tensor):
        facts.update(passed=None, note=f"no float32 reference: {reference}")
        return facts
    for name, logits in bf16.items():
        facts[f"{name}_bf16_vs_fp32"] = relative_error(logits, reference)
    facts["engine_fp32_vs_hf_fp32"] = relative_error(fp32["engine_fp32"], reference)
    hf = facts.get("hf_bf16_vs_fp32")
    limit = BF16_MARGIN * hf if hf is not None else None
    checks = [facts["engine_fp32_vs_hf_fp32"] <= FP32_TOLERANCE]
    if limit is not None:
        checks += [facts[f"{n}_bf16_vs_fp32"] <= limit for n in bf16 if n != "hf"]
    facts["bf16_limit"] = limit
    facts["passed"] = all(checks)
    facts["note"] = ("" if limit is not None else
                     "transformers' bf16 logits are missing, so only float32 agreement is checked")
    return facts


def summary(facts: dict) -> str:
    """One line: each error against the float32 reference and the verdict."""
    if facts.get("passed") is None:
        return facts.get("note") or facts.get("error", "not measured")
    shown = ", ".join(f"{k} {v:.2e}" for k, v in facts.items() if k.endswith("_vs_fp32"))
    rule = f"engine bf16 <= {facts['bf16_margin']}x hf bf16" if facts.get("bf16_limit") else ""
    rule += f"{'; ' if rule else ''}fp32 within {facts['fp32_tolerance']:.0e}"
    verdict = "PASS" if facts["passed"] else "FAIL"
    return f"{verdict} {shown}, engine fp32 vs hf fp32 {facts['engine_fp32_vs_hf_fp32']:.2e} ({rule})"
