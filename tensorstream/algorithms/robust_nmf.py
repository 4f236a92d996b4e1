"""Online NMF with outliers (Zhao & Tan's ONMFO): :class:`RobustNMFAlgorithm`, for the engine.

Robust codes and outliers per batch (PGD or ADMM, :mod:`tensorstream.coders.robust`), the
surrogate statistics of ``X - E``, and the dictionary step of the surrogate (PGD or ADMM,
warm-started) on the chosen constraint set; with ``outlier_alpha="auto"`` the outlier weight
follows a residual scale learned from the batches. The helpers below (the data scale, the
coding start, the constraint sets) serve the batch ``RobustNMF`` too.
:mod:`tensorstream.learners.robust_nmf` describes the maths and every option.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorly as tl

from ..coders.robust import (
    RobustPenalties,
    code_penalty,
    outlier_penalty,
    outlier_step,
    project_outliers,
    robust_code,
)
from ..core.backend import indicator, to_numpy
from ..core.constraints import (
    project_columns,
    project_elastic_net_columns,
    project_simplex_columns,
)
from ..core.dictionary import reconstruct
from ..core.validation import (
    BOOLEAN,
    Interval,
    keyed_settings,
    refuse_set_by_hand,
)
from ..engine import Codes
from ..engine.loop import usable_scale
from ..schedules import make_weights
from ..steps.surrogate import surrogate_solver_step
from .nmf import loadings_from_init
from .robust_matrix import (
    SATURATED_WEIGHT,
    held_residual_scales,
    saturated_or_none,
)
from .surrogate_cp import SurrogateCP

CONSTRAINTS = ("l2ball", "nonneg", "simplex", "elasticnet")

#: The settings each solver takes (``RobustOnlineNMF``'s ``solver_params`` keys), with their
#: defaults: PGD's step fraction ``kappa`` (steps ``kappa / ||W||_2^2`` on the codes,
#: ``kappa / ||A||_F`` on the dictionary) and FISTA on the codes (``accelerated``, the
#: paper's Section IV-A1); ADMM's penalty ``rho`` (``rho1 = rho2 = rho3``). A step size and
#: a penalty are not one quantity, so each solver has its own keys.
SOLVER_PARAMS = {"pgd": {"kappa": 0.7, "accelerated": False}, "admm": {"rho": 1.0}}
#: The batch ``RobustNMF``'s: the same but ``accelerated`` (BPGD and its ``transform`` take
#: no accelerated step).
BATCH_SOLVER_PARAMS = {solver: {key: value for key, value in settings.items()
                                if key != "accelerated"}
                       for solver, settings in SOLVER_PARAMS.items()}
_SOLVER_PARAM_CONSTRAINTS = {"kappa": [Interval("real", 0, 1, closed="right")],
                             "rho": [Interval("real", 0, None, closed="neither")],
                             "accelerated": [BOOLEAN]}


def solver_settings(solver: str, params: Mapping | None, defaults: Mapping = SOLVER_PARAMS,
                    learner: str = "") -> dict:
    """The settings of ``solver``: ``defaults[solver]`` updated by ``params`` (a learner's
    ``solver_params``); a key of the other solver is refused by name, never ignored.

    Examples
    --------
    >>> solver_settings("pgd", {"kappa": 0.5})
    {'kappa': 0.5, 'accelerated': False}
    >>> solver_settings("admm", {"kappa": 0.5})
    Traceback (most recent call last):
    ...
    ValueError: solver_params: 'kappa' does not apply to solver='admm': its settings are ['rho']
    """
    if solver not in defaults:
        raise ValueError(f"solver must be one of {list(defaults)}, got {solver!r}")
    what = f"solver={solver!r}" + (f" of the {learner}" if learner else "")
    return keyed_settings(params, defaults[solver], what, "solver_params",
                          _SOLVER_PARAM_CONSTRAINTS)


def check_outlier_alpha_scale(outlier_alpha: Any, set_by_hand: Mapping) -> None:
    """Refuse ``outlier_alpha_scale`` in ``set_by_hand`` with a given ``outlier_alpha`` (a
    float or inf): it multiplies the weight that ``"auto"`` or None choose, and a given
    weight is used as it is."""
    if not (outlier_alpha is None or isinstance(outlier_alpha, str)):
        refuse_set_by_hand(set_by_hand, "multiplies the weight outlier_alpha='auto' or None "
                           "chooses; a given outlier_alpha is used as it is",
                           "give the weight itself", f"outlier_alpha={outlier_alpha!r}")


#: What only the outlier part reads: ``outlier_alpha=inf`` has none (the coders start and stay
#: at ``e = 0``), so another value of these than their default (or the paper's) means nothing.
OUTLIER_PARAMETERS = ("outlier_bound", "nonnegative_outliers", "outlier_l2", "outlier_init")


def check_outlier_part(outlier_alpha: Any, set_by_hand: Mapping) -> None:
    """Refuse the parameters of :data:`OUTLIER_PARAMETERS` in ``set_by_hand`` (those set to
    another value than their default and the paper's) with ``outlier_alpha=inf``, which turns
    the outliers off (``outlier_bound=inf`` is no box, as None)."""
    if outlier_alpha is None or isinstance(outlier_alpha, str) or \
            not math.isinf(float(outlier_alpha)):
        return
    refuse_set_by_hand({name: value for name, value in set_by_hand.items()
                        if not (name == "outlier_bound" and value == math.inf)},
                       "applies to the outliers, which outlier_alpha=inf turns off (no outlier "
                       "part)", "give a finite outlier_alpha", "outlier_alpha=inf")


def check_group_size(group_alpha: float, set_by_hand: Mapping) -> None:
    """Refuse ``group_size`` in ``set_by_hand`` without the group lasso (``group_alpha=0``),
    whose groups it sizes."""
    if group_alpha == 0:
        refuse_set_by_hand(set_by_hand, "sizes the groups of the group lasso, which "
                           "group_alpha=0 turns off", "give group_alpha > 0",
                           f"group_alpha={group_alpha!r}")


def check_constraint_weights(constraint: str, gamma1: float, gamma2: float,
                             set_by_hand: Mapping) -> None:
    """Refuse ``gamma1``, ``gamma2`` in ``set_by_hand`` (set to another value than their
    defaults) with a constraint set other than ``"elasticnet"``, whose weights they are; and
    ``"elasticnet"`` with both 0."""
    if constraint == "elasticnet":
        if gamma1 == gamma2 == 0:
            raise ValueError("constraint='elasticnet' needs gamma1 > 0 or gamma2 > 0")
        return
    refuse_set_by_hand(set_by_hand, f"is a weight of the elastic-net set, which "
                       f"constraint={constraint!r} does not use", "pick constraint='elasticnet'",
                       f"constraint={constraint!r}")


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

#: ``outlier_alpha="auto"`` of the online learner codes each sample at its own weight: the
#: smaller of ``SAMPLE_ALPHA_CAP`` times the learned weight above (2.5 residual scales, at
#: most 0.5 data units, which ``outlier_alpha_`` reports: so at most 1 data unit here) and
#: ``SAMPLE_RESIDUAL_SCALES`` times the sample's own residual scale (the MAD of its residuals
#: under a rough code of ``ROUGH_CODE_ITER`` iterations at the cap, over its nonzero entries),
#: as OnlineRobustPCA's ``"auto"`` does. The cap applies where a sample's residuals are large:
#: a corrupted sample (its rough code pulled by the corruption) or structure not learned yet,
#: whose detail a larger weight leaves to the codes (fewer false outliers); a sample the
#: dictionary explains closely comes back down towards the former weight (200 patches with
#: weak blocks, fitted: 0.19 data units on average on the clean half, 0.27 on the corrupted
#: half, the cap 0.30).
#: Measured on every weak and strong cell of ``benchmarks/bench_robust.py`` with the robust
#: statistics of :meth:`RobustNMFAlgorithm.robust_statistics` (docs/robustness_history.md,
#: "third round"):
#: +0.85 dB on average, from -0.51 to +3.6 dB per cell; 3 residual scales cost clean faces
#: 0.4 dB, 5 and 6 lost more on strong blocks; without the robust statistics the per-sample
#: weight changed nothing (the cap of 0.5 data units was below 4 residual scales).
SAMPLE_RESIDUAL_SCALES = 4.0
SAMPLE_ALPHA_CAP = 2.0
ROUGH_CODE_ITER = 5
#: the robust statistics (:meth:`RobustNMFAlgorithm.robust_statistics`) flag the refit
#: residual at this many times each sample's weight: a little above the coding step's weight,
#: so that less of a clean sample's detail is replaced by the model (1.0: clean faces and
#: digits 0.49 and 0.50 dB below plain OnlineNMF, at the limit a test holds; 1.1: 0.46 and
#: 0.42; 1.25: structured corruption 0.25 dB lower on average)
REFLAG_WEIGHT = 1.1
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
    return usable_scale(float(data_scale) if sums is None else sums[0] / sums[1], like=X)


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


@dataclass(frozen=True, eq=False)
class RobustNMFOptions:
    """The options of :class:`RobustNMFAlgorithm`
    (:class:`~tensorstream.learners.robust_nmf.RobustOnlineNMF`'s parameters of the same names
    say what each means; ``kappa``, ``accelerated`` and ``rho`` are its ``solver_params``, of
    which only the chosen solver's are read)."""

    n_components: int
    init: Any = "random"
    weights: Any = 0.5
    outlier_alpha: float | str | None = "auto"
    outlier_alpha_scale: float = 1.0
    #: the coding step's penalties but its outlier weight, which :meth:`RobustNMFAlgorithm.
    #: penalties` sets from ``outlier_alpha`` and ``outlier_alpha_scale``
    penalties: RobustPenalties = RobustPenalties(outlier_bound=None)
    data_scale: float | str = "auto"
    solver: str = "admm"
    # the solvers' defaults are SOLVER_PARAMS's (only the chosen solver's are read)
    kappa: float = SOLVER_PARAMS["pgd"]["kappa"]
    rho: float = SOLVER_PARAMS["admm"]["rho"]
    accelerated: bool = SOLVER_PARAMS["pgd"]["accelerated"]
    code_init: str = "uniform"
    outlier_init: str = "gross"
    code_tol: float = 1e-3
    code_max_iter: int = 20
    constraint: str = "l2ball"
    gamma1: float = 0.0
    gamma2: float = 2.0
    dict_l1: float = 0.0
    dict_l2: float = 0.0
    dict_tol: float = 1e-4
    dict_passes: int = 200


def _surrogate_constant(X: Any, explained: Any, H: Any, E: Any, penalties: RobustPenalties,
                        scale: float) -> float:
    """The engine's surrogate constant of a batch at unit data scale (twice the paper's
    ``c_t``: the mean of ``||explained||^2`` plus twice the penalties), in the data's units."""
    sq_norms = tl.sum(tl.reshape(explained * explained, (X.shape[0], -1)), axis=1)
    extra = outlier_penalty(E, penalties) + code_penalty(H, penalties)
    return float(tl.mean(sq_norms + 2 * extra)) * (scale * scale)


class RobustNMFAlgorithm(SurrogateCP):
    """Online NMF with outliers (ONMFO) as a configuration of the engine: robust codes and
    outliers (PGD or ADMM), the surrogate statistics of ``X - E``, and the dictionary step of
    the surrogate (PGD or ADMM, warm-started) on the chosen constraint set.

    Parameters
    ----------
    options : RobustNMFOptions
    residual_scale : float or None, default None
        The residual scale learned with ``outlier_alpha="auto"`` (:meth:`at_state` gives it);
        None: a given ``outlier_alpha``.
    """

    nonnegative = True
    scalar_statistics = ("residual_scale",)

    def __init__(self, options: RobustNMFOptions, residual_scale: float | None = None):
        self.options = options
        self.weights = make_weights(options.weights)
        # learned from the batches with outlier_alpha="auto" (at_state gives it); None: a
        # given outlier_alpha
        self.residual_scale = residual_scale

    @property
    def learns_residual_scale(self) -> bool:
        return self.options.outlier_alpha == "auto"

    def at_state(self, state: Any) -> RobustNMFAlgorithm:
        """The algorithm coding at the residual scale ``state`` learned (``"auto"``). A state
        without one was fitted with a given weight and switched to ``"auto"`` since
        (``set_params``): it learns one from where a fit starts, the cap."""
        if not self.learns_residual_scale:
            return self
        sigma = (state.statistics or {}).get("residual_scale")
        return RobustNMFAlgorithm(self.options, MAX_RESIDUAL_SCALE if sigma is None else sigma)

    def initial_statistics(self, sample_shape: tuple, R: int, context: dict) -> dict:
        """The surrogate's zero statistics, and the first residual scale (``"auto"``)."""
        statistics = super().initial_statistics(sample_shape, R, context)
        if self.learns_residual_scale:
            statistics["residual_scale"] = MAX_RESIDUAL_SCALE
        return statistics

    def penalties(self, n_features: int) -> RobustPenalties:
        """The coding step's penalties, with the outlier weight the rule gives now."""
        p = self.options
        return dataclasses.replace(p.penalties, outlier_alpha=_default_outlier_alpha(
            p.outlier_alpha, p.outlier_alpha_scale, n_features, self.residual_scale))

    def scale_sums(self, X: Any, mask: Any = None) -> tuple[float, float] | None:
        """The first batch's mean absolute (observed) entry, as a sum and a count (None when
        declared)."""
        return scale_sums(X, self.options.data_scale, mask)

    def declared_scale(self) -> float:
        return float(self.options.data_scale)

    def project(self, U: Any) -> Any:
        """The unit ball's nonnegative part, then the chosen constraint set (what a
        re-initialised atom needs: it left the set for the ball alone)."""
        p = self.options
        ball = project_columns(U, nonnegative=True, column_bound=1.0)
        return dictionary_projection(p.constraint, p.gamma1, p.gamma2)(ball)

    def initial_loadings(self, X: Any, context: dict, rng: Any, mask: Any = None) -> list:
        """An init array or list, or ``P_C`` of U[0, 1) entries (the paper's ``W_0``)."""
        p = self.options
        loadings = loadings_from_init(p.init, tuple(X.shape[1:]), p.n_components,
                                      tl.get_backend(), context)
        if loadings is None:
            loadings = SurrogateCP.initial_loadings(self, X, context, rng)
        project = dictionary_projection(p.constraint, p.gamma1, p.gamma2)
        return [project(U) for U in loadings]

    def encode(self, X: Any, loadings: list, scale: float, mask: Any = None) -> Codes:
        """Codes and outliers of a batch; the statistics see ``X - E`` (with ``"auto"``, the
        robust statistics of :meth:`batch_sums`).

        With ``"auto"`` every sample is coded at its own outlier weight, its saturated
        entries at less (:meth:`outlier_weights`).
        With a ``mask``, ``X`` (zeroed at the boundary) and ``E`` are 0 on missing entries, so
        ``explained`` is too: ``B`` and ``c`` see the observed entries only.
        """
        p = self.options
        penalties = self.penalties(int(np.prod(X.shape[1:])))
        raw, X = X, X / scale  # code at unit scale: every threshold is in the data's units
        H0, E0 = coding_start(X, int(loadings[0].shape[1]), p.code_init, p.outlier_init)
        E0 = project_outliers(E0, penalties)  # a gross start within the box and signs
        if self.learns_residual_scale and penalties.has_outliers:
            # the weight "auto" learned, raised to the cap of the per-sample weights
            cap = dataclasses.replace(
                penalties, outlier_alpha=SAMPLE_ALPHA_CAP * penalties.outlier_alpha)
            penalties = dataclasses.replace(cap, sample_alpha=self.outlier_weights(
                X, loadings, cap, H0, E0, mask))
        coding = self._code(X, loadings, penalties, H0, E0, mask)
        H, E = coding.codes, coding.outliers
        robust = self.residual_scale is not None and self.learns_residual_scale
        # the robust statistics (batch_sums) compute their own constant: none here for them
        constant = 0.0 if robust and penalties.sample_alpha is not None else \
            _surrogate_constant(X, X - E, H, E, penalties, scale)
        E = E * scale
        losses = coding.losses * (scale * scale)
        largest = float(tl.max(tl.abs(raw))) if tl.shape(raw)[0] else 0.0
        if not math.isfinite(largest * largest * float(np.prod(X.shape[1:]))):
            # the statistics square the codes, at the data's scale: without a box the outliers
            # can absorb such a batch at a finite loss, so say that the arithmetic overflows
            losses = losses + float("inf")
        work = None
        if robust:
            # what batch_sums needs again: the penalties each sample was coded with
            work = penalties
        return Codes(codes=H * scale, explained=raw - E, losses=losses, constant=constant,
                     outliers=E, work=work)

    def _code(self, X: Any, loadings: list, penalties: RobustPenalties, H0: Any, E0: Any,
              mask: Any, max_iter: int | None = None):
        """:func:`~tensorstream.coders.robust.robust_code` with the options' solver and
        stopping rule (``max_iter``: another cap)."""
        p = self.options
        options = dict(H0=H0, E0=E0, tol=p.code_tol,
                       max_iter=p.code_max_iter if max_iter is None else max_iter)
        if mask is not None:
            options.update(mask=mask)
        if p.solver == "pgd":
            options.update(kappa=p.kappa, accelerated=bool(p.accelerated))
        else:
            options.update(rho=p.rho)
        return robust_code(X, loadings, penalties, solver=p.solver, **options)

    def outlier_weights(self, X: Any, loadings: list, penalties: RobustPenalties, H0: Any,
                        E0: Any, mask: Any = None) -> Any:
        """The coding step's outlier weights with ``"auto"`` (``X`` at unit data scale), one
        rough code of ``ROUGH_CODE_ITER`` iterations at the cap ``penalties.outlier_alpha``
        serving both parts: each sample's weight, shape ``(b,)``, the smaller of the cap and
        ``SAMPLE_RESIDUAL_SCALES`` times the sample's residual scale (the MAD of ``x - W h``
        over its nonzero observed entries); shaped like ``X`` where some sample has
        :func:`saturated_entries`, which weigh ``SATURATED_WEIGHT`` times its weight.

        A sample the dictionary explains closely gets a weight near its residuals' own scale;
        one whose residuals are large (a corruption that pulls the rough code, a random start,
        structure not learned yet) keeps the cap, so that the first steps do not call the
        data's own structure an outlier (measured: ``SAMPLE_RESIDUAL_SCALES``).
        """
        fit = self._rough_fit(X, loadings, penalties, H0, E0, mask)
        weights = self._weights_of(X, fit, penalties.outlier_alpha, mask)
        saturated = saturated_or_none(X, fit, mask)
        if saturated is None:
            return weights
        per_entry = tl.reshape(weights, (-1,) + (1,) * (tl.ndim(X) - 1)) + X * 0
        return tl.where(saturated, SATURATED_WEIGHT * per_entry, per_entry)

    def _rough_fit(self, X: Any, loadings: list, penalties: RobustPenalties, H0: Any, E0: Any,
                   mask: Any) -> Any:
        """``W h`` under a rough code of ``ROUGH_CODE_ITER`` iterations at the cap."""
        rough = self._code(X, loadings, penalties, H0, E0, mask, max_iter=ROUGH_CODE_ITER)
        return reconstruct(loadings, rough.codes)

    def _weights_of(self, X: Any, fit: Any, cap: float, mask: Any) -> Any:
        """Each sample's weight from its rough ``fit``: ``SAMPLE_RESIDUAL_SCALES`` of its
        residual scales, within the cap."""
        b = tl.shape(X)[0]
        flat = tl.reshape(X, (b, -1))
        if mask is not None:
            mask = tl.reshape(tl.tensor(mask, **tl.context(flat)), (b, -1))
        # outlier_alpha_scale moves both terms: the cap came with it (_default_outlier_alpha)
        factor = SAMPLE_RESIDUAL_SCALES * float(self.options.outlier_alpha_scale)
        scales = held_residual_scales(flat, tl.reshape(fit, (b, -1)), mask) * factor
        return tl.clip(scales, _RESIDUAL_SCALE_FLOOR * cap, cap)

    def batch_sums(self, X: Any, coded: Codes, mask: Any, loadings: list,
                   scale: float) -> dict:
        """The surrogate's sums, and the batch's part of the residual scale (``"auto"``).

        With ``"auto"`` the sums are the robust statistics of :meth:`robust_statistics`."""
        if coded.work is None:
            return super().batch_sums(X, coded, mask, loadings, scale)
        if coded.work.sample_alpha is None:  # no outliers (a weight that overflowed to inf)
            residuals = X / scale - reconstruct(loadings, coded.codes / scale)
            return {**super().batch_sums(X, coded, mask, loadings, scale),
                    **residual_sums(residuals, mask, self.residual_scale)}
        coded, residual = self.robust_statistics(X, coded, mask, loadings, scale)
        return {**super().batch_sums(X, coded, mask, loadings, scale), **residual}

    def robust_statistics(self, X: Any, coded: Codes, mask: Any, loadings: list,
                          scale: float) -> tuple[Codes, dict]:
        """What the dictionary step learns from a batch with ``"auto"``, and the batch's part
        of the residual scale: ``(codes, residual sums)``.

        The codes are refit to the entries the coding step did not flag (no outliers, the
        others missing: the debiasing step of an l1 fit, whose shrinkage leaves
        ``outlier_alpha`` of every flagged entry pulling the codes towards the corruption),
        the outliers flagged again from the refit residual at ``REFLAG_WEIGHT`` times each
        sample's weight, and the
        dictionary step sees the sample where nothing is flagged and the model ``W h`` where
        something is (not ``x - e``, which keeps the weight's part of every outlier: a block
        or a stripe on half the samples was learned into the dictionary through it).
        ``transform`` keeps the coding step alone: the refit changes what is learned, not how
        a sample is coded.
        """
        penalties = coded.work
        X = X / scale
        H, E = coded.codes / scale, coded.outliers / scale
        kept = indicator(E == 0, X)
        if mask is not None:  # the batch's context once: every use below reads it
            mask = tl.tensor(mask, **tl.context(X))
            kept = kept * mask
        free = dataclasses.replace(penalties, outlier_alpha=math.inf, sample_alpha=None)
        H = self._code(X, loadings, free, H, None, kept).codes
        fit = reconstruct(loadings, H)
        residuals = X - fit
        E = outlier_step(residuals, dataclasses.replace(
            penalties, sample_alpha=penalties.sample_alpha * REFLAG_WEIGHT))
        if mask is not None:
            E = E * mask
        explained = tl.where(E == 0, X, fit)  # X (and so this) is 0 on missing entries
        constant = _surrogate_constant(X, explained, H, E, penalties, scale)
        robust = Codes(codes=H * scale, explained=explained * scale, losses=coded.losses,
                       constant=constant, outliers=E * scale)
        # x - W h at the refit codes, outliers included (winsorised where they begin)
        return robust, residual_sums(residuals, mask, self.residual_scale)

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
        p = self.options
        # the step at unit data scale (A, B and c scale as its square), so that rho, the
        # penalties and the stopping rule mean the same whatever the data's units
        unit = scale * scale
        new, _ = surrogate_solver_step(
            loadings, statistics["A"] / unit, statistics["B"] / unit, statistics["c"] / unit,
            solver=p.solver,
            project=dictionary_projection(p.constraint, p.gamma1, p.gamma2), l1=p.dict_l1,
            l2=p.dict_l2, kappa=p.kappa, rho=p.rho, tol=p.dict_tol, max_iter=p.dict_passes,
            radius=None, radius_mode="frobenius")
        return new

    def info(self, t: int, w: float | None, n: int) -> dict:
        return {"weight": w, "radius": None}
