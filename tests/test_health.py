"""A learner that cannot learn says so, and ``fit`` on an endless stream does not run forever.

Each warning of the engine's health checks (``engine.loop.check_health``) has a case that
triggers it and a normal case that does not; dead atoms are re-initialised from the batch
unless ``reinit_dead_atoms=False``, and given up after futile re-initialisations; the counters
live in the state and in checkpoints.
"""

from __future__ import annotations

import ast
import collections
import dataclasses
import itertools
import json
import re
import warnings
import zipfile

import numpy as np
import pytest

from tensorstream import OnlineCPDL, OnlineNMF
from tensorstream.engine.loop import (
    BLOCK_SAMPLES,
    BLOCK_STEPS,
    DEAD_ATOM_SAMPLES,
    DEAD_ATOM_STEPS,
    MAX_FUTILE_REINITS,
    RISE_BLOCKS,
    LearningWarning,
    check_health,
)
from tensorstream.io import load_checkpoint
from tensorstream.learners import _fitting
from tensorstream.learners.divergence_nmf import OnlineDivergenceNMF
from tensorstream.streams import IIDSlices


def _data(n=60, features=8, seed=0):
    return np.random.default_rng(seed).random((n, features))


def _learning_warnings(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, LearningWarning)]


def _quietly(model, batches):
    """Feed batches; fail on any LearningWarning (the normal cases)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", LearningWarning)
        for batch in batches:
            model.partial_fit(batch)
    return model


# -- (a) codes all at a bound -------------------------------------------------------------------


def test_codes_all_zero_warn():
    with pytest.warns(LearningWarning, match="every code of the batch"):
        OnlineCPDL(2, alpha=5e5, random_state=0).partial_fit(_data())


@pytest.mark.parametrize("params", [{"ridge": 1e30}, {"code_upper": 1e-6}])
def test_codes_at_an_end_of_the_divergence_coders_box_warn(params):
    # a huge ridge pushes every code to code_lower; a tiny code_upper caps them all
    with pytest.warns(LearningWarning, match="every code of the batch"):
        OnlineDivergenceNMF(2, **params, random_state=0).partial_fit(_data() + 0.1)


def test_zero_data_and_normal_codes_do_not_warn():
    _quietly(OnlineCPDL(2, alpha=5e5, random_state=0), [np.zeros((5, 8))])  # nothing to explain
    _quietly(OnlineCPDL(2, random_state=0), np.split(_data(), 3))
    _quietly(OnlineDivergenceNMF(2, random_state=0), np.split(_data() + 0.1, 3))


# -- (b) dead atoms ---------------------------------------------------------------------------


def _orthogonal_atom_problem(backend="numpy"):
    """Data on the first 4 features; atom 1 lives on the last 4, so its codes stay zero."""
    rng = np.random.default_rng(0)
    X = np.zeros((DEAD_ATOM_SAMPLES + 100, 8))
    X[:, :4] = rng.random((len(X), 4))
    init = np.zeros((8, 2))
    init[:4, 0] = 0.5
    init[4:, 1] = 0.5
    batch_size = -(-DEAD_ATOM_SAMPLES // DEAD_ATOM_STEPS)
    batches = [X[i:i + batch_size] for i in range(0, len(X), batch_size)]
    if backend == "pytorch":
        import torch

        batches = [torch.tensor(b) for b in batches]
    return batches, [init]


@pytest.mark.parametrize("backend", ["numpy", "pytorch"])
def test_dead_atoms_are_reinitialised_from_the_batch(backend):
    if backend == "pytorch":
        pytest.importorskip("torch")
    batches, init = _orthogonal_atom_problem(backend)
    model = OnlineCPDL(2, init=init, random_state=0)
    with pytest.warns(LearningWarning, match=r"re-initialised dead atom\(s\) \[1\]") as record:
        for batch in batches[:DEAD_ATOM_STEPS]:
            model.partial_fit(batch)
    assert len(_learning_warnings(record)) == 1
    atom = np.asarray(model.loadings_[0])[:, 1]
    assert atom[:4].min() > 0 and np.allclose(atom[4:], 0)  # now on the data's support
    assert model.state_.health.idle_steps == (0, 0)
    model.partial_fit(batches[DEAD_ATOM_STEPS])
    assert np.asarray(model.transform(batches[0]))[:, 1].max() > 0  # and used


def test_dead_atoms_without_reinit_only_warn_once():
    batches, init = _orthogonal_atom_problem()
    model = OnlineCPDL(2, init=init, random_state=0, reinit_dead_atoms=False)
    with pytest.warns(LearningWarning, match=r"atom\(s\) \[1\] are dead") as record:
        for batch in batches:
            model.partial_fit(batch)
    assert len(_learning_warnings(record)) == 1
    assert np.allclose(np.asarray(model.loadings_[0])[:4, 1], 0)
    assert model.state_.health.idle_steps[1] == len(batches)
    assert model.state_.health.futile_reinits == (0, 0)  # nothing re-initialised


def test_a_zero_loading_column_is_dead_at_once():
    init = np.full((8, 2), 0.5)
    init[:, 1] = 0.0
    with pytest.warns(LearningWarning, match="re-initialised dead atom"):
        model = OnlineNMF(2, init=[init], random_state=0).partial_fit(_data())
    assert np.linalg.norm(np.asarray(model.loadings_[0])[:, 1]) > 0


def test_living_atoms_are_left_alone():
    batches, _ = _orthogonal_atom_problem()
    model = _quietly(OnlineCPDL(2, random_state=0), batches)
    assert max(model.state_.health.idle_steps) < DEAD_ATOM_STEPS


def test_reinit_is_deterministic_and_rank_one_for_tensors():
    X = np.random.default_rng(1).random((40, 4, 3))
    init = [np.full((4, 2), 0.5), np.full((3, 2), 0.5)]
    init[1][:, 1] = 0.0
    runs = []
    for _ in range(2):
        with pytest.warns(LearningWarning):
            runs.append(OnlineCPDL(2, init=init, random_state=0).partial_fit(X))
    for U, V in zip(runs[0].loadings_, runs[1].loadings_):
        np.testing.assert_array_equal(U, V)
    assert all(np.linalg.norm(U[:, 1]) > 0 and U.min() >= 0 for U in runs[0].loadings_)


# -- atoms given up after futile re-initialisations -----------------------------------------


def _digits():
    """The digits as 8 x 8 images in [0, 1]: under ``alpha=5`` no code is ever active."""
    from sklearn.datasets import load_digits

    return load_digits().data.reshape(-1, 8, 8) / 16


def _digit_batches(n_steps):
    """``n_steps`` batches of 64 digits (at least ``DEAD_ATOM_SAMPLES`` in 10 steps)."""
    X = _digits()
    starts = itertools.islice(itertools.cycle(range(0, len(X) - 63, 64)), n_steps)
    return [X[i:i + 64] for i in starts]


def _recorded(model, batches) -> list[str]:
    """Feed batches; the LearningWarnings they gave, each one however often it repeats."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for batch in batches:
            model.partial_fit(batch)
    return _learning_warnings(record)


