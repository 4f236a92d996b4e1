"""Quality measures of a factorization."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._backend import to_numpy


def relative_error(X: Any, X_hat: Any) -> float:
    """``||X - X_hat||_F / ||X||_F`` (any backends; computed on the host in float64).

    Examples
    --------
    >>> relative_error(np.ones(4), np.zeros(4))
    1.0
    """
    X = np.asarray(to_numpy(X), dtype=float)
    X_hat = np.asarray(to_numpy(X_hat), dtype=float)
    if X.shape != X_hat.shape:
        raise ValueError(f"X and X_hat must have the same shape, got {X.shape} and {X_hat.shape}")
    norm = np.linalg.norm(X)
    if norm == 0:
        raise ValueError("X is zero: the relative error is undefined")
    return float(np.linalg.norm(X - X_hat) / norm)


def reconstruction_error(model: Any, X: Any) -> float:
    """Relative error of a fitted dictionary on ``X``, codes refitted by ``model.transform``.

    This is the paper's evaluation of an online CP dictionary on a full tensor: the sample-mode
    factor is recomputed by the coding step, then the CP model is compared with ``X``.
    """
    return relative_error(X, model.inverse_transform(model.transform(X)))
