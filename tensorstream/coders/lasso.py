"""The coding step: codes of a batch against a fixed dictionary (squared loss).

For each sample ``x`` (row of the batch) the codes solve the (nonnegative) elastic-net problem

    min_h  ||x - W h||^2 + alpha ||h||_1 + ridge ||h||^2        (h >= 0 when nonnegative)

which is the spec's eq. (9) convention (no factor 1/2 on the squared loss). Only the Gram
``G = W^T W`` (``R x R``) and the projections ``P = X W`` (``b x R``) enter, so the dictionary may
be a CP dictionary whose matrix is never formed.

The solver is exact cyclic coordinate descent (HALS): each code coordinate is minimised in closed
form, for all samples of the batch at once. It converges monotonically, needs no step size, and
copes with the strongly correlated atoms that nonnegative dictionaries have, where a projected
gradient method with step ``1/L`` crawls.
"""

from __future__ import annotations

from typing import Any

import tensorly as tl

Tensor = Any

_TINY = 1e-300  # keeps the division by a dead atom's zero curvature finite (its numerator is 0)


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
    """Codes of a batch by cyclic coordinate descent.

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
        Warm start; zeros otherwise.
    max_iter : int
        Maximum number of sweeps over the R coordinates.
    tol : float
        A sample stops when none of its codes moved by more than ``tol`` times its largest
        code in a sweep (per sample: a code does not depend on the rest of the batch).

    Returns
    -------
    codes : tensor of shape (b, R)
    n_sweeps : int
        Sweeps performed.

    Examples
    --------
    >>> import numpy as np
    >>> W = np.array([[1.0, 0.0], [0.0, 2.0]])
    >>> X = np.array([[3.0, 4.0]])
    >>> codes, _ = sparse_code(W.T @ W, X @ W)
    >>> np.round(codes, 6)
    array([[3., 2.]])
    """
    R = tl.shape(gram)[-1]
    per_sample = tl.ndim(gram) == 3
    codes = _initial_codes(gram, projections, alpha, ridge, nonnegative) if init is None \
        else tl.copy(init)
    curvature = tl.clip(_diagonal(gram) + ridge, _TINY, None)  # (R,) or (b, R)
    threshold = alpha / (2 * curvature)
    n_sweeps = 0
    # each sample stops on its own: a code never depends on the other samples of its batch
    running = None  # (b, 1) 1.0 while the sample is not converged
    while n_sweeps < max_iter:
        n_sweeps += 1
        previous = tl.copy(codes)
        for k in range(R):
            # minimiser in coordinate k with the others fixed: remove k's own contribution
            if per_sample:
                coupling = tl.sum(gram[:, :, k] * codes, axis=1) - gram[:, k, k] * codes[:, k]
                step = (projections[:, k] - coupling) / curvature[:, k]
                new = _shrink(step, threshold[:, k], nonnegative)
            else:
                coupling = tl.dot(codes, gram[:, k]) - gram[k, k] * codes[:, k]
                step = (projections[:, k] - coupling) / curvature[k]
                new = _shrink(step, threshold[k], nonnegative)
            codes = tl.index_update(codes, tl.index[:, k], new)
        if running is not None:  # converged samples keep the codes they converged to
            codes = previous + running * (codes - previous)
        moves = tl.max(tl.abs(codes - previous), axis=1)
        sizes = tl.clip(tl.max(tl.abs(codes), axis=1), _TINY, None)
        still = tl.reshape(tl.tensor(moves > tol * sizes, **tl.context(codes)), (-1, 1))
        running = still if running is None else running * still
        if not bool(tl.any(running > 0)):
            break
    return codes, n_sweeps


def _initial_codes(gram: Tensor, projections: Tensor, alpha: float, ridge: float,
                   nonnegative: bool) -> Tensor:
    """A cheap start: the (slightly regularised) least-squares codes, shrunk and projected.

    Close to the solution when few constraints are active, which saves most sweeps; the
    regularisation keeps the solve defined when atoms are dead or collinear.
    """
    R = tl.shape(gram)[-1]
    eye = tl.eye(R, **tl.context(gram))
    damping = ridge + 1e-10 * float(tl.max(tl.abs(gram))) + _TINY
    if tl.ndim(gram) == 3:  # one system per sample
        solution = tl.solve(gram + damping * eye, projections[:, :, None])[:, :, 0]
    else:
        solution = tl.transpose(tl.solve(gram + damping * eye, tl.transpose(projections)))
    return _shrink(solution, alpha / (2 * (_diagonal(gram) + damping)), nonnegative)


def _diagonal(gram: Tensor) -> Tensor:
    """Diagonal of a Gram, ``(R,)``, or of each per-sample Gram, ``(b, R)``."""
    return tl.diag(gram) if tl.ndim(gram) == 2 else tl.einsum("skk->sk", gram)


def _shrink(value: Tensor, threshold: Tensor, nonnegative: bool) -> Tensor:
    """Proximal map of ``threshold * |.|`` (plus the orthant when nonnegative)."""
    if nonnegative:
        return tl.clip(value - threshold, 0, None)
    return tl.sign(value) * tl.clip(tl.abs(value) - threshold, 0, None)


def sample_losses(
    sq_norms: Tensor, gram: Tensor, projections: Tensor, codes: Tensor,
    *, alpha: float = 0.0, ridge: float = 0.0,
) -> Tensor:
    """Per-sample losses ``||x - W h||^2 + alpha ||h||_1 + ridge ||h||^2`` without forming ``W h``.

    Uses ``||x - W h||^2 = ||x||^2 - 2 h^T W^T x + h^T G h``; ``sq_norms`` holds ``||x||^2``
    (with missing entries: of the observed part, and ``gram`` the per-sample Grams).
    """
    if tl.ndim(gram) == 3:
        quadratic = tl.sum(tl.sum(gram * codes[:, None, :], axis=2) * codes, axis=1)
    else:
        quadratic = tl.sum(tl.dot(codes, gram) * codes, axis=1)
    losses = sq_norms - 2 * tl.sum(codes * projections, axis=1) + quadratic
    if alpha:
        losses = losses + alpha * tl.sum(tl.abs(codes), axis=1)
    if ridge:
        losses = losses + ridge * tl.sum(codes * codes, axis=1)
    return losses
