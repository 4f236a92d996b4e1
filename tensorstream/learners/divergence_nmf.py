"""The OL algorithm (Zhao, Tan & Xu) on a CP dictionary, and OnlineDivergenceNMF.

The paper's OL algorithm (Zhao, Tan & Xu, Algorithm 1) on the CP dictionary of
:mod:`tensorstream.core.dictionary`. Per mini-batch ``V_t`` (samples on the first axis):

1. codes ``h_j = argmin_{eps' <= h <= U} d(v_j || W h)`` by batched projected gradient
   (:func:`tensorstream.coders.divergence.code_divergence`, Algorithm 2; ``forward`` is
   :func:`~tensorstream.core.dictionary.reconstruct`, ``adjoint`` is
   :func:`~tensorstream.core.dictionary.project`);
2. one projected stochastic-gradient step on every loading,
   ``U^(k) <- Pi_C(U^(k) - eta_t grad_k)`` with ``eta_t = a / (tau t + b)``, where ``grad_k`` is
   the gradient of the batch's mean (or summed) divergence in ``U^(k)``. With ``G`` the
   model-space gradient ``d'(v_j || y_j)`` it is the MTTKRP of ``sum_j G_j o h_j`` with the other
   loadings; for a matrix (one mode) it is ``G^T H``.

No statistics are kept: only the loadings and the data scale.

:class:`DivergenceCP` is this algorithm as a configuration of the engine, once, for every
learner that runs it: :class:`OnlineDivergenceNMF`, on matrix or tensor samples (the paper's
settings in ``paper_params``). The step size counts the samples seen (``step_tau=None``), so
that a stream of batches of any size steps as ``fit`` does.

Deviation for tensors: the step of loading ``k`` is divided by the number of entries one of its
rows touches, ``prod_{l != k} I_l`` (1 for a matrix, so the matrix case is the paper's step);
without it the canonical step overshoots by that factor and rows collapse onto the row-sum floor.

Deviation from the paper (its canonical steps need unit-scale data): with ``normalize=True``
(default) the data are divided
by a scale fixed at the first batch (the mean absolute entry), so that the canonical steps
``a = b = 2e4`` work at any data scale. Codes are reported, and losses evaluated, at the raw scale
(``h_raw = scale * h``); the dictionary and its steps live on the normalized scale. Loss parameters
that have units (the Huber threshold) are in normalized units. ``normalize=False`` is the
paper-literal behaviour.

Sparse data (``sparse.COO``, scipy.sparse) with one data mode, on the NumPy backend: under KL the
codes, losses and dictionary gradient evaluate the model only on the nonzeros
(:class:`tensorstream.coders.divergence.SparseKL`), so memory and time scale with the number of
nonzeros. Every other loss, and tensor samples, densify each batch (one batch at a time).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorly as tl

from ..algorithms.divergence_cp import DivergenceCP, DivergenceOptions
from ..coders.divergence import CODE_LOWER, CODE_UPPER
from ..core.backend import using
from ..core.validation import (
    BOOLEAN,
    NONE,
    SEQUENCE,
    Instance,
    Interval,
    Options,
    check_batch,
    json_mapping,
)
from ..losses import Divergence, beta_of, get_loss
from ._base import OnlineLearner
from ._params import SHARED_CONSTRAINTS


def divergence_way_out(loss: Divergence) -> str:
    """The way out for signed data under a divergence defined on nonnegative data only."""
    return (f"the {loss.name!r} loss is defined for nonnegative data only: use a loss for "
            f"signed data (loss='l2', 'l1' or 'huber'; tensorstream fit: --loss l2)")

__all__ = ["DivergenceCP", "OnlineDivergenceNMF"]


#: The parameters of the divergence (OL) algorithm and what they may be.
DIVERGENCE_CONSTRAINTS = {
    "loss": [Instance("a loss name", str), Interval("real"),
             Instance("a Divergence", Divergence)],
    "loss_params": [Instance("a dict", dict), Instance("a JSON string", str), NONE],
    "step_a": [Interval("real", 0, None, closed="neither"), NONE],
    "step_b": [Interval("real", 0, None)],
    "step_tau": [Interval("real", 0, None), NONE],
    "grad_reduction": [Options("mean", "sum")],
    "dict_step": [Options("auto", "sgd", "mu")],
    "code_step": [Options("auto", "paper", "constant", "armijo", "polyak", "mu"),
                  Instance("a step rule", check=lambda rule: hasattr(rule, "_step"))],
    "code_lower": [Interval("real", 0, None)],
    "code_upper": [Interval("real", 0, None, closed="neither")],
    "dict_upper": [Interval("real", 0, None, closed="neither")],
    "dict_row_min": [Interval("real", 0, None)],
    "ridge": [Interval("real", 0, None)],
    "normalize": [BOOLEAN],
    "init": [Options("random"), SEQUENCE],
    "transform_tol": [Interval("real", 0, None)],
    "transform_max_iter": [Interval("int", 1, None)],
    "dict_rounds": [Options("auto"), Interval("int", 1, None)],
}


def check_divergence_rules(learner: Any) -> None:
    """The OL algorithm's rules between parameters (after the declared constraints)."""
    algorithm = learner._algorithm()  # an unknown loss, or bad loss_params, raise here
    if not algorithm.step_size(1) < float("inf"):
        raise ValueError("step_tau + step_b must be > 0")
    if learner.dict_row_min > learner.dict_upper:
        raise ValueError("dict_row_min must be <= dict_upper")
    rounds = learner.dict_rounds
    step = algorithm.dict_step()
    if step == "mu" and beta_of(algorithm.loss) is None:
        raise ValueError(f"dict_step='mu' is the multiplicative update of a beta-divergence; "
                         f"loss={learner.loss!r} is the {algorithm.loss.name} divergence: use "
                         f"dict_step='sgd' or 'auto'")
    if rounds != "auto" and rounds > 1 and step != "mu":
        raise ValueError(f"dict_rounds={rounds!r} needs the multiplicative dictionary step "
                         f"(dict_step='mu', the beta-divergences' default); the SGD step "
                         f"makes one round")
    if learner.grad_reduction != "mean" and step == "mu":  # it was ignored there (issue 33)
        raise ValueError(f"grad_reduction={learner.grad_reduction!r} applies to the SGD "
                         f"dictionary step (dict_step='sgd'); the multiplicative step "
                         f"(dict_step='mu', the beta-divergences' default) is the same for both")
    if not learner.code_lower < learner.code_upper:  # else the coding step fails mid-step
        raise ValueError(f"code_lower must be < code_upper, got {learner.code_lower!r} and "
                         f"{learner.code_upper!r}")


