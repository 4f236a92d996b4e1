"""
Online CP against batch ALS and MU: error against time
======================================================

**What it does.** Times online CP decomposition against batch ALS and multiplicative
updates on one synthetic tensor: reconstruction error against seconds, mean and spread over
trials.

**When to use it.** To decide whether streaming pays for your tensor's size, and which
step-size schedule to use.

**The parameter that matters.** ``weights`` (the step schedule ``t^-beta``) and
``search_radius`` of :class:`~tensorstream.OnlineCPDL`; one panel per radius.

The benchmark protocol of Lyu, Strohmeier & Needell, *Online Nonnegative CP-dictionary Learning
for Markovian Data* (2022), on its synthetic tensor ``X_synth``: relative reconstruction error
against time for batch ALS and MU and for OnlineCPDL with the authors' reference code's
schedules (beta in {0.75, 1, None} x c' in {1, 10, 100, 1000}), from shared
initialisations, evaluation excluded from the timings, mean +- std over trials on a common time
grid (full curves: no cut of the x-axis at the fastest method's end). One panel per c'.

Usage::

    python examples/ncpd_benchmark_curves.py --trials 5 --out ncpd_curves.png
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from tensorstream import OnlineCPDL
from tensorstream.baselines import nonnegative_cp_als, nonnegative_cp_mu
from tensorstream.datasets import synthetic_ncpd_tensor
from tensorstream.metrics import reconstruction_error
from tensorstream.schedules import ReferenceRadius

# sphinx_gallery_thumbnail_path = "_build/gallery-thumbs/ncpd_benchmark_curves.png"

RANK, BATCH = 5, 20


def batch_curve(method, X, init, n_iter):
    """(seconds, error) after every sweep, the error evaluation excluded from the time."""
    times, errors, clock = [0.0], [1.0], [time.perf_counter()]

    def callback(sweep, factors):
        times.append(times[-1] + time.perf_counter() - clock[0])
        clock[0] = time.perf_counter()

    _, sweep_errors = method(X, init, n_iter=n_iter, callback=callback)
    return np.array(times), np.array([errors[0], *sweep_errors])


def online_curve(X, init, beta, c, n_steps, seed):
    if beta is None:
        model = OnlineCPDL(RANK, init=init[1:], random_state=seed)
    else:
        model = OnlineCPDL(RANK, init=init[1:], weights=beta, radius_mode="column",
                           search_radius=ReferenceRadius(c, beta), random_state=seed)
    rng = np.random.default_rng(seed)
    times, errors = [0.0], [1.0]
    for _ in range(n_steps):
        batch = X[rng.integers(0, X.shape[0], BATCH)]
        start = time.perf_counter()
        model.partial_fit(batch)
        times.append(times[-1] + time.perf_counter() - start)
        errors.append(reconstruction_error(model, X))
    return np.array(times), np.array(errors)


def on_grid(curves, grid):
    """Mean and std over trials on the grid, up to the end of the shortest trial."""
    grid = grid[grid <= min(t[-1] for t, _ in curves)]
    values = np.array([np.interp(grid, t, e) for t, e in curves])
    return grid, values.mean(axis=0), values.std(axis=0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--out", default="ncpd_curves.png")
    args = parser.parse_args(argv)
    X = synthetic_ncpd_tensor()
    runs = {}
    for trial in range(args.trials):
        rng = np.random.default_rng(trial)
        init = [rng.random((100, RANK)) / np.linalg.norm(X) for _ in range(3)]
        runs.setdefault("ALS", []).append(batch_curve(nonnegative_cp_als, X, init,
                                                      args.iterations))
        runs.setdefault("MU", []).append(batch_curve(nonnegative_cp_mu, X, init, args.iterations))
        for beta in (0.75, 1.0, None):
            for c in (1, 10, 100, 1000):
                runs.setdefault(("OCPDL", beta, c), []).append(
                    online_curve(X, init, beta, c, args.iterations, trial))
    report(runs, args.iterations)
    plot(runs, args.out)


def report(runs, iterations):
    print(f"{'method':<26} {'s/step':>8} {'err it 10':>10} {'err it 30':>10}")
    for name, curves in runs.items():
        per_step = np.mean([t[-1] / (len(t) - 1) for t, _ in curves])
        err = np.array([e for _, e in curves])
        label = name if isinstance(name, str) else f"OCPDL beta={name[1]} c'={name[2]}"
        print(f"{label:<26} {per_step:>8.4f} {err[:, min(10, iterations)].mean():>10.4f} "
              f"{err[:, -1].mean():>10.4f}")


def plot(runs, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    end = max(t[-1] for curves in runs.values() for t, _ in curves)
    grid = np.linspace(0, end, 101)
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2), sharey=True, layout="constrained")
    for ax, c in zip(axes, (1, 10, 100, 1000)):
        for name, curves in runs.items():
            if not isinstance(name, str) and name[2] != c:
                continue
            label = name if isinstance(name, str) else f"OCPDL beta={name[1]}"
            times, mean, std = on_grid(curves, grid)
            ax.plot(times, mean, label=label)
            ax.fill_between(times, mean - std, mean + std, alpha=0.2)
        ax.set_title(f"X_synth, search radius c' = {c}")
        ax.set_xlabel("time (s, evaluation excluded)")
        ax.set_ylim(0.07, 0.2)
    axes[0].set_ylabel("relative reconstruction error")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside right center",
               title="mean ± std over trials")
    fig.suptitle("Online CP-dictionary learning against batch nonnegative CP (ALS, MU)")
    fig.savefig(path, dpi=110)
    print(f"figure: {path}")


if __name__ == "__main__":
    main()
