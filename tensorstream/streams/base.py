"""The stream protocol (:class:`Stream`), streams over a data array (:class:`_DataStream`), and
the argument checks and indexing helpers every stream uses."""

from __future__ import annotations

import copy
import itertools
import math
import numbers
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["Stream"]


# -- argument checks -----------------------------------------------------------------------------


def check_random_state(random_state: Any) -> np.random.Generator:
    """A ``numpy.random.Generator`` from an int seed, ``None`` or a Generator (used as is)."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None or (isinstance(random_state, numbers.Integral)
                                and not isinstance(random_state, bool)):
        if random_state is not None and random_state < 0:
            raise ValueError(f"random_state must be a nonnegative int, got {random_state}")
        return np.random.default_rng(random_state)
    raise TypeError(f"random_state must be None, an int or a numpy.random.Generator, "
                    f"got {type(random_state).__name__}")


def _check_int(value: Any, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def _check_bool(value: Any, name: str) -> bool:
    """True or False (numpy's too), not anything truthy: ``"False"`` would mean True."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _check_holding(holding: Any) -> float:
    if isinstance(holding, bool) or not isinstance(holding, numbers.Real):
        raise TypeError(f"holding must be a probability in [0, 1), got {holding!r}")
    if not 0.0 <= holding < 1.0:
        raise ValueError(f"holding must be a probability in [0, 1), got {holding}")
    return float(holding)


def _check_real(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise TypeError(f"{name} must be a finite real number, got {value!r}")
    return float(value)


# -- data access ---------------------------------------------------------------------------------


def _is_xarray(X: Any) -> bool:
    return type(X).__module__.startswith("xarray")


def _is_torch(X: Any) -> bool:
    return type(X).__module__.startswith("torch")


def _is_dask(X: Any) -> bool:
    return type(X).__module__.startswith("dask")


def _check_data(X: Any, name: str = "X") -> None:
    if not (hasattr(X, "shape") and hasattr(X, "ndim")):
        raise TypeError(f"{name} must be an array (numpy, torch, xarray, dask, ...), "
                        f"got {type(X).__name__}")
    if X.ndim < 1:
        raise ValueError(f"{name} must have at least one axis, got a 0-d array")


def _sample_axis(X: Any, axis: Any) -> int | str:
    """``axis`` as a nonnegative int (or a dimension name for xarray input)."""
    if _is_xarray(X):
        if isinstance(axis, str):
            if axis not in X.dims:
                raise ValueError(f"axis {axis!r} is not a dimension of X {tuple(X.dims)}")
            return axis
        return X.dims[_sample_axis(X.data, axis)]
    if isinstance(axis, str):
        raise TypeError("axis may be a dimension name only for xarray.DataArray input, "
                        f"got axis={axis!r} for {type(X).__name__}")
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"axis must be an int, got {axis!r}")
    if not -X.ndim <= axis < X.ndim:
        raise ValueError(f"axis {axis} is out of range for X with {X.ndim} dimensions")
    return int(axis) % X.ndim


def _axis_size(X: Any, axis: int | str) -> int:
    return int(X.sizes[axis]) if _is_xarray(X) else int(X.shape[axis])


def _move_first(X: Any, axis: int | str) -> Any:
    """``X`` with its sample axis first (same container type)."""
    if _is_xarray(X):
        return X.transpose(axis, ...)
    if _is_torch(X):
        return X.movedim(axis, 0)
    return np.moveaxis(X, axis, 0) if axis else X


def _gather(X: Any, idx: np.ndarray, axis: int | str) -> Any:
    """``X`` indexed by the integer array ``idx`` along ``axis``, that axis moved first.

    One fancy-indexing call per batch whatever its size; dask (also under xarray) is indexed
    lazily and then computed, so only the chunks holding the requested samples are read.
    """
    idx = np.asarray(idx, dtype=np.intp)
    if _is_xarray(X):
        axis = X.dims[axis] if isinstance(axis, int) else axis  # xarray indexes by name
        out = X.isel({axis: idx}).transpose(axis, ...)
        return out.compute() if _is_dask(out.data) else out
    if _is_torch(X):
        import torch

        index = torch.as_tensor(idx, dtype=torch.long, device=X.device)
        return X.index_select(axis, index).movedim(axis, 0)
    if isinstance(X, np.ndarray):
        out = np.take(X, idx, axis=axis)
    else:
        out = X[(slice(None),) * axis + (idx,)]
        if _is_dask(out):
            out = out.compute()
    return np.moveaxis(out, axis, 0) if axis else out


def _gather_windows(X: Any, idx: np.ndarray, axis: int | str, sample_dim: str) -> Any:
    """Windows ``X[..., idx[j], ...]`` stacked first: shape ``(b, *X.shape)`` with ``axis``
    shortened to ``idx.shape[1]`` (the window keeps its place among the sample's axes)."""
    b, length = idx.shape
    flat = _gather(X, idx.ravel(), axis)  # (b * length, other axes in order)
    if _is_xarray(X):
        import xarray as xr

        position = X.dims.index(axis)
        data = np.asarray(flat.data).reshape(b, length, *flat.shape[1:])
        data = np.moveaxis(data, 1, position + 1)
        coords = {name: c for name, c in X.coords.items() if axis not in c.dims}
        coords[sample_dim] = idx[:, 0]
        return xr.DataArray(data, dims=(sample_dim, *X.dims), coords=coords, name=X.name,
                            attrs=X.attrs)
    rest = tuple(flat.shape[1:])
    if _is_torch(flat):
        return flat.reshape(b, length, *rest).movedim(1, axis + 1)
    return np.moveaxis(np.asarray(flat).reshape(b, length, *rest), 1, axis + 1)


# -- base classes --------------------------------------------------------------------------------


class Stream:
    """Base class of the streams: an iterable of mini-batches, samples on the first axis.

    Subclasses implement ``_draw()`` (the states of the next batch) and ``to_samples(states)``,
    and, where the state space is finite, ``stationary_distribution()`` and ``sample_space()``.
    Extra checkpoint fields go through ``_own_state()`` / ``_load_own_state(state)``.

    Parameters
    ----------
    batch_size : int
        Samples per batch (>= 1).
    n_steps : int or None
        Batches per ``iter()``; ``None`` streams forever.
    random_state : int, Generator or None
        Seed; a Generator is used (and advanced) as is.
    """

    state: Any = None  # memoryless streams have no chain state

    def __init__(self, batch_size: int, n_steps: int | None, random_state: Any):
        self.batch_size = _check_int(batch_size, "batch_size")
        self.n_steps = None if n_steps is None else _check_int(n_steps, "n_steps")
        self.random_state = random_state
        self._rng = check_random_state(random_state)
        self.n_batches_ = 0
        self._snapshot: dict | None = None

    def _remember_start(self) -> None:
        """Called at the end of every ``__init__``: the state :meth:`reset` returns to."""
        self._snapshot = self.get_state()

    # iteration ----------------------------------------------------------------------------------

    def __iter__(self) -> Iterator:
        steps = itertools.count() if self.n_steps is None else range(self.n_steps)
        for _ in steps:
            yield self.next_batch()

    def next_states(self) -> np.ndarray:
        """Draw the states behind the next batch (advances the stream by one batch)."""
        states = self._draw()
        self.n_batches_ += 1
        return states

    def next_batch(self) -> Any:
        """The next mini-batch, shape ``(b, *sample_shape)``."""
        return self.to_samples(self.next_states())

    def _draw(self) -> np.ndarray:
        raise NotImplementedError

    def to_samples(self, states: Any) -> Any:
        """The batch made of the samples of ``states``."""
        raise NotImplementedError

    # finite state spaces ------------------------------------------------------------------------

    def stationary_distribution(self) -> np.ndarray:
        """``pi`` over :meth:`sample_space` (1-D, sums to one)."""
        raise NotImplementedError(f"{type(self).__name__} has no known stationary distribution")

    def sample_space(self) -> Any:
        """All samples the stream can produce, stacked on the first axis, in ``pi``'s order."""
        raise NotImplementedError(f"{type(self).__name__} has no finite sample space")

    # checkpoints --------------------------------------------------------------------------------

    def _own_state(self) -> dict:
        return {}

    def _load_own_state(self, state: dict) -> None:
        pass

    def get_state(self) -> dict:
        """A deep copy of everything the next batches depend on (for checkpoints)."""
        return copy.deepcopy({"stream": type(self).__name__,
                              "rng": self._rng.bit_generator.state,
                              "n_batches": self.n_batches_, **self._own_state()})

    def set_state(self, state: dict) -> Stream:
        """Resume from a :meth:`get_state` checkpoint: the following batches are identical."""
        if not isinstance(state, dict) or state.get("stream") != type(self).__name__:
            raise ValueError(f"state must be a dict returned by {type(self).__name__}.get_state()")
        state = copy.deepcopy(state)
        self._rng.bit_generator.state = state["rng"]
        self.n_batches_ = state["n_batches"]
        self._load_own_state(state)
        return self

    def reset(self) -> Stream:
        """Rewind to the state right after construction (also rewinds a shared Generator)."""
        return self.set_state(self._snapshot)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(batch_size={self.batch_size}, n_steps={self.n_steps})"


class _DataStream(Stream):
    """A stream whose states are indices along the sample axis of a data array ``X``."""

    def __init__(self, X: Any, batch_size: int, axis: Any, n_steps: int | None,
                 random_state: Any):
        super().__init__(batch_size, n_steps, random_state)
        _check_data(X)
        self.X = X
        self.axis = _sample_axis(X, axis)
        self.n_samples = _axis_size(X, self.axis)
        if self.n_samples == 0:
            raise ValueError("X has no samples along its sample axis")

    def to_samples(self, states: Any) -> Any:
        """``X`` at the sample indices ``states``, sample axis first."""
        return _gather(self.X, states, self.axis)

    def sample_space(self) -> Any:
        """``X`` with its sample axis first."""
        return _move_first(self.X, self.axis)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(n_samples={self.n_samples}, "
                f"batch_size={self.batch_size}, n_steps={self.n_steps})")
