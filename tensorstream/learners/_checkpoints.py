"""Checkpoint glue: what each kind of learner writes into the checkpoint format of
:mod:`~..engine.checkpoint`, and how it is rebuilt from it, checked as its constructor and
``fit`` would check it.

- :class:`ArrayCheckpoint`: the batch learners (and ``VarianceReducedMF``): parameters, fitted
  JSON values and fitted tensors;
- :class:`OnlineCheckpoint`: the online learners: parameters and the engine's
  :class:`~..engine.OnlineState` (loadings, statistics, scale, counts, health), the random
  generator, the passes of the last ``fit`` and the labels (mode layout, array grouping).

A file holds the names and values of the parameters as they are today: a parameter this class
does not take is refused, as is a format version other than the current one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.backend import as_tensor, backend_of, to_numpy
from ..core.validation import check_positive_number
from ..engine import Algorithm, OnlineState
from ..engine.checkpoint import (
    check_fitted_values,
    decode_health,
    decode_layout,
    decode_param,
    decode_params,
    encode_health,
    encode_layout,
    encode_param,
    encode_params,
    tensor_context,
    write_checkpoint,
)
from ..modes import decode_array_layout, encode_array_layout
from ._guards import _serialised
from ._params import _init_parameter_names


def checked_parameters(cls: type, params: dict, path: Any) -> dict:
    """A checkpoint's parameters, refused by name when ``cls`` does not take one of them or
    one is missing (every parameter but the live ``callback`` is saved): the file was written
    by another version of tensorstream, and nothing translates it."""
    taken = set(_init_parameter_names(cls))
    unknown, missing = sorted(set(params) - taken), sorted(taken - set(params) - {"callback"})
    if unknown or missing:
        what = "; ".join([f"{cls.__name__} has no parameter(s) {unknown}"] * bool(unknown) +
                         [f"it lacks the parameter(s) {missing}"] * bool(missing))
        raise ValueError(f"cannot read checkpoint {str(path)!r}: {what}; it was written by "
                         f"another version of tensorstream: fit anew")
    return params


class ArrayCheckpoint:
    """Checkpoints of a batch learner: its parameters and its fitted attributes.

    Subclasses name their fitted tensors (``_fitted_arrays``; a list of tensors, such as
    ``loadings_``, is stored member by member) and their fitted JSON values
    (``_fitted_values``: counts, histories), and the parameters stored as members when given
    as arrays (``_array_parameters``). A learner whose fitted state is one object
    (``VarianceReducedMF``) says what it stores in ``_fitted_contents`` and how it is rebuilt
    in ``_restore_fitted`` instead.
    """

    _fitted_arrays: tuple = ()
    _fitted_values: tuple = ()
    _array_parameters: tuple = ()

    @_serialised  # not a CheckedParameters subclass: its save is not wrapped on its own
    def save(self, path: Any) -> Any:
        """Write the fitted learner to ``path`` (``.npz``, atomically); read it back with
        :func:`tensorstream.load`.

        Parameters
        ----------
        path : str or path-like
            The ``.npz`` file (written atomically, no pickle).
        """
        return write_checkpoint(path, type(self).__name__, *self._checkpoint_contents())

    def _fitted_contents(self) -> tuple[dict, dict]:
        """``(values, tensors)``: the fitted JSON values and tensors, by name."""
        if self._fitted_arrays[0] not in self.__dict__:
            raise ValueError(f"only a fitted {type(self).__name__} can be checkpointed; call "
                             f"fit first")
        return ({name: self.__dict__[name] for name in self._fitted_values},
                {name: self.__dict__[name] for name in self._fitted_arrays})

    def _checkpoint_contents(self) -> tuple[dict, dict]:
        values, tensors = self._fitted_contents()
        first = next(iter(tensors.values()))
        first = first[0] if isinstance(first, list) else first
        params, param_arrays = encode_params(self.get_params(), self._array_parameters)
        meta = {"params": params, "backend": backend_of(first), "dtype": str(first.dtype),
                "device": str(getattr(first, "device", "cpu")), "values": values, "lists": {}}
        arrays = {}
        for name, value in tensors.items():
            if isinstance(value, list):
                meta["lists"][name] = len(value)
                arrays.update({f"{name}{k}": to_numpy(U) for k, U in enumerate(value)})
            else:
                arrays[name] = to_numpy(value)
        meta.update(self._output_meta())
        return meta, {**arrays, **param_arrays}

    @classmethod
    def _from_checkpoint(cls, meta: dict, arrays: dict, overrides: dict, path: Any) -> Any:
        checked_parameters(cls, meta["params"], path)
        try:
            params = decode_params(meta["params"], arrays)
            learner = cls(**{**params, **overrides})
            backend = meta["backend"]
            context = tensor_context(backend, meta["dtype"], meta["device"])
            learner._restore_fitted(meta, arrays, backend, context)
            learner._restore_output_meta(meta, path)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
            raise ValueError(f"cannot read checkpoint {str(path)!r}: incomplete or inconsistent "
                             f"contents ({error!r})") from None
        return learner

    def _restore_fitted(self, meta: dict, arrays: dict, backend: str, context: dict) -> None:
        """Set the fitted state a checkpoint holds, checked as ``fit`` would leave it."""
        fitted = dict(meta["values"])
        for name in self._fitted_arrays:
            if name in meta["lists"]:
                fitted[name] = [as_tensor(arrays[f"{name}{k}"], backend, **context)
                                for k in range(int(meta["lists"][name]))]
            else:
                fitted[name] = as_tensor(arrays[name], backend, **context)
        check_fitted_values(self, fitted)
        self.__dict__.update(fitted, backend_=backend, _context=context)


class OnlineCheckpoint:
    """Checkpoints of an online learner (:class:`~._base.OnlineLearner`): its parameters, the
    engine's state, its random generator and the passes of its last ``fit``, restored
    exactly."""

    def _checkpoint_contents(self) -> tuple[dict, dict]:
        if not self._fitted:
            raise ValueError("only a fitted learner can be checkpointed; call partial_fit first")
        self._check_params_against_state()  # a file its loader would refuse is not written
        params = {k: encode_param(k, v) for k, v in self.get_params().items()
                  if k != "callback"}
        state = self._held_state()  # a carried state's arrays are written as they are
        meta = {"params": params, "n_steps": state.n_steps,
                "n_samples_seen": state.n_samples_seen, "scale": state.scale,
                "backend": self.backend_, "dtype": str(self._context["dtype"]),
                "device": str(self._context.get("device", "cpu")),
                "rng": self._rng.bit_generator.state, "n_loadings": len(state.loadings),
                "health": encode_health(state.health),
                "n_iter": self.__dict__.get("_n_iter", 0)}
        arrays = {f"loading_{k}": to_numpy(U) for k, U in enumerate(state.loadings)}
        if state.statistics is not None:
            meta["c"] = state.statistics["c"]
            arrays.update(A=to_numpy(state.statistics["A"]), B=to_numpy(state.statistics["B"]))
            own = {name: value for name, value in state.statistics.items()
                   if name not in ("A", "B", "c")}  # an algorithm's own (Algorithm)
            per_feature = set(self._algorithm().array_statistics)
            arrays.update({f"statistic_{name}": to_numpy(value) for name, value in own.items()
                           if name in per_feature})
            scalars = {name: float(value) for name, value in own.items()
                       if name not in per_feature}
            if scalars:
                meta["statistics"] = scalars
        meta.update(self._output_meta())
        layout = self.__dict__.get("layout_")
        if layout is not None:
            meta["layout"], layout_arrays = encode_layout(layout)
            arrays.update(layout_arrays)
        if "array_layout_" in self.__dict__:
            meta["array_layout"] = encode_array_layout(self.array_layout_)
        if "batch_size_" in self.__dict__ and self.batch_size == "auto":  # as fit chose it
            meta["batch_size"] = int(self.batch_size_)
        return meta, arrays

    @classmethod
    def _from_checkpoint(cls, meta: dict, arrays: dict, overrides: dict, path: Any) -> Any:
        checked_parameters(cls, meta["params"], path)
        try:
            params = {k: decode_param(v) for k, v in meta["params"].items()}
            learner = cls(**{**params, **overrides})
            backend = meta["backend"]
            context = tensor_context(backend, meta["dtype"], meta["device"])
            loadings = [as_tensor(arrays[f"loading_{k}"], backend, **context)
                        for k in range(meta["n_loadings"])]
            statistics = _restored_statistics(learner._algorithm(), meta, arrays, backend,
                                              context)
            rng = np.random.default_rng()
            rng.bit_generator.state = meta["rng"]
            health = decode_health(meta["health"], int(loadings[0].shape[1]))
            sample_shape = tuple(U.shape[0] for U in loadings)
            grouping = (decode_array_layout(meta["array_layout"], sample_shape)
                        if "array_layout" in meta else None)
            scale, n_iter = float(meta["scale"]), meta["n_iter"]
            chosen_batch = meta.get("batch_size")
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise ValueError(f"cannot read checkpoint {str(path)!r}: incomplete or inconsistent "
                             f"contents ({error!r})") from None
        _check_state_shapes(loadings, statistics, sample_shape, path)
        _check_restored(learner, meta, loadings, statistics, scale, path)
        layout = _restore_layout(meta, arrays, path, sample_shape)
        learner.__dict__.update(
            state_=OnlineState(loadings=loadings, statistics=statistics, scale=scale,
                               n_steps=int(meta["n_steps"]),
                               n_samples_seen=int(meta["n_samples_seen"]), health=health),
            backend_=backend, sample_shape_=sample_shape, _context=context, _rng=rng,
            _n_iter=n_iter)
        if layout is not None:
            learner.layout_ = layout
        if grouping is not None:
            learner.array_layout_ = grouping
        if chosen_batch is not None:
            if isinstance(chosen_batch, bool) or not isinstance(chosen_batch, int) \
                    or chosen_batch < 1:
                raise ValueError(f"cannot read checkpoint {str(path)!r}: batch_size must be a "
                                 f"positive integer, got {chosen_batch!r}")
            learner.batch_size_ = chosen_batch
        learner._restore_output_meta(meta, path)
        return learner


def _restored_statistics(algorithm: Algorithm, meta: dict, arrays: dict, backend: str,
                         context: dict) -> dict | None:
    """The surrogate statistics a checkpoint holds (None for an algorithm that keeps none):
    ``A``, ``B``, ``c`` and the algorithm's own scalars."""
    if not algorithm.keeps_statistics:
        return None
    statistics = {"A": as_tensor(arrays["A"], backend, **context),
                  "B": as_tensor(arrays["B"], backend, **context), "c": float(meta["c"])}
    statistics.update(_scalar_statistics(meta.get("statistics", {}), algorithm))
    statistics.update(_array_statistics(arrays, algorithm, backend, context))
    return statistics


