"""What every learner shares: the scikit-learn parameter contract, ``fit`` over arrays and
streams, and (:class:`OnlineLearner`) the estimator shell around the online engine.

Learners keep hyper-parameters in ``__init__`` (stored unchanged, so ``get_params``,
``set_params`` and ``sklearn.base.clone`` work) and learned state in trailing-underscore
attributes. An online learner is a configuration: it builds an :class:`~..engine.Algorithm`
from its parameters (``_algorithm``) and :class:`OnlineLearner` does the rest: validation at
the boundary, the step through :func:`~..engine.online_step` computed on the side and committed
at the end (a failure leaves the learner as it was), and the methods that use the dictionary.
``partial_fit`` stores a dict describing the step in ``self._last_info`` for progress bars and
callbacks.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import tensorly as tl
import xarray as xr

from ..core.backend import (
    Carried,
    as_tensor,
    backend_of,
    float_dtype_of,
    limit_threads,
    no_grad,
    run,
    take_rows,
    to_numpy,
    using,
)
from ..core.caller import warn
from ..core.device import (
    DEVICE,
    check_device_backend,
    check_state_device,
    move,
    resolve_device,
    step_batch_size,
)
from ..core.dictionary import reconstruct, to_cp_tensor
from ..core.validation import (
    BACKEND,
    BOOLEAN,
    CALLABLE,
    NONE,
    RANDOM_STATE,
    Interval,
    Options,
    as_array,
    check_batch,
    check_masked_batch,
    check_n_components,
    check_overflow,
    check_positive_int,
    check_positive_number,
    check_sample_weight,
    check_sparse_batch,
    check_state_memory,
    densify,
    feature_names,
    generator_of,
    is_data_frame,
    is_masked,
    is_sparse,
    split_masked,
    validate_params,
)
from ..engine import Algorithm, Codes, OnlineState, online_step
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
from ..engine.distributed import (
    CONNECT_TIMEOUT,
    WorkerRead,
    connected,
    distributed_step,
    lazy,
    scatter_to,
)
from ..engine.loop import LearningWarning
from ..labels import (
    ModeLayout,
    aligned_samples,
    check_unique_labels,
    codes_from_dataarray,
    codes_to_dataarray,
    factors_to_dataset,
    from_samples,
    to_samples,
)
from ..modes import decode_array_layout, encode_array_layout
from ._docs import complete_parameters
from ._modes import regroup
from ._output import (
    CONTAINERS,
    OUTPUT_METHODS,
    check_container,
    component_names,
    configured,
    input_feature_names,
    plain_output,
)


def is_array_like(X: Any) -> bool:
    """Arrays (numpy, backend tensors, xarray, sparse, dask) as opposed to streams of batches."""
    return hasattr(X, "shape") and hasattr(X, "ndim")


def is_labelled(X: Any) -> bool:
    """True for an ``xarray.DataArray`` (labelled input)."""
    return isinstance(X, xr.DataArray)


def make_layout(da: Any, sample_dim: str | None, modes: Any) -> ModeLayout:
    """The mode layout of a DataArray, with a clear error when ``sample_dim`` is missing or
    a feature dim repeats a label."""
    if sample_dim is None:
        raise ValueError(f"sample_dim is required for xarray.DataArray input (dims {da.dims})")
    layout = ModeLayout.from_dataarray(da, sample_dim, modes).check_factor_names()
    check_unique_labels(da, [dim for mode in layout.modes for dim in mode.dims])
    return layout


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


#: ``max_iter="auto"``: ``AUTO_PASSES`` passes over an array, or more on a small one, so that
#: ``fit`` takes at least ``AUTO_MIN_STEPS`` mini-batches, but at most ``AUTO_MAX_PASSES``. On
#: scikit-learn's 1,437 training digits in batches of 1,024, 10 passes are 20 steps and leave
#: OnlineNMF 0.8 dB below MiniBatchNMF's defaults (which run up to 200 passes); 100 passes close
#: the gap (docs/defaults.md). Arrays of 20 batches or more keep 10 passes.
AUTO_PASSES, AUTO_MIN_STEPS, AUTO_MAX_PASSES = 10, 200, 200


def fit_passes(max_iter: Any, n_samples: int, batch_size: int) -> int:
    """The passes of ``fit`` over an array of ``n_samples`` in batches of ``batch_size``:
    ``max_iter``, or for ``"auto"`` the rule of ``AUTO_PASSES``.

    Examples
    --------
    >>> fit_passes("auto", 1437, 1024), fit_passes("auto", 50000, 1024), fit_passes(3, 10, 5)
    (100, 10, 3)
    """
    if isinstance(max_iter, str) and max_iter == "auto":
        per_pass = -(-n_samples // batch_size)
        return min(AUTO_MAX_PASSES, max(AUTO_PASSES, -(-AUTO_MIN_STEPS // per_pass)))
    return check_positive_int(max_iter, "max_iter")


#: Constraints of the parameters that mean the same in every learner (see the glossary).
SHARED_CONSTRAINTS = {
    "n_components": [Interval("int", 1, None)],
    "batch_size": [Interval("int", 1, None)],
    "max_iter": [Options("auto"), Interval("int", 1, None)],
    "code_max_iter": [Interval("int", 1, None)],
    "code_tol": [Interval("real", 0, None)],
    "missing": [Options("nan"), NONE],
    "random_state": RANDOM_STATE,
    "backend": BACKEND,
    "verbose": [BOOLEAN],
    "callback": [CALLABLE, NONE],
    "reinit_dead_atoms": [BOOLEAN],
}

#: ``n_threads``, a parameter of every learner (declared in its ``__init__``; its constraint is
#: added by :class:`CheckedParameters`): BLAS/OpenMP and PyTorch threads inside its public
#: methods (:func:`~..core.backend.limit_threads`; ``None``: the libraries' own).
#: One thread is the default: on the benchmarks of ``docs/nmf.md`` no learner ran faster with
#: the machine's default threads, and several ran 5-40x slower (oversubscription).
N_THREADS = [Interval("int", 1, None), NONE]
DEFAULT_N_THREADS = 1

#: the public methods that run inside the learner's thread limit (where a class defines them)
THREADED_METHODS = ("fit", "partial_fit", "transform", "fit_transform", "inverse_transform",
                    "score", "objective", "surrogate_value", "decompose", "outliers", "impute",
                    "reconstruct", "to_cp_tensor", "gradient_mapping")

#: the way out of a model that is nonnegative by definition (NMF), for signed data
SIGNED_DATA_WAY_OUT = ("this model is nonnegative by definition: shift the data to be "
                       "nonnegative, or use a learner for signed data: OnlineCPDL(nonnegative="
                       "False), OnlineRobustPCA or OnlineMaxNormMD (tensorstream fit: --model "
                       "ocpdl --param nonnegative=False)")

#: parameters renamed in every learner (old name: new name), for checkpoints
RENAMED_EVERYWHERE = {"blas_threads": "n_threads"}

#: the metadata mark of checkpoints whose penalties weigh against half the squared error (every
#: learner's convention); files without it get a learner's ``_rescaled_parameters`` applied
PENALTY_CONVENTION = {"penalty_convention": "half-squared-error"}


def _threads_limited(method: Any) -> Any:
    """``method`` run inside the learner's thread limit (``n_threads``, checked first)."""

    @functools.wraps(method)
    def limited(self: Any, *args: Any, **kwargs: Any) -> Any:
        n_threads = self.n_threads
        if n_threads is not None and not (type(n_threads) is int and n_threads >= 1):
            validate_params({"n_threads": n_threads}, {"n_threads": N_THREADS},
                            type(self).__name__)
        with limit_threads(n_threads):
            return method(self, *args, **kwargs)

    limited._threads_limited = True
    return limited


