"""Shared fixtures: every backend-parametrised test runs on numpy and (if installed) pytorch."""

import importlib.util

import numpy as np
import pytest

from tensorstream._backend import using

BACKENDS = ["numpy"] + (["pytorch"] if importlib.util.find_spec("torch") else [])


@pytest.fixture(params=BACKENDS)
def backend(request):
    """Name of a TensorLy backend; the test body runs inside a thread-local context for it."""
    with using(request.param):
        yield request.param


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def one_torch_thread():
    """One torch thread: tiny batched ops on a loaded 2-core box cost ~100x with two threads."""
    if importlib.util.find_spec("torch"):
        import torch

        n = torch.get_num_threads()
        torch.set_num_threads(1)
        yield
        torch.set_num_threads(n)
    else:
        yield
