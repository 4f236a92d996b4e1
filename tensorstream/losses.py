"""Divergences ``d(v || y)`` between data ``v`` and a model ``y``: one table for coders and tests.

The first argument is always the data and the second the model (the maximum-likelihood
orientation of Zhao, Tan & Xu; only ``d(v || W h)`` is ever minimised). Arrays hold a batch with
samples on the first axis, ``(b, *sample_shape)``; a 1-D array is one sample. Separable
divergences are sums over entries, the others (non-squared ℓ2, Mahalanobis) act on each
vectorised sample (C order, as in :mod:`tensorstream.core.dictionary`).

Every divergence object is a small immutable dataclass with

- ``value(v, y)`` (total), ``per_sample(v, y)`` (shape ``(b,)``), ``elementwise(v, y)`` (separable
  ones only), ``gradient(v, y)`` = ∂ value / ∂y (a subgradient for ℓ1 and non-squared ℓ2) and
  ``curvature(v, y)`` = ∂²d/∂y² entrywise (smooth separable ones);
- ``curvature_bound``: a global bound of the operator norm of the per-sample Hessian in ``y``, so
  that ``curvature_bound * ||W^T W||_2`` is a Lipschitz constant of the code gradient; ``None``
  where no global bound exists (KL, IS, β ≠ 2, α, Hellinger) or the loss is nonsmooth;
- flags: ``separable``, ``smooth``, ``convex`` (in ``y``), ``needs_nonnegative_data``,
  ``needs_positive_data``, ``needs_positive_model``.

Conventions (see ``docs/losses.md``):

- squared ℓ2 carries the ½ of Zhao, Tan & Xu's Table II: ``d = ½ ||v - y||²``, gradient ``y - v``,
  curvature 1; it is the β-divergence at β = 2;
- model floor: divergences that need ``y > 0`` evaluate at ``max(y, eps)``, ``eps = 1e-12``;
- data floor: divergences that need ``v > 0`` (IS, β ≤ 0, α ≤ 0) raise data below
  ``data_eps = 1e-8`` (zeros above all) to it (the paper's Remark 2 advice); negative data raise
  ``ValueError``. The floors and the Huber threshold are in the data's units: the learners code
  at a normalized scale and evaluate at the raw one with :meth:`Divergence.at_scale`;
- KL at data zeros uses ``0 log 0 = 0`` exactly (no data floor).

Public methods validate their inputs; ``check=False`` skips the validation and the data floor
for hot loops that called :meth:`Divergence.prepare_data` once beforehand.
"""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np
import tensorly as tl

from .core.backend import indicator, to_numpy

Tensor = Any

EPS = 1e-12
"""Model floor: divergences that need ``y > 0`` are evaluated at ``max(y, EPS)``."""

DATA_EPS = 1e-8
"""Data floor: divergences that need ``v > 0`` raise data below ``DATA_EPS`` (zeros) to it."""


# --------------------------------------------------------------------------------------------
# elementwise closed forms (x data, y model, both already floored where needed)
# --------------------------------------------------------------------------------------------


def _half_squared(x: Tensor, y: Tensor) -> Tensor:
    return (x - y) ** 2 / 2


def _kl(x: Tensor, y: Tensor) -> Tensor:
    # 0 log 0 = 0: a data zero contributes y alone; log(1) keeps the unused branch finite
    x_safe = tl.where(x > 0, x, 1.0)
    return x * (tl.log(x_safe) - tl.log(y)) - x + y


def _dual_kl(x: Tensor, y: Tensor) -> Tensor:
    return y * (tl.log(y) - tl.log(x)) - y + x


def _itakura_saito(x: Tensor, y: Tensor) -> Tensor:
    ratio = x / y
    return ratio - tl.log(ratio) - 1


def _hellinger(x: Tensor, y: Tensor) -> Tensor:
    return 2 * (tl.sqrt(x) - tl.sqrt(y)) ** 2


def _series_or_direct(z: Tensor, direct, coefficients: tuple[float, ...]) -> Tensor:
    """``direct(z)``, or its Taylor series where ``|z| < 1e-2`` (the direct form cancels there).

    With five terms the truncation error is below 1e-12 relative at ``|z| = 1e-2``, and the
    direct form loses at most ~1e-12 relative there too.
    """
    small = tl.abs(z) < 1e-2
    z_safe = tl.where(small, 1.0, z)  # keeps the unused branch free of 0/0
    series = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        series = c + z * series
    return tl.where(small, series, direct(z_safe))


