"""The one loop: code the batch, fold it into the statistics, move the dictionary.

Every online learner runs :func:`online_step`; what differs between learners is the
:class:`Algorithm` they configure (which coder, which statistics, which dictionary step,
which constraint set). The step is a pure function of the state and the batch.

A step is split where the work can be split: coding a batch gives **additive** batch sums
(:meth:`Algorithm.batch_sums`: code products, data-code products, losses, gradients), whose sum
over any partition of the batch is the sum over the batch; :func:`finish_step` folds them into
the statistics and moves the dictionary. :func:`online_step` does both on one batch;
:mod:`tensorstream.engine.distributed` computes the sums of the shards of a batch on workers and
calls the same :func:`finish_step`.
"""

from __future__ import annotations

import sys
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

    def scale_sums(self, X: Any) -> tuple[float, float] | None:
        """``(sum, count)`` of a first batch's entries that its data scale is the ratio of, so
        that shards can add them up; None when the scale does not depend on the data."""
        return None

    def encode(self, X: Any, loadings: list, scale: float, mask: Any = None) -> Codes:
        """Codes of the validated batch against ``loadings``."""
        raise NotImplementedError

    def weight(self, t: int) -> float | None:
        """The weight ``w_t`` of step ``t``'s batch in the statistics."""
        return None

    def batch_sums(self, X: Any, coded: Codes, mask: Any, loadings: list,
                   scale: float) -> dict:
        """What the statistics and the dictionary step need from a coded batch, as sums over
        its samples (so that sums over shards add up): by default the surrogate's increments
        ``HH = sum_j h_j h_j^T`` (entrywise with a mask), ``XH = sum_j explained_j o h_j``,
        ``constant`` and the sample count ``n``."""
        H = coded.codes
        n = int(H.shape[0])
        if mask is None:
            HH = tl.dot(tl.transpose(H), H)
        else:
            R = H.shape[1]
            HH = tl.reshape(outer_statistic(mask, pairs(H)), (*tuple(mask.shape[1:]), R, R))
        return {"n": n, "loss": float(tl.sum(coded.losses)), "constant": coded.constant * n,
                "HH": HH, "XH": outer_statistic(coded.explained, H)}

    def accumulate(self, statistics: dict | None, sums: dict, w: float | None) -> dict | None:
        """The statistics after step ``t``: the weighted running means of the surrogate."""
        return surrogate_statistics(statistics, sums, w)

    def update(self, sums: dict, statistics: dict | None, loadings: list, t: int,
               scale: float) -> list:
        """The dictionary after step ``t`` (``scale``: the data scale the batch was coded at)."""
        raise NotImplementedError

    def info(self, t: int, w: float | None) -> dict:
        """What a progress bar or callback learns about step ``t`` (besides the batch loss)."""
        return {}


_TOO_LARGE = ("X: the batch's values are too large for this model's arithmetic (its losses or "
              "statistics overflow to inf); rescale the data. The learner's state was left "
              "unchanged")


def online_step(algorithm: Algorithm, X: Any, state: OnlineState,
                mask: Any = None) -> tuple[OnlineState, Codes, dict]:
    """One step of ``algorithm`` on the validated batch ``X``: ``(new state, codes, info)``.

    Raises (and changes nothing: the state is immutable) ``ValueError`` when the batch's
    values overflow the arithmetic, ``FloatingPointError`` when the model diverges.
    """
    scale = algorithm.data_scale(X, state)
    coded = algorithm.encode(X, state.loadings, scale, mask)
    sums = algorithm.batch_sums(X, coded, mask, state.loadings, scale)
    if not np.isfinite(sums["loss"]) and _overflows(X):
        # finite data whose squares overflow (e.g. entries near 1e160)
        raise ValueError(_TOO_LARGE)
    try:
        new, info = finish_step(algorithm, state, sums, scale)
    except _arithmetic_errors():
        if _overflows(X):  # the statistics, not the loss, overflowed: the data's fault
            raise ValueError(_TOO_LARGE) from None
        raise
    return new, coded, info


