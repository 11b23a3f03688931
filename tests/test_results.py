"""Saving and loading results, and finding the stored reference runs."""
import json
import socket
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest

from floorlab import paths
from floorlab.results import (load_json, reference_figure, reference_run, run_stamp,
                              save_json)


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
    save_json({"card": "NVIDIA H200", "floor_ms": 3.13}, runs / "h200-below-the-floor.json")
    save_json({"card": "other"}, runs / "laptop-4080.json")
    (figs / "h200-timeline.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    monkeypatch.setattr(paths, "REFERENCE_DIR", runs)
    monkeypatch.setattr(paths, "REFERENCE_FIGURES_DIR", figs)
    return runs, figs


def test_reference_run_loads_the_default(reference_dirs):
    assert reference_run()["floor_ms"] == 3.13
    assert reference_run("laptop-4080.json")["card"] == "other"


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
    assert {"date", "torch", "transformers"} <= set(stamp)
    assert datetime.fromisoformat(stamp["date"]).utcoffset() == timezone.utc.utcoffset(None)
    hostname = socket.gethostname()
    if len(hostname) >= 4:
        assert hostname not in json.dumps(stamp)
