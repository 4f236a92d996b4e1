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
    """Run the enclosed block on ``backend`` (this thread only) without touching the global
    backend, and leave this thread's setting exactly as it was, nested or not.

    TensorLy's ``backend_context(..., local_threadsafe=True)`` restores the previous backend
    *globally* on exit, so a nested context flips every other thread's backend for a moment;
    this one restores the thread-local setting only (or removes it, if the thread had none).
    """
    local = tl.backend.BackendManager._THREAD_LOCAL_DATA.__dict__
    had, previous = "backend" in local, local.get("backend")
    tl.set_backend(backend, local_threadsafe=True)
    try:
        yield
    finally:
        if had:
            local["backend"] = previous
        else:
            local.pop("backend", None)


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
            # same backend: only move/cast when needed (avoids a copy on the hot path); a
            # tensor that requires grad is detached, so no autograd graph grows across steps
            if backend == "pytorch":
                return x.detach().to(device=context.get("device"), dtype=context.get("dtype"))
            return tl.tensor(x, **context)
        if backend_of(x) != "numpy":
            x = to_numpy(x)
        return tl.tensor(np.asarray(x), **context)


def is_real_dtype(x: Any) -> bool:
    """True when ``x`` holds bool/int/float data (not complex, object, strings...)."""
    if backend_of(x) == "pytorch":
        return not (x.is_complex())
    return np.dtype(getattr(x, "dtype", np.asarray(x).dtype)).kind in _REAL_KINDS


@contextlib.contextmanager
def no_grad(backend: str) -> Iterator[None]:
    """No autograd recording on the pytorch backend (the learners' updates are not
    differentiable programs: a graph across steps would only grow memory)."""
    if backend != "pytorch":
        yield
        return
    import torch

    with torch.no_grad():
        yield
