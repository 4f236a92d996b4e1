"""OnlineCPDL vs TensorLy's batch nonnegative CP, side by side in one run on the same data.

Sections (each prints its ratios, measured in the same run, so the machine's load cancels):

1. **Defaults** (issue 14, goal 2): ``OnlineCPDL(rank)`` with *all its defaults* (``fit`` on the
   array) against TensorLy's ``non_negative_parafac_hals`` with its defaults, on a planted
   20000 x 30 x 30 rank-5 tensor (2.3% noise) and a video-like tensor: 2000 grayscale 64 x 64
   frames of ``skimage.data.camera()``, a window panning along a Lissajous path under a slowly
   varying brightness, fitted with rank 10. Printed: each method's time to reach 1.03 x HALS's
   final error (the online learner's error evaluated on the whole tensor at ~15 points, outside
   its timed region; HALS's per-iteration times are its total spread evenly), the final errors,
   their ratio, and the peak memory traced by ``tracemalloc`` in separate short runs (HALS: two
   iterations; OnlineCPDL: 50 steps of ``fit`` on the first quarter and on all of the samples,
   whose peaks must be equal: memory flat in the number of samples).
2. **Coder rate** (goal 3): GFLOP/s of OnlineCPDL's coding step (projection of a batch on the
   atoms, Gram, codes, per-sample losses; with each coder, ``"pivoting"`` and ``"admm"``) at
   batches of 512 and 2048 on the shapes and ranks above, as a percentage of two float64 GEMM
   rates measured in the same run (same threads): a square 1000 x 1000 product, and the coding
   step's own product ``X W`` (``b x prod(I)`` times ``prod(I) x R``, thin, so slower per
   flop). The flops counted are the
   data product ``2 b prod(I) R`` only: the work any coder must do, so the percentage says how
   close the whole step gets to a bare GEMM.
3. **Patches** (issue 14): rank-24 dictionaries of random 20 x 20 x 3 patches of
   ``skimage.data.astronaut()``, batches of 100, 400 steps, defaults otherwise: time per step
   and the relative error on 2000 of the patches; then batches of 512 for 80 steps (the same
   samples seen), which ``coder="auto"`` codes by ADMM.
4. **Dictionary steps** (goal 3): ``dict_step="columns"`` (the default Gauss-Seidel column
   sweep) against ``"fista"`` (accelerated projected gradient, as many backend calls at any
   rank), every other parameter at its default, the same batches in the same order, the two
   learners' steps interleaved: seconds (evaluations excluded) and relative error after 100,
   300 and 1000 steps on the planted, video and patch tensors, with the ratios fista / columns.
5. ``--scaling`` (off by default, minutes): the earlier comparison with HALS and MU from shared
   initialisations on the paper's ``X_synth`` and on 60 x 60 x N planted streams, chunk by chunk.

``--threads 1`` (default) limits BLAS/OpenMP threads for every method alike.

Usage::

    python benchmarks/bench_cp.py                       # sections 1-4 (a few minutes)
    python benchmarks/bench_cp.py --sections coder patches dictstep
    python benchmarks/bench_cp.py --sections --scaling --sizes 2000 20000 100000
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
from threadpoolctl import threadpool_info, threadpool_limits

from tensorstream import OnlineCPDL
from tensorstream.datasets import synthetic_ncpd_tensor

TARGET = 1.03  # "reaches HALS's error": within 3% of it


# -- data --------------------------------------------------------------------------------------

def planted_tensor(n: int = 20000, size: int = 30, rank: int = 5, noise: float = 0.023,
                   seed: int = 0) -> np.ndarray:
    """``n`` samples ``size x size`` of a nonnegative rank-``rank`` CP model (U[0, 1) factors)
    plus Gaussian noise of ``noise`` times the model's RMS, clipped at 0."""
    rng = np.random.default_rng(seed)
    factors = [rng.random((n, rank)), rng.random((size, rank)), rng.random((size, rank))]
    model = np.einsum("sr,ir,jr->sij", *factors)
    rms = np.linalg.norm(model) / np.sqrt(model.size)
    return np.clip(model + noise * rms * rng.standard_normal(model.shape), 0, None)


def video_tensor(n: int = 2000, size: int = 64) -> np.ndarray:
    """``n`` grayscale frames ``size x size``: a window panning over ``skimage.data.camera()``
    along a Lissajous path, the brightness varying slowly (a video-like tensor that ships)."""
    from skimage.data import camera

    image = camera().astype(float) / 255
    t = np.arange(n)
    span = image.shape[0] - size
    ys = np.round(span / 2 * (1 + np.sin(6 * np.pi * t / n))).astype(int)
    xs = np.round(span / 2 * (1 + np.sin(4 * np.pi * t / n + 1))).astype(int)
    brightness = 0.7 + 0.3 * np.sin(2 * np.pi * t / 400)
    return np.stack([b * image[y:y + size, x:x + size] for b, y, x in zip(brightness, ys, xs)])


