"""What wraps a learner's public methods: its thread limit, its lock, and the rollback of a
call that fails.

- :func:`_threads_limited`: BLAS/OpenMP and PyTorch threads inside the method (``n_threads``);
- :func:`_serialised`: one thread at a time per learner (:func:`learner_lock`);
- :func:`undone_on_error`: a block whose failure leaves the learner as it was, its random
  generators included (``fit`` and ``partial_fit``, on one process or on a cluster).

:class:`~._params.CheckedParameters` applies the first two to every learner's methods when its
class is defined; the learners' ``fit`` and ``partial_fit`` open the third.
"""

from __future__ import annotations

import functools
import threading
import weakref
from typing import Any

from ..core.backend import limit_threads
from ..core.validation import NONE, Interval, bit_generator_of, validate_params

#: ``n_threads``, a parameter of every learner (declared in its ``__init__``; its constraint is
#: added by :class:`~._params.CheckedParameters`): BLAS/OpenMP and PyTorch threads inside its public
#: methods (:func:`~..core.backend.limit_threads`; ``None``: the libraries' own).
#: One thread is the default: on the benchmarks of ``docs/nmf.md`` no learner ran faster with
#: the machine's default threads, and several ran 5-40x slower (oversubscription).
N_THREADS = [Interval("int", 1, None), NONE]
DEFAULT_N_THREADS = 1

#: the public methods that run inside the learner's thread limit (where a class defines them)
THREADED_METHODS = ("fit", "partial_fit", "transform", "fit_transform", "inverse_transform",
                    "score", "objective", "surrogate_value", "decompose", "outliers", "impute",
                    "reconstruct", "to_cp_tensor", "gradient_mapping")


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


class undone_on_error:  # noqa: N801 - used as a function: `with undone_on_error(...)`
    """A block that undoes everything it did to ``learner`` when it raises, a
    KeyboardInterrupt included (Ctrl-C during a refit keeps the previous fit): its attributes,
    and the state of the random generators it draws from (its own, and a Generator or
    RandomState given as ``random_state``, drawn from before its first step). ``note``: the
    error says so, naming ``method`` (the outermost call says it once).

    A class rather than a generator-based context manager: ``partial_fit`` opens one at every
    step, and this costs a third of the time.
    """

    __slots__ = ("learner", "method", "note", "before", "states")

    def __init__(self, learner: Any, method: str, *, note: bool = True):
        self.learner, self.method, self.note = learner, method, note

    def __enter__(self) -> None:
        self.before = dict(self.learner.__dict__)
        # a generator is shared (fit's shuffling and the steps draw from one), so its state
        # is restored in place rather than the object replaced
        generators = {id(g): g for g in map(bit_generator_of, (
            self.before.get("_rng"), self.before.get("random_state"))) if g is not None}
        self.states = [(g, g.state) for g in generators.values()]

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> bool:
        if error is None:
            return False
        self.learner.__dict__.clear()
        self.learner.__dict__.update(self.before)
        for generator, state in self.states:
            generator.state = state
        if self.note:
            error.add_note(f"{type(self.learner).__name__}.{self.method} was undone: the "
                           f"learner is as it was before the call")
        return False  # the error goes on
