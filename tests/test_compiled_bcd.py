"""The compiled block coordinate descent of OR-PCA's and OMRMD's coder (coders/compiled_bcd.py)
equals the ``tl.*`` loop of :func:`tensorstream.coders.maxnorm.robust_code` (to rounding, with
the same iterations per sample) for every threshold shape it takes, with the ridge r-step and
with the max-norm ball (Newton's multiplier), and runs only where it can: numpy arrays, l1
noise, no mask, not the ball's bisection, kernels on (``TENSORSTREAM_JIT``) and, in an online
fit, from the first compiled step on. Skipped without numba."""

import numpy as np
import pytest
import tensorly as tl

from tensorstream import OnlineMaxNormMD, OnlineRobustPCA
from tensorstream.coders import compiled_bcd
from tensorstream.coders.maxnorm import robust_code
from tensorstream.core import compiled

pytest.importorskip("numba")

FIELDS = ("codes", "outliers", "low_rank", "losses", "penalties", "multipliers")


def _problem(b=30, p=40, d=6, seed=0, dtype=np.float64):
    """Low-rank samples with sparse gross entries, and a basis near theirs."""
    rng = np.random.default_rng(seed)
    L = rng.standard_normal((p, d))
    Z = rng.standard_normal((b, d)) @ L.T * 0.3
    Z += (rng.random((b, p)) < 0.08) * rng.choice([-4.0, 4.0], (b, p))
    basis = L + 0.05 * rng.standard_normal((p, d))
    return Z.astype(dtype), basis.astype(dtype)


def _both(monkeypatch, Z, L, alpha, **options):
    """``robust_code`` through the kernel, then through the ``tl.*`` loop."""
    options = {"ball": False, "ridge": 0.1, "tol": 1e-7, "max_iter": 200, **options}
    monkeypatch.setenv(compiled.SWITCH, "1")
    calls = []
    factory = compiled_bcd._compiled
    monkeypatch.setattr(compiled_bcd, "_compiled", lambda: calls.append(1) or factory())
    with compiled.allowing(True):  # as in a fit's step: outputs never run the kernel
        fast = robust_code(Z, L, alpha, **options)
    assert calls, "the kernel did not run"
    monkeypatch.setenv(compiled.SWITCH, "0")
    plain = robust_code(Z, L, alpha, **options)
    return fast, plain


def _thresholds(kind, Z):
    rng = np.random.default_rng(5)
    b, p = Z.shape
    return {"scalar": 0.4, "per-sample": 0.2 + rng.random((b, 1)),
            "per-entry": 0.2 + rng.random((b, p))}[kind]


@pytest.mark.parametrize("ball", [False, True], ids=["ridge", "ball"])
@pytest.mark.parametrize("kind", ["scalar", "per-sample", "per-entry"])
@pytest.mark.parametrize("shape", [(30, 40, 6), (1, 5, 1), (12, 64, 16)])
def test_the_kernel_is_the_tl_loop(monkeypatch, kind, shape, ball):
    Z, L = _problem(*shape, seed=sum(shape))
    alpha = _thresholds(kind, Z)
    fast, plain = _both(monkeypatch, Z, L, alpha, ball=ball)
    np.testing.assert_array_equal(fast.n_iter, plain.n_iter)
    assert plain.n_iter.max() > 2  # the outliers make the samples iterate
    if ball:  # the ball binds for some samples (a multiplier above the ridge), not for all
        assert np.any(plain.multipliers > 0.1) or shape[0] == 1
    for field in FIELDS:
        np.testing.assert_allclose(getattr(fast, field), getattr(plain, field),
                                   rtol=1e-10, atol=1e-12, err_msg=field)


def test_the_cap_and_a_rank_deficient_basis_as_the_tl_loop(monkeypatch):
    """Two iterations at most (the rough code's cap); a repeated column (a null direction of
    the Gram, whose coefficient is 0 in both) without a ridge."""
    Z, L = _problem(seed=3)
    L[:, 1] = L[:, 0]
    fast, plain = _both(monkeypatch, Z, L, 0.3, max_iter=2, ridge=0.0)
    np.testing.assert_array_equal(fast.n_iter, plain.n_iter)
    assert fast.n_iter.max() == 2
    for field in FIELDS:
        np.testing.assert_allclose(getattr(fast, field), getattr(plain, field),
                                   rtol=1e-10, atol=1e-12, err_msg=field)


def test_a_nan_sample_stops_at_once_as_in_the_tl_loop(monkeypatch):
    Z, L = _problem(seed=4)
    Z[2, 3] = np.nan
    fast, plain = _both(monkeypatch, Z, L, 0.3)
    np.testing.assert_array_equal(fast.n_iter, plain.n_iter)
    assert fast.n_iter[2] == 1
    np.testing.assert_array_equal(np.isnan(fast.outliers), np.isnan(plain.outliers))
    keep = np.arange(len(Z)) != 2
    np.testing.assert_allclose(fast.codes[keep], plain.codes[keep], rtol=1e-10, atol=1e-12)


