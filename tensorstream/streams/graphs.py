"""Graphs behind the random-walk streams: adjacency matrices (given, a grid torus, networkx),
their checks, and a fast sampler of random neighbours."""

from __future__ import annotations

import bisect
import math
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from .base import _check_int

__all__ = []


# -- graphs ---------------------------------------------------------------------------------------


def _torus_adjacency(shape: tuple[int, ...]) -> sp.csr_array:
    """Adjacency of the periodic grid (torus) ``shape``; ``(n,)`` is the cycle on n nodes.

    Every node has one edge per axis and direction (``2 * len(shape)``, counted with multiplicity:
    on an axis of length 2 both directions reach the same node, of length 1 the node itself), so
    the graph is regular and its random walk has the uniform stationary distribution.
    """
    n = math.prod(shape)
    coords = np.indices(shape).reshape(len(shape), -1)
    rows, cols = [], []
    for d, size in enumerate(shape):
        for sign in (1, -1):
            moved = coords.copy()
            moved[d] = (moved[d] + sign) % size
            rows.append(np.arange(n))
            cols.append(np.ravel_multi_index(moved, shape))
    data = np.ones(2 * len(shape) * n)
    A = sp.coo_array((data, (np.concatenate(rows), np.concatenate(cols))), shape=(n, n))
    return sp.csr_array(A)  # duplicates summed


def _grid_shape(n: int, grid_shape: Any) -> tuple[int, ...]:
    if grid_shape is None:
        side = math.isqrt(n)
        if side * side != n:
            raise ValueError(f"graph='grid' needs grid_shape when the number of samples ({n}) "
                             f"is not a perfect square")
        return (side, side)
    shape = tuple(_check_int(s, "grid_shape entries") for s in np.atleast_1d(grid_shape))
    if math.prod(shape) != n:
        raise ValueError(f"grid_shape {shape} has {math.prod(shape)} nodes but there are "
                         f"{n} samples")
    return shape


def _adjacency(graph: Any, n: int | None = None, grid_shape: Any = None,
               name: str = "graph") -> sp.csr_array:
    """A validated symmetric nonnegative adjacency matrix (CSR, sorted, no explicit zeros).

    ``graph`` is ``"cycle"``, ``"grid"`` (both on ``n`` nodes), a networkx graph (nodes in
    ``graph.nodes`` order, edge attribute ``"weight"``, default 1) or a square array / scipy
    sparse matrix.
    """
    if isinstance(graph, str):
        if n is None:
            raise ValueError(f"{name}={graph!r} needs a number of nodes")
        if graph == "cycle":
            return _torus_adjacency((n,))
        if graph == "grid":
            return _torus_adjacency(_grid_shape(n, grid_shape))
        raise ValueError(f"{name} must be 'cycle', 'grid', an adjacency matrix or a networkx "
                         f"graph, got {graph!r}")
    if type(graph).__module__.startswith("networkx"):
        import networkx as nx

        if graph.is_directed():
            raise ValueError(f"{name} must be an undirected networkx graph")
        if graph.number_of_nodes() == 0:
            raise ValueError(f"{name} has no nodes")
        A = sp.csr_array(nx.to_scipy_sparse_array(graph, nodelist=list(graph.nodes),
                                                  weight="weight", dtype=float, format="csr"))
    elif sp.issparse(graph):
        A = sp.csr_array(graph, dtype=float)
    else:
        try:
            dense = np.asarray(graph, dtype=float)
        except (TypeError, ValueError) as error:
            raise TypeError(f"{name} must be 'cycle', 'grid', an adjacency matrix or a networkx "
                            f"graph, got {type(graph).__name__}") from error
        if dense.ndim != 2:
            raise ValueError(f"{name} as an adjacency matrix must be 2-D, got shape {dense.shape}")
        A = sp.csr_array(dense)
    return _check_adjacency(A, n, name)


def _check_adjacency(A: sp.csr_array, n: int | None, name: str) -> sp.csr_array:
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square adjacency matrix, got shape {A.shape}")
    if n is not None and A.shape[0] != n:
        raise ValueError(f"{name} has {A.shape[0]} nodes but X has {n} samples along its "
                         f"sample axis; they must match")
    A.sum_duplicates()
    if not np.all(np.isfinite(A.data)):
        raise ValueError(f"{name} has NaN or infinite edge weights")
    if np.any(A.data < 0):
        raise ValueError(f"{name} has negative edge weights")
    A.eliminate_zeros()
    if A.nnz == 0:
        raise ValueError(f"{name} has no edges")
    if abs(A - A.T).max() > 1e-12 * A.data.max():
        raise ValueError(f"{name} must be symmetric (an undirected graph)")
    A.sort_indices()
    return A


def _check_connected(A: sp.csr_array, name: str) -> None:
    n_components, _ = connected_components(A, directed=False)
    if n_components > 1:
        raise ValueError(f"{name} is not connected ({n_components} components, isolated nodes "
                         f"included): the random walk would not be irreducible")


class _RowSampler:
    """Draw a column ``u`` of row ``v`` with probability ``W[v, u] / sum_u W[v, u]``.

    All rows share one increasing array ``G = row + within-row cumulative share`` (so the entries
    of row ``v`` lie in ``(v, v + 1]``, its last one exactly ``v + 1``): a draw for row ``v`` with a
    uniform ``u`` is the first entry of ``G`` above ``v + u``, one binary search, vectorized over
    many rows at once by ``searchsorted`` or done in pure Python by ``bisect`` on a single chain.
    Both give the same column for the same ``u``.
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, weights: np.ndarray):
        n = len(indptr) - 1
        counts = np.diff(indptr)
        rows = np.repeat(np.arange(n), counts)
        cumulative = np.cumsum(weights)
        before = np.concatenate(([0.0], cumulative))[indptr[:-1]]
        totals = np.concatenate(([0.0], cumulative))[indptr[1:]] - before
        safe = np.where(totals > 0, totals, 1.0)  # rows without weight are never sampled
        share = (cumulative - before[rows]) / safe[rows]
        last = indptr[1:][counts > 0] - 1
        share[last] = 1.0  # exact row ends: a draw never leaves its row
        self.indices = indices
        self.last = indptr[1:] - 1
        self.grid = rows + np.minimum(share, 1.0)
        self._lists: tuple | None = None

    def sample(self, rows: np.ndarray, u: np.ndarray) -> np.ndarray:
        pos = np.searchsorted(self.grid, rows + u, side="right")
        return self.indices[np.minimum(pos, self.last[rows])]

    def sample_one(self, row: int, u: float) -> int:
        if self._lists is None:  # Python lists: scalar access is several times faster
            self._lists = (self.grid.tolist(), self.indices.tolist(), self.last.tolist())
        grid, indices, last = self._lists
        pos = bisect.bisect_right(grid, row + u)
        return indices[min(pos, last[row])]


def _walk_sampler(A: sp.csr_array) -> _RowSampler:
    """The simple random walk on the weighted graph ``A``: ``P(v, u) = A[v, u] / d(v)``."""
    return _RowSampler(A.indptr, A.indices, A.data)