def _times_named(messages, phrase) -> collections.Counter:
    """How often the messages that hold ``phrase`` name each atom."""
    counts = collections.Counter()
    for message in messages:
        if phrase in message:
            counts.update(ast.literal_eval(re.search(r"\[[\d, ]*\]", message).group()))
    return counts


def test_atoms_that_die_again_after_futile_reinits_are_given_up_with_one_warning():
    model = OnlineCPDL(16, alpha=5.0, random_state=0, max_iter=5, batch_size=64)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model.fit(_digits())  # 145 steps: the atoms were re-initialised 14 times, each warned
    messages = _learning_warnings(record)
    assert _times_named(messages, "re-initialised dead atom") == {
        r: MAX_FUTILE_REINITS for r in range(16)}
    given_up = [m for m in messages if "no longer re-initialised" in m]
    assert len(given_up) == 1
    assert (f"atom(s) {list(range(16))} died again after being re-initialised "
            f"{MAX_FUTILE_REINITS} times") in given_up[0]
    assert "penalty or box may leave them no activity on this data's scale" in given_up[0]
    assert len(messages) == MAX_FUTILE_REINITS + 2  # and the codes all at zero, once
    health = model.state_.health
    assert health.futile_reinits == (MAX_FUTILE_REINITS,) * 16
    assert min(health.idle_steps) > DEAD_ATOM_STEPS  # given up: left dead, still counted


