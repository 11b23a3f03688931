"""The challenges' checks: 'not attempted yet' for the starter, 'right' for the right answer, a hint otherwise."""
import pytest
import torch

from floorlab.core import checks
from floorlab.core.roofline import per_launch_us
from floorlab.core.shapes import Qwen3Shape
from floorlab.engine.model import build_model
from floorlab.studies import below_the_floor, below_the_floor_detector


def test_ops_per_layer_check_covers_starter_right_and_wrong():
    kw = dict(gap_ms=4.67, num_layers=28, counted_per_layer=10.0, dispatch=True)
    assert below_the_floor.check_ops_per_layer(None, None, None, **kw) == checks.NOT_ATTEMPTED
    assert below_the_floor.check_ops_per_layer(10, 16.68, True, **kw).startswith("right")
    assert below_the_floor.check_ops_per_layer(10, 16.68, False, **kw).startswith("not yet")  # the verdict counts
    assert below_the_floor.check_ops_per_layer(10, 30.0, True, **kw).startswith("not yet")
    assert below_the_floor.check_ops_per_layer(100, 1.7, True, **kw).startswith("not yet")
    assert "16.7 µs" in below_the_floor.answer_ops_per_layer(issue_ms=None, eager_ms=7.8, **kw)
    assert "10.0 operators per layer" in below_the_floor.answer_ops_per_layer(issue_ms=None, eager_ms=7.8,
                                                                              counted="operators", **kw)
    kw["dispatch"] = False  # the run's own verdict decides, not a threshold inside the check
    assert below_the_floor.check_ops_per_layer(10, 16.68, False, **kw).startswith("right")


def test_the_laptop_studys_ten_ops_fail_against_the_h200_count():
    """On the stored H200 run the profiler counts ~18 kernels per layer: 'about 10' is not a count."""
    kw = dict(gap_ms=8.6, num_layers=28, counted_per_layer=18.3, dispatch=True)
    ten = below_the_floor.check_ops_per_layer(10, per_launch_us(8.6, 280), True, **kw)
    assert ten.startswith("not yet")
    right = below_the_floor.check_ops_per_layer(18.3, per_launch_us(8.6, 18.3 * 28), True, **kw)
    assert right.startswith("right")


@pytest.mark.parametrize("answer, hint", [("17", "without quotes"), (True, "yes/no"),
                                          (float("nan"), "finite"), ([1], "number")])
def test_checks_explain_answers_that_are_not_numbers(answer, hint):
    kw = dict(gap_ms=4.67, num_layers=28, counted_per_layer=10.0, dispatch=True)
    assert hint in below_the_floor.check_ops_per_layer(answer, 16.7, True, **kw)
    assert hint in checks.check_number(answer, 1.0, hint="h")


def test_a_percent_where_a_fraction_belongs_is_explained():
    answer = below_the_floor.scale_answer(name="big", bytes_per_step=16e9, bandwidth_gbps=380, num_layers=36,
                             kernels_per_layer=10, per_launch_us=17, dispatch=True)
    verdict = below_the_floor.check_scale(answer.floor_ms, 100 * answer.launch_fraction, answer)
    assert "percent" in verdict and verdict.startswith("not yet")


def test_padding_follows_the_runner_padded_rows_read_their_whole_cache_row():
    answer = below_the_floor.padding_answer(batch=5, buckets=(1, 2, 4, 8), kv_bytes_per_token=114_688,
                               cache_tokens=128, bandwidth_gbps=4000, launch_saving_ms=8.0)
    assert (answer.bucket, answer.padded_rows) == (8, 3)
    assert answer.padded_bytes_per_step == 3 * 128 * 114_688
    assert answer.padded_ms == pytest.approx(3 * 128 * 114_688 / 4000e9 * 1e3)
    # the static cache length at which 3 rows' reads take the 8 ms the graph saves
    assert answer.breakeven_cache_tokens == int(8e-3 * 4000e9 / (3 * 114_688))
    assert below_the_floor.check_padding(None, None, answer) == checks.NOT_ATTEMPTED
    assert below_the_floor.check_padding(3, answer.breakeven_cache_tokens, answer).startswith("right")
    assert below_the_floor.check_padding(4, answer.breakeven_cache_tokens, answer).startswith("not yet")
    assert below_the_floor.check_padding("3", 1, answer).startswith("not yet")
    with pytest.raises(ValueError, match="largest bucket"):
        below_the_floor.padding_answer(batch=9, buckets=(1, 2, 4, 8), kv_bytes_per_token=1, cache_tokens=1,
                          bandwidth_gbps=1, launch_saving_ms=1)


