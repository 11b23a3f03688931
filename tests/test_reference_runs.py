"""The stored H200 runs obey the book's measurement model: one floor policy, sane issue times,
checks that judge the reference data correctly, and timelines drawn in the steady state."""
import pytest

from floorlab.core.reference import reference_run
from floorlab.core.roofline import decode_floor, gap_verdict, per_launch_us, what_if_ms
from floorlab.core.shapes import get_shape
from floorlab.studies import below_the_floor

RUNS = ("h200-below-the-floor", "h200-fast-card", "h200-bench", "h200-prefill", "h200-serving",
        "h200-shared-buffers", "h200-bigger-models", "h200-kernels")


@pytest.mark.parametrize("name", RUNS)
def test_every_stored_floor_is_the_one_policy_applied_to_its_own_bandwidths(name):
    run = reference_run(name)
    assert run.floors
    for floor in run.floors:
        again = decode_floor(get_shape(floor.preset), batch=floor.batch,
                             prompt_tokens=floor.visible_tokens - 1, bandwidths=run.bandwidths,
                             cache_tokens=floor.cache_tokens)
        assert again == floor
        assert floor.bandwidth_gbps == max(run.bandwidths.copy.gbps, run.bandwidths.read.gbps)


def test_chapter_and_bench_give_one_configuration_one_floor():
    """The chapter's configuration, floored with the bench's bandwidths, is the bench's floor."""
    chapter, bench = reference_run("h200-below-the-floor"), reference_run("h200-bench")
    preset, batch = chapter.settings.preset, chapter.settings.batch
    stored = bench.floor(preset, batch)
    mine = decode_floor(get_shape(preset), batch=batch,
                        prompt_tokens=chapter.settings.prompt_tokens,
                        bandwidths=bench.bandwidths, cache_tokens=stored.cache_tokens)
    assert mine.bytes_per_step == stored.bytes_per_step
    assert mine.floor_ms == stored.floor_ms


def test_the_stored_kernel_sweep_floors_every_step_by_the_one_rule():
    """Each timed step's floor is bytes_per_step over the sweep's bandwidth: the 8B's untied table once."""
    from floorlab.core.roofline import bytes_per_step, floor_ms
    from floorlab.studies.kernels import stored_sweep

    sweep = stored_sweep()
    rows = [r for r in sweep.step_rows + sweep.variant_rows if "floor_ms" in r]
    assert {r["preset"] for r in rows} == {"qwen3-0.6b", "qwen3-8b"}
    for r in rows:
        expected = floor_ms(bytes_per_step(get_shape(r["preset"]), r["batch"], r["context"] + 1),
                            sweep.floor_gbps)
        assert r["floor_ms"] == pytest.approx(expected, rel=1e-12)
        assert "ms" not in r or r["x_floor"] == pytest.approx(r["ms"] / expected)


def test_the_stored_8b_floor_counts_gathered_embedding_rows():
    floor = reference_run("h200-bench").floor("qwen3-8b", 1)
    assert round(floor.bytes_per_step / 1e9, 2) == 15.14


@pytest.mark.parametrize("name", ["h200-below-the-floor", "h200-fast-card", "h200-bench"])
def test_stored_issue_times_never_exceed_their_steps_beyond_the_spread(name):
    for row in reference_run(name).rows:
        if row.measured and row.issue is not None:
            assert row.issue_note() == "", (row.path, row.preset, row.batch)


def test_the_stored_what_ifs_never_slow_the_step():
    run = reference_run("h200-below-the-floor")
    eager = run.row("eager")
    for saved in (run.facts["busy_ms"] / 2, run.floor().floor_ms / 2):
        assert what_if_ms(eager.median_ms, saved_ms=saved, issue_ms=eager.issue.median_ms) \
            <= eager.median_ms


