"""The state an online learner carries between steps on torch tensors in host memory: the numpy
arrays its steps computed (``run(..., carry=True)``), made the tensors of ``state_`` only where
it is read. Whatever is read, written or mutated between steps, the learning is the same as
with ``state_`` made at every step."""

from __future__ import annotations

import copy
import pickle
import sys
import threading
import warnings

import numpy as np
import pytest
from state_helpers import state_of

import tensorstream.core.backend as backend
from tensorstream import OnlineCPDL, OnlineNMF
from tensorstream.core.backend import TORCH_CPU, Carried, as_tensors, run
from tensorstream.engine import OnlineState
from tensorstream.io import load_checkpoint

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def default_route(monkeypatch):
    """Every test starts from the default route (CI's portable pass sets the switch)."""
    monkeypatch.delenv(TORCH_CPU, raising=False)


def _data(seed=0, shape=(120, 9)):
    return np.random.default_rng(seed).random(shape)


def _batches(X, size=20):
    return [X[i:i + size] for i in range(0, len(X), size)]


def _learn(model, batches, between=None):
    for k, batch in enumerate(batches):
        model.partial_fit(torch.from_numpy(batch))
        if between is not None:
            between(model, k)
    return model


def _same_model(model, other):
    for U, V in zip(model.loadings_, other.loadings_):
        assert torch.equal(U, V)
    for name in ("A", "B"):
        assert torch.equal(model.statistics_[name], other.statistics_[name])
    assert model.statistics_["c"] == other.statistics_["c"]
    assert model.n_steps_ == other.n_steps_ and model.state_.health == other.state_.health


def _read_every_step(model, k):
    model.state_  # noqa: B018  (reading it is the point: state_ is made at every step)


# -- run(..., carry=True) -------------------------------------------------------------------------


def test_run_carries_the_state_as_the_numpy_arrays_it_computed():
    X = torch.ones((4, 3), dtype=torch.float64)
    seen = []

    def step(state, X):
        seen.append((type(state.loadings[0]), type(X)))
        return OnlineState(loadings=[state.loadings[0] * 2], statistics=None), X.sum(axis=1)

    start = OnlineState(loadings=[torch.ones((3, 2), dtype=torch.float64)], statistics=None)
    carried, sums = run("pytorch", step, start, X, carry=True)
    assert isinstance(carried, Carried) and isinstance(carried.arrays.loadings[0], np.ndarray)
    assert isinstance(sums, torch.Tensor)  # the rest is made tensors as ever
    arrays = carried.arrays.loadings[0]
    again, _ = run("pytorch", step, carried, X, carry=True)
    assert seen == [(np.ndarray, np.ndarray)] * 2
    assert np.array_equal(again.arrays.loadings[0], arrays * 2)
    assert "made" not in vars(carried)  # nothing was made tensors for the second call


@pytest.mark.parametrize("why", ["switch", "grad"])
def test_on_torch_kernels_a_carried_state_is_made_tensors_for_the_call_only(why, monkeypatch):
    carried = Carried(OnlineState(loadings=[np.ones((3, 2))], statistics=None))
    X = torch.ones((4, 3), dtype=torch.float64)
    if why == "switch":
        monkeypatch.setenv(TORCH_CPU, "torch")
    else:  # a tensor without a plain numpy view sends the call to torch's kernels
        X.requires_grad_(True)
    seen = []

    def step(state, X):
        seen.append((type(state.loadings[0]), type(X)))
        return state, X

    new, _ = run("pytorch", step, carried, X, carry=True)
    assert seen == [(torch.Tensor, torch.Tensor)]
    assert isinstance(new, OnlineState) and isinstance(new.loadings[0], torch.Tensor)
    assert "made" not in vars(carried)


