"""OnlineNMF: online NMF with the squared loss, the two-mode case of the CP-dictionary engine.

Follows scikit-learn's :class:`~sklearn.decomposition.MiniBatchNMF` where the ideas overlap
(not a drop-in: no ``beta_loss``, no early stopping, no ``reconstruction_err_``; docs/nmf.md
lists every difference): ``X`` is ``(n_samples, n_features)``, ``components_`` is
``(n_components, n_features)``, the regularisers are ``alpha_W`` (codes), ``alpha_H``
(components) and ``l1_ratio``, and ``forget_factor`` discounts past batches. The learning
itself is :class:`OnlineCPDL`'s loop (Mairal-style surrogate statistics ``A = mean h h^T``,
``B = mean x h^T``, exact column steps) in another configuration (:class:`NMFAlgorithm`): the
coding step with scikit-learn's penalty
scaling, the dictionary step with the components' penalty, and the forget factor's weights.

Penalty convention: the objective is scikit-learn's divided by the number of samples,

    mean_j [ 1/2 ||x_j - W h_j||^2 + alpha_W l1_ratio F ||h_j||_1
             + 1/2 alpha_W (1 - l1_ratio) F ||h_j||^2 ]
    + alpha_H l1_ratio ||W||_1 + 1/2 alpha_H (1 - l1_ratio) ||W||_F^2

(``F = n_features``; the glossary's letters: ``h_j`` a sample's codes, ``W = components_.T`` the
dictionary; scikit-learn writes ``X ~ W H`` with ``W`` its codes and ``H`` its components,
whence the names ``alpha_W`` of the codes' penalty and ``alpha_H`` of the components').
Scikit-learn's MiniBatchNMF minimises this objective times the batch size on every batch (its
``l1_reg_H`` scales with the batch's ``n_samples``), so the same ``alpha_W``, ``alpha_H`` and
``l1_ratio`` mean the same model in both libraries, and ``transform`` solves the very problem
scikit-learn's ``NMF.transform`` solves.
"""

from __future__ import annotations

from typing import Any

from ..algorithms.nmf import PENALTY_AND_MISSING, Discounted, NMFAlgorithm, NMFOptions
from ..core.backend import using
from ..core.validation import ARRAY, CALLABLE, NONE, SEQUENCE, Instance, Interval, Options
from ..steps.surrogate import surrogate_value
from ._base import OnlineLearner
from ._fitting import is_array_like
from ._labelled import is_labelled
from ._params import SHARED_CONSTRAINTS
from .ocpdl import check_radius

__all__ = ["OnlineNMF"]

#: the default weight schedule ``t^-0.5`` (see ``weights`` in :class:`OnlineNMF`)
_WEIGHTS = 0.5


