"""OnlineCPDL: spec 004 invariants B1-B5, B7, B8 and reductions C1, C2, C5."""

import copy
import math
import pickle
import re

import numpy as np
import pytest
import tensorly as tl
from state_helpers import state_of

from tensorstream import OnlineCPDL, load
from tensorstream.coders.lasso import sparse_code
from tensorstream.datasets import low_rank_tensor, nonnegative_tensor_stream
from tensorstream.metrics import reconstruction_error
from tensorstream.schedules import Forgetting
from tensorstream.steps.surrogate import surrogate_value

SCHEDULES = [
    dict(),
    dict(weights=0.75, search_radius=0.1),
    dict(weights=0.8, search_radius=0.1, radius_mode="column"),
    dict(weights=Forgetting(0.2), alpha=0.25),
]


def _numpy(loadings):
    return [tl.to_numpy(U).copy() for U in loadings]


def _run_with_checks(model, batches):
    """Feed batches, checking B1-B3 and B5 at every step."""
    previous_surrogate = None
    for X in batches:
        old = _numpy(model.loadings_) if hasattr(model, "loadings_") else None
        model.partial_fit(X)
        info, stats = model._last_info, model.statistics_
        new = _numpy(model.loadings_)
        # B1 feasibility
        assert all(U.min() >= 0 for U in new)
        if model.column_bound is not None:
            assert all(np.linalg.norm(U, axis=0).max() <= model.column_bound + 1e-12 for U in new)
        if old is None:
            previous_surrogate = model.surrogate_value()
            continue
        # B2 radius
        if info["radius"] is not None:
            for U_old, U_new in zip(old, new):
                step = U_new - U_old
                lengths = (np.linalg.norm(step) if model.radius_mode == "frobenius"
                           else np.linalg.norm(step, axis=0))
                assert np.all(lengths <= info["radius"] * (1 + 1e-9))
        at_old = surrogate_value(stats["A"], stats["B"], stats["c"], old)
        at_new = model.surrogate_value()
        # B3 forward monotonicity
        assert at_old >= at_new - 1e-10 * abs(at_old)
        # B5 surrogate recursion at the old point
        w = info["weight"]
        expected = (1 - w) * previous_surrogate + w * info["batch_loss"]
        np.testing.assert_allclose(at_old, expected, rtol=1e-10)
        previous_surrogate = at_new


@pytest.mark.parametrize("params", SCHEDULES)
def test_steps_are_feasible_radius_bounded_monotone_and_recursive(params):
    # spec item(s): spec 004 B1 B2 B3 B5
    batches = nonnegative_tensor_stream(60, 5)
    model = OnlineCPDL(4, random_state=0, **params)
    _run_with_checks(model, batches)
    assert model.n_steps_ == 60 and model.n_samples_seen_ == 300


def test_radius_binds_with_small_constant():
    """c' = 0.1 must actually restrict the steps, or B2 above tests nothing."""
    batches = nonnegative_tensor_stream(5, 5)
    free = OnlineCPDL(4, random_state=0).partial_fit(batches[0])
    held = OnlineCPDL(4, random_state=0, search_radius=0.1).partial_fit(batches[0])
    before = OnlineCPDL(4, random_state=0)._initial_state(batches[0])["state_"].loadings
    moved = [np.linalg.norm(a - b) for a, b in zip(free.loadings_, before)]
    assert max(moved) > 0.1
    assert max(np.linalg.norm(a - b) for a, b in zip(held.loadings_, before)) <= 0.1 + 1e-12


def test_surrogate_majorises_the_empirical_objective():
    # spec item(s): spec 004 B4
    batches = nonnegative_tensor_stream(30, 5)
    model = OnlineCPDL(4, random_state=1, alpha=0.1, code_tol=1e-12, code_max_iter=5000)
    for T, X in enumerate(batches, 1):
        model.partial_fit(X)
        if T % 10:
            continue
        # f_t(D_t) = sum_s w_s^t l(X_s, D_t), every past batch re-coded at the current dictionary
        w = [1.0 / t for t in range(1, T + 1)]
        effective = [w[k] * np.prod([1 - w[i] for i in range(k + 1, T)]) for k in range(T)]
        f_t = sum(e * -model.score(Xs) for e, Xs in zip(effective, batches[:T]))
        assert model.surrogate_value() >= f_t - 1e-8 * f_t


