"""Streams over an array: i.i.d. slices, shuffled epochs, random patches of an image."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from .base import (
    Stream,
    _check_bool,
    _check_data,
    _check_int,
    _DataStream,
    _is_dask,
    _is_torch,
    _is_xarray,
)

__all__ = ["IIDSlices", "Epochs", "RandomPatches"]


# -- i.i.d. and epochs ---------------------------------------------------------------------------


class IIDSlices(_DataStream):
    """I.i.d. uniformly random samples (slices along ``axis``) of a data array.

    The benchmark stream of the online CP-dictionary learning paper: each step draws ``b``
    indices of the sample axis uniformly (with replacement by default) and yields
    ``X[idx]`` with the sample axis first. Stationary distribution: uniform.

    Parameters
    ----------
    X : array of shape (..., n_samples, ...)
        numpy array, torch tensor, xarray.DataArray or dask array.
    batch_size : int
        Samples per batch.
    axis : int or str, default 0
        The sample axis (a dimension name for xarray input).
    replace : bool, default True
        Draw with replacement; ``False`` draws distinct samples within each batch.
    n_steps : int or None, default None
        Batches per ``iter()``; ``None`` streams forever.
    random_state : int, Generator or None

    Examples
    --------
    >>> X = np.arange(60.0).reshape(10, 3, 2)
    >>> stream = IIDSlices(X, batch_size=4, n_steps=2, random_state=0)
    >>> [batch.shape for batch in stream]
    [(4, 3, 2), (4, 3, 2)]
    >>> stream.stationary_distribution().sum()
    np.float64(1.0)
    """

    def __init__(self, X: Any, batch_size: int, axis: int | str = 0, replace: bool = True,
                 n_steps: int | None = None, random_state: Any = None):
        super().__init__(X, batch_size, axis, n_steps, random_state)
        self.replace = _check_bool(replace, "replace")
        if not self.replace and self.batch_size > self.n_samples:
            raise ValueError(f"batch_size ({self.batch_size}) exceeds the number of samples "
                             f"({self.n_samples}) while replace=False")
        self._remember_start()

    def _draw(self) -> np.ndarray:
        if self.replace:
            return self._rng.integers(0, self.n_samples, self.batch_size)
        return self._rng.choice(self.n_samples, self.batch_size, replace=False)

    def stationary_distribution(self) -> np.ndarray:
        """Uniform over the sample indices."""
        return np.full(self.n_samples, 1.0 / self.n_samples)


class Epochs(_DataStream):
    """Passes over the samples of a data array in mini-batches (finite).

    Each ``iter()`` yields ``n_epochs`` passes' worth of batches, continuing from the current
    position (a fresh stream yields exactly ``n_epochs`` complete passes). Every pass visits
    each sample once, in a new random order when ``shuffle``. Used by the variance-reduced
    learners, which need full passes.

    Parameters
    ----------
    X : array of shape (..., n_samples, ...)
    batch_size : int
    n_epochs : int, default 1
    shuffle : bool, default True
    drop_last : bool, default False
        Drop each pass's last, incomplete batch (all batches then have ``batch_size`` samples).
    random_state : int, Generator or None
    axis : int or str, default 0

    Examples
    --------
    >>> X = np.arange(10.0)[:, None]
    >>> [len(b) for b in Epochs(X, batch_size=4, n_epochs=2, random_state=0)]
    [4, 4, 2, 4, 4, 2]
    """

    def __init__(self, X: Any, batch_size: int, n_epochs: int = 1, shuffle: bool = True,
                 drop_last: bool = False, random_state: Any = None, *, axis: int | str = 0):
        super().__init__(X, batch_size, axis, None, random_state)
        self.n_epochs = _check_int(n_epochs, "n_epochs")
        self.shuffle = _check_bool(shuffle, "shuffle")
        self.drop_last = _check_bool(drop_last, "drop_last")
        if self.drop_last and self.batch_size > self.n_samples:
            raise ValueError(f"batch_size ({self.batch_size}) exceeds the number of samples "
                             f"({self.n_samples}) while drop_last=True: no batch would be left")
        n, b = self.n_samples, self.batch_size
        self.batches_per_epoch = n // b if self.drop_last else -(-n // b)
        self._used = self.batches_per_epoch * b if self.drop_last else n
        self.n_steps = self.n_epochs * self.batches_per_epoch
        self._order = np.arange(n)
        self._position = self._used  # a new pass starts at the first draw
        self.epoch_ = 0
        self._remember_start()

    @property
    def state(self) -> dict:
        """``{"epoch": passes started, "position": samples used in the current pass}``; a
        complete pass reads position 0, as the next draw starts a new one."""
        return {"epoch": self.epoch_, "position": self._position % self._used}

    def _draw(self) -> np.ndarray:
        if self._position >= self._used:
            n = self.n_samples
            self._order = self._rng.permutation(n) if self.shuffle else np.arange(n)
            self._position = 0
            self.epoch_ += 1
        stop = min(self._position + self.batch_size, self._used)
        idx = self._order[self._position:stop]
        self._position = stop
        return idx.copy()

    def stationary_distribution(self) -> np.ndarray:
        """Share of each sample in a pass (uniform, except never-seen samples of an unshuffled
        stream with ``drop_last``)."""
        if self.shuffle or not self.drop_last:
            return np.full(self.n_samples, 1.0 / self.n_samples)
        pi = np.zeros(self.n_samples)
        pi[:self._used] = 1.0 / self._used
        return pi

    def _own_state(self) -> dict:
        return {"order": self._order.copy(), "position": self._position, "epoch": self.epoch_}

    def _load_own_state(self, state: dict) -> None:
        self._order = np.array(state["order"])
        self._position = int(state["position"])
        self.epoch_ = int(state["epoch"])


class RandomPatches(Stream):
    """Random patches of an image (or any array): the paper's image experiment.

    Each sample is ``image[a_1 : a_1 + p_1, ..., a_D : a_D + p_D, ...]`` for a top-left corner
    ``a`` drawn uniformly among all ``prod(I_d - p_d + 1)`` valid corners (i.i.d.); the patch
    covers the first ``D = len(patch_shape)`` axes and keeps the remaining ones whole (a 20 x 20
    patch of an H x W x 3 image is 20 x 20 x 3). States are flat corner indices (row-major over
    the corner grid). Stationary distribution: uniform over corners.

    Parameters
    ----------
    image : array of shape (I_1, ..., I_D, ...)
        numpy array, torch tensor, xarray.DataArray or dask array.
    patch_shape : tuple of int
        Patch extent along the first ``len(patch_shape)`` axes.
    batch_size : int, default 1
    n_steps : int or None, default None
    random_state : int, Generator or None
    sample_dim : str, default "patch"
        Sample dimension name of the batches of an xarray input.

    Examples
    --------
    >>> image = np.random.default_rng(0).random((64, 48, 3))
    >>> stream = RandomPatches(image, (20, 20), batch_size=100, random_state=0)
    >>> stream.next_batch().shape
    (100, 20, 20, 3)
    """

    def __init__(self, image: Any, patch_shape: Any, batch_size: int = 1,
                 n_steps: int | None = None, random_state: Any = None, *,
                 sample_dim: str = "patch"):
        super().__init__(batch_size, n_steps, random_state)
        _check_data(image, "image")
        self.image = image
        shape = (patch_shape,) if isinstance(patch_shape, numbers.Integral) else tuple(
            patch_shape)
        self.patch_shape = tuple(_check_int(p, "patch_shape entries") for p in shape)
        if len(self.patch_shape) > image.ndim:
            raise ValueError(f"patch_shape {self.patch_shape} has more axes than the image "
                             f"({image.ndim})")
        sizes = tuple(int(s) for s in image.shape[:len(self.patch_shape)])
        for p, size in zip(self.patch_shape, sizes, strict=True):
            if p > size:
                raise ValueError(f"patch_shape {self.patch_shape} is larger than the image "
                                 f"{tuple(image.shape)}")
        self.corner_shape = tuple(s - p + 1 for s, p in zip(sizes, self.patch_shape, strict=True))
        self.n_corners = math.prod(self.corner_shape)
        if _is_xarray(image) and sample_dim in image.dims:
            raise ValueError(f"sample_dim {sample_dim!r} is already a dimension of image")
        self.sample_dim = sample_dim
        self._remember_start()

    def _draw(self) -> np.ndarray:
        return self._rng.integers(0, self.n_corners, self.batch_size)

    def corners(self, states: Any) -> np.ndarray:
        """Top-left corners ``(b, D)`` of the flat corner indices ``states``."""
        return np.array(np.unravel_index(np.asarray(states), self.corner_shape)).T

    def to_samples(self, states: Any) -> Any:
        """The patches at the flat corner indices ``states``, stacked first."""
        corners = self.corners(states)
        b, D = corners.shape
        index = []
        for d, p in enumerate(self.patch_shape):
            offsets = np.arange(p).reshape((1,) + (1,) * d + (p,) + (1,) * (D - d - 1))
            index.append(corners[:, d].reshape((b,) + (1,) * D) + offsets)
        return _gather_patches(self.image, tuple(index), self.sample_dim)

    def stationary_distribution(self) -> np.ndarray:
        """Uniform over the corners."""
        return np.full(self.n_corners, 1.0 / self.n_corners)

    def sample_space(self, max_states: int = 100_000) -> Any:
        """All patches, stacked first (raises if there are more than ``max_states``)."""
        if self.n_corners > max_states:
            raise ValueError(f"the image has {self.n_corners} patches, more than "
                             f"max_states={max_states}")
        return self.to_samples(np.arange(self.n_corners))


def _gather_patches(image: Any, index: tuple, sample_dim: str) -> Any:
    """``image[index]`` (broadcast integer indices on the leading axes), any container."""
    if _is_xarray(image):
        import xarray as xr

        data = _gather_patches(image.data, index, sample_dim)
        D = len(index)
        coords = {k: c for k, c in image.coords.items() if not set(c.dims) & set(image.dims[:D])}
        return xr.DataArray(data, dims=(sample_dim, *image.dims), coords=coords,
                            name=image.name, attrs=image.attrs)
    if _is_torch(image):
        import torch

        return image[tuple(torch.as_tensor(i, device=image.device) for i in index)]
    if _is_dask(image):
        return np.asarray(image.vindex[index].compute())
    return image[index]