class OnlineNMF(OnlineLearner):
    """Online nonnegative matrix factorization, scikit-learn ``MiniBatchNMF`` compatible.

    Factorizes ``X (n_samples, n_features) ~ H W^T`` with nonnegative codes ``H = transform(X)``
    and the dictionary ``W = components_.T`` (the glossary's letters; scikit-learn's ``W`` is
    the codes, its ``H`` the components), learning ``W`` from mini-batches by minimising the
    Mairal-style surrogate of the objective in the module docstring (:class:`OnlineCPDL` with one
    data mode).

    Parameters
    ----------
    n_components : int
        Number of components.
    init : {"random", "nndsvda"}, array of shape (n_components, n_features) or list
        ``"random"``: scikit-learn's scale, ``|N(0, 1)| sqrt(mean(X) / n_components)`` from the
        first batch. ``"nndsvda"``: NNDSVD of the first batch, zeros filled with its mean (needs
        ``n_components <= min(batch size, n_features)``). An array gives the components; a list
        ``[W]`` with one ``(n_features, n_components)`` matrix gives the dictionary (this form
        can be checkpointed).
    batch_size : int, default 1024
        Samples per mini-batch in ``fit``.
    max_iter : int or "auto", default "auto"
        Passes over an array in ``fit`` (no early stopping); ``"auto"``: 10, or more on a
        small array so that ``fit`` takes at least 200 mini-batches (at most 200 passes; see
        :func:`~tensorstream.learners._fitting.fit_passes`). On scikit-learn's 1,437 training
        digits in batches of 1,024 that is 100 passes (200 steps), where 10 passes gave
        16.5 dB of held-out PSNR against MiniBatchNMF's 17.3.
    alpha_W, alpha_H, l1_ratio : float, float or "same", float
        Penalties as in scikit-learn (module docstring): ``alpha_W`` on the codes,
        ``alpha_H`` on the components (``"same"``: ``alpha_W``), ``l1_ratio`` the l1 share.
        With missing entries ``alpha_H`` must be 0 (refused otherwise, by name).
    forget_factor : float in (0, 1] or None, default None
        Discount of past batches as in scikit-learn: per batch in ``partial_fit`` and streams,
        ``forget_factor ** (batch_size / n_samples)`` per batch in ``fit`` on an array (the past
        is discounted by ``forget_factor`` per pass). ``None`` uses ``weights``.
    weights : "balanced", float or callable, default 0.5
        The engine's schedule ``w_t`` when ``forget_factor`` is None: ``"balanced"`` is
        ``1/t``, a float ``beta`` is ``t^-beta``. The default ``t^-0.5`` (as
        :class:`OnlineCPDL`'s) forgets the statistics of the first, poor components: with
        ``1/t`` they keep their weight for ever, and repeated passes over a small array stall
        (1,437 digits, 200 passes: 16.4 dB held out against 17.5 with ``t^-0.5``;
        docs/defaults.md). It also gave lower held-out objectives on the large data sets of
        docs/nmf.md.
    coder : {"admm", "pivoting"}, default "admm"
        Solver of the codes: ADMM in the code space, vectorised over the batch (one small
        ``R x R`` product per iteration, from the clipped least-squares codes;
        :func:`tensorstream.coders.robust.nonnegative_code_admm`), or the engine's exact lasso
        solver, block principal pivoting (:func:`tensorstream.coders.lasso.sparse_code`,
        :class:`OnlineCPDL`'s ``coder="pivoting"``). With missing entries the codes are always the
        exact solver's (per-sample Grams).
    code_max_iter : int, default 100
        Iteration cap of the coder, per sample: ADMM iterations or pivoting rounds.
    code_tol : float or None, default None
        Tolerance of the coder, per sample. ADMM: its primal residual ``||h - u||`` and its
        change ``||u - u_prev||`` relative to ``||u||``; the exact solver: its KKT conditions
        off the support, relative to the sample's largest projection. ``None``: ``1e-2`` for
        ADMM, ``1e-4`` for the exact solver (the ADMM's rule is
        tested at iterations 8, 12, 16, ... only, from quantities its iteration forms anyway,
        and ``1e-2`` reached the held-out objective of tighter tolerances on the benchmarks of
        ``docs/nmf.md`` at 1.5-2x less time). Online learning tolerates inexact codes;
        tighten them (``set_params``) for evaluations.
    search_radius, radius_mode, dict_passes, missing
        As in :class:`OnlineCPDL`.
    column_bound : float or None, default 1.0
        Bound on the norm of every component (Mairal's constraint set; the codes carry the
        scale). ``None`` leaves them unbounded as scikit-learn does: the same model when the
        penalties are 0, but the online surrogate then drifts along the scale direction (on a
        planted 20,000 x 400 matrix, a 3x higher held-out objective after 4 passes; docs/nmf.md).
    random_state, backend, verbose, callback, reinit_dead_atoms, device, n_threads
        As in :class:`~tensorstream.learners.ocpdl.OnlineCPDL`, with the same defaults.

    Attributes
    ----------
    components_ : tensor of shape (n_components, n_features)
    loadings_ : list with the dictionary ``components_.T``
    statistics_, n_steps_, n_samples_seen_ : as in :class:`OnlineCPDL`

    Examples
    --------
    >>> import numpy as np
    >>> from tensorstream.learners.nmf import OnlineNMF
    >>> X = np.random.default_rng(0).random((200, 12))
    >>> model = OnlineNMF(3, batch_size=50, max_iter=3, random_state=0).fit(X)
    >>> model.components_.shape, model.transform(X[:5]).shape
    ((3, 12), (5, 3))
    >>> bool(model.objective(X) < 0.5 * np.mean(np.sum(X**2, axis=1)))
    True
    """

    def __init__(self, n_components: int, *, init="random", batch_size: int = 1024,
                 max_iter: int | str = "auto", alpha_W: float = 0.0, alpha_H="same",
                 l1_ratio: float = 0.0,
                 forget_factor: float | None = None, weights=_WEIGHTS, search_radius=None,
                 radius_mode: str = "frobenius", column_bound: float | None = 1.0,
                 missing: str | None = None, dict_passes: int = 1, coder: str = "admm",
                 code_max_iter: int = 100, code_tol: float | None = None, random_state=None,
                 backend: str | None = None, device: Any = None, n_threads: int | None = 1,
                 verbose: bool = False, callback=None,
                 reinit_dead_atoms: bool = True):
        super().__init__(n_components, batch_size=batch_size, max_iter=max_iter, init=init,
                         code_max_iter=code_max_iter, code_tol=code_tol, random_state=random_state,
                         backend=backend, device=device, verbose=verbose, callback=callback,
                         reinit_dead_atoms=reinit_dead_atoms, n_threads=n_threads)
        self.alpha_W = alpha_W
        self.alpha_H = alpha_H
        self.l1_ratio = l1_ratio
        self.forget_factor = forget_factor
        self.weights = weights
        self.search_radius = search_radius
        self.radius_mode = radius_mode
        self.column_bound = column_bound
        self.missing = missing
        self.dict_passes = dict_passes
        self.coder = coder

    # -- parameters ----------------------------------------------------------------------------

    _parameter_constraints = {
        **SHARED_CONSTRAINTS,
        "init": [Options("random", "nndsvda"), ARRAY, SEQUENCE],
        "alpha_W": [Interval("real", 0, None)],
        "alpha_H": [Interval("real", 0, None), Options("same")],
        "l1_ratio": [Interval("real", 0, 1)],
        "forget_factor": [Interval("real", 0, 1, closed="right"), NONE],
        "weights": [Instance("a schedule name", str), Interval("real", 0, 1, closed="right"),
                    CALLABLE],
        "search_radius": [NONE, Interval("real", 0, None, closed="neither"), CALLABLE],
        "radius_mode": [Options("frobenius", "column")],
        "column_bound": [Interval("real", 0, None, closed="neither"), NONE],
        "dict_passes": [Interval("int", 1, None)],
        "coder": [Options("admm", "pivoting")],
        "code_tol": [Interval("real", 0, None), NONE],
    }

    def _check_rules(self) -> None:
        # forget_factor replaces the weights: the default (or "balanced") goes with it silently
        if self.forget_factor is not None and not isinstance(self.weights, Discounted) and (
                self.weights not in (_WEIGHTS, "balanced")):
            raise ValueError("give either forget_factor or weights, not both")
        check_radius(self.search_radius, self.weights, self._set_by_hand("radius_mode"))
        if self.missing is not None and any(self._algorithm().dictionary_penalties):
            raise ValueError(PENALTY_AND_MISSING)

    def _algorithm(self) -> NMFAlgorithm:
        """The algorithm's options from the parameters: the one place they pass from the
        estimator to :class:`~tensorstream.algorithms.nmf.NMFAlgorithm`."""
        return NMFAlgorithm(NMFOptions(
            n_components=self.n_components, init=self.init,
            batch_size=self._batch_size(),
            alpha_W=self.alpha_W, alpha_H=self.alpha_H, l1_ratio=self.l1_ratio,
            forget_factor=self.forget_factor, weights=self.weights,
            search_radius=self.search_radius, radius_mode=self.radius_mode,
            column_bound=self.column_bound, dict_passes=self.dict_passes, coder=self.coder,
            code_max_iter=self.code_max_iter, code_tol=self.code_tol,
            epoch_samples=self.__dict__.get("_epoch_samples")))

    def _nonnegative_data(self) -> bool:
        return True

    def _check_samples(self, X: Any, name: str) -> None:
        if len(X.shape) != 2:
            raise ValueError(f"{name} must have shape (n_samples, n_features), got shape "
                             f"{tuple(X.shape)}; use OnlineCPDL for tensor samples")

    # -- learning ------------------------------------------------------------------------------

    def fit(self, X: Any, y: Any = None, *, mask: Any = None, n_steps: int | None = None,
            sample_dim: str | None = None, modes: Any = None, client: Any = None) -> OnlineNMF:
        """Learn from scratch from an array or a stream of batches: the state of any earlier
        fit is replaced.

        Returns
        -------
        self
        """
        n = _n_samples(X, sample_dim)
        self._epoch_samples = n  # scikit-learn's per-batch discount in fit depends on it
        try:
            return super().fit(X, y, mask=mask, n_steps=n_steps, sample_dim=sample_dim,
                               modes=modes, client=client)
        finally:
            self.__dict__.pop("_epoch_samples", None)

    # -- results -------------------------------------------------------------------------------

    @property
    def components_(self) -> Any:
        """The components ``H``, shape ``(n_components, n_features)`` (scikit-learn's layout)."""
        return self.loadings_[0].T

    def transform(self, X: Any, mask: Any = None) -> Any:
        """Codes ``H`` of ``X``, shape ``(n_samples, n_components)`` (see OnlineCPDL)."""
        return super().transform(X, mask)

    def score(self, X: Any, y: Any = None, sample_weight: Any = None, mask: Any = None) -> float:
        """Minus the mean over samples of ``min_h 1/2 ||x - W h||^2 + penalties(h)``."""
        return super().score(X, y, sample_weight=sample_weight, mask=mask)

    def surrogate_value(self) -> float:
        """The surrogate of the objective (module docstring's scale) at the current components."""
        stats = self.statistics_
        algorithm = self._algorithm()
        with using(self.backend_):
            return 0.5 * surrogate_value(stats["A"], stats["B"], stats["c"], self.loadings_) + \
                algorithm.dictionary_penalty(self.loadings_)

    def objective(self, X: Any) -> float:
        """The objective of the module docstring on ``X``, codes from :meth:`transform`.

        Scikit-learn's objective (``0.5 * ||X - H W^T||^2 + penalties`` in the glossary's letters)
        divided by ``len(X)``.
        """
        score = self.score(X)
        with using(self.backend_):
            return -score + self._algorithm().dictionary_penalty(self.loadings_)


def _n_samples(X: Any, sample_dim: str | None) -> int | None:
    """Number of samples of an array given to ``fit`` (None for a stream)."""
    if is_labelled(X):
        return int(X.sizes[sample_dim]) if sample_dim in X.dims else None
    return int(X.shape[0]) if is_array_like(X) and len(X.shape) else None
