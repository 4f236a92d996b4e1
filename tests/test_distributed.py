"""Fitting on a Dask cluster: every step's batch split across workers gives the result of one
process (to 1e-10), with 1, 2 and 3 workers, numpy and torch, in-memory and chunked data (read
by the workers themselves); VarianceReducedMF's full passes as map-reduces; a killed worker
costs a recomputation, not the run; a driver that died resumes from its checkpoint; bad input
(an unreachable scheduler, workers without the package, NaN on a worker) is refused clearly."""

import importlib
import importlib.util
import os
import signal
import threading

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from tensorstream import (  # noqa: E402
    OnlineCPDL,
    OnlineDivergenceNMF,
    OnlineMaxNormMD,
    OnlineNMF,
    OnlineRobustPCA,
    RobustOnlineNMF,
    VarianceReducedMF,
)
from tensorstream.cli import main  # noqa: E402

HAS_TORCH = importlib.util.find_spec("torch") is not None
pytestmark = pytest.mark.xdist_group("dask-cluster")

# every coder codes a sample the same whatever its batch (per-sample starts and stopping rules)
LEARNERS = {
    "cpdl": (lambda **kw: OnlineCPDL(3, batch_size=20, max_iter=2, random_state=0, **kw),
             (90, 6, 5)),
    "cpdl-admm": (lambda **kw: OnlineCPDL(3, coder="admm", batch_size=20, max_iter=2,
                                          random_state=0, **kw), (90, 6, 5)),
    # "auto" reads batch_size, not the shard's size: shards of 100 are coded by ADMM too
    "cpdl-auto": (lambda **kw: OnlineCPDL(3, batch_size=300, max_iter=1, random_state=0, **kw),
                  (600, 6, 5)),
    "cpdl-kl": (lambda **kw: OnlineDivergenceNMF(3, loss="kl", batch_size=20, max_iter=2,
                                                 random_state=0, **kw), (90, 6, 5)),
    "cpdl-kl-rounds": (lambda **kw: OnlineDivergenceNMF(3, loss="kl", dict_rounds=4,
                                                        batch_size=20, max_iter=2,
                                                        random_state=0, **kw), (90, 6, 5)),
    "nmf-admm": (lambda **kw: OnlineNMF(3, batch_size=20, max_iter=2, random_state=0, **kw),
                 (90, 12)),
    "robust-nmf": (lambda **kw: RobustOnlineNMF(3, batch_size=20, max_iter=2, random_state=0,
                                                **kw), (90, 12)),
    "divergence": (lambda **kw: OnlineDivergenceNMF(3, batch_size=20, max_iter=2,
                                                    random_state=0, **kw), (90, 12)),
    "nmf": (lambda **kw: OnlineNMF(3, batch_size=20, max_iter=2, coder="pivoting",
                                   random_state=0, **kw), (90, 12)),
    "maxnorm": (lambda **kw: OnlineMaxNormMD(3, batch_size=20, max_iter=1, random_state=0,
                                             **kw), (60, 12)),
    "robust-pca": (lambda **kw: OnlineRobustPCA(3, batch_size=20, max_iter=1, random_state=0,
                                                **kw), (60, 12)),
}


@pytest.fixture(scope="module")
def cluster():
    local = distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=False,
                                     dashboard_address=":0")
    try:
        yield local
    finally:
        try:
            local.close()
        except KeyError:
            # distributed's worker-status watcher can miss a worker that the tests' scaling
            # removed first (dask/distributed#5407): it fails only at close, after every test
            # ran, and says nothing about tensorstream
            pass


def _client(cluster, n_workers):
    cluster.scale(n_workers)
    client = distributed.Client(cluster)
    client.wait_for_workers(n_workers)
    return client


def _assert_same(a, b, tol=1e-10):
    assert a.n_steps_ == b.n_steps_ and a.n_samples_seen_ == b.n_samples_seen_
    for U, V in zip(a.loadings_, b.loadings_):
        np.testing.assert_allclose(np.asarray(V), np.asarray(U), rtol=0, atol=tol)


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_a_cluster_fit_equals_the_single_process_fit(cluster, name):
    make, shape = LEARNERS[name]
    X = np.random.default_rng(0).random(shape)
    straight = make().fit(X)
    for n_workers in (1, 2, 3):
        with _client(cluster, n_workers) as client:
            _assert_same(straight, make().fit(X, client=client))


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
def test_torch_on_a_cluster(cluster):
    import torch

    make, shape = LEARNERS["cpdl"]
    X = torch.tensor(np.random.default_rng(0).random(shape))
    with _client(cluster, 2) as client:
        on_cluster = make().fit(X, client=client)
    assert on_cluster.backend_ == "pytorch"
    _assert_same(make().fit(X), on_cluster)


