"""The divergence table: closed forms, limits, gradients, curvature, zeros, registry, errors."""

import dataclasses
import importlib.util
import warnings

import numpy as np
import pytest
import tensorly as tl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.special import xlogy

from tensorstream.core.backend import using
from tensorstream.losses import (
    DATA_EPS,
    EPS,
    L1,
    LOSS_NAMES,
    AlphaDivergence,
    BetaDivergence,
    Divergence,
    Huber,
    L2Distance,
    Mahalanobis,
    SquaredL2,
    get_loss,
)

HAS_TORCH = importlib.util.find_spec("torch") is not None
FIXTURE_OK = [HealthCheck.function_scoped_fixture]  # `backend` only sets a context: reusable
SHAPE = (3, 2, 3)  # a batch of three 2x3 tensor samples: six entries each
_A = np.random.default_rng(42).normal(size=(6, 6))
MATRIX = _A @ _A.T / 6 + 0.1 * np.eye(6)

# (name, params) -> per-sample reference written directly from spec §1.4 / §2.2, in numpy
CASES = {
    "l2": (("l2", {}), lambda x, y: (x - y) ** 2 / 2),
    "l1": (("l1", {}), lambda x, y: np.abs(x - y)),
    "l2_nonsquared": (("l2_nonsquared", {}), None),
    "kl": (("kl", {}), lambda x, y: xlogy(x, x) - xlogy(x, y) - x + y),
    "is": (("is", {}), lambda x, y: x / y - np.log(x / y) - 1),
    "beta=0.5": (("beta", {"beta": 0.5}), None),
    "beta=1.5": (("beta", {"beta": 1.5}), None),
    "beta=3": (("beta", {"beta": 3.0}), None),
    "beta=-1": (("beta", {"beta": -1.0}), None),
    "alpha=2": (("alpha", {"alpha": 2.0}), lambda x, y: (x - y) ** 2 / (2 * y)),
    "alpha=-1": (("alpha", {"alpha": -1.0}), lambda x, y: (x - y) ** 2 / (2 * x)),
    "alpha=0": (("alpha", {"alpha": 0.0}), lambda x, y: y * np.log(y / x) - y + x),
    "alpha=0.3": (("alpha", {"alpha": 0.3}), None),
    "hellinger": (("hellinger", {}), lambda x, y: 2 * (np.sqrt(x) - np.sqrt(y)) ** 2),
    "huber": (("huber", {"threshold": 0.3}), None),
    "mahalanobis": (("mahalanobis", {"matrix": MATRIX}), None),
}
SMOOTH = [k for k in CASES if k not in ("l1", "l2_nonsquared")]
SEPARABLE_SMOOTH = [k for k in SMOOTH if k != "mahalanobis"]


def make(case):
    (name, params), _ = CASES[case]
    return get_loss(name, **params)


def T(x):
    return tl.tensor(np.asarray(x, dtype=np.float64))


def N(x):
    return tl.to_numpy(x)


def positive_pair(rng, shape=SHAPE):
    return rng.uniform(0.2, 3.0, shape), rng.uniform(0.2, 3.0, shape)


def general_reference(loss, x, y):
    """Per-sample reference of every case, from the general formulas of spec §1.4."""
    b = x.shape[0]
    xf, yf = x.reshape(b, -1), y.reshape(b, -1)
    if isinstance(loss, L2Distance):
        return np.linalg.norm(xf - yf, axis=1)
    if isinstance(loss, Mahalanobis):
        r = xf - yf
        return np.einsum("bi,ij,bj->b", r, MATRIX, r) / 2
    if isinstance(loss, Huber):
        u, t = np.abs(xf - yf), loss.threshold
        return np.where(u <= t, u**2 / 2, t * (u - t / 2)).sum(axis=1)
    if isinstance(loss, BetaDivergence) and loss.beta not in (0.0, 1.0):
        be = loss.beta
        e = (xf**be + (be - 1) * yf**be - be * xf * yf ** (be - 1)) / (be * (be - 1))
        return e.sum(axis=1)
    if isinstance(loss, AlphaDivergence) and loss.alpha not in (0.0, 1.0):
        a = loss.alpha
        e = (xf**a * yf ** (1 - a) - a * xf + (a - 1) * yf) / (a * (a - 1))
        return e.sum(axis=1)
    return None


