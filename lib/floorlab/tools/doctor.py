"""Tools wing: `python -m floorlab doctor`: will the book run here, and how long will it take? One line
per problem says how to fix it; the exit code is 1 when one would stop the book."""
from __future__ import annotations

import platform
import re
import textwrap
from dataclasses import dataclass
from importlib import metadata

from floorlab.core import memory, paths
from floorlab.core.plan import CardPlan, card_plan, real_cards_note, stored_cards
from floorlab.core.prose import sig
from floorlab.core.reference import reference_run
from floorlab.core.shapes import PRESETS

BOOK_PRESET = "qwen3-0.6b"  # the chapters' model: too little memory for it blocks the book
CACHE_ROWS, CACHE_TOKENS = 8, 128  # the small KV cache counted on top of the weights
REQUIRED = ("torch", "transformers", "matplotlib", "jupyter-book", "nbval")
# needed to read the chapters in JupyterLab, not to run, test or build them
READING = ("jupyterlab", "jupyterlab-myst")
MIN_PYTHON = (3, 10)
CPU_WHEEL = "pip install torch --index-url https://download.pytorch.org/whl/cpu"
STATUS = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}
KIND_WORDS = {"cuda": "CUDA GPU", "cpu": "CPU (no CUDA GPU)"}  # a stored card's kind, as the report names it


@dataclass
class Check:
    """One line of the report: what was checked, ok/warn/fail, what was found and how to fix it."""

    name: str
    status: str
    found: str
    fix: str = ""

    def __str__(self) -> str:
        text = f"{STATUS[self.status]} {self.name:<18} {self.found}"
        return text + (f"\n{'':<24}fix: {self.fix}" if self.fix else "")


def gpu_checks(cuda_available: bool, cuda_build: str | None, gpu_name: str | None) -> list[Check]:
    """Whether torch sees a GPU, and whether a CUDA build of torch sits on a machine without one."""
    if cuda_available:
        return [Check("gpu", "ok", f"{gpu_name} (torch built for CUDA {cuda_build})")]
    checks = [Check("gpu", "warn", "torch sees no CUDA GPU: the book still runs, measures the CPU "
                    "for real and shows the stored H200 runs where a cell needs CUDA")]
    if cuda_build:
        checks.append(Check("torch build", "warn",
                            f"torch is built for CUDA {cuda_build} but this machine has no GPU",
                            f"it works on the CPU, but its download is several GB; for a CPU-only "
                            f"torch run: {CPU_WHEEL}"))
    return checks


def preset_need_bytes(name: str) -> int:
    """Bytes a preset needs: bf16 weights plus a KV cache of CACHE_ROWS x CACHE_TOKENS tokens."""
    return memory.model_bytes(PRESETS[name], max_batch=CACHE_ROWS, max_context=CACHE_TOKENS)


def memory_checks(free_bytes: int | None, where: str) -> list[Check]:
    """One line per preset: does it fit in free_bytes of `where` (GPU or host memory)?"""
    if free_bytes is None:
        return [Check("memory", "warn", f"could not read the free {where} memory",
                      "check it yourself: the 0.6B model needs about "
                      f"{preset_need_bytes(BOOK_PRESET) / 1e9:.1f} GB")]
    short = {"fail": "the chapters need this model: close other programs (or notebooks) holding memory, or "
                     "use a machine with more",
             "warn": f"leave it out of the bench: python -m floorlab bench --presets {BOOK_PRESET}"}
    checks = []
    for name in PRESETS:
        need = preset_need_bytes(name)
        status = "ok" if need <= free_bytes else "fail" if name == BOOK_PRESET else "warn"
        checks.append(Check(f"memory {name}", status, f"{need / 1e9:.1f} GB needed, {free_bytes / 1e9:.1f} GB "
                            f"{where} memory free", short.get(status, "")))
    return checks


