"""
Variance-reduced SMF: objective against passes and time
=======================================================

**What it does.** Compares variance-reduced stochastic matrix factorization with plain
stochastic gradient and a surrogate method: objective against passes over the data and
against seconds.

**When to use it.** For a finite data set you can pass over several times, where
variance reduction converges faster than plain stochastic steps.

**The parameter that matters.** The step of :class:`~tensorstream.VarianceReducedMF`
(``method_params={"step_size": ...}``; the ``--grid`` option tries several), then
``epoch_length``.

Zhao, Haskell & Feng, *A Unified Framework for Stochastic Matrix Factorization via Variance
Reduction* (2017): the layout of the paper's Figures 1 and 2 on offline stand-ins. For each setup,
``log10(f(W) - f_ref)`` against data passes (sample reads / n) and against algorithm seconds
(objective evaluation excluded), and for Synth-ORPCA the expressed variance of the learnt basis
against the planted one. Methods: VR with the paper's ``b, m`` (``m b ~ 0.1 n``), VR with
``m b ~ n``, proximal SGD (``gamma_t = beta / (b t + beta')``, ``beta' = 100 b``) and SMM,
all from the same ``W0``. ``f_ref = min(long run, every recorded f) - delta``.

The setups, runs and ``f_ref`` come from ``benchmarks/bench_svrmf.py`` (imported, not
duplicated). By default each method runs at one step, the setup's ``vr_default`` /
``sgd_default`` (ODL: VR ``eta = 3``, SGD ``gamma_0 = 3``; ORPCA: ``10`` and ``30``; the best of
the benchmark's grid except VR with ``m b ~ n`` on ODL, which prefers ``eta = 1``); ``--grid``
runs the whole grid and plots every member. About a minute on 2 cores (10 passes).

Usage::

    python examples/svrmf_curves.py                    # writes example-output/svrmf_*.png
    python examples/svrmf_curves.py --passes 20 --grid --out figures
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

try:
    ROOT = Path(__file__).resolve().parents[1]
except NameError:  # sphinx-gallery runs the examples without __file__, from examples/
    ROOT = Path.cwd().parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_svrmf as bench  # noqa: E402  (benchmarks/ is not a package)

# sphinx_gallery_thumbnail_path = "_build/gallery-thumbs/svrmf_curves.png"

SETUPS = ("odl-digits", "orpca-synth")


def plot_setup(result: bench.SetupResult, out: Path) -> Path:
    """``log10(f - f_ref)`` vs passes and vs seconds (and EV vs passes if planted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    planted = result.setup.W_true is not None
    fig, axes = plt.subplots(1, 3 if planted else 2, figsize=(17 if planted else 12, 4.2),
                             layout="constrained")
    for (label, step), rows in result.curves.items():
        name = label if step is None else f"{label}, step {step:g}"
        passes = [r["passes_read"] for r in rows]
        gap = np.log10(np.maximum([r["f"] - result.f_ref for r in rows], 1e-16))
        line, = axes[0].plot(passes, gap, marker=".", label=name)
        axes[1].plot([r["seconds"] for r in rows], gap, marker=".", color=line.get_color())
        if planted:
            axes[2].plot(passes, [r["ev"] for r in rows], marker=".", color=line.get_color())
    for ax in axes[:2]:  # the benchmark's target
        ax.axhline(-3, color="k", linestyle=":", linewidth=1, label="f_ref + 1e-3")
    title = f"{result.setup.name}, f_ref = {result.f_ref:.6g}"
    axes[0].set(xlabel="data passes (sample reads / n)", ylabel="log10(f - f_ref)",
                title="objective against passes")
    axes[1].set(xlabel="algorithm time (s)", ylabel="log10(f - f_ref)",
                title="objective against time")
    if planted:
        axes[2].set(xlabel="data passes (sample reads / n)", ylabel="expressed variance",
                    title="subspace recovery")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside right center",
               fontsize="small")
    fig.suptitle(title)
    path = out / f"svrmf_{result.setup.name}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    parser.add_argument("--setups", nargs="+", choices=SETUPS, default=list(SETUPS))
    parser.add_argument("--passes", type=float, default=10.0)
    parser.add_argument("--grid", action="store_true", help="every step of the benchmark grid")
    parser.add_argument("--n-samples", type=int, default=None, help="smaller data (smoke runs)")
    parser.add_argument("--long-factor", type=float, default=2.0)
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="example-output")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    with threadpool_limits(args.threads):
        for name in args.setups:
            setup = bench.SETUPS[name](args.n_samples, args.seed)
            grid = bench.method_grid(setup, quick=not args.grid)
            result = bench.run_setup(setup, grid, args.passes, args.seed, args.long_factor,
                                     args.delta)
            paths.append(plot_setup(result, out))
            print(f"{name}: f_ref = {result.f_ref:.6f}; wrote {paths[-1]}")
    return paths


if __name__ == "__main__":
    main()
