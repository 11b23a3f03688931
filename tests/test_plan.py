"""What each card runs, from floorlab.core.plan: the device properties torch reports are patched,
so every plan (T4, RTX 4090, A100, H100, H200, a ROCm card, a Mac, a CPU) is checked here
without its hardware; the facilitators' table is the function's output, the bench follows it."""
import platform
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import floorlab
from floorlab.core import plan
from floorlab.core.roofline import decode_floor
from floorlab.core.shapes import Qwen3Shape, get_shape
from floorlab.tools.bench import run_bench
from floorlab.tools.bench import settings as bench_settings
from floorlab.tools.bench.engine import NO_CPU_TRITON, NO_GRAPHS
from floorlab.tools.bench.settings import make_settings

ROOT = Path(__file__).resolve().parents[1]
GB = 1e9
TINY = Qwen3Shape(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
                  head_dim=16, vocab_size=256, tie_word_embeddings=True, name="tiny")


def fake_gpu(monkeypatch, name, capability, memory_gb, hip=None):
    """Make torch report one GPU of this name, compute capability and memory."""
    props = SimpleNamespace(name=name, major=capability[0], minor=capability[1],
                            total_memory=int(memory_gb * GB))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=None: props)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    monkeypatch.setattr(torch.version, "hip", hip)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(plan, "triton_installed", lambda: True)
    monkeypatch.setattr(plan, "triton_has_gdc", lambda: True)  # importing Triton here would end its interpreter


