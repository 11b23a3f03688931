"""The published results the chapter "Kernels" sets its own beside: floors and µs beyond them computed
from what each source states, never typed in."""
import pytest

from floorlab.core.timing import Timing
from floorlab.studies.kernels import ANCHORS, LLAMA_1B_BYTES, beyond_per_layer_us, noise_notes


def test_each_anchor_names_its_source_and_states_what_the_arithmetic_needs():
    assert len(ANCHORS) == 3
    for anchor in ANCHORS:
        assert anchor.source_url.startswith("https://")
        assert anchor.step_us > 0 and anchor.weight_bytes > 0 and anchor.layers >= 1


def test_llama_weights_are_its_public_configs_parameters_in_bf16():
    assert LLAMA_1B_BYTES == 2 * 1_235_814_400  # 1.24B parameters, the head tied to the embedding


def test_the_5090_anchor_reproduces_its_posts_own_arithmetic():
    anchor = next(a for a in ANCHORS if a.card == "RTX 5090")
    assert anchor.floor_us() == pytest.approx(712, abs=0.5)  # 1,192 MB / 1,674 GB/s
    assert anchor.beyond_us_per_layer() == pytest.approx(288 / 28, abs=0.02)  # its 288 µs, per layer
    assert "÷ 28 layers" in anchor.arithmetic()


def test_an_anchor_without_a_stated_bandwidth_asks_for_one():
    anchor = next(a for a in ANCHORS if a.bandwidth_gbps is None)
    with pytest.raises(ValueError, match="pass bandwidth_gbps"):
        anchor.floor_us()
    assert anchor.floor_us(4000.0) == pytest.approx(LLAMA_1B_BYTES / 4e12 * 1e6)
    assert anchor.beyond_us_per_layer(4000.0) == pytest.approx(
        (anchor.step_us - LLAMA_1B_BYTES / 4e12 * 1e6) / 16)


def test_beyond_per_layer_is_the_step_less_its_floor_shared_over_the_layers():
    assert beyond_per_layer_us(0.505, 0.279, 28) == pytest.approx(226 / 28)
    with pytest.raises(ValueError, match="num_layers"):
        beyond_per_layer_us(0.5, 0.3, 0)
    with pytest.raises(ValueError, match="floor_ms"):
        beyond_per_layer_us(0.5, 0.0, 28)


def test_noise_notes_name_only_the_noisy_timings():
    steady, noisy = Timing.from_samples([1.0, 1.01, 1.02]), Timing.from_samples([1.0, 2.0, 3.0])
    text = noise_notes({"the steady one": steady, "the noisy one": noisy, "absent": None})
    assert "the noisy one is noisy" in text and "steady" not in text
    assert noise_notes({"the steady one": steady}) == ""
