"""Missing data in robust NMF with outliers (issue #6): masks and ``missing="nan"`` in the (h, r)
coders, the entrywise W-step solvers and :class:`RobustOnlineNMF`.

Only observed entries count: the coding step solves ``1/2 ||m * (x - W h - r)||^2 +
lam ||m * r||_1`` (``r = 0`` on missing entries), the statistics are the engine's entrywise ones,
and the W-step runs the spec's PGD/ADMM on the entrywise quadratic.
"""

import numpy as np
import pytest
import tensorly as tl

# the learner at the paper's settings (spec 000's numbers are measured at them)
from test_robust_nmf import CONSTRAINTS, RobustOnlineNMF, _feasible

from tensorstream import load
from tensorstream.coders.robust import (
    RobustPenalties,
    outlier_step,
    robust_code_admm,
    robust_code_pgd,
    robust_losses,
)
from tensorstream.core.backend import using
from tensorstream.datasets.outliers import psnr, support_scores, synthetic_outlier_data
from tensorstream.steps.surrogate import (
    dictionary_admm,
    dictionary_pgd,
    surrogate_solver_step,
    surrogate_value,
)

SOLVERS = ["pgd", "admm"]



def _masked_stream(seed=0, n_batches=10, b=5, F=20, K=3, keep=0.6):
    data = synthetic_outlier_data(n_features=F, n_components=K, n_samples=n_batches * b,
                                  random_state=seed)
    mask = np.random.default_rng(seed + 100).random(data.X.shape) < keep
    return [(data.X[s:s + b], mask[s:s + b]) for s in range(0, n_batches * b, b)]


def _ball(U):
    Up = np.maximum(U, 0.0)
    return Up / np.maximum(1.0, np.linalg.norm(Up, axis=0))


# -- the coders: masked coding is the minimiser over the observed entries ----------------------


def _coding_problem(seed=0, b=6, F=12, R=3, keep=0.6):
    rng = np.random.default_rng(seed)
    W = _ball(rng.random((F, R)))
    X = np.clip(rng.random((b, R)) @ W.T + (rng.random((b, F)) < 0.2) * rng.uniform(-1, 1, (b, F)),
                0, 1)
    mask = rng.random((b, F)) < keep
    mask[:, 0] = True  # every sample observed somewhere
    return W, X, mask


PENALTIES = [
    RobustPenalties(outlier_alpha=0.05, outlier_bound=1.0),
    RobustPenalties(outlier_alpha=0.05, outlier_bound=None, alpha=0.01, ridge=0.01, outlier_l2=0.1),
    RobustPenalties(outlier_alpha=0.05, outlier_bound=0.5, nonnegative_outliers=True,
                    group_alpha=0.02, group_size=2),
]


def _tight(solver, X, W, penalties, mask=None):
    if solver == "pgd":
        return robust_code_pgd(X, [W], penalties, tol=0, max_iter=2000, accelerated=True,
                               mask=mask)
    return robust_code_admm(X, [W], penalties, tol=0, max_iter=2000, mask=mask)


@pytest.mark.parametrize("penalties", PENALTIES)
@pytest.mark.parametrize("solver", SOLVERS)
def test_masked_coding_equals_the_problem_on_the_observed_rows(solver, penalties):
    """The brute force: every sample coded alone, with W and x restricted to its observed
    entries (the unmasked coder on the smaller problem)."""
    W, X, mask = _coding_problem()
    coded = _tight(solver, np.where(mask, X, 7.0), W, penalties, mask=mask * 1.0)
    assert np.all(coded.outliers[~mask] == 0)
    for j, (x, m) in enumerate(zip(X, mask)):
        alone = _tight(solver, x[m][None], W[m], penalties)
        np.testing.assert_allclose(coded.losses[j], alone.losses[0], rtol=1e-8)
        np.testing.assert_allclose(coded.outliers[j, m], alone.outliers[0], atol=1e-6)
    np.testing.assert_allclose(
        coded.losses, robust_losses(X, [W], coded.codes, coded.outliers, penalties,
                                    mask=mask * 1.0), rtol=1e-12)


