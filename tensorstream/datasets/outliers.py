"""Data with outliers for robust NMF (Zhao & Tan 2017), and the measures its tests use.

Everything is returned with samples on the first axis (the library's convention): the paper's
``F x N`` matrices are transposed to ``(N, F)`` here, once.

Readings of the paper's ambiguous parts:

* ``HN(1/sqrt(K))`` is read as the half-normal with **standard deviation** ``1/sqrt(K)``: read as
  a variance it makes every clean entry exceed 1, so that the clipped data are all ones;
* the observation noise is a parameter ``noise_std`` (the paper's "standard normal" noise, std 1,
  swamps data in [0, 1]; default 0);
* real data are normalised sample by sample to unit maximum *before* outliers are added, then
  clipped to [0, 1] without renormalisation, so that ``M = 1`` and the clean data are the
  reference of the PSNR;
* after clipping, the outliers in effect are ``X - X_clean`` (noise 0), not the planted ones:
  recovery is measured against those.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.backend import to_numpy

__all__ = [
    "OutlierData",
    "averaged_regret",
    "contaminate",
    "moving_patch_video",
    "normalize_unit_max",
    "psnr",
    "replicate",
    "support_scores",
    "synthetic_outlier_data",
]


@dataclass(frozen=True)
class OutlierData:
    """A data set with outliers, samples first (all arrays ``(n_samples, n_features)``)."""

    X: np.ndarray  #: observed data, in [0, 1]
    X_clean: np.ndarray  #: clean data, in [0, 1]
    planted: np.ndarray  #: the planted outliers (before clipping)

    @property
    def outliers(self) -> np.ndarray:
        """``X - X_clean``: the outliers in effect after clipping (with noise: outliers + noise)."""
        return self.X - self.X_clean


def synthetic_outlier_data(n_features: int = 400, n_components: int = 49,
                           n_samples: int = 5000, nu: float = 0.7, nu_tilde: float = 0.1,
                           noise_std: float = 0.0, random_state: int = 1) -> OutlierData:
    """The paper's synthetic data (section VII-D1).

    ``W`` (F x K) and ``H`` (K x N) have i.i.d. half-normal entries of standard deviation
    ``1/sqrt(K)``; ``X_clean = clip(W H, 0, 1)``. A random ``floor(nu N)`` of the samples get
    ``floor(nu_tilde F)`` outliers each, at random positions, i.i.d. U[-1, 1]; then
    ``X = clip(X_clean + outliers + noise_std * N(0, 1), 0, 1)``.

    The draws follow a reference generator written from the paper, in order
    (``numpy.random.default_rng``), so a seed gives the data its calibration numbers were
    measured on.

    Parameters
    ----------
    n_features, n_components, n_samples : int
        ``F``, ``K`` and ``N`` (the paper: 400, 49, 1e5; the tests: N = 5000).
    nu, nu_tilde : float
        Fraction of contaminated samples and of contaminated entries in each (0.7, 0.1).
    noise_std : float
        Standard deviation of the Gaussian observation noise.
    random_state : int
        Seed (the tests use 1).

    Returns
    -------
    OutlierData

    Examples
    --------
    >>> data = synthetic_outlier_data(n_features=20, n_components=3, n_samples=50)
    >>> data.X.shape, bool(data.X.min() >= 0), bool(data.X.max() <= 1)
    ((50, 20), True, True)
    >>> int((np.abs(data.planted).sum(axis=1) > 0).sum())  # floor(0.7 * 50) samples
    35
    """
    _check_fraction(nu, "nu")
    _check_fraction(nu_tilde, "nu_tilde")
    if noise_std < 0:
        raise ValueError(f"noise_std must be >= 0, got {noise_std!r}")
    rng = np.random.default_rng(random_state)
    sigma = 1.0 / np.sqrt(n_components)
    W = np.abs(rng.normal(0.0, sigma, (n_features, n_components)))
    H = np.abs(rng.normal(0.0, sigma, (n_components, n_samples)))
    clean = np.clip(W @ H, 0.0, 1.0)
    planted = _planted_outliers(rng, n_features, n_samples, nu, nu_tilde)
    noisy = clean + planted
    if noise_std:
        noisy = noisy + noise_std * rng.standard_normal((n_features, n_samples))
    X = np.clip(noisy, 0.0, 1.0)
    return OutlierData(X=np.ascontiguousarray(X.T), X_clean=np.ascontiguousarray(clean.T),
                       planted=np.ascontiguousarray(planted.T))


def _planted_outliers(rng: np.random.Generator, n_features: int, n_samples: int, nu: float,
                      nu_tilde: float) -> np.ndarray:
    """``F x N`` outliers: U[-1, 1] on random supports of a random subset of columns."""
    outliers = np.zeros((n_features, n_samples))
    per_sample = int(np.floor(nu_tilde * n_features))
    # per contaminated column, values then positions: the reference generator's order (its
    # one-line assignment evaluates the right-hand side first)
    for column in rng.choice(n_samples, int(np.floor(nu * n_samples)), replace=False):
        values = rng.uniform(-1.0, 1.0, per_sample)
        outliers[rng.choice(n_features, per_sample, replace=False), column] = values
    return outliers


def contaminate(X_clean: np.ndarray, nu: float = 0.7, nu_tilde: float = 0.1,
                random_state: int | None = 0) -> OutlierData:
    """Add the paper's outliers to clean data in [0, 1] (samples first) and clip to [0, 1].

    The same recipe as the synthetic data: ``floor(nu N)`` samples, ``floor(nu_tilde F)``
    entries each, values U[-1, 1] (the paper's "salt and pepper noise" of its face experiments).
    Normalise the clean samples first (:func:`normalize_unit_max`).

    Parameters
    ----------
    X_clean : array of shape (n_samples, n_features)
        Clean data in [0, 1].
    nu, nu_tilde : float in [0, 1], default 0.7, 0.1
        Fraction of contaminated samples, and of contaminated entries in each.
    random_state : int, optional

    Returns
    -------
    OutlierData
        ``X`` (contaminated, clipped), ``X_clean`` and the ``planted`` outliers.

    Examples
    --------
    >>> data = contaminate(np.full((10, 8), 0.5), nu=0.5, nu_tilde=0.25)
    >>> int((data.outliers != 0).any(axis=1).sum()), int((data.planted != 0).sum())
    (5, 10)
    """
    X_clean = np.asarray(to_numpy(X_clean), dtype=float)
    if X_clean.ndim != 2:
        raise ValueError(f"X_clean must have shape (n_samples, n_features), got {X_clean.shape}")
    if X_clean.size and (X_clean.min() < 0 or X_clean.max() > 1):
        raise ValueError("X_clean must lie in [0, 1]; normalise it first (normalize_unit_max)")
    _check_fraction(nu, "nu")
    _check_fraction(nu_tilde, "nu_tilde")
    rng = np.random.default_rng(random_state)
    n_samples, n_features = X_clean.shape
    planted = _planted_outliers(rng, n_features, n_samples, nu, nu_tilde).T
    return OutlierData(X=np.clip(X_clean + planted, 0.0, 1.0), X_clean=X_clean, planted=planted)


def normalize_unit_max(X: np.ndarray) -> np.ndarray:
    """Scale every sample (row) to a maximum of 1 (all-zero rows stay zero).

    Parameters
    ----------
    X : array of shape (n_samples, ...)
        Nonnegative samples on the first axis.

    Returns
    -------
    ndarray
        ``X`` divided sample by sample by its maximum.

    Examples
    --------
    >>> normalize_unit_max(np.array([[1.0, 4.0], [0.0, 0.0]]))
    array([[0.25, 1.  ],
           [0.  , 0.  ]])
    """
    X = np.asarray(to_numpy(X), dtype=float)
    peaks = X.reshape(len(X), -1).max(axis=1)
    return X / np.where(peaks > 0, peaks, 1.0).reshape((-1,) + (1,) * (X.ndim - 1))


def replicate(X: np.ndarray, copies: int, random_state: int | None = 0
              ) -> tuple[np.ndarray, np.ndarray]:
    """The paper's stream: ``copies`` copies of every sample, randomly permuted.

    Parameters
    ----------
    X : array of shape (n_samples, ...)
    copies : int
        Copies of every sample (the paper's replication factor), at least 1.
    random_state : int, optional

    Returns
    -------
    stream : ndarray of shape (copies * n_samples, ...)
    source : ndarray of int
        For each streamed sample, the index of its source sample (evaluations map every
        streamed sample back to its source).

    Examples
    --------
    >>> stream, source = replicate(np.arange(3.0).reshape(3, 1), 2)
    >>> stream.shape, sorted(source.tolist())
    ((6, 1), [0, 0, 1, 1, 2, 2])
    >>> bool(np.all(stream[:, 0] == source))
    True
    """
    if copies < 1:
        raise ValueError(f"copies must be >= 1, got {copies!r}")
    X = np.asarray(to_numpy(X))
    source = np.random.default_rng(random_state).permutation(np.tile(np.arange(len(X)), copies))
    return X[source], source


def moving_patch_video(background: np.ndarray | None = None, n_frames: int = 200,
                       patch_size: int = 10, random_state: int | None = 0
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A static background with a moving textured square (a stand-in for the paper's videos).

    Frame ``t`` is the background with a ``patch_size`` square of fresh U[0, 1] texture pasted
    at a position that sweeps the image (bouncing diagonally), then scaled to unit maximum. The
    background alone is a rank-one stream: the ideal low-rank part.

    Parameters
    ----------
    background : array of shape (height, width), optional
        Values in [0, 1] (e.g. ``skimage.data.camera()`` resized to 48 x 64); default a smooth
        synthetic 48 x 64 image.
    n_frames, patch_size : int
        Number of frames and side of the square.
    random_state : int, optional
        Seed of the texture.

    Returns
    -------
    frames : ndarray of shape (n_frames, height, width)
    backgrounds : ndarray of shape (n_frames, height, width)
        The true background of each frame, scaled like the frame.
    masks : bool ndarray of shape (n_frames, height, width)
        True on the patch (the foreground).

    Examples
    --------
    >>> frames, backgrounds, masks = moving_patch_video(n_frames=4)
    >>> frames.shape, int(masks[0].sum())
    ((4, 48, 64), 100)
    """
    if background is None:
        background = _smooth_background(48, 64)
    background = np.asarray(background, dtype=float)
    if background.ndim != 2 or background.min() < 0 or background.max() > 1:
        raise ValueError("background must be a 2-D image with values in [0, 1]")
    height, width = background.shape
    if not 0 < patch_size <= min(height, width):
        raise ValueError(f"patch_size must be in [1, {min(height, width)}], got {patch_size!r}")
    rng = np.random.default_rng(random_state)
    frames = np.repeat(background[None], n_frames, axis=0)
    masks = np.zeros(frames.shape, dtype=bool)
    rows = _bounce(np.arange(n_frames), height - patch_size)
    cols = _bounce(np.arange(n_frames) * 2, width - patch_size)
    for t, (r, c) in enumerate(zip(rows, cols)):  # per frame: a data generator, not a solver
        frames[t, r:r + patch_size, c:c + patch_size] = rng.random((patch_size, patch_size))
        masks[t, r:r + patch_size, c:c + patch_size] = True
    peaks = frames.reshape(n_frames, -1).max(axis=1).reshape(-1, 1, 1)
    scale = np.where(peaks > 0, peaks, 1.0)
    return frames / scale, np.repeat(background[None], n_frames, axis=0) / scale, masks


def _bounce(position: np.ndarray, span: int) -> np.ndarray:
    """Positions moving back and forth over ``[0, span]``."""
    if span == 0:
        return np.zeros_like(position)
    phase = position % (2 * span)
    return np.where(phase <= span, phase, 2 * span - phase)


def _smooth_background(height: int, width: int) -> np.ndarray:
    """A smooth grey-level image in [0.2, 1]: gradients plus soft blobs."""
    y, x = np.mgrid[0:height, 0:width] / np.array([height, width]).reshape(2, 1, 1)
    image = 0.5 + 0.25 * np.sin(3 * x + 1) * np.cos(2 * y) + 0.2 * np.exp(
        -((x - 0.3) ** 2 + (y - 0.6) ** 2) / 0.02)
    image -= image.min()
    return 0.2 + 0.8 * image / image.max()


# -- measures ------------------------------------------------------------------------------------


def _paired(X_clean, X_estimate) -> tuple[np.ndarray, np.ndarray]:
    """Both arrays as NumPy floats, checked to have the same shape (what every measure needs)."""
    clean = np.asarray(to_numpy(X_clean), dtype=float)
    estimate = np.asarray(to_numpy(X_estimate), dtype=float)
    if clean.shape != estimate.shape:
        raise ValueError(f"X_clean and X_estimate must have the same shape, got {clean.shape} "
                         f"and {estimate.shape}")
    return clean, estimate


def psnr(X_clean, X_estimate, peak: float = 1.0) -> float:
    """Peak signal-to-noise ratio ``-10 log10(mean((X_clean - X_estimate)^2) / peak^2)``, in dB.

    With ``X_estimate`` the reconstruction from the codes computed *online* and the final
    dictionary this is the paper's eq. (48); from codes recomputed with the final dictionary it
    is the "re-encoded" PSNR; for a batch method it is eq. (47).

    Parameters
    ----------
    X_clean, X_estimate : array
        The reference and its estimate, of the same shape.
    peak : float, default 1.0
        The largest possible value (1 for data scaled to unit maximum).

    Returns
    -------
    float
        In dB; ``inf`` for an exact estimate.

    Examples
    --------
    >>> round(psnr(np.zeros(4), np.full(4, 0.1)), 6)
    20.0
    """
    clean, estimate = _paired(X_clean, X_estimate)
    mse = float(np.mean((clean - estimate) ** 2))
    return float("inf") if mse == 0 else float(-10.0 * np.log10(mse / peak**2))


def averaged_regret(X_clean, X_estimate) -> float:
    """The paper's eq. (46): mean over samples of ``1/2 ||x_clean - x_estimate||^2``.

    Parameters
    ----------
    X_clean, X_estimate : array of shape (n_samples, ...)

    Returns
    -------
    float

    Examples
    --------
    >>> averaged_regret(np.zeros((2, 3)), np.ones((2, 3)))
    1.5
    """
    clean, estimate = _paired(X_clean, X_estimate)
    return float(0.5 * np.sum((clean - estimate) ** 2) / len(clean))


def support_scores(true_outliers, estimated_outliers, threshold: float = 0.0,
                   true_threshold: float = 1e-12) -> dict:
    """Precision, recall and F1 of the estimated outliers' support.

    The true support is ``|true| > true_threshold`` (use ``X - X_clean``, the outliers in
    effect); the estimated one is ``|estimated| > threshold``. Empty supports count as perfect.

    Parameters
    ----------
    true_outliers, estimated_outliers : array
        Of the same shape.
    threshold : float, default 0.0
        Entries of ``estimated_outliers`` above it (in magnitude) are in the estimated support.
    true_threshold : float, default 1e-12
        Entries of ``true_outliers`` above it (in magnitude) are in the true support.

    Returns
    -------
    dict
        ``precision``, ``recall`` and ``f1``.

    Examples
    --------
    >>> support_scores(np.array([0.0, 1.0, 1.0, 0.0]), np.array([0.0, 0.5, 0.0, 0.2]))
    {'precision': 0.5, 'recall': 0.5, 'f1': 0.5}
    """
    truth = np.abs(np.asarray(to_numpy(true_outliers), dtype=float)) > true_threshold
    found = np.abs(np.asarray(to_numpy(estimated_outliers), dtype=float)) > threshold
    if truth.shape != found.shape:
        raise ValueError(f"true_outliers and estimated_outliers must have the same shape, got "
                         f"{truth.shape} and {found.shape}")
    hits = float(np.sum(truth & found))
    precision = hits / found.sum() if found.any() else 1.0
    recall = hits / truth.sum() if truth.any() else 1.0
    f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return {"precision": float(precision), "recall": float(recall), "f1": float(f1)}


def _check_fraction(value: float, name: str) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value!r}")
