"""The batched projected-gradient coding step for general divergences (spec 001 §2.3, §5.1.4)."""

import importlib.util

import numpy as np
import pytest
import tensorly as tl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.optimize import linprog, lsq_linear, nnls

from tensorstream.coders.divergence import (
    CODE_LOWER,
    CODE_UPPER,
    ArmijoStep,
    ConstantStep,
    MultiplicativeStep,
    PolyakStep,
    code_divergence,
    code_divergence_matrix,
    project_box,
)
from tensorstream.core.backend import using
from tensorstream.core.dictionary import spectral_norm_psd
from tensorstream.losses import get_loss

HAS_TORCH = importlib.util.find_spec("torch") is not None
FIXTURE_OK = [HealthCheck.function_scoped_fixture]  # `backend` only sets a context: reusable




def T(x):
    return tl.tensor(np.asarray(x, dtype=np.float64))


def N(x):
    return tl.to_numpy(x)


def kl_problem(seed=0, b=6, F=25, R=4):
    """Poisson counts from a nonnegative dictionary (the KL noise model)."""
    rng = np.random.default_rng(seed)
    W = rng.uniform(0.1, 1.0, (F, R))
    V = rng.poisson(rng.uniform(0.5, 2.0, (b, R)) @ W.T * 5).astype(float) / 5
    return V, W


def kl_reference(V, W, n_iter=5000):
    """Lee-Seung multiplicative updates for KL with W fixed: an independent long-run reference."""
    H = np.ones((V.shape[0], W.shape[1]))
    for _ in range(n_iter):
        H *= ((V / (H @ W.T)) @ W) / W.sum(axis=0)
    Y = H @ W.T
    return np.sum(V * np.log(np.where(V > 0, V, 1) / Y) - V + Y, axis=1)


def well_conditioned(rng, F, R):
    Q, _ = np.linalg.qr(rng.normal(size=(F, R)))
    return Q * np.linspace(1.0, 2.0, R)


# --------------------------------------------------------------------------------------------
# projections
# --------------------------------------------------------------------------------------------

BOXES = st.sampled_from([(CODE_LOWER, CODE_UPPER), (0.0, None), (None, 1.0), (-1.0, 2.0),
                         (None, None)])
FINITE = st.floats(-1e6, 1e6, allow_nan=False)


@settings(max_examples=60, deadline=None, suppress_health_check=FIXTURE_OK)
@given(x=arrays(np.float64, (4, 3), elements=FINITE), z=arrays(np.float64, (4, 3), elements=FINITE),
       box=BOXES)
def test_projection_idempotent_nonexpansive_variational(backend, x, z, box):
    lower, upper = box
    px, pz = N(project_box(T(x), lower, upper)), N(project_box(T(z), lower, upper))
    assert np.all(px >= (-np.inf if lower is None else lower))
    assert np.all(px <= (np.inf if upper is None else upper))
    np.testing.assert_array_equal(N(project_box(T(px), lower, upper)), px)
    assert np.linalg.norm(px - pz) <= np.linalg.norm(x - z) * (1 + 1e-12) + 1e-12
    # variational inequality: <x - P(x), w - P(x)> <= 0 for every w in the box (w = P(z))
    assert np.sum((x - px) * (pz - px)) <= 1e-9 * (1 + np.abs(x).max() * np.abs(z).max())


def test_projection_is_a_clip(backend):
    np.testing.assert_array_equal(N(project_box(T([-3.0, 0.0, 0.5, 2e8]))),
                                  [CODE_LOWER, CODE_LOWER, 0.5, CODE_UPPER])
    np.testing.assert_array_equal(N(project_box(T([-1.0, 3.0]), 0.0, None)), [0.0, 3.0])


@pytest.mark.parametrize("lower, upper", [(1.0, 1.0), (2.0, 1.0), ("0", None), (np.nan, None),
                                          (None, True), (np.inf, None)])
def test_projection_rejects_bad_bounds(backend, lower, upper):
    with pytest.raises(ValueError, match="lower|upper"):
        project_box(T([1.0]), lower, upper)


def test_spectral_norm_is_not_frobenius(backend, rng):
    W = rng.normal(size=(7, 4))
    assert spectral_norm_psd(T(W.T @ W)) == pytest.approx(np.linalg.norm(W, 2) ** 2, rel=1e-12)
    with pytest.raises(ValueError, match="gram"):
        spectral_norm_psd(T(np.ones((2, 3))))


