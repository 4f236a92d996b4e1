"""The divergence coder's box and step rules: :func:`project_box` (the paper's ``Π_H``) and
:class:`ConstantStep`, :class:`ArmijoStep`, :class:`PolyakStep`, :class:`MultiplicativeStep`
(see :mod:`tensorstream.coders.divergence`)."""


from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import tensorly as tl

from ...losses import MULTIPLICATIVE_LOSSES

Tensor = Any

CODE_LOWER = 1e-8
"""The paper's lower code bound ``eps'`` (keeps ``W h >= eps eps' > 0`` for KL/IS)."""

CODE_UPPER = 1e8
"""The paper's upper code bound ``U`` (fixes the scale ambiguity; inactive in practice)."""

_INF = float("inf")
_DENOMINATOR_FLOOR = 1e-30  # representable in float32 too


# --------------------------------------------------------------------------------------------
# projections and spectral norm
# --------------------------------------------------------------------------------------------


def _check_bounds(lower: float | None, upper: float | None) -> tuple[float | None, float | None]:
    for name, bound in (("lower", lower), ("upper", upper)):
        if bound is not None and (
            isinstance(bound, bool) or not isinstance(bound, numbers.Real) or math.isnan(bound)
        ):
            raise ValueError(f"{name} must be a real number or None, got {bound!r}")
    lower = None if lower is None or lower == -_INF else float(lower)
    upper = None if upper is None or upper == _INF else float(upper)
    if lower is not None and upper is not None and not lower < upper:
        raise ValueError(f"lower must be < upper, got lower={lower}, upper={upper}")
    if lower == _INF or upper == -_INF:
        raise ValueError("lower must be < +inf and upper > -inf")
    return lower, upper


def project_box(
    H: Tensor, lower: float | None = CODE_LOWER, upper: float | None = CODE_UPPER
) -> Tensor:
    """Euclidean projection onto the box ``{lower <= h <= upper}`` (the paper's ``Π_H``): a clip.

    Parameters
    ----------
    H : tensor
        Codes, any shape.
    lower, upper : float or None, default 1e-8 and 1e8
        The bounds (``None`` or ``∓inf``: no bound). ``lower=0`` is the nonnegative orthant.

    Returns
    -------
    tensor
        ``min(max(H, lower), upper)``.

    Raises
    ------
    ValueError
        If a bound is not a real number or ``lower >= upper``.

    Examples
    --------
    >>> import numpy as np
    >>> project_box(np.array([-1.0, 0.5, 3.0]), lower=0.0, upper=1.0)
    array([0. , 0.5, 1. ])
    """
    lower, upper = _check_bounds(lower, upper)
    if lower is None and upper is None:
        return H
    return tl.clip(H, lower, upper)


# --------------------------------------------------------------------------------------------
# step rules
# --------------------------------------------------------------------------------------------


def _positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return float(value)


def _in_open_unit(name: str, value: Any, upper: float = 1.0) -> float:
    value = _positive(name, value)
    if not value < upper:
        raise ValueError(f"{name} must lie in (0, {upper}), got {value!r}")
    return value


@dataclass(frozen=True)
class ConstantStep:
    """Constant step ``1/L`` (an MM step: monotone for smooth losses).

    Parameters
    ----------
    lipschitz : float or None, default None
        Lipschitz constant of the code gradient (ridge included). ``None``: computed as
        ``loss.curvature_bound * ||gram||_2 + ridge``, which needs a loss with a curvature bound
        (squared ℓ2, Huber, Mahalanobis) and the Gram matrix.

    Examples
    --------
    >>> ConstantStep(lipschitz=4.0)
    ConstantStep(lipschitz=4.0)
    """

    lipschitz: float | None = None
    monotone = True

    def __post_init__(self):
        if self.lipschitz is not None:
            object.__setattr__(self, "lipschitz", _positive("lipschitz", self.lipschitz))

    def _start(self, problem, H, f, g):
        return None

    def _step(self, problem, H, Y, f, g, active, state):
        H_new = problem.project(H - g / self.lipschitz)
        Y_new = problem.forward(H_new)
        return H_new, Y_new, problem.objective(H_new, Y_new), state

    def _finish(self, state, H, f):
        return H, f


