"""The roofline arithmetic reproduces the seed chapter's numbers and refuses bad input."""
import warnings
from dataclasses import dataclass

import pytest

from floorlab.core.roofline import (
    BelowFloorError,
    BelowFloorWarning,
    achieved_gbps,
    bytes_per_step,
    check_floor,
    floor_ms,
    gap_ms,
    per_launch_us,
)

SEED_BYTES = 1.19e9
SEED_GBPS = 380.0
SEED_MEASURED_MS = 7.80
SEED_LAUNCHES = 28 * 10


@dataclass(frozen=True)
class StandInShape:
    """Just the attributes bytes_per_step needs, with the Qwen3-0.6B numbers."""

    num_layers: int = 28
    num_kv_heads: int = 8
    head_dim: int = 128
    params: int = 596_049_920

    def weight_bytes(self, dtype_bytes=2):
        return self.params * dtype_bytes

    def kv_bytes_per_token(self, dtype_bytes=2):
        return self.num_layers * 2 * self.num_kv_heads * self.head_dim * dtype_bytes


def qwen3_06b():
    try:
        from floorlab.core.shapes import get_shape
    except ImportError:
        return StandInShape()
    return get_shape("qwen3-0.6b")


def test_seed_floor_is_3_13_ms():
    assert round(floor_ms(SEED_BYTES, SEED_GBPS), 2) == 3.13


def test_seed_gap_and_per_launch():
    floor = round(floor_ms(SEED_BYTES, SEED_GBPS), 2)
    gap = gap_ms(SEED_MEASURED_MS, floor)
    assert gap == pytest.approx(4.67)
    assert round(per_launch_us(gap, SEED_LAUNCHES)) == 17


def test_seed_achieved_bandwidth_is_153_gbps():
    assert round(achieved_gbps(SEED_BYTES, SEED_MEASURED_MS)) == 153


def test_floor_and_achieved_are_inverse():
    ms = floor_ms(2.5e9, 1000.0)
    assert ms == pytest.approx(2.5)
    assert achieved_gbps(2.5e9, ms) == pytest.approx(1000.0)


@pytest.mark.parametrize("shape", [StandInShape(), qwen3_06b()], ids=["stand-in", "preset"])
def test_bytes_per_step_qwen3_06b(shape):
    assert shape.weight_bytes(2) == 1_192_099_840
    assert shape.kv_bytes_per_token(2) == 114_688
    assert bytes_per_step(shape, 1, 0) == 1_192_099_840
    assert bytes_per_step(shape, 1, 16) == 1_192_099_840 + 16 * 114_688
    assert bytes_per_step(shape, 8, 256) == 1_192_099_840 + 8 * 256 * 114_688


def test_bytes_per_step_respects_dtype_bytes():
    shape = StandInShape()
    assert bytes_per_step(shape, 2, 10, dtype_bytes=1) == 596_049_920 + 2 * 10 * 57_344


@pytest.mark.parametrize("gbps", [0, -380.0])
def test_floor_rejects_nonpositive_bandwidth(gbps):
    with pytest.raises(ValueError, match="bandwidth_gbps"):
        floor_ms(SEED_BYTES, gbps)


def test_floor_rejects_negative_bytes():
    with pytest.raises(ValueError, match="bytes_moved"):
        floor_ms(-1, SEED_GBPS)


def test_per_launch_rejects_zero_launches():
    with pytest.raises(ValueError, match="launches"):
        per_launch_us(4.67, 0)


def test_bytes_per_step_rejects_bad_batch():
    with pytest.raises(ValueError, match="batch_size"):
        bytes_per_step(StandInShape(), 0, 16)


def test_error_message_says_what_to_pass():
    with pytest.raises(ValueError) as info:
        floor_ms(SEED_BYTES, 0)
    assert "GB/s" in str(info.value)


def test_check_floor_below_floor_warns():
    with pytest.warns(BelowFloorWarning, match="cannot have happened"):
        ratio = check_floor(1.0, 3.13)
    assert ratio == pytest.approx(1.0 / 3.13)


def test_check_floor_below_floor_strict_raises():
    with pytest.raises(BelowFloorError, match="timer that does not wait"):
        check_floor(1.0, 3.13, what="eager step", strict=True)


