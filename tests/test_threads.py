"""Threads: every learner has ``n_threads`` and runs every public method inside its limit
(BLAS/OpenMP through threadpoolctl, PyTorch's intra-op pool), restored exactly afterwards."""

import importlib.util
import json
import threading

import numpy as np
import pytest
from sklearn.base import clone
from state_helpers import LEARNERS, make
from threadpoolctl import threadpool_info

import tensorstream.learners._guards as guards
from tensorstream import OnlineNMF, RobustNMF, load
from tensorstream.core.backend import limit_threads

HAS_TORCH = importlib.util.find_spec("torch") is not None


def _pools():
    return [pool["num_threads"] for pool in threadpool_info()]


@pytest.mark.parametrize("name", LEARNERS)
def test_every_learner_has_n_threads_and_every_method_runs_inside_its_limit(name, monkeypatch):
    model = make(name)
    assert model.get_params()["n_threads"] == 1
    assert clone(make(name, n_threads=None)).n_threads is None
    seen = []
    real = guards.limit_threads

    def spy(n_threads):
        seen.append(n_threads)
        return real(n_threads)

    monkeypatch.setattr(guards, "limit_threads", spy)
    X = np.random.default_rng(0).random((30, 8)) + 0.1
    model.set_params(n_threads=2)
    for method in ("fit", "transform", "fit_transform", "score", "partial_fit",
                   "inverse_transform"):
        if not hasattr(model, method):
            continue
        seen.clear()
        argument = model.transform(X) if method == "inverse_transform" else X
        seen.clear()
        getattr(model, method)(argument)
        assert seen and set(seen) == {2}, method


@pytest.mark.parametrize("name", LEARNERS)
def test_bad_n_threads_is_refused_before_anything_changes(name):
    model = make(name, n_threads=0)
    before = _pools()
    with pytest.raises(ValueError, match="n_threads"):
        model.fit(np.random.default_rng(0).random((30, 8)))
    assert not any(key.endswith("_") for key in vars(model))
    assert _pools() == before


def test_the_limit_holds_inside_and_is_restored_exactly_nested_and_concurrent():
    before = _pools()
    inside = []
    barrier = threading.Barrier(2)

    def work():
        with limit_threads(1):
            barrier.wait()
            with limit_threads(1):
                inside.append(_pools())
            barrier.wait()  # the other thread is still inside: the limit must hold
            inside.append(_pools())

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(inside) == 4 and all(all(n == 1 for n in pools) for pools in inside)
    assert _pools() == before


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
def test_torch_intra_op_threads_are_limited_and_restored():
    import torch

    given = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen = []
        model = OnlineNMF(2, batch_size=10, max_iter=1, random_state=0,
                          callback=lambda m, info: seen.append(torch.get_num_threads()))
        model.fit(torch.rand(30, 8, dtype=torch.float64))
        assert seen and set(seen) == {1}
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(given)


def test_checkpoints_with_the_old_blas_threads_name_are_refused(tmp_path):
    X = np.random.default_rng(0).random((30, 8))
    for model in (OnlineNMF(2, batch_size=10, max_iter=1, random_state=0, n_threads=None),
                  RobustNMF(2, max_iter=5, random_state=0, n_threads=None)):
        path = model.fit(X).save(tmp_path / f"{type(model).__name__}.npz")
        data = dict(np.load(path, allow_pickle=False))
        meta = json.loads(str(data["__meta__"]))
        meta["params"]["blas_threads"] = meta["params"].pop("n_threads")
        data["__meta__"] = np.array(json.dumps(meta))
        np.savez(path, **data)
        with pytest.raises(ValueError, match=r"has no parameter\(s\) \['blas_threads'\]"):
            load(path)
