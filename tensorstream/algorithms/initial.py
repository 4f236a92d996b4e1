"""The dictionary before the first step, given (``init``) or drawn at random, for the CP
algorithms whose loadings are one ``(I_k, R)`` matrix per mode."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorly as tl

from ..core.validation import check_batch


def random_or_given(init: Any, sample_shape: tuple, R: int, context: dict, rng: Any,
                    nonnegative: bool = False) -> list:
    """U[0, 1) loadings for ``init="random"``, drawn in numpy with ``rng`` so that every
    backend starts from the same values; the list ``init`` otherwise (:func:`checked_init`)."""
    if isinstance(init, str):
        if init != "random":
            raise ValueError(f"init must be 'random' or a list of arrays, got {init!r}")
        return [tl.tensor(rng.random((size, R)), **context) for size in sample_shape]
    return checked_init(init, sample_shape, R, context, nonnegative)


def checked_init(init: Any, sample_shape: tuple, R: int, context: dict,
                 nonnegative: bool) -> list:
    """The loadings of a list ``init``, checked against the samples' shape."""
    init = list(init) if isinstance(init, Sequence) else None
    if init is None or len(init) != len(sample_shape):
        raise ValueError(f"init must be 'random' or a list of {len(sample_shape)} arrays of "
                         f"shapes {[(s, R) for s in sample_shape]}")
    loadings = []
    backend = tl.get_backend()
    for k, (U, size) in enumerate(zip(init, sample_shape)):
        U = check_batch(U, backend=backend, nonnegative=nonnegative, name=f"init[{k}]")
        if tuple(U.shape) != (size, R):
            raise ValueError(f"init[{k}] must have shape {(size, R)}, got {tuple(U.shape)}")
        loadings.append(tl.tensor(U, **context))
    return loadings
