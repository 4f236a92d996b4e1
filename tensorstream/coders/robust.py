"""The coding step of robust NMF with outliers (Zhao & Tan, "Online Nonnegative Matrix
Factorization with Outliers", IEEE TSP 2017): codes and outliers.

For every sample ``x`` of a batch (a tensor of shape ``(I_1, ..., I_n)``; ``n = 1`` for matrices)
and a fixed CP dictionary ``W`` (its loadings; the matrix is never formed), solve

    min_{h >= 0, e}  1/2 ||x - W h - e||^2 + outlier_alpha ||e||_1             (the paper's eq. 9)
                     + nu2/2 ||e||^2 + alpha sum(h) + ridge/2 ||h||^2
                     + group_alpha sum_g sqrt(|g|) ||h_g||
    subject to       |e_i| <= outlier_bound   (and e >= 0 with nonnegative outliers)

(the paper writes ``r`` for the outliers, ``lambda`` for ``outlier_alpha`` and ``M`` for
``outlier_bound``; the extra penalties are its Section VI) with the paper's two solvers,
vectorised over the batch:

* :func:`robust_code_pgd` (OPGD, the paper's Section IV-A1): block majorisation-minimisation,
  one projected gradient step on ``h`` (step ``kappa / (||W||_2^2 + ridge)``) and then the exact
  minimiser in ``e``. The pair is the projected-gradient method on the smooth function
  ``phi(h) = min_r (...)`` (a Moreau envelope), so ``accelerated=True`` runs FISTA on it, with
  a function-value restart that keeps it monotone.
* :func:`robust_code_admm` (OADMM, the paper's Section IV-B1): ADMM on the splitting ``h = u``,
  ``e = q``;
  returns the feasible pair ``(u, q)``.

With a ``mask`` (1 = observed entry, 0 = missing; the library's missing-data convention) the loss
and the outlier penalty see only the observed entries,
``1/2 ||m * (x - W h - e)||^2 + outlier_alpha ||m * e||_1 (+ ...)``, and ``e`` is 0 on missing
entries
(it does not enter the objective there: 0 is the natural, sparsest choice). Each sample then has
its own Gram ``W^T diag(m) W`` (:func:`~tensorstream.core.dictionary.masked_gram`): OPGD takes a
per-sample step ``kappa / (lambda_max(W^T diag(m) W) + ridge)``, OADMM a per-sample ``R x R``
inverse, both computed once per call for the whole batch (batched ``eigh``/``solve``).

Both stop sample by sample with the paper's rule (its Section VII-B2: relative change of the
objective below ``tol``,
or ``max_iter`` iterations): a converged sample is frozen while the others go on, so a batch is
coded exactly as if its samples were coded one by one. Objectives use the paper's ``1/2``
convention. Only ``tl.*`` calls: every backend works.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorly as tl

from ..core.backend import index_context, tiny_of
from ..core.constraints import prox_l1_box, soft_threshold
from ..core.dictionary import (
    gram,
    masked_gram,
    project,
    reconstruct,
    spectral_norm_psd,
)
from ..core.products import narrow_dot, row_sq_norms
from ..core.validation import (
    check_nonnegative_number,
    check_positive_int,
    check_positive_number,
)
from .lasso import DEAD_CURVATURE

Tensor = Any
_TINY = 1e-300


@dataclass(frozen=True)
class RobustPenalties:
    """Penalties and constraints of the per-sample ``(h, e)`` problem (with the extensions of
    the paper's Section VI).

    Parameters
    ----------
    outlier_alpha : float, default inf
        Weight of ``||e||_1`` (> 0); ``math.inf`` forbids outliers (``e = 0``: plain NMF coding).
    outlier_bound : float or None
        Box ``|e_i| <= outlier_bound``; ``None`` (or ``inf``) for no box.
    nonnegative_outliers : bool
        Restrict to ``e >= 0`` (the paper's set ``R'`` of Section VI).
    outlier_l2 : float
        Tikhonov weight ``nu2`` on ``e`` (eq. 39).
    alpha : float
        Lasso weight on ``h`` (``alpha sum(h)``, as ``h >= 0``).
    ridge : float
        Tikhonov weight ``nu1`` on ``h`` (``ridge/2 ||h||^2``; makes the codes unique).
    group_alpha : float
        Group-lasso weight on consecutive groups of ``group_size`` codes (with ``alpha``: the
        sparse group lasso).
    group_size : int
        Size of the code groups (the last group may be shorter).
    sample_alpha : tensor of shape (b,), tensor shaped like the batch, or None
        Each sample's own weight of ``||e||_1``, in place of ``outlier_alpha`` (finite, > 0;
        ``outlier_alpha`` stays the weight that says whether there are outliers at all): the
        per-sample thresholds of ``RobustOnlineNMF``'s ``outlier_alpha="auto"``; shaped like
        the batch, one weight per entry (its saturated entries weigh less). None: every
        sample has ``outlier_alpha``.
    """

    outlier_alpha: float = math.inf
    outlier_bound: float | None = 1.0
    nonnegative_outliers: bool = False
    outlier_l2: float = 0.0
    alpha: float = 0.0
    ridge: float = 0.0
    group_alpha: float = 0.0
    group_size: int = 1
    sample_alpha: Any = None

    def __post_init__(self) -> None:
        # a weight per sample or per entry: a scalar would broadcast against the batch silently
        if self.sample_alpha is not None and len(self.sample_shape) == 0:
            raise ValueError("sample_alpha must have shape (b,), one weight per sample, or the "
                             "batch's shape, one weight per entry; got a scalar (use "
                             "outlier_alpha)")

    @property
    def sample_shape(self) -> tuple:
        """The shape of ``sample_alpha`` (read from its metadata: no device transfer)."""
        weights = self.sample_alpha
        return tuple(weights.shape) if hasattr(weights, "shape") else np.shape(weights)

    def check_batch(self, batch_shape: tuple) -> None:
        """Refuse a ``sample_alpha`` that is neither one weight per sample of a batch of
        ``batch_shape`` (a length of 1 would broadcast to every sample, another fail deep
        inside a solver) nor shaped like the batch, one weight per entry."""
        shape, batch_shape = self.sample_shape, tuple(batch_shape)
        if self.sample_alpha is None or shape == batch_shape or shape == batch_shape[:1]:
            return
        if len(shape) == 1:
            raise ValueError(f"sample_alpha has {shape[0]} weights but the batch has "
                             f"{batch_shape[0]} samples: one weight per sample")
        raise ValueError(f"sample_alpha has shape {shape} but the batch has shape "
                         f"{batch_shape}: one weight per sample, or one per entry")

    @property
    def bound(self) -> float | None:
        bound = self.outlier_bound
        return None if bound is None or math.isinf(bound) else float(bound)

    @property
    def has_outliers(self) -> bool:
        return not math.isinf(self.outlier_alpha)

    def thresholds(self, ndim: int) -> Any:
        """The l1 weight of the outliers, to broadcast over a batch of ``ndim`` dimensions:
        ``outlier_alpha``, or ``sample_alpha`` as a ``(b, 1, ..., 1)`` tensor (as it is
        when it has one weight per entry)."""
        if self.sample_alpha is None:
            return self.outlier_alpha
        if tl.ndim(self.sample_alpha) > 1:  # one weight per entry: shaped like the batch
            return self.sample_alpha
        return tl.reshape(self.sample_alpha, (-1,) + (1,) * (ndim - 1))


@dataclass(frozen=True)
class RobustCoding:
    """Result of a coding step: codes ``(b, R)``, outliers (shaped like the batch), objectives."""

    codes: Any
    outliers: Any
    losses: Any  #: (b,) per-sample objective at (codes, outliers), 1/2 convention
    n_iter: int  #: iterations of the slowest sample


# -- the dictionary as an operator -----------------------------------------------------------------


class DictionaryOperator:
    """``h -> W h`` and ``r -> W^T r`` for a batch, for a CP dictionary given by its loadings.

    The tensor case goes through :func:`~tensorstream.core.dictionary.reconstruct` and
    :func:`~tensorstream.core.dictionary.project` (the matrix ``W`` is never formed); one loading
    is the matrix ``W`` itself, for which both are a single GEMM (the same arithmetic, fewer
    dispatched calls: the solvers are dominated by per-call overhead on small batches).
    """

    def __init__(self, loadings: list):
        self.loadings = list(loadings)
        self.matrix = self.loadings[0] if len(self.loadings) == 1 else None
        self.transposed = None if self.matrix is None else tl.transpose(self.matrix)
        self.gram = gram(self.loadings)

    def times(self, H: Tensor) -> Tensor:
        """``W h`` of every row of ``H``: shape ``(b, I_1, ..., I_n)``."""
        if self.matrix is not None:
            return tl.dot(H, self.transposed)
        return reconstruct(self.loadings, H)

    def adjoint(self, X: Tensor) -> Tensor:
        """``W^T x`` of every sample of ``X``: shape ``(b, R)``."""
        if self.matrix is not None:
            return narrow_dot(X, self.matrix)
        return project(X, self.loadings)


# -- elementary steps ----------------------------------------------------------------------------


def outlier_step(residual: Tensor, penalties: RobustPenalties) -> Tensor:
    """Exact minimiser in ``e`` of the objective, given ``residual = x - W h``.

    ``e = clip(S_outlier_alpha(residual) / (1 + nu2), -outlier_bound, outlier_bound)`` (the
    paper's eq. 17 with the Tikhonov term of eq. 39).

    Examples
    --------
    >>> import numpy as np
    >>> outlier_step(np.array([[0.05, -0.6, 3.0]]),
    ...              RobustPenalties(outlier_alpha=0.1, outlier_bound=1.0))
    array([[ 0. , -0.5,  1. ]])
    """
    if not penalties.has_outliers:
        return tl.zeros(tl.shape(residual), **tl.context(residual))
    scale = 1.0 + penalties.outlier_l2
    bound = penalties.bound
    threshold = penalties.thresholds(tl.ndim(residual))
    if scale != 1.0:
        return prox_l1_box(residual / scale, threshold / scale, bound,
                           penalties.nonnegative_outliers)
    return prox_l1_box(residual, threshold, bound, penalties.nonnegative_outliers)


def _group_matrix(R: int, group_size: int, context: dict) -> Tensor:
    """``(R, n_groups)`` 0/1 membership matrix of consecutive groups of ``group_size`` codes."""
    n_groups = -(-R // group_size)
    rows = [[1.0 if k // group_size == g else 0.0 for g in range(n_groups)] for k in range(R)]
    return tl.tensor(rows, **context)


def code_prox(Y: Tensor, step: float, penalties: RobustPenalties) -> Tensor:
    """Proximal map of ``step * (alpha sum(h) + group_alpha ...)`` plus the orthant, row by row.

    ``h = P_+(y - step alpha)``, then every group is shrunk radially by
    ``step group_alpha sqrt(|g|)`` (the sparse-group-lasso step of the paper's Section VI).
    Without penalties this is ``P_+``.
    """
    H = tl.clip(Y - step * penalties.alpha, 0, None) if penalties.alpha else \
        tl.clip(Y, 0, None)
    if not penalties.group_alpha:
        return H
    R = tl.shape(H)[1]
    members = _group_matrix(R, penalties.group_size, tl.context(H))
    sizes = tl.sum(members, axis=0)
    norms = tl.sqrt(tl.dot(H * H, members))  # (b, n_groups)
    shrink = step * penalties.group_alpha * tl.sqrt(sizes) / tl.clip(norms, tiny_of(norms), None)
    factor = tl.clip(1 - shrink, 0, None)
    return H * tl.dot(factor, tl.transpose(members))


def code_penalty(H: Tensor, penalties: RobustPenalties) -> Tensor:
    """Per-sample ``alpha sum(h) + ridge/2 ||h||^2 + group_alpha sum_g sqrt(|g|) ||h_g||``,
    shape ``(b,)``
    (the scalar 0 without penalties)."""
    total = 0.0
    if penalties.alpha:
        total = total + penalties.alpha * tl.sum(tl.abs(H), axis=1)
    if penalties.ridge:
        total = total + 0.5 * penalties.ridge * tl.sum(H * H, axis=1)
    if penalties.group_alpha:
        members = _group_matrix(tl.shape(H)[1], penalties.group_size, tl.context(H))
        norms = tl.sqrt(tl.dot(H * H, members))
        total = total + penalties.group_alpha * tl.sum(norms * tl.sqrt(tl.sum(members, axis=0)),
                                                      axis=1)
    return total


def outlier_penalty(E: Tensor, penalties: RobustPenalties) -> Tensor:
    """Per-sample ``outlier_alpha ||e||_1 + nu2/2 ||e||^2``, shape ``(b,)`` (0 without
    outliers)."""
    if not penalties.has_outliers:
        return 0.0
    flat = _flat(E)
    weights = penalties.sample_alpha
    if weights is not None and tl.ndim(weights) > 1:  # one weight per entry
        total = tl.sum(_flat(weights) * tl.abs(flat), axis=1)
    else:
        total = penalties.thresholds(1) * tl.sum(tl.abs(flat), axis=1)
    if penalties.outlier_l2:
        total = total + 0.5 * penalties.outlier_l2 * tl.sum(flat * flat, axis=1)
    return total


def _flat(E: Tensor) -> Tensor:
    """``E`` as ``(b, n)`` rows (a matrix as it is: no call on the solvers' inner loops)."""
    return E if tl.ndim(E) == 2 else tl.reshape(E, (tl.shape(E)[0], -1))


def _per_sample_sq(E: Tensor) -> Tensor:
    return row_sq_norms(_flat(E))


def robust_losses(X: Tensor, loadings: list | DictionaryOperator, H: Tensor, E: Tensor,
                  penalties: RobustPenalties, *, mask: Tensor | None = None) -> Tensor:
    """Per-sample objective ``1/2 ||x - W h - e||^2 + penalties``, shape ``(b,)``.

    With a ``mask`` (1 = observed) the squared loss counts the observed entries only (``E`` is
    expected to be 0 on missing entries, as the coders return it).

    Examples
    --------
    >>> import numpy as np
    >>> W = np.eye(2)
    >>> robust_losses(np.array([[1.0, 2.0]]), [W], np.array([[1.0, 1.0]]),
    ...               np.array([[0.0, 0.5]]), RobustPenalties(outlier_alpha=0.1))
    array([0.175])
    """
    operator = loadings if isinstance(loadings, DictionaryOperator) else \
        DictionaryOperator(loadings)
    return _losses_from_fit(X, operator.times(H), H, E, penalties, mask)


# -- iteration helpers ---------------------------------------------------------------------------


def _converged(current: Tensor, previous: Tensor, tol: float,
               tiny: float | None = None) -> Tensor:
    """The paper's rule ``|l_k - l_{k-1}| / l_{k-1} < tol`` (never true for ``tol = 0``);
    ``tiny``: the guard of the division (``tiny_of(previous)`` when not given)."""
    tiny = tiny_of(previous) if tiny is None else tiny
    return tl.abs(current - previous) / tl.clip(tl.abs(previous), tiny, None) < tol


def _freeze(active: Tensor | None, new: Tensor, old: Tensor) -> Tensor:
    """``new`` for the samples still running, ``old`` for the converged ones (``active=None``:
    all still run, the common case, which costs nothing)."""
    return _kept(_rows(active, tl.ndim(new)), new, old)


def _rows(active: Tensor | None, ndim: int) -> Tensor | None:
    """``active`` shaped to select rows of an array of ``ndim`` dimensions (None stays)."""
    return None if active is None else tl.reshape(active, (-1,) + (1,) * (ndim - 1))


def _kept(rows: Tensor | None, new: Tensor, old: Tensor) -> Tensor:
    """:func:`_freeze` with the mask already shaped by :func:`_rows`, for a loop that keeps
    several arrays of one shape."""
    return new if rows is None else tl.where(rows, new, old)


def _running(active: Tensor) -> Tensor | None:
    """``active``, or None when every sample still runs (see :func:`_freeze`)."""
    return None if bool(tl.all(active)) else active


def _start(X: Tensor, loadings: list, H0: Tensor | None, E0: Tensor | None,
           penalties: RobustPenalties, mask: Tensor | None = None):
    penalties.check_batch(tl.shape(X))
    R = tl.shape(loadings[0])[1]
    context = tl.context(X)
    H = tl.zeros((tl.shape(X)[0], R), **context) if H0 is None else tl.clip(H0, 0, None)
    if E0 is None or not penalties.has_outliers:
        return H, tl.zeros(tl.shape(X), **context)
    return H, _on_observed(project_outliers(E0, penalties), mask)


def project_outliers(E: Tensor, penalties: RobustPenalties) -> Tensor:
    """Projection on the outliers' set: the box ``|e| <= outlier_bound`` (and ``e >= 0`` if
    nonnegative)."""
    bound = penalties.bound
    if penalties.nonnegative_outliers:
        return tl.clip(E, 0, bound)
    return E if bound is None else tl.clip(E, -bound, bound)


# -- missing entries -----------------------------------------------------------------------------


def _on_observed(T: Tensor, mask: Tensor | None) -> Tensor:
    """``T`` with its missing entries set to 0, whatever they held (NaN included)."""
    if mask is None:
        return T
    return tl.where(mask > 0, T, tl.zeros(tl.shape(T), **tl.context(T)))


def _outliers(residual: Tensor, penalties: RobustPenalties, mask: Tensor | None) -> Tensor:
    """:func:`outlier_step` on the observed entries, 0 on the missing ones."""
    E = outlier_step(residual, penalties)
    return E if mask is None else E * mask


def _times_gram(H: Tensor, G: Tensor) -> Tensor:
    """``G h`` for every sample: one shared Gram ``(R, R)``, or one per sample ``(b, R, R)``."""
    if tl.ndim(G) == 2:
        return tl.dot(H, G)
    # a batched product of (b, 1, R) rows by (b, R, R): half einsum's time on numpy (1000
    # samples, R = 16: 83 against 202 us), where the masked refits of RobustOnlineNMF's
    # robust statistics spend a tenth of their coding
    b, R = tl.shape(H)
    return tl.reshape(tl.matmul(tl.reshape(H, (b, 1, R)), G), (b, R))


def shifted_inverse(G: Tensor, shift: float) -> Tensor:
    """``(G + shift I)^-1`` of a PSD ``(R, R)`` matrix, or of each of a stack ``(n, R, R)``.

    With ``shift > 0`` the eigenvalues are at least ``shift``, so the inverse is as accurate as a
    solve; the ADMM steps invert once per call and then only multiply.

    Examples
    --------
    >>> import numpy as np
    >>> shifted_inverse(np.stack([np.eye(2), 3 * np.eye(2)]), 1.0)[:, 0, 0]
    array([0.5 , 0.25])
    """
    size = tl.shape(G)[-1]
    eye = tl.eye(size, **tl.context(G))
    if tl.ndim(G) == 3:  # one system per sample (masks) or per dictionary row (entrywise A)
        eye = eye * tl.ones((tl.shape(G)[0], 1, 1), **tl.context(G))
    return tl.solve(G + shift * eye, eye)


def _masked_steps(G: Tensor, full_gram: Tensor, kappa: float, l2: float) -> Tensor:
    """Per-sample PGD steps ``kappa / (lambda_max(W^T diag(m_j) W) + l2)``, shape ``(b, 1)``.

    ``W^T diag(m) W <= W^T W``, so the unmasked step would be valid too, but it is too short by
    about the observed fraction. The floor (relative to ``||W^T W||_2``) keeps a sample whose
    observed entries miss every atom from a step blown up by rounding.
    """
    top = tl.eigh(G)[0][:, -1]  # eigenvalues in ascending order
    floor = 1e-12 * spectral_norm_psd(full_gram) + tiny_of(G)
    return tl.reshape(kappa / (tl.clip(top, floor, None) + l2), (-1, 1))


# -- solvers -------------------------------------------------------------------------------------


def robust_code_pgd(
    X: Tensor, loadings: list, penalties: RobustPenalties, *, H0: Tensor | None = None,
    E0: Tensor | None = None, kappa: float = 0.7, tol: float = 1e-3, max_iter: int = 50,
    accelerated: bool = False, mask: Tensor | None = None,
) -> RobustCoding:
    """Codes and outliers of a batch by the paper's OPGD (block MM) or its FISTA variant.

    Parameters
    ----------
    X : tensor of shape (b, I_1, ..., I_n)
        The batch.
    loadings : list of tensors of shape (I_k, R)
        The CP dictionary (one ``(F, R)`` matrix ``W`` for matrix data).
    penalties : RobustPenalties
        The problem's weights and box.
    H0, E0 : tensors, optional
        Starting codes ``(b, R)`` and outliers (projected on their sets); zeros otherwise.
    kappa : float
        Step fraction: ``eta = kappa / (||W||_2^2 + ridge)`` with ``0 < kappa <= 1`` (with a
        mask: ``||W^T diag(m) W||_2`` per sample).
    tol, max_iter : float, int
        The paper's stopping rule, per sample (``tol = 0``: run ``max_iter`` iterations).
    accelerated : bool
        FISTA on ``h`` (with a restart whenever the objective would increase).
    mask : tensor shaped like X, optional
        1 where an entry is observed, 0 where it is missing: only observed entries count, and
        the returned outliers are 0 on missing entries (module docstring).

    Returns
    -------
    RobustCoding

    Examples
    --------
    >>> import numpy as np
    >>> W = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    >>> X = np.array([[1.0, 0.5, 0.9]])
    >>> out = robust_code_pgd(X, [W], RobustPenalties(outlier_alpha=0.1), tol=0, max_iter=200)
    >>> np.round(out.codes, 6), np.round(out.outliers, 6)
    (array([[1. , 0.5]]), array([[0. , 0. , 0.8]]))

    The second entry missing: its code is free of it (0 here), and so is the outlier there.

    >>> out = robust_code_pgd(X, [W], RobustPenalties(outlier_alpha=0.1), tol=0, max_iter=200,
    ...                       mask=np.array([[1.0, 0.0, 1.0]]))
    >>> np.round(out.codes, 6), np.round(out.outliers, 6)
    (array([[1., 0.]]), array([[0. , 0. , 0.8]]))
    """
    op = DictionaryOperator(loadings)
    X = _on_observed(X, mask)
    P = op.adjoint(X)
    if mask is None:
        G = op.gram
        # the spectral norm ||W||_2^2 of the paper's step (not the larger Frobenius norm)
        step = kappa / max(spectral_norm_psd(G) + penalties.ridge, _TINY)
    else:
        G = masked_gram(mask, op.loadings)
        step = _masked_steps(G, op.gram, kappa, penalties.ridge)
    H, E = _start(X, loadings, H0, E0, penalties, mask)
    fit = op.times(H)
    losses = _losses_from_fit(X, fit, H, E, penalties, mask)
    active = tl.ones((tl.shape(X)[0],), **tl.context(X)) > 0
    running = None  # None: every sample still runs (see _freeze)
    momentum = tl.ones((tl.shape(X)[0], 1), **tl.context(X))
    H_prev, fit_prev = H, fit
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        if accelerated:
            beta_next = (1 + tl.sqrt(1 + 4 * momentum * momentum)) / 2
            beta = (momentum - 1) / beta_next
            Y = H + beta * (H - H_prev)
            fit_Y = fit + tl.reshape(beta, (-1,) + (1,) * (tl.ndim(X) - 1)) * (fit - fit_prev)
            E_Y = _outliers(X - fit_Y, penalties, mask)
        else:
            Y, E_Y = H, E
        H_new, fit_new, E_new, new_losses = _pgd_step(X, op, P, G, Y, E_Y, step, penalties,
                                                      mask)
        if accelerated:  # restart: samples whose objective went up lose their momentum
            worse = new_losses > losses
            momentum = tl.where(tl.reshape(worse, (-1, 1)), tl.ones(tl.shape(momentum),
                                                                   **tl.context(X)), beta_next)
            if bool(tl.any(worse)):
                plain = _pgd_step(X, op, P, G, H, E, step, penalties, mask)
                H_new, fit_new, E_new, new_losses = (
                    _freeze(worse, new, old) for new, old in
                    zip(plain, (H_new, fit_new, E_new, new_losses)))
            H_prev, fit_prev = _freeze(running, H, H_prev), _freeze(running, fit, fit_prev)
        done = _converged(new_losses, losses, tol)
        H, E = _freeze(running, H_new, H), _freeze(running, E_new, E)
        fit = _freeze(running, fit_new, fit)
        losses = _freeze(running, new_losses, losses)
        active = active & ~done
        running = _running(active)
        if running is not None and not bool(tl.any(active)):
            break
    return RobustCoding(H, E, losses, n_iter)


def _pgd_step(X, op, P, G, H, E, step, penalties, mask):
    """One block-MM iteration from ``(H, E)``: prox-gradient on ``h``, exact ``e``.

    The gradient ``W^T (m * (W h + e - x))`` is ``G h + W^T e - W^T x`` with ``G`` the sample's
    (masked) Gram, as ``e`` and ``x`` vanish on missing entries.
    """
    gradient = _times_gram(H, G) - P + op.adjoint(E)
    if penalties.ridge:
        gradient = gradient + penalties.ridge * H
    H_new = code_prox(H - step * gradient, step, penalties)
    fit = op.times(H_new)
    E_new = _outliers(X - fit, penalties, mask)
    return H_new, fit, E_new, _losses_from_fit(X, fit, H_new, E_new, penalties, mask)


def _losses_from_fit(X, fit, H, E, penalties, mask=None):
    residual = X - fit - E if penalties.has_outliers else X - fit  # E = 0 without outliers
    if mask is not None:
        residual = residual * mask
    losses = 0.5 * _per_sample_sq(residual) + outlier_penalty(E, penalties)
    if penalties.alpha or penalties.ridge or penalties.group_alpha:  # else the scalar 0
        losses = losses + code_penalty(H, penalties)
    return losses


def robust_code_admm(
    X: Tensor, loadings: list, penalties: RobustPenalties, *, H0: Tensor | None = None,
    E0: Tensor | None = None, rho: float = 1.0, tol: float | None = 1e-3, max_iter: int = 50,
    residual_tol: float | None = None, mask: Tensor | None = None,
) -> RobustCoding:
    """Codes and outliers of a batch by the paper's OADMM (its eqs. 25-30), vectorised.

    The splitting ``h = u``, ``e = q`` carries the constraints (and the group penalty) on ``u``
    and ``q``; the duals start at zero; the feasible pair ``(u, q)`` is returned and the stopping
    rule is evaluated there. The ``R x R`` matrix ``W^T W + (rho + ridge) I`` is inverted once per
    call: its eigenvalues are at least ``rho``, so the inverse is as accurate as a solve, and each
    iteration is then one small GEMM. With a mask the matrix is each sample's
    ``W^T diag(m_j) W + (rho + ridge) I`` (one batched inverse), and ``e``, ``q`` and their dual
    stay 0 on missing entries: the exact ADMM of the masked problem.

    Without outliers every iteration stays in the ``R``-dimensional code space: the objective
    ``1/2 ||x||^2 - h^T W^T x + 1/2 h^T G h + penalties`` needs no product with ``W``, and the
    residual rule (``tol=None``) needs no objective at all. The returned losses are computed
    once, at the end, from the fit itself (no cancellation).

    Parameters
    ----------
    X, loadings, penalties, H0, E0, max_iter, mask
        As in :func:`robust_code_pgd`.
    rho : float
        The penalty parameter (``rho1 = rho2 = rho``), > 0.
    tol : float or None
        The paper's rule, per sample: relative change of the objective below ``tol``
        (``0``: never; ``None``: not tested, only ``residual_tol`` stops a sample).
    residual_tol : float, optional
        Also require the primal residual ``||h - u||`` and the change ``||u - u_prev||`` (the
        dual residual over ``rho``) to be at most ``residual_tol ||u||`` before a sample stops
        (not in the paper). The objective at ``u`` can stand still for a few iterations while
        the duals move (``u`` clipped at 0), which the paper's rule alone takes for convergence
        on ill-conditioned dictionaries. Both residuals are differences the iteration forms
        anyway, so this test costs a few vector operations in the code space.

    Returns
    -------
    RobustCoding
        The same solution as :func:`robust_code_pgd`'s, reached by other iterations.

    Examples
    --------
    The third entry is gross: ADMM and the proximal gradient both put it in the outliers.

    >>> import numpy as np
    >>> X, W = np.array([[1.0, 0.5, 0.9]]), np.eye(3)[:, :2]
    >>> penalties = RobustPenalties(outlier_alpha=0.1)
    >>> admm = robust_code_admm(X, [W], penalties, tol=0, max_iter=300)
    >>> pgd = robust_code_pgd(X, [W], penalties, tol=0, max_iter=200)
    >>> np.allclose(admm.codes, pgd.codes, atol=1e-6), np.round(admm.outliers, 6)
    (True, array([[0. , 0. , 0.8]]))

    Without outliers, stopped by the residuals alone:

    >>> out = robust_code_admm(X, [W], RobustPenalties(outlier_alpha=np.inf), tol=None,
    ...                        residual_tol=1e-8, max_iter=300)
    >>> np.round(out.codes, 6), np.round(out.losses, 6), out.n_iter < 300
    (array([[1. , 0.5]]), array([0.405]), True)
    """
    op = DictionaryOperator(loadings)
    X = _on_observed(X, mask)
    P = op.adjoint(X)
    context = tl.context(X)
    G = op.gram if mask is None else masked_gram(mask, op.loadings)
    inverse = shifted_inverse(G, rho + penalties.ridge)
    U, Q = _start(X, loadings, H0, E0, penalties, mask)
    objective = _admm_objective(X, op, P, G, penalties, mask)
    test_objective = tol is not None and tol > 0  # tol = 0 never stops: no objective needed
    losses = objective(U, Q) if test_objective else None
    tiny = tiny_of(X)  # the stopping rule's guard, read once (a dtype lookup per test)
    # without a box or a sign constraint the projection on the outliers' set is the identity:
    # q = r + dual_E / rho and dual_E + rho (r - q) keep dual_E at exactly 0 from its zero
    # start, so q is r and neither the dual nor the projection is formed (the same iterates)
    free_outliers = penalties.bound is None and not penalties.nonnegative_outliers
    E = Q
    dual_H = tl.zeros(tl.shape(U), **context)
    dual_E = None if free_outliers else tl.zeros(tl.shape(X), **context)
    shrink = 1 + rho + penalties.outlier_l2
    active = tl.ones((tl.shape(X)[0],), **context) > 0
    running = None
    has_outliers = penalties.has_outliers  # read once: a property on the inner loop
    unit = rho == 1  # x * 1 and x / 1 are x to the bit: the default rho skips those products
    sample_ndim = tl.ndim(X)
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        rhs = (P - op.adjoint(E) if has_outliers else P) + (U if unit else rho * U) - dual_H
        if penalties.alpha:
            rhs = rhs - penalties.alpha
        H_new = _times_gram(rhs, inverse)  # the inverse is symmetric
        if has_outliers:
            Q_new, E_new, dual_E_new = _admm_outlier_step(X, op.times(H_new), Q, dual_E, rho,
                                                          shrink, penalties, mask)
        else:
            Q_new = Q
        U_new = _prox_u(H_new + (dual_H if unit else dual_H / rho), rho, penalties)
        primal = H_new - U_new
        dual_H_new = dual_H + (primal if unit else rho * primal)
        done = None
        if test_objective:
            new_losses = objective(U_new, Q_new)
            done = _converged(new_losses, losses, tol, tiny)
            losses = _kept(running, new_losses, losses)
        if residual_tol is not None:
            small = _residuals_small(primal, U_new - U, U_new, residual_tol)
            done = small if done is None else done & small
        # the converged samples keep their values (_freeze), the masks shaped once
        code_rows = _rows(running, 2)
        U, dual_H = _kept(code_rows, U_new, U), _kept(code_rows, dual_H_new, dual_H)
        if has_outliers:
            sample_rows = code_rows if sample_ndim == 2 else _rows(running, sample_ndim)
            Q = _kept(sample_rows, Q_new, Q)
            E = Q if free_outliers else _kept(sample_rows, E_new, E)
            if not free_outliers:
                dual_E = _kept(sample_rows, dual_E_new, dual_E)
        if done is None:  # nothing to test: max_iter iterations
            continue
        active = active & ~done
        running = _running(active)
        if running is not None and not bool(tl.any(active)):
            break
    if not (test_objective and penalties.has_outliers):  # else: the losses at (U, Q) already
        losses = robust_losses(X, op, U, Q, penalties, mask=mask)
    return RobustCoding(U, Q, losses, n_iter)


def _admm_outlier_step(X, fit, Q, dual_E, rho, shrink, penalties, mask):
    """OADMM's ``r`` and ``q`` steps and the dual of ``r = q``, from the fit ``W h``:
    ``(q, r, dual)``. ``dual_E=None`` stands for a dual known to be 0 that stays 0 (outliers
    without a box or a sign: ``q = r``, see :func:`robust_code_admm`)."""
    scaled = Q if rho == 1 else rho * Q  # Q * 1 is Q to the bit
    target = scaled + X if dual_E is None else scaled + X - dual_E
    E_new = soft_threshold(target - fit, penalties.thresholds(tl.ndim(X))) / shrink
    if mask is not None:  # r is fixed at 0 on missing entries (so are q and dual_E)
        E_new = E_new * mask
    if dual_E is None:
        return E_new, E_new, None
    Q_new = project_outliers(E_new + dual_E / rho, penalties)
    return Q_new, E_new, dual_E + rho * (E_new - Q_new)


def _residuals_small(primal: Tensor, change: Tensor, U: Tensor, residual_tol: float) -> Tensor:
    """Per sample: ``||h - u||`` and ``||u - u_prev||`` both at most ``residual_tol ||u||``
    (compared squared: no square roots)."""
    bound = residual_tol * residual_tol * tl.clip(tl.sum(U * U, axis=1), tiny_of(U), None)
    return (tl.sum(primal * primal, axis=1) <= bound) & (tl.sum(change * change, axis=1) <= bound)


def _admm_objective(X: Tensor, op: DictionaryOperator, P: Tensor, G: Tensor,
                    penalties: RobustPenalties, mask: Tensor | None):
    """The per-sample objective at ``(u, q)`` as a function, for the paper's stopping rule.

    Without outliers it is evaluated in the code space, ``1/2 ||x||^2 - u^T P + 1/2 u^T G u``
    (``P = W^T x`` and ``G`` the, possibly masked, Gram: ``x`` is 0 on missing entries): ``R^2``
    flops per sample instead of a product with the dictionary and a pass over the data.
    """
    if penalties.has_outliers:
        return lambda U, Q: robust_losses(X, op, U, Q, penalties, mask=mask)
    half_sq = 0.5 * _per_sample_sq(X)

    def objective(U: Tensor, Q: Tensor) -> Tensor:
        fit = tl.sum(U * (0.5 * _times_gram(U, G) - P), axis=1)
        return half_sq + fit + code_penalty(U, penalties)

    return objective


def nonnegative_code_admm(
    G: Tensor, P: Tensor, *, l1: float = 0.0, l2: float = 0.0, H0: Tensor | None = None,
    rho: float | None = None, residual_tol: float = 1e-2, max_iter: int = 50,
    relaxation: float = 1.6,
) -> tuple[Tensor, int]:
    """Nonnegative elastic-net codes by ADMM in the code space: for every row ``p`` of ``P``

        min_{h >= 0}  1/2 h^T G h - h^T p + l1 sum(h) + l2/2 ||h||^2

    (with ``G = W^T W`` and ``p = W^T x`` this is ``1/2 ||x - W h||^2 + ...`` up to a constant:
    :func:`robust_code_admm` without outliers, from the projections alone). Scaled-dual ADMM on
    ``h = u`` with over-relaxation ``a`` (Boyd et al. 2011, section 3.4.3)::

        h = (G + (rho + l2) I)^-1 (p - l1 + rho (u - y)),   z = a h + (1 - a) u + y,
        u = max(z, 0),   y = z - u

    The iteration keeps ``z`` alone: with ``u - y = |z|`` and ``u = (z + |z|) / 2`` it is

        z_new = a (G + (rho + l2) I)^-1 (p - l1) + (1 - a/2) z + M |z|,
        M = a rho (G + (rho + l2) I)^-1 - a/2 I

    (the first term and ``M`` formed once), one ``R x R`` product, an absolute value and two
    sums, without a clip. A sample stops when the move of ``z`` is at most
    ``residual_tol ||u||``: as ``u = max(z, 0)`` and ``y = min(z, 0)``, the move bounds both
    the (relaxed) primal residual ``y_new - y`` and the change ``u_new - u`` (the dual residual
    over ``rho``). The test costs about as much as an iteration, so it is made at iterations
    8, 12, 16, ... only (and at ``max_iter``): a sample runs to the first of them at which it
    passes, a little more accurate than it needs. Stopped samples leave the working set at
    once, so the later iterations cost less, and a sample's code does not depend on the rest of
    its batch.

    Parameters
    ----------
    G : tensor of shape (R, R)
        The Gram matrix of the dictionary (positive semi-definite).
    P : tensor of shape (b, R)
        The projections ``W^T x`` of the samples.
    l1, l2 : float
        The l1 and l2 weights on the codes (``>= 0``).
    H0 : tensor of shape (b, R), optional
        Starting codes (``z = max(H0, 0)``). By default ``z`` starts at the elastic-net
        least-squares codes ``(p - l1) (G + l2 I)^-1``: ``u`` their positive part, the dual
        ``y`` their negative part. The clipped codes alone cut the iterations to a given
        tolerance by 2-3x against a zero start, the negative part another 5% (digits).
    rho : float, optional
        The penalty parameter; by default ``sqrt(lmin lmax) + l2`` from the eigenvalues of ``G``
        (``lmin`` floored at ``1e-3 lmax``, away from 0 for dependent atoms).
    residual_tol, max_iter : float, int
        The per-sample stopping rule above, and the iteration cap.
    relaxation : float in (0, 2)
        ``a`` above; ``1`` is the plain ADMM. The default ``1.6`` cut the iterations to
        ``residual_tol=1e-2`` by 25% on digits (18 to 13.5 per batch of 1024).

    Returns
    -------
    codes : tensor of shape (b, R)
    n_iter : int
        Iterations of the slowest sample.

    Raises
    ------
    ValueError
        For mismatched shapes, negative weights or tolerance, ``rho <= 0``, ``max_iter < 1``
        or a relaxation outside ``(0, 2)`` (where the iteration diverges).

    Examples
    --------
    >>> import numpy as np
    >>> W = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> X = np.array([[1.0, -1.0, 0.5], [2.0, 1.0, 3.0]])
    >>> H, _ = nonnegative_code_admm(W.T @ W, X @ W, residual_tol=1e-10, max_iter=500)
    >>> np.round(H, 6)
    array([[0.75, 0.  ],
           [2.  , 1.  ]])
    """
    _check_admm_options(G, P, H0, l1=l1, l2=l2, rho=rho, residual_tol=residual_tol,
                        max_iter=max_iter, relaxation=relaxation)
    # one eigendecomposition gives rho and both inverses (a solve on an R x R matrix costs
    # as much as a batch's iteration on some backends)
    eigenvalues, vectors = tl.eigh(G)
    spectrum = tl.to_numpy(eigenvalues)  # R numbers, one host transfer
    top = max(float(spectrum.max()), 0.0)
    if rho is None:
        bottom = max(float(spectrum.min()), 1e-3 * top)
        rho = (math.sqrt(bottom * top) if top > 0 else 1.0) + l2

    target = P - l1 if l1 else P
    # a dead atom (zero curvature, as in coders.lasso) has code 0: left in, its least-squares
    # start would be -l1 over a rounding-level shift, which over-relaxation turns into a huge
    # positive code that passes the relative stopping test
    live = _live_atoms(G, spectrum)

    def spectral(values: Tensor) -> Tensor:
        """The symmetric ``R x R`` matrix ``V diag(values) V^T`` (``G = V diag(e) V^T``)."""
        return tl.dot(vectors * values, tl.transpose(vectors))

    def times_inverse(shift: float, scale: float = 1.0) -> Tensor:
        """``scale target (G + shift I)^-1`` (``shift`` > 0 and well above rounding: accurate);
        the ``R x R`` inverse is formed first, so the batch sees one product."""
        return tl.dot(target, spectral(scale / (eigenvalues + shift)))

    if H0 is None:  # z = the least-squares codes: u their positive part, y the negative
        Z = times_inverse(l2 + 1e-10 * top + tiny_of(G))
    else:
        Z = tl.clip(H0, 0, None)
    if live is not None:
        Z = Z * live
    # the iteration in z alone (docstring): z_new = offset + keep z + |z| mixing
    offset = times_inverse(rho + l2, relaxation)
    keep = 1.0 - 0.5 * relaxation
    mixing = spectral(relaxation * rho / (eigenvalues + (rho + l2)) - 0.5 * relaxation)
    U = None  # the codes max(z, 0), formed at the tests only
    codes = tl.zeros(tl.shape(Z), **tl.context(Z))  # where the stopped samples' codes go
    rows = None  # positions in the batch of the samples still running (None: all of them)
    bound = residual_tol * residual_tol
    # row sums as products with ones: a reduction along short rows is several times slower
    ones = tl.ones((tl.shape(G)[0],), **tl.context(G))
    n_iter = 0
    while n_iter < max_iter and tl.shape(Z)[0]:
        n_iter += 1
        new = offset + keep * Z + tl.dot(tl.abs(Z), mixing)
        if n_iter < max_iter and (n_iter < _FIRST_CHECK or n_iter % _CHECK_EVERY):
            Z = new  # the test costs as much as an iteration: made every few iterations only
            continue
        step, Z = new - Z, new
        U = tl.clip(Z, 0, None)
        done = tl.dot(step * step, ones) <= bound * tl.dot(U * U, ones)
        if bool(tl.any(done)):  # the stopped samples leave the working set at once
            codes, Z, offset, rows = _retire(codes, U, Z, offset, rows, done)
    if rows is None:  # no sample stopped before the last iteration (or none ran)
        codes = tl.clip(Z, 0, None) if U is None else U
    elif tl.shape(Z)[0]:  # the samples that ran to max_iter
        codes = _put_rows(codes, rows, tl.clip(Z, 0, None))
    return (codes if live is None else codes * live), n_iter


def _live_atoms(G: Tensor, spectrum: Any) -> Tensor | None:
    """A ``(R,)`` 0/1 row of the atoms whose curvature ``G_rr`` exceeds ``DEAD_CURVATURE`` of
    the largest (the live atoms of :func:`tensorstream.coders.lasso.sparse_code`), or None when
    all are: they all are when the smallest eigenvalue is above that bound (a curvature is
    at least the smallest eigenvalue), the common case, read from the spectrum at no cost."""
    top = float(spectrum.max())
    if top > 0 and float(spectrum.min()) > DEAD_CURVATURE * top:  # every curvature is too
        return None
    curvature = np.asarray(tl.to_numpy(tl.diag(G)))
    live = curvature > DEAD_CURVATURE * max(float(curvature.max()), 0.0)  # none if all zero
    if live.all():
        return None
    return tl.tensor(live.astype(spectrum.dtype), **tl.context(G))


def _check_admm_options(G: Tensor, P: Tensor, H0: Tensor | None, **options: Any) -> None:
    """The arguments of :func:`nonnegative_code_admm`, checked before any work."""
    shape = tuple(tl.shape(G))
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"G must be a square (R, R) matrix, got shape {shape}")
    if tl.ndim(P) != 2 or tl.shape(P)[1] != shape[0]:
        raise ValueError(f"P must have shape (b, {shape[0]}), got {tuple(tl.shape(P))}")
    if H0 is not None and tuple(tl.shape(H0)) != tuple(tl.shape(P)):
        raise ValueError(f"H0 must have the shape of P, {tuple(tl.shape(P))}, "
                         f"got {tuple(tl.shape(H0))}")
    for name in ("l1", "l2", "residual_tol"):
        check_nonnegative_number(options[name], name)
    if options["rho"] is not None:
        check_positive_number(options["rho"], "rho")
    check_positive_int(options["max_iter"], "max_iter")
    if check_positive_number(options["relaxation"], "relaxation") >= 2:
        raise ValueError(f"relaxation must be in (0, 2), got {options['relaxation']!r}")


#: the stopping test is made every ``_CHECK_EVERY`` iterations from the ``_FIRST_CHECK``-th (a
#: multiple of it), and at ``max_iter``. A test costs about an iteration, and a sample that
#: stops later only gets more accurate: at ``residual_tol=1e-2`` under 1% of the samples of
#: digits stop before the 5th iteration and 69% by the 8th. Testing at 8, 12, 16, ... instead
#: of at every iteration halved the coder's time on digits batches of 1024 on numpy (0.52x) and
#: cut it to 0.6x on torch.
_CHECK_EVERY = 4
_FIRST_CHECK = 8


def _retire(codes, U, Z, offset, rows, done):
    """Write the codes ``U`` of the ``done`` samples into ``codes``; the iterates ``Z``,
    ``offset`` and the batch positions ``rows`` of the others keep running."""
    if rows is None:
        rows = tl.arange(tl.shape(U)[0], **index_context(U))
    kept = ~done
    codes = _put_rows(codes, rows[done], U[done])
    return codes, Z[kept], offset[kept], rows[kept]


def _put_rows(codes, rows, values):
    """``codes`` with the given rows replaced by ``values``."""
    return tl.index_update(codes, tl.index[rows], values)


def _prox_u(Y: Tensor, rho: float, penalties: RobustPenalties) -> Tensor:
    """``u``-update: the orthant and the group penalty (the l1 term is linear, in the h-step)."""
    if not penalties.group_alpha:
        return tl.clip(Y, 0, None)
    group_only = RobustPenalties(outlier_alpha=penalties.outlier_alpha,
                                 group_alpha=penalties.group_alpha, group_size=penalties.group_size)
    return code_prox(Y, 1.0 / rho, group_only)


def robust_code(X: Tensor, loadings: list, penalties: RobustPenalties, *, solver: str = "admm",
                **options: Any) -> RobustCoding:
    """Dispatch to :func:`robust_code_pgd` (``solver="pgd"``) or :func:`robust_code_admm`."""
    if solver == "pgd":
        return robust_code_pgd(X, loadings, penalties, **options)
    if solver == "admm":
        return robust_code_admm(X, loadings, penalties, **options)
    raise ValueError(f"solver must be 'pgd' or 'admm', got {solver!r}")