def _expm1_over_z(z: Tensor) -> Tensor:
    """``(e^z - 1) / z``, stable at ``z -> 0``."""
    return _series_or_direct(z, lambda w: (tl.exp(w) - 1) / w, (1, 1 / 2, 1 / 6, 1 / 24, 1 / 120))


def _expm1_minus_z_over_z2(z: Tensor) -> Tensor:
    """``(e^z - 1 - z) / z²``, stable at ``z -> 0``."""
    return _series_or_direct(
        z, lambda w: (tl.exp(w) - 1 - w) / w**2, (1 / 2, 1 / 6, 1 / 24, 1 / 120, 1 / 720)
    )


def _log_ratio(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``r = x / y``, ``log r`` (0 where ``r = 0``, to keep it finite) and the mask ``r > 0``."""
    ratio = x / y
    positive = ratio > 0
    return ratio, tl.log(tl.where(positive, ratio, 1.0)), positive


def _power_family(x: Tensor, y: Tensor, p: float) -> Tensor:
    """``f_p(r) = [r^p - 1 - p (r - 1)] / (p (p - 1))`` at ``r = x / y``, for any real ``p``.

    The β-divergence is ``y^β f_β(x/y)`` and the α-divergence ``y f_α(x/y)``. The textbook
    formula divides a cancelling difference by ``p (p - 1)``: its relative error is about
    ``1e-16 / |p - p0|`` next to ``p0`` in {0, 1} (garbage at ``p = 1e-150``). Factoring the
    cancellation out, with ``L = log r`` and ``E(z) = (e^z - 1 - z)/z²``, gives exact forms

        p < 1/2:   f = [(L - r + 1) + p L² E(p L)] / (p - 1)            (no cancellation at 0)
        p >= 1/2:  f = [r L - r + 1 + (p-1) r L² E((p-1) L)] / p        (none at 1)

    and ``f_p(0) = 1/p`` for ``p > 0`` (data zeros).
    """
    ratio, log_ratio, positive = _log_ratio(x, y)
    if p < 0.5:
        numerator = (log_ratio - ratio + 1) + p * log_ratio**2 * _expm1_minus_z_over_z2(
            p * log_ratio
        )
        f = numerator / (p - 1)
    else:
        q = p - 1
        f = (ratio * log_ratio - ratio + 1
             + q * ratio * log_ratio**2 * _expm1_minus_z_over_z2(q * log_ratio)) / p
    if p <= 0:  # the data are floored to be positive: r > 0 everywhere
        return f
    return tl.where(positive, f, 1 / p)


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _as_batch(x: Tensor) -> Tensor:
    """View ``x`` as ``(b, n_entries)``; a 1-D array is a single sample."""
    shape = tl.shape(x)
    batch = 1 if len(shape) == 1 else shape[0]
    return tl.reshape(x, (batch, -1))


def _check_real(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return value


def _check_positive(name: str, value: Any) -> float:
    value = _check_real(name, value)
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return value


# --------------------------------------------------------------------------------------------
# the base class
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Divergence:
    """Base class of the divergence table (see the module docstring for the conventions).

    Subclasses set the flags and implement ``_elementwise`` and ``_gradient`` (separable ones) or
    override ``_per_sample`` (non-separable ones).
    """

    separable = True
    smooth = True
    convex = True
    needs_nonnegative_data = False
    needs_positive_data = False
    needs_positive_model = False
    curvature_bound = None  # a float in the subclasses whose Hessian in y is bounded

    @property
    def name(self) -> str:
        """Canonical name of the divergence in :func:`get_loss`."""
        raise NotImplementedError

    #: the parameters in the data's units (thresholds, floors): :meth:`at_scale` scales them
    _unit_parameters = ()
    #: the family's order (β, α): any real number
    _order_parameters = ()

    def __post_init__(self):
        # one check for every family: an order is a real number, a unit parameter is > 0
        for name in self._order_parameters:
            object.__setattr__(self, name, _check_real(name, getattr(self, name)))
        for name in self._unit_parameters:
            object.__setattr__(self, name, _check_positive(name, getattr(self, name)))

    def at_scale(self, scale: float) -> Divergence:
        """The same divergence for data ``scale`` times larger: every parameter in the data's
        units (the Huber threshold, the floors ``eps`` and ``data_eps``) times ``scale``.

        A learner that codes ``v / scale`` with this divergence evaluates, at the raw scale,
        ``self.at_scale(scale)``: for the β, α and Huber families
        ``at_scale(s).value(s v, s y)`` is ``s^k value(v, y)`` exactly (``k`` the degree of
        homogeneity), floors and thresholds included.

        Examples
        --------
        >>> get_loss("huber", threshold=0.5).at_scale(10.0)
        Huber(threshold=5.0)
        """
        if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or \
                not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"scale must be a finite number > 0, got {scale!r}")
        if scale == 1.0 or not self._unit_parameters:
            return self
        return replace(self, **{name: getattr(self, name) * scale
                                 for name in self._unit_parameters})

    # ---- data handling ---------------------------------------------------------------------

    def prepare_data(self, v: Tensor) -> Tensor:
        """Validate the data ``v`` and apply the data floor.

        Parameters
        ----------
        v : tensor
            Data, any shape.

        Returns
        -------
        tensor
            ``v`` itself, or ``max(v, data_eps)`` for divergences that need positive data.

        Raises
        ------
        ValueError
            If ``v`` has negative entries and the divergence needs nonnegative data.

        Examples
        --------
        >>> import numpy as np
        >>> get_loss("is").prepare_data(np.array([0.0, 2.0]))
        array([1.e-08, 2.e+00])
        """
        if self.needs_nonnegative_data and _size(v) and float(tl.min(v)) < 0:
            raise ValueError(f"v must be nonnegative for the {self.name} divergence")
        if self.needs_positive_data:
            v = tl.clip(v, self.data_eps, None)
        return v

    def _floor_model(self, y: Tensor) -> Tensor:
        return tl.clip(y, self.eps, None) if self.needs_positive_model else y

    def _check(self, v: Tensor, y: Tensor) -> Tensor:
        if tuple(tl.shape(v)) != tuple(tl.shape(y)):
            raise ValueError(
                f"y must have the shape of v: got v {tuple(tl.shape(v))}, y {tuple(tl.shape(y))}"
            )
        return self.prepare_data(v)

    def _checked(self, v: Tensor, y: Tensor, check: bool) -> tuple[Tensor, Tensor]:
        # what every entrywise evaluation takes: the data checked (unless the caller did it
        # with prepare_data) and the model floored
        return (self._check(v, y) if check else v), self._floor_model(y)

    # ---- public evaluation -----------------------------------------------------------------

    def elementwise(self, v: Tensor, y: Tensor, *, check: bool = True) -> Tensor:
        """Entrywise divergence, same shape as ``v`` (separable divergences only).

        Parameters
        ----------
        v, y : tensor
            Data and model of the same shape.
        check : bool, default True
            Validate the shapes and the data and apply the data floor; pass ``False`` only
            for data already returned by :meth:`prepare_data`.

        Returns
        -------
        tensor
            ``d(v_i || y_i)`` for every entry.

        Examples
        --------
        >>> import numpy as np
        >>> get_loss("l2").elementwise(np.array([1.0, 2.0]), np.array([0.0, 0.0]))
        array([0.5, 2. ])
        """
        if not self.separable:
            raise TypeError(f"the {self.name} divergence is not separable; use per_sample")
        return self._elementwise(*self._checked(v, y, check))

    def per_sample(self, v: Tensor, y: Tensor, *, check: bool = True) -> Tensor:
        """Divergence of every sample (first axis), shape ``(b,)``.

        Parameters
        ----------
        v, y : tensor
            Data and model, shape ``(b, *sample_shape)`` (a 1-D array is one sample).
        check : bool, default True
            See :meth:`elementwise`.

        Returns
        -------
        tensor
            ``d(v_j || y_j)`` for every sample ``j``.

        Examples
        --------
        >>> import numpy as np
        >>> get_loss("l1").per_sample(np.array([[1.0, -1.0], [0.0, 0.0]]), np.zeros((2, 2)))
        array([2., 0.])
        """
        if check:
            v = self._check(v, y)
        return self._per_sample(_as_batch(v), _as_batch(y))

    def value(self, v: Tensor, y: Tensor, *, check: bool = True) -> Tensor:
        """Total divergence: the sum of :meth:`per_sample` over the batch (a 0-d tensor).

        Parameters
        ----------
        v, y, check
            As in :meth:`per_sample` (a 1-D array is one sample).

        Returns
        -------
        tensor
            ``sum_j d(v_j || y_j)``.

        Examples
        --------
        >>> import numpy as np
        >>> float(get_loss("kl").value(np.array([0.0, 1.0]), np.array([1.0, 1.0])))
        1.0
        """
        return tl.sum(self.per_sample(v, y, check=check))

    def gradient(self, v: Tensor, y: Tensor, *, check: bool = True) -> Tensor:
        """Gradient of :meth:`value` with respect to the model ``y`` (a subgradient if nonsmooth).

        Parameters
        ----------
        v, y, check
            As in :meth:`elementwise`, for every divergence (separable or not).

        Returns
        -------
        tensor
            ``∂ d(v || y) / ∂y``, same shape as ``y``.

        Examples
        --------
        >>> import numpy as np
        >>> get_loss("kl").gradient(np.array([2.0]), np.array([1.0]))
        array([-1.])
        """
        return self._gradient(*self._checked(v, y, check))

    def curvature(self, v: Tensor, y: Tensor, *, check: bool = True) -> Tensor:
        """Entrywise second derivative ``∂²d/∂y²`` (smooth separable divergences only).

        The Hessian of a sample's code problem is ``W^T diag(curvature) W``.

        Parameters
        ----------
        v, y, check
            As in :meth:`elementwise`.

        Returns
        -------
        tensor
            Same shape as ``y``.

        Examples
        --------
        >>> import numpy as np
        >>> get_loss("kl").curvature(np.array([2.0]), np.array([1.0]))
        array([2.])
        """
        if not (self.separable and self.smooth):
            raise TypeError(
                f"the {self.name} divergence has no entrywise curvature; see curvature_bound"
            )
        return self._curvature(*self._checked(v, y, check))

    # ---- per-class kernels -----------------------------------------------------------------

    def _per_sample(self, v: Tensor, y: Tensor) -> Tensor:
        # separable: sum the entries of each sample (v, y already (b, n) and floored by caller)
        return tl.sum(self._elementwise(v, self._floor_model(y)), axis=1)

    def _elementwise(self, v: Tensor, y: Tensor) -> Tensor:
        raise NotImplementedError

    def _gradient(self, v: Tensor, y: Tensor) -> Tensor:
        raise NotImplementedError

    def _curvature(self, v: Tensor, y: Tensor) -> Tensor:
        raise NotImplementedError


def _size(x: Tensor) -> int:
    return int(np.prod(tuple(tl.shape(x))))


# --------------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SquaredL2(Divergence):
    """Half squared Euclidean distance ``d(v || y) = ½ ||v - y||²`` (β-divergence at β = 2).

    Any real data; gradient ``y - v``; curvature 1, so ``L = ||W^T W||_2``.

    Examples
    --------
    >>> import numpy as np
    >>> float(SquaredL2().value(np.array([3.0, 0.0]), np.array([1.0, 0.0])))
    2.0
    """

    curvature_bound = 1.0

    @property
    def name(self) -> str:
        return "l2"

    def _elementwise(self, v, y):
        return _half_squared(v, y)

    def _gradient(self, v, y):
        return y - v

    def _curvature(self, v, y):
        return tl.zeros_like(y) + 1


@dataclass(frozen=True)
class L1(Divergence):
    """ℓ1 distance ``Σ |v_i - y_i|``: nonsmooth, subgradient ``sign(y - v)`` (0 at ties).

    Examples
    --------
    >>> import numpy as np
    >>> L1().gradient(np.array([1.0, 1.0, 1.0]), np.array([0.0, 1.0, 3.0]))
    array([-1.,  0.,  1.])
    """

    smooth = False

    @property
    def name(self) -> str:
        return "l1"

    def _elementwise(self, v, y):
        return tl.abs(v - y)

    def _gradient(self, v, y):
        return tl.sign(y - v)


@dataclass(frozen=True)
class L2Distance(Divergence):
    """Non-squared ℓ2 distance of each sample, ``d(v || y) = ||v - y||_2`` (not separable).

    Summed over a batch this is the ℓ2,1 objective. Subgradient ``(y - v) / ||y - v||_2``, and 0
    for an exact fit (any vector of norm ≤ 1 would do).

    Examples
    --------
    >>> import numpy as np
    >>> L2Distance().per_sample(np.array([[3.0, 4.0]]), np.zeros((1, 2)))
    array([5.])
    """

    separable = False
    smooth = False

    @property
    def name(self) -> str:
        return "l2_nonsquared"

    def _per_sample(self, v, y):
        return tl.sqrt(tl.sum((v - y) ** 2, axis=1))

    def _gradient(self, v, y):
        residual = _as_batch(y - v)
        norms = tl.sqrt(tl.sum(residual**2, axis=1))
        # zero guard: an exact fit gets the zero subgradient
        norms = tl.where(norms > 0, norms, 1.0)
        return tl.reshape(residual / tl.reshape(norms, (-1, 1)), tl.shape(y))


@dataclass(frozen=True)
class Huber(Divergence):
    """Huber loss ``Σ h(v_i - y_i)``, ``h(u) = u²/2`` if ``|u| <= threshold`` else
    ``threshold (|u| - threshold/2)``.

    C¹ with gradient ``clip(y - v, -threshold, threshold)`` and curvature ``1{|u| <= threshold}``,
    so ``curvature_bound = 1``. The paper never states its threshold: it is required here.

    Parameters
    ----------
    threshold : float
        The transition point, > 0 (unrelated to the α of the α-divergence).

    Examples
    --------
    >>> import numpy as np
    >>> Huber(threshold=1.0).elementwise(np.array([0.5, 3.0]), np.zeros(2))
    array([0.125, 2.5  ])
    """

    threshold: float
    curvature_bound = 1.0
    _unit_parameters = ("threshold",)

    @property
    def name(self) -> str:
        return "huber"

    def _elementwise(self, v, y):
        u = tl.abs(v - y)
        t = self.threshold
        return tl.where(u <= t, u**2 / 2, t * (u - t / 2))

    def _gradient(self, v, y):
        return tl.clip(y - v, -self.threshold, self.threshold)

    def _curvature(self, v, y):
        return indicator(tl.abs(v - y) <= self.threshold, y)


@dataclass(frozen=True, eq=False)
class Mahalanobis(Divergence):
    """Mahalanobis divergence of each sample, ``d(v || y) = ½ (v - y)^T A (v - y)``.

    ``A`` is a symmetric positive semi-definite ``(n, n)`` matrix, ``n`` the number of entries of a
    (vectorised, C-order) sample. Gradient ``A (y - v)``; ``curvature_bound = ||A||_2``.

    Parameters
    ----------
    matrix : array-like
        The matrix ``A`` (stored as a read-only float64 numpy array; converted to the data's
        backend, dtype and device at each use). It is symmetrised, and validated to be PSD.

    Examples
    --------
    >>> import numpy as np
    >>> d = Mahalanobis(np.diag([1.0, 4.0]))
    >>> d.per_sample(np.array([[1.0, 1.0]]), np.zeros((1, 2)))
    array([2.5])
    """

    matrix: Any = field(default=None, repr=False)
    curvature_bound: float = field(init=False, default=0.0)
    separable = False

    def __post_init__(self):
        if self.matrix is None:
            raise ValueError("matrix is required for the mahalanobis divergence")
        # construction-time validation happens once on the host, in numpy
        a = np.array(to_numpy(self.matrix), dtype=np.float64)
        if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] == 0:
            raise ValueError(f"matrix must be a non-empty square matrix, got shape {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError("matrix must be finite")
        scale = max(1.0, float(np.max(np.abs(a))))
        if not np.allclose(a, a.T, rtol=1e-10, atol=1e-12 * scale):
            raise ValueError("matrix must be symmetric")
        a = (a + a.T) / 2
        eigenvalues = np.linalg.eigvalsh(a)
        if eigenvalues[0] < -1e-10 * max(scale, float(eigenvalues[-1])):
            raise ValueError(
                f"matrix must be positive semi-definite (min eigenvalue {eigenvalues[0]:.3g})"
            )
        a.flags.writeable = False
        object.__setattr__(self, "matrix", a)
        object.__setattr__(self, "curvature_bound", float(max(eigenvalues[-1], 0.0)))

    def __repr__(self) -> str:
        return f"Mahalanobis(matrix=<{self.matrix.shape[0]}x{self.matrix.shape[1]}>)"

    @property
    def name(self) -> str:
        return "mahalanobis"

    def _check(self, v, y):
        v = super()._check(v, y)
        n = tl.shape(_as_batch(v))[1]
        if n != self.matrix.shape[0]:
            raise ValueError(
                f"v has {n} entries per sample but the mahalanobis matrix is "
                f"{self.matrix.shape[0]}x{self.matrix.shape[0]}"
            )
        return v

    def _matrix_like(self, x):
        return tl.tensor(self.matrix, **tl.context(x))

    def _per_sample(self, v, y):
        residual = v - y
        return tl.sum(residual * tl.dot(residual, self._matrix_like(v)), axis=1) / 2

    def _gradient(self, v, y):
        residual = _as_batch(y - v)
        return tl.reshape(tl.dot(residual, self._matrix_like(residual)), tl.shape(y))


@dataclass(frozen=True)
class _OrderFamily(Divergence):
    """What the β and α families share: one real order (``_order_parameters``), a closed form
    at the orders where the general formula is a limit or loses accuracy (``_closed_forms``,
    order -> kernel), the family's general formula elsewhere (``_general_elementwise``)."""

    _closed_forms: ClassVar[dict] = {}

    def _elementwise(self, v, y):
        order = getattr(self, self._order_parameters[0])
        closed_form = self._closed_forms.get(order)
        if closed_form is not None:
            return closed_form(v, y)
        return self._general_elementwise(v, y, order)

    def _general_elementwise(self, v: Tensor, y: Tensor, order: float) -> Tensor:
        raise NotImplementedError


@dataclass(frozen=True)
class BetaDivergence(_OrderFamily):
    """β-divergence, any real β: ``[v^β + (β-1) y^β - β v y^(β-1)] / (β(β-1))`` per entry.

    Exact closed forms at the limits: β = 1 is KL / I-divergence ``v log(v/y) - v + y`` (with
    ``0 log 0 = 0``), β = 0 is Itakura-Saito ``v/y - log(v/y) - 1`` and β = 2 is ``½ (v - y)²``.
    Other β use a cancellation-free rewrite of the formula (accurate right next to the limits,
    see ``_power_family``). The gradient ``y^(β-2) (y - v)`` and the curvature
    ``(β-1) y^(β-2) - (β-2) v y^(β-3)`` hold for every β. Convex in ``y`` only for
    1 <= β <= 2 (IS is not). ``curvature_bound`` exists only at β = 2 (use :class:`SquaredL2`,
    which :func:`get_loss` returns there).

    Parameters
    ----------
    beta : float
        Any finite real number.
    eps : float, default 1e-12
        Model floor: evaluated at ``max(y, eps)`` (except at β = 2).
    data_eps : float, default 1e-8
        Data floor for β <= 0: data below ``data_eps`` (zeros) become ``data_eps``.

    Examples
    --------
    >>> import numpy as np
    >>> float(BetaDivergence(1.0).value(np.array([0.0, np.e]), np.array([1.0, 1.0])))
    2.0
    """

    beta: float = 1.0
    eps: float = EPS
    data_eps: float = DATA_EPS
    _order_parameters = ("beta",)
    _unit_parameters = ("eps", "data_eps")

    @property
    def name(self) -> str:
        return {0.0: "is", 1.0: "kl", 2.0: "l2"}.get(self.beta, "beta")

    @property
    def convex(self) -> bool:
        return 1.0 <= self.beta <= 2.0

    @property
    def needs_nonnegative_data(self) -> bool:
        return self.beta != 2.0

    @property
    def needs_positive_data(self) -> bool:
        return self.beta <= 0.0

    @property
    def needs_positive_model(self) -> bool:
        return self.beta != 2.0

    @property
    def curvature_bound(self) -> float | None:
        return 1.0 if self.beta == 2.0 else None

    _closed_forms: ClassVar[dict] = {1.0: _kl, 0.0: _itakura_saito, 2.0: _half_squared}

    def _general_elementwise(self, v, y, beta):
        return y**beta * _power_family(v, y, beta)

    def _gradient(self, v, y):
        return y ** (self.beta - 2) * (y - v)

    def _curvature(self, v, y):
        b = self.beta
        return (b - 1) * y ** (b - 2) - (b - 2) * v * y ** (b - 3)


@dataclass(frozen=True)
class AlphaDivergence(_OrderFamily):
    """α-divergence, any real α: ``[v^α y^(1-α) - α v + (α-1) y] / (α(α-1))`` per entry.

    Exact closed forms at α = 1 (KL, ``v log(v/y) - v + y``), α = 0 (dual KL,
    ``y log(y/v) - y + v``) and α = ½ (Hellinger, ``2 (√v - √y)²``); α = 2 is Pearson's and
    α = -1 Neyman's χ²/2; other α use the cancellation-free rewrite of the β family. Gradient
    ``(1 - (v/y)^α) / α`` (``log(y/v)`` at α = 0, evaluated stably next to it), curvature
    ``v^α y^(-α-1)`` >= 0: convex in ``y`` for every α; no global curvature bound.

    Parameters
    ----------
    alpha : float
        Any finite real number.
    eps : float, default 1e-12
        Model floor: evaluated at ``max(y, eps)``.
    data_eps : float, default 1e-8
        Data floor for α <= 0: data below ``data_eps`` (zeros) become ``data_eps``.

    Examples
    --------
    At α = 1 it is the KL divergence, the β-divergence at β = 1:

    >>> import numpy as np
    >>> v, y = np.array([4.0, 1.0]), np.array([1.0, 2.0])
    >>> bool(np.isclose(AlphaDivergence(1.0).value(v, y), BetaDivergence(1.0).value(v, y)))
    True
    """

    alpha: float = 0.5
    eps: float = EPS
    data_eps: float = DATA_EPS
    _order_parameters = ("alpha",)
    _unit_parameters = ("eps", "data_eps")
    needs_nonnegative_data = True
    needs_positive_model = True

    @property
    def name(self) -> str:
        return {0.5: "hellinger", 1.0: "kl"}.get(self.alpha, "alpha")

    @property
    def needs_positive_data(self) -> bool:
        return self.alpha <= 0.0

    _closed_forms: ClassVar[dict] = {1.0: _kl, 0.0: _dual_kl, 0.5: _hellinger}

    def _general_elementwise(self, v, y, alpha):
        return y * _power_family(v, y, alpha)

    def _gradient(self, v, y):
        # (1 - r^α) / α = -L (e^(αL) - 1) / (αL): stable at α -> 0, where it is log(y/v)
        _, log_ratio, positive = _log_ratio(v, y)
        gradient = -log_ratio * _expm1_over_z(self.alpha * log_ratio)
        if self.alpha <= 0:  # the data are floored to be positive
            return gradient
        return tl.where(positive, gradient, 1 / self.alpha)

    def _curvature(self, v, y):
        return v**self.alpha * y ** (-self.alpha - 1)


# --------------------------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------------------------

_FLOORS = ("eps", "data_eps")

_ALIASES = {
    "l2": "l2", "squared": "l2", "squared_l2": "l2", "frobenius": "l2", "euclidean": "l2",
    "l1": "l1", "absolute": "l1",
    "l2_nonsquared": "l2_nonsquared", "l2_distance": "l2_nonsquared", "l21": "l2_nonsquared",
    "kl": "kl", "kullback-leibler": "kl", "i-divergence": "kl",
    "is": "is", "itakura-saito": "is",
    "beta": "beta", "alpha": "alpha", "hellinger": "hellinger",
    "huber": "huber", "mahalanobis": "mahalanobis",
}  # fmt: skip

# canonical name -> (required parameters, optional parameters)
_PARAMETERS = {
    "l2": ((), ()),
    "l1": ((), ()),
    "l2_nonsquared": ((), ()),
    "kl": ((), _FLOORS),
    "is": ((), _FLOORS),
    "beta": (("beta",), _FLOORS),
    "alpha": (("alpha",), _FLOORS),
    "hellinger": ((), _FLOORS),
    "huber": (("threshold",), ()),
    "mahalanobis": (("matrix",), ()),
}

LOSS_NAMES = tuple(sorted(_ALIASES))
"""Every name (and alias) that :func:`get_loss` accepts."""

def beta_of(loss: Divergence) -> float | None:
    """The β of a β-divergence, whatever object names it (:class:`BetaDivergence`, and
    :class:`SquaredL2`, β = 2); None for the other divergences (no multiplicative update).

    Examples
    --------
    >>> beta_of(get_loss("is")), beta_of(get_loss(2.0)), beta_of(get_loss("hellinger"))
    (0.0, 2.0, None)
    """
    if isinstance(loss, SquaredL2):
        return 2.0
    return float(loss.beta) if isinstance(loss, BetaDivergence) else None


MULTIPLICATIVE_LOSSES = frozenset({"kl", "is", "beta"})
"""Names of the divergences whose ``"auto"`` steps (codes and dictionary) are the
multiplicative update: the β-divergences but β = 2 (named ``"l2"``, whatever the object),
which keeps the paper's steps."""


def _beta_loss(beta: Any, **floors: Any) -> Divergence:
    beta = _check_real("beta", beta)
    if beta == 2.0:
        return SquaredL2()  # the floors do not apply to the squared loss
    return BetaDivergence(beta, **floors)


def _alpha_loss(alpha: Any, **floors: Any) -> Divergence:
    alpha = _check_real("alpha", alpha)
    if alpha == 1.0:
        return BetaDivergence(1.0, **floors)  # one object for KL, however it is named
    return AlphaDivergence(alpha, **floors)


_FACTORIES = {
    "l2": SquaredL2,
    "l1": L1,
    "l2_nonsquared": L2Distance,
    "kl": lambda **p: BetaDivergence(1.0, **p),
    "is": lambda **p: BetaDivergence(0.0, **p),
    "beta": _beta_loss,
    "alpha": _alpha_loss,
    "hellinger": lambda **p: AlphaDivergence(0.5, **p),
    "huber": Huber,
    "mahalanobis": Mahalanobis,
}


def get_loss(loss: str | float | Divergence, **params: Any) -> Divergence:
    """Look up a divergence by name (or β value) and build it.

    Parameters
    ----------
    loss : str, float or Divergence
        A name from :data:`LOSS_NAMES` (case-insensitive): ``"l2"``/``"squared"`` (½ squared ℓ2),
        ``"l1"``, ``"l2_nonsquared"``, ``"kl"``, ``"is"``, ``"beta"``, ``"alpha"``,
        ``"hellinger"``, ``"huber"``, ``"mahalanobis"``; a real number, meaning the β of a
        β-divergence; or a :class:`Divergence`, returned as it is.
    **params
        ``beta`` (for ``"beta"``), ``alpha`` (``"alpha"``), ``threshold`` (``"huber"``),
        ``matrix`` (``"mahalanobis"``); ``eps`` and ``data_eps`` (the floors) for the β/α family.

    Returns
    -------
    Divergence
        The canonical object: β = 2 gives :class:`SquaredL2`, β = 1 and α = 1 give the KL
        :class:`BetaDivergence`, ``"hellinger"`` gives ``AlphaDivergence(0.5)``.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the valid ones), a missing or unknown parameter,
        or a parameter out of range.

    Examples
    --------
    >>> get_loss("kl").name
    'kl'
    >>> get_loss(2.0)
    SquaredL2()
    >>> get_loss("huber", threshold=0.5)
    Huber(threshold=0.5)
    """
    if isinstance(loss, Divergence):
        if params:
            raise ValueError(f"params {sorted(params)} cannot be combined with a Divergence object")
        return loss
    if isinstance(loss, numbers.Real) and not isinstance(loss, bool):
        return get_loss("beta", beta=loss, **params)
    if not isinstance(loss, str) or loss.strip().lower() not in _ALIASES:
        raise ValueError(
            f"loss must be a real number (beta), a Divergence or one of {list(LOSS_NAMES)}; "
            f"got {loss!r}"
        )
    name = _ALIASES[loss.strip().lower()]
    try:  # the objects are immutable: one per name and parameters (a learner asks every step)
        # the types are in the key: True == 1, but beta=True must still be refused
        return _cached_loss(name, tuple((key, type(value), value)
                                        for key, value in sorted(params.items())))
    except TypeError:  # unhashable parameters (a Mahalanobis matrix): build it each time
        return _build_loss(name, params)


@functools.lru_cache(maxsize=128)
def _cached_loss(name: str, items: tuple) -> Divergence:
    return _build_loss(name, {key: value for key, _, value in items})


def _build_loss(name: str, params: dict) -> Divergence:
    required, optional = _PARAMETERS[name]
    missing = [p for p in required if p not in params]
    unknown = [p for p in params if p not in required + optional]
    if missing:
        raise ValueError(f"the {name} loss needs the parameter(s) {missing}")
    if unknown:
        allowed = list(required + optional)
        raise ValueError(f"unknown parameter(s) {unknown} for the {name} loss (allowed: {allowed})")
    return _FACTORIES[name](**params)