def test_the_laptop_studys_ten_ops_are_rejected_on_the_stored_h200_run():
    run = reference_run("h200-below-the-floor")
    counted = run.launches["eager"].per_layer
    gap, layers = run.facts["gap_ms"], get_shape(run.settings.preset).num_layers
    eager = run.row("eager")
    dispatch = gap_verdict(eager_ms=eager.median_ms, floor_ms=run.floor().floor_ms,
                           launches=run.launches["eager"].kernels, issue_ms=eager.issue.median_ms,
                           busy_ms=run.facts["busy_ms"]) == "dispatch"
    assert dispatch  # the H200's eager step waits on its host
    kw = dict(gap_ms=gap, num_layers=layers, counted_per_layer=counted, dispatch=dispatch)
    assert below_the_floor.check_ops_per_layer(10, per_launch_us(gap, 10 * layers), True, **kw) \
        .startswith("not yet")
    right_us = per_launch_us(gap, counted * layers)
    assert below_the_floor.check_ops_per_layer(counted, right_us, True, **kw).startswith("right")


@pytest.mark.parametrize("name, path", [("h200-below-the-floor", "graph replay"),
                                        ("h200-fast-card", "fused replay")])
def test_stored_replay_timelines_start_at_their_first_kernel(name, path):
    """Steady state: the launch latency before a step's first kernel is not idle inside it."""
    timeline = reference_run(name).timelines[path]
    assert timeline.gpu[0].start_us == 0.0
    assert timeline.cpu and timeline.cpu[0].start_us < 0  # issued while the previous step ran
    assert timeline.gpu_busy_us + timeline.gpu_idle_us == pytest.approx(timeline.span_us)
    assert timeline.gpu_idle_share < 0.25


def test_the_stored_kernel_sweep_ran_the_defaults_and_no_variant_beat_one_by_a_percent():
    """As the README says: each stored default is today's default_config, and no one-change variant of
    its step was more than 1% faster in the same run (every replay bit-identical)."""
    from floorlab.engine.kernels import default_config, shape_kwargs
    from floorlab.studies.kernels import stored_sweep
    from floorlab.tools.sweep_steps import VARIANT_MAX_CONTEXT, step_variants

    sweep = stored_sweep()
    for preset in ("qwen3-0.6b", "qwen3-8b"):
        shape = get_shape(preset)
        for batch in sweep.batches:
            rows = [r for r in sweep.variant_rows if r["preset"] == preset and r["batch"] == batch]
            mine = default_config(batch, max_context=VARIANT_MAX_CONTEXT, **shape_kwargs(shape))
            assert rows[0]["variant"] == "default" and rows[0]["config"] == mine.to_dict(), (preset, batch)
            assert [r["variant"] for r in rows] == [label for label, _, _ in
                                                    step_variants(shape, batch, VARIANT_MAX_CONTEXT)]
            assert all(r["bit_identical"] for r in rows), (preset, batch)
            assert min(r["vs_default"] for r in rows) >= 0.99, (preset, batch)


def test_the_stored_kernel_sweep_reads_by_attribute_and_refuses_an_unknown_gemv():
    from floorlab.studies.kernels import StoredSweep, stored_sweep

    sweep = stored_sweep()
    assert isinstance(sweep, StoredSweep)
    assert sweep.device_name == "NVIDIA H200" and sweep.batches == (1, 8)
    down = sweep.best("qwen3-0.6b", "down", 8)
    assert down["split_k"] >= 1 and down["rows_per_program"] >= 1
    assert len(sweep.size_rows) >= 2 and all("alone_gbps" in r for r in sweep.size_rows)
    with pytest.raises(ValueError, match="no best config"):
        sweep.best("qwen3-0.6b", "down", 3)


def _stored_kernel_tables() -> list[tuple[str, list[dict]]]:
    """(where, rows) for every per-kernel table a stored run holds, in the package and its other hosts."""
    from floorlab.core import paths
    from floorlab.core.files import load_json

    tables = []
    for path in sorted(paths.REFERENCE_DIR.rglob("*.json")):
        facts = load_json(path).get("facts", {}) if path.parent.name != "figures" else {}
        facts = facts if isinstance(facts, dict) else {}
        if "layer_kernels" in facts:
            tables.append((path.name, facts["layer_kernels"]))
        for preset, limits in facts.get("limits", {}).items():
            found = [("", limits.get("triton_kernels"))] + list(limits.get("triton_kernels_at", {}).items())
            tables += [(f"{path.name} {preset} {at}", rows) for at, rows in found if isinstance(rows, list)]
    return tables


