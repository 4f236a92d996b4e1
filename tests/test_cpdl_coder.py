"""OnlineCPDL's coder (``coder``): exact pivoting, or ADMM in the code space for nonnegative
codes; ``"auto"`` picks ADMM from ``batch_size >= ADMM_BATCH`` on, by the parameter (never by
the batch or shard it is given), and ``transform`` stays exact unless ADMM was asked for."""

import importlib.util

import numpy as np
import pytest

import tensorstream.algorithms.surrogate_cp as ocpdl
from tensorstream import OnlineCPDL, load
from tensorstream.algorithms.surrogate_cp import ADMM_BATCH, PIVOTING_TOL, projections
from tensorstream.coders.lasso import sparse_code
from tensorstream.core.dictionary import gram

HAS_TORCH = importlib.util.find_spec("torch") is not None


def planted(n=400, shape=(6, 5), rank=3, seed=0):
    """Nonnegative samples of a planted CP dictionary, a little noise."""
    rng = np.random.default_rng(seed)
    loadings = [rng.random((size, rank)) for size in shape]
    codes = rng.random((n, rank))
    X = np.einsum("nr,ir,jr->nij", codes, *loadings)
    return X + 0.01 * rng.random(X.shape)


def objective(G, P, H, alpha=0.0, ridge=0.0):
    """The coder's per-sample objective up to the constant ``||x||^2`` (no 1/2, as lasso's)."""
    return np.sum(H * (H @ G), axis=1) - 2 * np.sum(H * P, axis=1) + \
        alpha * np.abs(H).sum(axis=1) + ridge * np.sum(H * H, axis=1)


@pytest.fixture
def admm_calls(monkeypatch):
    """The batch sizes the ADMM coder was called on (it still runs)."""
    calls = []
    admm = ocpdl.nonnegative_code_admm

    def counting(*args, **kwargs):
        calls.append(len(args[1]))
        return admm(*args, **kwargs)

    monkeypatch.setattr(ocpdl, "nonnegative_code_admm", counting)
    return calls


@pytest.mark.parametrize("coder, batch_size, nonnegative, admm", [
    ("auto", ADMM_BATCH, True, True),
    ("auto", ADMM_BATCH - 1, True, False),
    ("auto", 4 * ADMM_BATCH, False, False),  # signed codes: only pivoting codes them
    ("pivoting", 4 * ADMM_BATCH, True, False),
    ("admm", 1, True, True),
])
def test_the_coder_rule_reads_the_parameters(coder, batch_size, nonnegative, admm):
    model = OnlineCPDL(3, coder=coder, batch_size=batch_size, nonnegative=nonnegative,
                       column_bound=1.0 if nonnegative else None)
    assert model._algorithm().uses_admm() is admm


def test_admm_with_signed_codes_is_refused_by_name():
    with pytest.raises(ValueError, match="coder='admm'.*nonnegative=False"):
        OnlineCPDL(3, coder="admm", nonnegative=False).fit(planted(40), n_steps=1)


def test_an_unknown_coder_is_refused_by_name():
    with pytest.raises(ValueError, match="coder"):
        OnlineCPDL(3, coder="hals").fit(planted(40), n_steps=1)


@pytest.mark.parametrize("alpha, ridge", [(0.0, 0.0), (0.05, 0.0), (0.0, 0.1), (0.02, 0.3)])
def test_admm_codes_are_nonnegative_and_near_the_exact_minimum(alpha, ridge, admm_calls):
    X = planted(300)
    model = OnlineCPDL(3, alpha=alpha, ridge=ridge, coder="admm", random_state=0)
    model.fit(X, n_steps=5)
    algorithm, loadings = model._algorithm(), model.loadings_
    admm_calls.clear()
    codes = algorithm.encode(X, loadings, 1.0).codes
    assert admm_calls == [len(X)]
    G, P = gram(loadings), projections(X, loadings)
    exact, _ = sparse_code(G, P, alpha=2 * alpha, ridge=ridge, tol=1e-12, max_iter=1000)
    assert codes.min() >= 0
    gap = objective(G, P, codes, 2 * alpha, ridge) - objective(G, P, exact, 2 * alpha, ridge)
    scale = np.sum(X.reshape(len(X), -1) ** 2, axis=1)
    # the exact codes are the minimum; ADMM stops at its residual tolerance 1e-2, close to it
    assert gap.min() >= -1e-9 * scale.max()
    assert np.median(gap / scale) < 1e-4


def test_admm_learns_the_planted_dictionary_as_well_as_pivoting(admm_calls):
    data = planted(2300, rank=3)
    X, held = data[:2000], data[2000:]
    errors = {}
    for coder in ("pivoting", "admm"):
        model = OnlineCPDL(3, batch_size=100, coder=coder, max_iter=5, random_state=0).fit(X)
        reconstruction = model.reconstruct(held)
        errors[coder] = np.linalg.norm(held - reconstruction) / np.linalg.norm(held)
    assert errors["pivoting"] < 0.05
    assert errors["admm"] < 1.05 * errors["pivoting"]
    assert len(admm_calls) == 101  # 20 batches a pass for 5 passes, then reconstruct's codes


def test_auto_codes_training_batches_by_admm_and_transform_exactly(admm_calls):
    X = planted(2 * ADMM_BATCH)
    calls = admm_calls
    model = OnlineCPDL(3, batch_size=ADMM_BATCH, max_iter=1, random_state=0).fit(X)
    assert calls == [ADMM_BATCH, ADMM_BATCH]
    # a smaller batch given to partial_fit (or a cluster's shard) codes as the run does
    model.partial_fit(X[:10])
    assert calls[-1] == 10
    calls.clear()
    codes = model.transform(X[:50])
    assert calls == []  # transform: the exact coder's codes
    G, P = gram(model.loadings_), projections(X[:50], model.loadings_)
    exact, _ = sparse_code(G, P, tol=PIVOTING_TOL, max_iter=model.code_max_iter)
    np.testing.assert_allclose(codes, exact, rtol=1e-10, atol=1e-12)
    model.set_params(coder="admm")
    model.transform(X[:50])
    assert calls == [50]  # asked for: transform codes by ADMM too