def test_a_carried_states_tensors_share_its_memory_and_are_made_once():
    carried = Carried(OnlineState(loadings=[np.ones((3, 2))], statistics={"c": 1.5}))
    assert carried.current() is carried.arrays
    tensors = carried.tensors()
    assert tensors.loadings[0].data_ptr() == carried.arrays.loadings[0].ctypes.data
    assert tensors.statistics["c"] == 1.5
    assert carried.tensors() is tensors and carried.current() is tensors
    assert as_tensors(carried.arrays).loadings[0].data_ptr() == tensors.loadings[0].data_ptr()


# -- the learner ----------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [
    lambda: OnlineNMF(3, random_state=0),
    lambda: OnlineCPDL(3, random_state=0),
], ids=["nmf", "cpdl"])
def test_steps_carry_numpy_arrays_and_state_is_made_only_where_read(make, monkeypatch):
    made = []
    monkeypatch.setattr(backend, "as_tensors", lambda tree: made.append(1) or as_tensors(tree))
    X = _data(shape=(120, 3, 3)) if make().__class__ is OnlineCPDL else _data()
    model = make().fit(torch.from_numpy(X))
    assert made == []  # no state made tensors in a fit nobody read
    assert isinstance(vars(model)["state_"], Carried)
    assert model.n_steps_ > 1 and model.n_components_ == 3
    codes = model.transform(torch.from_numpy(X[:10]))
    assert isinstance(codes, torch.Tensor) and made == []
    assert all(isinstance(U, torch.Tensor) for U in model.loadings_) and made == [1]
    assert model.loadings_[0] is model.state_.loadings[0] and made == [1]  # made once


def test_a_carried_run_learns_what_a_run_reading_state_every_step_learns():
    batches = _batches(_data(1))
    carried = _learn(OnlineNMF(3, random_state=0), batches)
    read = _learn(OnlineNMF(3, random_state=0), batches, between=_read_every_step)
    _same_model(carried, read)
    on_numpy = OnlineNMF(3, random_state=0)
    for batch in batches:
        on_numpy.partial_fit(batch)
    for U, V in zip(carried.loadings_, on_numpy.loadings_):
        np.testing.assert_allclose(U.numpy(), V, rtol=1e-12, atol=1e-12)


def test_statistics_changed_between_steps_are_learned_from():
    """In place and replaced, as on numpy arrays: the next step starts from them."""
    def change(model, k):
        if k == 2:
            model.statistics_["A"].mul_(3.0)  # in place: the carried arrays are its memory
        if k == 4:
            model.statistics_["B"] = model.statistics_["B"] * 0.5  # a new tensor in the dict
            model.loadings_[0] = model.loadings_[0].flip(0).contiguous()

    batches = _batches(_data(2))
    changed = _learn(OnlineNMF(3, random_state=0), batches, between=change)
    reference = OnlineNMF(3, random_state=0)
    for k, batch in enumerate(batches):
        reference.partial_fit(batch)
        if k == 2:
            reference.statistics_["A"] *= 3.0
        if k == 4:
            reference.statistics_["B"] = reference.statistics_["B"] * 0.5
            reference.loadings_[0] = np.ascontiguousarray(reference.loadings_[0][::-1])
    for U, V in zip(changed.loadings_, reference.loadings_):
        np.testing.assert_allclose(U.numpy(), V, rtol=1e-12, atol=1e-12)
    unchanged = _learn(OnlineNMF(3, random_state=0), batches)
    assert not torch.allclose(changed.loadings_[0], unchanged.loadings_[0])


def test_a_state_set_between_steps_replaces_the_carried_one():
    batches = _batches(_data(3))
    first = _learn(OnlineNMF(3, random_state=0), batches[:2])
    model = _learn(OnlineNMF(3, random_state=0), batches[:4])
    model.state_ = first.state_  # back to the state after two batches
    assert model.n_steps_ == 2
    _same_model(_learn(model, batches[2:]), _learn(first, batches[2:]))


