"""Sample streams: stationary distributions (spec 004 E1, E2), determinism, checkpoints,
containers (numpy, torch, xarray, dask) and argument checks."""

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorstream.streams import (
    Epochs,
    IIDSlices,
    Ising,
    LazyRandomWalk,
    MarkovStream,
    Metropolis,
    RandomPatches,
    Restarted,
    SlidingWindow,
    Thinned,
    empirical_distribution,
    integrated_autocorrelation_time,
    total_variation,
)
from tensorstream.streams.motifs import MotifSampler

torch = pytest.importorskip("torch")


def data(n=20, shape=(3, 2), seed=0):
    return np.random.default_rng(seed).random((n, *shape))


def states_of(stream, n_batches):
    return np.concatenate([stream.next_states() for _ in range(n_batches)])


def tv_to_pi(stream, n_batches):
    """TV distance between the empirical distribution of the drawn states and pi."""
    states = states_of(stream, n_batches)
    if hasattr(stream, "state_index"):
        states = stream.state_index(states)
    pi = stream.stationary_distribution()
    return total_variation(empirical_distribution(states, len(pi)), pi)


def random_connected_graph(n, extra_edges, weights, seed):
    """A weighted connected graph: a random spanning tree plus extra edges."""
    rng = np.random.default_rng(seed)
    A = np.zeros((n, n))
    order = rng.permutation(n)
    for i in range(1, n):
        A[order[i], order[rng.integers(0, i)]] = 1.0
    for _ in range(extra_edges):
        a, b = rng.integers(0, n, 2)
        A[a, b] = 1.0
    A = np.maximum(A, A.T)
    if weights:
        W = rng.uniform(0.2, 3.0, (n, n))
        A = A * (W + W.T)
    return A


# -- E1: the samplers hit pi ----------------------------------------------------------------------


def test_iid_slices_are_uniform():
    stream = IIDSlices(data(50), batch_size=1000, random_state=0)
    assert tv_to_pi(stream, 100) < 0.02


def test_iid_without_replacement_has_distinct_samples_per_batch():
    stream = IIDSlices(data(10), batch_size=10, replace=False, random_state=0)
    for _ in range(5):
        assert sorted(stream.next_states().tolist()) == list(range(10))


def test_lazy_random_walk_on_cycle_is_uniform():
    # the cycle walk's path is a cumulative sum of i.i.d. steps: 10^6 steps cost milliseconds
    stream = LazyRandomWalk(data(20), "cycle", batch_size=10_000, holding=0.5, random_state=0)
    assert np.allclose(stream.stationary_distribution(), 1 / 20)
    assert tv_to_pi(stream, 100) < 0.02


def test_lazy_random_walk_on_graph_has_degree_distribution():
    graph = nx.karate_club_graph()
    X = data(graph.number_of_nodes())
    stream = LazyRandomWalk(X, graph, batch_size=1000, holding=0.3, random_state=1)
    degree = np.array([d for _, d in graph.degree(weight="weight")], dtype=float)
    assert np.allclose(stream.stationary_distribution(), degree / degree.sum())
    assert tv_to_pi(stream, 100) < 0.02


def test_metropolis_hits_a_non_uniform_target():
    X = data(10)
    target = np.linalg.norm(X.reshape(10, -1), axis=1) ** 4  # far from uniform
    stream = Metropolis(X, target, "cycle", batch_size=2000, random_state=0)
    pi = stream.stationary_distribution()
    assert np.allclose(pi, target / target.sum())
    assert pi.max() / pi.min() > 5
    assert tv_to_pi(stream, 100) < 0.02


def test_metropolis_with_zero_weights_never_visits_them():
    target = np.array([1.0, 2.0, 0.0, 0.0, 3.0, 1.0])
    stream = Metropolis(data(6), target, nx.complete_graph(6), batch_size=1000, random_state=0)
    states = states_of(stream, 50)
    assert set(np.unique(states)) == {0, 1, 4, 5}
    assert tv_to_pi(stream, 50) < 0.02


def test_ising_3x3_hits_pi():
    stream = Ising((3, 3), beta=0.4, batch_size=10_000, random_state=0)
    pi = stream.stationary_distribution()
    assert pi.shape == (512,) and abs(pi.sum() - 1) < 1e-12
    assert pi[0] == pi[-1] == pi.max()  # all -1 and all +1 are the ground states
    assert tv_to_pi(stream, 30) < 0.02


