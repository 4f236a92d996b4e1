"""What made RobustOnlineNMF fast with its defaults (issue #31): the batch ``fit`` chooses
(``batch_size="auto"``) and the ADMM coder's shortcut for outliers without a box or a sign."""

from __future__ import annotations

import numpy as np
import pytest
import tensorly as tl

from tensorstream import load
from tensorstream.algorithms.robust_nmf import coding_start
from tensorstream.coders.robust import RobustPenalties, robust_code_admm
from tensorstream.core.backend import to_numpy, using
from tensorstream.learners.robust_nmf import (
    AUTO_BATCH_LIMITS,
    AUTO_BATCHES,
    RobustOnlineNMF,
)

BACKENDS = ["numpy", "pytorch"]


def _data(n, n_features=12, rank=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, rank)) @ rng.random((rank, n_features))
    X[rng.random(X.shape) < 0.05] = 10.0  # gross outliers on 5% of the entries
    return X


@pytest.mark.parametrize("n, batch, steps", [(100, 20, 25), (400, 20, 100), (1500, 75, 100),
                                             (1501, 76, 100), (30, 20, 10)])
def test_auto_batch_is_a_twentieth_of_the_array(n, batch, steps):
    model = RobustOnlineNMF(3, random_state=0).fit(_data(n))
    assert model.batch_size == "auto"
    assert model.batch_size_ == batch and model.n_steps_ == steps
    assert model.n_iter_ == 5  # the passes are max_iter's, whatever the batch


def test_auto_batch_is_limited():
    model = RobustOnlineNMF(3)
    low, high = AUTO_BATCH_LIMITS
    assert model._auto_batch(None) == low == model._batch_size()  # before fit: the smallest
    assert model._auto_batch(AUTO_BATCHES * 10**6) == high
    assert model._auto_batch(AUTO_BATCHES * 100) == 100


def test_a_given_batch_is_used_as_given():
    model = RobustOnlineNMF(3, batch_size=20, max_iter=5, random_state=0).fit(_data(1500))
    assert model.n_steps_ == 5 * 75 and "batch_size_" not in model.__dict__
    # max_iter="auto" counts the given batches: one pass of 75 comes nearest to 100 steps
    assert RobustOnlineNMF(3, batch_size=20, random_state=0).fit(_data(1500)).n_steps_ == 75


def test_the_chosen_batch_is_kept_in_checkpoints(tmp_path):
    model = RobustOnlineNMF(3, max_iter=1, random_state=0).fit(_data(800))
    resumed = load(model.save(tmp_path / "robust"))
    assert resumed.batch_size_ == model.batch_size_ == 40 == resumed._batch_size()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mask", [False, True])
def test_admm_without_a_box_equals_the_general_iteration(backend, mask):
    """Without a box or a sign the outliers' projection is the identity, their dual stays 0
    and the coder skips both: the same codes, outliers and losses as the general iteration
    with a box no entry reaches (which forms the projection and the dual)."""
    X = _data(40)
    W = np.abs(np.random.default_rng(1).random((12, 3)))
    observed = np.random.default_rng(2).random(X.shape) < 0.8
    with using(backend):
        data = tl.tensor(X / 2)
        H0, E0 = coding_start(data, 3, "uniform", "gross")
        options = dict(H0=H0, E0=E0, rho=1.0, tol=1e-3, max_iter=30,
                       mask=tl.tensor(observed * 1.0) if mask else None)
        free = robust_code_admm(data, [tl.tensor(W)],
                                RobustPenalties(0.3, outlier_bound=None), **options)
        boxed = robust_code_admm(data, [tl.tensor(W)],
                                 RobustPenalties(0.3, outlier_bound=1e300), **options)
    assert free.n_iter == boxed.n_iter
    for a, b in ((free.codes, boxed.codes), (free.outliers, boxed.outliers),
                 (free.losses, boxed.losses)):
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=1e-12, atol=1e-12)
    assert np.abs(to_numpy(free.outliers)).max() > 1.0  # the gross entries are outliers


def test_auto_batch_on_a_cuda_device_is_the_rule_or_what_fits(monkeypatch):
    """On a CUDA device (faked: only its free memory is asked) ``"auto"`` is the same rule as
    on the CPU, not the device's largest batch (which would leave fit a few steps), and the
    largest batch the device holds where the rule's does not fit."""
    torch = pytest.importorskip("torch")
    from tensorstream.core import device as device_module

    X = _data(1500)
    per_sample = device_module.step_bytes(X.shape[1], 3, 8)
    model = RobustOnlineNMF(3)
    model.__dict__["_context"] = {"device": torch.device("cuda", 0)}
    monkeypatch.setattr(device_module, "free_memory", lambda device: 1e12)
    assert model._step_batch("auto", X, 1500) == 75 == model.batch_size_
    monkeypatch.setattr(device_module, "free_memory", lambda device: 100 * per_sample)
    assert model._step_batch("auto", X, 1500) == 32 == model.batch_size_  # 50 fit
    with pytest.raises(ValueError, match="batch_size=75"):
        model._step_batch(75, X, 1500)  # a given batch is refused, as for every learner
