"""``batch_size="auto"`` of OnlineRobustPCA and OnlineMaxNormMD (issue #31: any scale), the rule
they share with RobustOnlineNMF (``learners/_auto_batch.py``), and outputs coded in chunks
of a size of their own (the same values whatever the batch ``fit`` took)."""

from __future__ import annotations

import numpy as np
import pytest

from tensorstream import load
from tensorstream.cli import main
from tensorstream.learners._auto_batch import AutoBatch
from tensorstream.learners.maxnorm import MATRIX_BATCH_LIMITS, OnlineMaxNormMD
from tensorstream.learners.robust_nmf import RobustOnlineNMF
from tensorstream.learners.robust_pca import OnlineRobustPCA

LEARNERS = [OnlineRobustPCA, OnlineMaxNormMD]


def _data(n, n_features=12, rank=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, rank)) @ rng.standard_normal((rank, n_features))
    X[rng.random(X.shape) < 0.05] += 10.0  # gross outliers on 5% of the entries
    return X


def test_the_three_learners_share_one_rule():
    for cls in (OnlineRobustPCA, OnlineMaxNormMD, RobustOnlineNMF):
        assert issubclass(cls, AutoBatch)
        assert cls._auto_batch is AutoBatch._auto_batch
        assert cls._step_batch is AutoBatch._step_batch
    assert OnlineRobustPCA.auto_batch_limits == OnlineMaxNormMD.auto_batch_limits == (10, 1024)
    assert RobustOnlineNMF.auto_batch_limits == (20, 1024)


@pytest.mark.parametrize("cls, expected", [
    # the benchmark's faces (100) and video (120) keep batches of 10, and their results;
    # its 1,500 patches take 75 (OR-PCA) or 10 (OMRMD); 20,000 take 1,000 or 134
    (OnlineRobustPCA, {1: 10, 100: 10, 120: 10, 200: 10, 201: 11, 1500: 75, 20_000: 1000,
                       10**7: 1024}),
    (OnlineMaxNormMD, {1: 10, 100: 10, 120: 10, 1500: 10, 1501: 11, 20_000: 134,
                       10**7: 1024}),
])
def test_auto_is_a_share_of_the_array_within_the_limits(cls, expected):
    model = cls(3)
    assert model.batch_size == "auto"
    assert {n: model._auto_batch(n) for n in expected} == expected
    # a stream (no number of samples) and an unfitted learner: the smallest
    assert model._auto_batch(None) == MATRIX_BATCH_LIMITS[0] == model._batch_size()


@pytest.mark.parametrize("cls", LEARNERS)
def test_fit_keeps_the_batch_it_chose(cls):
    n = 41 * cls.auto_batches - 1  # batches of 41, the last one 1 short
    model = cls(3, random_state=0).fit(_data(n))
    assert model.batch_size_ == 41 == model._batch_size()
    assert model.n_steps_ == cls.auto_batches and model.n_samples_seen_ == n
    tiny = cls(2, random_state=0).fit(_data(3))  # fewer samples than the smallest batch
    assert tiny.batch_size_ == 10 and tiny.n_steps_ == 1


@pytest.mark.parametrize("cls", LEARNERS)
def test_auto_equals_the_batch_it_resolves_to(cls):
    X = _data(12 * cls.auto_batches)
    auto = cls(3, random_state=0).fit(X)
    given = cls(3, batch_size=12, random_state=0).fit(X)
    assert "batch_size_" not in given.__dict__
    np.testing.assert_array_equal(auto.loadings_[0], given.loadings_[0])


@pytest.mark.parametrize("cls", LEARNERS)
def test_a_stream_keeps_its_own_batches_and_chooses_none(cls):
    X = _data(60)
    model = cls(3, random_state=0).fit(iter([X[:20], X[20:40], X[40:]]))
    assert "batch_size_" not in model.__dict__  # nothing chosen: nothing to checkpoint
    assert model.n_steps_ == 3 and model.n_samples_seen_ == 60  # one step a given batch


@pytest.mark.parametrize("cls", LEARNERS)
def test_the_chosen_batch_survives_a_checkpoint(cls, tmp_path):
    n = 25 * cls.auto_batches
    model = cls(3, random_state=0).fit(_data(n))
    resumed = load(model.save(tmp_path / "model"))
    assert resumed.batch_size == "auto"
    assert resumed.batch_size_ == model.batch_size_ == 25 == resumed._batch_size()
    for method in ("denoise", "outliers", "background", "transform"):
        np.testing.assert_array_equal(getattr(resumed, method)(_data(30, seed=1)),
                                      getattr(model, method)(_data(30, seed=1)))


