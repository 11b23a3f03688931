"""Saving and loading results, and finding the stored reference runs."""
import json
import socket
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest

from floorlab.core import paths
from floorlab.core.files import load_json, save_json
from floorlab.core.reference import reference_figure, reference_run
from floorlab.core.runs import run_stamp


@dataclass
class Measured:
    label: str
    median_ms: float
    samples_ms: list
    where: Path


def test_round_trip_with_a_dataclass(tmp_path):
    obj = {"zeta": 1, "alpha": Measured("eager", 7.8, [7.7, 7.9], Path("/tmp/x")), "floor_ms": 3.13}
    path = save_json(obj, tmp_path / "a" / "b" / "run.json")
    assert path.is_file()
    assert load_json(path) == {
        "alpha": {"label": "eager", "median_ms": 7.8, "samples_ms": [7.7, 7.9], "where": "/tmp/x"},
        "floor_ms": 3.13,
        "zeta": 1,
    }
    text = path.read_text()
    assert text.index('"alpha"') < text.index('"floor_ms"') < text.index('"zeta"')
    assert '\n  "alpha"' in text  # pretty, two-space indent


def test_a_top_level_dataclass_and_torch_dtypes(tmp_path):
    torch = pytest.importorskip("torch")
    path = save_json(Measured("graph", 3.4, [], Path("p")), tmp_path / "m.json")
    assert load_json(path)["label"] == "graph"
    path = save_json({"dtype": torch.bfloat16, "device": torch.device("cpu")}, tmp_path / "t.json")
    assert load_json(path) == {"dtype": "torch.bfloat16", "device": "cpu"}


def test_unstorable_objects_say_how_to_fix(tmp_path):
    with pytest.raises(TypeError, match="convert it"):
        save_json({"x": object()}, tmp_path / "bad.json")


def test_load_json_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="save_json"):
        load_json(tmp_path / "nope.json")


@pytest.fixture
def reference_dirs(tmp_path, monkeypatch):
    runs, figs = tmp_path / "reference", tmp_path / "figures" / "reference"
    runs.mkdir()
    figs.mkdir(parents=True)
    stored_run("NVIDIA H200").save(runs / "h200-below-the-floor.json")
    stored_run("laptop RTX 4080").save(runs / "laptop-4080.json")
    save_json({"floor_ms": 3.13}, runs / "old-layout.json")
    (figs / "h200-timeline.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    monkeypatch.setattr(paths, "REFERENCE_DIR", runs)
    monkeypatch.setattr(paths, "REFERENCE_FIGURES_DIR", figs)
    return runs, figs


def stored_run(card):
    from floorlab.core.bandwidth import Bandwidth, Bandwidths
    from floorlab.core.roofline import decode_floor
    from floorlab.core.runs import Run, measured_row
    from floorlab.core.shapes import get_shape
    from floorlab.core.timing import Timing

    bw = Bandwidths(copy=Bandwidth("copy", 370.0, 360.0, 380.0, 10, "cuda"),
                    read=Bandwidth("read", 380.0, 375.0, 385.0, 10, "cuda"))
    floor = decode_floor(get_shape("qwen3-0.6b"), batch=1, prompt_tokens=32, bandwidths=bw)
    row = measured_row("plain eager", floor, Timing.from_samples([7.7, 7.8, 7.9]))
    return Run(kind="chapter", stamp={"date": "2026-11-30T00:00:00+00:00"},
               device={"name": card, "kind": "cuda"}, bandwidths=bw, floors=[floor], rows=[row])


def test_reference_run_loads_the_default_as_a_typed_run(reference_dirs):
    run = reference_run()
    assert run.device.name == "NVIDIA H200" and run.label == "NVIDIA H200, 2026-11-30"
    assert run.floor().floor_ms == pytest.approx(run.floor("qwen3-0.6b", 1).floor_ms)
    assert run.row("plain eager").median_ms == 7.8
    assert run.row("plain eager").x_floor == pytest.approx(7.8 / run.floor().floor_ms)
    assert reference_run("laptop-4080.json").device.name == "laptop RTX 4080"
    with pytest.raises(KeyError, match="plain eager"):
        run.row("plain graph")


def test_a_run_round_trips_through_json(tmp_path):
    from floorlab.core.runs import Run

    run = stored_run("NVIDIA H200")
    assert Run.load(run.save(tmp_path / "r.json")) == run


def test_a_run_in_an_old_layout_says_to_measure_again(reference_dirs):
    with pytest.raises(ValueError, match="measure it again"):
        reference_run("old-layout")


def test_missing_reference_run_lists_available(reference_dirs):
    with pytest.raises(FileNotFoundError) as err:
        reference_run("a100-nothing")
    message = str(err.value)
    assert "a100-nothing" in message
    assert "h200-below-the-floor" in message and "laptop-4080" in message


def test_missing_reference_run_with_none_stored(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "REFERENCE_DIR", tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="none yet"):
        reference_run()


def test_reference_figure(reference_dirs):
    _, figs = reference_dirs
    assert reference_figure("h200-timeline") == figs / "h200-timeline.png"
    with pytest.raises(FileNotFoundError, match="h200-timeline"):
        reference_figure("h200-bars")


def test_run_stamp_is_utc_and_names_no_machine():
    stamp = run_stamp()
    assert {"date", "torch", "transformers"} <= set(stamp.to_dict())
    assert datetime.fromisoformat(stamp.date).utcoffset() == timezone.utc.utcoffset(None)
    hostname = socket.gethostname()
    if len(hostname) >= 4:
        assert hostname not in json.dumps(stamp.to_dict())
