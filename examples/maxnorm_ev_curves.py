"""
Expressed variance against samples: OMRMD, OR-PCA, Online PCA and PCP
=====================================================================

**What it does.** Recovers a low-rank subspace from data whose entries are partly replaced by
huge spikes, and plots how close each method's basis gets (expressed variance, 1 is perfect)
as more samples stream in.

**When to use it.** To choose between the robust PCA learners on corrupted data, or to see
how many samples a streaming method needs before it matches a batch one.

**The parameter that matters.** ``outlier_alpha`` of :class:`~tensorstream.OnlineMaxNormMD`
and :class:`~tensorstream.OnlineRobustPCA`: how readily an entry is explained as a spike.

Shen, Xu & Li, *Online Optimization for Large-Scale Max-Norm Regularization* (2014), Figure 4.
Each panel streams one corrupted low-rank data set (``corrupted_low_rank``: orthonormal basis,
a fraction ``rho`` of the entries replaced by spikes uniform on [-1000, 1000]) once, in order,
and plots the expressed variance of each method's basis after every ``--every`` samples:

* OMRMD (:class:`~tensorstream.OnlineMaxNormMD`, the authors' mode) and OR-PCA
  (:class:`~tensorstream.OnlineRobustPCA`), one sample per step;
* Online PCA: the top-``d`` eigenvectors of the uncentered scatter ``sum_t z_t z_t^T`` (no
  robustness at all: the spikes dominate, so it stays near the chance level ``d/p``);
* PCP (:class:`~tensorstream.RobustPCA`, batch, all samples) as a horizontal line.

The defaults are a quick version (p=200, d=40, n=2000: about a minute per panel); ``--paper``
runs the paper's setting (p=400, d=80, n=5000: several minutes per panel); ``--size P D N``
any other.

Usage::

    python examples/maxnorm_ev_curves.py                         # writes maxnorm_ev_curves.png
    python examples/maxnorm_ev_curves.py --paper --rho 0.01 0.1 0.3 0.5 --output fig4.png
"""

from __future__ import annotations

import argparse

import numpy as np
from threadpoolctl import threadpool_limits

from tensorstream import OnlineMaxNormMD, OnlineRobustPCA, RobustPCA
from tensorstream.datasets import corrupted_low_rank
from tensorstream.metrics import expressed_variance

# sphinx_gallery_thumbnail_path = "_build/gallery-thumbs/maxnorm_ev_curves.png"


def online_curve(model, data, every: int) -> list[float]:
    curve = []
    for t in range(data.Z.shape[0]):
        model.partial_fit(data.Z[t:t + 1])
        if (t + 1) % every == 0:
            curve.append(expressed_variance(data.U, model.loadings_[0]))
    return curve


def online_pca_curve(data, rank: int, every: int) -> list[float]:
    """Uncentered Online PCA: top eigenvectors of the running scatter, at the checkpoints."""
    scatter = np.zeros((data.Z.shape[1],) * 2)
    curve = []
    for start in range(0, data.Z.shape[0], every):
        chunk = data.Z[start:start + every]
        scatter += chunk.T @ chunk
        curve.append(expressed_variance(data.U, np.linalg.eigh(scatter)[1][:, -rank:]))
    return curve


def panel(ax, rho: float, p: int, d: int, n: int, every: int, seed: int) -> None:
    data = corrupted_low_rank(p, d, n, rho, random_state=seed)
    ts = np.arange(every, n + 1, every)
    curves = {  # the paper's settings (its figures), not the data-adaptive defaults
        "OMRMD": online_curve(OnlineMaxNormMD(d, random_state=seed,
                                              **OnlineMaxNormMD.paper_params), data, every),
        "OR-PCA": online_curve(OnlineRobustPCA(d, random_state=seed,
                                               **OnlineRobustPCA.paper_params), data, every),
        "Online PCA": online_pca_curve(data, d, every),
    }
    for name, curve in curves.items():
        ax.plot(ts, curve, label=name)
    pcp = expressed_variance(data.U, RobustPCA(d).fit(data.Z).loadings_[0])
    ax.axhline(pcp, color="k", linestyle="--", label="PCP (batch)")
    ax.set(title=f"corrupted fraction rho = {rho}", xlabel="samples seen", ylim=(0, 1.02))
    print(f"rho={rho}: final EV " + ", ".join(f"{k} {v[-1]:.3f}" for k, v in curves.items())
          + f", PCP {pcp:.3f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    parser.add_argument("--rho", type=float, nargs="+", default=[0.1, 0.3, 0.5])
    parser.add_argument("--paper", action="store_true", help="p=400, d=80, n=5000")
    parser.add_argument("--size", type=int, nargs=3, metavar=("P", "D", "N"),
                        help="ambient dimension, rank and samples (default 200 40 2000)")
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="maxnorm_ev_curves.png")
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")  # write a file; no display needed
    import matplotlib.pyplot as plt

    p, d, n = (400, 80, 5000) if args.paper else tuple(args.size or (200, 40, 2000))
    fig, axes = plt.subplots(1, len(args.rho), figsize=(max(6.0, 4.0 * len(args.rho)) + 1.6, 3.8),
                             squeeze=False, sharey=True, layout="constrained")
    with threadpool_limits(1):  # per-sample products are tiny: one BLAS thread is faster
        for ax, rho in zip(axes[0], args.rho):
            panel(ax, rho, p, d, n, args.every, args.seed)
    axes[0, 0].set_ylabel("expressed variance")
    fig.legend(*axes[0, -1].get_legend_handles_labels(), loc="outside right center")
    fig.suptitle(f"Subspace recovery from corrupted samples, p={p}, d={d}, n={n}")
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