def fake_cpu(monkeypatch, mps=False, system="Linux", triton=True):
    """Make torch report no CUDA GPU (Apple's MPS when mps=True) on this operating system."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    monkeypatch.setattr(platform, "system", lambda: system)
    monkeypatch.setattr(plan, "triton_installed", lambda: triton)


GPUS = {  # name, capability, memory GB, hip -> dtype, graphs, triton, pdl, run on a real card
    "T4": (("Tesla T4", (7, 5), 15.8, None), (torch.float16, True, "compiled", False, False)),
    "RTX 4090": (("NVIDIA GeForce RTX 4090", (8, 9), 25.3, None),
                 (torch.bfloat16, True, "compiled", False, False)),
    "A100": (("NVIDIA A100-SXM4-80GB", (8, 0), 85.0, None),
             (torch.bfloat16, True, "compiled", False, False)),
    "H100": (("NVIDIA H100 80GB HBM3", (9, 0), 85.0, None),
             (torch.bfloat16, True, "compiled", True, False)),
    "H200": (("NVIDIA H200", (9, 0), 150.1, None), (torch.bfloat16, True, "compiled", True, True)),
    "ROCm": (("AMD Instinct MI300X", (9, 4), 206.2, "6.4.43482"),
             (torch.bfloat16, True, "off", False, False)),
}


@pytest.mark.parametrize("card", list(GPUS))
def test_each_gpu_gets_its_plan(monkeypatch, card):
    (name, capability, memory_gb, hip), expected = GPUS[card]
    fake_gpu(monkeypatch, name, capability, memory_gb, hip)
    p = plan.card_plan()
    assert (p.dtype, p.graphs, p.triton, p.pdl, p.ran_on_real_card) == expected
    assert p.card == name and p.device.type == "cuda" and p.facts.compute_capability == capability
    assert p.facts.memory_gb == pytest.approx(memory_gb, abs=0.05)
    assert p.facts.kind == ("ROCm" if hip else "CUDA")


@pytest.mark.parametrize("card", ["T4", "RTX 4090", "A100"])
def test_no_pdl_below_hopper_says_why(monkeypatch, card):
    (name, capability, memory_gb, _), _ = GPUS[card]
    fake_gpu(monkeypatch, name, capability, memory_gb)
    p = plan.card_plan("cuda")
    assert not p.pdl and "9.0" in p.pdl_note and f"{capability[0]}.{capability[1]}" in p.pdl_note


def test_a_t4_runs_float16_and_its_floor_is_unchanged(monkeypatch):
    fake_gpu(monkeypatch, "Tesla T4", (7, 5), 15.8)
    t4 = plan.card_plan()
    assert t4.dtype == torch.float16 and "bf16" in t4.dtype_note and "floor is unchanged" in t4.dtype_note
    h200 = plan.plan_for(plan.KNOWN_CARDS["H200"])
    assert t4.bytes_per_param == h200.bytes_per_param == 2
    shape = get_shape("qwen3-0.6b")
    floors = [decode_floor(shape, batch=1, prompt_tokens=32, bandwidths={"copy": 300.0, "read": 320.0},
                           dtype_bytes=p.bytes_per_param) for p in (t4, h200)]
    assert floors[0].bytes_per_step == floors[1].bytes_per_step


def test_rocm_replays_graphs_but_runs_no_kernels_and_no_pdl(monkeypatch):
    fake_gpu(monkeypatch, "AMD Instinct MI300X", (9, 4), 206.2, hip="6.4.43482")
    p = plan.card_plan()
    assert p.graphs and "HIP" in p.graphs_note
    assert p.triton == "off" and "NVIDIA" in p.triton_note
    assert not p.pdl and "9.4" in p.pdl_note, "a ROCm card's 9.4 is its gfx version, not Hopper"
    assert not p.ran_on_real_card and "ROCm" in p.ran_note


def test_hopper_without_grid_dependency_control_has_no_pdl(monkeypatch):
    fake_gpu(monkeypatch, "NVIDIA H100 80GB HBM3", (9, 0), 85.0)
    monkeypatch.setattr(plan, "triton_has_gdc", lambda: False)
    p = plan.card_plan()
    assert p.triton == "compiled" and not p.pdl and "gdc_wait" in p.pdl_note


def test_the_interpreter_on_a_gpu_turns_pdl_off(monkeypatch):
    fake_gpu(monkeypatch, "NVIDIA H200", (9, 0), 150.1)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    p = plan.card_plan()
    assert p.triton == "interpreter" and not p.pdl


def test_the_cpu_runs_bf16_in_the_interpreter(monkeypatch):
    fake_cpu(monkeypatch)
    p = plan.card_plan()
    assert p.device.type == "cpu" and p.dtype == torch.bfloat16
    assert not p.graphs and p.graphs_note == NO_GRAPHS
    assert p.triton == "interpreter" and not p.pdl and p.pdl_note
    assert p.ran_on_real_card and "CPU" in p.ran_note


def test_a_cpu_without_triton_says_how_to_get_it(monkeypatch):
    fake_cpu(monkeypatch, triton=False)
    p = plan.card_plan("cpu")
    assert p.triton == "off" and "pip install triton" in p.triton_note


def test_a_mac_runs_the_cpu_plan_and_has_not_been_run(monkeypatch):
    fake_cpu(monkeypatch, mps=True, system="Darwin", triton=False)
    p = plan.card_plan()
    assert p.device.type == "cpu" and p.facts.mps and p.dtype == torch.bfloat16
    assert not p.graphs and NO_GRAPHS in p.graphs_note and "Mac" in p.graphs_note
    assert p.triton == "off" and "macOS" in p.triton_note and not p.pdl
    assert not p.ran_on_real_card and "Mac" in str(p)


def test_asking_for_cuda_on_the_cpu_is_refused(monkeypatch):
    fake_cpu(monkeypatch)
    with pytest.raises(ValueError, match="no CUDA GPU"):
        plan.card_plan("cuda")


def test_what_ran_for_real_comes_from_the_stored_chapter_times():
    stored = plan.stored_cards()
    assert {c["device"] for c in stored.values() if c["kind"] == "cuda"} == {"NVIDIA H200"}
    ran = {label for label, facts in plan.KNOWN_CARDS.items() if plan.plan_for(facts).ran_on_real_card}
    assert ran == {"H200", "CPU (Linux)"}
    assert not any(plan.plan_for(f, cards={}).ran_on_real_card for f in plan.KNOWN_CARDS.values())
    note = plan.real_cards_note()
    assert "NVIDIA H200" in note and "CPU" in note and "inferred" in note


@pytest.mark.parametrize("label", list(plan.KNOWN_CARDS))
def test_every_plan_prints_in_84_columns_and_says_why_not(label):
    p = plan.plan_for(plan.KNOWN_CARDS[label])
    text = str(p)
    assert 5 <= len(text.splitlines()) <= 10
    assert max(len(line) for line in text.splitlines()) <= plan.WIDTH
    for on, note in ((p.graphs, p.graphs_note), (p.triton != "off", p.triton_note), (p.pdl, p.pdl_note)):
        assert on or note, f"{label}: a part that does not run must say why"
    assert p.to_dict()["dtype"] == p.dtype_name


def test_this_machine_prints_its_plan_and_matches_the_kernels_own_pdl_check():
    from floorlab.engine.kernels import pdl_supported, runtime

    p = floorlab.card_plan()
    assert max(len(line) for line in str(p).splitlines()) <= plan.WIDTH
    assert p.pdl == pdl_supported(p.device)
    assert plan.PDL_MIN_CAPABILITY == runtime.PDL_MIN_CAPABILITY
    assert "card_plan" in floorlab.__all__


def test_bad_facts_are_refused():
    with pytest.raises(ValueError, match="'cuda' or 'cpu'"):
        plan.plan_for(plan.CardFacts("Apple M2 GPU", "mps"))
    with pytest.raises(ValueError, match="compute_capability"):
        plan.plan_for(plan.CardFacts("NVIDIA H200", "cuda"))


def _page_table(text: str) -> str:
    section = text.split("## What each card runs", 1)[1]
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return "\n".join(lines[start:end])


def test_the_facilitators_page_shows_the_functions_table():
    page = (ROOT / "facilitators.md").read_text(encoding="utf-8")
    assert _page_table(page) == plan.plan_table(), (
        "facilitators.md's table differs from floorlab.core.plan.plan_table(): paste its output "
        "into the section 'What each card runs'")
    assert plan.real_cards_note() in " ".join(page.split())


def test_the_table_has_one_row_per_known_card():
    rows = plan.plan_table().splitlines()[2:]
    assert [re.match(r"\| ([^|]+) \|", r).group(1) for r in rows] == list(plan.KNOWN_CARDS)


def test_the_bench_takes_its_dtype_from_the_plan(monkeypatch):
    assert make_settings(["qwen3-0.6b"], [1], device="cpu").to_dict()["dtype"] == "bfloat16"
    fake_gpu(monkeypatch, "Tesla T4", (7, 5), 15.8)
    settings = make_settings(["qwen3-0.6b"], [1], device="cuda")
    assert settings.plan.dtype == torch.float16 and settings.to_dict()["dtype"] == "float16"


def test_the_bench_follows_the_plan_for_graphs_and_kernels(monkeypatch):
    mac = plan.plan_for(plan.KNOWN_CARDS["Mac (Apple silicon)"])
    monkeypatch.setattr(bench_settings, "card_plan", lambda device: mac)
    run = run_bench([TINY], [1], 4, repeats=1, warmup=0, device="cpu", progress=False,
                    skip_transformers=True, skip_fused=True)
    notes = {r.path: r.note for r in run.rows if r.status == "absent"}
    assert notes["plain graph"] == mac.graphs_note and NO_GRAPHS in notes["plain graph"]
    assert notes["triton eager"] == notes["triton graph"] == mac.triton_note != NO_CPU_TRITON
    assert run.settings.dtype == "bfloat16"
