"""OnlineCPDL: online (nonnegative) CP-dictionary learning, Lyu, Strohmeier & Needell.

The bounded-memory form of the algorithm (spec 004, Algorithm 2). Per mini-batch ``X_t``:

1. code the batch against the current dictionary (nonnegative LASSO, :mod:`..coding`);
2. fold the batch into the running statistics with weight ``w_t``::

       A_t = (1 - w_t) A_{t-1} + w_t H_t^T H_t / b            (R x R)
       B_t = (1 - w_t) B_{t-1} + w_t sum_j X_j o H_t[j] / b   (I_1 x ... x I_n x R)
       c_t = (1 - w_t) c_{t-1} + w_t mean_j(||X_j||^2 + alpha ||h_j||_1 + ridge ||h_j||^2)

3. one block-coordinate pass over the loadings on the surrogate ``tr(A G) - 2 <B, W> + c``,
   each loading moving at most ``rho_t`` (the search radius) (:mod:`..updates`).

Losses are per-sample means, so batches of different sizes weigh correctly and the surrogate is
on the same scale as :meth:`OnlineCPDL.score`. Memory is ``O(R prod(I_k))`` whatever the number
of samples seen.

``loss`` other than the squared one (KL, beta, IS, Huber, ...) switches the learner to the online
algorithm of Zhao, Tan & Xu (projected-gradient codes, one projected stochastic-gradient step on
the loadings per batch): :class:`tensorstream.learners.divergence_nmf.OLAlgorithm`, the same code
that :class:`~tensorstream.learners.divergence_nmf.OnlineDivergenceNMF` runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorly as tl
import xarray as xr

from .._backend import as_tensor, backend_of, float_dtype_of, using
from .._validation import (
    check_batch,
    check_masked_batch,
    check_n_components,
    check_nonnegative_number,
    check_positive_int,
    check_sample_weight,
    check_sparse_batch,
    is_sparse,
)
from ..coding import sample_losses, sparse_code
from ..constraints import project_columns
from ..cp_dictionary import (
    gram,
    masked_gram,
    outer_statistic,
    pairs,
    project,
    reconstruct,
    to_cp_tensor,
)
from ..divergence_coding import CODE_LOWER, CODE_UPPER
from ..labels import ModeLayout, codes_to_dataarray, factors_to_dataset, from_samples, to_samples
from ..losses import Divergence, get_loss
from ..schedules import checked_weight, make_radius, make_weights
from ..updates import surrogate_bcd_step, surrogate_value
from ._base import OnlineEstimator, is_labelled

SQUARED_ONLY = {"alpha": 0.0, "weights": "balanced", "search_radius": None,
                "radius_mode": "frobenius", "nonnegative": True, "column_bound": 1.0,
                "missing": None, "dict_passes": 1}
"""Parameters of the squared loss's surrogate engine, with their defaults."""

DIVERGENCE_ONLY = {"loss_params": None, "step_a": 2e4, "step_b": 2e4, "step_tau": None,
                   "grad_reduction": "mean", "code_step": "auto", "code_lower": CODE_LOWER,
                   "code_upper": CODE_UPPER, "dict_upper": 1.0, "dict_row_min": 1e-8,
                   "normalize": True, "dict_step": "sgd"}
"""Parameters of the divergence (OL) algorithm, with their defaults."""


def is_default(value: Any, default: Any) -> bool:
    """True when a parameter holds its default (``None`` only by identity)."""
    if default is None or value is None:
        return value is default
    try:
        return bool(value == default)
    except Exception:  # arrays, tensors: not a default
        return False


def check_at_defaults(learner: Any, defaults: dict, scope: str) -> None:
    """Raise ``ValueError`` when a parameter of ``learner`` named in ``defaults`` (those that
    apply to ``scope`` only) is not at its default under the learner's ``loss``."""
    params = learner.get_params()
    for name, default in defaults.items():
        if name in params and not is_default(params[name], default):
            raise ValueError(f"{name}={params[name]!r} applies to {scope} only; it cannot be "
                             f"combined with loss={learner.loss!r} (leave it at its default "
                             f"{default!r})")


