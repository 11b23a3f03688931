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
