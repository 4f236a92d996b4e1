"""OnlineNMF against scikit-learn's MiniBatchNMF, threads, torch against numpy; robust NMF.

One command runs every part, each comparing the methods side by side in one run and printing
ratios (so the machine's load cancels out):

* ``nmf`` (default): OnlineNMF and MiniBatchNMF, both with their default parameters from the
  same initial components, the same batch size, on digits tiled x30 (53,910 x 64, K = 16), the
  LFW faces of scikit-image tiled x100 with 2% pixel noise (20,000 x 625, K = 25) and a random
  nonnegative rank-20 matrix (20,000 x 1,000, K = 20). Printed per data set: the per-epoch
  times and their ratio (ours / theirs; MiniBatchNMF's from ``fit`` stopped after ``n`` and
  ``2n`` passes, so its final full coding pass cancels out), the time each needs to reach
  MiniBatchNMF's best held-out objective and their ratio (ours / theirs; MiniBatchNMF timed as
  its users run it, ``fit`` from the start stopped after 1, 2, 4, ... passes; OnlineNMF
  streamed by ``partial_fit``, the evaluations outside its clock), the best held-out
  objectives, and the peak memory traced by ``tracemalloc`` (a few batches of OnlineNMF, one
  pass of MiniBatchNMF ``fit``, the data a method must hold included). The held-out objective
  is method-neutral: ``1/2 mean ||x - W h||^2`` with the nonnegative least-squares codes of the
  held-out rows (a tight ADMM solve, the same for every method) for the learned components.
* ``coder`` (``--parts coder``): OnlineNMF's coding step in GFLOP/s against the machine's square
  GEMM and the step's own product ``X W`` (issue 14, goal 3), at batches of 512 and 2,048.
* ``threads``: every learner's ``fit`` and ``transform`` with the machine's default threads
  (``n_threads=None``) and with one thread (the default ``n_threads=1``), ratio default / one.
* ``torch``: OnlineNMF's per-epoch time on torch CPU tensors against numpy arrays at batches of
  256 and 1024 (float64, same data), ratio torch / numpy: by default (numpy's kernels on views
  of the tensors' memory) and with ``TENSORSTREAM_TORCH_CPU=torch`` (torch's own kernels);
  then every learner's fit + transform on torch CPU tensors against numpy arrays.
* ``robust`` (``--parts robust``): RobustOnlineNMF against the batch RobustNMF on Zhao & Tan's
  synthetic data (section VII-D1; OADMM against BADMM).

Both libraries are warmed up first (a tiny fit each), so that one-time costs (imports, numba's
loading of the compiled column sweep where ``tensorstream[fast]`` is installed, ~1 s) are not in
the first data set's times. ``TENSORSTREAM_JIT=0`` runs the pure ``tl.*`` sweep instead.

Every method but the ``threads`` part's default runs on one BLAS/OpenMP/torch thread, and those
single-thread runs are timed in CPU seconds of this process (``time.process_time``), which the
other processes of a shared machine do not inflate; the ``threads`` part is timed in wall-clock
seconds.

Usage::

    python benchmarks/bench_nmf.py                          # nmf, threads, torch (~10 min)
    python benchmarks/bench_nmf.py --parts nmf --datasets digits
    python benchmarks/bench_nmf.py --parts robust
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import statistics
import time
import tracemalloc
import warnings

import numpy as np

# the coding-step measurement of bench_cp.py (the same GEMM rate, the same rows)
from bench_cp import blas_kernels, coder_rows, gemm_rate  # a script beside this one
from sklearn.decomposition import MiniBatchNMF
from sklearn.exceptions import ConvergenceWarning

from tensorstream import (
    OnlineCPDL,
    OnlineDivergenceNMF,
    OnlineMaxNormMD,
    OnlineNMF,
    OnlineRobustPCA,
    RobustPCA,
    VarianceReducedMF,
)
from tensorstream.coders.robust import nonnegative_code_admm
from tensorstream.core.backend import limit_threads
from tensorstream.datasets.outliers import psnr, synthetic_outlier_data
from tensorstream.learners.robust_nmf import RobustOnlineNMF
from tensorstream.learners.robust_nmf_batch import RobustNMF
from tensorstream.steps.surrogate import column_descent

#: the clock of the single-thread runs: CPU seconds of this process (see the module docstring)
CLOCK = time.process_time

# -- data -----------------------------------------------------------------------------------------


def digits(copies: int = 30):
    """scikit-learn's 1,797 digits (8 x 8, scaled to [0, 1]), tiled."""
    from sklearn.datasets import load_digits

    return np.tile(load_digits().data / 16.0, (copies, 1))


