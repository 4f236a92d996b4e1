"""Robust PCA baselines of the max-norm paper (Shen, Xu & Li 2014, Section 6), as the authors'
bundled baseline code runs them.

* :class:`OnlineRobustPCA` -- OR-PCA (Feng, Xu & Yan, NIPS 2013), the online nuclear-norm
  method: ``||X||_* = min_{X = L R^T} 1/2 (||L||_F^2 + ||R||_F^2)`` turns stable PCP into
  per-sample problems with a ridge on the coefficients and a Frobenius penalty on the basis. It
  is OMRMD (:class:`~tensorstream.learners.maxnorm.OnlineMaxNormMD`) with the ball
  ``||r|| <= 1`` replaced by the ridge ``norm_alpha/2 ||r||^2`` and the max-row-norm penalty by
  ``norm_alpha/2 ||L||_F^2``; both share the engine's loop and statistics.
* :class:`RobustPCA` -- batch principal component pursuit ``min ||A||_* + lam ||E||_1 s.t.
  Z = A + E`` by the inexact augmented Lagrangian method of Lin, Chen & Ma, with the defaults of
  the authors' bundled code but for the growth of ``mu`` (``paper_params`` keep theirs; the
  algorithm: :mod:`tensorstream.algorithms.pcp`).
"""

from __future__ import annotations

from typing import Any

import tensorly as tl

from ..algorithms.pcp import principal_component_pursuit
from ..algorithms.robust_matrix import RobustMatrixOptions, RobustPCAAlgorithm
from ..core.backend import backend_of, finfo_of, float_dtype_of, using
from ..core.device import device_context, move
from ..core.validation import BACKEND, NONE, Interval, check_batch, feature_names
from ._checkpoints import ArrayCheckpoint
from ._fitting import MAX_FIT_STEPS, OnlineEstimator
from .maxnorm import MATRIX_BATCH_LIMITS, RobustMatrixLearner


