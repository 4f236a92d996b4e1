"""The estimator shell of the online learners: :class:`OnlineLearner`.

An online learner is a configuration: it builds an :class:`~..engine.Algorithm` from its
parameters (``_algorithm``) and :class:`OnlineLearner` does the rest: validation at the
boundary, the step through :func:`~..engine.online_step` computed on the side and committed
at the end (a failure leaves the learner as it was), and the methods that use the dictionary.
``partial_fit`` stores a dict describing the step in ``self._last_info`` for progress bars and
callbacks.

What every learner shares lives in the modules it is composed of, read in this order:

- :mod:`._params`: the parameter contract (``CheckedParameters``, ``NotFittedError``), with the
  output API of :mod:`._output`;
- :mod:`._guards`: thread limit, lock, and the rollback of a failed call;
- :mod:`._fitting`: ``fit`` over arrays and streams (``OnlineEstimator``);
- :mod:`._labelled`: labelled input and masks; :mod:`._modes`: arrays regrouped by ``modes``;
- :mod:`._checkpoints`: checkpoint glue (``ArrayCheckpoint``, ``OnlineCheckpoint``);
- :mod:`._cluster`: the step on a Dask cluster;
- :mod:`._dictionary`: ``transform``, ``inverse_transform``, ``score`` and the other methods
  that use the learned dictionary.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import numpy as np
import tensorly as tl

from ..core.backend import Carried, backend_of, float_dtype_of, run, using
from ..core.caller import warn
from ..core.device import check_state_device, move, resolve_device, step_batch_size
from ..core.validation import (
    Options,
    check_batch,
    check_masked_batch,
    check_n_components,
    check_sparse_batch,
    check_state_memory,
    feature_names,
    is_masked,
    is_sparse,
    split_masked,
)
from ..engine import Algorithm, OnlineState, online_step
from ..engine.distributed import connected
from ..engine.loop import LearningWarning
from ._checkpoints import OnlineCheckpoint
from ._cluster import ClusterSteps
from ._dictionary import DictionaryMethods
from ._fitting import OnlineEstimator
from ._guards import undone_on_error
from ._labelled import LabelledInput, _mask_of_frame
from ._modes import regroup
from ._params import _init_parameter_names

#: the way out of a model that is nonnegative by definition (NMF), for signed data
SIGNED_DATA_WAY_OUT = ("this model is nonnegative by definition: shift the data to be "
                       "nonnegative, or use a learner for signed data: OnlineCPDL(nonnegative="
                       "False), OnlineRobustPCA or OnlineMaxNormMD (tensorstream fit: --model "
                       "ocpdl --param nonnegative=False)")


class OnlineLearner(LabelledInput, OnlineCheckpoint, ClusterSteps, DictionaryMethods,
                    OnlineEstimator):
    """An estimator holding the engine's :class:`~..engine.OnlineState`.

    Subclasses say which algorithm they run and what data they accept:

    - ``_algorithm()``: the :class:`~..engine.Algorithm` configured by the parameters;
    - ``_parameter_constraints`` (and ``_check_rules()``): what the parameters may be;
    - ``_nonnegative_data()``, ``_keeps_sparse(X, backend)``, ``_check_samples(X, name)``:
      what a batch must be (defaults: nonnegative when the model is; dense; any shape).

    Learned state: ``state_`` (loadings, statistics, data scale, step and sample counts),
    ``backend_``, ``sample_shape_``, ``layout_`` (labelled fits), the random generator and the
    passes of the last ``fit`` (``n_iter_``; ``n_steps_`` counts the mini-batches).

    On torch tensors in host memory the steps run numpy's kernels (``core.backend.run``) and
    the state is carried from step to step as the numpy arrays they computed (a
    ``core.backend.Carried`` held as ``state_``): the tensors of ``state_`` are made when it
    is first read, which saves each step the conversions of its state both ways.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Let a streaming learner's ``batch_size`` be ``"auto"`` (see :meth:`_step_batch`)."""
        super().__init_subclass__(**kwargs)
        constraints = cls.__dict__.get("_parameter_constraints")
        # once: a subclass that extends its base's constraints has "auto" already (the
        # refusal said "one of 'auto' or one of 'auto' or >= 1")
        if constraints is not None and "batch_size" in constraints and not any(
                rule.accepts("auto") for rule in constraints["batch_size"]):
            cls._parameter_constraints = {
                **constraints, "batch_size": [Options("auto"), *constraints["batch_size"]]}

    missing = None  # learners that accept missing entries make it a parameter

    def __init__(self, n_components: int, *, batch_size: int | str, max_iter: int | str,
                 init: Any, code_max_iter: int | None, code_tol: float | None,
                 random_state: Any, backend: str | None, device: Any, verbose: bool,
                 callback: Any, reinit_dead_atoms: bool, n_threads: int | None):
        """Keep the parameters of the fit loop that every online learner shares; the learner's
        ``__init__`` holds their defaults and passes them up."""
        super().__init__(n_components, backend=backend, device=device, n_threads=n_threads)
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.init = init
        self.code_max_iter = code_max_iter
        self.code_tol = code_tol
        self.random_state = random_state
        self.verbose = verbose
        self.callback = callback
        self.reinit_dead_atoms = reinit_dead_atoms

    # -- what a subclass configures ------------------------------------------------------------

    def _algorithm(self) -> Algorithm:
        raise NotImplementedError

    def _batch_size(self) -> int:
        """``batch_size`` as the algorithm is configured with it: ``"auto"`` is the number
        ``fit`` chose (``batch_size_``, kept in checkpoints), the learner's default before."""
        if self.batch_size == "auto":
            return self.__dict__.get("batch_size_", self._auto_batch(None))
        return self.batch_size

    def _auto_batch(self, n_samples: int | None) -> int:
        """The batch ``"auto"`` means on the CPU for ``fit`` over ``n_samples`` (None: not
        known): the class's default ``batch_size`` (a learner whose default is ``"auto"``
        gives its own rule)."""
        return _default_batch(type(self))

    def _step_batch(self, batch_size: Any, X: Any, n_samples: int) -> int:
        """The batch ``fit`` streams ``X`` in (:func:`~..core.device.step_batch_size`: the
        given one, refused when it cannot fit on a CUDA device; ``"auto"``'s rule), kept as
        ``batch_size_`` for the algorithm."""
        context = self.__dict__.get("_context") or {"device": self._device()}
        itemsize = 4 if "float32" in str(getattr(X, "dtype", "")) else 8
        resolved = step_batch_size(batch_size, context.get("device"),
                                   math.prod(X.shape) // max(n_samples, 1),
                                   check_n_components(self.n_components), itemsize,
                                   self._auto_batch(n_samples))
        if batch_size == "auto":
            self.batch_size_ = resolved
        return resolved

    def _nonnegative_data(self) -> bool:
        return bool(getattr(self, "nonnegative", False))

    def _negative_way_out(self) -> str:
        """What a user with negative data can do instead, said when they are refused."""
        if "nonnegative" in _init_parameter_names(type(self)):
            return ("pass nonnegative=False to learn signed atoms and codes (tensorstream fit: "
                    "--param nonnegative=False)")
        return SIGNED_DATA_WAY_OUT

    def _keeps_sparse(self, X: Any, backend: str) -> bool:
        """True when the sparse batch ``X`` stays sparse (the algorithm codes it on its support);
        otherwise it is densified."""
        return False

    def _check_samples(self, X: Any, name: str) -> None:
        """Raise ``ValueError`` for samples this learner cannot model (e.g. not vectors)."""

    @property
    def _positive_data(self) -> bool:
        return self._nonnegative_data()

    # -- the learned state ---------------------------------------------------------------------

    @property
    def state_(self) -> OnlineState:
        """The learned state: tensors of the backend (made from the carried numpy arrays where
        it is first read, on torch tensors in host memory)."""
        held = self.__dict__.get("state_")
        if held is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute 'state_'")
        return held.tensors() if isinstance(held, Carried) else held

    @state_.setter
    def state_(self, state: OnlineState) -> None:
        self.__dict__["state_"] = state  # one store: a step is committed at once

    def _held_state(self) -> OnlineState:
        """The state as the learner holds it, for its shapes, counters and scale (a carried
        state's arrays are not made tensors for that)."""
        self._check_fitted()
        held = self.__dict__["state_"]
        return held.current() if isinstance(held, Carried) else held

    def _fitted_state(self) -> OnlineState:
        self._check_fitted()
        return self.state_

    @property
    def loadings_(self) -> list:
        """The dictionary: one tensor of shape ``(I_k, n_components)`` per data mode."""
        return self._fitted_state().loadings

    @property
    def statistics_(self) -> dict | None:
        """The surrogate's statistics ``A``, ``B``, ``c`` (None for gradient algorithms)."""
        return self._fitted_state().statistics

    @property
    def n_steps_(self) -> int:
        """Mini-batches learned from."""
        return self._held_state().n_steps

    @property
    def n_samples_seen_(self) -> int:
        """Samples learned from."""
        return self._held_state().n_samples_seen

    @property
    def n_components_(self) -> int:
        """Number of atoms of the learned dictionary."""
        return int(self._held_state().loadings[0].shape[1])

    @property
    def n_features_in_(self) -> int:
        """Entries of one sample (``prod(I_k)``; features of a data matrix)."""
        self._check_fitted()
        return int(np.prod(self.sample_shape_))

    @property
    def n_iter_(self) -> int:
        """Passes over the data of the last ``fit``, those started counted (scikit-learn's
        meaning, as in its ``MiniBatchNMF``): the epochs over an array, 1 for a stream (read
        once). ``partial_fit`` counts no passes: it leaves ``n_iter_`` as the last ``fit`` left
        it, 0 for a learner fitted by ``partial_fit`` alone. Mini-batches are ``n_steps_``."""
        self._check_fitted()
        return self.__dict__.get("_n_iter", 0)

    def _check_params_against_state(self) -> None:
        """Refuse, by name, a parameter set since the fit that the learned state fixes (the
        number of atoms, the device): ``fit`` starts anew with it."""
        if not self._fitted:
            return
        check_state_device(self._device(), self._context.get("device"))
        if self.n_components != self.n_components_:
            raise ValueError(f"n_components={self.n_components!r}, but this "
                             f"{type(self).__name__} has {self.n_components_} atoms: it was set "
                             f"since the fit, which fixes it; call fit to start anew with it")
        declared = getattr(self, "data_scale", "auto")  # the learners that have one
        scale = self._held_state().scale
        if not isinstance(declared, str) and float(declared) != scale:
            raise ValueError(f"data_scale={declared!r}, but this {type(self).__name__} learned "
                             f"at the data scale {scale!r}: it was set since the "
                             f"fit, which fixes it; call fit to start anew with it")

    def _reset(self) -> None:
        for name in ("state_", "backend_", "sample_shape_", "layout_", "array_layout_",
                     "batch_size_",
                     "_context", "_rng", "_n_iter",
                     "_last_info", "_last_codes", "feature_names_in_"):
            self.__dict__.pop(name, None)

    # -- validation at the boundary ------------------------------------------------------------

    def _backend_for(self, X: Any) -> str:
        if self._fitted:
            return self.backend_
        return "pytorch" if self._device() is not None else (self.backend or backend_of(X))

    def _device(self) -> Any:
        """The ``torch.device`` the learner computes on (``device``), None: where the data
        are (see :mod:`~..core.device`)."""
        return resolve_device(getattr(self, "device", None))

    def _on_device(self, X: Any) -> Any:
        """``X`` on the learner's device (a torch tensor moved; other kinds go there at
        validation), as it is without a device."""
        if self._fitted:
            return move(X, self._context.get("device")) if self.backend_ == "pytorch" and \
                getattr(self, "device", None) is not None else X
        return move(X, self._device())

    def _checked_against_fit(self) -> dict:
        context = self.__dict__.get("_context")
        if context is None and self._device() is not None:
            context = {"device": self._device()}  # the dtype is the data's (check_batch)
        return {"context": context,
                "sample_shape": self.__dict__.get("sample_shape_"), "owner": type(self).__name__}

    def _validate(self, X: Any, name: str = "X") -> Any:
        """``X`` as a tensor of the learner's backend, checked against the fitted state (a
        sparse batch stays sparse where the algorithm codes it so)."""
        backend = self._backend_for(X)
        # on a device, sparse batches are densified there (the support-only codes are numpy's)
        check = check_sparse_batch if is_sparse(X) and self._keeps_sparse(X, backend) and \
            getattr(self, "device", None) is None else check_batch
        # the hint to use missing='nan' only where there is such a parameter
        hint = {} if check is check_sparse_batch else {
            "missing_hint": "missing" in _init_parameter_names(type(self))}
        X = check(self._on_device(X), backend=backend, nonnegative=self._nonnegative_data(),
                  name=name,
                  way_out=self._negative_way_out(), **self._checked_against_fit(), **hint)
        self._check_samples(X, name)
        return X

    def _validate_masked(self, X: Any, mask: Any, name: str = "X") -> tuple[Any, Any]:
        """``(X, mask)`` as tensors; ``mask`` is None unless entries are missing (the masked
        entries of a ``numpy.ma`` array are, for a learner that takes masks)."""
        if is_masked(X) and "missing" in _init_parameter_names(type(self)):
            X, mask = split_masked(X, mask)
        if mask is None and self.missing is None:
            return self._validate(X, name), None
        X, mask = check_masked_batch(self._on_device(X), mask, missing=self.missing,
                                     backend=self._backend_for(X),
                                     nonnegative=self._nonnegative_data(), name=name,
                                     way_out=self._negative_way_out(),
                                     **self._checked_against_fit())
        self._check_samples(X, name)
        return X, mask

    def _checked_input(self, X: Any, mask: Any) -> tuple[Any, Any, Any]:
        """``(X, mask, layout)`` of data given to a fitted learner's methods."""
        self._check_feature_names(X)
        mask = _mask_of_frame(mask, X)
        X, mask, _ = regroup(self, X, mask, None)  # as the learner was fitted
        data, layout = self._unlabel(X, None, None)
        X, mask = self._validate_masked(data, self._unlabel_mask(mask, layout, X))
        return X, mask, layout

    # -- learning ------------------------------------------------------------------------------

    def partial_fit(self, X: Any, y: Any = None, *, mask: Any = None,
                    sample_dim: str | None = None, modes: Any = None,
                    client: Any = None) -> OnlineLearner:
        """Learn from one mini-batch.

        Returns
        -------
        self

        Invalid input raises before anything changes: the learner's state (its random
        generator included) is left as it was.
        """
        self._check_params()
        self._check_params_against_state()
        self._check_feature_names(X)  # on a cluster too: columns are matched by name
        mask = _mask_of_frame(mask, X)
        X, mask, grouping = regroup(self, X, mask, modes)  # arrays: tensorstream.modes
        if grouping is not None:
            modes = None  # used up: what follows sees the regrouped array
        if client is not None:
            with connected(client) as open_client:
                self._partial_fit_on(open_client, X, mask, sample_dim, modes)
            if grouping is not None:
                self.array_layout_ = grouping
            return self
        algorithm = self._algorithm()
        names = None if self._fitted else feature_names(X)
        data, layout = self._unlabel(X, sample_dim, modes)
        X, mask = self._validate_masked(data, self._unlabel_mask(mask, layout, X))
        with undone_on_error(self, "partial_fit", note=False):  # fit notes it, once
            self._init_random_state()  # a refused first step leaves no generator behind
            fresh = {} if self._fitted else self._initial_state(X, algorithm, mask)
            backend = fresh.get("backend_", self.__dict__.get("backend_"))
            state = fresh.pop("state_", None) or self.__dict__["state_"]  # carried as it is
            reinit = getattr(self, "reinit_dead_atoms", True)
            new, codes, info = run(backend, _step_of(algorithm, reinit), state, X, mask,
                                   carry=True)
        self._commit(new, info, fresh=fresh, names=names, layout=layout, codes=codes,
                     grouping=grouping)
        return self

    def _commit(self, new: OnlineState, info: dict, *, fresh: dict, names: Any, layout: Any,
                codes: Any, grouping: Any = None) -> None:
        """Keep a step's results: the new state (and the ``fresh`` attributes of a first
        step), the first batch's feature ``names``, its labels, the step's ``info`` and
        ``codes`` (None: not kept, a cluster's stay on its workers); then warn about what
        the step's health checks found (a warning turned error leaves the step kept)."""
        self.__dict__.update(fresh)
        self.state_ = new
        self._keep_feature_names(names)  # the first step's columns, as fit keeps them
        self._last_info = info
        if codes is None:
            self.__dict__.pop("_last_codes", None)
        else:
            self._last_codes = codes
        if layout is not None:
            self.layout_ = layout
        if grouping is not None:
            self.array_layout_ = grouping
        self._say_what_went_wrong(info)

    def _say_what_went_wrong(self, info: dict) -> None:
        """Warn (once the step is committed) about what the engine's health checks found:
        codes all at a bound, dead atoms, a rising objective."""
        for message in info.get("warnings", ()):
            warn(f"{type(self).__name__}: {message}", LearningWarning)

    def _initial_state(self, X: Any, algorithm: Algorithm | None = None,
                       mask: Any = None) -> dict:
        """The state before the first step, for samples shaped like the validated batch ``X``
        (observed where ``mask`` is True; draws from the learner's random generator)."""
        algorithm = algorithm or self._algorithm()
        self._init_random_state()
        R = check_n_components(self.n_components)
        backend = backend_of(X)
        with using(backend):
            context = {**tl.context(X), "dtype": float_dtype_of(X, backend)}
            sample_shape = tuple(X.shape[1:])
            # statistics A (R x R) and B, and the loadings: refused before any is allocated
            check_state_memory(R * (R + math.prod(sample_shape) + sum(sample_shape)),
                               context["dtype"], R, context.get("device"))
            loadings = algorithm.initial_loadings(X, context, self._rng, mask)
            statistics = algorithm.initial_statistics(sample_shape, R, context)
        return {"state_": OnlineState(loadings=loadings, statistics=statistics),
                "backend_": backend, "sample_shape_": sample_shape, "_context": context}


def _step_of(algorithm: Algorithm, reinit_dead_atoms: bool) -> Any:
    """``partial_fit``'s step: the new state, the batch's codes and outliers, and the step's
    info (not the rest of the coding step's results, which nobody reads afterwards: on torch
    tensors in host memory each array handed back is a tensor made)."""

    def step(state: OnlineState, X: Any, mask: Any) -> tuple:
        new, coded, info = online_step(algorithm, X, state, mask,
                                       reinit_dead_atoms=reinit_dead_atoms)
        return new, (coded.codes, coded.outliers), info
    return step


def _default_batch(cls: type) -> int:
    """The default ``batch_size`` of the learner class ``cls`` (its ``__init__``'s)."""
    return int(inspect.signature(cls.__init__).parameters["batch_size"].default)
