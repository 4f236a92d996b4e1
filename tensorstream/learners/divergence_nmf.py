"""OnlineDivergenceNMF: online NMF / nonnegative CP under general divergences (Zhao, Tan & Xu).

The paper's OL algorithm (spec ``001_onmf_divergences.md``, Algorithm 1) on the CP dictionary of
:mod:`tensorstream.cp_dictionary`. Per mini-batch ``V_t`` (samples on the first axis):

1. codes ``h_j = argmin_{eps' <= h <= U} d(v_j || W h)`` by batched projected gradient
   (:func:`tensorstream.divergence_coding.code_divergence`, Algorithm 2; ``forward`` is
   :func:`~tensorstream.cp_dictionary.reconstruct`, ``adjoint`` is
   :func:`~tensorstream.cp_dictionary.project`);
2. one projected stochastic-gradient step on every loading,
   ``U^(k) <- Pi_C(U^(k) - eta_t grad_k)`` with ``eta_t = a / (tau t + b)``, where ``grad_k`` is
   the gradient of the batch's mean (or summed) divergence in ``U^(k)``. With ``G`` the
   model-space gradient ``d'(v_j || y_j)`` it is the MTTKRP of ``sum_j G_j o h_j`` with the other
   loadings; for a matrix (one mode) it is ``G^T H``.

No statistics are kept: only the loadings and the data scale.

Deviation for tensors: the step of loading ``k`` is divided by the number of entries one of its
rows touches, ``prod_{l != k} I_l`` (1 for a matrix, so the matrix case is the paper's step);
without it the canonical step overshoots by that factor and rows collapse onto the row-sum floor.

Deviation from the paper (spec section 6.1): with ``normalize=True`` (default) the data are divided
by a scale fixed at the first batch (the mean absolute entry), so that the canonical steps
``a = b = 2e4`` work at any data scale. Codes are reported, and losses evaluated, at the raw scale
(``h_raw = scale * h``); the dictionary and its steps live on the normalized scale. Loss parameters
that have units (the Huber threshold) are in normalized units. ``normalize=False`` is the
paper-literal behaviour.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import tensorly as tl

from .._backend import using
from .._validation import (
    check_batch,
    check_n_components,
    check_nonnegative_number,
    check_positive_int,
)
from ..constraints import project_simplex_columns
from ..cp_dictionary import contract_except, gram, outer_statistic, project, reconstruct
from ..divergence_coding import CODE_LOWER, CODE_UPPER, code_divergence
from ..losses import Divergence, get_loss
from .ocpdl import Encoding, OnlineCPDL

__all__ = ["OnlineDivergenceNMF", "project_rows_box_sum"]


def project_rows_box_sum(U: Any, upper: float = 1.0, row_min: float = 1e-8) -> Any:
    """Project every row of ``U`` onto ``{0 <= w <= upper, sum(w) >= row_min}`` (the paper's C).

    Clip to ``[0, upper]``; rows whose clipped sum is below ``row_min`` are instead projected
    (from the unclipped row) onto the scaled simplex ``{w >= 0, sum(w) = row_min}`` (spec 2.6).

    Parameters
    ----------
    U : tensor of shape (I, R)
    upper : float, default 1.0
    row_min : float, default 1e-8
        Must be ``<= upper``.

    Returns
    -------
    tensor of shape (I, R)

    Examples
    --------
    >>> import numpy as np
    >>> project_rows_box_sum(np.array([[2.0, -1.0], [-1.0, -2.0]]), row_min=0.5)
    array([[1. , 0. ],
           [0.5, 0. ]])
    """
    clipped = tl.clip(U, 0.0, upper)
    if row_min is None or row_min <= 0:
        return clipped
    small = tl.sum(clipped, axis=1) < row_min
    if not bool(tl.any(small)):
        return clipped
    simplex = tl.transpose(project_simplex_columns(tl.transpose(U), total=row_min))
    return tl.where(tl.reshape(small, (-1, 1)), simplex, clipped)


class OnlineDivergenceNMF(OnlineCPDL):
    """Online NMF (and nonnegative CP) under a general divergence ``d(v || W h)``.

    With samples of shape ``(n_features,)`` this is the online NMF of Zhao, Tan & Xu with
    divergences (KL, Itakura-Saito, beta, alpha, Huber, l1, ...); with samples of shape
    ``(I_1, ..., I_n)`` the dictionary is a CP dictionary, e.g. online KL (Poisson) CP of count
    tensors. Codes are solved per batch by projected gradient, the loadings take one projected
    stochastic-gradient step per batch (module docstring).

    Parameters
    ----------
    n_components : int
        Number of atoms ``R``.
    loss : str, float or Divergence, default "kl"
        Anything :func:`tensorstream.losses.get_loss` accepts (a float is the beta of a
        beta-divergence).
    loss_params : dict or JSON string, optional
        Keyword arguments of ``get_loss`` (``threshold`` for Huber, ``beta``, ``alpha``, ...).
        A checkpoint stores (and restores) them as a JSON string.
    step_a, step_b : float, default 2e4
        Dictionary step ``eta_t = step_a / (step_tau * t + step_b)`` (the paper's canonical a, b).
    step_tau : float, optional
        The ``tau`` of the step; default ``batch_size``.
    grad_reduction : {"mean", "sum"}, default "mean"
        Mean or sum over the batch of the per-sample dictionary gradients (spec 2.5).
    code_step : {"auto", "constant", "armijo", "polyak"}, default "auto"
        Step rule of the coding step (see :func:`~tensorstream.divergence_coding.code_divergence`).
    code_lower, code_upper : float, default 1e-8 and 1e8
        The code box ``[eps', U]`` (normalized scale).
    dict_upper : float, default 1.0
        Upper bound of every loading entry.
    dict_row_min : float, default 1e-8
        Lower bound of every loading row's sum (the paper's ``eps``).
    ridge : float, default 0.0
        Optional ``ridge/2 ||h||^2`` in the code problems (normalized scale).
    normalize : bool, default True
        Divide the data by the first batch's mean absolute entry (kept in ``scale_``).
    batch_size : int, default 10
        Samples per mini-batch in ``fit`` (the paper's ``tau``).
    max_iter : int, default 1
        Passes over an array given to ``fit``.
    init : "random" or list of arrays, default "random"
        Initial loadings: i.i.d. U(0, 1) entries (already in C), or given ``(I_k, R)`` arrays.
    code_max_iter : int, default 100
        Iterations of the coding step.
    code_tol : float, default 1e-4
        Relative tolerance of the coding step.
    random_state, backend, verbose, callback
        As in :class:`~tensorstream.learners.ocpdl.OnlineCPDL`.

    Attributes
    ----------
    loadings_ : list of tensors of shape (I_k, n_components)
    components_ : tensor of shape (n_components, n_features)
        Matrix case only.
    scale_ : float
        The data scale (1.0 when ``normalize=False``); stored as ``statistics_["c"]``.
    n_steps_, n_samples_seen_ : int

    Notes
    -----
    Missing-data masks are not supported. ``score`` is minus the mean divergence at refitted
    codes, at the raw data scale. Checkpoints need ``loss`` as a string or number and
    ``code_step`` as a string. Sparse input (``sparse.COO``, scipy.sparse) is densified at the
    boundary; the model is evaluated densely.

    Examples
    --------
    >>> import numpy as np
    >>> from tensorstream.learners.divergence_nmf import OnlineDivergenceNMF
    >>> rng = np.random.default_rng(0)
    >>> X = rng.poisson(5.0, size=(40, 8)).astype(float)
    >>> model = OnlineDivergenceNMF(2, loss="kl", batch_size=10, random_state=0).fit(X)
    >>> model.components_.shape
    (2, 8)
    >>> bool((model.transform(X[:3]) > 0).all())
    True
    """

    missing = None
    alpha = 0.0

    def __init__(self, n_components: int, *, loss: str | float | Divergence = "kl",
                 loss_params: dict | None = None, step_a: float = 2e4, step_b: float = 2e4,
                 step_tau: float | None = None, grad_reduction: str = "mean",
                 code_step: Any = "auto", code_lower: float = CODE_LOWER,
                 code_upper: float = CODE_UPPER, dict_upper: float = 1.0,
                 dict_row_min: float = 1e-8, ridge: float = 0.0, normalize: bool = True,
                 batch_size: int = 10, max_iter: int = 1, init="random",
                 code_max_iter: int = 100, code_tol: float = 1e-4, random_state=None,
                 backend: str | None = None, verbose: bool = False, callback=None):
        self.n_components = n_components
        self.loss = loss
        self.loss_params = loss_params
        self.step_a = step_a
        self.step_b = step_b
        self.step_tau = step_tau
        self.grad_reduction = grad_reduction
        self.code_step = code_step
        self.code_lower = code_lower
        self.code_upper = code_upper
        self.dict_upper = dict_upper
        self.dict_row_min = dict_row_min
        self.ridge = ridge
        self.normalize = normalize
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.init = init
        self.code_max_iter = code_max_iter
        self.code_tol = code_tol
        self.random_state = random_state
        self.backend = backend
        self.verbose = verbose
        self.callback = callback

    # -- parameters ----------------------------------------------------------------------------

    @property
    def loss_(self) -> Divergence:
        """The divergence object (from ``loss`` and ``loss_params``)."""
        params = self.loss_params
        if isinstance(params, str):  # as restored from a checkpoint
            params = json.loads(params)
        return get_loss(self.loss, **(params or {}))

    def save(self, path: Any) -> Any:
        """Checkpoint (see :func:`tensorstream.io.save_checkpoint`); ``loss_params`` is stored as
        a JSON string, which the loaded learner accepts in its place."""
        params = self.loss_params
        if isinstance(params, dict):
            self.loss_params = json.dumps(params)
        try:
            return super().save(path)
        finally:
            self.loss_params = params

    @property
    def nonnegative(self) -> bool:  # data check at the boundary, from the loss
        return bool(self.loss_.needs_nonnegative_data)

    @property
    def scale_(self) -> float:
        self._check_fitted()
        return float(self.statistics_["c"])

    def _check_params(self) -> None:
        check_n_components(self.n_components)
        self.loss_  # noqa: B018  (raises for an unknown loss)
        for name in ("step_a", "step_b"):
            if check_nonnegative_number(getattr(self, name), name) == 0 and name == "step_a":
                raise ValueError("step_a must be > 0")
        if self.step_tau is not None:
            check_nonnegative_number(self.step_tau, "step_tau")
        check_positive_int(self.batch_size, "batch_size")
        if not self._step_size(1) < float("inf"):
            raise ValueError("step_tau + step_b must be > 0")
        if self.grad_reduction not in ("mean", "sum"):
            raise ValueError(f"grad_reduction must be 'mean' or 'sum', "
                             f"got {self.grad_reduction!r}")
        if check_nonnegative_number(self.dict_upper, "dict_upper") == 0:
            raise ValueError("dict_upper must be > 0")
        if check_nonnegative_number(self.dict_row_min, "dict_row_min") > self.dict_upper:
            raise ValueError("dict_row_min must be <= dict_upper")
        check_nonnegative_number(self.ridge, "ridge")
        check_positive_int(self.code_max_iter, "code_max_iter")
        check_nonnegative_number(self.code_tol, "code_tol")
        if self.backend not in (None, "numpy", "pytorch"):
            raise ValueError(f"backend must be 'numpy', 'pytorch' or None, got {self.backend!r}")

    # -- state ---------------------------------------------------------------------------------

    def _project_loading(self, U: Any) -> Any:
        return project_rows_box_sum(U, float(self.dict_upper), float(self.dict_row_min))

    def _initial_loadings(self, sample_shape: tuple, R: int, backend: str,
                          context: dict) -> list:
        if isinstance(self.init, str):
            if self.init != "random":
                raise ValueError(f"init must be 'random' or a list of arrays, got {self.init!r}")
            arrays = [self._rng.random((size, R)) for size in sample_shape]
        else:
            arrays = list(self.init)
            if len(arrays) != len(sample_shape):
                raise ValueError(f"init must be 'random' or a list of {len(sample_shape)} arrays "
                                 f"of shapes {[(s, R) for s in sample_shape]}")
        loadings = []
        for k, (U, size) in enumerate(zip(arrays, sample_shape)):
            U = check_batch(U, backend=backend, name=f"init[{k}]")
            if tuple(U.shape) != (size, R):
                raise ValueError(f"init[{k}] must have shape {(size, R)}, got {tuple(U.shape)}")
            loadings.append(self._project_loading(tl.tensor(U, **context)))
        return loadings

    def _data_scale(self, X: Any) -> float:
        if not self.normalize:
            return 1.0
        scale = float(tl.mean(tl.abs(X)))
        return scale if scale > 0 and np.isfinite(scale) else 1.0

    # -- the hooks -----------------------------------------------------------------------------

    def _step(self, X: Any, state: dict, mask: Any = None) -> dict:
        """One step of the OL algorithm on the validated batch; returns the new state (pure)."""
        if mask is not None:
            raise ValueError(f"{type(self).__name__} does not support missing entries (mask)")
        t = state["n_steps_"] + 1
        stats = state["statistics_"]
        scale = self._data_scale(X) if t == 1 else float(stats["c"])
        loadings = state["loadings_"]
        coded = self._encode(X, loadings, scale=scale)
        new_loadings = self._dictionary_step(X, coded, {**stats, "c": scale}, loadings, t, None)
        if not all(bool(tl.all(tl.abs(U) < float("inf"))) for U in new_loadings):
            raise FloatingPointError("the dictionary update produced non-finite loadings; "
                                     "the learner's state was left unchanged")
        self._last_info = {"step": t, "step_size": self._step_size(t),
                           "batch_loss": float(tl.mean(coded.losses)), "n_samples": X.shape[0]}
        return {"loadings_": new_loadings, "statistics_": {**stats, "c": scale},
                "n_steps_": t, "n_samples_seen_": state["n_samples_seen_"] + X.shape[0]}

    def _encode(self, X: Any, loadings: list, mask: Any = None, *, scale: float | None = None,
                init: Any = None) -> Encoding:
        """Codes of a batch (raw scale) by projected gradient on ``d(v/scale || W h)`` (pure).

        ``init`` warm-starts the codes (raw scale). ``losses`` are the per-sample divergences
        at the raw scale.
        """
        if mask is not None:
            raise ValueError(f"{type(self).__name__} does not support missing entries (mask)")
        if scale is None:
            scale = float(self.statistics_["c"])
        loss = self.loss_
        Xn = X / scale
        H, _ = code_divergence(
            Xn, lambda C: reconstruct(loadings, C), lambda G: project(G, loadings), loss,
            init=None if init is None else init / scale, gram=gram(loadings),
            step=self.code_step, lower=self.code_lower, upper=self.code_upper,
            ridge=float(self.ridge), max_iter=int(self.code_max_iter), tol=float(self.code_tol))
        codes = H * scale
        losses = loss.per_sample(X, reconstruct(loadings, codes))
        return Encoding(codes=codes, explained=X, losses=losses,
                        constant=float(tl.mean(losses)))

    def _step_size(self, t: int) -> float:
        tau = self.batch_size if self.step_tau is None else self.step_tau
        denominator = float(tau) * t + float(self.step_b)
        return float(self.step_a) / denominator if denominator > 0 else float("inf")

    def _dictionary_step(self, X: Any, coded: Encoding, statistics: dict, loadings: list,
                         t: int, radius: float | None) -> list:
        """One projected stochastic-gradient step on every loading (pure; Jacobi, all modes
        from the same point)."""
        scale = float(statistics["c"])
        loss = self.loss_
        Xn = loss.prepare_data(X / scale)
        Hn = coded.codes / scale
        G = loss.gradient(Xn, reconstruct(loadings, Hn), check=False)
        B = outer_statistic(G, Hn)  # sum_j G_j o h_j, shape (I_1..I_n, R)
        if self.grad_reduction == "mean":
            B = B / X.shape[0]
        eta = self._step_size(t)
        size = int(np.prod([tl.shape(U)[0] for U in loadings]))
        # mode k's step is divided by the fiber size prod_{l != k} I_l (1 for a matrix)
        return [self._project_loading(
                    U - (eta * tl.shape(U)[0] / size) * contract_except(B, loadings, k))
                for k, U in enumerate(loadings)]

    # -- using the dictionary ------------------------------------------------------------------

    def transform(self, X: Any, mask: Any = None, *, init: Any = None) -> Any:
        """Codes of ``X`` (raw scale), shape ``(n, R)``; ``init`` (raw-scale codes) warm-starts
        the coding step (plain arrays only)."""
        if init is None:
            return super().transform(X, mask)
        self._check_fitted()
        if mask is not None:
            raise ValueError(f"{type(self).__name__} does not support missing entries (mask)")
        X = self._validate(X)
        init = check_batch(init, backend=self.backend_, context=self._context,
                           sample_shape=(self.n_components_,), name="init")
        if init.shape[0] != X.shape[0]:
            raise ValueError(f"init must have {X.shape[0]} rows, got {init.shape[0]}")
        with using(self.backend_):
            return self._encode(X, self.loadings_, init=init).codes

    @property
    def n_components_(self) -> int:
        self._check_fitted()
        return int(tl.shape(self.loadings_[0])[1])

    def surrogate_value(self) -> float:
        """Not defined: this learner keeps no surrogate statistics."""
        raise NotImplementedError(f"{type(self).__name__} keeps no surrogate; use score(X)")

    def score(self, X: Any, y: Any = None, sample_weight: Any = None, mask: Any = None) -> float:
        """Minus the (weighted) mean divergence ``d(x || W h)`` at refitted codes (raw scale)."""
        return super().score(X, y, sample_weight=sample_weight, mask=mask)

    @property
    def components_(self) -> Any:
        """The dictionary ``(n_components, n_features)`` (matrix case only)."""
        self._check_fitted()
        if len(self.loadings_) != 1:
            raise AttributeError("components_ exists only for matrix data; use loadings_")
        return tl.transpose(self.loadings_[0])
