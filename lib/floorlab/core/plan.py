"""Core wing: what a card runs (dtype, CUDA graphs, the book's Triton kernels, PDL) and why not."""
from __future__ import annotations

import importlib.util
import os
import platform
import textwrap
from dataclasses import dataclass

import torch

from floorlab.core.device import describe_device, resolve_device
from floorlab.core.files import load_json
from floorlab.core.prose import sig
from floorlab.core.reference import reference_path

BF16_MIN_CAPABILITY = (8, 0)  # native bf16 arithmetic: Ampere and later
PDL_MIN_CAPABILITY = (9, 0)  # programmatic dependent launch: Hopper and later
TRITON_MIN_CAPABILITY = (7, 0)  # the oldest NVIDIA cards Triton's backend still compiles for
TIMES_FILE = "chapter-times.json"
WIDTH = 84  # CardPlan's printed lines fit this many columns
NO_GRAPHS = "CUDA graphs need a CUDA GPU"


@dataclass(frozen=True)
class CardFacts:
    """What a plan is decided from: the card's name, the torch device, capability and builds."""

    name: str
    device: str  # the torch device type the book measures on: "cuda" or "cpu"
    compute_capability: tuple[int, int] | None = None
    memory_gb: float | None = None
    hip: str | None = None  # torch.version.hip: a ROCm build, whose GPUs torch calls "cuda"
    mps: bool = False  # Apple's GPU is visible to torch (the book does not measure on it)
    system: str = "Linux"  # platform.system()
    triton: bool = True  # Triton is installed
    triton_gdc: bool = True  # Triton has grid dependency control (tl.extra.cuda.gdc_wait)
    interpreter: bool = False  # TRITON_INTERPRET=1 is set

    @property
    def kind(self) -> str:
        """'CUDA', 'ROCm' or 'CPU': what the card is, for people."""
        return "CPU" if self.device == "cpu" else ("ROCm" if self.hip else "CUDA")

    @property
    def mac(self) -> bool:
        """True on a Mac, Apple's GPU visible or not."""
        return self.mps or self.system == "Darwin"

    @property
    def capability_text(self) -> str:
        """The compute capability as torch prints it, e.g. '8.9', or '' without one."""
        cap = self.compute_capability
        return f"{cap[0]}.{cap[1]}" if cap else ""


@dataclass(frozen=True)
class CardPlan:
    """What the book runs on one card: dtype, graphs, Triton (compiled, interpreter, off), PDL."""

    facts: CardFacts
    dtype: torch.dtype
    dtype_note: str
    graphs: bool
    graphs_note: str
    triton: str
    triton_note: str
    pdl: bool
    pdl_note: str
    ran_on_real_card: bool
    ran_note: str

    @property
    def card(self) -> str:
        """The card's name, as torch reports it."""
        return self.facts.name

    @property
    def device(self) -> torch.device:
        """The torch device the book measures this card on."""
        return torch.device(self.facts.device)

    @property
    def dtype_name(self) -> str:
        """The dtype's short name: 'bfloat16', 'float16' or 'float32'."""
        return str(self.dtype).replace("torch.", "")

    @property
    def bytes_per_param(self) -> int:
        """Bytes one weight takes in the plan's dtype: what the floor counts."""
        return torch.empty((), dtype=self.dtype).element_size()

    def to_dict(self) -> dict:
        """Plain dict, ready for JSON (a Run's facts["plan"])."""
        return {"card": self.card, "kind": self.facts.kind, "device": self.facts.device,
                "compute_capability": self.facts.capability_text or None,
                "dtype": self.dtype_name, "graphs": self.graphs, "triton": self.triton,
                "pdl": self.pdl, "ran_on_real_card": self.ran_on_real_card,
                "notes": {"dtype": self.dtype_note, "graphs": self.graphs_note,
                          "triton": self.triton_note, "pdl": self.pdl_note, "ran": self.ran_note}}

    def __str__(self) -> str:
        f = self.facts
        about = [f.kind] + ([f"compute capability {f.capability_text}"] if f.capability_text else [])
        about += [f"{sig(f.memory_gb)} GB"] if f.memory_gb else []
        head = f"{self.card} ({', '.join(about)})"
        if f.mac and f.device == "cpu":
            head += ": the book measures the Mac's CPU"
        rows = [("dtype", f"{self.dtype_name}: {self.dtype_note}"),
                ("graphs", _yes_no(self.graphs, self.graphs_note)),
                ("triton", _noted(self.triton, self.triton_note)),
                ("PDL", _yes_no(self.pdl, self.pdl_note)),
                ("tested", self.ran_note)]
        out = textwrap.wrap(head, WIDTH, subsequent_indent="  ")
        for label, text in rows:
            out += textwrap.wrap(text, WIDTH, initial_indent=f"  {label:<8}",
                                 subsequent_indent=" " * 10)
        return "\n".join(out)