def test_scale_answer_grows_launches_with_layers_not_bytes():
    answer = below_the_floor.scale_answer(name="big", bytes_per_step=16e9, bandwidth_gbps=380, num_layers=36,
                             kernels_per_layer=10, per_launch_us=17, dispatch=True)
    assert answer.launches == 360
    assert answer.floor_ms == pytest.approx(16e9 / 380e9 * 1e3)
    assert answer.gap_ms == pytest.approx(360 * 17e-3)
    assert below_the_floor.check_scale(answer.floor_ms, answer.launch_fraction, answer).startswith("right")
    assert below_the_floor.check_scale(answer.floor_ms * 2, answer.launch_fraction, answer).startswith("not yet")


def test_scale_answer_is_conditioned_on_the_runs_verdict():
    host = below_the_floor.scale_answer(name="big", bytes_per_step=15e9, bandwidth_gbps=4000, num_layers=36,
                           kernels_per_layer=18, per_launch_us=17, dispatch=True)
    cpu = below_the_floor.scale_answer(name="big", bytes_per_step=15e9, bandwidth_gbps=20, num_layers=36,
                          kernels_per_layer=30, per_launch_us=900, dispatch=False)
    assert host.dispatch and not cpu.dispatch
    assert "gain most" in below_the_floor.answer_scale("small", 0.9, host, small_bytes=1.2e9, layer_ratio=36 / 28)
    assert "not dispatch" in below_the_floor.answer_scale("small", 0.9, cpu, small_bytes=1.2e9, layer_ratio=36 / 28)
    # with a replay on this machine, the dispatch answer says how much of the gap the replay took away
    kept = below_the_floor.answer_scale("small", 0.9, host, small_bytes=1.2e9, layer_ratio=36 / 28, replay_removed=0.89)
    assert "took 89% of this token's gap away" in " ".join(kept.split())
    assert "gap away" not in below_the_floor.answer_scale("small", 0.9, host, small_bytes=1.2e9, layer_ratio=36 / 28)


def test_the_right_8b_floor_passes_with_gathered_embedding_rows():
    from floorlab.core.roofline import bytes_per_step
    from floorlab.core.shapes import get_shape

    big = get_shape("qwen3-8b")
    moved = bytes_per_step(big, 1, 33)
    answer = below_the_floor.scale_answer(name=big.name, bytes_per_step=moved, bandwidth_gbps=4347.0,
                             num_layers=36, kernels_per_layer=18.3, per_launch_us=16.8,
                             dispatch=True)
    right_floor = moved / 4347e9 * 1e3
    assert right_floor == pytest.approx(15.14e9 / 4347e9 * 1e3, rel=0.002)
    assert below_the_floor.check_scale(right_floor, answer.launch_fraction, answer).startswith("right")
    whole_table = big.weight_bytes(2) / 4347e9 * 1e3
    assert below_the_floor.check_scale(whole_table, answer.launch_fraction, answer).startswith("not yet")


def test_fast_card_check_number():
    assert checks.check_number(None, 1.0, hint="h") == checks.NOT_ATTEMPTED
    assert checks.check_number(1.02, 1.0, hint="h").startswith("right")
    assert checks.check_number(2.0, 1.0, hint="try again") == "not yet: try again"


def test_detector_check_tells_a_working_detector_from_a_blind_one():
    shape = Qwen3Shape(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=1,
                       head_dim=16, vocab_size=50, tie_word_embeddings=True)
    model = build_model(shape, dtype=torch.float32, max_batch=2, max_context=8)
    model.prefill(torch.zeros(1, 2, dtype=torch.long))
    tokens_a, tokens_b, positions = torch.tensor([1]), torch.tensor([7]), torch.tensor([2])

    def blind(step, a, b, pos):
        return False

    requests = (model.decode_step, tokens_a, tokens_b, positions)
    assert below_the_floor_detector.check_detector(None, *requests) == checks.NOT_ATTEMPTED
    assert below_the_floor_detector.check_detector(blind, *requests).startswith("not yet")
    worked = below_the_floor_detector.answer_detector
    assert below_the_floor_detector.check_detector(worked, *requests).startswith("right")


