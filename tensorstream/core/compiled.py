"""Optional compiled kernels (numba): one switch and one way to compile them.

A few loops are sequential by nature (the column sweep of the dictionary step, a small solve
per sample), and as ``tl.*`` calls they cost a call per step of the loop. With numba installed
(``pip install tensorstream[fast]``) host-memory arrays run them compiled instead; everything
else, and everything without numba, runs the ``tl.*`` code, which the kernels equal to rounding
(each kernel is tested against it). ``TENSORSTREAM_JIT=0`` in the environment turns every
kernel off (the golden-results test runs that way, so its recording does not depend on whether
numba is installed).

An online learner runs a kernel only from its first step on (:func:`first_step`: the
pivoting coder from :data:`FIRST_COMPILED_STEP`, the column sweep, which saves less a step,
from :data:`LATER` times that), set by each step from the state's ``n_steps``
(:func:`from_step`): importing numba and loading the kernels costs more than a short fit saves
with them, so short fits never pay it. The rule reads nothing but the step number, so an
uninterrupted fit and one resumed from a checkpoint switch at the same step, and two fits with
one ``random_state`` are bit-identical. Everything else (batch learners, ``transform``, direct
calls) may use them.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
from collections.abc import Callable, Iterator
from contextvars import ContextVar

#: the environment variable that turns the kernels off when set to "0"
SWITCH = "TENSORSTREAM_JIT"


#: the first step (counted from 0: the state's ``n_steps`` before it) of an online fit that
#: runs the compiled pivoting of the lasso coder (OnlineCPDL, OnlineNMF(coder="pivoting")), and
#: the unit of :data:`LATER`. Measured in one process on the shared 2-core machine under load
#: (docs/performance.md): loading numba and the kernels costs 0.5-0.8 s a process (cached;
#: 2.5-4 s more, once a machine, to compile them); the pivoting saves 0.8-1.0 ms of a 1.6-2.3 ms
#: step in one warm process (0.27 ms in fresh-process pairs), and pays the loading back some
#: 700-1,300 steps after the switch. Switching at step K costs a fit that ends just after it at
#: most the loading against K steps' time: from 3,000 on, 10-15% (at 300 it was up to 1.35x
#: for OnlineNMF at 1,000 steps, never repaid; docs/performance.md).
FIRST_COMPILED_STEP = 3000

#: kernels that start later: a multiple of :data:`FIRST_COMPILED_STEP`. The column sweep of the
#: dictionary step saves 0.15 ms a step (64 x 10 loadings; nothing measurable on 784 x 20, where
#: the coder dominates), so it repays the loading only ~4,000 steps after the switch: from
#: 12,000 on, a fit pays at most ~5% for it
LATER = {"sweep": 4}

#: kernels that run only inside the steps of an online fit (:func:`from_step`, or
#: :func:`allowing`), never in outputs (``transform``, ``denoise``...). OR-PCA's and OMRMD's
#: coder ("bcd") pays for itself on a fit's small batches, where its ``tl.*`` loop is mostly
#: call overhead; an output codes its chunks in lockstep, already vectorised, and loading numba
#: for it made the first ``denoise`` of 100 faces 0.2-0.8 s against 0.007 s
FITS_ONLY = frozenset({"bcd"})

#: the step of the online fit whose code runs now (inf: none, every kernel allowed but those
#: of :data:`FITS_ONLY`)
_step: ContextVar[float] = ContextVar("tensorstream_kernels_step", default=math.inf)

#: the step :func:`allowing` sets: past every kernel's first step, inside a fit
_EVERY_KERNEL = float(2 ** 62)


def first_step(kernel: str | None = None) -> int:
    """The first step of an online fit that runs ``kernel`` ("sweep"; None, "bcd": the
    pivoting coder, OR-PCA's and OMRMD's coder and any other kernel)."""
    return FIRST_COMPILED_STEP * LATER.get(kernel, 1)


def enabled(kernel: str | None = None) -> bool:
    """False when ``TENSORSTREAM_JIT=0`` (read at every call, so tests can switch), inside
    a step of an online fit before ``kernel``'s :func:`first_step` (:func:`from_step`), or
    outside any step for a kernel of :data:`FITS_ONLY`."""
    step = _step.get()
    if step == math.inf and kernel in FITS_ONLY:
        return False
    return step >= first_step(kernel) and os.environ.get(SWITCH, "1") != "0"


def allowed_at(n_steps: int, kernel: str | None = None) -> bool:
    """Whether the step after ``n_steps`` steps runs ``kernel``: from its :func:`first_step`
    on (a function of the step number alone)."""
    return n_steps >= first_step(kernel)


@contextlib.contextmanager
def allowing(allowed: bool) -> Iterator[None]:
    """Code inside uses every kernel if ``allowed`` (and :func:`enabled` otherwise says so),
    none otherwise."""
    token = _step.set(_EVERY_KERNEL if allowed else -1)
    try:
        yield
    finally:
        _step.reset(token)


@contextlib.contextmanager
def from_step(n_steps: int) -> Iterator[None]:
    """Code inside is the step after ``n_steps`` steps of an online fit: each kernel runs from
    its :func:`first_step` on (:func:`allowed_at`). A worker that codes a shard runs it with
    the step number its task was sent."""
    token = _step.set(n_steps)
    try:
        yield
    finally:
        _step.reset(token)


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
