"""pytest configuration of the Python tests: the `gpu` marker and PyTorch as the oracle.

Tests marked `gpu` skip where tessera finds no GPU; ctest runs them as python.pytest_gpu (label gpu),
which reports "skipped" (exit code 77, SKIP_RETURN_CODE) when every one of them skipped.
"""
import os
import sys

import pytest

import tessera

HAS_GPU = tessera.cuda.is_available()


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped without one)")


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU visible to tessera")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_sessionfinish(session, exitstatus):
    markexpr = session.config.getoption("-m", default="")
    if markexpr == "gpu" and not HAS_GPU and exitstatus == 0:
        session.exitstatus = 77


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def source_path(*parts):
    return os.path.join(os.environ.get("TESSERA_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")), *parts)


sys.path.insert(0, os.path.dirname(__file__))