# --------------------------------------------------------------------------------------------
# optimality
# --------------------------------------------------------------------------------------------


def test_squared_loss_matches_nnls_and_kkt(backend, rng):
    F, R, b = 20, 5, 8
    W = well_conditioned(rng, F, R)
    V = rng.normal(size=(b, R)) @ W.T + 0.1 * rng.normal(size=(b, F))  # signed data: active set
    H, info = code_divergence_matrix(T(V), T(W), "l2", lower=0.0, upper=None, max_iter=3000,
                                     tol=0.0)
    H = N(H)
    assert info["step"].lipschitz == pytest.approx(np.linalg.norm(W, 2) ** 2)
    for j in range(b):
        h_star, _ = nnls(W, V[j])
        np.testing.assert_allclose(H[j], h_star, atol=1e-6)
    gradient = (H @ W.T - V) @ W
    assert np.all(H >= 0)
    assert np.abs(np.minimum(H, gradient)).max() < 1e-6  # KKT: complementarity and dual sign
    assert np.all(N(info["converged"]))


def test_squared_loss_in_the_paper_box_matches_lsq_linear(backend, rng):
    F, R, b = 30, 5, 4
    W = rng.uniform(0.0, 1.0, (F, R))
    V = rng.uniform(0.5, 2.0, (b, R)) @ W.T + 0.3 * rng.normal(size=(b, F))
    H, info = code_divergence_matrix(T(V), T(W), "l2", max_iter=20000, tol=1e-15)
    for j in range(b):
        ref = lsq_linear(W, V[j], bounds=(CODE_LOWER, CODE_UPPER), tol=1e-14).x
        best = 0.5 * np.sum((W @ ref - V[j]) ** 2)
        assert (float(N(info["objective"])[j]) - best) <= 1e-6 * best


def test_ridge_matches_closed_form(backend, rng):
    F, R, b, m = 12, 4, 3, 0.7
    W, V = rng.normal(size=(F, R)), rng.normal(size=(b, F))
    H, info = code_divergence_matrix(T(V), T(W), "l2", ridge=m, lower=None, upper=None,
                                     max_iter=5000, tol=0.0)
    expected = np.linalg.solve(W.T @ W + m * np.eye(R), W.T @ V.T).T
    # the stop is on the objective change, which pins H down to ~sqrt(machine eps)
    np.testing.assert_allclose(N(H), expected, atol=1e-6)
    objective = 0.5 * np.sum((expected @ W.T - V) ** 2, axis=1) + m / 2 * np.sum(expected**2, 1)
    np.testing.assert_allclose(N(info["objective"]), objective, rtol=1e-10)


STEP_RULES = {
    "armijo-bb": ArmijoStep(),
    "armijo-paper": ArmijoStep(init="paper"),
    "armijo-warm": ArmijoStep(init="warm"),
    "polyak": PolyakStep(),
    "mu": MultiplicativeStep(),
    "constant": None,  # a local Lipschitz bound, built in the test
}


@pytest.mark.parametrize("rule", list(STEP_RULES))
def test_step_rules_reach_the_kl_optimum(backend, rule):
    V, W = kl_problem()
    reference = kl_reference(V, W)
    step = STEP_RULES[rule]
    if step is None:
        # KL has no global curvature bound: 2x the Hessian norm over the data's neighbourhood
        y_min = np.min(V[V > 0]) / 4
        step = ConstantStep(lipschitz=2 * np.max(V) / y_min**2 * np.linalg.norm(W, 2) ** 2 / 50)
    H, info = code_divergence_matrix(T(V), T(W), "kl", step=step, max_iter=3000, tol=1e-12)
    np.testing.assert_allclose(N(info["objective"]), reference, rtol=1e-4)
    # the reported objective is the one of the returned codes
    np.testing.assert_allclose(N(info["objective"]),
                               N(get_loss("kl").per_sample(T(V), tl.dot(H, T(W.T)))), rtol=1e-12)


