"""The learners on a GPU: OnlineNMF and OnlineCPDL per epoch on numpy (one thread) against the
same data as CUDA tensors, and the largest difference of the learned loadings.

Run on a machine with a CUDA device (``python benchmarks/bench_gpu.py``); the correctness
checks of every learner on the device are ``tests/test_cuda.py``. Data: a random nonnegative
rank-20 matrix (20,000 x 1,000, K = 20) and a rank-10 "video" of 4,000 frames of 64 x 64
(R = 10), batches of 256, 1,024 and 4,096, one pass each (a warm-up fit on two batches first,
so that CUDA's start-up and the kernels' first launch are not timed). Times are wall-clock
seconds, the GPU synchronised before each reading.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from tensorstream import OnlineCPDL, OnlineNMF


def cases():
    rng = np.random.default_rng(0)
    low_rank = rng.random((20000, 20)) @ rng.random((20, 1000))
    video = (rng.random((4000, 10)) @ rng.random((10, 64 * 64))).reshape(4000, 64, 64)
    return [("OnlineNMF, rank 20, 20000 x 1000, K = 20",
             lambda b: OnlineNMF(20, batch_size=b, max_iter=1, random_state=0), low_rank),
            ("OnlineCPDL, video 4000 x 64 x 64, R = 10",
             lambda b: OnlineCPDL(10, batch_size=b, max_iter=1, random_state=0), video)]


def seconds(make, b, data, synchronise):
    """Wall-clock seconds of ``make(b).fit(data)``, and the fitted model."""
    synchronise()
    begin = time.perf_counter()
    model = make(b).fit(data)
    synchronise()
    return time.perf_counter() - begin, model


def main():
    if not torch.cuda.is_available():
        raise SystemExit("bench_gpu.py needs a CUDA device")
    warnings.simplefilter("ignore")  # short fits: convergence and health warnings
    print(f"{torch.cuda.get_device_name()}; one pass, wall-clock seconds")
    print(f"{'learner, data':<42}{'batch':>7}{'numpy s':>10}{'cuda s':>9}{'numpy / cuda':>14}"
          f"{'max |diff|':>12}")
    for label, make, X in cases():
        T = torch.tensor(X, device="cuda")
        for b in (256, 1024, 4096):
            with threadpool_limits(1):
                make(b).fit(X[:2 * b])
                cpu, on_numpy = seconds(make, b, X, lambda: None)
            make(b).fit(T[:2 * b])
            gpu, on_cuda = seconds(make, b, T, torch.cuda.synchronize)
            diff = max(float(np.abs(U.cpu().numpy() - V).max())
                       for U, V in zip(on_cuda.loadings_, on_numpy.loadings_))
            print(f"{label:<42}{b:>7}{cpu:>10.3f}{gpu:>9.3f}{cpu / gpu:>13.2f}x{diff:>12.1e}")


if __name__ == "__main__":
    main()
