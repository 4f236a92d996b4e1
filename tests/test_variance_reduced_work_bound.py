"""VarianceReducedMF.fit refuses a fit past MAX_FIT_STEPS before any work.

Found by the previous session's final review: the bound was checked after the start-up (the
data scale's pass, the initial dictionary, the step estimate, SGD's validating pass, the
scatter to a cluster), so a fit that was going to be refused paid for all of it first.
"""

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from state_helpers import state_of

import tensorstream.learners.variance_reduced as learner_module
from tensorstream import VarianceReducedMF
from tensorstream.learners._finite import FiniteDataLearner
from tensorstream.streams import Epochs

X = np.random.default_rng(0).random((60, 8))


def _no_work(monkeypatch):
    """Make every start-up step of a fit fail loudly: a refusal must come first."""
    def spent(*args, **kwargs):
        raise AssertionError("start-up work done before the fit was refused")

    monkeypatch.setattr(learner_module, "initial_state", spent)
    monkeypatch.setattr(FiniteDataLearner, "_scale_of", spent)
    monkeypatch.setattr(FiniteDataLearner, "_spread", spent)


@pytest.mark.parametrize("settings, steps", [
    ({"n_epochs": 10**7, "epoch_length": 2}, "20,000,000 steps"),
    # sgd's epoch is one pass: ceil(60 / 3) = 20 inner steps
    ({"n_epochs": 10**6, "method": "sgd", "inner_batch": 3, "data_scale": "auto"},
     "20,000,000 steps"),
    # the paper's default m = round(0.5 * 60^(1/3)) = 2
    ({"n_epochs": 6 * 10**6}, "12,000,000 steps"),
])
def test_refused_before_any_start_up_work(monkeypatch, settings, steps):
    model = VarianceReducedMF(2, random_state=0, **settings)
    _no_work(monkeypatch)
    with pytest.raises(ValueError, match=f"would take {steps} .*MAX_FIT_STEPS"):
        model.fit(X, client="tcp://192.0.2.1:8786")  # not even a connection is tried
    assert "state_" not in vars(model)


@pytest.mark.parametrize("wrap", [pd.DataFrame, lambda X: xr.DataArray(X, dims=("s", "f")),
                                  lambda X: Epochs(X, batch_size=10)])
def test_refused_before_any_start_up_work_whatever_holds_the_data(monkeypatch, wrap):
    model = VarianceReducedMF(2, random_state=0, n_epochs=6 * 10**6)
    _no_work(monkeypatch)
    with pytest.raises(ValueError, match="would take 12,000,000 steps"):
        model.fit(wrap(X))


def test_refused_fit_leaves_a_fitted_learner_as_it_was(monkeypatch):
    model = VarianceReducedMF(2, random_state=0, n_epochs=1).fit(X)
    model.set_params(n_epochs=10**7)
    before = state_of(model)
    _no_work(monkeypatch)
    with pytest.raises(ValueError, match="MAX_FIT_STEPS"):
        model.fit(X[:30])
    assert state_of(model) == before


def test_the_bound_itself_is_still_a_fit():
    # n_epochs * m at the bound is accepted: the check counts what the fit will take
    model = VarianceReducedMF(2, random_state=0, n_epochs=1, epoch_length=10**7)
    model._check_fit_work(X)
    model.set_params(epoch_length=10**7 + 1)
    with pytest.raises(ValueError, match="10,000,001 steps"):
        model._check_fit_work(X)


@pytest.mark.parametrize("method", ["vr", "sgd", "smm"])
def test_an_empty_array_is_refused_by_the_fit_not_by_the_work_bound(method):
    # the early bound divided by the epoch's batch of an empty array (ZeroDivisionError)
    with pytest.raises(ValueError, match="0 sample"):
        VarianceReducedMF(2, method=method).fit(np.zeros((0, 5)))