def test_l1_polyak_matches_linear_program(backend, rng):
    F, R, b = 20, 3, 4
    W = rng.uniform(0.0, 1.0, (F, R))
    V = rng.uniform(0.5, 2.0, (b, R)) @ W.T
    V = np.clip(V + (rng.random(V.shape) < 0.3) * rng.uniform(-3, 3, V.shape), 0, None)
    H, info = code_divergence_matrix(T(V), T(W), "l1", max_iter=1500)  # auto: Polyak
    assert isinstance(info["step"], PolyakStep)
    initial = N(get_loss("l1").per_sample(T(V), T(np.full((b, R), 1.0) @ W.T)))
    for j in range(b):
        lp = linprog(np.r_[np.zeros(R), np.ones(F)],
                     A_ub=np.block([[-W, -np.eye(F)], [W, -np.eye(F)]]), b_ub=np.r_[-V[j], V[j]],
                     bounds=[(CODE_LOWER, CODE_UPPER)] * R + [(0, None)] * F)
        value = float(N(info["objective"])[j])
        assert lp.fun - 1e-9 <= value <= lp.fun * (1 + 1e-3)
    assert np.all(N(info["objective"]) <= initial)


# --------------------------------------------------------------------------------------------
# monotonicity, feasibility, masks
# --------------------------------------------------------------------------------------------

MONOTONE_CASES = [
    ("l2", {}, "constant"), ("huber", {"threshold": 0.3}, "constant"),
    ("mahalanobis", {"matrix": None}, "constant"), ("l2", {}, "armijo"), ("kl", {}, "armijo"),
    ("is", {}, "armijo"), ("beta", {"beta": 0.5}, "armijo"), ("beta", {"beta": 3.0}, "armijo"),
    ("alpha", {"alpha": 2.0}, "armijo"), ("hellinger", {}, "armijo"),
    ("l2_nonsquared", {}, "armijo"), ("kl", {}, ArmijoStep(init="warm")),
    ("is", {}, ArmijoStep(init="paper")), ("kl", {}, "mu"), ("is", {}, "mu"),
    ("beta", {"beta": 0.5}, "mu"), ("beta", {"beta": 3.0}, "mu"),
]  # fmt: skip


def make_loss(name, params, F):
    if name == "mahalanobis":
        A = np.random.default_rng(3).normal(size=(F, F))
        params = {"matrix": A @ A.T / F + np.eye(F)}
    return get_loss(name, **params)


@pytest.mark.parametrize("name, params, step", MONOTONE_CASES)
def test_monotone_rules_never_increase_and_stay_feasible(backend, name, params, step):
    V, W = kl_problem(seed=1, F=15)
    loss = make_loss(name, params, 15)
    lower, upper = 0.05, 1.5  # a tight box, so both bounds are active somewhere
    history = []

    def record(k, H, f):
        Hn = N(H)
        assert np.all(Hn >= lower) and np.all(Hn <= upper), f"iteration {k} left the box"
        history.append(N(f))

    init = T(np.random.default_rng(0).uniform(-1.0, 3.0, (V.shape[0], 4)))  # outside the box
    H, info = code_divergence_matrix(T(V), T(W), loss, step=step, init=init, lower=lower,
                                     upper=upper, max_iter=60, tol=0.0, callback=record)
    history = np.array(history)
    assert len(history) == info["n_iter"] >= 2
    assert np.all(np.diff(history, axis=0) <= 1e-12 * np.abs(history[:-1]))
    assert np.all(np.isfinite(history))


@pytest.mark.parametrize("step", ["polyak", "constant"])
def test_other_rules_stay_feasible(backend, step):
    V, W = kl_problem(seed=2)
    options = {"step": ConstantStep(lipschitz=50.0)} if step == "constant" else {"step": step}

    def check(k, H, f):
        assert np.all(N(H) >= CODE_LOWER) and np.all(N(H) <= 1.0)

    for loss in ("l1", "kl"):
        code_divergence_matrix(T(V), T(W), loss, upper=1.0, max_iter=30, callback=check, **options)