def test_check_floor_above_floor_returns_ratio_quietly():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ratio = check_floor(SEED_MEASURED_MS, 3.13)
        assert ratio == pytest.approx(SEED_MEASURED_MS / 3.13)
        assert round(ratio, 1) == 2.5
        assert check_floor(3.13 * 0.97, 3.13, strict=True) == pytest.approx(0.97)


def test_check_floor_rejects_zero_floor():
    with pytest.raises(ValueError, match="floor_ms"):
        check_floor(1.0, 0.0)


def test_what_if_keeps_the_seed_arithmetic_and_the_issue_bound():
    from floorlab.core.roofline import what_if_ms
    assert round(what_if_ms(7.80, saved_ms=floor_ms(1.19e9, 380) / 2), 2) == 6.23
    assert what_if_ms(11.4, saved_ms=1.5, issue_ms=11.0) == 11.0
    with pytest.raises(ValueError, match="step_ms"):
        what_if_ms(0, saved_ms=1.0)


def test_diagnose_gap_names_the_candidate_the_numbers_support():
    from floorlab.core.roofline import diagnose_gap
    assert "consistent with launch overhead" in diagnose_gap(eager_ms=7.80, floor_ms=3.13, launches=280)
    host = diagnose_gap(eager_ms=11.4, floor_ms=0.283, launches=1036, issue_ms=11.0, busy_ms=3.0)
    assert "waits for the CPU" in host and "kernels are the next cost" in host
    assert "inside the operators" in diagnose_gap(eager_ms=700, floor_ms=313, launches=1100)
    assert "hardly a gap" in diagnose_gap(eager_ms=130, floor_ms=127, launches=1100)


def test_an_untied_input_table_counts_only_the_gathered_rows():
    from floorlab.core.shapes import get_shape

    big = get_shape("qwen3-8b")
    table = big.vocab_size * big.hidden_size * 2
    assert big.streamed_weight_bytes(1) == big.weight_bytes(2) - table + big.hidden_size * 2
    assert round(big.weight_bytes(2) / 1e9, 2) == 16.38
    assert round(bytes_per_step(big, 1, 0) / 1e9, 2) == 15.14
    assert bytes_per_step(big, 8, 0) - bytes_per_step(big, 1, 0) == 7 * big.hidden_size * 2
    small = get_shape("qwen3-0.6b")  # tied: the output head streams the whole table
    assert bytes_per_step(small, 8, 0) == small.weight_bytes(2)


def test_one_floor_policy_larger_bandwidth_and_prompt_plus_one():
    from floorlab.core.roofline import decode_floor, floor_bandwidth
    from floorlab.core.shapes import get_shape

    shape = get_shape("qwen3-0.6b")
    assert floor_bandwidth({"copy": 4247.5, "read": 4281.3}) == (4281.3, "read")
    f = decode_floor(shape, batch=1, prompt_tokens=32, bandwidths={"copy": 4247.5, "read": 4281.3})
    assert f.visible_tokens == 33 and f.bandwidth_kind == "read"
    assert f.bytes_per_step == bytes_per_step(shape, 1, 33)
    assert f.floor_ms == pytest.approx(floor_ms(f.bytes_per_step, 4281.3))
    again = decode_floor(shape, batch=1, prompt_tokens=32, bandwidths={"read": 4281.3, "copy": 4247.5})
    assert again == f  # one configuration, one floor


def test_the_floor_says_what_the_engine_reads_beyond_it():
    from floorlab.core.roofline import decode_floor
    from floorlab.core.shapes import get_shape

    f = decode_floor(get_shape("qwen3-0.6b"), batch=1, prompt_tokens=32, bandwidths={"read": 4000.0},
                     cache_tokens=128)
    assert f.bytes_read_by_engine == f.bytes_per_step + (128 - 33) * 114_688
    assert "128 slots" in f.reads_note() and "33 tokens" in f.reads_note()


@pytest.mark.parametrize("issue_ms", [None, 0.0, 5.0, 8.9, 16.93, 100.0])
@pytest.mark.parametrize("saved_ms", [0.0, 0.1, 4.0, 20.0])
def test_a_what_if_never_predicts_a_slower_step(issue_ms, saved_ms):
    from floorlab.core.roofline import what_if_ms

    assert what_if_ms(8.91, saved_ms=saved_ms, issue_ms=issue_ms) <= 8.91


