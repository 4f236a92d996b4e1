"""scikit-learn's output API on every learner: ``get_feature_names_out`` and ``set_output``
(pandas or polars DataFrames from ``transform`` and ``fit_transform``), in pipelines, through
``clone``, pickling and checkpoints; and the input's feature names kept by every learner,
the batch ones included (``VarianceReducedMF``, ``RobustNMF``, ``RobustPCA`` kept none)."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from state_helpers import LEARNERS as NAMES
from state_helpers import make

import tensorstream as ts
from tensorstream import NotFittedError

pd = pytest.importorskip("pandas")

LEARNERS = [make(name) for name in NAMES]
COLUMNS = list("abcdef")


def frame(seed=0, n=40):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(rng.random((n, 6)) + 0.1, columns=COLUMNS, index=np.arange(100, 100 + n))


def output_of(model, X):
    """What the learner gives for ``X``: ``transform``, or ``fit_transform`` for a learner that
    has only that (``RobustPCA``: the low-rank part of ``X``)."""
    return model.transform(X) if hasattr(model, "transform") else model.fit_transform(X)


def quiet(function, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args)


@pytest.mark.parametrize("learner", LEARNERS, ids=lambda m: type(m).__name__)
def test_output_names_are_the_class_and_the_atom_or_the_inputs(learner):
    model = clone(learner)
    with pytest.raises(NotFittedError):
        model.get_feature_names_out()
    quiet(model.fit, frame())
    names = model.get_feature_names_out()
    width = np.shape(quiet(output_of, model, frame()))[1]
    if type(model).__name__ == "RobustPCA":  # its output is the data's own features
        assert list(names) == COLUMNS
    else:
        prefix = type(model).__name__.lower()
        assert list(names) == [f"{prefix}{k}" for k in range(width)]
    assert names.dtype == object
    np.testing.assert_array_equal(model.get_feature_names_out(COLUMNS), names)


@pytest.mark.parametrize("learner", LEARNERS, ids=lambda m: type(m).__name__)
def test_input_features_are_checked_against_the_fit(learner):
    model = quiet(clone(learner).fit, frame())
    with pytest.raises(ValueError, match="input_features is not equal to feature_names_in_"):
        model.get_feature_names_out(list("fedcba"))
    unnamed = quiet(clone(learner).fit, frame().to_numpy())
    assert len(unnamed.get_feature_names_out([f"x{i}" for i in range(6)])) > 0
    with pytest.raises(ValueError, match="input_features should have length equal"):
        unnamed.get_feature_names_out(["a", "b"])
    if type(model).__name__ == "RobustPCA":
        assert list(unnamed.get_feature_names_out()) == [f"x{i}" for i in range(6)]


@pytest.mark.parametrize("learner", LEARNERS, ids=lambda m: type(m).__name__)
def test_pandas_output_has_the_names_the_index_and_the_values(learner):
    X = frame()
    plain = quiet(clone(learner).fit, X)
    expected = quiet(output_of, plain, X)
    model = clone(learner).set_output(transform="pandas")
    fitted = quiet(model.fit_transform, X)
    assert isinstance(fitted, pd.DataFrame)
    assert list(fitted.columns) == list(model.get_feature_names_out())
    assert list(fitted.index) == list(X.index)
    got = quiet(output_of, model, X)
    assert isinstance(got, pd.DataFrame) and list(got.index) == list(X.index)
    np.testing.assert_allclose(got.to_numpy(), np.asarray(expected), rtol=1e-12, atol=1e-12)
    # arrays in: a DataFrame with the default index
    assert list(quiet(output_of, model, X.to_numpy()).index) == list(range(len(X)))
    # back to the backend's arrays
    assert isinstance(quiet(output_of, model.set_output(transform="default"), X), np.ndarray)


def test_set_output_none_changes_nothing_and_bad_values_are_named():
    model = ts.OnlineNMF(2, random_state=0).set_output(transform="pandas")
    assert model.set_output() is model
    assert model._sklearn_output_config == {"transform": "pandas"}
    for bad in ("numpy", "Pandas", 3):
        with pytest.raises(ValueError, match="transform must be one of"):
            model.set_output(transform=bad)
    assert model._sklearn_output_config == {"transform": "pandas"}


def test_polars_output():
    pl = pytest.importorskip("polars")
    X = frame()
    model = ts.OnlineNMF(2, random_state=0).set_output(transform="polars")
    out = model.fit_transform(X)
    assert isinstance(out, pl.DataFrame) and out.columns == ["onlinenmf0", "onlinenmf1"]


def test_a_pipeline_set_to_pandas_gives_named_columns():
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler

    X = frame()
    pipeline = make_pipeline(MinMaxScaler(), ts.OnlineNMF(3, random_state=0))
    out = pipeline.set_output(transform="pandas").fit_transform(X)
    assert list(out.columns) == ["onlinenmf0", "onlinenmf1", "onlinenmf2"]
    assert list(out.index) == list(X.index)
    assert list(pipeline.get_feature_names_out()) == list(out.columns)
    # the codes as a DataFrame go back through inverse_transform
    assert pipeline[-1].inverse_transform(out).shape == X.shape


def test_column_transformer_names_the_codes_of_each_block():
    from sklearn.compose import ColumnTransformer

    X = frame()
    blocks = ColumnTransformer([("left", ts.OnlineNMF(2, random_state=0), ["a", "b", "c"]),
                                ("right", ts.OnlineCPDL(2, random_state=0), ["d", "e", "f"])])
    out = blocks.set_output(transform="pandas").fit_transform(X)
    assert list(out.columns) == ["left__onlinenmf0", "left__onlinenmf1",
                                 "right__onlinecpdl0", "right__onlinecpdl1"]


def test_clone_and_pickle_keep_the_container():
    model = ts.OnlineNMF(2, random_state=0).set_output(transform="pandas")
    assert clone(model)._sklearn_output_config == {"transform": "pandas"}
    fitted = model.fit(frame())
    again = pickle.loads(pickle.dumps(fitted))
    assert isinstance(again.transform(frame()), pd.DataFrame)


def test_labelled_input_stays_labelled():
    xr = pytest.importorskip("xarray")
    da = xr.DataArray(np.random.default_rng(0).random((30, 5)), dims=("time", "space"))
    model = ts.OnlineNMF(2, random_state=0).set_output(transform="pandas")
    model.fit(da, sample_dim="time")
    assert isinstance(model.transform(da), xr.DataArray)


def test_torch_codes_become_a_dataframe():
    torch = pytest.importorskip("torch")
    X = torch.tensor(frame().to_numpy())
    model = ts.OnlineNMF(2, random_state=0).fit(X)
    codes = model.transform(X)
    out = model.set_output(transform="pandas").transform(X)
    assert isinstance(out, pd.DataFrame)
    np.testing.assert_array_equal(out.to_numpy(), codes.numpy())


@pytest.mark.parametrize("learner", LEARNERS, ids=lambda m: type(m).__name__)
def test_checkpoints_keep_names_and_container(learner, tmp_path):
    model = quiet(clone(learner).set_output(transform="pandas").fit, frame())
    model.save(tmp_path / "m")
    loaded = ts.load(tmp_path / "m.npz")
    assert list(loaded.feature_names_in_) == COLUMNS
    assert loaded._sklearn_output_config == {"transform": "pandas"}
    assert isinstance(quiet(output_of, loaded, frame()), pd.DataFrame)


def _tampered(path, **changes):
    """The checkpoint at ``path`` with entries of its JSON metadata changed."""
    import json

    with np.load(path) as archive:
        members = {name: archive[name] for name in archive.files}
    meta = json.loads(str(members["__meta__"]))
    members["__meta__"] = np.array(json.dumps({**meta, **changes}))
    np.savez(path, **members)


@pytest.mark.parametrize("name", ["OnlineNMF", "VarianceReducedMF"])
@pytest.mark.parametrize("changes", [{"feature_names": ["a", "b"]},
                                     {"feature_names": [1, 2, 3, 4, 5, 6]},
                                     {"output": "numpy"}])
def test_tampered_names_or_container_are_refused(name, changes, tmp_path):
    model = getattr(ts, name)(2, random_state=0).fit(frame())
    model.save(tmp_path / "m")
    _tampered(tmp_path / "m.npz", **changes)
    with pytest.raises(ValueError, match="cannot read checkpoint"):
        ts.load(tmp_path / "m.npz")


@pytest.mark.parametrize("name", ["VarianceReducedMF", "RobustNMF", "RobustPCA"])
def test_the_batch_learners_keep_and_check_the_columns(name):
    """They kept no names: a DataFrame with its columns in another order was read by
    position, silently."""
    X = frame()
    cls = getattr(ts, name)
    model = (cls() if name == "RobustPCA" else cls(2, random_state=0)).fit(X)
    assert list(model.feature_names_in_) == COLUMNS
    if name != "RobustPCA":  # its only use of new data is a new fit
        with pytest.raises(ValueError, match="feature names should match"):
            model.transform(X[list("fedcba")])
        with pytest.warns(UserWarning, match="X has no feature names"):
            model.transform(X.to_numpy())
    assert not hasattr(model.fit(X.to_numpy()), "feature_names_in_")  # a refit forgets them


def test_variance_reduced_partial_fit_and_its_passes_check_the_columns():
    X = frame()
    model = ts.VarianceReducedMF(2, random_state=0).partial_fit(X)
    assert list(model.feature_names_in_) == COLUMNS
    for method in (model.partial_fit, model.objective, model.gradient_mapping):
        with pytest.raises(ValueError, match="feature names should match"):
            method(X[list("fedcba")])


def test_a_refused_fit_keeps_the_names():
    X = frame()
    model = ts.RobustNMF(2, random_state=0).fit(X)
    bad = X.copy()
    bad.iloc[0, 0] = np.nan
    with pytest.raises(ValueError):
        model.fit(bad.rename(columns=str.upper))
    assert list(model.feature_names_in_) == COLUMNS


def test_scikit_learns_global_output_setting_is_followed():
    """``sklearn.set_config(transform_output="pandas")`` makes every scikit-learn transformer
    give DataFrames; ours gave arrays. The learner's own choice comes first."""
    import sklearn
    from sklearn.utils.estimator_checks import check_global_output_transform_pandas

    check_global_output_transform_pandas("OnlineNMF", ts.OnlineNMF(2, random_state=0))
    with sklearn.config_context(transform_output="pandas"):
        model = ts.OnlineNMF(2, random_state=0)
        assert isinstance(model.fit_transform(frame()), pd.DataFrame)
        model.set_output(transform="default")
        assert isinstance(model.transform(frame()), np.ndarray)
    assert isinstance(ts.OnlineNMF(2, random_state=0).fit_transform(frame()), np.ndarray)


