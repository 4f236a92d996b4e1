"""Robust NMF with outliers (Zhao & Tan, "Online Nonnegative Matrix Factorization with
Outliers", IEEE TSP 2017): ONMFO online, and BPGD / BADMM in batch.

:class:`RobustOnlineNMF` is the paper's Algorithm 1 on the CP-dictionary engine (the online loop
and the statistics of :class:`OnlineCPDL`). Per batch the coding step solves, for every sample,

    (h, e) = argmin_{h >= 0, |e| <= outlier_bound}  1/2 ||x - W h - e||^2 + outlier_alpha ||e||_1

(the paper's eq. 9, which writes ``r`` for the outliers ``e``, ``lambda`` for ``outlier_alpha`` and
``M`` for ``outlier_bound``)

by OPGD or OADMM (:mod:`tensorstream.coders.robust`); the engine folds ``A = mean h h^T`` and
``B = mean (x - e) h^T`` into the statistics (its ``Codes.explained = X - E``); the dictionary
step minimises ``1/2 tr(W^T W A) - tr(W^T B)`` over ``C = {W >= 0, ||w_k|| <= 1}`` by PGD or
ADMM (:func:`tensorstream.steps.surrogate.surrogate_solver_step`), warm-started. Matrices are the
case of one data mode; tensor samples work the same way, ``W h`` being the CP reconstruction.

Missing data (``mask=`` or ``missing="nan"``, as for every squared-loss learner): the coding
step solves ``1/2 ||m * (x - W h - e)||^2 + outlier_alpha ||m * e||_1`` over the same sets,
``e`` being 0 on missing entries (it does not enter the objective there); ``A`` becomes entrywise
(``A_i = mean m[i] h h^T``, the engine's) and ``B = mean (m * (x - e)) h^T``; the W-step is the
same PGD or ADMM on the entrywise quadratic (row ``i`` of ``W`` has its own ``A_i``), so every
constraint set and dictionary penalty keeps working.

Scales: objectives, ``score`` and ``surrogate_value`` use the paper's 1/2 convention; the engine's
statistics keep its own (no 1/2), so ``statistics_["c"]`` is twice the paper's ``c_t``.
Weights: ``1/t`` with ``t`` counting batches (the engine's), which is the paper's sample-weighted
mean ``(n A + H H^T) / (n + b)`` whenever batches have equal sizes (a shorter last batch weighs
a little more).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorly as tl

from ..algorithms.robust_nmf import (
    CONSTRAINTS,
    OUTLIER_PARAMETERS,
    SOLVER_PARAMS,
    RobustNMFAlgorithm,
    RobustNMFOptions,
    check_constraint_weights,
    check_group_size,
    check_outlier_alpha_scale,
    check_outlier_part,
    solver_settings,
)
from ..coders.robust import RobustPenalties
from ..core.backend import using
from ..core.dictionary import reconstruct
from ..core.validation import ARRAY, BOOLEAN, CALLABLE, NONE, SEQUENCE, Instance, Interval, Options
from ..engine import Codes
from ..schedules import make_weights
from ..steps.surrogate import penalty_value, surrogate_value
from ._auto_batch import AutoBatch
from ._base import OnlineLearner
from ._dictionary import coding_chunks
from ._fitting import PassesRule
from ._output import replace_flagged
from ._params import SHARED_CONSTRAINTS

__all__ = ["RobustOnlineNMF"]

#: ``batch_size="auto"`` in ``fit`` over an array: a pass in this many batches (with
#: ``max_iter="auto"``, 5 passes there: 100 steps), each of at least the first and at most
#: the second limit (measured on the benchmark's patches and faces and on clean digits:
#: ``docs/robustness_history.md``, "Speed")
AUTO_BATCHES = 20
AUTO_BATCH_LIMITS = (20, 1024)

#: ``max_iter="auto"``: the passes over an array whose steps come nearest to ``AUTO_STEPS``,
#: at least one and at most ``AUTO_MAX_PASSES``. Arrays of up to 20,480 samples (20 batches
#: of ``"auto"`` size a pass) keep the 5 passes of earlier versions, 100 steps: K = 25 atoms
#: on clean digits need about 100 dictionary updates (25 steps of 120: 18.46 dB, 150 of 120:
#: 19.26). Larger arrays take batches of 1,024 and fewer passes: one pass from 68,000
#: samples on, where five cost as much CPU time as our batch PCP (docs/robustness.md,
#: "Where online learning pays").
AUTO_STEPS, AUTO_MAX_PASSES = 100, 5
PASSES_RULE = PassesRule(passes=1, steps=AUTO_STEPS, max_passes=AUTO_MAX_PASSES, nearest=True)

# -- parameter checks shared by the online and batch learners ------------------------------------


#: What the online and batch learners' outlier and solver parameters may be.
ROBUST_CONSTRAINTS = {
    "outlier_alpha": [Interval("real", 0, None, closed="neither"), Options("auto"),
            Instance("inf (no outliers)", check=lambda value: value == float("inf")), NONE],
    "data_scale": [Interval("real", 0, None, closed="neither"), Options("auto")],
    "outlier_alpha_scale": [Interval("real", 0, None, closed="neither")],
    "outlier_bound": [Interval("real", 0, None, closed="neither"),
          Instance("inf (unbounded outliers)", check=lambda value: value == float("inf")), NONE],
    "solver": [Options("pgd", "admm")],
    # its keys and their values: algorithms.robust_nmf.solver_settings, per solver
    "solver_params": [Instance("a dict", dict), NONE],
    "init": [Options("random"), ARRAY, SEQUENCE],
}


class RobustNMFParameters:
    """The parameters the online and the batch robust NMF share (the outliers' weight, scale
    and bound, the data's scale, the solver), kept by one ``__init__``: the learner's own
    passes them up with those of its base (``OnlineLearner`` or ``CheckedParameters``), which
    this one hands on."""

    def __init__(self, n_components: int, *, outlier_alpha: float | str | None,
                 outlier_alpha_scale: float, outlier_bound: float | None,
                 data_scale: float | str, solver: str, solver_params: dict | None,
                 **base_parameters: Any):
        super().__init__(n_components, **base_parameters)
        self.outlier_alpha = outlier_alpha
        self.outlier_alpha_scale = outlier_alpha_scale
        self.outlier_bound = outlier_bound
        self.data_scale = data_scale
        self.solver = solver
        self.solver_params = solver_params

    def _solver_settings(self) -> dict:
        """The solver's settings: ``solver_params`` over the learner's defaults
        (``_solver_params``), a key of the other solver refused naming the learner."""
        return solver_settings(self.solver, self.solver_params, self._solver_params,
                               type(self).__name__)

    def _check_outlier_rules(self) -> None:
        """The rules both robust NMF learners share: the solver's settings, and no
        ``outlier_alpha_scale`` set by hand with a given ``outlier_alpha``."""
        self._solver_settings()
        check_outlier_alpha_scale(self.outlier_alpha, self._set_by_hand("outlier_alpha_scale"))


class RobustOnlineNMF(RobustNMFParameters, AutoBatch, OnlineLearner):
    """Online NMF with outliers (ONMFO, Zhao & Tan): dictionary, codes and sparse outliers.

    Learns a nonnegative dictionary ``W`` from a stream so that every sample is ``W h + e``
    with ``h >= 0`` and sparse, bounded outliers ``e`` (module docstring). With one data mode
    ``W`` is ``(n_features, n_components)``; tensor samples get a CP dictionary.

    Parameters
    ----------
    n_components : int
        Number of atoms ``K``.
    outlier_alpha : "auto", float or None, default "auto"
        Weight of ``||e||_1``, in units of the data scale (``data_scale``): residuals beyond
        about ``outlier_alpha`` become outliers. ``"auto"``: ``outlier_alpha_scale * 2.5``
        residual scales (``AUTO_OUTLIER_ALPHA``), the residual scale being learned from the
        batches' residuals ``x - W h`` (a moving average of their winsorised Huber scale,
        ``residual_scale_``) and capped at 0.2 data units, where it starts: at most 0.5 data
        units of weight (the fixed default of earlier versions, measured on faces), less on
        data the model fits closely (docs/nmf.md). With ``"auto"`` each sample is coded at
        its own weight, the smaller of twice that learned weight and ``4 * outlier_alpha_scale``
        of its own residual scales (the MAD of its residuals under a rough code), and the
        dictionary learns from
        the codes refit to the entries not flagged, with the model ``W h`` at the flagged
        ones (not ``x - e``, which keeps the weight's part of every outlier:
        docs/robustness_history.md, "third round"); None:
        ``outlier_alpha_scale / sqrt(F)`` with ``F`` the sample size (the paper's convention,
        for data at unit maximum with ``data_scale=1.0``); ``inf``: no outliers (plain online
        NMF with these solvers; ``outlier_bound``, ``outlier_l2``, ``nonnegative_outliers``
        and ``outlier_init`` other than their defaults or the paper's are refused there,
        naming both).
    outlier_alpha_scale : float, default 1.0
        Multiple of the ``"auto"`` or the paper's ``outlier_alpha`` (None): ``1/sqrt(F)`` is
        too small for large or sparse samples (a video frame of 3,072 pixels needs about 3);
        with ``"auto"`` it multiplies each sample's own weight too.
        A given ``outlier_alpha`` (a float or inf) is used as it is: a value other than 1.0
        with it is refused, naming both.
    outlier_bound : float or None, default None
        Box ``|e_i| <= outlier_bound`` in units of the data scale (the paper's ``M = 1`` for
        data scaled to unit maximum, in ``paper_params``); None or inf: no box. A box leaves
        the part of an outlier beyond it in the data the dictionary learns from: the earlier
        default of 10 data units made faces with Cauchy spikes of up to 50 (2% of the pixels
        of half the faces) come back at 2 dB instead of 22 (``benchmarks/bench_robust.py``).
    data_scale : "auto" or float, default "auto"
        The unit of the data: ``"auto"`` is the first batch's mean absolute observed entry
        (missing entries do not count; a sum, so a cluster finds the same), kept in the
        fitted state (``scale_``) and checkpoints. ``outlier_alpha``, ``outlier_bound``, the
        code penalties, the codes' start and the dictionary penalties are in its units, so the
        learner is scale-free: fitting ``c * X`` gives ``c`` times the codes and outliers of
        ``X``. A float declares it (1.0: the raw units of the paper).
    solver : {"admm", "pgd"}, default "admm"
        OADMM or OPGD, for both the coding and the dictionary step.
    solver_params : dict or None, default None
        The chosen solver's settings, each over its default (None: all at their defaults);
        a key of the other solver is refused by name:

        - ``"pgd"``: ``kappa`` (0.7), the step fractions (``kappa / ||W||_2^2`` for ``h``,
          ``kappa / ||A||_F`` for ``W``), ``0 < kappa <= 1``; ``accelerated`` (False), FISTA
          on the codes (the accelerated PGD of the paper's Section IV-A1).
        - ``"admm"``: ``rho`` (1.0), the ADMM penalties (``rho1 = rho2 = rho3``), ``> 0``.
    code_tol, code_max_iter : float, int, default 1e-3, 20
        The paper's stopping rule of the coding step, per sample (relative objective change).
        The cap is the cost of a step: 20 iterations (the paper's 50 in ``paper_params``)
        coded clean faces and digits (K = 25) as well, at 0.1-0.3 dB, in half the time.
    dict_tol, dict_passes : float, int, default 1e-4, 200
        The paper's stopping rule of the dictionary step: its PGD or ADMM iterations per
        step stop once the surrogate's relative change falls below ``dict_tol``, at most
        ``dict_passes`` of them.
    constraint : {"l2ball", "nonneg", "simplex", "elasticnet"}, default "l2ball"
        The dictionary's set: ``C``, ``C1``, ``C2`` or ``C3`` of the paper (for tensor samples:
        of each loading's columns).
    gamma1, gamma2 : float, default 0.0, 2.0
        The elastic-net ball ``C3`` of ``constraint="elasticnet"`` (the defaults make it
        ``C``); other values with another constraint set are refused, naming both.
    dict_l1, dict_l2 : float, default 0.0
        Elastic-net penalty ``dict_l1 ||W||_1 + dict_l2/2 ||W||_F^2`` on the dictionary.
    alpha, ridge : float, default 0.0
        Lasso ``alpha sum(h)`` and Tikhonov ``ridge/2 ||h||^2`` (the paper's ``nu1``) penalties
        on ``h``, in the paper's convention (a ``1/2`` on the squared loss, that of every
        learner: ``alpha=a`` here is ``alpha=a`` of ``OnlineCPDL``).
    group_alpha, group_size : float, int, default 0.0, 1
        Group lasso on consecutive groups of ``group_size`` codes (with ``alpha``: the
        sparse group lasso); ``group_size`` other than 1 with ``group_alpha=0`` is refused,
        naming both.
    outlier_l2 : float, default 0.0
        Tikhonov penalty ``nu2/2 ||e||^2`` (eq. 39: with ``ridge`` it makes ``(h, e)`` unique).
    nonnegative_outliers : bool, default False
        Outliers in ``{0 <= e <= outlier_bound}`` (the paper's set ``R'``).
    code_init : {"uniform", "zero"}, default "uniform"
        Start of the codes in every coding step: 1/2, the mean of the paper's U[0, 1) draws
        (the same for every sample, so that a sample's codes never depend on its batch).
    outlier_init : {"gross", "zero", "uniform"}, default "gross"
        Start of the outliers: ``"gross"`` sets aside the part of every entry beyond 5 data
        units (``SCALE_WINSOR``; zero on data without such entries), ``"zero"`` starts at 0
        (``"uniform"`` is paper-literal and harmful: with ADMM and the
        paper's loose stopping rule, a U[0, 1) start was measured to recover images at a PSNR
        of 21 dB where the zero start reaches 36 dB).
    missing : {None, "nan"}, default None
        ``"nan"``: NaN entries of the data are missing. Missing entries (these, and those a
        ``mask`` marks) never influence anything: only observed entries enter the coding step
        and the statistics, and the outliers are 0 there (module docstring).
    weights : "balanced", float or callable, default 0.5
        Weights of the statistics: ``t^-0.5`` (that of ``OnlineNMF``) forgets the first
        steps, coded against a random dictionary; ``"balanced"`` (``1/t``) is the paper's
        and kept them: 1.2-1.9 dB lower on clean faces and digits (K = 25).
    batch_size : int or "auto", default "auto"
        Samples per mini-batch in ``fit``. ``"auto"``: a pass over an array of ``n`` samples
        in ``AUTO_BATCHES`` = 20 batches (``ceil(n / 20)``, kept between
        ``AUTO_BATCH_LIMITS`` = 20 and 1,024 samples; ``batch_size_`` after ``fit``; the same
        on a CUDA device, or the largest batch it holds where that is less): with
        ``max_iter="auto"`` (5 passes there), 100 steps on arrays of 400 to 20,480 samples,
        fewer on smaller ones. A step
        costs about as much at 75 samples as at 20 (per-call overhead dominates the coding
        step's iterations), so on the benchmark's 1,500 patches ``fit`` takes 100 steps of 75
        instead of 375 of 20, in a third of the CPU time, at -0.07 to +0.30 dB on every
        class and strength (``docs/robustness_history.md``, "Speed"); fewer, larger steps (25 of
        300) were faster still but cost 1.3 dB on clean digits (K = 25), which need about
        100 dictionary updates. The paper's tau is 5, in ``paper_params``; the fixed 20 and 5
        passes of earlier versions are ``batch_size=20, max_iter=5`` (``"auto"`` passes count
        a given batch too: one pass of 75 batches of 20 on 1,500 samples).
    max_iter : int or "auto", default "auto"
        Passes over an array in ``fit`` (the paper streams every sample once, in
        ``paper_params``; one pass of 100 faces is 5 steps of 20: too few to learn 25 atoms).
        ``"auto"``: the passes whose steps come nearest to ``AUTO_STEPS`` = 100, at least 1
        and at most ``AUTO_MAX_PASSES`` = 5 (``PASSES_RULE``): 5 passes on arrays of up to
        20,480 samples (those of earlier versions' default), one from 68,000 on (98 steps
        of 1,024 at 100,000 samples, where five took as much CPU time as batch PCP).
    init : "random", list of loadings, or array of shape (n_components, n_features)
        ``"random"``: U[0, 1) entries projected on the constraint set (the paper's ``W_0``).
    random_state, backend, verbose, callback, reinit_dead_atoms, device, n_threads
        As in :class:`~tensorstream.learners.ocpdl.OnlineCPDL`, with the same defaults.

    Attributes
    ----------
    loadings_ : list of tensors of shape (I_k, n_components)
    components_ : tensor of shape (n_components, n_features) (one data mode only)
    statistics_, n_steps_, n_samples_seen_ : as in :class:`OnlineCPDL`
    outlier_alpha_ : float
        The outlier weight the learner codes with now, in the data's units (with ``"auto"``,
        the learned weight: each sample's own reaches at most twice it).
    residual_scale_ : float or None
        With ``outlier_alpha="auto"``: the learned residual scale, in the data's units. None
        for a given weight, and until the first step after ``"auto"`` was set on a learner
        fitted with a given weight (it learns one from there, starting at the cap). A
        checkpoint of a version before the residual scale loads with the fixed weight it was
        trained with (``outlier_alpha`` = 0.5 data units times ``outlier_alpha_scale``).
    last_decomposition_ : (codes, outliers) of the most recent coding step (after
        ``partial_fit``: the batch's online ``h_t`` and ``r_t``)

    Examples
    --------
    >>> import numpy as np
    >>> from tensorstream.learners.robust_nmf import RobustOnlineNMF
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((60, 3)) @ rng.random((3, 20)) / 3
    >>> X[::4, ::5] = 1.0  # outliers
    >>> model = RobustOnlineNMF(3, batch_size=10, max_iter=2, random_state=0).fit(X)
    >>> model.components_.shape, model.transform(X[:4]).shape, model.outliers(X[:4]).shape
    ((3, 20), (4, 3), (4, 20))
    """

    #: each solver's settings (``solver_params`` keys) and their defaults
    _solver_params = SOLVER_PARAMS

    #: what ``max_iter="auto"`` means here: about 100 steps, 1 to 5 passes
    _passes_rule = PASSES_RULE
    #: ``batch_size="auto"`` (:class:`~._auto_batch.AutoBatch`)
    auto_batches = AUTO_BATCHES
    auto_batch_limits = AUTO_BATCH_LIMITS

    #: The paper's settings (its Section VII-B1): ``outlier_alpha = 1/sqrt(F)``, the box
    #: ``outlier_bound = 1`` and raw units, for data scaled to unit maximum
    #: (``RobustOnlineNMF(K, **paper_params)``).
    paper_params = {"outlier_alpha": None, "outlier_alpha_scale": 1.0, "outlier_bound": 1.0,
                    "data_scale": 1.0, "solver": "admm", "batch_size": 5, "weights": "balanced",
                    "max_iter": 1, "code_max_iter": 50, "outlier_init": "zero"}

    def __init__(self, n_components: int, *, outlier_alpha: float | str | None = "auto",
                 outlier_alpha_scale: float = 1.0, outlier_bound: float | None = None,
                 data_scale: float | str = "auto", solver: str = "admm",
                 solver_params: dict | None = None, code_tol: float = 1e-3,
                 code_max_iter: int = 20, dict_tol: float = 1e-4, dict_passes: int = 200,
                 constraint: str = "l2ball", gamma1: float = 0.0, gamma2: float = 2.0,
                 dict_l1: float = 0.0, dict_l2: float = 0.0, alpha: float = 0.0,
                 ridge: float = 0.0, group_alpha: float = 0.0, group_size: int = 1,
                 outlier_l2: float = 0.0, nonnegative_outliers: bool = False,
                 code_init: str = "uniform", outlier_init: str = "gross",
                 missing: str | None = None, weights=0.5, batch_size: int | str = "auto",
                 max_iter: int | str = "auto", init="random", random_state=None,
                 backend: str | None = None, device: Any = None, n_threads: int | None = 1,
                 verbose: bool = False, callback=None,
                 reinit_dead_atoms: bool = True):
        super().__init__(n_components, outlier_alpha=outlier_alpha,
                         outlier_alpha_scale=outlier_alpha_scale, outlier_bound=outlier_bound,
                         data_scale=data_scale, solver=solver, solver_params=solver_params,
                         batch_size=batch_size, max_iter=max_iter, init=init,
                         code_max_iter=code_max_iter, code_tol=code_tol, random_state=random_state,
                         backend=backend, device=device, verbose=verbose, callback=callback,
                         reinit_dead_atoms=reinit_dead_atoms, n_threads=n_threads)
        self.dict_tol = dict_tol
        self.dict_passes = dict_passes
        self.constraint = constraint
        self.gamma1 = gamma1
        self.gamma2 = gamma2
        self.dict_l1 = dict_l1
        self.dict_l2 = dict_l2
        self.alpha = alpha
        self.ridge = ridge
        self.group_alpha = group_alpha
        self.group_size = group_size
        self.outlier_l2 = outlier_l2
        self.nonnegative_outliers = nonnegative_outliers
        self.code_init = code_init
        self.outlier_init = outlier_init
        self.missing = missing
        self.weights = weights

    # -- parameters ----------------------------------------------------------------------------

    _parameter_constraints = {
        **SHARED_CONSTRAINTS, **ROBUST_CONSTRAINTS,
        "dict_tol": [Interval("real", 0, None)],
        "dict_passes": [Interval("int", 1, None)],
        "constraint": [Options(*CONSTRAINTS)],
        "gamma1": [Interval("real", 0, None)],
        "gamma2": [Interval("real", 0, None)],
        "dict_l1": [Interval("real", 0, None)],
        "dict_l2": [Interval("real", 0, None)],
        "alpha": [Interval("real", 0, None)],
        "ridge": [Interval("real", 0, None)],
        "group_alpha": [Interval("real", 0, None)],
        "group_size": [Interval("int", 1, None)],
        "outlier_l2": [Interval("real", 0, None)],
        "nonnegative_outliers": [BOOLEAN],
        "code_init": [Options("uniform", "zero")],
        "outlier_init": [Options("gross", "zero", "uniform")],
        "weights": [Instance("a schedule name", str), Interval("real", 0, 1, closed="right"),
                    CALLABLE],
    }

    def _check_rules(self) -> None:
        self._check_outlier_rules()
        check_constraint_weights(self.constraint, self.gamma1, self.gamma2,
                                 self._set_by_hand("gamma1", "gamma2"))
        check_outlier_part(self.outlier_alpha, self._set_by_hand(*OUTLIER_PARAMETERS))
        check_group_size(self.group_alpha, self._set_by_hand("group_size"))
        make_weights(self.weights)

    def _algorithm(self) -> RobustNMFAlgorithm:
        """The algorithm's options from the parameters: the one place they pass from the
        estimator to :class:`~tensorstream.algorithms.robust_nmf.RobustNMFAlgorithm`."""
        return RobustNMFAlgorithm(RobustNMFOptions(
            n_components=self.n_components, init=self.init, weights=self.weights,
            outlier_alpha=self.outlier_alpha, outlier_alpha_scale=self.outlier_alpha_scale,
            penalties=RobustPenalties(
                outlier_bound=self.outlier_bound,
                nonnegative_outliers=bool(self.nonnegative_outliers), outlier_l2=self.outlier_l2,
                alpha=self.alpha, ridge=self.ridge, group_alpha=self.group_alpha,
                group_size=int(self.group_size)),
            data_scale=self.data_scale, solver=self.solver,
            **self._solver_settings(),
            code_init=self.code_init,
            outlier_init=self.outlier_init, code_tol=self.code_tol,
            code_max_iter=self.code_max_iter, constraint=self.constraint, gamma1=self.gamma1,
            gamma2=self.gamma2, dict_l1=self.dict_l1, dict_l2=self.dict_l2,
            dict_tol=self.dict_tol, dict_passes=self.dict_passes))

    def _nonnegative_data(self) -> bool:
        return True

    # -- learning ------------------------------------------------------------------------------

    def partial_fit(self, X: Any, y: Any = None, *, mask: Any = None,
                    sample_dim: str | None = None, modes: Any = None,
                    client: Any = None) -> RobustOnlineNMF:
        """Learn from one mini-batch; the batch's codes and outliers are kept in
        ``last_decomposition_``.

        Returns
        -------
        self
        """
        return super().partial_fit(X, y, mask=mask, sample_dim=sample_dim, modes=modes,
                                   client=client)

    # -- results -------------------------------------------------------------------------------

    def surrogate_value(self) -> float:
        """The surrogate ``f~_t(W_t)`` of the statistics learned (plus the dictionary's
        penalty): the paper's (eq. 11) with a given ``outlier_alpha``; with ``"auto"`` the
        statistics are those of the refit codes and the model at flagged entries."""
        stats = self.statistics_
        with using(self.backend_):
            # the dictionary penalties are in units of the data scale, squared like the loss
            penalty = penalty_value(self.loadings_, self.dict_l1, self.dict_l2)
            return 0.5 * surrogate_value(stats["A"], stats["B"], stats["c"], self.loadings_) + \
                self.scale_ * self.scale_ * penalty

    def decompose(self, X: Any, mask: Any = None) -> tuple[Any, Any]:
        """``(codes, outliers)`` of the samples of ``X`` against the learned dictionary.

        ``mask`` (or ``missing="nan"``) marks missing entries: they are ignored, and the
        outliers are 0 there.
        """
        self._check_fitted()
        X, mask, _ = self._checked_input(X, mask)
        coded = self._coded(X, mask)
        return coded.codes, coded.outliers

    def outliers(self, X: Any, mask: Any = None) -> Any:
        """The outlier part ``E`` of ``X`` (``X`` ~ ``inverse_transform(codes) + E``; 0 on
        missing entries), shaped like ``X`` (labelled like it when it is a DataArray)."""
        _, coded, _, relabel = self._coded_parts(X, mask)
        return relabel(coded.outliers)

    def denoise(self, X: Any, mask: Any = None) -> Any:
        """``X`` with its outliers removed: every entry the model calls an outlier (``E != 0``)
        or that is missing is replaced by the reconstruction ``W h``; the others stay as
        observed (labelled like ``X`` when it is a DataArray).

        Unlike ``W h`` alone it keeps the detail the dictionary cannot express; unlike
        ``X - E`` it leaves no trace of an outlier (the l1 weight shrinks ``E`` by
        ``outlier_alpha_``, which ``X - E`` would keep).
        """
        data, coded, mask, relabel = self._coded_parts(X, mask)
        with using(self.backend_):
            low_rank = reconstruct(self.loadings_, coded.codes)
            return relabel(replace_flagged(data, low_rank, coded.outliers, mask))

    def _coded(self, X: Any, mask: Any) -> Codes:
        """The coding step of the checked samples ``X``, in :func:`~._dictionary.coding_chunks`.

        A sample's codes and outliers do not depend on the samples coded with it (its own
        start, weight and stopping rule), so the chunks give what one call on the whole array
        gives, in less time; ``constant`` is the chunks' mean weighted by their sizes, the
        whole array's.
        """
        n_samples = int(tl.shape(X)[0])
        chunks = coding_chunks(n_samples, int(np.prod(tl.shape(X)[1:])))
        if len(chunks) == 1:
            return super()._coded(X, mask)
        code = super()._coded  # (a comprehension has no zero-argument super)
        parts = [code(X[chunk], None if mask is None else mask[chunk]) for chunk in chunks]
        with using(self.backend_):
            def joined(name: str) -> Any:
                return tl.concatenate([getattr(part, name) for part in parts], axis=0)

            constant = sum(int(tl.shape(part.codes)[0]) * float(part.constant) for part in parts)
            return Codes(codes=joined("codes"), explained=joined("explained"),
                         losses=joined("losses"), constant=constant / n_samples,
                         outliers=joined("outliers"))

    def _coded_parts(self, X: Any, mask: Any) -> tuple[Any, Codes, Any, Any]:
        """The checked samples, their coding step, the mask, and the function that labels a
        result of the samples' shape like ``X`` (the identity for unlabelled ``X``)."""
        self._check_fitted()
        data, mask, layout = self._checked_input(X, mask)
        coded = self._coded(data, mask)
        return data, coded, mask, self._as_given(X, layout)

    @property
    def scale_(self) -> float:
        """The data scale (``data_scale``) the thresholds are in units of."""
        return float(self._fitted_state().scale)

    @property
    def residual_scale_(self) -> float | None:
        """The learned residual scale in the data's units (``outlier_alpha="auto"``), or
        None."""
        state = self._fitted_state()
        sigma = (state.statistics or {}).get("residual_scale")
        return None if sigma is None or self.outlier_alpha != "auto" else sigma * state.scale

    @property
    def outlier_alpha_(self) -> float:
        """The outlier weight the learner codes with now, in the data's units; with
        ``outlier_alpha="auto"`` the learned weight, of which each sample's own is at most
        twice (the smaller of that cap and ``4 * outlier_alpha_scale`` of its own residual
        scales)."""
        state = self._fitted_state()
        algorithm = self._algorithm().at_state(state)
        n_features = int(np.prod([U.shape[0] for U in state.loadings]))
        return algorithm.penalties(n_features).outlier_alpha * state.scale

    @property
    def last_decomposition_(self) -> tuple[Any, Any]:
        """``(codes, outliers)`` of the most recent coding step (``partial_fit``'s batch; not
        kept after a step taken on a cluster, whose shards are coded on the workers)."""
        if "_last_codes" not in self.__dict__:
            raise AttributeError("no coding step has run in this process yet (a step taken with "
                                 "client= codes its shards on the workers and keeps no codes: "
                                 "use transform on the batch)")
        return self._last_codes

    @property
    def components_(self) -> Any:
        """The dictionary as scikit-learn components, ``(n_components, n_features)``."""
        self._check_fitted()
        if len(self.loadings_) != 1:
            raise AttributeError("components_ is defined for samples with one data mode; "
                                 "use loadings_ for tensor samples")
        return self.loadings_[0].T
