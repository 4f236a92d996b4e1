"""The OL algorithm of Zhao, Tan & Xu on a CP dictionary, for the engine.

Per mini-batch: codes by batched projected gradient under the divergence
(:func:`tensorstream.coders.divergence.code_divergence`), then one projected stochastic-gradient
step (or its multiplicative-update preconditioned form, in one or several rounds) on every
loading. No statistics are kept: the state is the loadings and the data scale.
:mod:`tensorstream.learners.divergence_nmf` describes the maths, its deviations from the paper
and every option.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorly as tl

from ..coders.divergence import (
    CODE_LOWER,
    CODE_UPPER,
    SPARSE_LOSSES,
    SparseKL,
    code_divergence,
    solve_sparse_kl,
)
from ..core.constraints import project_rows_box_sum
from ..core.dictionary import contract_except, gram, outer_statistic, project, reconstruct
from ..core.validation import (
    check_nonnegative_number,
    check_positive_int,
    is_sparse,
)
from ..engine import Algorithm, Codes
from ..losses import EPS, MULTIPLICATIVE_LOSSES, Divergence, beta_of
from ..steps.gradient import (
    batch_gradient,
    mu_preconditioned_step,
    preconditioned_step,
    projected_gradient_step,
)
from .initial import random_or_given


@dataclass(frozen=True, eq=False)
class DivergenceOptions:
    """The options of :class:`DivergenceCP`
    (:class:`~tensorstream.learners.divergence_nmf.OnlineDivergenceNMF`'s parameters of the
    same names say what each means)."""

    n_components: int
    init: Any = "random"
    batch_size: int = 100
    step_a: float | None = None
    step_b: float = 2e4
    step_tau: float | None = None
    grad_reduction: str = "mean"
    dict_step: str = "auto"
    dict_rounds: int | str = "auto"
    code_step: Any = "auto"
    code_lower: float = CODE_LOWER
    code_upper: float = CODE_UPPER
    dict_upper: float = 1.0
    dict_row_min: float = 1e-8
    ridge: float = 0.0
    normalize: bool = True
    code_max_iter: int = 100
    code_tol: float = 1e-4


def _scaled(X: Any, scale: float) -> Any:
    """``X / scale`` (a sparse batch keeps its pattern; entrywise the same as the dense one)."""
    if is_sparse(X):
        out = X.copy()
        out.data = X.data / scale
        return out
    return X / scale


def _nonzeros(X: Any) -> int:
    """The number of nonzero entries of a batch, dense or sparse (a sparse matrix's stored
    zeros, which ``nnz`` counts, are not: the same data count the same either way)."""
    return int(np.count_nonzero(X.data)) if is_sparse(X) else int((X != 0).sum())


MU_REFERENCE_BATCH = 100
"""Batch size (samples) from which the MU dictionary step's first steps are full updates.

Measured on planted-topic corpora (docs/losses.md): from about 100 documents a batch's
multiplicative update is a good step; smaller batches get proportionally smaller steps."""


AUTO_ROUNDS_PER_NONZERO = 4
"""``dict_rounds="auto"``: rounds per nonzero entry of the batch per entry of the dictionary.

