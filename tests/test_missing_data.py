"""Missing data (masks, missing="nan"): only observed entries count, exactly."""

import numpy as np
import pytest
import tensorly as tl
from scipy.optimize import nnls

from tensorstream import OnlineCPDL, load
from tensorstream.coders.lasso import sparse_code
from tensorstream.core.dictionary import masked_gram, pairs
from tensorstream.datasets import low_rank_tensor
from tensorstream.steps.surrogate import surrogate_value


def _masked_stream(seed=0, n_batches=12, b=6, shape=(5, 4, 3), keep=0.6):
    rng = np.random.default_rng(seed)
    batches = [rng.random((b, *shape)) for _ in range(n_batches)]
    masks = [rng.random((b, *shape)) < keep for _ in range(n_batches)]
    return batches, masks


def test_masked_gram_matches_dense_definition(backend, rng):
    loadings = [tl.tensor(rng.random((size, 3))) for size in (4, 5)]
    mask = tl.tensor((rng.random((6, 4, 5)) < 0.5).astype(float))
    W = np.einsum("ir,jr->ijr", *(tl.to_numpy(U) for U in loadings)).reshape(20, 3)
    M = tl.to_numpy(mask).reshape(6, 20)
    expected = np.einsum("si,ir,iq->srq", M, W, W)
    np.testing.assert_allclose(tl.to_numpy(masked_gram(mask, loadings)), expected, rtol=1e-12)
    np.testing.assert_allclose(tl.to_numpy(pairs(loadings[0]))[:, 1 * 3 + 2],
                               tl.to_numpy(loadings[0][:, 1] * loadings[0][:, 2]))


def test_per_sample_gram_codes_are_masked_nnls(rng):
    W, X = rng.random((30, 4)), rng.random((5, 30))
    M = rng.random((5, 30)) < 0.6
    G = np.einsum("si,ir,iq->srq", M * 1.0, W, W)
    H, _ = sparse_code(G, (M * X) @ W, tol=1e-12, max_iter=10000)
    expected = np.array([nnls(W[m], x[m])[0] for m, x in zip(M, X)])
    np.testing.assert_allclose(H, expected, atol=1e-9)


def test_masked_entries_never_influence_the_result():
    batches, masks = _masked_stream()
    rng = np.random.default_rng(9)
    first, second = OnlineCPDL(3, random_state=0), OnlineCPDL(3, random_state=0)
    for X, M in zip(batches, masks):
        other = np.where(M, X, rng.random(X.shape) * 1e6)
        other[~M & (rng.random(X.shape) < 0.3)] = np.nan
        first.partial_fit(X, mask=M)
        second.partial_fit(other, mask=M)
    for a, b in zip(first.loadings_, second.loadings_):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(first.transform(batches[0], mask=masks[0]),
                                  second.transform(np.where(masks[0], batches[0], -5.0),
                                                   mask=masks[0]))


def test_missing_nan_is_the_same_as_a_mask():
    batches, masks = _masked_stream()
    with_mask = OnlineCPDL(3, random_state=0)
    with_nan = OnlineCPDL(3, random_state=0, missing="nan")
    for X, M in zip(batches, masks):
        with_mask.partial_fit(X, mask=M)
        with_nan.partial_fit(np.where(M, X, np.nan))
    for a, b in zip(with_mask.loadings_, with_nan.loadings_):
        np.testing.assert_array_equal(a, b)


def test_all_observed_mask_equals_unmasked_learning():
    batches, _ = _masked_stream()
    plain, masked = OnlineCPDL(3, random_state=0), OnlineCPDL(3, random_state=0)
    for X in batches:
        plain.partial_fit(X)
        masked.partial_fit(X, mask=np.ones(X.shape, dtype=bool))
    assert masked.statistics_["A"].shape == (5, 4, 3, 3, 3)
    for a, b in zip(plain.loadings_, masked.loadings_):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(plain.surrogate_value(), masked.surrogate_value(), rtol=1e-10)


