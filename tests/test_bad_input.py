"""Bad input gets a clear error naming the argument, and leaves the learner's state untouched."""

import importlib.util

import numpy as np
import pytest
import tensorly as tl

from tensorstream import OnlineCPDL, load


def _snapshot(model):
    stats = model.statistics_
    return ([tl.to_numpy(U).copy() for U in model.loadings_], tl.to_numpy(stats["A"]).copy(),
            tl.to_numpy(stats["B"]).copy(), stats["c"], model.n_steps_, model.n_samples_seen_,
            model._rng.bit_generator.state)


def _assert_same(before, after):
    for a, b in zip(before[0], after[0]):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(before[1:3], after[1:3]):
        np.testing.assert_array_equal(a, b)
    assert before[3:] == after[3:]


@pytest.fixture
def fitted():
    X = np.random.default_rng(0).random((12, 4, 3))
    return OnlineCPDL(2, random_state=0).partial_fit(X).partial_fit(X)


def _nan_batch():
    X = np.ones((3, 4, 3))
    X[1, 2, 0] = np.nan
    return X


def _inf_batch():
    X = np.ones((3, 4, 3))
    X[0, 0, 0] = np.inf
    return X


@pytest.mark.parametrize("batch, error, message", [
    (_nan_batch(), ValueError, "NaN or infinite"),
    (_inf_batch(), ValueError, "NaN or infinite"),
    (-np.ones((3, 4, 3)), ValueError, "negative entries"),
    (np.ones((3, 4, 5)), ValueError, r"samples of shape \(4, 5\)"),
    (np.ones((3, 12)), ValueError, "samples of shape"),
    (np.ones((0, 4, 3)), ValueError, "empty batch"),
    (np.ones(5), ValueError, "n_samples"),
    (np.ones((3, 4, 3), dtype=complex), ValueError, "Complex data not supported"),
    (np.full((3, 4, 3), "a"), TypeError, "real numbers"),
    (None, TypeError, "got None"),
])
def test_partial_fit_rejects_bad_batches_and_keeps_state(fitted, batch, error, message):
    before = _snapshot(fitted)
    with pytest.raises(error, match=message):
        fitted.partial_fit(batch)
    _assert_same(before, _snapshot(fitted))


@pytest.mark.skipif(not importlib.util.find_spec("torch"), reason="needs torch")
def test_mixed_backends_are_refused(fitted):
    import torch

    before = _snapshot(fitted)
    with pytest.raises(TypeError, match="pytorch tensor but this learner runs on the numpy"):
        fitted.partial_fit(torch.ones((3, 4, 3)))
    _assert_same(before, _snapshot(fitted))


@pytest.mark.parametrize("params, error, message", [
    (dict(n_components=0), ValueError, "n_components must be >= 1"),
    (dict(n_components=2.5), TypeError, "n_components"),
    (dict(alpha=-1.0), ValueError, "alpha must be >= 0"),
    (dict(weights="fast"), ValueError, "weights"),
    (dict(weights=lambda t: 2.0), ValueError, "weights must lie in"),
    (dict(search_radius=-1.0), ValueError, "search_radius"),
    (dict(radius_mode="ball"), ValueError, "radius_mode"),
    (dict(backend="jax"), ValueError, "backend"),
    (dict(column_bound=0.0), ValueError, "column_bound"),
    (dict(init="svd"), ValueError, "init"),
    (dict(init=[np.ones((4, 2))]), ValueError, "init must be"),
    (dict(init=[np.ones((4, 2)), np.ones((2, 2))]), ValueError, r"init\[1\] must have shape"),
    (dict(init=[np.ones((4, 2)), -np.ones((3, 2))]), ValueError, r"init\[1\] has negative"),
])
def test_bad_parameters_raise_before_learning(params, error, message):
    params = {"n_components": 2, **params}
    model = OnlineCPDL(**params)
    with pytest.raises(error, match=message):
        model.partial_fit(np.ones((3, 4, 3)))
    assert not hasattr(model, "loadings_")


