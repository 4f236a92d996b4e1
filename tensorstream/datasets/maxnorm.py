"""Synthetic data of the max-norm paper (Shen, Xu & Li 2014, section 6, "Data Generation").

The authors' generator (``js_gen_data.m``), which made the paper's figures: a low-rank matrix
``X = U V^T`` with an orthonormalized ``U`` plus a sparse corruption ``E`` with exactly
``round(rho p n)`` nonzero entries, uniform on ``[-magnitude, magnitude]`` at uniformly random
positions. Samples are returned on the first axis (the paper's columns ``z_t`` are rows here),
in the order the paper streams them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class CorruptedLowRank(NamedTuple):
    """A corrupted low-rank data set; every matrix has the samples on its first axis."""

    Z: np.ndarray  #: (n, p) observed samples, ``X + E``
    X: np.ndarray  #: (n, p) clean low-rank part, ``V U^T``
    E: np.ndarray  #: (n, p) sparse corruption
    U: np.ndarray  #: (p, d) true basis (orthonormal columns by default)
    V: np.ndarray  #: (n, d) true coefficients


def corrupted_low_rank(n_features: int = 400, rank: int = 80, n_samples: int = 5000,
                       corruption: float = 0.3, *, magnitude: float = 1000.0,
                       orthonormal_basis: bool = True,
                       random_state: int | np.random.Generator | None = 0) -> CorruptedLowRank:
    """The paper's synthetic robust-subspace data (defaults: the Figure-4 setting, rho = 0.3).

    Draws, in this order from ``numpy.random.default_rng(random_state)``: ``U`` (``p x d``
    standard normal, then replaced by the left singular vectors, as MATLAB's ``orth``, unless
    ``orthonormal_basis=False``), ``V`` (``n x d`` standard normal), the positions of the
    ``round(rho p n)`` corrupted entries (without replacement) and their values
    ``U[-magnitude, magnitude]``.

    With an orthonormal ``U`` clean entries have variance about ``d/p`` and ``||x_t|| ~ sqrt(d)``;
    the paper's text says plain Gaussian ``U``, which makes the clean part ``p`` times larger
    relative to the thresholds ``1/sqrt(p)``.

    Parameters
    ----------
    n_features : int
        Ambient dimension ``p``.
    rank : int
        True rank ``d`` (at most ``n_features``).
    n_samples : int
        Number of samples ``n``.
    corruption : float in [0, 1]
        Fraction ``rho`` of corrupted entries.
    magnitude : float
        Corruptions are uniform on ``[-magnitude, magnitude]``.
    orthonormal_basis : bool
        Orthonormalize ``U`` (the authors' code) or keep it Gaussian (the paper's text).
    random_state : int, Generator or None

    Returns
    -------
    CorruptedLowRank
        ``(Z, X, E, U, V)``.

    Examples
    --------
    >>> data = corrupted_low_rank(50, 5, 200, 0.1, random_state=0)
    >>> data.Z.shape, data.U.shape
    ((200, 50), (50, 5))
    >>> int((data.E != 0).sum()), bool(abs(data.E).max() <= 1000)
    (1000, True)
    """
    p, d, n = int(n_features), int(rank), int(n_samples)
    if not 1 <= d <= p or n < 1:
        raise ValueError(f"need 1 <= rank <= n_features and n_samples >= 1, got rank={rank}, "
                         f"n_features={n_features}, n_samples={n_samples}")
    if not 0.0 <= corruption <= 1.0:
        raise ValueError(f"corruption must lie in [0, 1], got {corruption!r}")
    rng = np.random.default_rng(random_state)
    U = rng.standard_normal((p, d))
    if orthonormal_basis:
        U = np.linalg.svd(U, full_matrices=False)[0]
    V = rng.standard_normal((n, d))
    count = int(np.floor(corruption * p * n + 0.5))  # MATLAB's round: halves away from 0
    positions = rng.choice(p * n, size=count, replace=False)
    E = np.zeros(n * p)
    E[positions] = magnitude * (2 * rng.random(count) - 1)
    E = E.reshape(n, p)
    X = V @ U.T
    return CorruptedLowRank(Z=X + E, X=X, E=E, U=U, V=V)
