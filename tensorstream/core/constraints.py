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


# -- proximal maps and further projections (robust NMF, Zhao & Tan, sections IV and VI) ---------


def soft_threshold(x: Tensor, threshold: float) -> Tensor:
    """``S_t(x) = sign(x) max(|x| - t, 0)``, entrywise: the proximal map of ``t ||.||_1``.

    Examples
    --------
    >>> import numpy as np
    >>> soft_threshold(np.array([-2.0, 0.5, 3.0]), 1.0)
    array([-1.,  0.,  2.])
    """
    # x - clip(x, -t, t) is sign(x) max(|x| - t, 0) to the last bit (zeros may lose their
    # sign), in two passes over x instead of four: it is on the robust solvers' inner loops
    return x - tl.clip(x, -threshold, threshold)


def prox_l1_box(x: Tensor, threshold: float, bound: float | None,
                nonnegative: bool = False) -> Tensor:
    """Minimiser of ``1/2 (x - r)^2 + t |r|`` over ``|r| <= bound`` (``0 <= r`` if nonnegative).

    Zhao & Tan's ``S~_{lambda, M}`` (eq. 17): soft-thresholding, then clipping to the box, is the
    exact minimiser because the objective is separable and convex in every entry (Lemma S-3).
    ``bound=None`` means no box.

    Examples
    --------
    >>> import numpy as np
    >>> prox_l1_box(np.array([-3.0, 0.2, 1.5]), 0.5, 1.0)
    array([-1.,  0.,  1.])
    """
    if nonnegative:
        return tl.clip(x - threshold, 0, bound)
    r = soft_threshold(x, threshold)
    return r if bound is None else tl.clip(r, -bound, bound)


def _sorted_descending(U: Tensor) -> Tensor:
    return tl.flip(tl.sort(U, axis=0), axis=0)


def _ranks(U: Tensor) -> Tensor:
    """``(n, 1)`` tensor holding ``1, 2, ..., n`` for the rows of ``U`` (same dtype/device)."""
    n = tl.shape(U)[0]
    return tl.reshape(tl.cumsum(tl.ones((n,), **tl.context(U)), axis=0), (n, 1))


def project_simplex_columns(U: Tensor, total: float = 1.0) -> Tensor:
    """Project every column onto ``{w >= 0, sum(w) = total}`` (Zhao & Tan's set ``C2``, VI-A).

    The sort-based algorithm (Duchi et al. 2008), vectorised over the columns: with ``u`` the
    column sorted in decreasing order, the threshold is ``theta = (sum_{i<=k} u_i - total) / k``
    for the largest ``k`` with ``u_k > theta_k``, and the projection is ``max(w - theta, 0)``.

    Examples
    --------
    >>> import numpy as np
    >>> project_simplex_columns(np.array([[0.5, 2.0], [0.1, -1.0]]))
    array([[0.7, 1. ],
           [0.3, 0. ]])
    """
    matrix = tl.ndim(U) == 2
    V = U if matrix else tl.reshape(U, (-1, 1))
    # shifted so that every column's largest entry is 0 (the projection does not change): the
    # thresholds then stay at the scale of total, which a column far larger (or far more
    # negative) than total would otherwise round away (float32 [1e8, 0] projected to inf)
    V = V - tl.reshape(tl.max(V, axis=0), (1, -1))
    u = _sorted_descending(V)
    k = _ranks(V)
    thresholds = (tl.cumsum(u, axis=0) - total) / k
    # the valid k form a prefix (u_k - theta_k is positive then non-positive), and the last
    # valid k gives the largest threshold among the valid ones; k = 1 always is valid
    valid = ((u - thresholds) > 0) | (k == 1)
    theta = tl.max(tl.where(valid, thresholds, thresholds[0:1]), axis=0)  # k = 1's is valid
    W = tl.clip(V - tl.reshape(theta, (1, -1)), 0, None)
    return W if matrix else tl.reshape(W, tl.shape(U))


def elastic_net_norm(U: Tensor, gamma1: float, gamma2: float) -> Tensor:
    """``gamma1 ||w||_1 + gamma2 / 2 ||w||_2^2`` of every column."""
    return gamma1 * tl.sum(tl.abs(U), axis=0) + 0.5 * gamma2 * tl.sum(U * U, axis=0)


