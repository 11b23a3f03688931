"""Tools wing: the site's napkin calculator (napkin.md) starts from this JavaScript, written at build time:
the shapes of core.shapes and presets from measured runs (yours, the stored H200, a CPU card, the laptop study)."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from floorlab.core import paths
from floorlab.core.files import write_whole
from floorlab.core.prose import fmt_ms
from floorlab.core.reference import reference_run
from floorlab.core.roofline import floor_ms, gap_ms, overhead_us_per_kernel, per_launch_us
from floorlab.core.runs import Run
from floorlab.core.shapes import PRESETS, Qwen3Shape
from floorlab.studies.gallery_cards import GALLERY_DIR, NotACard, read_card

CHAPTER_RUN = "below-the-floor.json"  # what the first chapter saves in figures/
STORED_RUN = "h200-below-the-floor"
SHAPE_FIELDS = ("hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads", "head_dim",
                "vocab_size", "tie_word_embeddings")
GLOBAL_NAME = "FLOORLAB_NAPKIN"  # the page reads window.FLOORLAB_NAPKIN
# The laptop study, as the first chapter quotes it: 1.19 GB of weights at 380 GB/s, an eager
# step of 7.80 ms and a replayed one of about 3.4 ms, with 28 layers of about 10 operations.
LAPTOP_WEIGHT_BYTES = 1.19e9
LAPTOP_GBPS = 380.0
LAPTOP_EAGER_MS = 7.80
LAPTOP_REPLAY_MS = 3.4
LAPTOP_LAYERS = 28
LAPTOP_OPS_PER_LAYER = 10


@dataclass(frozen=True)
class Preset:
    """One click's worth of inputs for the calculator, and where they were measured."""

    key: str
    label: str  # the button's words
    note: str  # the sentence under the buttons: where the numbers come from
    origin: str  # "yours" (the run of the machine that builds the site), "stored" or "quoted"
    model: str
    batch: int
    context_tokens: int  # tokens already in the cache (decode_floor's prompt_tokens)
    bandwidth_gbps: float
    kernels_per_layer: float
    dispatch_us: float
    replay_us: float | None  # None where the run replayed no graph (a CPU has none)
    eager_ms: float | None = None
    replay_ms: float | None = None


def shape_table(presets: dict[str, Qwen3Shape] = PRESETS) -> dict[str, dict]:
    """Each preset shape's sizes by name, the fields the page's byte counts need."""
    return {name: {key: getattr(shape, key) for key in SHAPE_FIELDS} for name, shape in presets.items()}


def preset_from_run(run: Run, key: str, origin: str) -> Preset:
    """The calculator's inputs as a run measured them; the replay's cost per kernel beyond the floor comes
    from its busy time, as the chapter on a fast card prices it."""
    floor = run.floors[0]
    eager = run.row("eager", floor.preset, floor.batch)
    counted = run.launches.get("eager")
    if counted is None or not counted.kernels:
        raise ValueError(f"the run {run.label} counted no eager launches; measure it again with the "
                         "first chapter or python -m floorlab measure")
    replay = run.timelines.get("graph replay")
    replay_row = run.find("graph replay", floor.preset, floor.batch)
    replay_us = None
    if replay is not None and replay.kernels:
        replay_us = overhead_us_per_kernel(replay.busy_ms, floor.floor_ms, replay.kernels)
    replay_ms = replay_row.median_ms if replay_row is not None else None
    note = _note(run, origin, eager.median_ms, replay_ms, replay_us is not None)
    label = f"{_device_name(run)} ({'built this site' if origin == 'yours' else 'stored run'})"
    return Preset(key=key, label=label, note=note, origin=origin, model=floor.preset,
                  batch=floor.batch, context_tokens=floor.visible_tokens - 1, bandwidth_gbps=floor.bandwidth_gbps,
                  kernels_per_layer=counted.per_layer,
                  dispatch_us=per_launch_us(gap_ms(eager.median_ms, floor.floor_ms), counted.kernels),
                  replay_us=replay_us, eager_ms=eager.median_ms, replay_ms=replay_ms)