def test_memory_is_bounded():
    # spec item(s): spec 004 B7
    def state_bytes(model):
        return sum(tl.to_numpy(a).nbytes for a in [*model.loadings_, model.statistics_["A"],
                                                   model.statistics_["B"]])
    model = OnlineCPDL(4, random_state=0)
    batches = nonnegative_tensor_stream(200, 5)
    for X in batches[:10]:
        model.partial_fit(X)
    early_bytes, early_pickle = state_bytes(model), len(pickle.dumps(model))
    for X in batches[10:]:
        model.partial_fit(X)
    assert state_bytes(model) == early_bytes
    assert abs(len(pickle.dumps(model)) - early_pickle) < 64  # only counters grow (int widths)


def test_fit_is_deterministic_given_random_state(backend):
    # spec item(s): spec 004 B8
    X = np.random.default_rng(3).random((50, 6, 5, 4))
    first = OnlineCPDL(3, batch_size=8, max_iter=2, random_state=7).fit(tl.tensor(X))
    second = OnlineCPDL(3, batch_size=8, max_iter=2, random_state=7).fit(tl.tensor(X))
    for a, b in zip(first.loadings_, second.loadings_):
        np.testing.assert_array_equal(tl.to_numpy(a), tl.to_numpy(b))


@pytest.mark.parametrize("params", [dict(), dict(weights=0.75, search_radius=1.0)])
def test_checkpoint_resume_equals_uninterrupted_run(backend, tmp_path, params):
    # spec item(s): spec 004 B8
    batches = [tl.tensor(X) for X in nonnegative_tensor_stream(20, 5)]
    straight = OnlineCPDL(4, random_state=0, **params)
    for X in batches:
        straight.partial_fit(X)
    interrupted = OnlineCPDL(4, random_state=0, **params)
    for X in batches[:9]:
        interrupted.partial_fit(X)
    path = interrupted.save(tmp_path / "run.npz")
    del interrupted
    resumed = load(path)
    assert resumed.n_steps_ == 9 and resumed.backend_ == backend
    for X in batches[9:]:
        resumed.partial_fit(X)
    for a, b in zip(straight.loadings_, resumed.loadings_):
        np.testing.assert_array_equal(tl.to_numpy(a), tl.to_numpy(b))
    assert straight.statistics_["c"] == resumed.statistics_["c"]


def test_fit_resumed_from_checkpoint_keeps_its_random_stream(tmp_path):
    """The generator state is saved: epochs drawn after a resume are the uninterrupted ones."""
    X = np.random.default_rng(0).random((40, 5, 4))
    model = OnlineCPDL(2, random_state=0).partial_fit(X[:5])
    clone = load(model.save(tmp_path / "m.npz"))
    assert model._rng.random() == clone._rng.random()


def test_pickle_round_trip_continues_identically():
    batches = nonnegative_tensor_stream(10, 5)
    model = OnlineCPDL(3, random_state=0)
    for X in batches[:5]:
        model.partial_fit(X)
    twin = pickle.loads(pickle.dumps(model))
    for X in batches[5:]:
        model.partial_fit(X)
        twin.partial_fit(X)
    for a, b in zip(model.loadings_, twin.loadings_):
        np.testing.assert_array_equal(a, b)


def test_one_mode_is_online_nmf():
    """With one data mode, OCPDL is Mairal-style online NMF, iterate by iterate."""
    # spec item(s): spec 004 C1
    rng = np.random.default_rng(0)
    batches = [rng.random((8, 12)) for _ in range(15)]
    model = OnlineCPDL(3, weights="balanced", random_state=0)
    W = None
    A, B = np.zeros((3, 3)), np.zeros((12, 3))
    for t, X in enumerate(batches, 1):
        model.partial_fit(X)
        if W is None:
            W = OnlineCPDL(3, random_state=0)._initial_state(X)["state_"].loadings[0]
        H, _ = sparse_code(W.T @ W, X @ W, max_iter=300, tol=1e-5)
        A = (1 - 1 / t) * A + H.T @ H / (t * len(X))
        B = (1 - 1 / t) * B + X.T @ H / (t * len(X))
        W = W.copy()
        for r in range(3):
            column = np.maximum(W[:, r] - (W @ A[:, r] - B[:, r]) / A[r, r], 0)
            W[:, r] = column / max(1.0, np.linalg.norm(column))
        np.testing.assert_allclose(model.loadings_[0], W, rtol=1e-10, atol=1e-13)