@pytest.mark.parametrize("solver", SOLVERS)
def test_masked_coding_satisfies_the_kkt_conditions(solver):
    """Spec S3 on the observed entries: r = S~(m (x - W h)), and the masked gradient
    g = W^T (m (W h + r - x)) vanishes on the support of h and is >= 0 off it."""
    W, X, mask = _coding_problem(seed=1)
    penalties = RobustPenalties(outlier_alpha=0.05, outlier_bound=1.0)
    coded = _tight(solver, X, W, penalties, mask=mask * 1.0)
    H, R = coded.codes, coded.outliers
    residual = mask * (X - H @ W.T)
    np.testing.assert_allclose(R, outlier_step(residual, penalties), atol=1e-9)
    g = (mask * (H @ W.T + R - X)) @ W
    support = H > 1e-9
    assert np.abs(g[support]).max() <= 1e-7
    assert g[~support].min(initial=0.0) >= -1e-7


def test_masked_pgd_is_monotone_and_agrees_with_admm():
    W, X, mask = _coding_problem(seed=2, b=8)
    penalties = RobustPenalties(outlier_alpha=0.05, outlier_bound=1.0)
    previous = None
    for n_iter in range(1, 30):  # S1: the block-MM objective never goes up, with masks too
        losses = robust_code_pgd(X, [W], penalties, tol=0, max_iter=n_iter,
                                 mask=mask * 1.0).losses
        if previous is not None:
            assert np.all(losses <= previous + 1e-12 * np.abs(previous))
        previous = losses
    pgd = _tight("pgd", X, W, penalties, mask * 1.0)
    admm = _tight("admm", X, W, penalties, mask * 1.0)
    np.testing.assert_allclose(pgd.losses, admm.losses, rtol=1e-9, atol=1e-14)


def test_masked_coding_of_tensor_samples():
    rng = np.random.default_rng(3)
    loadings = [_ball(rng.random((5, 2))), _ball(rng.random((4, 2)))]
    X = rng.random((3, 5, 4))
    mask = rng.random(X.shape) < 0.7
    W = np.einsum("ir,jr->ijr", *loadings).reshape(20, 2)
    penalties = RobustPenalties(outlier_alpha=0.1)
    for solver in SOLVERS:
        options = dict(tol=0, max_iter=3000, mask=mask * 1.0)
        code = robust_code_pgd if solver == "pgd" else robust_code_admm
        tensor = code(X, loadings, penalties, **options)
        matrix = code(X.reshape(3, 20), [W], penalties, **{**options,
                                                           "mask": mask.reshape(3, 20) * 1.0})
        np.testing.assert_allclose(tensor.codes, matrix.codes, atol=1e-10)
        np.testing.assert_allclose(tensor.outliers.reshape(3, 20), matrix.outliers, atol=1e-10)


# -- the W-step on entrywise statistics --------------------------------------------------------


def _entrywise_statistics(seed=0, F=15, R=3, n=12):
    rng = np.random.default_rng(seed)
    H = rng.random((n, R))
    M = rng.random((n, F)) < 0.6
    V = rng.random((n, F)) * M
    A = np.einsum("jf,jr,js->frs", M * 1.0, H, H) / n
    B = V.T @ H / n
    return A, B, 0.5 * np.mean(np.sum(V**2, axis=1)), _ball(rng.random((F, R)))


@pytest.mark.parametrize("solver", [dictionary_pgd, dictionary_admm])
def test_entrywise_statistics_with_equal_rows_are_the_shared_statistic(solver):
    A, B, c, W0 = _entrywise_statistics()
    shared = A[0]
    together, n_shared = solver(W0, shared, B, project=_ball, constant=c)
    rowwise, n_rows = solver(W0, np.broadcast_to(shared, A.shape).copy(), B, project=_ball,
                             constant=c)
    assert n_shared == n_rows
    np.testing.assert_allclose(rowwise, together, rtol=1e-12, atol=1e-14)


def _half_surrogate(W, A, B, c):
    return 0.5 * np.einsum("fr,frs,fs->", W, A, W) - np.sum(W * B) + c


