"""scikit-learn's estimator checks pass for every learner that takes 2-D input.

No check is skipped by us (scikit-learn itself skips its array-API check unless
SCIPY_ARRAY_API is set): inputs are validated as scikit-learn validates them (DataFrames, lists,
objects with ``__array__``, object dtype, empty data, feature counts), every learner has one
``NotFittedError`` (``hasattr`` on a fitted attribute returns False before ``fit``) and
scikit-learn's tags (nonnegative models declare ``positive_only``; sparse input is accepted,
densified batch by batch, except by ``VarianceReducedMF``, which refuses it clearly).
"""

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks
from sklearn.utils.validation import check_is_fitted
from state_helpers import LEARNERS as NAMES
from state_helpers import make

from tensorstream import NotFittedError, OnlineNMF

LEARNERS = [make(name) for name in NAMES]  # every registered learner, small


@parametrize_with_checks(LEARNERS)
def test_scikit_learn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


@pytest.mark.parametrize("learner", LEARNERS, ids=lambda m: type(m).__name__)
def test_not_fitted_is_one_error_and_hasattr_is_false(learner):
    fresh = clone(learner)
    for name in ("components_", "n_features_in_", "n_components_", "loadings_"):
        assert not hasattr(fresh, name)
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError

    with pytest.raises(SklearnNotFittedError):
        check_is_fitted(fresh)
    with pytest.raises(NotFittedError) as raised:
        fresh.transform(np.ones((3, 4))) if hasattr(fresh, "transform") else fresh._check_fitted()
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, AttributeError)


@pytest.mark.parametrize("learner", LEARNERS, ids=lambda m: type(m).__name__)
def test_clone_and_params_round_trip(learner):
    twin = clone(learner)
    assert twin.get_params() == learner.get_params()
    assert clone(twin.set_params(**twin.get_params())).get_params() == learner.get_params()


def test_dataframes_and_lists_are_one_array():
    pandas = pytest.importorskip("pandas")
    X = np.random.default_rng(0).random((30, 4))
    reference = OnlineNMF(2, batch_size=10, max_iter=1, random_state=0).fit(X)
    for data in (pandas.DataFrame(X, columns=list("abcd")), X.tolist()):
        model = OnlineNMF(2, batch_size=10, max_iter=1, random_state=0).fit(data)
        np.testing.assert_array_equal(model.components_, reference.components_)
        assert model.transform(data).shape == (30, 2)
    with pytest.raises(ValueError, match="0 sample"):
        OnlineNMF(2).fit(X[:0])
