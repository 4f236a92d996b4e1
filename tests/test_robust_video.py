"""Video background subtraction with the online robust matrix learners (issue #31): a real
object moving across a real still under a slowly changing light (the benchmark's video,
``benchmarks/bench_robust.py``), 60 frames of 64 x 64, K = 3, defaults. The foreground is
found where a frame is farther than 0.05 from the learned background (the low-rank part of
``transform``), scored by F1 against the object's pixels.

With a fixed outlier threshold (0.5 data scales) the object leaked into the background
(F1 0.67-0.70 for both learners, seeds 0-2); with ``outlier_alpha="auto"`` following each
frame's residual scale, 0.84 (OR-PCA) and 0.77-0.81 (OMRMD); since the statistics of a frame
the basis explains leave the object out (``RobustMatrixAlgorithm.explained_part``), 0.90-0.92
and 0.79-0.83. ``background(X)``, the benchmark's measure, is tested in
the tests at the end of this file."""

import functools

import numpy as np
import pytest
from scripts import load_script

from tensorstream.algorithms.robust_matrix import (
    RobustMatrixOptions,
    RobustPCAAlgorithm,
    residual_scales,
)
from tensorstream.coders.maxnorm import RobustCodes
from tensorstream.core.backend import to_numpy
from tensorstream.learners.maxnorm import OnlineMaxNormMD
from tensorstream.learners.robust_pca import OnlineRobustPCA

pytest.importorskip("skimage")



BENCH = load_script("benchmarks/bench_robust.py")


@functools.cache
def _video(n_frames):
    _, corrupted, truth = BENCH.video(n_frames)
    return corrupted, truth


@pytest.fixture(scope="module")
def video():
    return _video(60)


@pytest.fixture(scope="module")
def long_video():
    """The benchmark's own 120 frames."""
    return _video(120)


def _foreground_f1(model, corrupted, truth, output="low-rank"):
    """F1 of the foreground against the low-rank part of ``transform`` or ``background``."""
    if output == "background":
        background = to_numpy(model.background(corrupted))
    else:
        background = to_numpy(model.inverse_transform(model.transform(corrupted)))
    return BENCH.f1(corrupted - background, truth)


@pytest.mark.parametrize("backend", ["numpy", "pytorch"])
@pytest.mark.parametrize("cls, bar", [(OnlineRobustPCA, 0.8), (OnlineMaxNormMD, 0.75)])
def test_a_moving_object_is_found_on_a_static_background(video, cls, bar, backend):
    if backend == "pytorch":
        pytest.importorskip("torch")
    corrupted, truth = video
    model = cls(3, random_state=0, backend=backend).fit(corrupted)
    assert _foreground_f1(model, corrupted, truth) > bar


def test_a_fixed_threshold_lets_the_object_leak(video):
    """The same learner with the former fixed threshold stays below the bar: what the test
    above measures is the residual-scaled threshold, not the data."""
    corrupted, truth = video
    model = OnlineRobustPCA(3, random_state=0, outlier_alpha=0.5).fit(corrupted)
    assert _foreground_f1(model, corrupted, truth) < 0.75


def test_residual_scales_are_the_normal_consistent_mad_over_observed_entries():
    rng = np.random.default_rng(0)
    R = rng.standard_normal((6, 11))
    mask = rng.random(R.shape) < 0.6
    mask[0] = True
    mask[5] = False
    mad = 0.6744897501960817  # the median of |z| for a standard normal z
    expected = [np.median(np.abs(row[kept])) / mad if kept.any() else np.inf
                for row, kept in zip(R, mask)]
    np.testing.assert_allclose(residual_scales(R, mask), expected)
    np.testing.assert_allclose(residual_scales(R), np.median(np.abs(R), axis=1) / mad)


def test_residual_scales_ignore_a_minority_of_gross_entries():
    rng = np.random.default_rng(1)
    R = 0.1 * rng.standard_normal((20, 400))
    R[:, :150] = 1e6  # 37% of every row
    assert np.all(residual_scales(R) < 0.3)


def test_a_sample_the_basis_does_not_explain_keeps_the_largest_threshold():
    """A random basis leaves residuals of the data's own size: the threshold stays at
    ``outlier_alpha``'s cap (0.5 data scales), so the first steps flag no structure."""
    rng = np.random.default_rng(2)
    X = rng.random((10, 50)) @ rng.random((50, 200))
    model = OnlineRobustPCA(3, random_state=0, max_iter=1, batch_size=10).fit(X[:10])
    algorithm = model._algorithm()
    basis = rng.random((200, 3))
    thresholds = algorithm.residual_thresholds(
        X / model.scale_, basis, 0.5, algorithm.coder_options(1 / np.sqrt(200)))
    assert np.all(to_numpy(thresholds) == 0.5)