def _array_statistics(arrays: dict, algorithm: Algorithm, backend: str, context: dict) -> dict:
    """A checkpoint's per-feature statistics (members ``statistic_<name>``): the algorithm's
    (``Algorithm.array_statistics``); another name raises. One the algorithm keeps may be
    absent: a state fitted before the parameter that makes it learn one was set has none
    yet, and the algorithm starts it where a fit does."""
    names = {key[len("statistic_"):] for key in arrays if key.startswith("statistic_")}
    if not names <= set(algorithm.array_statistics):
        raise ValueError(f"per-feature statistics must be among "
                         f"{list(algorithm.array_statistics)}, got {sorted(names)}")
    return {name: as_tensor(arrays[f"statistic_{name}"], backend, **context)
            for name in sorted(names)}


def _scalar_statistics(stored: Any, algorithm: Algorithm) -> dict:
    """A checkpoint's scalar statistics besides ``c``: the algorithm's
    (``Algorithm.scalar_statistics``), each a positive finite number; anything else raises
    (the loader reports a corrupt checkpoint)."""
    if not isinstance(stored, dict) or not set(stored) <= set(algorithm.scalar_statistics):
        raise ValueError(f"statistics must hold {list(algorithm.scalar_statistics)}, got "
                         f"{stored!r}")
    return {name: check_positive_number(value, f"statistics.{name}")
            for name, value in stored.items()}