def test_ising_small_lattice_path_matches_vectorized_sweep(monkeypatch):
    import tensorstream.streams.mcmc as streams

    fast = Ising((3, 4), beta=0.5, batch_size=30, sweeps_per_sample=2, random_state=3)
    monkeypatch.setattr(streams, "_SMALL_LATTICE", 0)
    vectorized = Ising((3, 4), beta=0.5, batch_size=30, sweeps_per_sample=2, random_state=3)
    assert np.array_equal(fast.next_states(), vectorized.next_states())


def test_ising_state_order_and_values():
    stream = Ising((2, 2), beta=0.1, values="binary", random_state=0)
    states = stream.enumerate_states()
    assert np.array_equal(stream.state_index(states), np.arange(16))
    assert np.array_equal(states[5].ravel(), [-1, 1, -1, 1])  # 5 = 0b0101, row-major sites
    assert set(np.unique(stream.sample_space())) == {0.0, 1.0}
    assert set(np.unique(Ising((2, 2), 0.1).next_batch())) <= {-1.0, 1.0}


def test_restarted_samples_follow_mu_P_tau():
    X = data(12)
    chain = LazyRandomWalk(X, "cycle", batch_size=2000, holding=0.3, start=0, random_state=0)
    stream = Restarted(chain, tau=6)
    P = chain.transition_matrix().toarray()
    law = np.linalg.matrix_power(P, 6)[0]
    states = states_of(stream, 50)
    assert total_variation(empirical_distribution(states, 12), law) < 0.02
    assert total_variation(law, chain.stationary_distribution()) > 0.1  # not yet mixed


def test_thinned_keeps_pi_and_decorrelates():
    X = data(10)
    chain = LazyRandomWalk(X, "cycle", batch_size=1000, holding=0.5, random_state=0)
    thinned = Thinned(LazyRandomWalk(X, "cycle", batch_size=1000, holding=0.5, random_state=0),
                      tau=20)
    assert tv_to_pi(thinned, 50) < 0.02
    observable = np.cos(2 * np.pi * np.arange(10) / 10)
    tau_chain = integrated_autocorrelation_time(observable[states_of(chain, 50)])
    tau_thinned = integrated_autocorrelation_time(observable[states_of(thinned, 50)])
    assert tau_thinned < 2 < 10 < tau_chain


def test_thinned_takes_every_tau_th_state():
    X = data(30)
    chain = LazyRandomWalk(X, "cycle", batch_size=12, random_state=5)
    twin = LazyRandomWalk(X, "cycle", batch_size=4, random_state=5)
    full = chain.next_states()
    assert np.array_equal(Thinned(twin, tau=3).next_states(), full[2::3])


# -- E2: lazification keeps pi; autocorrelation ordering ------------------------------------------


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 12), extra=st.integers(0, 20), weighted=st.booleans(),
       holding=st.floats(0.0, 0.99), seed=st.integers(0, 10_000))
def test_lazification_keeps_pi_exactly(n, extra, weighted, holding, seed):
    A = random_connected_graph(n, extra, weighted, seed)
    stream = LazyRandomWalk(data(n), A, holding=holding, random_state=0)
    P, pi = stream.transition_matrix(), stream.state_distribution()
    assert np.abs(pi @ P - pi).sum() < 1e-12
    assert np.allclose(P.sum(axis=1), 1.0)
    assert np.allclose(pi, A.sum(axis=1) / A.sum())


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 12), extra=st.integers(0, 20), holding=st.floats(0.0, 0.99),
       seed=st.integers(0, 10_000))
def test_metropolis_kernel_keeps_target_exactly(n, extra, holding, seed):
    A = random_connected_graph(n, extra, True, seed)
    target = np.random.default_rng(seed).uniform(0.01, 1.0, n)
    stream = Metropolis(data(n), target, A, holding=holding, random_state=0)
    P, pi = stream.transition_matrix(), stream.stationary_distribution()
    assert np.abs(pi @ P - pi).sum() < 1e-12
    assert np.allclose(P.sum(axis=1), 1.0) and P.min() >= 0


