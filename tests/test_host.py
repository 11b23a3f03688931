"""The host is part of the run: its CPU, the book's version, and its measured cost per eager launch,
set beside a step's gap per launch by the one comparison rule; and the stored runs of one card
read side by side."""
import pytest

from floorlab.core import host as hostmod
from floorlab.core.host import Host, compare_dispatch, gap_per_launch
from floorlab.core.prose import fmt_times
from floorlab.core.reference import other_host_dirs, reference_run
from floorlab.core.roofline import diagnose_gap, gap_verdict
from floorlab.core.runs import Run, run_stamp
from floorlab.core.timing import Timing
from floorlab.studies import below_the_floor_hosts


def band(median_us, spread=0.02):
    """A Timing in ms per launch around median_us, p10-p90 ± spread of it (a test input)."""
    ms = median_us / 1e3
    return Timing.from_samples([ms * (1 - spread), ms, ms * (1 + spread)])


def test_the_host_cpu_and_the_books_version_are_read():
    cpu = hostmod.read_cpu()
    assert cpu["cores"] >= 1 and cpu["model"]
    assert cpu["clock_mhz"] is None or cpu["clock_mhz"] > 0
    assert run_stamp().book.startswith(("git ", "floorlab ")) or run_stamp().book == "unknown"


def test_the_dispatch_benchmark_gives_a_timing_per_launch_on_this_machine():
    found = hostmod.read_host("cpu")
    assert found.dispatch_device == "cpu" and len(found.dispatch.samples_ms) == hostmod.DISPATCH_SAMPLES
    assert 0 < found.dispatch.p10_ms <= found.dispatch.median_ms <= found.dispatch.p90_ms
    assert "µs" in found.dispatch_line() and "an add on cpu" in found.dispatch_line()
    assert Host("x", 2).dispatch_line() == "not measured on this host"


def test_a_run_keeps_its_host_and_an_older_run_loads_without_one(tmp_path):
    run = Run.load(other_host_dirs()[0] / "h200-below-the-floor.json")
    assert run.host is None  # stored before runs recorded their host
    run.host = Host("Some CPU", 16, 3000.0, band(5.0), "cuda")
    again = Run.load(run.save(tmp_path / "run.json"))
    assert again.host == run.host and str(again.host) == "Some CPU (16 cores, 3.00 GHz)"


@pytest.mark.parametrize("gap_us, gap_spread, outcome, words", [
    (5.0, 0.02, "consistent", "enough to fill the gap"),
    (15.0, 0.02, "larger", "more than bare launches"),
    (2.0, 0.02, "smaller", "hides under the floor"),
    (5.5, 0.9, "cannot tell", "cannot tell"),
])
def test_each_outcome_of_the_dispatch_comparison_has_its_sentence(gap_us, gap_spread, outcome, words):
    versus = compare_dispatch(band(gap_us, gap_spread), band(5.0))
    assert versus.outcome == outcome and words in versus.says()
    assert "5.00 µs" in versus.says() and "×" in versus.says()


def test_the_gap_per_launch_carries_the_steps_band():
    eager = Timing.from_samples([9.0, 9.5, 10.0, 10.5, 11.0])
    gap = gap_per_launch(eager, 1.0, 1000)
    assert gap.median_ms == pytest.approx(0.009) and gap.p90_ms > gap.p10_ms
    with pytest.raises(ValueError, match="launches"):
        gap_per_launch(eager, 1.0, 0)


def test_the_verdict_rests_on_this_hosts_price_not_the_seeds_range():
    # 16.7 µs per launch: inside the seed's 5-20 µs, but three times what this host pays per launch
    kw = dict(eager_ms=7.80, floor_ms=3.13, launches=280)
    assert gap_verdict(**kw) == "dispatch"  # a run that measured nothing falls back on the lead
    gap = gap_per_launch(Timing.from_samples([7.7, 7.8, 7.9]), 3.13, 280)
    dear, cheap = compare_dispatch(gap, band(16.0, 0.1)), compare_dispatch(gap, band(5.0))
    assert gap_verdict(**kw, dispatch=dear) == "dispatch"
    assert gap_verdict(**kw, dispatch=cheap) == "operators"
    said = diagnose_gap(**kw, dispatch=cheap)
    assert "5-20" not in said and "more than bare launches" in said
    assert "laptop study quoted 5-20 µs" in diagnose_gap(**kw)


