"""The divergence coder on sparse data: KL evaluated on the support only (:class:`SparseKL`,
:func:`code_divergence_sparse`, :func:`solve_sparse_kl`)."""


from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse
from scipy.special import xlogy

from ...losses import Divergence, get_loss
from .solver import (
    _check_options,
    _iterate,
    _iterate_mu,
    _Problem,
    _resolve_step,
)
from .steps import (
    _DENOMINATOR_FLOOR,
    _INF,
    CODE_LOWER,
    CODE_UPPER,
    MultiplicativeStep,
    StepRule,
    _check_bounds,
)

Tensor = Any

# --------------------------------------------------------------------------------------------
# sparse data: KL evaluated on the support only
# --------------------------------------------------------------------------------------------

SPARSE_LOSSES = ("kl",)
"""Losses whose code and dictionary gradients need the model only on the data's nonzeros.

KL: ``d(v || y) = sum(y) - sum_{v>0} v log y + sum_{v>0} (v log v - v)`` and
``∂d/∂y = 1 - v / y``, so with ``Y = H W^T`` the code gradient is ``1^T W - (V ⊘ Y) W`` and the
dictionary gradient ``1 (1^T H) - (V ⊘ Y)^T H``: ``Y`` is needed only where ``V > 0``. Every
other β needs ``y^(β-1)`` everywhere (the dense model), so it has no support-only form.
"""

_CHUNK = 1 << 20  # entries x atoms per block of the support model: bounds the temporaries


def supports_sparse(loss: str | float | Divergence) -> bool:
    """True when ``loss`` has the support-only sparse path (:data:`SPARSE_LOSSES`).

    Examples
    --------
    >>> supports_sparse("kl"), supports_sparse(1.0), supports_sparse("is")
    (True, True, False)
    """
    return get_loss(loss).name in SPARSE_LOSSES


