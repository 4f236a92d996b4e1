"""Quality measures of a factorization."""

from __future__ import annotations

from typing import Any

import numpy as np

from .core.backend import to_numpy


def relative_error(X: Any, X_hat: Any) -> float:
    """``||X - X_hat||_F / ||X||_F`` (any backends; computed on the host in float64).

    Parameters
    ----------
    X, X_hat : array or backend tensor
        The reference and its approximation, of the same shape; ``X`` must not be zero.

    Returns
    -------
    float

    Examples
    --------
    >>> relative_error(np.ones(4), np.zeros(4))
    1.0
    """
    X = np.asarray(to_numpy(X), dtype=float)
    X_hat = np.asarray(to_numpy(X_hat), dtype=float)
    if X.shape != X_hat.shape:
        raise ValueError(f"X and X_hat must have the same shape, got {X.shape} and {X_hat.shape}")
    # both norms of the data divided by its largest entry: squares of entries near 1e200 (or
    # 1e-200) overflow (underflow) inside the norm, the ratio does not
    scale = float(np.max(np.abs(X))) if X.size else 0.0
    if scale == 0:
        raise ValueError("X is zero: the relative error is undefined")
    return float(np.linalg.norm((X - X_hat) / scale) / np.linalg.norm(X / scale))


def reconstruction_error(model: Any, X: Any) -> float:
    """Relative error of a fitted dictionary on ``X``, codes refitted by ``model.transform``.

    This is the paper's evaluation of an online CP dictionary on a full tensor: the sample-mode
    factor is recomputed by the coding step, then the CP model is compared with ``X``.

    Parameters
    ----------
    model : learner
        A fitted learner with ``transform`` and ``inverse_transform`` (e.g. ``OnlineCPDL``).
    X : array or backend tensor
        Samples on the first axis.

    Returns
    -------
    float
        ``relative_error(X, model.inverse_transform(model.transform(X)))``.
    """
    return relative_error(X, model.inverse_transform(model.transform(X)))


def expressed_variance(L_true: Any, L_est: Any) -> float:
    """Expressed variance ``EV(U, L) = tr(Q^T U U^T Q) / tr(U U^T)`` with ``Q = orth(L)``.

    The subspace-recovery measure of the max-norm paper (Shen, Xu & Li 2014, eq. (6.1)), as its code
    computes it: ``L_est`` (``p x d``, basis vectors as columns, e.g. ``model.loadings_[0]``) is
    first replaced by an orthonormal basis of its range, from an SVD that drops directions
    below the rank tolerance ``max(p, d) * eps * s_max`` (so a rank-deficient ``L_est`` scores
    less). With an orthonormal ``U`` this is the mean squared cosine of the principal angles, in
    [0, 1]; a random ``d``-dimensional subspace scores about ``d / p``.

    Parameters
    ----------
    L_true : array of shape (p, r)
        The planted basis ``U`` (columns).
    L_est : array of shape (p, d)
        The estimated basis ``L`` (columns; need not be orthonormal).

    Returns
    -------
    float
        In [0, 1] for an orthonormal ``L_true``.

    Examples
    --------
    >>> U = np.eye(4)[:, :2]
    >>> round(expressed_variance(U, U @ np.array([[2.0, 1.0], [0.0, 3.0]])), 12)
    1.0
    >>> expressed_variance(U, np.eye(4)[:, 2:])
    0.0
    """
    U = np.asarray(to_numpy(L_true), dtype=float)
    L = np.asarray(to_numpy(L_est), dtype=float)
    if U.ndim != 2 or L.ndim != 2 or U.shape[0] != L.shape[0]:
        raise ValueError(f"L_true and L_est must be matrices with the same number of rows, got "
                         f"shapes {U.shape} and {L.shape}")
    scale = float(np.max(np.abs(U))) if U.size else 0.0  # the ratio does not depend on it
    if scale == 0:
        raise ValueError("L_true is zero: the expressed variance is undefined")
    U = U / scale
    normalizer = np.linalg.norm(U) ** 2
    left, singular, _ = np.linalg.svd(L, full_matrices=False)
    tolerance = max(L.shape) * np.finfo(float).eps * (singular[0] if singular.size else 0.0)
    Q = left[:, singular > tolerance]
    return float(np.linalg.norm(U.T @ Q) ** 2 / normalizer)