@pytest.mark.parametrize("shape", [(3, 3), (2, 3), (4,)])
@pytest.mark.parametrize("beta, field", [(0.4, 0.0), (-0.3, 0.2)])
def test_ising_sweep_keeps_pi_exactly(shape, beta, field):
    stream = Ising(shape, beta=beta, field=field, sweeps_per_sample=2)
    P, pi = stream.transition_matrix(), stream.stationary_distribution()
    assert np.abs(pi @ P - pi).sum() < 1e-12
    assert np.allclose(P.sum(axis=1), 1.0)


def test_grid_and_window_chains_keep_pi():
    for stream in (LazyRandomWalk(data(12), "grid", grid_shape=(3, 4), holding=0.2),
                   SlidingWindow(data(12), length=3, stride=2, holding=0.3)):
        P, pi = stream.transition_matrix(), stream.state_distribution()
        assert np.abs(pi @ P - pi).sum() < 1e-12


def test_autocorrelation_time_of_ar1():
    rng = np.random.default_rng(0)
    phi, x = 0.8, np.zeros(100_000)
    noise = rng.standard_normal(x.size)
    for t in range(1, x.size):
        x[t] = phi * x[t - 1] + noise[t]
    exact = (1 + phi) / (1 - phi)  # 9
    assert abs(integrated_autocorrelation_time(x) - exact) < 0.1 * exact
    assert abs(integrated_autocorrelation_time(noise) - 1.0) < 0.1


def batch_mean_cos(stream, n_batches, n):
    """Per-batch mean of cos(2 pi i / n) over the batch's sample indices."""
    observable = np.cos(2 * np.pi * np.arange(n) / n)
    return np.array([observable[stream.next_states()].mean() for _ in range(n_batches)])


def test_autocorrelation_ordering_iid_lazy_window_slow_window():
    n, b, T = 10, 3, 40_000
    X = data(n)
    iid = IIDSlices(X, batch_size=b, random_state=0)
    lazy = LazyRandomWalk(X, "cycle", batch_size=b, holding=0.5, window=True, random_state=0)
    slow = LazyRandomWalk(X, "cycle", batch_size=b, holding=0.9, window=True, random_state=0)
    taus = [integrated_autocorrelation_time(batch_mean_cos(s, T, n)) for s in (iid, lazy, slow)]
    assert taus[0] < taus[1] < taus[2]
    # the windowed batch mean of cos is an eigenfunction: rho(t) = lambda^t exactly
    for tau, holding in zip(taus[1:], (0.5, 0.9), strict=True):
        lam = holding + (1 - holding) * np.cos(2 * np.pi / n)
        exact = (1 + lam) / (1 - lam)
        assert abs(tau - exact) < 0.4 * exact
    assert taus[0] < 1.2


# -- batches and their contents -------------------------------------------------------------------


def test_window_batches_are_consecutive_and_wrap():
    X = data(7)
    stream = LazyRandomWalk(X, "cycle", batch_size=5, window=True, random_state=2)
    for _ in range(20):
        state_before = stream.state
        idx = stream.next_states()
        assert np.array_equal(idx, (idx[0] + np.arange(5)) % 7)
        assert (idx[0] - state_before) % 7 in (0, 1, 6)  # one lazy step per batch
    batch = stream.to_samples(idx)
    assert np.array_equal(batch, X[idx])


def test_window_stationary_distribution_is_the_sample_share():
    graph = nx.path_graph(8)  # degrees 1, 2, ..., 2, 1: non-uniform pi
    stream = LazyRandomWalk(data(8), graph, batch_size=3, holding=0.2, window=True,
                            random_state=0)
    shares = stream.stationary_distribution()
    assert abs(shares.sum() - 1) < 1e-12
    states = states_of(stream, 100_000)
    assert total_variation(empirical_distribution(states, 8), shares) < 0.02
    assert not np.allclose(shares, stream.state_distribution())


def test_chain_batches_are_chain_paths():
    graph = nx.karate_club_graph()
    A = nx.to_numpy_array(graph)
    stream = LazyRandomWalk(data(34), graph, batch_size=500, holding=0.2, random_state=0)
    path = np.concatenate([[stream.state], stream.next_states(), stream.next_states()])
    moves = path[1:] != path[:-1]
    assert np.all(A[path[1:][moves], path[:-1][moves]] > 0)
    assert 0.7 < moves.mean() < 0.9  # holding 0.2
    assert path[1] == path[0]  # the first sample of a chain stream is its start state


