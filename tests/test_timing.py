"""time_ms and friends: structure and call counts, never absolute speed."""
import json

import pytest
import torch

from floorlab.core.timing import StepTimes, Timing, time_ms, time_with_issue, unsynchronised_time_ms


class Counter:
    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return sum(range(200))


def test_time_ms_calls_warmup_settling_and_repeats():
    fn = Counter()
    time_ms(fn, warmup=3, repeats=7, device="cpu")
    assert 3 + 3 + 7 <= fn.calls <= 3 + 20 + 7  # a CPU settles for at least three calls


def test_a_wide_spread_is_flagged_as_noisy():
    steady = Timing.from_samples([10.0, 10.1, 9.9, 10.0, 10.2])
    noisy = Timing.from_samples([10.0, 25.0, 9.0, 14.0, 30.0])
    assert not steady.noisy and steady.noise_note() == ""
    assert noisy.noisy and "noisy" in noisy.noise_note("eager decode")


def test_time_ms_summary_is_consistent():
    t = time_ms(Counter(), warmup=1, repeats=15, device="cpu")
    assert isinstance(t, Timing)
    assert len(t.samples_ms) == 15
    assert t.min_ms <= t.p10_ms <= t.median_ms <= t.p90_ms <= t.max_ms
    assert t.spread_ms == pytest.approx(t.p90_ms - t.p10_ms)
    assert all(s >= 0 for s in t.samples_ms)


def test_time_ms_with_progress_label():
    fn = Counter()
    t = time_ms(fn, warmup=0, repeats=4, device="cpu", progress="timing")
    assert len(t.samples_ms) == 4


def test_timing_from_known_samples():
    t = Timing.from_samples([5.0, 1.0, 3.0, 2.0, 4.0])
    assert t.median_ms == 3.0
    assert t.min_ms == 1.0 and t.max_ms == 5.0
    assert t.p10_ms == pytest.approx(1.4)
    assert t.p90_ms == pytest.approx(4.6)
    assert str(t) == "3.00 ms (p10-p90 1.40-4.60, n=5)"
    slow = Timing.from_samples([139.34, 150.0, 154.62, 158.0, 162.41])
    assert str(slow) == "155 ms (p10-p90 144-161, n=5)"


def test_timing_to_dict_is_json_ready():
    d = Timing.from_samples([1.0, 2.0, 3.0]).to_dict()
    again = json.loads(json.dumps(d))
    assert again["median_ms"] == 2.0
    assert again["spread_ms"] == pytest.approx(d["p90_ms"] - d["p10_ms"])
    assert again["samples_ms"] == [1.0, 2.0, 3.0]


def test_issue_time_comes_from_the_same_loop_as_the_step():
    times = time_with_issue(Counter(), warmup=2, repeats=5, device="cpu")
    assert isinstance(times, StepTimes)
    assert len(times.step.samples_ms) == len(times.issue.samples_ms) == 5
    assert times.step.samples_ms == times.issue.samples_ms  # on a CPU, issuing is running


def test_an_issue_time_beyond_the_step_is_flagged():
    step = Timing.from_samples([8.5, 8.6, 8.9, 9.0])
    fine = StepTimes(step=step, issue=Timing.from_samples([8.0, 8.4, 8.6]))
    odd = StepTimes(step=step, issue=Timing.from_samples([11.0, 11.1, 11.2]))
    assert not fine.issue_exceeds_step and fine.note() == ""
    assert odd.issue_exceeds_step and "longer than" in odd.note()


def test_unsynchronised_time_ms_returns_ms_per_call():
    fn = Counter()
    ms = unsynchronised_time_ms(fn, repeats=9)
    assert fn.calls == 9
    assert ms >= 0.0


def test_unsynchronised_docstring_says_it_is_wrong_on_purpose():
    assert "wrong on purpose" in unsynchronised_time_ms.__doc__.lower()


@pytest.mark.parametrize("kwargs", [{"repeats": 0}, {"warmup": -1}])
def test_time_ms_rejects_bad_counts(kwargs):
    with pytest.raises(ValueError, match="repeats|warmup"):
        time_ms(Counter(), device="cpu", **kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_cuda_without_gpu_says_what_to_pass():
    with pytest.raises(ValueError, match="device='cpu'"):
        time_ms(Counter(), device="cuda")


@pytest.mark.gpu
def test_time_ms_on_cuda_uses_events():
    x = torch.randn(1024, 1024, device="cuda")
    fn = Counter()

    def step():
        fn()
        return x @ x

    t = time_ms(step, warmup=2, repeats=5, device="cuda")
    assert fn.calls == 7
    assert len(t.samples_ms) == 5
    assert t.min_ms <= t.median_ms <= t.max_ms
    assert t.min_ms > 0


@pytest.mark.gpu
def test_issue_time_on_cuda_is_host_side():
    x = torch.randn(4096, 4096, device="cuda")
    times = time_with_issue(lambda: x @ x, warmup=2, repeats=10, device="cuda")
    assert len(times.issue.samples_ms) == 10
    assert times.issue.median_ms < times.step.median_ms  # a big matmul: the host is far ahead


def test_compare_calls_a_difference_meaningful_only_when_the_bands_do_not_overlap():
    from floorlab.core.timing import Timing, compare

    fast = Timing.from_samples([1.0, 1.1, 1.2, 1.0, 1.1])
    slow = Timing.from_samples([2.0, 2.1, 2.2, 2.0, 2.1])
    wide = Timing.from_samples([0.9, 1.5, 2.5, 1.2, 2.2])
    assert compare(slow, fast).meaningful and compare(slow, fast).ratio > 1.8
    assert not compare(wide, fast).meaningful
    assert "cannot tell them apart" in compare(wide, fast).says("a", "b")


@pytest.mark.parametrize("samples", [[float("nan"), 1.0], [-1.0, 2.0], [], "12", [float("inf")]])
def test_timing_refuses_samples_no_clock_could_give(samples):
    from floorlab.core.timing import Timing

    with pytest.raises(ValueError):
        Timing.from_samples(samples)
