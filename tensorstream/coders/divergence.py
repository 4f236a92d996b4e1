"""Coding step for general divergences: projected (sub)gradient descent on the codes of a batch.

This is Algorithm 2 of Zhao, Tan & Xu (section V-C) run on a whole batch at once. For a batch
``V`` of shape ``(b, *sample_shape)`` and a fixed dictionary it solves, for every sample ``j``,

    min_{lower <= h <= upper}  d(v_j || (W h)_j) + (ridge / 2) ||h||²

with codes ``H`` of shape ``(b, R)`` (samples on the first axis). The dictionary enters only
through two operators, so matrices, CP dictionaries of tensors and (later) sparse data share the
code: ``forward(H)`` returns the model ``Y`` (shape of ``V``) and ``adjoint(G)`` maps a gradient
in the model back to the codes (shape ``(b, R)``); the code gradient is ``adjoint(∂d/∂y)``.

Step rules (its V-C): :class:`ConstantStep` (``1/L``, an MM step; needs a curvature bound and the
``R x R`` Gram ``W^T W``), :class:`ArmijoStep` (per-sample backtracking on the projected arc) and
:class:`PolyakStep` (modified Polyak for nonsmooth losses; returns the best iterate). Our
addition: :class:`MultiplicativeStep`, the β-divergences' multiplicative update (the default for
KL: matrix products only, no line search, a stopping test on the codes' change). Every
sample has its own step, convergence test and mask; converged samples are frozen.

The box is the paper's ``H = {eps' <= h <= U}`` with ``eps' = 1e-8`` and ``U = 1e8`` (Remark 2);
``lower=0`` gives plain nonnegativity, ``None`` removes a bound.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy.sparse
import tensorly as tl
from scipy.special import xlogy

from ..core.dictionary import spectral_norm_psd
from ..core.products import narrow_dot
from ..losses import Divergence, get_loss

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
# "auto" departs from the paper for KL: the multiplicative update (two matrix products per
# iteration, no line search) is several times faster per batch than Armijo
_FAST_RULE = {"kl": "mu"}


# --------------------------------------------------------------------------------------------
# the problem: operators, projection, objective
# --------------------------------------------------------------------------------------------


def _expand(mask: Tensor, like: Tensor) -> Tensor:
    """Reshape a per-sample mask ``(b,)`` to broadcast against ``like`` of shape ``(b, ...)``."""
    return tl.reshape(mask, (-1,) + (1,) * (tl.ndim(like) - 1))


class _Problem:
    """The batch of code problems: data, operators, box, ridge and the loss (unchecked calls)."""

    def __init__(self, V, forward, adjoint, loss, lower, upper, ridge):
        self.V, self._forward, self._adjoint = V, forward, adjoint
        self.loss, self.lower, self.upper, self.ridge = loss, lower, upper, ridge
        self._kl_denominator = None

    def project(self, H):
        if self.lower is None and self.upper is None:
            return H
        return tl.clip(H, self.lower, self.upper)

    def forward(self, H):
        return self._forward(H)

    @property
    def model_rows(self):
        """The sample of every row of the model (``(b,)``: one per sample)."""
        return np.arange(tl.shape(self.V)[0])

    def subset(self, keep, Y):
        """The problem of the samples where ``keep`` (numpy bools) holds, and their model."""
        problem = _Problem(self.V[keep], self._forward, self._adjoint, self.loss, self.lower,
                           self.upper, self.ridge)
        if self._kl_denominator is not None:
            problem._kl_denominator = tuple(part[keep] for part in self._kl_denominator)
        return problem, Y[keep]

    def select(self, mask, Y_new, Y):
        """The models of the samples where ``mask`` holds from ``Y_new``, the others from ``Y``."""
        return tl.where(_expand(mask, Y), Y_new, Y)

    def objective(self, H, Y):
        f = self.loss.per_sample(self.V, Y, check=False)
        if self.ridge:
            f = f + self.ridge / 2 * tl.sum(H * H, axis=1)
        return f

    def trial_objective(self, H, Y):
        """Objective with every rejectable trial mapped to +inf (NaN would compare False)."""
        f = self.objective(H, Y)
        bad = ~(tl.abs(f) < _INF)
        if self.loss.needs_positive_model:
            flat = tl.reshape(Y, (tl.shape(Y)[0], -1))
            # some model entry < 0: outside the domain (a sum: torch's max-with-indices is slow)
            bad = bad | (tl.sum(tl.clip(flat, None, 0.0), axis=1) < 0)
        return tl.where(bad, _INF, f)

    def gradient(self, H, Y):
        g = self._adjoint(self.loss.gradient(self.V, Y, check=False))
        if self.ridge:
            g = g + self.ridge * H
        return g

    def mu_terms(self, H, Y):
        """Numerator and denominator (floored) of the multiplicative update
        (:class:`MultiplicativeStep`)."""
        beta = self.loss.beta
        Y = tl.clip(Y, self.loss.eps, None)
        if beta == 1.0:
            if self._kl_denominator is None:  # adjoint(1): the same at every iteration
                adjoint_ones = self._adjoint(tl.ones(tl.shape(self.V), **tl.context(self.V)))
                self._kl_denominator = (adjoint_ones, tl.clip(adjoint_ones, _DENOMINATOR_FLOOR,
                                                              None))
            numerator = self._adjoint(self.V / Y)
            if not self.ridge:
                return numerator, self._kl_denominator[1]
            denominator = self._kl_denominator[0]
        else:
            numerator = self._adjoint(self.V * Y ** (beta - 2))
            denominator = self._adjoint(Y ** (beta - 1))
        if self.ridge:
            denominator = denominator + self.ridge * H
        return numerator, tl.clip(denominator, _DENOMINATOR_FLOOR, None)


# --------------------------------------------------------------------------------------------
# the solver
# --------------------------------------------------------------------------------------------


def _resolve_step(step, loss: Divergence, gram, ridge: float,
                  lower: float | None = CODE_LOWER) -> StepRule:
    if isinstance(step, str):
        if step in ("auto", "paper"):
            rules = _PAPER_RULE if step == "paper" else {**_PAPER_RULE, **_FAST_RULE}
            step = rules.get(loss.name)
            if step is None:
                smooth_bound = loss.curvature_bound is not None and gram is not None
                step = "constant" if smooth_bound else "armijo"
        if step not in _STEP_NAMES:
            raise ValueError(f"step must be 'auto', 'paper', {list(_STEP_NAMES)} or a step "
                             f"rule, got {step!r}")
        step = _STEP_NAMES[step]()
    if not isinstance(step, ConstantStep | ArmijoStep | PolyakStep | MultiplicativeStep):
        raise ValueError(f"step must be 'auto', 'paper', {list(_STEP_NAMES)} or a step rule, "
                         f"got {step!r}")
    if isinstance(step, ConstantStep) and step.lipschitz is None:
        if loss.curvature_bound is None:
            raise ValueError(f"step='constant' needs lipschitz=...: the {loss.name} divergence "
                             "has no global curvature bound")
        if gram is None:
            raise ValueError("step='constant' needs gram (W^T W) or an explicit lipschitz")
        lipschitz = loss.curvature_bound * spectral_norm_psd(gram) + ridge
        # W = 0 gives g = 0: any positive L is exact there
        step = replace(step, lipschitz=max(lipschitz, np.finfo(np.float64).tiny))
    if isinstance(step, MultiplicativeStep):
        if not hasattr(loss, "beta"):
            raise ValueError(f"step='mu' needs a beta-divergence (kl, is, beta), not the "
                             f"{loss.name} divergence")
        if lower is None or lower < 0:
            raise ValueError(f"step='mu' keeps the codes nonnegative: it needs lower >= 0, "
                             f"got lower={lower!r}")
    return step


def _initial_codes(V, forward, b: int, R: int, context: dict) -> Tensor:
    """Our start ``c 1`` (Algorithm 2 allows any), ``c = 1^T v / 1^T W 1``: ``sum(W h) = sum v``."""
    ones = tl.ones((b, R), **context)
    model = forward(ones)
    _check_model_shape(model, V)
    data_sum = tl.sum(tl.reshape(V, (b, -1)), axis=1)
    model_sum = tl.sum(tl.reshape(model, (b, -1)), axis=1)
    scale = tl.where(model_sum > 0, data_sum / tl.where(model_sum > 0, model_sum, 1.0), 1.0)
    return ones * scale[:, None]


def _check_model_shape(model, V):
    if tuple(tl.shape(model)) != tuple(tl.shape(V)):
        raise ValueError(f"forward(H) must return the shape of V {tuple(tl.shape(V))}, "
                         f"got {tuple(tl.shape(model))}")


def _check_options(max_iter, tol, ridge):
    if isinstance(max_iter, bool) or not isinstance(max_iter, numbers.Integral) or max_iter < 0:
        raise ValueError(f"max_iter must be an int >= 0, got {max_iter!r}")
    for name, value in (("tol", tol), ("ridge", ridge)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
            0 <= value < _INF
        ):
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


def _n_components(n_components, init, gram) -> int:
    if n_components is not None:
        if isinstance(n_components, bool) or not isinstance(n_components, numbers.Integral) or (
            n_components < 1
        ):
            raise ValueError(f"n_components must be an int >= 1, got {n_components!r}")
        return int(n_components)
    if init is not None and tl.ndim(init) == 2:
        return int(tl.shape(init)[1])
    if gram is not None and tl.ndim(gram) == 2:
        return int(tl.shape(gram)[0])
    raise ValueError("n_components is required when neither init nor gram is given")


def code_divergence(
    V: Tensor,
    forward: Callable[[Tensor], Tensor],
    adjoint: Callable[[Tensor], Tensor],
    loss: str | float | Divergence,
    *,
    n_components: int | None = None,
    init: Tensor | None = None,
    gram: Tensor | None = None,
    step: str | StepRule = "auto",
    lower: float | None = CODE_LOWER,
    upper: float | None = CODE_UPPER,
    ridge: float = 0.0,
    max_iter: int = 200,
    tol: float = 1e-4,
    callback: Callable[[int, Tensor, Tensor], bool | None] | None = None,
    evaluate: bool = True,
) -> tuple[Tensor, dict]:
    """Codes of a batch under a general divergence, by batched projected (sub)gradient descent.

    Solves ``min_{lower <= h_j <= upper} d(v_j || y_j) + ridge/2 ||h_j||²`` with
    ``Y = forward(H)`` for every sample ``j`` at once. A sample stops when its objective changes
    by at most ``tol`` relative (monotone rules), or when its projected gradient vanishes; it is
    then frozen.

    Parameters
    ----------
    V : tensor
        Data batch, shape ``(b, *sample_shape)``, of the active backend.
    forward : callable
        ``forward(H)`` -> model ``Y`` of the shape of ``V`` (``H @ W.T`` for a matrix).
    adjoint : callable
        ``adjoint(G)`` -> ``(b, R)``: the adjoint of ``forward`` (``G @ W`` for a matrix).
    loss : str, float or Divergence
        Anything :func:`tensorstream.losses.get_loss` accepts.
    n_components : int, optional
        ``R``; only needed when neither ``init`` nor ``gram`` gives it.
    init : tensor, optional
        Warm start ``(b, R)`` (projected into the box). Default: the scale-aware constant
        ``c 1`` with ``c = sum(v_j) / sum(forward(1)_j)`` (1 where that is undefined).
    gram : tensor, optional
        ``W^T W`` (``R x R``), for the constant step's ``L = curvature_bound ||gram||_2 + ridge``.
    step : {"auto", "paper", "constant", "armijo", "polyak", "mu"} or step rule, default "auto"
        ``"paper"`` follows the paper: Polyak for ℓ1, Armijo for non-squared ℓ2, the constant
        step where the loss has a curvature bound and ``gram`` is given, Armijo otherwise.
        ``"auto"`` is the same except for KL, which gets the multiplicative update
        (:class:`MultiplicativeStep`; its stopping test is on the codes' relative change).
        Pass :class:`ConstantStep`, :class:`ArmijoStep`, :class:`PolyakStep` or
        :class:`MultiplicativeStep` to set options.
    lower, upper : float or None, default 1e-8 and 1e8
        The code box (the paper's ``eps'`` and ``U``). ``None`` removes a bound.
    ridge : float, default 0.0
        Optional Tikhonov weight ``m``: makes each code problem ``m``-strongly convex.
    max_iter : int, default 200
        Maximum number of iterations.
    tol : float, default 1e-4
        Relative objective change that marks a sample converged (monotone rules); for the
        multiplicative update, ``sqrt(tol)`` bounds the relative change of the sample's codes
        (``sum|Δh| / sum h``), a test that costs no objective evaluation.
    callback : callable, optional
        ``callback(iteration, H, objective)`` after every iteration; returning True stops.
    evaluate : bool, default True
        False skips the per-sample objective that the multiplicative update evaluates once,
        at the end (``info["objective"]`` is then None): for callers that need the codes and
        the model only (a dictionary round of the online learner, where the objective would
        cost a fifth of the round).

    Returns
    -------
    H : tensor
        Codes ``(b, R)`` in the box (for Polyak: the best iterate of each sample).
    info : dict
        ``n_iter`` (int), ``iterations`` (numpy ``(b,)`` ints: iterations each sample ran),
        ``converged`` (bool tensor ``(b,)``), ``objective`` (tensor ``(b,)``, at ``H``),
        ``model`` (``forward(H)``, so that a caller need not rebuild it),
        ``step`` (the resolved step rule, with ``lipschitz`` filled in for the constant step)
        and, for Armijo, ``step_sizes`` (last accepted step per sample, to warm-start a
        following batch through ``ArmijoStep(initial_step=...)``).

    Raises
    ------
    ValueError
        For an unknown loss or step, bad bounds or options, negative data where the loss needs
        nonnegative data, or operators that return the wrong shapes.

    Examples
    --------
    >>> import numpy as np
    >>> W = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    >>> V = np.array([[1.0, 4.0, 3.0]])
    >>> H, info = code_divergence(V, lambda H: H @ W.T, lambda G: G @ W, "l2", gram=W.T @ W,
    ...                           lower=0.0, max_iter=500, tol=0.0)
    >>> np.round(H, 6)
    array([[1., 2.]])
    """
    loss = get_loss(loss)
    lower, upper = _check_bounds(lower, upper)
    _check_options(max_iter, tol, ridge)
    if tl.ndim(V) < 2:
        raise ValueError(f"V must be a batch (b, *sample_shape), got shape {tuple(tl.shape(V))}")
    V = loss.prepare_data(V)
    b, R = int(tl.shape(V)[0]), _n_components(n_components, init, gram)
    if gram is not None and tuple(tl.shape(gram)) != (R, R):
        raise ValueError(f"gram must have shape ({R}, {R}), got {tuple(tl.shape(gram))}")
    if init is not None and tuple(tl.shape(init)) != (b, R):
        raise ValueError(f"init must have shape ({b}, {R}), got {tuple(tl.shape(init))}")
    rule = _resolve_step(step, loss, gram, float(ridge), lower)

    problem = _Problem(V, forward, adjoint, loss, lower, upper, float(ridge))
    if init is None:
        init = _initial_codes(V, forward, b, R, tl.context(V))
    H = problem.project(init)
    Y = problem.forward(H)
    _check_model_shape(Y, V)
    if isinstance(rule, MultiplicativeStep):
        return _iterate_mu(problem, rule, H, Y, max_iter, float(tol), callback, evaluate)
    f = problem.objective(H, Y)
    g = problem.gradient(H, Y)
    if tuple(tl.shape(g)) != (b, R):
        raise ValueError(f"adjoint(G) must return shape ({b}, {R}), got {tuple(tl.shape(g))}")
    return _iterate(problem, rule, H, Y, f, g, max_iter, float(tol), callback)


def _iterate(problem, rule, H, Y, f, g, max_iter, tol, callback):
    """The masked main loop shared by every step rule."""
    b = tl.shape(H)[0]
    state = rule._start(problem, H, f, g)
    converged = tl.zeros_like(f) > 0
    iterations = np.zeros(b, dtype=np.int64)
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        active = ~converged
        iterations += tl.to_numpy(active).astype(np.int64)
        H_new, Y_new, f_new, state = rule._step(problem, H, Y, f, g, active, state)
        f_old = f
        H = tl.where(active[:, None], H_new, H)
        Y = problem.select(active, Y_new, Y)
        f = tl.where(active, f_new, f)
        g = problem.gradient(H, Y)
        # exact stationarity: the projected gradient step does not move
        stationary = tl.sum((problem.project(H - g) - H) ** 2, axis=1) == 0
        if rule.monotone:
            stationary = stationary | (tl.abs(f_old - f) <= tol * tl.abs(f_old))
        converged = converged | (active & stationary)
        if callback is not None and callback(n_iter, H, f):
            break
        if bool(tl.all(converged)):
            break
    H_last = H
    H, f = rule._finish(state, H, f)
    # a non-monotone rule returns its best iterate, whose model is not the last one
    model = Y if H is H_last else problem.forward(H)
    info = {"n_iter": n_iter, "iterations": iterations, "converged": converged,
            "objective": f, "model": model, "step": rule}
    if isinstance(rule, ArmijoStep):
        info["step_sizes"] = state["step"]
    return H, info


def _iterate_mu(problem, rule, H, Y, max_iter, tol, callback, evaluate=True):
    """The multiplicative-update loop: per-sample stop on the relative change of the codes.

    Rows never mix (every operation is per sample), so a sample's codes do not depend on its
    batch neighbours; converged samples are frozen. Without a callback (which sees the whole
    batch every iteration) the converged samples leave the working set once they are half of
    it (and at least ``_MIN_DROP``), so that the iterations of the slowest samples cost less.
    """
    b, R = tl.shape(H)
    gamma = rule.exponent(problem.loss.beta)
    # near a minimiser the objective gap is quadratic in the distance to it: a relative code
    # change of sqrt(tol) matches the other rules' relative objective change of tol
    threshold = math.sqrt(tol)
    converged = tl.zeros((b,), **tl.context(H)) > 0
    # row sums as products with ones: numpy's reduction along short rows is several times
    # slower than a matrix-vector product
    ones = tl.ones((R,), **tl.context(H))
    # iterations per sample, counted on the backend (no host transfer per iteration; floats
    # count exactly far beyond any max_iter)
    counts = tl.zeros((b,), **tl.context(H))
    batch = None  # the whole batch, once samples have left the working set
    n_iter = n_converged = 0
    for n_iter in range(1, max_iter + 1):
        active = ~converged
        counts = counts + active
        numerator, denominator = problem.mu_terms(H, Y)
        if n_iter == 1 and tuple(tl.shape(numerator)) != (b, R):
            raise ValueError(f"adjoint(G) must return shape ({b}, {R}), "
                             f"got {tuple(tl.shape(numerator))}")
        factor = numerator / denominator
        if gamma != 1.0:
            factor = factor ** gamma
        H_new = problem.project(H * factor)
        # codes are nonnegative under MU (lower >= 0 is checked): |H_new| = H_new. The test
        # is written with operators (numpy and torch both have them): a tensorly call costs
        # about as much as this arithmetic on a working set of a hundred samples
        change = abs(H_new - H) @ ones
        # frozen samples keep their codes (none are frozen in the working set after a drop)
        H = H_new if n_converged == 0 else tl.where(active[:, None], H_new, H)
        converged = converged | (active & (change <= threshold * (H_new @ ones)))
        Y = problem.forward(H)
        if callback is not None and callback(n_iter, H, problem.objective(H, Y)):
            break
        n_converged = int(converged.sum())
        if n_converged == tl.shape(H)[0]:
            break
        if callback is None and 2 * n_converged >= tl.shape(H)[0] and (
                n_converged >= _MIN_DROP):
            if batch is None:
                batch = _Batch(problem, H, Y, converged, counts)
            problem, H, Y, converged, counts = batch.drop(problem, H, Y, converged, counts)
            n_converged = 0
    if batch is not None:
        problem, H, Y, converged, counts = batch.whole(H, Y, converged, counts)
    info = {"n_iter": n_iter, "iterations": tl.to_numpy(counts).astype(np.int64),
            "converged": converged,
            "objective": problem.objective(H, Y) if evaluate else None, "model": Y,
            "step": rule}
    return H, info


#: dropping samples rebuilds the problem (for a sparse one, about 600 sample-iterations' work,
#: measured): worth it for this many samples at least
_MIN_DROP = 128


class _Batch:
    """The whole batch behind a working set of its samples (see :func:`_iterate_mu`).

    The problem's model has one row per entry (``problem.model_rows`` names each entry's
    sample: the sample itself for a dense batch, its nonzeros for a sparse one); the models of
    the samples that leave are kept, so the whole batch's model is never recomputed. Rows are
    picked and written with numpy index arrays, which numpy and torch tensors both take.
    """

    def __init__(self, problem, H, Y, converged, counts):
        self.problem = problem
        self.codes, self.model = tl.copy(H), tl.copy(Y)
        self.converged, self.counts = tl.copy(converged), tl.copy(counts)
        self.rows = np.arange(tl.shape(H)[0])  # the working samples' positions in the batch
        self.entries = np.arange(tl.shape(Y)[0])  # the working model rows' positions

    def drop(self, problem, H, Y, converged, counts):
        """Write the converged samples out; the working set's problem, codes, models, flags
        and iteration counts."""
        done = tl.to_numpy(converged)
        self._write(done, H, converged, counts)
        done_entries = done[problem.model_rows]
        self.model[self.entries[done_entries]] = Y[done_entries]
        keep = ~done
        self.rows, self.entries = self.rows[keep], self.entries[~done_entries]
        problem, Y = problem.subset(keep, Y)
        return problem, H[keep], Y, converged[keep], counts[keep]

    def whole(self, H, Y, converged, counts):
        """The whole batch's problem, codes, model, flags and counts, the working set's
        written in."""
        self._write(slice(None), H, converged, counts)
        self.model[self.entries] = Y
        return self.problem, self.codes, self.model, self.converged, self.counts

    def _write(self, which, H, converged, counts):
        rows = self.rows[which]
        self.codes[rows], self.converged[rows] = H[which], converged[which]
        self.counts[rows] = counts[which]


def code_divergence_matrix(
    V: Tensor, W: Tensor, loss: str | float | Divergence, **options: Any
) -> tuple[Tensor, dict]:
    """:func:`code_divergence` for an explicit dictionary matrix ``W`` of shape ``(F, R)``.

    Parameters
    ----------
    V : tensor
        Data ``(b, F)``.
    W : tensor
        Dictionary ``(F, R)`` (atoms in columns).
    loss : str, float or Divergence
        See :func:`code_divergence`.
    **options
        Keyword options of :func:`code_divergence`; ``gram`` defaults to ``W^T W``.

    Returns
    -------
    H : tensor
        Codes ``(b, R)``.
    info : dict
        See :func:`code_divergence`.

    Examples
    --------
    >>> import numpy as np
    >>> W = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> H, info = code_divergence_matrix(np.array([[2.0, 3.0]]), W, "kl", tol=1e-12)
    >>> np.round(H, 4)
    array([[2., 3.]])
    """
    if tl.ndim(W) != 2:
        raise ValueError(f"W must be a (F, R) matrix, got shape {tuple(tl.shape(W))}")
    if tl.ndim(V) != 2 or tl.shape(V)[1] != tl.shape(W)[0]:
        raise ValueError(f"V must have shape (b, {tl.shape(W)[0]}) to match W, "
                         f"got {tuple(tl.shape(V))}")
    W_t = tl.transpose(W)

    def forward(H):
        return tl.dot(H, W_t)

    def adjoint(G):
        return narrow_dot(G, W)

    if "gram" not in options:
        options["gram"] = tl.dot(W_t, W)
    options.setdefault("n_components", int(tl.shape(W)[1]))
    return code_divergence(V, forward, adjoint, loss, **options)


# --------------------------------------------------------------------------------------------
# sparse data: KL evaluated on the support only
# --------------------------------------------------------------------------------------------

SPARSE_LOSSES = ("kl",)
"""Losses whose code and dictionary gradients need the model only on the data's nonzeros.