def test_the_stored_runs_of_one_card_tell_the_hosts_story():
    steps = below_the_floor_hosts.same_card("h200-")
    assert len(steps) >= 2
    story = below_the_floor_hosts.HostsStory(steps)
    eager = max(s.eager.median_ms for s in steps) / min(s.eager.median_ms for s in steps)
    said = " ".join(story.says().split())
    assert f"{len(steps)} stored runs of the NVIDIA H200" in said and fmt_times(eager) in said
    recorded = sum(1 for s in steps if s.run.host)
    assert (f"{recorded} of the {len(steps)} recorded" if recorded else "None of them recorded its host CPU") in said
    assert all(len(line) <= 84 for line in story.table().splitlines())
    assert "Fewer than two" in below_the_floor_hosts.HostsStory(steps[:1]).says()


def _relabel(step, eager_ms, replay_ms, cpu=None):
    """A stored step with its medians moved: a perturbed test input, not a measurement."""
    import copy

    moved = copy.deepcopy(step)
    for row, ms in ((moved.eager, eager_ms), (moved.replay, replay_ms)):
        row.timing = Timing.from_samples([ms * 0.99, ms, ms * 1.01])
    moved.run.host = Host(cpu, 8) if cpu else None
    return moved


@pytest.mark.parametrize("medians, words", [
    (((8.0, 2.0), (16.0, 2.0)), "the replay no longer depends on the host"),
    (((8.0, 2.0), (16.0, 2.2)), "the eager step by more"),
    (((8.0, 2.0), (8.01, 2.0)), "cannot show what a host does"),
    (((8.0, 2.0), (9.0, 3.0)), "something besides the host changed"),
])
def test_each_outcome_of_the_hosts_story_has_its_sentence(medians, words):
    step = below_the_floor_hosts.same_card("h200-below-the-floor")[0]
    steps = [_relabel(step, e, r, cpu=f"CPU {i}") for i, (e, r) in enumerate(medians)]
    said = " ".join(below_the_floor_hosts.HostsStory(steps).says().split())
    assert words in said and "2 of the 2 recorded their host CPU, 2 CPU models among them" in said


def test_the_readers_run_joins_the_hosts_story_only_on_the_same_card():
    story = below_the_floor_hosts.HostsStory(below_the_floor_hosts.same_card("h200-"))
    card = story.steps[0].run.device.name
    same = story.this_run(card, 7.5, 2.0)
    other = " ".join(story.this_run("NVIDIA H100 80GB HBM3", 7.5, 2.0).split())
    assert same.startswith("This run, on the same card") and "does not join" not in same
    assert f"not the {card}" in other and "does not join the stored runs" in other


def test_the_hosts_story_reads_a_second_hosts_folder_too(tmp_path, monkeypatch):
    from floorlab.core.files import save_json

    run = reference_run("h200-below-the-floor")
    run.host = Host("Second host's CPU", 32)
    save_json(run.to_dict(), tmp_path / "h200-below-the-floor.json")
    before = len(below_the_floor_hosts.same_card("h200-"))
    monkeypatch.setenv("FLOORLAB_REFERENCE_DIR", str(tmp_path))
    steps = below_the_floor_hosts.same_card("h200-")
    assert len(steps) == before + 1  # the package's copy of that run is a run too
    recorded = sum(1 for s in steps if s.run.host)
    assert f"{recorded} of the {len(steps)} recorded" in below_the_floor_hosts.HostsStory(steps).hosts_note()


def test_a_noisy_price_per_launch_is_said_in_microseconds():
    noisy = Host("x", 2, dispatch=Timing.from_samples([0.003, 0.0032, 0.06]), dispatch_device="cpu")
    assert "µs" in noisy.dispatch_note() and " ms" not in noisy.dispatch_note()
    assert Host("x", 2, dispatch=band(5.0), dispatch_device="cpu").dispatch_note() == ""
