"""tensorstream.datasets.load_image: a colour image in [0, 1], and clear refusals."""

import numpy as np
import pytest

from tensorstream.datasets import load_image, synthetic_image

pytest.importorskip("skimage")


def test_a_colour_image_in_the_unit_range():
    image, source = load_image("coffee", downsample=4)
    assert image.ndim == 3 and image.shape[-1] == 3 and source == "skimage.data.coffee()"
    assert 0.0 <= image.min() and image.max() <= 1.0
    assert synthetic_image(32).shape == (32, 32, 3)


@pytest.mark.parametrize("kwargs, message", [
    ({"name": "camera"}, "not a colour image"),  # grey: used to come back (256, 2)
    ({"name": "no_such_image"}, "not an image of skimage.data"),
    ({"downsample": 0}, "downsample must be a positive integer"),
    ({"downsample": 1.5}, "downsample must be a positive integer"),
])
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        load_image(**kwargs)


def test_downsample_keeps_every_kth_pixel():
    full, _ = load_image("coffee", downsample=1)
    np.testing.assert_array_equal(load_image("coffee", downsample=3)[0], full[::3, ::3])
