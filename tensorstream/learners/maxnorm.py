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
  (:func:`tensorstream.coders.maxnorm.robust_code`); with a given ``outlier_alpha`` (and
  ``paper_params``) the statistics see ``explained = z - e``, so the engine's ``A = mean r r^T``,
  ``B = mean (z - e) r^T`` are the paper's statistics; with ``outlier_alpha="auto"`` a sample
  whose threshold is below its cap is learned whole near the model and as the model far from
  it, the model being ``L r`` plus a per-feature offset learned with the statistics
  (:meth:`RobustMatrixAlgorithm.explained_part`, :meth:`RobustMatrixAlgorithm.offset_increments`);
* ``update``: Gauss-Seidel column sweeps with the max-norm subgradient
  (:func:`tensorstream.steps.surrogate.penalized_column_bcd`) or proximal gradient steps.

Sums vs means: the paper accumulates ``A_t = sum r r^T`` with the penalty ``norm_alpha``; the engine
keeps weighted means. Dividing the paper's surrogate by ``n`` shows that the penalty (and the
basis-step jitter) must then be scaled by the weight of one sample, ``kappa_t = w_t / b_t``
(``1/n`` for the default ``1/t`` weights with batches of one): the same update exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields
from typing import Any

import tensorly as tl

from ..algorithms.robust_matrix import (
    INITS,
    MaxNormAlgorithm,
    MaxNormOptions,
    RobustMatrixAlgorithm,
    init_matrix,
)
from ..coders.maxnorm import BALL_SOLVERS, NOISE_MODELS, RobustCodes, concatenated
from ..core.backend import using
from ..core.validation import (
    ARRAY,
    CALLABLE,
    NONE,
    SEQUENCE,
    Instance,
    Interval,
    Options,
    refuse_set_by_hand,
)
from ..schedules import checked_weight, make_weights
from ..steps.surrogate import surrogate_value
from ._auto_batch import AutoBatch
from ._base import OnlineLearner
from ._dictionary import coding_chunks
from ._output import replace_flagged
from ._params import SHARED_CONSTRAINTS

DICT_STEPS = ("bcd_subgrad", "prox_grad")
#: ``batch_size="auto"`` (:class:`~._auto_batch.AutoBatch`): the smallest and the largest
#: batch of both learners. The smallest, 10, is the former default: the benchmark's video
#: (120 frames) and faces (100) keep it, and their results. Beyond about 1,000 samples a batch
#: saves no more time (the coding's arithmetic dominates): ``OnlineRobustPCA`` on 100,000
#: patches (benchmarks/bench_robust.py --scale) took 0.98 s in batches of 1,024 and 0.92 s in
#: batches of 2,048, 0.1-0.2 dB worse (5,000: 1.03 s, 0.4-1.1 dB worse)
MATRIX_BATCH_LIMITS = (10, 1024)