def _noted(value: str, note: str) -> str:
    return f"{value}: {note}" if note else value


def _yes_no(on: bool, note: str) -> str:
    return _noted("yes" if on else "no", note)


def stored_cards() -> dict:
    """The cards every chapter has run on, from reference/chapter-times.json; {} when absent."""
    path = reference_path(TIMES_FILE, "")
    return load_json(path).get("cards", {}) if path is not None else {}


def triton_has_gdc() -> bool:
    """True when the installed Triton has grid dependency control (Triton 3.4 and later)."""
    import triton.language as tl

    cuda = getattr(getattr(tl, "extra", None), "cuda", None)
    return hasattr(cuda, "gdc_wait") and hasattr(cuda, "gdc_launch_dependents")


def triton_installed() -> bool:
    """True when Triton can be imported here (looked up, not imported)."""
    return importlib.util.find_spec("triton") is not None


def read_card(device=None) -> CardFacts:
    """The facts of device (None: the book's default device) as torch reports them."""
    dev = resolve_device(device)
    interpreter = os.environ.get("TRITON_INTERPRET") == "1"
    has_triton = triton_installed()
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        cap = (int(props.major), int(props.minor))
        hip = torch.version.hip or None
        wants_gdc = has_triton and not interpreter and not hip and cap >= PDL_MIN_CAPABILITY
        return CardFacts(name=props.name, device="cuda", compute_capability=cap,
                         memory_gb=round(props.total_memory / 1e9, 1), hip=hip,
                         system=platform.system(), triton=has_triton,
                         triton_gdc=wants_gdc and triton_has_gdc(), interpreter=interpreter)
    mps_backend = getattr(torch.backends, "mps", None)
    host = describe_device(dev)
    return CardFacts(name=host.name or "CPU", device="cpu", memory_gb=host.memory_gb,
                     mps=bool(mps_backend is not None and mps_backend.is_available()),
                     system=platform.system(), triton=has_triton, triton_gdc=False,
                     interpreter=interpreter)


def _dtype(f: CardFacts) -> tuple[torch.dtype, str]:
    if f.device == "cpu":
        return torch.bfloat16, ("as every chapter builds the model; many CPUs widen it to float32 "
                                "to compute, but each weight read is still 2 bytes")
    if f.hip:
        return torch.bfloat16, "torch's ROCm build runs it on the card"
    cap = f.compute_capability
    if cap >= BF16_MIN_CAPABILITY:
        return torch.bfloat16, "native on compute capability 8.0 and up"
    return torch.float16, (f"compute capability {f.capability_text} has no native bf16; float16 "
                           "reads the same 2 bytes a weight, so the floor is unchanged")


def _graphs(f: CardFacts) -> tuple[bool, str]:
    if f.device == "cpu":
        return False, NO_GRAPHS + (" (the book does not use the Mac's GPU)" if f.mac else "")
    return True, "replayed as HIP graphs" if f.hip else ""


def _triton(f: CardFacts) -> tuple[str, str]:
    if not f.triton:
        return "off", ("Triton ships no macOS wheels, so the kernels do not run even interpreted"
                       if f.mac else "Triton is not installed: pip install triton")
    if f.device == "cpu":
        return "interpreter", "a CPU runs the kernels only in Triton's interpreter, slowly"
    if f.hip:
        return "off", "the book's kernels are tested only on NVIDIA cards"
    if f.compute_capability < TRITON_MIN_CAPABILITY:
        return "off", (f"Triton compiles for compute capability 7.0 and up; this card has "
                       f"{f.capability_text}")
    if f.interpreter:
        return "interpreter", "TRITON_INTERPRET=1 is set, so the kernels run interpreted"
    return "compiled", "" if f.compute_capability >= BF16_MIN_CAPABILITY else "in float16"


def _pdl(f: CardFacts, triton: str) -> tuple[bool, str]:
    if f.device == "cpu":
        return False, "PDL needs compiled kernels on an NVIDIA GPU of compute capability 9.0"
    if f.hip:
        return False, (f"PDL is NVIDIA's; the {f.capability_text} a ROCm card reports is its "
                       "gfx version, not a compute capability")
    if f.compute_capability < PDL_MIN_CAPABILITY:
        return False, f"PDL needs compute capability 9.0; this card has {f.capability_text}"
    if triton != "compiled":
        return False, "PDL needs the kernels compiled"
    if not f.triton_gdc:
        return False, "this Triton lacks tl.extra.cuda.gdc_wait (Triton 3.4 and later have it)"
    return True, ""


