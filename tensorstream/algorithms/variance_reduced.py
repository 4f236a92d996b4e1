"""Variance-reduced stochastic matrix factorization (Zhao, Haskell & Feng 2017) as functions.

One epoch (outer iteration) is a pure function of a :class:`~tensorstream.finite.state.
FiniteState` and the finite data set: :func:`run_epoch` runs Algorithm 1 (``"vr"``), proximal
SGD (``"sgd"``, Algorithm S-3) or stochastic majorization-minimization (``"smm"``, Algorithm
S-2) on the same formulation, coder, prox and sampling, and returns the new state with its
history row. :func:`initial_dictionary` and :func:`auto_step_size` give the start. The options
of all of them are one :class:`EpochOptions`, which :func:`epoch_options` builds from what
:class:`~tensorstream.VarianceReducedMF` takes: the method, its own settings (``method_params``,
each applying to one method: :data:`METHOD_PARAMS`) and the code tolerance (a constant or
Theorem 2's schedule). ``docs/svrmf.md`` states the mathematics.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorly as tl

from ..core.backend import as_tensor, backend_of, to_numpy, using
from ..core.caller import warn
from ..core.dictionary import spectral_norm_psd
from ..core.products import narrow_dot
from ..core.validation import (
    BOOLEAN,
    NONE,
    Interval,
    Options,
    check_state_memory,
    keyed_settings,
    validate_params,
)
from ..finite.formulations import FiniteCodes, RobustPCA, solve_codes
from ..finite.state import FiniteState
from ..finite.variance_reduction import (
    FiniteData,
    batch_gradient,
    chunk_count,
    default_sizes,
    estimate_lipschitz,
    full_gradient,
    gradient_mapping,
    inexact_tolerance,
    prox_step,
    scatter,
    sgd_step_size,
    vr_direction,
)

METHODS = ("vr", "sgd", "smm")
AUTO_THETA = 2.3  # eta = 1/(theta L), theta > 2 (Theorem 1); 2.3 suits the paper's b, m (sec. 5.2)

#: The settings each method takes (the learner's ``method_params`` keys), with their defaults:
#: the step (``vr``: the constant ``eta``; ``sgd``: the first step ``gamma_0``; ``"auto"``
#: estimated on ``auto_samples`` samples), the output iterate and the stored snapshot codes
#: (``vr``), proximal SGD's ``beta'`` (``step_offset``, None: ``100 b``), the
#: projected-gradient steps per SMM update (``smm_steps``).
METHOD_PARAMS = {
    "vr": {"step_size": "auto", "auto_samples": 1000, "output": "last",
           "store_snapshot_codes": False},
    "sgd": {"step_size": "auto", "auto_samples": 1000, "step_offset": None},
    "smm": {"smm_steps": 5},
}
_SETTING_CONSTRAINTS = {
    "step_size": [Interval("real", 0, None, closed="neither"), Options("auto")],
    "auto_samples": [Interval("int", 1, None)],
    "output": [Options("last", "random")],
    "store_snapshot_codes": [BOOLEAN],
    "step_offset": [Interval("real", 0, None, closed="neither"), NONE],
    "smm_steps": [Interval("int", 1, None)],
}
#: Theorem 2's code-tolerance schedule ``c_tol (m s + t + 1)^-(1/2 + tau)``: its constants'
#: defaults (a ``code_tol`` dict may give either)
SCHEDULE_DEFAULTS = {"c_tol": 1.0, "tau": 1e-3}
_SCHEDULE_CONSTRAINTS = {"c_tol": [Interval("real", 0, None, closed="neither")],
                         "tau": [Interval("real", 0, None, closed="neither")]}
#: the codes' tolerance of the ``"auto"`` step's estimate under the schedule (whose loose
#: start would misjudge the curvature): the constant tolerance's default
AUTO_CODE_TOL = 1e-6


def method_settings(method: str, params: Mapping | None) -> dict:
    """The settings of ``method``: :data:`METHOD_PARAMS`'s defaults updated by ``params``
    (the learner's ``method_params``), a key of another method (or ``auto_samples`` with a
    given step) refused by name.

    Examples
    --------
    >>> method_settings("sgd", {"step_size": 0.5})
    {'step_size': 0.5, 'auto_samples': 1000, 'step_offset': None}
    >>> method_settings("smm", {"step_size": 0.5})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: method_params: 'step_size' does not apply to method 'smm': its settings are ...
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)}, got {method!r}")
    settings = keyed_settings(params, METHOD_PARAMS[method], f"method {method!r}",
                              "method_params", _SETTING_CONSTRAINTS)
    if "auto_samples" in (params or {}) and settings["step_size"] != "auto":
        raise ValueError(f"method_params: auto_samples applies to step_size='auto' only, got "
                         f"step_size={settings['step_size']!r}")
    return settings