class RobustMatrixLearner(AutoBatch, OnlineLearner):
    """What OMRMD and OR-PCA share: matrix samples split into ``L r + e``, masks, inits.

    Not used directly: subclasses build their algorithm (``_algorithm``, a
    :class:`~tensorstream.algorithms.robust_matrix.RobustMatrixAlgorithm`), which says how ``r``
    is constrained and how the basis moves.
    """

    # -- parameters ----------------------------------------------------------------------------

    def __init__(self, n_components: int, *, norm_alpha: float | None = None,
                 outlier_alpha: float | str | None = "auto", data_scale: float | str = "auto",
                 column_bound: float | str | None = "auto", dict_passes: int | None = 1,
                 code_tol: float = 1e-6, code_max_iter: int | None = None,
                 missing: str | None = None, weights: Any = "balanced",
                 batch_size: int | str = "auto", max_iter: int | str = 1, init: Any = "random",
                 random_state: Any = None, backend: str | None = None, device: Any = None,
                 verbose: bool = False, callback: Any = None, reinit_dead_atoms: bool = True,
                 n_threads: int | None = 1):
        """Keep the parameters of the robust matrix family (the split ``L r + e``, its scale,
        the column bound, the basis passes, masks, the weights' schedule) and pass the fit
        loop's up. The defaults are ``OnlineRobustPCA``'s, whose parameters are exactly the
        family's (it has no ``__init__`` of its own); ``OnlineMaxNormMD`` states its own."""
        super().__init__(n_components, batch_size=batch_size, max_iter=max_iter, init=init,
                         code_max_iter=code_max_iter, code_tol=code_tol, random_state=random_state,
                         backend=backend, device=device, verbose=verbose, callback=callback,
                         reinit_dead_atoms=reinit_dead_atoms, n_threads=n_threads)
        self.norm_alpha = norm_alpha
        self.outlier_alpha = outlier_alpha
        self.data_scale = data_scale
        self.column_bound = column_bound
        self.dict_passes = dict_passes
        self.missing = missing
        self.weights = weights

    def _algorithm(self) -> RobustMatrixAlgorithm:
        raise NotImplementedError

    def _options(self, options_class: type) -> Any:
        """``options_class`` (a dataclass of the algorithm's options) filled in from the
        parameters of the same names: the one place they pass from the estimator to the
        algorithm, so that a new option cannot be forgotten by one learner and not the other."""
        return options_class(**{field.name: getattr(self, field.name)
                                for field in fields(options_class)})

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

    def background(self, X: Any, mask: Any = None) -> Any:
        """The low-rank part of ``X`` without its outliers' pull, shape ``(n, p)`` (labelled
        like ``X`` when it is a DataArray): ``L r`` with ``r`` refit to the entries the model
        does not flag (and that are observed).

        For background subtraction (the foreground is where ``X`` is far from it). The
        reconstruction ``inverse_transform(transform(X))`` comes from the l1 fit, which keeps
        ``outlier_alpha`` of every flagged entry: a large flagged region (a moving object)
        pulls it towards itself; this refit does not see those entries. On the benchmark's
        video (``benchmarks/bench_robust.py --video``) the foreground's F1 is 0.985 against
        0.967 (``OnlineRobustPCA``, seed 0). ``denoise`` keeps the l1 fit's values: on images
        whose own detail is flagged (faces, patches) the refit is 0.5-2 dB worse there. With
        ``OnlineMaxNormMD(noise="fro")`` or ``"l21"`` every entry a sample's noise touches is
        flagged: the background is then the fit's own low-rank part.
        """
        self._check_fitted()
        data, mask, layout = self._checked_input(X, mask)
        algorithm, L, scale = self._algorithm(), self.loadings_[0], self.scale_
        with using(self.backend_):
            # chunk by chunk, the refit right after the codes: the batch-sized temporaries of
            # one refit of all samples cost more than their arithmetic (fresh memory)
            refits = [algorithm.refit_low_rank(part, L, scale, coded, part_mask)
                      for part, coded, part_mask in self._coded_chunks(data, mask, algorithm)]
            return self._as_given(X, layout)(tl.concatenate(refits, axis=0))

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
            coded = concatenated([codes for _, codes, _ in self._coded_chunks(data, mask)])
        return data, coded, mask, self._as_given(X, layout)

    def _coded_chunks(self, data: Any, mask: Any, algorithm: Any = None) -> Iterator[tuple]:
        """``(chunk, codes, chunk's mask)`` of checked samples, chunk after chunk (inside the
        learner's backend).

        In :func:`~._dictionary.coding_chunks`: each sample's codes are its own (the same in
        any chunk), so the chunk sets the time alone, not the values.
        """
        algorithm = self._algorithm() if algorithm is None else algorithm
        L, scale = self.loadings_[0], self.scale_
        # chunks without a mask share the basis' spectrum (masked ones have their own)
        spectrum = algorithm.coding_spectrum(L, scale) if mask is None else None
        for chunk in coding_chunks(int(data.shape[0]), int(data.shape[1])):
            part = data[chunk]
            part_mask = None if mask is None else mask[chunk]
            yield part, algorithm.robust_codes(part, L, scale, part_mask, spectrum), part_mask

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
        ``"auto"`` is, with ``noise="l1"``, per sample the smaller of 0.5 and 6 times the
        sample's residual scale (the normal-consistent median absolute residual over its
        nonzero entries, under a rough code), so that what the basis already explains well
        gives up a small difference (a moving object on a learned background) while an
        unexplained sample (early steps, faces' own detail) keeps 0.5; the statistics of a
        sample below 0.5 learn its entries whole up to 3 thresholds from the model and the
        model beyond (a moving object leaves no streak in the basis), where the model is
        ``L r`` plus a per-feature offset that follows what the basis keeps missing (an
        object taken in during the first steps is learned away again; ``statistics_["offset"]``,
        a statistic of this rule that the outputs do not use); 0.5 with the other
        noise models;
        ``None`` is ``1/sqrt(n_features)`` (the paper's, meant for ``data_scale=1.0``).
        ``noise="none"`` has no outlier part: another value than ``"auto"`` (or the paper's
        None, so that ``paper_params`` serve matrix completion) is refused.
    data_scale : "auto" or float, default "auto"
        The unit of the data: ``"auto"`` is the first batch's mean of the samples' median
        absolute nonzero entries (``scale_``, kept in checkpoints); ``outlier_alpha``, the
        column bound and the coding's tolerances are in its units, so fitting ``c X`` gives
        ``c`` times the parts of ``X``. A float declares it (1.0: the paper's raw units). See
        docs/maxnorm.md.
    noise : {"l1", "l21", "fro", "none"}, default "l1"
        The penalty ``h(e)``: entrywise sparse corruption (max-norm RPCA, the paper's
        experiments), whole-sample outliers (``||e||_2``), dense ``||e||^2`` noise, or no ``e``.
    column_bound : "auto", float or None, default "auto"
        Bound on every basis column's norm, in units of the data scale: each column is
        projected onto the ball after its update, as the authors' released code does (with
        radius 1.0 in raw units, ``paper_params``). ``None`` is the paper's Algorithm 4, without
        the projection. The projection is not in the paper but the method's accuracy at high
        corruption depends on it (the expressed variance drops without it); it also caps
        ``||L r||`` (``||r|| <= 1``), so reconstructions are shrunk, subspaces (``loadings_``)
        not. ``"auto"`` is ``2 sqrt(n_features)``: room for a large sample's norm.
    dict_step : {"bcd_subgrad", "prox_grad"}, default "bcd_subgrad"
        Gauss-Seidel column sweeps with the max-norm subgradient (the paper's Algorithm 4), or
        exact proximal-gradient steps on the surrogate (stable while ``A`` is rank-deficient;
        not in the paper: the proximal map of the max-norm penalty, computed exactly).
    dict_passes : int or None, default None
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
        Cap on those iterations (often reached: it is effectively a hyper-parameter). With
        ``noise="none"`` the code is one exact ``r``-solve: another ``code_tol`` or
        ``code_max_iter`` than the default is refused, as is ``outlier_alpha``.
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
    batch_size : int or "auto", default "auto"
        Samples per step when ``fit`` is given an array (1: the paper's algorithm; larger
        batches share one basis update and run the coding step vectorised). ``"auto"``: a
        pass over ``n`` samples in ``auto_batches`` = 150 batches (``ceil(n / 150)``, kept
        between ``auto_batch_limits`` = 10 and 1,024 samples; 10 for a stream, whose length
        is not known; ``batch_size_`` after ``fit``, kept in checkpoints): batches of 10 up to
        1,500 samples, larger ones beyond. Measured on the benchmark's patches
        (``benchmarks/bench_robust.py``, weak classes): on 1,500 of them larger batches cost
        up to 1.3 dB (75: salt-pepper 31.54 against 32.87), on 20,000 batches of 134 gain
        0.0-3.2 dB over batches of 10 in a quarter of the CPU time (salt-pepper 33.10
        against 31.42 dB, 0.75 s against 3.0 s, fit and ``denoise``); on the paper's recipe
        (p=200, d=60, rho=0.3, 2,000 samples: batches of 14) the expressed variance is
        0.804 / 0.814 / 0.811 against 0.809 / 0.836 / 0.831 in batches of 10 (seeds 0-2).
    max_iter : int or "auto", default 1
        Passes over an array given to ``fit`` (the paper makes one); ``"auto"`` as in
        :func:`~tensorstream.learners._fitting.fit_passes`.
    init : {"random", "orthogonal"} or array of shape (n_features, n_components), default "random"
        ``L_0``: U[0, 1] entries (the authors' Figures 1-4), an orthonormalized Gaussian matrix
        (their large-scale runs), or the given matrix (also accepted as a list holding it).
    random_state, backend, verbose, callback, reinit_dead_atoms, device, n_threads
        As in :class:`~tensorstream.learners.ocpdl.OnlineCPDL`, with the same defaults.

    Attributes
    ----------
    loadings_ : list holding the basis ``L`` of shape (n_features, n_components)
    components_ : tensor of shape (n_components, n_features)
    statistics_ : dict with ``A`` (d, d) (``(p, d, d)`` once data had missing entries), ``B``
        (p, d) and ``c``, and with ``outlier_alpha="auto"`` and l1 noise ``offset`` (p,)
        (:meth:`~tensorstream.algorithms.robust_matrix.RobustMatrixAlgorithm.offset_increments`)
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
    #: ``OnlineMaxNormMD(d, **OnlineMaxNormMD.paper_params)``. The paper's Algorithm 4 without
    #: the projection: also pass ``column_bound=None``.
    paper_params = {"norm_alpha": None, "outlier_alpha": None, "data_scale": 1.0,
                    "column_bound": 1.0, "noise": "l1", "ridge": 0.01,
                    "batch_size": 1, "init": "random", "weights": "balanced"}

    #: ``batch_size="auto"``: a pass in 150 batches of 10 to 1,024 samples (the docstring)
    auto_batches = 150
    auto_batch_limits = MATRIX_BATCH_LIMITS

    def __init__(self, n_components: int, *, norm_alpha: float | None = 1.0,
                 outlier_alpha: float | str | None = "auto", data_scale: float | str = "auto",
                 noise: str = "l1",
                 column_bound="auto", dict_step: str = "bcd_subgrad",
                 dict_passes: int | None = None, ridge: float = 0.01, basis_jitter: float = 1e-3,
                 code_tol: float = 1e-6, code_max_iter: int = 100,
                 ball_solver: str = "newton", ball_tol: float = 1e-3, ball_max_iter: int = 60,
                 missing: str | None = None, weights=0.6, batch_size: int | str = "auto",
                 max_iter: int = 1, init="random", random_state=None, backend: str | None = None,
                 device: Any = None,
                 verbose: bool = False, callback=None,
                 reinit_dead_atoms: bool = True, n_threads: int | None = 1):
        super().__init__(n_components, norm_alpha=norm_alpha, outlier_alpha=outlier_alpha,
                         data_scale=data_scale, column_bound=column_bound, dict_passes=dict_passes,
                         missing=missing, weights=weights, batch_size=batch_size, max_iter=max_iter,
                         init=init, code_max_iter=code_max_iter, code_tol=code_tol,
                         random_state=random_state, backend=backend, device=device, verbose=verbose,
                         callback=callback, reinit_dead_atoms=reinit_dead_atoms,
                         n_threads=n_threads)
        self.noise = noise
        self.dict_step = dict_step
        self.ridge = ridge
        self.basis_jitter = basis_jitter
        self.ball_solver = ball_solver
        self.ball_tol = ball_tol
        self.ball_max_iter = ball_max_iter

    def _algorithm(self) -> MaxNormAlgorithm:
        # MaxNormOptions's fields are parameters of the same names (_options)
        return MaxNormAlgorithm(self._options(MaxNormOptions))

    _parameter_constraints = {
        **RobustMatrixLearner._parameter_constraints,
        "noise": [Options(*NOISE_MODELS)],
        "column_bound": [Interval("real", 0, None, closed="neither"), Options("auto"),
                              NONE],
        "dict_step": [Options(*DICT_STEPS)],
        "dict_passes": [Interval("int", 1, None), NONE],
        "ridge": [Interval("real", 0, None)],
        "basis_jitter": [Interval("real", 0, None)],
        "ball_solver": [Options(*BALL_SOLVERS)],
        "ball_tol": [Interval("real", 0, None, closed="neither")],
        "ball_max_iter": [Interval("int", 1, None)],
    }

    #: What the coder's outlier part (``e``) reads: with ``noise="none"`` there is no ``e``, and
    #: the coder makes one exact ``r``-solve (no iterations to stop or cap).
    _OUTLIER_PARAMETERS = ("outlier_alpha", "code_tol", "code_max_iter")

    def _check_rules(self) -> None:
        super()._check_rules()
        if self.noise != "none":
            return
        # the defaults or the paper's values pass (matrix completion: paper_params with
        # noise="none")
        refuse_set_by_hand(self._set_by_hand(*self._OUTLIER_PARAMETERS),
                           "applies to the outlier part, which noise='none' does not have (its "
                           "codes are one exact solve)", "pick noise='l1', 'l21' or 'fro'",
                           "noise='none'")
