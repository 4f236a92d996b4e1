"""Optional compiled kernels (numba): one switch and one way to compile them.

A few loops are sequential by nature (the column sweep of the dictionary step, a small solve
per sample), and as ``tl.*`` calls they cost a call per step of the loop. With numba installed
(``pip install tensorstream[fast]``) host-memory arrays run them compiled instead; everything
else, and everything without numba, runs the ``tl.*`` code, which the kernels equal to rounding
(each kernel is tested against it). ``TENSORSTREAM_JIT=0`` in the environment turns every
kernel off (the golden-results test runs that way, so its recording does not depend on whether
numba is installed).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

#: the environment variable that turns the kernels off when set to "0"
SWITCH = "TENSORSTREAM_JIT"


def enabled() -> bool:
    """False when ``TENSORSTREAM_JIT=0`` (read at every call, so tests can switch)."""
    return os.environ.get(SWITCH, "1") != "0"


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
