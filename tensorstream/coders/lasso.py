"""The coding step: codes of a batch against a fixed dictionary (squared loss).

For each sample ``x`` (row of the batch) the codes solve the (nonnegative) elastic-net problem

    min_h  ||x - W h||^2 + alpha ||h||_1 + ridge ||h||^2        (h >= 0 when nonnegative)

which is the eq. (9) convention of Lyu et al. (no factor 1/2 on the squared loss). Only the Gram
``G = W^T W`` (``R x R``) and the projections ``P = X W`` (``b x R``) enter, so the dictionary may
be a CP dictionary whose matrix is never formed.

The solver is an exact active-set method, block principal pivoting (Kim & Park's method for
nonnegative least squares, with its backup rule; for signed codes the passive set carries a sign
pattern). A sample's solution is fixed by its *support* ``F`` (and the signs there): on ``F`` it
solves the linear system ``(G + ridge I)_FF h_F = P_F - alpha/2 s_F``, off ``F`` it is zero. Each
round solves these systems for every sample of the batch at once (one batched solve of masked
``R x R`` systems), checks the optimality conditions, and swaps the violating coordinates in or
out of the support. The first round solves one shared system (the least-squares start). Rounds
are few (typically 2-4) and cost a constant number of backend calls, whatever the rank and the
batch; samples drop out of the batched work as soon as their support is optimal, so a sample's
code never depends on the other samples of its batch. The result is the exact minimiser (to
rounding), not an iterate, which is why it copes with the strongly correlated atoms of
nonnegative dictionaries where gradient methods crawl. With numba installed, numpy batches run
the same rounds sample by sample in one compiled kernel (:func:`_pivoting_kernel`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorly as tl

from ..core.backend import index_context
from ..core.compiled import enabled, jit

Tensor = Any

_BACKUP_ROUNDS = 3  # Kim & Park: full exchanges allowed without progress before single pivots
#: an atom whose curvature ``G_rr`` is at most this fraction of the largest is dead: code 0
#: (also the ADMM coder's rule, :func:`tensorstream.coders.robust.nonnegative_code_admm`)
DEAD_CURVATURE = 1e-12
_DAMPING = 4  # machine epsilons of the largest curvature added to the diagonal


def sparse_code(
    gram: Tensor,
    projections: Tensor,
    *,
    alpha: float = 0.0,
    ridge: float = 0.0,
    nonnegative: bool = True,
    init: Tensor | None = None,
    max_iter: int = 200,
    tol: float = 1e-6,
) -> tuple[Tensor, int]:
    """Codes of a batch by block principal pivoting (an exact active-set method).

    Parameters
    ----------
    gram : tensor of shape (R, R) or (b, R, R)
        ``W^T W``, or one Gram per sample (``W^T diag(m_j) W`` when sample ``j`` has missing
        entries, ``m_j`` its mask).
    projections : tensor of shape (b, R)
        ``X W``: each sample projected on the atoms.
    alpha : float
        Weight of the l1 penalty (eq. (9) convention).
    ridge : float
        Weight of the squared l2 penalty on the codes (makes the solution unique).
    nonnegative : bool
        Constrain the codes to be nonnegative.
    init : tensor of shape (b, R), optional
        Warm start: its nonzero entries (with their signs) are the first support guess.
        Otherwise the first guess is every live atom (the least-squares start).
    max_iter : int
        Maximum number of pivoting rounds. A sample whose support is still not optimal then
        keeps its last iterate, made feasible (entries of the wrong sign set to zero).
    tol : float
        A support is optimal when no coordinate off it could lower the objective by more than
        ``tol`` times the sample's largest ``|P_jk|`` per unit move (the KKT conditions to this
        relative tolerance; on the support they hold to rounding).

    Returns
    -------
    codes : tensor of shape (b, R)
    n_rounds : int
        Pivoting rounds performed (1 when the first support guess was optimal for every sample).

    Examples
    --------
    >>> import numpy as np
    >>> W = np.array([[1.0, 0.0], [0.0, 2.0]])
    >>> X = np.array([[3.0, 4.0]])
    >>> codes, _ = sparse_code(W.T @ W, X @ W)
    >>> np.round(codes, 6)
    array([[3., 2.]])
    """
    Q, live = _regularised_gram(gram, ridge)
    b, R = tl.shape(projections)
    context = tl.context(projections)
    codes = tl.zeros((b, R), **context)
    support, signs = _first_guess(Q, projections, live, init, nonnegative)
    kernel = _pivoting_kernel(Q, projections)
    if kernel is not None:
        return kernel(Q, projections, live, support, signs, alpha=alpha,
                      nonnegative=nonnegative, max_iter=max_iter, tol=tol)
    # everything per sample, so that the samples still pivoting can be taken out together
    state = {"rows": tl.arange(0, b, **index_context(projections)), "P": projections,
             "support": support, "signs": signs,
             # per-sample tolerance: a sample's stopping test never looks at the other samples
             "tolerance": tol * tl.max(tl.abs(projections), axis=1) if b else projections[:, 0],
             "fewest": tl.zeros((b,), **context) + (R + 1),  # fewest violations seen
             "backup": tl.zeros((b,), **context) + _BACKUP_ROUNDS}
    if tl.ndim(Q) == 3:
        state.update(Q=Q, live=live)
    solution = _solve(Q, projections - 0.5 * alpha * signs, support)
    n_rounds = 0
    while b and n_rounds < max_iter:
        n_rounds += 1
        Q, live = state.get("Q", Q), state.get("live", live)
        entering, leaving, entry_signs = _violations(
            Q, state["P"], solution, state["support"], state["signs"], live, alpha, nonnegative,
            state["tolerance"])
        violating = entering + leaving
        count = tl.sum(violating, axis=1)
        done = count == 0
        if n_rounds == max_iter:  # rounds exhausted: the last iterates, made feasible
            solution = solution * _as_float(solution * state["signs"] > 0, context)
            done = done | ~done
        codes = tl.index_update(codes, tl.index[state["rows"][done]], solution[done])
        if bool(tl.all(done)):
            break
        keep = ~done  # only the samples still pivoting go on; the others are final
        state = {name: value[keep] for name, value in state.items()}
        exchange, state["fewest"], state["backup"] = _exchange(
            violating[keep], count[keep], state["fewest"], state["backup"])
        entering = entering[keep] * exchange
        state["signs"] = state["signs"] + entering * (entry_signs[keep] - state["signs"])
        state["support"] = state["support"] + exchange * (1 - 2 * state["support"])
        solution = _solve(state.get("Q", Q), state["P"] - 0.5 * alpha * state["signs"],
                          state["support"])
    return codes, n_rounds


def _pivoting_kernel(Q: Tensor, P: Tensor) -> Callable | None:
    """The compiled pivoting (numba, :mod:`tensorstream.core.compiled`) for numpy arrays, or
    None where the rounds run as batched ``tl.*`` calls.

    The kernel runs every round of one sample before the next sample, on its ``|F| x |F|``
    system alone (elimination with partial pivoting, as LAPACK's ``gesv``): no ``(b, R, R)``
    temporaries, no batch-wide calls per round, and a sample costs only its own rounds. Its
    rounds are the ``tl.*`` rounds step for step (the same tests, exchanges and backup rule);
    the two agree to rounding (``tests/test_compiled.py``).
    """
    if not (enabled() and isinstance(Q, np.ndarray) and isinstance(P, np.ndarray)
            and P.dtype in (np.float32, np.float64)):
        return None
    kernel = _compiled_pivoting()
    if kernel is None:
        return None

    def pivot(Q, P, live, support, signs, *, alpha, nonnegative, max_iter, tol):
        dtype = P.dtype
        grams = np.ascontiguousarray(Q[None] if Q.ndim == 2 else Q, dtype=dtype)
        lives = np.ascontiguousarray(np.broadcast_to(live, P.shape), dtype=np.bool_)
        codes = np.zeros(P.shape, dtype=dtype)
        if max_iter < 1:  # as the tl.* rounds: no round, no codes
            return codes, 0
        rounds = kernel(grams, np.ascontiguousarray(P), lives,
                        np.ascontiguousarray(support, dtype=dtype),
                        np.ascontiguousarray(signs, dtype=dtype), float(alpha),
                        bool(nonnegative), int(max_iter), float(tol), _BACKUP_ROUNDS, codes)
        return codes, int(rounds)

    return pivot


@functools.cache
def _compiled_pivoting() -> Callable | None:
    return jit(_pivot_samples)


def _pivot_samples(Q, P, live, support, signs, alpha, nonnegative, max_iter, tol,
                   backup_rounds, codes):  # pragma: no cover
    """Block principal pivoting of each sample in turn, exactly the rounds of
    :func:`sparse_code` (see there): ``codes[j]``, and the largest number of rounds returned.
    Each round's system ``q_FF h_F = (p - alpha/2 s)_F`` is solved by elimination with partial
    pivoting on the ``|F| x |F|`` system, the right-hand side alongside."""
    b, R = P.shape
    A = np.empty((R, R), dtype=P.dtype)
    y = np.empty(R, dtype=P.dtype)
    index = np.empty(R, dtype=np.int64)
    solution = np.empty(R, dtype=P.dtype)
    residual = np.empty(R, dtype=P.dtype)
    entering = np.empty(R, dtype=np.bool_)
    violating = np.empty(R, dtype=np.bool_)
    entry_signs = np.empty(R, dtype=P.dtype)
    most_rounds = 0
    for j in range(b):
        q, p = (Q[0] if Q.shape[0] == 1 else Q[j]), P[j]
        F, s = support[j].copy(), signs[j].copy()
        tolerance = 0.0
        for k in range(R):
            tolerance = max(tolerance, abs(p[k]))
        tolerance *= tol
        fewest, backup, rounds = R + 1, backup_rounds, 0
        while True:
            # the support's system
            m = 0
            for k in range(R):
                solution[k] = 0.0
                if F[k] > 0:
                    index[m] = k
                    m += 1
            for a in range(m):
                y[a] = p[index[a]] - 0.5 * alpha * s[index[a]]
                for c in range(m):
                    A[a, c] = q[index[a], index[c]]
            for c in range(m):
                pivot, largest = c, abs(A[c, c])
                for r in range(c + 1, m):
                    if abs(A[r, c]) > largest:
                        pivot, largest = r, abs(A[r, c])
                if pivot != c:
                    for k in range(c, m):
                        A[c, k], A[pivot, k] = A[pivot, k], A[c, k]
                    y[c], y[pivot] = y[pivot], y[c]
                for r in range(c + 1, m):
                    factor = A[r, c] / A[c, c]
                    for k in range(c + 1, m):
                        A[r, k] -= factor * A[c, k]
                    y[r] -= factor * y[c]
            for a in range(m - 1, -1, -1):
                total = y[a]
                for k in range(a + 1, m):
                    total -= A[a, k] * y[k]
                y[a] = total / A[a, a]
            for a in range(m):
                solution[index[a]] = y[a]
            if rounds == max_iter:
                break
            rounds += 1
            # the optimality test: who leaves the support, who enters it
            count = 0
            for k in range(R):  # p - q h, from the support's rows of q (h is 0 off it)
                residual[k] = p[k]
            for a in range(m):
                value, row = y[a], q[index[a]]
                for k in range(R):
                    residual[k] -= value * row[k]
            for k in range(R):
                if nonnegative:
                    gain = residual[k] - 0.5 * alpha
                    entry_signs[k] = 1.0
                else:
                    gain = abs(residual[k]) - 0.5 * alpha
                    entry_signs[k] = -1.0 if residual[k] < 0 else 1.0
                leaving = F[k] > 0 and solution[k] * s[k] < 0
                entering[k] = F[k] == 0 and live[j, k] and gain > tolerance
                violating[k] = leaving or entering[k]
                if violating[k]:
                    count += 1
            if count == 0:
                break
            if rounds == max_iter:  # rounds exhausted: the last iterate, made feasible
                for k in range(R):
                    if not solution[k] * s[k] > 0:
                        solution[k] = 0.0 * solution[k]
                break
            # the exchange (Kim & Park's backup rule, as _exchange)
            if count < fewest:
                fewest, backup = count, backup_rounds
            else:
                backup -= 1
            last = -1
            for k in range(R):
                if violating[k]:
                    last = k
            for k in range(R):
                if violating[k] and (backup >= 0 or k == last):
                    if entering[k]:
                        s[k] = entry_signs[k]
                    F[k] = 1.0 - F[k]
        most_rounds = max(most_rounds, rounds)
        for k in range(R):
            codes[j, k] = solution[k]
    return most_rounds


def _first_guess(Q: Tensor, P: Tensor, live: Tensor, init: Tensor | None,
                 nonnegative: bool) -> tuple[Tensor, Tensor]:
    """The first support and signs: the nonzero entries of ``init``, or every live atom with
    the sign of the least-squares codes (the least-squares start)."""
    context = tl.context(P)
    if init is not None:
        return _as_float(live & (init != 0), context), _signs(init, nonnegative)
    support = _as_float(live, context) + tl.zeros(tl.shape(P), **context)
    signs = _signs(P, True) if nonnegative else _signs(_solve(Q, P, support), False)
    return support, signs


def _regularised_gram(gram: Tensor, ridge: float) -> tuple[Tensor, Tensor]:
    """``G + ridge I`` with a rounding-level damping, and which atoms are live.

    The damping (a few machine epsilons of the largest curvature) keeps the systems of
    supports with collinear atoms solvable at no visible cost. A dead atom (zero curvature: a
    zero column, or one that no observed entry reaches) never enters a support; its code is 0.
    """
    curvature = _diagonal(gram)
    largest = tl.max(curvature, axis=-1)
    eye = tl.eye(tl.shape(gram)[-1], **tl.context(gram))
    epsilons = _DAMPING * float(tl.eps(tl.context(gram)["dtype"]))
    if tl.ndim(gram) == 3:
        live = curvature > DEAD_CURVATURE * largest[:, None]
        return gram + (ridge + epsilons * largest)[:, None, None] * eye, live
    # a Python float: a NumPy scalar would promote float32 Grams to float64
    return gram + (ridge + epsilons * float(largest)) * eye, \
        curvature > DEAD_CURVATURE * largest


def _solve(Q: Tensor, rhs: Tensor, support: Tensor) -> Tensor:
    """Each sample's system restricted to its support: ``h_F = Q_FF^-1 rhs_F``, 0 off ``F``.

    The restriction is a masked system (identity rows and columns off the support), so all
    samples are solved by one batched call; when every sample has the full support and ``Q``
    is shared, one system with ``b`` right-hand sides.
    """
    if tl.ndim(Q) == 2 and bool(tl.all(support > 0)):
        return tl.transpose(tl.solve(Q, tl.transpose(rhs)))
    eye = tl.eye(tl.shape(support)[1], **tl.context(support))
    # selected from boolean masks: float products of batch-sized (b, R, R) temporaries cost
    # several times the solve itself at rank 24 (same entries, bit for bit)
    on = support > 0
    masked = tl.where(on[:, :, None] & on[:, None, :], Q, eye)
    return tl.solve(masked, (rhs * support)[:, :, None])[:, :, 0]


def _violations(Q, P, solution, support, signs, live, alpha, nonnegative, tolerance):
    """Coordinates that break optimality: on the support with the wrong sign (``leaving``),
    off it with a descent direction (``entering``, and the sign they would enter with)."""
    context = tl.context(solution)
    if tl.ndim(Q) == 3:
        residual = P - tl.einsum("sk,skl->sl", solution, Q)
    else:
        residual = P - tl.dot(solution, Q)  # minus half the gradient of the smooth part
    if nonnegative:
        gain, entry_signs = residual - 0.5 * alpha, tl.ones(tl.shape(P), **context)
    else:
        gain, entry_signs = tl.abs(residual) - 0.5 * alpha, _signs(residual, False)
    leaving = support * _as_float(solution * signs < 0, context)
    entering = (1 - support) * _as_float(live & (gain > tolerance[:, None]), context)
    return entering, leaving, entry_signs


def _exchange(violating: Tensor, count: Tensor, fewest: Tensor, backup: Tensor):
    """Kim & Park's backup rule: exchange every violating coordinate while their number
    falls (or for a few rounds after), else only the last one (Murty's rule, which ends)."""
    progress = count < fewest
    fewest = tl.where(progress, count, fewest)
    backup = tl.where(progress, backup * 0 + _BACKUP_ROUNDS, backup - 1)
    R = tl.shape(violating)[1]
    positions = tl.arange(1, R + 1, **tl.context(violating))
    last = tl.argmax(violating * positions, axis=1)
    only_last = _as_float(positions[None, :] == (last + 1)[:, None], tl.context(violating))
    full = _as_float(backup >= 0, tl.context(violating))[:, None]
    return violating * (full + (1 - full) * only_last), fewest, backup


def _signs(value: Tensor, nonnegative: bool) -> Tensor:
    """+1 everywhere (nonnegative codes), else the signs of ``value`` with +1 at zeros."""
    ones = tl.ones(tl.shape(value), **tl.context(value))
    return ones if nonnegative else ones - 2 * _as_float(value < 0, tl.context(value))


def _as_float(mask: Tensor, context: dict) -> Tensor:
    """A boolean tensor as 0/1 floats of ``context``."""
    return tl.tensor(mask, **context)


def _diagonal(gram: Tensor) -> Tensor:
    """Diagonal of a Gram, ``(R,)``, or of each per-sample Gram, ``(b, R)``."""
    return tl.diag(gram) if tl.ndim(gram) == 2 else tl.einsum("skk->sk", gram)


def sample_losses(
    sq_norms: Tensor, gram: Tensor, projections: Tensor, codes: Tensor,
    *, alpha: float = 0.0, ridge: float = 0.0,
) -> Tensor:
    """Per-sample losses ``||x - W h||^2 + alpha ||h||_1 + ridge ||h||^2`` without forming ``W h``.

    Uses ``||x - W h||^2 = ||x||^2 - 2 h^T W^T x + h^T G h``; ``sq_norms`` holds ``||x||^2``
    (with missing entries: of the observed part, and ``gram`` the per-sample Grams).
    """
    if tl.ndim(gram) == 3:
        curvature = tl.sum(gram * codes[:, None, :], axis=2)
    else:
        curvature = tl.dot(codes, gram)
    # per sample: h^T (G h - 2 p + ridge h) + alpha |h|, summed in one product with ones (a
    # reduction along short rows is several times slower; on 1024 x 16 codes 0.07 -> 0.03 ms)
    fit = curvature - 2 * projections
    if ridge:
        fit = fit + ridge * codes
    terms = fit * codes
    if alpha:
        terms = terms + alpha * tl.abs(codes)
    ones = tl.ones((tl.shape(codes)[1],), **tl.context(codes))
    return sq_norms + tl.dot(terms, ones)
