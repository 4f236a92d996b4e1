"""Real colour images for examples and the demo: scikit-image's bundled photographs, with a
synthetic stand-in when scikit-image is not installed (it is optional)."""

from __future__ import annotations

import numpy as np

__all__ = ["load_image", "synthetic_image"]


def load_image(name: str = "astronaut", downsample: int = 2) -> tuple[np.ndarray, str]:
    """An RGB image in [0, 1] from scikit-image's bundled data, or a synthetic stand-in.

    Parameters
    ----------
    name : str, default "astronaut"
        A colour image of ``skimage.data`` (``astronaut``, ``coffee``, ``chelsea``, ...).
    downsample : int, default 2
        Keep every ``downsample``-th pixel along both axes (faster; larger structures per
        patch).

    Returns
    -------
    image : numpy.ndarray of shape (H, W, 3)
    source : str
        Where the image comes from (says so when it is the synthetic stand-in).

    Examples
    --------
    >>> image, source = load_image(downsample=4)
    >>> image.shape[-1], float(image.min()) >= 0.0, float(image.max()) <= 1.0
    (3, True, True)
    """
    if isinstance(downsample, bool) or not isinstance(downsample, int) or downsample < 1:
        raise ValueError(f"downsample must be a positive integer, got {downsample!r}")
    try:
        from skimage import data
    except ImportError:
        return synthetic_image()[::downsample, ::downsample], (
            "a synthetic image (scikit-image is not installed: pip install scikit-image "
            "for the real one)")
    loader = getattr(data, name, None) if isinstance(name, str) else None
    if not callable(loader):
        raise ValueError(f"name: {name!r} is not an image of skimage.data; colour ones are "
                         f"'astronaut', 'coffee', 'chelsea', ...")
    image = np.asarray(loader(), dtype=float)
    if image.ndim != 3 or image.shape[-1] < 3:  # [..., :3] would cut a grey image's width
        raise ValueError(f"name: skimage.data.{name}() is not a colour image (shape "
                         f"{image.shape}); use 'astronaut', 'coffee', 'chelsea', ...")
    return image[::downsample, ::downsample, :3] / 255.0, f"skimage.data.{name}()"


def synthetic_image(size: int = 512, random_state: int = 0) -> np.ndarray:
    """A colourful RGB test image in [0, 1]: gradients, discs and stripes.

    Examples
    --------
    >>> synthetic_image(64).shape
    (64, 64, 3)
    """
    rng = np.random.default_rng(random_state)
    yy, xx = np.mgrid[0:size, 0:size] / size
    image = np.stack([0.3 + 0.4 * xx, 0.2 + 0.3 * yy, 0.5 - 0.3 * xx * yy], axis=-1)
    for _ in range(12):  # discs of random colours
        cy, cx, radius = rng.random(), rng.random(), 0.04 + 0.12 * rng.random()
        inside = (yy - cy) ** 2 + (xx - cx) ** 2 < radius ** 2
        image[inside] = rng.random(3)
    stripes = (np.sin(2 * np.pi * 12 * (xx + 0.5 * yy)) > 0) & (yy > 0.7)
    image[stripes] *= 0.4
    return np.clip(image, 0.0, 1.0)

