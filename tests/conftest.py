"""Shared test setup: tests marked `gpu` skip on machines without CUDA.

Without CUDA, Triton kernels can only run in Triton's CPU interpreter, which must be on
before the kernels are first loaded: so it is switched on here, and only then.
"""
import os

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


if not _cuda_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
