"""Cluster glue: an online learner's step on the workers of a Dask client.

``partial_fit(..., client=...)`` cuts the batch into one shard per worker (:func:`_shards`:
dask-backed data are read where their chunks are), and :func:`~..engine.distributed.
distributed_step` validates and codes each shard on its worker and adds up their sums; a step
that lost a worker is run again (it is a pure function of the state and the batch).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..core.backend import Carried, no_grad, using
from ..core.validation import feature_names, is_sparse
from ..engine import OnlineState
from ..engine.distributed import CONNECT_TIMEOUT, WorkerRead, distributed_step, lazy, scatter_to
from ._guards import undone_on_error
from ._labelled import _shape_of


class ClusterSteps:
    """``partial_fit``'s step on a cluster, for :class:`~._base.OnlineLearner`."""

    def _partial_fit_on(self, client: Any, X: Any, mask: Any, sample_dim: Any,
                        modes: Any) -> Any:
        """``partial_fit`` with the batch split across the workers of ``client``: the shards
        are validated and coded there (dask-backed data read there too)."""
        if is_sparse(X):
            raise TypeError("client= needs dense batches")
        names = None if self._fitted else feature_names(X)
        data, layout = self._unlabel(X, sample_dim, modes)
        mask = self._unlabel_mask(mask, layout, X)
        if mask is not None and _shape_of(mask) != tuple(data.shape):  # before it is cut
            raise ValueError(f"mask must have the shape of X {tuple(data.shape)}, got "
                             f"{_shape_of(mask)}")
        with undone_on_error(self, "partial_fit", note=False):  # fit notes it, once
            self._init_random_state()
            fresh = {}
            if not self._fitted:  # the first batch initialises the model here
                first, first_mask = self._validate_masked(_local(data), _local(mask))
                fresh = self._initial_state(first, mask=first_mask)
            new, info = self._sharded_step(client, data, mask, fresh)
        info = {**info, "workers": len(client.scheduler_info()["workers"])}
        # the shards' codes stay on the workers
        self._commit(new, info, fresh=fresh, names=names, layout=layout, codes=None)
        return self

    def _sharded_step(self, client: Any, data: Any, mask: Any,
                      fresh: dict) -> tuple[OnlineState, dict]:
        """The step on the batch ``data`` from the learner's state (or the ``fresh`` one of a
        first batch): shapes checked here, the shards validated on their workers."""
        fitted = {**{k: self.__dict__[k] for k in ("backend_", "_context", "sample_shape_",
                                                   "state_") if k in self.__dict__}, **fresh}
        sample_shape = fitted["sample_shape_"]
        if tuple(data.shape[1:]) != tuple(sample_shape):
            raise ValueError(f"X has samples of shape {tuple(data.shape[1:])}, but this "
                             f"learner was fitted on samples of shape {tuple(sample_shape)}")
        backend, state = fitted["backend_"], fitted["state_"]
        if isinstance(state, Carried):  # the shards' state: tensors, made for the step
            state = state.tensors(keep=False)
        checks = {"missing": self.missing, "backend": backend, "context": fitted["_context"],
                  "sample_shape": sample_shape, "nonnegative": self._nonnegative_data(),
                  "way_out": self._negative_way_out()}
        return self._cluster_step(client, data, mask, checks, backend, state)

    def _cluster_step(self, client: Any, X: Any, mask: Any, checks: dict, backend: str,
                      state: OnlineState, attempts: int = 5) -> tuple[OnlineState, dict]:
        """One step on the cluster. A step is a pure function of the state and the batch, so
        a step that lost a worker (and the shards it held) is simply run again."""
        lost = _lost_worker_errors()
        for attempt in range(attempts):
            try:
                n_workers = max(1, len(client.scheduler_info()["workers"]))
                shards = _shards(client, X, mask, n_workers)
                with using(backend), no_grad(backend):
                    return distributed_step(
                        client, self._algorithm(), shards, state, checks,
                        reinit_dead_atoms=getattr(self, "reinit_dead_atoms", True))
            except lost:
                if attempt == attempts - 1:
                    raise
                time.sleep(1.0 + attempt)  # the scheduler notices the lost worker meanwhile


def _lost_worker_errors() -> tuple:
    """What a step raises when a worker died under it (Dask's own retries exhausted, or the
    shards it held lost)."""
    from distributed import KilledWorker
    from distributed.comm.core import CommClosedError

    try:
        from distributed.client import FutureCancelledError
    except ImportError:  # older dask.distributed
        from concurrent.futures import CancelledError as FutureCancelledError
    return KilledWorker, CommClosedError, FutureCancelledError, OSError


def _local(X: Any) -> Any:
    """An array in this process (dask arrays read here, not through the cluster)."""
    if X is None:
        return None
    return WorkerRead(X).load() if lazy(X) else X


def _shards(client: Any, X: Any, mask: Any, n_workers: int) -> list:
    """The batch cut into one contiguous shard per worker: ``(data, mask, (start, end),
    worker)``. Dask-backed shards are cut between chunks and computed on their worker (each
    worker reads its own chunks: nothing moves between workers or through the driver);
    in-memory ones are scattered to their worker."""
    workers = sorted(client.scheduler_info()["workers"])[:max(1, n_workers)]
    if not workers:  # between a worker's death and its replacement the scheduler lists none:
        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT)  # no shard would be no batch
        workers = sorted(client.scheduler_info()["workers"])[:max(1, n_workers)]
    bounds = np.linspace(0, X.shape[0], min(len(workers), X.shape[0]) + 1).astype(int)
    if lazy(X):
        # cut between the batch's chunks, so that no two workers read the same chunk
        edges = np.cumsum((0, *X.chunks[0]))
        bounds = np.unique(edges[np.abs(edges[:, None] - bounds[None, :]).argmin(axis=0)])
    shards = []
    for worker, start, end in zip(workers, bounds[:-1], bounds[1:]):
        parts = [X[start:end], None if mask is None else mask[start:end]]
        parts = [part if part is None else (
            WorkerRead(part) if lazy(part)
            else scatter_to(client, part, worker)) for part in parts]
        shards.append((parts[0], parts[1], (int(start), int(end)), worker))
    return shards