def test_every_stored_per_kernel_row_reads_as_a_kernel_row_and_writes_back_the_same():
    """Runs of the dict layout (the kernels chapter's and the bench's) load as KernelRows by attribute,
    and to_dict writes each stored row back key for key, so a stored file stays valid."""
    from floorlab.engine.kernels import KernelRow, format_layer_table, kernel_rows

    tables = _stored_kernel_tables()
    where = [name for name, _ in tables]
    assert "h200-kernels.json" in where and sum(name.startswith("h200-bench.json") for name in where) >= 4
    assert where.count("h200-kernels.json") >= 2  # the package's and another host's
    for name, stored in tables:
        rows = kernel_rows(stored)
        assert all(isinstance(r, KernelRow) for r in rows), name
        assert [r.to_dict() for r in rows] == stored, name
        assert [r.kernel for r in rows] == ["qkv", "attention", "o_proj", "gate_up", "down", "lm_head"], name
        assert all(r.beyond_us == pytest.approx(r.us - 1e-3 * r.bytes / (r.gbps * 100 / r.pct_read))
                   for r in rows), name
        assert "µs beyond bytes" in format_layer_table(stored, 28)
    with pytest.raises(ValueError, match="needs beyond_us"):
        KernelRow.from_dict({k: v for k, v in tables[0][1][0].items() if k != "beyond_us"})



def test_every_stored_stamp_device_and_settings_read_by_attribute_and_write_back_the_same():
    """Every stored run (the package's and other hosts') loads its stamp, device and settings as typed
    records: a key a run lacks reads None and is left out again, a key the records do not name stays in
    extra, so the run writes back its stamp, device and settings key for key."""
    from pathlib import Path

    from floorlab.core import paths
    from floorlab.core.device import DeviceFacts
    from floorlab.core.files import load_json
    from floorlab.core.runs import Run
    from floorlab.core.settings import RunSettings
    from floorlab.core.stamp import Stamp

    tests_runs = Path(__file__).parent / "runs"
    stored = sorted(paths.REFERENCE_DIR.rglob("*.json")) + sorted(tests_runs.rglob("*.json"))
    read = 0
    for path in stored:
        data = load_json(path)
        if not isinstance(data, dict) or data.get("layout") != 2:
            continue  # a raw table (the kernel sweep, the fusion comparison, the chapter times)
        run = Run.from_dict(data)
        assert isinstance(run.stamp, Stamp) and isinstance(run.device, DeviceFacts), path
        assert run.to_dict()["stamp"] == data["stamp"] and run.to_dict()["device"] == data["device"], path
        assert run.device.name == data["device"]["name"] and run.stamp.date == data["stamp"]["date"], path
        assert run.stamp.book == data["stamp"].get("book"), path
        assert isinstance(run.settings, RunSettings) and run.to_dict()["settings"] == data["settings"], path
        assert run.settings.preset == data["settings"].get("preset"), path
        assert all(run.settings.value(k) == v for k, v in data["settings"].items() if v is not None), path
        read += 1
    assert read >= 30
    older = Stamp.from_dict({"date": "2026-11-30T08:00:00+00:00", "note": "by hand"})
    assert older.book is None and older.extra == {"note": "by hand"}
    assert older.to_dict() == {"date": "2026-11-30T08:00:00+00:00", "note": "by hand"}
    asked = RunSettings.from_dict({"preset": "qwen3-0.6b", "buckets": [1, 2]})
    assert asked.batch is None and asked.value("batch", 1) == 1 and asked.value("buckets") == [1, 2]
    assert asked.to_dict() == {"preset": "qwen3-0.6b", "buckets": [1, 2]}
    card = DeviceFacts.from_dict({"kind": "cuda", "name": "A Card", "torch_threads": None})
    assert card.memory_gb is None and card.to_dict() == {"kind": "cuda", "name": "A Card", "torch_threads": None}
    with pytest.raises(ValueError, match="stored as a JSON object"):
        DeviceFacts.from_dict(["A Card"])

# ---- FLOORLAB_REFERENCE_DIR: a folder of stored runs in place of the package's -------------------

def _second_host(folder, name="h200-below-the-floor", **device):
    """A copy of a stored run, relabelled as made on another host: a test input, not a measurement."""
    from floorlab.core import paths
    from floorlab.core.files import load_json, save_json

    data = load_json(paths.REFERENCE_DIR / f"{name}.json")
    data["device"] = {**data["device"], **device}
    data["stamp"] = {**data["stamp"], "date": "2030-01-02T00:00:00+00:00"}
    return save_json(data, folder / f"{name}.json")


