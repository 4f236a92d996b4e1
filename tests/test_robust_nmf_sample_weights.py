"""RobustOnlineNMF's ``outlier_alpha="auto"``: every sample coded at its own outlier weight, and
the dictionary learned from robust statistics (``tensorstream/algorithms/robust_nmf.py``,
``docs/robustness.md``, "third round")."""

import numpy as np
import pytest
import tensorly as tl
from scripts import load_script

from tensorstream.algorithms import robust_nmf as algorithm
from tensorstream.coders.robust import RobustPenalties, robust_code
from tensorstream.core.backend import to_numpy
from tensorstream.learners.robust_nmf import RobustOnlineNMF


def _planted(seed=0):
    rng = np.random.default_rng(seed)
    W = rng.random((12, 3))
    X = rng.random((6, 3)) @ W.T
    X[::2, ::4] += 2.0  # outliers on every other sample
    return W, X


@pytest.mark.parametrize("solver", ["admm", "pgd"])
def test_per_sample_weights_code_each_sample_as_if_alone(solver, backend):
    """``RobustPenalties.sample_alpha``: a batch coded with one weight per sample is each
    sample coded alone at its weight (and not the batch at one weight)."""
    W, X = _planted()
    weights = np.array([0.05, 0.1, 0.2, 0.4, 0.8, 1.6])
    options = dict(solver=solver, tol=1e-9, max_iter=400)
    penalties = RobustPenalties(outlier_alpha=1.6, outlier_bound=None,
                                sample_alpha=tl.tensor(weights))
    batch = robust_code(tl.tensor(X), [tl.tensor(W)], penalties, **options)
    alone = [robust_code(tl.tensor(X[j:j + 1]), [tl.tensor(W)],
                         RobustPenalties(outlier_alpha=float(weights[j]), outlier_bound=None),
                         **options)
             for j in range(len(X))]
    capped = robust_code(tl.tensor(X), [tl.tensor(W)],
                         RobustPenalties(outlier_alpha=1.6, outlier_bound=None), **options)
    for j, one in enumerate(alone):
        np.testing.assert_allclose(to_numpy(batch.codes)[j], to_numpy(one.codes)[0],
                                   rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(to_numpy(batch.outliers)[j], to_numpy(one.outliers)[0],
                                   rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(to_numpy(batch.losses)[j], to_numpy(one.losses)[0],
                                   rtol=1e-9, atol=1e-12)
    # the small weights flag more than the cap does
    flagged = np.count_nonzero(to_numpy(batch.outliers), axis=1)
    assert np.all(flagged >= np.count_nonzero(to_numpy(capped.outliers), axis=1))
    assert flagged[0] > np.count_nonzero(to_numpy(capped.outliers)[0])


def test_a_samples_weight_and_code_depend_on_the_sample_alone():
    """Each sample's weight comes from its own residuals: ``decompose`` of a sample is the same
    alone and within a batch, and no weight exceeds the cap."""
    rng = np.random.default_rng(1)
    X = rng.random((80, 3)) @ rng.random((3, 15)) / 3
    X[::4, ::5] = 1.0
    model = RobustOnlineNMF(3, batch_size=10, max_iter=2, random_state=0).fit(X)
    codes, outliers = (to_numpy(part) for part in model.decompose(X[:8]))
    for j in range(8):
        one_codes, one_outliers = (to_numpy(part) for part in model.decompose(X[j:j + 1]))
        np.testing.assert_allclose(one_codes[0], codes[j], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(one_outliers[0], outliers[j], rtol=1e-10, atol=1e-12)
    state = model.state_
    fitted = model._algorithm().at_state(state)
    cap = algorithm.SAMPLE_ALPHA_CAP * fitted.penalties(15).outlier_alpha
    Z = X / state.scale
    H0, E0 = algorithm.coding_start(Z, 3, "uniform", "gross")
    weights = to_numpy(fitted.outlier_weights(
        Z, state.loadings, RobustPenalties(outlier_alpha=cap, outlier_bound=None), H0, E0))
    if weights.ndim == 2:  # some sample has saturated entries: its weight on the others
        weights = weights.max(axis=1)
    assert weights.shape == (80,) and np.all(weights > 0) and np.all(weights <= cap)
    assert np.any(weights < cap)  # a sample the model fits closely gets less than the cap


BENCH = load_script("benchmarks/bench_robust.py")


@pytest.mark.parametrize("kind, floor", [("spikes", 26.5), ("salt-pepper", 24.5),
                                         ("stripes", 23.0)])
def test_faces_with_weak_corruption(kind, floor):
    """The benchmark's 100 faces (K = 25, weak strength), ``denoise`` against the clean faces:
    the rule lifted spikes 23.74 -> 27.35 dB, salt-and-pepper 22.96 -> 24.96, stripes
    22.21 -> 23.87 (the corrupted input: -0.01, 21.07, 22.47)."""
    pytest.importorskip("skimage")
    X = BENCH.faces()
    Xc = BENCH.corrupt(X, kind, "weak", (25, 25))
    model = RobustOnlineNMF(25, random_state=0).fit(Xc)
    assert BENCH.psnr(to_numpy(model.denoise(Xc)), X) > floor


def test_outlier_alpha_scale_moves_the_per_sample_weights_too():
    """``outlier_alpha_scale`` multiplied only the cap: where every sample's weight was its
    residuals' own term the scale changed nothing."""
    from tensorstream import RobustOnlineNMF

    rng = np.random.default_rng(0)
    X = rng.random((200, 4)) @ rng.random((4, 30)) + 0.05 * rng.random((200, 30))
    X[rng.random(X.shape) < 0.05] += 1.2
    # before: 279 entries flagged at both scales, equal components
    fits = [RobustOnlineNMF(4, outlier_alpha_scale=a, batch_size=20, max_iter=2,
                            random_state=0).fit(X) for a in (5.0, 8.0)]
    assert np.abs(np.asarray(fits[0].components_) - np.asarray(fits[1].components_)).max() > 1e-4


def test_an_outlier_weight_that_overflows_learns_without_outliers():
    """``outlier_alpha_scale=1e308`` makes the weight infinite (no outliers): the step took
    the robust statistics' path and failed on ``None * 1.1``."""
    from tensorstream import RobustOnlineNMF

    X = np.random.default_rng(1).random((60, 12))
    model = RobustOnlineNMF(3, outlier_alpha_scale=1e308, batch_size=20, random_state=0).fit(X)
    assert np.all(np.asarray(model.outliers(X)) == 0)