def test_switching_to_masks_mid_stream_keeps_the_statistics_exact():
    """The first masked batch turns A entrywise by broadcasting: exact, not a restart."""
    batches, masks = _masked_stream()
    model = OnlineCPDL(3, random_state=0)
    for X in batches[:5]:
        model.partial_fit(X)
    before = model.surrogate_value()
    A = model.statistics_["A"]
    model.statistics_["A"] = np.broadcast_to(A, (5, 4, 3, 3, 3)).copy()
    np.testing.assert_allclose(model.surrogate_value(), before, rtol=1e-12)
    model.statistics_["A"] = A
    for X, M in zip(batches[5:], masks[5:]):
        model.partial_fit(X, mask=M)
        model.partial_fit(X)  # unmasked batches still work after the switch
    assert model.statistics_["A"].ndim == 5


@pytest.mark.parametrize("column_bound", [1.0, None])
def test_masked_surrogate_invariants(column_bound):
    """B3 (forward monotonicity) and B5 (recursion at the old point) with missing data."""
    batches, masks = _masked_stream(n_batches=25)
    model = OnlineCPDL(3, random_state=0, alpha=0.05, column_bound=column_bound)
    model.partial_fit(batches[0], mask=masks[0])
    previous = model.surrogate_value()
    for X, M in zip(batches[1:], masks[1:]):
        old = [U.copy() for U in model.loadings_]
        model.partial_fit(X, mask=M)
        stats, info = model.statistics_, model._last_info
        at_old = surrogate_value(stats["A"], stats["B"], stats["c"], old)
        at_new = model.surrogate_value()
        assert at_old >= at_new - 1e-10 * abs(at_old)
        w = info["weight"]
        np.testing.assert_allclose(at_old, (1 - w) * previous + w * info["batch_loss"],
                                   rtol=1e-10)
        previous = at_new
        if column_bound is not None:
            assert all(np.linalg.norm(U, axis=0).max() <= 1 + 1e-12 for U in model.loadings_)
        assert all(U.min() >= 0 for U in model.loadings_)


def test_half_missing_recovers_a_planted_model_nearly_as_well():
    X, _ = low_rank_tensor(shape=(20, 15, 300), rank=3, random_state=1)
    rng = np.random.default_rng(0)
    mask = rng.random(X.shape) < 0.5
    kwargs = dict(batch_size=20, max_iter=15, random_state=0, weights=0.75)
    full = OnlineCPDL(3, **kwargs).fit(X)
    half = OnlineCPDL(3, **kwargs).fit(X, mask=mask)

    def error(model):  # relative error on ALL entries, codes from the observed half only
        approx = model.inverse_transform(model.transform(X, mask=mask))
        return np.linalg.norm(approx - X) / np.linalg.norm(X)

    full_error, half_error = error(full), error(half)
    # measured (this seed): full data 0.028, half missing 0.017; codes of the full-data model
    # computed from the observed half lose nothing either (0.028)
    assert half_error < 0.04 and half_error < full_error + 0.01


def test_masks_agree_across_backends(backend):
    batches, masks = _masked_stream(n_batches=6)
    reference, other = OnlineCPDL(3, random_state=0), OnlineCPDL(3, random_state=0)
    for X, M in zip(batches, masks):
        reference.partial_fit(X, mask=M)
        other.partial_fit(tl.tensor(X), mask=M)
    for a, b in zip(reference.loadings_, other.loadings_):
        np.testing.assert_allclose(tl.to_numpy(b), a, rtol=1e-8, atol=1e-12)


