"""Stochastic-gradient dictionary steps (the online divergence algorithm of Zhao, Tan & Xu).

One step on every loading from the batch's gradient, Jacobi style (all modes from the same
point). With ``G`` the model-space gradient ``d'(v_j || y_j)`` of the batch's divergence, the
gradient in loading ``k`` is the MTTKRP of ``sum_j G_j o h_j`` with the other loadings; for a
matrix (one mode) it is ``G^T H``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorly as tl

from ..coders.divergence import SparseKL
from ..core.dictionary import contract_except, outer_statistic, reconstruct
from ..core.validation import is_sparse
from ..losses import Divergence


def batch_gradient(X: Any, H: Any, loadings: list, loss: Divergence, model: Any = None,
                   kl: SparseKL | None = None) -> Any:
    """``sum_j G_j o h_j`` (shape ``(I_1, ..., I_n, R)``) of the divergence at codes ``H``.

    Sparse ``X`` (KL, one mode) is evaluated on its nonzeros only, without the dense ``G``.
    ``model`` (the model at ``H``: ``reconstruct(loadings, H)``, or on the support for sparse
    ``X``) and ``kl`` (the :class:`SparseKL` of ``X`` and ``loadings[0]``) skip rebuilding
    what the coding step already has.
    """
    if is_sparse(X):
        kl = SparseKL(X, loadings[0], eps=loss.eps) if kl is None else kl
        return kl.dictionary_gradient(H, kl.model(H) if model is None else model)
    X = loss.prepare_data(X)
    G = loss.gradient(X, reconstruct(loadings, H) if model is None else model, check=False)
    return outer_statistic(G, H)


def projected_gradient_step(B: Any, loadings: list, eta: float,
                            project: Callable[[Any], Any]) -> list:
    """``U^(k) <- project(U^(k) - eta grad_k)`` for every loading (the paper's step), from the
    batch gradient ``B`` (mean or sum over the batch, see :func:`batch_gradient`).

    For tensors the step of loading ``k`` is divided by the fiber size ``prod_{l != k} I_l``
    (1 for a matrix): without it the canonical step overshoots by that factor and rows collapse
    onto the row-sum floor.
    """
    size = int(np.prod([tl.shape(U)[0] for U in loadings]))
    return [project(U - (eta * tl.shape(U)[0] / size) * contract_except(B, loadings, k))
            for k, U in enumerate(loadings)]


def mu_preconditioned_step(B: Any, code_sums: Any, loadings: list, eta: float,
                           project: Callable[[Any], Any]) -> list:
    """``U^(k) <- project(U^(k) - eta U^(k) / D_k * grad_k)``, the MU-preconditioned step.

    ``D_k[r] = sum_j h_jr prod_{l != k} sum_i U^(l)[i, r]`` (``code_sums`` holds
    ``sum_j h_jr``) is the denominator of the KL multiplicative update (the gradient of
    ``sum(W H)`` in ``U^(k)``), so ``eta = 1`` is one multiplicative update on the batch. ``B``
    is the summed gradient: the batch size cancels out.
    """
    sums = [tl.sum(U, axis=0) for U in loadings]
    denominators = []
    for k in range(len(loadings)):
        D = code_sums
        for other, column_sums in enumerate(sums):
            if other != k:
                D = D * column_sums
        denominators.append(tl.reshape(tl.clip(D, 1e-12, None), (1, -1)))
    return preconditioned_step(B, denominators, loadings, eta, project)


def preconditioned_step(B: Any, denominators: list, loadings: list, eta: float,
                        project: Callable[[Any], Any]) -> list:
    """``U^(k) <- project(U^(k) - eta U^(k) / D_k * grad_k)`` with the given ``D_k``: the
    multiplicative updates' scaling (KL's in :func:`mu_preconditioned_step`, any
    β-divergence's in :func:`tensorstream.algorithms.divergence_cp.beta_mu_step`)."""
    return [project(U - eta * (U / D) * contract_except(B, loadings, k))
            for k, (U, D) in enumerate(zip(loadings, denominators))]
