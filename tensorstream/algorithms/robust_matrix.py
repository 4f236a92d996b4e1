"""Robust matrix decomposition for the engine: OMRMD (max-norm) and OR-PCA (nuclear norm).

A sample ``z`` is split into a low-rank part ``L r`` and a sparse corruption ``e``: ``(r, e)``
by block coordinate descent (:func:`tensorstream.coders.maxnorm.robust_code`), the engine's
statistics of ``z - e``, and a penalized step on the basis ``L``. :class:`MaxNormAlgorithm`
keeps ``r`` in the unit ball and penalizes the basis' largest row norm (Shen, Xu & Li 2014);
:class:`RobustPCAAlgorithm` puts a ridge on ``r`` and a Frobenius penalty on the basis (Feng, Xu
& Yan 2013). :mod:`tensorstream.learners.maxnorm` and :mod:`tensorstream.learners.robust_pca`
describe the maths and every option.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorly as tl

from ..coders.maxnorm import RobustCodes, Spectrum, robust_code, robust_low_rank
from ..core.backend import indicator, to_numpy, using
from ..core.constraints import project_columns
from ..engine import Algorithm, Codes
from ..engine.state import OnlineState
from ..schedules import checked_weight, make_weights
from ..steps.surrogate import max_norm_prox_gradient, penalized_column_bcd

INITS = ("random", "orthogonal")


@dataclass(frozen=True, eq=False)
class RobustMatrixOptions:
    """The options that OMRMD and OR-PCA share (:class:`RobustPCAAlgorithm`'s whole set;
    :class:`~tensorstream.learners.robust_pca.OnlineRobustPCA`'s parameters of the same names say
    what each means). ``dict_passes=None``: the dictionary step's own count."""

    n_components: int
    init: Any = "random"
    weights: Any = "balanced"
    norm_alpha: float | None = None
    outlier_alpha: float | str | None = "auto"
    data_scale: float | str = "auto"
    column_bound: float | str | None = "auto"
    code_tol: float = 1e-6
    code_max_iter: int | None = None
    dict_passes: int | None = 1


@dataclass(frozen=True, eq=False)
class MaxNormOptions(RobustMatrixOptions):
    """The options of :class:`MaxNormAlgorithm`: the shared ones and the max-norm's own
    (:class:`~tensorstream.learners.maxnorm.OnlineMaxNormMD`'s parameters of the same names say
    what each means)."""

    noise: str = "l1"
    dict_step: str = "bcd_subgrad"
    ridge: float = 0.01
    basis_jitter: float = 1e-3
    ball_solver: str = "newton"
    ball_tol: float = 1e-3
    ball_max_iter: int = 60


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
    magnitudes = tl.abs(X)
    medians = row_medians(magnitudes)
    medians = tl.where(medians > 0, medians, tl.mean(magnitudes, axis=1))
    return float(tl.sum(medians)), float(tl.shape(X)[0])


def _observed_scale_sums(X: np.ndarray, observed: np.ndarray) -> tuple[float, float]:
    """:func:`sample_scale_sums` over the observed entries (the first batch only: numpy)."""
    counts = observed.sum(axis=1)
    rows = counts > 0
    with using("numpy"):
        medians = row_medians(np.abs(X), observed)[rows]
    counts = counts[rows]
    means = np.where(observed[rows], np.abs(X[rows]), 0.0).sum(axis=1) / counts
    medians = np.where(medians > 0, medians, means)
    return float(medians.sum()), float(rows.sum())


#: the median absolute deviation over this is the standard deviation of normal residuals
_MAD_CONSISTENCY = 0.6744897501960817


def residual_scales(R: Any, mask: Any = None) -> Any:
    """Each row's residual scale, ``median |r| / 0.6745`` over its observed entries
    (``mask``; None: all), shape ``(b,)``: the standard deviation of normal residuals, and
    unmoved by outliers on fewer than half of the entries. A row without observed entries
    gets ``inf`` (nothing says its residuals are small)."""
    return row_medians(tl.abs(R), mask) / _MAD_CONSISTENCY