class OnlineRobustPCA(RobustMatrixLearner):
    """Online robust PCA (OR-PCA, Feng, Xu & Yan 2013) by stochastic optimization.

    Per sample ``(r, e) = argmin 1/2 ||z - L r - e||^2 + norm_alpha/2 ||r||^2 +
    outlier_alpha ||e||_1``
    by block coordinate descent (``r`` by a ridge solve, ``e`` by soft-thresholding); the basis
    minimizes the surrogate with the penalty ``norm_alpha/2 ||L||_F^2`` by one Gauss-Seidel sweep
    over its columns, each projected onto the unit ball (as the reference code does).

    Parameters
    ----------
    n_components : int
        Basis size ``d`` (at most the number of features).
    norm_alpha : float > 0 or None, default None
        Nuclear-norm weight (ridge on ``r``, Frobenius on ``L``; Feng, Xu & Yan's ``lambda1``);
        ``None`` is ``1/sqrt(n_features)``, the max-norm paper's setting.
    outlier_alpha : "auto", float > 0 or None, default "auto"
        l1 weight of the sparse corruption (their ``lambda2``), in units of the data scale:
        ``"auto"`` is per sample the smaller of 0.5 and 6 residual scales, with the
        statistics' rule of a sample below 0.5 (both as in :class:`OnlineMaxNormMD`),
        ``None`` ``1/sqrt(n_features)``.
    data_scale : "auto" or float, default "auto"
        As in :class:`OnlineMaxNormMD`.
    column_bound : "auto", float or None, default "auto"
        Bound on every basis column's norm (the reference code's projection), in units of the
        data scale; ``"auto"`` is 2.0, the paper's is 1.0 (``paper_params``).
    dict_passes : int, default 1
        Column sweeps per batch (further sweeps are kept only while they lower the surrogate).
    code_tol : float, default 1e-6
        A sample's ``(r, e)`` iterations stop when ``max(||de||, ||dr||) / p < code_tol``.
    code_max_iter : int or None, default None
        Cap on those iterations; the reference code has none (at high corruption a sample may
        then take hundreds).
    missing : {None, "nan"}, default None
        ``"nan"``: NaN entries are missing (see :class:`OnlineMaxNormMD`).
    weights : "balanced", float or callable, default "balanced"
    batch_size : int or "auto", default "auto"
        Samples per step when ``fit`` is given an array. ``"auto"``: a pass over ``n``
        samples in ``auto_batches`` = 20 batches (``ceil(n / 20)``, kept between
        ``auto_batch_limits`` = 10 and 1,024 samples; 10 for a stream, whose length is not
        known; ``batch_size_`` after ``fit``, kept in checkpoints): batches of 10 up to 200
        samples (the benchmark's faces and video), 75 on its 1,500 patches (0.2 to 0.8 dB
        better than 10 on every weak class, in a fifth of the CPU time, fit and
        ``denoise``), 1,000 on 20,000 (salt-pepper -0.05 dB, stripes +0.03, block-bright
        +2.8 against 10, in a tenth of the time). Larger batches run the coding step
        vectorised over more samples a call; the smaller the array, the more basis updates
        it needs, and a large basis more still: on the max-norm paper's recipe (p=200, d=60,
        rho=0.3, 2,000 samples) batches of 100 express 0.42-0.44 of the variance against
        0.53-0.56 with ``batch_size=10`` (seeds 0-2).
    max_iter : int or "auto", default 1
        Passes over an array given to ``fit``; ``"auto"`` as in
        :func:`~tensorstream.learners._fitting.fit_passes`.
    init, random_state, backend, verbose, callback, reinit_dead_atoms, device, n_threads
        As in :class:`OnlineMaxNormMD`, with the same defaults.

    Attributes
    ----------
    loadings_ : list holding the basis ``L`` of shape (n_features, n_components)
    components_ : tensor of shape (n_components, n_features)
    statistics_ : dict with ``A``, ``B`` and ``c``, and with ``outlier_alpha="auto"`` the
        per-feature ``offset`` of the statistics' rule (as in :class:`OnlineMaxNormMD`)
    n_steps_ : int
    n_samples_seen_ : int

    Examples
    --------
    Gross errors on 5% of the entries of rank-3 data are flagged, and ``denoise`` replaces
    them by the model's values:

    >>> import numpy as np
    >>> from tensorstream.learners.robust_pca import OnlineRobustPCA
    >>> rng = np.random.default_rng(0)
    >>> clean = rng.standard_normal((300, 3)) @ rng.standard_normal((3, 40))
    >>> gross = rng.random(clean.shape) < 0.05
    >>> X = clean + 20.0 * gross
    >>> model = OnlineRobustPCA(3, random_state=0).fit(X)
    >>> bool(np.all(model.outliers(X)[gross] != 0))
    True
    >>> bool(np.abs(model.denoise(X) - clean).mean() < 0.1 * np.abs(X - clean).mean())
    True
    """

    #: The settings of the max-norm paper's OR-PCA baseline (its Section 6): ``norm_alpha =
    #: outlier_alpha = 1/sqrt(p)`` and unit-norm basis columns in the data's raw units
    #: (``data_scale=1.0``), one sample per step, U[0, 1] ``L_0``: ``OnlineRobustPCA(d,
    #: **OnlineRobustPCA.paper_params)``.
    paper_params = {"norm_alpha": None, "outlier_alpha": None, "data_scale": 1.0,
                    "column_bound": 1.0, "batch_size": 1, "init": "random", "weights": "balanced"}

    #: ``batch_size="auto"``: a pass in 20 batches of 10 to 1,024 samples (the docstring)
    auto_batches = 20
    auto_batch_limits = MATRIX_BATCH_LIMITS

    def _algorithm(self) -> RobustPCAAlgorithm:
        # RobustMatrixOptions's fields are parameters of the same names (_options)
        return RobustPCAAlgorithm(self._options(RobustMatrixOptions))

    _parameter_constraints = {**RobustMatrixLearner._parameter_constraints,
                              "dict_passes": [Interval("int", 1, None)]}


