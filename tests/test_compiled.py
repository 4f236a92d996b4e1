"""The compiled kernels (core/compiled.py): numba's column sweep (steps/compiled.py) equals the
``tl.*`` sweep (to rounding) in every case the sweep has, and the lasso coder's compiled pivoting
(coders/lasso.py) the batched ``tl.*`` rounds; and where each runs. Skipped without numba
(``pip install -e ".[fast]"``; the test extra brings it through ``sparse``, so the README's
suite runs this file, and ``.ci/run`` then runs the learners' tests again with
``TENSORSTREAM_JIT=0``)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tensorstream import OnlineCPDL, OnlineNMF
from tensorstream.core import compiled as core_compiled
from tensorstream.steps import compiled
from tensorstream.steps.surrogate import column_descent, surrogate_bcd_step

pytest.importorskip("numba")


def _problem(rows, R, seed, dead=()):
    """A loading and block statistics ``(A_i, B_i)`` of a surrogate: ``A_i`` PSD with the
    ``dead`` atoms unused (zero rows and columns)."""
    rng = np.random.default_rng(seed)
    H = rng.random((3 * R, R))
    H[:, list(dead)] = 0.0
    A = H.T @ H / (3 * R)
    B = rng.standard_normal((rows, R)) @ A + 0.1 * rng.standard_normal((rows, R))
    return rng.random((rows, R)), A, B


def _both(monkeypatch, *args, **options):
    """``column_descent`` through the kernel, then through the ``tl.*`` sweep."""
    monkeypatch.setenv(compiled.SWITCH, "1")
    fast = column_descent(*args, **options)
    monkeypatch.setenv(compiled.SWITCH, "0")
    plain = column_descent(*args, **options)
    return fast, plain


OPTIONS = [dict(nonnegative=True, column_bound=None),
           dict(nonnegative=True, column_bound=1.0),
           dict(nonnegative=False, column_bound=0.5),
           dict(nonnegative=False, column_bound=None, l2=0.1),
           dict(nonnegative=True, column_bound=1.0, l1=0.05, l2=0.01),
           dict(nonnegative=False, column_bound=None, l1=0.2),
           dict(nonnegative=True, column_bound=None, n_passes=3)]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in
                                                                    o.items()))
@pytest.mark.parametrize("shape", [(64, 16), (7, 3), (1, 1), (200, 24)])
def test_the_kernel_is_the_tl_sweep(monkeypatch, options, shape):
    U, A, B = _problem(*shape, seed=shape[0] + shape[1])
    fast, plain = _both(monkeypatch, U, A, B, **options)
    np.testing.assert_allclose(fast, plain, rtol=1e-12, atol=1e-13)
    np.testing.assert_array_equal(U, _problem(*shape, seed=shape[0] + shape[1])[0])  # U kept


def test_dead_atoms_are_left_alone_as_by_the_tl_sweep(monkeypatch):
    U, A, B = _problem(30, 6, seed=3, dead=(1, 4))
    fast, plain = _both(monkeypatch, U, A, B, nonnegative=True, column_bound=None)
    np.testing.assert_array_equal(fast[:, [1, 4]], U[:, [1, 4]])
    np.testing.assert_allclose(fast, plain, rtol=1e-12, atol=1e-13)


@given(st.integers(1, 40), st.integers(1, 8), st.integers(0, 10**6), st.booleans(),
       st.sampled_from([None, 0.3, 2.0]), st.sampled_from([0.0, 0.01, 0.5]))
def test_the_kernel_is_the_tl_sweep_on_any_problem(rows, R, seed, nonnegative, bound, l1):
    U, A, B = _problem(rows, R, seed)
    options = dict(nonnegative=nonnegative, column_bound=bound, l1=l1)
    with pytest.MonkeyPatch.context() as monkeypatch:
        fast, plain = _both(monkeypatch, U, A, B, **options)
    np.testing.assert_allclose(fast, plain, rtol=1e-11, atol=1e-12)


def test_float32_loadings_use_the_kernel_in_float32(monkeypatch):
    U, A, B = (x.astype(np.float32) for x in _problem(20, 4, seed=5))
    fast, plain = _both(monkeypatch, U, A, B, nonnegative=True, column_bound=1.0)
    assert fast.dtype == np.float32
    np.testing.assert_allclose(fast, plain, rtol=1e-5, atol=1e-6)


def test_the_kernel_runs_only_where_it_can(monkeypatch):
    monkeypatch.setenv(compiled.SWITCH, "1")
    assert compiled.column_sweep(np.ones((2, 2))) is not None
    assert compiled.column_sweep(np.ones((2, 2), dtype=np.int64)) is None
    assert compiled.column_sweep([[1.0]]) is None
    monkeypatch.setenv(compiled.SWITCH, "0")
    assert compiled.column_sweep(np.ones((2, 2))) is None


def test_a_tensor_step_with_the_kernel_is_the_tl_step(monkeypatch):
    rng = np.random.default_rng(0)
    loadings = [rng.random((6, 4)), rng.random((5, 4)), rng.random((3, 4))]
    H = rng.random((40, 4))
    A = H.T @ H / 40
    B = rng.random((6, 5, 3, 4))
    steps = {}
    for switch in ("1", "0"):
        monkeypatch.setenv(compiled.SWITCH, switch)
        steps[switch] = surrogate_bcd_step([U.copy() for U in loadings], A, B, nonnegative=True,
                                           column_bound=1.0)
    for fast, plain in zip(steps["1"], steps["0"]):
        np.testing.assert_allclose(fast, plain, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("make, shape", [
    (lambda: OnlineNMF(5, batch_size=50, max_iter=3, random_state=0), (300, 40)),
    (lambda: OnlineCPDL(3, batch_size=20, max_iter=2, random_state=0), (100, 6, 5)),
])
def test_learners_learn_the_same_with_and_without_the_kernel(monkeypatch, make, shape):
    monkeypatch.setattr(core_compiled, "FIRST_COMPILED_STEP", 0)  # every step (a short fit)
    X = np.random.default_rng(1).random(shape)
    learned = {}
    for switch in ("1", "0"):
        monkeypatch.setenv(compiled.SWITCH, switch)
        learned[switch] = make().fit(X).loadings_
    for fast, plain in zip(learned["1"], learned["0"]):
        np.testing.assert_allclose(fast, plain, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("make, sample_shape, per_atom", [
    (lambda R: OnlineNMF(R, code_max_iter=3, code_tol=1e-300, random_state=0), (20,), 3),
    (lambda R: OnlineCPDL(R, code_max_iter=1, random_state=0, reinit_dead_atoms=False), (6, 5),
     8),
])
def test_with_the_kernel_a_steps_calls_hardly_grow_with_the_rank(monkeypatch, make,
                                                                  sample_shape, per_atom):
    """Issue 14, goal 3 on numpy: with the kernel the sweep is one call at any rank; what grows
    is a few calls per atom (its curvature read on the host, the health counters), against ~27
    per column and loading in the tl.* sweep (``test_step_overhead.py``)."""
    from test_step_overhead import _step_calls

    monkeypatch.setattr(core_compiled, "FIRST_COMPILED_STEP", 0)  # from the first step on
    monkeypatch.setenv(compiled.SWITCH, "1")
    small, large = (_step_calls(make, sample_shape, R, 16) for R in (3, 24))
    assert large - small <= per_atom * (24 - 3), (small, large)
    monkeypatch.setenv(compiled.SWITCH, "0")  # the same measure sees the tl.* sweep grow
    small, large = (_step_calls(make, sample_shape, R, 16) for R in (3, 24))
    assert large - small > 10 * (24 - 3), (small, large)


def test_without_a_writable_cache_the_kernel_is_compiled_in_memory(monkeypatch):
    """numba refuses ``cache=True`` when it finds no writable cache directory (a read-only
    install, no home): the kernel is then compiled once per process, not lost."""
    from numba.core import caching

    monkeypatch.setattr(caching.CacheImpl, "_locator_classes", [])
    compiled._compiled.cache_clear()
    try:
        kernel = compiled._compiled()
        assert kernel is not None
        U, A, B = _problem(5, 3, seed=0)
        monkeypatch.setattr(compiled, "_compiled", lambda: kernel)
        fast, plain = _both(monkeypatch, U, A, B, nonnegative=True, column_bound=None)
        np.testing.assert_allclose(fast, plain, rtol=1e-12, atol=1e-13)
    finally:
        monkeypatch.undo()
        compiled._compiled.cache_clear()


@pytest.mark.parametrize("options", OPTIONS[:5], ids=str)
def test_torch_cpu_loadings_are_swept_by_the_kernel_in_place_of_tl_calls(monkeypatch, options):
    """A torch CPU tensor goes through a numpy view of its memory: the same sweep as numpy's
    kernel, and as torch's ``tl.*`` sweep to rounding; the result is a torch tensor."""
    torch = pytest.importorskip("torch")
    import tensorly as tl

    from tensorstream.core.backend import using

    U, A, B = _problem(40, 6, seed=7)
    monkeypatch.setenv(compiled.SWITCH, "1")
    on_numpy = column_descent(U, A, B, **options)
    with using("pytorch"), torch.no_grad():
        tensors = [torch.tensor(x) for x in (U, A, B)]
        assert compiled.column_sweep(tensors[0]) is not None
        fast, plain = _both(monkeypatch, *tensors, **options)
        assert tl.is_tensor(fast) and isinstance(fast, torch.Tensor)
        np.testing.assert_array_equal(tensors[0].numpy(), U)  # the input kept
    np.testing.assert_allclose(fast.numpy(), plain.numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(fast.numpy(), on_numpy, rtol=1e-14, atol=1e-15)


def test_tensors_the_kernel_cannot_see_keep_the_tl_sweep(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv(compiled.SWITCH, "1")
    assert compiled.column_sweep(torch.ones(2, 2, requires_grad=True)) is None
    assert compiled.column_sweep(torch.ones(2, 2, dtype=torch.int64)) is None
    assert compiled.column_sweep(torch.ones(2, 2, dtype=torch.float16)) is None


@pytest.mark.parametrize("l1", [0.0, 0.1])
def test_a_nan_target_stays_nan_as_in_the_tl_sweep(monkeypatch, l1):
    """The soft-threshold must not turn a NaN (an overflowed statistic) into a zero that the
    learners' health checks would not see."""
    U, A, B = _problem(9, 5, seed=0)
    B[0, 0] = np.nan
    fast, plain = _both(monkeypatch, U, A, B, nonnegative=False, column_bound=None, l1=l1)
    np.testing.assert_array_equal(np.isnan(fast), np.isnan(plain))
    assert np.isnan(fast).any()
    np.testing.assert_allclose(fast, plain, rtol=1e-12, atol=1e-13)  # NaN where NaN
    zero = _both(monkeypatch, U, A, np.zeros_like(B), nonnegative=False, column_bound=None,
                 l1=10.0)
    np.testing.assert_array_equal(*(np.signbit(x) for x in zero))  # -0.0 where tl gives -0.0


def test_non_contiguous_and_mixed_precision_inputs_are_swept_as_by_the_tl_sweep(monkeypatch):
    """Loadings and statistics arrive as views (a transposed Gram, a column-major loading, a
    strided slice) and a float32 loading may meet float64 statistics: the kernel's layouts
    and casts must not change the step."""
    U, A, B = _problem(9, 5, seed=4)
    wide = np.random.default_rng(5).standard_normal((9, 10))
    wide[:, ::2] = B
    for args in ((np.asfortranarray(U), A.T, np.asfortranarray(B)),
                 (np.repeat(U, 2, axis=0)[::2], A, wide[:, ::2]),
                 (U.astype(np.float32), A, B)):
        assert not all(x.flags["C_CONTIGUOUS"] for x in args) or args[0].dtype == np.float32
        fast, plain = _both(monkeypatch, *args, nonnegative=True, column_bound=1.0, l1=0.01)
        assert fast.dtype == plain.dtype == args[0].dtype
        tol = 1e-6 if args[0].dtype == np.float32 else 1e-12
        np.testing.assert_allclose(fast, plain, rtol=tol, atol=tol)


def test_threads_sweeping_at_once_get_the_tl_sweeps_results(monkeypatch):
    """The kernel runs without the GIL: concurrent sweeps (learners fitted in threads) must
    not share scratch memory."""
    from concurrent.futures import ThreadPoolExecutor

    problems = [_problem(30, 6, seed=s) for s in range(8)]
    monkeypatch.setenv(compiled.SWITCH, "1")
    with ThreadPoolExecutor(4) as pool:
        fast = list(pool.map(lambda p: column_descent(*p, nonnegative=True, column_bound=1.0,
                                                      n_passes=20), problems))
    monkeypatch.setenv(compiled.SWITCH, "0")
    for problem, result in zip(problems, fast):
        plain = column_descent(*problem, nonnegative=True, column_bound=1.0, n_passes=20)
        np.testing.assert_allclose(result, plain, rtol=1e-12, atol=1e-13)


# -- the lasso coder's pivoting (coders/lasso.py) ------------------------------------------------

def _lasso_problem(b, R, seed, per_sample=False, dtype=np.float64):
    rng = np.random.default_rng(seed)
    W = rng.random((3 * R + 5, R))
    X = rng.random((b, 3 * R + 5))
    G = W.T @ W
    if per_sample:  # one Gram per sample, as with missing entries
        G = np.stack([G * (0.5 + rng.random()) for _ in range(b)])
    return G.astype(dtype), (X @ W).astype(dtype)


def _codes_both_ways(monkeypatch, G, P, **options):
    from tensorstream.coders.lasso import sparse_code

    out = {}
    for switch in ("1", "0"):
        monkeypatch.setenv(compiled.SWITCH, switch)
        out[switch] = sparse_code(G, P, **options)
    return out["1"], out["0"]


@pytest.mark.parametrize("R", [1, 5, 24])
@pytest.mark.parametrize("options", [
    dict(), dict(alpha=0.5), dict(alpha=0.5, nonnegative=False), dict(ridge=0.1, alpha=0.1),
    dict(max_iter=1), dict(max_iter=2, nonnegative=False), dict(tol=1e-2)],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "defaults")
def test_the_pivoting_kernel_is_the_tl_pivoting(monkeypatch, R, options):
    """The same codes to rounding and the same number of rounds (max_iter=1 and 2: the
    exhausted rounds' iterates, made feasible)."""
    G, P = _lasso_problem(60, R, R)
    (fast, fast_rounds), (plain, plain_rounds) = _codes_both_ways(monkeypatch, G, P, **options)
    assert fast_rounds == plain_rounds
    np.testing.assert_allclose(fast, plain, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_pivoting_kernel_with_one_gram_per_sample_and_in_float32(monkeypatch, dtype):
    G, P = _lasso_problem(40, 8, 3, per_sample=True, dtype=dtype)
    (fast, _), (plain, _) = _codes_both_ways(monkeypatch, G, P, alpha=0.2)
    assert fast.dtype == plain.dtype == dtype
    tolerance = 1e-9 if dtype == np.float64 else 1e-3
    np.testing.assert_allclose(fast, plain, rtol=tolerance, atol=tolerance)


def test_the_pivoting_kernel_with_a_warm_start_dead_atoms_and_no_samples(monkeypatch):
    G, P = _lasso_problem(30, 6, 4)
    G[:, 2] = G[2, :] = 0.0  # a dead atom: never in a support, code 0
    init = np.where(np.random.default_rng(0).random(P.shape) > 0.5, 1.0, 0.0)
    (fast, _), (plain, _) = _codes_both_ways(monkeypatch, G, P, init=init)
    np.testing.assert_allclose(fast, plain, rtol=1e-9, atol=1e-11)
    assert np.all(fast[:, 2] == 0)
    for max_iter, b in ((0, 3), (5, 0)):
        (fast, rounds), (plain, plain_rounds) = _codes_both_ways(
            monkeypatch, G, P[:b], max_iter=max_iter)
        assert fast.shape == plain.shape == (b, 6) and rounds == plain_rounds == 0
        assert np.all(fast == plain)


def test_the_pivoting_solves_a_system_that_needs_a_row_exchange(monkeypatch):
    """A zero pivot in the support's system: elimination without row exchanges divides by
    zero; with partial pivoting the kernel solves it as LAPACK does."""
    G = np.array([[1e-30, 1.0], [1.0, 1e-30]])
    P = np.array([[2.0, 3.0]])
    (fast, _), (plain, _) = _codes_both_ways(monkeypatch, G, P, nonnegative=False, max_iter=1)
    assert np.all(np.isfinite(fast))
    np.testing.assert_allclose(fast, plain, rtol=1e-12)


def test_the_pivoting_kernel_runs_on_numpy_float_arrays_only(monkeypatch):
    from tensorstream.coders.lasso import _pivoting_kernel

    torch = pytest.importorskip("torch")
    G, P = _lasso_problem(4, 3, 0)
    monkeypatch.setenv(compiled.SWITCH, "1")
    assert _pivoting_kernel(G, P) is not None
    assert _pivoting_kernel(torch.from_numpy(G), torch.from_numpy(P)) is None
    monkeypatch.setenv(compiled.SWITCH, "0")
    assert _pivoting_kernel(G, P) is None