@pytest.mark.parametrize("learner", LEARNERS, ids=lambda m: type(m).__name__)
def test_scikit_learns_own_output_checks(learner):
    from sklearn.utils import estimator_checks as checks

    for check in (checks.check_set_output_transform, checks.check_set_output_transform_pandas,
                  checks.check_global_output_transform_pandas):
        quiet(check, type(learner).__name__, clone(learner))


# -- review fixes ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["numpy", "pytorch"])
def test_the_librarys_own_transform_calls_get_tensors_whatever_the_output(backend):
    """to_cp_tensor and reconstruct call transform for themselves: a DataFrame of codes made
    a CPTensor with a DataFrame factor (numpy) or failed (torch)."""
    if backend == "pytorch":
        pytest.importorskip("torch")
    import sklearn

    X = frame()
    model = quiet(ts.OnlineNMF(2, random_state=0, backend=backend).fit, X)
    expected = model.to_cp_tensor(X)

    def check():
        cp = model.to_cp_tensor(X)
        assert [type(f) for f in cp.factors] == [type(f) for f in expected.factors]
        np.testing.assert_array_equal(np.asarray(cp.factors[0]), np.asarray(expected.factors[0]))
        assert type(model.reconstruct(X)) is type(expected.factors[1])
        assert isinstance(model.transform(X), pd.DataFrame)  # the user's call: as chosen

    with sklearn.config_context(transform_output="pandas"):  # the global choice
        check()
    model.set_output(transform="pandas")  # the learner's own
    check()


