"""Variance-reduced stochastic matrix factorization (Zhao, Haskell & Feng 2017).

:class:`VarianceReducedMF` runs Algorithm 1 (``method="vr"``) on a *finite* data set, and the
paper's two baselines in the same code paths (same formulation, coder, prox and sampling):
proximal SGD with ``gamma_t = beta / (b t + beta')`` (``method="sgd"``, Algorithm S-3) and
stochastic majorization-minimization on the sums ``A = sum h h^T``, ``B = sum (x - r) h^T``
(``method="smm"``, Algorithm S-2). See ``docs/svrmf.md``. The epochs themselves are functions
of :mod:`tensorstream.algorithms.variance_reduced`; this module holds the estimator: its
parameters, the finite data set behind ``X``, the fitted attributes and the checkpoints.

One call of :meth:`VarianceReducedMF.partial_fit` is one outer iteration ("epoch"):

* ``vr``: snapshot ``W0 = W``; full gradient ``G`` over the data, chunk by chunk; then
  ``epoch_length`` steps ``W <- P_W(W - eta V; eta)`` with the SVRG estimator
  ``V = grad_B(W) - grad_B(W0) + G`` on mini-batches of ``inner_batch`` samples drawn uniformly
  without replacement (a host numpy Generator: every backend sees the same batches);
* ``sgd``/``smm``: ``epoch_length`` stochastic steps (default ``ceil(n / b)``, one pass).
"""

from __future__ import annotations

import contextlib
import dataclasses
import numbers
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorly as tl

from ..algorithms.variance_reduced import (
    METHODS,
    EpochOptions,
    concatenate_codes,
    epoch_options,
    epoch_sizes,
    initial_state,
    method_settings,
    run_epoch,
)
from ..core.backend import run, using
from ..core.validation import (
    ARRAY,
    NONE,
    Instance,
    Interval,
    Options,
    check_batch,
    check_overflow,
    check_positive_number,
    feature_names,
    generator_of,
)
from ..engine.distributed import SpreadRows
from ..finite.formulations import (
    FORMULATIONS,
    FiniteCodes,
    check_formulation_params,
    make_formulation,
    solve_codes,
)
from ..finite.state import FiniteState
from ..finite.variance_reduction import (
    chunk_count,
    default_sizes,
    finite_matrix,
    full_gradient,
    gradient_mapping,
    objective,
)
from ._finite import FiniteDataLearner
from ._fitting import _progress_bar, check_fit_work
from ._params import SHARED_CONSTRAINTS