def versions() -> dict[str, str | None]:
    """Installed versions of python, REQUIRED and triton (None when a package is missing)."""
    found = {"python": platform.python_version()}
    for name in (*REQUIRED, *READING, "triton"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def version_checks(found: dict[str, str | None], on_gpu: bool) -> list[Check]:
    """A line per package: missing required ones fail; JupyterLab's and Triton's warn (the kernels need Triton,
    compiled on a GPU or in its interpreter on a CPU)."""
    py = tuple(int(p) for p in found["python"].split(".")[:2])
    checks = [Check("python", "ok" if py >= MIN_PYTHON else "fail", found["python"],
                    "" if py >= MIN_PYTHON else
                    f"the book needs Python {'.'.join(map(str, MIN_PYTHON))} or newer")]
    reading = "not installed: the chapters run and the site builds, but JupyterLab cannot show them"
    for names, status, missing in ((REQUIRED, "fail", "not installed"), (READING, "warn", reading)):
        checks += [Check(name, "ok", found[name]) if found.get(name) else
                   Check(name, status, missing, "pip install -r requirements.txt") for name in names]
    if found.get("triton"):
        where = "compiled on the GPU" if on_gpu else "in Triton's interpreter on the CPU"
        checks.append(Check("triton", "ok", f"{found['triton']} (the book's kernels run {where})"))
    else:
        from floorlab.engine.kernels import how_to_get_triton

        need = "(compiled on the GPU)" if on_gpu else "on a CPU too (they run in Triton's interpreter there)"
        checks.append(Check("triton", "warn", f"not installed: the book's own kernels need it {need}",
                            how_to_get_triton()))
    return checks


def toc_chapters(root=None) -> list[str]:
    """The chapters _toc.yml lists, in its order ('below-the-floor', ...); [] outside a checkout."""
    root = paths.source_checkout() if root is None else root
    toc = root / "_toc.yml" if root is not None else None
    if toc is None or not toc.is_file():
        return []
    return re.findall(r"^\s*-\s*file:\s*chapters/([\w.-]+?)(?:\.ipynb)?\s*$", toc.read_text(), re.M)


def time_lines(cards: dict, kind: str | None = None, chapters: list[str] | None = None) -> list[str]:
    """Each chapter's run time, in minutes, as measured on the stored machines of this kind ('cuda' or
    'cpu'; None: every machine), one block per machine; a chapter never timed there says so."""
    if not cards:
        return ["  no chapter times stored (.ci/chapter-times records them)"]
    same = {slug: card for slug, card in cards.items() if kind in (None, card.get("kind"))}
    lines = []
    if not same:
        lines.append(f"  no chapter has been timed on a {KIND_WORDS.get(kind, kind)} yet; the machines "
                     "that were timed:")
        same = cards
    names = list(chapters or toc_chapters())
    names += sorted({n for card in same.values() for n in card["chapters_s"]} - set(names))
    for card in same.values():
        cores = f", {card['cpu_count']} cores" if card.get("cpu_count") else ""
        lines.append(f"  {card['device']}{cores}, {card['date'][:10]}:")
        for name in names:
            seconds = card["chapters_s"].get(name)
            took = f"{sig(seconds / 60, 2)} min" if seconds else "not timed on this machine yet"
            lines.append(f"    {name:<16} {took}")
    return lines


def bench_lines() -> list[str]:
    """How long the stored bench run took, and on what."""
    bench = reference_run("h200-bench")
    return [f"  python -m floorlab bench took {sig(bench.facts['elapsed_s'] / 60, 2)} min on {bench.label}"]


def run_checks() -> list[Check]:
    """Every check on this machine, in the report's order."""
    import torch

    on_gpu = torch.cuda.is_available()
    return (gpu_checks(on_gpu, torch.version.cuda, torch.cuda.get_device_name() if on_gpu else None)
            + memory_checks(memory.free_bytes("cuda" if on_gpu else "cpu"), "GPU" if on_gpu else "host")
            + version_checks(versions(), on_gpu))


def plan_lines(plan: CardPlan | str, cards: dict) -> list[str]:
    """What this card runs (its CardPlan, or why it could not be read), then which plans ran for real."""
    lines = ["", "what this card runs (floorlab.card_plan()):"]
    lines += [f"  {line}" for line in str(plan).splitlines()]
    lines += textwrap.wrap(real_cards_note(cards), 84, initial_indent="  ", subsequent_indent="  ")
    return lines


def this_plan() -> CardPlan | str:
    """This machine's CardPlan, or one line saying why it could not be read."""
    try:
        return card_plan()
    except Exception as err:  # the doctor reports a broken setup instead of stopping on it
        return f"could not read this card's plan: {type(err).__name__}: {err}"


def report(checks: list[Check], cards: dict, plan: CardPlan | str | None = None,
           kind: str | None = None) -> str:
    """The printed report: the checks, this card's plan, the run times measured on machines of this
    kind ('cuda' or 'cpu'; None: every stored machine), and the verdict."""
    lines = [str(c) for c in checks]
    if plan is not None:
        lines += plan_lines(plan, cards)
    where = f"on a {KIND_WORDS[kind]}" if kind in KIND_WORDS else "on each machine timed"
    lines += ["", f"run time of each chapter, measured {where}",
              "(reference/chapter-times.json; yours will differ with the machine and its load):"]
    lines += time_lines(cards, kind)
    lines += ["", "run time of the benchmark, measured:"] + bench_lines()
    blocking = [c.name for c in checks if c.status == "fail"]
    lines += ["", f"blocks the book: {', '.join(blocking)}" if blocking else
              "nothing blocks the book: build it with jupyter-book build ."]
    return "\n".join(lines)


def main() -> int:
    """Print the report; 0 when nothing blocks the book, 1 otherwise."""
    import torch

    checks = run_checks()
    kind = "cuda" if torch.cuda.is_available() else "cpu"
    print(report(checks, stored_cards(), this_plan(), kind))
    return 1 if any(c.status == "fail" for c in checks) else 0
