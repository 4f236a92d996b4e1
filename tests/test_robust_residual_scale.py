"""RobustOnlineNMF's ``outlier_alpha="auto"`` follows the residuals: 2.5 residual scales, the
scale learned as a moving average of the batches' winsorised Huber scale, capped at 0.2 data
units (0.5 data units of weight, the fixed default of earlier versions). On data the model fits
closely the weight falls (the paper's synthetic recipe: +3.7 dB here, 30.7 -> 37.0 dB at its
test size); on real faces with outliers it stays at the cap (``test_robust_defaults.py``)."""

import json

import numpy as np
import pytest

from tensorstream import load
from tensorstream.algorithms import robust_nmf as rn
from tensorstream.datasets.outliers import psnr, synthetic_outlier_data
from tensorstream.learners.robust_nmf import RobustOnlineNMF


def _settled_scale(residuals_of, sigma, batches=200):
    """The residual scale after feeding ``batches`` batches drawn by ``residuals_of(k)``."""
    for k in range(batches):
        sigma = rn.next_residual_scale(sigma, rn.residual_sums(residuals_of(k), None, sigma))
    return sigma


@pytest.mark.parametrize("start", [1e-3, 0.2, 10.0])
def test_gaussian_residuals_give_their_standard_deviation(start):
    """The consistency constant makes the winsorised scale unbiased for normal residuals,
    from any start (a scale far too small grows: the winsorised mean square of residuals
    larger than the limit is the limit's square, over a constant below 1)."""
    rng = np.random.default_rng(0)
    sigma = _settled_scale(lambda k: 0.3 * rng.standard_normal((50, 40)), start, batches=400)
    assert sigma == pytest.approx(0.3, rel=0.03)


def test_gross_outliers_do_not_inflate_the_scale():
    """A quarter of the entries at 100 times the residual scale (the paper's heaviest setting
    corrupts 27%): the winsorised scale stays near the inliers' (an unwinsorised RMS would be
    ~50 times it)."""
    rng = np.random.default_rng(1)

    def residuals(k):
        R = 0.1 * rng.standard_normal((50, 40))
        gross = rng.random(R.shape) < 0.25
        return np.where(gross, 10.0 * np.sign(rng.standard_normal(R.shape)), R)

    assert _settled_scale(residuals, 0.2) < 0.25


def test_the_consistency_constant():
    rng = np.random.default_rng(2)
    z = rng.standard_normal(2_000_000)
    c = rn.RESIDUAL_WINSOR
    assert rn._winsorised_second_moment(c) == pytest.approx(np.mean(np.minimum(z * z, c * c)),
                                                            rel=5e-3)


def test_missing_entries_do_not_count():
    R = np.full((4, 5), 0.1)
    mask = np.zeros((4, 5), dtype=bool)
    mask[0, :2] = True
    sums = rn.residual_sums(R, mask, 1.0)
    assert sums["residual_count"] == 2 and sums["residual_sq"] == pytest.approx(0.02)
    none_seen = rn.residual_sums(R, np.zeros_like(mask), 1.0)
    assert rn.next_residual_scale(0.17, none_seen) == 0.17


def test_the_weight_falls_on_data_the_model_fits_closely():
    """The paper's synthetic recipe (exactly low rank, 70% of the samples with 10% outliers),
    smaller: the former fixed weight (0.5 data units) let the model absorb the outliers."""
    d = synthetic_outlier_data(n_features=200, n_components=20, n_samples=2000, random_state=1)
    learned = RobustOnlineNMF(20, random_state=0).fit(d.X)
    fixed = RobustOnlineNMF(20, outlier_alpha=0.5, random_state=0).fit(d.X)
    gain = [psnr(d.X_clean[:300], model.transform(d.X[:300]) @ model.components_)
            for model in (learned, fixed)]
    assert gain[0] >= gain[1] + 2.5  # measured 32.97 against 29.32 dB
    assert learned.outlier_alpha_ < 0.2 * fixed.outlier_alpha_  # 0.047 against 0.344
    assert learned.outlier_alpha_ == pytest.approx(2.5 * learned.residual_scale_)


def test_the_weight_never_exceeds_the_former_default():
    """Capped at ``outlier_alpha_scale * 0.5`` data units, where it starts; a given weight
    learns no residual scale."""
    rng = np.random.default_rng(3)
    X = rng.random((200, 20))  # not low rank: the residual scale is large
    model = RobustOnlineNMF(2, outlier_alpha_scale=2.0, batch_size=10, random_state=0)
    model.partial_fit(X[:10])
    assert model.outlier_alpha_ <= 2.0 * 0.5 * model.scale_ + 1e-15
    model.fit(X)
    assert model.residual_scale_ > 0.2 * model.scale_  # learned above the cap ...
    assert model.outlier_alpha_ == pytest.approx(2.0 * 0.5 * model.scale_)  # ... which holds
    given = RobustOnlineNMF(2, outlier_alpha=0.3, batch_size=10, random_state=0).fit(X)
    assert given.residual_scale_ is None and given.outlier_alpha_ == pytest.approx(
        0.3 * given.scale_)


