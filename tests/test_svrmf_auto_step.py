"""``step_size="auto"`` of :class:`tensorstream.VarianceReducedMF`: the backtracking estimate of
the gradient's Lipschitz constant (spec 003, 7 #13 (b), an extension)."""

import numpy as np
import pytest
import tensorly as tl

from tensorstream import VarianceReducedMF, load
from tensorstream.finite.formulations import RobustPCA, SparseDL
from tensorstream.finite.variance_reduction import (
    FiniteData,
    estimate_lipschitz,
    full_gradient,
    objective,
    prox_step,
)

CTX = {"dtype": np.float64}
ACCURATE = dict(tol=1e-10, max_iter=5000)


def _data(n=80, d=10, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, 3)) @ rng.random((3, d)) + 0.1 * rng.random((n, d))


def _descent_gap(form, W, data, n, L):
    """``g(W+) - [g(W) + <G, W+ - W> + L/2 ||W+ - W||^2]`` for the prox step with ``1/L``."""
    G, sums, _ = full_gradient(form, W, data, 1024, **ACCURATE)
    Wp = prox_step(form, W, G, 1.0 / L, n)
    D = Wp - W
    gp = objective(form, Wp, data, 1024, **ACCURATE) - form.psi(Wp, n)
    return gp - (sums.loss / sums.count + float(tl.sum(G * D)) + 0.5 * L * float(tl.sum(D * D)))


@pytest.mark.parametrize("form", [SparseDL(lam=0.05), RobustPCA(lam1=0.1, lam2=0.2)],
                         ids=["odl", "orpca"])
def test_estimate_majorises_and_half_of_it_does_not(form):
    X = _data()
    rng = np.random.default_rng(3)
    W = form.prox_w(rng.standard_normal((10, 4)), 0.0, 80)
    data = FiniteData(X, "numpy", CTX)
    L, passes = estimate_lipschitz(form, W, data, 80, **ACCURATE)
    assert L > 0 and passes >= 3  # the gradient pass and at least two trials
    assert _descent_gap(form, W, data, 80, L) <= 1e-10
    assert _descent_gap(form, W, data, 80, L / 2) > 0


def test_auto_step_is_used_counted_and_resumes_exactly(tmp_path):
    X = _data(n=120)
    params = dict(formulation="odl", formulation_params={"lam": 0.05},
                  method_params={"step_size": "auto", "auto_samples": 50}, n_epochs=3,
                  random_state=4)
    model = VarianceReducedMF(4, **params).fit(X)
    assert 0 < model.step_size_ < np.inf
    n, b, m = 120, model.inner_batch_, model.epoch_length_
    # the estimate's passes over the 50-sample subsample are counted as reads
    assert model.history_[0]["passes_read"] > (n + m * b) / n
    again = VarianceReducedMF(4, **params).fit(X)
    assert again.step_size_ == model.step_size_
    assert np.array_equal(again.components_, model.components_)
    half = VarianceReducedMF(4, **{**params, "n_epochs": 1}).fit(X)
    resumed = load(half.save(tmp_path / "auto.npz"))
    assert resumed.step_size_ == model.step_size_
    resumed.partial_fit(X).partial_fit(X)
    assert np.array_equal(resumed.components_, model.components_)


def test_auto_step_descends_on_a_robust_problem():
    X = _data(n=150, seed=1)
    X[np.random.default_rng(2).random(X.shape) < 0.05] += 20.0  # sparse outliers
    model = VarianceReducedMF(3, formulation="orpca",
                              formulation_params={"lam1": 0.1, "lam2": 0.1},
                              method_params={"step_size": "auto"}, init="gaussian", n_epochs=6,
                              random_state=0)
    f = []
    model.set_params(callback=lambda learner, info: f.append(learner.objective(X)))
    model.fit(X)
    assert f[-1] < f[0]
    assert model.history_[-1]["grad_map_sq"] < model.history_[0]["grad_map_sq"]


def test_sgd_auto_step_and_smm_has_none():
    X = _data(n=60)
    sgd = VarianceReducedMF(3, formulation="odl", method="sgd",
                            method_params={"step_size": "auto"}, n_epochs=1,
                            random_state=0).fit(X)
    assert sgd.step_size_ > 0
    smm = VarianceReducedMF(3, formulation="odl", method="smm", n_epochs=1, random_state=0).fit(X)
    assert smm.step_size_ is None


@pytest.mark.parametrize("bad, message", [("fast", "step_size must be > 0 or one of 'auto'"),
                                          (0.0, "step_size must be > 0")])
def test_bad_step_size_is_refused_and_state_kept(bad, message):
    X = _data(n=60)
    model = VarianceReducedMF(3, formulation="odl", n_epochs=1, random_state=0).fit(X)
    before = np.array(model.components_)
    model.set_params(method_params={"step_size": bad})
    with pytest.raises(ValueError, match=message):
        model.partial_fit(X)
    assert np.array_equal(model.components_, before) and model.n_epochs_ == 1


def test_bad_auto_samples_is_refused():
    with pytest.raises(ValueError, match="auto_samples"):
        VarianceReducedMF(3, method_params={"step_size": "auto", "auto_samples": 0}).fit(_data())


def test_zero_epochs_initialise_and_the_gradient_mapping_matches_history():
    X = _data(n=90)
    start = VarianceReducedMF(3, formulation="odl", formulation_params={"lam": 0.05},
                              n_epochs=0, method_params={"step_size": 0.5},
                              code_tol=1e-10, code_max_iter=5000, eval_tol=1e-10,
                              random_state=0).fit(X)
    assert start.n_epochs_ == 0 and start.history_ == []
    f0 = start.objective(X)
    model = VarianceReducedMF(**{**start.get_params(), "n_epochs": 1}).fit(X)
    assert np.allclose(model.history_[0]["snapshot_loss"], f0, rtol=1e-8)
    # the epoch-0 grad_map_sq is computed at W^{0,0} from G_0: same as the public method
    assert np.isclose(start.gradient_mapping(X), model.history_[0]["grad_map_sq"], rtol=1e-6)
    with pytest.raises(ValueError, match=r"n_epochs must be >= 0 \(an integer\)"):
        VarianceReducedMF(3, n_epochs=-1).fit(X)
