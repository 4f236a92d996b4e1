"""Algorithm 2 of Lyu, Strohmeier & Needell (online CP-dictionary learning) for the engine.

Per mini-batch: lasso codes against the current dictionary (exact, by block principal pivoting,
or by ADMM in the code space), the surrogate statistics ``A``, ``B``, ``c`` folded in with
weight ``w_t``, and one block-coordinate pass over the loadings within the search radius
(:class:`tensorstream.learners.ocpdl.OnlineCPDL` describes the maths and every option).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tensorly as tl

from ..coders.lasso import sample_losses, sparse_code
from ..coders.robust import nonnegative_code_admm
from ..core.constraints import project_columns
from ..core.dictionary import dictionary_matrix, gram, masked_gram
from ..core.products import narrow_dot, row_sq_norms
from ..engine import Algorithm, Codes
from ..schedules import checked_radius, checked_weight, make_radius, make_weights
from ..steps.surrogate import surrogate_bcd_step
from .initial import random_or_given

ADMM_BATCH = 256
"""``coder="auto"`` codes by ADMM from this ``batch_size`` on (nonnegative codes; see
:meth:`SurrogateCP.uses_admm`), by pivoting below it (docs/ocpdl.md, "The coder")."""
PIVOTING_TOL, ADMM_TOL = 1e-5, 1e-2
"""The coders' own tolerances, ``code_tol=None``: block principal pivoting's optimality test
(:func:`~tensorstream.coders.lasso.sparse_code`) and ADMM's per-sample residual
(:func:`~tensorstream.coders.robust.nonnegative_code_admm`)."""


@dataclass(frozen=True, eq=False)
class SurrogateOptions:
    """The options of :class:`SurrogateCP` (:class:`~tensorstream.learners.ocpdl.OnlineCPDL`'s
    parameters of the same names say what each means).

    Examples
    --------
    >>> SurrogateOptions(n_components=3, alpha=0.1).coder
    'auto'
    """

    n_components: int
    init: Any = "random"
    alpha: float = 0.0
    ridge: float = 0.0
    weights: Any = 0.5
    search_radius: Any = None
    radius_mode: str = "frobenius"
    nonnegative: bool = True
    column_bound: float | None = 1.0
    batch_size: int = 32
    coder: str = "auto"
    code_max_iter: int = 300
    code_tol: float | None = None
    dict_step: str = "auto"
    dict_passes: int | None = None
    dict_tol: float | None = None


class SurrogateCP(Algorithm):
    """Algorithm 2 of Lyu, Strohmeier & Needell: lasso codes, surrogate statistics, one
    block-coordinate pass on the loadings within the search radius.

    Parameters
    ----------
    options : SurrogateOptions
    """

    def __init__(self, options: SurrogateOptions):
        self.options = options
        self.nonnegative = bool(options.nonnegative)
        self.weights = make_weights(options.weights)
        self.radius = make_radius(options.search_radius, self.weights)

    def project(self, U: Any) -> Any:
        """The constraint set of a loading: (nonnegative) columns in the ball."""
        return project_columns(U, nonnegative=self.nonnegative,
                               column_bound=self.options.column_bound)

    def initial_loadings(self, X: Any, context: dict, rng: Any, mask: Any = None) -> list:
        """U[0, 1) entries (drawn in numpy: every backend starts the same), or ``init``."""
        p = self.options
        return [self.project(U) for U in random_or_given(p.init, tuple(X.shape[1:]),
                                                         p.n_components, context, rng,
                                                         self.nonnegative)]

    def encode(self, X: Any, loadings: list, scale: float, mask: Any = None) -> Codes:
        """Lasso codes: exact (block principal pivoting), or by ADMM in the code space
        (:meth:`uses_admm`); with a ``mask`` (``X`` is zero where it is 0), each sample has its
        own Gram ``W^T diag(m_j) W``, and the codes are the exact coder's.

        The coder, the losses and the statistic ``c`` are written without the 1/2 on the
        squared error (:mod:`tensorstream.coders.lasso`), so the user's ``alpha`` (against
        ``1/2 ||x - W h||^2``) enters them doubled; ``ridge`` means the same in both.
        """
        alpha, ridge = 2 * self.options.alpha, self.options.ridge
        G = gram(loadings) if mask is None else masked_gram(mask, loadings)
        P = projections(X, loadings)
        tol = self.options.code_tol
        if mask is None and self.uses_admm():  # ADMM's objective has the 1/2: alpha / 2
            H, _ = nonnegative_code_admm(G, P, l1=alpha / 2, l2=ridge,
                                         residual_tol=ADMM_TOL if tol is None else tol,
                                         max_iter=self.options.code_max_iter)
        else:
            H, _ = sparse_code(G, P, alpha=alpha, ridge=ridge, nonnegative=self.nonnegative,
                               max_iter=self.options.code_max_iter,
                               tol=PIVOTING_TOL if tol is None else tol)
        losses, constant = coded_losses(X, G, P, H, alpha, ridge)
        return Codes(codes=H, explained=X, losses=losses, constant=constant)

    def uses_admm(self) -> bool:
        """Whether the codes of unmasked batches come from ADMM in the code space
        (:func:`~tensorstream.coders.robust.nonnegative_code_admm`, OnlineNMF's coder, to its
        residual tolerance ``code_tol``): ``coder="admm"``, or ``"auto"`` with nonnegative codes and
        ``batch_size`` of at least :data:`ADMM_BATCH`. The rule reads the parameter, not the
        batch, so every batch of a run (and every shard of a cluster step) codes alike."""
        coder = self.options.coder
        return coder == "admm" or (coder == "auto" and self.nonnegative
                                   and self.options.batch_size >= ADMM_BATCH)

    def weight(self, t: int) -> float:
        """``w_t``; ``w_1 = 1`` whatever the schedule says, so that the statistics are
        averages from the start (otherwise the first batches' are shrunk towards the zero
        ``A_0``, ``B_0``)."""
        w = checked_weight(self.weights, t)  # checked at t = 1 too: a wrong schedule is named
        return 1.0 if t == 1 else w

    def radius_at(self, t: int) -> float | None:
        """The search radius of step ``t`` (None: unrestricted)."""
        return None if self.radius is None else checked_radius(self.radius, t)

    def update(self, sums: dict, statistics: dict, loadings: list, t: int,
               scale: float = 1.0) -> list:
        """One block-coordinate pass on the surrogate, each loading within the radius."""
        return surrogate_bcd_step(
            loadings, statistics["A"], statistics["B"], nonnegative=self.nonnegative,
            column_bound=self.options.column_bound, radius=self.radius_at(t),
            radius_mode=self.options.radius_mode, n_passes=self.options.dict_passes,
            method="fista" if self.options.dict_step == "fista" else "columns",
            tol=self.options.dict_tol)

    def info(self, t: int, w: float | None, n: int) -> dict:
        return {"weight": w, "radius": self.radius_at(t)}


def coded_losses(X: Any, G: Any, P: Any, H: Any, alpha: float, ridge: float
                 ) -> tuple[Any, float]:
    """Per-sample losses ``||x - W h||^2 + alpha ||h||_1 + ridge ||h||^2`` (without the 1/2)
    of the codes ``H`` from the Gram ``G`` and projections ``P``, and the batch's constant
    ``mean(||x||^2 + alpha ||h||_1 + ridge ||h||^2)`` of the statistic ``c``."""
    flat = tl.reshape(X, (tl.shape(X)[0], -1))
    sq_norms = row_sq_norms(flat)
    losses = sample_losses(sq_norms, G, P, H, alpha=alpha, ridge=ridge)
    if alpha or ridge:  # the codes' penalties, summed as the engine sums them
        sq_norms = sq_norms + tl.sum(alpha * tl.abs(H) + ridge * H * H, axis=1)
    return losses, float(tl.mean(sq_norms))


def projections(X: Any, loadings: list) -> Any:
    """``W^T vec(X_j)`` for every sample of ``X`` (``(b, I_1..I_n)``): one GEMM with the atoms.

    The atoms ``W`` (``prod(I) x R``) are no larger than the statistic ``B`` the learner keeps
    anyway, and forming them costs ``O(R prod(I))``, a ``b``-th of the product itself; the
    contraction mode by mode that avoids them is several times slower (its intermediates are
    ``R / I_n`` times the batch).
    """
    return narrow_dot(tl.reshape(X, (tl.shape(X)[0], -1)), dictionary_matrix(loadings))
