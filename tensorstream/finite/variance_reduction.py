"""Functional core of variance-reduced stochastic MF (Zhao, Haskell & Feng 2017, Algorithm 1).

Everything here is a pure function of the dictionary ``W`` (``(d, k)``), a formulation
(:mod:`tensorstream.finite.formulations`) and data with samples on the first axis:

* :func:`batch_gradient` -- the mean of Danskin's gradients ``(W h + r - x) h^T`` over a batch,
  ``(W H^T H + (R - X)^T H) / b`` (eq. 7, vectorised);
* :func:`chunk_sums` / :func:`full_gradient` -- the full gradient ``G_s`` at the snapshot as
  a map (per-chunk partial sums ``H^T H``, ``(R - X)^T H``, losses) and a reduce (their sum),
  read chunk by chunk, so it runs on data that do not fit in memory (dask) and on Dask
  workers unchanged (``G = (W S1 + S2) / n``; :meth:`FiniteData.map_reduce`);
* :func:`vr_direction` -- the SVRG estimator ``V`` (line 10), :func:`prox_step` (line 11);
* :func:`sgd_step_size` -- ``beta / (b t + beta')`` of the proximal SGD baseline;
* :func:`gradient_mapping` -- ``Gamma = (W - P_W(W - eta G; eta)) / eta`` (section 4.1);
* :func:`objective` -- ``f(W)`` by a full pass with accurate solves;
* :func:`inexact_tolerance` -- Theorem 2's schedule, shifted by one (defined at ``s = t = 0``).

Mean scaling throughout (lines 5, 10): ``G_s`` is a mean over ``n``, mini-batch terms means over
``b``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import tensorly as tl

from ..core.backend import take_rows
from ..core.dictionary import spectral_norm_psd
from ..core.products import narrow_dot
from ..core.validation import (
    as_array,
    check_batch,
    check_not_too_large,
    check_not_too_small,
    densify,
    is_sparse,
)
from ..streams import Epochs, Stream
from .formulations import FiniteCodes, Formulation, sample_losses, solve_codes

Tensor = Any

__all__ = [
    "FiniteData", "GradientSums", "batch_gradient", "chunk_count", "chunk_loss", "chunk_scatter",
    "chunk_sums", "coded_sums", "estimate_lipschitz",
    "full_gradient", "gradient_mapping", "inexact_tolerance", "objective", "prox_step",
    "sgd_step_size", "vr_direction",
]


# -- finite data, read chunk by chunk -------------------------------------------------------------


class FiniteData:
    """A finite data set ``(n, d)`` read in chunks or by rows, each piece validated and converted
    to the backend when it is read (a dask array is never loaded whole).

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        numpy, torch, dask, xarray (samples on the first dim) or a
        :class:`tensorstream.streams.Epochs` stream (its data are used).
    backend : str
    context : dict
        dtype/device of the learner's state.
    nonnegative : bool
        Refuse negative entries.
    spread : tensorstream.engine.distributed.SpreadRows, optional
        The same rows spread over the workers of a Dask cluster: the full passes
        (:meth:`map_reduce`) then run there, each worker reading its own chunks.
    scale : float, default 1.0
        Every piece is read in units of ``scale`` (divided by it as it is read: the data set
        itself is not copied), so that weights, steps and tolerances are in the data's units.
    way_out : str, default ""
        What to do instead, said when negative entries are refused.
    """

    def __init__(self, X: Any, backend: str, context: dict, nonnegative: bool = False,
                 spread: Any = None, scale: float = 1.0, way_out: str = ""):
        self.X = X
        self.backend = backend
        self.context = context
        self.nonnegative = nonnegative
        self.way_out = way_out
        self.spread = spread
        self.scale = float(scale)
        self.n, self.d = int(X.shape[0]), int(X.shape[1])

    def _convert(self, piece: Any) -> Tensor:
        piece = check_batch(densify(piece), backend=self.backend, context=self.context,
                            sample_shape=(self.d,), nonnegative=self.nonnegative,
                            missing_hint=False,  # finite data: no missing entries
                            way_out=self.way_out)
        # refused before the scale divides them: the snapshot loss and the squared gradient
        # map (fourth powers of the data) would be inf, or the data vanish (tiny ones)
        check_not_too_large(piece, power=4)
        check_not_too_small(piece)
        return piece if self.scale == 1.0 else piece / self.scale

    def rows(self, index: np.ndarray) -> Tensor:
        """Samples at the (sorted) positions ``index``."""
        return self._convert(take_rows(self.X, np.sort(np.asarray(index, dtype=np.intp))))

    def chunks(self, chunk_size: int) -> Iterable[tuple[int, Tensor]]:
        """``(start, chunk)`` pairs covering the samples in order."""
        for start in range(0, self.n, chunk_size):
            yield start, self._convert(self.X[start:start + chunk_size])

    def map_reduce(self, function: Callable, chunk_size: int, *args: Any) -> Any:
        """``sum over chunks of function(chunk, *args)``, the chunks in row order (a full
        pass). With :attr:`spread` each worker sums the chunks of its block and the driver
        adds the workers' sums: the same result up to the order of floating-point additions.
        A data set without samples is a ``ValueError`` (every full pass needs one chunk).
        """
        if self.spread is not None:
            reading = {"backend": self.backend, "context": self.context,
                       "nonnegative": self.nonnegative, "scale": self.scale,
                       "way_out": self.way_out}
            total = _add(self.spread.map_reduce(function, chunk_size, args, reading))
        else:
            total = _add(function(chunk, *args) for _, chunk in self.chunks(chunk_size))
        if total is None:
            raise ValueError("no data: a full pass needs at least one sample")
        return total


def finite_matrix(X: Any, owner: str, n_features: int | None = None) -> Any:
    """The matrix ``(n_samples, n_features)`` behind ``X`` (an array, a dask array, an
    ``xarray.DataArray`` with samples first, or an :class:`~tensorstream.streams.Epochs`
    stream's data), or a clear error naming ``owner``: a stream, sparse data, another shape,
    or (given ``n_features``) another number of features."""
    X = as_array(X)
    if is_sparse(X):
        raise TypeError(f"{owner} does not support sparse input: its "
                        f"formulations' proximal steps need dense data; pass X.toarray()")
    if isinstance(X, Epochs):
        X = X.sample_space()
    elif isinstance(X, Stream) or (not hasattr(X, "shape") and hasattr(X, "__iter__")):
        raise TypeError(
            f"{owner} needs a finite data set (an array, a dask array, an "
            f"xarray.DataArray with samples first, or an Epochs stream), got "
            f"{type(X).__name__}: a stream or generator may be infinite and has no full "
            f"gradient")
    if X is None or not hasattr(X, "shape"):
        raise TypeError(f"X must be an array of shape (n_samples, n_features), got "
                        f"{type(X).__name__}")
    if hasattr(X, "dims") and hasattr(X, "data"):
        X = X.data
    if len(X.shape) != 2:
        raise ValueError(f"X must be a matrix (n_samples, n_features), got shape "
                         f"{tuple(X.shape)}; Reshape your data")
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X has {X.shape[0]} sample(s) and {X.shape[1]} feature(s) "
                         f"(shape={tuple(X.shape)}) while a minimum of 1 is required.")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"X has {X.shape[1]} features, but {owner} is "
                         f"expecting {n_features} features as input")
    return X


def _add(parts: Iterable) -> Any:
    """``((p_0 + p_1) + p_2) + ...``: the order one process adds its chunks in."""
    total = None
    for part in parts:
        total = part if total is None else total + part
    return total


# -- gradients ------------------------------------------------------------------------------------


def batch_gradient(W: Tensor, X: Tensor, codes: FiniteCodes) -> Tensor:
    """Mean gradient ``(1/b) sum_j (W h_j + r_j - x_j) h_j^T = (W H^T H + (R - X)^T H) / b``.

    Examples
    --------
    >>> import numpy as np
    >>> from tensorstream.finite.formulations import FiniteCodes
    >>> W, X = np.eye(2), np.array([[1.0, 2.0]])
    >>> codes = FiniteCodes(np.array([[1.0, 1.0]]), np.zeros((1, 2)), np.ones(1), np.zeros(1))
    >>> batch_gradient(W, X, codes)
    array([[ 0.,  0.],
           [-1., -1.]])
    """
    H = codes.H
    b = tl.shape(X)[0]
    return (tl.dot(W, tl.dot(tl.transpose(H), H))
            + narrow_dot(tl.transpose(codes.outliers - X), H)) / b


@dataclass(frozen=True)
class GradientSums:
    """Additive statistics of a set of samples at one dictionary (the map's output)."""

    HtH: Tensor  #: (k, k) sum of h h^T
    RXtH: Tensor  #: (d, k) sum of (r - x) h^T
    loss: float  #: sum of the per-sample objectives at these codes
    count: int  #: samples
    iterations: int  #: code-solver iterations, summed over samples
    max_iter: int  #: largest per-sample iteration count
    codes: tuple = ()  #: the chunks' FiniteCodes in row order, when kept (snapshot codes)

    def __add__(self, other: GradientSums) -> GradientSums:
        return GradientSums(self.HtH + other.HtH, self.RXtH + other.RXtH,
                            self.loss + other.loss, self.count + other.count,
                            self.iterations + other.iterations,
                            max(self.max_iter, other.max_iter), self.codes + other.codes)

    def gradient(self, W: Tensor) -> Tensor:
        """``G = (W sum h h^T + sum (r - x) h^T) / count``."""
        return (tl.dot(W, self.HtH) + self.RXtH) / self.count


def chunk_sums(form: Formulation, W: Tensor, X: Tensor, codes: FiniteCodes) -> GradientSums:
    """The map: partial sums of one chunk coded at ``W``."""
    H = codes.H
    losses = sample_losses(form, X, W, codes)
    return GradientSums(tl.dot(tl.transpose(H), H), narrow_dot(tl.transpose(codes.outliers - X), H),
                        float(tl.sum(losses)), int(tl.shape(X)[0]), int(codes.n_iter.sum()),
                        int(codes.n_iter.max(initial=0)))


def coded_sums(chunk: Tensor, form: Formulation, W: Tensor, settings: dict,
               keep_codes: bool = False) -> GradientSums:
    """The map of a full-gradient pass: code one chunk at ``W`` (``settings``: the
    :func:`~tensorstream.finite.formulations.solve_codes` settings) and sum it."""
    codes = solve_codes(form, chunk, W, **settings)
    sums = chunk_sums(form, W, chunk, codes)
    return replace(sums, codes=(codes,)) if keep_codes else sums


def full_gradient(form: Formulation, W: Tensor, data: FiniteData, chunk_size: int, *,
                  coder: str = "fista", tol: float = 1e-6, max_iter: int = 100,
                  keep_codes: bool = False) -> tuple[Tensor, GradientSums, list | None]:
    """``G = grad g(W)`` over the whole data set, chunk by chunk (line 5; Remark 2).

    Memory is ``O(dk + (d + k) chunk_size)`` unless ``keep_codes`` (then the codes of every
    chunk are returned too, for ``store_snapshot_codes``).

    Returns
    -------
    G : tensor (d, k)
    sums : GradientSums
    codes : list of FiniteCodes (chunk order) or None
    """
    settings = {"coder": coder, "tol": tol, "max_iter": max_iter}
    sums = data.map_reduce(coded_sums, chunk_size, form, W, settings, keep_codes)
    kept = list(sums.codes) if keep_codes else None
    return sums.gradient(W), replace(sums, codes=()), kept


def vr_direction(W: Tensor, W0: Tensor, X: Tensor, codes: FiniteCodes, codes0: FiniteCodes,
                 G: Tensor) -> Tensor:
    """SVRG estimator (line 10): ``V = grad_B(W) - grad_B(W0) + G`` (means over the batch)."""
    return batch_gradient(W, X, codes) - batch_gradient(W0, X, codes0) + G


def prox_step(form: Formulation, W: Tensor, direction: Tensor, eta: float, n: int) -> Tensor:
    """``P_W(W - eta V; eta)`` (line 11 of Algorithm 1; the prox uses the step)."""
    return form.prox_w(W - eta * direction, eta, n)


def sgd_step_size(beta: float, beta_prime: float, batch_size: int, t: int) -> float:
    """``gamma_t = beta / (b t + beta')`` (Algorithm S-3; ``b t`` samples seen before step t).

    Examples
    --------
    >>> sgd_step_size(300.0, 100.0, 10, 0), sgd_step_size(300.0, 100.0, 10, 10)
    (3.0, 1.5)
    """
    return beta / (batch_size * t + beta_prime)


def gradient_mapping(form: Formulation, W: Tensor, G: Tensor, eta: float, n: int) -> Tensor:
    """``Gamma_eta(W) = (W - P_W(W - eta G; eta)) / eta`` with ``G = grad g(W)`` (section 4.1);
    ``||Gamma||^2 <= eps`` means ``W`` is eps-stationary."""
    return (W - prox_step(form, W, G, eta, n)) / eta


def inexact_tolerance(c_tol: float, tau: float, m: int, s: int, t: int) -> float:
    """Theorem 2's error schedule ``c (m s + t + 1)^-(1/2 + tau)`` (shifted by one so that it is
    defined at ``s = t = 0``; Theorem 2 as printed is not).

    Examples
    --------
    >>> inexact_tolerance(1.0, 0.5, 5, 0, 0), inexact_tolerance(1.0, 0.5, 5, 1, 4)
    (1.0, 0.1)
    """
    return c_tol * (m * s + t + 1) ** -(0.5 + tau)


def objective(form: Formulation, W: Tensor, data: FiniteData, chunk_size: int = 1024, *,
              coder: str = "fista", tol: float = 1e-9, max_iter: int = 5000) -> float:
    """``f(W) = (1/n) sum_i l(x_i, W) + psi(W)`` by a full pass with accurate solves (section 2).
    """
    settings = {"coder": coder, "tol": tol, "max_iter": max_iter}
    total = data.map_reduce(chunk_loss, chunk_size, form, W, settings)
    return total / data.n + form.psi(W, data.n)


def chunk_loss(chunk: Tensor, form: Formulation, W: Tensor, settings: dict) -> float:
    """The map of :func:`objective`: the chunk's summed per-sample objectives at ``W``."""
    codes = solve_codes(form, chunk, W, **settings)
    return float(tl.sum(sample_losses(form, chunk, W, codes)))


def estimate_lipschitz(form: Formulation, W: Tensor, data: FiniteData, n: int, *,
                       chunk_size: int = 1024, coder: str = "fista", tol: float = 1e-6,
                       max_iter: int = 1000, max_trials: int = 40) -> tuple[float, int]:
    """A local Lipschitz constant ``L`` of ``grad g`` at ``W`` by backtracking (our extension).

    The smallest ``L`` (up to a factor 2) such that the prox step ``W+ = P_W(W - G/L; 1/L)``
    satisfies the descent lemma ``g(W+) <= g(W) + <G, W+ - W> + L/2 ||W+ - W||^2`` on ``data``
    (a subsample will do: ``g`` and ``G`` are sample means). The search starts at the curvature
    with the codes frozen, ``lambda_max(H^T H / n)``, and doubles or halves from there. ``n``
    is the size of the whole data set (it scales ``psi`` in the prox).

    Returns
    -------
    L : float
    passes : int
        Full passes over ``data`` spent (for the pass counters).
    """
    G, sums, _ = full_gradient(form, W, data, chunk_size, coder=coder, tol=tol,
                               max_iter=max_iter)
    g0 = sums.loss / sums.count
    passes = [1]

    def descends(L: float) -> bool:
        passes[0] += 1
        Wp = prox_step(form, W, G, 1.0 / L, n)
        D = Wp - W
        # objective() adds psi at the size of what it read: a subsample's, not n's
        gp = objective(form, Wp, data, chunk_size, coder=coder, tol=tol,
                       max_iter=max_iter) - form.psi(Wp, data.n)
        bound = g0 + float(tl.sum(G * D)) + 0.5 * L * float(tl.sum(D * D))
        return gp <= bound + 1e-12 * max(1.0, abs(g0))

    L = max(spectral_norm_psd(sums.HtH / sums.count), 1e-12)
    if descends(L):  # halve while the smaller constant still majorises
        for _ in range(max_trials):
            if not descends(L / 2):
                break
            L /= 2
        return L, passes[0]
    for _ in range(max_trials):  # double until it majorises
        L *= 2
        if descends(L):
            return L, passes[0]
    raise RuntimeError(f"no step descended after {max_trials} doublings; give step_size")


def scatter(data: FiniteData, chunk_size: int) -> Tensor:
    """``X^T X`` (``(d, d)``) by one chunked pass (for P7's ``psi``)."""
    return data.map_reduce(chunk_scatter, chunk_size)


def chunk_scatter(chunk: Tensor) -> Tensor:
    """The map of :func:`scatter`: ``chunk^T chunk``."""
    return tl.dot(tl.transpose(chunk), chunk)


def chunk_count(chunk: Tensor) -> int:
    """The samples of a chunk (a pass that only reads and validates the data)."""
    return int(tl.shape(chunk)[0])


def default_sizes(n: int, inner_batch: int | None, epoch_length: int | None
                  ) -> tuple[int, int]:
    """The paper's ``b = 0.2 n^(2/3)`` and ``m = 0.5 n^(1/3)``, rounded, at least 1 (section 5.2;
    ``b`` at most ``n``).

    Examples
    --------
    >>> default_sizes(1797, None, None), default_sizes(5000, None, None)
    ((30, 6), (58, 9))
    """
    b = max(1, round(0.2 * n ** (2 / 3))) if inner_batch is None else inner_batch
    m = max(1, round(0.5 * n ** (1 / 3))) if epoch_length is None else epoch_length
    return min(b, n), m


def alpha(n: int, b: int) -> float:
    """``alpha(n, b) = (n - b) / (b (n - 1))``, the without-replacement variance factor
    (Lemma 2)."""
    return (n - b) / (b * (n - 1)) if n > 1 else 0.0
