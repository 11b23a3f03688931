"""The challenges' checks: 'not attempted yet' for the starter, 'right' for the right answer, a hint otherwise."""
import pytest
import torch

from floorlab import challenges as ch
from floorlab.model import build_model
from floorlab.shapes import Qwen3Shape


def test_ops_per_layer_check_covers_starter_right_and_wrong():
    kw = dict(gap_ms=4.67, num_layers=28, counted_per_layer=10.0)
    assert ch.check_ops_per_layer(None, None, **kw) == ch.NOT_ATTEMPTED
    assert ch.check_ops_per_layer(10, 16.68, **kw).startswith("right")
    assert ch.check_ops_per_layer(10, 30.0, **kw).startswith("not yet")
    assert ch.check_ops_per_layer(100, 1.7, **kw).startswith("not yet")
    assert "16.7 µs" in ch.answer_ops_per_layer(issue_ms=None, eager_ms=7.8, **kw)


def test_padding_at_batch_five_pads_three_rows_and_breaks_even_where_reads_match_the_saving():
    answer = ch.padding_answer(batch=5, buckets=(1, 2, 4, 8), kv_bytes_per_token=114_688,
                               bandwidth_gbps=4000, launch_saving_ms=8.0)
    assert (answer.bucket, answer.padded_rows) == (8, 3)
    # 3 rows x 114,688 B per token of context at 4000 GB/s take 8 ms at this context
    assert answer.breakeven_context == int(8e-3 * 4000e9 / (3 * 114_688))
    assert ch.check_padding(None, None, answer) == ch.NOT_ATTEMPTED
    assert ch.check_padding(3, answer.breakeven_context, answer).startswith("right")
    assert ch.check_padding(4, answer.breakeven_context, answer).startswith("not yet")
    with pytest.raises(ValueError, match="largest bucket"):
        ch.padding_answer(batch=9, buckets=(1, 2, 4, 8), kv_bytes_per_token=1, bandwidth_gbps=1,
                          launch_saving_ms=1)


def test_scale_answer_grows_launches_with_layers_not_bytes():
    answer = ch.scale_answer(name="big", bytes_per_step=16e9, bandwidth_gbps=380, num_layers=36,
                             kernels_per_layer=10, per_launch_us=17)
    assert answer.launches == 360
    assert answer.floor_ms == pytest.approx(16e9 / 380e9 * 1e3)
    assert answer.gap_ms == pytest.approx(360 * 17e-3)
    assert ch.check_scale(answer.floor_ms, answer.launch_fraction, answer).startswith("right")
    assert ch.check_scale(answer.floor_ms * 2, answer.launch_fraction, answer).startswith("not yet")


def test_fast_card_arithmetic():
    assert ch.crossover_gbps(1_000_000_000, 500, 2.0) == pytest.approx(1000.0)
    assert ch.kernels_per_layer_budget(0.28, 2.0, 3.5, 28) == pytest.approx(280 / 3.5 / 28)
    assert ch.predicted_ms(0.28, 300, 3.0) == pytest.approx(1.18)
    assert ch.check_number(None, 1.0, hint="h") == ch.NOT_ATTEMPTED
    assert ch.check_number(1.02, 1.0, hint="h").startswith("right")
    assert ch.check_number(2.0, 1.0, hint="try again") == "not yet: try again"


def test_detector_check_tells_a_working_detector_from_a_blind_one():
    shape = Qwen3Shape(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=1,
                       head_dim=16, vocab_size=50, tie_word_embeddings=True)
    model = build_model(shape, dtype=torch.float32, max_batch=2, max_context=8)
    model.prefill(torch.zeros(1, 2, dtype=torch.long))
    tokens_a, tokens_b, positions = torch.tensor([1]), torch.tensor([7]), torch.tensor([2])

    def blind(step, a, b, pos):
        return False

    assert ch.check_detector(None, model.decode_step, tokens_a, tokens_b, positions) == ch.NOT_ATTEMPTED
    assert ch.check_detector(blind, model.decode_step, tokens_a, tokens_b, positions).startswith("not yet")
    assert ch.check_detector(ch.answer_detector, model.decode_step, tokens_a, tokens_b,
                             positions).startswith("right")