def test_an_atom_active_again_counts_afresh_and_is_re_initialised_again():
    batches = _digit_batches(4 * DEAD_ATOM_STEPS + 1)
    model = OnlineCPDL(4, alpha=5.0, random_state=0)
    given_up = (MAX_FUTILE_REINITS + 1) * DEAD_ATOM_STEPS
    assert any("no longer re-initialised" in m for m in _recorded(model, batches[:given_up]))
    assert model.state_.health.futile_reinits == (MAX_FUTILE_REINITS,) * 4
    model.set_params(alpha=0.01)  # a penalty the data can pay: the codes are active again
    assert not _recorded(model, batches[given_up:given_up + 1])
    assert model.state_.health.futile_reinits == (0,) * 4
    model.set_params(alpha=5.0)
    messages = _recorded(model, batches[given_up + 1:])
    assert _times_named(messages, "re-initialised dead atom") == {r: 1 for r in range(4)}
    assert model.state_.health.futile_reinits == (1,) * 4


def test_without_code_counts_no_reinit_is_futile():
    """``finish_step`` without :func:`code_activity`'s counts (only zero columns are dead)
    re-initialises as before: no activity is known, so none is known to be missing."""
    model = OnlineNMF(2, random_state=0).partial_fit(_data())
    loadings = [np.asarray(U).copy() for U in model.loadings_]
    loadings[0][:, 1] = 0.0
    state = dataclasses.replace(model.state_, health=dataclasses.replace(
        model.state_.health, futile_reinits=(0, MAX_FUTILE_REINITS)))
    health, loadings, messages = check_health(model._algorithm(), state,
                                              {"n": 5, "loss": 1.0}, loadings,
                                              lambda k: np.asarray(_data(k)))
    assert np.linalg.norm(loadings[0][:, 1]) > 0 and len(messages) == 1
    assert health.futile_reinits == (0, 1)
    assert state.health.futile_reinits == (0, MAX_FUTILE_REINITS)  # pure


def test_a_normal_fit_gives_no_warning_at_all():
    from sklearn.datasets import load_digits

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = OnlineNMF(16, random_state=0).fit(load_digits().data)
    assert model.state_.health.futile_reinits == (0,) * 16


# -- (c) the objective rises ------------------------------------------------------------------