def test_an_explicit_default_output_survives_a_checkpoint(tmp_path):
    """set_output(transform="default") opts out of scikit-learn's global pandas output;
    clone and pickling kept it, a checkpoint dropped it."""
    import sklearn

    X = frame().to_numpy()
    for learner in (ts.OnlineNMF(2, random_state=0), ts.RobustNMF(2, max_iter=5,
                                                                     random_state=0)):
        model = quiet(learner.set_output(transform="default").fit, X)
        loaded = ts.load(model.save(tmp_path / f"{type(model).__name__}.npz"))
        with sklearn.config_context(transform_output="pandas"):
            assert isinstance(loaded.transform(X), np.ndarray)
            assert isinstance(pickle.loads(pickle.dumps(model)).transform(X), np.ndarray)


def test_a_pipeline_set_to_polars_hands_our_learners_polars_frames():
    """scikit-learn's steps give a polars DataFrame, which has a shape but iterates over its
    columns: it was read as a stream of one-dimensional batches."""
    pytest.importorskip("polars")
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler

    X = frame()
    for learner, columns in ((ts.OnlineNMF(2, random_state=0), ["onlinenmf0", "onlinenmf1"]),
                             (ts.RobustPCA(), COLUMNS)):
        pipeline = make_pipeline(MinMaxScaler(), learner).set_output(transform="polars")
        out = quiet(pipeline.fit_transform, X)
        assert out.columns == columns
        assert list(pipeline[-1].feature_names_in_) == COLUMNS