def test_grid_walk_moves_to_grid_neighbours():
    stream = LazyRandomWalk(data(20), "grid", batch_size=1000, grid_shape=(4, 5), holding=0.0,
                            random_state=0)
    path = stream.next_states()
    r, c = np.unravel_index(path, (4, 5))
    dr, dc = np.diff(r) % 4, np.diff(c) % 5
    one_step = ((dr == 1) | (dr == 3)) & (dc == 0) | ((dc == 1) | (dc == 4)) & (dr == 0)
    assert np.all(one_step)


def test_epochs_visit_every_sample_once_per_pass():
    X = data(10, (2,))
    stream = Epochs(X, batch_size=4, n_epochs=3, random_state=0)
    batches = list(stream)
    assert [len(b) for b in batches] == [4, 4, 2] * 3
    for e in range(3):
        rows = np.concatenate(batches[3 * e:3 * e + 3])
        assert sorted(map(tuple, rows)) == sorted(map(tuple, X))
    assert len(list(Epochs(X, 4, n_epochs=2, drop_last=True))) == 4
    ordered = np.concatenate(list(Epochs(X, 3, shuffle=False)))
    assert np.array_equal(ordered, X)


def test_epochs_continue_across_iterations():
    stream = Epochs(data(10), batch_size=4, n_epochs=1, random_state=0)
    first = stream.next_states()
    rest = [stream.next_states() for _ in range(2)]
    assert sorted(np.concatenate([first, *rest]).tolist()) == list(range(10))
    assert stream.state == {"epoch": 1, "position": 0}
    assert len(list(stream)) == 3  # one more pass


def test_sliding_window_contents_and_sweep():
    X = np.random.default_rng(0).random((4, 30, 3))  # e.g. cities x hours x measurements
    stream = SlidingWindow(X, length=8, stride=5, axis=1, batch_size=2)
    assert stream.n_windows == 5
    batches = [stream.next_batch() for _ in range(3)]
    assert batches[0].shape == (2, 4, 8, 3)
    windows = np.concatenate(batches)
    for j, window in enumerate(windows):
        start = 5 * (j % 5)
        assert np.array_equal(window, X[:, start:start + 8])
    assert np.allclose(stream.stationary_distribution(), 0.2)
    assert stream.sample_space().shape == (5, 4, 8, 3)


def test_sliding_window_random_start_and_holding():
    stream = SlidingWindow(data(40), length=5, stride=1, batch_size=1000, random_start=True,
                           holding=0.5, random_state=0)
    states = states_of(stream, 50)
    steps = np.diff(states) % stream.n_windows
    assert set(np.unique(steps)) == {0, 1}
    assert total_variation(empirical_distribution(states, stream.n_windows),
                           stream.stationary_distribution()) < 0.02


def test_random_patches_contents_and_uniform_corners():
    image = np.random.default_rng(0).random((12, 10, 3))
    stream = RandomPatches(image, (4, 3), batch_size=2000, random_state=0)
    assert stream.n_corners == 9 * 8
    states = stream.next_states()
    patches = stream.to_samples(states[:50])
    for (a, c), patch in zip(stream.corners(states[:50]), patches, strict=True):
        assert np.array_equal(patch, image[a:a + 4, c:c + 3])
    assert tv_to_pi(stream, 40) < 0.02
    corners = stream.corners(np.arange(stream.n_corners))
    assert corners.max(axis=0).tolist() == [8, 7]  # the last corner is reachable
    assert stream.sample_space().shape == (72, 4, 3, 3)


# -- determinism, checkpoints, iteration -----------------------------------------------------------


def factories():
    X = data(30)
    graph = nx.karate_club_graph()
    target = np.arange(1.0, 31.0)
    return {
        "iid": lambda rs: IIDSlices(X, 5, random_state=rs),
        "epochs": lambda rs: Epochs(X, 7, n_epochs=3, random_state=rs),
        "lrw": lambda rs: LazyRandomWalk(X, "cycle", 5, random_state=rs),
        "lrw-graph": lambda rs: LazyRandomWalk(data(34), graph, 5, random_state=rs),
        "lrw-window": lambda rs: LazyRandomWalk(X, "grid", 5, window=True, grid_shape=(5, 6),
                                                random_state=rs),
        "metropolis": lambda rs: Metropolis(X, target, "cycle", 5, random_state=rs),
        "thinned": lambda rs: Thinned(LazyRandomWalk(X, "cycle", 5, random_state=rs), 3),
        "restarted": lambda rs: Restarted(Metropolis(X, target, batch_size=5, start="uniform",
                                                     random_state=rs), 4),
        "window": lambda rs: SlidingWindow(X, 4, 2, batch_size=5, holding=0.3, random_state=rs),
        "patches": lambda rs: RandomPatches(X, (10, 2), batch_size=5, random_state=rs),
        "ising": lambda rs: Ising((4, 4), 0.4, 5, random_state=rs),
        "motif-pivot": lambda rs: MotifSampler(graph, 5, 5, chain="pivot", random_state=rs),
        "motif-glauber": lambda rs: MotifSampler(graph, 5, 5, chain="glauber", random_state=rs),
    }


