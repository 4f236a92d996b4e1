"""Data-parallel steps on a Dask cluster: the same step, its batch coded on several workers.

A step of :func:`~tensorstream.engine.loop.online_step` splits where the work splits: each
worker validates and codes its shard of the batch with the current dictionary (broadcast: the
loadings are small) and returns the shard's additive sums (code products, data-code products,
losses, gradients); the driver adds them up and takes the dictionary step
(:func:`~tensorstream.engine.loop.finish_step`), exactly as one process would on the whole
batch. The data never pass through the driver when they live in a chunked store (dask arrays:
each shard is computed where its chunks are read); in-memory arrays are scattered.

What crosses the network per step: the loadings out (``R sum I_k`` numbers per worker) and the
sums back (``R^2 + R prod I_k`` per worker, the size of the statistics), whatever the batch
size. Dask retries a shard whose worker died, so a killed worker costs a recomputation, not the
run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..core.backend import no_grad, using
from ..core.validation import check_batch, check_masked_batch
from .loop import Algorithm, add_sums, finish_step, usable_scale
from .state import OnlineState


def shard_sums(algorithm: Algorithm, X: Any, mask: Any, loadings: list, scale: float,
               checks: dict, rows: tuple[int, int]) -> dict:
    """On a worker: validate and code one shard, return its sums.

    ``checks`` are :func:`~tensorstream.core.validation.check_masked_batch`'s keyword
    arguments (backend, context, sample shape, sign, missing entries); ``rows`` the shard's
    position in the batch, named in errors.
    """
    try:
        X, mask = check_masked_batch(X, mask, **checks)
    except (TypeError, ValueError) as error:
        raise type(error)(f"{error} (in rows {rows[0]} to {rows[1] - 1} of the batch)") from None
    with using(checks["backend"]), no_grad(checks["backend"]):
        coded = algorithm.encode(X, loadings, scale, mask)
        return algorithm.batch_sums(X, coded, mask, loadings, scale)


def shard_scale_sums(algorithm: Algorithm, X: Any, checks: dict) -> tuple[float, float] | None:
    """On a worker: the shard's part of a first batch's data scale."""
    X = check_batch(X, backend=checks["backend"], context=checks["context"],
                    sample_shape=checks["sample_shape"], nonnegative=checks["nonnegative"])
    with using(checks["backend"]):
        return algorithm.scale_sums(X)


def distributed_step(client: Any, algorithm: Algorithm, shards: list, state: OnlineState,
                     checks: dict) -> tuple[OnlineState, dict]:
    """One step of ``algorithm`` on a batch held as ``shards`` on the cluster.

    Parameters
    ----------
    client : dask.distributed.Client
    algorithm : Algorithm
    shards : list of (X, mask, (first_row, end_row), worker)
        The batch's shards, in order: arrays, dask arrays or futures (``mask`` may be None),
        and the address of the worker that holds (or reads) it (None: any).
    state : OnlineState
        The state before the step (its loadings are broadcast to the workers).
    checks : dict
        Validation of the shards on the workers (see :func:`shard_sums`).

    Returns
    -------
    (OnlineState, dict)
        The state after the step and the step's info, as :func:`online_step` gives them.
    """
    scale = state.scale
    if state.n_steps == 0:
        parts = client.gather([client.submit(shard_scale_sums, algorithm, X, checks, pure=False,
                                             **_on(worker))
                               for X, _, _, worker in shards])
        if parts[0] is not None:
            total, count = np.sum([p[0] for p in parts]), np.sum([p[1] for p in parts])
            scale = usable_scale(float(total) / float(count))
    loadings = client.scatter(list(state.loadings), broadcast=True, hash=False)
    futures = [client.submit(shard_sums, algorithm, X, mask, loadings, scale, checks, rows,
                             pure=False, **_on(worker))
               for X, mask, rows, worker in shards]
    sums = add_sums(client.gather(futures))
    return finish_step(algorithm, state, sums, scale)


def _on(worker: str | None) -> dict:
    """Run where the shard is (any other worker if that one is gone)."""
    return {} if worker is None else {"workers": [worker], "allow_other_workers": True}


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
        return client, False
    if isinstance(client, str) and client == "local":
        import os

        # worker processes start with one BLAS/OpenMP thread (Dask's nanny sets it)
        cluster = LocalCluster(n_workers=n_workers or os.cpu_count() or 1,
                               threads_per_worker=1, processes=True, dashboard_address=None)
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
        yield client
    finally:
        if owned:
            cluster = getattr(client, "cluster", None)
            client.close()
            if cluster is not None:
                cluster.close()
