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

import string
from collections.abc import Sequence
from typing import Any

import tensorly as tl
from tensorly.cp_tensor import CPTensor

Tensor = Any
Loadings = Sequence[Tensor]

# einsum letters: data modes use a.., the rank index is "r" and the sample index is "s"
_MODE_LETTERS = [c for c in string.ascii_lowercase if c not in "rs"]


def _letters(n_modes: int) -> list[str]:
    if n_modes > len(_MODE_LETTERS):
        raise ValueError(f"at most {len(_MODE_LETTERS)} data modes are supported, got {n_modes}")
    return _MODE_LETTERS[:n_modes]


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

    Contracts one data mode at a time (last mode first), so the cost is ``O(b R prod(I))``
    and the Khatri-Rao product is never built.
    """
    n = len(loadings)
    letters = _letters(n)
    # first contraction creates the rank index; later ones share it (Hadamard along r)
    out = tl.einsum(f"s{''.join(letters)},{letters[-1]}r->s{''.join(letters[:-1])}r",
                    X, loadings[-1])
    for k in range(n - 2, -1, -1):
        rest = "".join(letters[:k])
        out = tl.einsum(f"s{rest}{letters[k]}r,{letters[k]}r->s{rest}r", out, loadings[k])
    return out


def contract_except(B: Tensor, loadings: Loadings, mode: int) -> Tensor:
    """Contract the statistic ``B`` (shape ``(I_1..I_n, R)``) with every loading but ``mode``.

    Column ``r`` of the result (shape ``(I_mode, R)``) is ``B[..., r]`` multiplied along every
    other mode ``k`` by ``U^(k)[:, r]`` (the per-atom MTTKRP of the spec's Algorithm 3).
    """
    n = len(loadings)
    letters = _letters(n)
    out, kept = B, list(letters)
    for k in range(n - 1, -1, -1):
        if k == mode:
            continue
        source = "".join(kept)
        kept.remove(letters[k])
        out = tl.einsum(f"{source}r,{letters[k]}r->{''.join(kept)}r", out, loadings[k])
    return out


def inner_with_dictionary(B: Tensor, loadings: Loadings) -> Tensor:
    """``<B, W>``: the full contraction of a ``(I_1..I_n, R)`` tensor with the atoms (a scalar)."""
    return tl.sum(contract_except(B, loadings, 0) * loadings[0])


def reconstruct(loadings: Loadings, codes: Tensor) -> Tensor:
    """Samples ``sum_r codes[j, r] * atom_r``: shape ``(b, I_1, ..., I_n)``."""
    n = len(loadings)
    letters = _letters(n)
    # expand one mode at a time, keeping r until the last expansion sums it out
    out = codes
    for k in range(n):
        done = "".join(letters[:k])
        target = f"s{done}{letters[k]}" + ("" if k == n - 1 else "r")
        out = tl.einsum(f"s{done}r,{letters[k]}r->{target}", out, loadings[k])
    return out


def dictionary_matrix(loadings: Loadings) -> Tensor:
    """The dictionary ``W`` (``prod(I_k) x R``, C-order): materialized, for tests and tiny sizes."""
    return tl.tenalg.khatri_rao(list(loadings))


def outer_statistic(X: Tensor, codes: Tensor) -> Tensor:
    """``sum_j X_j o H[j, :]``: the ``(I_1..I_n, R)`` tensor added to the statistic ``B``."""
    n = tl.ndim(X) - 1
    letters = "".join(_letters(n))
    return tl.einsum(f"s{letters},sr->{letters}r", X, codes)


def to_cp_tensor(loadings: Loadings, codes: Tensor) -> CPTensor:
    """A TensorLy ``CPTensor`` of the batch: the codes are the factor of the (first) sample mode."""
    R = rank(loadings)
    weights = tl.ones((R,), **tl.context(loadings[0]))
    return CPTensor((weights, [codes, *loadings]))
