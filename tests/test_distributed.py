"""Fitting on a Dask cluster: every step's batch split across workers gives the result of one
process (to 1e-10), with 1, 2 and 3 workers, numpy and torch, in-memory and chunked data; a
killed worker costs a recomputation, not the run; bad input is refused as on one machine."""

import importlib.util
import os
import signal

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
)

HAS_TORCH = importlib.util.find_spec("torch") is not None
pytestmark = pytest.mark.xdist_group("dask-cluster")

# every coder codes a sample the same whatever its batch (per-sample starts and stopping rules)
LEARNERS = {
    "cpdl": (lambda **kw: OnlineCPDL(3, batch_size=20, max_iter=2, random_state=0, **kw),
             (90, 6, 5)),
    "cpdl-kl": (lambda **kw: OnlineCPDL(3, loss="kl", batch_size=20, max_iter=2,
                                        random_state=0, **kw), (90, 6, 5)),
    "nmf-admm": (lambda **kw: OnlineNMF(3, batch_size=20, max_iter=2, random_state=0, **kw),
                 (90, 12)),
    "robust-nmf": (lambda **kw: RobustOnlineNMF(3, batch_size=20, max_iter=2, random_state=0,
                                                **kw), (90, 12)),
    "divergence": (lambda **kw: OnlineDivergenceNMF(3, batch_size=20, max_iter=2,
                                                    random_state=0, **kw), (90, 12)),
    "nmf": (lambda **kw: OnlineNMF(3, batch_size=20, max_iter=2, coder="hals",
                                   random_state=0, **kw), (90, 12)),
    "maxnorm": (lambda **kw: OnlineMaxNormMD(3, batch_size=20, max_iter=1, random_state=0,
                                             **kw), (60, 12)),
    "robust-pca": (lambda **kw: OnlineRobustPCA(3, batch_size=20, max_iter=1, random_state=0,
                                                **kw), (60, 12)),
}


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as local:
        yield local


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


def test_chunked_data_are_read_on_the_workers(cluster):
    """A dask array whose chunks do not divide the batch: same result, no copy on the driver."""
    make, shape = LEARNERS["nmf"]
    X = np.random.default_rng(1).random(shape)
    lazy = da.from_array(X, chunks=(7, 12))
    with _client(cluster, 3) as client:
        _assert_same(make().fit(X), make().fit(lazy, client=client))


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


def test_a_killed_worker_costs_a_recomputation_not_the_run():
    """Kill a worker process in the middle of a fit: the result equals an undisturbed fit."""
    make, shape = LEARNERS["nmf"]
    X = np.random.default_rng(4).random((200, 12))
    straight = make().fit(X)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as local, \
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
