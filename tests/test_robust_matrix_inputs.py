"""Bad input to robust_matrix's held_residual_scales and RobustMatrixAlgorithm.coding_spectrum
(shape mismatches, NaN), which the previous session's final review found untested.

Tests only (another helper edits robust_matrix.py). What they found:

* a mismatched number of samples or features raises (numpy's bare broadcasting error: it
  does not name the argument), and a basis that is not a matrix raises too;
* the learners that reach both functions refuse NaN in their data by name, so NaN cannot
  reach them from the public API;
* called directly, both accept some bad input silently: the ``xfail(strict=True)`` tests say
  what they should do instead, and fail (XPASS) once robust_matrix.py does it, so that their
  mark is removed then.
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


@pytest.mark.xfail(strict=True, reason="held_residual_scales broadcasts these silently: "
                                       "each row gets a residual scale against another fit")
@pytest.mark.parametrize("fit, mask, name", [
    (FIT[0], None, "fit"),  # one fit (p,) for every row
    (FIT[:, :1], None, "fit"),  # one value per row
    (FIT, np.ones(6), "mask"),  # one mask (p,) for every row
])
def test_held_residual_scales_refuses_a_broadcast_by_name(fit, mask, name):
    with pytest.raises(ValueError, match=name):
        _scales(Z, fit, mask)


@pytest.mark.xfail(strict=True, reason="NaN sorts last: a row with one NaN gets a finite "
                                       "scale computed as if the NaN were the largest residual")
@pytest.mark.parametrize("where", ["Z", "fit"])
def test_held_residual_scales_never_turns_nan_into_a_number(where):
    Zn, fitn = Z.copy(), FIT.copy()
    (Zn if where == "Z" else fitn)[0, 0] = np.nan
    try:
        scales = _scales(Zn, fitn)
    except ValueError as error:  # a refusal by name serves as well
        assert where in str(error)
        return
    assert np.isnan(scales[0])
    np.testing.assert_array_equal(scales[1:], _scales(Z, FIT)[1:])


@pytest.mark.parametrize("basis", [L[:, 0], L[:, :, None]])
def test_coding_spectrum_refuses_a_basis_that_is_not_a_matrix(basis):
    with pytest.raises(ValueError):  # numpy's LinAlgError is a ValueError
        RobustMatrixAlgorithm.coding_spectrum(basis, 1.0)


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
@pytest.mark.xfail(strict=True, reason="coding_spectrum returns a spectrum of NaN for a "
                                       "scale of 0 or NaN, or a basis with NaN")
@pytest.mark.parametrize("basis, scale, name", [
    (L, 0.0, "scale"),
    (L, float("nan"), "scale"),
    (np.where(np.arange(12).reshape(6, 2) == 0, np.nan, L), 1.0, "L"),
])
def test_coding_spectrum_refuses_nan_by_name(basis, scale, name):
    with pytest.raises(ValueError, match=name):
        RobustMatrixAlgorithm.coding_spectrum(basis, scale)


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
