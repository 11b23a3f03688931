"""Device facts and measured bandwidth: structural facts only, never a speed."""
import json

import pytest
import torch

from floorlab.core.bandwidth import Bandwidth, measure_bandwidth
from floorlab.core.device import DeviceFacts, default_device, describe_device
from floorlab.core.memory import free_bytes

SMALL_MB = 8


def test_default_device_matches_cuda_availability():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert default_device().type == expected


def test_describe_cpu():
    facts = describe_device("cpu")
    assert facts.kind == "cpu"
    assert facts.name
    assert facts.cpu_count >= 1
    assert facts.torch == torch.__version__
    assert facts.python.count(".") == 2
    assert facts.compute_capability is None
    assert json.loads(json.dumps(facts.to_dict())) == facts.to_dict()
    assert DeviceFacts.from_dict(facts.to_dict()) == facts


@pytest.mark.parametrize("kind", ["copy", "read"])
def test_cpu_bandwidth_structure(kind):
    bw = measure_bandwidth("cpu", kind=kind, size_mb=SMALL_MB, repeats=5)
    assert isinstance(bw, Bandwidth)
    assert bw.kind == kind
    assert bw.device == "cpu"
    assert bw.gbps > 0
    assert bw.p10_gbps <= bw.gbps <= bw.p90_gbps
    json.dumps(bw.to_dict())


def test_copy_counts_read_and_write():
    copy = measure_bandwidth("cpu", kind="copy", size_mb=SMALL_MB, repeats=2)
    read = measure_bandwidth("cpu", kind="read", size_mb=SMALL_MB, repeats=2)
    assert copy.bytes_per_rep == 2 * SMALL_MB * 2**20
    assert read.bytes_per_rep == SMALL_MB * 2**20


def test_unknown_kind_lists_allowed_values():
    with pytest.raises(ValueError, match="copy.*read"):
        measure_bandwidth("cpu", kind="write", size_mb=SMALL_MB)


@pytest.mark.parametrize("size_mb", [0, -5])
def test_nonpositive_size_is_refused(size_mb):
    with pytest.raises(ValueError, match="size_mb"):
        measure_bandwidth("cpu", size_mb=size_mb)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_cuda_without_gpu_says_what_to_pass():
    with pytest.raises(ValueError, match="device='cpu'"):
        measure_bandwidth("cuda", size_mb=SMALL_MB)


@pytest.mark.gpu
def test_describe_cuda():
    facts = describe_device("cuda")
    assert facts.kind == "cuda"
    assert facts.memory_gb > 0
    assert facts.compute_capability


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["copy", "read"])
def test_cuda_bandwidth_structure(kind):
    bw = measure_bandwidth("cuda", kind=kind, size_mb=256, repeats=5)
    assert bw.kind == kind
    assert bw.device.startswith("cuda")
    assert bw.p10_gbps <= bw.gbps <= bw.p90_gbps


def test_free_memory_is_a_positive_byte_count():
    assert free_bytes("cpu") > 0


@pytest.mark.parametrize("field, value", [("gbps", float("nan")), ("gbps", float("inf")), ("gbps", 0.0),
                                          ("p10_gbps", -1.0), ("gbps", "300"), ("kind", "write"),
                                          ("bytes_per_rep", 0), ("device", None)])
def test_a_bandwidth_no_measurement_gives_is_refused(field, value):
    from dataclasses import asdict

    from floorlab.core.bandwidth import Bandwidths

    good = Bandwidth("read", 300.0, 290.0, 310.0, 10**9, "cpu")
    with pytest.raises(ValueError, match=field if field != "gbps" else "read gbps"):
        Bandwidth(**{**asdict(good), field: value})
    copy = Bandwidth(**{**asdict(good), "kind": "copy"})
    assert Bandwidths(copy=copy, read=good).floor_gbps == 300.0
    with pytest.raises(ValueError, match="copy must be the measured copy Bandwidth"):
        Bandwidths(copy=good, read=good)  # two reads
    with pytest.raises(ValueError, match="read must be the measured read Bandwidth"):
        Bandwidths(copy=copy, read=300.0)
    with pytest.raises(ValueError, match="measured 'copy' and 'read'"):
        Bandwidths.from_dict({"copy": asdict(copy)})


@pytest.mark.parametrize("kwargs, name", [({"repeats": 0}, "repeats"), ({"repeats": 2.5}, "repeats"),
                                          ({"size_mb": float("nan")}, "size_mb"), ({"size_mb": "16"}, "size_mb")])
def test_measure_bandwidth_refuses_settings_that_measure_nothing(kwargs, name):
    with pytest.raises(ValueError, match=name):
        measure_bandwidth("cpu", **kwargs)
