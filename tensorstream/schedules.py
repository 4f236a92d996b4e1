"""Weight and search-radius schedules of the online learners.

A *weight* schedule gives ``w_t`` in (0, 1], the share of the newest batch in the running
statistics: ``A_t = (1 - w_t) A_{t-1} + w_t H_t^T H_t / b``. Steps count from ``t = 1`` and every
schedule offered here has ``w_1 = 1``, so the effective weights of all batches seen sum to one.

The convergence theory of online CP-dictionary learning (Lyu, Strohmeier & Needell, assumption
A3) needs ``w_t`` non-increasing, ``sum w_t = inf``, ``sum w_t^2 sqrt(t) < inf`` and
``1/w_{t+1} - 1/w_t <= 1`` for large ``t``. ``Balanced`` (``1/t``) and ``PowerLog`` with
``beta`` in [3/4, 1) and ``delta >= 1`` satisfy it; ``Power`` with ``beta < 1`` and
``Forgetting`` (constant weights: exponential forgetting) are useful but outside the theory.

A *radius* schedule gives ``rho_t``, how far each loading matrix may move at step ``t``
(Frobenius norm). The paper's choice is ``rho_t = c' w_t`` (:class:`ProportionalRadius`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Balanced:
    """``w_t = 1/t``: every batch seen so far counts equally ("average features")."""

    def __call__(self, t: int) -> float:
        return 1.0 / t


@dataclass(frozen=True)
class Power:
    """``w_t = t^-beta``: recent batches count more; ``beta = 1`` is :class:`Balanced`."""

    beta: float

    def __post_init__(self):
        if not 0.0 < self.beta <= 1.0:
            raise ValueError(f"beta must lie in (0, 1], got {self.beta!r}")

    def __call__(self, t: int) -> float:
        return float(t) ** -self.beta


@dataclass(frozen=True)
class PowerLog:
    """``w_t = t^-beta (1 + log t)^-delta``: the theory's family, with ``w_1 = 1``.

    The shift ``1 + log t`` keeps ``w_1`` finite (``log 1 = 0``) without changing the
    asymptotics ``Theta(t^-beta (log t)^-delta)`` that assumption A3 is about.
    """

    beta: float = 0.75
    delta: float = 1.0

    def __post_init__(self):
        if not 0.0 < self.beta <= 1.0:
            raise ValueError(f"beta must lie in (0, 1], got {self.beta!r}")
        if not (math.isfinite(self.delta) and self.delta >= 0):  # NaN: no w_t; inf: w_t = 0
            raise ValueError(f"delta must be a finite number >= 0, got {self.delta!r}")

    def __call__(self, t: int) -> float:
        return float(t) ** -self.beta * (1.0 + math.log(t)) ** -self.delta


@dataclass(frozen=True)
class Forgetting:
    """Exponential forgetting: ``w_1 = 1``, then a constant ``w_t = rate`` ("trending features").

    Not covered by the convergence theory: the learner keeps tracking a drifting stream.
    """

    rate: float

    def __post_init__(self):
        if not 0.0 < self.rate <= 1.0:
            raise ValueError(f"rate must lie in (0, 1], got {self.rate!r}")

    def __call__(self, t: int) -> float:
        return 1.0 if t == 1 else self.rate


@dataclass(frozen=True)
class ProportionalRadius:
    """The paper's search radius ``rho_t = c' w_t`` (same ``w_t`` as the aggregation)."""

    constant: float
    weights: Callable[[int], float]

    def __call__(self, t: int) -> float:
        return self.constant * self.weights(t)


@dataclass(frozen=True)
class ReferenceRadius:
    """The reference code's radius ``rho_t = c' (t + 1)^-beta / ln(t + 2)``."""

    constant: float
    beta: float = 0.75

    def __call__(self, t: int) -> float:
        return self.constant * (t + 1.0) ** -self.beta / math.log(t + 2.0)


def make_weights(weights) -> Callable[[int], float]:
    """Turn the ``weights`` parameter of a learner into a schedule ``t -> w_t``.

    ``"balanced"`` is ``1/t``; a float ``beta`` is ``t^-beta``; any callable is used as it is
    (its values are checked at every step).
    """
    if isinstance(weights, str):
        if weights == "balanced":
            return Balanced()
        raise ValueError(f"weights must be 'balanced', a float beta or a callable, got {weights!r}")
    if isinstance(weights, numbers.Real) and not isinstance(weights, bool):
        return Power(float(weights))
    if callable(weights):
        return weights
    raise TypeError(f"weights must be 'balanced', a float beta or a callable, got {weights!r}")


def make_radius(search_radius, weights: Callable[[int], float]) -> Callable[[int], float] | None:
    """Turn the ``search_radius`` parameter into a schedule ``t -> rho_t`` (None: unrestricted).

    A float ``c'`` gives the paper's ``c' w_t``; a callable is used as it is.
    """
    if search_radius is None:
        return None
    if isinstance(search_radius, numbers.Real) and not isinstance(search_radius, bool):
        if not search_radius > 0:
            raise ValueError(f"search_radius must be > 0, got {search_radius!r}")
        return ProportionalRadius(float(search_radius), weights)
    if callable(search_radius):
        return search_radius
    raise TypeError(f"search_radius must be None, a positive float or a callable, "
                    f"got {search_radius!r}")


def checked_weight(schedule: Callable[[int], float], t: int) -> float:
    """``schedule(t)``, validated to lie in (0, 1] (a callable from the user may not)."""
    w = float(schedule(t))
    if not 0.0 < w <= 1.0:
        raise ValueError(f"weights schedule returned w_{t} = {w!r}; weights must lie in (0, 1]")
    return w


def checked_radius(schedule: Callable[[int], float], t: int) -> float | None:
    """``schedule(t)``, validated to be > 0 (a callable from the user may not); an infinite
    radius is no restriction (None)."""
    r = float(schedule(t))
    if not r > 0:
        raise ValueError(f"search_radius returned rho_{t} = {r!r}; a search radius must be > 0")
    return None if math.isinf(r) else r
