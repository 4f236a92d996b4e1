"""``batch_size="auto"`` as a share of the array: one rule, each learner family its numbers.

A learner whose default ``batch_size`` is ``"auto"`` inherits :class:`AutoBatch` before
:class:`~._base.OnlineLearner` and states, as class attributes, in how many batches ``fit``
makes a pass over an array (:attr:`AutoBatch.auto_batches`) and the smallest and largest
batch (:attr:`AutoBatch.auto_batch_limits`). Small arrays keep the smallest batch (many
dictionary updates); large ones take large batches, whose coding step runs vectorised over
many samples a call instead of paying the per-call overhead of a small batch at every step.
The rule reads the number of samples alone, so a fit resumed from a checkpoint (which keeps
``batch_size_``) streams the batches an uninterrupted one would.
"""

from __future__ import annotations

from typing import Any


class AutoBatch:
    """The ``"auto"`` rule of :meth:`_step_batch`: ``ceil(n_samples / auto_batches)`` within
    ``auto_batch_limits``, the smallest when ``n_samples`` is not known (a stream); on a CUDA
    device the same rule, or the largest batch the device holds where that is less."""

    #: a pass over an array in this many batches (set by each learner family)
    auto_batches: int
    #: ``(smallest, largest)`` batch of ``"auto"`` (set by each learner family)
    auto_batch_limits: tuple[int, int]

    def _step_batch(self, batch_size: Any, X: Any, n_samples: int) -> int:
        """``"auto"`` is the family's rule on every device (a CUDA device's largest batch
        would leave ``fit`` a few steps), checked like a given batch; where a device cannot
        hold it, the largest batch that fits. Kept as ``batch_size_``."""
        if batch_size != "auto":
            return super()._step_batch(batch_size, X, n_samples)
        try:
            resolved = super()._step_batch(self._auto_batch(n_samples), X, n_samples)
        except ValueError:  # more than the device holds (or not even one sample: raised again)
            return super()._step_batch("auto", X, n_samples)
        self.batch_size_ = resolved
        return resolved

    def _auto_batch(self, n_samples: int | None) -> int:
        """``batch_size="auto"``: ``ceil(n_samples / auto_batches)`` within
        ``auto_batch_limits`` (the smallest when the number of samples is not known)."""
        low, high = self.auto_batch_limits
        if n_samples is None:
            return low
        return min(max(-(-n_samples // self.auto_batches), low), high)
