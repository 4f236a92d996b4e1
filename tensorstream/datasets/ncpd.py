"""Tensors of the online CP-dictionary learning paper (Lyu, Strohmeier & Needell 2022).

Every tensor is returned with its *sample* mode first (the library's convention); the paper
streams slices of its last mode, so the paper's last mode is moved to the front.
"""

from __future__ import annotations

import numpy as np


def _planted(factors: list[np.ndarray], scale: float = 1.0) -> np.ndarray:
    """``scale * sum_r f1[:, r] o f2[:, r] o f3[:, r]``, with the last mode moved first."""
    X = scale * np.einsum("ir,jr,kr->ijk", *factors)
    return np.ascontiguousarray(np.moveaxis(X, -1, 0))


def synthetic_ncpd_tensor() -> np.ndarray:
    """The paper's synthetic benchmark tensor ``X_synth`` (100 x 100 x 100), samples first.

    ``V_k`` (100 x 50) has i.i.d. U[0, 1) entries from the legacy generator seeded with ``k``
    (k = 1, 2, 3, in that order) and ``X = 0.01 sum_r V_1[:, r] o V_2[:, r] o V_3[:, r]``: CP rank
    at most 50, fitted with rank 5, so the best relative error is about 0.0745.
    ``||X||_F = 62.6133``, mean entry 0.061724.

    Returns
    -------
    ndarray of shape (100, 100, 100)
        ``X[j]`` is the paper's ``j``-th last-mode slice.

    Examples
    --------
    >>> X = synthetic_ncpd_tensor()
    >>> round(float(np.linalg.norm(X)), 4)
    62.6133
    """
    factors = [np.random.RandomState(k).rand(100, 50) for k in (1, 2, 3)]
    return _planted(factors, scale=0.01)


def low_rank_tensor(shape: tuple[int, int, int] = (100, 100, 100), rank: int = 5,
                    random_state: int = 7) -> tuple[np.ndarray, list[np.ndarray]]:
    """An exactly rank-``rank`` nonnegative tensor, samples first.

    ``V_k`` has i.i.d. U[0, 1) entries drawn from ``default_rng(random_state)`` in mode order;
    ``X = sum_r V_1[:, r] o V_2[:, r] o V_3[:, r]`` with its last mode moved first.

    Parameters
    ----------
    shape : tuple of 3 int, default (100, 100, 100)
        The tensor's shape in the paper's mode order (its last mode holds the samples).
    rank : int, default 5
    random_state : int, default 7

    Returns
    -------
    X : ndarray of shape (shape[2], shape[0], shape[1])
        The tensor, samples first.
    factors : list of ndarray
        The planted ``V_1, V_2, V_3`` (in the paper's mode order).
    """
    rng = np.random.default_rng(random_state)
    factors = [rng.random((size, rank)) for size in shape]
    return _planted(factors), factors


def nonnegative_tensor_stream(n_batches: int, batch_size: int,
                              sample_shape: tuple[int, ...] = (10, 12, 8),
                              random_state: int | None = 0) -> list[np.ndarray]:
    """Random nonnegative mini-batches ``(batch_size, *sample_shape)``.

    Parameters
    ----------
    n_batches, batch_size : int
    sample_shape : tuple of int, default (10, 12, 8)
    random_state : int, optional

    Returns
    -------
    list of ndarray
        ``n_batches`` arrays of i.i.d. U[0, 1) entries.
    """
    rng = np.random.default_rng(random_state)
    return [rng.random((batch_size, *sample_shape)) for _ in range(n_batches)]