def _blocks_of_batches(n_blocks):
    """Batches of at least 20 samples: ``n_blocks`` blocks of BLOCK_STEPS and BLOCK_SAMPLES."""
    size = max(20, -(-BLOCK_SAMPLES // BLOCK_STEPS))
    return np.split(_data(n_blocks * BLOCK_STEPS * size), n_blocks * BLOCK_STEPS)


def test_rising_objective_warns_once():
    model = OnlineCPDL(2, random_state=0)
    with pytest.warns(LearningWarning, match="objective rose") as record:
        for step, batch in enumerate(_blocks_of_batches(RISE_BLOCKS + 1)):
            # the stream drifts: its scale grows from the second block on
            model.partial_fit(batch * (1.0 + max(0, step - BLOCK_STEPS)))
    assert len(_learning_warnings(record)) == 1


def test_stationary_stream_does_not_warn():
    model = _quietly(OnlineCPDL(2, random_state=0), _blocks_of_batches(RISE_BLOCKS + 1))
    assert len(model.state_.health.block_means) == RISE_BLOCKS


# -- the counters are state ---------------------------------------------------------------------


def test_health_survives_checkpoints_and_files_without_it_are_refused(tmp_path):
    batches, init = _orthogonal_atom_problem()
    model = OnlineCPDL(2, init=init, random_state=0, reinit_dead_atoms=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LearningWarning)
        for batch in batches[:5]:
            model.partial_fit(batch)
    path = model.save(tmp_path / "run.npz")
    assert load_checkpoint(path).state_.health == model.state_.health
    # a file without the counters (no release wrote one) is refused, naming what is missing
    with np.load(path) as archive:
        arrays = {k: archive[k] for k in archive.files}
    meta = json.loads(str(arrays.pop("__meta__")))
    del meta["health"]
    old = tmp_path / "old.npz"
    np.savez(old, __meta__=np.array(json.dumps(meta)), **arrays)
    assert zipfile.is_zipfile(old)
    with pytest.raises(ValueError, match="incomplete or inconsistent contents.*health"):
        load_checkpoint(old)


def _without_futile_counts(path, out):
    """``path`` rewritten as a checkpoint written before ``health.futile_reinits``."""
    with np.load(path) as archive:
        arrays = {k: archive[k] for k in archive.files}
    meta = json.loads(str(arrays.pop("__meta__")))
    del meta["health"]["futile_reinits"]
    np.savez(out, __meta__=np.array(json.dumps(meta)), **arrays)
    return out


def test_futile_counts_survive_checkpoints_and_resume_alike(tmp_path):
    batches = _digit_batches(3 * DEAD_ATOM_STEPS + 5)
    straight = OnlineCPDL(4, alpha=5.0, random_state=0)
    straight_messages = _recorded(straight, batches)
    interrupted = OnlineCPDL(4, alpha=5.0, random_state=0)
    _recorded(interrupted, batches[:DEAD_ATOM_STEPS + 5])
    assert interrupted.state_.health.futile_reinits == (1,) * 4
    resumed = load_checkpoint(interrupted.save(tmp_path / "run.npz"))
    assert resumed.state_.health == interrupted.state_.health
    messages = _recorded(resumed, batches[DEAD_ATOM_STEPS + 5:])
    assert messages == straight_messages[-2:]  # one more re-initialisation, then given up
    assert "no longer re-initialised" in messages[-1]
    assert resumed.state_.health == straight.state_.health
    for a, b in zip(resumed.loadings_, straight.loadings_):
        np.testing.assert_array_equal(a, b)


def test_checkpoints_without_futile_counts_are_refused(tmp_path):
    early = OnlineCPDL(4, alpha=5.0, random_state=0)
    _recorded(early, _digit_batches(5))
    old = _without_futile_counts(early.save(tmp_path / "early.npz"), tmp_path / "old.npz")
    with pytest.raises(ValueError, match="incomplete or inconsistent contents.*futile_reinits"):
        load_checkpoint(old)


def test_a_failed_step_leaves_the_counters():
    model = OnlineCPDL(2, random_state=0).partial_fit(_data())
    health = model.state_.health
    with pytest.raises(ValueError):
        model.partial_fit(np.full((3, 8), np.nan))
    assert model.state_.health is health


# -- endless streams ----------------------------------------------------------------------------


def test_fit_refuses_an_endless_stream_without_n_steps():
    stream = IIDSlices(_data(), batch_size=5, random_state=0)  # n_steps=None: endless
    model = OnlineCPDL(2, random_state=0)
    with pytest.raises(ValueError, match="endless stream"):
        model.fit(stream)
    assert not hasattr(model, "state_")
    assert model.fit(stream, n_steps=3).n_steps_ == 3


def test_fit_stops_a_generator_of_unknown_length(monkeypatch):
    monkeypatch.setattr(_fitting, "STREAM_STEPS", 4)
    endless = (batch for batch in itertools.repeat(_data(5)))
    with pytest.warns(UserWarning, match="stopped after 4 mini-batches"):
        model = OnlineCPDL(2, random_state=0).fit(endless)
    assert model.n_steps_ == 4


def test_finite_streams_are_read_to_their_end(monkeypatch):
    monkeypatch.setattr(_fitting, "STREAM_STEPS", 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert OnlineCPDL(2, random_state=0).fit(iter(np.split(_data(), 3))).n_steps_ == 3
        assert OnlineCPDL(2, random_state=0).fit(np.split(_data(), 6)).n_steps_ == 6
        stream = IIDSlices(_data(), batch_size=5, n_steps=6, random_state=0)
        assert OnlineCPDL(2, random_state=0).fit(stream).n_steps_ == 6
