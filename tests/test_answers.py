"""An answer that matches several choices is refused as ambiguous; a detector that returns nothing is
told so; a one-letter card name does not pass the gallery challenge."""
import pytest
import torch

from floorlab.core.shapes import Qwen3Shape
from floorlab.engine.model import build_model
from floorlab.studies import below_the_floor, gallery

GAPS = {"Intel Xeon (cpu)": 415.0, "NVIDIA H200 (cuda)": 14.2, "NVIDIA H100 (cuda)": 12.0,
        "RTX 4090 (cuda)": 9.1}


def check(card, us=9.1):
    return gallery.check_smallest(card, us, GAPS, names=("my_card", "my_gap_us"), unit=" µs", hint="h")


@pytest.mark.parametrize("name", ["a", "c", "x", "0", "A", " "])
def test_a_one_letter_name_does_not_pass(name):
    assert not check(name).startswith("right")


@pytest.mark.parametrize("name", ["cuda", "nvidia", "(cuda)"])
def test_a_name_every_card_shares_is_ambiguous(name):
    verdict = check(name, 12.0)
    assert verdict.startswith("not yet") and "cards' names" in verdict and "tell it apart" in verdict


def test_a_whole_label_picks_its_card_and_a_distinct_part_still_does():
    assert check("RTX 4090 (cuda)").startswith("right")
    assert check("4090").startswith("right")
    assert check("rtx").startswith("right")


@pytest.fixture
def tiny_step():
    shape = Qwen3Shape(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=1,
                       head_dim=16, vocab_size=50, tie_word_embeddings=True)
    model = build_model(shape, dtype=torch.float32, max_batch=2, max_context=8)
    model.prefill(torch.zeros(1, 2, dtype=torch.long))
    return model.decode_step, torch.tensor([1]), torch.tensor([7]), torch.tensor([2])


def test_a_detector_that_returns_nothing_is_told_so(tiny_step):
    def forgot_return(step, a, b, pos):
        step(a, pos)

    verdict = below_the_floor.check_detector(forgot_return, *tiny_step)
    assert verdict.startswith("not yet") and "returned nothing (None)" in verdict
    assert "not attempted" not in verdict