def project_elastic_net_columns(U: Tensor, gamma1: float, gamma2: float) -> Tensor:
    """Project every column onto ``{w >= 0, gamma1 ||w||_1 + gamma2/2 ||w||^2 <= 1}`` (``C3``).

    A column whose positive part is feasible is that positive part. Otherwise the KKT conditions
    give ``w = max(y - theta gamma1, 0) / (1 + theta gamma2)`` for the ``theta > 0`` that puts
    ``w`` on the boundary. With the support fixed to the ``k`` largest entries, the boundary
    equation is a quadratic in ``theta``; its positive root is computed for every ``k`` at once
    and the one whose support is consistent is kept (exact, no bisection).

    Examples
    --------
    >>> import numpy as np
    >>> W = project_elastic_net_columns(np.array([[3.0, 0.2], [1.0, 0.1]]), 0.5, 1.0)
    >>> np.round(elastic_net_norm(W, 0.5, 1.0), 12)
    array([1.   , 0.175])
    """
    if gamma1 < 0 or gamma2 < 0 or gamma1 == gamma2 == 0:
        raise ValueError(f"gamma1, gamma2 must be >= 0 and not both 0, got {gamma1}, {gamma2}")
    matrix = tl.ndim(U) == 2
    V = tl.clip(U if matrix else tl.reshape(U, (-1, 1)), 0, None)
    u = _sorted_descending(V)
    k = _ranks(V)
    s1, s2 = tl.cumsum(u, axis=0), tl.cumsum(u * u, axis=0)
    # P theta^2 + Q theta - S = 0 with the support of size k (derivation in docs/nmf.md)
    P = k * gamma1**2 * gamma2 / 2 + gamma2**2
    Q = k * gamma1**2 + 2 * gamma2
    S = gamma1 * s1 + gamma2 * s2 / 2 - 1
    if gamma2 > 0:
        theta_k = (tl.sqrt(tl.clip(Q * Q + 4 * P * S, 0, None)) - Q) / (2 * P)
    else:
        theta_k = S / Q
    below = tl.concatenate([u[1:], tl.zeros((1, tl.shape(u)[1]), **tl.context(u))], axis=0)
    cut = theta_k * gamma1
    consistent = (u > cut) & (below <= cut) & (S > 0)
    theta = tl.clip(tl.max(tl.where(consistent, theta_k, tl.zeros(tl.shape(u), **tl.context(u))),
                           axis=0), 0, None)
    W = tl.clip(V - gamma1 * theta, 0, None) / (1 + gamma2 * theta)
    # rounding can leave a boundary column a few ulps outside; pull it back radially
    excess = tl.clip(elastic_net_norm(W, gamma1, gamma2), 1.0, None)
    W = W / excess
    return W if matrix else tl.reshape(W, tl.shape(U))


# -- the max-norm penalty 1/2 ||L||_{2,inf}^2 (Shen, Xu & Li, eq. (3.11), and its exact prox) ---


def max_row_norm_subgradient(L: Tensor, rtol: float = 0.0) -> Tensor:
    """A subgradient ``diag(mu) L`` of ``1/2 ||L||_{2,inf}^2 = 1/2 max_i ||L[i, :]||^2``.

    ``mu`` is uniform over the rows that attain the largest norm and zero elsewhere (the
    reference code's choice; Shen, Xu & Li, (3.11)); ties are exact equalities unless ``rtol > 0``
    (rows within ``rtol`` of the largest squared norm count as ties).

    Examples
    --------
    >>> import numpy as np
    >>> max_row_norm_subgradient(np.array([[3.0, 4.0], [1.0, 0.0], [0.0, 5.0]]))
    array([[1.5, 2. ],
           [0. , 0. ],
           [0. , 2.5]])
    """
    squared = tl.sum(L * L, axis=1)
    on_top = squared >= tl.max(squared) * (1 - rtol)
    weights = tl.where(on_top, tl.ones(tl.shape(squared), **tl.context(L)),
                       tl.zeros(tl.shape(squared), **tl.context(L)))
    return L * tl.reshape(weights / tl.sum(weights), (-1, 1))


def prox_max_row_norm(V: Tensor, tau: float) -> Tensor:
    """Proximal map of ``tau/2 ||.||_{2,inf}^2``: every row clipped to one common radius ``s``.

    ``argmin_L 1/2 ||L - V||_F^2 + tau/2 max_i ||L[i, :]||^2`` keeps the rows shorter than ``s``
    and shrinks the others radially to ``s``. With the row norms sorted, ``n_1 >= n_2 >= ...``,
    ``s = (n_1 + ... + n_k) / (tau + k)`` for the largest ``k`` with ``n_k > s_k``; those ``k``
    form a prefix, on which ``s_k`` increases (as in the sort-based simplex projection).

    Examples
    --------
    >>> import numpy as np
    >>> prox_max_row_norm(np.array([[3.0, 4.0], [0.0, 1.0]]), 1.0)
    array([[1.5, 2. ],
           [0. , 1. ]])
    """
    if tau == 0:
        return V
    norms = tl.norm(V, axis=1)
    ordered = tl.flip(tl.sort(norms, axis=0), axis=0)
    candidates = tl.cumsum(ordered, axis=0) / (tau + tl.cumsum(tl.ones(tl.shape(norms),
                                                                       **tl.context(V)), axis=0))
    valid = ordered > candidates
    radius = tl.max(tl.where(valid, candidates, tl.zeros(tl.shape(norms), **tl.context(V))))
    scale = radius / tl.clip(norms, radius, None) if float(radius) > 0 else norms * 0
    return V * tl.reshape(scale, (-1, 1))


def project_rows_box_sum(U: Any, upper: float = 1.0, row_min: float = 1e-8) -> Any:
    """Project every row of ``U`` onto ``{0 <= w <= upper, sum(w) >= row_min}`` (the paper's C).

    Clip to ``[0, upper]``; rows whose clipped sum is below ``row_min`` are instead projected
    (from the unclipped row) onto the scaled simplex ``{w >= 0, sum(w) = row_min}`` (Zhao, Tan &
    Xu, section S-1).

    Parameters
    ----------
    U : tensor of shape (I, R)
    upper : float, default 1.0
    row_min : float, default 1e-8
        Must be ``<= upper``.

    Returns
    -------
    tensor of shape (I, R)

    Examples
    --------
    >>> import numpy as np
    >>> project_rows_box_sum(np.array([[2.0, -1.0], [-1.0, -2.0]]), row_min=0.5)
    array([[1. , 0. ],
           [0.5, 0. ]])
    """
    clipped = tl.clip(U, 0.0, upper)
    if row_min is None or row_min <= 0:
        return clipped
    small = tl.sum(clipped, axis=1) < row_min
    if not bool(tl.any(small)):
        return clipped
    # only the small rows are projected (the sort is the costly part; they are often few)
    simplex = tl.transpose(project_simplex_columns(tl.transpose(U[small]), total=row_min))
    return tl.index_update(clipped, tl.index[small], simplex)