def transform_algorithm(learner: Any) -> DivergenceCP:
    """The OL algorithm with the coding step of ``transform`` and ``score``: the learner's
    ``transform_tol`` and ``transform_max_iter`` instead of the training step's ``code_tol``
    and ``code_max_iter`` (there the codes are the result, not one stochastic step's input)."""
    algorithm = learner._algorithm()
    options = dataclasses.replace(algorithm.options, code_tol=learner.transform_tol,
                                  code_max_iter=learner.transform_max_iter)
    return DivergenceCP(options, algorithm.loss)


def divergence_of(loss: str | float | Divergence, loss_params: Any) -> Divergence:
    """The divergence a learner's ``loss`` and ``loss_params`` name (``loss_params`` may be the
    JSON text older checkpoints stored)."""
    return get_loss(loss, **(json_mapping(loss_params, "loss_params") or {}))


class OnlineDivergenceNMF(OnlineLearner):
    """Online NMF (and nonnegative CP) under a general divergence ``d(v || W h)``.

    With samples of shape ``(n_features,)`` this is the online NMF of Zhao, Tan & Xu with
    divergences (KL, Itakura-Saito, beta, alpha, Huber, l1, ...); with samples of shape
    ``(I_1, ..., I_n)`` the dictionary is a CP dictionary, e.g. online KL (Poisson) CP of count
    tensors. Codes are solved per batch by projected gradient, the loadings take one projected
    stochastic-gradient step per batch (module docstring;
    :class:`~tensorstream.algorithms.divergence_cp.DivergenceCP`). The paper's settings are in
    ``paper_params``; it runs for every loss, the squared one included (whose surrogate
    algorithm, without a step size, is :class:`~tensorstream.learners.ocpdl.OnlineCPDL`'s).

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
    step_a : float or None, default None
        Dictionary step ``eta_t = step_a / (step_tau * t + step_b)``. ``None``: ``step_b`` for
        ``dict_step="sgd"`` (the paper's canonical ``a = b``); for ``dict_step="mu"``
        ``step_b * min(1, n / 100)`` for a batch of ``n`` samples, so that ``eta_t`` depends on
        the number of samples seen and not on how they are batched (:data:`MU_REFERENCE_BATCH`).
        Scale-free: the MU step is invariant to the data's scale, the SGD step sees normalized
        data.
    step_b : float, default 2e4
        The ``b`` of the step (in samples when ``step_tau`` is None).
    step_tau : float, optional
        The ``tau`` of the step. None (default): ``step_tau * t`` is the number of samples seen
        with the batch, whatever the batches' sizes (``partial_fit`` on batches of 10 steps as
        ``fit`` with ``batch_size=10`` does, whatever ``batch_size`` is); a number fixes it
        (``step_tau`` in place of ``n`` above too).
    grad_reduction : {"mean", "sum"}, default "mean"
        Mean or sum over the batch of the per-sample dictionary gradients of the SGD step (the
        paper, VIII-B, does not say which); the MU step is the same for both, so ``"sum"``
        with ``dict_step="mu"`` is refused.
    dict_step : {"auto", "sgd", "mu"}, default "auto"
        ``"sgd"``: the paper's projected stochastic-gradient step. ``"mu"`` (our extension,
        β-divergences only): the same step preconditioned entrywise by the multiplicative
        update's scaling, ``U <- Pi_C(U - eta_t U / D * grad)`` with ``D`` the gradient's
        positive part ``sum_j y_j^(β-1) o h_j`` contracted with the other loadings (for KL
        ``sum_j h_j`` times the other loadings' column sums), so that ``eta_t = 1`` is one
        multiplicative update of the loss on the batch. Every entry moves in proportion to its
        size, whatever the data's scale: much better on sparse counts, where the paper's single
        step either wipes out the small entries or barely moves, and on spectra-like data under
        IS, where the gradient ``(y - x) / y^2`` spans orders of magnitude (held-out IS on the
        digits + 1: 0.163 per entry with ``"sgd"``, 0.060 with ``"mu"``; docs/losses.md).
        ``"auto"``: ``"mu"`` for the β-divergences but β = 2 (KL, IS, any other β), ``"sgd"``
        for squared ℓ2 and the other losses, which refuse ``"mu"``.
    dict_rounds : int or "auto", default "auto"
        Alternating rounds per batch of the ``"mu"`` step (our extension): the batch's own
        dictionary takes ``dict_rounds`` multiplicative updates from the learner's, the batch's
        codes one between two of them, and the learner's dictionary moves towards the result,
        ``W <- Pi_C((1 - eta_t) W + eta_t W_batch)``; 1 is the single step above. A round costs
        7-16% of the step's coding. ``"auto"`` (:func:`auto_rounds`): 4 rounds per
        nonzero of the batch per dictionary entry, between 1 and 20 (so 1 on sparse batches,
        which more rounds overfit, up to 20 on dense ones, where each round helped: 8 x 8
        image patches in batches of 100, 16 components, held-out KL 39.1 -> 21.3 after 5
        passes, 22.1 in the time one round takes for them; docs/losses.md); 1 for a tensor
        dictionary (no gain measured). The SGD step makes one round.
    code_step : {"auto", "paper", "constant", "armijo", "polyak", "mu"}, default "auto"
        Step rule of the coding step (see :func:`~tensorstream.coders.divergence.code_divergence`;
        ``"auto"`` is the multiplicative update for the β-divergences, KL and IS included, and
        the paper's rule otherwise).
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
    batch_size : int, default 100
        Samples per mini-batch in ``fit`` (the paper's ``tau``, 10 in ``paper_params``). At
        equal CPU time batches of 100 gave the lowest held-out KL (or within 1% of it) on
        image patches, digits and faces as counts, dense Poisson data and sparse topic corpora,
        and found more topics than batches of 10 (held-out KL after 5 s on 8 x 8 patches: 30.4
        with 10, 20.1 with 100, 21.3 with 500; topic purity 0.78-0.79 with 10, 0.86-1.00 with
        100; docs/losses.md): a batch of 10 costs nearly as much Python as one of 100, and
        gives the dictionary step (and its rounds) little to go on.
    max_iter : int or "auto", default "auto"
        Passes over an array given to ``fit``; ``"auto"``: 10, or more on a small array so
        that ``fit`` takes at least 200 mini-batches (at most 200 passes; see
        :func:`~tensorstream.learners._fitting.fit_passes`). The paper's single pass is in
        ``paper_params``: on 1,400 digits as pixel counts (16 components, one thread), one pass
        ends at a held-out KL of 35.5 per sample (46.3 in batches of 10), the default 15 passes
        at 31.4 in 0.7 s (10 passes of batches of 10: 33.1 in 1.1 s), MiniBatchNMF(KL)'s 200
        at 35.4 in 0.24 s.
    init : "random" or list of arrays, default "random"
        Initial loadings: i.i.d. U(0, 1) entries (already in C), or given ``(I_k, R)`` arrays.
    code_max_iter : int, default 100
        Iterations of the coding step.
    code_tol : float, default 1e-4
        Relative tolerance of the coding step in training (``partial_fit``, ``fit``). For KL's
        multiplicative update the codes then stop moving by more than 1% per iteration, which
        is plenty for one stochastic dictionary step but leaves the codes only roughly solved.
    transform_tol : float, default 1e-8
        The coding step's tolerance in ``transform`` and ``score``, where the codes are the
        result: with KL on dense Poisson data, ``code_tol=1e-4`` leaves the codes about 27%
        (median) from the exact ones and ``1e-8`` about 0.7%, at ~10 times the iterations
        (docs/losses.md).
    transform_max_iter : int, default 1000
        Iterations of the coding step in ``transform`` and ``score``.
    random_state, backend, verbose, callback, reinit_dead_atoms, device, n_threads
        As in :class:`~tensorstream.learners.ocpdl.OnlineCPDL`, with the same defaults.

    Attributes
    ----------
    loadings_ : list of tensors of shape (I_k, n_components)
    components_ : tensor of shape (n_components, n_features)
        Matrix case only.
    scale_ : float
        The data scale (1.0 when ``normalize=False``).
    n_steps_, n_samples_seen_ : int

    Notes
    -----
    The defaults depart from the paper where that works better (measured in docs/losses.md):
    for the β-divergences (KL, IS, any β), multiplicative updates for the codes and the
    MU-preconditioned dictionary step with a batch-size-free step. The paper's settings are
    one argument away: ``OnlineDivergenceNMF(R, **OnlineDivergenceNMF.paper_params)``.

    Missing-data masks are not supported. ``score`` is minus the mean divergence at refitted
    codes, at the raw data scale. Checkpoints need ``loss`` as a string or number and
    ``code_step`` as a string.

    Sparse input (``sparse.COO``, scipy.sparse matrices) is accepted by ``partial_fit``, ``fit``,
    ``transform`` and ``score`` on the NumPy backend (the pytorch backend refuses it with a
    ``TypeError``). Under KL with one data mode the model is evaluated on the nonzeros only:
    memory and time scale with the number of nonzeros, and no dense ``(b, n_features)`` array
    is formed. Other losses, and tensor samples, densify each batch.

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

    paper_params = {"step_a": 2e4, "step_b": 2e4, "step_tau": None, "dict_step": "sgd",
                    "code_step": "paper", "batch_size": 10, "max_iter": 1}
    """The paper's canonical settings (Zhao, Tan & Xu: projected SGD with ``a = b = 2e4``,
    ``tau = 10``, its per-loss coding rules): ``OnlineDivergenceNMF(R, **paper_params)``."""

    def __init__(self, n_components: int, *, loss: str | float | Divergence = "kl",
                 loss_params: dict | None = None, step_a: float | None = None,
                 step_b: float = 2e4,
                 step_tau: float | None = None, grad_reduction: str = "mean",
                 dict_step: str = "auto", code_step: Any = "auto",
                 code_lower: float = CODE_LOWER,
                 code_upper: float = CODE_UPPER, dict_upper: float = 1.0,
                 dict_row_min: float = 1e-8, ridge: float = 0.0, normalize: bool = True,
                 batch_size: int = 100, max_iter: int | str = "auto", init="random",
                 code_max_iter: int = 100, code_tol: float = 1e-4,
                 transform_tol: float = 1e-8, transform_max_iter: int = 1000,
                 dict_rounds: int | str = "auto", random_state=None,
                 backend: str | None = None, device: Any = None, verbose: bool = False,
                 callback=None,
                 reinit_dead_atoms: bool = True, n_threads: int | None = 1):
        super().__init__(n_components, batch_size=batch_size, max_iter=max_iter, init=init,
                         code_max_iter=code_max_iter, code_tol=code_tol, random_state=random_state,
                         backend=backend, device=device, verbose=verbose, callback=callback,
                         reinit_dead_atoms=reinit_dead_atoms, n_threads=n_threads)
        self.loss = loss
        self.loss_params = loss_params
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
        self.ridge = ridge
        self.normalize = normalize
        self.transform_tol = transform_tol
        self.transform_max_iter = transform_max_iter
        self.dict_rounds = dict_rounds

    # -- configuration -------------------------------------------------------------------------

    @property
    def loss_(self) -> Divergence:
        """The divergence object (from ``loss`` and ``loss_params``)."""
        return divergence_of(self.loss, self.loss_params)

    def _algorithm(self) -> DivergenceCP:
        """The algorithm's options from the parameters: the one place they pass from the
        estimator to :class:`~tensorstream.algorithms.divergence_cp.DivergenceCP`."""
        return DivergenceCP(DivergenceOptions(
            n_components=self.n_components, init=self.init,
            batch_size=self._batch_size(),
            step_a=self.step_a, step_b=self.step_b, step_tau=self.step_tau,
            grad_reduction=self.grad_reduction, dict_step=self.dict_step,
            dict_rounds=self.dict_rounds, code_step=self.code_step,
            code_lower=self.code_lower, code_upper=self.code_upper,
            dict_upper=self.dict_upper, dict_row_min=self.dict_row_min,
            ridge=self.ridge, normalize=self.normalize,
            code_max_iter=self.code_max_iter, code_tol=self.code_tol), self.loss_)

    _parameter_constraints = {**SHARED_CONSTRAINTS, **DIVERGENCE_CONSTRAINTS}

    def _check_rules(self) -> None:
        check_divergence_rules(self)

    def _nonnegative_data(self) -> bool:
        return bool(self.loss_.needs_nonnegative_data)

    def _negative_way_out(self) -> str:
        return divergence_way_out(self.loss_)

    def _keeps_sparse(self, X: Any, backend: str) -> bool:
        return DivergenceCP.keeps_sparse(self.loss_, X, backend)

    # -- results -------------------------------------------------------------------------------

    @property
    def scale_(self) -> float:
        """The data scale of the normalization."""
        return float(self._fitted_state().scale)

    def _coding_algorithm(self) -> DivergenceCP:
        """``transform`` and ``score`` code to ``transform_tol``."""
        return transform_algorithm(self)

    def transform(self, X: Any, mask: Any = None, *, init: Any = None) -> Any:
        """Codes of ``X`` (raw scale), shape ``(n, R)``, solved to ``transform_tol``.

        Parameters
        ----------
        init : array of shape (n_samples, n_components), optional
            Raw-scale codes that warm-start the coding step (plain arrays only, no ``mask``).
        """
        if init is None:
            return super().transform(X, mask)
        self._check_fitted()
        self._check_params()
        self._check_feature_names(X)  # as transform without init: columns matched by name
        if mask is not None:
            raise ValueError(f"{type(self).__name__} does not support missing entries (mask)")
        X = self._validate(X)
        init = check_batch(init, backend=self.backend_, context=self._context,
                           sample_shape=(self.n_components_,), name="init")
        if init.shape[0] != X.shape[0]:
            raise ValueError(f"init must have {X.shape[0]} rows, got {init.shape[0]}")
        with using(self.backend_):
            return transform_algorithm(self).encode(X, self.loadings_, self.scale_,
                                                    init=init).codes

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
