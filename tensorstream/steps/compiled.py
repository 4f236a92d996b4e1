"""An optional compiled kernel (numba) for the one sequential loop of the dictionary step.

The exact column step (:func:`tensorstream.steps.surrogate.column_descent`) is a Gauss-Seidel
sweep: column ``r`` moves with the columns before it already moved, so it cannot be one matrix
product, and in ``tl.*`` calls it costs about six backend calls per column. On small loadings
those calls are the whole cost (a digits loading, 64 x 16: 170 us in calls for 16 us of
arithmetic). With numba installed (``pip install tensorstream[fast]``) loadings in host memory
(numpy arrays, torch CPU tensors) are swept by the kernel below instead: one call per sweep
whatever the rank (8 us on digits, 158 us instead of 345 on a 1000 x 20 loading). GPU tensors,
and everything without numba, run the ``tl.*`` sweep.

Both compute the same steps; they differ by rounding only, because the kernel sums each column's
product in its own order (``tests/test_compiled.py`` checks the two against each other).
``TENSORSTREAM_JIT=0`` in the environment turns the kernel off (the golden-results test runs
the ``tl.*`` sweep that way, so its recording does not depend on whether numba is installed).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.backend import numpy_view
from ..core.compiled import SWITCH, enabled, jit

__all__ = ["SWITCH", "column_sweep"]


def column_sweep(U: Any) -> Callable | None:
    """The compiled sweep for the loading ``U``, or None where the ``tl.*`` sweep runs instead:
    numba not installed, ``TENSORSTREAM_JIT=0``, or ``U`` neither a float numpy array nor a
    float torch tensor in host memory.

    The sweep is called as ``sweep(U, M, B_i, columns, curvature, l1=, l2=, nonnegative=,
    bound=, n_passes=)`` with the arguments of ``column_descent`` (``M`` the coupling matrix,
    ``columns`` the live atoms, ``bound`` None for no ball) and returns ``U`` swept in place;
    the numpy layouts and types the kernel needs are made here, not in the algorithm. A torch
    tensor on the CPU is swept through a numpy view of its memory (no copy), so torch's sweep
    costs what numpy's does: its per-call cost is what makes the ``tl.*`` sweep slow there
    (27 us a column against numpy's 10).
    """
    if not enabled("sweep") or _float_view(U) is None:  # its own first step of a fit
        return None
    kernel = _compiled()
    if kernel is None:
        return None

    def sweep(U, M, B_i, columns, curvature, *, l1, l2, nonnegative, bound, n_passes):
        memory = _float_view(U)
        # Mt's rows are M's columns, read one by one; a bound of -1 is "no ball" in the kernel
        kernel(memory, np.ascontiguousarray(numpy_view(M).T),
               np.ascontiguousarray(numpy_view(B_i)),
               np.asarray(columns, dtype=np.int64), np.asarray(curvature, dtype=memory.dtype),
               float(l1), float(l2), bool(nonnegative), -1.0 if bound is None else float(bound),
               int(n_passes))
        return U

    return sweep


def _float_view(U: Any) -> np.ndarray | None:
    """``U``'s memory as a float numpy array without a copy (None: not possible)."""
    view = numpy_view(U)
    return view if view is not None and view.dtype.kind == "f" else None


@functools.cache
def _compiled() -> Callable | None:
    """The kernel, compiled on first use (:func:`tensorstream.core.compiled.jit`)."""
    return jit(_sweep)


def _sweep(U, Mt, B, columns, curvature, l1, l2, nonnegative, bound, n_passes):  # pragma: no cover
    """``n_passes`` sweeps over ``columns`` of ``U`` (in place), exactly as ``column_descent``:
    the column's target ``U m_r + b_r`` (``Mt[r]`` is ``m_r``), soft-thresholded by ``l1`` and
    divided by its curvature when ``l1 > 0`` (else ``Mt`` and ``B`` come divided), clipped at
    zero when ``nonnegative``, shrunk into the ball of radius ``bound`` when ``bound > 0``."""
    rows, rank = U.shape
    target = np.empty(rows, dtype=U.dtype)
    for _ in range(n_passes):
        for r in columns:
            m = Mt[r]
            for i in range(rows):
                total = B[i, r]
                for k in range(rank):
                    total += U[i, k] * m[k]
                target[i] = total
            if l1 > 0:
                denominator = curvature[r] + l2
                for i in range(rows):
                    value = target[i]
                    if value > l1:
                        value -= l1
                    elif value < -l1:
                        value += l1
                    else:  # x - x, not = 0: a NaN stays NaN (the health checks see it),
                        value -= value  # and a zero is +0.0, as soft_threshold's x - clip(x)
                    target[i] = value / denominator
            if nonnegative:
                for i in range(rows):
                    if target[i] < 0:
                        target[i] = 0.0
            if bound > 0:
                squares = 0.0
                for i in range(rows):
                    squares += target[i] * target[i]
                ratio = np.sqrt(squares) / bound
                if ratio > 1.0:  # inside the ball the column is left as it is
                    for i in range(rows):
                        target[i] /= ratio
            for i in range(rows):
                U[i, r] = target[i]
    return U