def test_masks_freeze_converged_samples_and_match_single_solves(backend):
    V, W = kl_problem(seed=4, b=5)
    V[0] = W @ np.ones(4)  # an exact fit, reached by the initial scale c 1
    H, info = code_divergence_matrix(T(V), T(W), "kl", max_iter=400, tol=1e-10)
    iterations = info["iterations"]
    assert iterations.shape == (5,) and iterations.max() == info["n_iter"]
    assert iterations[0] < iterations[1:].min()  # the exact fit stops early
    for j in range(5):  # per-sample steps and masks: the same codes as one-sample solves
        Hj, _ = code_divergence_matrix(T(V[j:j + 1]), T(W), "kl", max_iter=400, tol=1e-10)
        np.testing.assert_allclose(N(Hj)[0], N(H)[j], rtol=1e-5)


@pytest.mark.parametrize("loss", ["kl", "l2"])
def test_converged_samples_are_frozen(backend, loss):
    V, W = kl_problem(seed=9, b=6)
    history = []
    H, info = code_divergence_matrix(T(V), T(W), loss, max_iter=300, tol=1e-6,
                                     callback=lambda k, H, f: history.append(N(H)))
    history, iterations = np.array(history), info["iterations"]
    assert len(set(iterations.tolist())) > 1  # samples stop at different iterations
    for j, stop in enumerate(iterations):
        assert np.all(history[stop - 1:, j] == N(H)[j])  # untouched after its last iteration


def test_warm_start_from_the_solution_stops_at_once(backend):
    V, W = kl_problem(seed=5)
    H, info = code_divergence_matrix(T(V), T(W), "kl", step="paper", max_iter=2000, tol=1e-12)
    H2, info2 = code_divergence_matrix(T(V), T(W), "kl", init=H, max_iter=2000, tol=1e-9,
                                       step=ArmijoStep(initial_step=float(
                                           np.median(N(info["step_sizes"])))))
    assert info2["n_iter"] <= 3
    np.testing.assert_allclose(N(H2), N(H), rtol=1e-6)


def test_model_never_leaves_the_domain(backend):
    """Spec §5.1.4: a trial step with W h < 0 is never accepted (inject one with a huge step)."""
    V, W = kl_problem(seed=6)
    W[3] = 0.0  # a zero row: the model is exactly 0 there for every h (stays finite via eps)
    V[0] = 0.0  # KL = sum(y) here: the floored value at a negative model would be smaller
    seen = []

    def record(k, H, f):
        seen.append(np.min(N(H) @ W.T))

    for loss in ("kl", "is"):
        H, info = code_divergence_matrix(T(V), T(W), loss, lower=None, max_iter=50,
                                         init=T(np.ones((V.shape[0], W.shape[1]))),
                                         step=ArmijoStep(initial_step=1e6), callback=record)
        assert np.all(np.isfinite(N(H))) and np.all(np.isfinite(N(info["objective"])))
    assert min(seen) >= 0.0


def test_is_at_data_scale_needs_a_scaled_trial(backend):
    """Spec §5.4.3: ξ⁰ = 1 at every iteration is too timid at data scale 1e3; BB/warm are not."""
    rng = np.random.default_rng(7)
    W = rng.uniform(0.1, 1.0, (20, 4))
    V = (rng.uniform(0.5, 2.0, (3, 4)) @ W.T) * 1000 * rng.gamma(1000, 1 / 1000, (3, 20))
    _, long_run = code_divergence_matrix(T(V), T(W), "is", max_iter=2000, tol=0.0)
    best = N(long_run["objective"])
    for init in ("bb", "warm"):
        _, info = code_divergence_matrix(T(V), T(W), "is", max_iter=300, tol=1e-10,
                                         step=ArmijoStep(init=init))
        np.testing.assert_allclose(N(info["objective"]), best, rtol=1e-6)
    _, paper = code_divergence_matrix(T(V), T(W), "is", max_iter=300, tol=1e-10,
                                      step=ArmijoStep(init="paper"))
    assert np.all(N(paper["objective"]) > 2 * best)


# --------------------------------------------------------------------------------------------
# operators: tensors through a CP dictionary
# --------------------------------------------------------------------------------------------


