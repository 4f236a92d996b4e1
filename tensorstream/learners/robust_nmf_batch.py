"""Batch robust NMF with outliers (Zhao & Tan, "Online Nonnegative Matrix Factorization with
Outliers", IEEE TSP 2017, supplement S-2): the estimator :class:`RobustNMF` around BPGD and
BADMM (:mod:`tensorstream.algorithms.robust_nmf_batch`), the baseline of the paper's comparison
with the online :class:`~tensorstream.learners.robust_nmf.RobustOnlineNMF`, whose parameter
checks and starts it shares.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorly as tl

from ..algorithms.nmf import loadings_from_init
from ..algorithms.robust_nmf import (
    BATCH_SOLVER_PARAMS,
    _default_outlier_alpha,
    check_outlier_part,
    coding_start,
    dictionary_projection,
    first_batch_scale,
)
from ..algorithms.robust_nmf_batch import badmm, bpgd
from ..coders.robust import RobustPenalties, project_outliers, robust_code
from ..core.backend import backend_of, float_dtype_of, run, using
from ..core.device import device_context, device_of, move
from ..core.validation import (
    NONE,
    Interval,
    check_batch,
    check_not_too_large,
    check_not_too_small,
    check_state_memory,
    densify,
    feature_names,
    generator_of,
)
from ._base import SIGNED_DATA_WAY_OUT
from ._checkpoints import ArrayCheckpoint
from ._fitting import MAX_FIT_STEPS, OnlineEstimator
from ._output import replace_flagged
from ._params import SHARED_CONSTRAINTS
from .robust_nmf import ROBUST_CONSTRAINTS, RobustNMFParameters

__all__ = ["RobustNMF"]


class RobustNMF(RobustNMFParameters, ArrayCheckpoint, OnlineEstimator):
    """Batch robust NMF with outliers: BPGD or BADMM (the paper's supplement S-2).

    Minimises ``1/2 ||X - H W^T - E||_F^2 + outlier_alpha ||E||_1`` over ``H >= 0``,
    ``|E| <= outlier_bound`` and ``W``
    in ``C`` for the whole matrix ``X`` (``n_samples x n_features``), the baseline of the paper's
    comparison. ``solver="pgd"``: one projected-gradient step on ``H``, the exact ``E``, one
    projected-gradient step on ``W`` per iteration (a block-MM scheme: the objective never
    increases). ``solver="admm"``: the splitting ``H = U``, ``E = Q``, ``W = Psi``, one pass of
    eqs. (S-12)-(S-20) per iteration (not monotone); the feasible ``(Psi, U, Q)`` are returned.
    The step sizes and penalties are the online learner's (``kappa / ||W||_2^2``,
    ``kappa / ||H^T H||_F``, ``rho``: ``solver_params``). Only the parameter contract of the
    online learners is shared; this estimator holds the whole data.

    The default is BPGD, run until the objective's relative change between iterations falls
    below ``1e-4`` (scikit-learn's ``NMF`` has the same default tolerance) or for 1,000
    iterations. BADMM with the paper's fixed ``rho = 1`` oscillates on a few hundred samples
    (the W-step's curvature ``H^T H`` grows with the samples, ``rho`` does not): on the lfw
    faces with outliers its objective went
    15.8, 8.4, 32.8, 13.3, 15.9 at iterations 1, 50, 200, 500, 1000, and its codes ``codes_``
    reconstructed the faces at 10 dB (docs/nmf.md). ``paper_params`` keep BADMM.

    Parameters
    ----------
    n_components : int
    outlier_alpha, outlier_alpha_scale, outlier_bound, data_scale
        As in :class:`RobustOnlineNMF` (``outlier_bound`` other than None or inf with
        ``outlier_alpha=inf`` is refused, naming both; ``data_scale="auto"``: the mean
        absolute entry of ``X``; the factorization runs on ``X / scale_``, and its results
        are scaled back; ``outlier_alpha="auto"`` is the fixed 0.5 data units, there being no
        stream of residuals to learn a scale from).
    solver : {"pgd", "admm"}, default "pgd"
        BPGD or BADMM (above), for :meth:`transform` too (OPGD or OADMM).
    solver_params : dict or None, default None
        The chosen solver's settings over their defaults, as in :class:`RobustOnlineNMF`
        (a key of the other solver is refused by name): ``"pgd"``: ``kappa`` (0.7);
        ``"admm"``: ``rho`` (1.0). BPGD has no accelerated step.
    max_iter : int, default 1000
        Iterations.
    tol : float, default 1e-4
        Stop when the objective's relative change falls below ``tol`` (0: never); BADMM,
        whose objective is not monotone, also needs its relative primal residuals below
        ``tol`` (``paper_params`` set 0).
    max_time : float or None
        Stop after this many seconds of iterations (the paper compares at equal time).
    code_tol, code_max_iter : float, int, default 1e-6, 1000
        Stopping rule of the coding step of :meth:`transform` (tight: an evaluation).
    init : "random", array of shape (n_components, n_features) or list ``[W]``
        The initial dictionary (``"random"``: the projection of U[0, 1) entries, as the online
        learner); the codes start at U[0, 1), the outliers at 0.
    random_state, backend, device, n_threads
        As in :class:`RobustOnlineNMF`.
    callback : callable, optional
        ``callback(model, info)`` after every iteration; returning True stops.

    Attributes
    ----------
    components_ : tensor of shape (n_components, n_features)
    codes_ : tensor of shape (n_samples, n_components)
    outliers_ : tensor of shape (n_samples, n_features)
    scale_ : float
        The data scale the thresholds are in units of.
    n_iter_ : int
        Iterations run: each reads the whole matrix once, so they are scikit-learn's passes
        over the data.
    history_ : list of dict
        Per iteration: ``seconds`` (of iterations, evaluations excluded), ``objective`` (per
        sample: the batch objective divided by ``n_samples``, the online scale), and for ADMM
        the relative primal residuals ``residual_H``, ``residual_E``, ``residual_W``.

    Examples
    --------
    >>> import numpy as np
    >>> from tensorstream import RobustNMF
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((40, 3)) @ rng.random((3, 15)) / 3
    >>> model = RobustNMF(3, solver="pgd", max_iter=30, random_state=0).fit(X)
    >>> model.components_.shape, model.outliers_.shape
    ((3, 15), (40, 15))
    >>> bool(model.history_[-1]["objective"] <= model.history_[0]["objective"])
    True
    """

    _fitted_attribute = "components_"
    _positive_data = True
    _fitted_arrays = ("components_", "codes_", "outliers_")
    _fitted_values = ("n_iter_", "history_", "n_features_in_", "scale_")
    #: a batch fit starts from ``init`` again, so an array or list ``init`` is stored whole
    _array_parameters = ("init",)

    #: each solver's settings (``solver_params`` keys): BPGD takes no accelerated step
    _solver_params = BATCH_SOLVER_PARAMS

    #: The paper's settings (as :attr:`RobustOnlineNMF.paper_params`).
    paper_params = {"outlier_alpha": None, "outlier_alpha_scale": 1.0, "outlier_bound": 1.0,
                    "data_scale": 1.0, "solver": "admm", "tol": 0.0}

    def __init__(self, n_components: int, *, outlier_alpha: float | str | None = "auto",
                 outlier_alpha_scale: float = 1.0, outlier_bound: float | None = None,
                 data_scale: float | str = "auto", solver: str = "pgd",
                 solver_params: dict | None = None, max_iter: int = 1000, tol: float = 1e-4,
                 max_time: float | None = None, code_tol: float = 1e-6,
                 code_max_iter: int = 1000, init="random", random_state=None,
                 backend: str | None = None, device: Any = None, n_threads: int | None = 1,
                 callback=None):
        super().__init__(n_components, outlier_alpha=outlier_alpha,
                         outlier_alpha_scale=outlier_alpha_scale, outlier_bound=outlier_bound,
                         data_scale=data_scale, solver=solver, solver_params=solver_params,
                         backend=backend, device=device, n_threads=n_threads)
        self.max_iter = max_iter
        self.tol = tol
        self.max_time = max_time
        self.code_tol = code_tol
        self.code_max_iter = code_max_iter
        self.init = init
        self.random_state = random_state
        self.callback = callback

    _parameter_constraints = {
        **SHARED_CONSTRAINTS, **ROBUST_CONSTRAINTS,
        # iterations (no "auto": that is passes of online fits), bounded as online fits are
        "max_iter": [Interval("int", 1, MAX_FIT_STEPS)],
        "tol": [Interval("real", 0, None)],
        "max_time": [Interval("real", 0, None, closed="neither"), NONE],
        "code_tol": [Interval("real", 0, None)],
        "code_max_iter": [Interval("int", 1, None)],
    }

    def _check_rules(self) -> None:
        self._check_outlier_rules()
        check_outlier_part(self.outlier_alpha, self._set_by_hand("outlier_bound"))

    def _validate(self, X: Any, name: str = "X") -> Any:
        fitted = "components_" in self.__dict__
        backend = self.backend_ if fitted else "pytorch" if device_of(self) is not None \
            else (self.backend or backend_of(densify(X)))
        context = self.__dict__.get("_context") or device_context(self)
        X = check_batch(move(X, (context or {}).get("device")) if getattr(self, "device", None)
                        is not None else X, backend=backend, context=context,
                        sample_shape=(self.components_.shape[1],) if fitted else None,
                        nonnegative=True, name=name, owner=type(self).__name__,
                        missing_hint=False,  # RobustOnlineNMF(missing="nan") has them
                        way_out=SIGNED_DATA_WAY_OUT)
        if len(X.shape) != 2:
            raise ValueError(f"{name} must have shape (n_samples, n_features), got shape "
                             f"{tuple(X.shape)}")
        return X

    def _penalties(self, n_features: int) -> RobustPenalties:
        outlier_alpha = _default_outlier_alpha(self.outlier_alpha, self.outlier_alpha_scale,
                                               n_features)
        return RobustPenalties(outlier_alpha=outlier_alpha, outlier_bound=self.outlier_bound)

    def _initial_dictionary(self, X: Any, rng: np.random.Generator, context: dict) -> Any:
        R, n_features = self.n_components, X.shape[1]
        given = loadings_from_init(self.init, (n_features,), R, backend_of(X), context)
        if given is None and not isinstance(self.init, str):
            init = list(self.init)
            if len(init) != 1:
                raise ValueError("init must be 'random', an array of shape (n_components, "
                                 "n_features) or a list [W]")
            W = check_batch(init[0], backend=backend_of(X), nonnegative=True, name="init[0]")
            if tuple(W.shape) != (n_features, R):
                raise ValueError(f"init[0] must have shape {(n_features, R)}, "
                                 f"got {tuple(W.shape)}")
            given = [tl.tensor(W, **context)]
        W = given[0] if given is not None else tl.tensor(rng.random((n_features, R)), **context)
        return dictionary_projection("l2ball")(W)

    def fit(self, X: Any, y: Any = None) -> RobustNMF:
        """Factorize ``X`` (``n_samples x n_features``, nonnegative) from scratch; on an error
        the learner is left as it was (a previous fit included)."""
        with self._all_or_nothing("fit"):
            return self._factorize(X)

    def _factorize(self, X: Any) -> RobustNMF:
        self._check_params()
        for name in ("components_", "codes_", "outliers_", "n_iter_", "history_", "backend_",
                     "_context", "n_features_in_", "scale_", "feature_names_in_"):
            self.__dict__.pop(name, None)
        names = feature_names(X)
        X = self._validate(X)
        # its objectives (history_) would be inf, or its scale_ absurd, without a word
        check_not_too_large(X)
        check_not_too_small(X)
        backend = backend_of(X)
        with using(backend):
            context = {**tl.context(X), "dtype": float_dtype_of(X, backend)}
            X = tl.tensor(X, **context)
            scale = first_batch_scale(X, self.data_scale)
            k = self.n_components  # W, H, their Gram matrices: before any is allocated
            check_state_memory(k * (k + sum(X.shape)), context["dtype"], k,
                               context.get("device"))
            rng = generator_of(self.random_state)
            W = self._initial_dictionary(X, rng, context)
            H = tl.tensor(rng.random((X.shape[0], self.n_components)), **context)
            penalties = self._penalties(X.shape[1])
            # at unit scale (every threshold is in the data's units); objectives scaled back;
            # torch tensors in host memory run on numpy (core.backend.run)
            W, H, E, history = run(backend, lambda X, W, H: self._solved(
                X / scale, W, H, penalties, backend), X, W, H)
            if not all(bool(tl.all(tl.abs(T) < float("inf"))) for T in (W, H, E)):
                raise ValueError("X: the factorization overflowed to NaN or infinite factors: "
                                 "the values are too large for its arithmetic (rescale the "
                                 "data) or the steps too long (solver_params)")
            for info in history:
                info["objective"] *= scale * scale
            components = tl.transpose(W)  # on the data's backend, not the global one
        self.__dict__.update(components_=components, codes_=H * scale,
                             outliers_=E * scale, n_iter_=len(history), history_=history,
                             backend_=backend, _context=context, n_features_in_=int(X.shape[1]),
                             scale_=scale)
        self._keep_feature_names(names)
        return self

    def _solved(self, X: Any, W: Any, H: Any, penalties: RobustPenalties, backend: str
                ) -> tuple[Any, Any, Any, list]:
        """BPGD or BADMM on ``X`` (at unit scale) from ``W``, ``H`` and the gross entries as
        outliers; the callback runs on ``backend``, the data's (the iterations may run on
        numpy views of torch tensors, ``core.backend.run``)."""
        # gross entries start as outliers (zero on data within 5 data units)
        E = project_outliers(coding_start(X, 1, "zero", "gross")[1], penalties)
        project = dictionary_projection("l2ball")
        stops = dict(max_iter=self.max_iter, tol=self.tol, max_time=self.max_time,
                     callback=None if self.callback is None else
                     lambda info: self._called_back(info, backend))
        solve = badmm if self.solver == "admm" else bpgd
        return solve(X, W, H, E, penalties, project=project, **self._solver_settings(), **stops)

    def _called_back(self, info: dict, backend: str) -> bool:
        """The user's callback on ``info``, on the data's backend: True stops the run."""
        with using(backend):
            return bool(self.callback(self, dict(info)))

    # -- using the factorization ---------------------------------------------------------------

    def decompose(self, X: Any) -> tuple[Any, Any]:
        """``(codes, outliers)`` of new samples against the learned components."""
        return self._decomposed(self._checked(X))

    def _checked(self, X: Any) -> Any:
        """``X`` validated against the fitted learner (which is checked first)."""
        self._check_fitted()
        self._check_feature_names(X)
        X = self._validate(X)
        check_not_too_large(X)  # its codes would be inf or NaN
        return X

    def _decomposed(self, X: Any) -> tuple[Any, Any]:
        """:meth:`decompose` of an ``X`` already :meth:`_checked`."""
        scale = self.scale_
        penalties = self._penalties(X.shape[1])
        options = self._solver_settings()

        def code(X: Any, components: Any) -> tuple[Any, Any]:
            H0, E0 = coding_start(X / scale, self.n_components, "uniform", "gross")
            E0 = project_outliers(E0, penalties)
            coding = robust_code(X / scale, [tl.transpose(components)], penalties,
                                 solver=self.solver, H0=H0, E0=E0, tol=self.code_tol,
                                 max_iter=self.code_max_iter, **options)
            return coding.codes * scale, coding.outliers * scale

        return run(self.backend_, code, X, self.components_)

    def transform(self, X: Any) -> Any:
        """Codes of new samples, ``(n_samples, n_components)``."""
        return self.decompose(X)[0]

    def outliers(self, X: Any) -> Any:
        """Outliers of new samples, shaped like ``X``."""
        return self.decompose(X)[1]

    def denoise(self, X: Any) -> Any:
        """New samples with their outliers removed: entries the model calls outliers
        (``E != 0``) replaced by the reconstruction ``W h``, the others as observed."""
        X = self._checked(X)  # validated once, for the coding and the replacement
        codes, outliers = self._decomposed(X)
        with using(self.backend_):
            return replace_flagged(X, tl.dot(codes, self.components_), outliers)

    def fit_transform(self, X: Any, y: Any = None) -> Any:
        """``fit(X)``, then the codes of ``X`` against the learned components (as ``transform``
        gives them; the factorization's own codes are ``codes_``)."""
        return self.fit(X).transform(X)

    def inverse_transform(self, codes: Any) -> Any:
        """``codes @ components_``: the low-rank part of samples with these codes."""
        self._check_fitted()
        codes = check_batch(codes, backend=self.backend_, context=self._context,
                            sample_shape=(self.n_components,), name="codes",
                            missing_hint=False)
        with using(self.backend_):
            return tl.dot(codes, self.components_)
