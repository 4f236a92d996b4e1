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
    work : object or None
        What the coding step computed that the same algorithm's ``batch_sums`` needs again
        (e.g. the model ``W h`` at the normalized scale), so a step computes it once; None when
        there is nothing to reuse. Only the algorithm that made it reads it.
    """

    codes: Any
    explained: Any
    losses: Any
    constant: float
    outliers: Any = None
    work: Any = None


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
    health : Health or None
        What the checks of a learner that cannot learn remember between steps (None before
        the first step).
    """

    loadings: list
    statistics: dict | None
    scale: float = 1.0
    n_steps: int = 0
    n_samples_seen: int = 0
    health: Health | None = None


@dataclass(frozen=True)
class Health:
    """Counters of the checks that say when a learner cannot learn (plain numbers, so that a
    checkpoint stores them as JSON).

    Attributes
    ----------
    idle_steps : tuple of int
        Per atom, the consecutive steps up to now in which none of its codes was active (away
        from zero, or from the coder's lower bound).
    idle_samples : tuple of int
        Per atom, the samples those steps held.
    bound_steps : int
        Consecutive steps whose codes were all at a bound.
    block : tuple
        The open block of steps: ``(sum of the losses, samples, steps)``.
    block_means : tuple of float
        Mean loss per sample of the last completed blocks (at most ``RISE_BLOCKS``), newest
        last.
    futile_reinits : tuple of int
        Per atom, its re-initialisations since one of its codes was last active: futile ones,
        which gave it no activity (at ``MAX_FUTILE_REINITS`` it is no longer re-initialised).
        Empty in states and checkpoints from before this counter: zero for every atom.
    """

    idle_steps: tuple = ()
    idle_samples: tuple = ()
    bound_steps: int = 0
    block: tuple = (0.0, 0, 0)
    block_means: tuple = ()
    futile_reinits: tuple = ()

    @classmethod
    def start(cls, n_components: int) -> Health:
        """The counters before the first step."""
        zeros = (0,) * n_components
        return cls(idle_steps=zeros, idle_samples=zeros, futile_reinits=zeros)