def test_cp_operators_match_the_unfolded_matrix(backend, rng):
    I1, I2, R, b = 4, 3, 3, 5
    U1, U2 = rng.uniform(0.1, 1.0, (I1, R)), rng.uniform(0.1, 1.0, (I2, R))
    W = np.einsum("ir,jr->ijr", U1, U2).reshape(I1 * I2, R)  # Khatri-Rao, C order
    V = rng.poisson(rng.uniform(0.5, 2.0, (b, R)) @ W.T * 3).reshape(b, I1, I2) / 3.0
    tU1, tU2 = T(U1), T(U2)

    def forward(H):
        return tl.einsum("sr,ir,jr->sij", H, tU1, tU2)

    def adjoint(G):
        return tl.einsum("sij,ir,jr->sr", G, tU1, tU2)

    gram = tl.dot(tl.transpose(tU1), tU1) * tl.dot(tl.transpose(tU2), tU2)
    for loss in ("kl", "l2"):
        H, info = code_divergence(T(V), forward, adjoint, loss, gram=gram, max_iter=300,
                                  tol=1e-12)
        H_mat, _ = code_divergence_matrix(T(V.reshape(b, -1)), T(W), loss, max_iter=300,
                                          tol=1e-12)
        np.testing.assert_allclose(N(H), N(H_mat), rtol=1e-8)


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
@pytest.mark.parametrize("loss, step", [("kl", "armijo"), ("l1", "polyak"), ("l2", "constant"),
                                        ("is", ArmijoStep(init="warm")), ("kl", "mu"),
                                        ("is", "mu")])