class SparseKL:
    """The KL algebra of a sparse batch ``V`` (CSR, ``(b, F)``) and a dictionary ``W`` (``(F, R)``).

    The model ``Y = H W^T`` is only ever evaluated on the nonzeros of ``V`` (an ``(nnz,)``
    vector, built in blocks), so memory and time are ``O(nnz R + F R + b R)``; the dense
    ``(b, F)`` model is never formed. NumPy/SciPy only. The model floor ``max(y, eps)``
    applies on the support; off the support the model enters through ``sum(y)`` unfloored
    (the dense evaluation floors it there too: the two differ only where ``y < eps``, i.e.
    by at most ``eps`` per entry).

    Parameters
    ----------
    V : scipy.sparse matrix of shape (b, F)
        Nonnegative data, CSR with sorted, summed duplicates (as
        :func:`tensorstream.core.validation.check_sparse_batch` returns).
    W : numpy.ndarray of shape (F, R)
        Nonnegative dictionary.
    eps : float, default 1e-12
        Model floor on the support.

    Examples
    --------
    >>> import numpy as np, scipy.sparse
    >>> V = scipy.sparse.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> kl = SparseKL(V, np.array([[1.0], [1.0]]))
    >>> H = np.array([[1.0], [2.0]])
    >>> np.allclose(kl.per_sample(H, kl.model(H)),
    ...             get_loss("kl").per_sample(V.toarray(), H @ np.ones((1, 2))))
    True
    """

    def __init__(self, V: Any, W: Any, eps: float = 1e-12):
        self.V, self.W, self.eps = V, W, float(eps)
        self.b = int(V.shape[0])
        self.rows = np.repeat(np.arange(self.b), np.diff(V.indptr))
        self.cols, self.values = V.indices, V.data
        self.column_sums = np.sum(W, axis=0)  # 1^T W: the gradient of sum(y) in the codes
        self._support_atoms = None  # W[cols], gathered once when it fits in one block
        self._ratio = None
        self._data_term = None  # sum(v log v - v) per sample: only the objective needs it

    def subset(self, keep: Any) -> SparseKL:
        """The algebra of the samples where ``keep`` (``(b,)`` bools) holds, in their order.

        Sliced from this one's arrays (no sparse indexing, nothing recomputed): the solver
        drops its converged samples this way several times per batch.
        """
        kept = np.flatnonzero(keep)
        entries = keep[self.rows]
        lengths = np.diff(self.V.indptr)[kept]
        indptr = np.zeros(kept.size + 1, dtype=self.V.indptr.dtype)
        np.cumsum(lengths, out=indptr[1:])
        V = scipy.sparse.csr_matrix((self.values[entries], self.cols[entries], indptr),
                                    shape=(kept.size, self.V.shape[1]))
        V.has_sorted_indices = True  # a subset of a canonical matrix's rows is canonical
        V.has_canonical_format = True
        out = SparseKL.__new__(SparseKL)
        out.V, out.W, out.eps, out.b = V, self.W, self.eps, int(kept.size)
        out.rows = np.repeat(np.arange(out.b), lengths)
        out.cols, out.values, out.column_sums = V.indices, V.data, self.column_sums
        out._support_atoms = (None if self._support_atoms is None
                              else self._support_atoms[entries])
        out._ratio = None
        out._data_term = None if self._data_term is None else self._data_term[kept]
        return out

    def _row_sums(self, entries: Any) -> Any:
        return np.bincount(self.rows, weights=entries, minlength=self.b)

    def model(self, H: Any) -> Any:
        """``(H W^T)`` on the support, shape ``(nnz,)``: ``sum_r H[i, r] W[f, r]`` per entry."""
        nnz, R = self.values.shape[0], self.W.shape[1]
        if nnz * R <= _CHUNK:  # one block: keep the gathered dictionary rows for later calls
            if self._support_atoms is None:
                self._support_atoms = np.take(self.W, self.cols, axis=0)
            return np.einsum("ir,ir->i", np.take(H, self.rows, axis=0), self._support_atoms)
        out = np.empty(nnz, dtype=np.result_type(H, self.W))
        step = max(1, _CHUNK // max(R, 1))
        for start in range(0, nnz, step):  # blocks of entries, not a loop over samples
            stop = min(start + step, nnz)
            out[start:stop] = np.einsum("ir,ir->i", np.take(H, self.rows[start:stop], axis=0),
                                        self.W[self.cols[start:stop]])
        return out

    def per_sample(self, H: Any, Y: Any) -> Any:
        """``d(v_j || (W h)_j)`` per sample (``(b,)``); ``Y`` is :meth:`model` of ``H``."""
        if self._data_term is None:
            v = self.values
            self._data_term = self._row_sums(xlogy(v, v) - v)
        log_model = self._row_sums(xlogy(self.values, np.maximum(Y, self.eps)))
        return H @ self.column_sums + self._data_term - log_model

    def ratio(self, Y: Any) -> Any:
        """``V ⊘ Y`` as a CSR matrix with the pattern of ``V`` (overwritten by the next call)."""
        if self._ratio is None:
            self._ratio = self.V.astype(np.result_type(self.values.dtype, Y.dtype), copy=True)
        # one matrix with the (canonical) pattern of V, refilled in place: the constructor's
        # checks would dominate an iteration's time. Valid until the next call.
        np.divide(self.values, np.maximum(Y, self.eps), out=self._ratio.data)
        return self._ratio

    def code_gradient(self, Y: Any) -> Any:
        """``∂/∂H sum_j d(v_j || W h_j) = 1^T W - (V ⊘ Y) W``, shape ``(b, R)``."""
        return self.column_sums[None, :] - np.asarray(self.ratio(Y) @ self.W)

    def dictionary_gradient(self, H: Any, Y: Any) -> Any:
        """``∂/∂W sum_j d(v_j || W h_j) = 1 (1^T H) - (V ⊘ Y)^T H``, shape ``(F, R)``."""
        return np.sum(H, axis=0)[None, :] - np.asarray(self.ratio(Y).T @ H)


class _SparseKLProblem(_Problem):
    """The code problems of a sparse batch under KL: ``Y`` lives on the support (``(nnz,)``)."""

    def __init__(self, kl: SparseKL, lower, upper, ridge):
        super().__init__(kl.V, kl.model, None, get_loss("kl"), lower, upper, ridge)
        self.kl = kl

    @property
    def model_rows(self):
        """The sample of every entry of the model (``(nnz,)``)."""
        return self.kl.rows

    def select(self, mask, Y_new, Y):
        return np.where(mask[self.kl.rows], Y_new, Y)

    def subset(self, keep, Y):
        """The problem of the samples where ``keep`` holds, and their model ``Y``."""
        problem = _SparseKLProblem(self.kl.subset(keep), self.lower, self.upper, self.ridge)
        return problem, Y[keep[self.kl.rows]]

    def objective(self, H, Y):
        f = self.kl.per_sample(H, Y)
        if self.ridge:
            f = f + self.ridge / 2 * np.sum(H * H, axis=1)
        return f

    def trial_objective(self, H, Y):
        f = self.objective(H, Y)
        # off the support the model is >= 0 (W >= 0, H >= lower >= 0); on it, it must be too
        negative = self.kl._row_sums(np.minimum(Y, 0.0)) < 0
        return np.where(~(np.abs(f) < _INF) | negative, _INF, f)

    def gradient(self, H, Y):
        g = self.kl.code_gradient(Y)
        if self.ridge:
            g = g + self.ridge * H
        return g

    def mu_terms(self, H, Y):
        numerator = np.asarray(self.kl.ratio(Y) @ self.kl.W)
        if self.ridge:
            return numerator, np.maximum(self.kl.column_sums + self.ridge * H,
                                         _DENOMINATOR_FLOOR)
        if self._kl_denominator is None:  # 1^T W: the same at every iteration
            self._kl_denominator = np.maximum(self.kl.column_sums, _DENOMINATOR_FLOOR)[None, :]
        return numerator, self._kl_denominator


def code_divergence_sparse(
    V: Any,
    W: Any,
    loss: str | float | Divergence = "kl",
    *,
    init: Any = None,
    gram: Any = None,
    step: str | StepRule = "auto",
    lower: float = CODE_LOWER,
    upper: float | None = CODE_UPPER,
    ridge: float = 0.0,
    max_iter: int = 200,
    tol: float = 1e-4,
    callback: Callable[[int, Any, Any], bool | None] | None = None,
) -> tuple[Any, dict]:
    """:func:`code_divergence` for sparse data and a dictionary matrix, on the support only.

    Same problem, step rules, stopping rule and result as
    ``code_divergence_matrix(V.toarray(), W, loss, ...)`` (equal up to rounding), but the model
    is evaluated only on the nonzeros of ``V`` (:class:`SparseKL`): memory and time scale with
    ``nnz(V)``, never with ``b x F``. Only the losses of :data:`SPARSE_LOSSES` (KL) have this
    form; NumPy backend only.

    Parameters
    ----------
    V : scipy.sparse matrix of shape (b, F)
        Nonnegative data, canonical CSR (see :class:`SparseKL`).
    W : numpy.ndarray of shape (F, R)
        Nonnegative dictionary.
    loss : str, float or Divergence, default "kl"
        Must be KL (``"kl"``, ``1.0``, ``"alpha"`` with ``alpha=1``...).
    init, step, upper, ridge, max_iter, tol, callback
        As in :func:`code_divergence`.
    gram : ignored
        Accepted for the signature of :func:`code_divergence`: KL has no curvature bound, so
        no step rule it can take uses ``W^T W``.
    lower : float, default 1e-8
        Lower code bound; must be ``>= 0`` (the objective uses that the model is nonnegative
        off the support).

    Returns
    -------
    H : numpy.ndarray of shape (b, R)
    info : dict
        As in :func:`code_divergence`.

    Raises
    ------
    ValueError
        For a loss without a support-only form, negative ``W`` or ``lower``, mismatched
        shapes, or the option errors of :func:`code_divergence`.

    Examples
    --------
    >>> import numpy as np, scipy.sparse
    >>> W = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> V = scipy.sparse.csr_matrix(np.array([[2.0, 0.0, 2.0]]))
    >>> H, _ = code_divergence_sparse(V, W, tol=1e-12, max_iter=500)
    >>> np.round(H, 4)
    array([[2., 0.]])
    """
    loss = get_loss(loss)
    if loss.name not in SPARSE_LOSSES:
        raise ValueError(f"the support-only sparse path exists for {list(SPARSE_LOSSES)} only, "
                         f"not the {loss.name} divergence; densify the data")
    lower, upper = _check_bounds(lower, upper)
    if lower is None or lower < 0:
        raise ValueError(f"lower must be >= 0 for sparse data, got {lower!r}")
    _check_options(max_iter, tol, ridge)
    if not scipy.sparse.issparse(V) or V.ndim != 2:
        raise ValueError(f"V must be a 2-D scipy.sparse matrix, got {type(V).__name__}")
    V = V.tocsr()
    W = np.asarray(W)
    if W.ndim != 2 or W.shape[0] != V.shape[1]:
        raise ValueError(f"W must have shape ({V.shape[1]}, R) to match V, got {W.shape}")
    if W.size and W.min() < 0:
        raise ValueError("W must be nonnegative for sparse data")
    if V.nnz and V.data.min() < 0:
        raise ValueError("V must be nonnegative for the kl divergence")
    b, R = V.shape[0], W.shape[1]
    if init is not None and tuple(np.shape(init)) != (b, R):
        raise ValueError(f"init must have shape ({b}, {R}), got {tuple(np.shape(init))}")
    # the step is resolved (and checked) there; KL has no curvature bound, so no rule it can
    # take needs the Gram matrix
    return solve_sparse_kl(SparseKL(V, W, eps=loss.eps), step, init=init, lower=lower,
                           upper=upper, ridge=float(ridge), max_iter=max_iter, tol=float(tol),
                           callback=callback)


def solve_sparse_kl(kl: SparseKL, step: str | StepRule = "auto", *, init: Any = None,
                    lower: float = CODE_LOWER, upper: float | None = CODE_UPPER,
                    ridge: float = 0.0, max_iter: int = 200, tol: float = 1e-4,
                    callback: Callable | None = None, evaluate: bool = True) -> tuple[Any, dict]:
    """:func:`code_divergence_sparse` on a built :class:`SparseKL`, without the checks.

    For callers that have validated the data, the dictionary and the options already (a
    learner's step) and keep ``kl`` for the dictionary gradient. ``info["model"]`` is the
    model on the support (``kl.model(H)``); ``evaluate`` as in :func:`code_divergence`.
    """
    rule = _resolve_step(step, get_loss("kl"), None, ridge, lower)
    b, R = kl.b, int(kl.W.shape[1])
    problem = _SparseKLProblem(kl, lower, upper, ridge)
    if init is None:
        total = float(np.sum(kl.W))  # sum of forward(1): every atom at weight 1
        scale = kl._row_sums(kl.values) / total if total > 0 else np.ones(b)
        init = np.ones((b, R), dtype=kl.W.dtype) * scale[:, None]
    H = problem.project(np.asarray(init))
    Y = problem.forward(H)
    if isinstance(rule, MultiplicativeStep):
        return _iterate_mu(problem, rule, H, Y, max_iter, tol, callback, evaluate)
    return _iterate(problem, rule, H, Y, problem.objective(H, Y), problem.gradient(H, Y),
                    max_iter, tol, callback)