# --------------------------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(CASES))
def test_value_matches_closed_forms(backend, case, rng):
    loss = make(case)
    x, y = positive_pair(rng)
    got = N(loss.per_sample(T(x), T(y)))
    references = [general_reference(loss, x, y)]
    if CASES[case][1] is not None:
        references.append(CASES[case][1](x, y).reshape(3, -1).sum(axis=1))
    references = [r for r in references if r is not None]
    assert references, "every case needs at least one reference"
    for reference in references:
        np.testing.assert_allclose(got, reference, rtol=1e-12, atol=1e-13)
    assert got.shape == (3,)
    assert float(loss.value(T(x), T(y))) == pytest.approx(got.sum(), rel=1e-12)
    if loss.separable:
        elementwise = N(loss.elementwise(T(x), T(y)))
        assert elementwise.shape == SHAPE
        np.testing.assert_allclose(elementwise.reshape(3, -1).sum(axis=1), got, rtol=1e-12)


@pytest.mark.parametrize("case", list(CASES))
def test_zero_at_equality_and_nonnegative(backend, case, rng):
    loss = make(case)
    x, y = positive_pair(rng, (50, 6))
    assert np.all(N(loss.per_sample(T(x), T(y))) > 0)
    np.testing.assert_allclose(N(loss.per_sample(T(x), T(x))), 0.0, atol=1e-12)
    np.testing.assert_allclose(N(loss.gradient(T(x), T(x))), 0.0, atol=1e-12)


def test_single_sample_is_a_vector(backend):
    v, y = T([3.0, 4.0]), T([0.0, 0.0])
    assert float(get_loss("l2_nonsquared").value(v, y)) == pytest.approx(5.0)
    assert float(get_loss("l2").value(v, y)) == pytest.approx(12.5)
    np.testing.assert_allclose(N(get_loss("l2_nonsquared").gradient(v, y)), [-0.6, -0.8])


