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

from collections.abc import Sequence
from typing import Any

import tensorly as tl

from .constraints import limit_step, project_columns
from .cp_dictionary import contract_except, gram, inner_with_dictionary, pairs

Tensor = Any


def block_statistics(A: Tensor, B: Tensor, loadings: Sequence[Tensor], mode: int):
    """``(A_i, B_i)`` of the block problem of ``mode`` (spec Algorithm 3), Grams not atoms."""
    return A * gram(loadings, skip=mode), contract_except(B, loadings, mode)


def column_descent(
    U: Tensor, A_i: Tensor, B_i: Tensor, *, nonnegative: bool, column_bound: float | None,
    n_passes: int = 1,
) -> Tensor:
    """Passes of exact, projected column minimisation of ``tr(U A_i U^T) - 2 tr(U B_i^T)``.

    A column whose curvature ``A_i[r, r]`` is zero is an atom no code uses; it is left as it is.
    """
    U = tl.copy(U)
    curvature = [float(a) for a in tl.to_numpy(tl.diag(A_i))]
    scale = max(curvature + [0.0])
    for _ in range(n_passes):
        for r, a_rr in enumerate(curvature):
            if a_rr <= 1e-12 * scale or a_rr == 0.0:
                continue
            gradient = tl.dot(U, A_i[:, r]) - B_i[:, r]
            column = project_columns(U[:, r] - gradient / a_rr, nonnegative=nonnegative,
                                     column_bound=column_bound)
            U = tl.index_update(U, tl.index[:, r], column)
    return U


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


def surrogate_bcd_step(
    loadings: Sequence[Tensor], A: Tensor, B: Tensor, *, nonnegative: bool,
    column_bound: float | None, radius: float | None = None, radius_mode: str = "frobenius",
    n_passes: int = 1,
) -> list[Tensor]:
    """One Gauss-Seidel cycle over the modes (spec Algorithm 2, the loop over ``i``).

    Each mode's block statistics are recomputed with the freshest loadings of the modes before
    it. Returns new loadings; the inputs are not modified.
    """
    entrywise = tl.ndim(A) > 2  # statistics of data with missing entries
    new = list(loadings)
    for mode in range(len(new)):
        if entrywise:
            Q, B_i = entrywise_block_statistics(A, B, new, mode)
            target = weighted_column_descent(new[mode], Q, B_i, nonnegative=nonnegative,
                                             column_bound=column_bound, n_passes=n_passes)
        else:
            A_i, B_i = block_statistics(A, B, new, mode)
            target = column_descent(new[mode], A_i, B_i, nonnegative=nonnegative,
                                    column_bound=column_bound, n_passes=n_passes)
        new[mode] = limit_step(new[mode], target, radius, radius_mode)
    return new


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