@pytest.mark.parametrize("cls", [OnlineRobustPCA, OnlineMaxNormMD])
def test_the_background_is_not_pulled_by_the_flagged_object(long_video, cls):
    """``background`` refits the code without the flagged entries: at the benchmark's 120
    frames the foreground it leaves is found at least as well as from the l1 fit's
    reconstruction (which keeps part of every flagged entry), and better for OR-PCA
    (0.968 -> 0.987 here, seed 0; at 60 frames the two are equal)."""
    corrupted, truth = long_video
    model = cls(3, random_state=0).fit(corrupted)
    refit = _foreground_f1(model, corrupted, truth, "background")
    shrunk = _foreground_f1(model, corrupted, truth)
    assert refit >= shrunk - 1e-3
    if cls is OnlineRobustPCA:
        assert refit > shrunk + 0.01


def test_the_background_of_clean_low_rank_data_is_the_data():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 3)) @ rng.standard_normal((3, 30))
    # batches of 10 (150 steps), as recorded: batch_size="auto" takes 15 here (100 steps,
    # relative error 0.057 for both background and the l1 fit's reconstruction)
    model = OnlineRobustPCA(3, batch_size=10, random_state=0, max_iter=5).fit(X)
    error = np.linalg.norm(to_numpy(model.background(X)) - X) / np.linalg.norm(X)
    assert error < 0.05


def test_the_background_follows_masks_backends_and_labels(video):
    torch = pytest.importorskip("torch")
    xr = pytest.importorskip("xarray")
    corrupted, _ = video
    mask = np.random.default_rng(4).random(corrupted.shape) < 0.9
    model = OnlineRobustPCA(3, random_state=0).fit(corrupted, mask=mask)
    expected = to_numpy(model.background(corrupted, mask=mask))
    assert expected.shape == corrupted.shape
    on_torch = OnlineRobustPCA(3, random_state=0).fit(torch.tensor(corrupted),
                                                      mask=torch.tensor(mask))
    np.testing.assert_allclose(
        to_numpy(on_torch.background(torch.tensor(corrupted), mask=torch.tensor(mask))),
        expected, rtol=1e-8, atol=1e-10)
    labelled = xr.DataArray(corrupted, dims=("frame", "pixel"),
                            coords={"frame": np.arange(len(corrupted)) * 10})
    fitted = OnlineRobustPCA(3, random_state=0).fit(labelled, sample_dim="frame")
    background = fitted.background(labelled)
    assert background.dims == ("frame", "pixel")
    np.testing.assert_array_equal(background["frame"], labelled["frame"])


def test_background_refuses_bad_input_and_leaves_the_model_as_it_was(video):
    corrupted, _ = video
    model = OnlineRobustPCA(3, random_state=0).fit(corrupted)
    before = to_numpy(model.loadings_[0]).copy()
    with pytest.raises(ValueError):
        model.background(corrupted[:, :10])
    with pytest.raises(ValueError):
        model.background(np.where(np.eye(*corrupted.shape) > 0, np.inf, corrupted))
    np.testing.assert_array_equal(to_numpy(model.loadings_[0]), before)
    with pytest.raises(Exception, match="fit"):
        OnlineRobustPCA(3).background(corrupted)


def test_a_dark_border_does_not_make_every_lit_pixel_an_outlier(video):
    """The residual scale is taken over the entries a frame holds: with more than half of
    every frame exact zeros (a black border, which any basis fits exactly), the median
    residual over all entries was ~0, every lit pixel was flagged and the foreground's F1
    fell from 0.99 to 0.09 (review of issue 31's change)."""
    corrupted, truth = video
    border = np.zeros((len(corrupted), 2 * corrupted.shape[1]))
    framed = np.hstack([corrupted, border])
    model = OnlineRobustPCA(3, random_state=0).fit(framed)
    background = to_numpy(model.inverse_transform(model.transform(framed)))[:, :truth.shape[1]]
    assert BENCH.f1(corrupted - background, truth) > 0.8


def test_an_exactly_fitted_batch_keeps_a_positive_threshold():
    rng = np.random.default_rng(5)
    basis = rng.standard_normal((40, 3))
    Z = rng.standard_normal((8, 3)) @ basis.T  # in the basis' span: residuals ~ 1e-16
    model = OnlineRobustPCA(3, random_state=0, max_iter=1).fit(Z)
    algorithm = model._algorithm()
    thresholds = to_numpy(algorithm.residual_thresholds(
        Z, basis, 0.5, algorithm.coder_options(1e-3)))
    assert np.all(thresholds >= 1e-6) and np.all(thresholds <= 0.5)


