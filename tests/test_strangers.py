"""Strangers' files are read defensively: regular files only, under a size limit, and each card's
numbers checked against the physics (bytes per step of its preset, known presets, plausible times and
bandwidths, dates that parse, one row per path). Anything else is skipped with its reason."""
import dataclasses
import os
import threading

import pytest

from floorlab.core.files import UnreadableFile, read_regular, save_json
from floorlab.core.reference import reference_run
from floorlab.studies import gallery_cards
from test_gallery import card_run, load


@pytest.fixture
def room(tmp_path):
    folder = tmp_path / "gallery"
    folder.mkdir()
    card_run().save(folder / "h200.json")
    return folder


def _skipped(room, tmp_path, name: str) -> str:
    g = load(room, tmp_path)
    assert [c.name for c in g.cards] == ["NVIDIA H200"], g.notes()
    (skipped,) = g.skipped
    assert skipped.path.name == name
    return skipped.reason


def test_a_named_pipe_is_skipped_not_waited_on(room, tmp_path):
    os.mkfifo(room / "pipe.json")
    done = []
    worker = threading.Thread(target=lambda: done.append(_skipped(room, tmp_path, "pipe.json")), daemon=True)
    worker.start()
    worker.join(120)
    if worker.is_alive():  # unblock the reader so the test run ends
        with open(room / "pipe.json", "w"):
            pass
        pytest.fail("the gallery waited on a named pipe")
    assert "named pipe, not a regular file" in done[0]


def test_a_folder_named_like_a_card_is_skipped(room, tmp_path):
    (room / "folder.json").mkdir()
    assert "a folder, not a regular file" in _skipped(room, tmp_path, "folder.json")


def test_a_file_over_the_limit_is_not_read(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2000)
    with pytest.raises(UnreadableFile, match="more than"):
        read_regular(big, 1000)
    assert read_regular(big, 2000) == b" " * 2000


def _inflate(run, factor: float):
    """The card with its bytes per step multiplied by factor, its floor, multiples made to agree."""
    floor = run.floors[0]
    moved = int(floor.bytes_per_step * factor)
    run.floors = [dataclasses.replace(floor, bytes_per_step=moved, floor_ms=floor.floor_ms * factor)]
    for row in run.rows:
        if row.measured:
            row.x_floor = row.timing.median_ms / run.floors[0].floor_ms
    return run


def test_inflated_bytes_made_consistent_are_refused(room, tmp_path):
    run = card_run(eager_x=50.0, graph_x=2.4)
    _inflate(run, 2.4).save(room / "inflated.json")
    reason = _skipped(room, tmp_path, "inflated.json")
    assert "GB per step" in reason and "2.4× that" in reason


def _preset(data, name):
    data["floors"][0]["preset"] = name
    for row in data["rows"]:
        row["preset"] = name


@pytest.mark.parametrize("change, reason", [
    (lambda data: _preset(data, "qwen9-1t"), "not one the book knows"),
    (lambda data: data["stamp"].update(date="yesterday"), "does not parse as a date"),
    (lambda data: data["stamp"].update(date="2199-01-01T00:00:00+00:00"), "in the future"),
    (lambda data: data["rows"].append(data["rows"][0]), "more than one row for 'eager'"),
    (lambda data: data.update(settings={"batch": 8}), "its settings say batch 8"),
])
def test_a_card_against_the_physics_is_skipped_with_its_reason(room, tmp_path, change, reason):
    data = card_run().to_dict()
    change(data)
    save_json(data, room / "odd.json")
    assert reason in _skipped(room, tmp_path, "odd.json")


def test_times_and_bandwidths_no_machine_gives_are_skipped(room, tmp_path):
    card_run(gbps=1e7).save(room / "fast.json")
    card_run(name="slow", gbps=1.0, eager_x=1e6).save(room / "slow.json")
    g = load(room, tmp_path)
    reasons = {s.path.name: s.reason for s in g.skipped}
    assert "outside what any machine gives" in reasons["fast.json"]
    assert "longer than any decode step" in reasons["slow.json"]


def test_the_stored_reference_card_passes():
    run = reference_run(gallery_cards.STORED)
    assert gallery_cards.card_from_run(run, origin="stored").name
