"""The synthetic data of the online-NMF-with-divergences paper (Zhao, Tan & Xu, section VIII-D).

Each divergence gets the noise under which it is the maximum-likelihood loss, so that a learner's
held-out divergence can fall towards the noise level. Samples first: the paper's ``F x N``
matrix is returned transposed, ``(N, F)``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["DivergenceData", "divergence_synthetic"]

NOISES = ("is", "kl", "squared", "outliers")


class DivergenceData(NamedTuple):
    """``X`` = the noisy, clipped version of ``X_clean = H W^T``."""

    X: np.ndarray  #: (n_samples, n_features) observed data
    X_clean: np.ndarray  #: (n_samples, n_features) noise-free data
    W: np.ndarray  #: (n_features, rank) planted dictionary
    H: np.ndarray  #: (n_samples, rank) planted codes


def divergence_synthetic(n_features: int = 100, n_samples: int = 5000, rank: int = 40,
                         noise: str = "kl", *, shift: float = 1.0, spread: float = 5.0,
                         gamma_shape: float = 1000.0, gaussian_std: float = 30.0,
                         outlier_fraction: float = 0.3,
                         random_state: int | None = 0) -> DivergenceData:
    """The paper's synthetic recipe: shifted half-normal factors and divergence-matched noise.

    ``W`` and ``H`` have i.i.d. entries ``shift + |z|``, ``z ~ N(0, spread^2)`` (the paper's
    kappa = 1, sigma = 5, which keep every entry of ``X_clean`` away from zero). The noise is

    * ``"is"``: multiplicative Gamma, ``X_clean * G``, ``G ~ Gamma(gamma_shape, 1/gamma_shape)``
      (mean 1; Itakura-Saito is its likelihood; the data stay strictly positive);
    * ``"kl"``: Poisson counts with mean ``X_clean``;
    * ``"squared"``: additive ``N(0, gaussian_std^2)``;
    * ``"outliers"``: in every sample, ``outlier_fraction`` of the entries (chosen without
      replacement) get ``U[-lambda, lambda]`` added, ``lambda = 2 mean(X_clean)`` (Huber, l1).

    Then everything is clipped to ``[0, 4 mean(X_clean)]`` (the paper's box ``[0, 4000]``).
    With ``rank=40`` the mean entry is about 1000 and the SNR about 30 dB for the first three.

    Parameters
    ----------
    n_features, n_samples, rank : int
        ``F``, ``N`` and the planted rank (the paper: ``F`` unstated, ``N ~ 1e5``, 40).
    noise : {"is", "kl", "squared", "outliers"}, default "kl"
    shift, spread : float
        ``kappa`` and ``sigma`` of the factors.
    gamma_shape, gaussian_std, outlier_fraction : float
        Parameters of the noises above.
    random_state : int or None

    Returns
    -------
    DivergenceData

    Examples
    --------
    >>> data = divergence_synthetic(20, 50, 3, noise="is", random_state=0)
    >>> data.X.shape, bool(data.X.min() > 0)
    ((50, 20), True)
    """
    if noise not in NOISES:
        raise ValueError(f"noise must be one of {NOISES}, got {noise!r}")
    if not 0 <= outlier_fraction <= 1:
        raise ValueError(f"outlier_fraction must be in [0, 1], got {outlier_fraction!r}")
    rng = np.random.default_rng(random_state)
    F, N, K = int(n_features), int(n_samples), int(rank)
    W = shift + np.abs(rng.normal(0.0, spread, (F, K)))
    H = shift + np.abs(rng.normal(0.0, spread, (N, K)))
    clean = H @ W.T
    if noise == "is":
        X = clean * rng.gamma(gamma_shape, 1.0 / gamma_shape, clean.shape)
    elif noise == "kl":
        X = rng.poisson(clean).astype(float)
    elif noise == "squared":
        X = clean + rng.normal(0.0, gaussian_std, clean.shape)
    else:
        magnitude = 2.0 * clean.mean()
        count = int(round(outlier_fraction * F))
        # per sample, `count` distinct entries: the first columns of a per-row permutation
        rows = np.argsort(rng.random((N, F)), axis=1)[:, :count]
        X = clean.copy()
        np.put_along_axis(X, rows, np.take_along_axis(X, rows, axis=1)
                          + rng.uniform(-magnitude, magnitude, (N, count)), axis=1)
    return DivergenceData(np.clip(X, 0.0, 4.0 * clean.mean()), clean, W, H)