@pytest.mark.parametrize("noise", ["l1", "l21", "fro", "none"])
def test_the_background_exists_under_every_noise_model(noise):
    """Dense ("fro") and whole-sample ("l21") noise flag every entry of a sample they touch:
    the background is then the fit's own low-rank part, not the refit of nothing (it was all
    zeros)."""
    rng = np.random.default_rng(6)
    X = rng.random((300, 3)) @ rng.random((3, 30)) + 0.01 * rng.standard_normal((300, 30))
    model = OnlineMaxNormMD(3, noise=noise, random_state=0).fit(X)
    error = np.linalg.norm(to_numpy(model.background(X)) - X) / np.linalg.norm(X)
    assert error < 0.5, error


@pytest.mark.parametrize("cls", [OnlineRobustPCA, OnlineMaxNormMD])
def test_coding_in_the_learners_batches_gives_every_sample_its_own_codes(video, cls):
    """outliers, denoise, impute and background code many samples in the learner's batches
    (the coder runs a batch until its slowest sample converges): the same values as one batch
    (and as transform, which codes them as the engine codes a batch)."""
    corrupted, _ = video
    model = cls(3, random_state=0).fit(corrupted)
    algorithm = model._algorithm()
    whole = algorithm.robust_codes(corrupted, model.loadings_[0], model.scale_)
    np.testing.assert_allclose(to_numpy(model.transform(corrupted)), to_numpy(whole.codes),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(to_numpy(model.outliers(corrupted)),
                               to_numpy(whole.outliers), rtol=1e-12, atol=1e-12)


# -- what the statistics learn from a frame the basis explains (the 120 frames, background(X))
# The statistics used to learn ``z - e``, which keeps the soft threshold's worth of every
# flagged pixel in the flag's direction: the object (darker than the background) left a streak
# along its path in the basis (``OnlineRobustPCA`` F1 0.963 / 0.909 / 0.926 / 0.935 / 0.856 over
# seeds 0-4, batch PCP 0.983). A frame whose threshold is below its cap is now learned whole up
# to three thresholds from the model and not at all beyond (0.987 / 0.965 / 0.981 / 0.962 /
# 0.907).


def test_the_object_does_not_leak_into_the_background_on_any_of_five_seeds(long_video):
    corrupted, truth = long_video
    scores = [_foreground_f1(OnlineRobustPCA(3, random_state=seed).fit(corrupted), corrupted,
                              truth, "background")
              for seed in range(5)]
    # main before the change: mean 0.918, worst 0.856, seed 0 0.963
    assert np.mean(scores) > 0.95, scores
    assert min(scores) > 0.89, scores
    assert scores[0] > 0.98, scores  # batch PCP: 0.983


def test_the_max_norm_learner_gains_too(long_video):
    corrupted, truth = long_video
    scores = [_foreground_f1(OnlineMaxNormMD(3, random_state=seed).fit(corrupted), corrupted,
                              truth, "background")
              for seed in range(3)]
    assert np.mean(scores) > 0.87, scores  # before: 0.894 / 0.831 / 0.824, mean 0.850


def test_the_pytorch_backend_learns_the_same_background(long_video):
    pytest.importorskip("torch")
    corrupted, truth = long_video
    numpy_model = OnlineRobustPCA(3, random_state=0).fit(corrupted)
    torch_model = OnlineRobustPCA(3, random_state=0, backend="pytorch").fit(corrupted)
    np.testing.assert_allclose(to_numpy(torch_model.background(corrupted)),
                               to_numpy(numpy_model.background(corrupted)), atol=1e-8)


def _codes(low_rank, outliers):
    zero = np.zeros(len(low_rank))
    return RobustCodes(codes=np.zeros((len(low_rank), 1)), outliers=outliers,
                       low_rank=low_rank, losses=zero, penalties=zero,
                       n_iter=np.zeros(len(low_rank), dtype=int), multipliers=zero)


def test_the_statistics_learn_near_entries_whole_and_far_ones_not_at_all():
    algorithm = RobustPCAAlgorithm(RobustMatrixOptions(n_components=1))
    cap = algorithm.alphas(4)[1]
    scale = 2.0
    low_rank = np.ones((2, 4))
    # residuals in data-scale units: 0.05 (not flagged), 0.2 and 0.29 (flagged, within 3
    # thresholds of 0.1), 0.5 (beyond them)
    X = low_rank + scale * np.array([[0.05, 0.2, -0.29, 0.5]] * 2)
    residual = X - low_rank
    outliers = np.sign(residual) * np.clip(np.abs(residual) - scale * np.array([[0.1], [cap]]),
                                           0, None)
    coded = _codes(low_rank, outliers)
    thresholds = np.array([[0.1], [cap]])  # the first sample is explained, the second is not
    explained = algorithm.explained_part(X, coded, thresholds, scale)
    np.testing.assert_allclose(explained[0], [X[0, 0], X[0, 1], X[0, 2], 1.0])
    np.testing.assert_allclose(explained[1], X[1] - outliers[1])  # at the cap: z - e
    # a given outlier_alpha (one threshold for all): z - e
    np.testing.assert_allclose(algorithm.explained_part(X, coded, None, scale), X - outliers)
