"""The one loop: code the batch, fold it into the statistics, move the dictionary.

Every online learner runs :func:`online_step`; what differs between learners is the
:class:`Algorithm` they configure (which coder, which statistics, which dictionary step,
which constraint set). The step is a pure function of the state and the batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorly as tl

from ..core.dictionary import outer_statistic, pairs
from .state import Codes, OnlineState


class Algorithm:
    """One online algorithm: the three parts of a step, as pure functions.

    Subclasses implement :meth:`encode` and :meth:`update`; the defaults keep the surrogate
    statistics of Mairal et al. with the weights of :meth:`weight`.
    """

    #: False for algorithms that keep no statistics (their state is the loadings and the scale)
    keeps_statistics = True
    #: what to try when the algorithm diverges (part of the error message)
    divergence_hint = ""

    def initial_loadings(self, X: Any, context: dict, rng: Any) -> list:
        """The dictionary before the first step, for samples shaped like the batch ``X``."""
        raise NotImplementedError

    def initial_statistics(self, sample_shape: tuple, R: int, context: dict) -> dict | None:
        """Zero surrogate statistics (None for algorithms that keep none)."""
        return {"A": tl.zeros((R, R), **context), "B": tl.zeros((*sample_shape, R), **context),
                "c": 0.0}

    def data_scale(self, X: Any, state: OnlineState) -> float:
        """The scale step ``t = state.n_steps + 1`` codes at (kept from the first step)."""
        return state.scale

    def encode(self, X: Any, loadings: list, scale: float, mask: Any = None) -> Codes:
        """Codes of the validated batch against ``loadings``."""
        raise NotImplementedError

    def weight(self, t: int) -> float | None:
        """The weight ``w_t`` of step ``t``'s batch in the statistics."""
        return None

    def accumulate(self, statistics: dict | None, coded: Codes, mask: Any,
                   w: float | None) -> dict | None:
        """The statistics after step ``t``: the weighted running means of the surrogate."""
        return surrogate_statistics(statistics, coded, mask, w)

    def update(self, X: Any, coded: Codes, statistics: dict | None, loadings: list, t: int,
               scale: float) -> list:
        """The dictionary after step ``t`` (``scale``: the data scale the batch was coded at)."""
        raise NotImplementedError

    def info(self, t: int, w: float | None) -> dict:
        """What a progress bar or callback learns about step ``t`` (besides the batch loss)."""
        return {}


def online_step(algorithm: Algorithm, X: Any, state: OnlineState,
                mask: Any = None) -> tuple[OnlineState, Codes, dict]:
    """One step of ``algorithm`` on the validated batch ``X``: ``(new state, codes, info)``.

    Raises ``FloatingPointError`` (and changes nothing: the state is immutable) when the new
    dictionary is not finite.
    """
    t = state.n_steps + 1
    scale = algorithm.data_scale(X, state)
    coded = algorithm.encode(X, state.loadings, scale, mask)
    w = algorithm.weight(t)
    statistics = algorithm.accumulate(state.statistics, coded, mask, w)
    if not (_finite(coded.losses) and (statistics is None or _finite_statistics(statistics))):
        if _overflows(X):  # finite data whose squares overflow (e.g. entries near 1e160)
            raise ValueError("X: the batch's values are too large for this model's arithmetic "
                             "(its losses or statistics overflow to inf); rescale the data. The "
                             "learner's state was left unchanged")
        raise FloatingPointError(f"the model diverged at step {t} (its losses or statistics "
                                 f"overflow); the learner's state was left unchanged. "
                                 f"{algorithm.divergence_hint}")
    loadings = algorithm.update(X, coded, statistics, state.loadings, t, scale)
    if not all(_finite(U) for U in loadings):
        raise FloatingPointError(f"the dictionary update produced non-finite loadings at step "
                                 f"{t}; the learner's state was left unchanged. "
                                 f"{algorithm.divergence_hint}")
    b = X.shape[0]
    new = OnlineState(loadings=loadings, statistics=statistics, scale=scale, n_steps=t,
                      n_samples_seen=state.n_samples_seen + b)
    info = {"step": t, **algorithm.info(t, w), "batch_loss": float(tl.mean(coded.losses)),
            "n_samples": b}
    return new, coded, info


def _overflows(X: Any) -> bool:
    """Whether squares of the batch's entries summed over a sample overflow."""
    values = X.data if hasattr(X, "tocsr") or hasattr(X, "nnz") else X
    largest = float(tl.max(tl.abs(values))) if tl.shape(values)[0] else 0.0
    size = float(np.prod(X.shape[1:]))
    return not np.isfinite(largest * largest * size)


def _finite(tensor: Any) -> bool:
    return bool(tl.all(tl.abs(tensor) < float("inf")))


def _finite_statistics(statistics: dict) -> bool:
    return _finite(statistics["A"]) and _finite(statistics["B"]) and \
        abs(float(statistics["c"])) < float("inf")


def surrogate_statistics(statistics: dict, coded: Codes, mask: Any, w: float) -> dict:
    """``A``, ``B``, ``c`` after folding in a coded batch with weight ``w``::

        A_t = (1 - w) A_{t-1} + w mean_j h_j h_j^T      (entrywise with a mask)
        B_t = (1 - w) B_{t-1} + w mean_j explained_j o h_j
        c_t = (1 - w) c_{t-1} + w constant
    """
    H = coded.codes
    b = H.shape[0]
    return {
        "A": _averaged_code_products(statistics["A"], H, mask, w),
        "B": (1 - w) * statistics["B"] + (w / b) * outer_statistic(coded.explained, H),
        "c": (1 - w) * statistics["c"] + w * coded.constant,
    }


def _averaged_code_products(A: Any, H: Any, mask: Any, w: float) -> Any:
    """``(1 - w) A + w mean_j h_j h_j^T``, entrywise (``mean_j m_j[i] h_j h_j^T``) with a mask.

    The first batch with missing entries turns ``A`` entrywise: until then every entry had the
    same ``A``, so broadcasting it is exact.
    """
    b, R = H.shape
    if mask is None and tl.ndim(A) == 2:
        return (1 - w) * A + (w / b) * tl.dot(tl.transpose(H), H)
    if mask is None:
        increment = tl.reshape(tl.dot(tl.transpose(H), H), (1,) * (tl.ndim(A) - 2) + (R, R))
    else:
        sample_shape = tuple(mask.shape[1:])
        increment = tl.reshape(outer_statistic(mask, pairs(H)), (*sample_shape, R, R))
        if tl.ndim(A) == 2:
            A = tl.reshape(A, (1,) * len(sample_shape) + (R, R))
    return (1 - w) * A + (w / b) * increment
