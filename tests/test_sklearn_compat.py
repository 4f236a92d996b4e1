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


# -- found by review (2026-11-26) -----------------------------------------------------------------


def test_not_fitted_is_scikit_learns_error_too():
    from sklearn.exceptions import NotFittedError as Theirs

    from tensorstream import RobustNMF

    X = np.random.default_rng(0).random((10, 4))
    with pytest.raises(Theirs, match="call fit or partial_fit first"):
        OnlineNMF(2).transform(X)
    with pytest.raises(NotFittedError, match="call fit first"):  # it has no partial_fit
        RobustNMF(2).transform(X)
    assert not hasattr(OnlineNMF(2), "components_")


def test_a_random_state_instance_is_accepted_and_drawn_from():
    X = np.random.default_rng(0).random((60, 8))
    a = OnlineNMF(3, batch_size=10, max_iter=2, random_state=np.random.RandomState(0)).fit(X)
    b = OnlineNMF(3, batch_size=10, max_iter=2, random_state=np.random.RandomState(0)).fit(X)
    np.testing.assert_array_equal(a.components_, b.components_)
    state = np.random.RandomState(0)
    with pytest.raises(ValueError):
        OnlineNMF(3, random_state=state).fit(-X)
    assert state.randint(1000) == np.random.RandomState(0).randint(1000)  # a refusal: untouched


def test_set_params_of_n_components_after_the_fit_is_refused_by_name(tmp_path):
    X = np.random.default_rng(0).random((40, 6))
    model = OnlineNMF(3, batch_size=10, random_state=0).partial_fit(X)
    model.set_params(n_components=4)
    for call in (lambda: model.partial_fit(X), lambda: model.transform(X),
                 lambda: model.save(tmp_path / "m")):
        with pytest.raises(ValueError, match="n_components=4, but this OnlineNMF has 3 atoms"):
            call()
    assert not (tmp_path / "m.npz").exists()
    assert model.set_params(n_components=3).partial_fit(X).n_steps_ == 2
    assert OnlineNMF(3).fit(X).set_params(n_components=4).fit(X).n_components_ == 4


@pytest.mark.parametrize("missing", [None, "nan"])
def test_no_features_is_said_as_such_with_missing_entries_too(missing):
    with pytest.raises(ValueError, match=r"0 feature\(s\)"):
        OnlineNMF(2, missing=missing).fit(np.empty((5, 0)))


def test_a_nan_hint_only_where_missing_entries_are_supported():
    from tensorstream import OnlineDivergenceNMF, RobustNMF

    X = np.random.default_rng(0).random((10, 4))
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="use missing='nan'"):
        OnlineNMF(2).fit(X)
    for learner in (RobustNMF(2), OnlineDivergenceNMF(2)):
        with pytest.raises(ValueError) as raised:
            learner.fit(X)
        assert "NaN" in str(raised.value) and "missing='nan'" not in str(raised.value)


@pytest.mark.parametrize("how", ["fit", "partial_fit"])
def test_dataframe_columns_are_kept_and_checked_by_name(how):
    """Columns in another order were read by position: other codes, silently."""
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(np.random.default_rng(0).random((60, 6)), columns=list("abcdef"))
    model = getattr(OnlineNMF(2, batch_size=10, max_iter=2, random_state=0), how)(X)
    assert list(model.feature_names_in_) == list("abcdef")
    with pytest.raises(ValueError, match="feature names should match"):
        model.transform(X[list("fedcba")])
    with pytest.raises(ValueError, match="feature names should match"):
        model.partial_fit(X[list("fedcba")])
    with pytest.warns(UserWarning, match="X has no feature names"):
        model.transform(X.to_numpy())
    assert "feature_names_in_" not in vars(OnlineNMF(2, max_iter=1).fit(X.to_numpy()))
    refit = model.fit(X.to_numpy())
    assert not hasattr(refit, "feature_names_in_")


def test_feature_names_survive_a_checkpoint(tmp_path):
    pd = pytest.importorskip("pandas")
    from tensorstream import load

    X = pd.DataFrame(np.random.default_rng(0).random((64, 6)), columns=list("abcdef"))
    model = OnlineNMF(3, random_state=0).fit(X)
    model.save(tmp_path / "m")
    loaded = load(tmp_path / "m.npz")
    assert list(loaded.feature_names_in_) == list("abcdef")
    with pytest.raises(ValueError, match="feature names should match"):
        loaded.transform(X[list("fedcba")])


def test_the_not_fitted_error_pickles():
    import pickle

    from sklearn.exceptions import NotFittedError as Theirs

    with pytest.raises(NotFittedError) as raised:
        OnlineNMF(2).transform(np.ones((3, 4)))
    back = pickle.loads(pickle.dumps(raised.value))
    assert isinstance(back, NotFittedError) and isinstance(back, Theirs)
    assert str(back) == str(raised.value)


