"""Video background subtraction with the online robust matrix learners (issue #31): a real
object moving across a real still under a slowly changing light (the benchmark's video,
``benchmarks/bench_robust.py``), 60 frames of 64 x 64, K = 3, defaults. The foreground is
found where a frame is farther than 0.05 from the learned background (the low-rank part of
``transform``), scored by F1 against the object's pixels.

With a fixed outlier threshold (0.5 data scales) the object leaked into the background
(F1 0.67-0.70 for both learners, seeds 0-2); with ``outlier_alpha="auto"`` following each
frame's residual scale, 0.84 (OR-PCA) and 0.77-0.81 (OMRMD)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from tensorstream.algorithms.robust_matrix import residual_scales
from tensorstream.core.backend import to_numpy
from tensorstream.learners.maxnorm import OnlineMaxNormMD
from tensorstream.learners.robust_pca import OnlineRobustPCA

pytest.importorskip("skimage")

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_robust",
                                                  ROOT / "benchmarks" / "bench_robust.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = _bench()


@pytest.fixture(scope="module")
def video():
    _, corrupted, truth = BENCH.video(60)
    return corrupted, truth


def _foreground_f1(model, corrupted, truth):
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
