"""Shared test setup: tests marked `gpu` skip on machines without CUDA."""
import pytest


def _cuda_available() -> bool:
    """Return True when torch is importable and sees a CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip_gpu)