KL: ``d(v || y) = sum(y) - sum_{v>0} v log y + sum_{v>0} (v log v - v)`` and
``∂d/∂y = 1 - v / y``, so with ``Y = H W^T`` the code gradient is ``1^T W - (V ⊘ Y) W`` and the
dictionary gradient ``1 (1^T H) - (V ⊘ Y)^T H``: ``Y`` is needed only where ``V > 0``. Every
other β needs ``y^(β-1)`` everywhere (the dense model), so it has no support-only form.
"""

_CHUNK = 1 << 20  # entries x atoms per block of the support model: bounds the temporaries


def supports_sparse(loss: str | float | Divergence) -> bool:
    """True when ``loss`` has the support-only sparse path (:data:`SPARSE_LOSSES`).

    Examples
    --------
    >>> supports_sparse("kl"), supports_sparse(1.0), supports_sparse("is")
    (True, True, False)
    """
    return get_loss(loss).name in SPARSE_LOSSES


class SparseKL:
    """The KL algebra of a sparse batch ``V`` (CSR, ``(b, F)``) and a dictionary ``W`` (``(F, R)``).

    The model ``Y = H W^T`` is only ever evaluated on the nonzeros of ``V`` (an ``(nnz,)``
    vector, built in blocks), so memory and time are ``O(nnz R + F R + b R)``; the dense
    ``(b, F)`` model is never formed. NumPy/SciPy only. The model floor ``max(y, eps)``
    applies on the support; off the support the model enters through ``sum(y)`` unfloored
    (the dense evaluation floors it there too: the two differ only where ``y < eps``, i.e.
    by at most ``eps`` per entry).

    Parameters
    ----------
    V : scipy.sparse matrix of shape (b, F)
        Nonnegative data, CSR with sorted, summed duplicates (as
        :func:`tensorstream.core.validation.check_sparse_batch` returns).
    W : numpy.ndarray of shape (F, R)
        Nonnegative dictionary.
    eps : float, default 1e-12
        Model floor on the support.

    Examples
    --------
    >>> import numpy as np, scipy.sparse
    >>> V = scipy.sparse.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> kl = SparseKL(V, np.array([[1.0], [1.0]]))
    >>> H = np.array([[1.0], [2.0]])
    >>> np.allclose(kl.per_sample(H, kl.model(H)),
    ...             get_loss("kl").per_sample(V.toarray(), H @ np.ones((1, 2))))
    True
    """

    def __init__(self, V: Any, W: Any, eps: float = 1e-12):
        self.V, self.W, self.eps = V, W, float(eps)
        self.b = int(V.shape[0])
        self.rows = np.repeat(np.arange(self.b), np.diff(V.indptr))
        self.cols, self.values = V.indices, V.data
        self.column_sums = np.sum(W, axis=0)  # 1^T W: the gradient of sum(y) in the codes
        self._support_atoms = None  # W[cols], gathered once when it fits in one block
        self._ratio = None
        self._data_term = None  # sum(v log v - v) per sample: only the objective needs it

    def subset(self, keep: Any) -> SparseKL:
        """The algebra of the samples where ``keep`` (``(b,)`` bools) holds, in their order.

        Sliced from this one's arrays (no sparse indexing, nothing recomputed): the solver
        drops its converged samples this way several times per batch.
        """
        kept = np.flatnonzero(keep)
        entries = keep[self.rows]
        lengths = np.diff(self.V.indptr)[kept]
        indptr = np.zeros(kept.size + 1, dtype=self.V.indptr.dtype)
        np.cumsum(lengths, out=indptr[1:])
        V = scipy.sparse.csr_matrix((self.values[entries], self.cols[entries], indptr),
                                    shape=(kept.size, self.V.shape[1]))
        V.has_sorted_indices = True  # a subset of a canonical matrix's rows is canonical
        V.has_canonical_format = True
        out = SparseKL.__new__(SparseKL)
        out.V, out.W, out.eps, out.b = V, self.W, self.eps, int(kept.size)
        out.rows = np.repeat(np.arange(out.b), lengths)
        out.cols, out.values, out.column_sums = V.indices, V.data, self.column_sums
        out._support_atoms = (None if self._support_atoms is None
                              else self._support_atoms[entries])
        out._ratio = None
        out._data_term = None if self._data_term is None else self._data_term[kept]
        return out

    def _row_sums(self, entries: Any) -> Any:
        return np.bincount(self.rows, weights=entries, minlength=self.b)

    def model(self, H: Any) -> Any:
        """``(H W^T)`` on the support, shape ``(nnz,)``: ``sum_r H[i, r] W[f, r]`` per entry."""
        nnz, R = self.values.shape[0], self.W.shape[1]
        if nnz * R <= _CHUNK:  # one block: keep the gathered dictionary rows for later calls
            if self._support_atoms is None:
                self._support_atoms = np.take(self.W, self.cols, axis=0)
            return np.einsum("ir,ir->i", np.take(H, self.rows, axis=0), self._support_atoms)
        out = np.empty(nnz, dtype=np.result_type(H, self.W))
        step = max(1, _CHUNK // max(R, 1))
        for start in range(0, nnz, step):  # blocks of entries, not a loop over samples
            stop = min(start + step, nnz)
            out[start:stop] = np.einsum("ir,ir->i", np.take(H, self.rows[start:stop], axis=0),
                                        self.W[self.cols[start:stop]])
        return out

    def per_sample(self, H: Any, Y: Any) -> Any:
        """``d(v_j || (W h)_j)`` per sample (``(b,)``); ``Y`` is :meth:`model` of ``H``."""
        if self._data_term is None:
            v = self.values
            self._data_term = self._row_sums(xlogy(v, v) - v)
        log_model = self._row_sums(xlogy(self.values, np.maximum(Y, self.eps)))
        return H @ self.column_sums + self._data_term - log_model

    def ratio(self, Y: Any) -> Any:
        """``V ⊘ Y`` as a CSR matrix with the pattern of ``V`` (overwritten by the next call)."""
        if self._ratio is None:
            self._ratio = self.V.astype(np.result_type(self.values.dtype, Y.dtype), copy=True)
        # one matrix with the (canonical) pattern of V, refilled in place: the constructor's
        # checks would dominate an iteration's time. Valid until the next call.
        np.divide(self.values, np.maximum(Y, self.eps), out=self._ratio.data)
        return self._ratio

    def code_gradient(self, Y: Any) -> Any:
        """``∂/∂H sum_j d(v_j || W h_j) = 1^T W - (V ⊘ Y) W``, shape ``(b, R)``."""
        return self.column_sums[None, :] - np.asarray(self.ratio(Y) @ self.W)

    def dictionary_gradient(self, H: Any, Y: Any) -> Any:
        """``∂/∂W sum_j d(v_j || W h_j) = 1 (1^T H) - (V ⊘ Y)^T H``, shape ``(F, R)``."""
        return np.sum(H, axis=0)[None, :] - np.asarray(self.ratio(Y).T @ H)


class _SparseKLProblem(_Problem):
    """The code problems of a sparse batch under KL: ``Y`` lives on the support (``(nnz,)``)."""

    def __init__(self, kl: SparseKL, lower, upper, ridge):
        super().__init__(kl.V, kl.model, None, get_loss("kl"), lower, upper, ridge)
        self.kl = kl

    @property
    def model_rows(self):
        """The sample of every entry of the model (``(nnz,)``)."""
        return self.kl.rows

    def select(self, mask, Y_new, Y):
        return np.where(mask[self.kl.rows], Y_new, Y)

    def subset(self, keep, Y):
        """The problem of the samples where ``keep`` holds, and their model ``Y``."""
        problem = _SparseKLProblem(self.kl.subset(keep), self.lower, self.upper, self.ridge)
        return problem, Y[keep[self.kl.rows]]

    def objective(self, H, Y):
        f = self.kl.per_sample(H, Y)
        if self.ridge:
            f = f + self.ridge / 2 * np.sum(H * H, axis=1)
        return f

    def trial_objective(self, H, Y):
        f = self.objective(H, Y)
        # off the support the model is >= 0 (W >= 0, H >= lower >= 0); on it, it must be too
        negative = self.kl._row_sums(np.minimum(Y, 0.0)) < 0
        return np.where(~(np.abs(f) < _INF) | negative, _INF, f)

    def gradient(self, H, Y):
        g = self.kl.code_gradient(Y)
        if self.ridge:
            g = g + self.ridge * H
        return g

    def mu_terms(self, H, Y):
        numerator = np.asarray(self.kl.ratio(Y) @ self.kl.W)
        if self.ridge:
            return numerator, np.maximum(self.kl.column_sums + self.ridge * H,
                                         _DENOMINATOR_FLOOR)
        if self._kl_denominator is None:  # 1^T W: the same at every iteration
            self._kl_denominator = np.maximum(self.kl.column_sums, _DENOMINATOR_FLOOR)[None, :]
        return numerator, self._kl_denominator


def code_divergence_sparse(
    V: Any,
    W: Any,
    loss: str | float | Divergence = "kl",
    *,
    init: Any = None,
    gram: Any = None,
    step: str | StepRule = "auto",
    lower: float = CODE_LOWER,
    upper: float | None = CODE_UPPER,
    ridge: float = 0.0,
    max_iter: int = 200,
    tol: float = 1e-4,
    callback: Callable[[int, Any, Any], bool | None] | None = None,
) -> tuple[Any, dict]:
    """:func:`code_divergence` for sparse data and a dictionary matrix, on the support only.

    Same problem, step rules, stopping rule and result as
    ``code_divergence_matrix(V.toarray(), W, loss, ...)`` (equal up to rounding), but the model
    is evaluated only on the nonzeros of ``V`` (:class:`SparseKL`): memory and time scale with
    ``nnz(V)``, never with ``b x F``. Only the losses of :data:`SPARSE_LOSSES` (KL) have this
    form; NumPy backend only.

    Parameters
    ----------
    V : scipy.sparse matrix of shape (b, F)
        Nonnegative data, canonical CSR (see :class:`SparseKL`).
    W : numpy.ndarray of shape (F, R)
        Nonnegative dictionary.
    loss : str, float or Divergence, default "kl"
        Must be KL (``"kl"``, ``1.0``, ``"alpha"`` with ``alpha=1``...).
    init, step, upper, ridge, max_iter, tol, callback
        As in :func:`code_divergence`.
    gram : ignored
        Accepted for the signature of :func:`code_divergence`: KL has no curvature bound, so
        no step rule it can take uses ``W^T W``.
    lower : float, default 1e-8
        Lower code bound; must be ``>= 0`` (the objective uses that the model is nonnegative
        off the support).

    Returns
    -------
    H : numpy.ndarray of shape (b, R)
    info : dict
        As in :func:`code_divergence`.

    Raises
    ------
    ValueError
        For a loss without a support-only form, negative ``W`` or ``lower``, mismatched
        shapes, or the option errors of :func:`code_divergence`.

    Examples
    --------
    >>> import numpy as np, scipy.sparse
    >>> W = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> V = scipy.sparse.csr_matrix(np.array([[2.0, 0.0, 2.0]]))
    >>> H, _ = code_divergence_sparse(V, W, tol=1e-12, max_iter=500)
    >>> np.round(H, 4)
    array([[2., 0.]])
    """
    loss = get_loss(loss)
    if loss.name not in SPARSE_LOSSES:
        raise ValueError(f"the support-only sparse path exists for {list(SPARSE_LOSSES)} only, "
                         f"not the {loss.name} divergence; densify the data")
    lower, upper = _check_bounds(lower, upper)
    if lower is None or lower < 0:
        raise ValueError(f"lower must be >= 0 for sparse data, got {lower!r}")
    _check_options(max_iter, tol, ridge)
    if not scipy.sparse.issparse(V) or V.ndim != 2:
        raise ValueError(f"V must be a 2-D scipy.sparse matrix, got {type(V).__name__}")
    V = V.tocsr()
    W = np.asarray(W)
    if W.ndim != 2 or W.shape[0] != V.shape[1]:
        raise ValueError(f"W must have shape ({V.shape[1]}, R) to match V, got {W.shape}")
    if W.size and W.min() < 0:
        raise ValueError("W must be nonnegative for sparse data")
    if V.nnz and V.data.min() < 0:
        raise ValueError("V must be nonnegative for the kl divergence")
    b, R = V.shape[0], W.shape[1]
    if init is not None and tuple(np.shape(init)) != (b, R):
        raise ValueError(f"init must have shape ({b}, {R}), got {tuple(np.shape(init))}")
    # the step is resolved (and checked) there; KL has no curvature bound, so no rule it can
    # take needs the Gram matrix
    return solve_sparse_kl(SparseKL(V, W, eps=loss.eps), step, init=init, lower=lower,
                           upper=upper, ridge=float(ridge), max_iter=max_iter, tol=float(tol),
                           callback=callback)


def solve_sparse_kl(kl: SparseKL, step: str | StepRule = "auto", *, init: Any = None,
                    lower: float = CODE_LOWER, upper: float | None = CODE_UPPER,
                    ridge: float = 0.0, max_iter: int = 200, tol: float = 1e-4,
                    callback: Callable | None = None, evaluate: bool = True) -> tuple[Any, dict]:
    """:func:`code_divergence_sparse` on a built :class:`SparseKL`, without the checks.

    For callers that have validated the data, the dictionary and the options already (a
    learner's step) and keep ``kl`` for the dictionary gradient. ``info["model"]`` is the
    model on the support (``kl.model(H)``); ``evaluate`` as in :func:`code_divergence`.
    """
    rule = _resolve_step(step, get_loss("kl"), None, ridge, lower)
    b, R = kl.b, int(kl.W.shape[1])
    problem = _SparseKLProblem(kl, lower, upper, ridge)
    if init is None:
        total = float(np.sum(kl.W))  # sum of forward(1): every atom at weight 1
        scale = kl._row_sums(kl.values) / total if total > 0 else np.ones(b)
        init = np.ones((b, R), dtype=kl.W.dtype) * scale[:, None]
    H = problem.project(np.asarray(init))
    Y = problem.forward(H)
    if isinstance(rule, MultiplicativeStep):
        return _iterate_mu(problem, rule, H, Y, max_iter, tol, callback, evaluate)
    return _iterate(problem, rule, H, Y, problem.objective(H, Y), problem.gradient(H, Y),
                    max_iter, tol, callback)

