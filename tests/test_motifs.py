"""Motif sampling: both chains keep pi(x) ~ prod A[x_i, x_{i+1}] exactly, hit it empirically
(spec 004 E1) and never leave the homomorphisms of the path."""

import itertools

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorstream.streams import Restarted, Thinned, empirical_distribution, total_variation
from tensorstream.streams.motifs import MotifSampler

CHAINS = ["pivot", "glauber"]


def triangle_with_tail():
    """A triangle 0-1-2 with a pendant path 2-3-4-5: non-bipartite, non-regular."""
    return nx.Graph([(0, 1), (1, 2), (0, 2), (2, 3), (3, 4), (4, 5)])


def weighted_graph():
    graph = triangle_with_tail()
    for (a, b), w in zip(graph.edges, [1.0, 2.5, 0.5, 3.0, 1.0, 0.25], strict=True):
        graph[a][b]["weight"] = w
    graph.add_edge(5, 5, weight=0.7)  # a self-loop is a legal edge for homomorphisms
    return graph


def brute_force(A, k):
    """All homomorphisms of the k-node path into A and their normalised weights."""
    n = len(A)
    states, weights = [], []
    for x in itertools.product(range(n), repeat=k):
        w = np.prod([A[x[i], x[i + 1]] for i in range(k - 1)])
        if w > 0:
            states.append(x)
            weights.append(w)
    return np.array(states), np.array(weights) / np.sum(weights)


@pytest.mark.parametrize("graph", [triangle_with_tail(), weighted_graph()])
@pytest.mark.parametrize("k", [2, 3, 4])
def test_enumeration_matches_brute_force(graph, k):
    sampler = MotifSampler(graph, k, random_state=0)
    states, pi = brute_force(nx.to_numpy_array(graph), k)
    assert np.array_equal(sampler.enumerate_states(), states)  # lexicographic order
    assert np.allclose(sampler.stationary_distribution(), pi)
    assert sampler.count_homomorphisms() == len(states)
    assert np.array_equal(sampler.state_index(states[::-1]), np.arange(len(states))[::-1])


@settings(max_examples=20, deadline=None)
@given(n=st.integers(2, 6), edges=st.sets(st.tuples(st.integers(0, 5), st.integers(0, 5)),
                                          min_size=1, max_size=12),
       weighted=st.booleans(), k=st.integers(2, 4), chain=st.sampled_from(CHAINS))
def test_both_chains_keep_pi_exactly(n, edges, weighted, k, chain):
    rng = np.random.default_rng(len(edges))
    A = np.zeros((n, n))
    for a, b in [*edges, *((i, i + 1) for i in range(n - 1))]:  # connected: a path through all
        A[a % n, b % n] = A[b % n, a % n] = rng.uniform(0.5, 2.0) if weighted else 1.0
    sampler = MotifSampler(A, k, chain=chain, random_state=0)
    P, pi = sampler.transition_matrix(), sampler.stationary_distribution()
    assert np.abs(pi @ P - pi).sum() < 1e-12
    assert np.allclose(P.sum(axis=1), 1.0)
    assert P.min() >= 0


@pytest.mark.parametrize("chain, k, n_batches", [("pivot", 4, 100), ("glauber", 3, 400),
                                                 ("glauber", 4, 500)])
def test_empirical_distribution_matches_pi(chain, k, n_batches):
    sampler = MotifSampler(triangle_with_tail(), k, batch_size=1000, chain=chain, random_state=0)
    states = np.concatenate([sampler.next_states() for _ in range(n_batches)])
    pi = sampler.stationary_distribution()
    empirical = empirical_distribution(sampler.state_index(states), len(pi))
    assert total_variation(empirical, pi) < 0.02


def test_weighted_graph_pivot_chain_matches_pi():
    sampler = MotifSampler(weighted_graph(), 3, batch_size=1000, random_state=1)
    states = np.concatenate([sampler.next_states() for _ in range(100)])
    pi = sampler.stationary_distribution()
    assert pi.max() / pi.min() > 50  # far from uniform
    empirical = empirical_distribution(sampler.state_index(states), len(pi))
    assert total_variation(empirical, pi) < 0.02


@pytest.mark.parametrize("chain", CHAINS)
def test_chain_stays_on_homomorphisms_at_every_step(chain):
    graph = nx.karate_club_graph()
    sampler = MotifSampler(graph, 12, batch_size=500, chain=chain, random_state=0)
    for _ in range(6):
        states = sampler.next_states()
        assert np.all(sampler.is_homomorphism(states))
    A = nx.to_numpy_array(graph, weight=None)
    assert np.all(A[states[:, :-1], states[:, 1:]] > 0)
    restarted = Restarted(MotifSampler(graph, 12, batch_size=200, chain=chain,
                                       random_state=0), tau=3)
    assert np.all(sampler.is_homomorphism(restarted.next_states()))


def test_glauber_moves_one_node_and_pivot_redraws_the_tail():
    graph = nx.karate_club_graph()
    glauber = MotifSampler(graph, 8, batch_size=300, chain="glauber", random_state=0)
    path = glauber.next_states()
    assert np.all((path[1:] != path[:-1]).sum(axis=1) <= 1)
    pivot = MotifSampler(graph, 8, batch_size=300, chain="pivot", random_state=0)
    path = pivot.next_states()
    assert ((path[1:, 1:] != path[:-1, 1:]).sum(axis=1) > 1).mean() > 0.5