# --------------------------------------------------------------------------------------------
# limits and special cases
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "family, parameter, limit",
    [
        ("beta", 1.0, "kl"),
        ("beta", 0.0, "is"),
        ("beta", 2.0, "l2"),
        ("alpha", 1.0, "kl"),
        ("alpha", 0.0, AlphaDivergence(0.0)),
        ("alpha", 0.5, "hellinger"),
    ],
)
@pytest.mark.parametrize("offset", [-1e-7, 1e-7, 1e-13, -1e-13])
def test_general_formula_is_continuous_at_the_limits(backend, rng, family, parameter, limit,
                                                     offset):
    """Spec §5.1: 1e-5 at ±1e-7; the stable rewrite also holds right next to the limits."""
    x, y = positive_pair(rng)
    x[0, 0, 0] = 0.0 if parameter > 0 else x[0, 0, 0]  # data zeros where the family allows them
    near = get_loss(family, **{family: parameter + offset})
    exact = get_loss(limit)
    assert near.name == family  # the general formula, not a closed form
    np.testing.assert_allclose(N(near.per_sample(T(x), T(y))),
                               N(exact.per_sample(T(x), T(y))), rtol=1e-5)
    np.testing.assert_allclose(N(near.gradient(T(x), T(y))), N(exact.gradient(T(x), T(y))),
                               rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("family", ["beta", "alpha"])
@pytest.mark.parametrize("parameter", [1e-150, -1e-150, 1e-300])
def test_parameters_next_to_zero(backend, rng, family, parameter):
    """The textbook formula would divide rounding noise by 1e-150 here."""
    x, y = positive_pair(rng)
    near = get_loss(family, **{family: parameter})
    exact = get_loss("is") if family == "beta" else AlphaDivergence(0.0)
    np.testing.assert_allclose(N(near.per_sample(T(x), T(y))),
                               N(exact.per_sample(T(x), T(y))), rtol=1e-12)
    np.testing.assert_allclose(N(near.gradient(T(x), T(y))), N(exact.gradient(T(x), T(y))),
                               rtol=1e-12)


def test_beta_two_is_half_squared_l2(backend, rng):
    x, y = positive_pair(rng)
    direct = BetaDivergence(2.0)
    np.testing.assert_allclose(N(direct.elementwise(T(x), T(y))), (x - y) ** 2 / 2, rtol=1e-13)
    np.testing.assert_allclose(N(direct.gradient(T(x), T(y))), y - x, rtol=1e-13)
    assert get_loss(2.0) == SquaredL2()
    assert direct.curvature_bound == SquaredL2().curvature_bound == 1.0


def test_named_kl_is_hellinger_are_the_family_members():
    assert get_loss("kl") == BetaDivergence(1.0) == get_loss(1.0) == get_loss("alpha", alpha=1)
    assert get_loss("is") == BetaDivergence(0.0) == get_loss(0)
    assert get_loss("hellinger") == AlphaDivergence(0.5)
    assert get_loss("beta", beta=2) == SquaredL2()


def test_huber_quadratic_inside_linear_outside(backend):
    t = 0.7
    loss = Huber(threshold=t)
    u = np.linspace(-3, 3, 601)
    value = N(loss.elementwise(T(u), T(np.zeros_like(u))))
    inside = np.abs(u) <= t
    np.testing.assert_allclose(value[inside], u[inside] ** 2 / 2, rtol=1e-14)
    np.testing.assert_allclose(value[~inside], t * (np.abs(u[~inside]) - t / 2), rtol=1e-14)
    # continuous value and derivative at |u| = threshold
    for side in (-1.0, 1.0):
        edge = side * t
        left, right = T([edge - 1e-9]), T([edge + 1e-9])
        zero = T([0.0])
        assert abs(float(loss.value(left, zero)) - float(loss.value(right, zero))) < 1e-8
        assert abs(float(tl.sum(loss.gradient(left, zero) - loss.gradient(right, zero)))) < 1e-8
    # linear outside: the slope is exactly the threshold
    np.testing.assert_allclose(N(loss.gradient(T([0.0, 0.0]), T([5.0, -5.0]))), [t, -t])


# --------------------------------------------------------------------------------------------
# gradients and curvature
# --------------------------------------------------------------------------------------------


def finite_difference(f, y, h=1e-6):
    grad = np.zeros_like(y)
    for index in np.ndindex(y.shape):
        step = np.zeros_like(y)
        step[index] = h
        grad[index] = (f(y + step) - f(y - step)) / (2 * h)
    return grad


@pytest.mark.parametrize("case", list(CASES))
def test_gradient_matches_finite_differences(backend, case, rng):
    loss = make(case)
    x, y = positive_pair(rng)
    if case == "huber":  # both sides of the threshold, away from the kink of the curvature
        y = x + rng.choice([-1, 1], SHAPE) * rng.choice([0.1, 0.2, 0.5, 1.0], SHAPE)
    analytic = N(loss.gradient(T(x), T(y)))
    numeric = finite_difference(lambda z: float(loss.value(T(x), T(z))), y)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("case", SEPARABLE_SMOOTH)
def test_curvature_matches_finite_differences(backend, case, rng):
    loss = make(case)
    x, y = positive_pair(rng)
    if case == "huber":
        y = x + rng.choice([-1, 1], SHAPE) * rng.choice([0.1, 0.2, 0.5, 1.0], SHAPE)
    h = 1e-6
    numeric = (N(loss.gradient(T(x), T(y + h))) - N(loss.gradient(T(x), T(y - h)))) / (2 * h)
    np.testing.assert_allclose(N(loss.curvature(T(x), T(y))), numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("case", ["l2", "huber", "mahalanobis"])
def test_curvature_bound_bounds_the_hessian(case, rng):
    loss = make(case)
    x, y = positive_pair(rng, (1, 6))
    hessian = np.stack([
        (N(loss.gradient(T(x), T(y + h * e))) - N(loss.gradient(T(x), T(y - h * e))))[0] / (2 * h)
        for h in [1e-6] for e in np.eye(6)[:, None, :]
    ])
    assert np.linalg.eigvalsh((hessian + hessian.T) / 2).max() <= loss.curvature_bound + 1e-6
    if case == "mahalanobis":
        assert loss.curvature_bound == pytest.approx(np.linalg.eigvalsh(MATRIX).max())


@pytest.mark.parametrize("case", ["kl", "is", "beta=1.5", "hellinger", "huber", "l2_nonsquared"])
def test_chain_rule_in_codes_and_dictionary(backend, case, rng):
    """Spec §2.1: ∇_h d(v || W h) = W^T g and ∇_W d(v || W h) = g h^T."""
    loss = make(case)
    W, h = rng.uniform(0.2, 1.0, (6, 3)), rng.uniform(0.5, 1.5, 3)
    v = rng.uniform(0.5, 3.0, (1, 6))

    def objective(W_, h_):
        return float(loss.value(T(v), T((W_ @ h_)[None, :])))

    g = N(loss.gradient(T(v), T((W @ h)[None, :])))[0]
    np.testing.assert_allclose(W.T @ g, finite_difference(lambda z: objective(W, z), h),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(np.outer(g, h), finite_difference(lambda z: objective(z, h), W),
                               rtol=1e-6, atol=1e-8)


@settings(max_examples=40, deadline=None, suppress_health_check=FIXTURE_OK)
@given(
    seed=st.integers(0, 2**32 - 1),
    ties=st.booleans(),
    case=st.sampled_from(["l1", "l2_nonsquared"]),
)
def test_subgradient_inequality(backend, seed, ties, case):
    loss = make(case)
    rng = np.random.default_rng(seed)
    x, y, z = (rng.normal(size=(4, 5)) for _ in range(3))
    if ties:  # exact fits: the zero subgradient must still be valid
        y[:2] = x[:2]
        y[2, :3] = x[2, :3]
    g = N(loss.gradient(T(x), T(y)))
    lhs = N(loss.per_sample(T(x), T(z)))
    rhs = N(loss.per_sample(T(x), T(y))) + np.sum(g * (z - y), axis=1)
    assert np.all(lhs >= rhs - 1e-12)


@settings(max_examples=40, deadline=None, suppress_health_check=FIXTURE_OK)
@given(
    seed=st.integers(0, 2**32 - 1),
    family=st.sampled_from(["beta", "alpha"]),
    parameter=st.floats(-2.0, 4.0, allow_nan=False),
)
def test_families_are_divergences_for_any_parameter(backend, seed, family, parameter):
    rng = np.random.default_rng(seed)
    loss = get_loss(family, **{family: parameter})
    x, y = rng.uniform(0.1, 5.0, (2, 4, 3))
    values = N(loss.per_sample(T(x), T(y)))
    assert np.all(np.isfinite(values)) and np.all(values >= -1e-12)
    np.testing.assert_allclose(N(loss.per_sample(T(x), T(x))), 0.0, atol=1e-10)
    # continuity in the parameter (also across the special cases 0, 1/2, 1, 2)
    nearby = get_loss(family, **{family: parameter + 1e-7})
    np.testing.assert_allclose(N(nearby.per_sample(T(x), T(y))), values, rtol=1e-4, atol=1e-9)


# --------------------------------------------------------------------------------------------
# zeros and floors
# --------------------------------------------------------------------------------------------

POSITIVE_DOMAIN = ["kl", "is", "beta=0.5", "beta=1.5", "beta=3", "beta=-1", "alpha=2",
                   "alpha=-1", "alpha=0", "alpha=0.3", "hellinger"]


@pytest.mark.parametrize("case", POSITIVE_DOMAIN)
def test_zeros_in_data_and_model_stay_finite(backend, case, rng):
    loss = make(case)
    x, y = positive_pair(rng)
    x[0, 0, :] = 0.0
    y[1, 1, :] = 0.0
    x[2, 0, 0] = y[2, 0, 0] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no divide-by-zero / invalid-value warnings either
        outputs = [loss.per_sample(T(x), T(y)), loss.gradient(T(x), T(y)),
                   loss.curvature(T(x), T(y))]
    for out in outputs:
        assert np.all(np.isfinite(N(out)))
    # the documented floors: model zeros are evaluated at EPS, data zeros (where positive data
    # is needed) at DATA_EPS
    x_floor = np.where(x > 0, x, DATA_EPS) if loss.needs_positive_data else x
    expected = loss.per_sample(T(x_floor), T(np.where(y > 0, y, EPS)))
    np.testing.assert_allclose(N(loss.per_sample(T(x), T(y))), N(expected), rtol=1e-12)


def test_kl_data_zeros_are_exact(backend):
    kl = get_loss("kl")
    v, y = T([[0.0, 0.0, 2.0]]), T([[0.5, 3.0, 2.0]])
    # 0 log 0 = 0: a data zero contributes y alone, with no floor on the data
    np.testing.assert_allclose(N(kl.elementwise(v, y)), [[0.5, 3.0, 0.0]], atol=1e-15)
    np.testing.assert_allclose(N(kl.gradient(v, y)), [[1.0, 1.0, 0.0]], atol=1e-15)
    assert not kl.needs_positive_data


def test_is_data_zero_uses_data_eps(backend):
    loss = get_loss("is")
    v = loss.prepare_data(T([0.0, 2.0]))
    np.testing.assert_allclose(N(v), [DATA_EPS, 2.0])
    assert get_loss("is", data_eps=1e-4).prepare_data(T([0.0]))[0] == pytest.approx(1e-4)


# --------------------------------------------------------------------------------------------
# flags, registry, immutability, backends
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "case, smooth, convex, separable, nonneg, posdata, posmodel, bounded",
    [
        ("l2", True, True, True, False, False, False, True),
        ("l1", False, True, True, False, False, False, False),
        ("l2_nonsquared", False, True, False, False, False, False, False),
        ("kl", True, True, True, True, False, True, False),
        ("is", True, False, True, True, True, True, False),
        ("beta=1.5", True, True, True, True, False, True, False),
        ("beta=3", True, False, True, True, False, True, False),
        ("beta=0.5", True, False, True, True, False, True, False),
        ("alpha=-1", True, True, True, True, True, True, False),
        ("hellinger", True, True, True, True, False, True, False),
        ("huber", True, True, True, False, False, False, True),
        ("mahalanobis", True, True, False, False, False, False, True),
    ],
)
def test_flags(case, smooth, convex, separable, nonneg, posdata, posmodel, bounded):
    loss = make(case)
    assert (loss.smooth, loss.convex, loss.separable) == (smooth, convex, separable)
    assert (loss.needs_nonnegative_data, loss.needs_positive_data,
            loss.needs_positive_model) == (nonneg, posdata, posmodel)
    assert (loss.curvature_bound is not None) == bounded
    assert get_loss(loss) is loss


def test_every_name_resolves():
    params = {"beta": {"beta": 0.5}, "alpha": {"alpha": 2.0}, "huber": {"threshold": 1.0},
              "mahalanobis": {"matrix": np.eye(2)}}
    for name in LOSS_NAMES:
        loss = get_loss(name.upper(), **params.get(name, {}))
        assert isinstance(loss, Divergence)
    assert get_loss("squared") == get_loss("l2") == SquaredL2()
    assert get_loss("l2_nonsquared") == L2Distance() and get_loss("l1") == L1()


def test_objects_are_immutable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_loss("kl").beta = 2.0
    loss = get_loss("mahalanobis", matrix=MATRIX)
    with pytest.raises(ValueError):
        loss.matrix[0, 0] = 1.0  # read-only copy
    assert hash(get_loss("huber", threshold=1.0)) == hash(Huber(threshold=1.0))


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
@pytest.mark.parametrize("case", list(CASES))
def test_numpy_and_pytorch_agree(case, rng):
    loss = make(case)
    x, y = positive_pair(rng)
    x[0, 0, 0] = 0.0
    results = {}
    for name in ("numpy", "pytorch"):
        with using(name):
            outs = [loss.per_sample(T(x), T(y)), loss.gradient(T(x), T(y))]
            if loss.separable and loss.smooth:
                outs.append(loss.curvature(T(x), T(y)))
            results[name] = [N(o) for o in outs]
    for a, b in zip(results["numpy"], results["pytorch"], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


# --------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, params, match",
    [
        (("nope",), {}, "loss must be .*'kl'"),
        ((None,), {}, "loss must be"),
        ((True,), {}, "loss must be"),
        (("beta",), {}, "beta"),
        (("beta",), {"beta": float("nan")}, "beta must be finite"),
        (("beta",), {"beta": float("inf")}, "beta must be finite"),
        (("beta",), {"beta": "1"}, "beta must be a real number"),
        ((float("inf"),), {}, "beta must be finite"),
        (("alpha",), {"alpha": float("-inf")}, "alpha must be finite"),
        (("alpha",), {}, "alpha"),
        (("huber",), {}, "threshold"),
        (("huber",), {"threshold": 0.0}, "threshold must be > 0"),
        (("huber",), {"threshold": -1.0}, "threshold must be > 0"),
        (("kl",), {"eps": 0.0}, "eps must be > 0"),
        (("is",), {"data_eps": -1e-8}, "data_eps must be > 0"),
        (("kl",), {"threshold": 1.0}, "unknown parameter.*threshold"),
        (("l2",), {"eps": 1e-12}, "unknown parameter.*eps"),
        (("mahalanobis",), {}, "matrix"),
        (("mahalanobis",), {"matrix": np.ones((2, 3))}, "matrix must be a non-empty square"),
        (("mahalanobis",), {"matrix": np.array([[1.0, 2.0], [0.0, 1.0]])}, "symmetric"),
        (("mahalanobis",), {"matrix": np.array([[1.0, 2.0], [2.0, 1.0]])}, "semi-definite"),
        (("mahalanobis",), {"matrix": np.array([[np.nan]])}, "finite"),
    ],
)
def test_bad_parameters(args, params, match):
    with pytest.raises(ValueError, match=match):
        get_loss(*args, **params)


def test_divergence_object_with_params_is_rejected():
    with pytest.raises(ValueError, match="params"):
        get_loss(get_loss("kl"), eps=1e-3)


@pytest.mark.parametrize("case", ["kl", "is", "beta=1.5", "alpha=2", "hellinger"])
def test_negative_data_is_rejected(backend, case):
    loss = make(case)
    v, y = T([[1.0, -0.5]]), T([[1.0, 1.0]])
    for method in (loss.value, loss.per_sample, loss.gradient, loss.curvature):
        with pytest.raises(ValueError, match="v must be nonnegative"):
            method(v, y)


@pytest.mark.parametrize("case", ["l2", "l1", "huber", "l2_nonsquared"])
def test_signed_data_is_fine_for_the_robust_losses(backend, case):
    loss = make(case)
    assert np.isfinite(float(loss.value(T([[-1.0, 2.0]]), T([[0.5, -3.0]]))))


def test_shape_mismatch_is_rejected(backend):
    for loss in (get_loss("kl"), get_loss("l2_nonsquared"), get_loss("mahalanobis", matrix=MATRIX)):
        with pytest.raises(ValueError, match="y must have the shape of v"):
            loss.value(T(np.ones((2, 6))), T(np.ones((2, 5))))
    with pytest.raises(ValueError, match="v has 5 entries per sample"):
        get_loss("mahalanobis", matrix=MATRIX).gradient(T(np.ones((2, 5))), T(np.ones((2, 5))))


def test_undefined_forms_raise_type_error(backend):
    with pytest.raises(TypeError, match="not separable"):
        get_loss("l2_nonsquared").elementwise(T([[1.0]]), T([[1.0]]))
    with pytest.raises(TypeError, match="curvature"):
        get_loss("l1").curvature(T([[1.0]]), T([[1.0]]))
    with pytest.raises(TypeError, match="curvature"):
        get_loss("mahalanobis", matrix=np.eye(1)).curvature(T([[1.0]]), T([[1.0]]))


def test_cached_losses_still_check_their_parameters():
    """get_loss keeps one object per name and parameters; True == 1 must not hit beta=1's."""
    assert get_loss("kl") is get_loss("kl")
    assert get_loss("beta", beta=1) is get_loss("beta", beta=1)
    with pytest.raises(ValueError, match="beta must be a real number"):
        get_loss("beta", beta=True)


@pytest.mark.parametrize("loss, degree", [("is", 0.0), ("kl", 1.0), (-1.0, -1.0), (0.5, 0.5),
                                          (1.5, 1.5), ("huber", 2.0), ("alpha", 1.0)])
@pytest.mark.parametrize("scale", [1e-9, 1e3])
def test_at_scale_is_the_same_divergence_in_other_units(loss, degree, scale):
    """``at_scale(s)`` scales the thresholds and floors with the data, so that
    ``at_scale(s).value(s v, s y) = s^k value(v, y)`` exactly, zeros (floored) included."""
    params = {"huber": {"threshold": 0.5}, "alpha": {"alpha": -0.5}}.get(loss, {})
    divergence = get_loss(loss, **params)
    rng = np.random.default_rng(1)
    v, y = rng.gamma(2.0, size=(4, 6)), rng.gamma(2.0, size=(4, 6)) + 0.1
    v[0, :2] = 0.0
    expected = scale**degree * np.asarray(divergence.per_sample(v, y))
    got = np.asarray(divergence.at_scale(scale).per_sample(scale * v, scale * y))
    np.testing.assert_allclose(got, expected, rtol=1e-9)
    assert divergence.at_scale(1.0) is divergence


@pytest.mark.parametrize("loss, params, degree", [("is", {}, 0.0),
                                                  ("huber", {"threshold": 0.5}, 2.0)])
def test_divergence_scores_scale_with_the_data(loss, params, degree):
    """The learner codes normalized data; its score is the same divergence at the raw scale
    (the IS score of data at 1e-9 was 29x off, the Huber threshold was read in raw units)."""
    from tensorstream import OnlineDivergenceNMF

    X = np.random.default_rng(0).gamma(2.0, size=(40, 8)) + 0.01
    scores = {}
    for scale in (1.0, 1e-9, 1e3):
        model = OnlineDivergenceNMF(3, loss=loss, loss_params=params, random_state=0,
                                    max_iter=1).fit(scale * X)
        scores[scale] = model.score(scale * X) / scale**degree
    np.testing.assert_allclose([scores[1e-9], scores[1e3]], scores[1.0], rtol=1e-6)


@pytest.mark.parametrize("bad", [0.0, -2.0, float("nan"), float("inf"), True, "2"])
def test_at_scale_names_a_bad_scale(bad):
    with pytest.raises(ValueError, match="scale must be a finite number > 0"):
        get_loss("huber", threshold=0.5).at_scale(bad)
