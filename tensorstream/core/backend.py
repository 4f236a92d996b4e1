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
import dataclasses
import functools
import os
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


def index_context(tensor: Any) -> dict:
    """The keyword arguments that put integer index tensors where ``tensor`` is (its device,
    not its dtype): positions made on another device cannot index it (on a GPU)."""
    return {key: value for key, value in tl.context(tensor).items() if key != "dtype"}


def linalg_errors() -> tuple:
    """The errors of a failed decomposition or solve (singular, not converged) on either
    backend (torch's only where torch is loaded)."""
    torch = sys.modules.get("torch")
    return (np.linalg.LinAlgError,) + ((torch.linalg.LinAlgError,) if torch is not None else ())


def tiny_of(x: Any) -> float:
    """The smallest normal number of ``x``'s float dtype: the guard of a division by a value
    that may be zero (1e-300 is zero in float32, and the division then gives inf or NaN)."""
    return float(finfo_of(x).tiny)


def finfo_of(x: Any) -> np.finfo:
    """numpy's float limits of ``x``'s dtype, any backend, without reading ``x`` (a GPU
    tensor stays where it is)."""
    return _finfo(str(x.dtype))


@functools.cache
def _finfo(dtype_name: str) -> np.finfo:
    # parsing a dtype's name each call cost about 1% of a batch-PCP iteration, and the coders'
    # loops ask for it (tiny_of) every iteration
    return np.finfo(dtype_name.replace("torch.", ""))


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
    if backend == "pytorch" and backend_of(x) == backend and not x.requires_grad and \
            x.dtype == context.get("dtype") and x.device == context.get("device"):
        return x  # already the learner's kind (every step's batch): as it is, at no cost
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


def indicator(condition: Any, like: Any) -> Any:
    """1.0 where ``condition`` holds and 0.0 elsewhere, a tensor of ``like``'s shape, dtype and
    device (``tl.where`` on two Python scalars would keep neither; ``like * 0`` would carry its
    NaN and inf entries into the 0/1 tensor)."""
    zeros = tl.zeros_like(like)
    return tl.where(condition, zeros + 1, zeros)


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


# -- torch tensors in host memory -----------------------------------------------------------------

#: the environment variable that sends torch CPU tensors to torch's own kernels when set to
#: "torch" (by default their steps run on numpy, below)
TORCH_CPU = "TENSORSTREAM_TORCH_CPU"

_VIEWABLE_TORCH = ("torch.float32", "torch.float64", "torch.bool", "torch.int64", "torch.int32")


class _NotViewable(Exception):
    """A tensor that has no numpy view (on a GPU, a dtype numpy lacks, or tracking grad)."""


def numpy_view(x: Any) -> np.ndarray | None:
    """``x``'s memory as a numpy array, without a copy: a float32/float64 numpy array as it is,
    a torch tensor in host memory (float32/64, bool or integer, not tracking grad) through
    ``Tensor.numpy``; None for anything else (GPU tensors, half precision, other backends)."""
    if isinstance(x, np.ndarray):
        return x if x.dtype in (np.float32, np.float64) else None
    if backend_of(x) == "pytorch":
        try:
            return _as_view(x)
        except _NotViewable:
            return None
    return None


class Carried:
    """A state that :func:`run` carries from call to call on the numpy route (``carry=True``):
    the numpy arrays its function computed (``arrays``), and the torch tensors on their memory
    once they are read (``tensors()``). From then on those tensors are the state, as a reader
    may change them (in place, or by replacing a dict's or a list's item)."""

    def __init__(self, arrays: Any):
        self.arrays = arrays

    def tensors(self, keep: bool = True) -> Any:
        """The state as tensors sharing the arrays' memory: made once and kept (``keep``;
        ``setdefault``, so that two threads reading at once get the same tensors), or made
        for one use and not kept (a step on torch's kernels: nothing a caller sees changes)."""
        made = self.__dict__.get("made")
        if made is None:
            made = as_tensors(self.arrays)
            if keep:
                made = self.__dict__.setdefault("made", made)
        return made

    def current(self) -> Any:
        """The state as it is now, for its counters and shapes: the tensors where they were
        made, else the arrays."""
        return self.__dict__.get("made", self.arrays)


