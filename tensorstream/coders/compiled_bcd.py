"""An optional compiled kernel (numba) for the block coordinate descent of OR-PCA's and
OMRMD's coder.

:func:`tensorstream.coders.maxnorm.robust_code` codes a batch in lockstep: every iteration
is a handful of ``tl.*`` calls on the samples still running (the r-step's two products with
the rotated basis, the soft threshold, the change test), plus the bookkeeping of the samples
that stopped. ``OnlineRobustPCA`` codes batches of about ten samples, three times a step, so
those calls are nearly its whole cost (20,000 patches of 64 pixels, d = 16: some 840,000
backend calls a fit). With numba installed (``pip install tensorstream[fast]``) a batch of
numpy arrays is coded here instead, sample after sample, each to its own stop: the same
iterations, in one call.

The kernel covers the cases ``OnlineRobustPCA`` and ``OnlineMaxNormMD`` code with by
default: l1 noise, no mask (the rough and the thresholded codes of each step), the ridge
r-step (``ball=False``) or the max-norm ball with Newton's
multiplier (``ball_solver="newton"``). Everything else (the bisection, the other noise
models, masked samples, other backends, and everything without numba) runs the ``tl.*``
loop, which the kernel equals to
rounding (``tests/test_compiled_bcd.py`` checks the two against each other); it is switched
as the other kernels (:mod:`tensorstream.core.compiled`: ``TENSORSTREAM_JIT=0``, and from the
first compiled step of an online fit on), and only inside a fit's steps
(:data:`~tensorstream.core.compiled.FITS_ONLY`): outputs code in lockstep with the ``tl.*``
loop, so a small ``transform`` does not load numba. Large outputs do not repay it either: in
chunks of ``CODING_ENTRIES`` = 65,536 entries (``learners/_dictionary.py``: 1,024 patches
of 64 pixels) the ``tl.*`` loop is
vectorised over the chunk, and measured warm (one BLAS thread) ``OnlineRobustPCA.denoise`` of
20,000 patches took 0.088 s with it against 0.127 s with the kernel (``OnlineMaxNormMD``
0.161 s against 0.134 s: 27 ms saved, against 0.5-0.8 s to load numba); the benchmark's
video 30 ms against 42 ms, 100 faces 4.5 ms against 11 ms.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.compiled import enabled, jit

__all__ = ["l1_kernel"]


def l1_kernel(Z: Any, basis: Any, outlier_alpha: Any, *, noise: str, ball: bool, mask: Any,
              ball_solver: str = "newton") -> Callable | None:
    """The compiled iterations of :func:`~tensorstream.coders.maxnorm.robust_code` for this
    call, or None where its ``tl.*`` loop runs instead: kernels off (:func:`~tensorstream.core.
    compiled.enabled`), numba missing, a mask, the ball's bisection, a noise other than l1,
    or arrays that are not float numpy arrays.

    The returned function is called as ``run(rotated_basis, values, null, ridge, tol, cap,
    ball_tol, ball_max_iter)`` with the shared spectrum's ``L V``, eigenvalues (null directions
    at 1) and null flags, and returns ``(R, E, LR, eta, n_iter)``: the coefficients in the
    eigenbasis, the noise, ``L r``, the multipliers and each sample's iterations, as the
    ``tl.*`` loop leaves them.
    """
    if mask is not None or noise != "l1" or (ball and ball_solver != "newton") or \
            not enabled("bcd"):
        return None
    if not (isinstance(Z, np.ndarray) and Z.dtype.kind == "f" and Z.ndim == 2
            and isinstance(basis, np.ndarray) and basis.dtype == Z.dtype):
        return None
    thresholds = _thresholds(outlier_alpha, Z)
    if thresholds is None:
        return None
    kernel = _compiled()
    if kernel is None:
        return None

    def run(rotated_basis, values, null, ridge, tol, cap, ball_tol, ball_max_iter):
        b, p = Z.shape
        d = rotated_basis.shape[1]
        R = np.zeros((b, d), dtype=Z.dtype)
        E = np.zeros((b, p), dtype=Z.dtype)
        LR = np.zeros((b, p), dtype=Z.dtype)
        eta = np.full(b, ridge, dtype=Z.dtype)
        n_iter = np.zeros(b, dtype=np.int64)
        # the stop of the tl.* loop: max(||dE||^2, ||dR||^2) < (tol p)^2
        limit = float(tol * p) ** 2
        tiny = float(np.finfo(Z.dtype).tiny)  # the guard of Newton's division (tiny_of)
        kernel(np.ascontiguousarray(Z), np.ascontiguousarray(rotated_basis, dtype=Z.dtype),
               np.ascontiguousarray(values, dtype=Z.dtype), np.ascontiguousarray(null),
               thresholds, float(ridge), limit, int(cap), bool(ball), float(ball_tol),
               int(ball_max_iter), tiny, R, E, LR, eta, n_iter)
        return R, E, LR, eta, n_iter.astype(int)

    return run


def _thresholds(outlier_alpha: Any, Z: np.ndarray) -> np.ndarray | None:
    """``outlier_alpha`` as a 2-d array for the kernel: a scalar as ``(1, 1)``, one threshold
    per sample ``(b, 1)`` and one per entry ``(b, p)`` as they are; None for anything else
    (the shapes ``robust_code`` takes)."""
    if not hasattr(outlier_alpha, "shape") or (isinstance(outlier_alpha, np.ndarray)
                                               and outlier_alpha.ndim == 0):
        return np.full((1, 1), float(outlier_alpha), dtype=Z.dtype)
    if not isinstance(outlier_alpha, np.ndarray) or outlier_alpha.ndim != 2:
        return None
    rows, columns = outlier_alpha.shape
    if rows != Z.shape[0] or columns not in (1, Z.shape[1]):
        return None
    return np.ascontiguousarray(outlier_alpha, dtype=Z.dtype)


@functools.cache
def _compiled() -> Callable | None:
    """The kernel, compiled on first use (:func:`tensorstream.core.compiled.jit`)."""
    return jit(_l1_bcd)


def _l1_bcd(Z, RB, values, null, thresholds, ridge, limit, cap, ball, ball_tol,
            ball_max_iter, tiny, R, E, LR, eta, n_iter):  # pragma: no cover
    """Each sample's iterations of the ``tl.*`` loop (``_bcd_iteration`` with l1 noise), in
    place: ``c = V^T L^T (z - e)`` (0 in null directions), ``eta`` the ridge or (``ball``)
    Newton's multiplier from the last one, ``r~ = c / (w + eta)``, ``L r = (L V) r~``,
    ``e = S_t(z - L r)`` as ``x - clip(x, -t, t)``, until ``max(||de||^2, ||dr~||^2) < limit``
    is not false (a NaN stops) or ``cap`` iterations."""
    b, p = Z.shape
    d = RB.shape[1]
    y = np.empty(p, dtype=Z.dtype)
    c = np.empty(d, dtype=Z.dtype)
    r = np.empty(d, dtype=Z.dtype)
    t_rows, t_columns = thresholds.shape
    for j in range(b):
        tj = j if t_rows > 1 else 0
        for it in range(cap):
            for i in range(p):
                y[i] = Z[j, i] - E[j, i]
            for k in range(d):
                total = 0.0
                for i in range(p):
                    total += y[i] * RB[i, k]
                if null[k]:
                    total = total * 0.0  # rotated * 0, as the tl.* r-step: a NaN stays NaN
                c[k] = total
            if ball:  # one sample's maxnorm._newton from its last multiplier, written out
                # (a kernel cannot call a helper that numba has not compiled beforehand)
                s2 = 0.0
                for k in range(d):
                    inverse = 1 / (values[k] + ridge)
                    s2 += c[k] * c[k] * inverse * inverse
                multiplier = eta[j]
                if np.sqrt(s2) <= 1:  # the ridge solution is in the ball (NaN: it is not)
                    multiplier = ridge
                else:  # Newton on 1/||r(eta)|| = 1: at most ball_max_iter steps
                    for n in range(ball_max_iter + 1):
                        s2 = 0.0
                        s3 = 0.0
                        for k in range(d):  # _Secular: ||r(eta)||^2 and s3
                            inverse = 1 / (values[k] + multiplier)
                            weighted = c[k] * c[k] * inverse * inverse
                            s2 += weighted
                            s3 += weighted * inverse
                        norm = np.sqrt(s2)
                        if abs(norm - 1) < ball_tol or n == ball_max_iter:
                            break
                        step = (norm - 1) * norm * norm / (s3 if s3 > tiny else tiny)
                        moved = multiplier + step  # np.maximum(moved, ridge) keeps a NaN:
                        multiplier = moved if moved > ridge or moved != moved else ridge
                eta[j] = multiplier
            change_r = 0.0
            for k in range(d):
                r[k] = c[k] / (values[k] + eta[j])
                step = r[k] - R[j, k]
                change_r += step * step
                R[j, k] = r[k]
            change_e = 0.0
            for i in range(p):
                fit = 0.0
                for k in range(d):
                    fit += r[k] * RB[i, k]
                LR[j, i] = fit
                residual = Z[j, i] - fit
                t = thresholds[tj, i if t_columns > 1 else 0]
                if residual > t:
                    value = residual - t
                elif residual < -t:
                    value = residual + t
                else:  # x - x, as x - clip(x): 0, and NaN where x is NaN
                    value = residual - residual
                step = value - E[j, i]
                change_e += step * step
                E[j, i] = value
            n_iter[j] = it + 1
            # converged, or a NaN change (the tl.* loop's rule: np.maximum keeps a NaN)
            if change_e != change_e or change_r != change_r or not (
                    change_e >= limit or change_r >= limit):
                break
    return n_iter