def code_schedule(code_tol: float | Mapping) -> dict | None:
    """None for a constant code tolerance (a float >= 0), else the constants ``c_tol`` and
    ``tau`` of Theorem 2's schedule that the dict ``code_tol`` gives (defaults
    :data:`SCHEDULE_DEFAULTS`), another key refused by name."""
    if not isinstance(code_tol, Mapping):
        validate_params({"code_tol": code_tol}, {"code_tol": [Interval("real", 0, None)]},
                        "VarianceReducedMF")
        return None
    return keyed_settings(code_tol, SCHEDULE_DEFAULTS, "the schedule of code_tol", "code_tol",
                          _SCHEDULE_CONSTRAINTS)


@dataclasses.dataclass(frozen=True)
class EpochOptions:
    """The options of an epoch: :func:`epoch_options` builds them from the method, its
    settings and the code tolerance (``code_tol`` is the constant tolerance, or under Theorem
    2's schedule, ``inexact`` with ``c_tol`` and ``tau``, the ``"auto"`` step's; the
    :class:`~tensorstream.VarianceReducedMF` parameters document the rest)."""

    method: str = "vr"
    coder: str = "fista"
    code_tol: float = 1e-6
    code_max_iter: int = 100
    inexact: bool = False
    tau: float = 1e-3
    c_tol: float = 1.0
    chunk_size: int = 1024
    output: str = "last"
    store_snapshot_codes: bool = False
    step_offset: float | None = None
    smm_steps: int = 5

    def tolerance(self, state: FiniteState, t: int) -> float:
        """The code tolerance of inner step ``t`` of the state's epoch (constant, or Theorem
        2's schedule when ``inexact``)."""
        if not self.inexact:
            return float(self.code_tol)
        return inexact_tolerance(self.c_tol, self.tau, state.epoch_length, state.n_epochs, t)

    def coder_settings(self, tol: float) -> dict:
        """The :func:`~tensorstream.finite.formulations.solve_codes` settings at ``tol``."""
        return dict(coder=self.coder, tol=tol, max_iter=self.code_max_iter)


def epoch_options(method: str, method_params: Mapping | None, code_tol: float | Mapping, *,
                  coder: str, code_max_iter: int, chunk_size: int) -> EpochOptions:
    """The :class:`EpochOptions` of ``method`` with its ``method_params``
    (:func:`method_settings`) and ``code_tol`` (:func:`code_schedule`)."""
    settings = method_settings(method, method_params)
    schedule = code_schedule(code_tol)
    tolerance = {"code_tol": float(code_tol)} if schedule is None else \
        {"code_tol": AUTO_CODE_TOL, "inexact": True, **schedule}
    own = {key: settings[key] for key in ("output", "store_snapshot_codes", "step_offset",
                                          "smm_steps") if key in settings}
    return EpochOptions(method=method, coder=coder, code_max_iter=code_max_iter,
                        chunk_size=chunk_size, **tolerance, **own)


# -- the start -----------------------------------------------------------------------------------


