"""Properties of every learner of the registry on both backends, for random input.

For random shapes, dtypes, scales (1e-8 to 1e8), missing entries (where a learner takes them)
and bad values (NaN, inf, negative entries, entries whose squares overflow), a learning step
either

* refuses the batch with a clear ``ValueError``/``TypeError`` raised by tensorstream itself,
  the learner's state bit-identical before and after (its random generator included), or
* succeeds with finite factors inside their constraint sets (nonnegative where the model is).

Only that is asserted: the quality of a fit at scale 1e-8 is another matter (scale-free
thresholds), checked where that behaviour is defined.

The examples are derandomized (``tests/conftest.py``) and tiny, to keep the suite fast.
"""

import contextlib
import traceback
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from state_helpers import (
    BACKENDS,
    LEARNERS,
    assert_feasible,
    entry_of,
    factors,
    make,
    state_of,
)

import tensorstream

PACKAGE = str(Path(tensorstream.__file__).resolve().parent)
SCALES = [1e-8, 1e-4, 1.0, 1e4, 1e8]
DTYPES = ["float64", "float32", "float16", "int64", "bool"]
BAD = [None, None, "nan", "inf", "negative", "huge"]


def takes_missing(name):
    return "missing" in make(name).get_params()


@st.composite
def batches(draw, name):
    """``(X, missing)``: a tiny batch of the learner's kind and whether NaN marks missing."""
    n = draw(st.integers(1, 8))
    modes = [draw(st.integers(1, 4))]
    if not entry_of(name).matrix and entry_of(name).kind == "online":
        modes += draw(st.lists(st.integers(1, 3), max_size=1))  # a third-order tensor
    seed = draw(st.integers(0, 2**16))
    X = np.random.default_rng(seed).random((n, *modes)) + 0.05
    X = X * draw(st.sampled_from(SCALES))
    with np.errstate(over="ignore"):  # 1e8 in float16 is inf: one more bad value
        X = X.astype(draw(st.sampled_from(DTYPES)))
    missing = takes_missing(name) and draw(st.booleans())
    bad = draw(st.sampled_from(BAD + (["missing"] if missing else [])))
    X = np.array(X, dtype=float) if bad is not None else X
    where = tuple(draw(st.integers(0, s - 1)) for s in X.shape)
    if bad in ("nan", "missing"):
        X[where] = np.nan
    elif bad == "inf":
        X[where] = np.inf
    elif bad == "negative":
        X[where] = -1.0
    elif bad == "huge":
        X = X * 1e160
    return X, missing


def on(backend, X):
    if backend == "pytorch":
        import torch

        return torch.tensor(X)
    return X


@contextlib.contextmanager
def quiet():
    """No warnings (convergence, overflow) in the output: outcomes are asserted instead."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def step(model, X):
    """One learning step: ``partial_fit`` where there is one, else ``fit``."""
    return (model.partial_fit if hasattr(model, "partial_fit") else model.fit)(X)


def assert_holds(model, X):
    before = state_of(model)
    try:
        with quiet():
            step(model, X)
    except (ValueError, TypeError) as error:
        frame = traceback.extract_tb(error.__traceback__)[-1]
        assert frame.filename.startswith(PACKAGE), f"raised inside a dependency: {error!r}"
        assert str(error), "an error without a message"
        assert state_of(model) == before, f"the state changed on a refusal: {error!r}"
    else:
        assert factors(model), "fitted without factors"
        assert_feasible(model)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", LEARNERS)
@settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                 HealthCheck.too_slow])
@given(data=st.data())
def test_a_step_refuses_cleanly_or_learns_feasible_factors(name, backend, data):
    X, missing = data.draw(batches(name))
    params = {"missing": "nan"} if missing else {}
    model = make(name, **params)
    if data.draw(st.booleans(), label="fitted first"):  # a learner with a state to keep
        clean = np.abs(np.nan_to_num(np.array(X, dtype=float), posinf=1.0)) % 1.0 + 0.05
        try:
            with quiet():
                step(model, on(backend, clean))
        except (ValueError, TypeError):
            model = make(name, **params)  # e.g. more components than samples allow
    assert_holds(model, on(backend, X))
