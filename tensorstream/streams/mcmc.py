"""MCMC samplers as streams: Metropolis on a graph of samples, the Ising model."""

from __future__ import annotations

import itertools
import math
import numbers
import operator
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from .base import _check_holding, _check_int, _check_real
from .chains import MarkovStream, _check_start, _IndexChain
from .graphs import _adjacency, _check_connected, _walk_sampler

__all__ = ["Metropolis", "Ising"]


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