def finish_step(algorithm: Algorithm, state: OnlineState, sums: dict,
                scale: float) -> tuple[OnlineState, dict]:
    """Fold a batch's sums into the statistics and move the dictionary: ``(new state, info)``.

    Raises ``FloatingPointError`` when the losses, statistics or loadings are not finite (the
    state is immutable: nothing changes).
    """
    t = state.n_steps + 1
    w = algorithm.weight(t)
    statistics = algorithm.accumulate(state.statistics, sums, w)
    if not (np.isfinite(sums["loss"]) and (statistics is None or
                                           _finite_statistics(statistics))):
        raise FloatingPointError(f"the model diverged at step {t} (its losses or statistics "
                                 f"overflow); the learner's state was left unchanged. "
                                 f"{algorithm.divergence_hint}")
    loadings = algorithm.update(sums, statistics, state.loadings, t, scale)
    if not all(_finite(U) for U in loadings):
        raise FloatingPointError(f"the dictionary update produced non-finite loadings at step "
                                 f"{t}; the learner's state was left unchanged. "
                                 f"{algorithm.divergence_hint}")
    n = sums["n"]
    new = OnlineState(loadings=loadings, statistics=statistics, scale=scale, n_steps=t,
                      n_samples_seen=state.n_samples_seen + n)
    info = {"step": t, **algorithm.info(t, w), "batch_loss": sums["loss"] / n, "n_samples": n}
    return new, info


def usable_scale(scale: float) -> float:
    """A data scale, or 1.0 for all-zero (or degenerate) data."""
    return scale if scale > 0 and np.isfinite(scale) else 1.0


def add_sums(parts: list[dict]) -> dict:
    """The sums of a batch from the sums of its shards."""
    total = dict(parts[0])
    for part in parts[1:]:
        for key, value in part.items():
            total[key] = total[key] + value
    return total


#: room left for the products of codes and statistics with the data's squares
_OVERFLOW_MARGIN = 1e6


def _overflows(X: Any) -> bool:
    """Whether squares of the batch's entries summed over a sample come within a margin of
    the largest number of the batch's dtype (the statistics multiply them further)."""
    values = X.data if hasattr(X, "tocsr") or hasattr(X, "nnz") else X
    largest = float(tl.max(tl.abs(values))) if tl.shape(values)[0] else 0.0
    size = float(np.prod(X.shape[1:]))
    limit = float(np.finfo(str(X.dtype).replace("torch.", "")).max)
    return not largest * largest * size * _OVERFLOW_MARGIN < limit


def _arithmetic_errors() -> tuple:
    """The errors of failed arithmetic: divergence, and singular systems on either backend."""
    errors = (FloatingPointError, np.linalg.LinAlgError)
    torch = sys.modules.get("torch")
    return errors + ((torch.linalg.LinAlgError,) if torch is not None else ())


def _finite(tensor: Any) -> bool:
    return bool(tl.all(tl.abs(tensor) < float("inf")))


def _finite_statistics(statistics: dict) -> bool:
    return _finite(statistics["A"]) and _finite(statistics["B"]) and \
        abs(float(statistics["c"])) < float("inf")


def surrogate_statistics(statistics: dict, sums: dict, w: float) -> dict:
    """``A``, ``B``, ``c`` after folding in a batch's sums with weight ``w``::

        A_t = (1 - w) A_{t-1} + w mean_j h_j h_j^T      (entrywise with a mask)
        B_t = (1 - w) B_{t-1} + w mean_j explained_j o h_j
        c_t = (1 - w) c_{t-1} + w mean_j constant_j
    """
    n = sums["n"]
    return {
        "A": _averaged_code_products(statistics["A"], sums["HH"], n, w),
        "B": (1 - w) * statistics["B"] + (w / n) * sums["XH"],
        "c": (1 - w) * statistics["c"] + w * (sums["constant"] / n),
    }


def _averaged_code_products(A: Any, HH: Any, n: int, w: float) -> Any:
    """``(1 - w) A + (w / n) HH``, where an entrywise ``HH`` (``(I_1..I_n, R, R)``, a batch with
    missing entries) turns ``A`` entrywise: until then every entry had the same ``A``, so
    broadcasting it is exact."""
    if tl.ndim(HH) > tl.ndim(A):
        A = tl.reshape(A, (1,) * (tl.ndim(HH) - 2) + tuple(tl.shape(A)))
    elif tl.ndim(A) > tl.ndim(HH):
        HH = tl.reshape(HH, (1,) * (tl.ndim(A) - 2) + tuple(tl.shape(HH)))
    return (1 - w) * A + (w / n) * HH
