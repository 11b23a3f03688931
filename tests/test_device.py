"""Device facts and measured bandwidth: structural facts only, never a speed."""
import json

import pytest
import torch

from floorlab.core.bandwidth import Bandwidth, measure_bandwidth
from floorlab.core.device import default_device, describe_device
from floorlab.core.memory import free_bytes

SMALL_MB = 8


def test_default_device_matches_cuda_availability():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert default_device().type == expected


def test_describe_cpu():
    facts = describe_device("cpu")
    assert facts["kind"] == "cpu"
    assert facts["name"]
    assert facts["cpu_count"] >= 1
    assert facts["torch"] == torch.__version__
    assert facts["python"].count(".") == 2
    assert facts["compute_capability"] is None
    json.dumps(facts)


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
    assert facts["kind"] == "cuda"
    assert facts["memory_gb"] > 0
    assert facts["compute_capability"]


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["copy", "read"])
def test_cuda_bandwidth_structure(kind):
    bw = measure_bandwidth("cuda", kind=kind, size_mb=256, repeats=5)
    assert bw.kind == kind
    assert bw.device.startswith("cuda")
    assert bw.p10_gbps <= bw.gbps <= bw.p90_gbps


def test_free_memory_is_a_positive_byte_count():
    assert free_bytes("cpu") > 0
