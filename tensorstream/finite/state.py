"""What :class:`~tensorstream.VarianceReducedMF` knows after some epochs on a finite data set.

The finite-data counterpart of :class:`~tensorstream.engine.state.OnlineState`: immutable, so an
epoch is a pure function ``state -> new state`` (``dataclasses.replace``) and a failed epoch
leaves the learner's state, its random generator included, as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.backend import to_numpy


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


# -- the state in a checkpoint (the batch learners' layout, tensorstream.engine.checkpoint) -----

#: the state's fields a checkpoint stores as JSON values (besides the history)
STATE_VALUES = ("n_samples", "n_features", "inner_batch", "epoch_length", "step_size",
                "output_count", "n_epochs", "passes_read", "solves", "seconds")
_COUNTS = {"n_samples": 1, "n_features": 1, "inner_batch": 1, "epoch_length": 1,
           "output_count": 0, "n_epochs": 0}  # each count's least value


def state_contents(state: FiniteState) -> tuple[dict, dict]:
    """The state's counters and history (JSON values) and its tensors, by name; the dictionary
    is the member ``loading_0``, as the online learners' loadings, ``Q`` host numpy."""
    values = {name: getattr(state, name) for name in STATE_VALUES}
    tensors = {"loading_0": state.dictionary, "output": state.output}
    if state.statistics is not None:
        tensors.update(A=state.statistics["A"], B=state.statistics["B"])
    Q = getattr(state.formulation, "Q", None)
    if Q is not None:  # host numpy; the formulation casts it to W's dtype where used
        tensors["Q"] = np.asarray(Q, dtype=to_numpy(state.dictionary).dtype)
    return {**values, "history": list(state.history)}, tensors


def checked_values(values: dict) -> dict:
    """The JSON values of a checkpointed state, or a ``ValueError`` naming the field."""
    checked = {}
    for name, least in _COUNTS.items():
        value = values[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
        checked[name] = value
    for name in ("passes_read", "solves", "seconds", "step_size"):
        value = values[name]
        if value is None and name == "step_size":
            checked[name] = None
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not 0 <= value < float("inf"):
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        checked[name] = float(value)
    history = values["history"]
    if not isinstance(history, list) or not all(isinstance(row, dict) for row in history):
        raise ValueError(f"history must be a list of mappings, got {type(history).__name__}")
    if checked["inner_batch"] > checked["n_samples"]:
        raise ValueError(f"inner_batch={checked['inner_batch']} exceeds "
                         f"n_samples={checked['n_samples']}")
    return {**checked, "history": tuple(history)}


def restored_state(values: dict, tensors: dict, formulation: Any, *, n_components: int,
                   **fields: Any) -> FiniteState:
    """The state of a checkpoint's checked ``values`` and ``tensors`` (``loading_0``,
    ``output`` and the SMM sums ``A``, ``B`` if any), their shapes checked against
    ``n_components`` and the values' ``n_features``; ``fields``: the state's other fields
    (scale, rng, backend, context, n_steps)."""
    d, k = values["n_features"], n_components
    for name, shape in (("loading_0", (d, k)), ("output", (d, k)), ("A", (k, k)),
                        ("B", (d, k))):
        if name in tensors and tuple(tensors[name].shape) != shape:
            raise ValueError(f"member {name!r} has shape {tuple(tensors[name].shape)}, not "
                             f"{shape} (n_features={d}, n_components={k})")
    statistics = {"A": tensors["A"], "B": tensors["B"]} if "A" in tensors else None
    return FiniteState(dictionary=tensors["loading_0"], output=tensors["output"],
                       statistics=statistics, formulation=formulation, **fields, **values)