def _check_state_shapes(loadings: list, statistics: dict | None, sample_shape: tuple,
                        path: Any) -> None:
    R = loadings[0].shape[1] if loadings else 0
    if not loadings or any(U.shape[1] != R for U in loadings):
        raise ValueError(f"cannot read checkpoint {str(path)!r}: array shapes are inconsistent")
    if statistics is None:
        return
    # A is (R, R), or (I_1..I_n, R, R) after missing data
    per_feature = [value for name, value in statistics.items()
                   if name not in ("A", "B", "c") and hasattr(value, "shape")]
    if tuple(statistics["B"].shape) != (*sample_shape, R) or tuple(
            statistics["A"].shape) not in ((R, R), (*sample_shape, R, R)) or any(
            tuple(value.shape) != sample_shape for value in per_feature):
        raise ValueError(f"cannot read checkpoint {str(path)!r}: array shapes are inconsistent")


def _check_restored(learner: Any, meta: dict, loadings: list,
                    statistics: dict | None, scale: float, path: Any) -> None:
    """What the constructor and ``partial_fit`` would refuse, refused when loading: invalid
    parameters, counts, dtypes, non-finite or infeasible state."""

    def refuse(message: str) -> None:
        raise ValueError(f"cannot read checkpoint {str(path)!r}: {message}")

    try:
        learner._check_params()
    except (TypeError, ValueError) as error:
        refuse(f"invalid parameters ({error})")
    n_steps, n_seen = meta["n_steps"], meta["n_samples_seen"]
    if not (isinstance(n_steps, int) and isinstance(n_seen, int) and 0 <= n_steps <= n_seen):
        refuse(f"n_steps and n_samples_seen must be integers with 0 <= n_steps <= "
               f"n_samples_seen, got {n_steps!r} and {n_seen!r}")
    n_iter = meta["n_iter"]
    if isinstance(n_iter, bool) or not isinstance(n_iter, int) or not 0 <= n_iter <= n_steps:
        refuse(f"n_iter must be an integer with 0 <= n_iter <= n_steps, got {n_iter!r}")
    if str(meta["dtype"]).replace("torch.", "") not in ("float32", "float64"):
        refuse(f"dtype must be float32 or float64, got {meta['dtype']!r}")
    R = int(loadings[0].shape[1])
    if R != learner.n_components:
        refuse(f"the loadings have {R} components but n_components={learner.n_components!r}")
    if not (np.isfinite(scale) and scale > 0):
        refuse(f"scale must be a finite number > 0, got {scale!r}")
    arrays = [("loadings", U) for U in loadings] + [
        (name, statistics[name]) for name in ("A", "B") if statistics is not None]
    for name, value in arrays:
        if not np.all(np.isfinite(to_numpy(value))):
            refuse(f"the {name} hold NaN or infinite values")
    if statistics is not None and not np.isfinite(statistics["c"]):
        refuse("the statistic c is not finite")
    if getattr(learner._algorithm(), "nonnegative", False) and any(
            float(np.min(to_numpy(U))) < 0 for U in loadings):
        refuse("the loadings have negative entries, but the model is nonnegative")


def _restore_layout(meta: dict, arrays: dict, path: Any, sample_shape: tuple) -> Any:
    """The saved mode layout (None for a plain fit), checked against the loadings' shapes."""
    if meta.get("layout") is None:
        return None
    try:
        layout = decode_layout(meta["layout"], arrays)
    except (KeyError, TypeError, ValueError, IndexError) as error:
        raise ValueError(f"cannot read checkpoint {str(path)!r}: the mode layout is incomplete "
                         f"or inconsistent ({error!r})") from None
    if tuple(layout.shape) != sample_shape:
        raise ValueError(f"cannot read checkpoint {str(path)!r}: the mode layout's shape "
                         f"{layout.shape} differs from the loadings' {sample_shape}")
    return layout