class RobustPCA(ArrayCheckpoint, OnlineEstimator):
    """Principal component pursuit (batch robust PCA) by the inexact augmented Lagrangian method.

    Solves ``min ||A||_* + outlier_alpha ||E||_1 s.t. Z = A + E`` (Candes, Li, Ma & Wright 2011, who
    write ``lambda`` for ``outlier_alpha``) with the algorithm of Lin, Chen & Ma (2010) as the
    max-norm authors' bundled ``inexact_alm_rpca.m`` runs it: ``Y_0 = Z / max(||Z||_2, ||Z||_inf /
    outlier_alpha)``, ``mu_0 = 1.25 / ||Z||_2``, then alternately soft-thresholding for ``E`` and
    singular value thresholding at ``1/mu`` for ``A``; ``mu`` grows by ``rho`` when the low-rank
    part has settled (``mu ||A_k - A_{k-1}||_F / ||Z||_F < change_tol``), up to ``1e9 mu_0``. Stops
    when both that and ``||Z - A - E||_F / ||Z||_F < tol`` hold. Each iteration thresholds every
    singular value exactly, from the eigendecomposition of the Gram matrix of the shorter side
    (a thin SVD once the threshold is too small for it; see :mod:`tensorstream.algorithms.pcp`).

    Parameters
    ----------
    n_components : int or None, default None
        Size of the basis ``loadings_`` / ``components_``: the top singular vectors of the
        recovered low-rank part (None: all with nonzero singular values).
    outlier_alpha : float > 0 or None, default None
        Weight of ``||E||_1``; ``None`` is ``1/sqrt(max(n_samples, n_features))``.
    tol : float, default 1e-7
        On ``||Z - A - E||_F / ||Z||_F``; at least 10 machine epsilons of the data's dtype
        (1.2e-6 for float32, which rounding alone keeps about 1e-7).
    change_tol : float, default 1e-4
        ``mu`` grows once ``mu ||A_k - A_{k-1}||_F / ||Z||_F`` falls below it.
    rho : float, default 1.3
        Growth factor of ``mu``. The reference code's 1e-5 and 1.7 are in ``paper_params``.
        On data with a slowly decaying spectrum (real images) the growth waits for the
        change, and 1e-4 takes 0.35-0.4x the iterations on 1,500 8 x 8 patches, 0.47-0.64x on
        100 faces (the PSNR against the clean images equal to 0.005 dB). On exactly low-rank
        data ``mu`` grows nearly every iteration, so ``rho`` sets the accuracy: 1.3 recovers
        the max-norm paper's planted matrices more closely than 1.7 (400 x 5000, rank 80:
        expressed variance 0.998 against 0.990 at 30% outliers, 0.944 against 0.913 at
        50%) in 1.5-1.8x the iterations (39-47 against 25-26); on tiny ones (20 x 50)
        about as closely (relative error 0.12 against 0.11).
    max_iter : int, default 1000
    backend : {"numpy", "pytorch", None}, default None
        TensorLy backend (None: taken from the data).
    device, n_threads
        As in :class:`~tensorstream.learners.ocpdl.OnlineCPDL` (``None`` and 1 by default).

    Attributes
    ----------
    low_rank_ : tensor of shape (n_samples, n_features)
    sparse_ : tensor of shape (n_samples, n_features)
    loadings_ : list holding the basis of shape (n_features, n_components)
    components_ : tensor of shape (n_components, n_features)
    singular_values_ : tensor of the low-rank part's singular values above zero
    n_iter_ : int
        Iterations run: each is one product of the whole matrix with itself (or one thin SVD of
        it) and one with the kept singular vectors, so they are scikit-learn's
        passes over the data.

    Notes
    -----
    TensorLy's ``tensorly.decomposition.robust_pca`` solves a tensor generalisation (the sum
    of the nuclear norms of all unfoldings, two SVDs per iteration for a matrix) with a fixed
    ``mu`` schedule (``1e-4``, times 1.1 per iteration, at most 100 iterations) and an absolute
    tolerance; it is not this algorithm and does not reach the same accuracy (see
    ``docs/maxnorm.md``).

    Examples
    --------
    The low-rank part is the clean data to a few percent; the sparse part holds the outliers:

    >>> import numpy as np
    >>> from tensorstream.learners.robust_pca import RobustPCA
    >>> from tensorstream.datasets.maxnorm import corrupted_low_rank
    >>> data = corrupted_low_rank(40, 3, 200, 0.1, random_state=0)   # Z = X + E, 10% outliers
    >>> pcp = RobustPCA(3).fit(data.Z)
    >>> bool(np.linalg.norm(pcp.low_rank_ - data.X) < 0.05 * np.linalg.norm(data.X))
    True
    >>> bool(np.mean((pcp.sparse_ != 0) == (data.E != 0)) > 0.95)
    True
    """

    #: The settings of the reference code (``inexact_alm_rpca.m`` as the max-norm authors
    #: bundle it): ``mu`` grows by 1.7, only once the low-rank part changes by less than
    #: 1e-5 ``/ mu`` of the data: ``RobustPCA(**RobustPCA.paper_params)``.
    paper_params = {"change_tol": 1e-5, "rho": 1.7}

    _fitted_attribute = "components_"
    _fitted_arrays = ("low_rank_", "sparse_", "singular_values_", "loadings_", "components_")
    _fitted_values = ("n_iter_", "n_features_in_")
    #: fit_transform returns the low-rank part of the data: the input's features
    _output_follows_input = True

    def __init__(self, n_components: int | None = None, *, outlier_alpha: float | None = None,
                 tol: float = 1e-7, change_tol: float = 1e-4, rho: float = 1.3,
                 max_iter: int = 1000, backend: str | None = None, device: Any = None,
                 n_threads: int | None = 1):
        super().__init__(n_components, backend=backend, device=device, n_threads=n_threads)
        self.outlier_alpha = outlier_alpha
        self.tol = tol
        self.change_tol = change_tol
        self.rho = rho
        self.max_iter = max_iter

    _parameter_constraints = {
        "n_components": [Interval("int", 1, None), NONE],
        "outlier_alpha": [Interval("real", 0, None, closed="neither"), NONE],
        "tol": [Interval("real", 0, None)],
        "change_tol": [Interval("real", 0, None)],
        "rho": [Interval("real", 1, None)],
        "max_iter": [Interval("int", 1, MAX_FIT_STEPS)],  # bounded as online fits are
        "backend": BACKEND,
    }

    def fit(self, X: Any, y: Any = None) -> RobustPCA:
        """Split ``X`` (``(n_samples, n_features)``) into a low-rank and a sparse part; on an
        error or an interrupt the learner is left as it was (a previous fit included)."""
        with self._all_or_nothing("fit"):
            return self._decompose(X)

    def _decompose(self, X: Any) -> RobustPCA:
        self._check_params()
        names = feature_names(X)
        context = device_context(self)  # None: where the data are
        backend = "pytorch" if context else (self.backend or backend_of(X))
        Z = check_batch(move(X, context and context["device"]), backend=backend,
                        context=context, missing_hint=False)
        if len(Z.shape) != 2:
            raise ValueError(f"X must be a matrix (n_samples, n_features), got shape "
                             f"{tuple(Z.shape)}")
        if self.n_components is not None and self.n_components > min(Z.shape):
            raise ValueError(f"n_components={self.n_components} exceeds min(X.shape)="
                             f"{min(Z.shape)}")
        with using(backend):
            Z = tl.tensor(Z, **{**tl.context(Z), "dtype": float_dtype_of(Z, backend)})
            A, E, n_iter, s, Vt = principal_component_pursuit(
                Z, outlier_alpha=self.outlier_alpha, tol=self.tol, change_tol=self.change_tol,
                rho=self.rho, max_iter=self.max_iter)
            # rounding noise is relative to the working precision (float32: 1e-7, not 1e-16)
            eps = float(finfo_of(s).eps)
            rank = int(tl.sum(s > max(A.shape) * eps * float(s[0]))) if float(s[0]) > 0 else 0
            d = rank if self.n_components is None else self.n_components
            self.low_rank_, self.sparse_, self.n_iter_ = A, E, n_iter
            self.n_features_in_ = int(Z.shape[1])
            self.singular_values_ = s[:rank]
            self.loadings_ = [tl.transpose(Vt[:d])]
            self.components_ = Vt[:d]
        self.__dict__.pop("feature_names_in_", None)
        self._keep_feature_names(names)
        return self

    def fit_transform(self, X: Any, y: Any = None) -> Any:
        """``fit(X)``, then the low-rank part of ``X``."""
        return self.fit(X).low_rank_