def test_switching_to_torch_kernels_between_steps_continues_from_the_carried_state(
        monkeypatch):
    batches = _batches(_data(4))
    model = _learn(OnlineNMF(3, random_state=0), batches[:3])
    monkeypatch.setenv(TORCH_CPU, "torch")
    _learn(model, batches[3:])
    assert not isinstance(vars(model)["state_"], Carried)  # tensors, from torch's kernels
    monkeypatch.delenv(TORCH_CPU)
    straight = _learn(OnlineNMF(3, random_state=0), batches)
    for U, V in zip(model.loadings_, straight.loadings_):
        np.testing.assert_allclose(U.numpy(), V.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("route", ["numpy", "torch"])
def test_a_refused_step_changes_nothing(route, monkeypatch):
    """Not even the carried state's tensors are made (on torch's kernels the step takes
    tensors made for it alone)."""
    model = _learn(OnlineNMF(3, random_state=0), _batches(_data(5)))
    monkeypatch.setenv(TORCH_CPU, route)
    before = state_of(model)
    for bad in (torch.from_numpy(_data(6)[:20] * 1e160), torch.from_numpy(_data(6)[:20, :4])):
        with pytest.raises(ValueError):
            model.partial_fit(bad)
        assert state_of(model) == before
    assert "made" not in vars(vars(model)["state_"])


def test_a_state_that_tracks_grad_is_learned_from_on_torchs_kernels():
    """A loading set to require grad (to differentiate a function of the dictionary) has no
    plain numpy view: the next step runs torch's kernels, as it always did."""
    batches = _batches(_data(9))
    model = _learn(OnlineNMF(3, random_state=0), batches[:3])
    W = model.loadings_[0]
    W.requires_grad_(True)
    (W ** 2).sum().backward()
    _learn(model, batches[3:])
    assert model.n_steps_ == len(batches) and torch.isfinite(model.loadings_[0]).all()


def test_a_carried_state_is_checkpointed_pickled_and_copied_as_state_would_be(tmp_path):
    batches = _batches(_data(7))
    model = _learn(OnlineNMF(3, random_state=0), batches[:3])
    copies = [load_checkpoint(model.save(tmp_path / "model.npz")),
              pickle.loads(pickle.dumps(model)), copy.deepcopy(model)]
    straight = _learn(model, batches[3:])
    for other in copies:
        _same_model(_learn(other, batches[3:]), straight)


def test_threads_reading_state_at_once_get_the_same_tensors():
    model = _learn(OnlineNMF(3, random_state=0), _batches(_data(8)))
    seen, start = [], threading.Barrier(4)

    def read():
        start.wait()
        seen.append(model.state_)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 4 and all(state is seen[0] for state in seen)


def test_a_thread_reading_while_another_learns_sees_a_fitted_learner_and_loses_no_step():
    """A step is committed in one store: a reader sees the state before or after it (a
    commit in two stores showed this learner unfitted in most runs of these 1,200 steps)."""
    X = torch.from_numpy(np.random.default_rng(0).random((20, 9)))
    errors, interval = [], sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a warning's bookkeeping would pace the threads
            for _ in range(6):
                model = OnlineNMF(3, random_state=0).partial_fit(X)
                done = threading.Event()

                def read(model=model, done=done):
                    while not done.is_set():
                        try:
                            model.loadings_  # noqa: B018
                        except Exception as error:  # noqa: BLE001  (any error is the failure)
                            errors.append(repr(error))

                reader = threading.Thread(target=read)
                reader.start()
                for _ in range(200):
                    model.partial_fit(X)
                done.set()
                reader.join()
                assert model.n_steps_ == 201
    finally:
        sys.setswitchinterval(interval)
    assert errors == []


def test_an_unfitted_learner_has_no_state():
    model = OnlineNMF(3)
    assert not hasattr(model, "state_")
    with pytest.raises(AttributeError, match="state_"):
        model.state_  # noqa: B018
