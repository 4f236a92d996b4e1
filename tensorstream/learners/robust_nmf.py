"""Robust NMF with outliers (Zhao & Tan, "Online Nonnegative Matrix Factorization with
Outliers", IEEE TSP 2017): ONMFO online (BPGD / BADMM in batch: :mod:`.robust_nmf_batch`).

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

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorly as tl

from ..coders.robust import (
    RobustPenalties,
    code_penalty,
    outlier_penalty,
    project_outliers,
    robust_code,
)
from ..core.backend import to_numpy, using
from ..core.constraints import (
    project_columns,
    project_elastic_net_columns,
    project_simplex_columns,
)
from ..core.dictionary import reconstruct
from ..core.validation import (
    ARRAY,
    BOOLEAN,
    CALLABLE,
    NONE,
    SEQUENCE,
    Instance,
    Interval,
    Options,
)
from ..engine import Codes
from ..engine.loop import usable_scale
from ..schedules import make_weights
from ..steps.surrogate import penalty_value, surrogate_solver_step, surrogate_value
from ._base import (
    SHARED_CONSTRAINTS,
    OnlineLearner,
)
from ._output import replace_flagged
from .nmf import loadings_from_init
from .ocpdl import SurrogateCP

__all__ = ["RobustOnlineNMF"]

CONSTRAINTS = ("l2ball", "nonneg", "simplex", "elasticnet")


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
    "kappa": [Interval("real", 0, 1, closed="right")],
    "rho": [Interval("real", 0, None, closed="neither")],
    "init": [Options("random"), ARRAY, SEQUENCE],
}


#: the paper's names of the outlier parameters, which older checkpoints hold
RENAMED_OUTLIER_PARAMETERS = {"lam": "outlier_alpha", "lam_scale": "outlier_alpha_scale",
                              "M": "outlier_bound"}


#: ``outlier_alpha="auto"`` in residual scales: a residual beyond 2.5 times the model's
#: typical residual is an outlier (the region of Huber's threshold), but never beyond
#: ``AUTO_OUTLIER_ALPHA * MAX_RESIDUAL_SCALE`` data units. The residual scale is learned from
#: the batches' residuals (:func:`next_residual_scale`), so that on data the model fits closely
#: (nearly exactly low rank, where every large residual is an outlier) the weight falls with
#: it: the paper's synthetic data 30.7 -> 37.0 dB, every real data set measured unchanged
#: (docs/nmf.md).
AUTO_OUTLIER_ALPHA = 2.5
#: the residual scale ``"auto"`` uses is at most this, in units of the data scale, and starts
#: here before any residual is seen: an outlier weight of 0.5 data units, the fixed default of
#: earlier versions, measured on lfw faces with the paper's three outlier settings (0.3 let
#: the outliers absorb the faces' own detail with PGD, 0.8 and more fit the outliers with
#: ADMM). Uncapped, the residual scale learned on real faces with heavy outliers (27% of the
#: entries) grows above it and costs 0.1-0.4 dB. The batch ``RobustNMF`` keeps this weight.
MAX_RESIDUAL_SCALE = 0.2
#: the residuals' squares are winsorised at this many residual scales for the residual scale
#: (Huber's proposal 2): low enough that heavy contamination does not inflate it (the limit
#: ``c`` breaks down when more than about ``E min(z^2, c^2) / c^2`` of the entries are outliers:
#: 16% at ``c = 2.5``, 35% at 1.5, 52% at 1, where the paper's heaviest setting corrupts 27%)
RESIDUAL_WINSOR = 1.0
#: the residual scale is a moving average over batches: this much of the previous value is kept
#: at each batch (about ten batches of memory, so that a few batches' noise averages out)
RESIDUAL_SCALE_MEMORY = 0.9
#: a floor on the residual scale, in data units: on data the model fits exactly the residuals
#: vanish, and a zero outlier weight would make every entry free to be an outlier
_RESIDUAL_SCALE_FLOOR = 1e-6


def _default_outlier_alpha(outlier_alpha: float | str | None, scale: float,
                           n_features: int, residual_scale: float | None = None) -> float:
    """``outlier_alpha`` (in units of the data scale); for ``"auto"``, ``scale`` (the
    ``outlier_alpha_scale``) times ``AUTO_OUTLIER_ALPHA`` residual scales (``residual_scale``
    capped at ``MAX_RESIDUAL_SCALE``, which it is before one is learned); for None, the
    paper's ``1/sqrt(F)`` (Section VII-B1) times ``scale``, which is too small for large or
    sparse samples (a video frame of 3,072 pixels, sparse images) unless ``scale`` raises
    it."""
    if outlier_alpha == "auto":
        sigma = MAX_RESIDUAL_SCALE if residual_scale is None else min(residual_scale,
                                                                      MAX_RESIDUAL_SCALE)
        return scale * AUTO_OUTLIER_ALPHA * sigma
    return float(outlier_alpha) if outlier_alpha is not None else scale / math.sqrt(n_features)


def residual_sums(residuals: Any, mask: Any, sigma: float) -> dict:
    """A batch's part of the residual scale (additive over shards): the sum of the squared
    residuals (at the data scale) winsorised at ``RESIDUAL_WINSOR * sigma``, and their count
    (observed entries only)."""
    limit = RESIDUAL_WINSOR * sigma
    squares = tl.clip(residuals * residuals, None, limit * limit)
    if mask is None:
        return {"residual_sq": float(tl.sum(squares)),
                "residual_count": float(np.prod(tl.shape(residuals)))}
    observed = tl.tensor(mask, **tl.context(squares))
    return {"residual_sq": float(tl.sum(squares * observed)),
            "residual_count": float(tl.sum(observed))}


def next_residual_scale(sigma: float, sums: dict) -> float:
    """The residual scale after a batch whose :func:`residual_sums` are ``sums``: the moving
    average (``RESIDUAL_SCALE_MEMORY``) of ``sigma`` and the batch's Huber scale (proposal 2:
    the root mean winsorised square over its expectation for standard normal residuals, so
    that Gaussian residuals of scale ``s`` give ``s``; the outliers beyond the limit count at
    the limit only, so that they cannot inflate it). A batch without observed entries leaves
    it as it was."""
    if sums["residual_count"] == 0:
        return sigma
    batch = math.sqrt(sums["residual_sq"] / sums["residual_count"] / _HUBER_CONSISTENCY)
    new = RESIDUAL_SCALE_MEMORY * sigma + (1 - RESIDUAL_SCALE_MEMORY) * batch
    return max(new, _RESIDUAL_SCALE_FLOOR)


def _winsorised_second_moment(c: float) -> float:
    """``E min(z^2, c^2)`` for a standard normal ``z``."""
    tail = 0.5 * math.erfc(c / math.sqrt(2))  # P(z > c)
    density = math.exp(-0.5 * c * c) / math.sqrt(2 * math.pi)
    return (1 - 2 * tail) - 2 * c * density + 2 * c * c * tail


_HUBER_CONSISTENCY = _winsorised_second_moment(RESIDUAL_WINSOR)


#: the data scale (``data_scale="auto"``) winsorises each sample's absolute entries at this
#: many times their median (of the nonzero observed ones), so that a few gross outliers in the
#: first batch (a spike of 1e10, Cauchy spikes of 50 in faces of order 1) cannot set the unit
#: every threshold is in: unwinsorised, one entry of 1e10 among 200 made it 5e7. Per sample, so
#: that the shards of a batch on a cluster add up to the batch's sums. Real images never reach
#: it (lfw faces, patches: the largest entry is 2-3 medians).
SCALE_WINSOR = 5.0


def first_batch_scale(X: Any, data_scale: float | str) -> float:
    """The data scale: ``data_scale`` when declared, else the batch's mean absolute entry,
    each sample's winsorised at ``SCALE_WINSOR`` times its median (1.0 for an all-zero
    batch). Every threshold of the robust learners is in its units, so fitting ``c * X`` gives
    ``c`` times the factors of ``X``."""
    sums = scale_sums(X, data_scale)
    return usable_scale(float(data_scale) if sums is None else sums[0] / sums[1])


def scale_sums(X: Any, data_scale: float | str, mask: Any = None) -> tuple[float, float] | None:
    """``(sum, count)`` of :func:`first_batch_scale` over a shard, observed entries only
    (None when declared); computed in numpy (first batches only)."""
    if data_scale != "auto":
        return None
    magnitudes = np.abs(to_numpy(X)).reshape(tl.shape(X)[0], -1)
    observed = np.ones(magnitudes.shape, dtype=bool) if mask is None else \
        to_numpy(mask).reshape(magnitudes.shape).astype(bool)
    counted = np.where(observed & (magnitudes > 0), magnitudes, np.nan)
    with warnings.catch_warnings():  # a sample without a nonzero observed entry: no limit
        warnings.simplefilter("ignore", RuntimeWarning)
        medians = np.nanmedian(counted, axis=1)
    limits = np.where(np.isnan(medians), np.inf, SCALE_WINSOR * medians)
    winsorised = np.minimum(magnitudes, limits[:, None])
    return float(np.sum(winsorised[observed])), float(np.sum(observed))


def coding_start(X: Any, R: int, code_init: str, outlier_init: str) -> tuple[Any, Any]:
    """Starting ``(h, e)`` of a coding step (``X`` at unit data scale): codes at 1/2 (the
    mean of the paper's U[0, 1) draws) or zeros; outliers at zero, at 1/2 (the paper-literal
    U[0, 1) start), or ``"gross"``: the part of every entry beyond ``SCALE_WINSOR`` data
    units, so that a coding step starts with a gross outlier already set aside (from a zero
    start, 50 iterations left part of an entry of 1e10 in the codes and the statistics).

    The start is the same for every sample, so a sample's codes depend on nothing but the
    sample and the dictionary: not on its neighbours or its position in the batch (random
    draws per row made them differ by up to 0.08 under a permutation of the batch), and a
    batch coded in shards on a cluster equals the batch coded at once.
    """
    context = tl.context(X)
    b = tl.shape(X)[0]
    H0 = tl.ones((b, R), **context) / 2 if code_init == "uniform" else tl.zeros((b, R), **context)
    if outlier_init == "uniform":
        E0 = tl.ones(tl.shape(X), **context) / 2
    elif outlier_init == "gross":
        E0 = X - tl.clip(X, -SCALE_WINSOR, SCALE_WINSOR)
    else:
        E0 = tl.zeros(tl.shape(X), **context)
    return H0, E0


def dictionary_projection(constraint: str, gamma1: float = 0.0,
                          gamma2: float = 2.0) -> Callable[[Any], Any]:
    """The projection onto the dictionary's constraint set (the paper's Section VI-A).

    ``"l2ball"``: the paper's ``C`` (nonnegative, column norms <= 1); ``"nonneg"``: ``C1``;
    ``"simplex"``: ``C2`` (nonnegative, column sums = 1); ``"elasticnet"``: ``C3``
    (nonnegative, ``gamma1 ||w||_1 + gamma2/2 ||w||^2 <= 1``).
    """
    if constraint == "l2ball":
        return lambda U: project_columns(U, nonnegative=True, column_bound=1.0)
    if constraint == "nonneg":
        return lambda U: tl.clip(U, 0, None)
    if constraint == "simplex":
        return project_simplex_columns
    if constraint == "elasticnet":
        return lambda U: project_elastic_net_columns(U, gamma1, gamma2)
    raise ValueError(f"constraint must be one of {CONSTRAINTS}, got {constraint!r}")


class RobustOnlineNMF(OnlineLearner):
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
        data the model fits closely (docs/nmf.md); None:
        ``outlier_alpha_scale / sqrt(F)`` with ``F`` the sample size (the paper's convention,
        for data at unit maximum with ``data_scale=1.0``); ``inf``: no outliers (plain online
        NMF with these solvers).
    outlier_alpha_scale : float, default 1.0
        Multiple of the ``"auto"`` or the paper's ``outlier_alpha`` (ignored for a given
        float): ``1/sqrt(F)`` is too small for large or sparse samples (a video frame of 3,072
        pixels needs about 3).
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
        ``X``. A float declares it (1.0: the raw units of the paper; checkpoints written before this
        parameter existed load with 1.0).
    solver : {"admm", "pgd"}, default "admm"
        OADMM or OPGD, for both the coding and the dictionary step.
    kappa : float, default 0.7
        PGD step fractions (``kappa / ||W||_2^2`` for ``h``, ``kappa / ||A||_F`` for ``W``).
    rho : float, default 1.0
        ADMM penalties (``rho1 = rho2 = rho3``).
    accelerated : bool, default False
        FISTA on the codes (``solver="pgd"`` only; the accelerated PGD of the paper's
        Section IV-A1).
    code_tol, code_max_iter : float, int, default 1e-3, 50
        The paper's stopping rule of the coding step, per sample (relative objective change).
    dict_tol, dict_max_iter : float, int, default 1e-4, 200
        The paper's stopping rule of the dictionary step.
    constraint : {"l2ball", "nonneg", "simplex", "elasticnet"}, default "l2ball"
        The dictionary's set: ``C``, ``C1``, ``C2`` or ``C3`` of the paper (for tensor samples:
        of each loading's columns).
    gamma1, gamma2 : float, default 0.0, 2.0
        The elastic-net ball ``C3`` (the defaults make it ``C``).
    dict_l1, dict_l2 : float, default 0.0
        Elastic-net penalty ``dict_l1 ||W||_1 + dict_l2/2 ||W||_F^2`` on the dictionary.
    alpha, ridge : float, default 0.0
        Lasso ``alpha sum(h)`` and Tikhonov ``ridge/2 ||h||^2`` (the paper's ``nu1``) penalties
        on ``h``, in the paper's convention (a ``1/2`` on the squared loss, that of every
        learner: ``alpha=a`` here is ``alpha=a`` of ``OnlineCPDL``).
    group_alpha, group_size : float, int, default 0.0, 1
        Group lasso on consecutive groups of ``group_size`` codes (with ``alpha``: the
        sparse group lasso).
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
    weights : "balanced", float or callable, default "balanced"
        Weights of the statistics (``1/t`` is the paper's).
    batch_size : int, default 5
        Samples per mini-batch in ``fit`` (the paper's tau).
    max_iter : int or "auto", default 1
        Passes over an array in ``fit`` (the paper streams every sample once); ``"auto"`` as
        in :func:`~tensorstream.learners._base.fit_passes`.
    init : "random", list of loadings, or array of shape (n_components, n_features)
        ``"random"``: U[0, 1) entries projected on the constraint set (the paper's ``W_0``).
    random_state, backend, verbose, callback
        As in :class:`OnlineCPDL`.
    device : str, torch.device or None, default None
        Where to compute: ``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a ``torch.device`` runs on
        the pytorch backend there (every batch, of any kind, moved there as it is validated;
        the state kept there); ``None``: where the data are (see ``docs/devices.md``).
    n_threads : int or None, default 1
        BLAS/OpenMP and PyTorch threads inside the public methods (see
        :func:`tensorstream.core.backend.limit_threads`; formerly ``blas_threads``).
    reinit_dead_atoms : bool, default True
        As in :class:`OnlineCPDL`.

    Attributes
    ----------
    loadings_ : list of tensors of shape (I_k, n_components)
    components_ : tensor of shape (n_components, n_features) (one data mode only)
    statistics_, n_steps_, n_samples_seen_ : as in :class:`OnlineCPDL`
    outlier_alpha_ : float
        The outlier weight the learner codes with now, in the data's units.
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

    #: The paper's settings (its Section VII-B1): ``outlier_alpha = 1/sqrt(F)``, the box
    #: ``outlier_bound = 1`` and raw units, for data scaled to unit maximum
    #: (``RobustOnlineNMF(K, **paper_params)``).
    paper_params = {"outlier_alpha": None, "outlier_alpha_scale": 1.0, "outlier_bound": 1.0,
                    "data_scale": 1.0, "solver": "admm", "batch_size": 5, "weights": "balanced",
                    "outlier_init": "zero"}

    def __init__(self, n_components: int, *, outlier_alpha: float | str | None = "auto",
                 outlier_alpha_scale: float = 1.0, outlier_bound: float | None = None,
                 data_scale: float | str = "auto", solver: str = "admm", kappa: float = 0.7,
                 rho: float = 1.0, accelerated: bool = False, code_tol: float = 1e-3,
                 code_max_iter: int = 50, dict_tol: float = 1e-4, dict_max_iter: int = 200,
                 constraint: str = "l2ball", gamma1: float = 0.0, gamma2: float = 2.0,
                 dict_l1: float = 0.0, dict_l2: float = 0.0, alpha: float = 0.0,
                 ridge: float = 0.0, group_alpha: float = 0.0, group_size: int = 1,
                 outlier_l2: float = 0.0, nonnegative_outliers: bool = False,
                 code_init: str = "uniform", outlier_init: str = "gross",
                 missing: str | None = None, weights="balanced", batch_size: int = 5,
                 max_iter: int = 1, init="random", random_state=None,
                 backend: str | None = None, device: Any = None, n_threads: int | None = 1,
                 verbose: bool = False, callback=None,
                 reinit_dead_atoms: bool = True):
        self._keep_parameters(locals())

    # -- parameters ----------------------------------------------------------------------------

    #: parameters renamed to the glossary's words (old name: new name), for old checkpoints
    _renamed_parameters = {**RENAMED_OUTLIER_PARAMETERS, "code_l1": "alpha", "code_l2": "ridge",
                           "code_group": "group_alpha"}

    @classmethod
    def _loaded_params(cls, params: dict, meta: dict) -> dict:
        """As every learner's, and a file of a version before the learned residual scale
        whose ``outlier_alpha`` is ``"auto"`` loads with the fixed weight that ``"auto"`` was
        then (``outlier_alpha_scale`` times 0.5 data units): it resumes as it ran, and a
        state without a residual scale means a weight set since the fit (see
        ``RobustNMFAlgorithm.at_state``)."""
        loaded = super()._loaded_params(params, meta)
        stored = meta.get("statistics")
        if loaded.get("outlier_alpha") == "auto" and not (
                isinstance(stored, dict) and "residual_scale" in stored):
            loaded["outlier_alpha"] = float(loaded.get("outlier_alpha_scale", 1.0)) * \
                AUTO_OUTLIER_ALPHA * MAX_RESIDUAL_SCALE
        return loaded

    _parameter_constraints = {
        **SHARED_CONSTRAINTS, **ROBUST_CONSTRAINTS,
        "accelerated": [BOOLEAN],
        "dict_tol": [Interval("real", 0, None)],
        "dict_max_iter": [Interval("int", 1, None)],
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
        if self.constraint == "elasticnet" and self.gamma1 == self.gamma2 == 0:
            raise ValueError("constraint='elasticnet' needs gamma1 > 0 or gamma2 > 0")
        make_weights(self.weights)

    def _algorithm(self) -> RobustNMFAlgorithm:
        return RobustNMFAlgorithm(self._params())

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
        """The paper's surrogate ``f~_t(W_t)`` (eq. 11, plus the dictionary's penalty)."""
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
        """The outlier weight the learner codes with now, in the data's units."""
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