def test_entrywise_pgd_is_monotone_and_agrees_with_admm():
    A, B, c, W0 = _entrywise_statistics(seed=1)
    W, previous = W0, _half_surrogate(W0, A, B, c)
    for _ in range(20):  # step kappa / max_i ||A_i||_F <= 1 / Lipschitz: monotone (S4)
        W, _ = dictionary_pgd(W, A, B, project=_ball, constant=c, tol=0, max_iter=1)
        current = _half_surrogate(W, A, B, c)
        assert current <= previous + 1e-14
        previous = current
    pgd, _ = dictionary_pgd(W0, A, B, project=_ball, constant=c, tol=0, max_iter=20000)
    admm, _ = dictionary_admm(W0, A, B, project=_ball, constant=c, tol=0, max_iter=20000)
    np.testing.assert_allclose(_half_surrogate(pgd, A, B, c), _half_surrogate(admm, A, B, c),
                               rtol=1e-9)
    np.testing.assert_allclose(pgd, admm, atol=1e-5)
    step = 0.7 / np.sqrt(np.max(np.sum(A**2, axis=(1, 2))))
    gradient = np.einsum("fr,frs->fs", pgd, A) - B
    assert np.linalg.norm(pgd - _ball(pgd - step * gradient)) <= 1e-8  # fixed point


def test_surrogate_solver_step_on_entrywise_tensor_statistics():
    """CP loadings, entrywise A (I_1, I_2, R, R): every block is solved on its own rows."""
    rng = np.random.default_rng(4)
    shape, R, n = (5, 4), 2, 10
    H = rng.random((n, R))
    M = (rng.random((n, *shape)) < 0.6) * 1.0
    V = rng.random((n, *shape)) * M
    A = np.einsum("jab,jr,js->abrs", M, H, H) / n
    B = np.einsum("jab,jr->abr", V, H) / n
    c = np.mean(np.sum(V**2, axis=(1, 2)))
    loadings = [_ball(rng.random((size, R))) for size in shape]
    before = surrogate_value(A, B, c, loadings)
    new, _ = surrogate_solver_step(loadings, A, B, c, solver="pgd", project=_ball, tol=0,
                                   max_iter=50)
    assert surrogate_value(A, B, c, new) <= before + 1e-12
    assert all(_ball(U) == pytest.approx(U) for U in new)


# -- the learner ---------------------------------------------------------------------------------


@pytest.mark.parametrize("solver", SOLVERS)
def test_masked_entries_never_influence_the_result(backend, solver):
    """Missing entries set to 1e6, or to NaN with missing="nan": the same loadings, codes and
    outliers; and the backend agrees with numpy."""
    stream = _masked_stream()
    rng = np.random.default_rng(9)
    plain = RobustOnlineNMF(3, solver=solver, random_state=0)
    huge = RobustOnlineNMF(3, solver=solver, random_state=0)
    nan = RobustOnlineNMF(3, solver=solver, random_state=0, missing="nan")
    for X, M in stream:
        plain.partial_fit(tl.tensor(X), mask=M)
        huge.partial_fit(tl.tensor(np.where(M, X, 1e6 * rng.random(X.shape))), mask=M)
        nan.partial_fit(tl.tensor(np.where(M, X, np.nan)))
        decompositions = [tl.to_numpy(part) for model in (plain, huge, nan)
                          for part in model.last_decomposition_]
        for other in (decompositions[2:4], decompositions[4:6]):
            for a, b in zip(decompositions[:2], other):
                np.testing.assert_allclose(b, a, rtol=0, atol=1e-10)
        assert np.all(decompositions[1][~M] == 0)  # outliers are 0 on missing entries
    for other in (huge, nan):
        np.testing.assert_allclose(tl.to_numpy(other.loadings_[0]),
                                   tl.to_numpy(plain.loadings_[0]), rtol=0, atol=1e-10)
    X, M = stream[0]
    codes = tl.to_numpy(plain.transform(tl.tensor(X), mask=M))
    np.testing.assert_allclose(tl.to_numpy(huge.transform(tl.tensor(np.where(M, X, 1e6)),
                                                          mask=M)), codes, atol=1e-10)
    np.testing.assert_allclose(tl.to_numpy(nan.decompose(tl.tensor(np.where(M, X, np.nan)))[0]),
                               codes, atol=1e-10)
    assert plain.score(tl.tensor(X), mask=M) == pytest.approx(
        nan.score(tl.tensor(np.where(M, X, np.nan))), rel=1e-12)
    with using("numpy"):
        reference = RobustOnlineNMF(3, solver=solver, random_state=0)
        for X, M in stream:
            reference.partial_fit(X, mask=M)
    np.testing.assert_allclose(tl.to_numpy(plain.loadings_[0]), reference.loadings_[0],
                               atol=1e-8)


