"""The divergence coder's solver: the problem (operators, projection, objective), the step
rules resolved, and the projected-gradient and multiplicative iterations over a whole batch
(:func:`code_divergence`, :func:`code_divergence_matrix`)."""


from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import tensorly as tl

from ...core.dictionary import spectral_norm_psd
from ...core.products import narrow_dot
from ...losses import Divergence, get_loss
from .steps import (
    _DENOMINATOR_FLOOR,
    _FAST_RULE,
    _INF,
    _PAPER_RULE,
    _STEP_NAMES,
    CODE_LOWER,
    CODE_UPPER,
    ArmijoStep,
    ConstantStep,
    MultiplicativeStep,
    StepRule,
    _check_bounds,
)

Tensor = Any

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
            # one power per iteration, not two: y^(β-2) = y^(β-1) / y (a non-integer power
            # costs several divisions)
            power = Y ** (beta - 1)
            numerator = self._adjoint(self.V * power / Y)
            denominator = self._adjoint(power)
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
    if not isinstance(step, StepRule):  # StepRule is the union of the four rules
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
        ``"auto"`` is the same except for the β-divergences (KL, IS, any β), which get the
        multiplicative update (:class:`MultiplicativeStep`; its stopping test is on the
        codes' relative change).
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
