"""An answer that matches several choices is refused as ambiguous: a one-letter card name, or one every
card shares, does not pass the gallery challenge."""
import pytest

from floorlab.studies import gallery

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
