"""Principal component pursuit (batch robust PCA) by the inexact augmented Lagrangian method.

``min ||A||_* + outlier_alpha ||E||_1 s.t. Z = A + E`` (Candes, Li, Ma & Wright 2011) by the
algorithm of Lin, Chen & Ma (2010) as the max-norm authors' bundled ``inexact_alm_rpca.m`` runs
it; :class:`~tensorstream.learners.robust_pca.RobustPCA` is the estimator around
:func:`principal_component_pursuit`. Each iteration thresholds the singular values of the whole
matrix (from its Gram matrix, see :func:`singular_value_threshold`), so iterations are passes
over the data.
"""

from __future__ import annotations

import math
from typing import Any

import tensorly as tl

from ..core.backend import finfo_of, linalg_errors
from ..core.dictionary import spectral_norm_psd
from ..core.validation import check_overflow, largest_entry


def principal_component_pursuit(Z: Any, *, outlier_alpha: float | None, tol: float,
                                change_tol: float, rho: float, max_iter: int
                                ) -> tuple[Any, Any, int, Any, Any]:
    """``(low rank, sparse, iterations, singular values, right singular vectors)`` of ``Z``.

    Solved on ``Z`` divided by the power of two just below its largest entry: the norms
    under- or overflowed at the data's own scale (entries of 1e-160 gave a zero split, a
    largest-float entry an SVD that did not converge). A power of two divides exactly, and the
    stopping rule is kept in the data's units, so data at ordinary scales get bit for bit what
    they got unscaled.

    Parameters
    ----------
    Z : tensor of shape (n_samples, n_features)
    outlier_alpha : float or None
        Weight of ``||E||_1``; None is ``1/sqrt(max(n_samples, n_features))``.
    tol, change_tol, rho, max_iter
        The stopping rule and the growth of ``mu`` (:func:`inexact_alm`).
    """
    largest = largest_entry(Z)
    factor = math.ldexp(0.5, math.frexp(largest)[1]) if largest > 0 else 1.0
    try:
        A, E, n_iter = inexact_alm(Z / factor, outlier_alpha=outlier_alpha, tol=tol,
                                   change_tol=change_tol, rho=rho, max_iter=max_iter,
                                   units=factor)
        _, s, Vt = tl.svd(A, full_matrices=False)
    except linalg_errors() as error:
        raise ValueError(f"X: the singular value decomposition did not converge ({error}); "
                         f"the data are too ill-conditioned for this model. Check X for "
                         f"extreme entries or rescale them") from None
    A, E, s = A * factor, E * factor, s * factor
    # the sparse part of a largest-float entry can round beyond it when scaled back
    check_overflow((A, E))
    return A, E, n_iter, s, Vt


def inexact_alm(Z: Any, *, outlier_alpha: float | None, tol: float, change_tol: float,
                rho: float, max_iter: int, units: float = 1.0) -> tuple[Any, Any, int]:
    """Inexact ALM on ``Z``, the data divided by ``units``: ``(A, E, iterations)``.

    ``Y_0 = Z / max(||Z||_2, ||Z||_inf / outlier_alpha)``, ``mu_0 = 1.25 / ||Z||_2``, then
    alternately soft-thresholding for ``E`` and singular value thresholding at ``1/mu`` for
    ``A``; ``mu`` grows by ``rho`` (up to ``1e9 mu_0``) when the low-rank part has settled
    (``mu ||A_k - A_{k-1}||_F / ||Z||_F < change_tol``, taken in the data's units: the
    reference's rule is not scale-free, it scales as 1/data). Stops when that and ``||Z - A -
    E||_F / ||Z||_F < tol`` both hold, or after ``max_iter`` iterations. ``tol`` is floored at
    ``TOL_FLOOR`` machine epsilons of ``Z``'s dtype: rounding alone keeps the residual of
    float32 data about its default 1e-7 (every fit ran to ``max_iter``, most of it on the SVD
    path); float64 is far from the floor.
    """
    n, p = Z.shape
    alpha = 1.0 / math.sqrt(max(n, p)) if outlier_alpha is None else float(outlier_alpha)
    norm_fro = float(tl.norm(Z))
    if norm_fro == 0:
        return Z * 0, Z * 0, 0
    tol = max(tol, TOL_FLOOR * float(finfo_of(Z).eps))
    norm_two = spectral_norm(Z)
    Y = Z / max(norm_two, float(tl.max(tl.abs(Z))) / alpha)
    mu = 1.25 / norm_two
    mu_max = 1e9 * mu
    A = Z * 0
    scaled = Y / mu  # the multiplier over mu, all the loop needs of it
    for iteration in range(1, max_iter + 1):
        # E = S(Z + Y/mu - A) is residual - clipped, so Z + Y/mu - E = A + clipped: E itself is
        # needed only by the stopping test (one pass over the data saved per iteration)
        residual = Z + scaled - A
        clipped = tl.clip(residual, -alpha / mu, alpha / mu)
        target = A + clipped
        A_new = singular_value_threshold(target, 1.0 / mu)
        # (Y + mu (Z - A_new - E)) / mu with Z - E = target - Y / mu: one pass
        scaled = target - A_new
        change = mu * _frobenius(A_new - A) / norm_fro / units
        A = A_new
        if change < change_tol:
            E = residual - clipped
            if _frobenius(Z - A - E) / norm_fro < tol:
                return A, E, iteration
            grown = min(rho * mu, mu_max)
            scaled, mu = scaled * (mu / grown), grown
    return A, residual - clipped, max_iter


