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

from .._validation import check_positive_int


def is_array_like(X: Any) -> bool:
    """Arrays (numpy, backend tensors, xarray, sparse, dask) as opposed to streams of batches."""
    return hasattr(X, "shape") and hasattr(X, "ndim")


def epoch_batches(X: Any, batch_size: int, n_epochs: int, rng: np.random.Generator) -> Iterator:
    """Shuffled mini-batches of the rows of ``X``, ``n_epochs`` passes (last batch may be short)."""
    n = X.shape[0]
    for _ in range(n_epochs):
        order = rng.permutation(n)
        for start in range(0, n, batch_size):
            yield X[order[start:start + batch_size]]


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

    def fit(self, X: Any, y: Any = None, *, n_steps: int | None = None) -> OnlineEstimator:
        """Learn from scratch.

        Parameters
        ----------
        X : array of shape (n_samples, ...) or iterable of such batches
            An array is streamed as ``max_iter`` shuffled passes of ``batch_size`` samples;
            any other iterable (a stream from :mod:`tensorstream.streams`, a generator, a list
            of arrays) is consumed batch by batch.
        y : ignored
        n_steps : int, optional
            Stop after this many mini-batches (needed for infinite streams).

        Returns
        -------
        self
        """
        if n_steps is not None:
            n_steps = check_positive_int(n_steps, "n_steps")
        self._reset()
        if is_array_like(X):
            batch_size = check_positive_int(self.batch_size, "batch_size")
            n_epochs = check_positive_int(self.max_iter, "max_iter")
            self._init_random_state()
            total = n_epochs * -(-X.shape[0] // batch_size)
            batches = epoch_batches(X, batch_size, n_epochs, self._rng)
            n_steps = total if n_steps is None else min(n_steps, total)
        elif isinstance(X, Iterable):
            batches = iter(X)
        else:
            raise TypeError(f"X must be an array or an iterable of batches, got {type(X)!r}")
        return self._consume(batches, n_steps)

    def _consume(self, batches: Iterator, n_steps: int | None) -> OnlineEstimator:
        progress = _progress_bar(n_steps) if self.verbose else None
        try:
            for step, batch in enumerate(batches, 1):
                self.partial_fit(batch)
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