def test_a_dead_atom_keeps_the_statistics_bounded_under_admm(admm_calls):
    """Rank-one data and eight atoms with an l1 penalty: atoms die, and their codes stay 0
    under ADMM as under pivoting (a dead atom's least-squares start once made codes of 1e7
    and statistics of 1e14)."""
    rng = np.random.default_rng(7)
    loadings = [rng.random((6, 1)), rng.random((5, 1))]
    X = np.einsum("nr,ir,jr->nij", rng.random((2048, 1)), *loadings)
    X = np.clip(X - 0.3 * X.mean(), 0, None)
    runs = {coder: OnlineCPDL(8, alpha=0.01, coder=coder, batch_size=256, max_iter=2,
                              reinit_dead_atoms=False, random_state=7).fit(X)
            for coder in ("pivoting", "auto")}
    assert len(admm_calls) == 16
    pivoting, admm = runs["pivoting"], runs["auto"]
    dead = [(U == 0).all(axis=0) for U in pivoting.loadings_]
    assert np.logical_or(*dead).any()  # the case this test is about
    assert np.abs(admm.statistics_["A"]).max() < 2 * np.abs(pivoting.statistics_["A"]).max()
    np.testing.assert_allclose(admm.surrogate_value(), pivoting.surrogate_value(), rtol=0.05)
    assert admm.set_params(coder="admm").transform(X[:256]).max() < 10


def test_masked_batches_are_coded_exactly_with_admm(monkeypatch):
    X = planted(100)
    mask = np.random.default_rng(0).random(X.shape) > 0.2
    monkeypatch.setattr(ocpdl, "nonnegative_code_admm",
                        lambda *a, **k: pytest.fail("ADMM cannot code masked batches"))
    model = OnlineCPDL(3, coder="admm", batch_size=50, random_state=0)
    model.partial_fit(X[:50], mask=mask[:50])
    model.partial_fit(X[50:], mask=mask[50:])
    assert model.n_steps_ == 2


def test_checkpoint_keeps_the_coder_and_resumes_identically(tmp_path):
    batches = np.split(planted(1200), 4)
    straight = OnlineCPDL(3, batch_size=300, random_state=0)
    interrupted = OnlineCPDL(3, batch_size=300, random_state=0)
    for X in batches:
        straight.partial_fit(X)
    for X in batches[:2]:
        interrupted.partial_fit(X)
    resumed = load(interrupted.save(tmp_path / "run.npz"))
    assert resumed.coder == "auto" and resumed._algorithm().uses_admm()
    for X in batches[2:]:
        resumed.partial_fit(X)
    for a, b in zip(straight.loadings_, resumed.loadings_):
        np.testing.assert_array_equal(a, b)


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
def test_admm_on_torch_equals_numpy(admm_calls):
    import torch

    X = planted(400)
    numpy_model = OnlineCPDL(3, batch_size=ADMM_BATCH, max_iter=2, random_state=0).fit(X)
    torch_model = OnlineCPDL(3, batch_size=ADMM_BATCH, max_iter=2, random_state=0)
    torch_model.fit(torch.from_numpy(X))
    for a, b in zip(numpy_model.loadings_, torch_model.loadings_):
        assert isinstance(b, torch.Tensor)
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-8, atol=1e-10)
    assert len(admm_calls) == 8  # two passes of two batches (256 + 144), on each backend


def test_code_tol_is_the_tolerance_of_both_coders(monkeypatch):
    """``code_tol`` reaches both coders; None is each coder's own (pivoting 1e-5, ADMM 1e-2)."""
    seen = []
    pivoting, admm = ocpdl.sparse_code, ocpdl.nonnegative_code_admm
    monkeypatch.setattr(ocpdl, "sparse_code",
                        lambda *a, **k: seen.append(("pivoting", k["tol"])) or pivoting(*a, **k))
    monkeypatch.setattr(ocpdl, "nonnegative_code_admm", lambda *a, **k: seen.append(
        ("admm", k["residual_tol"])) or admm(*a, **k))
    X = planted(40)
    for coder in ("pivoting", "admm"):
        for tol in (None, 1e-7):
            seen.clear()
            OnlineCPDL(3, coder=coder, code_tol=tol, batch_size=20, random_state=0).fit(
                X, n_steps=1)
            default = ocpdl.PIVOTING_TOL if coder == "pivoting" else ocpdl.ADMM_TOL
            assert seen == [(coder, default if tol is None else tol)]


def test_a_tighter_code_tol_gives_more_accurate_admm_codes():
    """ADMM honours ``code_tol``: at 1e-8 its codes differ from those at the default 1e-2 and
    are nearer the exact (pivoting) codes."""
    X = planted(300)
    model = OnlineCPDL(3, alpha=0.05, coder="admm", code_max_iter=2000, random_state=0)
    model.fit(X, n_steps=3)
    codes = {tol: np.asarray(model.set_params(code_tol=tol).transform(X))
             for tol in (None, 1e-8)}
    exact = np.asarray(model.set_params(coder="pivoting", code_tol=1e-12).transform(X))
    errors = {tol: np.abs(H - exact).max() for tol, H in codes.items()}
    assert errors[1e-8] < 1e-5 < errors[None], errors
