"""Backend selection: which TensorLy backend, device and dtype a computation runs on, and on how
many threads (:func:`limit_threads`).

The learners never call ``tl.set_backend``: the global backend belongs to the user. Every
computation runs inside :func:`using`, a thread-local ``tl.backend_context``. The backend is
picked from the data (a torch tensor runs on ``pytorch``, on its device and dtype); plain numpy
arrays, lists and array-likes (xarray, sparse, dask) are accepted by every backend and converted
once at the boundary.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
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


def contiguous(x: Any) -> Any:
    """``x`` in row-major order: a copy only where it is not already (numpy and torch; other
    backends' tensors are returned as they are).

    BLAS picks its kernels by memory layout, so the same values in another order may round
    differently in a later product; results that later products see keep the usual order.
    """
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x)
    make = getattr(x, "contiguous", None)  # torch
    return make() if callable(make) else x


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


# -- threads --------------------------------------------------------------------------------------

_CONTROLLER: list = []
_LIMITS: dict = {"lock": threading.Lock()}


@contextlib.contextmanager
def limit_threads(n_threads: int | None) -> Iterator[None]:
    """Run the block with at most ``n_threads`` BLAS/OpenMP threads (``threadpoolctl``) and
    PyTorch intra-op threads, and restore both settings exactly afterwards.

    The learners' hot loops are made of small products, which on a loaded machine run many
    times slower with several threads than with one (oversubscription; ``docs/nmf.md``). The
    limit is process-wide, as the thread pools are: concurrent blocks (two fits in two threads)
    share it, the first to enter applies its ``n_threads`` and the last to leave restores the
    settings found by the first. ``None`` leaves the thread pools alone.

    Examples
    --------
    >>> from threadpoolctl import threadpool_info
    >>> before = [pool["num_threads"] for pool in threadpool_info()]
    >>> with limit_threads(1):
    ...     all(pool["num_threads"] == 1 for pool in threadpool_info())
    True
    >>> [pool["num_threads"] for pool in threadpool_info()] == before
    True
    """
    if n_threads is None:
        yield
        return
    with _torch_threads(n_threads), _pool_threads(n_threads):
        yield


@contextlib.contextmanager
def _torch_threads(n_threads: int) -> Iterator[None]:
    """PyTorch's intra-op pool (its own setting; 9x slower at 2 threads on these steps)."""
    torch = sys.modules.get("torch")  # only when the caller already uses torch
    if torch is None:
        yield
        return

    def limit() -> Any:
        given = torch.get_num_threads()
        torch.set_num_threads(n_threads)

        def restore() -> None:
            torch.set_num_threads(given)

        return restore

    with _shared_limit(limit, "torch"):
        yield


@contextlib.contextmanager
def _pool_threads(n_threads: int) -> Iterator[None]:
    with _LIMITS["lock"]:
        if not _CONTROLLER:  # cached: creating one costs ~0.1 ms
            from threadpoolctl import ThreadpoolController

            _CONTROLLER.append(ThreadpoolController())
    controller = _CONTROLLER[0]

    def current() -> list:
        return [lib.num_threads for lib in controller.lib_controllers]

    def limit() -> Any:
        # a restore that did not hold (below) left the user's setting in "pending"
        given = _LIMITS.pop("blas-pending", None) or current()
        if all(n == n_threads for n in given):  # already there (a loop of partial_fit calls)
            return lambda: None
        controller.limit(limits=n_threads)

        def restore() -> None:
            # OpenBLAS can ignore a raise of its thread count while another thread is inside
            # a BLAS call: try again for a while, and remember the setting if it still fails
            for _ in range(100):
                for lib, n in zip(controller.lib_controllers, given):
                    lib.set_num_threads(n)
                if current() == given:
                    return
                time.sleep(0.001)
            _LIMITS["blas-pending"] = given

        return restore

    with _shared_limit(limit, "blas"):
        yield


@contextlib.contextmanager
def _shared_limit(limit: Any, key: str) -> Iterator[None]:
    """A process-wide thread limit shared by concurrent blocks: the first to enter applies it
    (``limit()`` returns the function that undoes it), the last to leave restores the setting.
    A save-and-restore per block would leave the limit in place for good when two fits in two
    threads overlap."""
    state = _LIMITS.setdefault(key, {"active": 0, "restore": None})
    with _LIMITS["lock"]:
        if state["active"] == 0:
            state["restore"] = limit()
        state["active"] += 1
    try:
        yield
    finally:
        with _LIMITS["lock"]:
            state["active"] -= 1
            if state["active"] == 0:
                state["restore"]()
