"""The synthetic data of the variance-reduced SMF paper (Zhao, Haskell & Feng 2017, 5.1).

Samples first: the paper's ``d x n`` matrices are returned transposed, ``(n, d)``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["SVRMFSynth", "svrmf_synthetic"]


class SVRMFSynth(NamedTuple):
    """``X = H_true W_true^T + outliers`` (all ``(n_samples, ...)``)."""

    X: np.ndarray  #: (n, d) observed data
    W_true: np.ndarray  #: (d, rank) planted basis (its span is the subspace to recover)
    H_true: np.ndarray  #: (n, rank) planted coefficients
    outliers: np.ndarray  #: (n, d) planted sparse outliers


def svrmf_synthetic(n_features: int = 400, n_samples: int = 100_000, rank: int = 10,
                    outlier_density: float = 0.1, magnitude: float = 1000.0,
                    random_state: int | None = 0) -> SVRMFSynth:
    """The paper's "Synth" generator (section 5.1).

    ``W_true`` (d x k') and ``H_true`` (k' x n) have i.i.d. N(0.5, 1/sqrt(k')) entries, the
    second argument read as the **variance** (std ``k'^(-1/4)``); exactly
    ``d n - floor((1 - rho) d n)`` entries, at uniformly chosen positions (without replacement),
    are outliers drawn i.i.d. from U[-M, M]. No normalisation. The tests' small setting is
    ``svrmf_synthetic(100, 5000, 5)``.

    Parameters
    ----------
    n_features, n_samples, rank : int
        ``d``, ``n`` and ``k'`` (the paper: 400, 1e5, 10).
    outlier_density : float in [0, 1]
        ``rho_s`` (0.1; also 0.3 in the paper).
    magnitude : float
        ``M`` (1000).
    random_state : int or None

    Returns
    -------
    SVRMFSynth

    Examples
    --------
    >>> data = svrmf_synthetic(20, 50, 3, random_state=0)
    >>> data.X.shape, int((data.outliers != 0).sum())
    ((50, 20), 100)
    """
    if not 0 <= outlier_density <= 1:
        raise ValueError(f"outlier_density must be in [0, 1], got {outlier_density!r}")
    rng = np.random.default_rng(random_state)
    d, n, k = int(n_features), int(n_samples), int(rank)
    std = k ** -0.25
    W = rng.normal(0.5, std, size=(d, k))
    H = rng.normal(0.5, std, size=(k, n))
    total = d * n
    count = total - int(np.floor((1 - outlier_density) * total))
    flat = np.zeros(total)
    positions = rng.choice(total, count, replace=False)
    flat[positions] = rng.uniform(-magnitude, magnitude, count)
    R = flat.reshape(d, n)
    return SVRMFSynth((W @ H + R).T, W, H.T, R.T)