@dataclass(frozen=True)
class ArmijoStep:
    """Armijo backtracking on the projected arc, per sample (the paper's Algorithm 3).

    A trial step ``ξ`` is accepted when ``d(P[h - ξ g]) <= d(h) + sigma g^T (P[h - ξ g] - h)``
    (Calamai & Moré's projected-arc rule, which reduces to the paper's literal rule when no bound
    is active); otherwise ``ξ <- shrink ξ``, at most ``max_reductions`` times. Non-finite trial
    values, and trial models with negative entries for divergences that need ``y > 0``, are
    rejected. Deviation from the paper: a sample whose last reduction still fails keeps its
    codes (so the objective never increases) and is marked converged.

    Parameters
    ----------
    sigma : float, default 0.01
        Sufficient-decrease constant, in (0, 0.5) (the paper's α).
    shrink : float, default 0.1
        Reduction factor, in (0, 1) (the paper's γ).
    max_reductions : int, default 10
        The paper's ``q``: up to ``q + 1`` trials per iteration.
    initial_step : float, default 1.0
        The paper's ``ξ^0``: the first trial of the first iteration.
    init : {"bb", "warm", "paper"}, default "bb"
        First trial of later iterations: ``"paper"`` restarts from ``initial_step`` (literal, but
        not scale-invariant: far too timid for IS at data scale 1e3, as measured); ``"warm"`` uses
        the previous accepted step divided by ``shrink``; ``"bb"`` uses the Barzilai-Borwein step
        ``s^T s / s^T r`` of each sample (``s``, ``r``: change of codes and of gradient), and the
        warm trial where ``s^T r <= 0``. A deviation from the paper's ξ⁰ = 1 (Algorithm 3); the
        sufficient-decrease test is unchanged, so every rule stays monotone.
    max_step : float, default 1e15
        Cap on any trial step (guards against overflow of repeated warm growth).

    Examples
    --------
    >>> ArmijoStep(init="paper").sigma  # the paper's literal rule
    0.01
    """

    sigma: float = 0.01
    shrink: float = 0.1
    max_reductions: int = 10
    initial_step: float = 1.0
    init: str = "bb"
    max_step: float = 1e15
    monotone = True

    def __post_init__(self):
        object.__setattr__(self, "sigma", _in_open_unit("sigma", self.sigma, 0.5))
        object.__setattr__(self, "shrink", _in_open_unit("shrink", self.shrink))
        object.__setattr__(self, "initial_step", _positive("initial_step", self.initial_step))
        object.__setattr__(self, "max_step", _positive("max_step", self.max_step))
        if isinstance(self.max_reductions, bool) or not isinstance(
            self.max_reductions, numbers.Integral
        ) or self.max_reductions < 0:
            raise ValueError(f"max_reductions must be an int >= 0, got {self.max_reductions!r}")
        if self.init not in ("warm", "paper", "bb"):
            raise ValueError(f"init must be 'warm', 'paper' or 'bb', got {self.init!r}")

    def _start(self, problem, H, f, g):
        return {"step": tl.zeros_like(f) + self.initial_step, "first": True, "H": H, "g": g}

    def _first_trial(self, H, g, state):
        if state["first"] or self.init == "paper":
            return tl.zeros_like(state["step"]) + self.initial_step
        warm = state["step"] / self.shrink
        if self.init == "warm":
            return tl.clip(warm, None, self.max_step)
        s, r = H - state["H"], g - state["g"]
        sr, ss = tl.sum(s * r, axis=1), tl.sum(s * s, axis=1)
        bb = ss / tl.where(sr > 0, sr, 1.0)
        return tl.clip(tl.where(sr > 0, bb, warm), None, self.max_step)

    def _step(self, problem, H, Y, f, g, active, state):
        xi = self._first_trial(H, g, state)
        done = ~active
        H_acc, Y_acc, f_acc, xi_acc = H, Y, f, state["step"]
        for _ in range(self.max_reductions + 1):
            H_try = problem.project(H - xi[:, None] * g)
            Y_try = problem.forward(H_try)
            f_try = problem.trial_objective(H_try, Y_try)
            bound = f + self.sigma * tl.sum(g * (H_try - H), axis=1)
            ok = (f_try <= bound) & ~done
            H_acc = tl.where(ok[:, None], H_try, H_acc)
            Y_acc = problem.select(ok, Y_try, Y_acc)
            f_acc = tl.where(ok, f_try, f_acc)
            xi_acc = tl.where(ok, xi, xi_acc)
            done = done | ok
            if bool(tl.all(done)):
                break
            xi = xi * self.shrink
        new_state = {"step": xi_acc, "first": False, "H": H, "g": g}
        return H_acc, Y_acc, f_acc, new_state

    def _finish(self, state, H, f):
        return H, f


