"""OnlineCPDL vs TensorLy's batch nonnegative CP, side by side on the same data and inits.

For each data set: TensorLy's ``non_negative_parafac_hals`` and ``non_negative_parafac`` (MU) run
on the full tensor; OnlineCPDL streams it in mini-batches (chunk by chunk, as from disk, never
holding the whole tensor). All start from the same initial factors. Printed per method: time to
reach a relative error within 1% and 5% of the best batch result, time per step/iteration, the
final error and the peak memory traced by ``tracemalloc`` (numpy allocations, data included: the
batch methods must hold the whole tensor, the online learner one chunk).

Memory is traced in separate short runs (tracing slows Python code several times): loading the
data plus two iterations for the batch methods, three chunks of streaming for OnlineCPDL.
Timing notes: OnlineCPDL's evaluation (refit of the codes on the full tensor, chunked) is
excluded from its time. TensorLy reports errors per iteration but not times, so its per-iteration
times are the total time spread evenly over iterations (each iteration costs the same work).

Usage::

    python benchmarks/bench_cp.py                       # X_synth and 60x60xN for N = 2,000, 20,000
    python benchmarks/bench_cp.py --sizes 2000 20000 100000 --batch-max 20000
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

import numpy as np
import tensorly as tl
from tensorly.cp_tensor import CPTensor
from tensorly.decomposition import non_negative_parafac, non_negative_parafac_hals

from tensorstream import OnlineCPDL
from tensorstream.datasets import synthetic_ncpd_tensor

CHUNK = 1000


class PlantedStream:
    """60 x 60 samples of a planted nonnegative rank-``rank`` model, generated chunk by chunk."""

    def __init__(self, n_samples: int, rank: int = 10, size: int = 60, noise: float = 0.05,
                 seed: int = 0):
        rng = np.random.default_rng(seed)
        self.factors = [rng.random((size, rank)) for _ in range(2)]
        self.n_samples, self.rank, self.noise, self.seed = n_samples, rank, noise, seed

    def chunk(self, index: int) -> np.ndarray:
        rng = np.random.default_rng((self.seed, index))
        n = min(CHUNK, self.n_samples - index * CHUNK)
        codes = rng.exponential(1.0, (n, self.rank)) * (rng.random((n, self.rank)) < 0.5)
        X = np.einsum("sr,ir,jr->sij", codes, *self.factors)
        return np.abs(X + self.noise * X.mean() * rng.standard_normal(X.shape))

    @property
    def n_chunks(self) -> int:
        return -(-self.n_samples // CHUNK)

    def full(self) -> np.ndarray:
        return np.concatenate([self.chunk(c) for c in range(self.n_chunks)])


class InMemory:
    """A tensor already in memory, seen through the same chunk interface."""

    def __init__(self, X: np.ndarray):
        self.X, self.n_samples = X, X.shape[0]

    def chunk(self, index: int) -> np.ndarray:
        return self.X[index * CHUNK:(index + 1) * CHUNK]

    @property
    def n_chunks(self) -> int:
        return -(-self.n_samples // CHUNK)

    def full(self) -> np.ndarray:
        return self.X


def streamed_error(model: OnlineCPDL, data) -> float:
    """Relative error of the online dictionary on all the data, codes refitted chunk by chunk."""
    residual = total = 0.0
    for c in range(data.n_chunks):
        X = data.chunk(c)
        residual += float(np.sum((X - model.reconstruct(X)) ** 2))
        total += float(np.sum(X**2))
    return float(np.sqrt(residual / total))


def run_online(data, init, rank, batch_size, n_passes, n_evals, seed):
    """Stream ``n_passes`` over the chunks; returns the (seconds, error) trace and stats."""
    model = OnlineCPDL(rank, init=init[1:], weights=0.75, random_state=seed)
    rng = np.random.default_rng(seed)
    steps_per_pass = sum(-(-min(CHUNK, data.n_samples - c * CHUNK) // batch_size)
                         for c in range(data.n_chunks))
    total_steps = n_passes * steps_per_pass
    eval_at = set(np.unique(np.geomspace(1, total_steps, n_evals).astype(int)))
    trace, elapsed, step_times = [], 0.0, []
    for _ in range(n_passes):
        for c in rng.permutation(data.n_chunks):
            X = data.chunk(c)
            order = rng.permutation(X.shape[0])
            for start in range(0, X.shape[0], batch_size):
                begin = time.perf_counter()
                model.partial_fit(X[order[start:start + batch_size]])
                step_times.append(time.perf_counter() - begin)
                elapsed += step_times[-1]
                if model.n_steps_ in eval_at:
                    trace.append((elapsed, streamed_error(model, data)))
    return trace, float(np.median(step_times)), online_peak_memory(data, init, rank, batch_size)


def online_peak_memory(data, init, rank, batch_size, n_chunks=3):
    """Peak traced memory of streaming a few chunks (a separate run: tracing slows Python)."""
    model = OnlineCPDL(rank, init=init[1:], weights=0.75, random_state=0)
    gc.collect()
    tracemalloc.start()
    for c in range(min(n_chunks, data.n_chunks)):
        X = data.chunk(c)
        for start in range(0, X.shape[0], batch_size):
            model.partial_fit(X[start:start + batch_size])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def run_batch(method, data, init, rank, n_iter):
    def fit(X, n):
        return method(X, rank, n_iter_max=n, init=CPTensor((np.ones(rank), init)), tol=1e-16,
                      return_errors=True)[1]

    gc.collect()
    tracemalloc.start()  # peak of loading the data and two iterations (a separate, traced run)
    fit(data.full(), 2)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    X = data.full()
    start = time.perf_counter()
    errors = fit(X, n_iter)
    seconds = time.perf_counter() - start
    del X
    per_iter = seconds / len(errors)
    trace = [((i + 1) * per_iter, float(e)) for i, e in enumerate(errors)]
    return trace, per_iter, peak


def time_to(trace, target):
    for seconds, error in trace:
        if error <= target:
            return seconds
    return float("nan")


def _seconds(value: float) -> str:
    return "not reached" if np.isnan(value) else f"{value:.3f}"


def benchmark(name, data, shape, rank, args, run_batch_methods=True):
    rng = np.random.default_rng(args.seed)
    scale = (np.linalg.norm(data.chunk(0)) * np.sqrt(data.n_chunks)) ** (1 / 3)
    init = [rng.random((size, rank)) * scale / size for size in shape]
    results = {}
    if run_batch_methods:
        results["tensorly HALS"] = run_batch(non_negative_parafac_hals, data, init, rank,
                                             args.n_iter)
        results["tensorly MU"] = run_batch(non_negative_parafac, data, init, rank, args.n_iter)
    # small data sets are streamed several times, so that every run makes >= min_steps steps
    passes = max(args.passes, -(-args.min_steps * args.batch_size // data.n_samples))
    results["OnlineCPDL"] = run_online(data, init, rank, args.batch_size, passes,
                                       args.n_evals, args.seed)
    best = min(min(e for _, e in trace) for trace, _, _ in results.values())
    print(f"\n{name}: {data.n_samples} samples of shape {tuple(shape[1:])}, rank {rank}; "
          f"best error {best:.4f}" + ("" if run_batch_methods else " (online only)"))
    print(f"{'method':<15} {'t(1%) s':>11} {'t(5%) s':>11} {'step/iter s':>12} "
          f"{'final err':>10} {'peak MiB':>9}")
    for method, (trace, per_step, peak) in results.items():
        reach = [_seconds(time_to(trace, factor * best)) for factor in (1.01, 1.05)]
        print(f"{method:<15} {reach[0]:>11} {reach[1]:>11} {per_step:>12.4f} "
              f"{trace[-1][1]:>10.4f} {peak / 2**20:>9.1f}")
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--batch-max", type=int, default=20000,
                        help="largest N on which the batch methods also run")
    parser.add_argument("--rank", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--passes", type=int, default=1, help="passes over the data (online)")
    parser.add_argument("--min-steps", type=int, default=300,
                        help="stream small data sets again until this many steps")
    parser.add_argument("--n-iter", type=int, default=100, help="batch iterations")
    parser.add_argument("--n-evals", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-synth", action="store_true")
    args = parser.parse_args(argv)
    tl.set_backend("numpy")
    if not args.skip_synth:
        synth_args = argparse.Namespace(**{**vars(args), "batch_size": 20})
        benchmark("X_synth (spec 004)", InMemory(synthetic_ncpd_tensor()), (100, 100, 100), 5,
                  synth_args)
    for n in args.sizes:
        data = PlantedStream(n, rank=args.rank, seed=args.seed)
        benchmark("planted 60x60xN", data, (n, 60, 60), args.rank, args,
                  run_batch_methods=n <= args.batch_max)


if __name__ == "__main__":
    main()