def test_bad_parameter_on_a_fitted_learner_keeps_state(fitted):
    before = _snapshot(fitted)
    fitted.set_params(alpha=-1.0)
    with pytest.raises(ValueError, match="alpha"):
        fitted.partial_fit(np.ones((3, 4, 3)))
    _assert_same(before, _snapshot(fitted))


def test_fit_arguments_are_checked():
    with pytest.raises(ValueError, match="n_steps"):
        OnlineCPDL(2).fit(np.ones((3, 4)), n_steps=0)
    with pytest.raises(ValueError, match="batch_size"):
        OnlineCPDL(2, batch_size=0).fit(np.ones((3, 4)))
    with pytest.raises(TypeError, match="iterable of batches"):
        OnlineCPDL(2).fit(42)


def test_unfitted_use_is_explained():
    with pytest.raises(ValueError, match="not fitted"):
        OnlineCPDL(2).transform(np.ones((3, 4)))


def test_transform_and_score_check_their_input(fitted):
    with pytest.raises(ValueError, match="samples of shape"):
        fitted.transform(np.ones((2, 3, 4)))
    with pytest.raises(ValueError, match="codes has 5 features, but OnlineCPDL is expecting 2"):
        fitted.inverse_transform(np.ones((2, 5)))
    with pytest.raises(ValueError, match="sample_weight"):
        fitted.score(np.ones((2, 4, 3)), sample_weight=[1.0])


@pytest.mark.parametrize("content", [b"", b"not a zip file at all", b"PK\x03\x04garbage"])
def test_corrupt_checkpoint_gives_a_clear_error(tmp_path, content):
    path = tmp_path / "broken.npz"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="corrupt or not a tensorstream checkpoint"):
        load(path)


def test_foreign_npz_and_tampered_checkpoint_are_refused(tmp_path, fitted):
    np.savez(tmp_path / "foreign.npz", x=np.ones(3))
    with pytest.raises(ValueError, match="cannot read checkpoint"):
        load(tmp_path / "foreign.npz")
    path = fitted.save(tmp_path / "good.npz")
    with np.load(path) as archive:
        arrays = dict(archive)
    arrays["B"] = np.ones((2, 2))
    np.savez(tmp_path / "tampered.npz", **arrays)
    with pytest.raises(ValueError, match="inconsistent"):
        load(tmp_path / "tampered.npz")


def test_failed_save_keeps_the_previous_checkpoint(tmp_path, fitted, monkeypatch):
    path = fitted.save(tmp_path / "ckpt.npz")
    good = path.read_bytes()
    fitted.partial_fit(np.ones((3, 4, 3)))

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("killed mid-write")

    monkeypatch.setattr(np.lib.format, "write_array", crash)  # what writes a checkpoint
    with pytest.raises(KeyboardInterrupt):
        fitted.save(path)
    assert path.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.npz"]  # no temporary left behind
    assert load(path).n_steps_ == 2


def test_unsaveable_parameter_is_named(tmp_path, fitted):
    fitted.set_params(weights=lambda t: 1.0 / t)
    with pytest.raises(TypeError, match="weights"):
        fitted.save(tmp_path / "x.npz")


@pytest.mark.parametrize("name", ["RobustNMF", "VarianceReducedMF"])
def test_float32_data_whose_scale_underflows_are_refused_by_the_batch_learners(name):
    """The largest entry passes the underflow check, but the data scale (each sample's median
    entry) squares to nothing in float32: RobustNMF learned from it without a word and
    VarianceReducedMF blamed entries 'too large' (divided by that scale); both name the scale."""
    import tensorstream

    X = np.random.default_rng(0).random((40, 10)) * 1e-17
    X[:, 0] = 1e-6
    model = getattr(tensorstream, name)(2, random_state=0)
    with pytest.raises(ValueError, match="too small.*data scale"):
        model.fit(X.astype(np.float32))
    assert not hasattr(model, "components_")
    model.fit(X)  # float64 holds the same data
