"""Test setup: the package from this checkout when it is not installed.

Tests that need torch are skipped (visibly) when torch is not importable;
tests that need a GPU skip unless gpuos can open its runtime on cuda:0.
"""

import importlib.util
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
if importlib.util.find_spec("gpuos") is None:
    sys.path.insert(0, os.path.dirname(HERE))

HAVE_TORCH = importlib.util.find_spec("torch") is not None
collect_ignore_glob = [] if HAVE_TORCH else ["test_*.py"]


def pytest_report_header(config):
    if not HAVE_TORCH:
        return "gpuos: torch is not installed: every PyTorch frontend test is SKIPPED"
    import torch

    return f"gpuos: torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}"


@pytest.fixture(scope="session")
def gpu():
    """Skips unless gpuos runs on cuda:0 (the reason is the skip message)."""
    import torch

    import gpuos

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    ok, why = gpuos.available(0)
    if not ok:
        pytest.skip(f"gpuos cannot run here: {why}")
    return torch.device("cuda:0")