# NumPy numbers and booleans are answers like any other.

def test_numpy_numbers_and_booleans_are_read_like_python_ones():
    np = pytest.importorskip("numpy")
    kw = dict(gap_ms=4.67, num_layers=28, counted_per_layer=10.0, dispatch=True)
    assert below_the_floor.check_ops_per_layer(np.float64(10), np.float32(16.68), np.True_,
                                               **kw).startswith("right")
    refused = below_the_floor.check_ops_per_layer(np.int64(10), np.float64(16.68), np.False_, **kw)
    assert refused.startswith("not yet") and "True or False" not in refused  # read, then judged
    answer = below_the_floor.padding_answer(batch=5, buckets=(1, 2, 4, 8), kv_bytes_per_token=114_688,
                                            cache_tokens=128, bandwidth_gbps=4000, launch_saving_ms=8.0)
    assert below_the_floor.check_padding(np.int64(3), np.float64(answer.breakeven_cache_tokens),
                                         answer).startswith("right")
    assert checks.check_number(np.float32(1.0), 1.0, hint="h").startswith("right")


def test_a_verdict_that_is_not_a_boolean_is_explained():
    kw = dict(gap_ms=4.67, num_layers=28, counted_per_layer=10.0, dispatch=True)
    for answer in (1, "True"):
        assert "True or False" in below_the_floor.check_ops_per_layer(10, 16.68, answer, **kw)


# The detector is run against steps that identity, or equality alone, cannot tell apart.

@pytest.fixture(scope="module")
def tiny_step():
    shape = Qwen3Shape(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=1,
                       head_dim=16, vocab_size=50, tie_word_embeddings=True)
    model = build_model(shape, dtype=torch.float32, max_batch=2, max_context=8)
    model.prefill(torch.zeros(1, 2, dtype=torch.long))
    return model.decode_step, torch.tensor([1]), torch.tensor([7]), torch.tensor([2])


def test_a_detector_that_compares_objects_is_refused(tiny_step):
    def same_object(step, a, b, pos):
        return step(a, pos) is step(b, pos)

    verdict = below_the_floor_detector.check_detector(same_object, *tiny_step)
    assert verdict.startswith("not yet") and "`is`" in verdict


def test_a_detector_that_returns_nothing_is_told_so(tiny_step):
    def forgot_return(step, a, b, pos):
        step(a, pos)

    verdict = below_the_floor_detector.check_detector(forgot_return, *tiny_step)
    assert verdict.startswith("not yet") and "returned nothing (None)" in verdict
    assert "not attempted" not in verdict


def test_a_detector_that_compares_two_answers_is_refused(tiny_step):
    def equal_answers(step, a, b, pos):
        return torch.equal(step(a, pos), step(b, pos))

    verdict = below_the_floor_detector.check_detector(equal_answers, *tiny_step)
    assert verdict.startswith("not yet") and "equal values" in verdict


def test_the_steps_the_detector_meets_share_or_own_their_memory(tiny_step):
    step, a, b, pos = tiny_step
    view = below_the_floor_detector.fresh_view_step(step)
    first, second = view(a, pos), view(b, pos)
    assert first is not second and first.data_ptr() == second.data_ptr()
    equal = below_the_floor_detector.equal_copies_step(step, a, pos)
    first, second = equal(a, pos), equal(b, pos)
    assert torch.equal(first, second) and first.data_ptr() != second.data_ptr()
    assert below_the_floor_detector.answer_detector(view, a, b, pos) is True
    assert below_the_floor_detector.answer_detector(equal, a, b, pos) is False


