"""Sample streams: i.i.d., Markov-chain and MCMC sources of mini-batches for the online learners.

A *stream* is an iterable of mini-batches with the samples on the first axis, shape
``(b, I_1, ..., I_n)``; every learner's ``fit`` consumes it batch by batch. The convergence
theory of online CP-dictionary learning (Lyu, Strohmeier & Needell, assumption A1) holds for
samples ``X_t = phi(Y_t)`` read along an irreducible, aperiodic Markov chain ``Y_t`` on a finite
state space with stationary distribution ``pi``; the learned dictionary then minimises the
*expected* loss ``f(D) = sum_y pi(y) loss(phi(y), D)``. The streams here make such chains
first-class.

Conventions shared by every stream
----------------------------------
* **Re-iterable, continuing.** Each ``iter(stream)`` continues from the stream's current random
  generator and chain state and yields at most ``n_steps`` batches (forever when ``None``), so
  ``learner.fit(stream)`` twice sees fresh batches. :meth:`Stream.reset` rewinds to the state
  right after construction; :meth:`Stream.get_state` / :meth:`Stream.set_state` checkpoint and
  resume exactly.
* **States, then samples.** :meth:`Stream.next_states` draws what is behind the next batch
  (the sample indices of a stream over a data array, homomorphisms for the motif sampler, spin
  configurations for :class:`Ising`) without building it; :meth:`Stream.to_samples` builds the
  batch; :meth:`Stream.next_batch` does both.
* **Data arrays of any kind.** Streams over a data array ``X`` index it with an integer index
  array along the sample axis: numpy arrays, torch tensors (batches stay on their device),
  ``xarray.DataArray`` (``.isel``; ``axis`` may be a dimension name) and dask arrays (indexed
  lazily, only the touched chunks are computed, per batch).
* **Known stationary distributions.** Finite streams return ``pi`` from
  :meth:`Stream.stationary_distribution`, a 1-D numpy array summing to one over the stream's
  sample space :meth:`Stream.sample_space` (for streams over a data array: the indices of its
  sample axis), so the expected loss is exact: :func:`expected_loss`.
* **Markov chains.** :class:`MarkovStream` subclasses expose ``state`` (the current chain state),
  :meth:`MarkovStream.transition_matrix` and :meth:`MarkovStream.state_distribution` (``pi P =
  pi`` over chain states). The samples of a chain are ``Y_0, Y_1, Y_2, ...``: the first batch
  starts with the start state ``Y_0``.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import math
import numbers
import operator
from collections.abc import Iterator
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.special import expit

__all__ = [
    "Epochs",
    "IIDSlices",
    "Ising",
    "LazyRandomWalk",
    "MarkovStream",
    "Metropolis",
    "RandomPatches",
    "Restarted",
    "SlidingWindow",
    "Stream",
    "Thinned",
    "empirical_distribution",
    "expected_loss",
    "integrated_autocorrelation_time",
    "total_variation",
]


# -- argument checks -----------------------------------------------------------------------------


def check_random_state(random_state: Any) -> np.random.Generator:
    """A ``numpy.random.Generator`` from an int seed, ``None`` or a Generator (used as is)."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None or (isinstance(random_state, numbers.Integral)
                                and not isinstance(random_state, bool)):
        if random_state is not None and random_state < 0:
            raise ValueError(f"random_state must be a nonnegative int, got {random_state}")
        return np.random.default_rng(random_state)
    raise TypeError(f"random_state must be None, an int or a numpy.random.Generator, "
                    f"got {type(random_state).__name__}")


