"""The tour of bad inputs (tour.py): nothing lost, nothing silent, at most 5% raw tracebacks."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import tour  # noqa: E402  (beside this file)

MAX_RAW_SHARE = 0.05


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return tour.run_tour(tour.all_cases(tmp_path_factory.mktemp("tour")))


def test_the_tour_throws_at_least_400_bad_inputs_at_every_area(results):
    assert len(results) >= 400
    assert {case.area for case, _, _ in results} == set(tour.AREAS)


def _listed(results, outcome):
    return "\n".join(f"{case.area}: {case.what}: {detail}" for case, got, detail in results if got == outcome)


def test_nothing_is_lost(results):
    assert not _listed(results, "lost"), tour.table(results)


def test_nothing_is_silent(results):
    assert not _listed(results, "silent"), tour.table(results)


def test_at_most_five_percent_raw(results):
    raw = sum(outcome == "raw" for _, outcome, _ in results)
    assert raw <= MAX_RAW_SHARE * len(results), f"{tour.table(results)}\n{_listed(results, 'raw')}"


# the door's functions and the studies' that chapters call, each with its own test
FUNCTIONS = ("floor_ms", "fmt_ms", "fmt_gbps", "wrap", "get_shape", "decode_floor", "measure_path", "profile_path",
             "measure_bandwidths", "describe_device", "card_plan", "reference_run", "reference_figure", "Run.load",
             "Run.from_dict", "show_source", "stacked_bar", "timeline", "check_number", "worked_answer",
             "kernels.beyond_per_layer_us", "kernels.gemv_shapes", "serving_stream.request_stream",
             "prefill_checks.fixed_cost_answer", "prefill.kv_share", "prefill.stream_shapes", "prefill.random_prompt")


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_bad_argument_of_each_function_is_answered_clearly(results, name):
    mine = [(case, outcome, detail) for case, outcome, detail in results
            if case.area == "library" and case.what.startswith(name + "(")]
    assert len(mine) >= 3, f"the tour throws only {len(mine)} bad inputs at {name}"
    unclear = [f"{case.what}: {outcome}: {detail}" for case, outcome, detail in mine if outcome != "clear"]
    assert not unclear, "\n".join(unclear)