def test_a_learner_given_a_random_state_instance_checkpoints(tmp_path):
    from tensorstream import OnlineCPDL, VarianceReducedMF, load

    X = np.random.default_rng(0).random((64, 6))
    for cls in (OnlineNMF, OnlineCPDL, VarianceReducedMF):
        model = cls(3, random_state=np.random.RandomState(0)).fit(X)
        model.save(tmp_path / cls.__name__)
        loaded = load(tmp_path / f"{cls.__name__}.npz")
        np.testing.assert_array_equal(loaded.components_ if hasattr(loaded, "components_")
                                      else loaded.loadings_[0],
                                      model.components_ if hasattr(model, "components_")
                                      else model.loadings_[0])


@pytest.mark.parametrize("name", ["RobustOnlineNMF", "OnlineMaxNormMD", "VarianceReducedMF"])
def test_a_data_scale_declared_since_the_fit_is_refused_by_name(name):
    """It was ignored silently (the fitted scale kept), and saved next to it."""
    import tensorstream

    X = np.random.default_rng(0).random((100, 12))
    model = getattr(tensorstream, name)(3, random_state=0).fit(X)
    model.set_params(data_scale=5.0)
    with pytest.raises(ValueError, match="data_scale=5.0"):
        model.partial_fit(X)
    model.set_params(data_scale="auto").partial_fit(X)
    fixed = getattr(tensorstream, name)(3, data_scale=2.0, random_state=0).fit(X)
    fixed.partial_fit(X)  # declared at the fit: the same


def test_a_dataframe_mask_is_an_array_matched_by_column():
    """fit(X_df, mask=X_df.notna()) raised a KeyError (the mask DataFrame was indexed by the
    shuffled rows' positions as labels); a mask whose columns are in another order would mark
    other entries."""
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(np.random.default_rng(0).random((40, 6)), columns=list("abcdef"))
    mask = X.notna()
    mask.iloc[::3, 1] = False
    by_array = OnlineNMF(2, batch_size=10, max_iter=2, random_state=0).fit(
        X, mask=mask.to_numpy())
    by_frame = OnlineNMF(2, batch_size=10, max_iter=2, random_state=0).fit(X, mask=mask)
    np.testing.assert_array_equal(by_frame.components_, by_array.components_)
    np.testing.assert_array_equal(by_frame.transform(X, mask=mask),
                                  by_array.transform(X, mask=mask.to_numpy()))
    for call in (OnlineNMF(2, random_state=0).fit, OnlineNMF(2, random_state=0).partial_fit,
                 by_frame.transform):
        with pytest.raises(ValueError, match="a DataFrame mask must name X's columns"):
            call(X, mask=mask[list("fedcba")])


def test_a_dataframe_mask_with_unnamed_columns_is_an_array_too():
    """A mask DataFrame whose columns are not strings (pd.DataFrame(array).notna(): integer
    labels) stayed a DataFrame: fit took its batches by row position, which indexed its
    columns (a KeyError, or with one batch of a square X a column-permuted mask, silently)."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    for shape, batch_size in (((40, 6), 10), ((8, 8), 8)):
        X = rng.random(shape)
        mask = rng.random(shape) > 0.3
        by_array = OnlineNMF(2, batch_size=batch_size, max_iter=2, random_state=0).fit(
            X, mask=mask)
        for data in (X, pd.DataFrame(X)):
            by_frame = OnlineNMF(2, batch_size=batch_size, max_iter=2, random_state=0).fit(
                data, mask=pd.DataFrame(mask))
            np.testing.assert_array_equal(by_frame.components_, by_array.components_)


def test_divergence_transform_with_init_checks_the_feature_names():
    """transform(X, init=...) skipped the check transform(X) makes: a DataFrame with its
    columns in another order was coded by position, silently."""
    pd = pytest.importorskip("pandas")
    from tensorstream import OnlineDivergenceNMF

    X = pd.DataFrame(np.random.default_rng(0).random((40, 4)) + 0.1, columns=list("abcd"))
    model = OnlineDivergenceNMF(2, random_state=0).fit(X)
    init = np.asarray(model.transform(X))
    # warm-started at the converged codes, the coder stays there (measured 4e-5 relative)
    np.testing.assert_allclose(model.transform(X, init=init), init, rtol=0,
                               atol=1e-3 * np.abs(init).max())
    with pytest.raises(ValueError, match="feature names should match"):
        model.transform(X[list("dcba")], init=init)


@pytest.mark.parametrize("learner", LEARNERS, ids=lambda m: type(m).__name__)
def test_every_argument_is_kept_as_given(learner):
    """The shared parameters pass through the base classes' ``__init__``: each argument must
    land on the attribute of its own name (a swapped keyword would still pass scikit-learn's
    name-only checks)."""
    names = list(learner.get_params(deep=False))
    given = {name: object() for name in names}  # distinct markers: __init__ validates nothing
    made = type(learner)(**given)
    assert {name: getattr(made, name) for name in names} == given
    assert set(vars(made)) == set(names)  # nothing more (scikit-learn's rule)
