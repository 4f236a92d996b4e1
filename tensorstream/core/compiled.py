"""Optional compiled kernels (numba): one switch and one way to compile them.

A few loops are sequential by nature (the column sweep of the dictionary step, a small solve
per sample), and as ``tl.*`` calls they cost a call per step of the loop. With numba installed
(``pip install tensorstream[fast]``) host-memory arrays run them compiled instead; everything
else, and everything without numba, runs the ``tl.*`` code, which the kernels equal to rounding
(each kernel is tested against it). ``TENSORSTREAM_JIT=0`` in the environment turns every
kernel off (the golden-results test runs that way, so its recording does not depend on whether
numba is installed).

An online learner runs the kernels only from step :data:`FIRST_COMPILED_STEP` on
(:func:`from_step`, set by each step from the state's ``n_steps``): importing numba and
loading or compiling the kernels costs more than a short fit saves with them, so short fits
never pay it. The rule reads nothing but the step number, so an uninterrupted fit and one
resumed from a checkpoint switch at the same step, and two fits with one ``random_state`` are
bit-identical. Everything else (batch learners, ``transform``, direct calls) may use them.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from contextvars import ContextVar

#: the environment variable that turns the kernels off when set to "0"
SWITCH = "TENSORSTREAM_JIT"


#: the first step (counted from 0: the state's ``n_steps`` before it) of an online fit that
#: runs the kernels. Measured on the shared 2-core machine under load (docs/performance.md):
#: they save 0.3-0.6 ms a step on OnlineNMF (64-784 features) and 2-7 ms on OnlineCPDL, and
#: cost 0.3-0.5 s a process to import numba and load them cached (2.5-4 s more, once a
#: machine, to compile them): they pay back the loading after 60-200 steps of OnlineCPDL and
#: 700-1,400 of OnlineNMF. ``max_iter="auto"`` fits data of up to 30 batches in at most 300
#: steps, which never load them; a longer fit runs its first 300 at the pure path's speed.
FIRST_COMPILED_STEP = 300

#: whether the code running now may use the kernels (False in the early steps of a fit)
_allowed: ContextVar[bool] = ContextVar("tensorstream_kernels_allowed", default=True)


def enabled() -> bool:
    """False when ``TENSORSTREAM_JIT=0`` (read at every call, so tests can switch) or inside
    an early step of an online fit (:func:`from_step`)."""
    return _allowed.get() and os.environ.get(SWITCH, "1") != "0"


def allowed_at(n_steps: int) -> bool:
    """Whether the step after ``n_steps`` steps runs the kernels: from
    :data:`FIRST_COMPILED_STEP` on (a function of the step number alone)."""
    return n_steps >= FIRST_COMPILED_STEP


@contextlib.contextmanager
def allowing(allowed: bool) -> Iterator[None]:
    """Code inside uses the kernels only if ``allowed`` (and :func:`enabled` otherwise says
    so); a worker that codes a shard runs it with the flag its step was sent."""
    token = _allowed.set(bool(allowed))
    try:
        yield
    finally:
        _allowed.reset(token)


def from_step(n_steps: int) -> contextlib.AbstractContextManager:
    """:func:`allowing` for the step after ``n_steps`` steps (:func:`allowed_at`)."""
    return allowing(allowed_at(n_steps))


def jit(function: Callable) -> Callable | None:
    """``function`` compiled by numba (imported now, not with the package), or None without
    numba. Cached on disk by numba, so later processes load it in milliseconds; compiled in
    memory when there is no writable cache directory (a read-only install). ``nogil``: the
    kernels touch only their own arrays, so learners fitted in threads run them at once.
    Callers keep the result (``functools.cache``): compiling costs 0.3-0.7 s. The kernel is
    returned :func:`interruptible`."""
    try:
        import numba
    except ImportError:  # not installed, or built for another numpy
        return None
    try:
        return interruptible(numba.njit(cache=True, nogil=True)(function))
    except RuntimeError:  # no writable cache directory
        return interruptible(numba.njit(nogil=True)(function))


def interruptible(kernel: Callable) -> Callable:
    """``kernel`` whose Ctrl-C comes out as the KeyboardInterrupt it is.

    A SIGINT that arrives while a compiled kernel runs is handled as the dispatcher returns,
    and CPython then reports ``SystemError: CPUDispatcher(...) returned a result with an
    exception set``, the KeyboardInterrupt as its cause. Left so, ``fit`` would undo itself
    as if the data were bad and the command line (which stops on KeyboardInterrupt, writing
    its checkpoint) would exit with an error; the interrupt is raised in its place.
    """

    @functools.wraps(kernel, updated=())  # not the dispatcher's own attributes
    def call(*args: object) -> object:
        try:
            return kernel(*args)
        except SystemError as error:
            interrupt = error.__cause__ or error.__context__
            if interrupt is None or isinstance(interrupt, Exception):
                raise
            raise interrupt from None

    call.kernel = kernel  # the dispatcher itself (its signatures, its py_func)
    return call