def _data_transfers(client):
    """Keys the workers fetched from one another so far, but for scattered arrays (the
    loadings, which Dask may copy from worker to worker when it broadcasts them)."""
    logs = client.run(lambda dask_worker: [key for entry in dask_worker.transfer_incoming_log
                                           for key in entry["keys"]])
    return [key for keys in logs.values() for key in keys
            if not str(key).startswith("ndarray-")]


def test_chunked_data_are_read_on_the_workers(cluster):
    """A dask array whose chunks do not divide the batch: same result, no copy on the driver,
    and every worker reads its own shard (no data move between workers)."""
    make, shape = LEARNERS["nmf"]
    X = np.random.default_rng(1).random(shape)
    lazy = da.from_array(X, chunks=(7, 12))
    with _client(cluster, 3) as client:
        before = _data_transfers(client)
        _assert_same(make().fit(X), make().fit(lazy, client=client))
        assert _data_transfers(client) == before


def test_missing_entries_on_a_cluster(cluster):
    make, shape = LEARNERS["cpdl"]
    X = np.random.default_rng(2).random(shape)
    mask = np.random.default_rng(3).random(shape) < 0.8
    with _client(cluster, 2) as client:
        _assert_same(make().fit(X, mask=mask), make().fit(X, mask=mask, client=client))


def test_a_bad_value_on_a_worker_rejects_the_step_and_keeps_the_state(cluster):
    make, shape = LEARNERS["nmf"]
    X = np.random.default_rng(0).random(shape)
    model = make().fit(X)
    before = model.state_
    bad = X.copy()
    bad[57, 3] = np.nan
    with _client(cluster, 3) as client, pytest.raises(ValueError, match="NaN") as raised:
        model.fit(bad, client=client)
    assert "rows" in str(raised.value)
    assert model.state_ is before


def test_an_unreachable_scheduler_is_a_clear_error(monkeypatch):
    monkeypatch.setattr("tensorstream.engine.distributed.CONNECT_TIMEOUT", 1.0)
    model = OnlineNMF(2)
    with pytest.raises(ValueError, match="cannot reach the Dask scheduler"):
        model.fit(np.ones((10, 4)), client="tcp://127.0.0.1:9")
    assert not model._fitted


# a lost worker must cost a recomputation, never a hang: stop the run (and the process, where
# the cluster would not close) after three minutes
NO_HANG = pytest.mark.timeout(180, method="thread")


@NO_HANG
def test_a_killed_worker_costs_a_recomputation_not_the_run():
    """Kill a worker process in the middle of a fit: the result equals an undisturbed fit."""
    make, shape = LEARNERS["nmf"]
    X = np.random.default_rng(4).random((200, 12))
    straight = make().fit(X)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as local, \
            distributed.Client(local) as client:
        killed = []

        def kill_one(model, info):
            if info["step"] == 5 and not killed:
                pids = client.run(os.getpid)
                victim = sorted(pids.values())[0]
                os.kill(victim, signal.SIGKILL)
                killed.append(victim)
            return False

        on_cluster = make(callback=kill_one).fit(X, client=client)
    assert killed
    _assert_same(straight, on_cluster)


