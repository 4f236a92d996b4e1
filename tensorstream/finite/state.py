"""What :class:`~tensorstream.VarianceReducedMF` knows after some epochs on a finite data set.

The finite-data counterpart of :class:`~tensorstream.engine.state.OnlineState`: immutable, so an
epoch is a pure function ``state -> new state`` (``dataclasses.replace``) and a failed epoch
leaves the learner's state, its random generator included, as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True, eq=False)
class FiniteState:
    """The learned state of a fit on a finite data set of ``n_samples`` samples.

    Attributes
    ----------
    dictionary : tensor of shape (n_features, n_components)
        The current dictionary ``W`` (the one loading of the two-mode case), ``W^{s,t}`` of the
        paper after the last inner step.
    output : tensor of shape (n_features, n_components)
        The iterate kept by Option I's reservoir (``output="random"``); the initial dictionary
        until the reservoir first replaces it.
    output_count : int
        Iterates the reservoir has seen (each replaces ``output`` with probability ``1 /
        output_count``).
    statistics : dict or None
        The sums ``A = sum h h^T`` (``(R, R)``) and ``B = sum (x - r) h^T``
        (``(n_features, R)``) of stochastic majorization-minimization (``method="smm"``);
        None before its first step and for the other methods.
    formulation : Formulation
        The formulation with its data-dependent part (``Q`` of OLRR) filled in.
    scale : float
        The data scale: the data are read divided by it.
    step_size : float or None
        The step ``eta`` in units of the data scale (None for ``smm``).
    rng : numpy.random.Generator
        Draws the mini-batches and the reservoir (host numpy: every backend sees the same
        draws); an epoch advances a copy, so a checkpointed run resumes exactly.
    backend : str
        The TensorLy backend of the tensors.
    context : dict
        Their dtype (and device).
    n_samples, n_features : int
        Shape of the data set (an epoch refuses another one).
    inner_batch, epoch_length : int
        The mini-batch size ``b`` and the inner steps per epoch ``m``.
    n_epochs, n_steps : int
        Epochs (outer iterations) and inner steps so far.
    passes_read, solves : float
        Samples read and codes solved so far, in units of ``n_samples``.
    seconds : float
        Algorithm time so far.
    history : tuple of dict
        One row per epoch (``VarianceReducedMF.history_``).
    """

    dictionary: Any
    output: Any
    statistics: dict | None
    formulation: Any
    scale: float
    step_size: float | None
    rng: np.random.Generator
    backend: str
    context: dict
    n_samples: int
    n_features: int
    inner_batch: int
    epoch_length: int
    output_count: int = 0
    n_epochs: int = 0
    n_steps: int = 0
    passes_read: float = 0.0
    solves: float = 0.0
    seconds: float = 0.0
    history: tuple = ()

    @property
    def n_samples_seen(self) -> int:
        """Samples read so far (``passes_read`` times ``n_samples``, rounded)."""
        return int(round(self.passes_read * self.n_samples))