#: the methods that read, compute and commit a learner's state: one thread at a time per
#: learner (:func:`learner_lock`), so that no step is computed from a state another thread is
#: replacing (and lost when its commit overwrites the other's)
SERIALISED_METHODS = ("fit", "partial_fit", "fit_transform", "set_params", "save")

#: one re-entrant lock per live learner, by ``id``: kept outside the learner, so that pickling,
#: ``copy.deepcopy`` and ``sklearn.base.clone`` never meet it and every copy gets its own
_LOCKS: dict[int, threading.RLock] = {}
_LOCKS_GUARD = threading.Lock()


def learner_lock(learner: Any) -> threading.RLock:
    """The lock that serialises ``learner``'s :data:`SERIALISED_METHODS` (re-entrant: ``fit``
    runs ``partial_fit``); dropped when the learner is garbage collected."""
    key = id(learner)
    with _LOCKS_GUARD:
        lock = _LOCKS.get(key)
        if lock is None:
            lock = _LOCKS[key] = threading.RLock()
            # runs before the learner's memory (and so its id) can be reused
            weakref.finalize(learner, _LOCKS.pop, key, None)
    return lock


def _serialised(method: Any) -> Any:
    """``method`` run holding the learner's lock (:func:`learner_lock`)."""

    @functools.wraps(method)
    def serialised(self: Any, *args: Any, **kwargs: Any) -> Any:
        with learner_lock(self):
            return method(self, *args, **kwargs)

    serialised._serialised = True
    return serialised


class NotFittedError(ValueError, AttributeError):
    """A learner was used before ``fit`` or ``partial_fit`` (``hasattr`` then returns False).
    Where scikit-learn is installed, what is raised is also its ``NotFittedError``."""


@functools.cache
def _not_fitted_error() -> type:
    """:class:`NotFittedError`, and scikit-learn's too where it is installed (so that code
    written for its estimators catches it); imported when first raised, not with the package
    (scikit-learn's import costs ~0.3 s). Pickled as a call that makes it again (another
    process, a process pool, has not made the class yet)."""
    try:
        from sklearn.exceptions import NotFittedError as Theirs
    except ImportError:  # pragma: no cover - scikit-learn comes with the test and docs extras
        return NotFittedError
    return type("NotFittedError", (NotFittedError, Theirs),
                {"__module__": __name__, "__doc__": NotFittedError.__doc__,
                 "__reduce__": lambda self: (_not_fitted, self.args)})


def _not_fitted(*args: Any) -> NotFittedError:
    """The not-fitted error with ``args`` (what unpickling one calls)."""
    return _not_fitted_error()(*args)


def _bit_generator_of(random_state: Any) -> Any:
    """The bit generator a Generator or RandomState draws from (None for anything else)."""
    if isinstance(random_state, np.random.Generator):
        return random_state.bit_generator
    if isinstance(random_state, np.random.RandomState):
        return random_state._bit_generator
    return None