@pytest.mark.parametrize("solver", SOLVERS)
def test_all_observed_mask_reproduces_the_unmasked_run(solver):
    stream = _masked_stream(seed=1, n_batches=15)
    plain = RobustOnlineNMF(3, solver=solver, random_state=0)
    masked = RobustOnlineNMF(3, solver=solver, random_state=0)
    for X, _ in stream:
        plain.partial_fit(X)
        masked.partial_fit(X, mask=np.ones(X.shape, dtype=bool))
        for a, b in zip(plain.last_decomposition_, masked.last_decomposition_):
            np.testing.assert_allclose(b, a, rtol=1e-8, atol=1e-10)
    assert masked.statistics_["A"].shape == (20, 3, 3)
    np.testing.assert_allclose(masked.loadings_[0], plain.loadings_[0], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(masked.surrogate_value(), plain.surrogate_value(), rtol=1e-10)


@pytest.mark.parametrize("params", CONSTRAINTS)
@pytest.mark.parametrize("solver", SOLVERS)
def test_constraints_and_surrogate_recursion_hold_with_masks(params, solver):
    stream = _masked_stream(seed=6, n_batches=15, F=30, K=4, keep=0.5)
    model = RobustOnlineNMF(4, solver=solver, random_state=0, **params)
    X, M = stream[0]
    model.partial_fit(X, mask=M)
    previous = model.surrogate_value()
    for X, M in stream[1:]:
        old = model.loadings_[0].copy()
        model.partial_fit(X, mask=M)
        W, info, stats = model.loadings_[0], model._last_info, model.statistics_
        assert _feasible(W, params)
        penalty = params.get("dict_l1", 0) * old.sum() + 0.5 * params.get("dict_l2", 0) * \
            np.sum(old**2)
        at_old = 0.5 * surrogate_value(stats["A"], stats["B"], stats["c"], [old]) + penalty
        # the masked batch loss is exactly what the entrywise statistics add at the old W
        np.testing.assert_allclose(at_old - penalty, (1 - info["weight"]) * (previous - penalty)
                                   + info["weight"] * info["batch_loss"], rtol=1e-10)
        if solver == "pgd":
            assert model.surrogate_value() <= at_old + 1e-12 * abs(at_old)
        previous = model.surrogate_value()


def test_tensor_samples_with_missing_entries():
    rng = np.random.default_rng(11)
    factors = [rng.random((6, 2)), rng.random((5, 2))]
    X = np.clip(np.einsum("sr,ir,jr->sij", rng.random((40, 2)), *factors) / 2, 0, 1)
    mask = rng.random(X.shape) < 0.6
    first = RobustOnlineNMF(2, batch_size=8, random_state=0).fit(X, mask=mask)
    second = RobustOnlineNMF(2, batch_size=8, random_state=0).fit(np.where(mask, X, 1e6),
                                                                  mask=mask)
    assert first.statistics_["A"].shape == (6, 5, 2, 2)
    for a, b in zip(first.loadings_, second.loadings_):
        np.testing.assert_array_equal(a, b)
        assert a.min() >= 0 and np.linalg.norm(a, axis=0).max() <= 1 + 1e-12
    assert np.all(first.outliers(X, mask=mask)[~mask] == 0)


@pytest.mark.parametrize("solver, measured", [("admm", 26.7), ("pgd", 26.8)])
def test_half_missing_recovers_the_planted_model_nearly_as_well(solver, measured):
    """The spec's synthetic recipe (F = 100, K = 10, N = 1500, (0.7, 0.1) outliers), half of the
    entries missing at random. Both dictionaries code the samples from the observed half; the
    PSNR is against the clean data on all entries. Measured: full data 27.1 dB (admm) / 26.9 dB
    (pgd), half missing 26.7 / 26.8 dB (gaps 0.3 / 0.1 dB); reading the missing entries as
    zeros instead of masking them gives 15.6 / 14.5 dB."""
    data = synthetic_outlier_data(n_features=100, n_components=10, n_samples=1500,
                                  random_state=1)
    mask = np.random.default_rng(0).random(data.X.shape) < 0.5
    scores = {}
    for name, given in (("full", None), ("half", mask)):
        model = RobustOnlineNMF(10, solver=solver, random_state=2)
        for start in range(0, 1500, 5):
            rows = slice(start, start + 5)
            model.partial_fit(data.X[rows], **({} if given is None else {"mask": given[rows]}))
        model.set_params(code_tol=1e-6, code_max_iter=1000)
        H, R = model.decompose(data.X, mask=mask)
        scores[name] = psnr(data.X_clean, H @ model.components_)
    assert scores["half"] >= scores["full"] - 1.0
    assert scores["half"] >= measured - 1.0
    # outliers are found on the observed entries (measured F1 0.84 for both solvers)
    assert support_scores(data.outliers * mask, R, threshold=0.05)["f1"] >= 0.75


def test_fit_with_mask_stream_of_pairs_and_checkpoints(tmp_path):
    stream = _masked_stream(seed=3, n_batches=12)
    X, M = np.concatenate([x for x, _ in stream]), np.concatenate([m for _, m in stream])
    array = RobustOnlineNMF(3, batch_size=5, max_iter=1, random_state=0).fit(X, mask=M)
    streamed = RobustOnlineNMF(3, random_state=0).fit(iter(stream))
    assert array.n_steps_ == streamed.n_steps_ == 12
    assert streamed.statistics_["A"].shape == (20, 3, 3)
    first = RobustOnlineNMF(3, random_state=0, missing="nan")
    for x, m in stream[:6]:
        first.partial_fit(x, mask=m)
    resumed = load(first.save(tmp_path / "masked_robust.npz"))
    assert resumed.missing == "nan"
    for x, m in stream[6:]:
        resumed.partial_fit(np.where(m, x, np.nan))
    np.testing.assert_array_equal(resumed.loadings_[0], streamed.loadings_[0])


def _snapshot(model):
    stats = model.statistics_
    return (model.loadings_[0].copy(), np.array(stats["A"]), stats["B"].copy(), stats["c"],
            model.n_steps_)


@pytest.mark.parametrize("mask, error, message", [
    (np.ones((5, 20)), TypeError, "boolean"),
    (np.ones((5, 21), dtype=bool), ValueError, "shape of X"),
    (np.zeros((5, 20), dtype=bool), ValueError, "no observed entry"),
    (np.arange(5)[:, None] * np.ones(20) != 2, ValueError, r"sample\(s\) \[2\] of X"),
])
def test_bad_masks_are_refused_and_state_kept(mask, error, message):
    stream = _masked_stream(seed=4)
    X0, M0 = stream[0]
    model = RobustOnlineNMF(3, random_state=0).partial_fit(X0, mask=M0)
    before = _snapshot(model)
    with pytest.raises(error, match=message):
        model.partial_fit(stream[1][0], mask=mask)
    with pytest.raises(error, match=message):
        model.decompose(stream[1][0], mask=mask)
    after = _snapshot(model)
    for a, b in zip(before[:3], after[:3]):
        np.testing.assert_array_equal(a, b)
    assert before[3:] == after[3:]


def test_nan_needs_missing_and_missing_is_checked():
    X = np.full((3, 6), 0.5)
    X[0, 1] = np.nan
    with pytest.raises(ValueError, match="missing='nan'"):
        RobustOnlineNMF(2).partial_fit(X)
    model = RobustOnlineNMF(2, missing="zero")
    with pytest.raises(ValueError, match="missing must be"):
        model.partial_fit(np.full((3, 6), 0.5))
    assert not hasattr(model, "loadings_")
    with pytest.raises(ValueError, match="no observed entry"):
        RobustOnlineNMF(2, missing="nan").partial_fit(np.full((2, 6), np.nan))
