"""The parameter contract every learner keeps with scikit-learn.

Learners keep hyper-parameters in ``__init__`` (stored unchanged, so that ``get_params``,
``set_params`` and ``sklearn.base.clone`` work) and learned state in trailing-underscore
attributes. :class:`CheckedParameters` validates the parameters from the constraints a learner
declares as data (``_parameter_constraints``, checked by
:func:`~..core.validation.validate_params`, then ``_check_rules``), raises one "not fitted"
error (:class:`NotFittedError`), gives scikit-learn's tags and output API
(:class:`~._output.OutputAPI`), and wraps the public methods a learner defines in its thread
limit and lock (:mod:`._guards`).
"""

from __future__ import annotations

import functools
import inspect
import weakref
from typing import Any

from ..core.device import DEVICE, check_device_backend, resolve_device
from ..core.validation import (
    BACKEND,
    BOOLEAN,
    CALLABLE,
    NONE,
    RANDOM_STATE,
    Interval,
    Options,
    validate_params,
)
from ._docs import complete_parameters
from ._guards import (
    DEFAULT_N_THREADS,
    N_THREADS,
    SERIALISED_METHODS,
    THREADED_METHODS,
    _serialised,
    _threads_limited,
    undone_on_error,
)
from ._output import OUTPUT_METHODS, OutputAPI, configured

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


class CheckedParameters(OutputAPI):
    """What every learner shares with scikit-learn: parameters validated from the constraints
    it declares as data (``_parameter_constraints``, checked by
    :func:`~..core.validation.validate_params`, then the rules that relate several parameters,
    ``_check_rules``), ``get_params``/``set_params``/``__repr__`` over the ``__init__``
    arguments, one "not fitted" error, and scikit-learn's estimator tags.

    A learner names the attribute that exists once it is fitted (``_fitted_attribute``).
    """

    _parameter_constraints: dict = {}
    _fitted_attribute = "state_"
    n_threads = DEFAULT_N_THREADS  # until __init__ sets it

    def __init__(self, n_components: Any, *, backend: str | None, device: Any,
                 n_threads: int | None):
        """Keep the parameters every learner has, unchanged (scikit-learn's rule).

        A learner's own ``__init__`` keeps its explicit signature and defaults (``get_params``
        reads them) and passes these up, as scikit-learn's ``MiniBatchNMF`` does to
        ``_BaseNMF``; the defaults live in the learner's signature alone.
        """
        self.n_components = n_components
        self.backend = backend
        self.device = device
        self.n_threads = n_threads

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


    def __sklearn_tags__(self) -> Any:
        from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags

        # sparse data are accepted everywhere (densified batch by batch where a coder needs it)
        return Tags(estimator_type="transformer", target_tags=TargetTags(required=False),
                    transformer_tags=TransformerTags(),
                    input_tags=InputTags(positive_only=self._positive_data, sparse=True,
                                         allow_nan=getattr(self, "missing", None) == "nan"))

    @classmethod
    def _param_names(cls) -> list[str]:
        return list(_init_parameter_names(cls))

    def get_params(self, deep: bool = True) -> dict:
        """Hyper-parameters of the estimator, as given to ``__init__``.

        Parameters
        ----------
        deep : bool, default True
            scikit-learn's flag for estimators nested in parameters; none of these learners
            holds one, so both values give the same mapping.

        Returns
        -------
        dict
            Each ``__init__`` parameter's name and current value.
        """
        return {name: getattr(self, name) for name in self._param_names()}

    @_serialised  # defined on this class, which __init_subclass__ does not wrap
    def set_params(self, **params) -> Any:
        """Set hyper-parameters; unknown names raise ``ValueError`` before any is set.

        Parameters
        ----------
        **params
            ``__init__`` parameter names and their new values.

        Returns
        -------
        self
        """
        valid = set(self._param_names())
        for name in params:
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}; "
                                 f"valid parameters are {sorted(valid)}")
        for name, value in params.items():
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = _init_defaults(type(self))
        shown = [f"{k}={v!r}" for k, v in self.get_params().items()
                 if not _is_default(v, defaults.get(k, inspect.Parameter.empty))]
        return f"{type(self).__name__}({', '.join(shown)})"

    def _all_or_nothing(self, method: str) -> Any:
        """A block whose failure leaves the learner as it was (:func:`~._guards.undone_on_error`),
        the error noting that ``method`` was undone."""
        return undone_on_error(self, method)

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

    def _set_by_hand(self, *names: str) -> dict:
        """Of ``names``, the parameters set to another value than their default and than the
        paper's (``paper_params``): what a rule may refuse where it means nothing (the
        defaults read from the signature, so the rule cannot drift from them)."""
        defaults = _init_defaults(type(self))
        paper = getattr(self, "paper_params", {})
        return {name: getattr(self, name) for name in names
                if getattr(self, name) not in (defaults[name], paper.get(name, defaults[name]))}


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
    return tuple(_init_defaults(cls))


@functools.cache
def _init_defaults(cls: type) -> dict:
    """The parameters of ``cls.__init__`` and their defaults, in order, read once per class."""
    return {p.name: p.default for p in inspect.signature(cls.__init__).parameters.values()
            if p.name != "self" and p.kind != p.VAR_KEYWORD}


def _is_default(value: Any, default: Any) -> bool:
    """Whether ``repr`` leaves the parameter out: its value is its default's (equal, and of
    the same type)."""
    try:
        return bool(value == default) and type(value) is type(default)
    except Exception:  # arrays, tensors: shown in the repr
        return False