def run(backend: str, function: Any, *args: Any, carry: bool = False) -> Any:
    """``function(*args)`` on ``backend`` (this thread only, without autograd), where torch
    tensors in host memory run on **numpy**, through views of their memory: the arguments'
    tensors (inside lists, tuples, dicts and dataclasses) are seen as numpy arrays, and the
    result's new arrays are handed back as torch tensors sharing their memory (numpy arrays
    passed in, such as a formulation's constants, stay numpy). No data is copied.

    The arithmetic is the same; what differs is each call's cost on the small arrays of a
    step (torch's ``1024 x 16`` by ``16 x 16`` product takes 33 us, numpy's 11; its
    elementwise operations 30-40% longer), which made a torch CPU step 1.5-1.9x numpy's
    (``benchmarks/bench_nmf.py --parts torch``). GPU tensors, half precision, tensors that
    track grad, and every call with ``TENSORSTREAM_TORCH_CPU=torch`` in the environment run
    on torch's own kernels, as a GPU does (the golden-results test runs that way).

    ``carry=True``: the first argument and the result's first item are a state carried from
    call to call (a learner's step). On the numpy route the new state comes back as a
    :class:`Carried`, its numpy arrays as computed, and a :class:`Carried` whose tensors
    nobody made goes in again as those arrays: a learner that keeps it and makes tensors only
    where they are read spares every step the two walks of its state (half of a torch step's
    overhead on the digits at 256 samples). On the other routes the state goes in as tensors
    and comes back as tensors.
    """
    first = args[0] if carry else None
    if isinstance(first, Carried) and "made" in first.__dict__:  # its tensors are the state
        first = first.current()
        args = (first, *args[1:])
    if backend == "pytorch" and os.environ.get(TORCH_CPU, "numpy") != "torch":
        import torch

        given = set()  # numpy arrays among the arguments stay numpy arrays in the result

        def view(x: Any) -> Any:
            if isinstance(x, np.ndarray):
                given.add(id(x))
                return x
            return _as_view(x)

        untouched = isinstance(first, Carried)
        walked = args[1:] if untouched else args
        try:
            views = _mapped(walked, (torch.Tensor, np.ndarray), view)
        except _NotViewable:
            pass
        else:
            with using("numpy"):
                result = function(*((first.arrays, *views) if untouched else views))

            def tensors(tree: Any) -> Any:
                return _mapped(tree, np.ndarray, lambda x: x if id(x) in given else _as_torch(x))

            if carry:
                return (Carried(result[0]), *tensors(tuple(result[1:])))
            return tensors(result)
    if isinstance(first, Carried):  # torch's kernels: tensors made for this call only
        args = (first.tensors(keep=False), *args[1:])
    with using(backend), no_grad(backend):
        return function(*args)


def as_tensors(tree: Any) -> Any:
    """``tree`` (lists, tuples, dicts, dataclasses) with its numpy arrays made torch tensors
    that share their memory (a :class:`Carried` state as it is read)."""
    return _mapped(tree, np.ndarray, _as_torch)


def take_rows(data: Any, rows: np.ndarray) -> Any:
    """``data[rows]`` for an integer array ``rows``; numpy arrays, and torch tensors in host
    memory through their numpy view, by ``np.take``, which gathers rows 2.4x faster than
    indexing (1,024 random rows of 54k x 64: 37 us against 89)."""
    if isinstance(data, np.ndarray):
        return np.take(data, rows, axis=0)
    if backend_of(data) != "pytorch":
        return data[rows]
    import torch

    view = numpy_view(data)
    if view is not None:
        return torch.from_numpy(np.take(view, rows, axis=0))
    return data[torch.as_tensor(rows, device=data.device)]


def _as_view(x: Any) -> np.ndarray:
    # the cheapest of torch's attributes first: this runs for every tensor of every step
    if not x.is_cpu or x.requires_grad or x.dtype not in _viewable_dtypes():
        raise _NotViewable
    return (x.resolve_neg() if x.is_neg() else x).numpy()


@functools.cache
def _viewable_dtypes() -> frozenset:
    """The torch dtypes of ``_VIEWABLE_TORCH`` (torch is imported only by its users)."""
    import torch

    return frozenset(getattr(torch, name.removeprefix("torch.")) for name in _VIEWABLE_TORCH)


def _as_torch(x: np.ndarray) -> Any:
    import torch

    # torch cannot share a read-only array's memory (a broadcast view, say): copied
    return torch.from_numpy(x if x.flags.writeable else x.copy())


_PLAIN = (int, float, str, type(None))
_PLAIN_TYPES = frozenset((*_PLAIN, bool))  # exact types: a subclass is walked


def _mapped(tree: Any, kind: type | tuple, convert: Any) -> Any:
    """``tree`` with every instance of ``kind`` that lists, tuples, dicts and dataclass
    instances hold replaced by ``convert(it)`` (the same object back where nothing changed;
    a step's state and results are walked in ~10 us)."""
    if type(tree) in _PLAIN_TYPES:  # most leaves: one set lookup
        return tree
    if isinstance(tree, kind):
        return convert(tree)
    if isinstance(tree, _PLAIN):
        return tree
    if isinstance(tree, (list, tuple)):
        if _PLAIN_TYPES.issuperset(map(type, tree)):  # counters: nothing to map
            return tree
        items = [_mapped(item, kind, convert) for item in tree]
        if all(new is old for new, old in zip(items, tree)):
            return tree
        if isinstance(tree, list):
            return items
        return type(tree)(*items) if hasattr(tree, "_fields") else type(tree)(items)
    if isinstance(tree, dict):
        if _PLAIN_TYPES.issuperset(map(type, tree.values())):  # a step's info: nothing to map
            return tree
        mapped = {key: _mapped(value, kind, convert) for key, value in tree.items()}
        return tree if all(mapped[k] is v for k, v in tree.items()) else mapped
    names = _field_names(type(tree))
    if not names:
        return tree
    changes = {}
    for name in names:
        old = getattr(tree, name)
        new = _mapped(old, kind, convert)
        if new is not old:
            changes[name] = new
    if not changes:
        return tree
    # the same instance with other arrays, without __init__ (frozen dataclasses too)
    copy = object.__new__(type(tree))
    copy.__dict__.update(tree.__dict__, **changes)
    return copy


@functools.cache
def _field_names(cls: type) -> tuple:
    """The fields of a dataclass (with instance dicts) that ``_mapped`` goes into; () else."""
    if not dataclasses.is_dataclass(cls) or not hasattr(cls, "__dict__") or \
            "__slots__" in cls.__dict__:
        return ()
    return tuple(field.name for field in dataclasses.fields(cls))


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
        # each library set directly: threadpoolctl's limit() first collects every library's
        # info (versions, paths), about half of this block's ~18 us per call
        for lib in controller.lib_controllers:
            lib.set_num_threads(n_threads)

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
