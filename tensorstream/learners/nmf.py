"""OnlineNMF: online NMF with the squared loss, the two-mode case of the CP-dictionary engine.

Follows scikit-learn's :class:`~sklearn.decomposition.MiniBatchNMF` where the ideas overlap
(not a drop-in: no ``beta_loss``, no early stopping, ``n_iter_`` counts mini-batches, no
``reconstruction_err_``; docs/nmf.md lists every difference): ``X`` is
``(n_samples, n_features)``, ``components_`` is ``(n_components, n_features)``,
the regularisers are ``alpha_W`` (codes), ``alpha_H`` (components) and ``l1_ratio``, and
``forget_factor`` discounts past batches. The learning itself is :class:`OnlineCPDL`'s loop
(Mairal-style surrogate statistics ``A = mean h h^T``, ``B = mean x h^T``, exact column steps)
in another configuration (:class:`NMFAlgorithm`): the coding step with scikit-learn's penalty
scaling, the dictionary step with the components' penalty, and the forget factor's weights.

Penalty convention: the objective is scikit-learn's divided by the number of samples,

    mean_j [ 1/2 ||x_j - h_j H||^2 + alpha_W l1_ratio F ||h_j||_1
             + 1/2 alpha_W (1 - l1_ratio) F ||h_j||^2 ]
    + alpha_H l1_ratio ||H||_1 + 1/2 alpha_H (1 - l1_ratio) ||H||_F^2

(``F = n_features``, ``H = components_``). Scikit-learn's MiniBatchNMF minimises this objective
times the batch size on every batch (its ``l1_reg_H`` scales with the batch's ``n_samples``), so
the same ``alpha_W``, ``alpha_H`` and ``l1_ratio`` mean the same model in both libraries, and
``transform`` solves the very problem scikit-learn's ``NMF.transform`` solves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorly as tl

from ..coders.lasso import sparse_code
from ..coders.robust import nonnegative_code_admm
from ..core.backend import limit_threads, tiny_of, using
from ..core.constraints import project_columns
from ..core.dictionary import gram, masked_gram, project
from ..core.validation import (
    ARRAY,
    CALLABLE,
    NONE,
    SEQUENCE,
    Instance,
    Interval,
    Options,
    check_batch,
)
from ..engine import Codes
from ..schedules import make_radius, make_weights
from ..steps.surrogate import penalty_value, surrogate_bcd_step, surrogate_value
from ._base import SHARED_CONSTRAINTS, OnlineLearner, is_array_like, is_labelled
from .ocpdl import SurrogateCP, checked_init, coded_losses

__all__ = ["Discounted", "OnlineNMF", "blas_threads"]

#: the coders' default tolerances (``code_tol=None``), chosen by measurement (docs/nmf.md)
_ADMM_TOL, _HALS_TOL = 1e-2, 1e-4

#: the default weight schedule ``t^-0.5`` (see ``weights`` in :class:`OnlineNMF`)
_WEIGHTS = 0.5

_PENALTY_AND_MISSING = ("alpha_H (the components' penalty; 'same' copies alpha_W) is not "
                        "supported with missing entries (missing='nan' or a mask): the column "
                        "steps of entrywise statistics have no penalty; set alpha_H=0")


# -- shared helpers of the NMF learners ----------------------------------------------------------

#: the thread limit of every learner (``n_threads``); kept under its old name for callers
blas_threads = limit_threads


def loadings_from_init(init: Any, sample_shape: tuple, R: int, backend: str,
                       context: dict) -> list | None:
    """Loadings from an array ``init`` of shape ``(n_components, n_features)`` (the
    scikit-learn ``components_`` layout, one data mode only), or None for other ``init``."""
    if isinstance(init, (str, Sequence)) or init is None:
        return None
    if len(sample_shape) != 1:
        raise ValueError("an init array of shape (n_components, n_features) needs samples with "
                         "one data mode; give a list of loadings for tensor samples")
    components = check_batch(init, backend=backend, nonnegative=True, name="init")
    if tuple(components.shape) != (R, sample_shape[0]):
        raise ValueError(f"init must have shape (n_components, n_features) = "
                         f"{(R, sample_shape[0])}, got {tuple(components.shape)}")
    return [tl.tensor(tl.transpose(components), **context)]


@dataclass(frozen=True)
class Discounted:
    """Weights of statistics that discount the past by ``factor`` per batch (scikit-learn's
    ``forget_factor``): ``w_t = (1 - factor) / (1 - factor^t)``, ``1/t`` for ``factor = 1``.

    Scikit-learn keeps sums ``S_t = factor S_{t-1} + s_t``; the engine keeps means, and
    ``S_t / sum_s factor^(t-s)`` obeys ``A_t = (1 - w_t) A_{t-1} + w_t s_t`` with these weights.

    Examples
    --------
    >>> [round(Discounted(0.5)(t), 4) for t in (1, 2, 3)]
    [1.0, 0.6667, 0.5714]
    """

    factor: float

    def __call__(self, t: int) -> float:
        if self.factor == 1.0:
            return 1.0 / t
        return (1.0 - self.factor) / (1.0 - self.factor**t)


class OnlineNMF(OnlineLearner):
    """Online nonnegative matrix factorization, scikit-learn ``MiniBatchNMF`` compatible.

    Factorizes ``X (n_samples, n_features) ~ W H`` with nonnegative codes ``W = transform(X)``
    and components ``H = components_``, learning ``H`` from mini-batches by minimising the
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
        :func:`~tensorstream.learners._base.fit_passes`). On scikit-learn's 1,437 training
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
        :class:`OnlineCPDL`'s ``coder="pivoting"``; ``"hals"``, the name it had here, is
        still accepted). With missing entries the codes are always the exact solver's
        (per-sample Grams).
    code_max_iter : int, default 100
        Iteration cap of the coder.
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
    random_state, backend, verbose, callback
        As in :class:`OnlineCPDL`.
    device : str, torch.device or None, default None
        Where to compute: ``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a ``torch.device`` runs on
        the pytorch backend there (every batch, of any kind, moved there as it is validated;
        the state kept there); ``None``: where the data are (see ``docs/devices.md``).
    n_threads : int or None, default 1
        BLAS/OpenMP and PyTorch threads inside the public methods
        (:func:`tensorstream.core.backend.limit_threads`; ``None``: the libraries' own). Formerly
        ``blas_threads`` (checkpoints with the old name still load).
    reinit_dead_atoms : bool, default True
        As in :class:`OnlineCPDL`.

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
        self._keep_parameters(locals())

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
        "coder": [Options("admm", "pivoting", "hals")],
        "code_tol": [Interval("real", 0, None), NONE],
    }

    def _check_rules(self) -> None:
        # forget_factor replaces the weights: the default (or "balanced") goes with it silently
        if self.forget_factor is not None and not isinstance(self.weights, Discounted) and (
                self.weights not in (_WEIGHTS, "balanced")):
            raise ValueError("give either forget_factor or weights, not both")
        make_radius(self.search_radius, make_weights(self.weights))
        if self.missing is not None and any(self._algorithm().dictionary_penalties):
            raise ValueError(_PENALTY_AND_MISSING)

    def _algorithm(self) -> NMFAlgorithm:
        return NMFAlgorithm(self._params(),
                            epoch_samples=self.__dict__.get("_epoch_samples"))

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
        """Codes ``W`` of ``X``, shape ``(n_samples, n_components)`` (see OnlineCPDL)."""
        return super().transform(X, mask)

    def score(self, X: Any, y: Any = None, sample_weight: Any = None, mask: Any = None) -> float:
        """Minus the mean over samples of ``min_w 1/2 ||x - w H||^2 + penalties(w)``."""
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

        Scikit-learn's objective (``0.5 * ||X - W H||^2 + penalties``) divided by ``len(X)``.
        """
        score = self.score(X)
        with using(self.backend_):
            return -score + self._algorithm().dictionary_penalty(self.loadings_)


class NMFAlgorithm(SurrogateCP):
    """:class:`OnlineCPDL`'s surrogate algorithm with scikit-learn's NMF penalties: elastic-net
    codes (ADMM or exact coordinate descent), the components' penalty in the column steps, and
    the forget factor's discounted weights.

    Parameters
    ----------
    params : namespace
        The parameters of :class:`OnlineNMF`.
    epoch_samples : int, optional
        Samples per pass in ``fit``: scikit-learn's per-batch discount depends on it.
    """

    nonnegative = True

    def __init__(self, params: Any, epoch_samples: int | None = None):
        self.params = params
        self.weights = make_weights(self._weights(params, epoch_samples))
        self.radius = make_radius(params.search_radius, self.weights)
        alpha_H = params.alpha_W if isinstance(params.alpha_H, str) else params.alpha_H
        #: ``(l1, l2)`` of the components on the 1/2 scale (as in ``updates.penalty_value``)
        self.dictionary_penalties = alpha_H * params.l1_ratio, alpha_H * (1.0 - params.l1_ratio)

    @staticmethod
    def _weights(params: Any, epoch_samples: int | None) -> Any:
        """The forget factor's :class:`Discounted` schedule, or the ``weights`` given."""
        if params.forget_factor is None:
            return params.weights
        factor = float(params.forget_factor)
        if epoch_samples:
            factor **= min(int(params.batch_size), epoch_samples) / epoch_samples
        return Discounted(factor)

    def project(self, U: Any) -> Any:
        return project_columns(U, nonnegative=True, column_bound=self.params.column_bound)

    def code_penalties(self, n_features: int) -> tuple[float, float]:
        """The engine's ``(alpha, ridge)`` (no 1/2 on the loss) for scikit-learn's ``alpha_W``."""
        scale = self.params.alpha_W * n_features
        return 2.0 * scale * self.params.l1_ratio, scale * (1.0 - self.params.l1_ratio)

    def dictionary_penalty(self, loadings: list) -> float:
        """The components' penalty at ``loadings``."""
        return penalty_value(loadings, *self.dictionary_penalties)

    # -- the engine's hooks --------------------------------------------------------------------

    def initial_loadings(self, X: Any, context: dict, rng: Any, mask: Any = None) -> list:
        """From an init array or list, or from the first batch: scikit-learn's random scale
        (drawn in numpy, so every backend starts the same; the mean of the observed entries)
        or NNDSVDa (of the batch with its missing entries at zero)."""
        p, R = self.params, self.params.n_components
        sample_shape = tuple(X.shape[1:])
        given = loadings_from_init(p.init, sample_shape, R, tl.get_backend(), context)
        if given is not None:
            loadings = given
        elif isinstance(p.init, str):
            with_data = tl.tensor(X, **context)
            loadings = [_random_init(with_data, R, context, rng, mask) if p.init == "random"
                        else nndsvda(with_data, R)]
        else:
            loadings = [self.project(U) for U in checked_init(p.init, sample_shape, R, context,
                                                              True)]
        return [self.project(U) for U in loadings]

    def encode(self, X: Any, loadings: list, scale: float, mask: Any = None) -> Codes:
        """Nonnegative elastic-net codes with scikit-learn's ``alpha_W`` scaling.

        Both coders work from the Gram matrix and the projections alone; the losses are on
        scikit-learn's 1/2 scale, the constant on the engine's (the statistics are shared with
        :class:`OnlineCPDL`).
        """
        alpha, ridge = self.code_penalties(int(np.prod(X.shape[1:])))
        G = gram(loadings) if mask is None else masked_gram(mask, loadings)
        P = project(X, loadings)
        tol = self.params.code_tol
        if self.params.coder != "admm" or mask is not None:  # "pivoting" (or its old "hals")
            H, _ = sparse_code(G, P, alpha=alpha, ridge=ridge, nonnegative=True,
                               max_iter=self.params.code_max_iter,
                               tol=_HALS_TOL if tol is None else tol)
        else:
            H, _ = nonnegative_code_admm(G, P, l1=alpha / 2, l2=ridge,
                                         residual_tol=_ADMM_TOL if tol is None else tol,
                                         max_iter=self.params.code_max_iter)
        losses, constant = coded_losses(X, G, P, H, alpha, ridge)
        return Codes(codes=H, explained=X, losses=0.5 * losses, constant=constant)

    def update(self, sums: dict, statistics: dict, loadings: list, t: int,
               scale: float = 1.0) -> list:
        """Exact column steps on the surrogate plus the components' penalty."""
        l1, l2 = self.dictionary_penalties
        if (l1 or l2) and tl.ndim(statistics["A"]) > 2:  # entrywise: a batch had a mask
            raise ValueError(_PENALTY_AND_MISSING)
        return surrogate_bcd_step(
            loadings, statistics["A"], statistics["B"], nonnegative=True,
            column_bound=self.params.column_bound, radius=self.radius_at(t),
            radius_mode=self.params.radius_mode, n_passes=self.params.dict_passes, l1=l1, l2=l2)