def test_patches_are_adjacency_submatrices():
    graph = weighted_graph()
    A = nx.to_numpy_array(graph)
    sampler = MotifSampler(graph, 5, batch_size=50, random_state=0)
    states = sampler.next_states()
    patches = sampler.to_samples(states)
    assert patches.shape == (50, 5, 5)
    assert np.array_equal(patches, A[states[:, :, None], states[:, None, :]])
    assert np.allclose(patches, np.swapaxes(patches, 1, 2))
    assert np.array_equal(np.diagonal(patches, 0, 1, 2), np.where(states == 5, 0.7, 0.0))
    assert np.all(np.diagonal(patches, 1, 1, 2) > 0)  # path edges are edges
    assert np.array_equal(sampler.patch(states[0]), patches[0])
    assert sampler.sample_space().shape == (sampler.count_homomorphisms(), 5, 5)


def test_graph_inputs_agree():
    graph = weighted_graph()
    A = nx.to_numpy_array(graph)
    pis = [MotifSampler(g, 3, random_state=0).stationary_distribution()
           for g in (graph, A, sp.csr_array(A), sp.coo_matrix(A))]
    assert all(np.allclose(pi, pis[0]) for pi in pis)
    labelled = nx.relabel_nodes(graph, {i: f"n{i}" for i in graph})
    assert MotifSampler(labelled, 3).nodes_ == [f"n{i}" for i in range(6)]


def test_start_state_and_checkpoints():
    graph = nx.karate_club_graph()
    start = np.array([0, 1, 2, 3])
    sampler = MotifSampler(graph, 4, batch_size=10, start=start, chain="glauber",
                           random_state=0)
    assert np.array_equal(sampler.next_states()[0], start)
    checkpoint = sampler.get_state()
    expected = sampler.next_batch()
    sampler.next_batch()
    assert np.array_equal(sampler.set_state(checkpoint).next_batch(), expected)
    thinned = Thinned(MotifSampler(graph, 4, batch_size=10, random_state=0), tau=5)
    assert thinned.next_batch().shape == (10, 4, 4)


def test_long_paths_do_not_overflow():
    sampler = MotifSampler(nx.complete_graph(30), 60, batch_size=20, random_state=0)
    assert np.all(np.isfinite(sampler._messages)) and np.all(sampler._messages > 0)
    assert np.all(sampler.is_homomorphism(sampler.next_states()))


@pytest.mark.parametrize("make, error, match", [
    (lambda: MotifSampler(triangle_with_tail(), 1), ValueError, "k"),
    (lambda: MotifSampler(triangle_with_tail(), 2.0), TypeError, "k"),
    (lambda: MotifSampler(nx.empty_graph(4), 3), ValueError, "no edges"),
    (lambda: MotifSampler(np.zeros((3, 3)), 3), ValueError, "no edges"),
    (lambda: MotifSampler(np.array([[0.0, 1.0], [0.0, 0.0]]), 3), ValueError, "symmetric"),
    (lambda: MotifSampler(-np.ones((2, 2)), 3), ValueError, "negative"),
    (lambda: MotifSampler(np.ones((2, 3)), 3), ValueError, "square"),
    (lambda: MotifSampler(triangle_with_tail(), 3, chain="metropolis"), ValueError, "chain"),
    (lambda: MotifSampler(triangle_with_tail(), 3, batch_size=0), ValueError, "batch_size"),
    (lambda: MotifSampler(triangle_with_tail(), 3, start=[0, 3, 4]), ValueError,
     "homomorphism"),
    (lambda: MotifSampler(triangle_with_tail(), 3, start=[0, 1]), ValueError, "start"),
    (lambda: MotifSampler(nx.karate_club_graph(), 10).stationary_distribution(), ValueError,
     "max_states"),
    (lambda: MotifSampler(triangle_with_tail(), 3).state_index([[0, 3, 4]]), ValueError,
     "homomorphisms"),
])
def test_bad_arguments(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_restarted_chains_start_from_the_given_homomorphism():
    """``Restarted`` over a ``MotifSampler`` with a ``start`` restarts every chain there (the
    classical multistart): after one step a pivot is the start's first node or a neighbour of
    it (the random start was used instead)."""
    G = nx.karate_club_graph()
    chains = Restarted(MotifSampler(G, 3, batch_size=5, start=[0, 1, 2], random_state=0),
                       tau=1)
    pivots = np.concatenate([chains.next_states()[:, 0] for _ in range(100)])
    assert set(pivots.tolist()) <= {0, *G.neighbors(0)}
    assert MotifSampler(G, 3, start=[0, 1, 2], random_state=0).state.tolist() == [0, 1, 2]


def test_a_graph_of_several_components_is_refused():
    """The chains move along edges: on two components they stay in one and never reach pi
    (LazyRandomWalk and Metropolis refuse such graphs too). Isolated nodes are harmless."""
    two = nx.disjoint_union(nx.complete_graph(4), nx.complete_graph(5))
    for chain in CHAINS:
        with pytest.raises(ValueError, match="graph is not connected \\(2 components"):
            MotifSampler(two, 3, chain=chain)
    with_isolated = nx.complete_graph(4)
    with_isolated.add_node(9)
    MotifSampler(with_isolated, 3, random_state=0).next_states()