def test_a_detector_may_answer_with_numpy_or_tensor_booleans(tiny_step):
    np = pytest.importorskip("numpy")

    def as_numpy(step, a, b, pos):
        return np.bool_(below_the_floor_detector.answer_detector(step, a, b, pos))

    def as_tensor(step, a, b, pos):
        first = step(a, pos)
        kept = first.clone()
        step(b, pos)
        return (first != kept).any()

    for detector in (as_numpy, as_tensor):
        assert below_the_floor_detector.check_detector(detector, *tiny_step).startswith("right")


# A plausible wrong quantity is refused by name, even where it lies within the tolerance.

H200 = dict(gap_ms=8.86, eager_ms=9.14, num_layers=28, counted_per_layer=18.3)  # as stored


def test_the_per_launch_check_names_each_wrong_division():
    kw = dict(H200, dispatch=True)
    launches = 18.3 * 28
    whole_step = 9.14 / launches * 1e3
    assert abs(whole_step / (8.86 / launches * 1e3) - 1) < 0.05  # inside the 5% tolerance
    for answer, name in [(whole_step, "the whole step"), (8.86 / 280 * 1e3, "280 launches"),
                         (8.86 / 18.3 * 1e3, "not times the layers")]:
        verdict = below_the_floor.check_ops_per_layer(18.3, answer, True, **kw)
        assert verdict.startswith("not yet") and name in verdict, verdict
    assert below_the_floor.check_ops_per_layer(18.3, 8.86 / launches * 1e3, True, **kw).startswith("right")


def test_the_padding_check_names_the_copy_bandwidth():
    read, copy = 4291.0, 4250.0  # within 1% of each other, as on the stored H200 run
    answer = below_the_floor.padding_answer(batch=5, buckets=(1, 2, 4, 8), kv_bytes_per_token=114_688,
                                            cache_tokens=128, bandwidth_gbps=read, launch_saving_ms=7.06,
                                            other_bandwidth=("copy", copy), eager_ms=9.14)
    with_copy = 7.06e-3 * copy * 1e9 / (3 * 114_688)
    verdict = below_the_floor.check_padding(3, with_copy, answer)
    assert verdict.startswith("not yet") and "copy bandwidth" in verdict, verdict
    every_row = 7.06e-3 * read * 1e9 / (8 * 114_688)
    assert "every row of the bucket" in below_the_floor.check_padding(3, every_row, answer)
    printed = 7.06e-3 * 4291 * 1e9 / (3 * 114_688)  # from the digits the prompt prints
    assert below_the_floor.check_padding(3, printed, answer).startswith("right")


def test_the_bandwidth_the_floor_did_not_use_is_the_other_measured_one():
    bandwidths = _bandwidths(copy_gbps=4250.0, read_gbps=4291.0)
    assert below_the_floor.other_bandwidth(bandwidths) == ("copy", 4250.0)
    assert below_the_floor.other_bandwidth(_bandwidths(copy_gbps=900.0, read_gbps=800.0)) == ("read", 800.0)


def _bandwidths(*, copy_gbps: float, read_gbps: float):
    from floorlab.core.bandwidth import Bandwidth, Bandwidths

    return Bandwidths(copy=Bandwidth("copy", copy_gbps, copy_gbps, copy_gbps, 1, "stand-in"),
                      read=Bandwidth("read", read_gbps, read_gbps, read_gbps, 1, "stand-in"))


def test_the_8b_check_names_the_whole_table_the_copy_bandwidth_and_an_unscaled_gap():
    from floorlab.core.roofline import bytes_per_step
    from floorlab.core.shapes import get_shape

    big = get_shape("qwen3-8b")
    moved = bytes_per_step(big, 1, 33)
    answer = below_the_floor.scale_answer(
        name=big.name, bytes_per_step=moved, bandwidth_gbps=4286.0, num_layers=36,
        kernels_per_layer=18.3, per_launch_us=17.3, dispatch=True,
        whole_table_bytes=below_the_floor.whole_table_bytes(big, 1, 33),
        other_bandwidth=("copy", 4247.0), small_num_layers=28)
    right_floor = moved / 4286e9 * 1e3
    for floor, name in [(below_the_floor.whole_table_bytes(big, 1, 33) / 4286e9 * 1e3, "whole input table"),
                        (moved / 4247e9 * 1e3, "copy bandwidth")]:
        verdict = below_the_floor.check_scale(floor, answer.launch_fraction, answer)
        assert verdict.startswith("not yet") and name in verdict, verdict
    small_gap = round(18.3 * 28) * 17.3e-3
    unscaled = small_gap / (right_floor + small_gap)
    assert abs(unscaled / answer.launch_fraction - 1) < 0.10  # inside the 10% tolerance
    for fraction, name in [(unscaled, "not scaled"), (answer.gap_ms / right_floor, "gap ÷ floor")]:
        verdict = below_the_floor.check_scale(right_floor, fraction, answer)
        assert verdict.startswith("not yet") and name in verdict, verdict
    # the prompt's digits (GB to two decimals, bandwidth to four figures) still pass
    printed_floor = (16.38 - 1.24) / 4286 * 1e3
    assert below_the_floor.check_scale(printed_floor, answer.launch_fraction, answer).startswith("right")
    assert "percent" in below_the_floor.check_scale(right_floor, 100 * answer.launch_fraction, answer)