def _random_init(X: Any, R: int, context: dict, rng: Any, mask: Any = None) -> Any:
    """scikit-learn's random scale (from the observed entries' mean); drawn in numpy so every
    backend starts the same."""
    if mask is None:
        mean = float(tl.mean(X))
    else:
        observed = tl.tensor(mask, **context)
        mean = float(tl.sum(X * observed)) / max(float(tl.sum(observed)), 1.0)
    scale = float(np.sqrt(max(mean, 0.0) / R))
    draws = np.abs(rng.standard_normal((R, X.shape[1])))
    return tl.tensor(scale * draws.T, **context)


def nndsvda(X: Any, R: int) -> Any:
    """NNDSVD initial dictionary (Boutsidis & Gallopoulos), zeros filled with ``mean(X)``.

    For ``X ~ W H`` with samples on the rows, the dictionary ``H^T`` of shape
    ``(n_features, R)``: for every singular triplet ``(s, u, v)`` the larger of the products of
    the positive and negative parts gives the column ``sqrt(s ||u_part|| ||v_part||) *
    v_part / ||v_part||`` (vectorised over the components).

    Examples
    --------
    >>> import numpy as np
    >>> D = nndsvda(np.random.default_rng(0).random((8, 5)), 2)
    >>> D.shape, bool(D.min() > 0)
    ((5, 2), True)
    """
    n_samples, n_features = tl.shape(X)
    if R > min(n_samples, n_features):
        raise ValueError(f"init='nndsvda' needs n_components <= min(batch size, n_features) = "
                         f"{min(n_samples, n_features)}, got {R}; use init='random' or larger "
                         f"batches")
    U, S, Vt = tl.svd(X, full_matrices=False)
    U, S, V = U[:, :R], S[:R], tl.transpose(Vt[:R])
    u_pos, u_neg = tl.clip(U, 0, None), tl.clip(-U, 0, None)
    v_pos, v_neg = tl.clip(V, 0, None), tl.clip(-V, 0, None)
    nu_pos, nu_neg = tl.norm(u_pos, axis=0), tl.norm(u_neg, axis=0)
    nv_pos, nv_neg = tl.norm(v_pos, axis=0), tl.norm(v_neg, axis=0)
    positive = nu_pos * nv_pos > nu_neg * nv_neg  # ties: the negative parts, as NNDSVD
    v_part = tl.where(tl.reshape(positive, (1, -1)), v_pos, v_neg)
    v_norm = tl.where(positive, nv_pos, nv_neg)
    u_norm = tl.where(positive, nu_pos, nu_neg)
    factor = tl.sqrt(S * u_norm * v_norm) / tl.clip(v_norm, tiny_of(v_norm), None)
    D = v_part * tl.reshape(factor, (1, -1))
    # the first triplet of a nonnegative matrix is one-signed: keep it whole (as NNDSVD does)
    D = tl.index_update(D, tl.index[:, 0], tl.sqrt(S[0]) * tl.abs(V[:, 0]))
    D = tl.where(D < 1e-6, tl.zeros(tl.shape(D), **tl.context(D)), D)  # scikit-learn's eps
    mean = float(tl.mean(X))
    return tl.where(D == 0, tl.zeros(tl.shape(D), **tl.context(D)) + mean, D)


def _n_samples(X: Any, sample_dim: str | None) -> int | None:
    """Number of samples of an array given to ``fit`` (None for a stream)."""
    if is_labelled(X):
        return int(X.sizes[sample_dim]) if sample_dim in X.dims else None
    return int(X.shape[0]) if is_array_like(X) and len(X.shape) else None