class CheckedParameters:
    """What every learner shares with scikit-learn: parameters validated from the constraints
    it declares as data (``_parameter_constraints``, checked by
    :func:`~..core.validation.validate_params`, then the rules that relate several parameters,
    ``_check_rules``), one "not fitted" error, and scikit-learn's estimator tags.

    A learner names the attribute that exists once it is fitted (``_fitted_attribute``).
    """

    _parameter_constraints: dict = {}
    _fitted_attribute = "state_"
    n_threads = DEFAULT_N_THREADS  # until __init__ sets it

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Check every learner's ``n_threads`` and run its public methods inside its thread
        limit, so that no learner can forget either."""
        super().__init_subclass__(**kwargs)
        constraints = cls.__dict__.get("_parameter_constraints")
        if constraints is not None and "n_threads" not in constraints:
            cls._parameter_constraints = {**constraints, "n_threads": N_THREADS}
        if constraints is not None and "device" in _init_parameter_names(cls):
            cls._parameter_constraints = {**cls._parameter_constraints, "device": DEVICE}
        for name in OUTPUT_METHODS:  # the container set_output chose
            method = cls.__dict__.get(name)
            if inspect.isfunction(method) and not hasattr(method, "_output_configured"):
                setattr(cls, name, configured(method))
        for name in THREADED_METHODS:
            method = cls.__dict__.get(name)
            if inspect.isfunction(method) and not hasattr(method, "_threads_limited"):
                setattr(cls, name, _threads_limited(method))
        for name in SERIALISED_METHODS:  # outermost: a waiting thread changes nothing
            method = cls.__dict__.get(name)
            if inspect.isfunction(method) and not hasattr(method, "_serialised"):
                setattr(cls, name, _serialised(method))
        if cls.__module__.startswith("tensorstream."):  # ours: every argument on the API pages
            for name, method in list(cls.__dict__.items()):  # (a user's subclass is theirs)
                if inspect.isfunction(method) and not name.startswith("_"):
                    complete_parameters(method, cls.__name__)

    #: the data a learner models must be nonnegative (scikit-learn's ``positive_only`` tag)
    _positive_data = False
    #: ``fit_transform`` returns the input's own features (not codes): the output features
    #: are named after the input's
    _output_follows_input = False

    @property
    def _fitted(self) -> bool:
        return self._fitted_attribute in self.__dict__

    def _check_fitted(self) -> None:
        if not self._fitted:
            how = "fit or partial_fit" if hasattr(self, "partial_fit") else "fit"
            raise _not_fitted_error()(f"this {type(self).__name__} is not fitted yet; call "
                                      f"{how} first")

    def __sklearn_is_fitted__(self) -> bool:
        return self._fitted

    # -- scikit-learn's output API (learners/_output.py) -------------------------------------

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Names of the output features of ``transform``: ``<class name><k>`` for the
        ``k``-th atom's codes (``onlinenmf0``, ``onlinenmf1``, ...), as scikit-learn names a
        decomposition's; the input's names where the output is the input's own features.

        Parameters
        ----------
        input_features : list of str, optional
            The input features' names, checked against ``feature_names_in_`` (when fitted on
            a DataFrame) and ``n_features_in_``.

        Returns
        -------
        ndarray of str objects
        """
        self._check_fitted()
        names = input_feature_names(self, input_features)
        if self._output_follows_input:
            return names
        n_components = getattr(self, "n_components_", None)  # the batch learners have none
        return component_names(self, int(self.components_.shape[0]) if n_components is None
                               else int(n_components))

    def set_output(self, *, transform: str | None = None) -> Any:
        """Choose the container ``transform`` and ``fit_transform`` return: ``"pandas"`` or
        ``"polars"`` (a DataFrame whose columns are :meth:`get_feature_names_out`, with the
        index of a pandas DataFrame given), ``"default"`` (the backend's tensor), or None (no
        change). Labelled input keeps giving a ``DataArray``. scikit-learn's ``Pipeline`` and
        ``ColumnTransformer`` call it through their own ``set_output``.

        Parameters
        ----------
        transform : {"default", "pandas", "polars"} or None, default None
            The container (None: keep the current one).

        Returns
        -------
        self
        """
        if transform is not None:
            self._sklearn_output_config = {**getattr(self, "_sklearn_output_config", {}),
                                           "transform": check_container(transform)}
        return self

    def _check_feature_names(self, X: Any) -> None:
        """Data given to a fitted learner have the columns it was fitted with, by name
        (scikit-learn's rule: a DataFrame with its columns in another order would be read by
        position, silently); a missing name on either side is warned about."""
        names, fitted = feature_names(X), self.__dict__.get("feature_names_in_")
        if names is None or fitted is None:
            if (names is None) != (fitted is None) and self._fitted:
                which = "has feature names" if fitted is None else "has no feature names"
                how = "without" if fitted is None else "with"
                warn(f"X {which}, but {type(self).__name__} was fitted {how} feature names")
            return
        if len(names) != len(fitted) or np.any(names != fitted):
            raise ValueError(f"The feature names should match those that were passed during "
                             f"fit: {type(self).__name__} was fitted with {list(fitted)}, X has "
                             f"{list(names)}")

    def _keep_feature_names(self, names: Any) -> None:
        """Keep the columns of the DataFrame fitted on (``names``: :func:`feature_names` of
        the data; None keeps nothing), as scikit-learn keeps ``feature_names_in_``."""
        if names is not None:
            self.feature_names_in_ = names

    def _output_meta(self) -> dict:
        """What a checkpoint keeps of the output API: the input's feature names (fitted on
        a DataFrame) and the container ``set_output`` chose (``"default"`` included: an explicit
        choice overrides scikit-learn's global one)."""
        meta = {}
        names = self.__dict__.get("feature_names_in_")
        if names is not None:
            meta["feature_names"] = [str(name) for name in names]
        # any explicit choice, "default" included: it overrides scikit-learn's global one
        container = getattr(self, "_sklearn_output_config", {}).get("transform")
        if container is not None:
            meta["output"] = container
        return meta

    def _restore_output_meta(self, meta: dict, path: Any) -> None:
        """Set what :meth:`_output_meta` wrote (nothing for checkpoints written before);
        a container whose library is missing here is warned about and left at the default:
        it is a presentation choice, not worth losing the learned state for."""
        names = meta.get("feature_names")
        if names is not None:
            if not (isinstance(names, list) and all(isinstance(n, str) for n in names)
                    and len(names) == self.n_features_in_):
                raise ValueError(f"cannot read checkpoint {str(path)!r}: its feature names are "
                                 f"not {self.n_features_in_} strings")
            self.feature_names_in_ = np.asarray(names, dtype=object)
        if meta.get("output") is not None:
            try:
                self.set_output(transform=meta["output"])
            except ImportError as error:
                warn(f"checkpoint {str(path)!r}: {error}; its learner gives the default output")
            except ValueError:
                raise ValueError(f"cannot read checkpoint {str(path)!r}: its output container "
                                 f"{meta['output']!r} is none of {list(CONTAINERS)}") from None

    def __sklearn_tags__(self) -> Any:
        from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags

        # sparse data are accepted everywhere (densified batch by batch where a coder needs it)
        return Tags(estimator_type="transformer", target_tags=TargetTags(required=False),
                    transformer_tags=TransformerTags(),
                    input_tags=InputTags(positive_only=self._positive_data, sparse=True,
                                         allow_nan=getattr(self, "missing", None) == "nan"))

    def _keep_parameters(self, arguments: dict) -> None:
        """Store every ``__init__`` argument unchanged under its own name: a learner's
        ``__init__`` calls ``self._keep_parameters(locals())`` and does nothing else
        (scikit-learn's rule, so that ``get_params``, ``set_params`` and ``clone`` round-trip;
        validation waits for ``fit``)."""
        for name in _init_parameter_names(type(self)):
            setattr(self, name, arguments[name])

    def _check_params(self) -> None:
        """Validate the parameters, unless they are the very values validated last time (a
        loop of ``partial_fit`` calls checks them once: the check costs ~25 us, 5-10% of a
        small step such as OnlineNMF's on 256 digits)."""
        params = self.get_params()
        seen = _ParameterValues(params)
        try:
            if seen == _VALIDATED.get(self):
                return
        except TypeError:  # a subclass made learners unhashable: validated every time
            seen = None
        validate_params(params, self._parameter_constraints, type(self).__name__)
        if "device" in params:  # a device this machine lacks, named before anything runs
            resolve_device(params["device"])
            check_device_backend(params["device"], params.get("backend"))
        self._check_rules()
        if seen is not None:
            _VALIDATED[self] = seen

    def _check_rules(self) -> None:
        """Rules between parameters that constraints on one parameter cannot say."""


#: per learner, the parameter values validated last: kept beside the learner, not in it, so
#: that a cache is no part of its state (a refused call leaves ``__dict__`` exactly as it was;
#: a copy or an unpickled learner validates once again)
_VALIDATED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _ParameterValues:
    """The values of a learner's parameters, compared by identity (numbers and strings by
    value; a list or tuple by the identity of its items): equal only when no parameter was
    set, or set to another object, since. Holding the values keeps their identities from
    being reused by other objects."""

    _BY_VALUE = (bool, int, float, str, type(None))

    def __init__(self, params: dict):
        self.values = {name: tuple(value) if isinstance(value, (list, tuple)) else value
                       for name, value in params.items()}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _ParameterValues) or other.values.keys() != self.values.keys():
            return False
        theirs = other.values
        for name, value in self.values.items():  # a plain loop: this runs at every step
            if value is not theirs[name] and not self._same(value, theirs[name]):
                return False
        return True

    __hash__ = None  # mutable comparison semantics; never a dict key

    @classmethod
    def _same(cls, a: Any, b: Any) -> bool:
        if a is b:
            return True
        if type(a) is not type(b):
            return False
        if isinstance(a, tuple):
            return len(a) == len(b) and all(cls._same(x, y) for x, y in zip(a, b))
        return type(a) in cls._BY_VALUE and a == b