def test_a_wrong_quantity_too_close_to_tell_apart_is_not_refused():
    assert checks.plausible_wrongs(100.0, {"near": 100.2, "far": 90.0, "unknown": None}) \
        == {"far": 90.0}


def test_fast_card_checks_name_their_wrong_quantities():
    from floorlab.core.roofline import crossover_gbps, kernels_per_layer_budget
    from floorlab.core.shapes import get_shape
    from floorlab.studies import fast_card

    card = dict(kernels=512, busy_ms=1.71, profiled_ms=2.13, card_floor_ms=0.278)
    overhead = (card["busy_ms"] - card["card_floor_ms"]) * 1e3 / card["kernels"]
    wrong = fast_card.crossover_wrongs(bytes_per_step=1_195_884_544, overhead_us=overhead,
                                       fused_kernels=317, **card)
    busy_each = crossover_gbps(1_195_884_544, 512, 1.71e3 / 512)
    verdict = checks.check_number(busy_each, crossover_gbps(1_195_884_544, 512, overhead), hint="h",
                                  wrong=wrong)
    assert verdict.startswith("not yet") and "busy time per kernel" in verdict
    budget = fast_card.budget_wrongs(overhead_us=overhead, num_layers=28, **card)
    busy_budget = kernels_per_layer_budget(0.278, 2.0, 1.71e3 / 512, 28)
    verdict = checks.check_number(busy_budget, kernels_per_layer_budget(0.278, 2.0, overhead, 28),
                                  rel=0.10, hint="h", wrong=budget)
    assert verdict.startswith("not yet") and "busy time per kernel" in verdict
    big = fast_card.big_multiple(get_shape("qwen3-8b"), batch=1, visible_tokens=33, bandwidth_gbps=4299,
                                 small_layers=28, fused_kernels=317, plain_kernels=512, overhead_us=2.8)
    assert big.kernels == round(317 / 28 * 36)
    for name, value in big.wrong.items():
        verdict = checks.check_number(value, big.multiple, hint="h", wrong=big.wrong)
        assert verdict.startswith("not yet") and name in verdict, (name, verdict)
    whole = big.wrong["the whole input table instead of the rows a step gathers"]
    assert abs(whole / big.multiple - 1) < 0.05  # inside the 5% tolerance, so it must be named
    assert checks.check_number(big.multiple, big.multiple, hint="h", wrong=big.wrong).startswith("right")


# The profiled step against the timed one, said the right way round.

def _timeline(profiled_ms):
    from floorlab.core.timelines import Interval, Timeline

    return Timeline(cpu=[Interval("step", 0.0, profiled_ms * 1e3)], gpu=[], span_us=profiled_ms * 1e3,
                    label="eager", timed_ms=5.0)


def test_a_profiled_step_shorter_than_the_timed_one_is_said_so():
    from floorlab.core.timing import Timing

    timed = Timing.from_samples([4.5, 4.8, 5.0, 5.2, 5.5])
    inside = below_the_floor.profiled_against_timed(_timeline(4.7), timed)
    assert "(0.940×)" in inside and "within the spread" in inside and "longer" not in inside
    below = below_the_floor.profiled_against_timed(_timeline(2.5), timed)
    assert "shorter" in below and "below even" in below
    above = below_the_floor.profiled_against_timed(_timeline(8.0), timed)
    assert "longer" in above and "beyond" in above
    assert "shorter (0.500×) than" in _timeline(2.5).profiler_note()