def test_float32_is_coded_in_float32(monkeypatch):
    Z, L = _problem(seed=6, dtype=np.float32)
    fast, plain = _both(monkeypatch, Z, L, 0.4, tol=1e-4)
    assert fast.codes.dtype == fast.outliers.dtype == np.float32
    np.testing.assert_allclose(fast.low_rank, plain.low_rank, rtol=1e-4, atol=1e-5)


def test_the_kernel_runs_only_where_it_can(monkeypatch):
    Z, L = _problem()
    monkeypatch.setenv(compiled.SWITCH, "1")

    def kernel(**options):
        arguments = {"noise": "l1", "ball": False, "mask": None, **options}
        return compiled_bcd.l1_kernel(options.pop("Z", Z), options.pop("L", L), 0.3,
                                            **{k: v for k, v in arguments.items()
                                               if k in ("noise", "ball", "mask")})

    assert kernel() is None  # outside a fit's steps: outputs run the tl.* loop
    with compiled.allowing(True):
        assert kernel() is not None
        assert kernel(ball=True) is not None  # OMRMD's ball with Newton's multiplier
        assert compiled_bcd.l1_kernel(Z, L, 0.3, noise="l1", ball=True, mask=None,
                                      ball_solver="bisection") is None
        assert kernel(noise="l21") is None and kernel(noise="none") is None
        assert kernel(mask=np.ones(Z.shape)) is None
        assert compiled_bcd.l1_kernel(Z.astype(np.float32), L, 0.3, noise="l1", ball=False,
                                      mask=None) is None  # mixed dtypes
    with compiled.from_step(compiled.FIRST_COMPILED_STEP - 1):  # early in an online fit
        assert kernel() is None
    with compiled.from_step(compiled.FIRST_COMPILED_STEP):
        assert kernel() is not None
    monkeypatch.setenv(compiled.SWITCH, "0")
    with compiled.allowing(True):
        assert kernel() is None


def test_a_torch_batch_runs_the_tl_loop(monkeypatch):
    torch = pytest.importorskip("torch")
    Z, L = _problem()
    monkeypatch.setenv(compiled.SWITCH, "1")
    assert compiled_bcd.l1_kernel(torch.tensor(Z), torch.tensor(L), 0.3, noise="l1",
                                        ball=False, mask=None) is None


def test_a_nan_sample_in_the_ball_as_in_the_tl_loop(monkeypatch):
    """Newton's steps on a NaN norm keep the NaN (np.maximum's rule), as the tl.* loop."""
    Z, L = _problem(seed=9)
    Z[4, 0] = np.nan
    fast, plain = _both(monkeypatch, Z, L, 0.3, ball=True)
    np.testing.assert_array_equal(fast.n_iter, plain.n_iter)
    np.testing.assert_array_equal(np.isnan(fast.multipliers), np.isnan(plain.multipliers))
    keep = np.arange(len(Z)) != 4
    np.testing.assert_allclose(fast.multipliers[keep], plain.multipliers[keep], rtol=1e-10)


@pytest.mark.parametrize("learner", [OnlineRobustPCA, OnlineMaxNormMD])
def test_learners_learn_the_same_with_and_without_the_kernel(monkeypatch, learner):
    """Every step coded by the kernel (the first compiled step lowered to 0) against none:
    the same basis, outliers and denoised samples to rounding."""
    monkeypatch.setattr(compiled, "FIRST_COMPILED_STEP", 0)
    calls = []
    factory = compiled_bcd._compiled
    monkeypatch.setattr(compiled_bcd, "_compiled", lambda: calls.append(1) or factory())
    Z, _ = _problem(b=200, p=30, d=4, seed=8)
    learned = {}
    for switch in ("1", "0"):
        monkeypatch.setenv(compiled.SWITCH, switch)
        model = learner(4, batch_size=10, max_iter=2, random_state=0).fit(Z)
        learned[switch] = (tl.to_numpy(model.components_), tl.to_numpy(model.outliers(Z)),
                           tl.to_numpy(model.denoise(Z)))
        if switch == "1":  # every step coded through the kernel (twice: rough and final)
            assert len(calls) >= 2 * model.n_steps_
    for fast, plain in zip(learned["1"], learned["0"]):
        np.testing.assert_allclose(fast, plain, rtol=1e-8, atol=1e-10)


def test_outputs_do_not_load_the_kernel(monkeypatch):
    """A small ``denoise`` after a short fit codes with the tl.* loop: loading numba for it
    cost 0.2-0.8 s against 0.007 s (100 faces)."""
    monkeypatch.setenv(compiled.SWITCH, "1")
    calls = []
    monkeypatch.setattr(compiled_bcd, "_compiled", lambda: calls.append(1))
    Z, _ = _problem(b=60, p=30, d=4, seed=9)
    model = OnlineRobustPCA(4, random_state=0).fit(Z)
    model.denoise(Z), model.transform(Z), model.outliers(Z)
    assert calls == []
