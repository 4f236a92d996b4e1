"""Spec 004, section 5.1: algebraic identities of the CP dictionary (A1, A2 and the
contractions every update uses), on numpy and pytorch."""

import numpy as np
import tensorly as tl
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorstream.core import dictionary as cpd


def _random(rng, shape):
    return tl.tensor(rng.random(shape))


def _problem(rng, sample_shape=(4, 5, 3), R=3, b=6):
    loadings = [_random(rng, (size, R)) for size in sample_shape]
    return loadings, _random(rng, (b, R)), _random(rng, (b, *sample_shape))


def test_reconstruction_matches_einsum_matrix_and_tensorly(backend, rng):
    # spec item(s): spec 004 A1
    loadings, H, _ = _problem(rng)
    Y = cpd.reconstruct(loadings, H)
    U1, U2, U3 = (tl.to_numpy(U) for U in loadings)
    Hn = tl.to_numpy(H)
    expected = np.einsum("sr,ir,jr,kr->sijk", Hn, U1, U2, U3)
    np.testing.assert_allclose(tl.to_numpy(Y), expected, rtol=1e-10)
    W = tl.to_numpy(cpd.dictionary_matrix(loadings))
    np.testing.assert_allclose(tl.to_numpy(Y).reshape(6, -1), Hn @ W.T, rtol=1e-10)
    cp = tl.cp_to_tensor(cpd.to_cp_tensor(loadings, H))
    np.testing.assert_allclose(tl.to_numpy(cp), expected, rtol=1e-10)


def test_gram_is_hadamard_of_loading_grams(backend, rng):
    # spec item(s): spec 004 A2
    loadings, _, _ = _problem(rng)
    W = tl.to_numpy(cpd.dictionary_matrix(loadings))
    np.testing.assert_allclose(tl.to_numpy(cpd.gram(loadings)), W.T @ W, rtol=1e-10)


def test_gram_skip_leaves_out_one_mode(backend, rng):
    loadings, _, _ = _problem(rng)
    grams = [tl.to_numpy(U).T @ tl.to_numpy(U) for U in loadings]
    np.testing.assert_allclose(tl.to_numpy(cpd.gram(loadings, skip=1)), grams[0] * grams[2],
                               rtol=1e-10)
    single = cpd.gram(loadings[:1], skip=0)
    np.testing.assert_array_equal(tl.to_numpy(single), np.ones((3, 3)))


def test_project_outer_statistic_and_inner_product(backend, rng):
    loadings, H, X = _problem(rng)
    W = tl.to_numpy(cpd.dictionary_matrix(loadings))
    Xm = tl.to_numpy(X).reshape(6, -1)
    np.testing.assert_allclose(tl.to_numpy(cpd.project(X, loadings)), Xm @ W, rtol=1e-10)
    B = cpd.outer_statistic(X, H)
    np.testing.assert_allclose(tl.to_numpy(B).reshape(-1, 3), Xm.T @ tl.to_numpy(H), rtol=1e-10)
    np.testing.assert_allclose(float(cpd.inner_with_dictionary(B, loadings)),
                               np.sum(tl.to_numpy(B).reshape(-1, 3) * W), rtol=1e-10)


def test_contract_except_is_per_atom_mttkrp(backend, rng):
    loadings, _, _ = _problem(rng)
    B = _random(rng, (4, 5, 3, 3))
    Bn, (U1, U2, U3) = tl.to_numpy(B), [tl.to_numpy(U) for U in loadings]
    expected = [np.einsum("abcr,br,cr->ar", Bn, U2, U3), np.einsum("abcr,ar,cr->br", Bn, U1, U3),
                np.einsum("abcr,ar,br->cr", Bn, U1, U2)]
    for mode in range(3):
        np.testing.assert_allclose(tl.to_numpy(cpd.contract_except(B, loadings, mode)),
                                   expected[mode], rtol=1e-10)


@settings(max_examples=25, deadline=None)
@given(sample_shape=st.lists(st.integers(1, 4), min_size=1, max_size=4),
       R=st.integers(1, 4), b=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_identities_hold_for_any_number_of_modes(sample_shape, R, b, seed):
    """Matrices (one data mode) through 4-mode samples: project/reconstruct are adjoint."""
    rng = np.random.default_rng(seed)
    loadings, H, X = _problem(rng, tuple(sample_shape), R, b)
    W = cpd.dictionary_matrix(loadings) if len(loadings) > 1 else loadings[0]
    np.testing.assert_allclose(cpd.reconstruct(loadings, H).reshape(b, -1), H @ W.T,
                               rtol=1e-10, atol=1e-12)
    # <X, reconstruct(H)> == <project(X), H>: the two contractions are adjoint
    lhs = np.sum(X * cpd.reconstruct(loadings, H))
    rhs = np.sum(cpd.project(X, loadings) * H)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-10)


def _simplex_reference(v, total):
    u = np.sort(v)[::-1]
    css, ks = np.cumsum(u), np.arange(1, len(v) + 1)
    k = ks[u - (css - total) / ks > 0][-1]
    return np.maximum(v - (css[k - 1] - total) / k, 0)


def test_simplex_projection_is_exact_far_from_the_simplex():
    """Columns far larger, or far more negative, than ``total`` are projected too (float32
    [1e8, 0] gave inf, rows of -1 a 1e300 or inf row: the thresholds rounded total away)."""
    from tensorstream.core.constraints import project_rows_box_sum, project_simplex_columns

    np.testing.assert_array_equal(
        project_simplex_columns(np.array([[1e8], [0.0]], dtype=np.float32)).ravel(), [1, 0])
    for dtype in (np.float32, np.float64):
        for row in ([-1.0, -2.0], [-1e9, -2e9]):
            projected = project_rows_box_sum(np.array([row], dtype=dtype))
            np.testing.assert_allclose(projected, [[1e-8, 0]], rtol=1e-6)
    rng = np.random.default_rng(0)
    for _ in range(200):
        V = rng.standard_normal((6, 3)) * rng.choice([1e-3, 1.0, 100.0])
        total = float(rng.choice([0.3, 1.0, 5.0]))
        expected = np.stack([_simplex_reference(V[:, j], total) for j in range(3)], axis=1)
        np.testing.assert_allclose(project_simplex_columns(V, total), expected, atol=1e-12)
