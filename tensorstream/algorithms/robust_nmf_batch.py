"""Batch robust NMF with outliers (Zhao & Tan 2017, supplement S-2) as functions: BPGD and BADMM.

Both minimise ``1/2 ||X - H W^T - E||_F^2 + outlier_alpha ||E||_1`` over ``H >= 0``, ``|E| <=
outlier_bound`` and ``W`` in ``C`` for the whole matrix ``X`` (``n_samples x n_features``), and
return ``(W, H, E, history)``; :class:`~tensorstream.learners.robust_nmf_batch.RobustNMF` is the
estimator around them. One iteration reads the whole matrix once: iterations are passes over
the data.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import tensorly as tl

from ..coders.robust import RobustPenalties, outlier_step, project_outliers, robust_losses
from ..core.constraints import soft_threshold
from ..core.dictionary import spectral_norm_psd
from ..core.products import narrow_dot
from ..steps.surrogate import dictionary_pgd


def objective(X: Any, W: Any, H: Any, E: Any, penalties: RobustPenalties) -> float:
    """The objective per sample (the batch objective divided by ``n_samples``)."""
    return float(tl.mean(robust_losses(X, [W], H, E, penalties)))


def iterate(step: Callable, evaluate: Callable, state: Any, *, max_iter: int, tol: float,
            max_time: float | None, callback: Callable | None = None) -> tuple[Any, list]:
    """Run ``step`` until ``max_iter``, ``max_time``, ``tol`` or ``callback`` stops it.

    ``evaluate(state)`` gives each iteration's ``objective`` (and the relative primal
    residuals of BADMM); ``seconds`` counts the steps, not the evaluations. ``callback(info)``
    returning True stops. The run stops early when the objective's relative change falls
    below ``tol`` and every residual is below ``tol`` too (BADMM's objective is not monotone:
    a small change is also a turning point of an oscillation).

    Returns
    -------
    state, history : the last state and one row per iteration
    """
    history, seconds, previous = [], 0.0, None
    for iteration in range(1, max_iter + 1):
        start = time.perf_counter()
        state = step(state)
        seconds += time.perf_counter() - start
        info = {"iteration": iteration, "seconds": seconds, **evaluate(state)}
        history.append(info)
        if callback is not None and callback(info):
            break
        if max_time is not None and seconds >= max_time:
            break
        current = info["objective"]
        residuals = [info[k] for k in ("residual_H", "residual_E", "residual_W") if k in info]
        if tol and previous is not None and \
                abs(current - previous) / max(abs(previous), 1e-300) < tol and \
                all(r < tol for r in residuals):
            break
        previous = current
    return state, history


def bpgd(X: Any, W: Any, H: Any, E: Any, penalties: RobustPenalties, *, project: Callable,
         kappa: float, max_iter: int, tol: float, max_time: float | None,
         callback: Callable | None = None) -> tuple[Any, Any, Any, list]:
    """BPGD (S-8)-(S-10): per iteration one projected-gradient step on ``H`` (step ``kappa /
    ||W||_2^2``), the exact ``E``, one on ``W`` (``project`` onto ``C``); a block-MM scheme,
    whose objective never increases. ``E``: the start of the outliers.

    Returns
    -------
    W, H, E, history
    """

    def step(state):
        W, H, E = state
        G = tl.dot(tl.transpose(W), W)
        eta = kappa / max(spectral_norm_psd(G), 1e-300)
        H = tl.clip(H - eta * (tl.dot(H, G) + narrow_dot(E - X, W)), 0, None)
        E = outlier_step(X - tl.dot(H, tl.transpose(W)), penalties)
        explained = X - E
        W, _ = dictionary_pgd(W, tl.dot(tl.transpose(H), H),
                              narrow_dot(tl.transpose(explained), H), project=project,
                              kappa=kappa, tol=0.0, max_iter=1)
        return W, H, E

    def evaluate(state):
        return {"objective": objective(X, *state, penalties)}

    (W, H, E), history = iterate(step, evaluate, (W, H, E), max_iter=max_iter, tol=tol,
                                 max_time=max_time, callback=callback)
    return W, H, E, history


def badmm(X: Any, W: Any, H: Any, E: Any, penalties: RobustPenalties, *, project: Callable,
          rho: float, max_iter: int, tol: float, max_time: float | None,
          callback: Callable | None = None) -> tuple[Any, Any, Any, list]:
    """BADMM (S-12)-(S-20): the splitting ``H = U``, ``E = Q``, ``W = Psi`` with penalty
    ``rho``, one pass of the updates per iteration (not monotone); duals named ``dual_*``.
    ``E``: the start of the outliers.

    Returns
    -------
    Psi, U, Q, history : the feasible iterates and one row per iteration
    """
    context = tl.context(X)
    state = {"W": W, "Psi": W, "H": H, "U": tl.clip(H, 0, None), "E": E, "Q": E,
             "dual_H": tl.zeros(tl.shape(H), **context),
             "dual_E": tl.zeros(tl.shape(X), **context),
             "dual_W": tl.zeros(tl.shape(W), **context)}

    def step(s):
        W, E = s["W"], s["E"]
        inverse = shifted_psd_inverse(tl.dot(tl.transpose(W), W), rho)
        H = tl.dot(narrow_dot(X - E, W) + rho * s["U"] - s["dual_H"], inverse)
        E = soft_threshold(rho * s["Q"] + X - s["dual_E"] - tl.dot(H, tl.transpose(W)),
                           penalties.outlier_alpha) / (1 + rho)
        inverse = shifted_psd_inverse(tl.dot(tl.transpose(H), H), rho)
        W = tl.dot(narrow_dot(tl.transpose(X - E), H) - s["dual_W"] + rho * s["Psi"], inverse)
        U = tl.clip(H + s["dual_H"] / rho, 0, None)
        Q = project_outliers(E + s["dual_E"] / rho, penalties)
        Psi = project(W + s["dual_W"] / rho)
        return {"W": W, "Psi": Psi, "H": H, "U": U, "E": E, "Q": Q,
                "dual_H": s["dual_H"] + rho * (H - U), "dual_E": s["dual_E"] + rho * (E - Q),
                "dual_W": s["dual_W"] + rho * (W - Psi)}

    def evaluate(s):
        return {"objective": objective(X, s["Psi"], s["U"], s["Q"], penalties),
                "residual_H": _relative(s["H"] - s["U"], s["H"]),
                "residual_E": _relative(s["E"] - s["Q"], s["E"]),
                "residual_W": _relative(s["W"] - s["Psi"], s["W"])}

    state, history = iterate(step, evaluate, state, max_iter=max_iter, tol=tol,
                             max_time=max_time, callback=callback)
    return state["Psi"], state["U"], state["Q"], history


def shifted_psd_inverse(G: Any, rho: float) -> Any:
    """``(G + rho I)^-1`` of a PSD ``G`` through its eigendecomposition: exact in theory like
    a solve, but it never fails when ``G``'s scale dwarfs ``rho`` (a gross outlier of 1e10
    makes ``G + rho I`` singular in floating point, and ``solve`` raised ``LinAlgError``)."""
    values, vectors = tl.eigh(G)
    return tl.dot(vectors / (tl.clip(values, 0, None) + rho), tl.transpose(vectors))


def _relative(difference: Any, reference: Any) -> float:
    return float(tl.norm(difference)) / max(float(tl.norm(reference)), 1e-300)