@functools.cache
def _init_parameter_names(cls: type) -> tuple[str, ...]:
    """The parameters of ``cls.__init__``, read once per class (``get_params`` runs at every
    step, and reading a signature costs more than a tiny step's arithmetic)."""
    signature = inspect.signature(cls.__init__)
    return tuple(p.name for p in signature.parameters.values()
                 if p.name != "self" and p.kind != p.VAR_KEYWORD)


class OnlineEstimator(CheckedParameters):
    """Base class: parameters, ``fit`` over an array or a stream, progress bar and callback."""

    @classmethod
    def _param_names(cls) -> list[str]:
        return list(_init_parameter_names(cls))

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

    @contextlib.contextmanager
    def _all_or_nothing(self, method: str) -> Iterator[None]:
        """Undo everything the block did to the learner (its random generator included) when
        it raises, a KeyboardInterrupt included (Ctrl-C during a refit keeps the previous
        fit); the error says so."""
        before = dict(self.__dict__)
        # the learner's generator, and a Generator given as random_state, which the learner
        # draws from directly (numpy's default_rng returns it as it is), even before its
        # first step
        generators = {id(g): g for g in map(_bit_generator_of, (before.get("_rng"),
                                                                 before.get("random_state")))
                      if g is not None}
        states = {key: g.state for key, g in generators.items()}
        try:
            yield
        except BaseException as error:
            self.__dict__.clear()
            self.__dict__.update(before)
            for key, generator in generators.items():
                generator.state = states[key]
            error.add_note(f"{type(self).__name__}.{method} was undone: the learner is as it "
                           f"was before the call")
            raise

    def _fit(self, X: Any, mask: Any, n_steps: int | None, sample_dim: str | None,
             modes: Any, client: Any = None) -> OnlineEstimator:
        self._reset()
        labels = {"sample_dim": sample_dim, "modes": modes}
        capped = False  # True when n_steps is STREAM_STEPS for a stream of unknown length
        if client is not None and not (is_array_like(X) and not is_sparse(X)):
            raise TypeError("client= needs dense array input (numpy, torch, dask, or an "
                            "xarray.DataArray); streams are read by one process")
        if is_array_like(X) and len(X.shape) < 2:
            raise ValueError(f"X must have shape (n_samples, I_1, ..., I_n), got shape "
                             f"{tuple(X.shape)}; Reshape your data: a single sample as (1, ...)")
        if is_array_like(X):
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
            n_epochs = fit_passes(self.max_iter, n_samples, batch_size)
            positions = epoch_indices(n_samples, batch_size, n_epochs, self._rng)
            batches = (take(X, rows) if mask is None else (take(X, rows), take(mask, rows))
                       for rows in positions)
            total = n_epochs * -(-n_samples // batch_size)
            n_steps = total if n_steps is None else min(n_steps, total)
            check_fit_work(n_steps, f"{n_epochs:,} passes of {total // n_epochs:,} "
                           f"mini-batches", "max_iter or pass n_steps=", type(self).__name__)
        elif isinstance(X, Iterable):
            if mask is not None:
                raise TypeError("mask applies to array input; a stream yields (X, mask) pairs")
            if n_steps is None:
                n_steps, capped = stream_bound(X)
            batches = iter(X)
        else:
            raise TypeError(f"X must be an array or an iterable of batches, got {type(X)!r}")
        return self._consume(batches, n_steps, labels, client, capped)

    def _consume(self, batches: Iterator, n_steps: int | None, labels: dict | None = None,
                 client: Any = None, capped: bool = False) -> OnlineEstimator:
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
        return self

    def _unlabel(self, X: Any, sample_dim: str | None, modes: Any) -> tuple[Any, Any]:
        """``(samples-first array, layout)`` of ``X``; the layout is None for unlabelled input.

        The first labelled batch defines the layout; later batches must match it (same dims and
        feature labels). Nothing is stored here: ``partial_fit`` keeps the layout on success.
        """
        layout = self.__dict__.get("layout_")
        X = as_array(X)
        if not is_labelled(X):
            if sample_dim is not None:  # modes of an array were applied by regroup
                raise TypeError("sample_dim applies to xarray.DataArray input only; for an "
                                "array the samples lie along its first axis")
            if layout is not None:
                raise TypeError(f"this learner was fitted on labelled data (dims "
                                f"{layout.dims}); pass an xarray.DataArray")
            return X, None
        if layout is None or sample_dim is not None or modes is not None:
            if sample_dim is None:  # not `or`: 0 is a valid dim name
                sample_dim = getattr(layout, "sample_dim", None)
            fresh = make_layout(X, sample_dim, modes)
            if layout is not None and (fresh.mode_names, fresh.shape) != (layout.mode_names,
                                                                         layout.shape):
                raise ValueError(f"modes {fresh.mode_names} with shape {fresh.shape} differ from "
                                 f"the fitted {layout.mode_names} with shape {layout.shape}")
            layout = layout or fresh
        return to_samples(X, layout), layout
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


class ArrayCheckpoint:
    """Checkpoints of a batch learner: its parameters and its fitted attributes.

    Subclasses name their fitted tensors (``_fitted_arrays``; a list of tensors, such as
    ``loadings_``, is stored member by member) and their fitted JSON values
    (``_fitted_values``: counts, histories), and the parameters stored as members when given
    as arrays (``_array_parameters``). A learner whose fitted state is one object
    (``VarianceReducedMF``) says what it stores in ``_fitted_contents`` and how it is rebuilt
    in ``_restore_fitted`` instead; ``_upgraded`` reads a layout of older versions.
    """

    _fitted_arrays: tuple = ()
    _fitted_values: tuple = ()
    #: parameters renamed since version 0.1 (old name: new name), as in :class:`OnlineLearner`
    _renamed_parameters: dict = {}
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
    def _upgraded(cls, meta: dict, arrays: dict) -> tuple[dict, dict]:
        """The metadata and members of a checkpoint in the current layout (the layout of an
        older version rewritten; the current one as it is)."""
        return meta, arrays

    @classmethod
    def _loaded_params(cls, params: dict, meta: dict) -> dict:
        """A checkpoint's parameters as this class loads them: in today's names (the batch
        learners' values kept no other convention). ``meta`` is unused here; see
        :meth:`OnlineLearner._loaded_params`."""
        names = {**RENAMED_EVERYWHERE, **cls._renamed_parameters}
        return {names.get(k, k): v for k, v in params.items()}

    @classmethod
    def _from_checkpoint(cls, meta: dict, arrays: dict, overrides: dict, path: Any) -> Any:
        try:
            meta, arrays = cls._upgraded(meta, arrays)
            params = cls._loaded_params(decode_params(meta["params"], arrays), meta)
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


class OnlineLearner(OnlineEstimator):
    """An estimator holding the engine's :class:`~..engine.OnlineState`.

    Subclasses say which algorithm they run and what data they accept:

    - ``_algorithm()``: the :class:`~..engine.Algorithm` configured by the parameters;
    - ``_parameter_constraints`` (and ``_check_rules()``): what the parameters may be;
    - ``_nonnegative_data()``, ``_keeps_sparse(X, backend)``, ``_check_samples(X, name)``:
      what a batch must be (defaults: nonnegative when the model is; dense; any shape).

    Learned state: ``state_`` (loadings, statistics, data scale, step and sample counts),
    ``backend_``, ``sample_shape_``, ``layout_`` (labelled fits) and the random generator.

    On torch tensors in host memory the steps run numpy's kernels (``core.backend.run``) and
    the state is carried from step to step as the numpy arrays they computed (a
    ``core.backend.Carried`` held as ``state_``): the tensors of ``state_`` are made when it
    is first read, which saves each step the conversions of its state both ways.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Let a streaming learner's ``batch_size`` be ``"auto"`` (see :meth:`_step_batch`)."""
        super().__init_subclass__(**kwargs)
        constraints = cls.__dict__.get("_parameter_constraints")
        if constraints is not None and "batch_size" in constraints:
            cls._parameter_constraints = {
                **constraints, "batch_size": [Options("auto"), *constraints["batch_size"]]}

    missing = None  # learners that accept missing entries make it a parameter

    # -- what a subclass configures ------------------------------------------------------------

    def _algorithm(self) -> Algorithm:
        raise NotImplementedError

    def _params(self) -> SimpleNamespace:
        """The parameters an algorithm is configured with (not the live objects ``callback``
        and ``verbose``: an algorithm is shipped to cluster workers); ``batch_size="auto"``
        as the number ``fit`` chose (the learner's default before a fit)."""
        params = {k: v for k, v in self.get_params().items() if k not in ("callback", "verbose")}
        if params.get("batch_size") == "auto":
            params["batch_size"] = self.__dict__.get("batch_size_", _default_batch(type(self)))
        return SimpleNamespace(**params)

    def _step_batch(self, batch_size: Any, X: Any, n_samples: int) -> int:
        """The batch ``fit`` streams ``X`` in (:func:`~..core.device.step_batch_size`: the
        given one, refused when it cannot fit on a CUDA device; ``"auto"``'s rule), kept as
        ``batch_size_`` for the algorithm."""
        context = self.__dict__.get("_context") or {"device": self._device()}
        itemsize = 4 if "float32" in str(getattr(X, "dtype", "")) else 8
        resolved = step_batch_size(batch_size, context.get("device"),
                                   math.prod(X.shape) // max(n_samples, 1),
                                   check_n_components(self.n_components), itemsize,
                                   _default_batch(type(self)))
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
        """Mini-batches learned from (scikit-learn's name for ``n_steps_``)."""
        return self.n_steps_

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
                     "_context", "_rng",
                     "_last_info", "_last_codes", "feature_names_in_"):
            self.__dict__.pop(name, None)

    # -- checkpoints ---------------------------------------------------------------------------

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
                "health": encode_health(state.health), **PENALTY_CONVENTION}
        arrays = {f"loading_{k}": to_numpy(U) for k, U in enumerate(state.loadings)}
        if state.statistics is not None:
            meta["c"] = state.statistics["c"]
            arrays.update(A=to_numpy(state.statistics["A"]), B=to_numpy(state.statistics["B"]))
            scalars = {name: float(value) for name, value in state.statistics.items()
                       if name not in ("A", "B", "c")}  # an algorithm's own (Algorithm)
            if scalars:
                meta["statistics"] = scalars
        meta.update(self._output_meta())
        layout = self.__dict__.get("layout_")
        if layout is not None:
            meta["layout"], layout_arrays = encode_layout(layout)
            arrays.update(layout_arrays)
        if "array_layout_" in self.__dict__:
            meta["array_layout"] = encode_array_layout(self.array_layout_)
        return meta, arrays

    #: parameters renamed since version 0.1 (old name: new name; old value: new value), so
    #: that checkpoints written with the old names still load
    _renamed_parameters: dict = {}
    _renamed_values: dict = {}
    #: parameters whose scale changed (name: factor from an old value to today's), applied to
    #: checkpoints written before ``PENALTY_CONVENTION`` (e.g. ``OnlineCPDL``'s ``alpha``)
    _rescaled_parameters: dict = {}

    @classmethod
    def _renamed(cls, params: dict) -> dict:
        names = {**RENAMED_EVERYWHERE, **cls._renamed_parameters}
        renamed = {names.get(k, k): v for k, v in params.items()}
        return {k: cls._renamed_values.get((k, v), v) if isinstance(v, str) else v
                for k, v in renamed.items()}

    @classmethod
    def _rescaled(cls, params: dict, meta: dict) -> dict:
        """``params`` in today's convention: an older file's values times the factors of
        ``_rescaled_parameters`` (a non-number is left for the constructor to refuse)."""
        key, value = next(iter(PENALTY_CONVENTION.items()))
        if meta.get(key) == value:
            return params
        return {k: v * cls._rescaled_parameters[k]
                if k in cls._rescaled_parameters and isinstance(v, (int, float))
                and not isinstance(v, bool) else v for k, v in params.items()}

    @classmethod
    def _loaded_params(cls, params: dict, meta: dict) -> dict:
        """A checkpoint's parameters as this class loads them: in today's names and
        convention (``_renamed``, then ``_rescaled`` by ``meta``'s mark), with the values of
        :meth:`_absent_parameters` for those added since the file was written.

        ``params`` may be the stored JSON values or the decoded ones: renaming touches names
        and strings, rescaling numbers, neither what decoding changes. ``tensorstream info``
        shows a checkpoint's parameters through it, and ``fit --resume`` compares the command
        line with them.
        """
        loaded = cls._rescaled(cls._renamed(params), meta)
        return {**cls._absent_parameters(loaded), **loaded}

    @classmethod
    def _absent_parameters(cls, params: dict) -> dict:
        """Values for the parameters added since a checkpoint with ``params`` was written
        (those it lacks take them): the values that compute as the learner did then, where
        today's defaults would not (none by default)."""
        return {}

    @classmethod
    def _from_checkpoint(cls, meta: dict, arrays: dict, overrides: dict,
                         path: Any) -> OnlineLearner:
        try:
            params = cls._loaded_params(
                {k: decode_param(v) for k, v in meta["params"].items()}, meta)
            learner = cls(**{**params, **overrides})
            backend = meta["backend"]
            context = tensor_context(backend, meta["dtype"], meta["device"])
            loadings = [as_tensor(arrays[f"loading_{k}"], backend, **context)
                        for k in range(meta["n_loadings"])]
            keeps_statistics = learner._algorithm().keeps_statistics
            # loss='beta' with beta=2 ran the divergence engine (no statistics) before
            legacy = keeps_statistics and "A" not in arrays and "B" not in arrays
            statistics = {"A": as_tensor(arrays["A"], backend, **context),
                          "B": as_tensor(arrays["B"], backend, **context),
                          "c": float(meta["c"])} if keeps_statistics and not legacy else None
            if statistics is not None:
                statistics.update(_scalar_statistics(meta.get("statistics", {}),
                                                     learner._algorithm()))
            # before version 3 the data scale of the divergence algorithm was stored as c
            scale = float(meta["scale"] if "scale" in meta else
                          (1.0 if keeps_statistics else meta["c"]))
            rng = np.random.default_rng()
            rng.bit_generator.state = meta["rng"]
            health = decode_health(meta.get("health"), int(loadings[0].shape[1]))
            grouping = (decode_array_layout(meta["array_layout"], tuple(U.shape[0] for U in
                                                                        loadings))
                        if "array_layout" in meta else None)
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise ValueError(f"cannot read checkpoint {str(path)!r}: incomplete or inconsistent "
                             f"contents ({error!r})") from None
        if legacy:
            loss = getattr(learner, "loss", None), getattr(learner, "loss_params", None)
            raise ValueError(f"cannot resume checkpoint {str(path)!r}: it keeps no surrogate "
                             f"statistics, but its parameters (loss={loss[0]!r}, loss_params="
                             f"{loss[1]!r}) now run the squared loss's engine, which needs them "
                             f"(they ran the divergence engine before); fit anew")
        sample_shape = tuple(U.shape[0] for U in loadings)
        _check_state_shapes(loadings, statistics, sample_shape, path)
        _check_restored(learner, meta, loadings, statistics, scale, path)
        layout = _restore_layout(meta, arrays, path, sample_shape)
        learner.__dict__.update(
            state_=OnlineState(loadings=loadings, statistics=statistics, scale=scale,
                               n_steps=int(meta["n_steps"]),
                               n_samples_seen=int(meta["n_samples_seen"]), health=health),
            backend_=backend, sample_shape_=sample_shape, _context=context, _rng=rng)
        if layout is not None:
            learner.layout_ = layout
        if grouping is not None:
            learner.array_layout_ = grouping
        learner._restore_output_meta(meta, path)
        return learner

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

    def _unlabel_mask(self, mask: Any, layout: Any, X: Any) -> Any:
        """A labelled mask laid out like its labelled data ``X`` (``layout`` is X's, None for
        unlabelled data): features matched by name and label, samples by X's sample labels."""
        if mask is not None and is_labelled(mask) and layout is None:
            raise TypeError("a labelled mask needs labelled data")
        if mask is None or layout is None:
            return mask
        mask = _labelled_like(mask, X)
        return to_samples(aligned_samples(mask, X, layout.sample_dim), layout)

    def _as_given(self, X: Any, layout: Any) -> Any:
        """The function that gives a result of the checked samples' shape the form ``X`` came
        in: the axes as given of a regrouped array (``array_layout_``), the labels of a
        DataArray (``layout``, from :meth:`_checked_input`)."""
        grouping = self.__dict__.get("array_layout_")
        labels = None if layout is None else layout.with_samples(X)

        def as_given(result: Any) -> Any:
            if grouping is not None:
                result = grouping.restore(result)
            return result if labels is None else from_samples(result, labels)

        return as_given

    def _checked_input(self, X: Any, mask: Any) -> tuple[Any, Any, Any]:
        """``(X, mask, layout)`` of data given to a fitted learner's methods."""
        self._check_feature_names(X)
        mask = _mask_of_frame(mask, X)
        X, mask, _ = regroup(self, X, mask, None)  # as the learner was fitted
        data, layout = self._unlabel(X, None, None)
        X, mask = self._validate_masked(data, self._unlabel_mask(mask, layout, X))
        return X, mask, layout

    # -- learning ------------------------------------------------------------------------------

    def fit(self, X: Any, y: Any = None, *, mask: Any = None, n_steps: int | None = None,
            sample_dim: str | None = None, modes: Any = None,
            client: Any = None) -> OnlineLearner:
        """Learn from scratch: the state of any earlier fit is replaced.

        Returns
        -------
        self
        """
        if is_sparse(X) and len(X.shape) == 2:
            X = X.tocsr()
        return super().fit(X, y, mask=mask, n_steps=n_steps, sample_dim=sample_dim,
                           modes=modes, client=client)

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
        had_rng = "_rng" in self.__dict__
        self._init_random_state()
        # the generator is shared with fit's shuffling, so it is restored rather than copied
        saved = self._rng.bit_generator.state
        try:
            fresh = {} if self._fitted else self._initial_state(X, algorithm, mask)
            backend = fresh.get("backend_", self.__dict__.get("backend_"))
            state = fresh.pop("state_", None) or self.__dict__["state_"]  # carried as it is
            reinit = getattr(self, "reinit_dead_atoms", True)
            new, codes, info = run(backend, _step_of(algorithm, reinit), state, X, mask,
                                   carry=True)
        except BaseException:
            self._rng.bit_generator.state = saved
            if not had_rng:  # a refused first step leaves no trace, not even a generator
                del self._rng
            raise
        self.__dict__.update(fresh)
        self.state_ = new
        self._keep_feature_names(names)  # the first step's columns, as fit keeps them
        self._last_info = info
        self._last_codes = codes
        if layout is not None:
            self.layout_ = layout
        if grouping is not None:
            self.array_layout_ = grouping
        self._say_what_went_wrong(info)
        return self

    def _say_what_went_wrong(self, info: dict) -> None:
        """Warn (once the step is committed) about what the engine's health checks found:
        codes all at a bound, dead atoms, a rising objective."""
        for message in info.get("warnings", ()):
            warn(f"{type(self).__name__}: {message}", LearningWarning)

    def _partial_fit_on(self, client: Any, X: Any, mask: Any, sample_dim: Any,
                        modes: Any) -> OnlineLearner:
        """``partial_fit`` with the batch split across the workers of ``client``: the shards
        are validated and coded there (dask-backed data read there too)."""
        if is_sparse(X):
            raise TypeError("client= needs dense batches")
        names = None if self._fitted else feature_names(X)
        data, layout = self._unlabel(X, sample_dim, modes)
        mask = self._unlabel_mask(mask, layout, X)
        if mask is not None and _shape_of(mask) != tuple(data.shape):  # before it is cut
            raise ValueError(f"mask must have the shape of X {tuple(data.shape)}, got "
                             f"{_shape_of(mask)}")
        had_rng = "_rng" in self.__dict__
        self._init_random_state()
        saved = self._rng.bit_generator.state
        try:
            fresh = {}
            if not self._fitted:  # the first batch initialises the model here
                first, first_mask = self._validate_masked(_local(data), _local(mask))
                fresh = self._initial_state(first, mask=first_mask)
            fitted = {**{k: self.__dict__[k] for k in ("backend_", "_context", "sample_shape_",
                                                       "state_") if k in self.__dict__}, **fresh}
            sample_shape = fitted["sample_shape_"]
            if tuple(data.shape[1:]) != tuple(sample_shape):
                raise ValueError(f"X has samples of shape {tuple(data.shape[1:])}, but this "
                                 f"learner was fitted on samples of shape {tuple(sample_shape)}")
            backend, state = fitted["backend_"], fitted["state_"]
            if isinstance(state, Carried):  # the shards' state: tensors, made for the step
                state = state.tensors(keep=False)
            checks = {"missing": self.missing, "backend": backend, "context": fitted["_context"],
                      "sample_shape": sample_shape, "nonnegative": self._nonnegative_data(),
                      "way_out": self._negative_way_out()}
            new, info = self._cluster_step(client, data, mask, checks, backend, state)
        except BaseException:  # as partial_fit: a refused step leaves the generator as it was
            self._rng.bit_generator.state = saved
            if not had_rng:
                del self._rng
            raise
        self.__dict__.update(fresh)
        self.state_ = new
        self._keep_feature_names(names)  # the first step's columns, as fit keeps them
        self.__dict__.pop("_last_codes", None)  # the shards' codes stay on the workers
        self._last_info = {**info, "workers": len(client.scheduler_info()["workers"])}
        if layout is not None:
            self.layout_ = layout
        self._say_what_went_wrong(info)
        return self

    def _cluster_step(self, client: Any, X: Any, mask: Any, checks: dict, backend: str,
                      state: OnlineState, attempts: int = 5) -> tuple[OnlineState, dict]:
        """One step on the cluster. A step is a pure function of the state and the batch, so
        a step that lost a worker (and the shards it held) is simply run again."""
        lost = _lost_worker_errors()
        for attempt in range(attempts):
            try:
                n_workers = max(1, len(client.scheduler_info()["workers"]))
                shards = _shards(client, X, mask, n_workers)
                with using(backend), no_grad(backend):
                    return distributed_step(
                        client, self._algorithm(), shards, state, checks,
                        reinit_dead_atoms=getattr(self, "reinit_dead_atoms", True))
            except lost:
                if attempt == attempts - 1:
                    raise
                time.sleep(1.0 + attempt)  # the scheduler notices the lost worker meanwhile

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

    # -- using the dictionary ------------------------------------------------------------------

    def _coding_algorithm(self) -> Algorithm:
        """The algorithm whose coding step ``transform`` and ``score`` run: the training one,
        unless a learner codes its results more tightly (``transform_tol``)."""
        return self._algorithm()

    def _coded(self, X: Any, mask: Any) -> Codes:
        """The coding step of ``transform`` and ``score`` at the learned dictionary and scale."""
        self._check_params()  # a parameter set since fit is named, not reported by the coder
        self._check_params_against_state()
        algorithm = self._coding_algorithm().at_state(self._held_state())

        def code(state: OnlineState, X: Any, mask: Any) -> tuple:
            return state, algorithm.encode(X, state.loadings, state.scale, mask)

        # the state as a step takes it (carry): a carried state's arrays are not made tensors
        _, coded = run(self.backend_, code, self.__dict__["state_"], X, mask, carry=True)
        check_overflow((coded.codes, coded.losses), "X")
        return coded

    def transform(self, X: Any, mask: Any = None) -> Any:
        """Codes of the samples of ``X`` against the learned dictionary, shape ``(n, R)``.

        Labelled input gives a DataArray over ``(sample_dim, "component")`` with the sample
        coords. ``mask`` (or ``missing="nan"``) marks missing entries, which are ignored.
        """
        self._check_fitted()
        X_checked, mask, layout = self._checked_input(X, mask)
        codes = self._coded(X_checked, mask).codes
        return codes if layout is None else codes_to_dataarray(codes, layout.with_samples(X))

    def inverse_transform(self, codes: Any) -> Any:
        """Samples ``sum_r codes[j, r] atom_r``, shape ``(n, I_1, ..., I_n)`` (for a fit on an
        array regrouped by ``modes``, in the axes the samples were given in).

        Codes given as a DataArray (from ``transform`` of labelled data) give the samples back
        as a DataArray with the original dims and coords.
        """
        self._check_fitted()
        layout = None
        if is_labelled(codes):
            layout = self.__dict__.get("layout_")
            if layout is None:
                raise TypeError("labelled codes need a learner fitted on labelled data")
            layout = layout.with_samples(codes)
            codes = codes_from_dataarray(codes, layout, self.n_components_)
        codes = check_batch(codes, backend=self.backend_, context=self._context,
                            sample_shape=(self.n_components_,), name="codes",
                            owner=type(self).__name__, missing_hint=False)
        with using(self.backend_):
            samples = reconstruct(self.loadings_, codes)
        if "array_layout_" in self.__dict__:  # the axes as the samples were given
            samples = self.array_layout_.restore(samples)
        return samples if layout is None else from_samples(samples, layout)

    def score(self, X: Any, y: Any = None, sample_weight: Any = None, mask: Any = None) -> float:
        """Minus the (weighted) mean over samples of the coding objective at the learned
        dictionary (for the squared loss ``min_h ||x - W h||^2 + penalties``).

        With missing entries (``mask`` or ``missing="nan"``) only observed entries count.
        """
        self._check_fitted()
        X, mask, _ = self._checked_input(X, mask)
        weights = check_sample_weight(sample_weight, X.shape[0])
        losses = self._coded(X, mask).losses
        with using(self.backend_):
            losses = tl.to_numpy(losses)
        score = -float(np.average(losses, weights=weights))
        if not math.isfinite(score):  # finite losses near the largest float, summed
            raise ValueError("X: the values are too large for this model's arithmetic (the "
                             "mean of its losses overflows to inf); rescale the data")
        return score

    @property
    def factors_(self):
        """The learned loadings as an ``xarray.Dataset``: one variable per mode.

        For labelled input each variable keeps the original dims and coords (stacked modes
        unstacked again) plus a ``component`` dim; for plain arrays the dims are ``mode_0``,
        ``mode_1``, ...
        """
        self._check_fitted()
        layout = self.__dict__.get("layout_")
        if layout is None:
            dims = ("sample", *(f"mode_{k}" for k in range(len(self.sample_shape_))))
            template = xr.DataArray(np.broadcast_to(0.0, (1, *self.sample_shape_)), dims=dims)
            layout = ModeLayout.from_dataarray(template, "sample", None)
        return factors_to_dataset(self.loadings_, layout)

    def to_cp_tensor(self, X: Any, mask: Any = None):
        """The batch ``X`` as a TensorLy ``CPTensor``: its codes (from the observed entries,
        ``mask``) are the sample-mode factor."""
        with plain_output():
            codes = self.transform(X, mask=mask)
        if is_labelled(codes):
            codes = codes.data
        with using(self.backend_):
            return to_cp_tensor(self.loadings_, codes)

    def reconstruct(self, X: Any, mask: Any = None) -> Any:
        """``inverse_transform(transform(X, mask))``: the model's approximation of ``X``, all
        entries (the missing ones filled in) from the observed ones."""
        with plain_output():
            codes = self.transform(X, mask=mask)
        return self.inverse_transform(codes)


