"""Coefficients and sparse noise of a batch against a fixed basis (max-norm / robust PCA coding).

For every sample ``z`` (a row of the batch ``Z``, shape ``(b, p)``) and the basis ``L`` (``p x d``)
this solves the per-sample problem of Shen, Xu & Li (2014, eq. (3.2)) or of OR-PCA:

    min_{r, e}  1/2 ||z - L r - e||^2 + outlier_alpha h(e)   s.t. ||r||_2 <= 1  (ball=True, OMRMD)
    min_{r, e}  1/2 ||z - L r - e||^2 + ridge/2 ||r||^2 + outlier_alpha h(e)  (ball=False, OR-PCA)

by block coordinate descent (their Algorithm 3): ``r`` in closed form (ridge solve, and the
multiplier ``eta`` of the ball constraint when the ridge solution lies outside it), then ``e`` by
the proximal map of ``outlier_alpha h`` (soft-thresholding for ``h = ||.||_1``). Every sample keeps
its own convergence test; the batch runs in lockstep and finished samples are frozen, so a sample's
result does not depend on the batch it came in.

The r-step works in the eigenbasis of ``L^T L`` (one ``eigh`` per batch, since ``L`` is fixed):
with ``c = V^T L^T (z - e)``, ``||r(eta)||^2 = sum_k c_k^2 / (w_k + eta)^2`` costs ``O(d)`` per
value of ``eta``. With a mask (missing entries), each sample has its own Gram matrix
``L_O^T L_O`` over its observed rows, and the same code runs on a batch of eigendecompositions.

All functions are backend-agnostic (``tl.*``) and expect to run inside the backend context of
their tensors.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorly as tl

from ..core.backend import finfo_of, tiny_of
from ..core.dictionary import masked_gram
from .compiled_bcd import l1_kernel

Tensor = Any

NOISE_MODELS = ("l1", "l21", "fro", "none")
BALL_SOLVERS = ("newton", "bisection")

#: The iteration cap of :func:`robust_code` given ``max_iter=None`` ("uncapped"): converging
#: samples stop long before it (the tolerance test), and data that cannot converge (NaN from
#: overflowing entries) stops at once; the cap bounds whatever is left.
UNCAPPED_MAX_ITER = 10_000

_BISECTION_START = 10.0  # the reference code's first upper bracket, doubled until feasible


@dataclass(frozen=True)
class RobustCodes:
    """Result of :func:`robust_code` for a batch of ``b`` samples."""

    codes: Tensor  #: (b, d) coefficients ``r`` (one row per sample)
    outliers: Tensor  #: (b, p) noise ``e`` (zero at missing entries)
    low_rank: Tensor  #: (b, p) the reconstructions ``L r``
    losses: Tensor  #: (b,) objective ``1/2 ||z - L r - e||^2 + penalties`` (observed entries)
    penalties: Tensor  #: (b,) ``outlier_alpha h(e)``, plus ``ridge/2 ||r||^2`` when ``ball=False``
    n_iter: np.ndarray  #: (b,) block-coordinate iterations per sample
    multipliers: Tensor  #: (b,) ``eta`` of the r-step (the ridge where the ball is inactive)


def concatenated(parts: list[RobustCodes]) -> RobustCodes:
    """The :class:`RobustCodes` of consecutive batches as one, in their order (every field is
    per sample)."""
    joined = {field.name: [getattr(part, field.name) for part in parts]
              for field in dataclasses.fields(RobustCodes)}
    return RobustCodes(**{name: np.concatenate(values) if name == "n_iter"
                          else tl.concatenate(values, axis=0)
                          for name, values in joined.items()})


# -- proximal maps of the noise penalty -----------------------------------------------------------

def group_shrink(v: Tensor, threshold: float) -> Tensor:
    """Proximal map of ``threshold * ||.||_2`` applied to every row: ``max(0, 1 - t/||v||) v``.

    The paper's eq. (3.7) prints ``||v|| / (||v|| - t) v``, which scales ``v`` up; this is the
    correct map (the proximal map of the l2 norm).

    Examples
    --------
    >>> import numpy as np
    >>> group_shrink(np.array([[3.0, 4.0]]), 1.0)
    array([[2.4, 3.2]])
    """
    norms = tl.norm(v, axis=1)
    scale = tl.clip(1 - threshold / tl.clip(norms, tiny_of(norms), None), 0, None)
    return v * tl.reshape(scale, (-1, 1))


def noise_prox(residual: Tensor, noise: str, threshold: Any) -> Tensor:
    """The e-step: proximal map of ``threshold * h`` at ``residual = z - L r`` (rows = samples)."""
    if noise == "l1":  # soft-thresholding, as x - clip(x, -t, t): one call on the hot path
        return residual - tl.clip(residual, -threshold, threshold)
    if noise == "l21":
        return group_shrink(residual, threshold)
    if noise == "fro":  # h = ||e||^2: its prox is a shrinkage, not in the paper
        return residual / (1 + 2 * threshold)
    if noise == "none":
        return residual * 0
    raise ValueError(f"noise must be one of {NOISE_MODELS}, got {noise!r}")


def noise_penalty(E: Tensor, noise: str, threshold: Any) -> Tensor:
    """``threshold * h(e)`` for every row of ``E``: shape ``(b,)``."""
    if noise == "l1":
        return tl.sum(tl.abs(E) * threshold, axis=1)
    if noise == "l21":
        return threshold * tl.norm(E, axis=1)
    if noise == "fro":
        return threshold * tl.sum(E * E, axis=1)
    return tl.sum(E * 0, axis=1)


# -- the r-step ------------------------------------------------------------------------------------

class Spectrum:
    """Eigendecomposition of ``L^T L`` (shared), or of ``L^T diag(m_j) L`` per sample (masked).

    Coefficients are handled in the eigenbasis (``r~ = V^T r``), where the r-step is diagonal:
    ``r~(eta) = c / (w + eta)`` with ``c = V^T L^T y``. With a shared spectrum ``L V`` is formed
    once, so going from ``y`` to ``c`` and from ``r~`` to ``L r`` are one product each.
    """

    def __init__(self, values: Tensor, vectors: Tensor, basis: Tensor, null: Tensor = None,
                 any_null: bool | None = None):
        self.batched = tl.ndim(vectors) == 3
        if null is None:
            values = tl.clip(values, 0, None)  # a PSD Gram: round-off negatives are zeros
            # null directions (a sample with fewer observed entries than d, dependent
            # columns): eigenvalues at round-off level, where c = V^T L^T y is round-off too.
            # The r-step there is 0 (the pseudo-inverse), not c / w: 0/0 without a ridge
            top = tl.max(values, axis=1)[:, None] if self.batched else tl.max(values)
            null = values <= top * (float(finfo_of(values).eps) * int(tl.shape(values)[-1]))
            values = tl.where(null, values * 0 + 1, values)
        self.values, self.null = values, null
        self.mask = None  # the mask of the samples' spectra (of() sets it)
        # almost every spectrum has no null direction: project() then skips its where. A
        # subset (take) inherits its batch's answer: reading it again is a device sync
        self.any_null = bool(tl.any(null)) if any_null is None else any_null
        self.vectors = vectors
        self.basis = basis  # L
        if not self.batched:
            self.rotated_basis = tl.dot(basis, vectors)  # L V, (p, d)
            self.rotated_basis_t = tl.transpose(self.rotated_basis)

    @classmethod
    def of(cls, L: Tensor, mask: Tensor | None = None) -> Spectrum:
        """``eigh(L^T L)``, or per sample ``eigh(L^T diag(mask[j]) L)`` when ``mask`` is given."""
        if mask is None:
            return cls(*tl.eigh(tl.dot(tl.transpose(L), L)), L)
        spectrum = cls(*tl.eigh(masked_gram(mask, [L])), L)  # one GEMM for all samples' Grams
        spectrum.mask = mask
        return spectrum

    def take(self, index: Any) -> Spectrum:
        """The spectra of the samples ``index`` (the shared spectrum is returned as it is)."""
        if not self.batched:
            return self
        return Spectrum(self.values[index], self.vectors[index], self.basis, self.null[index],
                        self.any_null)

    def check_for(self, L: Tensor, mask: Tensor | None) -> Spectrum:
        """This spectrum, refused unless :meth:`of` gave it for this very tensor ``L`` and
        this very ``mask`` (or none): a spectrum passed along between coder calls may not
        outlive its basis."""
        if self.basis is not L or self.mask is not mask:
            raise ValueError("spectrum must be Spectrum.of(L, mask) of this very basis L and "
                             "mask")
        return self

    def project(self, Y: Tensor) -> Tensor:
        """``c = V^T L^T y`` for every row ``y`` of ``Y``."""
        if self.batched:
            rotated = tl.einsum("bi,bik->bk", tl.dot(Y, self.basis), self.vectors)
        else:
            rotated = tl.dot(Y, self.rotated_basis)
        if not self.any_null:  # the where below would return rotated as it is
            return rotated
        return tl.where(self.null, rotated * 0, rotated)

    def unrotate(self, C: Tensor) -> Tensor:
        """``r = V r~`` for every row ``r~`` of ``C``."""
        if self.batched:
            return tl.einsum("bk,bik->bi", C, self.vectors)
        return tl.dot(C, tl.transpose(self.vectors))

    def expand(self, C: Tensor) -> Tensor:
        """``L r = L V r~`` for every row ``r~`` of ``C``."""
        if self.batched:
            return tl.dot(self.unrotate(C), tl.transpose(self.basis))
        return tl.dot(C, self.rotated_basis_t)

    def solve(self, rotated: Tensor, eta: Tensor) -> Tensor:
        """``r~(eta) = c / (w + eta)``, one ``eta`` per row."""
        return rotated / (self.values + eta[:, None])


class _Secular:
    """``||r(eta)||`` and its slope for a batch: ``||r||^2 = sum_k c_k^2 / (w_k + eta)^2``."""

    def __init__(self, rotated: Tensor, values: Tensor):
        self.squares = rotated * rotated
        self.values = values

    def __call__(self, eta: Tensor) -> tuple[Tensor, Tensor]:
        """``(||r(eta)||, s3)`` for ``eta`` of shape ``(b,)`` or ``(k, b)`` (k values each)."""
        inverse = 1 / (self.values + eta[..., None])
        weighted = self.squares * inverse * inverse
        s2 = tl.sum(weighted, axis=-1)
        s3 = tl.sum(weighted * inverse, axis=-1)  # -1/2 d||r||^2/deta
        return tl.sqrt(s2), s3

    def norm(self, eta: Tensor) -> Tensor:
        inverse = 1 / (self.values + eta[:, None])
        return tl.sqrt(tl.sum(self.squares * inverse * inverse, axis=1))


def ball_multipliers(
    rotated: Tensor, spectrum: Spectrum, ridge: float, *, solver: str = "newton",
    tol: float = 1e-3, max_iter: int = 60, start: Tensor | None = None,
) -> Tensor:
    """Multipliers ``eta`` of ``min 1/2 ||y - L r||^2 s.t. ||r|| <= 1``, one per sample.

    ``eta = ridge`` where the ridge solution ``(L^T L + ridge I)^-1 L^T y`` lies in the ball
    (that solution is kept exactly); elsewhere the root of ``||r(eta)|| = 1`` with ``r(eta) =
    (L^T L + eta I)^-1 L^T y``, which exceeds ``ridge`` (Proposition 3: ``||r(eta)||`` decreases).

    Parameters
    ----------
    rotated : tensor of shape (b, d)
        ``c = V^T L^T y`` in the eigenbasis of the Gram (:meth:`Spectrum.project`).
    spectrum : Spectrum
    ridge : float
        The jitter of the unconstrained solve (``OnlineMaxNormMD``'s ``ridge``).
    solver : {"newton", "bisection"}
        ``"bisection"`` is the reference code's: bracket ``[0, 10 * 2^k]``, midpoints until
        ``|1 - ||r||| < tol``. ``"newton"`` runs Newton's method on ``1/||r(eta)|| = 1``;
        ``1/||r(eta)||`` is concave, so from a point with ``||r|| > 1`` the iterates increase
        monotonically to the root (as for trust-region subproblems), in a few steps.
    tol : float
        Stop when ``|1 - ||r(eta)||| < tol``.
    max_iter : int
        Cap on the doublings and on the bisection/Newton steps.
    start : tensor of shape (b,), optional
        Warm start of Newton's method, at least ``ridge`` (e.g. the previous block-coordinate
        iteration's ``eta``).

    Returns
    -------
    tensor of shape (b,)
    """
    ridges = rotated[:, 0] * 0 + ridge
    secular = _Secular(rotated, spectrum.values)
    if solver == "newton":
        return _newton(secular, ridges, ridges if start is None else start, tol, max_iter)
    if solver == "bisection":
        outside = secular.norm(ridges) > 1
        if not bool(tl.any(outside)):
            return ridges
        return tl.where(outside, _bisection(secular, outside, tol, max_iter), ridges)
    raise ValueError(f"ball_solver must be one of {BALL_SOLVERS}, got {solver!r}")


def _newton(secular: _Secular, ridges: Tensor, eta: Tensor, tol: float, max_iter: int) -> Tensor:
    # the ball is inactive iff ||r(ridge)|| <= 1: evaluated with the start, in one pass
    norms, slopes = secular(tl.stack([eta, ridges]))
    norm, s3, inactive = norms[0], slopes[0], norms[1] <= 1
    done = inactive | (tl.abs(norm - 1) < tol)
    for _ in range(max_iter):
        if bool(tl.all(done)):
            break
        # Newton on psi = 1/||r||: step (1 - psi)/psi' = (||r|| - 1) ||r||^2 / s3. From the right
        # of the root it lands on the left (concavity); the clip keeps eta >= ridge, where
        # ||r|| > 1 is known, and from there the iterates increase monotonically.
        step = (norm - 1) * norm * norm / tl.clip(s3, tiny_of(s3), None)
        eta = tl.where(done, eta, tl.maximum(eta + step, ridges))
        norm, s3 = secular(eta)
        done = done | (tl.abs(norm - 1) < tol)
    return tl.where(inactive, ridges, eta)


def _bisection(secular: _Secular, active: Tensor, tol: float, max_iter: int) -> Tensor:
    b = tl.shape(active)[0]
    context = tl.context(secular.squares)
    low = tl.zeros((b,), **context)
    high = tl.ones((b,), **context) * _BISECTION_START
    for _ in range(max_iter):  # double the bracket until ||r(high)|| < 1
        grow = active & (secular.norm(high) >= 1)
        if not bool(tl.any(grow)):
            break
        high = tl.where(grow, 2 * high, high)
    eta = high
    done = ~active
    for _ in range(max_iter):
        middle = (low + high) / 2
        norm = secular.norm(middle)
        eta = tl.where(done, eta, middle)
        done = done | (tl.abs(1 - norm) < tol)
        if bool(tl.all(done)):
            break
        inside = norm < 1
        high = tl.where(inside, middle, high)
        low = tl.where(inside, low, middle)
    return eta


def ball_coefficients(
    Y: Tensor, L: Tensor, *, ridge: float = 0.01, ball: bool = True, mask: Tensor | None = None,
    solver: str = "newton", tol: float = 1e-3, max_iter: int = 60,
) -> tuple[Tensor, Tensor]:
    """The r-step alone: ``argmin_{||r|| <= 1} 1/2 ||y - L r||^2`` for every row ``y`` of ``Y``.

    With ``ball=False`` it is the ridge solve ``(L^T L + ridge I)^-1 L^T y``. With a ``mask``
    (``(b, p)``, 1 = observed) only the observed rows of ``L`` and ``y`` enter.

    Returns
    -------
    codes : tensor of shape (b, d)
    multipliers : tensor of shape (b,)
        ``eta`` with ``codes = (L^T L + eta I)^-1 L^T y``.

    Examples
    --------
    >>> import numpy as np
    >>> L = np.eye(3)[:, :2]
    >>> r, eta = ball_coefficients(np.array([[3.0, 4.0, 1.0]]), L)
    >>> np.round(r, 4), np.round(eta, 4)
    (array([[0.6, 0.8]]), array([4.]))
    """
    spectrum = Spectrum.of(L, mask)
    rotated = spectrum.project(Y if mask is None else Y * mask)
    if ball:
        eta = ball_multipliers(rotated, spectrum, ridge, solver=solver, tol=tol,
                               max_iter=max_iter)
    else:
        eta = tl.ones((tl.shape(Y)[0],), **tl.context(Y)) * ridge
    return spectrum.unrotate(spectrum.solve(rotated, eta)), eta


# -- the block coordinate descent ----------------------------------------------------------------

def robust_code(
    Z: Tensor, L: Tensor, outlier_alpha: Any, *, noise: str = "l1", ball: bool = True,
    ridge: float = 0.01, mask: Tensor | None = None, tol: float = 1e-6, max_iter: int | None = 100,
    ball_solver: str = "newton", ball_tol: float = 1e-3, ball_max_iter: int = 60,
    spectrum: Spectrum | None = None,
) -> RobustCodes:
    """Coefficients and noise of a batch by block coordinate descent (the paper's Algorithm 3).

    Parameters
    ----------
    Z : tensor of shape (b, p)
        The samples, one per row (entries at missing positions must be finite; they are
        ignored when ``mask`` is given).
    L : tensor of shape (p, d)
        The basis.
    outlier_alpha : float or tensor of shape (b, p) or (b, 1)
        Weight of the noise penalty ``h``; a tensor gives per-entry l1 thresholds (the weighted
        l1 of the matrix-completion variant, the paper's eq. (5.4)), a column one per sample.
    noise : {"l1", "l21", "fro", "none"}
        ``h(e)``: ``||e||_1`` (sparse corruption), ``||e||_2`` (a whole sample is an outlier),
        ``||e||^2`` or no noise term at all (``e = 0``, a single pass).
    ball : bool
        Constrain ``||r|| <= 1`` (OMRMD); otherwise ``ridge/2 ||r||^2`` is a penalty (OR-PCA).
    ridge : float
        Ridge of the unconstrained r-solve: the jitter ``ridge`` with ``ball=True`` (the
        bisection itself uses none), OR-PCA's ``norm_alpha`` with ``ball=False``.
    mask : tensor of shape (b, p), optional
        1 where observed, 0 where missing: the loss and ``e`` then live on the observed entries
        only (the ``c -> inf`` limit of the paper's eq. (5.1)).
    tol : float
        A sample stops when ``max(||e - e_old||, ||r - r_old||) / p < tol`` (the reference
        code's rule; note the ``1/p``).
    max_iter : int or None
        Cap on the iterations per sample (``None``: :data:`UNCAPPED_MAX_ITER`, far beyond
        what converging samples take; the OR-PCA reference code has no cap at all).
    ball_solver, ball_tol, ball_max_iter
        See :func:`ball_multipliers`.
    spectrum : Spectrum, optional
        ``Spectrum.of(L, mask)`` when the caller has it (several rounds against the same
        basis ``L`` and mask, or batches against the same ``L`` without a mask): its ``eigh``
        is then not repeated.

    Returns
    -------
    RobustCodes

    Examples
    --------
    >>> import numpy as np
    >>> L = np.eye(4)[:, :2]
    >>> z = np.array([[0.6, 0.0, 50.0, 0.0]])
    >>> out = robust_code(z, L, 0.5, ridge=0.0)  # the big entry is an outlier, beyond 0.5
    >>> np.round(out.codes, 6), np.round(out.outliers, 6)
    (array([[0.6, 0. ]]), array([[ 0. ,  0. , 49.5,  0. ]]))
    """
    if mask is not None:
        Z = Z * mask
    spectrum = _spectrum(L, mask, spectrum)
    state, n_iter = _descend(Z, L, outlier_alpha, noise, ball, ridge, mask, tol, max_iter,
                             ball_solver, ball_tol, ball_max_iter, spectrum)
    R, E, LR = spectrum.unrotate(state["R"]), state.get("E"), state["LR"]
    if noise == "none":  # e = 0: the residual is z - L r, and e its prox, residual * 0
        residual = Z - LR if mask is None else (Z - LR) * mask
        E = residual * 0  # as the prox of "none" gives it (NaN where the residual is not finite)
    else:
        residual = Z - LR - E if mask is None else (Z - LR - E) * mask
    penalties = noise_penalty(E, noise, outlier_alpha)
    if not ball:
        penalties = penalties + 0.5 * ridge * tl.sum(R * R, axis=1)
    return RobustCodes(codes=R, outliers=E, low_rank=LR,
                       losses=0.5 * tl.sum(residual * residual, axis=1) + penalties,
                       penalties=penalties, n_iter=n_iter, multipliers=state["eta"])


def robust_low_rank(
    Z: Tensor, L: Tensor, outlier_alpha: Any, *, noise: str = "l1", ball: bool = True,
    ridge: float = 0.01, mask: Tensor | None = None, tol: float = 1e-6, max_iter: int | None = 100,
    ball_solver: str = "newton", ball_tol: float = 1e-3, ball_max_iter: int = 60,
    spectrum: Spectrum | None = None,
) -> Tensor:
    """``robust_code(...).low_rank`` alone (the same parameters): the reconstructions ``L r``,
    without the passes over the batch that the losses and penalties take (a rough code that
    only its reconstruction serves, as ``outlier_alpha="auto"``'s thresholds).

    Examples
    --------
    >>> import numpy as np
    >>> L = np.eye(4)[:, :2]
    >>> z = np.array([[0.6, 0.0, 50.0, 0.0]])
    >>> np.round(robust_low_rank(z, L, 0.5, ridge=0.0), 6)
    array([[0.6, 0. , 0. , 0. ]])
    """
    if mask is not None:
        Z = Z * mask
    spectrum = _spectrum(L, mask, spectrum)
    state, _ = _descend(Z, L, outlier_alpha, noise, ball, ridge, mask, tol, max_iter,
                        ball_solver, ball_tol, ball_max_iter, spectrum)
    return state["LR"]


def _spectrum(L: Tensor, mask: Tensor | None, spectrum: Spectrum | None) -> Spectrum:
    """The given spectrum (checked to be ``L``'s), or ``Spectrum.of(L, mask)``."""
    return Spectrum.of(L, mask) if spectrum is None else spectrum.check_for(L, mask)


def _descend(Z, L, outlier_alpha, noise, ball, ridge, mask, tol, max_iter, ball_solver,
             ball_tol, ball_max_iter, spectrum) -> tuple[dict, np.ndarray]:
    """The block coordinate descent of :func:`robust_code` on ``Z`` (masked already): the
    final state (``R`` in the eigenbasis, ``E``, ``LR``, ``eta``) and each sample's
    iterations."""
    if noise not in NOISE_MODELS:
        raise ValueError(f"noise must be one of {NOISE_MODELS}, got {noise!r}")
    if noise == "none":  # without e, one r-solve is exact
        return _exact_solve(Z, mask, spectrum, ball, ridge, ball_solver, ball_tol,
                            ball_max_iter)
    b, p = tl.shape(Z)
    context = tl.context(Z)
    state = {"R": tl.zeros((b, tl.shape(L)[1]), **context),  # coefficients in the eigenbasis
             "E": tl.zeros((b, p), **context), "LR": tl.zeros((b, p), **context),
             "eta": tl.ones((b,), **context) * ridge}
    n_iter = np.zeros(b, dtype=int)
    active = np.arange(b)
    # "no cap" still has one, so no data can spin it forever
    cap = UNCAPPED_MAX_ITER if max_iter is None else max_iter
    kernel = l1_kernel(Z, L, outlier_alpha, noise=noise, ball=ball, mask=mask,
                       ball_solver=ball_solver)
    if kernel is not None:  # numba: the same iterations, sample by sample (compiled_bcd.py)
        state["R"], state["E"], state["LR"], state["eta"], n_iter = kernel(
            spectrum.rotated_basis, spectrum.values, spectrum.null, ridge, tol, cap, ball_tol,
            ball_max_iter)
        active = active[:0]  # every sample ran: none left for the tl.* loop
    while active.size and n_iter[active[0]] < cap:
        whole = active.size == b
        index = slice(None) if whole else active  # numpy and torch both take int arrays
        local = spectrum if whole else spectrum.take(index)
        # LR is an output only: an iteration reads the previous R, E and eta
        old = state if whole else {k: state[k][index] for k in ("R", "E", "eta")}
        Z_a = Z if whole else Z[index]
        M_a = None if mask is None else (mask if whole else mask[index])
        per_entry = _is_tensor(outlier_alpha) and not whole
        threshold = outlier_alpha[index] if per_entry else outlier_alpha
        new = _bcd_iteration(Z_a, M_a, old, local, threshold, noise, ball, ridge,
                             ball_solver, ball_tol, ball_max_iter)
        # max(||de||, ||dr||) < tol p, in squares; ||dr|| = ||V^T dr|| as V is orthogonal
        dE, dR = new["E"] - old["E"], new["R"] - old["R"]
        change = tl.maximum(tl.sum(dE * dE, axis=1), tl.sum(dR * dR, axis=1))
        # "not still moving": a NaN change (overflowed data) stops the sample, to be refused
        # by the caller's finiteness checks, instead of never comparing below tol
        converged = ~tl.to_numpy(change >= (tol * p) ** 2)
        if whole:
            state = new
        else:
            for key, value in new.items():
                state[key] = tl.index_update(state[key], tl.index[index], value)
        n_iter[active] += 1
        active = active[~converged]
    return state, n_iter


def _exact_solve(Z, mask, spectrum, ball, ridge, ball_solver, ball_tol,
                 ball_max_iter) -> tuple[dict, np.ndarray]:
    """The one r-step of ``noise="none"`` (``e = 0``), as :func:`_bcd_iteration` takes it from
    a zero ``e`` (``z - 0`` is ``z``, masked already), without the iteration's passes that
    a zero ``e`` makes idle: the state without ``E`` (:func:`robust_code` makes it from the
    residual, which :func:`robust_low_rank` does not need)."""
    b = tl.shape(Z)[0]
    rotated = spectrum.project(Z)
    eta = tl.ones((b,), **tl.context(Z)) * ridge
    if ball:
        eta = ball_multipliers(rotated, spectrum, ridge, solver=ball_solver, tol=ball_tol,
                               max_iter=ball_max_iter, start=eta)
    R = spectrum.solve(rotated, eta)
    LR = spectrum.expand(R)
    return {"R": R, "LR": LR, "eta": eta}, np.ones(b, dtype=int)


def _bcd_iteration(Z, mask, old, spectrum, threshold, noise, ball, ridge, ball_solver,
                   ball_tol, ball_max_iter) -> dict:
    """One pass of the r-step then the e-step for the samples in ``Z`` (all still running)."""
    Y = Z - old["E"] if mask is None else (Z - old["E"]) * mask
    rotated = spectrum.project(Y)
    eta = old["eta"]
    if ball:
        eta = ball_multipliers(rotated, spectrum, ridge, solver=ball_solver, tol=ball_tol,
                               max_iter=ball_max_iter, start=eta)
    R = spectrum.solve(rotated, eta)
    LR = spectrum.expand(R)
    residual = Z - LR if mask is None else (Z - LR) * mask
    return {"R": R, "E": noise_prox(residual, noise, threshold), "LR": LR, "eta": eta}


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "shape") and len(tuple(value.shape)) > 0
