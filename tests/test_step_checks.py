"""The checks of a step read what validation already found: the batch's largest entry is
scanned once (check_batch), and the data scale is judged in the batch's own dtype."""

import numpy as np
import pytest

import tensorstream.core.validation as validation
from tensorstream import OnlineCPDL, OnlineNMF, RobustOnlineNMF


@pytest.mark.parametrize("make", [lambda: OnlineNMF(3, random_state=0),
                                  lambda: OnlineCPDL(3, random_state=0)])
def test_a_step_does_not_scan_its_batch_again_for_its_largest_entry(make, monkeypatch):
    """online_step's too-small check scanned the batch's largest entry that check_batch had
    just computed (a few percent of a small step): it reads check_batch's now."""
    X = np.random.default_rng(0).random((20, 8))
    model = make().partial_fit(X)
    scans = []
    largest_entry = validation.largest_entry
    monkeypatch.setattr(validation, "largest_entry",
                        lambda X: scans.append(X) or largest_entry(X))
    model.partial_fit(X)
    assert scans == []


def test_the_remembered_largest_entry_is_only_that_batch_s():
    """Another array (even an equal one, or one at the same address after the first is gone)
    is scanned: the memo holds a weak reference to the batch it was computed for."""
    X = validation.check_batch(np.full((4, 3), 2.0), backend="numpy")
    assert validation.largest_checked(X) == 2.0
    assert validation.largest_checked(np.full((4, 3), 1e-300)) == 1e-300
    del X
    assert validation.largest_checked(np.full((4, 3), 3.0)) == 3.0


@pytest.mark.parametrize("dtype, refused", [(np.float32, True), (np.float64, False)])
def test_a_first_scale_is_judged_in_the_batch_s_dtype(dtype, refused):
    """usable_scale was never given the batch: a float32 batch whose data scale (1e-17) squares
    to below float32's full precision, though its largest entry does not, was learned at a
    scale that vanishes in its own arithmetic; float64 keeps its digits there."""
    X = np.random.default_rng(1).random((20, 8)) * 1e-17 + 1e-17
    X[:, 0] = 1.0  # one large entry a sample: winsorised away from the scale
    model = RobustOnlineNMF(3, random_state=0)
    if refused:
        with pytest.raises(ValueError, match="too small.*data scale"):
            model.partial_fit(X.astype(dtype))
        assert not hasattr(model, "components_")
    else:
        assert model.partial_fit(X.astype(dtype)).scale_ < 1e-16