def test_the_fixed_cost_model_takes_the_floor_out_of_busy_time_once():
    from floorlab.core.roofline import (crossover_gbps, kernels_per_layer_budget,
                                   overhead_us_per_kernel, predicted_ms)

    # 512 kernels busy 1.73 ms over a 0.275 ms floor: each costs (1.73-0.275)/512 ms beyond its bytes
    us = overhead_us_per_kernel(1.73, 0.275, 512)
    assert us == pytest.approx((1.73 - 0.275) * 1e3 / 512)
    assert predicted_ms(0.275, 512, us) == pytest.approx(1.73)  # the model reproduces its own input
    assert crossover_gbps(1.196e9, 512, us) == pytest.approx(1.196e9 / ((1.73 - 0.275) * 1e-3) / 1e9)
    assert kernels_per_layer_budget(0.275, 2.0, us, 28) == pytest.approx(275 / us / 28)


def test_the_verdict_follows_who_is_busy_not_a_loose_threshold():
    from floorlab.core.roofline import diagnose_gap, gap_verdict

    # a CPU step: 36.6 µs per launch, but the operators fill 181 of 197 ms
    cpu = dict(eager_ms=197.0, floor_ms=155.0, launches=1138, busy_ms=181.0)
    assert gap_verdict(**cpu) == "operators"
    assert "inside the operators" in diagnose_gap(**cpu)
    # a GPU step whose host needs the whole step to issue it
    gpu = dict(eager_ms=15.4, floor_ms=0.279, launches=512, issue_ms=15.38, busy_ms=1.78)
    assert gap_verdict(**gpu) == "dispatch"
    # the laptop study: 17 µs per launch and nothing else known
    assert gap_verdict(eager_ms=7.80, floor_ms=3.13, launches=280) == "dispatch"
    assert gap_verdict(eager_ms=3.5, floor_ms=3.13, launches=280) == "bytes"


# ---- arithmetic that refuses nonsense ---------------------------------------------------

NAN, INF = float("nan"), float("inf")


def test_the_fixed_cost_model_refuses_an_overhead_of_zero_instead_of_dividing_by_it():
    from floorlab.core.roofline import crossover_gbps, kernels_per_layer_budget, predicted_ms

    for overhead in (0, 0.0, -2.8, NAN, INF, "2.8"):
        with pytest.raises(ValueError, match="overhead_us must be a finite number greater than 0") as info:
            crossover_gbps(1.196e9, 512, overhead)
        assert "overhead_us_per_kernel" in str(info.value)  # how to get one
        with pytest.raises(ValueError, match="overhead_us"):
            kernels_per_layer_budget(0.275, 2.0, overhead, 28)
    with pytest.raises(ValueError, match="target_multiple must be a finite number greater than 1"):
        kernels_per_layer_budget(0.275, 0.5, 2.8, 28)
    with pytest.raises(ValueError, match="num_layers"):
        kernels_per_layer_budget(0.275, 2.0, 2.8, 0)
    with pytest.raises(ValueError, match="kernels"):
        crossover_gbps(1.196e9, 0, 2.8)
    assert predicted_ms(0.275, 512, 0.0) == 0.275  # no overhead: the floor itself
    with pytest.raises(ValueError, match="floor_ms"):
        predicted_ms(NAN, 512, 2.8)


@pytest.mark.parametrize("bandwidths, said", [
    (300, "got int 300"), (300.0, "got float 300.0"), ("300", "got str '300'"), ([300, 400], "got list"),
    (None, "got NoneType None"), ({"write": 300.0}, "got the key str 'write'"),
])
def test_bandwidths_of_the_wrong_type_say_what_to_pass(bandwidths, said):
    from floorlab.core.roofline import decode_floor

    with pytest.raises(ValueError) as info:
        decode_floor(qwen3_06b(), batch=1, prompt_tokens=32, bandwidths=bandwidths)
    assert str(info.value).startswith("bandwidths should be a Bandwidths from fl.measure_bandwidths() or a "
                                      "dict {'copy': GB/s, 'read': GB/s}; ")
    assert said in str(info.value)


