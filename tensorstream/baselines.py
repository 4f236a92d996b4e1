"""Batch nonnegative CP baselines of the paper's benchmark: ALS and multiplicative updates.

Both fit ``X ~ sum_r f_1[:, r] o ... o f_N[:, r]`` to a whole tensor (all modes, the sample mode
included) and share the engine's pieces: Grams of the other factors and MTTKRPs, never the
Khatri-Rao product itself. ``nonnegative_cp_als`` solves each mode's nonnegative least squares
with the same coordinate-descent coder as the online learner (warm-started HALS), so it is an
exact-block ALS, stronger than the reference code's 30 damped gradient sweeps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import tensorly as tl
from tensorly.cp_tensor import CPTensor

from .coders.lasso import sparse_code
from .core.dictionary import gram

Tensor = Any


def _relative_error(X: Tensor, factors: Sequence[Tensor], norm_X: float) -> float:
    R = tl.shape(factors[0])[1]
    weights = tl.ones((R,), **tl.context(factors[0]))
    return float(tl.norm(X - tl.cp_to_tensor((weights, list(factors))))) / norm_X


def _sweeps(X: Tensor, init: Sequence[Tensor], n_iter: int, update: Callable,
            callback: Callable | None) -> tuple[CPTensor, list[float]]:
    factors = [tl.copy(f) for f in init]
    weights = tl.ones((tl.shape(factors[0])[1],), **tl.context(factors[0]))
    norm_X = float(tl.norm(X))
    errors = []
    for sweep in range(1, n_iter + 1):
        for mode in range(len(factors)):
            mttkrp = tl.tenalg.unfolding_dot_khatri_rao(X, (weights, factors), mode)
            factors[mode] = update(factors[mode], gram(factors, skip=mode), mttkrp)
        errors.append(_relative_error(X, factors, norm_X))
        if callback is not None and callback(sweep, factors):
            break
    return CPTensor((weights, factors)), errors


def nonnegative_cp_als(X: Tensor, init: Sequence[Tensor], n_iter: int = 30,
                       inner_max_iter: int = 30, inner_tol: float = 1e-6,
                       callback: Callable | None = None) -> tuple[CPTensor, list[float]]:
    """Nonnegative CP by alternating nonnegative least squares (each block solved exactly).

    Parameters
    ----------
    X : tensor
        The full data tensor (any number of modes).
    init : list of tensors of shape (I_k, R)
        Initial factors, one per mode of ``X``.
    n_iter : int
        Sweeps over the modes (Gauss-Seidel order).
    inner_max_iter, inner_tol : int, float
        Pivoting rounds and tolerance of each block's NNLS (``coders.lasso.sparse_code``,
        warm-started from the support of the current factor).
    callback : callable, optional
        ``callback(sweep, factors)``; returning True stops.

    Returns
    -------
    cp_tensor : CPTensor
    errors : list of float
        Relative error ``||X - [[factors]]|| / ||X||`` after every sweep.
    """
    def update(factor, G, mttkrp):
        return sparse_code(G, mttkrp, init=factor, max_iter=inner_max_iter, tol=inner_tol)[0]

    return _sweeps(X, init, n_iter, update, callback)


def nonnegative_cp_mu(X: Tensor, init: Sequence[Tensor], n_iter: int = 30, eps: float = 1e-12,
                      callback: Callable | None = None) -> tuple[CPTensor, list[float]]:
    """Nonnegative CP by Lee-Seung multiplicative updates, ``F <- F * M / (F G + eps)``.

    ``eps`` keeps a zero column from producing NaN (the reference code has none). The objective
    never increases from sweep to sweep (the classical MU property).
    """
    def update(factor, G, mttkrp):
        return factor * mttkrp / (tl.dot(factor, G) + eps)

    return _sweeps(X, init, n_iter, update, callback)
