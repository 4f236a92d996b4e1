"""The state an online learner carries between steps on torch tensors in host memory: the numpy
arrays its steps computed (``run(..., carry=True)``), made the tensors of ``state_`` only where
it is read. Whatever is read, written or mutated between steps, the learning is the same as
with ``state_`` made at every step."""

from __future__ import annotations

import copy
import pickle
import threading

import numpy as np
import pytest

import tensorstream.learners._base as base
from tensorstream import OnlineCPDL, OnlineNMF
from tensorstream.core.backend import TORCH_CPU, as_tensors, as_views, run
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


def test_run_passes_the_carried_state_as_it_is_and_hands_back_the_numpy_result():
    carried = OnlineState(loadings=[np.ones((3, 2))], statistics=None)
    X = torch.ones((4, 3), dtype=torch.float64)
    seen = []

    def step(state, X):
        seen.append((state, type(X)))
        return OnlineState(loadings=[state.loadings[0] * 2], statistics=None), X.sum(axis=1)

    new, sums = run("pytorch", step, carried, X, carry=True)
    assert seen == [(carried, np.ndarray)]  # the state not walked, the batch a view
    assert isinstance(new.loadings[0], np.ndarray)  # the carried result stays numpy
    assert isinstance(sums, torch.Tensor)  # the rest is made tensors as ever


@pytest.mark.parametrize("why", ["switch", "grad"])
def test_run_on_torch_kernels_makes_the_carried_state_tensors(why, monkeypatch):
    carried = OnlineState(loadings=[np.ones((3, 2))], statistics=None)
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
    assert isinstance(new.loadings[0], torch.Tensor)


def test_views_and_tensors_of_a_state_share_its_memory():
    state = OnlineState(loadings=[torch.ones((3, 2), dtype=torch.float64)],
                        statistics={"A": torch.eye(2, dtype=torch.float64), "c": 1.5})
    views = as_views(state)
    assert isinstance(views.loadings[0], np.ndarray) and views.statistics["c"] == 1.5
    views.loadings[0][0, 0] = 7.0
    assert state.loadings[0][0, 0] == 7.0
    back = as_tensors(views)
    assert back.loadings[0].data_ptr() == state.loadings[0].data_ptr()


# -- the learner ----------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [
    lambda: OnlineNMF(3, random_state=0),
    lambda: OnlineCPDL(3, random_state=0),
], ids=["nmf", "cpdl"])
def test_steps_carry_numpy_arrays_and_state_is_made_only_where_read(make, monkeypatch):
    made = []
    monkeypatch.setattr(base, "as_tensors", lambda tree: made.append(1) or as_tensors(tree))
    X = _data(shape=(120, 3, 3)) if make().__class__ is OnlineCPDL else _data()
    model = make().fit(torch.from_numpy(X))
    assert made == []  # no state made tensors in a fit nobody read
    assert "state_" not in vars(model) and model.n_steps_ > 1 and model.n_components_ == 3
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
    assert "_carried_state" not in vars(model) and model.n_steps_ == 2
    _same_model(_learn(model, batches[2:]), _learn(first, batches[2:]))


def test_switching_to_torch_kernels_between_steps_continues_from_the_carried_state(
        monkeypatch):
    batches = _batches(_data(4))
    model = _learn(OnlineNMF(3, random_state=0), batches[:3])
    monkeypatch.setenv(TORCH_CPU, "torch")
    _learn(model, batches[3:])
    assert "_carried_state" not in vars(model)
    monkeypatch.delenv(TORCH_CPU)
    straight = _learn(OnlineNMF(3, random_state=0), batches)
    for U, V in zip(model.loadings_, straight.loadings_):
        np.testing.assert_allclose(U.numpy(), V.numpy(), rtol=1e-9, atol=1e-12)


def test_a_refused_step_keeps_the_carried_state(tmp_path):
    model = _learn(OnlineNMF(3, random_state=0), _batches(_data(5)))
    carried = vars(model)["_carried_state"]
    bad = torch.from_numpy(_data(6)[:20])
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        model.partial_fit(bad)
    assert vars(model)["_carried_state"] is carried and "state_" not in vars(model)


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


def test_an_unfitted_learner_has_no_state():
    model = OnlineNMF(3)
    assert not hasattr(model, "state_")
    with pytest.raises(AttributeError, match="state_"):
        model.state_  # noqa: B018
