"""Variance-reduced stochastic matrix factorization (Zhao, Haskell & Feng 2017).

:class:`VarianceReducedMF` runs Algorithm 1 (``method="vr"``) on a *finite* data set, and the
paper's two baselines in the same code paths (same formulation, coder, prox and sampling):
proximal SGD with ``gamma_t = beta / (b t + beta')`` (``method="sgd"``, Algorithm S-3) and
stochastic majorization-minimization on the sums ``A = sum h h^T``, ``B = sum (x - r) h^T``
(``method="smm"``, Algorithm S-2). See ``docs/svrmf.md``.

One call of :meth:`VarianceReducedMF.partial_fit` is one outer iteration ("epoch"):

* ``vr``: snapshot ``W0 = W``; full gradient ``G`` over the data, chunk by chunk; then
  ``epoch_length`` steps ``W <- P_W(W - eta V; eta)`` with the SVRG estimator
  ``V = grad_B(W) - grad_B(W0) + G`` on mini-batches of ``inner_batch`` samples drawn uniformly
  without replacement (a host numpy Generator: every backend sees the same batches);
* ``sgd``/``smm``: ``epoch_length`` stochastic steps (default ``ceil(n / b)``, one pass).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import time
from typing import Any

import numpy as np
import tensorly as tl

from ..algorithms.robust_matrix import sample_scale_sums
from ..core.backend import as_tensor, backend_of, float_dtype_of, run, to_numpy, using
from ..core.caller import warn
from ..core.device import device_of
from ..core.dictionary import spectral_norm_psd
from ..core.products import narrow_dot
from ..core.validation import (
    ARRAY,
    BOOLEAN,
    NONE,
    Instance,
    Interval,
    Options,
    as_array,
    check_batch,
    check_overflow,
    check_positive_number,
    check_state_memory,
    feature_names,
    generator_of,
    is_sparse,
)
from ..engine.distributed import SpreadRows, connected
from ..engine.loop import usable_scale
from ..finite.formulations import (
    FORMULATIONS,
    FiniteCodes,
    RobustPCA,
    make_formulation,
    solve_codes,
)
from ..finite.state import FiniteState
from ..finite.variance_reduction import (
    FiniteData,
    batch_gradient,
    chunk_count,
    default_sizes,
    estimate_lipschitz,
    full_gradient,
    gradient_mapping,
    inexact_tolerance,
    objective,
    prox_step,
    scatter,
    sgd_step_size,
    vr_direction,
)
from ..streams import Epochs, Stream
from ._base import (
    SHARED_CONSTRAINTS,
    ArrayCheckpoint,
    OnlineEstimator,
    _progress_bar,
    check_fit_work,
)

METHODS = ("vr", "sgd", "smm")
AUTO_THETA = 2.3  # eta = 1/(theta L), theta > 2 (Theorem 1); 2.3 suits the paper's b, m (sec. 5.2)


class VarianceReducedMF(ArrayCheckpoint, OnlineEstimator):
    """Stochastic matrix factorization by variance reduction, over the formulations P1-P8.

    Minimises ``f(W) = (1/n) sum_i min_{h, r} [1/2 ||x_i - W h - r||^2 + phi(h) + varphi(r)]
    + psi(W)`` over ``W`` in ``C`` for a finite data set ``X`` of shape ``(n, d)``.

    Parameters
    ----------
    n_components : int
        Dictionary size ``k``.
    formulation : {"odl", "ossl", "onmf", "ssodl", "orpca", "omrmd", "olrr", "ornmf"}
        P1-P8 of the paper, section 2 (see :mod:`tensorstream.finite.formulations`).
    method : {"vr", "sgd", "smm"}, default "vr"
        Algorithm 1, proximal SGD, or stochastic MM.
    n_epochs : int, default 10
        Outer iterations run by ``fit``; 0 only initialises (``W^{0,0}``, and the ``"auto"``
        step), e.g. to evaluate ``objective`` at the start.
    step_size : float > 0 or "auto", default "auto"
        ``vr``: the constant step ``eta`` (in units of the data scale). ``sgd``: the first
        step ``gamma_0 = beta / beta'`` (so ``beta = step_size * step_offset``). Unused by
        ``smm``. ``"auto"`` (our extension, docs/svrmf.md): ``1 / (2.3 L)`` with ``L`` a local
        Lipschitz constant of the gradient at the initial dictionary, found by backtracking on
        the descent lemma over a random subsample of ``auto_samples`` samples
        (:func:`~tensorstream.finite.variance_reduction.estimate_lipschitz`); the step is then
        kept constant (``step_size_``), and the passes and seconds it costs are counted in
        ``history_``.
    auto_samples : int, default 1000
        Subsample size of ``step_size="auto"``.
    step_offset : float > 0 or None, default None
        ``beta'`` of proximal SGD; None is ``100 b``.
    inner_batch : int or None
        Mini-batch size ``b``; None is ``round(0.2 n^(2/3))`` (at least 1, at most ``n``).
    epoch_length : int or None
        Inner steps per epoch ``m``; None is ``round(0.5 n^(1/3))`` for ``vr`` and
        ``ceil(n / b)`` (one pass) for ``sgd``/``smm``.
    inexact : bool, default False
        Code tolerance ``c_tol (m s + t + 1)^-(1/2 + tau)`` (Theorem 2, shifted by one) instead
        of ``code_tol``; snapshot codes use the ``(s, 0)`` value in lines 4 and 8 alike.
    tau, c_tol : float
        Parameters of that schedule.
    lam, lam1, lam2, lam3, M, M_prime, nu, groups, laplacian, lrr_A, lrr_B
        Formulation weights (see :func:`tensorstream.finite.formulations.make_formulation`), in
        units of the data scale (``data_scale``); None weights are ``1/sqrt(d)``.
    data_scale : "auto" or float, default "auto"
        The unit the problem is solved in: the data are read divided by it, so the weights,
        the step and the tolerances are in its units and fitting ``c X`` gives ``c`` times the
        reconstruction and outliers of ``X``. ``"auto"``: the mean over samples of each
        sample's median absolute entry (robust to corruptions of fewer than half of a sample's
        entries), one pass over the data, counted in ``history_``; kept as ``scale_`` and in
        checkpoints. A float declares it (1.0: the raw units of the paper).
    allow_negative : bool, default False
        Accept negative data with the nonnegative formulations (onmf, ssodl, ornmf).
    init : {"auto", "random", "gaussian", "ones"} or array of shape (n_components, n_features)
        ``"auto"`` (default): ``"gaussian"`` for the robust formulations (orpca, omrmd, olrr,
        ornmf: data rows carry the outliers), ``"random"`` otherwise. ``"random"``: random data
        rows plus ``1e-3`` Gaussian noise, projected onto ``C``;
        ``"gaussian"``: N(0, 1) entries, projected; ``"ones"``: the paper's all-ones start,
        which is degenerate (rank one forever: identical columns get identical updates), so it
        warns and adds the same noise.
    output : {"last", "random"}, default "last"
        Option II (last iterate) or Option I (an iterate ``W^{s,t}``, ``t < m``, drawn
        uniformly by reservoir sampling) for ``components_``.
    store_snapshot_codes : bool, default False
        Keep the snapshot codes of the full pass (``O(n (k + d))`` memory) instead of
        recomputing them for each mini-batch.
    smm_steps : int, default 5
        Projected-gradient steps on the surrogate per SMM update (ORPCA: Feng's exact
        ``W = B (A + lam1 I)^-1`` instead).
    chunk_size : int, default 1024
        Samples per chunk of the full passes.
    code_solver : {"fista", "bsum"}, default "fista"
    code_tol : float, default 1e-6
        Per-sample absolute tolerance on the prox-gradient residual of the coder.
    code_max_iter : int, default 100
    eval_tol, eval_max_iter : float, int
        Coder settings of :meth:`objective` (accurate solves).
    random_state : int, Generator or None
    backend : {"numpy", "pytorch", None}
    verbose : bool
    callback : callable, optional
        ``callback(learner, info)`` after every epoch (``info`` is the new ``history_`` row);
        returning True stops ``fit``.
    device : str, torch.device or None, default None
        Where to compute: ``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a ``torch.device`` runs on
        the pytorch backend there (every batch, of any kind, moved there as it is validated;
        the state kept there); ``None``: where the data are (see ``docs/devices.md``).
    n_threads : int or None, default 1
        BLAS/OpenMP and PyTorch threads inside the public methods
        (:func:`tensorstream.core.backend.limit_threads`; ``None``: the libraries' own).

    Attributes
    ----------
    components_ : tensor (n_components, n_features)
        The output dictionary (``W^T``).
    loadings_ : list holding the current ``W`` of shape (n_features, n_components)
    history_ : list of dict
        One row per epoch: ``epoch``, ``passes_read`` and ``solves`` (cumulative, in samples
        / n), ``seconds`` (cumulative algorithm time), ``grad_map_sq`` (``||Gamma(W^{s,0})||^2``
        from ``G_s``, free; ``vr`` only), ``snapshot_loss`` (``f(W^{s,0})`` at training
        accuracy, free; ``vr`` only), ``code_iterations`` (solver iterations, summed over
        samples), ``max_code_iter``, ``code_tol`` (the snapshot tolerance).
    step_size_ : float or None
        The step used (``step_size``, or the estimate of ``"auto"``; None for ``smm``), in
        units of the data scale.
    scale_ : float
        The data scale (``data_scale``). ``history_``'s ``snapshot_loss`` and :meth:`objective`
        are in the data's units; the gradient mappings are those of the problem in units of
        the scale.
    n_epochs_ : int
    n_steps_ : int
        Inner steps so far.
    inner_batch_, epoch_length_ : int
    formulation_ : Formulation
    state_ : FiniteState
        The whole learned state (:class:`tensorstream.finite.state.FiniteState`), from which
        the attributes above are set; what ``save`` writes.

    Examples
    --------
    >>> import numpy as np
    >>> from tensorstream import VarianceReducedMF
    >>> X = np.random.default_rng(0).standard_normal((200, 6))
    >>> model = VarianceReducedMF(3, formulation="odl", n_epochs=3, random_state=0).fit(X)
    >>> model.components_.shape, len(model.history_)
    ((3, 6), 3)
    >>> model.history_[-1]["grad_map_sq"] < model.history_[0]["grad_map_sq"]
    True
    """

    #: The paper's settings (its section 5.2): every formulation weight ``1/sqrt(d)`` in
    #: the data's raw units (``data_scale=1.0``; ``lam3 = 1``, ``M = M' = 1e3``, no ridge),
    #: Algorithm 1, and its all-ones start ``W^{0,0}``, which is degenerate (it warns and adds
    #: a little noise: docs/svrmf.md).
    #: The paper gives no step size: pass ``step_size`` (our tests use 10 on ORPCA-synth,
    #: 3 on digits-ODL).
    paper_params = {"method": "vr", "lam": None, "lam1": None, "lam2": None, "lam3": 1.0,
                    "M": 1e3, "M_prime": 1e3, "nu": 0.0, "init": "ones", "data_scale": 1.0}

    def __init__(self, n_components: int, *, formulation: str = "odl", method: str = "vr",
                 n_epochs: int = 10, step_size: float | str = "auto",
                 step_offset: float | None = None, auto_samples: int = 1000,
                 inner_batch: int | None = None, epoch_length: int | None = None,
                 inexact: bool = False, tau: float = 1e-3, c_tol: float = 1.0,
                 lam: float | None = None, lam1: float | None = None,
                 lam2: float | None = None, lam3: float = 1.0, M: float = 1e3,
                 M_prime: float = 1e3, nu: float = 0.0, groups=None, laplacian=None,
                 lrr_A=None, lrr_B=None, allow_negative: bool = False, init="auto",
                 data_scale: float | str = "auto",
                 output: str = "last", store_snapshot_codes: bool = False, smm_steps: int = 5,
                 chunk_size: int = 1024, code_solver: str = "fista", code_tol: float = 1e-6,
                 code_max_iter: int = 100, eval_tol: float = 1e-7, eval_max_iter: int = 5000,
                 random_state=None, backend: str | None = None, device: Any = None,
                 verbose: bool = False,
                 callback=None, n_threads: int | None = 1):
        self._keep_parameters(locals())

    # -- parameters ------------------------------------------------------------------------------

    _fitted_attribute = "loadings_"
    #: parameters a checkpoint stores as members when they are given as arrays
    _array_parameters = ("laplacian", "lrr_A", "lrr_B", "init")

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False  # dense data only (a clear TypeError for sparse)
        return tags

    _parameter_constraints = {
        **SHARED_CONSTRAINTS,
        "formulation": [Options(*FORMULATIONS)],
        "method": [Options(*METHODS)],
        "n_epochs": [Interval("int", 0, None)],
        "step_size": [Interval("real", 0, None, closed="neither"), Options("auto")],
        "step_offset": [Interval("real", 0, None, closed="neither"), NONE],
        "auto_samples": [Interval("int", 1, None)],
        "inner_batch": [Interval("int", 1, None), NONE],
        "epoch_length": [Interval("int", 1, None), NONE],
        "inexact": [BOOLEAN],
        "tau": [Interval("real", 0, None, closed="neither")],
        "c_tol": [Interval("real", 0, None, closed="neither")],
        # the formulations' own penalties: checked when the formulation is built
        **{name: [Interval("real"), NONE] for name in ("lam", "lam1", "lam2", "lam3", "M",
                                                        "M_prime", "nu")},
        "groups": [Instance("a list of index groups", list, tuple), NONE],
        "laplacian": [ARRAY, NONE],
        "lrr_A": [ARRAY, NONE],
        "lrr_B": [ARRAY, NONE],
        "allow_negative": [BOOLEAN],
        "init": [Options("auto", "random", "gaussian", "ones"), ARRAY],
        "data_scale": [Interval("real", 0, None, closed="neither"), Options("auto")],
        "output": [Options("last", "random")],
        "store_snapshot_codes": [BOOLEAN],
        "smm_steps": [Interval("int", 1, None)],
        "chunk_size": [Interval("int", 1, None)],
        "code_solver": [Options("fista", "bsum")],
        "eval_tol": [Interval("real", 0, None)],
        "eval_max_iter": [Interval("int", 1, None)],
    }

    def _make_formulation(self, d: int):
        return make_formulation(
            self.formulation, d, lam=self.lam, lam1=self.lam1, lam2=self.lam2, lam3=self.lam3,
            M=self.M, M_prime=self.M_prime, nu=self.nu, groups=self.groups,
            laplacian=self.laplacian, lrr_A=self.lrr_A, lrr_B=self.lrr_B,
            n_components=self.n_components)

    # -- data ------------------------------------------------------------------------------------

    def _finite_data(self, X: Any, context: dict | None = None, backend: str | None = None,
                     form=None, spread: SpreadRows | None = None, *,
                     scale: float | None = None) -> FiniteData:
        """The finite data set behind ``X``, or a clear error (VR needs a finite sum); with a
        ``scale``, read in its units; with ``spread``, its full passes run on the workers."""
        X = as_array(X)
        if is_sparse(X):
            raise TypeError(f"{type(self).__name__} does not support sparse input: its "
                            f"formulations' proximal steps need dense data; pass X.toarray()")
        if isinstance(X, Epochs):
            X = X.sample_space()
        elif isinstance(X, Stream) or (not hasattr(X, "shape") and hasattr(X, "__iter__")):
            raise TypeError(
                f"{type(self).__name__} needs a finite data set (an array, a dask array, an "
                f"xarray.DataArray with samples first, or an Epochs stream), got "
                f"{type(X).__name__}: a stream or generator may be infinite and has no full "
                f"gradient")
        if X is None or not hasattr(X, "shape"):
            raise TypeError(f"X must be an array of shape (n_samples, n_features), got "
                            f"{type(X).__name__}")
        if hasattr(X, "dims") and hasattr(X, "data"):
            X = X.data
        if len(X.shape) != 2:
            raise ValueError(f"X must be a matrix (n_samples, n_features), got shape "
                             f"{tuple(X.shape)}; Reshape your data")
        if X.shape[0] < 1 or X.shape[1] < 1:
            raise ValueError(f"X has {X.shape[0]} sample(s) and {X.shape[1]} feature(s) "
                             f"(shape={tuple(X.shape)}) while a minimum of 1 is required.")
        if X.shape[1] != self.__dict__.get("n_features_in_", X.shape[1]):
            raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is "
                             f"expecting {self.n_features_in_} features as input")
        if backend is None:
            device = device_of(self)  # a device given: the pytorch backend there
            backend = "pytorch" if device is not None else (self.backend or backend_of(X))
            with using(backend):
                probe = X[:1] if backend_of(X) == backend else np.zeros((1, 1))
                dtype = float_dtype_of(probe, backend)
                context = {"dtype": dtype}
                if backend == "pytorch":  # numpy data on backend="pytorch": the CPU's tensors
                    context["device"] = device if device is not None else X.device \
                        if backend_of(X) == "pytorch" else tl.context(tl.tensor(probe))["device"]
        nonnegative = bool(form is not None and form.nonnegative and not self.allow_negative)
        way_out = (f"formulation={self.formulation!r} is nonnegative: pass allow_negative=True, "
                   f"or a formulation for signed data (e.g. 'odl', 'orpca')")
        return FiniteData(X, backend, context, nonnegative, spread,
                          1.0 if scale is None else scale, way_out)

    @contextlib.contextmanager
    def _spread(self, X: Any, client: Any) -> Any:
        """``X``'s rows spread over the workers of ``client`` for the block (None without a
        client: the full passes run in this process)."""
        if client is None:
            yield None
            return
        data = self._finite_data(X)  # refuses bad input before connecting
        with connected(client) as open_client:
            spread = SpreadRows(open_client, data.X, self.chunk_size)
            try:
                yield spread
            finally:
                spread.release()

    # -- fitting ---------------------------------------------------------------------------------

    def fit(self, X: Any, y: Any = None, *, client: Any = None) -> VarianceReducedMF:
        """Run ``n_epochs`` outer iterations from a fresh start on the finite data set ``X``.

        ``X``: array ``(n_samples, n_features)`` (numpy, torch, dask, DataArray with samples
        first) or an :class:`~tensorstream.streams.Epochs` stream. The learner is left as it
        was if the data are rejected (NaN/inf, negative for a nonnegative formulation, ...).

        ``client`` (a ``dask.distributed.Client``, a scheduler address or ``"local"``): the
        full passes (each epoch's full gradient and snapshot codes, the scatter of P7) run on
        the workers as a map-reduce, each worker reading its own block of chunks (dask-backed
        data) or holding it (in-memory data, scattered once); the inner steps' mini-batches
        are read by the driver. The result equals the fit in one process up to the order of
        floating-point sums (:mod:`tensorstream.engine.distributed`).
        """
        self._check_params()
        names = feature_names(X)
        with self._all_or_nothing("fit"):
            self._forget_fit()  # a fresh start: nothing of a previous fit is kept
            with self._spread(X, client) as spread:
                self._fit_epochs(X, spread)
            self._keep_feature_names(names)
        return self

    def _fit_epochs(self, X: Any, spread: SpreadRows | None = None) -> VarianceReducedMF:
        state = self._initial_state(X, spread)
        check_fit_work(self.n_epochs * state.epoch_length, f"n_epochs={self.n_epochs:,} "
                       f"epochs of {state.epoch_length:,} inner steps",
                       "n_epochs or epoch_length", type(self).__name__)
        if self.n_epochs == 0:
            self._commit(state)
            return self
        progress = _progress_bar(self.n_epochs) if self.verbose else None
        try:
            for _ in range(self.n_epochs):
                state, info = self._epoch(state, X, spread)
                self._commit(state)
                if progress is not None:
                    progress.update(1)
                    progress.set_postfix(grad_map_sq=info["grad_map_sq"])
                if self.callback is not None and self.callback(self, dict(info)):
                    break
        finally:
            if progress is not None:
                progress.close()
        return self

    def fit_transform(self, X: Any, y: Any = None, *, client: Any = None) -> Any:
        """``fit(X)`` then ``transform(X)``.

        Returns
        -------
        codes : array of shape (n_samples, n_components)
        """
        return self.fit(X, y, client=client).transform(X)

    def partial_fit(self, X: Any, y: Any = None, *, client: Any = None) -> VarianceReducedMF:
        """One more outer iteration on the same data set (starts fresh if not fitted): an
        interrupted or checkpointed run resumes exactly. ``client``: its full passes on a
        Dask cluster (see :meth:`fit`)."""
        self._check_params()
        fitted = "loadings_" in self.__dict__
        if fitted:
            self._check_feature_names(X)
        names = feature_names(X)
        with self._all_or_nothing("partial_fit"), self._spread(X, client) as spread:
            if fitted:  # the formulation's parameters set since apply now
                self._check_fixed_by_state(self.state_)
                state = dataclasses.replace(
                    self.state_, formulation=self._current_formulation(self.state_))
                if self.method != "vr":  # as at the start: SGD/SMM read only the rows drawn
                    data = self._finite_data(X, state.context, state.backend, state.formulation,
                                             spread, scale=state.scale)
                    with using(data.backend):
                        data.map_reduce(chunk_count, self.chunk_size)
            else:
                state = self._initial_state(X, spread)
            state, info = self._epoch(state, X, spread)
            self._commit(state)
            if not fitted:
                self._keep_feature_names(names)
        if self.callback is not None:
            self.callback(self, dict(info))
        return self

    def _initial_state(self, X: Any, spread: SpreadRows | None = None) -> FiniteState:
        probe = self._finite_data(X)
        form = self._make_formulation(probe.d)
        data = self._finite_data(X, probe.context, probe.backend, form, spread)
        start = time.perf_counter()
        scale, scale_passes = self._scale_of(data)
        scale_seconds = time.perf_counter() - start
        data = self._finite_data(X, probe.context, probe.backend, form, spread, scale=scale)
        n, d = data.n, data.d
        rng = generator_of(self.random_state)
        b, m = default_sizes(n, self.inner_batch, self.epoch_length)
        if self.method != "vr" and self.epoch_length is None:
            m = -(-n // b)
        with using(data.backend):
            if self.method != "vr":  # SGD/SMM never pass over all data: validate it up front
                data.map_reduce(chunk_count, self.chunk_size)
            if form.needs_scatter:
                form = form.prepare(scatter(data, self.chunk_size), n)
            W = self._initial_dictionary(form, data, rng)
        state = FiniteState(dictionary=W, output=W, statistics=None, formulation=form,
                            scale=scale, step_size=None, rng=rng, backend=data.backend,
                            context=data.context, n_samples=n, n_features=d, inner_batch=b,
                            epoch_length=m, passes_read=scale_passes, seconds=scale_seconds)
        return state if self.method == "smm" else self._with_step_size(state, data)

    def _scale_of(self, data: FiniteData) -> tuple[float, float]:
        """``(scale, passes read)``: ``data_scale``, or for ``"auto"`` the mean over samples of
        each sample's median absolute entry (:func:`~tensorstream.learners.maxnorm.
        sample_scale_sums`), one pass over the data set."""
        if self.data_scale != "auto":
            return float(self.data_scale), 0.0
        with using(data.backend):  # a map-reduce: on the workers when the data are spread
            total = data.map_reduce(_scale_sum, self.chunk_size)
        return usable_scale(float(total) / data.n), 1.0

    def _with_step_size(self, state: FiniteState, data: FiniteData) -> FiniteState:
        """``state`` with ``step_size``, or with ``"auto"`` ``1 / (2.3 L)`` from a backtracking
        estimate of ``L`` at the initial dictionary on a subsample (counted as algorithm
        work)."""
        if not isinstance(self.step_size, str):
            return dataclasses.replace(state, step_size=float(self.step_size))
        n = state.n_samples
        rows = np.sort(state.rng.choice(n, min(n, self.auto_samples), replace=False))
        subsample = FiniteData(data.rows(rows), data.backend, data.context, data.nonnegative,
                               way_out=data.way_out)
        start = time.perf_counter()
        with using(data.backend):
            L, passes = estimate_lipschitz(state.formulation, state.dictionary, subsample, n,
                                           chunk_size=self.chunk_size, solver=self.code_solver,
                                           tol=self.code_tol, max_iter=self.code_max_iter)
        read = passes * len(rows) / n
        return dataclasses.replace(
            state, step_size=1.0 / (AUTO_THETA * L),
            seconds=state.seconds + (time.perf_counter() - start),
            passes_read=state.passes_read + read, solves=state.solves + read)

    def _initial_dictionary(self, form, data: FiniteData, rng: np.random.Generator) -> Any:
        n, d, k = data.n, data.d, self.n_components
        # the dictionary, its gradients and the snapshot codes, before any is allocated
        check_state_memory(k * (k + n + d), data.context["dtype"], k,
                           data.context.get("device"))
        init = self.init
        if isinstance(init, str) and init == "auto":
            # data rows carry the outliers a robust formulation is meant to ignore (rows with
            # entries of 1000 scales stall it at the start): a Gaussian start for those
            init = "gaussian" if form.robust else "random"
        if isinstance(init, str) and init in ("random", "ones"):
            if init == "ones":
                warn("init='ones' (the paper's start) keeps W rank one forever (identical columns "
                     "stay identical); adding 1e-3 Gaussian noise")
                base = np.ones((d, k))
            else:
                rows = rng.choice(n, k, replace=n < k)
                base = to_numpy(data.rows(np.sort(rows))).T[:, rng.permutation(k)]
            W = base + 1e-3 * rng.standard_normal((d, k))
        elif isinstance(init, str):
            W = rng.standard_normal((d, k))
        else:
            W = np.asarray(to_numpy(init), dtype=float)
            if W.shape != (k, d) or not np.all(np.isfinite(W)):
                raise ValueError(f"init must be a finite array of shape ({k}, {d}) "
                                 f"(n_components, n_features), got shape {W.shape}")
            W = W.T
        return form.prox_w(as_tensor(W, data.backend, **data.context), 0.0, n)

    def _check_fixed_by_state(self, state: FiniteState) -> None:
        """Refuse, by name, a parameter set since the fit that the fitted state fixes (the
        dictionary's size, the formulation, the method's step, the batch sizes): ``fit``
        starts anew with it."""
        fixed = {"n_components": int(tl.shape(state.dictionary)[1]),
                 "inner_batch": state.inner_batch, "epoch_length": state.epoch_length,
                 "formulation": state.formulation.name, "data_scale": state.scale}
        # the sizes as the fit resolved them (an inner_batch above n is n)
        inner_batch, epoch_length = default_sizes(state.n_samples, self.inner_batch,
                                                  self.epoch_length)
        given = {"n_components": self.n_components, "formulation": self.formulation,
                 "data_scale": None if isinstance(self.data_scale, str) else
                 float(self.data_scale),
                 "inner_batch": None if self.inner_batch is None else inner_batch,
                 "epoch_length": None if self.epoch_length is None else epoch_length}
        changed = [f"{name}={getattr(self, name)!r} (fitted with {value!r})"
                   for name, value in fixed.items()
                   if given[name] is not None and given[name] != value]
        if (self.method == "smm") != (state.step_size is None):
            changed.append(f"method={self.method!r} (fitted with "
                           f"{'smm' if state.step_size is None else 'a step size'})")
        elif self.step_size != "auto" and state.step_size is not None and \
                float(self.step_size) != float(state.step_size):
            changed.append(f"step_size={self.step_size!r} (fitted with {state.step_size!r})")
        if changed:
            raise ValueError(f"{', '.join(changed)}: set since the fit, but the fitted state "
                             f"fixes it; call fit to start anew with it")

    def _current_formulation(self, state: FiniteState) -> Any:
        """The formulation of the current parameters, with the fitted data-dependent part
        (``Q``) of the state's: what a checkpointed and reloaded learner rebuilds too."""
        form = self._make_formulation(state.n_features)
        if getattr(state.formulation, "Q", None) is not None:
            form = dataclasses.replace(form, Q=state.formulation.Q)
        return form

    def _commit(self, state: FiniteState) -> None:
        """Set the fitted attributes from ``state`` (the only place the learner changes)."""
        check_overflow((state.dictionary,))  # finite data whose squares overflow (~1e160)
        self.__dict__.update(self._fitted_attributes(state))

    def _forget_fit(self) -> None:
        """Remove what :meth:`_commit` set and the feature names (``fit`` starts anew)."""
        if "state_" in self.__dict__:
            for name in self._fitted_attributes(self.state_):
                del self.__dict__[name]
        self.__dict__.pop("feature_names_in_", None)

    def _fitted_attributes(self, state: FiniteState) -> dict:
        W_out = state.output if self.output == "random" and self.method == "vr" \
            else state.dictionary
        return dict(
            state_=state, loadings_=[state.dictionary], history_=list(state.history),
            n_epochs_=state.n_epochs, n_iter_=state.n_epochs, n_steps_=state.n_steps,
            inner_batch_=state.inner_batch, epoch_length_=state.epoch_length,
            formulation_=state.formulation, backend_=state.backend,
            step_size_=state.step_size, scale_=state.scale, _context=state.context,
            _W_output=W_out, n_features_in_=state.n_features, n_samples_=state.n_samples)

    def _epoch(self, state: FiniteState, X: Any, spread: SpreadRows | None = None
               ) -> tuple[FiniteState, dict]:
        """One outer iteration as a pure function of the state (the learner is not touched);
        its full passes on the workers of ``spread``, if given. Torch tensors in host memory
        run it on numpy (``core.backend.run``): the state's backend and context are those of
        the arrays the epoch sees, and the learner's again afterwards."""
        if spread is not None:  # the workers read and convert their own rows
            return self._epoch_on(state, X, spread)

        def epoch(state: FiniteState, X: Any) -> tuple[FiniteState, dict]:
            here = dataclasses.replace(state, backend=tl.get_backend(),
                                       context=tl.context(state.dictionary))
            return self._epoch_on(here, X)

        new, info = run(state.backend, epoch, state, X)
        return dataclasses.replace(new, backend=state.backend, context=state.context), info

    def _epoch_on(self, state: FiniteState, X: Any, spread: SpreadRows | None = None
                  ) -> tuple[FiniteState, dict]:
        data = self._finite_data(X, state.context, state.backend, state.formulation, spread,
                                 scale=state.scale)
        if (data.n, data.d) != (state.n_samples, state.n_features):
            raise ValueError(f"X has shape ({data.n}, {data.d}) but this learner was fitted on "
                             f"({state.n_samples}, {state.n_features}): VR works on one finite "
                             f"data set")
        # the epoch draws from a copy: the state given (and the learner's) keeps its generator
        state = dataclasses.replace(state, rng=copy.deepcopy(state.rng))
        start = time.perf_counter()
        with using(data.backend):
            methods = {"vr": self._vr_epoch, "sgd": self._sgd_epoch, "smm": self._smm_epoch}
            state, info = methods[self.method](state, data)
        if info["snapshot_loss"] is not None:  # in the data's units, as objective()
            info["snapshot_loss"] *= state.scale * state.scale
        state = dataclasses.replace(state, seconds=state.seconds + (time.perf_counter() - start),
                                    n_epochs=state.n_epochs + 1)
        info.update(epoch=state.n_epochs, passes_read=state.passes_read, solves=state.solves,
                    seconds=state.seconds, steps=state.n_steps)
        return dataclasses.replace(state, history=(*state.history, info)), info

    def _coder(self, tol: float) -> dict:
        return dict(solver=self.code_solver, tol=tol, max_iter=self.code_max_iter)

    def _tolerance(self, state: FiniteState, t: int) -> float:
        if not self.inexact:
            return float(self.code_tol)
        return inexact_tolerance(self.c_tol, self.tau, state.epoch_length, state.n_epochs, t)

    def _vr_epoch(self, state: FiniteState, data: FiniteData) -> tuple[FiniteState, dict]:
        form, n, b, m = state.formulation, state.n_samples, state.inner_batch, state.epoch_length
        rng, eta = state.rng, state.step_size
        W0 = W = state.dictionary
        W_out, out_count = state.output, state.output_count
        tol0 = self._tolerance(state, 0)
        G, sums, kept = full_gradient(form, W0, data, self.chunk_size, keep_codes=bool(
            self.store_snapshot_codes), **self._coder(tol0))
        gamma = gradient_mapping(form, W0, G, eta, n)
        info = {"grad_map_sq": float(tl.sum(gamma * gamma)),
                "snapshot_loss": sums.loss / n + form.psi(W0, n),
                "code_iterations": sums.iterations, "max_code_iter": sums.max_iter,
                "code_tol": tol0}
        stored = _concatenate(kept) if kept is not None else None
        for t in range(m):
            if self.output == "random":  # reservoir over W^{s,t}, t = 0..m-1 (Option I)
                out_count += 1
                if rng.random() * out_count < 1.0:
                    W_out = W
            rows = np.sort(rng.choice(n, b, replace=False))
            Xb = data.rows(rows)
            codes0 = _take(stored, rows) if stored is not None else \
                solve_codes(form, Xb, W0, **self._coder(tol0))
            codes = solve_codes(form, Xb, W, **self._coder(self._tolerance(state, t)))
            W = prox_step(form, W, vr_direction(W, W0, Xb, codes, codes0, G), eta, n)
            info["code_iterations"] += int(codes.n_iter.sum() + codes0.n_iter.sum())
            info["max_code_iter"] = max(info["max_code_iter"], int(codes.n_iter.max()))
        solved = (n + (1 if stored is not None else 2) * m * b) / n
        return dataclasses.replace(
            state, dictionary=W, output=W_out, output_count=out_count,
            n_steps=state.n_steps + m, passes_read=state.passes_read + (n + m * b) / n,
            solves=state.solves + solved), info

    def _sgd_epoch(self, state: FiniteState, data: FiniteData) -> tuple[FiniteState, dict]:
        form, n, b, rng = state.formulation, state.n_samples, state.inner_batch, state.rng
        offset = 100.0 * b if self.step_offset is None else float(self.step_offset)
        beta = state.step_size * offset
        W, iterations, steps = state.dictionary, 0, state.n_steps
        for _ in range(state.epoch_length):
            Xb = data.rows(np.sort(rng.choice(n, b, replace=False)))
            codes = solve_codes(form, Xb, W, **self._coder(self._tolerance(state, 0)))
            gamma = sgd_step_size(beta, offset, b, steps)
            W = prox_step(form, W, batch_gradient(W, Xb, codes), gamma, n)
            steps += 1
            iterations += int(codes.n_iter.sum())
        return self._stochastic_step(state, W, steps, iterations)

    def _smm_epoch(self, state: FiniteState, data: FiniteData) -> tuple[FiniteState, dict]:
        form, n, b, rng = state.formulation, state.n_samples, state.inner_batch, state.rng
        W, iterations, steps = state.dictionary, 0, state.n_steps
        k, d = tl.shape(W)[1], tl.shape(W)[0]
        sums = state.statistics or {"A": tl.zeros((k, k), **state.context),
                                    "B": tl.zeros((d, k), **state.context)}
        A, B = sums["A"], sums["B"]
        feng = type(form) is RobustPCA
        for _ in range(state.epoch_length):
            Xb = data.rows(np.sort(rng.choice(n, b, replace=False)))
            codes = solve_codes(form, Xb, W, **self._coder(self._tolerance(state, 0)))
            A = A + tl.dot(tl.transpose(codes.H), codes.H)  # sums: S-2's 1/t is undefined at t=0
            B = B + narrow_dot(tl.transpose(Xb - codes.R), codes.H)
            steps += 1
            iterations += int(codes.n_iter.sum())
            if feng:  # W = B (A + lam1 I)^-1 (Feng et al.; S-2 as printed drops psi)
                system = A + form.lam1 * tl.eye(k, **state.context)
                W = tl.transpose(tl.solve(system, tl.transpose(B)))
                continue
            L = spectral_norm_psd(A)
            if L <= 0:
                continue
            seen = steps * b  # the surrogate is a sum over the samples seen
            for _ in range(self.smm_steps):
                W = form.prox_w(W - (tl.dot(W, A) - B) / L, seen / L, n)
        state = dataclasses.replace(state, statistics={"A": A, "B": B})
        return self._stochastic_step(state, W, steps, iterations)

    def _stochastic_step(self, state: FiniteState, W: Any, steps: int,
                         iterations: int) -> tuple[FiniteState, dict]:
        """The state after an epoch of ``sgd``/``smm`` (one fraction ``m b / n`` of a pass
        read and solved), and its history row."""
        fraction = state.epoch_length * state.inner_batch / state.n_samples
        info = {"grad_map_sq": None, "snapshot_loss": None, "code_iterations": iterations,
                "max_code_iter": None, "code_tol": self._tolerance(state, 0)}
        return dataclasses.replace(state, dictionary=W, n_steps=steps,
                                   passes_read=state.passes_read + fraction,
                                   solves=state.solves + fraction), info

    # -- using the model -------------------------------------------------------------------------

    @property
    def components_(self) -> Any:
        """The output dictionary ``W^T``, shape ``(n_components, n_features)``."""
        if "_W_output" not in self.__dict__:
            raise AttributeError("components_ is available after fit")
        with using(self.backend_):
            return tl.transpose(self._W_output)

    def _codes(self, X: Any, tol: float, max_iter: int) -> FiniteCodes:
        self._check_fitted()
        self._check_feature_names(X)

        def solve(W: Any, X: Any) -> FiniteCodes:
            data = self._finite_data(X, tl.context(W), tl.get_backend(), self.formulation_,
                                     scale=self.scale_)
            if data.d != self.n_features_in_:
                raise ValueError(f"X has {data.d} features but this learner was fitted on "
                                 f"{self.n_features_in_}")
            return _concatenate([solve_codes(self.formulation_, chunk, W, solver="fista",
                                             tol=tol, max_iter=max_iter)
                                 for _, chunk in data.chunks(self.chunk_size)])

        return run(self.backend_, solve, self._W_output, X)

    def transform(self, X: Any) -> Any:
        """Codes ``H`` of shape ``(n_samples, n_components)`` at the output dictionary (in the
        data's units: ``inverse_transform`` of them is the low-rank part of ``X``)."""
        return self._codes(X, self.eval_tol, self.eval_max_iter).H * self.scale_

    def outliers(self, X: Any) -> Any:
        """Outliers ``R`` of shape ``(n_samples, n_features)`` (zeros if not robust)."""
        return self._codes(X, self.eval_tol, self.eval_max_iter).R * self.scale_

    def inverse_transform(self, H: Any) -> Any:
        """``H W^T``: the low-rank part of the samples coded ``H``."""
        self._check_fitted()
        H = check_batch(H, backend=self.backend_, context=self._context,
                        sample_shape=(int(tl.shape(self._W_output)[1]),), name="H",
                        owner=type(self).__name__, missing_hint=False)
        with using(self.backend_):
            return tl.dot(H, tl.transpose(self._W_output))

    def objective(self, X: Any, *, client: Any = None) -> float:
        """``f(W)`` of the output dictionary on ``X`` (full pass, accurate solves: docs/svrmf.md),
        in the data's squared units (``scale_**2`` times the problem solved in units of the
        data scale). Not counted in ``history_``'s passes or seconds. ``client``: the pass runs
        on a Dask cluster (see :meth:`fit`)."""
        self._check_fitted()
        self._check_feature_names(X)
        with self._spread(X, client) as spread:
            data = self._finite_data(X, self._context, self.backend_, self.formulation_, spread,
                                     scale=self.scale_)
            with using(self.backend_):
                return self.scale_ * self.scale_ * objective(
                    self.formulation_, self._W_output, data, self.chunk_size,
                    tol=self.eval_tol, max_iter=self.eval_max_iter)

    def gradient_mapping(self, X: Any, step: float | None = None, *,
                         client: Any = None) -> float:
        """``||Gamma_eta(W)||^2`` of the output dictionary on ``X`` (section 4.1): a full pass
        with accurate solves, for any ``method`` (``history_`` has it for free for ``vr`` only).

        Parameters
        ----------
        step : float, optional
            The ``eta`` of the gradient mapping; None uses the learner's step (1.0 for
            ``smm``).
        """
        self._check_fitted()
        self._check_feature_names(X)
        eta = step if step is not None else (self.step_size_ or 1.0)
        eta = check_positive_number(eta, "step")
        with self._spread(X, client) as spread:
            data = self._finite_data(X, self._context, self.backend_, self.formulation_, spread,
                                     scale=self.scale_)
            with using(self.backend_):
                G, _, _ = full_gradient(self.formulation_, self._W_output, data,
                                        self.chunk_size, solver="fista", tol=self.eval_tol,
                                        max_iter=self.eval_max_iter)
                gamma = gradient_mapping(self.formulation_, self._W_output, G, eta, data.n)
                return float(tl.sum(gamma * gamma))

    def score(self, X: Any, y: Any = None) -> float:
        """``-f(W)`` (higher is better)."""
        value = self.objective(X)
        check_overflow((np.asarray(value),))
        return -value

    # -- checkpoints (the batch learners' layout, tensorstream.engine.checkpoint) -----------

    def _fitted_contents(self) -> tuple[dict, dict]:
        """The state's counters and history (JSON values) and its tensors, by name; the
        dictionary is the member ``loading_0``, as the online learners' loadings."""
        self._check_fitted()
        state = self.state_
        values = {name: getattr(state, name) for name in _STATE_VALUES}
        tensors = {"loading_0": state.dictionary, "output": state.output}
        if state.statistics is not None:
            tensors.update(A=state.statistics["A"], B=state.statistics["B"])
        Q = getattr(state.formulation, "Q", None)
        if Q is not None:  # host numpy; the formulation casts it to W's dtype where used
            tensors["Q"] = np.asarray(Q, dtype=to_numpy(state.dictionary).dtype)
        return {**values, "history": list(state.history)}, tensors

    def _checkpoint_contents(self) -> tuple[dict, dict]:
        """The batch learners' layout, plus the fields every online checkpoint has at the top
        (steps, samples seen, scale, random generator), which ``tensorstream info`` shows."""
        meta, arrays = super()._checkpoint_contents()
        state = self.state_
        meta.update(n_steps=state.n_steps, n_samples_seen=state.n_samples_seen, n_loadings=1,
                    scale=state.scale, rng=state.rng.bit_generator.state)
        return meta, arrays

    @classmethod
    def _upgraded(cls, meta: dict, arrays: dict) -> tuple[dict, dict]:
        """Checkpoints of format versions 1 to 4 (a ``state`` mapping and ``state_*``
        members) in the current layout."""
        return _upgraded_layout(meta, arrays) if "state" in meta else (meta, arrays)

    @classmethod
    def _loaded_params(cls, params: dict, meta: dict) -> dict:
        """As the batch learners load them, with the raw units (``data_scale=1.0``) of the
        files of format versions 1 to 4 written before the data scale (so that ``tensorstream
        info`` shows what loading gives)."""
        params = super()._loaded_params(params, meta)
        return {"data_scale": 1.0, **params} if "state" in meta else params

    def _restore_fitted(self, meta: dict, arrays: dict, backend: str, context: dict) -> None:
        """The state of a checkpoint, checked as the constructor and ``fit`` would."""
        self._check_params()
        values = _checked_values(meta["values"])
        rng = np.random.default_rng()
        rng.bit_generator.state = meta["rng"]
        with using(backend):
            tensors = {name: as_tensor(arrays[name], backend, **context)
                       for name in ("loading_0", "output", "A", "B") if name in arrays}
        d, k = values["n_features"], self.n_components
        for name, shape in (("loading_0", (d, k)), ("output", (d, k)), ("A", (k, k)),
                            ("B", (d, k))):
            if name in tensors and tuple(tensors[name].shape) != shape:
                raise ValueError(f"member {name!r} has shape {tuple(tensors[name].shape)}, not "
                                 f"{shape} (n_features={d}, n_components={k})")
        form = self._make_formulation(d)
        if "Q" in arrays:
            form = dataclasses.replace(form, Q=arrays["Q"])
        statistics = {"A": tensors["A"], "B": tensors["B"]} if "A" in tensors else None
        self._commit(FiniteState(
            dictionary=tensors["loading_0"], output=tensors["output"], statistics=statistics,
            formulation=form, scale=float(meta["scale"]), rng=rng, backend=backend,
            context=context, n_steps=int(meta["n_steps"]), **values))


#: the state's fields a checkpoint stores as JSON values (besides the history)
_STATE_VALUES = ("n_samples", "n_features", "inner_batch", "epoch_length", "step_size",
                 "output_count", "n_epochs", "passes_read", "solves", "seconds")
_COUNTS = {"n_samples": 1, "n_features": 1, "inner_batch": 1, "epoch_length": 1,
           "output_count": 0, "n_epochs": 0}  # each count's least value


def _checked_values(values: dict) -> dict:
    """The JSON values of a checkpointed state, or a ``ValueError`` naming the field."""
    checked = {}
    for name, least in _COUNTS.items():
        value = values[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
        checked[name] = value
    for name in ("passes_read", "solves", "seconds", "step_size"):
        value = values[name]
        if value is None and name == "step_size":
            checked[name] = None
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not 0 <= value < float("inf"):
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        checked[name] = float(value)
    history = values["history"]
    if not isinstance(history, list) or not all(isinstance(row, dict) for row in history):
        raise ValueError(f"history must be a list of mappings, got {type(history).__name__}")
    if checked["inner_batch"] > checked["n_samples"]:
        raise ValueError(f"inner_batch={checked['inner_batch']} exceeds "
                         f"n_samples={checked['n_samples']}")
    return {**checked, "history": tuple(history)}


#: the old layout's state keys, by the name the current layout gives them
_OLD_VALUES = {"n_samples": "n", "n_features": "d", "inner_batch": "b", "epoch_length": "m",
               "output_count": "out_count", "n_epochs": "epochs", "passes_read": "passes",
               "solves": "solves", "seconds": "seconds"}


def _upgraded_layout(meta: dict, arrays: dict) -> tuple[dict, dict]:
    """A checkpoint written before format version 5 (the state as one ``state`` mapping,
    members ``state_W_out``, ``state_A``, ``state_B``, ``state_Q``) in the current layout,
    with the defaults of the versions before the data scale and the automatic step."""
    state = meta["state"]
    params = {"data_scale": 1.0, **meta["params"]}  # files before data_scale: raw units
    step = state["eta"] if "eta" in state else (  # files before step_size="auto"
        None if params.get("method", "vr") == "smm" else float(params["step_size"]))
    values = {new: state[old] for new, old in _OLD_VALUES.items()}
    values.update(step_size=step, history=meta["history"])
    new_meta = {**meta, "params": params, "values": values, "lists": {},
                "scale": state.get("scale", 1.0), "n_steps": state["steps"]}
    renamed = {"state_W_out": "output", "state_A": "A", "state_B": "B", "state_Q": "Q"}
    return new_meta, {renamed.get(key, key): value for key, value in arrays.items()}


def _scale_sum(chunk: Any) -> float:
    """A chunk's part of the ``"auto"`` data scale (its samples' median absolute entries)."""
    return sample_scale_sums(chunk)[0]


def _concatenate(parts: list[FiniteCodes]) -> FiniteCodes:
    return FiniteCodes(tl.concatenate([c.H for c in parts], axis=0),
                 tl.concatenate([c.R for c in parts], axis=0),
                 np.concatenate([c.n_iter for c in parts]),
                 tl.concatenate([c.residual for c in parts], axis=0))


def _take(codes: FiniteCodes, rows: np.ndarray) -> FiniteCodes:
    """The stored snapshot codes of ``rows`` (no solver iterations spent)."""
    index = rows
    if backend_of(codes.H) == "pytorch":
        import torch

        index = torch.as_tensor(rows, device=codes.H.device)
    return FiniteCodes(codes.H[index], codes.R[index], np.zeros(len(rows), dtype=np.int64),
                 codes.residual[index])


__all__ = ["VarianceReducedMF"]