class RobustNMFAlgorithm(SurrogateCP):
    """Online NMF with outliers (ONMFO) as a configuration of the engine: robust codes and
    outliers (PGD or ADMM), the surrogate statistics of ``X - E``, and the dictionary step of
    the surrogate (PGD or ADMM, warm-started) on the chosen constraint set.

    Parameters
    ----------
    params : namespace
        The parameters of :class:`RobustOnlineNMF`.
    """

    nonnegative = True
    scalar_statistics = ("residual_scale",)

    def __init__(self, params: Any, residual_scale: float | None = None):
        self.params = params
        self.weights = make_weights(params.weights)
        # learned from the batches with outlier_alpha="auto" (at_state gives it); None: a
        # given outlier_alpha
        self.residual_scale = residual_scale

    @property
    def learns_residual_scale(self) -> bool:
        return self.params.outlier_alpha == "auto"

    def at_state(self, state: Any) -> RobustNMFAlgorithm:
        """The algorithm coding at the residual scale ``state`` learned (``"auto"``). A state
        without one was fitted with a given weight and switched to ``"auto"`` since
        (``set_params``): it learns one from where a fit starts, the cap."""
        if not self.learns_residual_scale:
            return self
        sigma = (state.statistics or {}).get("residual_scale")
        return RobustNMFAlgorithm(self.params, MAX_RESIDUAL_SCALE if sigma is None else sigma)

    def initial_statistics(self, sample_shape: tuple, R: int, context: dict) -> dict:
        """The surrogate's zero statistics, and the first residual scale (``"auto"``)."""
        statistics = super().initial_statistics(sample_shape, R, context)
        if self.learns_residual_scale:
            statistics["residual_scale"] = MAX_RESIDUAL_SCALE
        return statistics

    def penalties(self, n_features: int) -> RobustPenalties:
        p = self.params
        return RobustPenalties(
            outlier_alpha=_default_outlier_alpha(p.outlier_alpha, p.outlier_alpha_scale,
                                                 n_features, self.residual_scale),
            outlier_bound=p.outlier_bound,
            nonnegative_outliers=bool(p.nonnegative_outliers), outlier_l2=p.outlier_l2,
            alpha=p.alpha, ridge=p.ridge, group_alpha=p.group_alpha,
            group_size=int(p.group_size))

    def scale_sums(self, X: Any, mask: Any = None) -> tuple[float, float] | None:
        """The first batch's mean absolute (observed) entry, as a sum and a count (None when
        declared)."""
        return scale_sums(X, self.params.data_scale, mask)

    def declared_scale(self) -> float:
        return float(self.params.data_scale)

    def project(self, U: Any) -> Any:
        """The unit ball's nonnegative part, then the chosen constraint set (what a
        re-initialised atom needs: it left the set for the ball alone)."""
        p = self.params
        ball = project_columns(U, nonnegative=True, column_bound=1.0)
        return dictionary_projection(p.constraint, p.gamma1, p.gamma2)(ball)

    def initial_loadings(self, X: Any, context: dict, rng: Any, mask: Any = None) -> list:
        """An init array or list, or ``P_C`` of U[0, 1) entries (the paper's ``W_0``)."""
        p = self.params
        loadings = loadings_from_init(p.init, tuple(X.shape[1:]), p.n_components,
                                      tl.get_backend(), context)
        if loadings is None:
            loadings = SurrogateCP.initial_loadings(self, X, context, rng)
        project = dictionary_projection(p.constraint, p.gamma1, p.gamma2)
        return [project(U) for U in loadings]

    def encode(self, X: Any, loadings: list, scale: float, mask: Any = None) -> Codes:
        """Codes and outliers of a batch; the statistics see ``X - E``.

        With a ``mask``, ``X`` (zeroed at the boundary) and ``E`` are 0 on missing entries, so
        ``explained`` is too: ``B`` and ``c`` see the observed entries only.
        """
        p = self.params
        penalties = self.penalties(int(np.prod(X.shape[1:])))
        raw, X = X, X / scale  # code at unit scale: every threshold is in the data's units
        H0, E0 = coding_start(X, int(loadings[0].shape[1]), p.code_init, p.outlier_init)
        E0 = project_outliers(E0, penalties)  # a gross start within the box and signs
        options = dict(H0=H0, E0=E0, tol=p.code_tol, max_iter=p.code_max_iter)
        if mask is not None:
            options.update(mask=mask)
        if p.solver == "pgd":
            options.update(kappa=p.kappa, accelerated=bool(p.accelerated))
        else:
            options.update(rho=p.rho)
        coding = robust_code(X, loadings, penalties, solver=p.solver, **options)
        H, E = coding.codes, coding.outliers
        explained = X - E
        sq_norms = tl.sum(tl.reshape(explained * explained, (X.shape[0], -1)), axis=1)
        extra = outlier_penalty(E, penalties) + code_penalty(H, penalties)
        # engine scale: twice the paper's c_t; back to the data's units (losses: squared)
        constant = float(tl.mean(sq_norms + 2 * extra)) * (scale * scale)
        E = E * scale
        losses = coding.losses * (scale * scale)
        largest = float(tl.max(tl.abs(raw))) if tl.shape(raw)[0] else 0.0
        if not math.isfinite(largest * largest * float(np.prod(X.shape[1:]))):
            # the statistics square the codes, at the data's scale: without a box the outliers
            # can absorb such a batch at a finite loss, so say that the arithmetic overflows
            losses = losses + float("inf")
        work = None
        if self.residual_scale is not None and self.learns_residual_scale:
            # x - W h at the data scale, outliers included (winsorised where they begin)
            residuals = X - reconstruct(loadings, H)
            work = residual_sums(residuals, mask, self.residual_scale)
        return Codes(codes=H * scale, explained=raw - E, losses=losses, constant=constant,
                     outliers=E, work=work)

    def batch_sums(self, X: Any, coded: Codes, mask: Any, loadings: list,
                   scale: float) -> dict:
        """The surrogate's sums, and the batch's part of the residual scale (``"auto"``)."""
        sums = super().batch_sums(X, coded, mask, loadings, scale)
        return sums if coded.work is None else {**sums, **coded.work}

    def accumulate(self, statistics: dict | None, sums: dict, w: float | None) -> dict | None:
        """The surrogate's statistics, and the residual scale moved by the batch's."""
        new = super().accumulate(statistics, sums, w)
        sigma = statistics.get("residual_scale")
        if sigma is None and self.learns_residual_scale:  # "auto" set since a fixed-weight fit
            sigma = MAX_RESIDUAL_SCALE
        if sigma is not None:  # kept, moved where the batch measured it
            new["residual_scale"] = next_residual_scale(sigma, sums) if "residual_sq" in sums \
                else sigma
        return new

    def update(self, sums: dict, statistics: dict, loadings: list, t: int,
               scale: float = 1.0) -> list:
        """The paper's W-step (PGD or ADMM, its Sections IV-A2 and IV-B2; warm-started) on the
        statistics."""
        p = self.params
        # the step at unit data scale (A, B and c scale as its square), so that rho, the
        # penalties and the stopping rule mean the same whatever the data's units
        unit = scale * scale
        new, _ = surrogate_solver_step(
            loadings, statistics["A"] / unit, statistics["B"] / unit, statistics["c"] / unit,
            solver=p.solver,
            project=dictionary_projection(p.constraint, p.gamma1, p.gamma2), l1=p.dict_l1,
            l2=p.dict_l2, kappa=p.kappa, rho=p.rho, tol=p.dict_tol, max_iter=p.dict_max_iter,
            radius=None, radius_mode="frobenius")
        return new

    def info(self, t: int, w: float | None, n: int) -> dict:
        return {"weight": w, "radius": None}