def spectral_norm(M: Any) -> float:
    """``||M||_2``, the largest singular value, as the square root of the top eigenvalue of
    the Gram matrix of ``M``'s shorter side.

    The top eigenvalue of a symmetric matrix is found to ``eps`` relative to itself, so ``s_1``
    is as accurate as the thin SVD's (its square root halves the error), at one product and
    one small eigendecomposition instead of the SVD's several passes over ``M``.
    """
    if tl.ndim(M) != 2:
        raise ValueError(f"M must be a matrix, got shape {tuple(tl.shape(M))}")
    n, p = M.shape
    gram = tl.dot(M, tl.transpose(M)) if n <= p else tl.dot(tl.transpose(M), M)
    return math.sqrt(spectral_norm_psd(gram))


def _frobenius(x: Any) -> float:
    """``||x||_F`` as one dot product of the flattened ``x`` with itself (``tl.norm`` makes
    three passes: the absolute values, their squares, the sum)."""
    flat = tl.reshape(x, (-1,))
    return math.sqrt(float(tl.dot(flat, flat)))


def singular_value_threshold(M: Any, threshold: float) -> Any:
    """``U max(S - threshold, 0) V^T``: the proximal map of ``threshold ||.||_*``.

    From the eigendecomposition of the Gram matrix of ``M``'s shorter side (``M M^T`` or
    ``M^T M``) when that is accurate enough, else from the thin SVD (:func:`_svt_by_svd`).
    The Gram path gives every singular value, so the thresholding stays exact (every value
    above the threshold is kept, no predicted rank); it costs one product with the data and
    two products with the kept vectors against the several passes of a full SVD.
    """
    n, p = M.shape
    eps = float(finfo_of(M).eps)
    wide = n <= p
    gram = tl.dot(M, tl.transpose(M)) if wide else tl.dot(tl.transpose(M), M)
    eigenvalues, W = tl.eigh(gram)  # ascending
    largest = float(eigenvalues[-1])
    if largest <= 0:
        return M * 0
    # squaring the singular values makes a value s known to about eps s_1^2 / s: with every
    # kept value above GRAM_FLOOR sqrt(eps) s_1 that is under sqrt(eps) s_1 / GRAM_FLOOR
    # (1.5e-10 s_1 in float64, a thousandth of the default tol); below, the SVD is accurate
    if threshold < GRAM_FLOOR * math.sqrt(eps * largest):
        return _svt_by_svd(M, threshold)
    # s > threshold as s^2 > threshold^2: square roots of the kept values only
    keep = int(tl.sum(eigenvalues > threshold * threshold))
    if keep == 0:
        return M * 0
    side = min(n, p)
    W = W[:, side - keep:]
    shrink = 1 - threshold / tl.sqrt(eigenvalues[side - keep:])
    if 2 * keep > side:
        # one product with the data through the small projector W diag(shrink) W^T
        projector = tl.dot(W * shrink, tl.transpose(W))
        return tl.dot(projector, M) if wide else tl.dot(M, projector)
    if wide:
        return tl.dot(W * shrink, tl.dot(tl.transpose(W), M))
    return tl.dot(tl.dot(M, W) * shrink, tl.transpose(W))


#: the residual tolerance is at least this many machine epsilons of the data's dtype
TOL_FLOOR = 10.0

#: the Gram path runs while the threshold is above ``GRAM_FLOOR sqrt(eps) s_1``
GRAM_FLOOR = 100.0

def _svt_by_svd(M: Any, threshold: float) -> Any:
    """:func:`singular_value_threshold` from the thin SVD of ``M``."""
    U, s, Vt = tl.svd(M, full_matrices=False)
    keep = int(tl.sum(s > threshold))
    if keep == 0:
        return M * 0
    return tl.dot(U[:, :keep] * (s[:keep] - threshold), Vt[:keep])
