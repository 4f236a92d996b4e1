"""The CP dictionary: loading matrices ``U^(k)`` of shape ``(I_k, R)`` and the algebra on them.

A sample ``X_j`` of shape ``(I_1, ..., I_n)`` is modelled as ``sum_r H[j, r] U^(1)[:, r] o ... o
U^(n)[:, r]``. The dictionary as a matrix ``W`` (``prod(I_k) x R``, C-order vectorisation of the
atoms) is the Khatri-Rao product ``U^(1) (.) ... (.) U^(n)``; its Gram matrix is the Hadamard
product of the ``U^(k)^T U^(k)``. Every function here works through those identities and
mode-by-mode contractions, so neither the atoms nor the Khatri-Rao product are ever formed
(except in :func:`dictionary_matrix`, which exists for tests and small problems).

All functions are backend-agnostic (``tl.*`` calls only) and expect to be called inside the
backend context of their tensors. Samples lie on the first axis of data and codes:
``X`` has shape ``(b, I_1, ..., I_n)`` and codes ``H`` have shape ``(b, R)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorly as tl
from tensorly.cp_tensor import CPTensor

from .products import narrow_dot

Tensor = Any
Loadings = Sequence[Tensor]

def rank(loadings: Loadings) -> int:
    """Number of atoms ``R`` of a CP dictionary."""
    return int(tl.shape(loadings[0])[1])


def gram(loadings: Loadings, skip: int | None = None) -> Tensor:
    """Hadamard product of the Grams ``U^(k)^T U^(k)``, leaving out mode ``skip``.

    With ``skip=None`` this is ``W^T W`` for the dictionary matrix ``W``; with ``skip=i`` it is
    the factor that multiplies the statistics ``A`` in the block problem of mode ``i``.
    """
    result = None
    for k, factor in enumerate(loadings):
        if k == skip:
            continue
        g = tl.dot(tl.transpose(factor), factor)
        result = g if result is None else result * g
    if result is None:  # a single-mode dictionary with its only mode skipped
        R = rank(loadings)
        return tl.ones((R, R), **tl.context(loadings[0]))
    return result


def project(X: Tensor, loadings: Loadings) -> Tensor:
    """``W^T vec(X_j)`` for every sample: shape ``(b, R)``, with ``X`` of shape ``(b, I_1..I_n)``.

    One GEMM with the last loading, then one Hadamard-and-sum per remaining mode (last first),
    so the cost is ``O(b R prod(I))`` and the Khatri-Rao product is never built.
    """
    sizes = [tl.shape(U)[0] for U in loadings]
    R = rank(loadings)
    out = narrow_dot(tl.reshape(X, (-1, sizes[-1])), loadings[-1])  # (b I_1..I_{n-1}, R)
    for k in range(len(loadings) - 2, -1, -1):
        out = _contract_middle(out, loadings[k], sizes[k], R)
    return tl.reshape(out, (-1, R))


def _contract_middle(T: Tensor, U: Tensor, size: int, R: int) -> Tensor:
    """``out[p, r] = sum_i T[p, i, r] U[i, r]`` with ``T`` given as ``(P * size, R)``."""
    T = tl.reshape(T, (-1, size, R))
    return tl.sum(T * tl.reshape(U, (1, size, R)), axis=1)


def contract_except(B: Tensor, loadings: Loadings, mode: int) -> Tensor:
    """Contract the statistic ``B`` (shape ``(I_1..I_n, R)``) with every loading but ``mode``.

    Column ``r`` of the result (shape ``(I_mode, R)``) is ``B[..., r]`` multiplied along every
    other mode ``k`` by ``U^(k)[:, r]`` (the per-atom MTTKRP of Lyu et al.'s Algorithm 3).
    """
    sizes = [tl.shape(U)[0] for U in loadings]
    R = rank(loadings)
    out = B
    # modes after `mode`, last first: out is (I_1 .. I_k, R) and loses its last data mode
    for k in range(len(loadings) - 1, mode, -1):
        out = _contract_middle(out, loadings[k], sizes[k], R)
    # modes before `mode`, first first: out is (I_k, rest, R) and loses its first data mode
    for k in range(mode):
        out = tl.reshape(out, (sizes[k], -1, R))
        out = tl.sum(out * tl.reshape(loadings[k], (sizes[k], 1, R)), axis=0)
    return tl.reshape(out, (sizes[mode], R))


def inner_with_dictionary(B: Tensor, loadings: Loadings) -> Tensor:
    """``<B, W>``: the full contraction of a ``(I_1..I_n, R)`` tensor with the atoms (a scalar)."""
    return tl.sum(contract_except(B, loadings, 0) * loadings[0])


def reconstruct(loadings: Loadings, codes: Tensor) -> Tensor:
    """Samples ``sum_r codes[j, r] * atom_r``: shape ``(b, I_1, ..., I_n)``."""
    sizes = [tl.shape(U)[0] for U in loadings]
    R = rank(loadings)
    out = codes  # (b I_1 .. I_{k-1}, R): partial atoms scaled by the codes
    for k in range(len(loadings) - 1):
        out = tl.reshape(tl.reshape(out, (-1, 1, R)) * tl.reshape(loadings[k], (1, sizes[k], R)),
                         (-1, R))
    out = tl.dot(out, tl.transpose(loadings[-1]))  # the last mode sums over the atoms
    return tl.reshape(out, (tl.shape(codes)[0], *sizes))


def dictionary_matrix(loadings: Loadings) -> Tensor:
    """The dictionary ``W`` (``prod(I_k) x R``, C-order): materialized, for tests and tiny sizes."""
    return tl.tenalg.khatri_rao(list(loadings))


def outer_statistic(X: Tensor, codes: Tensor) -> Tensor:
    """``sum_j X_j o H[j, :]``: the ``(I_1..I_n, R)`` tensor added to the statistic ``B``."""
    b = tl.shape(X)[0]
    matrix = narrow_dot(tl.transpose(tl.reshape(X, (b, -1))), codes)
    return tl.reshape(matrix, (*tl.shape(X)[1:], tl.shape(codes)[1]))


def pairs(factor: Tensor) -> Tensor:
    """Row-wise products of all column pairs: ``(I, R)`` -> ``(I, R*R)``, column ``r*R + s``.

    The CP dictionary whose loadings are ``pairs(U^(k))`` has the atoms ``W[:, r] * W[:, s]``,
    so the contractions above give entrywise Gram terms without forming ``W``: for a mask
    ``M``, ``project(M, [pairs(U) for U in loadings])`` is every sample's ``W^T diag(m_j) W``.
    """
    size, R = tl.shape(factor)
    return tl.reshape(tl.reshape(factor, (size, R, 1)) * tl.reshape(factor, (size, 1, R)),
                      (size, R * R))


def masked_gram(mask: Tensor, loadings: Loadings) -> Tensor:
    """``W^T diag(m_j) W`` for every sample ``j`` of a mask ``(b, I_1..I_n)``: ``(b, R, R)``."""
    R = rank(loadings)
    return tl.reshape(project(mask, [pairs(U) for U in loadings]), (-1, R, R))


def spectral_norm_psd(gram: Tensor) -> float:
    """Largest eigenvalue of a symmetric PSD matrix, i.e. its spectral norm ``||W^T W||_2``.

    ``tl.norm`` is the Frobenius norm, a looser bound; the Lipschitz step needs this one.

    Parameters
    ----------
    gram : tensor
        Symmetric positive semi-definite ``(R, R)`` matrix.

    Returns
    -------
    float
        ``λ_max(gram)`` (0 for the zero matrix).

    Examples
    --------
    >>> import numpy as np
    >>> spectral_norm_psd(np.array([[2.0, 1.0], [1.0, 2.0]]))
    3.0
    """
    shape = tuple(tl.shape(gram))
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"gram must be a square matrix, got shape {shape}")
    eigenvalues, _ = tl.eigh(gram)
    return max(float(tl.max(eigenvalues)), 0.0)


def to_cp_tensor(loadings: Loadings, codes: Tensor) -> CPTensor:
    """A TensorLy ``CPTensor`` of the batch: the codes are the factor of the (first) sample mode."""
    R = rank(loadings)
    weights = tl.ones((R,), **tl.context(loadings[0]))
    return CPTensor((weights, [codes, *loadings]))
