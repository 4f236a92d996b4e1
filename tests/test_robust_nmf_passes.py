"""RobustOnlineNMF's ``max_iter="auto"``: the passes over an array whose steps come nearest to
100, one to five (``PASSES_RULE``), in ``fit`` and in the ``tensorstream fit`` command."""

import numpy as np
import pytest

from tensorstream import load
from tensorstream.learners._fitting import AUTO_RULE, PassesRule, fit_passes
from tensorstream.learners.robust_nmf import (
    AUTO_MAX_PASSES,
    AUTO_STEPS,
    PASSES_RULE,
    RobustOnlineNMF,
)


def _low_rank(n_samples, n_features=8, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n_samples, 3)) @ rng.random((3, n_features)) / 3
    X[::4, ::5] = 1.0  # outliers
    return X


@pytest.mark.parametrize("n_samples, passes", [
    (100, 5),  # 5 batches of 20 a pass: the cap, 25 steps (the 5 passes of earlier versions)
    (1500, 5), (20_480, 5),  # 20 batches a pass: 100 steps, as before
    (25_000, 4), (40_000, 3), (50_000, 2),
    (68_000, 1), (100_000, 1), (10**6, 1),  # one pass of 67 or more batches of 1,024
])
def test_auto_passes_at_auto_batches(n_samples, passes):
    batch = RobustOnlineNMF(3)._auto_batch(n_samples)
    assert fit_passes("auto", n_samples, batch, PASSES_RULE) == passes


def test_auto_passes_come_nearest_to_100_steps_within_one_to_five():
    for per_pass in range(1, 400):
        passes = fit_passes("auto", per_pass * 7, 7, PASSES_RULE)
        assert 1 <= passes <= AUTO_MAX_PASSES
        if 1 < passes < AUTO_MAX_PASSES:  # not at a bound: no other count comes nearer
            for other in (passes - 1, passes + 1):
                assert abs(passes * per_pass - AUTO_STEPS) <= abs(other * per_pass - AUTO_STEPS)
        if per_pass > 2 * AUTO_STEPS / 3:  # two passes would be further from 100 than one
            assert passes == 1


def test_the_nearest_rule_rounds_halves_up_and_the_shared_rule_is_unchanged():
    nearest = PassesRule(passes=1, steps=100, max_passes=50, nearest=True)
    assert fit_passes("auto", 40, 1, nearest) == 3  # 100 / 40 = 2.5: 3 passes (120 steps)
    assert fit_passes("auto", 45, 1, nearest) == 2  # 100 / 45 = 2.2
    assert fit_passes("auto", 45, 1, PassesRule(1, 100, 50)) == 3  # at least 100 steps
    assert fit_passes("auto", 80, 1, nearest) == 1  # 100 / 80 = 1.25
    assert fit_passes("auto", 1437, 1024) == fit_passes("auto", 1437, 1024, AUTO_RULE) == 100
    assert fit_passes(2, 10**6, 1, PASSES_RULE) == 2  # a number is the number of passes


def test_fit_takes_the_rules_passes():
    assert RobustOnlineNMF(3).max_iter == "auto"
    cases = [(250, 2, 1), (60, 2, 3), (40, 10, 5)]  # (samples, batch, passes): 125 / 30 / 4
    for n_samples, batch_size, passes in cases:
        model = RobustOnlineNMF(3, batch_size=batch_size, random_state=0)
        model.fit(_low_rank(n_samples))
        per_pass = -(-n_samples // batch_size)
        assert (model.n_iter_, model.n_steps_) == (passes, passes * per_pass)
    given = RobustOnlineNMF(3, batch_size=2, max_iter=2, random_state=0).fit(_low_rank(250))
    assert (given.n_iter_, given.n_steps_) == (2, 250)


def test_small_arrays_keep_the_five_passes_of_earlier_versions():
    X = _low_rank(100)
    auto = RobustOnlineNMF(3, random_state=0).fit(X)
    five = RobustOnlineNMF(3, max_iter=5, random_state=0).fit(X)
    assert auto.n_steps_ == five.n_steps_ == 25
    np.testing.assert_array_equal(auto.components_, five.components_)


def test_a_stream_is_read_once_whatever_the_rule():
    X = _low_rank(70)
    batches = (X[k:k + 10] for k in range(0, 70, 10))  # a generator: no length
    model = RobustOnlineNMF(3, random_state=0).fit(batches)
    assert (model.n_steps_, model.n_iter_) == (7, 1)


def test_the_command_takes_the_rules_passes_and_resumes_to_the_uninterrupted_result(tmp_path):
    """``tensorstream fit`` without ``--epochs`` runs the passes ``fit`` would (75 batches a
    pass: one), and a run stopped mid-way and resumed from its checkpoint ends where the
    uninterrupted one does."""
    from tensorstream.cli import main

    path = tmp_path / "x.npy"
    np.save(path, _low_rank(300))
    run = ["fit", str(path), "--model", "robust-nmf", "--n-components", "3", "--batch-size",
           "4", "--quiet"]
    full, part = tmp_path / "full.npz", tmp_path / "part.npz"
    assert main([*run, "--checkpoint", str(full), "--out", str(tmp_path / "full.nc")]) == 0
    uninterrupted = load(full)
    assert (uninterrupted.n_steps_, uninterrupted.n_iter_) == (75, 1)
    assert main([*run, "--steps", "30", "--checkpoint", str(part), "--out",
                 str(tmp_path / "part.nc")]) == 0
    assert load(part).n_steps_ == 30
    assert main([*run, "--checkpoint", str(part), "--resume", "--out",
                 str(tmp_path / "resumed.nc")]) == 0
    resumed = load(part)
    assert resumed.n_steps_ == 75 and resumed.get_params()["max_iter"] == "auto"
    np.testing.assert_array_equal(resumed.components_, uninterrupted.components_)


@pytest.mark.parametrize("with_mask", [False, True])
def test_coding_in_chunks_gives_the_whole_arrays_result(monkeypatch, with_mask):
    """``transform``, ``score``, ``outliers`` and ``denoise`` code an array in
    ``coding_chunks`` (``CODING_ENTRIES`` entries at a time): the same values as one call on
    the whole array (a last, shorter chunk included), missing entries and the ``"auto"``
    per-sample weights too."""
    from tensorstream.learners import robust_nmf

    X = _low_rank(53, seed=1)
    mask = np.random.default_rng(2).random(X.shape) > 0.1 if with_mask else None
    given = {} if mask is None else {"mask": mask}
    model = RobustOnlineNMF(3, batch_size=10, max_iter=2, random_state=0).fit(X, **given)
    whole = (model.transform(X, **given), model.score(X, **given),
             model.outliers(X, **given), model.denoise(X, **given))
    calls = []
    coded = robust_nmf.OnlineLearner._coded

    def counted(self, *args):
        calls.append(1)
        return coded(self, *args)

    from tensorstream.learners import _dictionary

    monkeypatch.setattr(_dictionary, "CODING_ENTRIES", 10 * X.shape[1])  # 10 samples a chunk
    monkeypatch.setattr(robust_nmf.OnlineLearner, "_coded", counted)
    chunked = (model.transform(X, **given), model.score(X, **given),
               model.outliers(X, **given), model.denoise(X, **given))
    assert len(calls) == 4 * 6  # 6 chunks (the last of 3 samples) for each of the 4 calls
    for a, b in zip(whole, chunked):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