def test_full_tensor_batches_with_unit_weights_is_als():
    # spec item(s): spec 004 C2
    X, _ = low_rank_tensor()
    model = OnlineCPDL(5, weights=lambda t: 1.0, random_state=0)
    for _ in range(30):
        model.partial_fit(X)
    assert reconstruction_error(model, X) <= 0.05


def test_backends_give_the_same_loadings(backend):
    # spec item(s): spec 004 C5
    batches = nonnegative_tensor_stream(20, 5)
    reference = OnlineCPDL(4, random_state=0, weights=0.75, search_radius=1.0)
    other = OnlineCPDL(4, random_state=0, weights=0.75, search_radius=1.0)
    for X in batches:
        reference.partial_fit(X)
        other.partial_fit(tl.tensor(X))
    assert other.backend_ == backend
    for a, b in zip(reference.loadings_, other.loadings_):
        np.testing.assert_allclose(tl.to_numpy(b), a, rtol=1e-8, atol=1e-12)


def test_float32_state_stays_float32(backend):
    X = tl.tensor(np.random.default_rng(0).random((10, 4, 3)), dtype=tl.float32)
    model = OnlineCPDL(2, random_state=0).partial_fit(X)
    assert all(U.dtype == X.dtype for U in model.loadings_)
    assert model.transform(X).dtype == X.dtype


def test_transform_inverse_transform_and_cp_tensor(backend):
    X, _ = low_rank_tensor(shape=(8, 7, 30), rank=2)
    model = OnlineCPDL(2, batch_size=10, max_iter=30, random_state=0).fit(tl.tensor(X))
    codes = model.transform(tl.tensor(X))
    assert tuple(codes.shape) == (30, 2)
    approx = model.inverse_transform(codes)
    assert reconstruction_error(model, tl.tensor(X)) < 0.1
    np.testing.assert_allclose(tl.to_numpy(tl.cp_to_tensor(model.to_cp_tensor(tl.tensor(X)))),
                               tl.to_numpy(approx), rtol=1e-10)
    assert model.score(tl.tensor(X)) <= 0
    weights = np.r_[np.ones(15), np.zeros(15)]
    assert np.isclose(model.score(tl.tensor(X), sample_weight=weights),
                      model.score(tl.tensor(X[:15])))


def test_signed_dictionary_learning_with_unbounded_columns():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 5, 6))
    model = OnlineCPDL(3, nonnegative=False, column_bound=None, max_iter=3, batch_size=10,
                       random_state=0).fit(X)
    assert model.score(X) > -np.mean(np.sum(X.reshape(40, -1) ** 2, axis=1))


def test_callback_can_stop_fit_and_sees_step_info():
    seen = []

    def callback(model, info):
        seen.append(info)
        return info["step"] == 3

    X = np.random.default_rng(0).random((100, 4, 3))
    model = OnlineCPDL(2, batch_size=10, random_state=0, callback=callback).fit(X)
    assert model.n_steps_ == 3 and [i["step"] for i in seen] == [1, 2, 3]
    assert {"weight", "radius", "batch_loss"} <= set(seen[0])


def test_fit_consumes_a_stream_and_n_steps_limits_it():
    batches = nonnegative_tensor_stream(10, 4, (5, 3))
    model = OnlineCPDL(2, random_state=0).fit(iter(batches), n_steps=4)
    assert model.n_steps_ == 4
    model.fit(batches)
    assert model.n_steps_ == 10  # fit starts from scratch


def test_estimator_contract_with_scikit_learn_clone():
    from sklearn.base import clone

    model = OnlineCPDL(3, alpha=0.05, weights=0.8, random_state=0)
    twin = clone(model)
    assert twin.get_params() == model.get_params()
    assert "alpha=0.05" in repr(model)
    with pytest.raises(ValueError, match="invalid parameter"):
        model.set_params(bogus=1)
    assert copy.deepcopy(model).get_params()["weights"] == 0.8