def held_residual_scales(Z: Any, fit: Any, mask: Any = None) -> Any:
    """Each row's :func:`residual_scales` of ``Z - fit`` over the entries the row holds
    (nonzero, and observed where ``mask`` is given), shape ``(b,)``: a dark border or
    background of exact zeros, which any basis fits exactly, would put the median residual at
    0 and flag the whole image. ``fit`` and ``mask`` have ``Z``'s shape (a row or a column
    would broadcast: every row measured against another fit); the values are the caller's
    to keep finite (the learners refuse NaN and inf in their data by name)."""
    for name, value in (("fit", fit), ("mask", mask)):
        if value is not None and tuple(tl.shape(value)) != tuple(tl.shape(Z)):
            raise ValueError(f"{name} must have Z's shape {tuple(tl.shape(Z))}, got "
                             f"{tuple(tl.shape(value))}")
    held = Z != 0  # row_medians reads held > 0: a boolean serves without a 0/1 copy
    if mask is not None:
        held = held & (mask > 0)
    return residual_scales(Z - fit, held)


def row_medians(values: Any, mask: Any = None) -> Any:
    """Each row's median over its observed entries (``mask > 0``; None: all), shape ``(b,)``
    (``inf`` for a row without any), in ``tl`` operations: one sort of the whole batch."""
    p = int(tl.shape(values)[1])
    if mask is None:
        ordered = tl.sort(values, axis=1)
        return (ordered[:, (p - 1) // 2] + ordered[:, p // 2]) / 2
    observed = mask > 0
    # missing entries sort last; the median sits at each row's own count
    ordered = tl.sort(tl.where(observed, values, values * 0 + float("inf")), axis=1)
    counted = tl.sum(indicator(observed, values), axis=1)
    counts = to_numpy(counted).astype(np.int64)
    # the two middle entries of each row's c (low == high when c is odd), picked from the
    # flattened batch: their mean is the median (a row without any picks its first, inf)
    starts = np.arange(len(counts)) * p
    flat = tl.reshape(ordered, (-1,))
    low = flat[starts + np.maximum(counts - 1, 0) // 2]
    high = flat[starts + counts // 2]
    return tl.where(counted > 0, (low + high) / 2, counted * 0 + float("inf"))


#: ``outlier_alpha="auto"`` of RobustOnlineNMF and of the robust matrix learners (OR-PCA,
#: OMRMD) weighs a sample's saturated entries (:func:`saturated_entries`: a value shared by
#: ``SATURATED_TIES`` or more of its entries at its own largest or smallest observed value,
#: which the rough code misses by more than ``SATURATED_CONTRAST`` times the median of its
#: other entries) at ``SATURATED_WEIGHT`` times the sample's weight: a dead or saturated row
#: of a sensor, a clipped region. Without it the dictionary learned such a stripe as an atom
#: of its own (8 x 8 patches with one stripe on half of them: 6 of 16 atoms held 80-95% of
#: their energy on one row or column, against 1 learned from the clean patches) and flagged
#: 62% of the stripes' entries. Measured for RobustOnlineNMF on benchmarks/bench_robust.py
#: (strong stripes on patches; clean digits, plain OnlineNMF 19.80 dB): weight 0.35 / 0.25 /
#: 0.2 at contrast 2, 18.92 / 19.81 / 19.14 dB and digits 19.61 / 19.20 / 19.13; at contrast
#: 1.75, 0.3 / 0.25 / 0.2 / 0.15: 20.26 / 21.15 / 21.47 / 21.84 and 19.42 / 19.47 / 19.30 /
#: 19.45; contrast 1.5: digits 19.05-19.19. Digits move by 0.3-0.6 dB over seeds 0-5 whatever
#: the setting (means 19.25 without the rule, 19.27 with this one): their ink is at their
#: largest value too, which the model explains as well as the rest (without the contrast
#: test, every tied extreme: 16.21). The same rule in OR-PCA's and OMRMD's thresholds
#: (docs/robustness_history.md, "sixth session"): stripes on patches 17.12 -> 29.80 dB
#: (OR-PCA, weak), blocks +8 to +10, clean digits 22.88 -> 22.61 (OnlineNMF 19.80).
SATURATED_WEIGHT = 0.25
SATURATED_CONTRAST = 1.75
SATURATED_TIES = 2


def saturated_entries(X: Any, fit: Any, mask: Any = None) -> Any:
    """The entries of each sample that look saturated (or dead), shaped like ``X`` (bool):
    those equal to the sample's largest, or its smallest, observed entry, where at least
    ``SATURATED_TIES`` entries share that value and the model ``fit`` misses them (the median
    of their absolute residuals) by more than ``SATURATED_CONTRAST`` times the sample's other
    nonzero observed entries.

    Real-valued data seldom repeat a value exactly but where a sensor clips or a pixel is
    dead: a row of a patch at 0 or at 1 is a tie at the patch's extreme. Data whose extreme is
    their own (the ink of a digit at its largest value, an empty background at 0) tie too, but
    the model explains those entries as well as the rest, which the contrast test asks. Each
    sample is judged on its own entries, so its weights depend on nothing else in the batch.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.2, 0.4, 1.0, 1.0, 0.3, 0.5],   # two entries at its maximum, missed
    ...               [0.2, 0.4, 1.0, 1.0, 0.3, 0.5],   # the same, explained
    ...               [0.2, 0.4, 1.0, 0.9, 0.3, 0.5]])  # one entry at its maximum
    >>> fit = np.array([[0.21, 0.38, 0.5, 0.4, 0.3, 0.52],
    ...                 [0.21, 0.38, 0.98, 1.01, 0.3, 0.52],
    ...                 [0.21, 0.38, 0.5, 0.4, 0.3, 0.52]])
    >>> saturated_entries(X, fit).astype(int)
    array([[0, 0, 1, 1, 0, 0],
           [0, 0, 0, 0, 0, 0],
           [0, 0, 0, 0, 0, 0]])
    """
    saturated = saturated_or_none(X, fit, mask)
    return tl.zeros(tl.shape(X), **tl.context(X)) > 0 if saturated is None else saturated


def saturated_or_none(X: Any, fit: Any, mask: Any = None) -> Any:
    """:func:`saturated_entries`, or None where no entry is saturated (known on the host
    without another read from the device: a caller keeps its per-sample weights then)."""
    for name, value in (("fit", fit), ("mask", mask)):
        if value is not None and tuple(tl.shape(value)) != tuple(tl.shape(X)):
            raise ValueError(f"{name} must have X's shape {tuple(tl.shape(X))}, got "
                             f"{tuple(tl.shape(value))}")
    b = tl.shape(X)[0]
    flat = tl.reshape(X, (b, -1))
    residuals = tl.abs(flat - tl.reshape(fit, (b, -1)))
    observed = flat == flat if mask is None else \
        tl.reshape(tl.tensor(mask, **tl.context(flat)), (b, -1)) > 0
    held = (flat != 0) & observed
    # missing entries (zeroed) are neither extreme nor tied: -inf there before the max
    far = flat * 0 + float("inf")
    # the minimum as the maximum of -X: tl.min(axis=...) returns a pair on pytorch
    extremes = (tl.max(tl.where(observed, flat, -far), axis=1),
                -tl.max(tl.where(observed, -flat, -far), axis=1))
    tied = [(flat == tl.reshape(extreme, (-1, 1))) & observed for extreme in extremes]
    # the medians only where an extreme is tied: real-valued samples seldom tie (a video's
    # frames never do), and sorting their residuals cost OR-PCA a third of its frame rate
    counts = to_numpy(tl.stack([tl.sum(indicator(ties, flat), axis=1) for ties in tied]))
    rows = np.flatnonzero((counts >= SATURATED_TIES).any(axis=0))
    if not rows.size:
        return None
    r = rows.size  # numpy and torch both take an int array as an index
    pairs = [part[rows] for ties in tied for part in (ties, held & ~ties)]
    medians = to_numpy(row_medians(tl.concatenate([residuals[rows]] * 4, axis=0),
                                   tl.concatenate(pairs, axis=0)))  # one read back
    saturated, found = tl.zeros(tl.shape(flat), **tl.context(flat)) > 0, False
    for k, ties in enumerate(tied):
        missed = medians[2 * k * r:(2 * k + 1) * r] > \
            SATURATED_CONTRAST * medians[(2 * k + 1) * r:(2 * k + 2) * r]
        chosen = np.zeros(b, dtype=bool)
        chosen[rows] = missed & (counts[k, rows] >= SATURATED_TIES)
        found = found or bool(chosen.any())
        saturated = saturated | (ties & tl.reshape(
            tl.tensor(chosen, device=tl.context(flat).get("device")), (-1, 1)))
    return tl.reshape(saturated, tl.shape(X)) if found else None


_FIRST_STEP = OnlineState(loadings=[], statistics=None)  # what data_scale sees at step 1

#: the smallest ``outlier_alpha="auto"`` threshold, in data-scale units: on data the basis
#: fits exactly the residuals vanish, and a zero threshold would call every entry an outlier
RESIDUAL_FLOOR = 1e-6


class RobustMatrixAlgorithm(Algorithm):
    """Robust matrix decomposition as a configuration of the engine: ``(r, e)`` codes by
    block coordinate descent, the statistics of ``z - e``, and a penalized basis step.

    Subclasses say how ``r`` is regularized (:meth:`coder_options`) and how the basis moves
    (:meth:`basis_step`, :meth:`penalty_value`).

    Parameters
    ----------
    options : RobustMatrixOptions
        (:class:`MaxNormOptions` for :class:`MaxNormAlgorithm`.)
    """

    def __init__(self, options: RobustMatrixOptions, offset: Any = None):
        self.options = options
        self.weights = make_weights(options.weights)
        # the per-feature offset learned with outlier_alpha="auto" (at_state gives it); None:
        # zero (a given outlier_alpha, or a state fitted before "auto" was set)
        self.offset = offset

    #: ``outlier_alpha="auto"`` in units of the data scale: residual entries beyond about this many
    #: typical entries are corruption. See docs/maxnorm.md for the measurements. It is the
    #: largest threshold: a sample the basis explains well gets a smaller one
    #: (:meth:`residual_thresholds`).
    auto_outlier_alpha = 0.5
    #: ``outlier_alpha="auto"``: a sample's threshold is at most this many of its residual
    #: scales. On the benchmark's video (``benchmarks/bench_robust.py --video``) the
    #: reconstruction's F1 went 0.68 -> 0.94 with 6 (OR-PCA); 4 gave about 0.015 more but
    #: cost 0.9 dB of ``denoise`` on image patches with spikes (it flags more of their
    #: texture), 6 costs at most 0.3 dB on any weak class (docs/robustness.md).
    auto_residual_scales = 6.0
    #: ``outlier_alpha="auto"``: where a sample's threshold is below the cap, the statistics
    #: learn its entries whole up to this many thresholds from the model and leave out
    #: those beyond (:meth:`explained_part`); on the benchmark's video the foreground F1's
    #: mean over seeds 0-9 is 0.934 / 0.954 / 0.961 at 2 / 2.5 / 3, and 4 lost 0.01-0.03
    #: against 3 on each of seeds 0-4 (docs/robustness.md).
    statistics_thresholds = 3.0
    #: ``outlier_alpha="auto"``: at every step the offset (:meth:`offset_increments`) keeps
    #: ``1 - offset_decay`` of itself and adds ``offset_gain`` times the batch's mean clipped
    #: residual. On the benchmark's video (``OnlineRobustPCA``, seeds 0-9, foreground F1) mean
    #: / worst 0.961 / 0.907 without an offset; 0.977 / 0.958 with gain 1 and no decay, but
    #: seed 0 0.987 -> 0.979 (the offset keeps part of the object's last passage); 0.977 /
    #: 0.960 and seed 0 0.985 with these (docs/robustness.md).
    offset_gain = 1.5
    offset_decay = 0.2

    @property
    def learns_offset(self) -> bool:
        """Whether the statistics rule keeps a per-feature offset: with
        ``outlier_alpha="auto"`` and l1 noise, where each sample's threshold follows its
        residuals (:meth:`explained_part`); a given ``outlier_alpha`` (``paper_params``) and
        the other noise models keep the papers' statistics ``z - e``."""
        return self.options.outlier_alpha == "auto" and \
            self.coder_options(1.0)["noise"] == "l1"

    #: the per-feature statistics besides ``B`` (checkpoints store them): the offset, kept
    #: (unchanged, :meth:`accumulate`) while ``set_params`` turns ``"auto"`` off, so that a
    #: state learned with it can be saved and resumes it when ``"auto"`` comes back
    array_statistics = ("offset",)

    def at_state(self, state: OnlineState) -> RobustMatrixAlgorithm:
        """The algorithm with the offset ``state`` learned (``"auto"``; a state without one,
        fitted with a given ``outlier_alpha`` before ``"auto"`` was set, has none yet)."""
        if not self.learns_offset:
            return self
        return type(self)(self.options, (state.statistics or {}).get("offset"))

    def initial_statistics(self, sample_shape: tuple, R: int, context: dict) -> dict | None:
        """The surrogate's zero statistics, and a zero offset (``"auto"``)."""
        statistics = super().initial_statistics(sample_shape, R, context)
        if self.learns_offset:
            statistics["offset"] = tl.zeros(sample_shape, **context)
        return statistics

    def _offset_row(self, like: Any) -> Any:
        """The offset as a ``(1, p)`` row of the backend and context of ``like`` (0 when
        there is none)."""
        offset = self.offset
        if offset is None:
            return 0.0
        if not tl.is_tensor(offset):
            # the state's tensor of another backend: a torch state coded on numpy's route
            # (core.backend.run), which sees the batch's tensors, not the algorithm's
            offset = tl.tensor(to_numpy(offset), **tl.context(like))
        return tl.reshape(offset, (1, -1))

    def column_bound_of(self, n_features: int) -> float | None:
        """The bound on the basis' column norms in units of the data scale (None: unbounded)."""
        bound = self.options.column_bound
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
        p = self.options
        outlier_alpha = p.outlier_alpha
        if outlier_alpha == "auto":
            outlier_alpha = self.auto_outlier_alpha
        return (default if p.norm_alpha is None else float(p.norm_alpha),
                default if outlier_alpha is None else float(outlier_alpha))

    # -- the data scale ------------------------------------------------------------------------

    def scale_sums(self, X: Any, mask: Any = None) -> tuple[float, float] | None:
        """``(sum, count)`` of the per-sample median absolute nonzero (observed) entries
        (None when declared): the typical size of what a sample holds, not of its background.
        Over all entries, data of many exact zeros got a unit far below their content: digits
        (half zeros) a max-norm column bound of a third of a digit's norm (14.3 dB on clean
        digits against plain OnlineNMF's 19.3; 22.8 dB with this scale), and video frames with
        a black border as wide as the picture a unit so small that every lit pixel was an
        outlier (OR-PCA's foreground F1 0.12 against 0.85 without the border; 0.88 with this
        scale)."""
        if self.options.data_scale != "auto":
            return None
        return sample_scale_sums(X, mask, nonzero=True)

    def declared_scale(self) -> float:
        return float(self.options.data_scale)

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

    def robust_codes(self, X: Any, L: Any, scale: float, mask: Any = None,
                     spectrum: Spectrum | None = None) -> RobustCodes:
        """``(r, e)`` of a validated batch (zeros at missing entries) against the basis ``L``.

        The coding runs on ``X / scale`` against ``L / scale``, where every threshold and
        tolerance is in units of the data scale; the parts are returned in the data's units,
        so fitting ``c X`` gives ``c`` times the reconstruction of ``X``. With
        ``outlier_alpha="auto"`` each sample's threshold follows its residuals
        (:meth:`residual_thresholds`). ``spectrum``: :meth:`coding_spectrum` of ``L`` and
        ``scale``, for a caller that codes several batches against them (None: computed).
        """
        return self._thresholded_codes(X, L, scale, mask, spectrum)[0]

    @staticmethod
    def coding_spectrum(L: Any, scale: float) -> Spectrum:
        """The spectrum of the basis the coder sees, ``L / scale`` (no mask), which
        :meth:`robust_codes` of every batch against ``L`` and ``scale`` without a mask can
        share (its basis is the coder's). ``scale`` is a positive finite number: 0 or NaN
        would give a spectrum of NaN, inf one of zeros."""
        if not 0 < float(scale) < math.inf:
            raise ValueError(f"scale must be a positive finite number, got {scale!r}")
        return Spectrum.of(L / scale)

    def _thresholded_codes(self, X: Any, L: Any, scale: float, mask: Any = None,
                           spectrum: Spectrum | None = None) -> tuple[RobustCodes, Any]:
        """:meth:`robust_codes` and the thresholds they were coded at (shaped like ``X``,
        data-scale units: :meth:`residual_thresholds`) with ``outlier_alpha="auto"`` and l1
        noise, None otherwise (one threshold for all)."""
        norm_alpha, outlier_alpha = self.alphas(X.shape[1])
        if spectrum is None:  # one for both codings below: the same basis and mask
            spectrum = Spectrum.of(L / scale, mask)
        Z, basis, options = X / scale, spectrum.basis, self.coder_options(norm_alpha)
        thresholds = None
        if self.options.outlier_alpha == "auto" and options["noise"] == "l1":
            thresholds = self.residual_thresholds(Z, basis, outlier_alpha, options, mask,
                                                  spectrum)
            outlier_alpha = thresholds
        coded = robust_code(Z, basis, outlier_alpha, mask=mask, tol=self.options.code_tol,
                            max_iter=self.options.code_max_iter, spectrum=spectrum, **options)
        return self._in_data_units(coded, scale), thresholds

    @staticmethod
    def _in_data_units(coded: RobustCodes, scale: float) -> RobustCodes:
        """``coded`` (of the data divided by ``scale``) in the data's units."""
        if scale == 1.0:
            return coded
        squared = scale * scale
        return dataclasses.replace(
            coded, outliers=coded.outliers * scale, low_rank=coded.low_rank * scale,
            losses=coded.losses * squared, penalties=coded.penalties * squared)

    def residual_thresholds(self, Z: Any, basis: Any, cap: float, options: dict,
                            mask: Any = None, spectrum: Spectrum | None = None) -> Any:
        """The l1 thresholds (data-scale units), shaped like ``Z`` where some sample has
        saturated entries, else a ``(b, 1)`` column: each sample's, the
        smaller of ``cap`` and :attr:`auto_residual_scales` times the sample's residual scale
        (:func:`residual_scales`), on its entries, and ``SATURATED_WEIGHT`` times it on its
        :func:`saturated_entries` (a dead or saturated row, a clipped region: without it the
        basis learned stripes on patches as its own); both under a rough code: two
        block-coordinate rounds at ``cap`` (the first alone, without outliers, lets a large
        object pull the code: the benchmark's video F1 0.85 against 0.89 for OMRMD).

        A fixed threshold fits every residual below it into the basis: on a video whose
        background the basis already explains to 1% of the data scale, a moving object that
        differs from it by less than ``cap`` (0.5) leaked into the background (F1 of the
        foreground 0.68). Where the basis does not explain a sample yet (a random start,
        structure not learned), its residuals are large and the threshold stays at ``cap``,
        so the first steps do not call the data's own structure an outlier. ``spectrum``:
        ``Spectrum.of(basis, mask)`` when the caller has it (None: computed).
        """
        rough = robust_low_rank(Z, basis, cap, mask=mask, max_iter=2, spectrum=spectrum,
                                **options)
        scales = held_residual_scales(Z, rough, mask) * self.auto_residual_scales
        column = tl.reshape(tl.clip(scales, RESIDUAL_FLOOR, cap), (-1, 1))
        saturated = saturated_or_none(Z, rough, mask)
        if saturated is None:  # one threshold a sample: the coder's cheaper broadcast
            return column
        return tl.where(saturated, SATURATED_WEIGHT * column, column + Z * 0)

    def explained_part(self, X: Any, coded: RobustCodes, thresholds: Any, scale: float,
                       model: Any = None) -> Any:
        """What the statistics learn from a batch (the data's units): ``z - e``, except for
        the samples the basis already explains (``outlier_alpha="auto"`` and a threshold
        below its cap), whose entries are kept whole up to :attr:`statistics_thresholds`
        times the sample's threshold from ``L r + o`` and replaced by ``L r + o`` beyond
        (``o``: the per-feature offset, :meth:`offset_increments`).

        The soft threshold's ``z - e`` keeps the threshold's worth of every flagged entry,
        in the flag's direction: a moving object darker than the background leaks the same
        sign into the basis frame after frame, a streak along its path (the benchmark's
        video: foreground F1 0.86-0.96 over seeds 0-4, ``OnlineRobustPCA``). Cut at a
        threshold of the size of the flag's (1x) the statistics never see the entries where
        the basis is wrong, so its own errors stay (F1 0.77-0.88); at 3x an entry the basis
        misses by a little is learned whole and one far off (the object) not at all
        (0.91-0.99). A sample still at the cap (a basis that explains little: the first
        steps, faces' own detail) keeps ``z - e``: there a flag may be the data's structure.

        Judged against ``L r`` alone, an entry the basis took in wrongly before it explained
        the frames (a part of the moving object in the first steps) is far from every later
        frame and replaced by ``L r`` each time: the error stays (the benchmark's video,
        seeds 4 and 5: F1 0.907 and 0.918, false foreground at the same pixels in every
        frame). The offset grows where the basis misses a feature frame after frame, so that
        the entry comes near ``L r + o`` and is learned whole, and where it is still far the
        statistics learn ``L r + o``, which moves the basis towards the data there too.
        """
        explained = X - coded.outliers
        if thresholds is None:
            return explained
        cap = self.alphas(int(tl.shape(X)[1]))[1]
        reach = tl.where(thresholds < cap, thresholds * (self.statistics_thresholds * scale),
                         thresholds * 0 + float("inf"))
        model = self.model_of(X, coded) if model is None else model
        far = tl.abs(X - model) > reach
        whole = tl.where(thresholds < cap, X, explained)
        return tl.where(far, model, whole)

    def model_of(self, X: Any, coded: RobustCodes) -> Any:
        """``L r + o``: what :meth:`explained_part` and :meth:`offset_increments` judge the
        batch against (``encode`` forms it once for both)."""
        return coded.low_rank + self._offset_row(X)

    def offset_increments(self, X: Any, coded: RobustCodes, thresholds: Any, scale: float,
                          mask: Any = None, model: Any = None) -> dict:
        """The batch's sums that move the offset ``o`` (additive over shards): per feature,
        the sum of the residuals ``z - L r - o`` clipped at each sample's threshold, and
        their count, over the samples the basis explains (a threshold below its cap) and
        their observed entries.

        ``o`` is a statistic of the rule of :meth:`explained_part`, not a part of the model's
        outputs (``transform``, ``inverse_transform``, ``denoise``, ``background`` use ``L r``
        alone): it says where the basis has missed a feature frame after frame, which the
        statistics then correct. Added to ``background`` it cost F1 on the benchmark's video
        (mean of seeds 0-9 0.961 against 0.973 without it, gain 1): at the end of a fit it
        holds part of the moving object's last passage. A moving object covers a feature for
        a few batches, and the clip bounds what each sample adds (one threshold); the decay
        lets what it added fade; a feature the basis keeps missing keeps its offset.
        """
        cap = self.alphas(int(tl.shape(X)[1]))[1]
        residuals = X - (self.model_of(X, coded) if model is None else model)
        reach = thresholds * scale  # each entry's threshold in the data's units
        clipped = tl.clip(residuals, -reach, reach)  # reach >= 0
        counted = indicator(thresholds < cap, thresholds)  # the entries that count
        if mask is not None:
            counted = counted * mask
        count = tl.sum(counted, axis=0)
        if mask is None:  # every entry of a counted sample: the column's sum, per feature
            count = count + tl.zeros((tl.shape(X)[1],), **tl.context(X))
        return {"offset_sum": tl.sum(clipped * counted, axis=0), "offset_count": count}

    def refit_low_rank(self, X: Any, L: Any, scale: float, coded: RobustCodes,
                       mask: Any = None) -> Any:
        """The reconstructions of ``X`` (the data's units) refit to the entries ``coded`` does
        not flag (and ``mask`` observes), without outliers: one exact r-step on those entries
        (the debiasing step of an l1 fit; ``coded.low_rank`` itself under dense or
        whole-sample noise, which leave no entry unflagged). The l1 shrinkage leaves
        ``outlier_alpha`` of every flagged entry in what the code fits, so a large flagged
        region (a moving object) pulls the reconstruction towards itself; the refit does not
        see it. The refit's losses are not computed (``background`` does not read them)."""
        norm_alpha, outlier_alpha = self.alphas(X.shape[1])
        if self.coder_options(norm_alpha)["noise"] not in ("l1", "none"):
            # dense ("fro") or whole-sample ("l21") noise flags every entry of a sample it
            # touches: nothing would be left to refit to
            return coded.low_rank
        options = {**self.coder_options(norm_alpha), "noise": "none"}
        return robust_low_rank(X / scale, L / scale, outlier_alpha,
                               mask=self._unflagged(X, coded, mask), **options) * scale

    @staticmethod
    def _unflagged(X: Any, coded: RobustCodes, mask: Any) -> Any:
        """1 at the entries ``coded`` does not flag and ``mask`` observes, 0 elsewhere."""
        kept = indicator(coded.outliers == 0, X)
        return kept if mask is None else kept * mask

    # -- the engine's hooks --------------------------------------------------------------------

    def initial_loadings(self, X: Any, context: dict, rng: Any, mask: Any = None) -> list:
        """U[0, 1] (the authors' Figures 1-4), orth(randn) (their large-scale runs), or the
        given matrix; drawn in numpy so that every backend starts from the same values."""
        p, R, init = X.shape[1], self.options.n_components, self.options.init
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
        """``explained = z - e`` (zero at missing entries) feeds the statistics; with
        ``outlier_alpha="auto"``, a sample whose threshold follows its residuals gives them
        :meth:`explained_part` instead, and ``work`` holds the offset's sums
        (:meth:`offset_increments`)."""
        coded, thresholds = self._thresholded_codes(X, loadings[0], scale, mask)
        model = None if thresholds is None else self.model_of(X, coded)
        explained = self.explained_part(X, coded, thresholds, scale, model)
        if mask is not None:
            explained = explained * mask
        # constant of the engine's surrogate tr(A G) - 2 <B, W> + c = 2 * mean(loss)
        constant = float(tl.mean(tl.sum(explained * explained, axis=1) + 2 * coded.penalties))
        work = None
        if self.learns_offset and thresholds is not None:
            work = self.offset_increments(X, coded, thresholds, scale, mask, model)
        return Codes(codes=coded.codes, explained=explained, losses=coded.losses,
                     constant=constant, outliers=coded.outliers, work=work)

    def batch_sums(self, X: Any, coded: Codes, mask: Any, loadings: list,
                   scale: float) -> dict:
        """The surrogate's sums, and the offset's (``"auto"``: :meth:`offset_increments`)."""
        sums = super().batch_sums(X, coded, mask, loadings, scale)
        if coded.work is not None:
            sums.update(coded.work)
        return sums

    def accumulate(self, statistics: dict | None, sums: dict, w: float | None) -> dict | None:
        """The surrogate's statistics, and (``"auto"``) the offset: ``1 - offset_decay`` of
        it plus ``offset_gain`` times the batch's mean clipped residual at each feature that
        counted."""
        new = super().accumulate(statistics, sums, w)
        offset = (statistics or {}).get("offset")
        if not self.learns_offset:
            if offset is not None:  # kept for "auto" to resume from (array_statistics)
                new["offset"] = offset
            return new
        if offset is None:  # "auto" set since a fit with a given outlier_alpha: none yet
            B = statistics["B"]
            offset = tl.zeros(tuple(tl.shape(B))[:-1], **tl.context(B))
        count = sums["offset_count"]
        mean = sums["offset_sum"] / tl.where(count > 0, count, count * 0 + 1)
        new["offset"] = (1 - self.offset_decay) * offset + self.offset_gain * mean
        return new

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
                       "the statistic A is rank-deficient: use a column_bound (the "
                       "authors' projection) or dict_step='prox_grad'")

    #: ``column_bound="auto"`` of OMRMD, in units of ``sqrt(p)`` data
    #: scales: with ``||r|| <= 1``, ``||L r||`` can reach the norm of a large sample instead of
    #: shrinking every reconstruction towards zero. One ``sqrt(p)`` is about 0.7 times a typical
    #: Gaussian sample's norm (the median of ``|N(0, 1)|`` is 0.67), and at low rank the norms
    #: spread (rank 3: 46% error on clean data with 1, 21% with 2).
    auto_column_bound = 2.0

    def column_bound_of(self, n_features: int) -> float | None:
        bound = self.options.column_bound
        if bound == "auto":
            return self.auto_column_bound * math.sqrt(n_features)
        return None if bound is None else float(bound)

    def coder_options(self, norm_alpha: float) -> dict:
        p = self.options
        return dict(noise=p.noise, ball=True, ridge=p.ridge, ball_solver=p.ball_solver,
                    ball_tol=p.ball_tol, ball_max_iter=p.ball_max_iter)

    def basis_step(self, L: Any, A: Any, B: Any, kappa: float, bound: float | None) -> Any:
        p = self.options
        norm_alpha, _ = self.alphas(L.shape[0])
        if p.dict_step == "prox_grad":
            return max_norm_prox_gradient(
                L, A, B, max_norm=kappa * norm_alpha, jitter=kappa * p.basis_jitter,
                column_bound=bound, n_iter=3 if p.dict_passes is None else p.dict_passes)
        return penalized_column_bcd(
            L, A, B, max_norm=kappa * norm_alpha, jitter=kappa * p.basis_jitter,
            column_bound=bound, n_sweeps=1 if p.dict_passes is None else p.dict_passes)

    def penalty_value(self, L: Any) -> float:
        return 0.5 * float(tl.max(tl.sum(L * L, axis=1)))


class RobustPCAAlgorithm(RobustMatrixAlgorithm):
    """OR-PCA: a ridge on the coefficients, a Frobenius penalty on the basis."""

    def coder_options(self, norm_alpha: float) -> dict:
        # OR-PCA's nuclear norm puts a ridge norm_alpha/2 ||r||^2 on the coefficients where
        # OMRMD's max-norm has the ball ||r|| <= 1 (Feng, Xu & Yan 2013)
        return dict(noise="l1", ball=False, ridge=norm_alpha)

    #: ``column_bound="auto"``, in units of the data scale (about the reference code's unit
    #: bound on the max-norm paper's data and on faces scaled to [0, 1]).
    auto_column_bound = 2.0

    def column_bound_of(self, n_features: int) -> float | None:
        bound = self.options.column_bound
        if bound == "auto":
            return self.auto_column_bound
        return None if bound is None else float(bound)

    def basis_step(self, L: Any, A: Any, B: Any, kappa: float, bound: float | None) -> Any:
        norm_alpha, _ = self.alphas(L.shape[0])
        # the reference code's A + norm_alpha I (sum scale) is A + kappa norm_alpha I on the
        # mean scale
        return penalized_column_bcd(L, A, B, frobenius=kappa * norm_alpha, column_bound=bound,
                                    n_sweeps=self.options.dict_passes)

    def penalty_value(self, L: Any) -> float:
        return 0.5 * float(tl.sum(L * L))