@NO_HANG
def test_a_worker_killed_between_two_rounds_of_a_step_costs_a_recomputation(monkeypatch):
    """Kill a worker while the driver moves the batch's dictionary between two rounds: the
    step is run again, and the fit equals an undisturbed one. (The loadings went by a
    broadcast to every worker before, which waited for ever for a worker that had just died:
    this run hung 1 time in 3, a kill just before a broadcast 2 in 3; it is a race with the
    scheduler's noticing the death, so this test may pass on such code.)"""
    from tensorstream.algorithms.divergence_cp import DivergenceCP

    def make(**kw):
        return OnlineDivergenceNMF(3, batch_size=40, max_iter=1, dict_rounds=5, random_state=0,
                                   **kw)

    X = np.random.default_rng(4).poisson(2.0, (200, 12)).astype(float)
    straight = make().fit(X)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as local, \
            distributed.Client(local) as client:
        calls, killed = [0], []
        move = DivergenceCP.round_dictionary

        def kill_in_step_two(self, sums, loadings):
            calls[0] += 1
            if calls[0] == 7 and not killed:  # step 2, before its third round
                victim = sorted(client.run(os.getpid).values())[0]
                os.kill(victim, signal.SIGKILL)
                killed.append(victim)
            return move(self, sums, loadings)

        monkeypatch.setattr(DivergenceCP, "round_dictionary", kill_in_step_two)
        on_cluster = make().fit(X, client=client)
    assert killed
    _assert_same(straight, on_cluster)


# -- VarianceReducedMF: full passes as map-reduces over the workers' blocks ---------------------


def _vr(**kw):
    return VarianceReducedMF(3, n_epochs=2, chunk_size=32, random_state=0, **kw)


def _ran_on_workers(client, model, X):
    """``model`` fitted on ``X`` with ``client``, and whether block sums ran on the workers."""
    with distributed.get_task_stream(client) as stream:
        model.fit(X, client=client)
    return model, any("block_sum" in task["key"] for task in stream.data)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_variance_reduced_full_passes_on_the_workers(cluster, backend):
    """Full gradients, snapshot codes and the P7 scatter on 1 and 2 workers, in-memory and
    chunked data: the single-process result to 1e-10, and the objective too."""
    if backend == "torch" and not HAS_TORCH:
        pytest.skip("needs torch")
    X = np.random.default_rng(5).random((150, 8))
    data = X
    if backend == "torch":
        import torch

        data = torch.tensor(X)
    formulations = ({"formulation": "odl", "method_params": {"store_snapshot_codes": True}},
                    {"formulation": "olrr"})
    for kw in formulations[:1] if backend == "torch" else formulations:
        straight = _vr(**kw).fit(data)
        for n_workers, lazy in ((2, False),) if backend == "torch" else (
                (1, False), (2, False), (2, True)):
            given = da.from_array(X, chunks=(40, 8)) if lazy else data
            with _client(cluster, n_workers) as client:
                model, remote = _ran_on_workers(client, _vr(**kw), given)
                assert remote
                if lazy:  # the passes with accurate solves, on the workers
                    assert model.objective(given, client=client) == pytest.approx(
                        straight.objective(X), rel=1e-10)
                    assert model.gradient_mapping(given, client=client) == pytest.approx(
                        straight.gradient_mapping(X), rel=1e-8)
            np.testing.assert_allclose(np.asarray(model.components_),
                                       np.asarray(straight.components_), rtol=0, atol=1e-10)
            assert model.history_[-1]["snapshot_loss"] == pytest.approx(
                straight.history_[-1]["snapshot_loss"], rel=1e-10)


def test_a_bad_value_in_a_workers_block_leaves_the_learner_unchanged(cluster):
    X = np.random.default_rng(6).random((100, 6))
    model = _vr().fit(X)
    before = model.components_.copy()
    X[70, 2] = np.nan
    with _client(cluster, 2) as client, pytest.raises(ValueError, match="NaN") as raised:
        model.fit(X, client=client)
    assert "rows 64 to 99" in str(raised.value)
    np.testing.assert_array_equal(model.components_, before)


# -- the cluster as the command line sees it ---------------------------------------------------


