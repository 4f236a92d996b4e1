"""OnlineMaxNormMD: online max-norm regularized matrix decomposition (Shen, Xu & Li 2014).

A sample ``z`` (a row of the batch, ``p`` features) is split into a low-rank part ``L r`` and a
sparse corruption ``e``; the basis ``L`` (``p x d``) is learned online from the surrogate

    (1/n) sum_i [1/2 ||z_i - L r_i - e_i||^2 + outlier_alpha ||e_i||_1]
        + norm_alpha/(2n) ||L||_{2,inf}^2,      ||r_i||_2 <= 1,

which is MRMD with the max-norm ``||X||_max`` written as "unit-ball coefficients, penalized
largest row norm of the basis" (Proposition 1). The paper writes ``lambda1`` for
``norm_alpha`` and ``lambda2`` for ``outlier_alpha``. It is the two-mode case of the CP-dictionary
engine (the loop and statistics of :class:`~tensorstream.learners.ocpdl.OnlineCPDL`): the basis
is the single loading ``loadings_[0]``, the coefficients are the codes, and only two parts of the
configuration (:class:`RobustMatrixAlgorithm`) differ:

* ``encode``: ``(r, e)`` per sample by block coordinate descent with the ball constraint
  (:func:`tensorstream.coders.maxnorm.robust_code`); the statistics see ``explained = z - e``, so
  the engine's ``A = mean r r^T``, ``B = mean (z - e) r^T`` are the paper's statistics;
* ``update``: Gauss-Seidel column sweeps with the max-norm subgradient
  (:func:`tensorstream.steps.surrogate.penalized_column_bcd`) or proximal gradient steps.

Sums vs means: the paper accumulates ``A_t = sum r r^T`` with the penalty ``norm_alpha``; the engine
keeps weighted means. Dividing the paper's surrogate by ``n`` shows that the penalty (and the
basis-step jitter) must then be scaled by the weight of one sample, ``kappa_t = w_t / b_t``
(``1/n`` for the default ``1/t`` weights with batches of one): the same update exactly.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import tensorly as tl

from ..coders.maxnorm import BALL_SOLVERS, NOISE_MODELS, RobustCodes, robust_code
from ..core.backend import to_numpy, using
from ..core.constraints import project_columns
from ..core.validation import (
    ARRAY,
    CALLABLE,
    NONE,
    SEQUENCE,
    Instance,
    Interval,
    Options,
)
from ..engine import Algorithm, Codes
from ..engine.state import OnlineState
from ..schedules import checked_weight, make_weights
from ..steps.surrogate import max_norm_prox_gradient, penalized_column_bcd, surrogate_value
from ._base import SHARED_CONSTRAINTS, OnlineLearner
from ._output import replace_flagged

VARIANTS = ("authors", "paper")
BASIS_SOLVERS = ("bcd_subgrad", "prox_grad")
INITS = ("random", "orthogonal")


class RobustMatrixLearner(OnlineLearner):
    """What OMRMD and OR-PCA share: matrix samples split into ``L r + e``, masks, inits.

    Not used directly: subclasses name their algorithm (``_algorithm_class``, a
    :class:`RobustMatrixAlgorithm`), which says how ``r`` is constrained and how the basis moves.
    """

    _algorithm_class: type
    _renamed_parameters = {"column_norm_bound": "column_bound", "inner_tol": "code_tol",
                           "max_inner_iter": "code_max_iter", "mode": "variant",
                           "max_ball_iter": "ball_max_iter", "lambda1": "norm_alpha",
                           "lambda2": "outlier_alpha"}
    _renamed_values = {("init", "rand"): "random", ("init", "orth_randn"): "orthogonal"}

    # -- parameters ----------------------------------------------------------------------------

    def _algorithm(self) -> RobustMatrixAlgorithm:
        return self._algorithm_class(self._params())

    _parameter_constraints = {
        **SHARED_CONSTRAINTS,
        "norm_alpha": [Interval("real", 0, None, closed="neither"), NONE],
        "outlier_alpha": [Interval("real", 0, None, closed="neither"), Options("auto"), NONE],
        "column_bound": [Interval("real", 0, None, closed="neither"), Options("auto"), NONE],
        "data_scale": [Interval("real", 0, None, closed="neither"), Options("auto")],
        "code_tol": [Interval("real", 0, None)],
        "code_max_iter": [Interval("int", 1, None), NONE],
        "init": [Options(*INITS), ARRAY, SEQUENCE],
        "weights": [Instance("a schedule name", str), Interval("real", 0, 1, closed="right"),
                    CALLABLE],
    }

    @classmethod
    def _renamed(cls, params: dict) -> dict:
        """Checkpoints written before ``data_scale`` existed resume as they ran: in raw units
        (``data_scale=1.0``), with ``column_bound="auto"`` meaning what it meant then."""
        params = super()._renamed(params)
        if "data_scale" not in params:
            params["data_scale"] = 1.0
            if params.get("column_bound") == "auto":
                params["column_bound"] = cls._algorithm_class.legacy_column_bound(params)
        return params

    @property
    def scale_(self) -> float:
        """The data scale (``data_scale``) the thresholds and the column bound are in units of."""
        self._check_fitted()
        return float(self.state_.scale)

    def _check_rules(self) -> None:
        if not isinstance(self.init, str):
            init_matrix(self.init)  # a list must hold one matrix
        make_weights(self.weights)  # validates the schedule's type (values: at every step)
        if self.code_tol == 0 and self.code_max_iter is None:
            raise ValueError("code_tol=0 with code_max_iter=None would code forever (a sample "
                             "stops when its iterates move by less than code_tol); give a "
                             "positive code_tol or a code_max_iter")

    def _nonnegative_data(self) -> bool:
        return False

    def _check_samples(self, X: Any, name: str) -> None:
        if len(X.shape) != 2:
            raise ValueError(f"{name} must be a matrix of shape (n_samples, n_features), got "
                             f"shape {tuple(X.shape)}")
        if not self._fitted and self.n_components > X.shape[1]:
            raise ValueError(f"n_components={self.n_components} exceeds the dimension of the "
                             f"samples (n_features={X.shape[1]}); use n_components <= "
                             f"{X.shape[1]}")

    # -- using the basis -----------------------------------------------------------------------

    @property
    def components_(self) -> Any:
        """The basis as rows, shape ``(n_components, n_features)`` (scikit-learn's layout)."""
        self._check_fitted()
        with using(self.backend_):
            return tl.transpose(self.loadings_[0])

    def outliers(self, X: Any, mask: Any = None) -> Any:
        """The sparse corruption ``E`` of ``X`` under the learned basis, shape ``(n, p)``
        (labelled like ``X`` when it is a DataArray).

        Zero at missing entries (nothing is known there).
        """
        _, coded, _, relabel = self._coded_parts(X, mask)
        return relabel(coded.outliers)

    def denoise(self, X: Any, mask: Any = None) -> Any:
        """``X`` with its sparse corruption removed: entries the model calls corrupt
        (``E != 0``) or that are missing are replaced by the low-rank part ``L r``, the others
        stay as observed (labelled like ``X`` when it is a DataArray).

        The low-rank part alone is ``inverse_transform(transform(X))``.
        """
        X, coded, mask, relabel = self._coded_parts(X, mask)
        with using(self.backend_):
            return relabel(replace_flagged(X, coded.low_rank, coded.outliers, mask))

    def impute(self, X: Any, mask: Any = None) -> Any:
        """``X`` with its missing entries replaced by the model's low-rank part ``L r``
        (labelled like ``X`` when it is a DataArray)."""
        X, coded, mask, relabel = self._coded_parts(X, mask)
        if mask is None:
            return relabel(X)
        with using(self.backend_):
            return relabel(X * mask + coded.low_rank * (1 - mask))

    def _coded_parts(self, X: Any, mask: Any) -> tuple[Any, RobustCodes, Any, Any]:
        """The checked samples, their codes, the mask, and the function that labels a result
        of the samples' shape like ``X`` (the identity for unlabelled ``X``)."""
        self._check_fitted()
        data, mask, layout = self._checked_input(X, mask)
        with using(self.backend_):
            coded = self._algorithm().robust_codes(data, self.loadings_[0], self.scale_, mask)
        return data, coded, mask, self._as_given(X, layout)

    def surrogate_value(self) -> float:
        """The paper's surrogate ``g_t`` (eq. (3.1), per-sample mean) at the current basis.

        The penalty weight uses one sample's share ``w_t / b`` with ``b`` the mean batch size
        (exact for batches of equal sizes).
        """
        stats = self.statistics_
        algorithm = self._algorithm()
        norm_alpha, _ = algorithm.alphas(self.loadings_[0].shape[0])
        t = self.n_steps_
        kappa = checked_weight(algorithm.weights, t) * t / self.n_samples_seen_
        with using(self.backend_):
            return 0.5 * surrogate_value(stats["A"], stats["B"], stats["c"], self.loadings_) + \
                kappa * norm_alpha * algorithm.penalty_value(self.loadings_[0])


def init_matrix(init: Any) -> Any:
    """The basis given as ``init`` (an array, or a list holding one)."""
    if isinstance(init, (list, tuple)) and len(init) == 1:
        init = init[0]
    if not (hasattr(init, "shape") and len(tuple(init.shape)) == 2):
        raise ValueError(f"init must be one of {INITS}, a (n_features, n_components) array "
                         f"or a list holding one, got {init!r}")
    return init


def sample_scale_sums(X: Any, mask: Any = None, *,
                      nonzero: bool = False) -> tuple[float, float]:
    """``(sum, count)`` of the samples' median absolute entries: their mean is the data scale.

    A median per sample ignores a corruption of fewer than half of its entries (however
    large), and a mean over samples adds up across the shards of a batch on a cluster. A
    sample whose median is zero (sparse data) counts with its mean absolute entry. With a
    ``mask``, a sample's median and mean are over its observed entries (samples with none
    do not count). With ``nonzero=True`` they are over its nonzero (observed) entries: the
    typical size of what the sample holds, not of its background (a digit is half zeros,
    whose median is a few times smaller than its strokes); all-zero samples do not count.
    """
    if nonzero:
        data = to_numpy(X)
        kept = data != 0
        if mask is not None:
            kept &= to_numpy(mask).astype(bool)
        # rows without a nonzero entry count nowhere, so that shards add up to their batch
        return _observed_scale_sums(data, kept)
    if mask is not None:
        return _observed_scale_sums(to_numpy(X), to_numpy(mask).astype(bool))
    magnitudes = tl.sort(tl.abs(X), axis=1)
    p = int(tl.shape(X)[1])
    medians = (magnitudes[:, (p - 1) // 2] + magnitudes[:, p // 2]) / 2
    medians = tl.where(medians > 0, medians, tl.mean(magnitudes, axis=1))
    return float(tl.sum(medians)), float(tl.shape(X)[0])


def _observed_scale_sums(X: np.ndarray, observed: np.ndarray) -> tuple[float, float]:
    """:func:`sample_scale_sums` over the observed entries (the first batch only: numpy)."""
    counts = observed.sum(axis=1)
    rows = counts > 0
    magnitudes = np.sort(np.where(observed, np.abs(X), np.inf), axis=1)[rows]
    counts = counts[rows]
    low = np.take_along_axis(magnitudes, ((counts - 1) // 2)[:, None], axis=1)[:, 0]
    high = np.take_along_axis(magnitudes, (counts // 2)[:, None], axis=1)[:, 0]
    medians = (low + high) / 2
    means = np.where(observed[rows], np.abs(X[rows]), 0.0).sum(axis=1) / counts
    medians = np.where(medians > 0, medians, means)
    return float(medians.sum()), float(rows.sum())


_FIRST_STEP = OnlineState(loadings=[], statistics=None)  # what data_scale sees at step 1


class RobustMatrixAlgorithm(Algorithm):
    """Robust matrix decomposition as a configuration of the engine: ``(r, e)`` codes by
    block coordinate descent, the statistics of ``z - e``, and a penalized basis step.

    Subclasses say how ``r`` is regularized (:meth:`coder_options`) and how the basis moves
    (:meth:`basis_step`, :meth:`penalty_value`).

    Parameters
    ----------
    params : namespace
        The learner's parameters.
    """

    def __init__(self, params: Any):
        self.params = params
        self.weights = make_weights(params.weights)

    #: ``outlier_alpha="auto"`` in units of the data scale: residual entries beyond about this many
    #: typical entries are corruption. See docs/maxnorm.md for the measurements.
    auto_outlier_alpha = 0.5

    @classmethod
    def legacy_column_bound(cls, params: dict) -> float | None:
        """What ``column_bound="auto"`` meant before ``data_scale`` existed (raw units)."""
        return params.get("column_bound")

    def column_bound_of(self, n_features: int) -> float | None:
        """The bound on the basis' column norms in units of the data scale (None: unbounded)."""
        bound = self.params.column_bound
        return None if bound is None else float(bound)

    def project_loading(self, U: Any, scale: float) -> Any:
        """The basis with its columns within the bound, in the data's units."""
        bound = self.column_bound_of(int(tl.shape(U)[0]))
        if bound is None:
            return U
        return project_columns(U, nonnegative=False, column_bound=bound * scale)

    def reinit_norm(self, scale: float) -> float:
        """The basis is in the data's units (the initial one is drawn times the scale)."""
        return scale

    def alphas(self, n_features: int) -> tuple[float, float]:
        """``(norm_alpha, outlier_alpha)``; ``outlier_alpha`` in units of the data scale.
        ``None`` is
        ``1/sqrt(p)`` (the paper's choice), ``"auto"`` is :attr:`auto_outlier_alpha`."""
        default = 1.0 / math.sqrt(n_features)
        p = self.params
        outlier_alpha = p.outlier_alpha
        if outlier_alpha == "auto":
            outlier_alpha = self.auto_outlier_alpha
        return (default if p.norm_alpha is None else float(p.norm_alpha),
                default if outlier_alpha is None else float(outlier_alpha))

    # -- the data scale ------------------------------------------------------------------------

    def scale_sums(self, X: Any, mask: Any = None) -> tuple[float, float] | None:
        """``(sum, count)`` of the per-sample median absolute (observed) entries (None when
        declared)."""
        if self.params.data_scale != "auto":
            return None
        return sample_scale_sums(X, mask)

    def declared_scale(self) -> float:
        return float(self.params.data_scale)

    def coder_options(self, norm_alpha: float) -> dict:
        """Keyword arguments of :func:`robust_code` that say how ``r`` is regularized."""
        raise NotImplementedError

    def basis_step(self, L: Any, A: Any, B: Any, kappa: float, bound: float | None) -> Any:
        """The basis after one step on the statistics, penalty weighted by ``kappa``, columns
        bounded by ``bound`` (the data's units; None: unbounded)."""
        raise NotImplementedError

    def penalty_value(self, L: Any) -> float:
        """``1/2`` times the basis penalty's norm at ``L`` (before the weight ``norm_alpha``)."""
        raise NotImplementedError

    def robust_codes(self, X: Any, L: Any, scale: float, mask: Any = None) -> RobustCodes:
        """``(r, e)`` of a validated batch (zeros at missing entries) against the basis ``L``.

        The coding runs on ``X / scale`` against ``L / scale``, where every threshold and
        tolerance is in units of the data scale; the parts are returned in the data's units,
        so fitting ``c X`` gives ``c`` times the reconstruction of ``X``.
        """
        norm_alpha, outlier_alpha = self.alphas(X.shape[1])
        coded = robust_code(X / scale, L / scale, outlier_alpha, mask=mask,
                            tol=self.params.code_tol, max_iter=self.params.code_max_iter,
                            **self.coder_options(norm_alpha))
        if scale == 1.0:
            return coded
        squared = scale * scale
        return dataclasses.replace(
            coded, outliers=coded.outliers * scale, low_rank=coded.low_rank * scale,
            losses=coded.losses * squared, penalties=coded.penalties * squared)

    # -- the engine's hooks --------------------------------------------------------------------

    def initial_loadings(self, X: Any, context: dict, rng: Any, mask: Any = None) -> list:
        """U[0, 1] (the authors' Figures 1-4), orth(randn) (their large-scale runs), or the
        given matrix; drawn in numpy so that every backend starts from the same values."""
        p, R, init = X.shape[1], self.params.n_components, self.params.init
        if isinstance(init, str):
            if init == "random":
                L = rng.random((p, R))
            else:
                L = np.linalg.svd(rng.standard_normal((p, R)), full_matrices=False)[0]
            # in units of the data scale, so that fitting c X starts from c L_0
            return [tl.tensor(L * self.data_scale(X, _FIRST_STEP, mask), **context)]
        L = np.asarray(to_numpy(init_matrix(init)), dtype=float)
        if L.shape != (p, R) or not np.all(np.isfinite(L)):
            raise ValueError(f"init must be a finite array of shape {(p, R)}, got shape "
                             f"{L.shape}")
        return [tl.tensor(L, **context)]

    def encode(self, X: Any, loadings: list, scale: float, mask: Any = None) -> Codes:
        """``explained = z - e`` (zero at missing entries) feeds the statistics."""
        coded = self.robust_codes(X, loadings[0], scale, mask)
        explained = X - coded.outliers
        if mask is not None:
            explained = explained * mask
        # constant of the engine's surrogate tr(A G) - 2 <B, W> + c = 2 * mean(loss)
        constant = float(tl.mean(tl.sum(explained * explained, axis=1) + 2 * coded.penalties))
        return Codes(codes=coded.codes, explained=explained, losses=coded.losses,
                     constant=constant, outliers=coded.outliers)

    def weight(self, t: int) -> float:
        return checked_weight(self.weights, t)

    def update(self, sums: dict, statistics: dict, loadings: list, t: int,
               scale: float = 1.0) -> list:
        """The paper's sum-form step, penalties scaled by one sample's weight."""
        kappa = checked_weight(self.weights, t) / sums["n"]
        bound = self.column_bound_of(loadings[0].shape[0])
        return [self.basis_step(loadings[0], statistics["A"], statistics["B"], kappa,
                                None if bound is None else bound * scale)]

    def info(self, t: int, w: float | None, n: int) -> dict:
        return {"weight": w, "radius": None}


class MaxNormAlgorithm(RobustMatrixAlgorithm):
    """OMRMD: coefficients in the unit ball, the basis' largest row norm penalized."""

    divergence_hint = ("The paper's Algorithm 4 without the column projection can blow up while "
                       "the statistic A is rank-deficient: use variant='authors' or "
                       "basis_solver='prox_grad'")

    #: ``column_bound="auto"`` of the ``"authors"`` variant, in units of ``sqrt(p)`` data
    #: scales: with ``||r|| <= 1``, ``||L r||`` can reach the norm of a large sample instead of
    #: shrinking every reconstruction towards zero. One ``sqrt(p)`` is about 0.7 times a typical
    #: Gaussian sample's norm (the median of ``|N(0, 1)|`` is 0.67), and at low rank the norms
    #: spread (rank 3: 46% error on clean data with 1, 21% with 2).
    auto_column_bound = 2.0

    @classmethod
    def legacy_column_bound(cls, params: dict) -> float | None:
        return 1.0 if params.get("variant", "authors") == "authors" else None

    def column_bound_of(self, n_features: int) -> float | None:
        bound = self.params.column_bound
        if bound == "auto":
            if self.params.variant != "authors":
                return None
            return self.auto_column_bound * math.sqrt(n_features)
        return None if bound is None else float(bound)

    def scale_sums(self, X: Any, mask: Any = None) -> tuple[float, float] | None:
        """Medians of the nonzero entries: the column bound is ``2 sqrt(p)`` of these units, and
        the ball ``||r|| <= 1`` shrinks every reconstruction beyond it. Digits' median over
        all entries (half are zero) gave a bound of a third of a digit's norm (14.3 dB on clean
        digits against plain OnlineNMF's 19.3; 22.8 dB with this scale)."""
        if self.params.data_scale != "auto":
            return None
        return sample_scale_sums(X, mask, nonzero=True)

    def coder_options(self, norm_alpha: float) -> dict:
        p = self.params
        return dict(noise=p.noise, ball=True, ridge=p.ridge, ball_solver=p.ball_solver,
                    ball_tol=p.ball_tol, ball_max_iter=p.ball_max_iter)

    def basis_step(self, L: Any, A: Any, B: Any, kappa: float, bound: float | None) -> Any:
        p = self.params
        norm_alpha, _ = self.alphas(L.shape[0])
        if p.basis_solver == "prox_grad":
            return max_norm_prox_gradient(
                L, A, B, max_norm=kappa * norm_alpha, jitter=kappa * p.basis_jitter,
                column_bound=bound, n_iter=3 if p.basis_sweeps is None else p.basis_sweeps)
        return penalized_column_bcd(
            L, A, B, max_norm=kappa * norm_alpha, jitter=kappa * p.basis_jitter,
            column_bound=bound, n_sweeps=1 if p.basis_sweeps is None else p.basis_sweeps)

    def penalty_value(self, L: Any) -> float:
        return 0.5 * float(tl.max(tl.sum(L * L, axis=1)))


class OnlineMaxNormMD(RobustMatrixLearner):
    """Online max-norm regularized matrix decomposition (OMRMD, Shen, Xu & Li 2014).

    Each sample ``z`` is split as ``z = L r + e + noise`` with ``||r||_2 <= 1`` and a sparse
    ``e``; the basis ``L`` carries the max-norm penalty ``norm_alpha/2 ||L||_{2,inf}^2``. Learns a
    low-dimensional subspace from a stream of grossly corrupted samples, one pass, memory
    ``O(p d)`` whatever the number of samples.

    Parameters
    ----------
    n_components : int
        Basis size ``d`` (at most the number of features).
    norm_alpha : float > 0 or None, default 1.0
        Max-norm weight (the paper's ``lambda1``); ``None`` is ``1/sqrt(n_features)`` (the
        paper's choice, in ``paper_params``). With the default column bound the max-norm
        penalty, not the bound, keeps the basis' rows small: on the paper's recipe (p=200,
        d=60, rho=0.3) the expressed variance is 0.81-0.84 with 1.0 against 0.65 with
        ``1/sqrt(p)``; 1.5 loses 0.7 dB on clean faces.
    outlier_alpha : "auto", float > 0 or None, default "auto"
        Weight of the noise penalty (the paper's ``lambda2``), in units of the data scale:
        ``"auto"`` is 0.5, ``None`` ``1/sqrt(n_features)`` (the paper's, meant for
        ``data_scale=1.0``).
    data_scale : "auto" or float, default "auto"
        The unit of the data: ``"auto"`` is the first batch's mean of the samples' median
        absolute entries (``scale_``, kept in checkpoints); ``outlier_alpha``, the column bound
        and the coding's tolerances are in its units, so fitting ``c X`` gives ``c`` times the
        parts of ``X``. A float declares it (1.0: the paper's raw units). See docs/maxnorm.md.
    variant : {"authors", "paper"}, default "authors"
        ``"authors"`` reproduces the authors' released code, which projects every basis column
        onto the unit ball after its update; ``"paper"`` is the paper's Algorithm 4, without it.
        The projection is not in the paper but the method's accuracy at high corruption depends on
        it (the expressed variance drops without it). It also caps ``||L r|| <= sqrt(d)``, so
        reconstructions are shrunk; subspaces (``loadings_``) are unaffected.
    noise : {"l1", "l21", "fro", "none"}, default "l1"
        The penalty ``h(e)``: entrywise sparse corruption (max-norm RPCA, the paper's
        experiments), whole-sample outliers (``||e||_2``), dense ``||e||^2`` noise, or no ``e``.
    column_bound : "auto", float or None, default "auto"
        Bound on every basis column's norm, in units of the data scale; ``"auto"`` is
        ``2 sqrt(n_features)`` in the ``"authors"`` variant (room for a large sample's norm) and
        None in the ``"paper"`` variant. The paper's is 1.0 (``paper_params``).
    basis_solver : {"bcd_subgrad", "prox_grad"}, default "bcd_subgrad"
        Gauss-Seidel column sweeps with the max-norm subgradient (the paper's Algorithm 4), or
        exact proximal-gradient steps on the surrogate (stable while ``A`` is rank-deficient;
        not in the paper: the proximal map of the max-norm penalty, computed exactly).
    basis_sweeps : int or None, default None
        Column sweeps (or prox-gradient steps) per batch; ``None`` is 1 (``bcd_subgrad``, the
        reference code) or 3 (``prox_grad``). Sweeps after the first are kept only while they
        lower the surrogate (the paper's "until convergence" diverges otherwise).
    ridge : float, default 0.01
        Ridge jitter of the unconstrained r-solve ``(L^T L + ridge I)^-1 L^T (z - e)``.
    basis_jitter : float, default 1e-3
        Added to the curvature ``A_jj`` in the basis step (the reference code's guard against
        ``A_jj = 0``), on the paper's sum scale.
    code_tol : float, default 1e-6
        A sample's ``(r, e)`` iterations stop when ``max(||de||, ||dr||) / p < code_tol``.
    code_max_iter : int, default 100
        Cap on those iterations (often reached: it is effectively a hyper-parameter).
    ball_solver : {"newton", "bisection"}, default "newton"
        How the multiplier of ``||r|| <= 1`` is found: the reference code's bisection, or
        Newton's method on the secular equation (same answer to ``ball_tol``, a few steps).
    ball_tol : float, default 1e-3
        Stop when ``| ||r|| - 1 | < ball_tol``.
    ball_max_iter : int, default 60
        Cap on bracket doublings and bisection/Newton steps.
    missing : {None, "nan"}, default None
        ``"nan"``: NaN entries are missing. Missing entries (these, and those a ``mask`` marks)
        never influence anything: ``(r, e)`` fit the observed entries (the ``c -> inf`` limit
        of the paper's OMRMC) and the statistics use observed entries only.
    weights : "balanced", float or callable, default 0.6
        Schedule ``w_t`` of the statistics: a float ``beta`` is ``t^-beta``, ``"balanced"``
        ``1/t`` (every sample counts the same: the paper's, in ``paper_params``). The default
        forgets the first steps' statistics, coded against a random basis that cannot yet
        tell corruption from signal: on the paper's recipe (p=200, d=60, rho=0.3) the
        expressed variance is 0.81-0.86 with it against 0.67-0.70 with ``1/t`` (seeds 0-2).
    batch_size : int, default 10
        Samples per step when ``fit`` is given an array (1: the paper's algorithm; larger
        batches share one basis update and run the coding step vectorised).
    max_iter : int or "auto", default 1
        Passes over an array given to ``fit`` (the paper makes one); ``"auto"`` as in
        :func:`~tensorstream.learners._base.fit_passes`.
    init : {"random", "orthogonal"} or array of shape (n_features, n_components), default "random"
        ``L_0``: U[0, 1] entries (the authors' Figures 1-4), an orthonormalized Gaussian matrix
        (their large-scale runs), or the given matrix (also accepted as a list holding it).
    random_state : int, Generator or None
    backend : {"numpy", "pytorch", None}, default None
    verbose : bool, default False
    callback : callable, optional
        ``callback(learner, info)`` after every step; returning True stops ``fit``.
    reinit_dead_atoms : bool, default True
        As in :class:`OnlineCPDL`.
    device : str, torch.device or None, default None
        Where to compute: ``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a ``torch.device`` runs on
        the pytorch backend there (every batch, of any kind, moved there as it is validated;
        the state kept there); ``None``: where the data are (see ``docs/devices.md``).
    n_threads : int or None, default 1
        BLAS/OpenMP and PyTorch threads inside the public methods
        (:func:`tensorstream.core.backend.limit_threads`; ``None``: the libraries' own).

    Attributes
    ----------
    loadings_ : list holding the basis ``L`` of shape (n_features, n_components)
    components_ : tensor of shape (n_components, n_features)
    statistics_ : dict with ``A`` (d, d) (``(p, d, d)`` once data had missing entries), ``B``
        (p, d) and ``c``
    n_steps_ : int
    n_samples_seen_ : int

    Examples
    --------
    >>> from tensorstream.learners.maxnorm import OnlineMaxNormMD
    >>> from tensorstream.datasets.maxnorm import corrupted_low_rank
    >>> from tensorstream.metrics import expressed_variance
    >>> data = corrupted_low_rank(40, 3, 300, 0.05, random_state=0)
    >>> model = OnlineMaxNormMD(3, random_state=0).fit(data.Z)
    >>> model.components_.shape
    (3, 40)
    >>> expressed_variance(data.U, model.loadings_[0]) > 0.9
    True
    """

    #: The paper's settings (its Section 6), as the authors' code runs them: ``norm_alpha =
    #: outlier_alpha = 1/sqrt(p)`` and unit basis columns in the data's raw units
    #: (``data_scale=1.0``), one sample per step, U[0, 1] ``L_0``, the column projection:
    #: ``OnlineMaxNormMD(d, **OnlineMaxNormMD.paper_params)``. With ``variant="paper"`` (the
    #: paper's Algorithm 4 without the projection) also pass ``column_bound=None``.
    paper_params = {"norm_alpha": None, "outlier_alpha": None, "data_scale": 1.0,
                    "column_bound": 1.0, "variant": "authors", "noise": "l1", "ridge": 0.01,
                    "batch_size": 1, "init": "random", "weights": "balanced"}

    def __init__(self, n_components: int, *, norm_alpha: float | None = 1.0,
                 outlier_alpha: float | str | None = "auto", data_scale: float | str = "auto",
                 variant: str = "authors", noise: str = "l1",
                 column_bound="auto", basis_solver: str = "bcd_subgrad",
                 basis_sweeps: int | None = None, ridge: float = 0.01, basis_jitter: float = 1e-3,
                 code_tol: float = 1e-6, code_max_iter: int = 100,
                 ball_solver: str = "newton", ball_tol: float = 1e-3, ball_max_iter: int = 60,
                 missing: str | None = None, weights=0.6, batch_size: int = 10,
                 max_iter: int = 1, init="random", random_state=None, backend: str | None = None,
                 device: Any = None,
                 verbose: bool = False, callback=None,
                 reinit_dead_atoms: bool = True, n_threads: int | None = 1):
        self._keep_parameters(locals())

    _algorithm_class = MaxNormAlgorithm
    _renamed_parameters = {**RobustMatrixLearner._renamed_parameters, "eps": "ridge"}

    _parameter_constraints = {
        **RobustMatrixLearner._parameter_constraints,
        "variant": [Options(*VARIANTS)],
        "noise": [Options(*NOISE_MODELS)],
        "column_bound": [Interval("real", 0, None, closed="neither"), Options("auto"),
                              NONE],
        "basis_solver": [Options(*BASIS_SOLVERS)],
        "basis_sweeps": [Interval("int", 1, None), NONE],
        "ridge": [Interval("real", 0, None)],
        "basis_jitter": [Interval("real", 0, None)],
        "ball_solver": [Options(*BALL_SOLVERS)],
        "ball_tol": [Interval("real", 0, None, closed="neither")],
        "ball_max_iter": [Interval("int", 1, None)],
    }