@pytest.mark.parametrize("bad", [NAN, INF, -INF, 0.0, -4000.0, "4000", True, None])
@pytest.mark.parametrize("order", ["copy first", "read first"])
def test_a_bad_bandwidth_is_refused_whatever_the_order_of_the_keys(bad, order):
    from floorlab.core.roofline import decode_floor, floor_bandwidth

    pairs = [("copy", bad), ("read", 4000.0)]
    bandwidths = dict(pairs if order == "copy first" else pairs[::-1])
    with pytest.raises(ValueError, match=r"bandwidths\['copy'\] must be a finite number greater than 0"):
        floor_bandwidth(bandwidths)
    with pytest.raises(ValueError, match="bandwidths"):
        decode_floor(qwen3_06b(), batch=1, prompt_tokens=32, bandwidths=bandwidths)
    with pytest.raises(ValueError, match="at least one measured bandwidth"):
        floor_bandwidth({})


@pytest.mark.parametrize("call, name", [
    (lambda: floor_ms(SEED_BYTES, NAN), "bandwidth_gbps"),
    (lambda: floor_ms(SEED_BYTES, INF), "bandwidth_gbps"),
    (lambda: floor_ms(NAN, SEED_GBPS), "bytes_moved"),
    (lambda: floor_ms("1.19e9", SEED_GBPS), "bytes_moved"),
    (lambda: floor_ms(10**5000, SEED_GBPS), "bytes_moved"),
    (lambda: achieved_gbps(SEED_BYTES, 0), "ms"),
    (lambda: achieved_gbps(SEED_BYTES, NAN), "ms"),
    (lambda: gap_ms(NAN, 3.13), "measured_ms"),
    (lambda: per_launch_us(NAN, 280), "gap_ms"),
    (lambda: per_launch_us(4.67, INF), "launches"),
    (lambda: check_floor(NAN, 3.13), "measured_ms"),
    (lambda: check_floor(7.8, INF), "floor_ms"),
    (lambda: bytes_per_step(StandInShape(), 1.5, 16), "batch_size"),
    (lambda: bytes_per_step(StandInShape(), True, 16), "batch_size"),
    (lambda: bytes_per_step(StandInShape(), 1, NAN), "context_len"),
    (lambda: bytes_per_step(StandInShape(), 1, 16, dtype_bytes=True), "dtype_bytes"),
    (lambda: bytes_per_step("qwen3-0.6b", 1, 16), "shape should be a model shape"),
])
def test_nan_infinity_and_wrong_types_are_refused_by_name(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_the_below_floor_rule_and_the_verdict_refuse_what_no_ratio_is():
    from floorlab.core.roofline import gap_verdict, is_below_floor

    assert is_below_floor(0.5) and not is_below_floor(0.96)
    for ratio in (NAN, -1.0, "0.5"):
        with pytest.raises(ValueError, match="ratio"):
            is_below_floor(ratio)
    with pytest.raises(ValueError, match="eager_ms"):
        gap_verdict(eager_ms=NAN, floor_ms=3.13, launches=280)
    with pytest.raises(ValueError, match="busy_ms"):
        gap_verdict(eager_ms=7.8, floor_ms=3.13, launches=280, busy_ms=NAN)


@pytest.mark.parametrize("field, value", [
    ("floor_ms", INF), ("floor_ms", -5.0), ("floor_ms", NAN), ("bandwidth_gbps", 0.0), ("bandwidth_gbps", "4000"),
    ("batch", 0), ("bytes_per_step", "1.2 GB"), ("bandwidth_kind", "hbm"), ("preset", None), ("cache_tokens", -1),
])
def test_a_floor_no_measurement_could_have_is_refused(field, value):
    from dataclasses import asdict

    from floorlab.core.roofline import Floor, decode_floor

    good = asdict(decode_floor(qwen3_06b(), batch=1, prompt_tokens=32, bandwidths={"read": 4000.0}))
    with pytest.raises(ValueError, match=field):
        Floor.from_dict({**good, field: value})
    assert Floor.from_dict(good).floor_ms == good["floor_ms"]