def astronaut_patches(n: int, rng: np.random.Generator, size: int = 20) -> np.ndarray:
    """``n`` random ``size x size x 3`` patches of ``skimage.data.astronaut()`` in [0, 1]."""
    from skimage.data import astronaut

    image = astronaut().astype(float) / 255
    corners = rng.integers(0, image.shape[0] - size + 1, (n, 2))
    return np.stack([image[y:y + size, x:x + size] for y, x in corners])


# -- section 1: defaults vs HALS ---------------------------------------------------------------

def relative_error(model: OnlineCPDL, X: np.ndarray, chunk: int = 2000) -> float:
    """``||X - X_hat|| / ||X||`` with codes refitted on the whole tensor, chunk by chunk."""
    residual = sum(float(np.sum((X[s:s + chunk] - model.reconstruct(X[s:s + chunk])) ** 2))
                   for s in range(0, len(X), chunk))
    return float(np.sqrt(residual) / np.linalg.norm(X))


def hals_run(X: np.ndarray, rank: int) -> tuple[list, float]:
    """TensorLy HALS with its defaults: the (seconds, error) trace and the total time."""
    start = time.perf_counter()
    _, errors = non_negative_parafac_hals(X, rank, random_state=0, return_errors=True)
    seconds = time.perf_counter() - start
    per_iter = seconds / len(errors)
    return [((i + 1) * per_iter, float(e)) for i, e in enumerate(errors)], seconds