A round fits the batch's own dictionary further; how far that can go before it fits the
batch's noise depends on how much the batch says about each dictionary entry. Measured on
batches with 0.26 to 50 nonzeros per entry (docs/losses.md, "Several rounds per batch"):
planted sparse topics (0.26) gained nothing robustly from 3 rounds (better on two corpora,
worse on another) and lost from 10; the digits as pixel counts (0.32) gained from 2-8 and lost
from 16; 8 x 8 image patches (6.3 and 31), Poisson faces (20) and dense Poisson data (1 and
50) gained from every count up to 20, at equal time too."""

MAX_AUTO_ROUNDS = 20
"""The most rounds ``dict_rounds="auto"`` makes (a round costs 7-16% of a step's coding: a
dense batch's step then costs 2-4 times its one-round cost)."""


def auto_rounds(nonzeros: int, entries: int) -> int:
    """``dict_rounds="auto"``'s rounds for a batch with ``nonzeros`` nonzero entries and a
    dictionary of ``entries`` entries: ``floor(4 nonzeros / entries)``, between 1 and 20.

    Raises ``ValueError`` (``TypeError`` for a non-number) naming the argument for a negative
    count or a dictionary without entries.

    Examples
    --------
    >>> auto_rounds(5_000, 20_000), auto_rounds(2_000, 2_000), auto_rounds(10**6, 2_000)
    (1, 4, 20)
    """
    nonzeros = check_nonnegative_number(nonzeros, "nonzeros")
    entries = check_positive_int(entries, "entries")
    per_entry = int(AUTO_ROUNDS_PER_NONZERO * nonzeros // entries)
    return min(MAX_AUTO_ROUNDS, max(1, per_entry))


def beta_mu_step(B: Any, P: Any, loadings: list, eta: float,
                 project: Callable[[Any], Any]) -> list:
    """``U^(k) <- project(U^(k) - eta U^(k) / D_k * grad_k)`` with ``D_k`` the positive part of
    the gradient, ``contract_except(P, loadings, k)``, ``P = sum_j y_j^(β-1) o h_j``.

    ``grad_k = D_k - N_k`` (``N_k`` from ``sum_j v_j y_j^(β-2) o h_j``), so ``eta = 1`` is the
    β-divergence's multiplicative update ``U N_k / D_k`` on the batch (Févotte & Idier) and a
    smaller ``eta`` moves part of the way: every entry in proportion to its size, whatever the
    data's scale. For KL (``y^0 = 1``) ``D_k`` is the code sums times the other loadings'
    column sums (:func:`~tensorstream.steps.gradient.mu_preconditioned_step`).
    """
    denominators = [tl.clip(contract_except(P, loadings, k), 1e-30, None)
                    for k in range(len(loadings))]
    return preconditioned_step(B, denominators, loadings, eta, project)


class DivergenceCP(Algorithm):
    """The OL algorithm as a configuration of the engine (module docstring).

    Keeps no statistics: the state is the loadings and the data scale.

    Parameters
    ----------
    options : DivergenceOptions
    loss : Divergence
    samples_seen : int, default 0
        Samples seen before the batch being learned (what the step size counts).

    Examples
    --------
    >>> from tensorstream.losses import get_loss
    >>> options = DivergenceOptions(n_components=2, step_a=2e4, batch_size=32, dict_step="sgd")
    >>> DivergenceCP(options, get_loss("kl")).step_size(1)
    0.9984025559105432
    """

    keeps_statistics = False
    nonnegative = True  # the constraint set C is in the nonnegative orthant

    def __init__(self, options: DivergenceOptions, loss: Divergence, samples_seen: int = 0):
        self.options = options
        self.loss = loss
        # before the batch being learned (at_state gives it): what the step size counts
        self.samples_seen = samples_seen

    def at_state(self, state: Any) -> DivergenceCP:
        """The algorithm stepping from ``state``: its step size counts the samples seen."""
        return DivergenceCP(self.options, self.loss, int(state.n_samples_seen))

    def dict_step(self) -> str:
        """The dictionary step: ``dict_step``, with ``"auto"`` resolved to ``"mu"`` for the
        β-divergences but β = 2, KL and IS included (their multiplicative update is the
        preconditioner; the coder's ``"auto"`` decides by the same names,
        :data:`~tensorstream.losses.MULTIPLICATIVE_LOSSES`), and ``"sgd"`` for the others."""
        step = self.options.dict_step
        if step == "auto":
            return "mu" if self.loss.name in MULTIPLICATIVE_LOSSES else "sgd"
        return step

    def step_size(self, t: int, n: int | None = None) -> float:
        """``eta_t = step_a / (step_tau t + step_b)`` for step ``t`` on a batch of ``n``.

        ``step_tau=None`` counts samples: ``step_tau t`` is the number of samples seen with
        this batch (``samples_seen + n``; ``batch_size t`` when ``n`` is not given), so that a
        stream of batches of any size (``partial_fit``) steps as ``fit`` does. ``step_a=None``:
        ``step_b`` for the paper's step; for the MU step ``step_b min(1, n / 100)``
        (:data:`MU_REFERENCE_BATCH`; ``step_tau`` in place of ``n`` where given), so that a
        batch's weight is proportional to its size (a full multiplicative update on a batch of
        10 documents overfits it).
        """
        p = self.options
        if p.step_tau is None:
            size = float(p.batch_size if n is None else n)
            seen = size * t if n is None else float(self.samples_seen + n)
        else:
            size = float(p.step_tau)
            seen = size * t
        a = p.step_a
        if a is None:
            shrink = min(1.0, size / MU_REFERENCE_BATCH) if self.dict_step() == "mu" else 1.0
            a = float(p.step_b) * shrink
        denominator = seen + float(p.step_b)
        return float(a) / denominator if denominator > 0 else float("inf")

    @staticmethod
    def keeps_sparse(loss: Divergence, X: Any, backend: str) -> bool:
        """True when a sparse batch stays sparse: the support-only path (KL, one data mode),
        or a backend that refuses sparse input (with a clear error at validation)."""
        return backend != "numpy" or (len(X.shape) == 2 and loss.name in SPARSE_LOSSES)

    def project(self, U: Any) -> Any:
        """The paper's C: entries in ``[0, dict_upper]``, row sums ``>= dict_row_min``."""
        return project_rows_box_sum(U, float(self.options.dict_upper),
                                    float(self.options.dict_row_min))

    # -- the engine's hooks --------------------------------------------------------------------

    def initial_loadings(self, X: Any, context: dict, rng: Any, mask: Any = None) -> list:
        """i.i.d. U(0, 1) loadings (drawn in numpy with ``rng``), or ``init``."""
        p = self.options
        return [self.project(U) for U in random_or_given(p.init, tuple(X.shape[1:]),
                                                         p.n_components, context, rng)]

    def initial_statistics(self, sample_shape: tuple, R: int, context: dict) -> None:
        return None

    def code_box(self, scale: float) -> tuple[float, float]:
        """The coder's box ``[code_lower, code_upper]`` at the raw scale (the health checks
        count codes at its ends as inactive or at a bound)."""
        p, slack = self.options, 1e-9
        return (float(p.code_lower) * scale * (1 + slack),
                float(p.code_upper) * scale * (1 - slack))

    def scale_sums(self, X: Any, mask: Any = None) -> tuple[float, float] | None:
        """The first batch's mean absolute entry, as a sum and a count (None, i.e. 1.0, when
        ``normalize=False``; a divergence loss has no missing entries)."""
        if not self.options.normalize:
            return None
        total = np.sum(np.abs(X.data)) if is_sparse(X) else tl.sum(tl.abs(X))
        return float(total), float(np.prod(X.shape))

    def encode(self, X: Any, loadings: list, scale: float, mask: Any = None,
               init: Any = None) -> Codes:
        """Codes of a batch (raw scale) by projected gradient on ``d(v/scale || W h)``.

        ``init`` warm-starts the codes (raw scale). ``losses`` are the per-sample divergences
        at the raw scale.
        """
        if mask is not None:
            raise ValueError(f"the {self.loss.name} loss does not support missing entries "
                             f"(mask)")
        Xn, H, info, kl = self._solve(X, loadings, scale, init, int(self.options.code_max_iter))
        codes = H * scale
        if kl is not None:
            # KL is positively homogeneous: d(s v || s y) = s d(v || y)
            losses = info["objective"]
            if self.options.ridge:
                losses = losses - float(self.options.ridge) / 2 * np.sum(H * H, axis=1)
            losses = losses * scale
        else:
            # the divergence the codes minimise, at the raw scale (thresholds and floors are in
            # normalized units)
            losses = self.loss.at_scale(scale).per_sample(X, info["model"] * scale)
        # batch_sums needs the normalized batch, codes and model (and the SparseKL) again:
        # carried with the codes, one forward pass less per step
        return Codes(codes=codes, explained=X, losses=losses, constant=float(tl.mean(losses)),
                     work=(Xn, H, info["model"], kl))

    def _solve(self, X: Any, loadings: list, scale: float, init: Any, max_iter: int,
               normalized: Any = None, evaluate: bool = True) -> tuple:
        """``(normalized batch, normalized codes, the coder's info, SparseKL or None)``;
        ``normalized`` is ``X / scale`` where the caller has it already."""
        p, loss = self.options, self.loss
        options = {"init": None if init is None else init / scale,
                   "step": p.code_step, "lower": p.code_lower, "upper": p.code_upper,
                   "ridge": float(p.ridge), "max_iter": max_iter, "tol": float(p.code_tol),
                   "evaluate": evaluate}
        Xn = _scaled(X, scale) if normalized is None else normalized
        if is_sparse(X):
            # the learner validated the batch, the loadings and the options: no re-checks
            kl = SparseKL(Xn, loadings[0], eps=loss.eps)
            H, info = solve_sparse_kl(kl, **options)
            return Xn, H, info, kl
        H, info = code_divergence(Xn, lambda C: reconstruct(loadings, C),
                                  lambda G: project(G, loadings), loss,
                                  gram=gram(loadings), **options)
        return Xn, H, info, None

    def batch_sums(self, X: Any, coded: Codes, mask: Any, loadings: list,
                   scale: float) -> dict:
        """The batch's dictionary gradient and code sums at the normalized scale."""
        # what "auto" decides by (rounds), counted on the data as given
        counts = {"nonzeros": _nonzeros(X)} if self._auto_rounds() and len(loadings) == 1 else {}
        if coded.work is not None:
            Xn, Hn, model, kl = coded.work
        else:
            Xn, Hn, model, kl = _scaled(X, scale), coded.codes / scale, None, None
        return {"n": int(Hn.shape[0]), "loss": float(tl.sum(coded.losses)),
                "gradient": batch_gradient(Xn, Hn, loadings, self.loss, model, kl),
                "code_sums": tl.sum(Hn, axis=0), **counts,
                **self._positive_part(Hn, loadings, model)}

    def _beta_mu(self) -> bool:
        """True when the MU step needs the β-divergence's own denominator (β != 1: for KL the
        code sums are that denominator, and cost nothing)."""
        return self.dict_step() == "mu" and beta_of(self.loss) not in (None, 1.0)

    def _positive_part(self, H: Any, loadings: list, model: Any) -> dict:
        """``{"positive": sum_j y_j^(β-1) o h_j}``, the positive part of the batch's
        dictionary gradient (the β multiplicative update's denominator) when :meth:`_beta_mu`;
        ``{}`` otherwise."""
        if not self._beta_mu():
            return {}
        model = reconstruct(loadings, H) if model is None else model
        floor = getattr(self.loss, "eps", EPS)  # SquaredL2 (β = 2) has no floor of its own
        power = tl.clip(model, floor, None) ** (beta_of(self.loss) - 1.0)
        return {"positive": outer_statistic(power, H)}

    def alternate(self, sums: dict, loadings: list, recode: Callable[[list], dict]) -> dict:
        """The batch's sums after its further rounds (:meth:`rounds`), each a multiplicative
        update of the batch's own dictionary (:meth:`round_dictionary`) and then of its codes
        (``recode``), with ``"round_loadings"``, the batch's dictionary they were taken at, when
        there were any (:meth:`update` moves towards it); ``sums`` as they are otherwise."""
        at = loadings
        for _ in range(self.rounds(sums) - 1):
            at = self.round_dictionary(sums, at)
            sums = {**sums, **recode(at)}
        return sums if at is loadings else {**sums, "round_loadings": at}

    def rounds(self, sums: dict) -> int:
        """How many alternating rounds a step makes on its batch (1: the dictionary moves
        once, from the batch's first codes): ``dict_rounds``; ``"auto"``: :func:`auto_rounds`
        of the batch's nonzeros for a matrix dictionary, 1 for a tensor; the SGD step always
        makes one."""
        rounds = self.options.dict_rounds
        if self.dict_step() != "mu":
            return 1
        if rounds != "auto":
            return int(rounds)
        if "nonzeros" not in sums:  # a tensor dictionary: no gain measured
            return 1
        return auto_rounds(sums["nonzeros"], int(np.prod(tl.shape(sums["gradient"]))))

    def _auto_rounds(self) -> bool:
        return self.options.dict_rounds == "auto" and self.dict_step() == "mu"

    def round_dictionary(self, sums: dict, loadings: list) -> list:
        """One multiplicative update of the batch's dictionary at its codes (``eta = 1``)."""
        return self._mu_step(sums, loadings, 1.0)

    def _mu_step(self, sums: dict, loadings: list, eta: float) -> list:
        """The MU-preconditioned step ``U <- Pi_C(U - eta U / D * grad)``: ``D`` from the code
        sums for KL, the gradient's positive part for another β (:func:`beta_mu_step`)."""
        if "positive" in sums:
            return beta_mu_step(sums["gradient"], sums["positive"], loadings, eta,
                                self.project)
        return mu_preconditioned_step(sums["gradient"], sums["code_sums"], loadings, eta,
                                      self.project)

    def recode(self, X: Any, coded: Codes, loadings: list, scale: float) -> tuple[Codes, dict]:
        """One iteration of the coding step (``code_step``: one multiplicative update by
        default) of the batch's codes at ``loadings``, from ``coded``'s."""
        Xn, H, info, kl = self._solve(X, loadings, scale, coded.codes, 1,
                                      normalized=coded.work[0], evaluate=False)
        moved = dataclasses.replace(coded, codes=H * scale, work=(Xn, H, info["model"], kl))
        return moved, {"gradient": batch_gradient(Xn, H, loadings, self.loss, info["model"], kl),
                       "code_sums": tl.sum(H, axis=0),
                       **self._positive_part(H, loadings, info["model"])}

    def accumulate(self, statistics: None, sums: dict, w: None) -> None:
        return None

    def update(self, sums: dict, statistics: None, loadings: list, t: int,
               scale: float) -> list:
        """One projected stochastic-gradient step on every loading, at the normalized scale
        (the paper's step, or the MU-preconditioned one with ``dict_step="mu"``)."""
        eta, B = self.step_size(t, sums["n"]), sums["gradient"]
        if self.dict_step() == "mu":
            at = sums.get("round_loadings")
            if at is None:  # one round: the step from the batch's first codes
                return self._mu_step(sums, loadings, eta)
            # several: towards the batch's own dictionary after its last round
            batch = self.round_dictionary(sums, at)
            return [self.project((1.0 - eta) * U + eta * V) for U, V in zip(loadings, batch)]
        if self.options.grad_reduction == "mean":
            B = B / sums["n"]
        return projected_gradient_step(B, loadings, eta, self.project)

    def info(self, t: int, w: None, n: int) -> dict:
        return {"step_size": self.step_size(t, n)}
