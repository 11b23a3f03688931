"""The challenges' checks: 'not attempted yet' for the starter, 'right' for the right answer, a hint otherwise."""
import pytest
import torch

from floorlab.core import checks
from floorlab.core.roofline import per_launch_us
from floorlab.core.shapes import Qwen3Shape
from floorlab.engine.model import build_model
from floorlab.studies import below_the_floor


def test_ops_per_layer_check_covers_starter_right_and_wrong():
    kw = dict(gap_ms=4.67, num_layers=28, counted_per_layer=10.0, dispatch=True)
    assert below_the_floor.check_ops_per_layer(None, None, None, **kw) == checks.NOT_ATTEMPTED
    assert below_the_floor.check_ops_per_layer(10, 16.68, True, **kw).startswith("right")
    assert below_the_floor.check_ops_per_layer(10, 16.68, False, **kw).startswith("not yet")  # the verdict counts
    assert below_the_floor.check_ops_per_layer(10, 30.0, True, **kw).startswith("not yet")
    assert below_the_floor.check_ops_per_layer(100, 1.7, True, **kw).startswith("not yet")
    assert "16.7 µs" in below_the_floor.answer_ops_per_layer(issue_ms=None, eager_ms=7.8, **kw)
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

    verdict = below_the_floor.check_detector(None, model.decode_step, tokens_a, tokens_b, positions)
    assert verdict == checks.NOT_ATTEMPTED
    assert below_the_floor.check_detector(blind, model.decode_step, tokens_a, tokens_b, positions).startswith("not yet")
    assert below_the_floor.check_detector(below_the_floor.answer_detector, model.decode_step, tokens_a, tokens_b,
                             positions).startswith("right")