@dataclass(frozen=True)
class PolyakStep:
    """Modified Polyak step with an adaptive target level (for nonsmooth losses, e.g. ℓ1).

    ``ξ = relaxation (d(h) - (d_rec - δ)) / ||g||²`` with ``d_rec`` the best value seen; after a
    step that reaches the target, ``δ <- grow δ``, otherwise ``δ <- max(shrink δ, delta_min)``
    (Bertsekas, *Nonlinear Programming* §6.3.1). Not monotone: the best iterate is returned, and
    ``liminf d(h^k) <= min d + delta_min``. The paper's literal rule is
    ``PolyakStep(delta=0.01, delta_min=0.01, relative=False)``; the default measures δ relative
    to each sample's initial objective, because an absolute 0.01 is negligible for losses
    around 1e4 (measured: no progress on ℓ1 at data scale 1e3).

    Parameters
    ----------
    delta : float, default 0.01
        Initial δ.
    delta_min : float, default 1e-4
        Smallest δ, in (0, delta]: the accuracy the method guarantees.
    relative : bool, default True
        Multiply ``delta`` and ``delta_min`` by each sample's initial objective.
    grow : float, default 1.5
        Factor ``>= 1`` after a step that reached the target level.
    shrink : float, default 0.8
        Factor in (0, 1] after a step that did not.
    relaxation : float, default 1.5
        Bertsekas' factor ``γ`` in (0, 2). Above 1 it keeps δ from collapsing to ``delta_min`` on
        smooth losses (a step of exactly ``δ / ||g||²`` never reaches the target there).

    Examples
    --------
    >>> PolyakStep(delta=0.01, delta_min=0.01, relative=False).grow
    1.5
    """

    delta: float = 0.01
    delta_min: float = 1e-4
    relative: bool = True
    grow: float = 1.5
    shrink: float = 0.8
    relaxation: float = 1.5
    monotone = False

    def __post_init__(self):
        object.__setattr__(self, "delta", _positive("delta", self.delta))
        object.__setattr__(self, "delta_min", _positive("delta_min", self.delta_min))
        if self.delta_min > self.delta:
            raise ValueError(f"delta_min must be <= delta, got {self.delta_min} > {self.delta}")
        if _positive("grow", self.grow) < 1:
            raise ValueError(f"grow must be >= 1, got {self.grow!r}")
        if _positive("shrink", self.shrink) > 1:
            raise ValueError(f"shrink must lie in (0, 1], got {self.shrink!r}")
        if _positive("relaxation", self.relaxation) >= 2:
            raise ValueError(f"relaxation must lie in (0, 2), got {self.relaxation!r}")

    def _start(self, problem, H, f, g):
        scale = tl.abs(f) if self.relative else tl.zeros_like(f) + 1
        return {"H": H, "f": f, "delta": self.delta * scale, "delta_min": self.delta_min * scale}

    def _step(self, problem, H, Y, f, g, active, state):
        level = state["f"] - state["delta"]
        gg = tl.sum(g * g, axis=1)
        # a zero subgradient means an exact minimiser: do not move
        xi = tl.where(gg > 0, self.relaxation * (f - level) / tl.where(gg > 0, gg, 1.0), 0.0)
        H_new = problem.project(H - xi[:, None] * g)
        Y_new = problem.forward(H_new)
        f_new = problem.objective(H_new, Y_new)
        reached = f_new <= level
        shrunk = tl.where(
            state["delta"] * self.shrink > state["delta_min"],
            state["delta"] * self.shrink,
            state["delta_min"],
        )
        delta = tl.where(active, tl.where(reached, state["delta"] * self.grow, shrunk),
                         state["delta"])
        better = active & (f_new < state["f"])
        new_state = {
            "H": tl.where(better[:, None], H_new, state["H"]),
            "f": tl.where(better, f_new, state["f"]),
            "delta": delta,
            "delta_min": state["delta_min"],
        }
        return H_new, Y_new, f_new, new_state

    def _finish(self, state, H, f):
        return state["H"], state["f"]