class VarianceReducedMF(FiniteDataLearner):
    """Stochastic matrix factorization by variance reduction, over the formulations P1-P8.

    Minimises ``f(W) = (1/n) sum_i min_{h, r} [1/2 ||x_i - W h - r||^2 + phi(h) + varphi(r)]
    + psi(W)`` over ``W`` in ``C`` for a finite data set ``X`` of shape ``(n, d)``.

    Parameters
    ----------
    n_components : int
        Dictionary size ``k``.
    formulation : {"odl", "ossl", "onmf", "ssodl", "orpca", "omrmd", "olrr", "ornmf"}
        P1-P8 of the paper, section 2 (see :mod:`tensorstream.finite.formulations`).
    formulation_params : dict, optional
        The formulation's weights and data, by the names
        :func:`~tensorstream.finite.formulations.make_formulation` takes them, in units of the
        data scale (``data_scale``): ``odl`` ``lam``; ``ossl`` ``lam``, ``groups``; ``onmf``
        ``lam``; ``ssodl`` ``lam``, ``lam1``, ``laplacian`` (required); ``orpca`` and
        ``omrmd`` ``lam1``, ``lam2``; ``olrr`` ``lam1``, ``lam2``, ``lam3``, ``lrr_A``,
        ``lrr_B``; ``ornmf`` ``lam``, ``M``, ``M_prime``; every one ``nu`` (a ridge on the
        codes, 0); the nonnegative ones (onmf, ssodl, ornmf) ``allow_negative`` (accept
        negative data, False). ``lam``, ``lam1``, ``lam2`` None or absent are ``1/sqrt(d)``;
        absent, ``lam3`` is 1, ``M`` and ``M_prime`` 1e3. A key the formulation does not take
        is refused by name, before anything is learned (and ``ossl``'s ``lam`` where every
        group carries its own weight).
    method : {"vr", "sgd", "smm"}, default "vr"
        Algorithm 1, proximal SGD, or stochastic MM.
    method_params : dict, optional
        The method's own settings (defaults in
        :data:`~tensorstream.algorithms.variance_reduced.METHOD_PARAMS`; a key of another
        method is refused by name):

        - ``step_size`` (``vr``, ``sgd``; float > 0 or ``"auto"``, default ``"auto"``):
          ``vr``: the constant step ``eta`` (in units of the data scale); ``sgd``: the first
          step ``gamma_0 = beta / beta'`` (so ``beta = step_size * step_offset``).
          ``"auto"`` (our extension, docs/svrmf.md): ``1 / (2.3 L)`` with ``L`` a local
          Lipschitz constant of the gradient at the initial dictionary, found by backtracking
          on the descent lemma over a random subsample of ``auto_samples`` samples
          (:func:`~tensorstream.finite.variance_reduction.estimate_lipschitz`); the step is
          then kept constant (``step_size_``), and the passes and seconds it costs are
          counted in ``history_``.
        - ``auto_samples`` (``vr``, ``sgd`` with ``step_size="auto"``; int, default 1000):
          the subsample of that estimate.
        - ``output`` (``vr``; ``"last"`` or ``"random"``, default ``"last"``): Option II
          (last iterate) or Option I (an iterate ``W^{s,t}``, ``t < m``, drawn uniformly by
          reservoir sampling) for ``components_``.
        - ``store_snapshot_codes`` (``vr``; bool, default False): keep the snapshot codes of
          the full pass (``O(n (k + d))`` memory) instead of recomputing them for each
          mini-batch.
        - ``step_offset`` (``sgd``; float > 0 or None, default None): ``beta'`` of proximal
          SGD; None is ``100 b``.
        - ``smm_steps`` (``smm``; int, default 5): projected-gradient steps on the surrogate
          per SMM update (ORPCA: Feng's exact ``W = B (A + lam1 I)^-1`` instead).
    n_epochs : int, default 10
        Outer iterations run by ``fit``; 0 only initialises (``W^{0,0}``, and the ``"auto"``
        step), e.g. to evaluate ``objective`` at the start.
    inner_batch : int or None
        Mini-batch size ``b``; None is ``round(0.2 n^(2/3))`` (at least 1, at most ``n``).
    epoch_length : int or None
        Inner steps per epoch ``m``; None is ``round(0.5 n^(1/3))`` for ``vr`` and
        ``ceil(n / b)`` (one pass) for ``sgd``/``smm``.
    data_scale : "auto" or float, default "auto"
        The unit the problem is solved in: the data are read divided by it, so the weights,
        the step and the tolerances are in its units and fitting ``c X`` gives ``c`` times the
        reconstruction and outliers of ``X``. ``"auto"``: the mean over samples of each
        sample's median absolute entry (robust to corruptions of fewer than half of a sample's
        entries), one pass over the data, counted in ``history_``; kept as ``scale_`` and in
        checkpoints. A float declares it (1.0: the raw units of the paper).
    init : {"auto", "random", "gaussian", "ones"} or array of shape (n_components, n_features)
        ``"auto"`` (default): ``"gaussian"`` for the robust formulations (orpca, omrmd, olrr,
        ornmf: data rows carry the outliers), ``"random"`` otherwise. ``"random"``: random data
        rows plus ``1e-3`` Gaussian noise, projected onto ``C``;
        ``"gaussian"``: N(0, 1) entries, projected; ``"ones"``: the paper's all-ones start,
        which is degenerate (rank one forever: identical columns get identical updates), so it
        warns and adds the same noise.
    chunk_size : int, default 1024
        Samples per chunk of the full passes.
    coder : {"fista", "bsum"}, default "fista"
        The solver of the codes: FISTA (Nesterov momentum) or plain proximal gradient.
    code_tol : float or dict, default 1e-6
        Per-sample absolute tolerance on the prox-gradient residual of the coder: a constant,
        or the dict ``{"c_tol": c, "tau": tau}`` (defaults 1.0 and 1e-3), the inexact coder
        of Theorem 2: ``c (m s + t + 1)^-(1/2 + tau)`` at inner step ``t`` of epoch ``s``
        (shifted by one), the snapshot codes at the ``(s, 0)`` value in lines 4 and 8 alike;
        then the ``"auto"`` step's estimate solves its codes to 1e-6.
    code_max_iter : int, default 100
    eval_tol, eval_max_iter : float, int
        Coder settings of :meth:`objective` (accurate solves).
    random_state : int, Generator or None
    backend : {"numpy", "pytorch", None}
    verbose : bool
    callback : callable, optional
        ``callback(learner, info)`` after every epoch (``info`` is the new ``history_`` row);
        returning True stops ``fit``.
    device, n_threads
        As in :class:`~tensorstream.learners.ocpdl.OnlineCPDL` (``None`` and 1 by default).

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
        The step used (``method_params``' ``step_size``, or the estimate of ``"auto"``; None
        for ``smm``), in units of the data scale.
    scale_ : float
        The data scale (``data_scale``). ``history_``'s ``snapshot_loss`` and :meth:`objective`
        are in the data's units; the gradient mappings are those of the problem in units of
        the scale.
    n_epochs_ : int
    n_iter_ : int
        Epochs run, as ``n_epochs_``: scikit-learn's passes over the data (an epoch reads the
        data set about once: ``vr`` a full pass plus ``m b`` samples, ``sgd``/``smm``
        ``m b`` samples, one pass at the default ``epoch_length``).
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
    #: the data's raw units (``data_scale=1.0``; ``lam3 = 1``, ``M = M' = 1e3``, no ridge:
    #: ``formulation_params=None``), Algorithm 1, and its all-ones start ``W^{0,0}``, which is
    #: degenerate (it warns and adds a little noise: docs/svrmf.md).
    #: The paper gives no step size: pass one, ``method_params={"step_size": ...}`` (our tests
    #: use 10 on ORPCA-synth, 3 on digits-ODL).
    paper_params = {"method": "vr", "init": "ones", "data_scale": 1.0}

    def __init__(self, n_components: int, *, formulation: str = "odl",
                 formulation_params: dict | None = None, method: str = "vr",
                 method_params: dict | None = None, n_epochs: int = 10,
                 inner_batch: int | None = None, epoch_length: int | None = None,
                 init="auto", data_scale: float | str = "auto", chunk_size: int = 1024,
                 coder: str = "fista", code_tol: float | dict = 1e-6,
                 code_max_iter: int = 100, eval_tol: float = 1e-7, eval_max_iter: int = 5000,
                 random_state=None, backend: str | None = None, device: Any = None,
                 verbose: bool = False, callback=None, n_threads: int | None = 1):
        super().__init__(n_components, backend=backend, device=device, n_threads=n_threads)
        self.formulation = formulation
        self.formulation_params = formulation_params
        self.method = method
        self.method_params = method_params
        self.n_epochs = n_epochs
        self.inner_batch = inner_batch
        self.epoch_length = epoch_length
        self.init = init
        self.data_scale = data_scale
        self.chunk_size = chunk_size
        self.coder = coder
        self.code_tol = code_tol
        self.code_max_iter = code_max_iter
        self.eval_tol = eval_tol
        self.eval_max_iter = eval_max_iter
        self.random_state = random_state
        self.verbose = verbose
        self.callback = callback

    # -- parameters ------------------------------------------------------------------------------

    _fitted_attribute = "loadings_"
    #: parameters a checkpoint stores as members when they are (or hold) arrays
    _array_parameters = ("formulation_params", "init")

    _parameter_constraints = {
        **SHARED_CONSTRAINTS,
        "formulation": [Options(*FORMULATIONS)],
        # the keys and values of the dicts: checked by _check_rules and make_formulation
        "formulation_params": [Instance("a dict", dict), NONE],
        "method": [Options(*METHODS)],
        "method_params": [Instance("a dict", dict), NONE],
        "n_epochs": [Interval("int", 0, None)],
        "inner_batch": [Interval("int", 1, None), NONE],
        "epoch_length": [Interval("int", 1, None), NONE],
        "init": [Options("auto", "random", "gaussian", "ones"), ARRAY],
        "data_scale": [Interval("real", 0, None, closed="neither"), Options("auto")],
        "chunk_size": [Interval("int", 1, None)],
        "coder": [Options("fista", "bsum")],
        "code_tol": [Interval("real", 0, None), Instance("a dict", dict)],
        "eval_tol": [Interval("real", 0, None)],
        "eval_max_iter": [Interval("int", 1, None)],
    }

    def _check_rules(self) -> None:
        """The dicts' keys, each refused by name where the formulation or the method takes
        no such parameter (the values are checked as the formulation is built)."""
        with _named("formulation_params"):
            check_formulation_params(self.formulation, self.formulation_params)
        if self.formulation == "orpca" and self.method == "smm" and \
                "smm_steps" in (self.method_params or {}):
            raise ValueError("method_params: 'smm_steps' does not apply to formulation "
                             "'orpca' with method 'smm': its update is Feng's exact solve")
        self._options()

    def _make_formulation(self, d: int):
        with _named("formulation_params"):
            return make_formulation(self.formulation, d, n_components=self.n_components,
                                    **(self.formulation_params or {}))

    def _settings(self) -> dict:
        """The method's settings: ``method_params`` over their defaults."""
        return method_settings(self.method, self.method_params)

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
        self._check_fit_work(X)
        names = feature_names(X)
        with self._all_or_nothing("fit"):
            self._forget_fit()  # a fresh start: nothing of a previous fit is kept
            with self._spread(X, client) as spread:
                self._fit_epochs(X, spread)
            self._keep_feature_names(names)
        return self

    def _check_fit_work(self, X: Any) -> None:
        """Refuse a ``fit`` past ``MAX_FIT_STEPS`` from the data's shape alone: before the
        start-up passes (data scale, initial dictionary, step estimate, the scatter to a
        cluster) are spent on a fit that would be refused."""
        # a matrix's rows are its samples: read without the conversion finite_matrix makes
        # (a DataFrame's values, a lazily opened DataArray's load, an Epochs' sample space),
        # which the fit makes again where it reads the data
        shape = getattr(X, "shape", ())
        n_samples = shape[0] if len(shape) == 2 else \
            finite_matrix(X, type(self).__name__).shape[0]
        if not (isinstance(n_samples, numbers.Integral) and n_samples >= 1):
            return  # no rows, or rows not known yet (a lazy dask array): the fit's checks say so
        _, epoch_length = epoch_sizes(n_samples, self.inner_batch, self.epoch_length,
                                      self.method)
        check_fit_work(self.n_epochs * epoch_length, f"n_epochs={self.n_epochs:,} epochs of "
                       f"{epoch_length:,} inner steps", "n_epochs or epoch_length",
                       type(self).__name__)

    def _fit_epochs(self, X: Any, spread: SpreadRows | None = None) -> VarianceReducedMF:
        state = self._initial_state(X, spread)
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
        settings = self._settings()
        return initial_state(
            data, form, generator_of(self.random_state), self._options(),
            n_components=self.n_components, init=self.init, inner_batch=self.inner_batch,
            epoch_length=self.epoch_length, step_size=settings.get("step_size"),
            auto_samples=settings.get("auto_samples"), scale=scale, passes_read=scale_passes,
            seconds=scale_seconds)

    def _options(self) -> EpochOptions:
        """The options of an epoch, from the parameters (the one place the algorithm's
        settings are read)."""
        return epoch_options(self.method, self.method_params, self.code_tol, coder=self.coder,
                             code_max_iter=self.code_max_iter, chunk_size=self.chunk_size)

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
        step = self._settings().get("step_size")
        if (self.method == "smm") != (state.step_size is None):
            changed.append(f"method={self.method!r} (fitted with "
                           f"{'smm' if state.step_size is None else 'a step size'})")
        elif step not in ("auto", None) and float(step) != float(state.step_size):
            changed.append(f"method_params step_size={step!r} (fitted with "
                           f"{state.step_size!r})")
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

    def _fitted_attributes(self, state: FiniteState) -> dict:
        W_out = state.output if self._settings().get("output") == "random" \
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
        return run_epoch(state, data, self._options())

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
            return concatenate_codes([solve_codes(self.formulation_, chunk, W, coder="fista",
                                             tol=tol, max_iter=max_iter)
                                 for _, chunk in data.chunks(self.chunk_size)])

        return run(self.backend_, solve, self._W_output, X)

    def transform(self, X: Any) -> Any:
        """Codes ``H`` of shape ``(n_samples, n_components)`` at the output dictionary (in the
        data's units: ``inverse_transform`` of them is the low-rank part of ``X``)."""
        return self._codes(X, self.eval_tol, self.eval_max_iter).H * self.scale_

    def outliers(self, X: Any) -> Any:
        """Outliers ``R`` of shape ``(n_samples, n_features)`` (zeros if not robust)."""
        return self._codes(X, self.eval_tol, self.eval_max_iter).outliers * self.scale_

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
                                        self.chunk_size, coder="fista", tol=self.eval_tol,
                                        max_iter=self.eval_max_iter)
                gamma = gradient_mapping(self.formulation_, self._W_output, G, eta, data.n)
                return float(tl.sum(gamma * gamma))

    def score(self, X: Any, y: Any = None) -> float:
        """``-f(W)`` (higher is better)."""
        value = self.objective(X)
        check_overflow((np.asarray(value),))
        return -value


__all__ = ["VarianceReducedMF"]


@contextlib.contextmanager
def _named(parameter: str) -> Iterator[None]:
    """Errors about a dict parameter's keys and values, prefixed with its name."""
    try:
        yield
    except (ValueError, TypeError) as error:
        raise type(error)(f"{parameter}: {error}") from None
