"""Data-parallel steps on a Dask cluster: the same step, its batch coded on several workers.

A step of :func:`~tensorstream.engine.loop.online_step` splits where the work splits: each
worker validates and codes its shard of the batch with the current dictionary (sent with the
shard's task: the loadings are small, and a task's arguments are sent again if its worker dies,
where a broadcast to a worker that had just died waited for it for ever) and returns the
shard's additive sums (code products, data-code products, losses, gradients); the driver adds
them up and takes the dictionary step (:func:`~tensorstream.engine.loop.finish_step`), exactly
as one process would on the whole batch. A step of several rounds
(:meth:`~tensorstream.engine.loop.Algorithm.alternate`) is one such map-reduce per round, the
shards' codes kept on their workers in between. The data never pass through the driver when
they live in a chunked store: a dask-backed shard travels as its task graph
(:class:`WorkerRead`, a few kilobytes naming the store's chunks and the rows to take) and the
worker reads it itself; in-memory arrays are scattered.

The full passes of a finite data set (:class:`SpreadRows`: the full gradient, the objective and
the snapshot codes of :class:`~tensorstream.VarianceReducedMF`) are a map-reduce: each worker
reduces the chunks of its contiguous block of rows, the driver adds the workers' sums.

What crosses the network per step (and round): the loadings out (``R sum I_k`` numbers per
worker) and the sums back (``R^2 + R prod I_k`` per worker, the size of the statistics),
whatever the batch size. Dask retries a shard whose worker died, so a killed worker costs a
recomputation, not the run.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorly as tl

from ..core.backend import no_grad, using
from ..core.compiled import from_step
from ..core.validation import check_masked_batch, check_not_too_small, largest_checked, overflows
from .loop import (
    _TOO_LARGE,
    Algorithm,
    add_sums,
    arithmetic_errors,
    code_activity,
    finish_step,
    step_error,
    worst_explained,
)
from .state import OnlineState


class WorkerRead:
    """A lazily read (dask-backed) array that the worker running a task reads itself.

    Passed to ``client.submit`` as an argument it is not a dask collection, so the scheduler
    does not turn it into tasks of its own (which it would place, and move, as it likes): it
    travels as its task graph (the store's chunk reads and the rows to take, kilobytes) and
    :meth:`load` computes it in the worker's thread with the synchronous scheduler. Workers
    whose shards share a chunk of the store each read that chunk (a read, never a transfer).
    """

    def __init__(self, array: Any):
        self.array = array
        self.shape = tuple(array.shape)

    def load(self) -> np.ndarray:
        """The array's values, read here (the scheduler is passed, not set: dask's
        configuration is global and the worker's other threads share it)."""
        return np.asarray(self.array.compute(scheduler="sync"))

    def __getitem__(self, key: Any) -> np.ndarray:
        """Some of the array's values, read here (a chunk of a pass)."""
        return WorkerRead(self.array[key]).load()


def local(X: Any) -> Any:
    """``X`` in this process: a :class:`WorkerRead` is read, anything else is kept."""
    return X.load() if isinstance(X, WorkerRead) else X


def lazy(X: Any) -> bool:
    """Whether ``X`` is a dask array (read where it is computed)."""
    return type(X).__module__.startswith("dask")


def shard_coded(algorithm: Algorithm, X: Any, mask: Any, loadings: list, scale: float,
                checks: dict, rows: tuple[int, int], kernels: int) -> tuple:
    """On a worker: validate and code one shard; ``(X, codes, sums)``, kept on the worker
    (further rounds move its codes, :func:`shard_recoded`).

    ``checks`` are :func:`~tensorstream.core.validation.check_masked_batch`'s keyword
    arguments (backend, context, sample shape, sign, missing entries); ``rows`` the shard's
    position in the batch, named in errors; ``kernels`` the step number the compiled kernels
    are allowed by (:func:`~tensorstream.core.compiled.from_step`: one process's rule, sent
    along, since a worker's own context does not know the step).
    """
    try:
        X, mask = check_masked_batch(local(X), local(mask), **checks)
    except (TypeError, ValueError) as error:
        raise type(error)(f"{error} (in the shard of rows {rows[0]} to {rows[1] - 1} of the "
                          f"batch; sample numbers count from its first row)") from None
    # what online_step's checks read from the whole batch: its largest entry (a maximum over
    # the shards, taken by the driver) and whether its squares overflow (a count of shards)
    extent = {"largest": largest_checked(X), "overflows": int(overflows(X))}
    with using(checks["backend"]), no_grad(checks["backend"]), from_step(kernels):
        try:
            coded = algorithm.encode(X, loadings, scale, mask)
            sums = algorithm.batch_sums(X, coded, mask, loadings, scale)
        except arithmetic_errors() as error:  # named as online_step names it
            raise step_error(error, bool(extent["overflows"]), extent["largest"]) from None
        return X, coded, {**sums, **code_activity(algorithm, coded.codes, scale), **extent}


def shard_recoded(algorithm: Algorithm, kept: tuple, loadings: list, scale: float,
                  backend: str, kernels: int) -> tuple:
    """On a worker: a shard's codes moved towards the round's ``loadings``
    (:meth:`Algorithm.recode`); ``(X, codes, sums)`` as :func:`shard_coded` gives them."""
    X, coded, _ = kept
    with using(backend), no_grad(backend), from_step(kernels):
        return (X, *algorithm.recode(X, coded, loadings, scale))


def sums_of(kept: tuple) -> dict:
    """A shard's sums, out of what :func:`shard_coded` keeps on the worker."""
    return kept[2]


def shard_worst(algorithm: Algorithm, X: Any, mask: Any, loadings: list, scale: float,
                checks: dict, k: int, kernels: int) -> tuple[np.ndarray, Any]:
    """On a worker: the shard's ``k`` worst-explained samples and their losses (largest
    first, ties in row order), the candidates that dead atoms are re-initialised from."""
    X, mask = check_masked_batch(local(X), local(mask), **checks)
    with using(checks["backend"]), no_grad(checks["backend"]), from_step(kernels):
        coded = algorithm.encode(X, loadings, scale, mask)
        losses = np.asarray(tl.to_numpy(coded.losses))
        return losses[np.argsort(-losses, kind="stable")[:k]], worst_explained(coded, k)


def _batch_worst(client: Any, algorithm: Algorithm, shards: list, loadings: Any, scale: float,
                 checks: dict, k: int, kernels: int) -> Any:
    """The batch's ``k`` worst-explained samples from its shards' own ``k`` worst: a stable
    sort of the shards' lists, in shard order, is the one-process order (ties by row)."""
    parts = client.gather([client.submit(shard_worst, algorithm, X, mask, loadings, scale,
                                         checks, k, kernels, pure=False, **_on(worker))
                           for X, mask, _, worker in shards])
    losses = np.concatenate([losses for losses, _ in parts])
    samples = tl.concatenate([tl.tensor(worst) for _, worst in parts], axis=0)
    return tl.stack([samples[int(j)] for j in np.argsort(-losses, kind="stable")[:k]])


def shard_scale_sums(algorithm: Algorithm, X: Any, mask: Any,
                     checks: dict) -> tuple[float, float] | None:
    """On a worker: the shard's part of a first batch's data scale (observed entries)."""
    X, mask = check_masked_batch(local(X), local(mask), **checks)
    with using(checks["backend"]):
        return algorithm.scale_sums(X, mask)


def distributed_step(client: Any, algorithm: Algorithm, shards: list, state: OnlineState,
                     checks: dict, reinit_dead_atoms: bool = True) -> tuple[OnlineState, dict]:
    """One step of ``algorithm`` on a batch held as ``shards`` on the cluster.

    Parameters
    ----------
    client : dask.distributed.Client
    algorithm : Algorithm
    shards : list of (X, mask, (first_row, end_row), worker)
        The batch's shards, in order: arrays, dask arrays or futures (``mask`` may be None),
        and the address of the worker that holds (or reads) it (None: any).
    state : OnlineState
        The state before the step (its loadings go to the workers with the shards' tasks).
    checks : dict
        Validation of the shards on the workers (see :func:`shard_coded`).
    reinit_dead_atoms : bool
        Re-initialise dead atoms from the batch's worst-explained samples, as one process
        would (the shards are coded again for them, only at a step that re-initialises atoms).

    Returns
    -------
    (OnlineState, dict)
        The state after the step and the step's info, as :func:`online_step` gives them.
    """
    algorithm = algorithm.at_state(state)  # as online_step codes
    kernels = state.n_steps  # online_step's gate, sent to the workers with each task
    scale = state.scale
    if state.n_steps == 0:  # the first batch's scale, as Algorithm.data_scale on one process
        parts = client.gather([client.submit(shard_scale_sums, algorithm, X, mask, checks,
                                             pure=False, **_on(worker))
                               for X, mask, _, worker in shards])
        sums = None if parts[0] is None else (float(np.sum([p[0] for p in parts])),
                                              float(np.sum([p[1] for p in parts])))
        scale = algorithm.first_scale(sums, like=state.loadings[0])
    loadings = list(state.loadings)
    kept = [client.submit(shard_coded, algorithm, X, mask, loadings, scale, checks, rows,
                          kernels, pure=False, **_on(worker))
            for X, mask, rows, worker in shards]

    extent = {}  # the batch's largest entry, from its shards' first sums

    def total() -> dict:
        parts = client.gather([client.submit(sums_of, part, pure=False) for part in kept])
        if "largest" in parts[0]:  # the first round's: a maximum, not a sum
            extent["largest"] = max(part["largest"] for part in parts)
            parts = [{k: v for k, v in part.items() if k != "largest"} for part in parts]
        return add_sums(parts)

    def recode(at: list) -> dict:
        nonlocal kept
        kept = [client.submit(shard_recoded, algorithm, part, list(at), scale,
                              checks["backend"], kernels, pure=False, **_on(worker))
                for part, (_, _, _, worker) in zip(kept, shards)]
        return total()

    with from_step(state.n_steps):  # the dictionary steps here, as in online_step
        first = total()
        # online_step's checks, on the batch's largest entry (a tensor of its dtype given)
        check_not_too_small(state.loadings[0], largest=extent["largest"])
        overflowed = first.pop("overflows") > 0
        if not np.isfinite(first["loss"]) and overflowed:
            raise ValueError(_TOO_LARGE)
        try:
            sums = algorithm.alternate(first, state.loadings, recode)
            return finish_step(algorithm, state, sums, scale,
                               candidates=lambda k: _batch_worst(client, algorithm, shards,
                                                                 loadings, scale, checks, k,
                                                                 kernels),
                               reinit_dead_atoms=reinit_dead_atoms)
        except arithmetic_errors() as error:
            raise step_error(error, overflowed, extent["largest"]) from None


class SpreadRows:
    """The rows of a finite data set spread over the workers, for full passes as map-reduces.

    The ``n`` rows are cut into ``chunk_size`` chunks (the chunks one process reads), and the
    chunks into one contiguous block per worker: a worker's block is scattered to it once
    (in-memory data) or read by it on each pass (dask-backed data, :class:`WorkerRead`).

    Parameters
    ----------
    client : dask.distributed.Client
    X : array of shape (n_samples, ...)
        numpy, torch or dask (samples first).
    chunk_size : int
        Rows per chunk of a pass.
    """

    def __init__(self, client: Any, X: Any, chunk_size: int):
        self.client = client
        n = int(X.shape[0])
        workers = sorted(client.scheduler_info()["workers"])
        n_chunks = -(-n // chunk_size)
        cuts = np.linspace(0, n_chunks, min(len(workers), n_chunks) + 1).astype(int)
        bounds = np.minimum(cuts * chunk_size, n)
        self.blocks = []
        for worker, start, end in zip(workers, bounds[:-1], bounds[1:]):
            part = X[int(start):int(end)]
            data = WorkerRead(part) if lazy(part) else client.scatter(
                part, workers=[worker], hash=False)
            self.blocks.append((data, (int(start), int(end)), worker))

    def map_reduce(self, function: Any, chunk_size: int, args: tuple, reading: dict) -> list:
        """Each worker's ``sum over its chunks of function(chunk, *args)``, in row order.

        ``reading`` holds :class:`~tensorstream.finite.variance_reduction.FiniteData`'s
        ``backend``, ``context`` and ``nonnegative`` (each chunk is validated and converted
        on its worker).
        """
        futures = [self.client.submit(block_sum, data, rows, function, chunk_size, args,
                                      reading, pure=False, **_on(worker))
                   for data, rows, worker in self.blocks]
        return self.client.gather(futures)

    def release(self) -> None:
        """Forget the scattered blocks (the workers free them)."""
        for data, _, _ in self.blocks:
            if hasattr(data, "release"):
                data.release()
        self.blocks = []


def block_sum(X: Any, rows: tuple[int, int], function: Any, chunk_size: int, args: tuple,
              reading: dict) -> Any:
    """On a worker: the sum of ``function(chunk, *args)`` over the chunks of its block (rows
    ``rows`` of the data set, named in errors), read and validated chunk by chunk."""
    from ..finite.variance_reduction import FiniteData

    data = FiniteData(X, **reading)  # a WorkerRead block is read here, chunk by chunk
    try:
        with using(reading["backend"]), no_grad(reading["backend"]):
            return data.map_reduce(function, chunk_size, *args)
    except (TypeError, ValueError) as error:
        raise type(error)(f"{error} (in rows {rows[0]} to {rows[1] - 1} of X)") from None


def scatter_to(client: Any, part: Any, worker: str) -> Any:
    """``part`` scattered to ``worker``, or to a live worker when ``worker`` has died since the
    scheduler listed it: the scheduler, which notices a death within milliseconds, then
    refuses the scatter (a ``KeyError`` naming the address; a failed connection while it has
    not noticed yet). A worker killed just before a step cost the whole fit that way, not a
    recomputation. The shard's tasks may run anywhere (:func:`_on`)."""
    try:
        return client.scatter(part, workers=[worker], hash=False)
    except (KeyError, OSError):
        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT)
        return client.scatter(part, hash=False)


def _on(worker: str | None) -> dict:
    """Run where the shard is (any other worker if that one is gone)."""
    return {} if worker is None else {"workers": [worker], "allow_other_workers": True}


def package_on_worker() -> dict:
    """On a worker: this package's version there, or the module it fails to import.

    Self-contained (its imports are inside), and sent by value (:func:`by_value`): it runs on
    a worker that lacks the package.
    """
    import importlib
    import sys

    try:  # the version's own module: importing it imports the package (and what that needs)
        module = importlib.import_module("tensorstream._version")
    except ImportError as error:
        return {"missing": error.name or "tensorstream", "error": f"{error}"}
    return {"version": getattr(module, "__version__", "unknown"),
            "python": sys.version.split()[0]}


def by_value(function: Any) -> Any:
    """A copy of the self-contained ``function`` that pickles by value: its code travels
    with it instead of a reference to this package (which a worker may lack)."""
    import builtins
    import types

    return types.FunctionType(function.__code__, {"__builtins__": builtins}, function.__name__)


def workers_report(client: Any) -> dict:
    """What each worker of ``client`` has: ``{address: {"threads", "memory", "name",
    "version" (and "python"), or "missing" and "error", or "unreachable"}}`` (memory in bytes,
    0 when unlimited; "unreachable": a worker that did not answer, e.g. one just killed)."""
    workers = client.scheduler_info(n_workers=-1)["workers"]
    packages = client.run(by_value(package_on_worker), on_error="return")
    report = {}
    for address, worker in sorted(workers.items()):
        package = packages.get(address, {"unreachable": "no answer"})
        if isinstance(package, ImportError):  # it could not even read the probe
            package = {"missing": package.name or "?",
                       "error": f"{type(package).__name__}: {package}"}
        elif isinstance(package, BaseException):
            package = {"unreachable": f"{type(package).__name__}: {package}"}
        report[address] = {"name": worker.get("name", address),
                           "threads": int(worker.get("nthreads", 0)),
                           "memory": int(worker.get("memory_limit") or 0), **package}
    return report


#: the workers of each client found to have the package (checked once each)
_CHECKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def check_workers(client: Any) -> None:
    """Raise a clear ``ImportError`` naming the missing module if a worker of ``client``
    cannot import this package. Checked before a worker's first task: a worker that lacks
    the package cannot even read the tasks it is sent (it drops off the cluster instead of
    failing them). Workers already checked are not asked again."""
    addresses = set(client.scheduler_info(n_workers=-1)["workers"])
    if addresses <= _CHECKED.get(client, set()):
        return
    report = workers_report(client)
    missing = {address: worker for address, worker in report.items() if "missing" in worker}
    if missing:
        address, worker = next(iter(missing.items()))
        raise ImportError(
            f"{len(missing)} Dask worker(s) cannot import {worker['missing']!r} (e.g. "
            f"{address}: {worker['error']}): install tensorstream, with the same version and "
            f"dependencies as the driver, on every worker", name=worker["missing"])
    _CHECKED[client] = _CHECKED.get(client, set()) | {
        address for address, worker in report.items() if "version" in worker}


#: a client's statuses once it can no longer run anything
_CLOSED = ("closing", "closed", "failed")

#: seconds to wait for a scheduler before giving up with a clear error
CONNECT_TIMEOUT = 10.0


def connect(client: Any, timeout: float | None = None,
            n_workers: int | None = None) -> tuple[Any, bool]:
    """A ``dask.distributed.Client`` from ``client``: a client (used as is), a scheduler
    address (connected, within ``timeout`` seconds), or ``"local"`` (a ``LocalCluster`` of
    ``n_workers`` single-threaded worker processes, default one per core). Returns
    ``(client, owned)``; an owned client (and its cluster) is the caller's to close.
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ImportError("client= needs dask.distributed: pip install "
                          "'tensorstream[dask]'") from None
    if isinstance(client, Client):
        if client.status in _CLOSED:  # its calls would fail deep inside distributed
            raise ValueError(f"client: the Dask client is {client.status} (closed, or its "
                             f"cluster was); pass an open client, a scheduler address or "
                             f"'local'")
        return client, False
    if isinstance(client, str) and client == "local":
        import os

        # worker processes start with one BLAS/OpenMP thread (Dask's nanny sets it); the
        # dashboard on a free port: dashboard_address=None still takes 8787 (dask/distributed
        # issue 8136), and a second cluster then warns that the port is in use
        cluster = LocalCluster(n_workers=n_workers or os.cpu_count() or 1,
                               threads_per_worker=1, processes=True, dashboard_address=":0")
        return Client(cluster), True
    if isinstance(client, str):
        timeout = CONNECT_TIMEOUT if timeout is None else timeout
        try:
            return Client(client, timeout=timeout), True
        except (OSError, TimeoutError) as error:
            raise ValueError(f"client: cannot reach the Dask scheduler at {client!r} within "
                             f"{timeout:g} s ({error})") from None
    raise TypeError(f"client must be a dask.distributed.Client, a scheduler address or "
                    f"'local', got {client!r}")


@contextlib.contextmanager
def connected(client: Any, n_workers: int | None = None) -> Iterator[Any]:
    """:func:`connect` for the block: a client this call opened is closed afterwards, with its
    cluster."""
    client, owned = connect(client, n_workers=n_workers)
    try:
        check_workers(client)
        yield client
    finally:
        if owned:
            cluster = getattr(client, "cluster", None)
            client.close()
            if cluster is not None:
                cluster.close()
