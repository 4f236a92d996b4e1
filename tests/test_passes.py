"""``n_iter_`` of the online learners counts passes over the data, as scikit-learn's
``MiniBatchNMF`` does (those started); ``n_steps_`` counts mini-batches. Checkpoints keep both.
A failed call leaves the random generators it drew from as they were."""

import json

import numpy as np
import pytest

from tensorstream import OnlineCPDL, OnlineNMF, load
from tensorstream.core.validation import bit_generator_of, generator_of


def _state(bits):
    """A bit generator's state as text (MT19937's holds an array)."""
    return json.dumps(bits.state, default=lambda array: array.tolist(), sort_keys=True)


def _data(n=30, seed=0):
    return np.random.default_rng(seed).random((n, 5))


def test_fit_on_an_array_counts_its_passes():
    model = OnlineNMF(2, batch_size=10, max_iter=4, random_state=0).fit(_data())
    assert (model.n_iter_, model.n_steps_) == (4, 12)


def test_a_fit_stopped_inside_a_pass_counts_it_as_started():
    model = OnlineNMF(2, batch_size=10, max_iter=4, random_state=0)
    model.fit(_data(), n_steps=7)  # two passes of 3 batches, and one batch of the third
    assert (model.n_iter_, model.n_steps_) == (3, 7)
    stopped = OnlineNMF(2, batch_size=10, max_iter=4, random_state=0,
                        callback=lambda learner, info: info["step"] >= 4)
    assert stopped.fit(_data()).n_iter_ == 2 and stopped.n_steps_ == 4


def test_a_stream_is_one_pass_and_partial_fit_counts_none():
    batches = [_data(10, seed) for seed in range(3)]
    assert OnlineNMF(2, random_state=0).fit(batches).n_iter_ == 1
    alone = OnlineNMF(2, random_state=0).partial_fit(batches[0])
    assert (alone.n_iter_, alone.n_steps_) == (0, 1)
    fitted = OnlineNMF(2, batch_size=10, max_iter=2, random_state=0).fit(_data())
    fitted.partial_fit(batches[1])
    assert (fitted.n_iter_, fitted.n_steps_) == (2, 7)  # as the last fit left it
    assert fitted.fit(batches).n_iter_ == 1  # a refit starts the count anew


def test_n_iter_is_not_there_before_a_fit():
    with pytest.raises(AttributeError):
        OnlineNMF(2).n_iter_  # noqa: B018 - the property raises


def test_checkpoints_keep_the_passes(tmp_path):
    model = OnlineCPDL(2, batch_size=10, max_iter=3, random_state=0).fit(
        np.random.default_rng(0).random((30, 4, 3)))
    loaded = load(model.save(tmp_path / "run.npz"))
    assert (loaded.n_iter_, loaded.n_steps_) == (3, 9)
    alone = load(OnlineCPDL(2, random_state=0).partial_fit(
        np.ones((4, 3, 2))).save(tmp_path / "alone.npz"))
    assert alone.n_iter_ == 0


@pytest.mark.parametrize("n_iter", [-1, 10, 1.5, True, None])
def test_a_tampered_pass_count_is_refused(tmp_path, n_iter):
    from tensorstream.engine.checkpoint import read_checkpoint

    model = OnlineNMF(2, batch_size=10, max_iter=3, random_state=0).fit(_data())
    meta, arrays = read_checkpoint(model.save(tmp_path / "run.npz"))
    np.savez(tmp_path / "bad.npz", __meta__=np.array(json.dumps(dict(meta, n_iter=n_iter))),
             **arrays)
    with pytest.raises(ValueError, match="n_iter"):
        load(tmp_path / "bad.npz")


@pytest.mark.parametrize("kind", ["Generator", "RandomState", "seed"])
def test_bit_generator_of_is_what_generator_of_advances(kind):
    given = {"Generator": np.random.default_rng(0), "RandomState": np.random.RandomState(0),
             "seed": 0}[kind]
    bits = bit_generator_of(given)
    if kind == "seed":
        assert bits is None  # a fresh generator: nothing of the caller's is drawn from
        return
    before = _state(bits)
    generator_of(given).random()
    assert _state(bits) != before


@pytest.mark.parametrize("random_state", [np.random.default_rng(1), np.random.RandomState(1)])
def test_a_failed_first_step_leaves_a_given_generator_as_it_was(random_state, monkeypatch):
    """The first step draws the initial dictionary from ``random_state`` (a RandomState
    through a seed drawn from it); when the step then fails, both draws are undone."""
    from tensorstream.learners import _base

    def failing(*args, **kwargs):
        raise RuntimeError("the step failed")

    monkeypatch.setattr(_base, "run", failing)
    model = OnlineNMF(2, random_state=random_state)
    before = _state(bit_generator_of(random_state))
    with pytest.raises(RuntimeError, match="the step failed"):
        model.partial_fit(_data())
    assert _state(bit_generator_of(random_state)) == before and "_rng" not in model.__dict__