def test_info_describes_the_cluster(cluster, capsys):
    with _client(cluster, 2):
        assert main(["info", "--scheduler", cluster.scheduler_address]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "2 worker(s), 2 thread(s)" in lines[0]
    assert len(lines) == 3 and all("tensorstream 0" in line for line in lines[1:])


def test_info_of_an_unreachable_scheduler_is_one_line(capsys):
    assert main(["info", "--scheduler", "tcp://127.0.0.1:9", "--timeout", "1"]) == 1
    assert "--scheduler: cannot reach the Dask scheduler" in capsys.readouterr().err


def test_a_worker_without_the_package_is_named(cluster, monkeypatch, capsys):
    """Simulated: the import of tensorstream fails in the workers' threads (an in-process
    cluster), not in the driver's; the real thing is the slow test below."""
    real = importlib.import_module

    def refuse(name, *args):  # any module of the package: the probe imports its _version
        in_package = name == "tensorstream" or name.startswith("tensorstream.")
        if in_package and threading.current_thread() is not threading.main_thread():
            raise ModuleNotFoundError("No module named 'tensorstream'", name="tensorstream")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", refuse)
    with _client(cluster, 2) as client:
        with pytest.raises(ImportError, match="2 Dask worker.*cannot import 'tensorstream'"):
            OnlineNMF(2).fit(np.ones((10, 4)), client=client)
        assert main(["info", "--scheduler", cluster.scheduler_address]) == 0
    assert capsys.readouterr().out.count("cannot import 'tensorstream'") == 2


def _hide(package):
    """A worker plugin that makes ``package`` unimportable in the worker's process (a local
    class: it travels by value, the worker needs no test module)."""

    class Hide(distributed.WorkerPlugin):
        name = "hide-package"

        def setup(self, worker):
            import sys

            class Refuse:
                def find_spec(self, name, path=None, target=None):
                    if name == package or name.startswith(package + "."):
                        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                    return None

            for name in [m for m in sys.modules if m.split(".")[0] == package]:
                del sys.modules[name]
            sys.meta_path.insert(0, Refuse())

    return Hide()


@pytest.mark.slow
def test_a_worker_process_without_the_package_is_named():
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as local, \
            distributed.Client(local) as client:
        client.register_plugin(_hide("tensorstream"))
        model = OnlineNMF(2, batch_size=10)
        with pytest.raises(ImportError, match="cannot import 'tensorstream'") as raised:
            model.fit(np.random.default_rng(0).random((30, 4)), client=client)
        assert raised.value.name == "tensorstream" and not model._fitted


def test_the_driver_resumes_a_cluster_fit_from_its_checkpoint(cluster, tmp_path, monkeypatch):
    """The driver dies after step 5 (checkpoints every 2 steps): --resume goes on from step 4
    to the result of an uninterrupted run."""
    xr = pytest.importorskip("xarray")
    X = np.random.default_rng(7).random((60, 4, 3)).astype(np.float64)
    path = tmp_path / "x.nc"
    xr.DataArray(X, dims=("time", "a", "b"), name="obs").to_netcdf(path)
    fit = ["fit", str(path), "--var", "obs", "--sample-dim", "time", "--n-components", "2",
           "--batch-size", "8", "--steps", "9", "--quiet", "--checkpoint",
           str(tmp_path / "run.npz"), "--checkpoint-every", "2"]
    original = OnlineCPDL.partial_fit
    calls = []

    def dies(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 6:
            raise SystemExit("the driver died")
        return original(self, *args, **kwargs)

    with _client(cluster, 2):
        monkeypatch.setattr(OnlineCPDL, "partial_fit", dies)
        with pytest.raises(SystemExit):
            main([*fit, "--scheduler", cluster.scheduler_address, "--out",
                  str(tmp_path / "never.nc")])
        monkeypatch.setattr(OnlineCPDL, "partial_fit", original)
        from tensorstream import load

        assert load(tmp_path / "run.npz").n_steps_ == 4
        assert main([*fit, "--scheduler", cluster.scheduler_address, "--resume", "--out",
                     str(tmp_path / "resumed.nc")]) == 0
    assert main([*fit[:-4], "--out", str(tmp_path / "straight.nc")]) == 0
    with xr.open_dataset(tmp_path / "resumed.nc") as a, \
            xr.open_dataset(tmp_path / "straight.nc") as b:
        assert a.attrs["n_steps"] == 9
        for name in b.data_vars:
            np.testing.assert_allclose(a[name], b[name], rtol=0, atol=1e-10)


@pytest.mark.parametrize("n_workers", [1, 3])
def test_dead_atoms_are_reinitialised_on_the_cluster_as_in_one_process(cluster, n_workers):
    """The health checks run on the cluster too: the shards send their code counts, and the
    dead atoms' new loadings come from the batch's worst-explained samples gathered from the
    shards (in one process's order, ties by row)."""
    from tensorstream.engine.loop import LearningWarning

    X = np.random.default_rng(3).random((60, 8))
    X[17] = X[41] = 5.0  # two equally worst-explained samples in different shards: a tie
    init = np.full((8, 2), 0.5)
    init[:, 1] = 0.0  # a zero column: dead at once
    make = lambda: OnlineNMF(2, init=[init], batch_size=60, max_iter=1, random_state=0)  # noqa: E731
    with pytest.warns(LearningWarning, match=r"re-initialised dead atom\(s\) \[1\]"):
        straight = make().partial_fit(X)
    with _client(cluster, n_workers) as client:
        with pytest.warns(LearningWarning, match=r"re-initialised dead atom\(s\) \[1\]"):
            spread = make().partial_fit(X, client=client)
    _assert_same(straight, spread)
    ours, theirs = spread.state_.health, straight.state_.health
    assert (ours.idle_steps, ours.idle_samples, ours.bound_steps, ours.futile_reinits) == \
        (theirs.idle_steps, theirs.idle_samples, theirs.bound_steps, theirs.futile_reinits)
    # the loss sums are added in another order: equal to rounding
    np.testing.assert_allclose(ours.block, theirs.block, rtol=1e-12)
    np.testing.assert_allclose(ours.block_means, theirs.block_means, rtol=1e-12)


def test_a_declared_data_scale_is_used_on_the_cluster_too(cluster):
    """The first step on a cluster takes the declared scale (it used to keep 1.0 when no
    shard sums were asked for)."""
    X = np.random.default_rng(4).random((60, 12))
    make = lambda: RobustOnlineNMF(3, data_scale=2.0, batch_size=20, random_state=0)  # noqa: E731
    straight = make().fit(X)
    with _client(cluster, 2) as client:
        spread = make().fit(X, client=client)
    assert spread.scale_ == straight.scale_ == 2.0
    _assert_same(straight, spread)


def test_data_too_small_are_refused_on_the_cluster_as_in_one_process(cluster):
    X = np.random.default_rng(5).random((40, 12)) * 1e-300
    with pytest.raises(ValueError, match="too small"):
        RobustOnlineNMF(3, batch_size=20, random_state=0).partial_fit(X)
    model = RobustOnlineNMF(3, batch_size=20, random_state=0)
    with _client(cluster, 2) as client:
        with pytest.raises(ValueError, match="too small"):
            model.partial_fit(X, client=client)
    assert not hasattr(model, "components_")


@pytest.mark.parametrize("name", ["cpdl", "robust-nmf", "maxnorm"])
def test_missing_entries_on_a_cluster_from_the_first_step(cluster, name):
    """The first step's data scale was computed from the raw shards: missing='nan' was refused
    on the cluster and a mask's hidden entries (here 1e6) entered the scale."""
    make = {"cpdl": lambda: OnlineCPDL(3, batch_size=20, max_iter=1, random_state=0),
            "robust-nmf": lambda: RobustOnlineNMF(3, batch_size=20, random_state=0),
            "maxnorm": lambda: OnlineMaxNormMD(3, batch_size=20, random_state=0)}[name]
    rng = np.random.default_rng(0)
    X = rng.random((40, 12))
    mask = rng.random(X.shape) < 0.8
    junk = np.where(mask, X, 1e6)
    with _client(cluster, 2) as client:
        _assert_same(make().fit(junk, mask=mask), make().fit(junk, mask=mask, client=client))
        nan = np.where(mask, X, np.nan)
        single = make().set_params(missing="nan").fit(nan)
        _assert_same(single, make().set_params(missing="nan").fit(nan, client=client))


def test_a_refused_first_step_on_a_cluster_leaves_no_generator(cluster):
    """As in one process: the generator the refused step drew its initial loadings from is
    gone, so the next fit equals a fresh learner's."""
    rng = np.random.default_rng(0)
    tiny, good = rng.random((40, 12)) * 1e-300, rng.random((40, 12))
    model = RobustOnlineNMF(3, batch_size=20, random_state=0)
    with _client(cluster, 2) as client:
        with pytest.raises(ValueError, match="too small"):
            model.partial_fit(tiny, client=client)
        assert "_rng" not in model.__dict__
        model.partial_fit(good, client=client)
        fresh = RobustOnlineNMF(3, batch_size=20, random_state=0).partial_fit(good, client=client)
        np.testing.assert_array_equal(model.components_, fresh.components_)
        with pytest.raises(AttributeError, match="client= codes its shards on the workers"):
            _ = model.last_decomposition_
        with pytest.raises(ValueError, match=r"mask must have the shape of X \(40, 12\), got "
                                             r"\(39, 12\)"):
            model.partial_fit(good, mask=np.ones((39, 12), bool), client=client)


def test_a_list_mask_on_a_cluster(cluster):
    rng = np.random.default_rng(0)
    X = rng.random((40, 6)) + 0.1
    mask = (rng.random(X.shape) > 0.3).tolist()
    single = OnlineNMF(2, random_state=0).partial_fit(X, mask=mask)
    with _client(cluster, 2) as client:
        _assert_same(single, OnlineNMF(2, random_state=0).partial_fit(X, mask=mask,
                                                                      client=client))


def test_a_cluster_step_keeps_and_checks_the_columns(cluster):
    """partial_fit(client=...) kept no feature names and read a DataFrame whose columns were
    reordered by position, silently; the step in one process refuses it."""
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(np.random.default_rng(0).random((40, 6)) + 0.1, columns=list("abcdef"))
    with _client(cluster, 2) as client:
        model = OnlineNMF(2, random_state=0).partial_fit(X, client=client)
        assert list(model.feature_names_in_) == list("abcdef")
        before = model.components_.copy()
        with pytest.raises(ValueError, match="feature names should match"):
            model.partial_fit(X[list("fedcba")], client=client)
    np.testing.assert_array_equal(model.components_, before)


@pytest.mark.parametrize("name", ["cpdl", "nmf", "robust-nmf"])
def test_a_later_batch_too_small_is_refused_on_the_cluster_as_in_one_process(cluster, name):
    """One process refuses any batch whose squares underflow (check_not_too_small); the cluster
    checked only the first batch's scale, so a later tiny batch was learned as zeros there."""
    make, shape = LEARNERS[name]
    rng = np.random.default_rng(6)
    good, tiny = rng.random((40, *shape[1:])), rng.random((40, *shape[1:])) * 1e-300
    alone = make().partial_fit(good)
    with pytest.raises(ValueError, match="too small"):
        alone.partial_fit(tiny)
    with _client(cluster, 2) as client:
        spread = make().partial_fit(good, client=client)
        with pytest.raises(ValueError, match="too small"):
            spread.partial_fit(tiny, client=client)
    _assert_same(alone, spread)


@pytest.mark.parametrize("where", ["encode", "update"])
def test_failed_linear_algebra_on_the_cluster_is_named_as_in_one_process(cluster, monkeypatch,
                                                                         where):
    """A LinAlgError in a step (a worker's coding or the driver's dictionary step) surfaces
    as online_step's named ValueError, the state unchanged (it came out raw on a cluster)."""
    make, _ = LEARNERS["nmf"]
    X = np.random.default_rng(7).random((40, 12))
    with _client(cluster, 2) as client:
        model = make().partial_fit(X, client=client)
        steps, before = model.n_steps_, [np.array(U) for U in model.loadings_]

        def singular(*args, **kwargs):
            raise np.linalg.LinAlgError("Singular matrix")

        monkeypatch.setattr(type(model._algorithm()), where, singular)
        for kwargs in ({}, {"client": client}):
            with pytest.raises(ValueError, match="linear algebra failed on this batch"):
                model.partial_fit(X, **kwargs)
    assert model.n_steps_ == steps
    for U, V in zip(before, model.loadings_):
        np.testing.assert_array_equal(U, V)


def test_a_worker_gone_between_listing_and_scatter_costs_nothing(cluster, monkeypatch):
    """The batch's shards are scattered to the workers the scheduler listed a moment before;
    a worker killed just before a step (the killed-worker test, 1 run in many under load) is
    gone by the scatter, which the scheduler refused with KeyError: the whole fit failed. A
    listed worker that does not exist stands for it here: its shard goes to a live one."""
    make, _ = LEARNERS["nmf"]
    X = np.random.default_rng(8).random((60, 12))
    straight = make().fit(X)
    with _client(cluster, 2) as client:
        listed = client.scheduler_info

        def with_a_dead_worker(*args, **kwargs):
            info = listed(*args, **kwargs)
            return {**info, "workers": {"tcp://127.0.0.1:9": {}, **info["workers"]}}

        monkeypatch.setattr(client, "scheduler_info", with_a_dead_worker)
        on_cluster = make().fit(X, client=client)
    _assert_same(straight, on_cluster)