def _check_int(value: Any, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def _check_holding(holding: Any) -> float:
    if isinstance(holding, bool) or not isinstance(holding, numbers.Real):
        raise TypeError(f"holding must be a probability in [0, 1), got {holding!r}")
    if not 0.0 <= holding < 1.0:
        raise ValueError(f"holding must be a probability in [0, 1), got {holding}")
    return float(holding)


def _check_real(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise TypeError(f"{name} must be a finite real number, got {value!r}")
    return float(value)


# -- data access ---------------------------------------------------------------------------------


def _is_xarray(X: Any) -> bool:
    return type(X).__module__.startswith("xarray")


def _is_torch(X: Any) -> bool:
    return type(X).__module__.startswith("torch")


def _is_dask(X: Any) -> bool:
    return type(X).__module__.startswith("dask")


def _check_data(X: Any, name: str = "X") -> None:
    if not (hasattr(X, "shape") and hasattr(X, "ndim")):
        raise TypeError(f"{name} must be an array (numpy, torch, xarray, dask, ...), "
                        f"got {type(X).__name__}")
    if X.ndim < 1:
        raise ValueError(f"{name} must have at least one axis, got a 0-d array")


def _sample_axis(X: Any, axis: Any) -> int | str:
    """``axis`` as a nonnegative int (or a dimension name for xarray input)."""
    if _is_xarray(X):
        if isinstance(axis, str):
            if axis not in X.dims:
                raise ValueError(f"axis {axis!r} is not a dimension of X {tuple(X.dims)}")
            return axis
        return X.dims[_sample_axis(X.data, axis)]
    if isinstance(axis, str):
        raise TypeError("axis may be a dimension name only for xarray.DataArray input, "
                        f"got axis={axis!r} for {type(X).__name__}")
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"axis must be an int, got {axis!r}")
    if not -X.ndim <= axis < X.ndim:
        raise ValueError(f"axis {axis} is out of range for X with {X.ndim} dimensions")
    return int(axis) % X.ndim


def _axis_size(X: Any, axis: int | str) -> int:
    return int(X.sizes[axis]) if _is_xarray(X) else int(X.shape[axis])


def _move_first(X: Any, axis: int | str) -> Any:
    """``X`` with its sample axis first (same container type)."""
    if _is_xarray(X):
        return X.transpose(axis, ...)
    if _is_torch(X):
        return X.movedim(axis, 0)
    return np.moveaxis(X, axis, 0) if axis else X


def _gather(X: Any, idx: np.ndarray, axis: int | str) -> Any:
    """``X`` indexed by the integer array ``idx`` along ``axis``, that axis moved first.

    One fancy-indexing call per batch whatever its size; dask (also under xarray) is indexed
    lazily and then computed, so only the chunks holding the requested samples are read.
    """
    idx = np.asarray(idx, dtype=np.intp)
    if _is_xarray(X):
        out = X.isel({axis: idx}).transpose(axis, ...)
        return out.compute() if _is_dask(out.data) else out
    if _is_torch(X):
        import torch

        index = torch.as_tensor(idx, dtype=torch.long, device=X.device)
        return X.index_select(axis, index).movedim(axis, 0)
    if isinstance(X, np.ndarray):
        out = np.take(X, idx, axis=axis)
    else:
        out = X[(slice(None),) * axis + (idx,)]
        if _is_dask(out):
            out = out.compute()
    return np.moveaxis(out, axis, 0) if axis else out


def _gather_windows(X: Any, idx: np.ndarray, axis: int | str, sample_dim: str) -> Any:
    """Windows ``X[..., idx[j], ...]`` stacked first: shape ``(b, *X.shape)`` with ``axis``
    shortened to ``idx.shape[1]`` (the window keeps its place among the sample's axes)."""
    b, length = idx.shape
    flat = _gather(X, idx.ravel(), axis)  # (b * length, other axes in order)
    if _is_xarray(X):
        import xarray as xr

        position = X.dims.index(axis)
        data = np.asarray(flat.data).reshape(b, length, *flat.shape[1:])
        data = np.moveaxis(data, 1, position + 1)
        coords = {name: c for name, c in X.coords.items() if axis not in c.dims}
        coords[sample_dim] = idx[:, 0]
        return xr.DataArray(data, dims=(sample_dim, *X.dims), coords=coords, name=X.name,
                            attrs=X.attrs)
    rest = tuple(flat.shape[1:])
    if _is_torch(flat):
        return flat.reshape(b, length, *rest).movedim(1, axis + 1)
    return np.moveaxis(np.asarray(flat).reshape(b, length, *rest), 1, axis + 1)


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


# -- statistics helpers --------------------------------------------------------------------------


def total_variation(p: Any, q: Any) -> float:
    """Total-variation distance ``max_A |p(A) - q(A)| = 0.5 * ||p - q||_1`` of two pmfs.

    Parameters
    ----------
    p, q : array-like of shape (n,)

    Returns
    -------
    float

    Examples
    --------
    >>> total_variation([0.5, 0.5, 0.0], [0.25, 0.25, 0.5])
    0.5
    """
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    if p.shape != q.shape or p.ndim != 1:
        raise ValueError(f"p and q must be 1-D arrays of the same length, got {p.shape} "
                         f"and {q.shape}")
    return 0.5 * float(np.abs(p - q).sum())


def empirical_distribution(states: Any, n_states: int) -> np.ndarray:
    """Relative frequencies of the integer states ``0 .. n_states - 1`` in ``states``.

    Parameters
    ----------
    states : array-like of int
    n_states : int

    Returns
    -------
    ndarray of shape (n_states,)

    Examples
    --------
    >>> empirical_distribution([0, 2, 2, 1], 4)
    array([0.25, 0.25, 0.5 , 0.  ])
    """
    states = np.asarray(states).ravel()
    if states.size == 0:
        raise ValueError("states is empty")
    if states.min() < 0 or states.max() >= n_states:
        raise ValueError(f"states must lie in [0, {n_states}), got range "
                         f"[{states.min()}, {states.max()}]")
    return np.bincount(states, minlength=n_states) / states.size


def integrated_autocorrelation_time(x: Any, c: float = 5.0) -> float:
    """Integrated autocorrelation time ``tau = 1 + 2 sum_{l>=1} rho(l)`` of a scalar series.

    ``tau`` is how many correlated draws are worth one independent draw (1 for i.i.d. samples).
    Estimated with Sokal's automatic window: the autocorrelations ``rho`` (computed by FFT) are
    summed up to the smallest lag ``M >= c * tau(M)``.

    Parameters
    ----------
    x : array-like of shape (n,)
        The series, e.g. an observable of the states along a chain.
    c : float, default 5.0
        Window constant (larger: less bias, more variance).

    Returns
    -------
    float

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> round(integrated_autocorrelation_time(rng.standard_normal(10_000)), 1)
    1.0
    """
    x = np.asarray(x, dtype=float).ravel()
    if x.size < 2:
        raise ValueError(f"x needs at least 2 values, got {x.size}")
    x = x - x.mean()
    n = x.size
    spectrum = np.fft.rfft(x, 2 * n)
    acf = np.fft.irfft(spectrum * np.conj(spectrum))[:n]
    if acf[0] <= 0:
        raise ValueError("x is constant: its autocorrelation time is undefined")
    taus = 2.0 * np.cumsum(acf / acf[0]) - 1.0
    window = np.arange(n) >= c * taus
    m = int(np.argmax(window)) if window.any() else n - 1
    return float(taus[m])


def expected_loss(learner: Any, stream: Stream) -> float:
    """The exact expected loss ``f(D) = sum_y pi(y) loss(phi(y), D)`` of a fitted learner.

    Uses the stream's finite sample space and stationary distribution (states of zero
    probability are skipped) and the learner's ``score`` (negative weighted mean loss).

    Parameters
    ----------
    learner : fitted estimator with ``score(X, sample_weight=...)``
    stream : Stream
        A stream with a known stationary distribution.

    Returns
    -------
    float

    Examples
    --------
    >>> from tensorstream import OnlineCPDL
    >>> X = np.random.default_rng(0).random((30, 4, 3))
    >>> stream = Metropolis(X, np.arange(1.0, 31.0), batch_size=10, random_state=0)
    >>> model = OnlineCPDL(2, random_state=0).fit(stream, n_steps=20)
    >>> bool(expected_loss(model, stream) > 0)
    True
    """
    pi = stream.stationary_distribution()
    support = np.flatnonzero(pi > 0)
    samples = _gather(stream.sample_space(), support, 0)
    return -float(learner.score(samples, sample_weight=pi[support]))


# -- base classes --------------------------------------------------------------------------------


class Stream:
    """Base class of the streams: an iterable of mini-batches, samples on the first axis.

    Subclasses implement ``_draw()`` (the states of the next batch) and ``to_samples(states)``,
    and, where the state space is finite, ``stationary_distribution()`` and ``sample_space()``.
    Extra checkpoint fields go through ``_own_state()`` / ``_load_own_state(state)``.

    Parameters
    ----------
    batch_size : int
        Samples per batch (>= 1).
    n_steps : int or None
        Batches per ``iter()``; ``None`` streams forever.
    random_state : int, Generator or None
        Seed; a Generator is used (and advanced) as is.
    """

    state: Any = None  # memoryless streams have no chain state

    def __init__(self, batch_size: int, n_steps: int | None, random_state: Any):
        self.batch_size = _check_int(batch_size, "batch_size")
        self.n_steps = None if n_steps is None else _check_int(n_steps, "n_steps")
        self.random_state = random_state
        self._rng = check_random_state(random_state)
        self.n_batches_ = 0
        self._snapshot: dict | None = None

    def _remember_start(self) -> None:
        """Called at the end of every ``__init__``: the state :meth:`reset` returns to."""
        self._snapshot = self.get_state()

    # iteration ----------------------------------------------------------------------------------

    def __iter__(self) -> Iterator:
        steps = itertools.count() if self.n_steps is None else range(self.n_steps)
        for _ in steps:
            yield self.next_batch()

    def next_states(self) -> np.ndarray:
        """Draw the states behind the next batch (advances the stream by one batch)."""
        states = self._draw()
        self.n_batches_ += 1
        return states

    def next_batch(self) -> Any:
        """The next mini-batch, shape ``(b, *sample_shape)``."""
        return self.to_samples(self.next_states())

    def _draw(self) -> np.ndarray:
        raise NotImplementedError

    def to_samples(self, states: Any) -> Any:
        """The batch made of the samples of ``states``."""
        raise NotImplementedError

    # finite state spaces ------------------------------------------------------------------------

    def stationary_distribution(self) -> np.ndarray:
        """``pi`` over :meth:`sample_space` (1-D, sums to one)."""
        raise NotImplementedError(f"{type(self).__name__} has no known stationary distribution")

    def sample_space(self) -> Any:
        """All samples the stream can produce, stacked on the first axis, in ``pi``'s order."""
        raise NotImplementedError(f"{type(self).__name__} has no finite sample space")

    # checkpoints --------------------------------------------------------------------------------

    def _own_state(self) -> dict:
        return {}

    def _load_own_state(self, state: dict) -> None:
        pass

    def get_state(self) -> dict:
        """A deep copy of everything the next batches depend on (for checkpoints)."""
        return copy.deepcopy({"stream": type(self).__name__,
                              "rng": self._rng.bit_generator.state,
                              "n_batches": self.n_batches_, **self._own_state()})

    def set_state(self, state: dict) -> Stream:
        """Resume from a :meth:`get_state` checkpoint: the following batches are identical."""
        if not isinstance(state, dict) or state.get("stream") != type(self).__name__:
            raise ValueError(f"state must be a dict returned by {type(self).__name__}.get_state()")
        state = copy.deepcopy(state)
        self._rng.bit_generator.state = state["rng"]
        self.n_batches_ = state["n_batches"]
        self._load_own_state(state)
        return self

    def reset(self) -> Stream:
        """Rewind to the state right after construction (also rewinds a shared Generator)."""
        return self.set_state(self._snapshot)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(batch_size={self.batch_size}, n_steps={self.n_steps})"


class _DataStream(Stream):
    """A stream whose states are indices along the sample axis of a data array ``X``."""

    def __init__(self, X: Any, batch_size: int, axis: Any, n_steps: int | None,
                 random_state: Any):
        super().__init__(batch_size, n_steps, random_state)
        _check_data(X)
        self.X = X
        self.axis = _sample_axis(X, axis)
        self.n_samples = _axis_size(X, self.axis)
        if self.n_samples == 0:
            raise ValueError("X has no samples along its sample axis")

    def to_samples(self, states: Any) -> Any:
        """``X`` at the sample indices ``states``, sample axis first."""
        return _gather(self.X, states, self.axis)

    def sample_space(self) -> Any:
        """``X`` with its sample axis first."""
        return _move_first(self.X, self.axis)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(n_samples={self.n_samples}, "
                f"batch_size={self.batch_size}, n_steps={self.n_steps})")


class MarkovStream(Stream):
    """Base class of the Markov-chain streams.

    Subclasses implement ``_initial_states(m, rng)`` (``m`` draws from the start distribution),
    ``_transition(states, rng)`` (one step of ``m`` independent chains, vectorized) and may
    override ``_path(state, n, rng)`` (the ``n`` states that follow ``state`` on one chain) with
    something faster than the default loop. :class:`Thinned` and :class:`Restarted` build on
    these hooks.
    """

    #: whether each sample of a batch is one chain state (False for windowed batches)
    _states_are_samples = True
    #: the start state has not been emitted yet
    _fresh = True

    def _initial_states(self, m: int, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def _transition(self, states: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def _path(self, state: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        current = np.asarray(state)[None]
        out = np.empty((n, *current.shape[1:]), dtype=current.dtype)
        for t in range(n):
            current = self._transition(current, rng)
            out[t] = current[0]
        return out

    def _advance(self, n: int) -> np.ndarray:
        """The next ``n`` states of the chain (the start state first on a fresh chain)."""
        if self._fresh:
            head = np.asarray(self.state)[None]
            path = np.concatenate([head, self._path(self.state, n - 1, self._rng)])
        else:
            path = self._path(self.state, n, self._rng)
        self.state = path[-1].copy()
        self._fresh = False
        return path

    def _draw(self) -> np.ndarray:
        return self._advance(self.batch_size)

    def transition_matrix(self) -> Any:
        """The transition matrix ``P`` over chain states (scipy.sparse CSR or dense)."""
        raise NotImplementedError(f"{type(self).__name__} has no transition matrix")

    def state_distribution(self) -> np.ndarray:
        """Stationary distribution over chain states (``pi P = pi``)."""
        return self.stationary_distribution()

    def _own_state(self) -> dict:
        return {"state": np.array(self.state), "fresh": self._fresh}

    def _load_own_state(self, state: dict) -> None:
        current = np.array(state["state"])
        self.state = current[()] if current.ndim == 0 else current  # scalars stay scalars
        self._fresh = bool(state["fresh"])


# -- i.i.d. and epochs ---------------------------------------------------------------------------


class IIDSlices(_DataStream):
    """I.i.d. uniformly random samples (slices along ``axis``) of a data array.

    The benchmark stream of the online CP-dictionary learning paper: each step draws ``b``
    indices of the sample axis uniformly (with replacement by default) and yields
    ``X[idx]`` with the sample axis first. Stationary distribution: uniform.

    Parameters
    ----------
    X : array of shape (..., n_samples, ...)
        numpy array, torch tensor, xarray.DataArray or dask array.
    batch_size : int
        Samples per batch.
    axis : int or str, default 0
        The sample axis (a dimension name for xarray input).
    replace : bool, default True
        Draw with replacement; ``False`` draws distinct samples within each batch.
    n_steps : int or None, default None
        Batches per ``iter()``; ``None`` streams forever.
    random_state : int, Generator or None

    Examples
    --------
    >>> X = np.arange(60.0).reshape(10, 3, 2)
    >>> stream = IIDSlices(X, batch_size=4, n_steps=2, random_state=0)
    >>> [batch.shape for batch in stream]
    [(4, 3, 2), (4, 3, 2)]
    >>> stream.stationary_distribution().sum()
    np.float64(1.0)
    """

    def __init__(self, X: Any, batch_size: int, axis: int | str = 0, replace: bool = True,
                 n_steps: int | None = None, random_state: Any = None):
        super().__init__(X, batch_size, axis, n_steps, random_state)
        self.replace = bool(replace)
        if not self.replace and self.batch_size > self.n_samples:
            raise ValueError(f"batch_size ({self.batch_size}) exceeds the number of samples "
                             f"({self.n_samples}) while replace=False")
        self._remember_start()

    def _draw(self) -> np.ndarray:
        if self.replace:
            return self._rng.integers(0, self.n_samples, self.batch_size)
        return self._rng.choice(self.n_samples, self.batch_size, replace=False)

    def stationary_distribution(self) -> np.ndarray:
        """Uniform over the sample indices."""
        return np.full(self.n_samples, 1.0 / self.n_samples)


class Epochs(_DataStream):
    """Passes over the samples of a data array in mini-batches (finite).

    Each ``iter()`` yields ``n_epochs`` passes' worth of batches, continuing from the current
    position (a fresh stream yields exactly ``n_epochs`` complete passes). Every pass visits
    each sample once, in a new random order when ``shuffle``. Used by the variance-reduced
    learners, which need full passes.

    Parameters
    ----------
    X : array of shape (..., n_samples, ...)
    batch_size : int
    n_epochs : int, default 1
    shuffle : bool, default True
    drop_last : bool, default False
        Drop each pass's last, incomplete batch (all batches then have ``batch_size`` samples).
    random_state : int, Generator or None
    axis : int or str, default 0

    Examples
    --------
    >>> X = np.arange(10.0)[:, None]
    >>> [len(b) for b in Epochs(X, batch_size=4, n_epochs=2, random_state=0)]
    [4, 4, 2, 4, 4, 2]
    """

    def __init__(self, X: Any, batch_size: int, n_epochs: int = 1, shuffle: bool = True,
                 drop_last: bool = False, random_state: Any = None, *, axis: int | str = 0):
        super().__init__(X, batch_size, axis, None, random_state)
        self.n_epochs = _check_int(n_epochs, "n_epochs")
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        if self.drop_last and self.batch_size > self.n_samples:
            raise ValueError(f"batch_size ({self.batch_size}) exceeds the number of samples "
                             f"({self.n_samples}) while drop_last=True: no batch would be left")
        n, b = self.n_samples, self.batch_size
        self.batches_per_epoch = n // b if self.drop_last else -(-n // b)
        self._used = self.batches_per_epoch * b if self.drop_last else n
        self.n_steps = self.n_epochs * self.batches_per_epoch
        self._order = np.arange(n)
        self._position = self._used  # a new pass starts at the first draw
        self.epoch_ = 0
        self._remember_start()

    @property
    def state(self) -> dict:
        """``{"epoch": passes started, "position": samples used in the current pass}``."""
        return {"epoch": self.epoch_, "position": self._position % self._used}

    def _draw(self) -> np.ndarray:
        if self._position >= self._used:
            n = self.n_samples
            self._order = self._rng.permutation(n) if self.shuffle else np.arange(n)
            self._position = 0
            self.epoch_ += 1
        stop = min(self._position + self.batch_size, self._used)
        idx = self._order[self._position:stop]
        self._position = stop
        return idx.copy()

    def stationary_distribution(self) -> np.ndarray:
        """Share of each sample in a pass (uniform, except never-seen samples of an unshuffled
        stream with ``drop_last``)."""
        if self.shuffle or not self.drop_last:
            return np.full(self.n_samples, 1.0 / self.n_samples)
        pi = np.zeros(self.n_samples)
        pi[:self._used] = 1.0 / self._used
        return pi

    def _own_state(self) -> dict:
        return {"order": self._order.copy(), "position": self._position, "epoch": self.epoch_}

    def _load_own_state(self, state: dict) -> None:
        self._order = np.array(state["order"])
        self._position = int(state["position"])
        self.epoch_ = int(state["epoch"])


# -- Markov chains over sample indices -----------------------------------------------------------


def _check_start(start: Any, n: int, support: np.ndarray | None = None) -> Any:
    if isinstance(start, str):
        if start not in ("stationary", "uniform"):
            raise ValueError(f"start must be 'stationary', 'uniform' or a sample index, "
                             f"got {start!r}")
        return start
    start = _check_int(start, "start", minimum=0)
    if start >= n:
        raise ValueError(f"start must be < the number of samples ({n}), got {start}")
    if support is not None and not support[start]:
        raise ValueError(f"start={start} has zero target probability")
    return start


class _IndexChain(MarkovStream, _DataStream):
    """A Markov chain over the sample indices of a data array."""

    def _start_distribution(self) -> np.ndarray:
        if isinstance(self.start, str):
            if self.start == "stationary":
                return self.state_distribution()
            support = self.state_distribution() > 0
            return support / support.sum()
        pmf = np.zeros(self.n_samples)
        pmf[self.start] = 1.0
        return pmf

    def _initial_states(self, m: int, rng: np.random.Generator) -> np.ndarray:
        cdf = np.cumsum(self._start_distribution())
        idx = np.searchsorted(cdf, rng.random(m) * cdf[-1], side="right")
        return np.minimum(idx, self.n_samples - 1)


class LazyRandomWalk(_IndexChain):
    """Lazy random walk over the sample indices, on a graph whose nodes are the samples.

    From sample ``i`` the walk stays with probability ``holding`` (``eps``) and otherwise moves
    to a neighbour ``j`` with probability ``A[i, j] / d(i)`` (``d`` = weighted degree): the
    transition matrix is the lazification ``P_eps = (1 - eps) D^-1 A + eps I``. Holding keeps
    the stationary distribution of the walk, ``pi(i) = d(i) / sum(d)`` (uniform on regular graphs
    such as the cycle and the periodic grid), and makes the chain aperiodic (a non-lazy walk on
    an even cycle is periodic). The graph must be connected (irreducibility).

    The canonical "slow Markov" stream: neighbouring samples are highly correlated and mixing
    takes ``~ n^2 / (1 - eps)`` steps on a cycle of ``n`` samples.

    Parameters
    ----------
    X : array of shape (..., n_samples, ...)
        numpy array, torch tensor, xarray.DataArray or dask array.
    graph : "cycle", "grid", adjacency matrix or networkx graph, default "cycle"
        ``"cycle"``: sample ``i`` is joined to ``i - 1`` and ``i + 1`` (mod n). ``"grid"``: the
        samples (in row-major order) form a periodic grid ``grid_shape`` (e.g. patch corners);
        each node has ``2 * len(grid_shape)`` neighbours. Otherwise a symmetric nonnegative
        ``(n, n)`` array / scipy.sparse matrix, or a networkx graph whose ``i``-th node (in
        ``graph.nodes`` order) is sample ``i`` (edge attribute ``"weight"``, default 1).
    batch_size : int, default 1
    holding : float in [0, 1), default 0.5
        Holding probability ``eps``.
    window : bool, default False
        ``False``: a batch is ``b`` consecutive chain states. ``True``: one chain step per
        batch, and the batch is the window of ``b`` consecutive indices starting at the chain
        state (wrapping around), ``state, state + 1, ..., state + b - 1`` (mod n).
    grid_shape : tuple of int, optional
        Shape of the grid for ``graph="grid"`` (default: square).
    axis : int or str, default 0
        The sample axis of ``X``.
    start : "stationary", "uniform" or int, default "stationary"
        Start distribution: ``pi`` (the stream is stationary from its first sample), uniform,
        or a fixed index.
    n_steps : int or None, default None
    random_state : int, Generator or None

    Examples
    --------
    >>> X = np.random.default_rng(0).random((12, 4, 3))
    >>> stream = LazyRandomWalk(X, "cycle", batch_size=5, window=True, random_state=0)
    >>> batch = stream.next_batch()
    >>> batch.shape
    (5, 4, 3)
    >>> P, pi = stream.transition_matrix(), stream.state_distribution()
    >>> bool(np.abs(pi @ P - pi).sum() < 1e-12)
    True
    """

    def __init__(self, X: Any, graph: Any = "cycle", batch_size: int = 1, holding: float = 0.5,
                 window: bool = False, grid_shape: Any = None, *, axis: int | str = 0,
                 start: Any = "stationary", n_steps: int | None = None,
                 random_state: Any = None):
        super().__init__(X, batch_size, axis, n_steps, random_state)
        self.start = _check_start(start, self.n_samples)
        self.holding = _check_holding(holding)
        self.window = bool(window)
        self._states_are_samples = not self.window
        if self.window and self.batch_size > self.n_samples:
            raise ValueError(f"batch_size ({self.batch_size}) is longer than the sample axis "
                             f"({self.n_samples}): a window would wrap onto itself")
        n = self.n_samples
        self._torus = None
        if isinstance(graph, str) and graph in ("cycle", "grid"):
            self._torus = (n,) if graph == "cycle" else _grid_shape(n, grid_shape)
            self.adjacency_ = _torus_adjacency(self._torus)
        else:
            self.adjacency_ = _adjacency(graph, n, name="graph")
        self.graph = graph
        _check_connected(self.adjacency_, "graph")
        self.degree_ = np.asarray(self.adjacency_.sum(axis=1)).ravel()
        self._walk = _walk_sampler(self.adjacency_)
        self.state = int(self._initial_states(1, self._rng)[0])
        self._remember_start()

    # the chain ----------------------------------------------------------------------------------

    def _torus_moves(self, u: np.ndarray) -> np.ndarray:
        """Coordinate increments (len(u), D) of torus steps chosen by the uniforms ``u``."""
        D = len(self._torus)
        choice = np.minimum((u * 2 * D).astype(np.intp), 2 * D - 1)
        steps = np.zeros((len(u), D), dtype=np.intp)
        steps[np.arange(len(u)), choice // 2] = 1 - 2 * (choice % 2)
        return steps

    def _transition(self, states: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        u = rng.random((2, len(states)))
        if self._torus is not None:
            coords = np.array(np.unravel_index(states, self._torus)).T
            moved = np.ravel_multi_index(((coords + self._torus_moves(u[1])) %
                                          self._torus).T, self._torus)
        else:
            moved = self._walk.sample(states, u[1])
        return np.where(u[0] < self.holding, states, moved)

    def _path(self, state: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        u = rng.random((n, 2))
        hold = u[:, 0] < self.holding
        if self._torus is not None:
            # torus walks have i.i.d. increments: the whole path is one cumulative sum
            steps = self._torus_moves(u[:, 1])
            steps[hold] = 0
            coords = np.array(np.unravel_index(int(state), self._torus))
            path = (coords + np.cumsum(steps, axis=0)) % self._torus
            return np.ravel_multi_index(path.T, self._torus).astype(np.int64)
        out = np.empty(n, dtype=np.int64)
        s = int(state)
        sample_one = self._walk.sample_one
        for t, (h, v) in enumerate(zip(hold.tolist(), u[:, 1].tolist(), strict=True)):
            if not h:
                s = sample_one(s, v)
            out[t] = s
        return out

    def _draw(self) -> np.ndarray:
        if not self.window:
            return self._advance(self.batch_size)
        start = int(self._advance(1)[0])
        return (start + np.arange(self.batch_size)) % self.n_samples

    # known distributions ------------------------------------------------------------------------

    def transition_matrix(self) -> sp.csr_array:
        """``P_eps = (1 - eps) D^-1 A + eps I`` over sample indices (CSR)."""
        P = sp.diags_array(1.0 / self.degree_) @ self.adjacency_
        P = (1.0 - self.holding) * P + self.holding * sp.eye_array(self.n_samples)
        return sp.csr_array(P)

    def state_distribution(self) -> np.ndarray:
        """``pi(i) = d(i) / sum(d)`` over chain states (uniform on regular graphs)."""
        return self.degree_ / self.degree_.sum()

    def stationary_distribution(self) -> np.ndarray:
        """Weight of each sample index under stationarity.

        Equal to :meth:`state_distribution` when ``window=False``; with ``window=True`` the
        share of sample ``i`` in a stationary batch, ``(1/b) sum_{j<b} pi(i - j mod n)``.
        """
        pi = self.state_distribution()
        if not self.window:
            return pi
        # circular moving sum over b states, by cumulative sums: O(n) whatever b
        b, n = self.batch_size, self.n_samples
        padded = np.concatenate([pi[n - b + 1:], pi]) if b > 1 else pi
        cumulative = np.concatenate([[0.0], np.cumsum(padded)])
        shares = (cumulative[b:] - cumulative[:-b]) / b
        return shares / shares.sum()

    def __repr__(self) -> str:
        graph = self.graph if isinstance(self.graph, str) else type(self.graph).__name__
        return (f"LazyRandomWalk(n_samples={self.n_samples}, graph={graph!r}, "
                f"batch_size={self.batch_size}, holding={self.holding}, window={self.window})")


class Metropolis(_IndexChain):
    """Metropolis–Hastings chain over the sample indices with a non-uniform target ``pi``.

    From sample ``i`` the chain holds with probability ``holding``; otherwise it proposes a
    neighbour ``j`` of the proposal graph with probability ``Q(i, j) = A[i, j] / d(i)`` and moves
    there with probability ``min(1, pi(j) Q(j, i) / (pi(i) Q(i, j))) = min(1, (pi(j) / d(j)) /
    (pi(i) / d(i)))``. Detailed balance makes ``pi`` stationary. Use it to check that a learner
    fits the ``pi``-weighted objective (e.g. ``pi`` proportional to slice norms), not the
    uniform one.

    Parameters
    ----------
    X : array of shape (..., n_samples, ...)
    target : array-like of shape (n_samples,)
        Unnormalised target weights, finite and nonnegative. Samples of zero weight are never
        visited; the others must be connected through the proposal graph.
    proposal : "cycle", "grid", adjacency matrix or networkx graph, default "cycle"
        Proposal graph over the samples, as for :class:`LazyRandomWalk`.
    batch_size : int, default 1
    holding : float in [0, 1), default 0.0
    grid_shape : tuple of int, optional
    axis : int or str, default 0
    start : "stationary", "uniform" or int, default "stationary"
        ``"uniform"`` is uniform over the samples of positive weight.
    n_steps : int or None, default None
    random_state : int, Generator or None

    Examples
    --------
    >>> X = np.random.default_rng(0).random((6, 3))
    >>> target = np.linalg.norm(X, axis=1)
    >>> stream = Metropolis(X, target, batch_size=100, random_state=0)
    >>> np.allclose(stream.stationary_distribution(), target / target.sum())
    True
    """

    def __init__(self, X: Any, target: Any, proposal: Any = "cycle", batch_size: int = 1,
                 holding: float = 0.0, grid_shape: Any = None, *, axis: int | str = 0,
                 start: Any = "stationary", n_steps: int | None = None,
                 random_state: Any = None):
        super().__init__(X, batch_size, axis, n_steps, random_state)
        self.target = target
        self.pi_ = self._check_target(target)
        self.start = _check_start(start, self.n_samples, self.pi_ > 0)
        self.holding = _check_holding(holding)
        self.adjacency_ = _adjacency(proposal, self.n_samples, grid_shape, name="proposal")
        self.proposal = proposal
        support = np.flatnonzero(self.pi_ > 0)
        _check_connected(self.adjacency_[support][:, support],
                         "the proposal graph restricted to the samples of positive target")
        self.degree_ = np.asarray(self.adjacency_.sum(axis=1)).ravel()
        # acceptance min(1, w_j / w_i) with w = pi / d (the proposal's degree corrects Q)
        self._w = self.pi_ / self.degree_
        self._walk = _walk_sampler(self.adjacency_)
        self.state = int(self._initial_states(1, self._rng)[0])
        self._remember_start()

    def _check_target(self, target: Any) -> np.ndarray:
        try:
            pi = np.asarray(target, dtype=float)
        except (TypeError, ValueError) as error:
            raise TypeError(f"target must be an array of {self.n_samples} nonnegative weights, "
                            f"got {type(target).__name__}") from error
        if pi.shape != (self.n_samples,):
            raise ValueError(f"target must have shape ({self.n_samples},), one weight per "
                             f"sample, got {pi.shape}")
        if not np.all(np.isfinite(pi)):
            raise ValueError("target has NaN or infinite entries")
        if np.any(pi < 0):
            raise ValueError("target has negative entries")
        if pi.sum() <= 0:
            raise ValueError("target is all zero")
        return pi / pi.sum()

    def _transition(self, states: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        u = rng.random((3, len(states)))
        proposed = self._walk.sample(states, u[1])
        accept = (u[0] >= self.holding) & (u[2] * self._w[states] < self._w[proposed])
        return np.where(accept, proposed, states)

    def _path(self, state: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        u = rng.random((n, 3))
        hold = (u[:, 0] < self.holding).tolist()
        w = self._w.tolist()
        sample_one = self._walk.sample_one
        out = np.empty(n, dtype=np.int64)
        s = int(state)
        for t, (h, v, a) in enumerate(zip(hold, u[:, 1].tolist(), u[:, 2].tolist(),
                                          strict=True)):
            if not h:
                j = sample_one(s, v)
                if a * w[s] < w[j]:
                    s = j
            out[t] = s
        return out

    def transition_matrix(self) -> sp.csr_array:
        """The Metropolis–Hastings kernel (CSR); rejected moves stay on the diagonal."""
        A = sp.coo_array(self.adjacency_)
        rows, cols = A.coords
        w_i, w_j = self._w[rows], self._w[cols]
        ratio = np.divide(w_j, w_i, out=np.ones_like(w_j), where=w_i > 0)
        moves = (1.0 - self.holding) * A.data / self.degree_[rows] * np.minimum(1.0, ratio)
        off = rows != cols
        P = sp.coo_array((moves[off], (rows[off], cols[off])), shape=A.shape).tocsr()
        stay = np.maximum(1.0 - np.asarray(P.sum(axis=1)).ravel(), 0.0)  # clip round-off
        return sp.csr_array(P + sp.diags_array(stay))

    def stationary_distribution(self) -> np.ndarray:
        """The normalised target."""
        return self.pi_.copy()


# -- wrappers for ablations ----------------------------------------------------------------------


def _check_chain(chain: Any, wrapper: str) -> MarkovStream:
    if not isinstance(chain, MarkovStream):
        raise TypeError(f"{wrapper} needs a Markov-chain stream (LazyRandomWalk, Metropolis, "
                        f"MotifSampler, Ising, ...), got {type(chain).__name__}")
    if not chain._states_are_samples:
        raise ValueError(f"{wrapper} needs a chain whose batches are consecutive chain states "
                         f"(e.g. window=False)")
    return chain


class _ChainWrapper(Stream):
    """Shares the wrapped chain's generator; its checkpoint includes the chain's."""

    def __init__(self, chain: MarkovStream, tau: int, n_steps: int | None, name: str):
        self.chain = _check_chain(chain, name)
        self.tau = _check_int(tau, "tau")
        self.batch_size = chain.batch_size
        self.n_steps = chain.n_steps if n_steps is None else _check_int(n_steps, "n_steps")
        self.random_state = chain.random_state
        self._rng = chain._rng
        self.n_batches_ = 0
        self._snapshot = self.get_state()

    def to_samples(self, states: Any) -> Any:
        return self.chain.to_samples(states)

    def stationary_distribution(self) -> np.ndarray:
        return self.chain.stationary_distribution()

    def sample_space(self) -> Any:
        return self.chain.sample_space()

    def get_state(self) -> dict:
        return {"stream": type(self).__name__, "n_batches": self.n_batches_,
                "chain": self.chain.get_state()}

    def set_state(self, state: dict) -> Stream:
        if not isinstance(state, dict) or state.get("stream") != type(self).__name__:
            raise ValueError(f"state must be a dict returned by {type(self).__name__}.get_state()")
        self.chain.set_state(state["chain"])
        self.n_batches_ = state["n_batches"]
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.chain!r}, tau={self.tau})"


class Thinned(_ChainWrapper):
    """Keep every ``tau``-th state of a chain (the classical "thinning" the paper argues against).

    Consecutive kept states are ``tau`` chain steps apart: nearly independent for ``tau`` well
    above the mixing time, but never exactly (their correlation decays like ``lambda^tau``), and
    ``tau - 1`` of every ``tau`` states are discarded. The stationary distribution is the
    chain's. The wrapper advances the wrapped chain (they share state and generator).

    Parameters
    ----------
    chain : MarkovStream
        A chain whose batches are consecutive chain states (not ``window=True``).
    tau : int
        Thinning interval (1: the chain itself).
    n_steps : int or None, default None
        Batches per ``iter()``; ``None`` takes the chain's.

    Examples
    --------
    >>> X = np.random.default_rng(0).random((20, 3))
    >>> stream = Thinned(LazyRandomWalk(X, "cycle", batch_size=4, random_state=0), tau=10)
    >>> stream.next_batch().shape
    (4, 3)
    """

    def __init__(self, chain: MarkovStream, tau: int, n_steps: int | None = None):
        super().__init__(chain, tau, n_steps, "Thinned")

    @property
    def state(self) -> Any:
        return self.chain.state

    def _draw(self) -> np.ndarray:
        return self.chain._advance(self.tau * self.batch_size)[self.tau - 1::self.tau]


class Restarted(_ChainWrapper):
    """Independent restarts: each sample is the state after ``tau`` steps of a fresh chain.

    Every sample of a batch comes from its own chain, started from the wrapped chain's start
    distribution (``start`` argument; a fixed index gives the classical multistart scheme)
    and run ``tau`` steps, vectorized over the batch. Samples are exactly independent but only
    approximately ``pi``-distributed (law ``mu P^tau``), and ``tau - 1`` of ``tau`` steps are
    wasted. The wrapped chain's own state is not used; its generator is.

    Parameters
    ----------
    chain : MarkovStream
    tau : int
        Steps per restart.
    n_steps : int or None, default None

    Examples
    --------
    >>> X = np.random.default_rng(0).random((20, 3))
    >>> chain = LazyRandomWalk(X, "cycle", batch_size=4, start=0, random_state=0)
    >>> Restarted(chain, tau=50).next_batch().shape
    (4, 3)
    """

    def __init__(self, chain: MarkovStream, tau: int, n_steps: int | None = None):
        super().__init__(chain, tau, n_steps, "Restarted")

    def _draw(self) -> np.ndarray:
        states = self.chain._initial_states(self.batch_size, self._rng)
        for _ in range(self.tau):
            states = self.chain._transition(states, self._rng)
        return states


# -- windows and patches -------------------------------------------------------------------------


class SlidingWindow(MarkovStream, _DataStream):
    """Windows along an axis (time series, video clips) as samples.

    Window ``j`` covers positions ``j * stride, ..., j * stride + length - 1`` of ``axis``;
    there are ``m = (N - length) // stride + 1`` of them. A sample is one window and keeps all
    axes of ``X`` in place, ``axis`` shortened to ``length`` (a 36 x T x 4 weather tensor with
    ``axis=1, length=24`` gives 36 x 24 x 4 samples; a video ``(frames, H, W, 3)`` gives clips
    ``(length, H, W, 3)``). A batch is ``batch_size`` successive windows.

    The window index follows the chain ``j -> j + 1 (mod m)``, wrapping to the first window after
    the last, with holding probability ``holding``; the start is window 0, or a uniformly random
    window when ``random_start``. Its stationary distribution is uniform over the windows.

    **Periodicity.** With ``holding=0`` the sweep is deterministic and periodic (period ``m``):
    ``pi`` is stationary and averages over whole sweeps are exact, but the chain is not
    aperiodic, as the Markov-data convergence theory assumes (spec 004, section 6 item 15).
    ``random_start`` only makes the sweep stationary; ``holding > 0`` (lazification) makes it
    aperiodic.

    Parameters
    ----------
    X : array
        numpy array, torch tensor, xarray.DataArray or dask array.
    length : int
        Window length (<= the axis length).
    stride : int, default 1
    axis : int or str, default 0
    batch_size : int, default 1
    random_start : bool, default False
    holding : float in [0, 1), default 0.0
    sample_dim : str, default "window"
        Name of the sample dimension of the batches of an xarray input.
    n_steps : int or None, default None
    random_state : int, Generator or None

    Examples
    --------
    >>> X = np.arange(20.0).reshape(10, 2)
    >>> stream = SlidingWindow(X, length=4, stride=3, batch_size=2)
    >>> stream.n_windows
    3
    >>> stream.next_batch()[:, :, 0]
    array([[ 0.,  2.,  4.,  6.],
           [ 6.,  8., 10., 12.]])
    """

    def __init__(self, X: Any, length: int, stride: int = 1, axis: int | str = 0,
                 batch_size: int = 1, *, random_start: bool = False, holding: float = 0.0,
                 sample_dim: str = "window", n_steps: int | None = None,
                 random_state: Any = None):
        super().__init__(X, batch_size, axis, n_steps, random_state)
        self.length = _check_int(length, "length")
        self.stride = _check_int(stride, "stride")
        if self.length > self.n_samples:
            raise ValueError(f"length ({self.length}) is longer than the axis "
                             f"({self.n_samples} positions)")
        if _is_xarray(X) and sample_dim in X.dims:
            raise ValueError(f"sample_dim {sample_dim!r} is already a dimension of X")
        self.sample_dim = sample_dim
        self.random_start = bool(random_start)
        self.holding = _check_holding(holding)
        self.n_windows = (self.n_samples - self.length) // self.stride + 1
        self.state = int(self._initial_states(1, self._rng)[0])
        self._remember_start()

    def _initial_states(self, m: int, rng: np.random.Generator) -> np.ndarray:
        if self.random_start:
            return rng.integers(0, self.n_windows, m)
        return np.zeros(m, dtype=np.int64)

    def _transition(self, states: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        move = rng.random(len(states)) >= self.holding
        return (states + move) % self.n_windows

    def _path(self, state: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        # the increments are i.i.d. (0 or 1): one cumulative sum
        moves = (rng.random(n) >= self.holding) if self.holding else np.ones(n, dtype=bool)
        return (int(state) + np.cumsum(moves)) % self.n_windows

    def to_samples(self, states: Any) -> Any:
        """The windows ``states`` (window indices), stacked first."""
        starts = np.asarray(states, dtype=np.intp) * self.stride
        idx = starts[:, None] + np.arange(self.length)
        return _gather_windows(self.X, idx, self.axis, self.sample_dim)

    def transition_matrix(self) -> sp.csr_array:
        """``(1 - holding) S + holding I`` with ``S`` the cyclic shift over windows."""
        m = self.n_windows
        shift = sp.csr_array((np.ones(m), (np.arange(m), (np.arange(m) + 1) % m)), shape=(m, m))
        return sp.csr_array((1.0 - self.holding) * shift + self.holding * sp.eye_array(m))

    def stationary_distribution(self) -> np.ndarray:
        """Uniform over the windows."""
        return np.full(self.n_windows, 1.0 / self.n_windows)

    def sample_space(self) -> Any:
        """All windows, stacked first."""
        return self.to_samples(np.arange(self.n_windows))


class RandomPatches(Stream):
    """Random patches of an image (or any array): the paper's image experiment.

    Each sample is ``image[a_1 : a_1 + p_1, ..., a_D : a_D + p_D, ...]`` for a top-left corner
    ``a`` drawn uniformly among all ``prod(I_d - p_d + 1)`` valid corners (i.i.d.); the patch
    covers the first ``D = len(patch_shape)`` axes and keeps the remaining ones whole (a 20 x 20
    patch of an H x W x 3 image is 20 x 20 x 3). States are flat corner indices (row-major over
    the corner grid). Stationary distribution: uniform over corners.

    Parameters
    ----------
    image : array of shape (I_1, ..., I_D, ...)
        numpy array, torch tensor, xarray.DataArray or dask array.
    patch_shape : tuple of int
        Patch extent along the first ``len(patch_shape)`` axes.
    batch_size : int, default 1
    n_steps : int or None, default None
    random_state : int, Generator or None
    sample_dim : str, default "patch"
        Sample dimension name of the batches of an xarray input.

    Examples
    --------
    >>> image = np.random.default_rng(0).random((64, 48, 3))
    >>> stream = RandomPatches(image, (20, 20), batch_size=100, random_state=0)
    >>> stream.next_batch().shape
    (100, 20, 20, 3)
    """

    def __init__(self, image: Any, patch_shape: Any, batch_size: int = 1,
                 n_steps: int | None = None, random_state: Any = None, *,
                 sample_dim: str = "patch"):
        super().__init__(batch_size, n_steps, random_state)
        _check_data(image, "image")
        self.image = image
        shape = (patch_shape,) if isinstance(patch_shape, numbers.Integral) else tuple(
            patch_shape)
        self.patch_shape = tuple(_check_int(p, "patch_shape entries") for p in shape)
        if len(self.patch_shape) > image.ndim:
            raise ValueError(f"patch_shape {self.patch_shape} has more axes than the image "
                             f"({image.ndim})")
        sizes = tuple(int(s) for s in image.shape[:len(self.patch_shape)])
        for p, size in zip(self.patch_shape, sizes, strict=True):
            if p > size:
                raise ValueError(f"patch_shape {self.patch_shape} is larger than the image "
                                 f"{tuple(image.shape)}")
        self.corner_shape = tuple(s - p + 1 for s, p in zip(sizes, self.patch_shape, strict=True))
        self.n_corners = math.prod(self.corner_shape)
        self.sample_dim = sample_dim
        self._remember_start()

    def _draw(self) -> np.ndarray:
        return self._rng.integers(0, self.n_corners, self.batch_size)

    def corners(self, states: Any) -> np.ndarray:
        """Top-left corners ``(b, D)`` of the flat corner indices ``states``."""
        return np.array(np.unravel_index(np.asarray(states), self.corner_shape)).T

    def to_samples(self, states: Any) -> Any:
        """The patches at the flat corner indices ``states``, stacked first."""
        corners = self.corners(states)
        b, D = corners.shape
        index = []
        for d, p in enumerate(self.patch_shape):
            offsets = np.arange(p).reshape((1,) + (1,) * d + (p,) + (1,) * (D - d - 1))
            index.append(corners[:, d].reshape((b,) + (1,) * D) + offsets)
        return _gather_patches(self.image, tuple(index), self.sample_dim)

    def stationary_distribution(self) -> np.ndarray:
        """Uniform over the corners."""
        return np.full(self.n_corners, 1.0 / self.n_corners)

    def sample_space(self, max_states: int = 100_000) -> Any:
        """All patches, stacked first (raises if there are more than ``max_states``)."""
        if self.n_corners > max_states:
            raise ValueError(f"the image has {self.n_corners} patches, more than "
                             f"max_states={max_states}")
        return self.to_samples(np.arange(self.n_corners))


def _gather_patches(image: Any, index: tuple, sample_dim: str) -> Any:
    """``image[index]`` (broadcast integer indices on the leading axes), any container."""
    if _is_xarray(image):
        import xarray as xr

        data = _gather_patches(image.data, index, sample_dim)
        D = len(index)
        coords = {k: c for k, c in image.coords.items() if not set(c.dims) & set(image.dims[:D])}
        return xr.DataArray(data, dims=(sample_dim, *image.dims), coords=coords,
                            name=image.name, attrs=image.attrs)
    if _is_torch(image):
        import torch

        return image[tuple(torch.as_tensor(i, device=image.device) for i in index)]
    if _is_dask(image):
        return np.asarray(image.vindex[index].compute())
    return image[index]


# -- Ising model ---------------------------------------------------------------------------------

_SMALL_LATTICE = 64  # up to this many sites a pure-Python sweep beats numpy's per-call overhead


class Ising(MarkovStream):
    """Gibbs sampler of the Ising model on a small periodic grid: spin configurations as samples.

    The stationary distribution over configurations ``sigma`` in ``{-1, +1}^shape`` is
    ``pi(sigma) ~ exp(beta * (sum_{<s,t>} sigma_s sigma_t + field * sum_s sigma_s))``, the sum
    over the grid's bonds (each site bonded to its successor along every axis, periodically).
    One *sweep* updates every site once from its exact conditional
    ``P(sigma_s = +1 | rest) = 1 / (1 + exp(-2 beta (sum_{t ~ s} sigma_t + field)))``, colour
    class by colour class (sites of one class share no bond, so a class is updated at once,
    vectorized); every class update leaves ``pi`` invariant, hence so does the sweep. A sample
    is the configuration after ``sweeps_per_sample`` sweeps.

    For tiny grids (at most 20 sites) :meth:`stationary_distribution` enumerates the
    ``2^N`` states. **State order**: configuration ``sigma`` has index ``sum_p [sigma_p = +1]
    2^(N - 1 - p)`` over the sites ``p`` in row-major order, i.e. the binary number read off
    the ``{0, 1}`` configuration (index 0 is all ``-1``, index ``2^N - 1`` all ``+1``).

    Parameters
    ----------
    shape : tuple of int, default (8, 8)
        Grid shape (each side >= 2), any number of axes.
    beta : float, default 0.4
        Inverse temperature (negative: antiferromagnetic). The 2-D critical value is 0.4407.
    batch_size : int, default 1
    sweeps_per_sample : int, default 1
    field : float, default 0.0
        External field ``h``.
    values : {"spin", "binary"}, default "spin"
        Samples in ``{-1, +1}``, or in ``{0, 1}`` for nonnegative learners.
    start : {"uniform", "plus", "minus"}, default "uniform"
        Start distribution: i.i.d. uniform spins, all ``+1`` or all ``-1``.
    n_steps : int or None, default None
    random_state : int, Generator or None

    Examples
    --------
    >>> stream = Ising((3, 3), beta=0.3, batch_size=4, values="binary", random_state=0)
    >>> stream.next_batch().shape
    (4, 3, 3)
    >>> stream.stationary_distribution().shape
    (512,)
    """

    def __init__(self, shape: Any = (8, 8), beta: float = 0.4, batch_size: int = 1, *,
                 sweeps_per_sample: int = 1, field: float = 0.0, values: str = "spin",
                 start: str = "uniform", n_steps: int | None = None, random_state: Any = None):
        super().__init__(batch_size, n_steps, random_state)
        shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
        if not shape:
            raise ValueError("shape must have at least one axis")
        self.shape = tuple(_check_int(s, "shape entries", minimum=2) for s in shape)
        self.beta = _check_real(beta, "beta")
        self.field = _check_real(field, "field")
        self.sweeps_per_sample = _check_int(sweeps_per_sample, "sweeps_per_sample")
        if values not in ("spin", "binary"):
            raise ValueError(f"values must be 'spin' or 'binary', got {values!r}")
        self.values = values
        if start not in ("uniform", "plus", "minus"):
            raise ValueError(f"start must be 'uniform', 'plus' or 'minus', got {start!r}")
        self.start = start
        self.n_sites = math.prod(self.shape)
        self._neighbours, self._forward = self._lattice()
        self._classes = self._colour_classes()
        D = len(self.shape)
        fields = np.arange(-2 * D, 2 * D + 1)
        self._p_plus = expit(2.0 * self.beta * (fields + self.field))  # indexed by f + 2D
        self.state = self._initial_states(1, self._rng)[0]
        self._remember_start()

    # lattice ------------------------------------------------------------------------------------

    def _lattice(self) -> tuple[np.ndarray, np.ndarray]:
        """Neighbours ``(N, 2D)`` (+1 and -1 along each axis) and forward ones ``(N, D)``."""
        coords = np.indices(self.shape).reshape(len(self.shape), -1)
        neighbours = []
        for d, size in enumerate(self.shape):
            for sign in (1, -1):
                moved = coords.copy()
                moved[d] = (moved[d] + sign) % size
                neighbours.append(np.ravel_multi_index(moved, self.shape))
        neighbours = np.stack(neighbours, axis=1)
        return neighbours, neighbours[:, ::2]

    def _colour_classes(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Greedy proper colouring (2 colours on even grids, at most 2D + 1): per class, its
        sites and their neighbours."""
        colours = np.full(self.n_sites, -1)
        for site in range(self.n_sites):
            used = set(colours[self._neighbours[site]].tolist())
            colours[site] = next(c for c in itertools.count() if c not in used)
        classes = []
        for c in range(colours.max() + 1):
            sites = np.flatnonzero(colours == c)
            classes.append((sites, self._neighbours[sites]))
        return classes

    # chain --------------------------------------------------------------------------------------

    def _initial_states(self, m: int, rng: np.random.Generator) -> np.ndarray:
        if self.start == "uniform":
            flat = np.where(rng.random((m, self.n_sites)) < 0.5, 1, -1).astype(np.int8)
        else:
            flat = np.full((m, self.n_sites), 1 if self.start == "plus" else -1, dtype=np.int8)
        return flat.reshape(m, *self.shape)

    def _sweep(self, flat: np.ndarray, u: np.ndarray) -> None:
        """One sweep in place on configurations ``flat`` (m, N) with uniforms ``u`` (m, N)."""
        offset = 2 * len(self.shape)
        for sites, neighbours in self._classes:
            local = flat[:, neighbours].sum(axis=2)
            p_plus = self._p_plus[local + offset]
            flat[:, sites] = np.where(u[:, sites] < p_plus, 1, -1)

    def _transition(self, states: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        flat = states.reshape(len(states), self.n_sites).copy()
        for _ in range(self.sweeps_per_sample):
            self._sweep(flat, rng.random(flat.shape))
        return flat.reshape(states.shape)

    def _path(self, state: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        s = self.sweeps_per_sample
        u = rng.random((n * s, 1, self.n_sites))  # all uniforms of the batch in one call
        if self.n_sites <= _SMALL_LATTICE:
            return self._small_path(state, n, u)
        flat = np.asarray(state, dtype=np.int8).reshape(1, self.n_sites).copy()
        out = np.empty((n, self.n_sites), dtype=np.int8)
        for t in range(n):
            for r in range(s):
                self._sweep(flat, u[t * s + r])
            out[t] = flat[0]
        return out.reshape(n, *self.shape)

    def _small_path(self, state: Any, n: int, u: np.ndarray) -> np.ndarray:
        """:meth:`_sweep` in pure Python: on a few sites the per-call overhead of numpy
        dominates. Same update order and uniforms, hence the same states."""
        order = [(int(site), operator.itemgetter(*self._neighbours[site].tolist()))
                 for sites, _ in self._classes for site in sites]
        p_plus, offset = self._p_plus.tolist(), 2 * len(self.shape)
        x = np.asarray(state, dtype=np.int64).ravel().tolist()
        out = np.empty((n, self.n_sites), dtype=np.int8)
        uniforms = u.reshape(n, self.sweeps_per_sample, self.n_sites).tolist()
        for t in range(n):
            for sweep in uniforms[t]:
                for site, neighbours in order:
                    local = sum(neighbours(x))
                    x[site] = 1 if sweep[site] < p_plus[local + offset] else -1
            out[t] = x
        return out.reshape(n, *self.shape)

    def to_samples(self, states: Any) -> np.ndarray:
        """Configurations as float samples in ``{-1, +1}`` or ``{0, 1}`` (``values``)."""
        spins = np.asarray(states, dtype=np.float64)
        return (spins + 1.0) / 2.0 if self.values == "binary" else spins

    # enumeration --------------------------------------------------------------------------------

    def _check_enumerable(self, limit: int = 20) -> int:
        if self.n_sites > limit:
            raise ValueError(f"the grid has {self.n_sites} sites: enumerating 2^{self.n_sites} "
                             f"states is limited to grids of at most {limit} sites")
        return 2 ** self.n_sites

    def enumerate_states(self) -> np.ndarray:
        """All ``2^N`` configurations ``(2^N, *shape)`` in the documented index order."""
        S = self._check_enumerable()
        bits = (np.arange(S)[:, None] >> np.arange(self.n_sites - 1, -1, -1)) & 1
        return (2 * bits - 1).astype(np.int8).reshape(S, *self.shape)

    def state_index(self, states: Any) -> np.ndarray:
        """Indices of configurations ``(m, *shape)`` (values ``+-1`` or ``{0, 1}``)."""
        states = np.asarray(states)
        if states.shape[1:] != self.shape:
            raise ValueError(f"states must have shape (m, {', '.join(map(str, self.shape))}), "
                             f"got {states.shape}")
        self._check_enumerable(62)
        bits = (states.reshape(len(states), self.n_sites) > 0).astype(np.int64)
        return bits @ (np.int64(1) << np.arange(self.n_sites - 1, -1, -1, dtype=np.int64))

    def stationary_distribution(self) -> np.ndarray:
        """Exact ``pi`` over the ``2^N`` configurations (grids of at most 20 sites)."""
        flat = self.enumerate_states().reshape(-1, self.n_sites).astype(np.int64)
        bonds = (flat[:, :, None] * flat[:, self._forward]).sum(axis=(1, 2))
        log_weights = self.beta * (bonds + self.field * flat.sum(axis=1))
        weights = np.exp(log_weights - log_weights.max())
        return weights / weights.sum()

    def sample_space(self) -> np.ndarray:
        """All configurations as samples (``values``), in the documented order."""
        return self.to_samples(self.enumerate_states())

    def transition_matrix(self, max_entries: int = 5_000_000) -> sp.csr_array:
        """Exact kernel of one sample (``sweeps_per_sample`` sweeps) over the ``2^N`` states."""
        S = self._check_enumerable()
        largest = max(len(sites) for sites, _ in self._classes)
        if S * 2 ** largest > max_entries:
            raise ValueError(f"the kernel would need {S * 2 ** largest} entries, more than "
                             f"max_entries={max_entries}")
        flat = self.enumerate_states().reshape(S, self.n_sites)
        index = np.arange(S)
        weights = np.int64(1) << np.arange(self.n_sites - 1, -1, -1, dtype=np.int64)
        sweep = sp.eye_array(S, format="csr")
        offset = 2 * len(self.shape)
        for sites, neighbours in self._classes:
            p_plus = self._p_plus[flat[:, neighbours].sum(axis=2) + offset]  # (S, c)
            cleared = index - ((flat[:, sites] > 0) * weights[sites]).sum(axis=1)
            patterns = (np.arange(2 ** len(sites))[:, None]
                        >> np.arange(len(sites) - 1, -1, -1)) & 1  # (2^c, c)
            probs = np.where(patterns[None], p_plus[:, None, :], 1 - p_plus[:, None, :])
            cols = cleared[:, None] + patterns @ weights[sites]
            kernel = sp.csr_array((probs.prod(axis=2).ravel(),
                                   (np.repeat(index, len(patterns)), cols.ravel())),
                                  shape=(S, S))
            sweep = sweep @ kernel
        P = sweep
        for _ in range(self.sweeps_per_sample - 1):
            P = P @ sweep
        return sp.csr_array(P)

    def __repr__(self) -> str:
        return (f"Ising(shape={self.shape}, beta={self.beta}, batch_size={self.batch_size}, "
                f"sweeps_per_sample={self.sweeps_per_sample})")