def initial_dictionary(form: Any, data: FiniteData, rng: np.random.Generator, *,
                       n_components: int, init: Any) -> Any:
    """``W^{0,0}`` of shape ``(n_features, n_components)``, projected onto ``C``: from ``init``
    (``"auto"``, ``"random"``, ``"gaussian"``, ``"ones"`` or an array ``(n_components,
    n_features)``; see :class:`~tensorstream.VarianceReducedMF`)."""
    n, d, k = data.n, data.d, n_components
    # the dictionary, its gradients and the snapshot codes, before any is allocated
    check_state_memory(k * (k + n + d), data.context["dtype"], k, data.context.get("device"))
    if isinstance(init, str) and init == "auto":
        # data rows carry the outliers a robust formulation is meant to ignore (rows with
        # entries of 1000 scales stall it at the start): a Gaussian start for those
        init = "gaussian" if form.robust else "random"
    if isinstance(init, str) and init in ("random", "ones"):
        if init == "ones":
            warn("init='ones' (the paper's start) keeps W rank one forever (identical columns "
                 "stay identical); adding 1e-3 Gaussian noise")
            base = np.ones((d, k))
        else:
            rows = rng.choice(n, k, replace=n < k)
            base = to_numpy(data.rows(np.sort(rows))).T[:, rng.permutation(k)]
        W = base + 1e-3 * rng.standard_normal((d, k))
    elif isinstance(init, str):
        W = rng.standard_normal((d, k))
    else:
        W = np.asarray(to_numpy(init), dtype=float)
        if W.shape != (k, d) or not np.all(np.isfinite(W)):
            raise ValueError(f"init must be a finite array of shape ({k}, {d}) "
                             f"(n_components, n_features), got shape {W.shape}")
        W = W.T
    return form.prox_w(as_tensor(W, data.backend, **data.context), 0.0, n)