def test_checkpoint_with_entrywise_statistics_resumes_exactly(tmp_path):
    batches, masks = _masked_stream()
    straight = OnlineCPDL(3, random_state=0)
    for X, M in zip(batches, masks):
        straight.partial_fit(X, mask=M)
    first = OnlineCPDL(3, random_state=0)
    for X, M in zip(batches[:6], masks[:6]):
        first.partial_fit(X, mask=M)
    resumed = load(first.save(tmp_path / "masked.npz"))
    for X, M in zip(batches[6:], masks[6:]):
        resumed.partial_fit(X, mask=M)
    for a, b in zip(straight.loadings_, resumed.loadings_):
        np.testing.assert_array_equal(a, b)


def test_fit_with_mask_and_stream_of_pairs():
    batches, masks = _masked_stream()
    X, M = np.concatenate(batches), np.concatenate(masks)
    model = OnlineCPDL(3, batch_size=6, max_iter=1, random_state=0).fit(X, mask=M)
    assert model.n_steps_ == 12 and model.statistics_["A"].ndim == 5
    streamed = OnlineCPDL(3, random_state=0).fit(zip(batches, masks))
    assert streamed.n_steps_ == 12


@pytest.mark.parametrize("mask, error, message", [
    (np.ones((6, 5, 4)), TypeError, "boolean"),
    (np.ones((6, 5, 4, 2), dtype=bool), ValueError, "shape of X"),
    (np.zeros((6, 5, 4, 3), dtype=bool), ValueError, "no observed entry"),
])
def test_bad_masks_are_refused_and_state_kept(mask, error, message):
    batches, masks = _masked_stream()
    model = OnlineCPDL(3, random_state=0).partial_fit(batches[0], mask=masks[0])
    before = [U.copy() for U in model.loadings_]
    with pytest.raises(error, match=message):
        model.partial_fit(batches[1], mask=mask)
    for a, b in zip(before, model.loadings_):
        np.testing.assert_array_equal(a, b)


def test_nan_without_missing_is_refused_with_a_hint():
    X = np.ones((3, 4))
    X[0, 1] = np.nan
    with pytest.raises(ValueError, match="missing='nan'"):
        OnlineCPDL(2).partial_fit(X)
    with pytest.raises(ValueError, match="missing must be"):
        OnlineCPDL(2, missing="zero").partial_fit(np.ones((3, 4)))
    with pytest.raises(TypeError, match="stream yields"):
        OnlineCPDL(2).fit([np.ones((3, 4))], mask=np.ones((3, 4), dtype=bool))


@pytest.mark.parametrize("make", [
    lambda: OnlineCPDL(3, batch_size=10, max_iter=2, random_state=0),
    lambda: __import__("tensorstream").OnlineNMF(3, batch_size=10, max_iter=2, random_state=0),
], ids=["cpdl", "nmf"])
def test_fit_transform_codes_with_the_mask_it_learned_with(make):
    """fit_transform(X, mask=M) is fit(X, mask=M).transform(X, mask=M): what is missing does
    not move the codes either."""
    rng = np.random.default_rng(0)
    shape = (40, 5, 4) if "CPDL" in type(make()).__name__ else (40, 20)
    X = rng.random(shape)
    M = rng.random(shape) > 0.3
    expected = make().fit(X, mask=M).transform(X, mask=M)
    np.testing.assert_array_equal(make().fit_transform(X, mask=M), expected)
    np.testing.assert_array_equal(make().fit_transform(np.where(M, X, 1e3), mask=M), expected)


def test_reconstruct_and_cp_tensor_code_from_the_observed_entries():
    rng = np.random.default_rng(0)
    X = rng.random((30, 5, 4))
    M = rng.random(X.shape) > 0.3
    model = OnlineCPDL(3, batch_size=10, max_iter=2, random_state=0).fit(X, mask=M)
    junk = np.where(M, X, 1e3)
    expected = model.inverse_transform(model.transform(X, mask=M))
    np.testing.assert_array_equal(model.reconstruct(junk, mask=M), expected)
    np.testing.assert_allclose(tl.cp_to_tensor(model.to_cp_tensor(junk, mask=M)), expected,
                               rtol=1e-12)