def test_numpy_and_pytorch_agree(loss, step):
    V, W = kl_problem(seed=8)
    results = {}
    for name in ("numpy", "pytorch"):
        with using(name):
            H, info = code_divergence_matrix(T(V), T(W), loss, step=step, max_iter=100)
            results[name] = (N(H), N(info["objective"]), N(info["converged"]), info["n_iter"])
    (Hn, fn, cn, kn), (Ht, ft, ct, kt) = results["numpy"], results["pytorch"]
    np.testing.assert_allclose(Hn, Ht, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(fn, ft, rtol=1e-8)
    np.testing.assert_array_equal(cn, ct)
    assert kn == kt


def test_auto_picks_the_papers_rules(backend):
    V, W = kl_problem()
    expected = {"l2": ConstantStep, "huber": ConstantStep, "kl": ArmijoStep, "is": ArmijoStep,
                "l2_nonsquared": ArmijoStep, "l1": PolyakStep}
    for name, rule in expected.items():
        params = {"threshold": 1.0} if name == "huber" else {}
        _, info = code_divergence_matrix(T(V), T(W), get_loss(name, **params), max_iter=2,
                                         step="paper")
        assert isinstance(info["step"], rule), name
        _, info = code_divergence_matrix(T(V), T(W), get_loss(name, **params), max_iter=2)
        # "auto" departs from the paper for the beta-divergences (KL, IS): multiplicative
        assert isinstance(info["step"], MultiplicativeStep if name in ("kl", "is") else rule), \
            name
    # without the Gram the squared loss falls back to Armijo
    _, info = code_divergence(T(V), lambda H: tl.dot(H, T(W.T)), lambda G: tl.dot(G, T(W)),
                              "l2", n_components=4, max_iter=2)
    assert isinstance(info["step"], ArmijoStep)


# --------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------


def test_bad_input_is_rejected(backend):
    V, W = kl_problem()
    tV, tW = T(V), T(W)

    def fwd(H):
        return tl.dot(H, tl.transpose(tW))

    def adj(G):
        return tl.dot(G, tW)

    cases = [
        (lambda: code_divergence_matrix(tV, tW, "nope"), "loss must be"),
        (lambda: code_divergence_matrix(tV, tW, "kl", step="newton"), "step must be"),
        (lambda: code_divergence_matrix(tV, tW, "kl", step="constant"), "lipschitz"),
        (lambda: code_divergence_matrix(tV, tW, "l1", step="mu"), "needs a beta-divergence"),
        (lambda: code_divergence_matrix(tV, tW, "l2_nonsquared", step=MultiplicativeStep()),
         "needs a beta-divergence"),
        (lambda: code_divergence_matrix(tV, tW, "kl", step="mu", lower=None), "lower >= 0"),
        (lambda: code_divergence_matrix(tV, tW, "kl", step="mu", lower=-1.0), "lower >= 0"),
        (lambda: code_divergence(tV, fwd, adj, "l2", n_components=4, step="constant"), "gram"),
        (lambda: code_divergence_matrix(tV, tW, "kl", lower=2.0, upper=1.0), "lower must be <"),
        (lambda: code_divergence_matrix(T(-V), tW, "kl"), "v must be nonnegative"),
        (lambda: code_divergence_matrix(tV, tW, "kl", max_iter=-1), "max_iter"),
        (lambda: code_divergence_matrix(tV, tW, "kl", max_iter=2.5), "max_iter"),
        (lambda: code_divergence_matrix(tV, tW, "kl", tol=-1.0), "tol"),
        (lambda: code_divergence_matrix(tV, tW, "kl", ridge=float("nan")), "ridge"),
        (lambda: code_divergence_matrix(tV, tW, "kl", init=T(np.ones((5, 4)))), "init must"),
        (lambda: code_divergence_matrix(tV, tW, "kl", gram=T(np.eye(3))), "gram must"),
        (lambda: code_divergence(tV, fwd, adj, "kl", n_components=3, init=T(np.ones((6, 4)))),
         "init must"),
        (lambda: code_divergence_matrix(tV, T(W.T), "kl"), "V must have shape"),
        (lambda: code_divergence_matrix(tV, T(W[0]), "kl"), "W must be"),
        (lambda: code_divergence(T(V[0]), fwd, adj, "kl", n_components=4), "V must be a batch"),
        (lambda: code_divergence(tV, fwd, adj, "kl"), "n_components"),
        (lambda: code_divergence(tV, fwd, adj, "kl", n_components=0), "n_components"),
        (lambda: code_divergence(tV, lambda H: fwd(H)[:, :3], adj, "kl", n_components=4),
         "forward"),
        (lambda: code_divergence(tV, fwd, lambda G: adj(G)[:, :2], "kl", n_components=4),
         "adjoint"),
    ]
    for call, match in cases:
        with pytest.raises(ValueError, match=match):
            call()


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: ArmijoStep(sigma=0.5), "sigma"),
        (lambda: ArmijoStep(shrink=1.0), "shrink"),
        (lambda: ArmijoStep(max_reductions=-1), "max_reductions"),
        (lambda: ArmijoStep(initial_step=0.0), "initial_step"),
        (lambda: ArmijoStep(init="newton"), "init"),
        (lambda: PolyakStep(delta=0.01, delta_min=0.1), "delta_min"),
        (lambda: PolyakStep(relaxation=2.0), "relaxation"),
        (lambda: PolyakStep(grow=0.5), "grow"),
        (lambda: PolyakStep(shrink=1.5), "shrink"),
        (lambda: ConstantStep(lipschitz=-1.0), "lipschitz"),
        (lambda: ConstantStep(lipschitz=float("inf")), "lipschitz"),
    ],
)
def test_bad_step_options_are_rejected(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("ridge", [0.0, 0.3])
def test_mu_dense_working_set_only_saves_work(backend, monkeypatch, ridge):
    """Dense batches drop converged samples mid-solve too (both backends): codes, iteration
    counts, flags, objectives and the kept models are those of the loop that keeps them all."""
    import tensorstream.coders.divergence.solver as divergence

    V, W = kl_problem(seed=7, b=300, F=12, R=3)
    options = dict(tol=1e-10, max_iter=300, ridge=ridge)
    drops = []
    drop = divergence._Batch.drop
    monkeypatch.setattr(divergence._Batch, "drop",
                        lambda self, *args: drops.append(1) or drop(self, *args))
    monkeypatch.setattr(divergence, "_MIN_DROP", 8)
    dropped, info = code_divergence_matrix(T(V), T(W), "kl", **options)
    assert len(np.unique(info["iterations"])) > 10  # samples stop at many iterations
    assert len(drops) >= 2
    monkeypatch.setattr(divergence, "_MIN_DROP", 10**9)
    kept, reference = code_divergence_matrix(T(V), T(W), "kl", **options)
    np.testing.assert_allclose(N(dropped), N(kept), rtol=1e-12)
    np.testing.assert_array_equal(info["iterations"], reference["iterations"])
    np.testing.assert_array_equal(N(info["converged"]), N(reference["converged"]))
    np.testing.assert_allclose(N(info["objective"]), N(reference["objective"]), rtol=1e-12)
    np.testing.assert_allclose(N(info["model"]), N(dropped) @ W.T, rtol=1e-12)