def faces(copies: int = 100, seed: int = 0):
    """The 200 LFW faces of scikit-image (25 x 25), tiled with 2% pixel noise."""
    from skimage.data import lfw_subset

    base = lfw_subset().reshape(200, -1)
    rng = np.random.default_rng(seed)
    X = np.repeat(base, copies, axis=0)
    return np.clip(X + 0.02 * rng.standard_normal(X.shape), 0, None)


def low_rank(n_samples: int = 20000, n_features: int = 1000, rank: int = 20, seed: int = 0):
    """A random nonnegative rank-``rank`` matrix: uniform codes times uniform atoms."""
    rng = np.random.default_rng(seed)
    return rng.random((n_samples, rank)) @ rng.random((rank, n_features))


DATASETS = {"digits": (digits, 16), "faces": (faces, 25), "low-rank": (low_rank, 20)}


# -- evaluation -----------------------------------------------------------------------------------


def held_out_objective(components: np.ndarray, X: np.ndarray) -> float:
    """``1/2 mean ||x - W h||^2`` with tight nonnegative least-squares codes of ``X``."""
    W = np.asarray(components, dtype=float).T
    norms = np.linalg.norm(W, axis=0)
    W = W / np.where(norms > 0, norms, 1.0)  # a well-scaled problem for the coder
    H, _ = nonnegative_code_admm(W.T @ W, X @ W, residual_tol=1e-9, max_iter=3000)
    return float(np.mean(0.5 * np.sum((X - H @ W.T) ** 2, axis=1)))


def time_to(trace, target):
    """Seconds of the first point of ``trace`` (seconds, objective) at or below ``target``."""
    return next((seconds for seconds, value in trace if value <= target), math.nan)


def _fmt(value):
    return "not reached" if math.isnan(value) else f"{value:.3f}"


def _ratio(first, second):
    """``first / second`` of two times, or which of them was not reached."""
    if math.isnan(first) or math.isnan(second):
        return "not reached" if math.isnan(first) else "second not reached"
    return f"{first / second:.2f}x"


# -- part 1: OnlineNMF against MiniBatchNMF --------------------------------------------------------