def _low_rank_with_outliers(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((80, 3)) @ rng.random((3, 15)) / 3
    X[::4, ::5] = 1.0
    return X


def test_checkpoints_keep_it_and_resume_exactly(tmp_path):
    X = _low_rank_with_outliers()
    whole = RobustOnlineNMF(3, batch_size=10, random_state=0)
    half = RobustOnlineNMF(3, batch_size=10, random_state=0)
    for start in range(0, 40, 10):
        whole.partial_fit(X[start:start + 10])
        half.partial_fit(X[start:start + 10])
    resumed = load(half.save(tmp_path / "half"))
    assert resumed.residual_scale_ == half.residual_scale_ != 0.2 * half.scale_
    for start in range(40, 80, 10):
        whole.partial_fit(X[start:start + 10])
        resumed.partial_fit(X[start:start + 10])
    assert resumed.residual_scale_ == whole.residual_scale_
    np.testing.assert_array_equal(resumed.components_, whole.components_)


def _rewritten(path, change):
    with np.load(path) as archive:
        members = {name: archive[name] for name in archive.files}
    meta = json.loads(str(members["__meta__"]))
    change(meta)
    members["__meta__"] = np.array(json.dumps(meta))
    np.savez(path, **members)


@pytest.mark.parametrize("stored", [{"residual_scale": -0.1}, {"residual_scale": 0.0},
                                    {"residual_scale": float("nan")}, {"residual_scale": "0.1"},
                                    {"residual_scale": True}, {"residual_scale": 0.1, "x": 1.0},
                                    [0.1]])
def test_a_tampered_residual_scale_is_refused(stored, tmp_path):
    X = _low_rank_with_outliers()
    path = RobustOnlineNMF(3, batch_size=10, random_state=0).partial_fit(X[:10]).save(
        tmp_path / "m")
    _rewritten(path, lambda meta: meta.update(statistics=stored))
    with pytest.raises(ValueError, match="cannot read checkpoint"):
        load(path)


def test_other_learners_keep_no_scalar_statistics(tmp_path):
    """Only the robust learner declares one; a file giving another learner one is refused."""
    from tensorstream import OnlineNMF

    X = _low_rank_with_outliers()
    path = OnlineNMF(3, batch_size=10, random_state=0).partial_fit(X[:10]).save(tmp_path / "n")
    _rewritten(path, lambda meta: meta.update(statistics={"residual_scale": 0.1}))
    with pytest.raises(ValueError, match="cannot read checkpoint"):
        load(path)


def test_the_fitted_weight_needs_a_fit():
    from tensorstream import NotFittedError

    model = RobustOnlineNMF(3)
    for name in ("outlier_alpha_", "residual_scale_"):
        with pytest.raises(NotFittedError):
            getattr(model, name)
        assert not hasattr(model, name)


def test_auto_set_after_a_fixed_weight_fit_learns_the_residual_scale(tmp_path):
    """set_params(outlier_alpha="auto") on a learner fitted with a given weight: the next
    steps learn a residual scale from the cap, where a fit starts, as a fit with "auto" does
    (it used to code at the cap forever, learning nothing); a checkpoint resumes it exactly."""
    X = _low_rank_with_outliers()
    model = RobustOnlineNMF(3, outlier_alpha=0.3, batch_size=10, random_state=0)
    model.partial_fit(X[:10])
    model.set_params(outlier_alpha="auto")
    assert model.residual_scale_ is None  # nothing learned yet: the weight is the cap's
    assert model.outlier_alpha_ == pytest.approx(0.5 * model.scale_)
    model.partial_fit(X[10:20])
    resumed = load(model.save(tmp_path / "switched"))
    assert resumed.outlier_alpha == "auto"
    for start in range(20, 80, 10):
        model.partial_fit(X[start:start + 10])
        resumed.partial_fit(X[start:start + 10])
    assert model.residual_scale_ < 0.2 * model.scale_  # learned below the cap: this data is
    assert model.outlier_alpha_ == pytest.approx(2.5 * model.residual_scale_)  # close to rank 3
    assert resumed.residual_scale_ == model.residual_scale_
    np.testing.assert_array_equal(resumed.components_, model.components_)