# The bench's stored run beside the chapter's, and how much eager moves between stored runs.

def test_the_stored_runs_say_how_far_apart_they_are():
    from floorlab.core.reference import reference_run
    from floorlab.core.timing import compare
    from floorlab.studies import fast_card

    bench, chapter = reference_run("h200-bench"), reference_run("h200-fast-card")
    found = {d.what: d for d in fast_card.bench_against_chapter(bench, chapter, preset="qwen3-0.6b", batch=1)}
    assert set(found) == {"floor", "eager step", "graph replay", "fused replay"}
    eager = found["eager step"]
    assert eager.change == pytest.approx(bench.row("plain eager", "qwen3-0.6b", 1).median_ms
                                         / chapter.row("eager").median_ms - 1)
    assert eager.comparison == compare(bench.row("plain eager", "qwen3-0.6b", 1), chapter.row("eager"))
    assert ("beyond" in found["graph replay"].says()) == found["graph replay"].comparison.meaningful
    eager_moves = fast_card.stored_spread(fast_card.EAGER_PATHS, preset="qwen3-0.6b", batch=1)
    graph_moves = fast_card.stored_spread(fast_card.GRAPH_PATHS, preset="qwen3-0.6b", batch=1)
    assert "h200-bench" in eager_moves.medians_ms and len(eager_moves.medians_ms) >= 3
    assert eager_moves.ratio > graph_moves.ratio  # eager is the host's pace; the replay holds still
    assert all(note.startswith("warning") for note in fast_card.noisy_rows(bench, batch=1))
    from floorlab.core.timing import Timing
    tiny = fast_card.PathDifference("x", Timing(1.0, 0.9, 1.1, 0.9, 1.1), Timing(1.000334, 0.9, 1.1, 0.9, 1.1))
    assert "under 0.1% higher" in tiny.says() and "<0.1%" in tiny.line() and "0.0334" not in tiny.line()


def test_read_bool_takes_every_kind_of_boolean_and_refuses_the_rest():
    np = pytest.importorskip("numpy")
    assert checks.read_bool(np.True_, "x") is True
    assert checks.read_bool(torch.tensor(False), "x") is False
    with pytest.raises(checks.Unreadable):
        checks.read_bool(torch.tensor([True, False]), "x")
    with pytest.raises(checks.Unreadable):
        checks.read_bool("yes", "x")


def test_a_wrong_quantity_is_refused_by_name_and_a_close_call_asks_for_digits():
    wrong = {"the copy bandwidth instead of the read bandwidth": 4.2}
    assert checks.check_number(4.0, 4.0, hint="h", wrong=wrong).startswith("right")
    assert "copy bandwidth" in checks.check_number(4.19, 4.0, hint="h", wrong=wrong)
    near = {"a neighbouring mistake": 4.02}
    assert "more digits" in checks.check_number(3.985, 4.0, hint="h", wrong=near)
    assert checks.check_number(4.0001, 4.0, hint="h", wrong=near).startswith("right")


def test_judge_says_each_outcome_as_one_verdict_and_refusal_words_each_once():
    near = {"a neighbouring mistake": 4.02}
    Verdict = checks.Verdict
    assert checks.judge(4.0001, 4.0, rel=0.05, wrong=near) == (Verdict.RIGHT, "")
    assert checks.judge(4.02, 4.0, rel=0.05, wrong=near) == (Verdict.WRONG, "a neighbouring mistake")
    assert checks.judge(3.985, 4.0, rel=0.05, wrong=near) == (Verdict.PRECISION, "a neighbouring mistake")
    assert checks.judge(9.0, 4.0, rel=0.05, wrong=near) == (Verdict.FAR, "")
    assert checks.refusal(4.0, 4.0, rel=0.05, hint="h") is None
    wrong = checks.refusal(4.02, 4.0, rel=0.05, hint="divide by the layers.", wrong=near, what="floor")
    assert wrong == "not yet: that is the floor you get with a neighbouring mistake. Divide by the layers."
    digits = checks.refusal(3.985, 4.0, rel=0.05, hint="h", wrong=near, name="my_x")
    assert digits.startswith("not yet: close, but give more digits") and "my_x within 0.25% of it" in digits
    assert checks.refusal(9.0, 4.0, rel=0.05, hint="h", lead="that is the card; ") == "not yet: that is the card; h"
    # several right forms: the best verdict among them wins, and the right line names them all
    assert checks.refusal(3.0, {"a": 4.0, "b": 3.0}, rel=0.01, hint="h") is None
    assert checks.check_number(3.0, (4.0, 3.0), rel=0.01, hint="h") == "right: 4 or 3."
    assert "neighbouring" in checks.check_number(4.02, (4.0, 9.0), hint="h", wrong=near)


