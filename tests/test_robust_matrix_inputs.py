"""Bad input to robust_matrix's held_residual_scales and RobustMatrixAlgorithm.coding_spectrum
(shape mismatches, NaN), which the previous session's final review found untested.

* a ``fit`` or ``mask`` of another shape than ``Z``'s is refused by name (a row or a
  column broadcast silently before: each row measured against another fit);
* a scale that is not positive and finite is refused by name (0 or NaN gave a spectrum of
  NaN, inf one of zeros), and a basis that is not a matrix raises;
* NaN: the values are the caller's to keep finite. The learners that reach both functions
  refuse NaN in their data by name and keep their state (tested here), so NaN does not reach
  them from the public API; a check on their hot path would cost a device sync a step.
"""

import numpy as np
import pytest
from state_helpers import state_of

from tensorstream import OnlineMaxNormMD, OnlineRobustPCA, RobustOnlineNMF
from tensorstream.algorithms.robust_matrix import RobustMatrixAlgorithm, held_residual_scales

RNG = np.random.default_rng(0)
Z, FIT = RNG.random((4, 6)), RNG.random((4, 6))
L = RNG.random((6, 2))


def _scales(Z, fit, mask=None):
    return np.asarray(held_residual_scales(Z, fit, mask))


@pytest.mark.parametrize("fit, mask", [
    (FIT[:, :5], None),  # a feature fewer
    (FIT[:3], None),  # a sample fewer
    (FIT, np.ones((4, 5))),
    (FIT, np.ones((3, 6))),
])
def test_held_residual_scales_refuses_a_mismatched_shape(fit, mask):
    with pytest.raises(ValueError):
        _scales(Z, fit, mask)


@pytest.mark.parametrize("fit, mask, name", [
    (FIT[0], None, "fit"),  # one fit (p,) for every row
    (FIT[:, :1], None, "fit"),  # one value per row
    (FIT, np.ones(6), "mask"),  # one mask (p,) for every row
])
def test_held_residual_scales_refuses_a_broadcast_by_name(fit, mask, name):
    with pytest.raises(ValueError, match=name):
        _scales(Z, fit, mask)


@pytest.mark.parametrize("basis", [L[:, 0], L[:, :, None]])
def test_coding_spectrum_refuses_a_basis_that_is_not_a_matrix(basis):
    with pytest.raises(ValueError):  # numpy's LinAlgError is a ValueError
        RobustMatrixAlgorithm.coding_spectrum(basis, 1.0)


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan"), float("inf")])
def test_coding_spectrum_refuses_a_scale_that_is_not_positive_by_name(scale):
    with pytest.raises(ValueError, match="scale must be a positive finite number"):
        RobustMatrixAlgorithm.coding_spectrum(L, scale)


@pytest.mark.parametrize("learner", [OnlineRobustPCA, OnlineMaxNormMD, RobustOnlineNMF])
def test_learners_that_reach_them_refuse_nan_and_keep_their_state(learner):
    X = np.random.default_rng(1).random((20, 6))
    model = learner(2, random_state=0, outlier_alpha="auto").partial_fit(X)
    model.transform(X)  # through coding_spectrum / held_residual_scales
    before = state_of(model)
    bad = X.copy()
    bad[3, 2] = np.nan
    for call in (model.partial_fit, model.transform):
        with pytest.raises(ValueError, match="NaN"):
            call(bad)
    assert state_of(model) == before