def test_verbose_fit_shows_a_progress_bar_and_fit_transform_codes(capsys):
    X = np.random.default_rng(0).random((40, 4, 3))
    codes = OnlineCPDL(2, batch_size=10, max_iter=2, verbose=True, random_state=0).fit_transform(X)
    assert codes.shape == (40, 2)
    err = capsys.readouterr().err
    assert "8/8" in err and "loss=" in err


def test_default_weights_learn_a_planted_tensor_in_one_pass():
    """The default schedule (t^-0.5, chosen by measurement: docs/ocpdl.md) gets close to the
    noise floor in one pass, where the paper's 1/t is still more than twice as far."""
    rng = np.random.default_rng(0)
    factors = [rng.random((1500, 3)), rng.random((12, 3)), rng.random((12, 3))]
    clean = np.einsum("sr,ir,jr->sij", *factors)
    X = np.clip(clean + 0.02 * np.sqrt(np.mean(clean**2)) * rng.standard_normal(clean.shape),
                0, None)
    floor = np.linalg.norm(X - clean) / np.linalg.norm(X)

    def error(**params):
        model = OnlineCPDL(3, max_iter=1, random_state=0, **params).fit(X)
        return np.linalg.norm(X - model.reconstruct(X)) / np.linalg.norm(X)

    default, balanced = error(), error(weights="balanced")
    assert default <= 1.5 * floor
    assert default <= 0.6 * balanced


# -- alpha in the 1/2 convention of every learner (issue #13) ------------------------------------

# OnlineCPDL(2, alpha=0.6, ridge=0.01, batch_size=10, max_iter=2, random_state=0) fitted on
# default_rng(3).random((30, 4, 3)) before alpha moved to the 1/2 convention (alpha = 2 * 0.3)
_OLD_ALPHA_06_LOADINGS = [
    [[0.5406546594486692, 0.46426967606506775], [0.41257523093475407, 0.6167486669898921],
     [0.5600306884230015, 0.32447574117451944], [0.4731171589152489, 0.5466170899650636]],
    [[0.6288520879069611, 0.6978461941421491], [0.5933818957578175, 0.344023107526599],
     [0.5024370381668872, 0.6282187443948644]]]
_OLD_ALPHA_06_CODES = [[0.3911116009900532, 0.6469679841015178],
                       [0.2248535474254486, 1.3798264997936318],
                       [0.022888206160367408, 1.6360511099244488]]
_OLD_ALPHA_06_C, _OLD_ALPHA_06_SCORE = 4.873169058628433, -1.7327312430457975


@pytest.mark.parametrize("alpha, same", [(0.3, True), (0.6, False)])
def test_alpha_is_half_of_the_papers_lambda(backend, alpha, same):
    """alpha=a now is the paper-convention alpha=2a of before, to 1e-12 (and a is not)."""
    X = np.random.default_rng(3).random((30, 4, 3))
    model = OnlineCPDL(2, alpha=alpha, ridge=0.01, batch_size=10, max_iter=2, random_state=0,
                       backend=backend).fit(X)
    got = [*map(tl.to_numpy, model.loadings_), tl.to_numpy(model.transform(X[:3]))]
    expected = [*map(np.array, _OLD_ALPHA_06_LOADINGS), np.array(_OLD_ALPHA_06_CODES)]
    close = all(np.allclose(g, e, rtol=1e-12, atol=1e-12) for g, e in zip(got, expected))
    close = close and np.isclose(model.statistics_["c"], _OLD_ALPHA_06_C, rtol=1e-12)
    close = close and np.isclose(model.score(X), _OLD_ALPHA_06_SCORE, rtol=1e-12)
    assert close == same


def test_alpha_means_what_it_means_in_scikit_learn():
    """The codes minimise 1/2 ||x - W h||^2 + alpha ||h||_1 (h >= 0), scikit-learn's lasso."""
    from sklearn.decomposition import sparse_encode

    X = np.random.default_rng(4).random((12, 5, 4))
    model = OnlineCPDL(3, alpha=0.4, batch_size=6, max_iter=1, random_state=0,
                       code_tol=1e-12).fit(X)
    atoms = np.stack([np.outer(U_r, V_r).ravel()
                      for U_r, V_r in zip(*(U.T for U in model.loadings_))])
    expected = sparse_encode(X.reshape(len(X), -1), atoms, algorithm="lasso_cd", alpha=0.4,
                             positive=True, max_iter=100000)
    assert np.abs(expected).sum() > 0 and (expected == 0).any()  # the l1 term is active
    np.testing.assert_allclose(model.transform(X), expected, atol=1e-6)


