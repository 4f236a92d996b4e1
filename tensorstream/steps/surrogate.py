"""Dictionary steps on the quadratic surrogate of online CP-dictionary learning.

The surrogate is ``g(D) = tr(A G(D)) - 2 <B, W(D)> + c`` with ``G(D)`` the Hadamard product of
the loading Grams. In mode ``i``, with the other loadings fixed, it is the quadratic

    tr(U A_i U^T) - 2 tr(U B_i^T) + const,   A_i = A * prod_{k != i} U^(k)^T U^(k),
                                               B_i = B contracted with the other loadings,

(:func:`block_statistics`). :func:`surrogate_bcd_step` runs one Gauss-Seidel cycle over the
modes: in each mode, passes of exact column minimisation (the column problem is isotropic, so
its constrained minimiser is the projection of the unconstrained one), then the search-radius
restriction by segment back-off. Every column step and the back-off can only lower the surrogate,
which is the forward monotonicity (Lemma 4.2 i) the convergence proof uses.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import tensorly as tl

from ..coders.robust import shifted_inverse
from ..core.constraints import (
    limit_step,
    max_row_norm_subgradient,
    project_columns,
    prox_max_row_norm,
    soft_threshold,
)
from ..core.dictionary import contract_except, gram, inner_with_dictionary, pairs, spectral_norm_psd
from .compiled import column_sweep

Tensor = Any


def block_statistics(A: Tensor, B: Tensor, loadings: Sequence[Tensor], mode: int):
    """``(A_i, B_i)`` of the block problem of ``mode`` (Lyu et al., Alg. 3), Grams not atoms."""
    return A * gram(loadings, skip=mode), contract_except(B, loadings, mode)


def column_descent(
    U: Tensor, A_i: Tensor, B_i: Tensor, *, nonnegative: bool, column_bound: float | None,
    n_passes: int = 1, l1: float = 0.0, l2: float = 0.0,
) -> Tensor:
    """Passes of exact, projected column minimisation of ``tr(U A_i U^T) - 2 tr(U B_i^T)``.

    With penalties the objective gains ``2 l1 ||U||_1 + l2 ||U||_F^2`` (``l1 ||U||_1 +
    l2/2 ||U||_F^2`` on the 1/2-scaled surrogate). The column problem stays isotropic, so its
    constrained minimiser is the projection of the soft-thresholded unconstrained one
    (soft-thresholding then a centred-ball projection is the exact proximal map of the sum).
    A column whose curvature ``A_i[r, r] + l2`` is zero is an atom no code uses; it is left as
    it is.
    """
    U = tl.copy(U)
    diagonal = tl.diag(A_i)
    curvature = [float(a) for a in tl.to_numpy(diagonal)]
    scale = max(curvature + [0.0])
    # a dead atom (no curvature; scale >= 0) is skipped unless l2 gives it curvature
    columns = [r for r, a_rr in enumerate(curvature) if l2 > 0 or a_rr > 1e-12 * scale]
    if not columns:
        return U
    # a column's move is affine in U: its unthresholded target is U m_r + b_r with
    # M = diag(A_i) - A_i (the column's own term cancels) and B_i, both over a_rr + l2 when
    # there is nothing to threshold, so a column costs one product and one sum
    M = tl.diag(diagonal) - A_i
    threshold = l1 > 0
    if not threshold:
        denominator = diagonal + l2
        denominator = tl.where(denominator > 0, denominator,
                               tl.ones(tl.shape(denominator), **tl.context(denominator)))
        M, B_i = M / denominator, B_i / denominator
    sweep = column_sweep(U)
    if sweep is not None:  # numba: the same sweep in one call (steps/compiled.py)
        return sweep(U, M, B_i, columns, curvature, l1=l1, l2=l2, nonnegative=nonnegative,
                     bound=column_bound, n_passes=n_passes)
    for _ in range(n_passes):
        for r in columns:
            target = tl.dot(U, M[:, r]) + B_i[:, r]
            if threshold:
                target = soft_threshold(target, l1) / (curvature[r] + l2)
            U = tl.index_update(U, tl.index[:, r], _project_column(target, nonnegative,
                                                                   column_bound))
    return U


def _project_column(column: Tensor, nonnegative: bool, bound: float | None) -> Tensor:
    """:func:`project_columns` of one column, its norm test on the host (one scalar per
    column is cheaper than the tensor calls of a tensor-valued shrink factor)."""
    if nonnegative:
        column = tl.clip(column, 0, None)
    if bound is not None:
        ratio = math.sqrt(float(tl.dot(column, column))) / bound
        if ratio > 1.0:  # inside the ball the shrink is a division by 1: skipped
            column = column / ratio
    return column


def accelerated_descent(
    U: Tensor, A_i: Tensor, B_i: Tensor, *, nonnegative: bool, column_bound: float | None,
    l1: float = 0.0, l2: float = 0.0, max_iter: int = 20, tol: float = 1e-3,
) -> Tensor:
    """Accelerated projected gradient (FISTA) on ``tr(U A_i U^T) - 2 tr(U B_i^T)``, all columns
    at once (the alternative to :func:`column_descent`).

    Each iteration is a few matrix products on the whole loading, so the number of backend
    calls does not grow with the rank. The step is ``1 / (lambda_max(A_i) + l2)`` (the
    gradient's Lipschitz constant on the 1/2 scale); the proximal map of the penalties and the
    constraint set is, column by column, the one of :func:`column_descent` (soft-threshold,
    clip, radial shrink). The momentum restarts when it points uphill (the gradient test of
    O'Donoghue & Candes), and the iterations stop when a step moves the loading by less than
    ``tol`` times its norm (or after ``max_iter``). Accelerated iterates are not monotone, so
    the result is the start when it is no better: the step never raises the surrogate.
    """
    lipschitz = spectral_norm_psd(A_i) + l2
    if not lipschitz > 0:  # no code used any atom: nothing to learn
        return U
    current, previous, momentum = U, U, 1.0
    for _ in range(max_iter):
        gradient = tl.dot(current, A_i) - B_i
        if l2:
            gradient = gradient + l2 * current
        target = current - gradient / lipschitz
        if l1:
            target = soft_threshold(target, l1 / lipschitz)
        new = project_columns(target, nonnegative=nonnegative, column_bound=column_bound)
        step = new - previous
        # one host transfer per iteration: the step's size, the loading's, the restart test
        moved, size, uphill = (float(v) for v in tl.to_numpy(tl.stack([
            tl.norm(step), tl.norm(new), tl.sum((current - new) * step)])))
        if moved <= tol * size:
            previous = new
            break
        # a restart is a zero extrapolation, so every iteration makes the same calls
        next_momentum = 1.0 if uphill > 0 else (1 + math.sqrt(1 + 4 * momentum**2)) / 2
        current = new + ((momentum - 1) / next_momentum) * step
        previous, momentum = new, next_momentum
    better = _block_value(previous, A_i, B_i, l1, l2) <= _block_value(U, A_i, B_i, l1, l2)
    return previous if better else U


def _block_value(U: Tensor, A_i: Tensor, B_i: Tensor, l1: float, l2: float) -> float:
    """``1/2 tr(U A_i U^T) - tr(U B_i^T) + l1 ||U||_1 + l2/2 ||U||_F^2``."""
    value = tl.sum((0.5 * tl.dot(U, A_i) - B_i) * U)
    if l1:
        value = value + l1 * tl.sum(tl.abs(U))
    if l2:
        value = value + 0.5 * l2 * tl.sum(U * U)
    return float(value)


def entrywise_block_statistics(A: Tensor, B: Tensor, loadings: Sequence[Tensor], mode: int):
    """Block problem of ``mode`` when ``A`` is entrywise (missing data), ``(I_1..I_n, R, R)``.

    With masks each entry ``i`` of the samples has its own ``A_i = mean m[i] h h^T``, so in
    mode ``k`` each row ``a`` of the loading gets its own quadratic
    ``Q[a] = sum_{i: i_k = a} A_i * (v_i v_i^T)`` (``v_i`` the product of the other loadings'
    rows): a contraction of ``A`` with the pair loadings. Returns ``(Q (I_k, R, R), B_k)``.
    """
    R = tl.shape(loadings[0])[1]
    sizes = [tl.shape(U)[0] for U in loadings]
    flat = tl.reshape(A, (*sizes, R * R))
    Q = contract_except(flat, [pairs(U) for U in loadings], mode)
    return tl.reshape(Q, (sizes[mode], R, R)), contract_except(B, loadings, mode)


def weighted_column_descent(
    U: Tensor, Q: Tensor, B_i: Tensor, *, nonnegative: bool, column_bound: float | None,
    n_passes: int = 1,
) -> Tensor:
    """Exact column minimisation of ``sum_a u_a^T Q[a] u_a - 2 u_a^T B_i[a]`` (row-wise Grams).

    The column problem ``sum_a q_a u_a^2 - 2 g_a u_a`` over ``{u >= 0, ||u|| <= bound}`` is no
    longer isotropic, so its solution is ``u_a = g_a^+ / (q_a + mu)`` with the multiplier ``mu``
    of the norm bound (:func:`_weighted_ball_solution`). A vanishing proximal term keeps rows
    that no observed entry reaches (``q_a = 0``) where they are.
    """
    U = tl.copy(U)
    R = tl.shape(U)[1]
    scale = float(tl.max(Q)) if tl.shape(Q)[0] else 0.0
    prox = 1e-12 * scale + 1e-300
    for _ in range(n_passes):
        for r in range(R):
            q = Q[:, r, r]
            coupling = tl.sum(Q[:, r, :] * U, axis=1) - q * U[:, r]
            target = B_i[:, r] - coupling + prox * U[:, r]
            column = _weighted_ball_solution(target, q + prox, nonnegative, column_bound)
            U = tl.index_update(U, tl.index[:, r], column)
    return U


def _weighted_ball_solution(g: Tensor, q: Tensor, nonnegative: bool,
                            bound: float | None) -> Tensor:
    """``argmin sum q_a u_a^2 - 2 g_a u_a`` over ``u >= 0`` (optional) and ``||u|| <= bound``.

    Newton's method on ``1/||u(mu)|| - 1/bound``, nearly linear in ``mu`` (as for trust-region
    subproblems), converges in a few steps; a final radial shrink makes the bound exact.
    """
    numerator = tl.clip(g, 0, None) if nonnegative else g
    u = numerator / q
    if bound is None or float(tl.norm(u)) <= bound:
        return u
    mu = 0.0
    for _ in range(50):
        norm = float(tl.norm(u))
        if abs(norm - bound) <= 1e-13 * bound:
            break
        slope = float(tl.sum(u * u / (q + mu))) / norm**3
        mu = max(mu - (1 / norm - 1 / bound) / slope, 0.0)
        u = numerator / (q + mu)
    return u / max(1.0, float(tl.norm(u)) / bound)


COLUMN_PASSES = 1
"""The column passes per mode when ``n_passes`` is None (the reference code's single pass)."""
FISTA_ITERATIONS, FISTA_TOL = 20, 1e-3
"""FISTA's iterations per mode and relative-move stop when ``n_passes``, ``tol`` are None."""


def surrogate_bcd_step(
    loadings: Sequence[Tensor], A: Tensor, B: Tensor, *, nonnegative: bool,
    column_bound: float | None, radius: float | None = None, radius_mode: str = "frobenius",
    n_passes: int | None = None, l1: float = 0.0, l2: float = 0.0, method: str = "columns",
    tol: float | None = None,
) -> list[Tensor]:
    """One Gauss-Seidel cycle over the modes (Lyu et al., Algorithm 2, the loop over ``i``).

    Each mode's block statistics are recomputed with the freshest loadings of the modes before
    it. ``l1``, ``l2`` penalise every loading (see :func:`column_descent`; not with missing
    data). ``method`` solves each block: ``"columns"`` by exact column passes
    (:func:`column_descent`), ``"fista"`` by accelerated projected gradient on the whole
    loading (:func:`accelerated_descent`; missing data keep the column passes). For both,
    ``n_passes`` is the passes (FISTA: iterations) per mode at most and ``tol`` stops them
    once one moves the loading by less than ``tol`` times its norm; None is the block
    solver's own default (columns: :data:`COLUMN_PASSES` and no stop, every pass runs;
    FISTA: :data:`FISTA_ITERATIONS` and :data:`FISTA_TOL`). Returns new loadings; the inputs
    are not modified.
    """
    if method not in ("columns", "fista"):
        raise ValueError(f"method must be 'columns' or 'fista', got {method!r}")
    entrywise = tl.ndim(A) > 2  # statistics of data with missing entries
    if entrywise and (l1 or l2):
        raise ValueError("loading penalties l1, l2 are not supported with missing data")
    new = list(loadings)
    for mode in range(len(new)):
        if entrywise:
            Q, B_i = entrywise_block_statistics(A, B, new, mode)
            target = _column_passes(
                lambda U, k, Q=Q, B_i=B_i: weighted_column_descent(
                    U, Q, B_i, nonnegative=nonnegative, column_bound=column_bound, n_passes=k),
                new[mode], n_passes, tol)
        elif method == "fista":
            A_i, B_i = block_statistics(A, B, new, mode)
            target = accelerated_descent(
                new[mode], A_i, B_i, nonnegative=nonnegative, column_bound=column_bound,
                l1=l1, l2=l2, max_iter=FISTA_ITERATIONS if n_passes is None else n_passes,
                tol=FISTA_TOL if tol is None else tol)
        else:
            A_i, B_i = block_statistics(A, B, new, mode)
            target = _column_passes(
                lambda U, k, A_i=A_i, B_i=B_i: column_descent(
                    U, A_i, B_i, nonnegative=nonnegative, column_bound=column_bound,
                    n_passes=k, l1=l1, l2=l2),
                new[mode], n_passes, tol)
        new[mode] = limit_step(new[mode], target, radius, radius_mode)
    return new


def _column_passes(passes: Callable, U: Tensor, n_passes: int | None,
                   tol: float | None) -> Tensor:
    """``passes(U, k)`` (``k`` column passes) run ``n_passes`` times, stopped after a pass that
    moves ``U`` by less than ``tol`` times its norm. Without a stop the passes run in one call
    (one kernel call when compiled); the test costs one host transfer per pass."""
    n_passes = COLUMN_PASSES if n_passes is None else n_passes
    if not tol or n_passes == 1:  # nothing after a last pass to stop
        return passes(U, n_passes)
    for _ in range(n_passes - 1):
        previous, U = U, passes(U, 1)
        moved, size = (float(v) for v in tl.to_numpy(tl.stack([tl.norm(U - previous),
                                                                tl.norm(U)])))
        if moved <= tol * size:
            return U
    return passes(U, 1)


def surrogate_value(A: Tensor, B: Tensor, c: float, loadings: Sequence[Tensor]) -> float:
    """``tr(A G(D)) - 2 <B, W(D)> + c``: the surrogate at the dictionary ``loadings``.

    With entrywise ``A`` (missing data) the quadratic term is ``sum_i W_i A_i W_i^T``.
    """
    if tl.ndim(A) > 2:
        R = tl.shape(loadings[0])[1]
        flat = tl.reshape(A, (*tl.shape(A)[:-2], R * R))
        quadratic = inner_with_dictionary(flat, [pairs(U) for U in loadings])
    else:
        quadratic = tl.sum(A * gram(loadings))
    return float(quadratic - 2 * inner_with_dictionary(B, loadings)) + c


# -- the max-norm basis step (Shen, Xu & Li, Algorithm 4, and our exact prox-gradient) -----------
#
# Surrogate of a matrix basis L (p x d) with statistics A (d x d, or p x d x d entrywise when
# data have missing entries) and B (p x d):
#     1/2 tr(L A L^T) - tr(L^T B) + max_norm/2 ||L||_{2,inf}^2 + frobenius/2 ||L||_F^2


def max_norm_surrogate(L: Tensor, A: Tensor, B: Tensor, *, max_norm: float = 0.0,
                       frobenius: float = 0.0) -> float:
    """The basis surrogate above at ``L`` (``A`` shared ``(d, d)`` or entrywise ``(p, d, d)``)."""
    LA = _times_statistic(L, A)
    value = 0.5 * tl.sum(LA * L) - tl.sum(L * B)
    if max_norm:
        value = value + 0.5 * max_norm * tl.max(tl.sum(L * L, axis=1))
    if frobenius:
        value = value + 0.5 * frobenius * tl.sum(L * L)
    return float(value)


def _times_statistic(L: Tensor, A: Tensor) -> Tensor:
    """``L A`` (shared ``A``), or row by row ``L[i] A[i]`` (entrywise ``A``)."""
    if tl.ndim(A) == 2:
        return tl.dot(L, A)
    return tl.einsum("ik,ikj->ij", L, A)


def penalized_column_bcd(
    L: Tensor, A: Tensor, B: Tensor, *, max_norm: float = 0.0, frobenius: float = 0.0,
    jitter: float = 0.0, column_bound: float | None = None, n_sweeps: int = 1,
    tie_rtol: float = 0.0,
) -> Tensor:
    """Gauss-Seidel column sweeps on the basis surrogate (Shen, Xu & Li, Algorithm 4; OR-PCA's).

    Column ``j`` moves to ``l_j - (L a_j - b_j + max_norm u_j + frobenius l_j) / (A_jj + jitter
    + frobenius)``, using the columns already updated in this sweep, then (``column_bound``) onto
    the ball ``||l_j|| <= column_bound``. ``U = diag(mu) L`` is a subgradient of
    ``1/2 ||L||_{2,inf}^2`` taken once per sweep, before it (the reference code's choice). With
    entrywise ``A`` each entry of the column has its own curvature ``A[i, j, j]``.

    The first sweep is the reference algorithm. Further sweeps ("until convergence" in the
    paper) are kept only while they lower the surrogate: without the column projection the
    linearised max-norm term can overshoot by a factor ``max_norm / jitter`` while ``A`` is
    rank-deficient, and repeating such sweeps diverges (docs/maxnorm.md).

    Returns a new matrix; the inputs are not modified.
    """
    current = _column_sweep(L, A, B, max_norm, frobenius, jitter, column_bound, tie_rtol)
    if n_sweeps > 1:
        value = max_norm_surrogate(current, A, B, max_norm=max_norm, frobenius=frobenius)
        for _ in range(n_sweeps - 1):
            candidate = _column_sweep(current, A, B, max_norm, frobenius, jitter, column_bound,
                                      tie_rtol)
            candidate_value = max_norm_surrogate(candidate, A, B, max_norm=max_norm,
                                                 frobenius=frobenius)
            if candidate_value > value + 1e-12 * abs(value):  # rounding is not an increase
                break
            current, value = candidate, candidate_value
    return current


def _column_sweep(L, A, B, max_norm, frobenius, jitter, column_bound, tie_rtol):
    L = tl.copy(L)
    U = max_row_norm_subgradient(L, tie_rtol) if max_norm else None
    entrywise = tl.ndim(A) == 3
    for j in range(tl.shape(L)[1]):
        if entrywise:
            gradient = tl.sum(L * A[:, :, j], axis=1) - B[:, j]
            curvature = A[:, j, j] + (jitter + frobenius)
        else:
            gradient = tl.dot(L, A[:, j]) - B[:, j]
            curvature = A[j, j] + (jitter + frobenius)
        if max_norm:
            gradient = gradient + max_norm * U[:, j]
        if frobenius:
            gradient = gradient + frobenius * L[:, j]
        column = L[:, j] - gradient / curvature
        if column_bound is not None:
            column = project_columns(column, nonnegative=False, column_bound=column_bound)
        L = tl.index_update(L, tl.index[:, j], column)
    return L


def max_norm_prox_gradient(
    L: Tensor, A: Tensor, B: Tensor, *, max_norm: float, jitter: float = 0.0,
    column_bound: float | None = None, n_iter: int = 3,
) -> Tensor:
    """Proximal-gradient steps on the basis surrogate (not in the paper; see docs/maxnorm.md).

    ``L <- prox_{(max_norm/Lip) 1/2 ||.||_{2,inf}^2}(L - (L A - B) / Lip)`` with ``Lip`` the
    spectral norm of ``A`` (the largest over rows when ``A`` is entrywise) plus ``jitter``: a
    matrix-level step, monotone on the surrogate and stable while ``A`` is rank-deficient.
    ``column_bound`` projects the columns after each step (a heuristic, as in the reference
    code; the exact prox of both terms together is not this).
    """
    values = tl.eigh(A)[0]
    lipschitz = float(tl.max(values)) + jitter
    if lipschitz <= 0:
        return tl.copy(L)
    for _ in range(n_iter):
        L = prox_max_row_norm(L - (_times_statistic(L, A) - B) / lipschitz,
                              max_norm / lipschitz)
        if column_bound is not None:
            L = project_columns(L, nonnegative=False, column_bound=column_bound)
    return L


# -- penalised, projected-gradient and ADMM dictionary steps (robust NMF, Zhao & Tan, IV-A2/B2) --
#
# They minimise, over a convex set given by its projection, the 1/2-scaled block surrogate
#     p(U) = 1/2 tr(U A U^T) - tr(U B^T) + l1 sum(U) + l2/2 ||U||_F^2 (+ constant),
# the linear l1 term being ||U||_1 on the nonnegative sets they are used with. With missing data
# A is entrywise, (I, R, R), and the quadratic is 1/2 sum_i u_i^T A_i u_i (row i of U has its own
# A_i): the gradient is row-wise A_i u_i - b_i, the same iterations apply row by row.


def penalty_value(loadings: Sequence[Tensor], l1: float = 0.0, l2: float = 0.0) -> float:
    """``sum_k l1 ||U^(k)||_1 + l2/2 ||U^(k)||_F^2``: the loadings' penalty on the 1/2 scale."""
    total = 0.0
    for U in loadings:
        if l1:
            total += l1 * float(tl.sum(tl.abs(U)))
        if l2:
            total += 0.5 * l2 * float(tl.sum(U * U))
    return total


def _half_surrogate(U: Tensor, UA: Tensor, B: Tensor, l1: float, l2: float,
                    constant: float) -> float:
    value = 0.5 * tl.sum(UA * U) - tl.sum(U * B)
    if l1:
        value = value + l1 * tl.sum(U)
    if l2:
        value = value + 0.5 * l2 * tl.sum(U * U)
    return float(value) + constant


def _frobenius_bound(A: Tensor) -> float:
    """``||A||_F`` of a shared ``(R, R)`` statistic, ``max_i ||A_i||_F`` of an entrywise one."""
    if tl.ndim(A) == 2:
        return float(tl.norm(A))
    flat = tl.reshape(A, (tl.shape(A)[0], -1))
    return float(tl.sqrt(tl.max(tl.sum(flat * flat, axis=1)))) if tl.shape(A)[0] else 0.0


def _stop(current: float, previous: float, tol: float) -> bool:
    """The paper's relative-decrease rule on a nonnegative objective (Zhao & Tan, VII-B2)."""
    return abs(current - previous) / max(abs(previous), 1e-300) < tol


def dictionary_pgd(
    U: Tensor, A: Tensor, B: Tensor, *, project: Callable[[Tensor], Tensor], l1: float = 0.0,
    l2: float = 0.0, constant: float = 0.0, kappa: float = 0.7, tol: float = 1e-4,
    max_iter: int = 200,
) -> tuple[Tensor, int]:
    """Projected gradient on the block surrogate (Zhao & Tan's OPGD W-step, eqs. 18-22).

    The step is ``kappa / (||A||_F + l2)``: the paper's Lipschitz bound ``||A||_F`` (not the
    ``L`` of the coding step, a typo in the paper), safe since ``lambda_max(A) <= ||A||_F``, so
    every step lowers the objective. ``constant`` (the surrogate's dictionary-free part) keeps the
    relative-decrease test's denominator positive. When ``A = 0`` and ``l2 = 0`` (no code used
    any atom) nothing is learned: ``U`` is returned as it is.

    Parameters
    ----------
    U : tensor of shape (I, R)
        Starting point (warm start: the previous dictionary), inside the set.
    A, B : tensors of shapes (R, R) (or entrywise (I, R, R)) and (I, R)
        The (block) statistics.
    project : callable
        Euclidean projection onto the constraint set.
    l1, l2, constant : float
        Penalty weights and the objective's constant.
    kappa, tol, max_iter : float, float, int
        Step fraction in (0, 1] and the paper's stopping rule (1e-4, 200).

    Returns
    -------
    U : tensor of shape (I, R)
    n_iter : int

    Examples
    --------
    >>> import numpy as np
    >>> from tensorstream.core.constraints import project_columns
    >>> ball = lambda U: project_columns(U, nonnegative=True, column_bound=1.0)
    >>> U, _ = dictionary_pgd(np.ones((2, 1)) / 2, np.eye(1), np.array([[3.0], [0.0]]),
    ...                       project=ball, tol=0, max_iter=100)
    >>> np.round(U, 6)
    array([[1.],
           [0.]])
    """
    # ||A||_F >= lambda_max(A): the paper's (conservative) constant, kept for fidelity (Zhao & Tan,
    # IV-A2); the coders use the exact spectral norm. Entrywise A: the Hessian is block-diagonal
    # with blocks A_i, so max_i ||A_i||_F bounds its norm (and equals ||A||_F when all A_i = A)
    curvature = _frobenius_bound(A) + l2
    if curvature <= 0:
        return U, 0
    step = kappa / curvature
    UA = _times_statistic(U, A)
    previous = _half_surrogate(U, UA, B, l1, l2, constant)
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        gradient = UA - B + l1 + l2 * U if (l1 or l2) else UA - B
        U = project(U - step * gradient)
        UA = _times_statistic(U, A)
        current = _half_surrogate(U, UA, B, l1, l2, constant)
        if _stop(current, previous, tol):
            break
        previous = current
    return U, n_iter


def dictionary_admm(
    U: Tensor, A: Tensor, B: Tensor, *, project: Callable[[Tensor], Tensor], l1: float = 0.0,
    l2: float = 0.0, constant: float = 0.0, rho: float = 1.0, tol: float = 1e-4,
    max_iter: int = 200,
) -> tuple[Tensor, int]:
    """ADMM on the block surrogate (Zhao & Tan's OADMM W-step, eqs. 31-35).

    Splitting ``W = Q`` with ``Q`` in the set; starts at ``W = Q = U`` (warm) and ``D = 0``;
    returns the feasible ``Q``, at which the stopping rule is evaluated. ``A + (l2 + rho) I``
    has eigenvalues of at least ``rho``; it is inverted once per call.

    Parameters
    ----------
    U, A, B, project, l1, l2, constant, tol, max_iter
        As in :func:`dictionary_pgd`.
    rho : float
        The penalty parameter ``rho3`` (> 0).

    Returns
    -------
    U : tensor of shape (I, R)
        The feasible iterate ``Q``.
    n_iter : int

    Examples
    --------
    ADMM reaches the projected gradient's solution (here the column bound caps ``[3, 0]``):

    >>> import numpy as np
    >>> from tensorstream.core.constraints import project_columns
    >>> A, B, U0 = np.eye(1), np.array([[3.0], [0.0]]), np.ones((2, 1)) / 2
    >>> ball = lambda U: project_columns(U, nonnegative=True, column_bound=1.0)
    >>> admm, _ = dictionary_admm(U0, A, B, project=ball, tol=0, max_iter=100)
    >>> pgd, _ = dictionary_pgd(U0, A, B, project=ball, tol=0, max_iter=100)
    >>> np.allclose(admm, pgd), np.round(admm.ravel(), 6)
    (True, array([1., 0.]))
    """
    inverse = shifted_inverse(A, l2 + rho)  # entrywise A: one inverse per row of U
    Q = U
    D = tl.zeros(tl.shape(U), **tl.context(U))
    target = B - l1 if l1 else B
    previous = _half_surrogate(Q, _times_statistic(Q, A), B, l1, l2, constant)
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        W = _times_statistic(target - D + rho * Q, inverse)  # the inverse is symmetric
        Q = project(W + D / rho)
        D = D + rho * (W - Q)
        current = _half_surrogate(Q, _times_statistic(Q, A), B, l1, l2, constant)
        if _stop(current, previous, tol):
            break
        previous = current
    return Q, n_iter


def surrogate_solver_step(
    loadings: Sequence[Tensor], A: Tensor, B: Tensor, c: float, *, solver: str,
    project: Callable[[Tensor], Tensor], l1: float = 0.0, l2: float = 0.0, kappa: float = 0.7,
    rho: float = 1.0, tol: float = 1e-4, max_iter: int = 200, radius: float | None = None,
    radius_mode: str = "frobenius",
) -> tuple[list[Tensor], int]:
    """One Gauss-Seidel cycle over the modes, each block solved by PGD or ADMM.

    For one mode (a matrix dictionary) this is Zhao & Tan's W-step on ``(A, B)``; for CP
    dictionaries each loading's block problem (:func:`block_statistics`) has the same form.
    ``c`` is the engine-scale constant of the surrogate (``c/2`` on the paper's scale); with it
    and the other loadings' penalties each block objective *is* the surrogate, so the stopping
    test is the paper's. ``radius`` restricts each loading's move as in
    :func:`surrogate_bcd_step`. Returns the new loadings and the total number of iterations.

    With entrywise ``A`` (missing data, ``(I_1..I_n, R, R)``) each loading row has its own
    quadratic (:func:`entrywise_block_statistics`), which both solvers take as it is.
    """
    if solver not in ("pgd", "admm"):
        raise ValueError(f"solver must be 'pgd' or 'admm', got {solver!r}")
    entrywise = tl.ndim(A) > 2  # statistics of data with missing entries
    new = list(loadings)
    total = 0
    for mode in range(len(new)):
        if entrywise:
            A_i, B_i = entrywise_block_statistics(A, B, new, mode)
        else:
            A_i, B_i = block_statistics(A, B, new, mode)
        others = penalty_value(new[:mode] + new[mode + 1:], l1, l2)
        options = dict(project=project, l1=l1, l2=l2, constant=0.5 * c + others,
                       tol=tol, max_iter=max_iter)
        if solver == "pgd":
            target, n_iter = dictionary_pgd(new[mode], A_i, B_i, kappa=kappa, **options)
        else:
            target, n_iter = dictionary_admm(new[mode], A_i, B_i, rho=rho, **options)
        new[mode] = limit_step(new[mode], target, radius, radius_mode)
        total += n_iter
    return new, total