FACTORIES = factories()


def to_numpy(batch):
    return np.asarray(getattr(batch, "data", batch))


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_same_seed_same_batches(name):
    make = FACTORIES[name]
    a, b, c = make(7), make(7), make(8)
    batches_a = [a.next_batch() for _ in range(6)]
    batches_b = [b.next_batch() for _ in range(6)]
    batches_c = [c.next_batch() for _ in range(6)]
    assert all(np.array_equal(x, y) for x, y in zip(batches_a, batches_b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(batches_a, batches_c, strict=True))


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_get_state_set_state_resumes_exactly(name):
    stream = FACTORIES[name](3)
    for _ in range(4):
        stream.next_batch()
    checkpoint = stream.get_state()
    expected = [stream.next_batch() for _ in range(5)]
    for _ in range(3):
        stream.next_batch()
    stream.set_state(checkpoint)
    assert all(np.array_equal(x, y) for x, y in
               zip(expected, [stream.next_batch() for _ in range(5)], strict=True))
    twin = FACTORIES[name](99).set_state(checkpoint)  # a new object resumes too
    assert np.array_equal(twin.next_batch(), expected[0])


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_reset_and_continuing_iteration(name):
    stream = FACTORIES[name](4)
    stream.n_steps = 3
    first, second = list(stream), list(stream)
    assert len(first) == len(second) == 3
    stream.reset()
    again = list(stream)
    assert all(np.array_equal(x, y) for x, y in zip(first, again, strict=True))
    assert stream.n_batches_ == 3


def test_set_state_rejects_foreign_checkpoints():
    with pytest.raises(ValueError, match="get_state"):
        IIDSlices(data(), 2).set_state(Epochs(data(), 2).get_state())


def test_generator_random_state_is_used_in_place():
    rng = np.random.default_rng(0)
    a = IIDSlices(data(), 4, random_state=rng).next_states()
    b = IIDSlices(data(), 4, random_state=np.random.default_rng(0)).next_states()
    assert np.array_equal(a, b)
    with pytest.raises(TypeError, match="random_state"):
        IIDSlices(data(), 4, random_state=np.random.RandomState(0))


# -- containers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["iid", "lrw-window", "metropolis", "window", "patches"])
def test_torch_batches_stay_torch(name):
    X = data(30)
    make = {
        "iid": lambda Y: IIDSlices(Y, 5, random_state=0),
        "lrw-window": lambda Y: LazyRandomWalk(Y, "cycle", 5, window=True, random_state=0),
        "metropolis": lambda Y: Metropolis(Y, np.arange(1.0, 31.0), batch_size=5,
                                           random_state=0),
        "window": lambda Y: SlidingWindow(Y, 4, 3, batch_size=2, random_state=0),
        "patches": lambda Y: RandomPatches(Y, (10, 2), batch_size=5, random_state=0),
    }[name]
    reference = make(X).next_batch()
    batch = make(torch.tensor(X, dtype=torch.float32)).next_batch()
    assert isinstance(batch, torch.Tensor) and batch.dtype == torch.float32
    assert batch.device.type == "cpu"
    assert np.allclose(batch.numpy(), reference, atol=1e-6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_batches_stay_on_the_device():
    X = torch.tensor(data(30), device="cuda")
    for stream in (IIDSlices(X, 5, random_state=0), SlidingWindow(X, 4, 3, batch_size=2),
                   LazyRandomWalk(X, "cycle", 5, window=True, random_state=0),
                   RandomPatches(X, (10, 2), batch_size=5, random_state=0)):
        batch = stream.next_batch()
        assert batch.device == X.device and batch.shape[0] == stream.batch_size


def test_sample_axis_other_than_first():
    X = np.random.default_rng(0).random((3, 40, 2))
    stream = IIDSlices(X, 6, axis=1, random_state=0)
    idx = stream.next_states()
    assert np.array_equal(stream.to_samples(idx), np.moveaxis(X[:, idx], 1, 0))
    assert stream.sample_space().shape == (40, 3, 2)
    torch_batch = IIDSlices(torch.tensor(X), 6, axis=1, random_state=0).next_batch()
    assert np.array_equal(torch_batch.numpy(), np.moveaxis(X[:, idx], 1, 0))


def test_xarray_input_with_dimension_names():
    xr = pytest.importorskip("xarray")
    X = np.random.default_rng(0).random((5, 40, 2))
    da = xr.DataArray(X, dims=("lat", "time", "var"), coords={"time": np.arange(40) * 10})
    stream = LazyRandomWalk(da, "cycle", 4, axis="time", window=True, random_state=0)
    batch = stream.next_batch()
    assert isinstance(batch, xr.DataArray) and batch.dims == ("time", "lat", "var")
    idx = (batch["time"].values // 10)
    assert np.array_equal(batch.values, np.moveaxis(X[:, idx], 1, 0))
    windows = SlidingWindow(da, 6, 4, axis="time", batch_size=3).next_batch()
    assert windows.dims == ("window", "lat", "time", "var")
    assert np.array_equal(windows.values[1], X[:, 4:10])
    image = xr.DataArray(X, dims=("y", "x", "band"), coords={"band": ["r", "g"]})
    patches = RandomPatches(image, (2, 5), batch_size=4, random_state=0)
    states = patches.next_states()
    batch, corners = patches.to_samples(states), patches.corners(states)
    assert batch.dims == ("patch", "y", "x", "band") and list(batch["band"].values) == ["r", "g"]
    assert np.array_equal(batch.values[0], X[corners[0, 0]:corners[0, 0] + 2,
                                             corners[0, 1]:corners[0, 1] + 5])
    with pytest.raises(ValueError, match="axis"):
        IIDSlices(da, 2, axis="depth")


class ReadRecorder:
    """An array-like that records which blocks dask reads from it."""

    def __init__(self, array):
        self.array, self.shape, self.dtype, self.ndim = array, array.shape, array.dtype, array.ndim
        self.rows_read = set()

    def __getitem__(self, key):
        rows = key[0]
        self.rows_read.update(range(*rows.indices(self.shape[0])))
        return self.array[key]


def test_dask_reads_only_touched_chunks():
    dask_array = pytest.importorskip("dask.array")
    xr = pytest.importorskip("xarray")
    X = data(100, (4,))
    for wrap in (lambda d: d, lambda d: xr.DataArray(d, dims=("sample", "feature"))):
        source = ReadRecorder(X)
        stream = IIDSlices(wrap(dask_array.from_array(source, chunks=(10, 4))), 3,
                           random_state=0)
        idx = stream.next_states()
        batch = stream.to_samples(idx)
        assert isinstance(np.asarray(getattr(batch, "data", batch)), np.ndarray)
        assert np.array_equal(to_numpy(batch), X[idx])
        touched = {10 * (i // 10) + r for i in idx for r in range(10)}
        assert source.rows_read <= touched and len(source.rows_read) == len(set(idx // 10)) * 10


def test_dask_patches_and_windows():
    dask_array = pytest.importorskip("dask.array")
    image = np.random.default_rng(0).random((30, 20, 3))
    lazy = dask_array.from_array(image, chunks=(10, 10, 3))
    a = RandomPatches(lazy, (5, 4), batch_size=7, random_state=1).next_batch()
    b = RandomPatches(image, (5, 4), batch_size=7, random_state=1).next_batch()
    assert isinstance(a, np.ndarray) and np.array_equal(a, b)
    w = SlidingWindow(lazy, 6, 5, axis=1, batch_size=2).next_batch()
    assert np.array_equal(w, np.stack([image[:, 0:6], image[:, 5:11]]))


# -- argument checks -------------------------------------------------------------------------------


@pytest.mark.parametrize("make, error, match", [
    (lambda: IIDSlices(data(), 0), ValueError, "batch_size"),
    (lambda: IIDSlices(data(), 2.5), TypeError, "batch_size"),
    (lambda: IIDSlices(data(5), 6, replace=False), ValueError, "batch_size"),
    (lambda: IIDSlices([1, 2, 3], 2), TypeError, "X must be an array"),
    (lambda: IIDSlices(data(), 2, axis=3), ValueError, "axis"),
    (lambda: IIDSlices(data(), 2, axis="time"), TypeError, "axis"),
    (lambda: IIDSlices(data(), 2, n_steps=0), ValueError, "n_steps"),
    (lambda: Epochs(data(5), 6, drop_last=True), ValueError, "batch_size"),
    (lambda: Epochs(data(5), 2, n_epochs=0), ValueError, "n_epochs"),
    (lambda: LazyRandomWalk(data(5), "cycle", 6, window=True), ValueError, "batch_size"),
    (lambda: LazyRandomWalk(data(5), holding=1.0), ValueError, "holding"),
    (lambda: LazyRandomWalk(data(5), holding=-0.1), ValueError, "holding"),
    (lambda: LazyRandomWalk(data(5), "star"), ValueError, "graph"),
    (lambda: LazyRandomWalk(data(5), np.zeros((5, 5))), ValueError, "no edges"),
    (lambda: LazyRandomWalk(data(5), nx.empty_graph(5)), ValueError, "no edges"),
    (lambda: LazyRandomWalk(data(5), np.ones((4, 4))), ValueError, "4 nodes"),
    (lambda: LazyRandomWalk(data(3), np.triu(np.ones((3, 3)), 1)), ValueError, "symmetric"),
    (lambda: LazyRandomWalk(data(2), -np.ones((2, 2))), ValueError, "negative"),
    (lambda: LazyRandomWalk(data(4), nx.Graph([(0, 1), (2, 3)])), ValueError, "connected"),
    (lambda: LazyRandomWalk(data(4), nx.DiGraph([(0, 1), (1, 2), (2, 3)])), ValueError,
     "undirected"),
    (lambda: LazyRandomWalk(data(6), "grid"), ValueError, "grid_shape"),
    (lambda: LazyRandomWalk(data(6), "grid", grid_shape=(2, 2)), ValueError, "grid_shape"),
    (lambda: LazyRandomWalk(data(6), start=6), ValueError, "start"),
    (lambda: Metropolis(data(3), [1.0, -1.0, 1.0]), ValueError, "negative"),
    (lambda: Metropolis(data(3), [1.0, np.nan, 1.0]), ValueError, "NaN"),
    (lambda: Metropolis(data(3), [1.0, 1.0]), ValueError, "shape"),
    (lambda: Metropolis(data(3), [0.0, 0.0, 0.0]), ValueError, "all zero"),
    (lambda: Metropolis(data(4), [1.0, 0.0, 1.0, 0.0], nx.path_graph(4)), ValueError,
     "connected"),
    (lambda: Metropolis(data(3), [1.0, 0.0, 1.0], start=1), ValueError, "start"),
    (lambda: Thinned(IIDSlices(data(), 2), 2), TypeError, "Markov"),
    (lambda: Thinned(LazyRandomWalk(data(), window=True), 2), ValueError, "window"),
    (lambda: Restarted(LazyRandomWalk(data()), 0), ValueError, "tau"),
    (lambda: SlidingWindow(data(5), 6), ValueError, "length"),
    (lambda: SlidingWindow(data(5), 2, stride=0), ValueError, "stride"),
    (lambda: RandomPatches(data(5), (6, 2)), ValueError, "patch_shape"),
    (lambda: RandomPatches(data(5), (2, 2, 2, 2)), ValueError, "patch_shape"),
    (lambda: Ising((1, 3)), ValueError, "shape"),
    (lambda: Ising((3, 3), beta=float("nan")), TypeError, "beta"),
    (lambda: Ising((3, 3), values="bits"), ValueError, "values"),
    (lambda: Ising((5, 5)).stationary_distribution(), ValueError, "sites"),
])
def test_bad_arguments(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_streams_are_markov_streams_where_expected():
    assert isinstance(LazyRandomWalk(data()), MarkovStream)
    assert isinstance(Ising((3, 3)), MarkovStream)
    assert not isinstance(IIDSlices(data(), 2), MarkovStream)
    P = LazyRandomWalk(data()).transition_matrix()
    assert sp.issparse(P)


def test_expected_loss_of_streams_over_a_data_array():
    """``expected_loss`` works on streams over an ``xarray.DataArray`` (it indexed the sample
    space by position 0, which xarray refuses), with the value ``score`` gives under the
    uniform stationary distribution of i.i.d. slices."""
    import warnings

    import xarray as xr

    from tensorstream import OnlineCPDL
    from tensorstream.streams import IIDSlices, SlidingWindow, expected_loss

    X = xr.DataArray(np.random.default_rng(0).random((12, 5, 4)), dims=("t", "a", "b"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        slices = IIDSlices(X, 4, random_state=0)
        model = OnlineCPDL(2, random_state=0).fit(slices, n_steps=5, sample_dim="t")
        assert expected_loss(model, slices) == pytest.approx(-model.score(X), rel=1e-10)
        windows = SlidingWindow(X, 3, axis="t", batch_size=2, random_state=0)
        windowed = OnlineCPDL(2, random_state=0).fit(windows, n_steps=4, sample_dim="window")
        assert np.isfinite(expected_loss(windowed, windows))


def test_autocorrelation_time_of_an_anticorrelated_chain_is_positive_and_right():
    """Two states, holding 0.15: lambda = -0.7, tau = (1 + lambda) / (1 - lambda) = 0.176
    (Sokal's window stopped at lag 1, where the partial sum is -0.4, and returned it)."""
    X = np.array([[0.0], [1.0]])
    states = LazyRandomWalk(X, "cycle", batch_size=100_000, holding=0.15,
                            random_state=0).next_states().astype(float)
    assert integrated_autocorrelation_time(states) == pytest.approx(0.3 / 1.7, rel=0.05)
    assert integrated_autocorrelation_time(states, method="sokal") > 0
    assert integrated_autocorrelation_time(np.tile([1.0, -1.0], 500)) > 0
    with pytest.raises(ValueError, match="x contains NaN"):
        integrated_autocorrelation_time([1.0, np.nan, 2.0])
    with pytest.raises(ValueError, match="method must be 'geyer' or 'sokal'"):
        integrated_autocorrelation_time(states, method="emcee")


def test_restarted_samples_have_the_law_mu_p_tau():
    """Restarted.stationary_distribution() is the law mu P^tau of its samples (it returned the
    chain's pi, so expected_loss weighted the wrong objective)."""
    chain = LazyRandomWalk(data(20), "cycle", batch_size=1000, holding=0.5, start=0,
                           random_state=0)
    stream = Restarted(chain, tau=3)
    law = np.linalg.matrix_power(chain.transition_matrix().toarray(), 3)[0]
    np.testing.assert_allclose(stream.stationary_distribution(), law, atol=1e-15)
    states = np.concatenate([stream.next_states() for _ in range(100)])
    assert total_variation(empirical_distribution(states, 20), law) < 0.01
    window = SlidingWindow(data(12), length=3, holding=0.3, random_start=True)
    np.testing.assert_allclose(Restarted(window, tau=4).stationary_distribution(), 0.1)


@pytest.mark.parametrize("make, name", [
    (lambda X: IIDSlices(X, 4, replace="False"), "replace"),
    (lambda X: Epochs(X, 4, shuffle="False"), "shuffle"),
    (lambda X: Epochs(X, 4, drop_last=0), "drop_last"),
    (lambda X: LazyRandomWalk(X, window="no"), "window"),
    (lambda X: SlidingWindow(X, 2, random_start="yes"), "random_start"),
])
def test_stream_switches_must_be_booleans(make, name):
    """"False" would have meant True: sampling with replacement, shuffling."""
    with pytest.raises(TypeError, match=f"{name} must be True or False"):
        make(data(10))
    assert IIDSlices(data(10), 4, replace=np.bool_(False)).replace is False


def test_random_patches_refuse_a_sample_dim_the_image_has():
    image = xr.DataArray(np.zeros((6, 8, 3)), dims=("patch", "x", "band"))
    with pytest.raises(ValueError, match="sample_dim 'patch' is already a dimension of image"):
        RandomPatches(image, (2, 4))
    assert RandomPatches(image, (2, 4), sample_dim="p").next_batch().dims == ("p", "patch", "x",
                                                                              "band")


def test_restarted_over_a_chain_without_a_start_law_says_so():
    """Its samples' law mu P^tau is unknown: refused, not replaced by pi."""
    stream = Restarted(Ising((3, 3), beta=0.4), tau=2)
    with pytest.raises(NotImplementedError, match="law of the samples"):
        stream.stationary_distribution()
