"""Backend selection: which TensorLy backend, device and dtype a computation runs on.

The learners never call ``tl.set_backend``: the global backend belongs to the user. Every
computation runs inside :func:`using`, a thread-local ``tl.backend_context``. The backend is
picked from the data (a torch tensor runs on ``pytorch``, on its device and dtype); plain numpy
arrays, lists and array-likes (xarray, sparse, dask) are accepted by every backend and converted
once at the boundary.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorly as tl

_REAL_KINDS = "biuf"  # bool, signed int, unsigned int, float: what can become a float tensor


def backend_of(x: Any) -> str:
    """Name of the TensorLy backend that natively holds ``x`` (``"numpy"`` for array-likes)."""
    module = type(x).__module__
    if module.startswith("torch"):
        return "pytorch"
    if module.startswith("jax"):
        return "jax"
    if module.startswith("tensorflow"):
        return "tensorflow"
    if module.startswith("paddle"):
        return "paddle"
    return "numpy"


@contextlib.contextmanager
def using(backend: str) -> Iterator[None]:
    """Run the enclosed block on ``backend`` without touching the global backend."""
    with tl.backend_context(backend, local_threadsafe=True):
        yield


def context_of(tensor: Any) -> dict:
    """The ``dtype``/``device`` keyword arguments that recreate tensors like ``tensor``."""
    return tl.context(tensor)


def float_dtype_of(x: Any, backend: str) -> Any:
    """Float dtype for new state built from ``x``: keep float32/float64, promote the rest to 64."""
    if backend == "pytorch":
        import torch

        return x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float64
    dtype = np.dtype(getattr(x, "dtype", np.float64))
    return dtype if dtype in (np.float32, np.float64) else np.dtype(np.float64)


def to_numpy(x: Any) -> np.ndarray:
    """A numpy copy/view of a tensor of any backend (on the host)."""
    if backend_of(x) == "numpy":
        return np.asarray(x)
    with using(backend_of(x)):
        return tl.to_numpy(x)


def as_tensor(x: Any, backend: str, **context: Any) -> Any:
    """Convert ``x`` to a tensor of ``backend`` with the given dtype/device context."""
    with using(backend):
        if backend_of(x) == backend and backend != "numpy":
            # same backend: only move/cast when needed (avoids a copy on the hot path)
            if backend == "pytorch":
                return x.to(device=context.get("device"), dtype=context.get("dtype"))
            return tl.tensor(x, **context)
        if backend_of(x) != "numpy":
            x = to_numpy(x)
        return tl.tensor(np.asarray(x), **context)


def is_real_dtype(x: Any) -> bool:
    """True when ``x`` holds bool/int/float data (not complex, object, strings...)."""
    if backend_of(x) == "pytorch":
        return not (x.is_complex())
    return np.dtype(getattr(x, "dtype", np.asarray(x).dtype)).kind in _REAL_KINDS