@pytest.mark.parametrize("radius, message", [
    (lambda t: -1.0, "rho_2 = -1.0"), (lambda t: float("nan"), "rho_2 = nan"),
    (lambda t: 0.0, "rho_2 = 0.0"),
])
def test_a_radius_schedule_returning_a_non_positive_radius_is_named_and_nothing_learned(
        radius, message):
    """A callable search_radius is checked at every step, as the weights are: a negative
    radius would move the loadings out of their constraint set (entries below 0, columns
    longer than the bound), a zero one divided 0 by 0."""
    X = np.random.default_rng(0).random((20, 5, 4, 3))
    model = OnlineCPDL(3, random_state=0).partial_fit(X[:10])
    before = [U.copy() for U in model.loadings_]
    model.search_radius = radius
    with pytest.raises(ValueError, match=re.escape(message)):
        model.partial_fit(X[10:])
    for U, V in zip(model.loadings_, before):
        np.testing.assert_array_equal(U, V)


def test_an_infinite_radius_is_no_restriction():
    X = np.random.default_rng(0).random((20, 5, 4, 3))
    free = OnlineCPDL(3, random_state=0).fit(X)
    for radius in (lambda t: math.inf, lambda t: 1e300 * 1e300):
        model = OnlineCPDL(3, search_radius=radius, random_state=0).fit(X)
        for U, V in zip(model.loadings_, free.loadings_):
            np.testing.assert_array_equal(U, V)


def test_the_first_weight_is_one_whatever_the_schedule():
    """w_1 = 1 (docs/ocpdl.md, spec 004 pitfall 4): a constant schedule such as lambda t: 0.1
    gives the first batch's averages as statistics, as schedules.Forgetting does."""
    X = np.random.default_rng(0).random((20, 5, 4, 3))
    by_callable = OnlineCPDL(3, weights=lambda t: 0.1, random_state=0).partial_fit(X)
    by_forgetting = OnlineCPDL(3, weights=Forgetting(0.1),
                               random_state=0).partial_fit(X)
    H = by_callable._last_codes[0]
    np.testing.assert_allclose(by_callable.statistics_["A"], H.T @ H / len(X), rtol=1e-12)
    assert by_callable.statistics_["c"] == pytest.approx((X ** 2).sum(axis=(1, 2, 3)).mean())
    np.testing.assert_array_equal(by_callable.statistics_["B"], by_forgetting.statistics_["B"])


@pytest.mark.parametrize("delta", [float("nan"), float("inf")])
def test_powerlog_refuses_a_delta_that_gives_no_weight(delta):
    from tensorstream.schedules import PowerLog

    with pytest.raises(ValueError, match="delta must be a finite number"):
        PowerLog(0.75, delta)


@pytest.mark.parametrize("learner, shape", [("OnlineCPDL", (40, 4, 3)), ("OnlineNMF", (40, 6))])
def test_radius_mode_without_a_search_radius_is_refused_by_name(learner, shape):
    """``radius_mode`` measures the search radius: without one (``search_radius=None``) a
    value other than the default means nothing and is refused naming both, before learning
    (a fitted state is left untouched); with a radius each mode moves the result."""
    import tensorstream

    cls = getattr(tensorstream, learner)
    X = np.random.default_rng(0).random(shape)
    with pytest.raises(ValueError, match="radius_mode.*search_radius=None"):
        cls(2, radius_mode="column").fit(X)
    model = cls(2, batch_size=10, max_iter=1, random_state=0).fit(X)
    before = state_of(model.set_params(radius_mode="column"))
    with pytest.raises(ValueError, match="radius_mode"):
        model.partial_fit(X[:10])
    assert state_of(model) == before
    runs = {mode: cls(2, batch_size=10, max_iter=1, search_radius=0.05, radius_mode=mode,
                      random_state=0).fit(X).loadings_[0] for mode in ("frobenius", "column")}
    assert np.abs(np.asarray(runs["frobenius"]) - np.asarray(runs["column"])).max() > 1e-8