@dataclass(frozen=True)
class MultiplicativeStep:
    """Multiplicative updates (MU) for the β-divergences, KL included (Févotte & Idier, 2011).

    Every iteration is ``h <- clip(h * (num / den)^γ, lower, upper)`` with, for ``Y = W H``,
    ``num = adjoint(V * Y^(β-2))`` and ``den = adjoint(Y^(β-1)) + ridge h`` (for KL, ``β = 1``:
    ``num = adjoint(V / Y)``, ``den = adjoint(1)``, a constant) and ``γ = 1/(2-β)`` for
    ``β < 1``, 1 for ``1 <= β <= 2``, ``1/(β-1)`` for ``β > 2``: a majorize-minimize step, so
    the objective never increases. An iteration is two operator calls (matrix products for a
    matrix dictionary) and no line search. A sample stops when its codes change by at most
    ``sqrt(tol)`` relative (``sum|Δh| <= sqrt(tol) sum h``): a test from quantities the
    iteration already has, so the per-sample objective is evaluated once, at the end.

    Needs a nonnegative dictionary (``forward`` and ``adjoint`` map nonnegative to nonnegative)
    and ``lower >= 0``; a code at exactly 0 stays there (use the default ``lower = 1e-8``).
    The threshold is ``sqrt(tol)`` because near a minimiser the objective gap is quadratic in
    the distance: it matches the other rules' relative objective change ``tol``
    (``tol=1e-4``: the codes move by less than 1%).

    Examples
    --------
    >>> MultiplicativeStep().exponent(0.0), MultiplicativeStep().exponent(3.0)
    (0.5, 0.5)
    """

    monotone = True

    @staticmethod
    def exponent(beta: float) -> float:
        """The exponent ``γ`` that makes the update monotone for this ``β``."""
        if beta < 1:
            return 1.0 / (2.0 - beta)
        return 1.0 if beta <= 2 else 1.0 / (beta - 1.0)


StepRule = ConstantStep | ArmijoStep | PolyakStep | MultiplicativeStep

_STEP_NAMES = {"constant": ConstantStep, "armijo": ArmijoStep, "polyak": PolyakStep,
               "mu": MultiplicativeStep}

# the paper's inner rule for the two nonsmooth losses (section V-C)
_PAPER_RULE = {"l1": "polyak", "l2_nonsquared": "armijo"}
# "auto" departs from the paper for the β-divergences (KL, IS and any other β): the
# multiplicative update (two matrix products per iteration, no line search) is several times
# faster per batch than Armijo, and for IS far better scaled (Armijo's step from the gradient
# (y - x) / y^2 is timid at any data scale but one)
_FAST_RULE = dict.fromkeys(MULTIPLICATIVE_LOSSES, "mu")