def online_run(X: np.ndarray, rank: int, stop_after: float, n_evals: int = 15) -> list:
    """OnlineCPDL with its defaults (``fit`` on the array); the (seconds, error) trace, the
    evaluations excluded from the time; stops once past ``stop_after`` seconds."""
    probe = OnlineCPDL(rank)
    total = probe.max_iter * -(-len(X) // probe.batch_size)
    at = set(np.unique(np.geomspace(5, total, n_evals).astype(int)).tolist()) | {total}
    trace, clock = [], {"start": 0.0, "excluded": 0.0}

    def evaluate(model, info):
        if model.n_steps_ not in at:
            return False
        begin = time.perf_counter()
        elapsed = begin - clock["start"] - clock["excluded"]
        trace.append((elapsed, relative_error(model, X)))
        clock["excluded"] += time.perf_counter() - begin
        return elapsed > stop_after

    model = OnlineCPDL(rank, random_state=0, callback=evaluate)
    clock["start"] = time.perf_counter()
    model.fit(X)
    return trace


def traced_peak(function) -> float:
    """Peak memory (MiB) that ``tracemalloc`` sees while ``function()`` runs."""
    gc.collect()
    tracemalloc.start()
    function()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def time_to(trace, target):
    for seconds, error in trace:
        if error <= target:
            return seconds
    return float("nan")


def _seconds(value: float) -> str:
    return "not reached" if np.isnan(value) else f"{value:.2f}"


def defaults_section(name: str, X: np.ndarray, rank: int) -> None:
    hals_trace, hals_seconds = hals_run(X, rank)
    target = TARGET * hals_trace[-1][1]
    online_trace = online_run(X, rank, stop_after=hals_seconds)
    hals_to, online_to = time_to(hals_trace, target), time_to(online_trace, target)
    hals_peak = traced_peak(lambda: non_negative_parafac_hals(X, rank, n_iter_max=2,
                                                              random_state=0))
    quarter, full = (traced_peak(lambda n=n: OnlineCPDL(rank, random_state=0).fit(
        X[:n], n_steps=50)) for n in (len(X) // 4, len(X)))
    print(f"\n{name}: {X.shape[0]} samples of shape {X.shape[1:]}, rank {rank}; target "
          f"{TARGET} x HALS's final error = {target:.4f}")
    print(f"{'method':<22} {'t(target) s':>12} {'run s':>8} {'final err':>10} {'peak MiB':>9}")
    print(f"{'tensorly HALS':<22} {_seconds(hals_to):>12} {hals_seconds:>8.2f} "
          f"{hals_trace[-1][1]:>10.4f} {hals_peak:>9.1f}")
    print(f"{'OnlineCPDL (defaults)':<22} {_seconds(online_to):>12} {online_trace[-1][0]:>8.2f} "
          f"{online_trace[-1][1]:>10.4f} {full:>9.1f}")
    print(f"ratios (online / HALS): time to target {online_to / hals_to:.3f}, time to target "
          f"vs HALS's whole run {online_to / hals_seconds:.3f}, final error "
          f"{online_trace[-1][1] / hals_trace[-1][1]:.3f}; online peak with N/4 samples "
          f"{quarter:.1f} MiB, with N {full:.1f} MiB")


# -- section 2: the coder's rate ---------------------------------------------------------------

def gemm_rate(size: int = 1000, repeats: int = 5) -> float:
    """float64 GEMM GFLOP/s of this machine (best of ``repeats``)."""
    rng = np.random.default_rng(0)
    A, B = rng.random((size, size)), rng.random((size, size))
    best = min(_timed(lambda: A @ B) for _ in range(repeats))
    return 2 * size**3 / best / 1e9


def blas_kernels() -> str:
    """Which BLAS and kernels numpy runs (``OPENBLAS_CORETYPE`` in the environment can force
    an older processor's kernels: absolute times then differ, so every run prints it)."""
    kernels = {f"{pool.get('internal_api')} {pool.get('architecture', '?')}"
               for pool in threadpool_info() if pool.get("user_api") == "blas"}
    return ", ".join(sorted(kernels)) or "unknown"


def _timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def _coding_times(algorithm, loadings, W, batch, repeats):
    """Best times of the coding step on ``batch`` and of its bare product ``X W``."""
    flat = batch.reshape(len(batch), -1)
    step = min(_timed(lambda: algorithm.encode(batch, loadings, 1.0)) for _ in range(repeats))
    product = min(_timed(lambda: flat @ W) for _ in range(repeats))
    return step, product


def coder_section(cases, batches=(512, 2048), repeats: int = 9) -> None:
    rate = gemm_rate()
    print(f"\nCoding step (projection, Gram, codes, losses) vs GEMM: float64 GEMM "
          f"{rate:.1f} GFLOP/s (1000 x 1000, {blas_kernels()}); '% X W' is the rate of the "
          f"step's own product; each coder of OnlineCPDL ('auto' codes these batches by ADMM)")
    print(f"{'data, coder':<34} {'batch':>6} {'ms/batch':>9} {'GFLOP/s':>8} {'% GEMM':>7} "
          f"{'X W GFLOP/s':>11} {'% X W':>6}")
    for name, X, rank in cases:
        model = OnlineCPDL(rank, random_state=0).fit(X, n_steps=200)  # a learned dictionary
        loadings = model.loadings_
        W = tl.tenalg.khatri_rao(list(loadings))
        for coder in ("pivoting", "admm"):
            algorithm = model.set_params(coder=coder)._algorithm()
            coder_rows(f"{name}, {coder}", algorithm, loadings, W, X, rate, batches, repeats)


def coder_rows(name, algorithm, loadings, W, X, rate, batches=(512, 2048), repeats: int = 9):
    """One row per batch size: the coding step's time and GFLOP/s of the data product
    ``2 b prod(I) R``, against ``rate`` (the square GEMM's) and the step's own ``X W``."""
    for b in batches:
        batch = X[np.random.default_rng(b).integers(0, len(X), b)]
        seconds, product = _coding_times(algorithm, loadings, W, batch, repeats)
        flops = 2 * b * W.shape[0] * W.shape[1]
        print(f"{name:<34} {b:>6} {seconds * 1e3:>9.2f} {flops / seconds / 1e9:>8.2f} "
              f"{100 * flops / seconds / 1e9 / rate:>6.1f}% {flops / product / 1e9:>11.1f} "
              f"{product / seconds:>6.0%}")


# -- section 3: image patches ------------------------------------------------------------------

def patches_section(n_steps: int = 400, batch_size: int = 100, rank: int = 24) -> None:
    rng = np.random.default_rng(0)
    batches = [astronaut_patches(batch_size, rng) for _ in range(n_steps)]
    model = OnlineCPDL(rank, batch_size=batch_size, random_state=0)
    start = time.perf_counter()
    for X in batches:
        model.partial_fit(X)
    seconds = time.perf_counter() - start
    held = np.concatenate(batches[:20])
    error = np.linalg.norm(held - model.reconstruct(held)) / np.linalg.norm(held)
    print(f"\nastronaut 20x20x3 patches, rank {rank}, batch {batch_size}: {n_steps} steps in "
          f"{seconds:.1f} s ({1e3 * seconds / n_steps:.1f} ms/step), relative error "
          f"{error:.4f} on {len(held)} of the patches")


# -- section 4: dictionary steps ---------------------------------------------------------------

def dict_step_runs(X: np.ndarray, rank: int, steps=("columns", "fista"), checkpoints=(100,),
                   batch_size: int = 32) -> dict:
    """``OnlineCPDL(rank, dict_step=...)`` for each of ``steps`` over the same shuffled
    batches, their steps interleaved (so that the machine's load weighs on all alike): for
    each, (seconds, error) at each checkpoint (steps), evaluated on up to 4000 samples outside
    the time."""
    models = {step: OnlineCPDL(rank, dict_step=step, random_state=0) for step in steps}
    seconds = dict.fromkeys(steps, 0.0)
    traces = {step: [] for step in steps}
    order = np.random.default_rng(0).permutation(len(X))
    held, done = X[:4000], 0
    for target in checkpoints:
        while done < target:
            begin = (done * batch_size) % len(X)
            batch = X[order[begin:begin + batch_size]]
            for step, model in models.items():
                seconds[step] += _timed(lambda m=model, b=batch: m.partial_fit(b))
            done += 1
        for step, model in models.items():
            traces[step].append((seconds[step], relative_error(model, held)))
    return traces


def dict_step_section(cases, checkpoints=(100, 300, 1000)) -> None:
    print("\nDictionary steps, OnlineCPDL defaults otherwise (batches of 32, the same order, "
          "steps interleaved): seconds / relative error after each number of steps")
    print(f"{'data':<34} {'steps':>6} {'columns s':>10} {'fista s':>8} {'ratio':>6} "
          f"{'columns err':>12} {'fista err':>10} {'ratio':>6}")
    for name, X, rank in cases:
        traces = dict_step_runs(X, rank, checkpoints=checkpoints)
        for steps, (c_s, c_e), (f_s, f_e) in zip(checkpoints, traces["columns"],
                                                 traces["fista"]):
            print(f"{name:<34} {steps:>6} {c_s:>10.2f} {f_s:>8.2f} {f_s / c_s:>6.2f} "
                  f"{c_e:>12.4f} {f_e:>10.4f} {f_e / c_e:>6.3f}")


# -- section 5: scaling with N (shared initialisations, HALS and MU) ---------------------------

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
    model = OnlineCPDL(rank, init=init[1:], batch_size=batch_size, random_state=seed)
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
    model = OnlineCPDL(rank, init=init[1:], batch_size=batch_size, random_state=0)
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
    parser.add_argument("--sections", nargs="*",
                        default=["defaults", "coder", "patches", "dictstep"],
                        choices=["defaults", "coder", "patches", "dictstep"])
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads (0: library default)")
    parser.add_argument("--video-rank", type=int, default=10)
    parser.add_argument("--scaling", action="store_true", help="also run section 5 (minutes)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--batch-max", type=int, default=20000,
                        help="largest N on which the batch methods also run (section 4)")
    parser.add_argument("--rank", type=int, default=10, help="rank of section 4")
    parser.add_argument("--batch-size", type=int, default=100, help="batch of section 4")
    parser.add_argument("--passes", type=int, default=1, help="passes over the data (online)")
    parser.add_argument("--min-steps", type=int, default=300,
                        help="stream small data sets again until this many steps")
    parser.add_argument("--n-iter", type=int, default=100, help="batch iterations")
    parser.add_argument("--n-evals", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-synth", action="store_true")
    args = parser.parse_args(argv)
    tl.set_backend("numpy")
    with threadpool_limits(args.threads or None):
        planted, video = planted_tensor(), video_tensor()
        if "defaults" in args.sections:
            defaults_section("planted 20000x30x30", planted, 5)
            defaults_section("video 2000x64x64 (camera)", video, args.video_rank)
        patches = astronaut_patches(4000, np.random.default_rng(1))
        cases = [("planted 30x30, rank 5", planted, 5),
                 (f"video 64x64, rank {args.video_rank}", video, args.video_rank),
                 ("astronaut 20x20x3, rank 24", patches, 24)]
        if "coder" in args.sections:
            coder_section(cases)
        if "patches" in args.sections:
            patches_section()  # the setting: batches of 100, coded by pivoting
            patches_section(n_steps=80, batch_size=512)  # coded by ADMM ("auto")
        if "dictstep" in args.sections:
            dict_step_section(cases)
        if args.scaling:
            scaling_section(args)


def scaling_section(args) -> None:
    if not args.skip_synth:
        synth_args = argparse.Namespace(**{**vars(args), "batch_size": 20})
        benchmark("X_synth (Lyu et al.)", InMemory(synthetic_ncpd_tensor()), (100, 100, 100), 5,
                  synth_args)
    for n in args.sizes:
        data = PlantedStream(n, rank=args.rank, seed=args.seed)
        benchmark("planted 60x60xN", data, (n, 60, 60), args.rank, args,
                  run_batch_methods=n <= args.batch_max)


if __name__ == "__main__":
    main()
