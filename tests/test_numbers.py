"""The one check every number of the book's arithmetic goes through refuses nonsense by name."""
import math

import numpy as np
import pytest
import torch

from floorlab.core.memory import check_fits, fits_bytes, model_bytes
from floorlab.core.numbers import element_bytes, nonnegative_number, number, positive_number, shown, whole_number
from floorlab.core.shapes import get_shape


@pytest.mark.parametrize("value", [3, 3.5, np.float32(3.5), np.int64(3), torch.tensor(3.5)])
def test_any_number_type_is_read_as_a_float(value):
    assert positive_number(value, "x") == pytest.approx(float(value))


@pytest.mark.parametrize("value, said", [
    (0, "got int 0"), (-1.5, "got float -1.5"), (math.nan, "got float nan"), (math.inf, "got float inf"),
    (-math.inf, "got float -inf"), ("300", "got str '300'"), (True, "got bool True"), (np.bool_(True), "True"),
    (None, "got NoneType None"), ([300], "got list [300]"),
    pytest.param(10**5000, "an int of about 5000 digits", id="int-of-5000-digits"),
    (2**1100, "an int of about 331 digits"), (np.float64("nan"), "nan"),
])
def test_a_positive_number_refuses_what_is_not_one_and_says_what_came(value, said):
    with pytest.raises(ValueError, match="bandwidth_gbps must be a finite number greater than 0") as info:
        positive_number(value, "bandwidth_gbps", "pass a measured bandwidth in GB/s")
    assert said in str(info.value) and str(info.value).endswith("; pass a measured bandwidth in GB/s")
    assert len(str(info.value)) < 200  # a huge value is described, never printed whole


def test_zero_is_a_number_of_bytes_but_not_a_bandwidth():
    assert nonnegative_number(0, "bytes_moved") == 0.0
    with pytest.raises(ValueError, match=">= 0, got float -1.0"):
        nonnegative_number(-1.0, "bytes_moved")
    assert number(-2, "gap_ms") == -2.0
    with pytest.raises(ValueError, match="greater than 1"):
        number(1.0, "target_multiple", above=1.0)


@pytest.mark.parametrize("value, ok", [(8, 8), (8.0, 8), (np.int64(8), 8)])
def test_a_whole_number_takes_whole_values_of_any_type(value, ok):
    assert whole_number(value, "batch") == ok and type(whole_number(value, "batch")) is int


@pytest.mark.parametrize("value", [0, -1, 2.5, math.nan, math.inf, "8", True, None, torch.tensor(True)])
def test_a_whole_number_refuses_the_rest(value):
    with pytest.raises(ValueError, match="batch must be a whole number >= 1, got"):
        whole_number(value, "batch")


@pytest.mark.parametrize("value", [0, 9, 8.0, np.int64(8), True])
def test_a_launch_setting_takes_only_a_python_int_in_its_range(value):
    assert whole_number(8, "num_stages", at_most=8, int_only=True) == 8
    with pytest.raises(ValueError, match=r"num_stages must be a whole number from 1 to 8 \(a Python int\), got"):
        whole_number(value, "num_stages", at_most=8, int_only=True)


def test_a_yes_no_tensor_is_not_a_number():
    with pytest.raises(ValueError, match="got Tensor tensor[(]True[)]"):
        positive_number(torch.tensor(True), "bandwidth_gbps")


@pytest.mark.parametrize("value", [2, 2.0, np.int64(4)])
def test_element_bytes_takes_the_sizes_a_dtype_has(value):
    assert element_bytes(value) == int(value) and type(element_bytes(value)) is int


@pytest.mark.parametrize("value", [3, 0, True, "2", None, 2.5, torch.ones(2)])
def test_element_bytes_refuses_the_rest_and_names_the_sizes(value):
    with pytest.raises(ValueError, match=r"dtype_bytes must be 1, 2, 4 or 8 \(bf16 is 2\), got"):
        element_bytes(value)


def test_shown_quotes_a_value_briefly_with_its_type():
    assert shown(300) == "int 300"
    assert shown("x" * 100).startswith("str 'xxx") and shown("x" * 100).endswith("...")
    assert len(shown("x" * 100)) < 50


# ---- core.memory ---------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, name", [({"max_batch": 0}, "max_batch"), ({"max_context": math.nan}, "max_context"),
                                          ({"max_batch": "8"}, "max_batch"), ({"dtype_bytes": 3}, "dtype_bytes")])
def test_model_bytes_refuses_limits_no_cache_has(kwargs, name):
    args = {"max_batch": 1, "max_context": 128, **kwargs}
    with pytest.raises(ValueError, match=name):
        model_bytes(get_shape("qwen3-0.6b"), **args)


def test_fits_and_check_fits_refuse_nonsense_sizes():
    with pytest.raises(ValueError, match="bytes_needed"):
        fits_bytes(math.nan, "cpu")
    for share in (0, -0.5, 1.5, math.inf):
        with pytest.raises(ValueError, match="share"):
            fits_bytes(1, "cpu", share=share)
    with pytest.raises(ValueError, match="free must be a whole number >= 0"):
        check_fits("qwen3-0.6b", "cpu", max_batch=1, max_context=128, free=-1)
    with pytest.raises(ValueError, match="headroom_bytes"):
        check_fits("qwen3-0.6b", "cpu", max_batch=1, max_context=128, free=10**12, headroom_bytes=math.nan)
    assert check_fits("qwen3-0.6b", "cpu", max_batch=1, max_context=128, free=10**12).ok


def test_wrap_keeps_to_the_column_and_never_breaks_at_a_hyphen():
    from floorlab.core.prose import COLUMN, wrap

    text = "noisy: " + "p10-p90 " * 20 + "in /tmp/floorlab-two-cards-jy0rl1ol/run.json"
    lines = wrap(text).splitlines()
    assert len(lines) > 1 and all(len(line) <= COLUMN for line in lines)
    assert all(line.strip().startswith("p10-p90") or line.strip().endswith("p10-p90")
               or "run.json" in line for line in lines[1:])
    assert "/tmp/floorlab-two-cards-jy0rl1ol/run.json" in wrap(text)
    assert wrap("short\n\nkept") == "short\n\nkept"
    table = wrap("bandwidth   one card\n            per rank alone " + "46.9, " * 20 + "GB/s").splitlines()
    assert len(table) > 2 and all(line.startswith(" " * 14) for line in table[2:])  # under its own column