def test_a_reference_folder_takes_the_place_of_the_packages_runs_and_the_package_fills_the_rest(
        tmp_path, monkeypatch):
    from floorlab.core import reference
    from floorlab.studies import fast_card

    _second_host(tmp_path, name="h200-below-the-floor", name_note="second host")
    _second_host(tmp_path, name="h200-serving")
    (tmp_path / "h200-serving.json").rename(tmp_path / "h200-host2-serving.json")
    monkeypatch.setenv("FLOORLAB_REFERENCE_DIR", str(tmp_path))
    assert reference.reference_dirs()[0] == tmp_path
    assert reference.reference_run("h200-below-the-floor").label.endswith("2030-01-02")
    assert reference.reference_run("h200-below-the-floor").device.extra["name_note"] == "second host"
    assert reference.reference_run("h200-bench").label != ""
    assert reference.reference_path("h200-bench").parent != tmp_path
    assert "h200-host2-serving" in fast_card.stored_runs() and "h200-bench" in fast_card.stored_runs()
    assert reference.reference_json("h200-kernel-sweep")["device"]
    monkeypatch.delenv("FLOORLAB_REFERENCE_DIR")
    assert not reference.reference_run("h200-below-the-floor").label.endswith("2030-01-02")


def test_a_figure_comes_from_the_folder_of_the_run_it_was_drawn_from(tmp_path, monkeypatch):
    from floorlab.core import paths, reference
    from floorlab.tools.redraw import redraw

    _second_host(tmp_path)
    monkeypatch.setenv("FLOORLAB_REFERENCE_DIR", str(tmp_path))
    name = "h200-below-the-floor-stacked-bar"
    with pytest.raises(FileNotFoundError, match="redraw"):  # never the package's figure of another run
        reference.reference_figure(name)
    assert reference.reference_figure(name, missing_ok=True) is None
    [drawn] = redraw([name])
    assert drawn == tmp_path / "figures" / f"{name}.png" and reference.reference_figure(name) == drawn
    other = reference.reference_figure("h200-serving-timeline")  # its run is the package's
    assert other == paths.REFERENCE_FIGURES_DIR / "h200-serving-timeline.png"


@pytest.mark.parametrize("make, error", [
    (lambda tmp: tmp / "nowhere", NotADirectoryError),
    (lambda tmp: (tmp / "a-file.json").write_text("{}") and tmp / "a-file.json", NotADirectoryError),
    (lambda tmp: tmp, PermissionError),
])
def test_a_reference_folder_that_is_no_readable_folder_is_said_in_one_line(tmp_path, monkeypatch, make, error):
    from floorlab.core import reference

    named = make(tmp_path)
    monkeypatch.setenv("FLOORLAB_REFERENCE_DIR", str(named))
    if error is PermissionError:  # as root every folder is readable, so the check is made to refuse
        monkeypatch.setattr(reference.os, "access", lambda path, mode: False)
    for read in (lambda: reference.reference_run("h200-bench"), lambda: reference.reference_run("x", missing_ok=True),
                 lambda: reference.reference_figure("h200-serving-timeline")):
        with pytest.raises(error) as err:
            read()
        message = str(err.value)
        assert "FLOORLAB_REFERENCE_DIR" in message and str(named) in message and "\n" not in message
    monkeypatch.setenv("FLOORLAB_REFERENCE_DIR", " ")
    assert reference.chosen_reference_dir() is None


def test_only_the_reference_module_decides_where_stored_runs_are_read_from():
    import re
    from pathlib import Path

    import floorlab

    package = Path(floorlab.__file__).parent
    direct = re.compile(r"(?<!FLOORLAB_)REFERENCE_(FIGURES_)?DIR")  # paths.REFERENCE_DIR, not the variable
    readers = [p.relative_to(package).as_posix() for p in package.rglob("*.py")
               if direct.search(p.read_text()) and p.name not in ("reference.py", "paths.py")]
    assert readers == [], f"these read the package's reference/ themselves; use floorlab.core.reference: {readers}"