def split(X, seed):
    order = np.random.default_rng(seed).permutation(len(X))
    n_test = min(2000, len(X) // 10)
    return X[order[n_test:]], X[order[:n_test]]


def run_ours(train, test, K, components0, args):
    """OnlineNMF streamed: trace (training seconds, held-out), seconds per epoch."""
    model = OnlineNMF(K, batch_size=args.batch_size, init=components0.copy())
    rng = np.random.default_rng(args.seed)
    n_batches = -(-len(train) // args.batch_size)
    steps = n_batches * args.epochs
    evaluate_at = set(np.unique(np.geomspace(1, steps, args.n_evals).astype(int)))
    trace, seconds, step = [], 0.0, 0
    for _ in range(args.epochs):
        order = rng.permutation(len(train))
        for start in range(0, len(train), args.batch_size):
            batch = train[order[start:start + args.batch_size]]
            begin = CLOCK()
            model.partial_fit(batch)
            seconds += CLOCK() - begin
            step += 1
            if step in evaluate_at:
                trace.append((seconds, held_out_objective(model.components_, test)))
    return trace, seconds / args.epochs


def run_theirs(train, test, K, components0, args):
    """MiniBatchNMF ``fit`` from the start for 1, 2, 4, ... passes: trace, seconds per epoch."""
    codes0 = np.full((len(train), K), np.sqrt(train.mean() / K))
    trace = []
    for n_iter in 2 ** np.arange(int(math.log2(args.sk_epochs)) + 1):
        model = MiniBatchNMF(K, init="custom", batch_size=args.batch_size, max_iter=int(n_iter),
                             tol=0, max_no_improvement=None, random_state=0)
        begin = CLOCK()
        model.fit(train, W=codes0.copy(), H=components0.copy())
        trace.append((CLOCK() - begin, held_out_objective(model.components_, test)))
    (t_half, _), (t_full, _) = trace[-2], trace[-1]
    return trace, (t_full - t_half) / (args.sk_epochs / 2)


def peak_memory(train, K, components0, args):
    """Peak traced MiB: OnlineNMF on 5 batches, MiniBatchNMF ``fit`` for one pass."""
    peaks = []
    for run in ("ours", "theirs"):
        gc.collect()
        tracemalloc.start()
        if run == "ours":
            model = OnlineNMF(K, batch_size=args.batch_size, init=components0.copy())
            for start in range(0, 5 * args.batch_size, args.batch_size):
                model.partial_fit(train[start:start + args.batch_size])
        else:
            MiniBatchNMF(K, init="custom", batch_size=args.batch_size, max_iter=1, tol=0,
                         random_state=0).fit(train, W=np.full((len(train), K), 0.1),
                                             H=components0.copy())
        peaks.append(tracemalloc.get_traced_memory()[1] / 2**20)
        tracemalloc.stop()
    return peaks


def warm_up():
    """One tiny fit of each library (imports) and numba's compiled sweep loaded, before any
    clock (a fit loads the sweep only from its step 300 on: core/compiled.py)."""
    X = np.random.default_rng(0).random((64, 8))
    OnlineNMF(2, batch_size=32, max_iter=1, random_state=0).fit(X)
    MiniBatchNMF(2, batch_size=32, max_iter=1, random_state=0).fit(X)
    column_descent(X[:8, :2].copy(), np.eye(2), X[:8, 2:4], nonnegative=True, column_bound=None)


def compare_nmf(args):
    print(f"OnlineNMF (defaults) vs MiniBatchNMF (defaults), batches of {args.batch_size}, one "
          f"thread ({blas_kernels()}); ratios are ours / theirs")
    print(f"{'data':<10}{'epoch s: ours':>14}{'theirs':>9}{'ratio':>7}"
          f"{'to their best s: ours':>23}{'theirs':>9}{'ratio':>13}"
          f"{'best held-out: ours':>21}{'theirs':>10}{'peak MiB: ours':>16}{'theirs':>8}")
    for name in args.datasets:
        loader, K = DATASETS[name]
        try:
            train, test = split(loader(), args.seed)
        except ImportError as error:
            print(f"{name}: skipped ({error})")
            continue
        rng = np.random.default_rng(args.seed)
        components0 = np.abs(rng.standard_normal((K, train.shape[1]))) * \
            np.sqrt(train.mean() / K)
        theirs, their_epoch = run_theirs(train, test, K, components0, args)
        ours, our_epoch = run_ours(train, test, K, components0, args)
        target = min(value for _, value in theirs)
        reach = time_to(ours, target), time_to(theirs, target)
        peaks = peak_memory(train, K, components0, args)
        print(f"{name:<10}{our_epoch:>14.3f}{their_epoch:>9.3f}{our_epoch / their_epoch:>6.2f}x"
              f"{_fmt(reach[0]):>23}{reach[1]:>9.3f}{_ratio(*reach):>13}"
              f"{min(v for _, v in ours):>21.5g}{target:>10.5g}{peaks[0]:>16.1f}{peaks[1]:>8.1f}")


# -- part 1b: the coding step's rate -----------------------------------------------------------


def compare_coder(args):
    """Goal 3 of issue 14 for OnlineNMF's default coder (ADMM in the code space): the coding
    step (projections, Gram, codes, losses) in GFLOP/s of the data product ``2 b n K`` that any
    coder must do, against the square GEMM's rate and the step's own product ``X W``."""
    rate = gemm_rate()
    print(f"\nOnlineNMF's coding step vs GEMM: float64 GEMM {rate:.1f} GFLOP/s (1000 x 1000, one "
          f"thread, {blas_kernels()}); '% X W' is the rate of the step's own product")
    print(f"{'data':<34} {'batch':>6} {'ms/batch':>9} {'GFLOP/s':>8} {'% GEMM':>7} "
          f"{'X W GFLOP/s':>11} {'% X W':>6}")
    for name in args.datasets:
        loader, K = DATASETS[name]
        try:
            X = loader()
        except ImportError as error:
            print(f"{name}: skipped ({error})")
            continue
        model = OnlineNMF(K, random_state=args.seed).fit(X[:20000], n_steps=20)
        algorithm, loadings = model._algorithm(), model.loadings_
        W = np.asarray(loadings[0])
        coder_rows(name, algorithm, loadings, W, X, rate)


# -- part 2: threads ------------------------------------------------------------------------------


def learners(X):
    """Every learner, sized to run ``fit`` in about a second on one thread."""
    n, d = X.shape
    return {
        "OnlineNMF": (OnlineNMF, dict(n_components=16, batch_size=256, max_iter=3), X),
        "OnlineCPDL": (OnlineCPDL, dict(n_components=16, batch_size=256, max_iter=3),
                       X.reshape(n, 8, 8)),
        "RobustOnlineNMF": (RobustOnlineNMF, dict(n_components=16, batch_size=64), X[:2000]),
        "OnlineMaxNormMD": (OnlineMaxNormMD, dict(n_components=16, batch_size=64), X[:2000]),
        "OnlineRobustPCA": (OnlineRobustPCA, dict(n_components=16, batch_size=64), X[:2000]),
        "OnlineDivergenceNMF": (OnlineDivergenceNMF, dict(n_components=16, batch_size=256),
                                X + 1e-3),
        "VarianceReducedMF": (VarianceReducedMF, dict(n_components=16, n_epochs=3), X[:600]),
        "RobustNMF": (RobustNMF, dict(n_components=16, max_iter=50), X[:600]),
        "RobustPCA": (RobustPCA, dict(n_components=16), X[:600]),
    }


def compare_threads(args):
    X = digits(3)
    print(f"\nthreads: fit + transform with the machine's default threads (n_threads=None) and "
          f"one (n_threads=1); digits, {X.shape}; medians of {args.repeats}")
    print(f"{'learner':<22}{'default s':>11}{'one s':>9}{'default / one':>15}")
    for label, (cls, params, data) in learners(X).items():
        seconds = {}
        for n_threads in (None, 1):
            runs = []
            for _ in range(args.repeats):
                model = _make(cls, params, n_threads)
                begin = time.perf_counter()
                model.fit(data)
                if hasattr(model, "transform"):
                    model.transform(data[:500])
                runs.append(time.perf_counter() - begin)
            seconds[n_threads] = statistics.median(runs)
        print(f"{label:<22}{seconds[None]:>11.3f}{seconds[1]:>9.3f}"
              f"{seconds[None] / seconds[1]:>14.2f}x")


def _make(cls, params, n_threads):
    params = dict(params, n_threads=n_threads)
    if "random_state" in cls._parameter_constraints:
        params["random_state"] = 0
    return cls(**params)


# -- part 3: torch against numpy ------------------------------------------------------------------


def compare_torch(args):
    try:
        import torch
    except ImportError:
        print("\ntorch: skipped (not installed)")
        return
    from tensorstream.core.backend import TORCH_CPU

    print(f"\ntorch CPU vs numpy: OnlineNMF seconds per epoch (float64, one thread, medians of "
          f"{args.repeats}); torch tensors by default (numpy's kernels on views of their "
          f"memory) and with {TORCH_CPU}=torch (torch's own kernels)")
    print(f"{'data':<10}{'batch':>7}{'numpy s':>10}{'torch s':>10}{'kernels s':>11}"
          f"{'torch / numpy':>15}{'kernels / numpy':>17}")
    for name in args.datasets:
        loader, K = DATASETS[name]
        X = loader()
        for batch_size in (256, 1024):
            seconds = _three_routes(
                lambda data, K=K, b=batch_size: OnlineNMF(K, batch_size=b, max_iter=1,
                                                          random_state=0).fit(data),
                X, torch, TORCH_CPU, args.repeats)
            print(f"{name:<10}{batch_size:>7}{seconds['numpy']:>10.3f}{seconds['torch']:>10.3f}"
                  f"{seconds['kernels']:>11.3f}{seconds['torch'] / seconds['numpy']:>14.2f}x"
                  f"{seconds['kernels'] / seconds['numpy']:>16.2f}x")
    compare_torch_learners(args, torch, TORCH_CPU)


def compare_torch_learners(args, torch, switch):
    """Every learner's fit + transform on torch CPU tensors against numpy arrays (the threads
    part's sizes, one thread, default route and torch's own kernels)."""
    X = digits(3)
    print(f"\ntorch CPU vs numpy, every learner: fit + transform, digits {X.shape}, one thread, "
          f"medians of {args.repeats}")
    print(f"{'learner':<22}{'numpy s':>9}{'torch s':>9}{'kernels s':>11}{'torch / numpy':>15}"
          f"{'kernels / numpy':>17}")
    for label, (cls, params, data) in learners(X).items():
        def fit_and_transform(given, cls=cls, params=params):
            model = _make(cls, params, 1).fit(given)
            if hasattr(model, "transform"):
                model.transform(given[:500])

        seconds = _three_routes(fit_and_transform, np.ascontiguousarray(data), torch, switch,
                                args.repeats)
        print(f"{label:<22}{seconds['numpy']:>9.3f}{seconds['torch']:>9.3f}"
              f"{seconds['kernels']:>11.3f}{seconds['torch'] / seconds['numpy']:>14.2f}x"
              f"{seconds['kernels'] / seconds['numpy']:>16.2f}x")


def _three_routes(work, X, torch, switch, repeats):
    """Median seconds of ``work(data)`` on the numpy array ``X``, on a torch tensor of it by
    default (numpy's kernels on views) and with torch's own kernels."""
    tensor, seconds = torch.from_numpy(X), {}
    for label, data, route in (("numpy", X, "numpy"), ("torch", tensor, "numpy"),
                               ("kernels", tensor, "torch")):
        os.environ[switch] = route
        runs = []
        for _ in range(repeats):
            begin = CLOCK()
            work(data)
            runs.append(CLOCK() - begin)
        seconds[label] = statistics.median(runs)
    os.environ.pop(switch)
    return seconds


# -- part 2: robust NMF, online vs batch ----------------------------------------------------------


def compare_robust(args):
    data = synthetic_outlier_data(n_samples=args.robust_samples, random_state=1)
    F = data.X.shape[1]
    print(f"\nrobust: Zhao & Tan's synthetic data, {data.X.shape[0]} samples x {F} features, "
          f"K = 49, (nu, nu~) = (0.7, 0.1); online batches of 5, one pass; batch budget "
          f"{args.robust_budget:.0f} s; target {args.target}")
    print(f"{'method':<22}{'t(target) s':>13}{'total s':>10}{'final value':>13}"
          f"{'PSNR dB':>10}")
    rows = {}
    for solver in ("admm", "pgd"):
        # the paper's recipe at its settings (outlier_alpha = 1/sqrt(F), outlier_bound = 1, raw
        # units)
        model = RobustOnlineNMF(49, **{**RobustOnlineNMF.paper_params, "solver": solver},
                                random_state=2, n_threads=args.n_threads)
        trace, seconds, codes = [], 0.0, []
        for start in range(0, len(data.X), 5):
            begin = time.perf_counter()
            model.partial_fit(data.X[start:start + 5])
            seconds += time.perf_counter() - begin
            codes.append(model.last_decomposition_[0])
            if model.n_steps_ % 20 == 0:
                trace.append((seconds, model.surrogate_value()))
        quality = psnr(data.X_clean, np.concatenate(codes) @ model.components_)
        rows[f"RobustOnlineNMF {solver}"] = (trace, seconds, model.surrogate_value(), quality)
    for solver in ("admm", "pgd"):
        batch = RobustNMF(49, **{**RobustNMF.paper_params, "solver": solver}, max_iter=100000,
                          max_time=args.robust_budget, random_state=2,
                          n_threads=args.n_threads).fit(data.X)
        trace = [(info["seconds"], info["objective"]) for info in batch.history_]
        quality = psnr(data.X_clean, batch.codes_ @ batch.components_)
        rows[f"RobustNMF {solver}"] = (trace, trace[-1][0], trace[-1][1], quality)
    for label, (trace, seconds, final, quality) in rows.items():
        print(f"{label:<22}{_fmt(time_to(trace, args.target)):>13}{seconds:>10.2f}"
              f"{final:>13.4f}{quality:>10.2f}")
    online = time_to(rows["RobustOnlineNMF admm"][0], args.target)
    batch = time_to(rows["RobustNMF admm"][0], args.target)
    print(f"ratio BADMM / OADMM time to target: {_ratio(batch, online)}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="+", default=["nmf", "threads", "torch"],
                        choices=["nmf", "coder", "threads", "torch", "robust"])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--epochs", type=int, default=3, help="OnlineNMF's passes")
    parser.add_argument("--sk-epochs", type=int, default=16,
                        help="MiniBatchNMF's longest fit (a power of 2)")
    parser.add_argument("--n-evals", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--robust-samples", type=int, default=5000)
    parser.add_argument("--robust-budget", type=float, default=30.0)
    parser.add_argument("--target", type=float, default=0.55)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.n_threads = 1
    warnings.simplefilter("ignore", ConvergenceWarning)
    if "threads" in args.parts:  # first: its default-threads runs must not be limited
        compare_threads(args)
    with limit_threads(1):  # scikit-learn too (the learners limit themselves)
        warm_up()
        if "nmf" in args.parts:
            compare_nmf(args)
        if "coder" in args.parts:
            compare_coder(args)
        if "torch" in args.parts:
            compare_torch(args)
        if "robust" in args.parts:
            compare_robust(args)


if __name__ == "__main__":
    main()
