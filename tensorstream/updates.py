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
from .cp_dictionary import contract_except, gram, inner_with_dictionary

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


def surrogate_bcd_step(
    loadings: Sequence[Tensor], A: Tensor, B: Tensor, *, nonnegative: bool,
    column_bound: float | None, radius: float | None = None, radius_mode: str = "frobenius",
    n_passes: int = 1,
) -> list[Tensor]:
    """One Gauss-Seidel cycle over the modes (spec Algorithm 2, the loop over ``i``).

    Each mode's block statistics are recomputed with the freshest loadings of the modes before
    it. Returns new loadings; the inputs are not modified.
    """
    new = list(loadings)
    for mode in range(len(new)):
        A_i, B_i = block_statistics(A, B, new, mode)
        target = column_descent(new[mode], A_i, B_i, nonnegative=nonnegative,
                                column_bound=column_bound, n_passes=n_passes)
        new[mode] = limit_step(new[mode], target, radius, radius_mode)
    return new


def surrogate_value(A: Tensor, B: Tensor, c: float, loadings: Sequence[Tensor]) -> float:
    """``tr(A G(D)) - 2 <B, W(D)> + c``: the surrogate at the dictionary ``loadings``."""
    quadratic = tl.sum(A * gram(loadings))
    return float(quadratic - 2 * inner_with_dictionary(B, loadings)) + c
