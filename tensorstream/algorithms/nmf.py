"""Online NMF with scikit-learn's penalties: :class:`NMFAlgorithm`, for the engine.

:class:`~tensorstream.algorithms.surrogate_cp.SurrogateCP` (Mairal-style surrogate statistics,
exact column steps) with scikit-learn's ``MiniBatchNMF`` penalty scaling on the codes, the
components' penalty in the dictionary step, and the forget factor's discounted weights
(:mod:`tensorstream.learners.nmf` states the objective and every option).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorly as tl

from ..coders.lasso import sparse_code
from ..coders.robust import nonnegative_code_admm
from ..core.backend import tiny_of
from ..core.constraints import project_columns
from ..core.dictionary import gram, masked_gram, project
from ..core.validation import check_batch
from ..engine import Codes
from ..schedules import make_radius, make_weights
from ..steps.surrogate import penalty_value, surrogate_bcd_step
from .initial import checked_init
from .surrogate_cp import ADMM_TOL, SurrogateCP, coded_losses

#: the coders' default tolerances (``code_tol=None``), chosen by measurement (docs/nmf.md)
_PIVOTING_TOL = 1e-4  # the ADMM coder's own: surrogate_cp.ADMM_TOL


PENALTY_AND_MISSING = ("alpha_H (the components' penalty; 'same' copies alpha_W) is not "
                        "supported with missing entries (missing='nan' or a mask): the column "
                        "steps of entrywise statistics have no penalty; set alpha_H=0")


@dataclass(frozen=True, eq=False)
class NMFOptions:
    """The options of :class:`NMFAlgorithm` (:class:`~tensorstream.learners.nmf.OnlineNMF`'s
    parameters of the same names say what each means).

    ``epoch_samples`` is the number of samples of a pass in ``fit`` on an array (None
    elsewhere): scikit-learn's per-batch discount by ``forget_factor`` depends on it.
    """

    n_components: int
    init: Any = "random"
    batch_size: int = 1024
    alpha_W: float = 0.0
    alpha_H: float | str = "same"
    l1_ratio: float = 0.0
    forget_factor: float | None = None
    weights: Any = 0.5
    search_radius: Any = None
    radius_mode: str = "frobenius"
    column_bound: float | None = 1.0
    dict_passes: int = 1
    coder: str = "admm"
    code_max_iter: int = 100
    code_tol: float | None = None
    epoch_samples: int | None = None


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


class NMFAlgorithm(SurrogateCP):
    """:class:`OnlineCPDL`'s surrogate algorithm with scikit-learn's NMF penalties: elastic-net
    codes (ADMM or exact coordinate descent), the components' penalty in the column steps, and
    the forget factor's discounted weights.

    Parameters
    ----------
    options : NMFOptions
    """

    nonnegative = True

    def __init__(self, options: NMFOptions):
        self.options = options
        self.weights = make_weights(self._weights(options))
        self.radius = make_radius(options.search_radius, self.weights)
        alpha_H = options.alpha_W if isinstance(options.alpha_H, str) else options.alpha_H
        #: ``(l1, l2)`` of the components on the 1/2 scale (as in ``updates.penalty_value``)
        self.dictionary_penalties = alpha_H * options.l1_ratio, alpha_H * (1.0 - options.l1_ratio)

    @staticmethod
    def _weights(options: NMFOptions) -> Any:
        """The forget factor's :class:`Discounted` schedule, or the ``weights`` given."""
        if options.forget_factor is None:
            return options.weights
        factor = float(options.forget_factor)
        epoch_samples = options.epoch_samples
        if epoch_samples:
            factor **= min(int(options.batch_size), epoch_samples) / epoch_samples
        return Discounted(factor)

    def project(self, U: Any) -> Any:
        return project_columns(U, nonnegative=True, column_bound=self.options.column_bound)

    def code_penalties(self, n_features: int) -> tuple[float, float]:
        """The engine's ``(alpha, ridge)`` (no 1/2 on the loss) for scikit-learn's ``alpha_W``."""
        scale = self.options.alpha_W * n_features
        return 2.0 * scale * self.options.l1_ratio, scale * (1.0 - self.options.l1_ratio)

    def dictionary_penalty(self, loadings: list) -> float:
        """The components' penalty at ``loadings``."""
        return penalty_value(loadings, *self.dictionary_penalties)

    # -- the engine's hooks --------------------------------------------------------------------

    def initial_loadings(self, X: Any, context: dict, rng: Any, mask: Any = None) -> list:
        """From an init array or list, or from the first batch: scikit-learn's random scale
        (drawn in numpy, so every backend starts the same; the mean of the observed entries)
        or NNDSVDa (of the batch with its missing entries at zero)."""
        p, R = self.options, self.options.n_components
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
        tol = self.options.code_tol
        if self.options.coder != "admm" or mask is not None:  # "pivoting"
            H, _ = sparse_code(G, P, alpha=alpha, ridge=ridge, nonnegative=True,
                               max_iter=self.options.code_max_iter,
                               tol=_PIVOTING_TOL if tol is None else tol)
        else:
            H, _ = nonnegative_code_admm(G, P, l1=alpha / 2, l2=ridge,
                                         residual_tol=ADMM_TOL if tol is None else tol,
                                         max_iter=self.options.code_max_iter)
        losses, constant = coded_losses(X, G, P, H, alpha, ridge)
        return Codes(codes=H, explained=X, losses=0.5 * losses, constant=constant)

    def update(self, sums: dict, statistics: dict, loadings: list, t: int,
               scale: float = 1.0) -> list:
        """Exact column steps on the surrogate plus the components' penalty."""
        l1, l2 = self.dictionary_penalties
        if (l1 or l2) and tl.ndim(statistics["A"]) > 2:  # entrywise: a batch had a mask
            raise ValueError(PENALTY_AND_MISSING)
        return surrogate_bcd_step(
            loadings, statistics["A"], statistics["B"], nonnegative=True,
            column_bound=self.options.column_bound, radius=self.radius_at(t),
            radius_mode=self.options.radius_mode, n_passes=self.options.dict_passes, l1=l1, l2=l2)


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
