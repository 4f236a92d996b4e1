"""OnlineNMF vs scikit-learn's MiniBatchNMF and NMF(cd); RobustOnlineNMF vs batch RobustNMF.

Part 1, in one run, on the same data, from the same initial components: tensorstream's
``OnlineNMF`` and scikit-learn's ``MiniBatchNMF`` stream the same shuffled mini-batches with the
same discount of the past (scikit-learn's ``forget_factor`` semantics of ``fit``:
``forget_factor ** (batch_size / n_samples)`` per batch, given to both as a per-batch factor);
``MiniBatchNMF.fit`` (its own per-pass discount and code warm starts) and ``NMF(solver="cd")``
run on the whole training set, stopped after 1, 2, 4, ... passes, each run timed from the same
start (so its trace is its users' time to an objective). Every method's components are evaluated
on held-out data with the same accurate coder (nonnegative least squares by ADMM, 500
iterations), outside the timed region. Printed per method: time to reach the held-out objective
``1/2 mean ||x - W h||^2`` of MiniBatchNMF's best (+1%) and of OnlineNMF's best (+1%), samples per
second, the best held-out objective, and the peak memory traced by ``tracemalloc`` in a separate
short run (a few batches for the online methods, one pass or iteration for the others; the data a
method must hold is included). Ratios are the faster MiniBatchNMF's time over OnlineNMF's.

Part 2, the paper's comparison (spec 000, B3) on its canonical synthetic data: RobustOnlineNMF
(ADMM and PGD) streams the samples once in batches of 5; RobustNMF (BADMM, BPGD) iterates on the
whole matrix within a time budget. Printed: time to the surrogate/objective target (per sample,
0.55 by default), the final value, and the PSNR against the clean data (online: eq. (48), the
codes computed online with the final dictionary; batch: eq. (47)).

Timings are wall-clock seconds of the method's own calls; ``--blas-threads 1`` (default) limits
BLAS/OpenMP/torch threads for every method alike (the small products of mini-batch methods run
much slower with two threads on a loaded 2-core machine; run with ``--blas-threads 0`` to leave
the libraries' defaults and compare).

Usage::

    python benchmarks/bench_nmf.py                     # digits, faces, 20,000 x 400, robust
    python benchmarks/bench_nmf.py --skip-robust --budget 20
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import time
import tracemalloc
import warnings

import numpy as np
from sklearn.decomposition import NMF, MiniBatchNMF
from sklearn.exceptions import ConvergenceWarning

from tensorstream.coders.robust import RobustPenalties, robust_code_admm
from tensorstream.datasets.outliers import psnr, synthetic_outlier_data
from tensorstream.learners.nmf import OnlineNMF, blas_threads
from tensorstream.learners.robust_nmf import RobustNMF, RobustOnlineNMF

# -- data -----------------------------------------------------------------------------------------


def digits():
    from sklearn.datasets import load_digits

    return load_digits().data / 16.0


def faces(copies: int = 20, seed: int = 0):
    """The 100 LFW faces of scikit-image, replicated with 2% pixel noise (a stream of faces)."""
    from skimage.data import lfw_subset

    base = lfw_subset()[:100].reshape(100, -1)
    rng = np.random.default_rng(seed)
    X = np.repeat(base, copies, axis=0)
    return np.clip(X + 0.02 * rng.standard_normal(X.shape), 0, None)


def planted(n_samples: int = 20000, n_features: int = 400, rank: int = 20, seed: int = 0):
    """A planted nonnegative rank-``rank`` matrix (sparse codes) with 5% noise."""
    rng = np.random.default_rng(seed)
    W = rng.random((rank, n_features)) ** 4  # peaked, part-like atoms
    H = rng.exponential(1.0, (n_samples, rank)) * (rng.random((n_samples, rank)) < 0.3)
    X = H @ W
    return np.abs(X + 0.05 * X.mean() * rng.standard_normal(X.shape))


# -- evaluation -----------------------------------------------------------------------------------


def held_out_objective(components: np.ndarray, X: np.ndarray) -> float:
    """``1/2 mean ||x - W h||^2`` with accurate nonnegative least-squares codes."""
    W = np.asarray(components, dtype=float).T
    norms = np.linalg.norm(W, axis=0)
    scaled = W / np.where(norms > 0, norms, 1.0)  # a well-scaled problem for the coder
    coding = robust_code_admm(X, [scaled], RobustPenalties(lam=math.inf), tol=0, max_iter=500,
                              rho=max(float(np.trace(scaled.T @ scaled)) / W.shape[1], 1e-12))
    return float(np.mean(coding.losses))


def time_to(trace, target):
    for seconds, value in trace:
        if value <= target:
            return seconds
    return math.nan


# -- part 1: online NMF ---------------------------------------------------------------------------


def batches(n_samples, batch_size, n_epochs, seed):
    rng = np.random.default_rng(seed)
    for _ in range(n_epochs):
        order = rng.permutation(n_samples)
        for start in range(0, n_samples, batch_size):
            yield order[start:start + batch_size]


def run_online(make, train, test, args, components0):
    """Stream ``train``; trace of (seconds, held-out objective), samples/s, peak memory."""
    model = make()
    trace, seconds, seen = [], 0.0, 0
    steps = -(-len(train) // args.batch_size) * args.epochs
    checkpoints = set(np.unique(np.geomspace(1, steps, args.n_evals).astype(int)))
    for step, rows in enumerate(batches(len(train), args.batch_size, args.epochs, args.seed), 1):
        batch = train[rows]
        begin = time.perf_counter()
        _step(model, batch, components0)
        seconds += time.perf_counter() - begin
        seen += len(batch)
        if step in checkpoints:
            trace.append((seconds, held_out_objective(_components(model), test)))
        if seconds > args.budget:
            trace.append((seconds, held_out_objective(_components(model), test)))
            break
    return trace, seen / seconds, online_peak(make, train, args, components0)


def _step(model, batch, components0):
    if isinstance(model, MiniBatchNMF):
        if not hasattr(model, "components_"):  # scikit-learn needs W for a custom first batch
            W = np.full((len(batch), components0.shape[0]), 0.1)
            model.partial_fit(batch, W=W, H=components0.copy())
        else:
            model.partial_fit(batch)
    else:
        model.partial_fit(batch)


def _components(model):
    return np.asarray(model.components_)


def online_peak(make, train, args, components0, n_batches=5):
    model = make()
    gc.collect()
    tracemalloc.start()
    for rows in list(batches(len(train), args.batch_size, 1, args.seed))[:n_batches]:
        _step(model, train[rows], components0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def run_restarted(make, train, test, K, components0, args, steps):
    """A scikit-learn ``fit`` stopped after ``n`` passes, ``n`` in ``steps`` (from the same
    start each time: its time to an objective as its users see it)."""
    trace = []
    codes0 = np.full((len(train), K), np.sqrt(train.mean() / K))
    for n_iter in steps:
        model = make(n_iter)
        begin = time.perf_counter()
        model.fit(train, W=codes0.copy(), H=components0.copy())
        seconds = time.perf_counter() - begin
        trace.append((seconds, held_out_objective(model.components_, test)))
        if seconds > args.budget:
            break
    gc.collect()
    tracemalloc.start()
    make(1).fit(train.copy(), W=codes0.copy(), H=components0.copy())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return trace, len(train) * steps[len(trace) - 1] / trace[-1][0], peak


def compare_nmf(name, X, K, args):
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(len(X))
    n_test = max(len(X) // 10, 50)
    test, train = X[order[:n_test]], X[order[n_test:]]
    components0 = np.abs(rng.standard_normal((K, X.shape[1]))) * np.sqrt(train.mean() / K)
    factor = args.forget_factor ** (min(args.batch_size, len(train)) / len(train))
    makers = {
        "OnlineNMF": lambda: OnlineNMF(K, init=components0.copy(), forget_factor=factor,
                                       blas_threads=args.blas_threads or None),
        "MiniBatchNMF": lambda: MiniBatchNMF(K, init="custom", forget_factor=factor,
                                             batch_size=args.batch_size, random_state=0),
    }
    results = {label: run_online(make, train, test, args, components0)
               for label, make in makers.items()}
    results["MiniBatchNMF"] = results.pop("MiniBatchNMF")
    results["MiniBatchNMF fit"] = run_restarted(
        lambda n: MiniBatchNMF(K, init="custom", batch_size=args.batch_size, max_iter=n, tol=0,
                               max_no_improvement=None, forget_factor=args.forget_factor,
                               random_state=0),
        train, test, K, components0, args, [1, 2, 4, 8, 16, 32, 64, 128, 200])
    results["NMF(cd), batch"] = run_restarted(
        lambda n: NMF(K, solver="cd", init="custom", max_iter=n, tol=0, random_state=0),
        train, test, K, components0, args, [1, 2, 4, 8, 16, 32, 64, 128, 256])
    best_of = {label: min(v for _, v in trace) for label, (trace, _, _) in results.items()}
    sklearn_best = min(best_of["MiniBatchNMF"], best_of["MiniBatchNMF fit"])
    targets = {"MBNMF best +1%": 1.01 * sklearn_best,
               "OnlineNMF best +1%": 1.01 * best_of["OnlineNMF"]}
    print(f"\n{name}: {len(train)} training / {len(test)} held-out samples, {X.shape[1]} "
          f"features, {K} components, batches of {args.batch_size}, per-batch forget factor "
          f"{factor:.4f}")
    header = "".join(f"{'t(' + t + ') s':>26}" for t in targets)
    print(f"{'method':<18}{header}{'samples/s':>12}{'best held-out':>15}{'peak MiB':>10}")
    times = {}
    for label, (trace, speed, peak) in results.items():
        reach = [time_to(trace, target) for target in targets.values()]
        times[label] = reach
        cells = "".join(f"{_fmt(value):>26}" for value in reach)
        print(f"{label:<18}{cells}{speed:>12.0f}{best_of[label]:>15.5f}{peak / 2**20:>10.1f}")
    fastest = [min((times[label][k] for label in ("MiniBatchNMF", "MiniBatchNMF fit")),
                   key=lambda t: math.inf if math.isnan(t) else t) for k in range(len(targets))]
    ratios = [_ratio(a, b) for a, b in zip(fastest, times["OnlineNMF"])]
    print(f"{'MBNMF / ours':<18}" + "".join(f"{r:>26}" for r in ratios))
    speed_ratio = results["OnlineNMF"][1] / results["MiniBatchNMF fit"][1]
    print(f"samples/s ratio ours / MiniBatchNMF fit: {speed_ratio:.2f}")


def _fmt(value):
    return "not reached" if math.isnan(value) else f"{value:.3f}"


def _ratio(theirs, ours):
    if math.isnan(ours):
        return "ours not reached"
    if math.isnan(theirs):
        return "> budget / ours"
    return f"{theirs / ours:.2f}x"


# -- part 2: robust NMF, online vs batch ----------------------------------------------------------


def compare_robust(args):
    data = synthetic_outlier_data(n_samples=args.robust_samples, random_state=1)
    F = data.X.shape[1]
    print(f"\nrobust: the spec's synthetic data, {data.X.shape[0]} samples x {F} features, "
          f"K = 49, (nu, nu~) = (0.7, 0.1); online batches of 5, one pass; batch budget "
          f"{args.robust_budget:.0f} s; target {args.target}")
    print(f"{'method':<22}{'t(target) s':>13}{'total s':>10}{'final value':>13}"
          f"{'PSNR dB':>10}")
    rows = {}
    for solver in ("admm", "pgd"):
        # the paper's recipe at the paper's settings (lam = 1/sqrt(F), M = 1, raw units)
        model = RobustOnlineNMF(49, **{**RobustOnlineNMF.paper_params, "solver": solver},
                                random_state=2, blas_threads=args.blas_threads or None)
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
                          blas_threads=args.blas_threads or None).fit(data.X)
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
    parser.add_argument("--datasets", nargs="+", default=["digits", "faces", "planted"])
    parser.add_argument("--batch-size", type=int, default=None,
                        help="default: 256 for digits and faces, 1024 (scikit-learn's) for "
                             "the planted matrix")
    parser.add_argument("--epochs", type=int, default=50, help="passes of the online methods")
    parser.add_argument("--forget-factor", type=float, default=0.7)
    parser.add_argument("--budget", type=float, default=30.0,
                        help="seconds per method and data set (training time)")
    parser.add_argument("--n-evals", type=int, default=20)
    parser.add_argument("--blas-threads", type=int, default=1, help="0: library defaults")
    parser.add_argument("--skip-robust", action="store_true")
    parser.add_argument("--robust-samples", type=int, default=5000)
    parser.add_argument("--robust-budget", type=float, default=30.0)
    parser.add_argument("--target", type=float, default=0.55)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", ConvergenceWarning)
    limit = blas_threads(args.blas_threads) if args.blas_threads else contextlib.nullcontext()
    print(f"BLAS threads: {args.blas_threads or 'library default'}")
    sets = {"digits": (digits, 16, 256), "faces": (faces, 25, 256),
            "planted": (planted, 20, 1024)}
    with limit:
        for name in args.datasets:
            loader, K, batch_size = sets[name]
            try:
                X = loader()
            except ImportError as error:
                print(f"\n{name}: skipped ({error})")
                continue
            compare_nmf(name, X, K, argparse.Namespace(
                **{**vars(args), "batch_size": args.batch_size or batch_size}))
        if not args.skip_robust:
            compare_robust(args)


if __name__ == "__main__":
    main()
