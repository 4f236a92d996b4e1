"""RobustPenalties.sample_alpha (one outlier weight per sample) is checked against the batch.

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


def test_not_one_weight_per_sample_is_refused_when_built():
    with pytest.raises(ValueError, match=r"sample_alpha must have shape \(b,\).*\(4, 2\)"):
        RobustPenalties(outlier_alpha=0.1, sample_alpha=np.full((4, 2), 0.1))
    with pytest.raises(ValueError, match=r"sample_alpha must have shape \(b,\)"):
        RobustPenalties(outlier_alpha=0.1, sample_alpha=np.float64(0.1))


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