def epoch_sizes(n: int, inner_batch: int | None, epoch_length: int | None, method: str
                ) -> tuple[int, int]:
    """``(b, m)``: the inner mini-batch and the inner steps of an epoch on ``n`` samples (None:
    the defaults of ``method``; SGD/SMM's epoch is one pass, ``ceil(n / b)`` steps). A function
    of the sizes alone, so that a fit's work is known before it reads the data."""
    b, m = default_sizes(n, inner_batch, epoch_length)
    if method != "vr" and epoch_length is None:
        m = -(-n // b)
    return b, m


def initial_state(data: FiniteData, form: Any, rng: np.random.Generator,
                  options: EpochOptions, *, n_components: int, init: Any,
                  inner_batch: int | None, epoch_length: int | None, step_size: float | str,
                  auto_samples: int, scale: float, passes_read: float = 0.0,
                  seconds: float = 0.0) -> FiniteState:
    """The state before the first epoch on ``data`` (read in units of ``scale``): the sizes
    ``b`` and ``m`` (None: the defaults of ``options.method``), the formulation's
    data-dependent part, :func:`initial_dictionary` and the step (``"auto"``:
    :func:`auto_step_size`; None for ``smm``). ``passes_read`` and ``seconds``: the work
    already spent (the data scale's pass)."""
    n, d = data.n, data.d
    b, m = epoch_sizes(n, inner_batch, epoch_length, options.method)
    with using(data.backend):
        if options.method != "vr":  # SGD/SMM never pass over all data: validate it up front
            data.map_reduce(chunk_count, options.chunk_size)
        if form.needs_scatter:
            form = form.prepare(scatter(data, options.chunk_size), n)
        W = initial_dictionary(form, data, rng, n_components=n_components, init=init)
    state = FiniteState(dictionary=W, output=W, statistics=None, formulation=form,
                        scale=scale, step_size=None, rng=rng, backend=data.backend,
                        context=data.context, n_samples=n, n_features=d, inner_batch=b,
                        epoch_length=m, passes_read=passes_read, seconds=seconds)
    if options.method == "smm":
        return state
    if isinstance(step_size, str):  # "auto"
        return auto_step_size(state, data, options, auto_samples=auto_samples)
    return dataclasses.replace(state, step_size=float(step_size))


def auto_step_size(state: FiniteState, data: FiniteData, options: EpochOptions, *,
                   auto_samples: int) -> FiniteState:
    """``state`` with the step ``1 / (2.3 L)``, ``L`` a backtracking estimate of the local
    Lipschitz constant at the initial dictionary on a subsample of ``auto_samples`` samples;
    its passes and seconds counted as algorithm work."""
    n = state.n_samples
    rows = np.sort(state.rng.choice(n, min(n, auto_samples), replace=False))
    subsample = FiniteData(data.rows(rows), data.backend, data.context, data.nonnegative,
                           way_out=data.way_out)
    start = time.perf_counter()
    with using(data.backend):
        L, passes = estimate_lipschitz(state.formulation, state.dictionary, subsample, n,
                                       chunk_size=options.chunk_size, coder=options.coder,
                                       tol=options.code_tol, max_iter=options.code_max_iter)
    read = passes * len(rows) / n
    return dataclasses.replace(
        state, step_size=1.0 / (AUTO_THETA * L),
        seconds=state.seconds + (time.perf_counter() - start),
        passes_read=state.passes_read + read, solves=state.solves + read)


# -- one epoch -----------------------------------------------------------------------------------


def run_epoch(state: FiniteState, data: FiniteData, options: EpochOptions
              ) -> tuple[FiniteState, dict]:
    """One outer iteration of ``options.method`` on ``data`` (the state's data set, read in
    units of its scale): the new state, its history row appended, and that row.

    The epoch draws from a copy of the state's generator: the state given keeps its own."""
    state = dataclasses.replace(state, rng=copy.deepcopy(state.rng))
    start = time.perf_counter()
    with using(data.backend):
        epochs = {"vr": vr_epoch, "sgd": sgd_epoch, "smm": smm_epoch}
        state, info = epochs[options.method](state, data, options)
    if info["snapshot_loss"] is not None:  # in the data's units, as objective()
        info["snapshot_loss"] *= state.scale * state.scale
    state = dataclasses.replace(state, seconds=state.seconds + (time.perf_counter() - start),
                                n_epochs=state.n_epochs + 1)
    info.update(epoch=state.n_epochs, passes_read=state.passes_read, solves=state.solves,
                seconds=state.seconds, steps=state.n_steps)
    return dataclasses.replace(state, history=(*state.history, info)), info


def vr_epoch(state: FiniteState, data: FiniteData, options: EpochOptions
             ) -> tuple[FiniteState, dict]:
    """Algorithm 1, one outer iteration: the full gradient ``G`` at the snapshot ``W0``, then
    ``epoch_length`` steps along the SVRG estimator on mini-batches drawn without
    replacement."""
    form, n, b, m = state.formulation, state.n_samples, state.inner_batch, state.epoch_length
    rng, eta = state.rng, state.step_size
    W0 = W = state.dictionary
    W_out, out_count = state.output, state.output_count
    tol0 = options.tolerance(state, 0)
    G, sums, kept = full_gradient(form, W0, data, options.chunk_size, keep_codes=bool(
        options.store_snapshot_codes), **options.coder_settings(tol0))
    gamma = gradient_mapping(form, W0, G, eta, n)
    info = {"grad_map_sq": float(tl.sum(gamma * gamma)),
            "snapshot_loss": sums.loss / n + form.psi(W0, n),
            "code_iterations": sums.iterations, "max_code_iter": sums.max_iter,
            "code_tol": tol0}
    stored = concatenate_codes(kept) if kept is not None else None
    for t in range(m):
        if options.output == "random":  # reservoir over W^{s,t}, t = 0..m-1 (Option I)
            out_count += 1
            if rng.random() * out_count < 1.0:
                W_out = W
        rows = np.sort(rng.choice(n, b, replace=False))
        Xb = data.rows(rows)
        codes0 = _take(stored, rows) if stored is not None else \
            solve_codes(form, Xb, W0, **options.coder_settings(tol0))
        codes = solve_codes(form, Xb, W, **options.coder_settings(options.tolerance(state, t)))
        W = prox_step(form, W, vr_direction(W, W0, Xb, codes, codes0, G), eta, n)
        info["code_iterations"] += int(codes.n_iter.sum() + codes0.n_iter.sum())
        info["max_code_iter"] = max(info["max_code_iter"], int(codes.n_iter.max()))
    solved = (n + (1 if stored is not None else 2) * m * b) / n
    return dataclasses.replace(
        state, dictionary=W, output=W_out, output_count=out_count,
        n_steps=state.n_steps + m, passes_read=state.passes_read + (n + m * b) / n,
        solves=state.solves + solved), info


def sgd_epoch(state: FiniteState, data: FiniteData, options: EpochOptions
              ) -> tuple[FiniteState, dict]:
    """Proximal SGD (Algorithm S-3): ``epoch_length`` steps of ``gamma_t = beta / (b t +
    beta')``, ``beta'`` the ``step_offset`` (None: ``100 b``) and ``beta = step_size beta'``."""
    form, n, b, rng = state.formulation, state.n_samples, state.inner_batch, state.rng
    offset = 100.0 * b if options.step_offset is None else float(options.step_offset)
    beta = state.step_size * offset
    W, iterations, steps = state.dictionary, 0, state.n_steps
    coder = options.coder_settings(options.tolerance(state, 0))
    for _ in range(state.epoch_length):
        Xb = data.rows(np.sort(rng.choice(n, b, replace=False)))
        codes = solve_codes(form, Xb, W, **coder)
        gamma = sgd_step_size(beta, offset, b, steps)
        W = prox_step(form, W, batch_gradient(W, Xb, codes), gamma, n)
        steps += 1
        iterations += int(codes.n_iter.sum())
    return _stochastic_step(state, options, W, steps, iterations)


def smm_epoch(state: FiniteState, data: FiniteData, options: EpochOptions
              ) -> tuple[FiniteState, dict]:
    """Stochastic MM (Algorithm S-2) on the sums ``A = sum h h^T``, ``B = sum (x - r) h^T``:
    ``smm_steps`` projected-gradient steps on the surrogate per mini-batch (ORPCA: Feng's exact
    ``W = B (A + lam1 I)^-1``)."""
    form, n, b, rng = state.formulation, state.n_samples, state.inner_batch, state.rng
    W, iterations, steps = state.dictionary, 0, state.n_steps
    k, d = tl.shape(W)[1], tl.shape(W)[0]
    sums = state.statistics or {"A": tl.zeros((k, k), **state.context),
                                "B": tl.zeros((d, k), **state.context)}
    A, B = sums["A"], sums["B"]
    feng = type(form) is RobustPCA
    coder = options.coder_settings(options.tolerance(state, 0))
    for _ in range(state.epoch_length):
        Xb = data.rows(np.sort(rng.choice(n, b, replace=False)))
        codes = solve_codes(form, Xb, W, **coder)
        A = A + tl.dot(tl.transpose(codes.H), codes.H)  # sums: S-2's 1/t is undefined at t=0
        B = B + narrow_dot(tl.transpose(Xb - codes.outliers), codes.H)
        steps += 1
        iterations += int(codes.n_iter.sum())
        if feng:  # W = B (A + lam1 I)^-1 (Feng et al.; S-2 as printed drops psi)
            system = A + form.lam1 * tl.eye(k, **state.context)
            W = tl.transpose(tl.solve(system, tl.transpose(B)))
            continue
        L = spectral_norm_psd(A)
        if L <= 0:
            continue
        seen = steps * b  # the surrogate is a sum over the samples seen
        for _ in range(options.smm_steps):
            W = form.prox_w(W - (tl.dot(W, A) - B) / L, seen / L, n)
    state = dataclasses.replace(state, statistics={"A": A, "B": B})
    return _stochastic_step(state, options, W, steps, iterations)


def _stochastic_step(state: FiniteState, options: EpochOptions, W: Any, steps: int,
                     iterations: int) -> tuple[FiniteState, dict]:
    """The state after an epoch of ``sgd``/``smm`` (one fraction ``m b / n`` of a pass read
    and solved), and its history row."""
    fraction = state.epoch_length * state.inner_batch / state.n_samples
    info = {"grad_map_sq": None, "snapshot_loss": None, "code_iterations": iterations,
            "max_code_iter": None, "code_tol": options.tolerance(state, 0)}
    return dataclasses.replace(state, dictionary=W, n_steps=steps,
                               passes_read=state.passes_read + fraction,
                               solves=state.solves + fraction), info


# -- codes of many chunks ------------------------------------------------------------------------


def concatenate_codes(parts: list[FiniteCodes]) -> FiniteCodes:
    """The codes of consecutive chunks as one."""
    return FiniteCodes(tl.concatenate([c.H for c in parts], axis=0),
                       tl.concatenate([c.outliers for c in parts], axis=0),
                       np.concatenate([c.n_iter for c in parts]),
                       tl.concatenate([c.residual for c in parts], axis=0))


def _take(codes: FiniteCodes, rows: np.ndarray) -> FiniteCodes:
    """The stored snapshot codes of ``rows`` (no solver iterations spent)."""
    index = rows
    if backend_of(codes.H) == "pytorch":
        import torch

        index = torch.as_tensor(rows, device=codes.H.device)
    return FiniteCodes(codes.H[index], codes.outliers[index],
                       np.zeros(len(rows), dtype=np.int64), codes.residual[index])
