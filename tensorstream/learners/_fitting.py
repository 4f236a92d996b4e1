"""``fit`` over an array or a stream of batches: the loop every online learner shares.

``fit`` starts anew (:meth:`OnlineEstimator._reset`) and feeds mini-batches to
``partial_fit``: an array is shuffled into ``max_iter`` passes (:func:`fit_passes`,
:func:`epoch_indices`), a stream is read to its end or for ``n_steps`` batches
(:func:`stream_bound`). The whole ``fit`` is undone when it fails (:mod:`._guards`); a
``callback`` can stop it, ``verbose`` shows a progress bar.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import numpy as np

from ..core.backend import take_rows
from ..core.caller import warn
from ..core.validation import as_array, check_positive_int, feature_names, generator_of, is_sparse
from ..engine.checkpoint import write_checkpoint
from ..engine.distributed import connected
from ..labels import aligned_samples
from ._labelled import _labelled_like, _mask_of_frame, is_labelled, make_layout
from ._params import CheckedParameters


def is_array_like(X: Any) -> bool:
    """Arrays (numpy, backend tensors, xarray, sparse, dask) as opposed to streams of batches."""
    return hasattr(X, "shape") and hasattr(X, "ndim")


#: mini-batches ``fit`` reads from a stream of unknown length (a generator) given no ``n_steps``
STREAM_STEPS = 10_000


def stream_bound(X: Any) -> tuple[int | None, bool]:
    """How many batches ``fit`` reads from the stream ``X`` given no ``n_steps``:
    ``(bound, capped)``. A stream with a length, or a tensorstream stream of ``n_steps``
    batches, is read to its end (None); one that declares itself endless (``n_steps=None``) is
    refused, since ``fit`` would never return; any other iterable (a generator) is read for
    at most ``STREAM_STEPS`` batches, with a warning if that bound is reached."""
    if hasattr(X, "next_batch") and getattr(X, "n_steps", 0) is None:
        raise ValueError(f"fit was given an endless stream ({type(X).__name__} with "
                         f"n_steps=None) and no n_steps: it would never return. Pass "
                         f"fit(stream, n_steps=...) or build the stream with n_steps=...")
    if hasattr(X, "next_batch"):
        return None, False  # a tensorstream stream of n_steps batches
    try:
        len(X)
    except TypeError:
        return STREAM_STEPS, True
    return None, False


def epoch_indices(n: int, batch_size: int, n_epochs: int, rng: np.random.Generator) -> Iterator:
    """Shuffled mini-batch positions, ``n_epochs`` passes over ``n`` (last batch may be short)."""
    for _ in range(n_epochs):
        order = rng.permutation(n)
        for start in range(0, n, batch_size):
            yield order[start:start + batch_size]


#: the most mini-batches (or inner steps) one ``fit`` on an array may take: ``max_iter=10**12``
#: on five samples would run for ever, so a fit past this is refused up front with its size;
#: more work than this is a loop over ``partial_fit``, which can be stopped and checkpointed
MAX_FIT_STEPS = 10**7


def check_fit_work(steps: int, what: str, lower: str, owner: str) -> None:
    """Refuse a ``fit`` of more than :data:`MAX_FIT_STEPS` steps, saying what it would take
    (``what``: how ``steps`` came about) and the parameter to ``lower``."""
    if steps > MAX_FIT_STEPS:
        raise ValueError(f"{owner}.fit would take {steps:,} steps ({what}), more than "
                         f"MAX_FIT_STEPS={MAX_FIT_STEPS:,}: lower {lower}, or call partial_fit "
                         f"in a loop of your own (which can be stopped and checkpointed)")


class PassesRule(NamedTuple):
    """What ``max_iter="auto"`` means for a learner: ``passes`` passes over an array, or more
    on a small one so that ``fit`` takes ``steps`` mini-batches, at most ``max_passes``.
    ``nearest=False``: at least ``steps`` (the passes rounded up); True: the passes whose
    steps come nearest to ``steps`` (rounded to the nearest, halves up), so that an array
    of many batches takes one pass, not two."""

    passes: int
    steps: int
    max_passes: int
    nearest: bool = False


#: ``max_iter="auto"`` (the rule of most learners): ``AUTO_PASSES`` passes over an array, or
#: more on a small one, so that ``fit`` takes at least ``AUTO_MIN_STEPS`` mini-batches, but at
#: most ``AUTO_MAX_PASSES``. On scikit-learn's 1,437 training digits in batches of 1,024, 10
#: passes are 20 steps and leave OnlineNMF 0.8 dB below MiniBatchNMF's defaults (which run up
#: to 200 passes); 100 passes close the gap (docs/defaults.md). Arrays of 20 batches or more
#: keep 10 passes.
AUTO_PASSES, AUTO_MIN_STEPS, AUTO_MAX_PASSES = 10, 200, 200
AUTO_RULE = PassesRule(AUTO_PASSES, AUTO_MIN_STEPS, AUTO_MAX_PASSES)


def fit_passes(max_iter: Any, n_samples: int, batch_size: int,
               rule: PassesRule = AUTO_RULE) -> int:
    """The passes of ``fit`` over an array of ``n_samples`` in batches of ``batch_size``:
    ``max_iter``, or for ``"auto"`` the learner's ``rule`` (:data:`AUTO_RULE` unless it has
    its own, ``_passes_rule``).

    Examples
    --------
    >>> fit_passes("auto", 1437, 1024), fit_passes("auto", 50000, 1024), fit_passes(3, 10, 5)
    (100, 10, 3)
    >>> about_100 = PassesRule(passes=1, steps=100, max_passes=5, nearest=True)
    >>> [fit_passes("auto", n, 1024, about_100) for n in (5000, 40000, 100000, 10**6)]
    [5, 3, 1, 1]
    """
    if isinstance(max_iter, str) and max_iter == "auto":
        per_pass = -(-n_samples // batch_size)
        wanted = (2 * rule.steps + per_pass) // (2 * per_pass) if rule.nearest else \
            -(-rule.steps // per_pass)
        return min(rule.max_passes, max(rule.passes, wanted))
    return check_positive_int(max_iter, "max_iter")


def _progress_bar(total: int | None):
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="batch")


class OnlineEstimator(CheckedParameters):
    """Base class of the learners that ``fit`` by mini-batches: ``fit`` over an array or a
    stream, progress bar and callback (a subclass gives ``partial_fit``, ``_reset`` and its
    checkpoints)."""

    #: what ``max_iter="auto"`` means for this learner (:func:`fit_passes`)
    _passes_rule: PassesRule = AUTO_RULE

    def fit(self, X: Any, y: Any = None, *, mask: Any = None, n_steps: int | None = None,
            sample_dim: str | None = None, modes: Any = None,
            client: Any = None) -> OnlineEstimator:
        """Learn from scratch: the state of any earlier fit is replaced.

        Returns
        -------
        self
        """
        if n_steps is not None:
            n_steps = check_positive_int(n_steps, "n_steps")
        self._check_params()  # before random_state seeds a generator
        if is_sparse(X) and len(X.shape) == 2:
            X = X.tocsr()  # batches are taken by rows
        names = feature_names(X)
        mask = _mask_of_frame(mask, X)
        X = as_array(X)
        with self._all_or_nothing("fit"):
            if client is None:
                self._fit(X, mask, n_steps, sample_dim, modes)
            else:
                with connected(client) as open_client:
                    self._fit(X, mask, n_steps, sample_dim, modes, open_client)
            self._keep_feature_names(names)
        return self

    def _fit(self, X: Any, mask: Any, n_steps: int | None, sample_dim: str | None,
             modes: Any, client: Any = None) -> None:
        """Learn anew from the array or stream ``X``; ``n_iter_`` counts the passes started
        (as scikit-learn's ``MiniBatchNMF``): over an array, its epochs; a stream is read
        once, one pass."""
        self._reset()
        labels = {"sample_dim": sample_dim, "modes": modes}
        capped, per_pass = False, None  # capped: n_steps is STREAM_STEPS (a generator)
        if client is not None and not (is_array_like(X) and not is_sparse(X)):
            raise TypeError("client= needs dense array input (numpy, torch, dask, or an "
                            "xarray.DataArray); streams are read by one process")
        if is_array_like(X):
            batches, per_pass, n_steps = self._array_batches(X, mask, n_steps, sample_dim,
                                                             modes)
        elif isinstance(X, Iterable):
            if mask is not None:
                raise TypeError("mask applies to array input; a stream yields (X, mask) pairs")
            if n_steps is None:
                n_steps, capped = stream_bound(X)
            batches = iter(X)
        else:
            raise TypeError(f"X must be an array or an iterable of batches, got {type(X)!r}")
        steps = self._consume(batches, n_steps, labels, client, capped)
        self._n_iter = 1 if per_pass is None else -(-steps // per_pass)

    def _array_batches(self, X: Any, mask: Any, n_steps: int | None, sample_dim: str | None,
                       modes: Any) -> tuple[Iterator, int, int]:
        """``(batches, per_pass, n_steps)``: the shuffled mini-batches (with their masks) of
        ``max_iter`` passes over the array ``X``, the batches of one pass, and the steps
        ``fit`` takes (``n_steps`` at most), refused past :data:`MAX_FIT_STEPS`."""
        if len(X.shape) < 2:
            raise ValueError(f"X must have shape (n_samples, I_1, ..., I_n), got shape "
                             f"{tuple(X.shape)}; Reshape your data: a single sample as (1, ...)")
        batch_size = self.batch_size if self.batch_size == "auto" else \
            check_positive_int(self.batch_size, "batch_size")
        self._init_random_state()
        if is_labelled(X):
            n_samples = make_layout(X, sample_dim, modes).n_samples  # checks labels early
            mask = _labelled_like(mask, X)
            if mask is not None:  # batches taken by position
                mask = aligned_samples(mask, X, sample_dim)

            def take(data, rows):
                # sorted positions: a lazily opened or dask-backed array reads chunks once
                return data.isel({sample_dim: np.sort(rows)})
        else:
            n_samples = X.shape[0]
            take = take_rows
        if n_samples == 0:
            raise ValueError(f"X is empty: 0 sample(s) (shape={tuple(X.shape)}) while a "
                             f"minimum of 1 is required.")
        batch_size = self._step_batch(batch_size, X, n_samples)
        n_epochs = fit_passes(self.max_iter, n_samples, batch_size, self._passes_rule)
        positions = epoch_indices(n_samples, batch_size, n_epochs, self._rng)
        batches = (take(X, rows) if mask is None else (take(X, rows), take(mask, rows))
                   for rows in positions)
        per_pass = -(-n_samples // batch_size)
        total = n_epochs * per_pass
        n_steps = total if n_steps is None else min(n_steps, total)
        check_fit_work(n_steps, f"{n_epochs:,} passes of {per_pass:,} mini-batches",
                       "max_iter or pass n_steps=", type(self).__name__)
        return batches, per_pass, n_steps

    def _consume(self, batches: Iterator, n_steps: int | None, labels: dict | None = None,
                 client: Any = None, capped: bool = False) -> int:
        """Learn from ``batches`` by ``partial_fit`` (``n_steps`` of them at most, the
        ``callback`` may stop sooner); the number of mini-batches learned from."""
        progress = _progress_bar(n_steps) if self.verbose else None
        step = 0
        try:
            for step, batch in enumerate(batches, 1):
                batch, mask = batch if isinstance(batch, tuple) else (batch, None)
                extra = {"mask": mask} if mask is not None else {}
                if client is not None:
                    extra["client"] = client
                try:
                    # every batch gets the labels: modes regroup arrays too, and labels
                    # that cannot apply are refused there, never dropped
                    self.partial_fit(batch, **extra, **(labels or {}))
                except Exception as error:
                    error.add_note(f"(at mini-batch {step} of the stream)")
                    raise
                if progress is not None:
                    progress.update(1)
                    progress.set_postfix(loss=f"{self._last_info['batch_loss']:.4g}",
                                         **({} if client is None else
                                            {"workers": self._last_info["workers"]}))
                if self.callback is not None and self.callback(self, dict(self._last_info)):
                    break
                if n_steps is not None and step >= n_steps:
                    if capped:
                        warn(f"{type(self).__name__}.fit stopped after {n_steps} mini-batches "
                             f"(STREAM_STEPS): the stream has no length; pass n_steps= to "
                             f"read more or fewer")
                    break
        finally:
            if progress is not None:
                progress.close()
        if step == 0:  # as for an empty array: nothing to learn from is an error, not a reset
            raise ValueError("X yielded no mini-batch: a stream (or list of batches) with "
                             "at least one batch is required")
        return step

    def fit_transform(self, X: Any, y: Any = None, *, mask: Any = None,
                      n_steps: int | None = None, sample_dim: str | None = None,
                      modes: Any = None, client: Any = None) -> Any:
        """``fit(X)`` then ``transform(X)``; a ``mask`` given is used by both (missing
        entries influence neither the dictionary nor the codes).

        Returns
        -------
        codes : array of shape (n_samples, n_components) or xarray.DataArray
        """
        self.fit(X, y, mask=mask, n_steps=n_steps, sample_dim=sample_dim, modes=modes,
                 client=client)
        return self.transform(X, **({} if mask is None else {"mask": mask}))

    def save(self, path: Any) -> Any:
        """Checkpoint the learner to ``path`` (``.npz``, written atomically); resume it with
        :func:`tensorstream.load`. The ``callback`` parameter is not saved (it is a live
        object): pass it again when loading."""
        return write_checkpoint(path, type(self).__name__, *self._checkpoint_contents())

    def _checkpoint_contents(self) -> tuple[dict, dict]:
        """JSON metadata and arrays that ``_from_checkpoint`` restores exactly."""
        raise NotImplementedError

    @classmethod
    def _from_checkpoint(cls, meta: dict, arrays: dict, overrides: dict, path: Any) -> Any:
        """The learner that ``_checkpoint_contents`` described."""
        raise NotImplementedError

    def _init_random_state(self) -> None:
        if getattr(self, "_rng", None) is None:
            self._rng = generator_of(self.random_state)