@pytest.mark.parametrize("cls", LEARNERS)
def test_a_batch_set_after_the_fit_is_the_one_a_checkpoint_keeps(cls, tmp_path):
    # set_params(batch_size=12) after an "auto" fit: the checkpoint wrote the old choice, and
    # `tensorstream fit` resumed with it instead of 12
    model = cls(3, random_state=0).fit(_data(25 * cls.auto_batches)).set_params(batch_size=12)
    resumed = load(model.save(tmp_path / "model"))
    assert resumed.batch_size == 12 and "batch_size_" not in resumed.__dict__
    assert resumed._batch_size() == 12


@pytest.mark.parametrize("model", ["robust-pca", "maxnorm"])
def test_a_resumed_command_line_fit_equals_the_uninterrupted_one(model, tmp_path,
                                                                  monkeypatch):
    """``tensorstream fit`` chooses the batch as ``fit`` does and a resumed run keeps the one
    its checkpoint holds: killed mid-pass and resumed, it ends where an uninterrupted run
    does, bit for bit."""
    cls = {"robust-pca": OnlineRobustPCA, "maxnorm": OnlineMaxNormMD}[model]
    monkeypatch.setattr(cls, "auto_batches", 10)  # short passes: a short test
    path = tmp_path / "x.npy"
    np.save(path, _data(12 * cls.auto_batches))  # batches of 12
    args = ["fit", str(path), "--model", model, "--modes", "axis1", "--n-components", "3",
            "--quiet"]
    full, checkpoint = tmp_path / "full.npz", tmp_path / "run.npz"
    total = str(cls.auto_batches + 5)  # into the second pass
    out = ["--out", str(tmp_path / "factors.nc")]
    assert main([*args, "--steps", total, "--checkpoint", str(full), *out]) == 0
    assert main([*args, "--steps", "7", "--checkpoint", str(checkpoint), *out]) == 0
    assert load(checkpoint).batch_size_ == 12
    assert main([*args, "--steps", total, "--checkpoint", str(checkpoint), "--resume",
                 *out]) == 0
    uninterrupted, resumed = load(full), load(checkpoint)
    assert resumed.n_steps_ == uninterrupted.n_steps_ == int(total)
    assert resumed.batch_size_ == uninterrupted.batch_size_ == 12
    np.testing.assert_array_equal(resumed.loadings_[0], uninterrupted.loadings_[0])


@pytest.mark.parametrize("cls", LEARNERS)
@pytest.mark.parametrize("n_features", [12, 300])
def test_outputs_are_the_same_in_any_chunks(cls, n_features, monkeypatch):
    """Outputs code in chunks of ``CODING_ENTRIES`` entries, whatever ``batch_size`` says:
    each sample's codes are its own, so chunks of one sample, of seven, and the whole array
    in one call give the same values to rounding (so do the learner's batches of 10)."""
    from tensorstream.learners import _dictionary

    X = _data(200, n_features=n_features)
    model = cls(3, batch_size=10, random_state=0).fit(X)
    methods = ("denoise", "outliers", "background", "transform", "impute")
    monkeypatch.setattr(_dictionary, "CODING_ENTRIES", 200 * n_features)
    whole = {method: getattr(model, method)(X) for method in methods}
    for rows in (1, 7):
        monkeypatch.setattr(_dictionary, "CODING_ENTRIES", rows * n_features)
        for method, expected in whole.items():
            np.testing.assert_allclose(getattr(model, method)(X), expected, rtol=1e-10,
                                       atol=1e-10, err_msg=f"{method}, chunks of {rows}")


@pytest.mark.parametrize("cls", [*LEARNERS, RobustOnlineNMF])
@pytest.mark.parametrize("batch_size", ["big", 0, 2.5])
def test_a_bad_batch_is_refused_naming_auto_once(cls, batch_size):
    model = cls(3, batch_size=batch_size)
    with pytest.raises((ValueError, TypeError),  # a float: the wrong type
                       match=r"batch_size must be one of 'auto' or >= 1") as error:
        model.fit(_data(30))
    assert str(error.value).count("'auto'") == 1
    assert not hasattr(model, "loadings_")  # nothing learned


@pytest.mark.parametrize("cls", LEARNERS)
def test_a_cluster_fit_takes_the_batch_a_single_process_takes(cls, monkeypatch):
    """On a Dask cluster the batch ``"auto"`` chooses is split into the workers' shards: the
    same batches, the same result as in one process."""
    distributed = pytest.importorskip("distributed")
    monkeypatch.setattr(cls, "auto_batches", 10)  # short passes (threads: workers see it)
    X = _data(12 * cls.auto_batches)  # batches of 12, shards of 6
    straight = cls(3, max_iter=1, random_state=0).fit(X)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        on_cluster = cls(3, max_iter=1, random_state=0).fit(X, client=client)
    assert on_cluster.batch_size_ == straight.batch_size_ == 12
    assert on_cluster.n_steps_ == straight.n_steps_ == cls.auto_batches
    np.testing.assert_allclose(on_cluster.loadings_[0], straight.loadings_[0], rtol=0,
                               atol=1e-10)