def _mask_of_frame(mask: Any, X: Any) -> Any:
    """A mask given as a DataFrame (``X.notna()``) as an array, its columns matched to a
    DataFrame ``X``'s by name (in another order they would mark other entries, silently)."""
    if not is_data_frame(mask):
        return mask
    # a frame whatever its column labels (pd.DataFrame(array).notna() has integers): fit takes
    # its batches by row position, which label-indexes a DataFrame's columns
    names, columns = feature_names(mask), feature_names(X)
    if names is not None and columns is not None and (
            len(names) != len(columns) or np.any(names != columns)):
        raise ValueError(f"mask has the columns {list(names)}, X has {list(columns)}: a "
                         f"DataFrame mask must name X's columns in X's order")
    return as_array(mask)


def _labelled_like(mask: Any, X: Any) -> Any:
    """The mask of the labelled data ``X``: a DataArray as it is, a plain array of ``X``'s
    shape (its dims in ``X``'s order) labelled like ``X``; None stays None."""
    if mask is None or is_labelled(mask):
        return mask
    if _shape_of(mask) != tuple(X.shape):
        raise ValueError(f"mask must be a DataArray, or an array of X's shape {tuple(X.shape)} "
                         f"(dims {tuple(X.dims)}), got shape {_shape_of(mask)}")
    if is_sparse(mask):
        mask = densify(mask)
    elif backend_of(mask) == "pytorch" or not hasattr(mask, "shape"):  # dask stays lazy
        mask = to_numpy(mask)
    return xr.DataArray(mask, dims=X.dims, coords=X.coords)