def test_a_worked_answer_prints_only_when_asked(capsys, monkeypatch):
    monkeypatch.delenv(checks.SHOW_ANSWERS_ENV, raising=False)
    with checks.worked_answer(False):
        print("the answer")
    assert capsys.readouterr().out.strip() == checks.HIDDEN
    with checks.worked_answer(True):
        print("the answer")
    assert capsys.readouterr().out.strip() == "the answer"
    monkeypatch.setenv(checks.SHOW_ANSWERS_ENV, "1")
    with checks.worked_answer(False):
        print("the answer")
    assert capsys.readouterr().out.strip() == "the answer"


def test_the_kernels_checks_keep_their_arithmetic_and_name_the_slips():
    from floorlab.engine.kernels import KernelRow
    from floorlab.studies import kernels_checks as kc
    floor_ms, layers = 0.28, 28
    right = kc.layer_budget_us(floor_ms, layers)
    assert right == pytest.approx(0.5 * 280 / 28)
    assert kc.check_layer_budget(None, floor_ms=floor_ms, num_layers=layers) == checks.NOT_ATTEMPTED
    assert kc.check_layer_budget(right, floor_ms=floor_ms, num_layers=layers).startswith("right")
    assert "whole step's budget" in kc.check_layer_budget(right * layers, floor_ms=floor_ms, num_layers=layers)
    assert "1.5 times the floor" in kc.check_layer_budget(3 * right, floor_ms=floor_ms, num_layers=layers)
    assert (kc.programs(1024), kc.least_split_k(1024, 132)) == (32, 5)
    assert kc.check_split_k(5, rows=1024, sm_count=132).startswith("right")
    assert kc.check_split_k(4, rows=1024, sm_count=132).startswith("not yet")
    assert kc.pdl_saving_us(1.2, 1.0, 400) == pytest.approx(0.5)
    assert kc.check_pdl(0.5, without_ms=1.2, with_ms=1.0, kernels=400).startswith("right")
    row = KernelRow("o_proj", us=4.0, bytes=1, gbps=1.0, pct_read=30.0, beyond_us=2.0, config={},
                    us_no_wait=3.0, pct_read_no_wait=40.0)
    assert kc.wait_split_us(row) == pytest.approx((3.0, 1.0))
    assert kc.check_wait(1.0, row).startswith("right") and kc.check_wait(3.0, row).startswith("not yet")


def test_the_kernels_check_cells_show_no_formula_under_the_question():
    """A check cell calls the library; the arithmetic stays in the hidden worked answer."""
    import json
    from pathlib import Path
    cells = json.loads((Path(__file__).parents[1] / "chapters" / "kernels.ipynb").read_text())["cells"]
    for cell in cells:
        text = "".join(cell["source"])
        shown = "hide-cell" not in cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "code" and shown and "check_" in text and "my_" in text:
            assert not any(sign in text for sign in (" * ", " / ", " // ", "1e3")), text


def test_an_exact_answer_is_checked_exactly():
    """rel=0 asks for the exact whole number (the kernels chapter's split_k), not a refusal."""
    from floorlab.studies import kernels_checks

    least = kernels_checks.least_split_k(1024, 132)
    assert kernels_checks.check_split_k(least, rows=1024, sm_count=132).startswith("right")
    assert not kernels_checks.check_split_k(least + 1, rows=1024, sm_count=132).startswith("right")
