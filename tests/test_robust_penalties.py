"""RobustPenalties.sample_alpha (one outlier weight per sample, or per entry) is checked
against the batch.

Found by the previous session's final review: a ``sample_alpha`` of the wrong length
broadcast silently (length 1: every sample got the first weight) or failed deep inside a
solver with a bare broadcasting error.
"""

import numpy as np
import pytest

from tensorstream.coders.robust import RobustPenalties, robust_code_admm, robust_code_pgd

SOLVERS = [robust_code_pgd, robust_code_admm]


def _batch(b=4, F=6, R=2):
    rng = np.random.default_rng(0)
    return rng.random((b, F)), rng.random((F, R))


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("length", [1, 3, 5])
def test_wrong_length_is_refused_by_name(solver, length):
    X, W = _batch()
    penalties = RobustPenalties(outlier_alpha=0.1, sample_alpha=np.full(length, 0.1))
    with pytest.raises(ValueError, match=rf"sample_alpha has {length} weights but the batch "
                                         r"has 4 samples"):
        solver(X, [W], penalties, tol=0, max_iter=3)


def test_a_scalar_is_refused_when_built():
    with pytest.raises(ValueError, match=r"sample_alpha must have shape \(b,\).*scalar"):
        RobustPenalties(outlier_alpha=0.1, sample_alpha=np.float64(0.1))


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("shape", [(4, 2), (4, 6, 1), (2, 6)])
def test_per_entry_weights_of_another_shape_are_refused_by_name(solver, shape):
    X, W = _batch()
    penalties = RobustPenalties(outlier_alpha=0.1, sample_alpha=np.full(shape, 0.1))
    with pytest.raises(ValueError, match=r"sample_alpha has shape .* but the batch has shape "
                                         r"\(4, 6\)"):
        solver(X, [W], penalties, tol=0, max_iter=3)


@pytest.mark.parametrize("solver", SOLVERS)
def test_per_entry_weights_equal_to_per_sample_ones_code_the_same(solver):
    X, W = _batch()
    weights = np.array([0.05, 0.1, 0.2, 0.4])
    per_sample = solver(X, [W], RobustPenalties(outlier_alpha=1.0, sample_alpha=weights),
                        tol=0, max_iter=20)
    per_entry = solver(X, [W], RobustPenalties(
        outlier_alpha=1.0, sample_alpha=np.repeat(weights[:, None], X.shape[1], axis=1)),
        tol=0, max_iter=20)
    np.testing.assert_allclose(per_entry.codes, per_sample.codes, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(per_entry.outliers, per_sample.outliers, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("solver", SOLVERS)
def test_right_length_codes_each_sample_at_its_weight(solver):
    # the check refuses nothing it should not: each sample coded at its weight is the sample
    # coded alone with that weight as outlier_alpha
    X, W = _batch()
    weights = np.array([0.05, 0.1, 0.2, 0.4])
    out = solver(X, [W], RobustPenalties(outlier_alpha=1.0, sample_alpha=weights),
                 tol=0, max_iter=20)
    for j, weight in enumerate(weights):
        alone = solver(X[j:j + 1], [W], RobustPenalties(outlier_alpha=weight), tol=0,
                       max_iter=20)
        np.testing.assert_allclose(out.codes[j], alone.codes[0], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(out.outliers[j], alone.outliers[0], rtol=1e-12, atol=1e-14)
