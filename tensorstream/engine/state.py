"""What an online learner knows after ``t`` steps, and what coding one batch yields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, eq=False)
class Codes:
    """The coding step's result for a batch of ``b`` samples.

    Attributes
    ----------
    codes : tensor of shape (b, n_components)
        The sample-mode factor of the batch.
    explained : tensor of the batch's shape
        The part of the batch the dictionary must explain: the batch itself, or the batch minus
        its outliers (robust models; zero at missing entries).
    losses : tensor of shape (b,)
        Each sample's objective at these codes.
    constant : float
        Batch mean of the dictionary-free terms of the surrogate (``||explained||^2`` plus the
        codes' and outliers' penalties): the increment of the statistic ``c``.
    outliers : tensor of the batch's shape or None
        The sparse outlier part (robust models only).
    """

    codes: Any
    explained: Any
    losses: Any
    constant: float
    outliers: Any = None


@dataclass(frozen=True, eq=False)
class OnlineState:
    """The learned state: immutable, so a step builds a new one and a failed step loses nothing.

    Attributes
    ----------
    loadings : list of tensors of shape (I_k, n_components)
        The dictionary: one loading per data mode.
    statistics : dict or None
        The surrogate's running statistics ``A`` (``(R, R)``, or entrywise
        ``(I_1, ..., I_n, R, R)`` with missing data), ``B`` (``(I_1, ..., I_n, R)``) and the
        constant ``c``; None for algorithms that keep none (stochastic gradient).
    scale : float
        The data scale the coding works at (divergence losses normalise the data by the first
        batch's mean); 1.0 for the others.
    n_steps : int
        Steps taken (``t``).
    n_samples_seen : int
        Samples seen in those steps.
    """

    loadings: list
    statistics: dict | None
    scale: float = 1.0
    n_steps: int = 0
    n_samples_seen: int = 0