def _ran(f: CardFacts, cards: dict) -> tuple[bool, str]:
    cpus = [c for c in cards.values() if c.get("kind") == "cpu"]
    if f.device == "cpu" and not f.mac:
        if not cpus:
            return False, "no, not yet run on a real CPU"
        c = cpus[0]
        return True, (f"yes, this plan ran the chapters on a real CPU ({c['device']}, "
                      f"{c['cpu_count']} cores, {c['date'][:10]})")
    if f.mac:
        where = f"; the CPU plan ran on {cpus[0]['device']}" if cpus else ""
        return False, f"no, inferred from macOS alone{where}"
    same = [c for c in cards.values() if c.get("kind") == "cuda" and c.get("device") == f.name]
    if same and not f.hip:
        return True, f"yes, this plan ran the chapters on a real {f.name} ({same[0]['date'][:10]})"
    basis = "the ROCm build" if f.hip else f"compute capability {f.capability_text}"
    return False, f"no, inferred from {basis} alone"


def plan_for(facts: CardFacts, cards: dict | None = None) -> CardPlan:
    """The CardPlan for a card's facts; cards: stored_cards() (None reads them)."""
    if facts.device not in ("cuda", "cpu"):
        raise ValueError(f"facts.device must be 'cuda' or 'cpu', got {facts.device!r}; "
                         "read the facts with read_card(device)")
    if facts.device == "cuda" and facts.compute_capability is None:
        raise ValueError(f"a CUDA card needs its compute_capability, e.g. (9, 0); {facts.name!r} "
                         "has none: read the facts with read_card(device)")
    dtype, dtype_note = _dtype(facts)
    graphs, graphs_note = _graphs(facts)
    triton, triton_note = _triton(facts)
    pdl, pdl_note = _pdl(facts, triton)
    ran, ran_note = _ran(facts, stored_cards() if cards is None else cards)
    return CardPlan(facts, dtype, dtype_note, graphs, graphs_note, triton, triton_note, pdl,
                    pdl_note, ran, ran_note)


def card_plan(device=None) -> CardPlan:
    """What the book runs on device (None: the default device): dtype, graphs, Triton, PDL, and why not."""
    return plan_for(read_card(device))


# The cards a workshop meets, as torch reports them; facilitators.md shows their plans
KNOWN_CARDS = {
    "Colab T4": CardFacts("Tesla T4", "cuda", (7, 5)),
    "RTX 4090": CardFacts("NVIDIA GeForce RTX 4090", "cuda", (8, 9)),
    "A100": CardFacts("NVIDIA A100-SXM4-80GB", "cuda", (8, 0)),
    "H100": CardFacts("NVIDIA H100 80GB HBM3", "cuda", (9, 0)),
    "H200": CardFacts("NVIDIA H200", "cuda", (9, 0)),
    "ROCm (MI300X)": CardFacts("AMD Instinct MI300X", "cuda", (9, 4), hip="6.4"),
    "Mac (Apple silicon)": CardFacts("Apple M2", "cpu", mps=True, system="Darwin", triton=False,
                                     triton_gdc=False),
    "CPU (Linux)": CardFacts("x86-64 CPU", "cpu", triton_gdc=False),
}


def plan_table(cards: dict | None = None) -> str:
    """The markdown table of KNOWN_CARDS' plans: dtype, graphs, Triton, PDL, run on a real card."""
    stored = stored_cards() if cards is None else cards
    lines = ["| card | dtype | CUDA graphs | Triton kernels | PDL | run on a real card |",
             "|---|---|---|---|---|---|"]
    for label, facts in KNOWN_CARDS.items():
        p = plan_for(facts, stored)
        dtype = p.dtype_name if p.dtype == torch.bfloat16 else _noted(p.dtype_name, p.dtype_note)
        cells = [label, dtype, _yes_no(p.graphs, p.graphs_note), _noted(p.triton, p.triton_note),
                 _yes_no(p.pdl, p.pdl_note), p.ran_note]
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |")
    return "\n".join(lines)


def real_cards_note(cards: dict | None = None) -> str:
    """One sentence: which plans have run on a real card, and that the others are inferred."""
    stored = stored_cards() if cards is None else cards
    ordered = sorted(stored.values(), key=lambda c: c.get("kind") == "cpu")  # GPUs first
    ran = [("the CPU plan on " if c.get("kind") == "cpu" else "") + f"{c['device']} ({c['date'][:10]})"
           for c in ordered]
    if not ran:
        return "No plan has run on a real card yet: every plan is inferred from the card alone."
    return (f"Plans run on a real card: {' and '.join(ran)}; every other card's plan is "
            "inferred from its compute capability (or build) alone.")