def laptop_preset() -> Preset:
    """The laptop study's RTX 4080: its gaps to the floor spread over 28 × 10 launches."""
    floor = floor_ms(LAPTOP_WEIGHT_BYTES, LAPTOP_GBPS)
    launches = LAPTOP_LAYERS * LAPTOP_OPS_PER_LAYER
    note = (f"The laptop study's figures, as the first chapter quotes them: {LAPTOP_GBPS:.0f} GB/s, "
            f"{LAPTOP_LAYERS} layers of about {LAPTOP_OPS_PER_LAYER} operations, an eager token in "
            f"{fmt_ms(LAPTOP_EAGER_MS)} and a replayed one in about {fmt_ms(LAPTOP_REPLAY_MS, 2)}.")
    return Preset(key="laptop", label="Laptop RTX 4080 (the laptop study)", note=note, origin="quoted",
                  model="qwen3-0.6b", batch=1, context_tokens=32, bandwidth_gbps=LAPTOP_GBPS,
                  kernels_per_layer=float(LAPTOP_OPS_PER_LAYER),
                  dispatch_us=per_launch_us(gap_ms(LAPTOP_EAGER_MS, floor), launches),
                  replay_us=per_launch_us(gap_ms(LAPTOP_REPLAY_MS, floor), launches),
                  eager_ms=LAPTOP_EAGER_MS, replay_ms=LAPTOP_REPLAY_MS)


def own_run(figures_dir=None) -> Run | None:
    """This machine's run of the first chapter (figures/below-the-floor.json), or None."""
    path = Path(figures_dir or paths.FIGURES_DIR) / CHAPTER_RUN
    if not path.is_file():
        return None
    try:
        return Run.load(path)
    except (ValueError, KeyError, TypeError):  # another layout, or cut off: the stored run stands in
        return None


def stored_cpu_run(folder=None) -> Run | None:
    """The first CPU card stored in the gallery (results/gallery/), or None."""
    folder = Path(folder) if folder is not None else GALLERY_DIR
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            card = read_card(path)
        except NotACard:
            continue
        if card.run.device.kind == "cpu":
            return card.run
    return None


def _device_name(run: Run) -> str:
    """The run's device as a reader names it: 'Intel Xeon Processor', not 'Intel(R) Xeon(R) Processor'."""
    name = str(run.device.name or "an unnamed device")
    for mark in ("(R)", "(TM)", "(r)", "(tm)"):
        name = name.replace(mark, "")
    return " ".join(name.split())


def _note(run: Run, origin: str, eager_ms: float, replay_ms: float | None, replay_priced: bool) -> str:
    """Where a run's numbers come from, and what its steps took, in one or two sentences."""
    date = str(run.stamp.date or "")[:10]
    name = _device_name(run)
    head = (f"The machine that built this site: {name}, measured on {date}" if origin == "yours"
            else f"A stored run, not the machine that built this site: {name}, measured on {date}")
    steps = f"eager {fmt_ms(eager_ms)}" + (f", replayed {fmt_ms(replay_ms)}" if replay_ms else "")
    text = f"{head}. Its steps took {steps} per token."
    if not replay_priced:
        text += " It replayed no graph (CUDA graphs need a CUDA GPU), so the replay starts at eager's price."
    return text


def presets(figures_dir=None, gallery_dir=None) -> list[Preset]:
    """The calculator's presets, the one it starts from first: this machine's run when there is
    one, then the stored H200 run, a stored CPU card and the laptop study."""
    found = []
    mine = own_run(figures_dir)
    if mine is not None:
        found.append(preset_from_run(mine, "yours", "yours"))
    stored = reference_run(STORED_RUN)
    found.append(preset_from_run(stored, "h200", "stored"))
    cpu = stored_cpu_run(gallery_dir)
    if cpu is not None:
        found.append(preset_from_run(cpu, "cpu", "stored"))
    found.append(laptop_preset())
    return found


def write_napkin_js(path, figures_dir=None, gallery_dir=None) -> Path:
    """Write the shapes and the presets to path (folders made) as window.FLOORLAB_NAPKIN; returns the path."""
    data = {"shapes": shape_table(), "presets": [asdict(p) for p in presets(figures_dir, gallery_dir)]}
    body = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False)
    text = (f"// Written by floorlab.tools.napkin when the site was built; do not edit.\n"
            f"window.{GLOBAL_NAME} = {body};\n").encode("utf-8")
    return write_whole(path, lambda stream: stream.write(text))
