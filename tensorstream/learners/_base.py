"""What every online learner shares: the scikit-learn parameter contract and the fit loop.

Subclasses keep hyper-parameters in ``__init__`` (stored unchanged, so ``get_params``,
``set_params`` and ``sklearn.base.clone`` work), learned state in trailing-underscore attributes,
and implement ``_reset()`` and ``partial_fit(X)``; ``partial_fit`` stores a dict describing the
step in ``self._last_info`` for progress bars and callbacks.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import xarray as xr

from .._validation import check_positive_int
from ..labels import ModeLayout, to_samples


def is_array_like(X: Any) -> bool:
    """Arrays (numpy, backend tensors, xarray, sparse, dask) as opposed to streams of batches."""
    return hasattr(X, "shape") and hasattr(X, "ndim")


def is_labelled(X: Any) -> bool:
    """True for an ``xarray.DataArray`` (labelled input)."""
    return isinstance(X, xr.DataArray)


def make_layout(da: Any, sample_dim: str | None, modes: Any) -> ModeLayout:
    """The mode layout of a DataArray, with a clear error when ``sample_dim`` is missing."""
    if sample_dim is None:
        raise ValueError(f"sample_dim is required for xarray.DataArray input (dims {da.dims})")
    return ModeLayout.from_dataarray(da, sample_dim, modes).check_factor_names()


def epoch_indices(n: int, batch_size: int, n_epochs: int, rng: np.random.Generator) -> Iterator:
    """Shuffled mini-batch positions, ``n_epochs`` passes over ``n`` (last batch may be short)."""
    for _ in range(n_epochs):
        order = rng.permutation(n)
        for start in range(0, n, batch_size):
            yield order[start:start + batch_size]


class OnlineEstimator:
    """Base class: parameters, ``fit`` over an array or a stream, progress bar and callback."""

    @classmethod
    def _param_names(cls) -> list[str]:
        signature = inspect.signature(cls.__init__)
        return [p.name for p in signature.parameters.values()
                if p.name != "self" and p.kind != p.VAR_KEYWORD]

    def get_params(self, deep: bool = True) -> dict:
        """Hyper-parameters of the estimator, as given to ``__init__``."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params) -> OnlineEstimator:
        """Set hyper-parameters; unknown names raise ``ValueError``."""
        valid = set(self._param_names())
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}; "
                                 f"valid parameters are {sorted(valid)}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in
                    inspect.signature(type(self).__init__).parameters.values()}
        shown = [f"{k}={v!r}" for k, v in self.get_params().items()
                 if not _same(v, defaults.get(k, inspect.Parameter.empty))]
        return f"{type(self).__name__}({', '.join(shown)})"

    # -- fitting -------------------------------------------------------------------------------

    def fit(self, X: Any, y: Any = None, *, mask: Any = None, n_steps: int | None = None,
            sample_dim: str | None = None, modes: Any = None) -> OnlineEstimator:
        """Learn from scratch.

        Parameters
        ----------
        X : array of shape (n_samples, ...), xarray.DataArray, or iterable of batches
            An array is streamed as ``max_iter`` shuffled passes of ``batch_size`` samples (a
            DataArray along ``sample_dim``; a dask-backed one is read batch by batch); any other
            iterable (a stream from :mod:`tensorstream.streams`, a generator, a list of arrays)
            is consumed batch by batch.
        y : ignored
        mask : boolean array of X's shape, optional
            True where an entry is observed (array input); a stream may yield ``(X, mask)``
            pairs instead.
        n_steps : int, optional
            Stop after this many mini-batches (needed for infinite streams).
        sample_dim : str, optional
            For DataArray input: the dim along which samples lie.
        modes : list, optional
            For DataArray input: one entry per CP mode, a dim name or a tuple of dims stacked
            into one mode (their joint features are learned); None makes every other dim a mode.
            See :mod:`tensorstream.labels`.

        Returns
        -------
        self
        """
        if n_steps is not None:
            n_steps = check_positive_int(n_steps, "n_steps")
        self._reset()
        labels = {"sample_dim": sample_dim, "modes": modes}
        if is_array_like(X):
            batch_size = check_positive_int(self.batch_size, "batch_size")
            n_epochs = check_positive_int(self.max_iter, "max_iter")
            self._init_random_state()
            if is_labelled(X):
                n_samples = make_layout(X, sample_dim, modes).n_samples  # checks labels early

                def take(data, rows):
                    # sorted positions: a lazily opened or dask-backed array reads chunks once
                    return data.isel({sample_dim: np.sort(rows)})
            else:
                n_samples = X.shape[0]

                def take(data, rows):
                    return data[rows]
            positions = epoch_indices(n_samples, batch_size, n_epochs, self._rng)
            batches = (take(X, rows) if mask is None else (take(X, rows), take(mask, rows))
                       for rows in positions)
            total = n_epochs * -(-n_samples // batch_size)
            n_steps = total if n_steps is None else min(n_steps, total)
        elif isinstance(X, Iterable):
            if mask is not None:
                raise TypeError("mask applies to array input; a stream yields (X, mask) pairs")
            batches = iter(X)
        else:
            raise TypeError(f"X must be an array or an iterable of batches, got {type(X)!r}")
        return self._consume(batches, n_steps, labels)

    def _consume(self, batches: Iterator, n_steps: int | None,
                 labels: dict | None = None) -> OnlineEstimator:
        progress = _progress_bar(n_steps) if self.verbose else None
        try:
            for step, batch in enumerate(batches, 1):
                batch, mask = batch if isinstance(batch, tuple) else (batch, None)
                extra = {"mask": mask} if mask is not None else {}
                self.partial_fit(batch, **extra, **(labels if is_labelled(batch) else {}))
                if progress is not None:
                    progress.update(1)
                    progress.set_postfix(loss=f"{self._last_info['batch_loss']:.4g}")
                if self.callback is not None and self.callback(self, dict(self._last_info)):
                    break
                if n_steps is not None and step >= n_steps:
                    break
        finally:
            if progress is not None:
                progress.close()
        return self

    def _unlabel(self, X: Any, sample_dim: str | None, modes: Any) -> tuple[Any, Any]:
        """``(samples-first array, layout)`` of ``X``; the layout is None for unlabelled input.

        The first labelled batch defines the layout; later batches must match it (same dims and
        feature labels). Nothing is stored here: ``partial_fit`` keeps the layout on success.
        """
        layout = self.__dict__.get("layout_")
        if not is_labelled(X):
            if sample_dim is not None or modes is not None:
                raise TypeError("sample_dim and modes apply to xarray.DataArray input only")
            if layout is not None:
                raise TypeError(f"this learner was fitted on labelled data (dims "
                                f"{layout.dims}); pass an xarray.DataArray")
            return X, None
        if layout is None or sample_dim is not None or modes is not None:
            fresh = make_layout(X, sample_dim or getattr(layout, "sample_dim", None), modes)
            if layout is not None and (fresh.mode_names, fresh.shape) != (layout.mode_names,
                                                                         layout.shape):
                raise ValueError(f"modes {fresh.mode_names} with shape {fresh.shape} differ from "
                                 f"the fitted {layout.mode_names} with shape {layout.shape}")
            layout = layout or fresh
        return to_samples(X, layout), layout
    def fit_transform(self, X: Any, y: Any = None, **fit_params) -> Any:
        """``fit(X)`` then ``transform(X)``."""
        return self.fit(X, **fit_params).transform(X)

    def save(self, path) -> Any:
        """Checkpoint the learner to ``path`` (see :func:`tensorstream.io.save_checkpoint`)."""
        from ..io import save_checkpoint

        return save_checkpoint(self, path)

    def _init_random_state(self) -> None:
        if getattr(self, "_rng", None) is None:
            self._rng = np.random.default_rng(self.random_state)


def _progress_bar(total: int | None):
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="batch")


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # arrays, tensors: shown in the repr
        return False
