"""Markov-chain streams: :class:`MarkovStream`, random walks on a graph of samples, and the
wrappers that change a chain (thinning, restarts, sliding windows)."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from .base import (
    Stream,
    _check_bool,
    _check_holding,
    _check_int,
    _DataStream,
    _gather_windows,
    _is_xarray,
)
from .graphs import _adjacency, _check_connected, _grid_shape, _torus_adjacency, _walk_sampler

__all__ = ["MarkovStream", "LazyRandomWalk", "Thinned", "Restarted", "SlidingWindow"]


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
        self.window = _check_bool(window, "window")
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

    def stationary_distribution(self) -> np.ndarray:
        """The law of every sample, ``mu P^tau`` (``mu`` the wrapped chain's start
        distribution): ``pi`` only when the chain starts from it (``start="stationary"``)."""
        start = getattr(self.chain, "_start_distribution", None)
        if start is None:
            raise NotImplementedError(f"Restarted: {type(self.chain).__name__} does not give "
                                      f"its start distribution, so the law of the samples "
                                      f"(mu P^tau) is unknown")
        law = np.asarray(start(), dtype=float)
        P_T = self.chain.transition_matrix().T
        for _ in range(self.tau):
            law = P_T @ law
        return np.asarray(law).ravel()

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
    aperiodic, as the Markov-data convergence theory assumes (Lyu et al., assumption (A1)).
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
        self.random_start = _check_bool(random_start, "random_start")
        self.holding = _check_holding(holding)
        self.n_windows = (self.n_samples - self.length) // self.stride + 1
        self.state = int(self._initial_states(1, self._rng)[0])
        self._remember_start()

    def _initial_states(self, m: int, rng: np.random.Generator) -> np.ndarray:
        if self.random_start:
            return rng.integers(0, self.n_windows, m)
        return np.zeros(m, dtype=np.int64)

    def _start_distribution(self) -> np.ndarray:
        if self.random_start:
            return np.full(self.n_windows, 1.0 / self.n_windows)
        return np.eye(1, self.n_windows).ravel()

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