def is_squared_loss(loss: Any) -> bool:
    """True for every spelling of the squared loss (``"squared"``, ``"l2"``, ``2.0``, ...)."""
    try:
        return get_loss(loss).name == "l2"
    except (ValueError, TypeError):  # unknown, or needs parameters: not the squared loss
        return False


@dataclass(frozen=True)
class Encoding:
    """What the coding step of a batch yields for the statistics and the objective."""

    codes: Any  #: (b, R) codes
    explained: Any  #: the part of the batch the dictionary must explain (X, or X - outliers)
    losses: Any  #: (b,) per-sample objective at these codes
    constant: float  #: batch mean of the surrogate's dictionary-free terms (||explained||^2, ...)


class OnlineCPDL(OnlineEstimator):
    """Online CP-dictionary learning from a stream of tensor-valued samples.

    Learns loadings ``U^(k)`` of shape ``(I_k, R)`` so that every sample ``X_j`` (shape
    ``(I_1, ..., I_n)``) is close to ``sum_r h_jr U^(1)[:, r] o ... o U^(n)[:, r]`` with sparse
    (and, by default, nonnegative) codes ``h_j``. With one data mode (``X`` of shape
    ``(n_samples, n_features)``) this is online NMF / dictionary learning.

    Parameters
    ----------
    n_components : int
        Number of rank-one atoms ``R``.
    loss : str, float or Divergence, default "squared"
        ``"squared"`` (any name of the squared loss, or 2.0): the surrogate algorithm below.
        Any other loss of :func:`tensorstream.losses.get_loss` (``"kl"``, ``"is"``, a beta,
        ``"huber"``, ...) runs the online algorithm of Zhao, Tan & Xu instead (the one of
        :class:`~tensorstream.learners.divergence_nmf.OnlineDivergenceNMF`, see its parameters):
        e.g. ``loss="kl"`` is online Poisson CP of count tensors. The parameters of one
        algorithm must stay at their defaults with the other (``ValueError`` otherwise);
        ``ridge``, ``batch_size``, ``max_iter``, ``init``, ``code_max_iter``, ``code_tol`` and
        the rest are shared.
    loss_params : dict or JSON string, optional
        Keyword arguments of ``get_loss`` (``threshold`` for Huber, ``beta``, ...); divergence
        losses only.
    alpha : float, default 0.0
        l1 penalty on the codes, in the convention ``||x - W h||^2 + alpha ||h||_1`` (the
        paper's eq. (9); the paper's image/video values are scikit-learn alphas, ``alpha =
        2 * prod(I) * sklearn_alpha``).
    ridge : float, default 0.0
        Squared l2 penalty on the codes; > 0 makes codes unique (the theory's assumption A4).
    weights : "balanced", float or callable, default "balanced"
        Schedule ``w_t``: ``"balanced"`` is ``1/t``, a float ``beta`` is ``t^-beta``, a callable
        maps ``t = 1, 2, ...`` to ``w_t`` in (0, 1] (see :mod:`tensorstream.schedules` for
        ``PowerLog`` and ``Forgetting``).
    search_radius : None, float or callable, default None
        ``None``: unrestricted loading updates. A float ``c'``: each loading moves by at most
        ``c' w_t`` per step (the paper's restriction that the convergence proof needs). A callable
        maps ``t`` to the radius (e.g. ``schedules.ReferenceRadius``).
    radius_mode : {"frobenius", "column"}, default "frobenius"
        Bound the Frobenius norm of each loading's step (paper), or of each column's step
        (the reference code's variant; a loading then moves by at most ``sqrt(R)`` radii).
    nonnegative : bool, default True
        Nonnegative loadings and codes (requires nonnegative data).
    column_bound : float or None, default 1.0
        Bound on the Euclidean norm of every loading column (keeps the dictionary in a compact
        set; codes carry the scale). ``None`` leaves columns unbounded.
    missing : {None, "nan"}, default None
        ``"nan"``: NaN entries of the data are missing. Missing entries (these, and those a
        ``mask`` marks) never influence anything: codes and statistics use the observed
        entries only (the statistic ``A`` then becomes entrywise, ``(I_1..I_n, R, R)``).
    batch_size : int, default 32
        Samples per mini-batch when ``fit`` is given an array.
    max_iter : int, default 10
        Passes over an array given to ``fit``.
    init : "random" or list of arrays, default "random"
        Initial loadings: i.i.d. uniform [0, 1) entries projected on the constraint set, or
        the given ``(I_k, R)`` matrices.
    dict_passes : int, default 1
        Column-minimisation passes per mode and step (1: the reference code's single pass).
    code_max_iter : int, default 300
        Maximum coordinate-descent sweeps of the coding step.
    code_tol : float, default 1e-5
        Relative tolerance of the coding step.
    step_a, step_b, step_tau, grad_reduction, code_step, code_lower, code_upper, dict_upper, \
dict_row_min, normalize, dict_step
        Divergence losses only: see
        :class:`~tensorstream.learners.divergence_nmf.OnlineDivergenceNMF`.
    random_state : int, Generator or None
        Seed of the initialisation and of the shuffling in ``fit``.
    backend : {"numpy", "pytorch", None}, default None
        TensorLy backend; ``None`` takes it from the first batch (a torch tensor runs on
        pytorch, on its device and dtype). Numpy input is converted to the learner's backend.
    verbose : bool, default False
        Show a progress bar in ``fit``.
    callback : callable, optional
        ``callback(learner, info)`` after every step; returning True stops ``fit``.

    Attributes
    ----------
    loadings_ : list of tensors of shape (I_k, n_components)
    statistics_ : dict with ``A`` (R, R), ``B`` (I_1, ..., I_n, R) and ``c`` (float)
    n_steps_ : int
    n_samples_seen_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from tensorstream import OnlineCPDL
    >>> X = np.random.default_rng(0).random((100, 6, 5, 4))
    >>> model = OnlineCPDL(3, batch_size=10, max_iter=2, random_state=0).fit(X)
    >>> [U.shape for U in model.loadings_]
    [(6, 3), (5, 3), (4, 3)]
    >>> model.transform(X[:2]).shape
    (2, 3)
    >>> counts = np.random.default_rng(0).poisson(2.0, (40, 6, 5)).astype(float)
    >>> poisson = OnlineCPDL(2, loss="kl", batch_size=10, max_iter=1, random_state=0)
    >>> [U.shape for U in poisson.fit(counts).loadings_]
    [(6, 2), (5, 2)]
    """

    loss = "squared"  # the defaults of subclasses that do not take these parameters
    loss_params = None

    def __init__(self, n_components: int, *, loss: str | float | Divergence = "squared",
                 loss_params: dict | None = None, alpha: float = 0.0, ridge: float = 0.0,
                 weights="balanced", search_radius=None, radius_mode: str = "frobenius",
                 nonnegative: bool = True, column_bound: float | None = 1.0,
                 missing: str | None = None,
                 batch_size: int = 32, max_iter: int = 10, init="random",
                 dict_passes: int = 1, code_max_iter: int = 300, code_tol: float = 1e-5,
                 step_a: float = 2e4, step_b: float = 2e4, step_tau: float | None = None,
                 grad_reduction: str = "mean", code_step: Any = "auto",
                 code_lower: float = CODE_LOWER, code_upper: float = CODE_UPPER,
                 dict_upper: float = 1.0, dict_row_min: float = 1e-8, normalize: bool = True,
                 dict_step: str = "sgd", random_state=None, backend: str | None = None,
                 verbose: bool = False, callback=None):
        self.n_components = n_components
        self.loss = loss
        self.loss_params = loss_params
        self.alpha = alpha
        self.ridge = ridge
        self.weights = weights
        self.search_radius = search_radius
        self.radius_mode = radius_mode
        self.nonnegative = nonnegative
        self.column_bound = column_bound
        self.missing = missing
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.init = init
        self.dict_passes = dict_passes
        self.code_max_iter = code_max_iter
        self.code_tol = code_tol
        self.step_a = step_a
        self.step_b = step_b
        self.step_tau = step_tau
        self.grad_reduction = grad_reduction
        self.dict_step = dict_step
        self.code_step = code_step
        self.code_lower = code_lower
        self.code_upper = code_upper
        self.dict_upper = dict_upper
        self.dict_row_min = dict_row_min
        self.normalize = normalize
        self.random_state = random_state
        self.backend = backend
        self.verbose = verbose
        self.callback = callback

    # -- the loss ------------------------------------------------------------------------------

    @property
    def loss_(self) -> Divergence:
        """The divergence object (from ``loss`` and ``loss_params``)."""
        params = self.loss_params
        if isinstance(params, str):  # as restored from a checkpoint
            params = json.loads(params)
        return get_loss(self.loss, **(params or {}))

    def _ol(self) -> Any:
        """The divergence (OL) algorithm for a non-squared ``loss``; None for the squared one."""
        if is_squared_loss(self.loss):
            return None
        from .divergence_nmf import OLAlgorithm  # that module subclasses this one

        return OLAlgorithm(self)

    def save(self, path: Any) -> Any:
        """Checkpoint (see :func:`tensorstream.io.save_checkpoint`); a dict ``loss_params`` is
        stored as a JSON string, which the loaded learner accepts in its place."""
        params = self.loss_params
        if isinstance(params, dict):
            self.loss_params = json.dumps(params)
        try:
            return super().save(path)
        finally:
            self.loss_params = params

    def fit(self, X: Any, y: Any = None, **fit_params: Any) -> OnlineCPDL:
        """Learn from scratch (see :meth:`OnlineEstimator.fit`). Sparse matrices
        (scipy.sparse, 2-D ``sparse.COO``) are streamed as CSR row batches."""
        if is_sparse(X) and len(X.shape) == 2:
            X = X.tocsr()
        return super().fit(X, y, **fit_params)

    # -- state ---------------------------------------------------------------------------------

    def _reset(self) -> None:
        for name in ("loadings_", "statistics_", "n_steps_", "n_samples_seen_", "backend_",
                     "sample_shape_", "layout_", "_context", "_rng", "_last_info"):
            self.__dict__.pop(name, None)

    @property
    def _fitted(self) -> bool:
        return "loadings_" in self.__dict__

    def _check_params(self) -> None:
        ol = self._ol()
        if ol is not None:
            ol.check_params()
            return
        check_n_components(self.n_components)
        check_at_defaults(self, DIVERGENCE_ONLY, "divergence losses")
        check_nonnegative_number(self.alpha, "alpha")
        check_nonnegative_number(self.ridge, "ridge")
        check_positive_int(self.dict_passes, "dict_passes")
        check_positive_int(self.code_max_iter, "code_max_iter")
        check_nonnegative_number(self.code_tol, "code_tol")
        if self.radius_mode not in ("frobenius", "column"):
            raise ValueError(f"radius_mode must be 'frobenius' or 'column', "
                             f"got {self.radius_mode!r}")
        if self.column_bound is not None:
            if check_nonnegative_number(self.column_bound, "column_bound") == 0:
                raise ValueError("column_bound must be > 0 or None")
        if self.missing not in (None, "nan"):
            raise ValueError(f"missing must be None or 'nan', got {self.missing!r}")
        if self.backend not in (None, "numpy", "pytorch"):
            raise ValueError(f"backend must be 'numpy', 'pytorch' or None, got {self.backend!r}")
        make_radius(self.search_radius, make_weights(self.weights))

    def _backend_for(self, X: Any) -> str:
        return self.backend_ if self._fitted else (self.backend or backend_of(X))

    def _validate(self, X: Any, name: str = "X") -> Any:
        """``X`` as a tensor of the learner's backend, checked against the fitted state.

        A divergence loss keeps a sparse batch sparse (CSR) where it has the support-only path
        (:meth:`OLAlgorithm.keeps_sparse`); everything else is densified.
        """
        backend = self._backend_for(X)
        ol = self._ol()
        if ol is not None and is_sparse(X) and (backend != "numpy" or ol.keeps_sparse(X)):
            return check_sparse_batch(X, backend=backend, context=getattr(self, "_context", None),
                                      sample_shape=getattr(self, "sample_shape_", None),
                                      nonnegative=self._nonnegative_data(ol), name=name)
        return check_batch(X, backend=backend, context=getattr(self, "_context", None),
                           sample_shape=getattr(self, "sample_shape_", None),
                           nonnegative=self._nonnegative_data(ol), name=name)

    def _nonnegative_data(self, ol: Any) -> bool:
        """Whether the data must be nonnegative: from the loss on the divergence algorithm."""
        return bool(ol.loss.needs_nonnegative_data) if ol is not None else self.nonnegative

    def _validate_masked(self, X: Any, mask: Any, name: str = "X") -> tuple[Any, Any]:
        """``(X, mask)`` as tensors; ``mask`` is None unless entries are missing."""
        if is_sparse(X) and mask is None and self._ol() is not None:
            return self._validate(X, name), None
        return check_masked_batch(X, mask, missing=self.missing, backend=self._backend_for(X),
                                  context=getattr(self, "_context", None),
                                  sample_shape=getattr(self, "sample_shape_", None),
                                  nonnegative=self._nonnegative_data(self._ol()), name=name)

    def _initial_state(self, X: Any) -> dict:
        """Loadings and zero statistics for samples shaped like the batch ``X``."""
        self._init_random_state()
        R = check_n_components(self.n_components)
        backend = backend_of(X)
        with using(backend):
            context = {**tl.context(X), "dtype": float_dtype_of(X, backend)}
            sample_shape = tuple(X.shape[1:])
            loadings = self._initial_loadings(sample_shape, R, backend, context)
            statistics = {"A": tl.zeros((R, R), **context),
                          "B": tl.zeros((*sample_shape, R), **context), "c": 0.0}
        return {"loadings_": loadings, "statistics_": statistics, "n_steps_": 0,
                "n_samples_seen_": 0, "backend_": backend, "sample_shape_": sample_shape,
                "_context": context}

    def _initial_loadings(self, sample_shape: tuple, R: int, backend: str,
                          context: dict) -> list:
        ol = self._ol()
        if ol is not None:
            return ol.initial_loadings(sample_shape, R, backend, context)
        if isinstance(self.init, str):
            if self.init != "random":
                raise ValueError(f"init must be 'random' or a list of arrays, got {self.init!r}")
            # drawn in numpy so that every backend starts from the same values
            arrays = [self._rng.random((size, R)) for size in sample_shape]
            return [project_columns(tl.tensor(a, **context), nonnegative=self.nonnegative,
                                    column_bound=self.column_bound) for a in arrays]
        return self._checked_init(sample_shape, R, backend, context)

    def _checked_init(self, sample_shape: tuple, R: int, backend: str, context: dict) -> list:
        init = list(self.init) if isinstance(self.init, Sequence) else None
        if init is None or len(init) != len(sample_shape):
            raise ValueError(f"init must be 'random' or a list of {len(sample_shape)} arrays of "
                             f"shapes {[(s, R) for s in sample_shape]}")
        loadings = []
        for k, (U, size) in enumerate(zip(init, sample_shape)):
            U = check_batch(U, backend=backend, nonnegative=self.nonnegative, name=f"init[{k}]")
            if tuple(U.shape) != (size, R):
                raise ValueError(f"init[{k}] must have shape {(size, R)}, got {tuple(U.shape)}")
            loadings.append(project_columns(tl.tensor(U, **context), nonnegative=self.nonnegative,
                                            column_bound=self.column_bound))
        return loadings

    # -- learning ------------------------------------------------------------------------------

    def partial_fit(self, X: Any, y: Any = None, *, mask: Any = None,
                    sample_dim: str | None = None, modes: Any = None) -> OnlineCPDL:
        """Learn from one mini-batch.

        Parameters
        ----------
        X : array of shape (b, I_1, ..., I_n) or xarray.DataArray
            The batch; a DataArray is laid out by ``sample_dim`` and ``modes`` (see ``fit``),
            given with the first batch and kept for the next ones.
        y : ignored
        mask : boolean array of X's shape, optional
            True where an entry is observed; missing entries never influence the result.
        sample_dim, modes : optional
            Labelled input only (see :meth:`fit`).

        Returns
        -------
        self

        Invalid input raises before anything changes: the learner's state is left as it was.
        """
        self._check_params()
        data, layout = self._unlabel(X, sample_dim, modes)
        X, mask = self._validate_masked(data, self._unlabel_mask(mask, layout))
        state = {} if self._fitted else self._initial_state(X)
        current = {**self._state(), **state}
        with using(current["backend_"]):
            update = self._step(X, current, mask)
        self.__dict__.update(state)
        self.__dict__.update(update)
        if layout is not None:
            self.layout_ = layout
        return self

    def _state(self) -> dict:
        return {k: self.__dict__[k] for k in ("loadings_", "statistics_", "n_steps_",
                                               "n_samples_seen_", "backend_")
                if k in self.__dict__}

    def _step(self, X: Any, state: dict, mask: Any = None) -> dict:
        """One step of Algorithm 2 on the validated batch; returns the new state (pure)."""
        ol = self._ol()
        if ol is not None:
            return ol.step(X, state, mask)
        t = state["n_steps_"] + 1
        weights = make_weights(self.weights)
        w = checked_weight(weights, t)
        radius_schedule = make_radius(self.search_radius, weights)
        radius = None if radius_schedule is None else float(radius_schedule(t))
        loadings, stats = state["loadings_"], state["statistics_"]

        b = X.shape[0]
        coded = self._encode(X, loadings) if mask is None else self._encode(X, loadings, mask)
        H = coded.codes
        statistics = {
            "A": _averaged_code_products(stats["A"], H, mask, w),
            "B": (1 - w) * stats["B"] + (w / b) * outer_statistic(coded.explained, H),
            "c": (1 - w) * stats["c"] + w * coded.constant,
        }
        new_loadings = self._dictionary_step(X, coded, statistics, loadings, t, radius)
        return self._next_state(state, new_loadings, statistics, t, b,
                                float(tl.mean(coded.losses)), {"weight": w, "radius": radius})

    def _next_state(self, state: dict, loadings: list, statistics: dict, t: int, b: int,
                    batch_loss: float, info: dict) -> dict:
        """The state after step ``t`` on ``b`` samples; records ``_last_info``. Raises (before
        anything changes) when the loadings are not finite."""
        if not all(bool(tl.all(tl.abs(U) < float("inf"))) for U in loadings):
            raise FloatingPointError("the dictionary update produced non-finite loadings; "
                                     "the learner's state was left unchanged")
        self._last_info = {"step": t, **info, "batch_loss": batch_loss, "n_samples": b}
        return {"loadings_": loadings, "statistics_": statistics, "n_steps_": t,
                "n_samples_seen_": state["n_samples_seen_"] + b}

    # -- using the dictionary ------------------------------------------------------------------

    def _check_fitted(self) -> None:
        if not self._fitted:
            raise ValueError(f"this {type(self).__name__} is not fitted yet; call fit or "
                             f"partial_fit first")

    def _encode(self, X: Any, loadings: list, mask: Any = None) -> Encoding:
        """The coding step of a validated batch against ``loadings`` (pure).

        Subclasses with other per-sample problems (outliers, other losses) override this and
        :meth:`_update_dictionary`; the statistics and the loop stay the same. With a ``mask``
        (``X`` is zero where it is 0), each sample has its own Gram ``W^T diag(m_j) W``.
        A divergence loss codes at the learned data scale (:meth:`OLAlgorithm.encode`).
        """
        ol = self._ol()
        if ol is not None:
            if mask is not None:
                raise ValueError(f"{type(self).__name__} with the {ol.loss.name} loss does not "
                                 f"support missing entries (mask)")
            return ol.encode(X, loadings, float(self.statistics_["c"]))
        G = gram(loadings) if mask is None else masked_gram(mask, loadings)
        P = project(X, loadings)
        H, _ = sparse_code(G, P, alpha=self.alpha, ridge=self.ridge,
                           nonnegative=self.nonnegative, max_iter=self.code_max_iter,
                           tol=self.code_tol)
        sq_norms = tl.sum(tl.reshape(X * X, (X.shape[0], -1)), axis=1)
        losses = sample_losses(sq_norms, G, P, H, alpha=self.alpha, ridge=self.ridge)
        penalties = self.alpha * tl.abs(H) + self.ridge * H * H
        constant = float(tl.mean(sq_norms + tl.sum(penalties, axis=1)))
        return Encoding(codes=H, explained=X, losses=losses, constant=constant)

    def _coded(self, X: Any, mask: Any) -> Encoding:
        """:meth:`_encode` at the learned dictionary (mask passed only when there is one)."""
        if mask is None:
            return self._encode(X, self.loadings_)
        return self._encode(X, self.loadings_, mask)

    def _unlabel_mask(self, mask: Any, layout: Any) -> Any:
        """A labelled mask laid out like its labelled data."""
        if mask is not None and is_labelled(mask):
            if layout is None:
                raise TypeError("a labelled mask needs labelled data")
            return to_samples(mask, layout)
        return mask

    def _dictionary_step(self, X: Any, coded: Encoding, statistics: dict, loadings: list,
                         t: int, radius: float | None) -> list:
        """The dictionary step of step ``t`` (pure). Surrogate learners use the statistics
        (:meth:`_update_dictionary`); stochastic-gradient learners override this hook, which
        also sees the batch and its codes."""
        ol = self._ol()
        if ol is not None:
            return ol.dictionary_step(X, coded, float(statistics["c"]), loadings, t)
        return self._update_dictionary(loadings, statistics, radius)

    def _update_dictionary(self, loadings: list, statistics: dict, radius: float | None) -> list:
        """One block-coordinate pass on the surrogate, each loading within ``radius`` (pure)."""
        return surrogate_bcd_step(
            loadings, statistics["A"], statistics["B"], nonnegative=self.nonnegative,
            column_bound=self.column_bound, radius=radius, radius_mode=self.radius_mode,
            n_passes=self.dict_passes)

    def transform(self, X: Any, mask: Any = None) -> Any:
        """Codes of the samples of ``X`` against the learned dictionary, shape ``(n, R)``.

        Labelled input gives a DataArray over ``(sample_dim, "component")`` with the sample
        coords. ``mask`` (or ``missing="nan"``) marks missing entries, which are ignored.
        """
        self._check_fitted()
        data, layout = self._unlabel(X, None, None)
        X_checked, mask = self._validate_masked(data, self._unlabel_mask(mask, layout))
        with using(self.backend_):
            codes = self._coded(X_checked, mask).codes
        return codes if layout is None else codes_to_dataarray(codes, layout.with_samples(X))

    def inverse_transform(self, codes: Any) -> Any:
        """Samples ``sum_r codes[j, r] atom_r``, shape ``(n, I_1, ..., I_n)``.

        Codes given as a DataArray (from ``transform`` of labelled data) give the samples back
        as a DataArray with the original dims and coords.
        """
        self._check_fitted()
        layout = None
        if is_labelled(codes):
            layout = self.__dict__.get("layout_")
            if layout is None:
                raise TypeError("labelled codes need a learner fitted on labelled data")
            layout = layout.with_samples(codes)
            codes = codes.transpose(layout.sample_dim, ...).data
        codes = check_batch(codes, backend=self.backend_, context=self._context,
                            sample_shape=(self.loadings_[0].shape[1],), name="codes")
        with using(self.backend_):
            samples = reconstruct(self.loadings_, codes)
        return samples if layout is None else from_samples(samples, layout)

    def score(self, X: Any, y: Any = None, sample_weight: Any = None, mask: Any = None) -> float:
        """Negative (weighted) mean over samples of ``min_h ||x - W h||^2 + alpha ||h||_1``.

        With missing entries (``mask`` or ``missing="nan"``) only observed entries count.
        """
        self._check_fitted()
        data, layout = self._unlabel(X, None, None)
        X, mask = self._validate_masked(data, self._unlabel_mask(mask, layout))
        weights = check_sample_weight(sample_weight, X.shape[0])
        with using(self.backend_):
            losses = tl.to_numpy(self._coded(X, mask).losses)
        return -float(np.average(losses, weights=weights))

    def surrogate_value(self) -> float:
        """The surrogate ``f_t`` (per-sample scale) at the current dictionary."""
        if self._ol() is not None:
            raise NotImplementedError(f"{type(self).__name__} with a divergence loss keeps no "
                                      f"surrogate; use score(X)")
        self._check_fitted()
        stats = self.statistics_
        with using(self.backend_):
            return surrogate_value(stats["A"], stats["B"], stats["c"], self.loadings_)

    @property
    def factors_(self):
        """The learned loadings as an ``xarray.Dataset``: one variable per mode.

        For labelled input each variable keeps the original dims and coords (stacked modes
        unstacked again) plus a ``component`` dim; for plain arrays the dims are ``mode_0``,
        ``mode_1``, ...
        """
        self._check_fitted()
        layout = self.__dict__.get("layout_")
        if layout is None:
            dims = ("sample", *(f"mode_{k}" for k in range(len(self.sample_shape_))))
            template = xr.DataArray(np.broadcast_to(0.0, (1, *self.sample_shape_)), dims=dims)
            layout = ModeLayout.from_dataarray(template, "sample", None)
        return factors_to_dataset(self.loadings_, layout)

    def to_cp_tensor(self, X: Any):
        """The batch ``X`` as a TensorLy ``CPTensor``: its codes are the sample-mode factor."""
        codes = self.transform(X)
        with using(self.backend_):
            return to_cp_tensor(self.loadings_, codes)

    def reconstruct(self, X: Any) -> Any:
        """``inverse_transform(transform(X))``: the model's approximation of ``X``."""
        return self.inverse_transform(self.transform(X))


def _averaged_code_products(A: Any, H: Any, mask: Any, w: float) -> Any:
    """``(1 - w) A + w mean_j h_j h_j^T``, entrywise (``mean_j m_j[i] h_j h_j^T``) with a mask.

    The first batch with missing entries turns ``A`` entrywise: until then every entry had the
    same ``A``, so broadcasting it is exact.
    """
    b, R = H.shape
    if mask is None and tl.ndim(A) == 2:
        return (1 - w) * A + (w / b) * tl.dot(tl.transpose(H), H)
    if mask is None:
        increment = tl.reshape(tl.dot(tl.transpose(H), H), (1,) * (tl.ndim(A) - 2) + (R, R))
    else:
        sample_shape = tuple(mask.shape[1:])
        increment = tl.reshape(outer_statistic(mask, pairs(H)), (*sample_shape, R, R))
        if tl.ndim(A) == 2:
            A = tl.reshape(A, (1,) * len(sample_shape) + (R, R))
    return (1 - w) * A + (w / b) * increment


def as_backend_list(arrays: Sequence[Any], backend: str, context: dict) -> list:
    """Tensors of ``backend`` from a list of arrays (used to restore checkpoints)."""
    return [as_tensor(a, backend, **context) for a in arrays]
