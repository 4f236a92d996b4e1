"""Network motif sampling: Markov chains on homomorphisms of a path into a graph.

Lyu, Needell & Balzano ("Learning low-rank latent mesoscale structures in networks") learn the
"latent motifs" of a network by dictionary learning on its *mesoscale patches*: for a random
homomorphism ``x: {0, ..., k-1} -> V`` of the k-node path ``P_k`` (edges ``(i, i+1)``) into a
graph ``G`` with symmetric nonnegative adjacency ``A``, the patch is the k x k matrix
``A_x[a, b] = A[x_a, x_b]``. The homomorphisms are drawn from

    pi(x) ~ prod_{i=0}^{k-2} A[x_i, x_{i+1}]        (uniform over homomorphisms if unweighted)

by one of two Markov chains, both with ``pi`` *exactly* stationary (proofs below and in the
tests, which check ``pi P = pi`` on enumerated state spaces):

**Glauber chain.** Pick a path node ``i`` uniformly and redraw ``x_i`` from its conditional
given the rest, ``P(x_i = v | x_{-i}) ~ prod_{j ~ i} A[x_j, v]`` (``j`` over the path neighbours
of ``i``). Each such move is a Gibbs update, hence ``pi``-reversible, and a uniform mixture of
``pi``-reversible kernels is ``pi``-reversible. The current value ``x_i`` always has positive
conditional weight, so the chain never leaves the homomorphisms. It is irreducible when ``G`` is
connected and not bipartite (on a bipartite graph the side of ``x_0`` never changes).

**Pivot chain.** Let ``m_{k-1} = 1`` and ``m_i(v) = sum_u A[v, u] m_{i+1}(u)`` (the weighted
number of walks of length ``k - 1 - i`` from ``v``). Summing ``pi`` over ``x_1..x_{k-1}`` gives
the pivot marginal ``pi_0(v) ~ m_0(v)`` and the exact conditionals
``P(x_{i+1} = u | x_0..x_i) = A[x_i, u] m_{i+1}(u) / m_i(x_i)`` (a Markov chain along the path).
One step (1) moves the pivot by a random-walk proposal ``Q(v, w) = A[v, w] / d(v)`` (``d`` the
weighted degree) accepted with probability ``min(1, (m_0(w) / d(w)) / (m_0(v) / d(v)))`` — the
Metropolis–Hastings ratio ``pi_0(w) Q(w, v) / (pi_0(v) Q(v, w))`` since ``A`` is symmetric —
so the pivot kernel ``M`` satisfies detailed balance with ``pi_0``; then (2) redraws
``x_1..x_{k-1}`` from their exact conditional given the new pivot. The kernel is
``K(x, y) = M(x_0, y_0) pi(y | y_0)`` and

    sum_x pi(x) K(x, y) = sum_{x_0} pi_0(x_0) M(x_0, y_0) pi(y | y_0) = pi_0(y_0) pi(y | y_0)
                        = pi(y),

so ``pi`` is stationary (and ``K`` is even ``pi``-reversible, because ``M`` is
``pi_0``-reversible). The pivot chain mixes like the random walk of the pivot; it is irreducible
on connected graphs and aperiodic on non-bipartite ones.

**Start.** ``x_0`` is a uniformly random endpoint of a random edge drawn with probability
proportional to its weight (so ``P(x_0 = v) ~ d(v)``), and ``x_1..x_{k-1}`` are drawn from their
exact conditional given ``x_0``: every state is a homomorphism from the first sample on.
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from .base import _check_int
from .chains import MarkovStream
from .graphs import _adjacency, _RowSampler, _walk_sampler

__all__ = ["MotifSampler"]


class MotifSampler(MarkovStream):
    """Stream of k x k mesoscale patches of a network, along a motif-sampling Markov chain.

    The chain runs on homomorphisms ``x`` of the k-node path into the graph (see the module
    docstring for the target ``pi(x) ~ prod_i A[x_i, x_{i+1}]`` and the proofs that both chains
    keep it stationary); each sample is the patch ``A[x_a, x_b]`` (a, b < k). Feeding the
    patches to :class:`tensorstream.OnlineCPDL` learns the network's latent motifs.

    Parameters
    ----------
    graph : networkx graph, array or scipy.sparse matrix
        Undirected graph: a networkx graph (edge attribute ``"weight"``, default 1; node ``i``
        is the ``i``-th of ``graph.nodes``, see ``nodes_``) or a symmetric nonnegative adjacency
        matrix. Self-loops are allowed.
    k : int
        Number of path nodes (>= 2); patches are k x k.
    batch_size : int, default 1
        Consecutive chain states per batch.
    chain : {"pivot", "glauber"}, default "pivot"
    start : array-like of shape (k,), optional
        A homomorphism to start from (node positions); by default the random start described
        in the module docstring.
    n_steps : int or None, default None
    random_state : int, Generator or None

    Attributes
    ----------
    adjacency_ : scipy.sparse.csr_array of shape (n_nodes, n_nodes)
    nodes_ : list
        Node labels in position order.
    state : ndarray of shape (k,)
        The current homomorphism.

    Examples
    --------
    >>> import networkx as nx
    >>> sampler = MotifSampler(nx.karate_club_graph(), k=6, batch_size=20, random_state=0)
    >>> patches = sampler.next_batch()
    >>> patches.shape
    (20, 6, 6)
    >>> bool(np.all(sampler.is_homomorphism(sampler.next_states())))
    True
    """

    def __init__(self, graph: Any, k: int, batch_size: int = 1, *, chain: str = "pivot",
                 start: Any = None, n_steps: int | None = None, random_state: Any = None):
        super().__init__(batch_size, n_steps, random_state)
        self.k = _check_int(k, "k", minimum=2)
        if chain not in ("pivot", "glauber"):
            raise ValueError(f"chain must be 'pivot' or 'glauber', got {chain!r}")
        self.chain = chain
        self.graph = graph
        A = _adjacency(graph, name="graph")
        self.adjacency_ = A
        self.n_nodes = A.shape[0]
        is_networkx = type(graph).__module__.startswith("networkx")
        self.nodes_ = list(graph.nodes) if is_networkx else list(range(self.n_nodes))
        self.degree_ = np.asarray(A.sum(axis=1)).ravel()
        # the chains move along edges: on a graph of several components they stay in the first
        # one (isolated nodes carry no homomorphism, so they do no harm)
        active = np.flatnonzero(self.degree_ > 0)
        n_components = connected_components(A[active][:, active], directed=False)[0]
        if n_components > 1:
            raise ValueError(f"graph is not connected ({n_components} components with edges): "
                             f"the motif chain would stay in the one it starts in and never "
                             f"reach its stationary distribution")
        self._walk = _walk_sampler(A)
        self._messages = self._walk_messages()
        # x_{i+1} | x_i ~ A[x_i, u] m_{i+1}(u): one row sampler per path position
        self._conditionals = [
            _RowSampler(A.indptr, A.indices, A.data * self._messages[i + 1][A.indices])
            for i in range(self.k - 1)]
        # pivot acceptance min(1, r(w) / r(v)), r = m_0 / d
        self._ratio = np.divide(self._messages[0], self.degree_,
                                out=np.zeros(self.n_nodes), where=self.degree_ > 0)
        rows = np.repeat(np.arange(self.n_nodes), np.diff(A.indptr))
        self._keys = rows.astype(np.int64) * self.n_nodes + A.indices  # sorted (CSR order)
        self._edge_cdf = np.cumsum(A.data) / A.data.sum()
        self._edge_rows = rows
        self._wedges: dict = {}
        self._enumeration: tuple | None = None
        self.start = start
        if start is None:
            self.state = self._initial_states(1, self._rng)[0]
        else:
            self.state = self._check_start(start)
        self._remember_start()

    # set-up -------------------------------------------------------------------------------------

    def _walk_messages(self) -> np.ndarray:
        """``m_i = A^{k-1-i} 1`` for ``i = 0..k-1``, each rescaled to max 1 (only ratios of one
        message matter, and rescaling avoids overflow for long paths)."""
        messages = np.empty((self.k, self.n_nodes))
        messages[-1] = 1.0
        for i in range(self.k - 2, -1, -1):
            m = self.adjacency_ @ messages[i + 1]
            messages[i] = m / m.max()
        return messages

    def _check_start(self, start: Any) -> np.ndarray:
        x = np.asarray(start)
        if x.shape != (self.k,) or not np.issubdtype(x.dtype, np.integer):
            raise ValueError(f"start must be {self.k} node positions (integers), got {start!r}")
        if x.min() < 0 or x.max() >= self.n_nodes:
            raise ValueError(f"start has node positions outside [0, {self.n_nodes})")
        if not self.is_homomorphism(x[None])[0]:
            raise ValueError("start is not a homomorphism: consecutive path nodes must be "
                             "joined by edges")
        return x.astype(np.int64)

    # patches ------------------------------------------------------------------------------------

    def _lookup(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """``A[rows, cols]`` elementwise (any shapes), by binary search in the sorted edge keys."""
        query = rows.astype(np.int64) * self.n_nodes + cols
        pos = np.minimum(np.searchsorted(self._keys, query), len(self._keys) - 1)
        return np.where(self._keys[pos] == query, self.adjacency_.data[pos], 0.0)

    def to_samples(self, states: Any) -> np.ndarray:
        """Patches ``A[x_a, x_b]`` of homomorphisms ``states`` (b, k): shape (b, k, k)."""
        x = np.asarray(states, dtype=np.int64)
        return self._lookup(x[:, :, None], x[:, None, :])

    def patch(self, x: Any) -> np.ndarray:
        """The k x k patch of one homomorphism ``x``."""
        return self.to_samples(np.asarray(x)[None])[0]

    def is_homomorphism(self, states: Any) -> np.ndarray:
        """Whether each row of ``states`` (m, k) maps every path edge onto an edge."""
        x = np.asarray(states, dtype=np.int64)
        return np.all(self._lookup(x[:, :-1], x[:, 1:]) > 0, axis=1)

    # the chains ---------------------------------------------------------------------------------

    def _tails(self, pivots: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Homomorphisms with the given pivots and ``x_1..x_{k-1}`` from their exact
        conditional: ``k - 1`` vectorized draws whatever the number of pivots."""
        x = np.empty((len(pivots), self.k), dtype=np.int64)
        x[:, 0] = pivots
        u = rng.random((self.k - 1, len(pivots)))
        for i, conditional in enumerate(self._conditionals):
            x[:, i + 1] = conditional.sample(x[:, i], u[i])
        return x

    def _initial_states(self, m: int, rng: np.random.Generator) -> np.ndarray:
        if self.start is not None:  # the given homomorphism, for every chain (Restarted)
            return np.tile(self._check_start(self.start), (m, 1))
        # a CSR entry drawn ~ its weight is a weighted-uniform edge with a uniform endpoint
        entry = np.searchsorted(self._edge_cdf, rng.random(m), side="right")
        pivots = self._edge_rows[np.minimum(entry, len(self._edge_rows) - 1)]
        return self._tails(pivots, rng)

    def _pivot_moves(self, pivots: np.ndarray, u: np.ndarray) -> np.ndarray:
        """One Metropolis–Hastings step of the pivots (vectorized); ``u`` is (2, m)."""
        proposed = self._walk.sample(pivots, u[0])
        accept = u[1] * self._ratio[pivots] < self._ratio[proposed]
        return np.where(accept, proposed, pivots)

    def _glauber_step(self, x: list, i: int, u: float) -> None:
        """Redraw ``x[i]`` in place from its conditional given its path neighbours."""
        if i == 0 or i == self.k - 1:
            x[i] = self._walk.sample_one(x[1] if i == 0 else x[i - 1], u)
            return
        nodes, cdf = self._wedge(x[i - 1], x[i + 1])
        x[i] = nodes[min(bisect.bisect_right(cdf, u), len(nodes) - 1)]

    def _wedge(self, a: int, c: int) -> tuple[list, list]:
        """Common neighbours ``v`` of ``a`` and ``c`` with the cdf of ``A[a, v] A[v, c]``
        (cached: a Glauber chain revisits the same pairs)."""
        key = (a, c) if a <= c else (c, a)
        found = self._wedges.get(key)
        if found is None:
            A = self.adjacency_
            sa, sc = slice(A.indptr[a], A.indptr[a + 1]), slice(A.indptr[c], A.indptr[c + 1])
            nodes, ia, ic = np.intersect1d(A.indices[sa], A.indices[sc], assume_unique=True,
                                           return_indices=True)
            weights = A.data[sa][ia] * A.data[sc][ic]
            cdf = np.cumsum(weights) / weights.sum()
            cdf[-1] = 1.0
            found = (nodes.tolist(), cdf.tolist())
            if len(self._wedges) > 1_000_000:  # bound the memory on huge graphs
                self._wedges.clear()
            self._wedges[key] = found
        return found

    def _transition(self, states: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if self.chain == "pivot":
            pivots = self._pivot_moves(states[:, 0], rng.random((2, len(states))))
            return self._tails(pivots, rng)
        u = rng.random((len(states), 2))
        sites = np.minimum((u[:, 0] * self.k).astype(np.intp), self.k - 1)
        out = states.copy()
        for row, (i, v) in enumerate(zip(sites.tolist(), u[:, 1].tolist(), strict=True)):
            x = out[row].tolist()
            self._glauber_step(x, i, v)
            out[row] = x
        return out

    def _path(self, state: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        if self.chain == "pivot":
            # the pivots move sequentially; the tails are conditionally independent given
            # the pivots, so they are drawn for the whole path at once
            u = rng.random((n, 2))
            pivots = np.empty(n, dtype=np.int64)
            v, ratio = int(state[0]), self._ratio
            for t, (a, b) in enumerate(zip(u[:, 0].tolist(), u[:, 1].tolist(), strict=True)):
                w = self._walk.sample_one(v, a)
                if b * ratio[v] < ratio[w]:
                    v = w
                pivots[t] = v
            return self._tails(pivots, rng)
        u = rng.random((n, 2))
        sites = np.minimum((u[:, 0] * self.k).astype(np.intp), self.k - 1).tolist()
        x = [int(v) for v in state]
        out = np.empty((n, self.k), dtype=np.int64)
        for t, (i, v) in enumerate(zip(sites, u[:, 1].tolist(), strict=True)):
            self._glauber_step(x, i, v)
            out[t] = x
        return out

    # finite state space -------------------------------------------------------------------------

    def count_homomorphisms(self) -> float:
        """Number of homomorphisms of the k-node path (walks with k - 1 steps)."""
        binary = self.adjacency_.copy()
        binary.data[:] = 1.0
        counts = np.ones(self.n_nodes)
        for _ in range(self.k - 1):
            counts = binary @ counts
        return float(counts.sum())

    def enumerate_states(self, max_states: int = 200_000) -> np.ndarray:
        """All homomorphisms ``(N, k)`` in lexicographic order.

        Raises ``ValueError`` if there are more than ``max_states``.
        """
        return self._enumerate(max_states)[0].copy()

    def _enumerate(self, max_states: int) -> tuple[np.ndarray, np.ndarray]:
        total = self.count_homomorphisms()
        if total > max_states:
            raise ValueError(f"the graph has {total:.4g} homomorphisms of the {self.k}-node "
                             f"path, more than max_states={max_states}: use a smaller graph "
                             f"or k, or raise max_states")
        if self._enumeration is None:
            A = self.adjacency_
            states = np.arange(self.n_nodes, dtype=np.int64)[:, None]
            weights = np.ones(self.n_nodes)
            for _ in range(self.k - 1):
                # extend every partial path by each neighbour of its last node (CSR order
                # keeps the result lexicographically sorted)
                last = states[:, -1]
                counts = np.diff(A.indptr)[last]
                parent = np.repeat(np.arange(len(states)), counts)
                offset = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
                entry = A.indptr[last][parent] + offset
                states = np.column_stack([states[parent], A.indices[entry]])
                weights = weights[parent] * A.data[entry]
            self._enumeration = (states, weights / weights.sum())
        return self._enumeration

    def state_index(self, states: Any, max_states: int = 200_000) -> np.ndarray:
        """Positions of homomorphisms ``states`` (m, k) in :meth:`enumerate_states`."""
        enumerated, _ = self._enumerate(max_states)
        x = np.asarray(states, dtype=np.int64)
        if x.ndim != 2 or x.shape[1] != self.k:
            raise ValueError(f"states must have shape (m, {self.k}), got {x.shape}")
        if float(self.n_nodes) ** self.k >= 2.0 ** 62:
            raise ValueError("state_index needs n_nodes ** k < 2 ** 62")
        powers = self.n_nodes ** np.arange(self.k - 1, -1, -1, dtype=np.int64)
        keys, query = enumerated @ powers, x @ powers
        pos = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
        if not np.all(keys[pos] == query):
            raise ValueError("states contains rows that are not homomorphisms")
        return pos

    def stationary_distribution(self, max_states: int = 200_000) -> np.ndarray:
        """``pi(x) ~ prod_i A[x_i, x_{i+1}]`` over :meth:`enumerate_states` (small graphs)."""
        return self._enumerate(max_states)[1].copy()

    def sample_space(self, max_states: int = 200_000) -> np.ndarray:
        """The patches of all homomorphisms, in :meth:`enumerate_states` order."""
        return self.to_samples(self._enumerate(max_states)[0])

    def transition_matrix(self, max_states: int = 200_000) -> sp.csr_array:
        """Exact kernel of the chain over :meth:`enumerate_states` (CSR, small graphs)."""
        states, pi = self._enumerate(max_states)
        if self.chain == "pivot":
            return self._pivot_kernel(states, pi)
        return self._glauber_kernel(states, pi)

    def _pivot_kernel(self, states: np.ndarray, pi: np.ndarray) -> sp.csr_array:
        """``K = E M C``: state -> its pivot (E), pivot MH kernel (M), pivot -> tail (C)."""
        N, n = len(states), self.n_nodes
        A = sp.coo_array(self.adjacency_)
        v, w = A.coords
        accept = np.minimum(1.0, np.divide(self._ratio[w], self._ratio[v],
                                           out=np.ones(len(v)), where=self._ratio[v] > 0))
        moves = A.data / self.degree_[v] * accept
        off = v != w
        M = sp.csr_array(sp.coo_array((moves[off], (v[off], w[off])), shape=(n, n)))
        M = M + sp.diags_array(np.maximum(1.0 - np.asarray(M.sum(axis=1)).ravel(), 0.0))
        E = sp.csr_array((np.ones(N), (np.arange(N), states[:, 0])), shape=(N, n))
        pivot_mass = np.bincount(states[:, 0], weights=pi, minlength=n)
        C = sp.csr_array((pi / pivot_mass[states[:, 0]], (states[:, 0], np.arange(N))),
                         shape=(n, N))
        return sp.csr_array(E @ M @ C)

    def _glauber_kernel(self, states: np.ndarray, pi: np.ndarray) -> sp.csr_array:
        """``(1/k) sum_i K_i``, ``K_i(x, y) = pi(y) / pi(x_{-i})`` for ``y`` equal to ``x`` off
        ``i``."""
        N = len(states)
        rows, cols, vals = [], [], []
        for i in range(self.k):
            _, group = np.unique(np.delete(states, i, axis=1), axis=0, return_inverse=True)
            group = group.ravel()
            mass = np.bincount(group, weights=pi)
            order = np.argsort(group, kind="stable")
            bounds = np.searchsorted(group[order], np.arange(len(mass) + 1))
            for g in range(len(mass)):
                members = order[bounds[g]:bounds[g + 1]]
                rows.append(np.repeat(members, len(members)))
                cols.append(np.tile(members, len(members)))
                vals.append(np.tile(pi[members] / mass[g], len(members)) / self.k)
        K = sp.coo_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                         shape=(N, N))
        return sp.csr_array(K)

    def __repr__(self) -> str:
        return (f"MotifSampler(n_nodes={self.n_nodes}, k={self.k}, "
                f"batch_size={self.batch_size}, chain={self.chain!r})")