def _shape_of(array: Any) -> tuple:
    """The shape of an array of any kind (numpy, torch, dask, sparse) or nested list."""
    return tuple(array.shape) if hasattr(array, "shape") else np.shape(array)


def _step_of(algorithm: Algorithm, reinit_dead_atoms: bool) -> Any:
    """``partial_fit``'s step: the new state, the batch's codes and outliers, and the step's
    info (not the rest of the coding step's results, which nobody reads afterwards: on torch
    tensors in host memory each array handed back is a tensor made)."""

    def step(state: OnlineState, X: Any, mask: Any) -> tuple:
        new, coded, info = online_step(algorithm, X, state, mask,
                                       reinit_dead_atoms=reinit_dead_atoms)
        return new, (coded.codes, coded.outliers), info
    return step


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
    if tuple(statistics["B"].shape) != (*sample_shape, R) or tuple(
            statistics["A"].shape) not in ((R, R), (*sample_shape, R, R)):
        raise ValueError(f"cannot read checkpoint {str(path)!r}: array shapes are inconsistent")


def _check_restored(learner: OnlineLearner, meta: dict, loadings: list,
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


def _lost_worker_errors() -> tuple:
    """What a step raises when a worker died under it (Dask's own retries exhausted, or the
    shards it held lost)."""
    from distributed import KilledWorker
    from distributed.comm.core import CommClosedError

    try:
        from distributed.client import FutureCancelledError
    except ImportError:  # older dask.distributed
        from concurrent.futures import CancelledError as FutureCancelledError
    return KilledWorker, CommClosedError, FutureCancelledError, OSError


def _local(X: Any) -> Any:
    """An array in this process (dask arrays read here, not through the cluster)."""
    if X is None:
        return None
    return WorkerRead(X).load() if lazy(X) else X


def _shards(client: Any, X: Any, mask: Any, n_workers: int) -> list:
    """The batch cut into one contiguous shard per worker: ``(data, mask, (start, end),
    worker)``. Dask-backed shards are cut between chunks and computed on their worker (each
    worker reads its own chunks: nothing moves between workers or through the driver);
    in-memory ones are scattered to their worker."""
    workers = sorted(client.scheduler_info()["workers"])[:max(1, n_workers)]
    if not workers:  # between a worker's death and its replacement the scheduler lists none:
        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT)  # no shard would be no batch
        workers = sorted(client.scheduler_info()["workers"])[:max(1, n_workers)]
    bounds = np.linspace(0, X.shape[0], min(len(workers), X.shape[0]) + 1).astype(int)
    if lazy(X):
        # cut between the batch's chunks, so that no two workers read the same chunk
        edges = np.cumsum((0, *X.chunks[0]))
        bounds = np.unique(edges[np.abs(edges[:, None] - bounds[None, :]).argmin(axis=0)])
    shards = []
    for worker, start, end in zip(workers, bounds[:-1], bounds[1:]):
        parts = [X[start:end], None if mask is None else mask[start:end]]
        parts = [part if part is None else (
            WorkerRead(part) if lazy(part)
            else scatter_to(client, part, worker)) for part in parts]
        shards.append((parts[0], parts[1], (int(start), int(end)), worker))
    return shards


def _progress_bar(total: int | None):
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="batch")


def _default_batch(cls: type) -> int:
    """The default ``batch_size`` of the learner class ``cls`` (its ``__init__``'s)."""
    return int(inspect.signature(cls.__init__).parameters["batch_size"].default)


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # arrays, tensors: shown in the repr
        return False
