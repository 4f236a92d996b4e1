"""Shared fixtures: every backend-parametrised test runs on numpy and (if installed) pytorch.

The suite is deterministic whatever the machine's load, its core count and ``-n``:

* one BLAS/OpenMP thread and one torch thread per test process. Results then do not depend
  on how a GEMM is split between threads, and two xdist workers on a 2-core machine do not
  oversubscribe it (the learners' small products ran up to 100x slower with two threads each).
  Tests of thread handling set their own limits inside the test.
* hypothesis draws the same examples on every run (``derandomize``, no example database), so
  a red run is reproducible by rerunning it; ``--hypothesis-profile=explore`` draws new ones.
"""

import importlib.util
import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"  # libraries loaded from now on start with one thread

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from tensorstream.core.backend import using  # noqa: E402

BACKENDS = ["numpy"] + (["pytorch"] if importlib.util.find_spec("torch") else [])

settings.register_profile("deterministic", derandomize=True, database=None, deadline=None,
                          print_blob=True)
settings.register_profile("explore", deadline=None)
settings.load_profile("deterministic")


def pytest_configure(config):
    threadpool_limits(1)  # the libraries already loaded (numpy's OpenBLAS)
    if importlib.util.find_spec("torch"):
        import torch

        torch.set_num_threads(1)


@pytest.fixture(params=BACKENDS)
def backend(request):
    """Name of a TensorLy backend; the test body runs inside a thread-local context for it."""
    with using(request.param):
        yield request.param


@pytest.fixture
def rng():
    return np.random.default_rng(0)



def step_params(eta, method="vr"):
    """``VarianceReducedMF``'s ``method_params`` that give ``method`` the step ``eta``, or None
    where the method takes no step (SMM): ``METHOD_PARAMS`` says which do."""
    from tensorstream.algorithms.variance_reduced import METHOD_PARAMS

    return {"step_size": eta} if "step_size" in METHOD_PARAMS[method] else None


def assert_same_state(before, after):
    """Two :class:`tensorstream.engine.OnlineState` hold the same values (bit for bit)."""
    assert (before.scale, before.n_steps, before.n_samples_seen) == (
        after.scale, after.n_steps, after.n_samples_seen)
    assert len(before.loadings) == len(after.loadings)
    for U, V in zip(before.loadings, after.loadings):
        np.testing.assert_array_equal(np.asarray(U), np.asarray(V))
    assert (before.statistics is None) == (after.statistics is None)
    if before.statistics is not None:
        for name in ("A", "B"):
            np.testing.assert_array_equal(np.asarray(before.statistics[name]),
                                          np.asarray(after.statistics[name]))
        assert before.statistics["c"] == after.statistics["c"]
