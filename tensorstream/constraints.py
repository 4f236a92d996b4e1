"""Constraint sets of the loadings and codes, and the search-radius restriction.

Projections are exact Euclidean projections, hence non-expansive, which the surrogate-descent
arguments rely on. Backend-agnostic (``tl.*`` only).
"""

from __future__ import annotations

from typing import Any

import tensorly as tl

Tensor = Any


def project_columns(U: Tensor, *, nonnegative: bool, column_bound: float | None) -> Tensor:
    """Project a matrix (or a single column) onto ``{U >= 0 (optional), ||U[:, r]||_2 <= bound}``.

    Clipping negatives and then shrinking each column radially is the exact projection onto
    the intersection of the orthant and a ball centred at 0 (the shrink keeps signs).
    """
    if nonnegative:
        U = tl.clip(U, 0, None)
    if column_bound is not None:
        norms = tl.norm(U, axis=0) if tl.ndim(U) == 2 else tl.norm(U)
        U = U / tl.clip(norms / column_bound, 1.0, None)
    return U


def limit_step(old: Tensor, new: Tensor, radius: float | None, mode: str = "frobenius") -> Tensor:
    """Move from ``old`` towards ``new`` by at most ``radius`` (segment back-off).

    ``mode="frobenius"`` bounds ``||U_t - U_{t-1}||_F`` (the paper's restriction);
    ``mode="column"`` bounds every column's step separately (the reference code's variant, so the
    whole matrix moves by at most ``sqrt(R) * radius``). Both endpoints lie in the convex
    constraint set, so the result does too; and because the block objective is convex along the
    segment and ``new`` is no worse than ``old``, the result is no worse than ``old`` either.
    """
    if radius is None:
        return new
    step = new - old
    if mode == "frobenius":
        length = tl.norm(step)
    elif mode == "column":
        length = tl.norm(step, axis=0)
    else:
        raise ValueError(f"radius_mode must be 'frobenius' or 'column', got {mode!r}")
    # the factor below is min(1, radius / length), written to be safe where length == 0
    scale = radius / tl.clip(length, radius, None)
    return old + step * scale
