"""Diagnostics of a stream: distances between distributions, empirical distributions, the
integrated autocorrelation time, and the expected loss under the stationary distribution."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import Stream, _gather

__all__ = ["empirical_distribution", "expected_loss", "integrated_autocorrelation_time",
           "total_variation"]


# -- statistics helpers --------------------------------------------------------------------------


def total_variation(p: Any, q: Any) -> float:
    """Total-variation distance ``max_A |p(A) - q(A)| = 0.5 * ||p - q||_1`` of two pmfs.

    Parameters
    ----------
    p, q : array-like of shape (n,)

    Returns
    -------
    float

    Examples
    --------
    >>> total_variation([0.5, 0.5, 0.0], [0.25, 0.25, 0.5])
    0.5
    """
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    if p.shape != q.shape or p.ndim != 1:
        raise ValueError(f"p and q must be 1-D arrays of the same length, got {p.shape} "
                         f"and {q.shape}")
    return 0.5 * float(np.abs(p - q).sum())


def empirical_distribution(states: Any, n_states: int) -> np.ndarray:
    """Relative frequencies of the integer states ``0, ..., n_states - 1`` in ``states``.

    Parameters
    ----------
    states : array-like of int
    n_states : int

    Returns
    -------
    ndarray of shape (n_states,)

    Examples
    --------
    >>> empirical_distribution([0, 2, 2, 1], 4)
    array([0.25, 0.25, 0.5 , 0.  ])
    """
    states = np.asarray(states).ravel()
    if states.size == 0:
        raise ValueError("states is empty")
    if states.min() < 0 or states.max() >= n_states:
        raise ValueError(f"states must lie in [0, {n_states}), got range "
                         f"[{states.min()}, {states.max()}]")
    return np.bincount(states, minlength=n_states) / states.size


def integrated_autocorrelation_time(x: Any, c: float = 5.0, method: str = "geyer") -> float:
    """Integrated autocorrelation time ``tau = 1 + 2 sum_{l>=1} rho(l)`` of a scalar series.

    ``tau`` is how many correlated draws are worth one independent draw: 1 for i.i.d. samples,
    more for positively correlated ones, less than 1 for anticorrelated (antithetic) ones.
    The autocorrelations ``rho`` are computed by FFT, then summed:

    - ``"geyer"`` (default): Geyer's initial monotone sequence (Geyer 1992, the estimator of
      ArviZ's and Stan's effective sample size): the pair sums ``rho(2k) + rho(2k+1)`` up to the
      first one that is not positive, made non-increasing; ``tau = -1 + 2 sum`` (at least
      ``1 / n``). Valid for reversible chains whatever the sign of their correlations.
    - ``"sokal"``: Sokal's automatic window, ``rho`` summed up to the smallest lag
      ``M >= c * tau(M)`` with ``tau(M) > 0``; meant for positively correlated series (on
      anticorrelated ones the partial sums alternate and the window stops early).

    Parameters
    ----------
    x : array-like of shape (n,)
        The series, e.g. an observable of the states along a chain.
    c : float, default 5.0
        Sokal's window constant (larger: less bias, more variance); ``method="sokal"`` only.
    method : {"geyer", "sokal"}, default "geyer"

    Returns
    -------
    float

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> round(integrated_autocorrelation_time(rng.standard_normal(10_000)), 1)
    1.0
    """
    if method not in ("geyer", "sokal"):
        raise ValueError(f"method must be 'geyer' or 'sokal', got {method!r}")
    x = np.asarray(x, dtype=float).ravel()
    if x.size < 2:
        raise ValueError(f"x needs at least 2 values, got {x.size}")
    if not np.all(np.isfinite(x)):
        raise ValueError("x contains NaN or infinite values")
    x = x - x.mean()
    n = x.size
    spectrum = np.fft.rfft(x, 2 * n)
    acf = np.fft.irfft(spectrum * np.conj(spectrum))[:n]
    if acf[0] <= 0:
        raise ValueError("x is constant: its autocorrelation time is undefined")
    rho = acf / acf[0]
    if method == "sokal":
        taus = 2.0 * np.cumsum(rho) - 1.0
        window = (np.arange(n) >= c * taus) & (taus > 0)
        m = int(np.argmax(window)) if window.any() else n - 1
        return float(taus[m])
    pairs = rho[:n - n % 2].reshape(-1, 2).sum(axis=1)  # rho(2k) + rho(2k+1)
    initial = int(np.argmin(pairs > 0)) if np.any(pairs <= 0) else pairs.size
    tau = -1.0 + 2.0 * np.minimum.accumulate(pairs[:initial]).sum()
    # a perfectly alternating series sums to -1 + 2/n: n draws are worth at most n^2
    return float(max(tau, 1.0 / n))


def expected_loss(learner: Any, stream: Stream) -> float:
    """The exact expected loss ``f(D) = sum_y pi(y) loss(phi(y), D)`` of a fitted learner.

    Uses the stream's finite sample space and stationary distribution (states of zero
    probability are skipped) and the learner's ``score`` (negative weighted mean loss).

    Parameters
    ----------
    learner : fitted estimator with ``score(X, sample_weight=...)``
    stream : Stream
        A stream with a known stationary distribution.

    Returns
    -------
    float

    Examples
    --------
    >>> from tensorstream import OnlineCPDL
    >>> from tensorstream.streams import Metropolis
    >>> X = np.random.default_rng(0).random((30, 4, 3))
    >>> stream = Metropolis(X, np.arange(1.0, 31.0), batch_size=10, random_state=0)
    >>> model = OnlineCPDL(2, random_state=0).fit(stream, n_steps=20)
    >>> bool(expected_loss(model, stream) > 0)
    True
    """
    pi = stream.stationary_distribution()
    support = np.flatnonzero(pi > 0)
    samples = _gather(stream.sample_space(), support, 0)
    return -float(learner.score(samples, sample_weight=pi[support]))
