"""
Online matrix completion with 80% of the entries missing
========================================================

**What it does.** Predicts the missing 80% of a users x items rating matrix from the
observed 20%, streaming one user at a time, and compares it with predicting each item's mean.

**When to use it.** Recommendation or any table with most entries missing: the learner fits
each row's codes to its observed entries only and fills the rest from the low-rank part.

**The parameter that matters.** ``noise="none"`` of :class:`~tensorstream.OnlineMaxNormMD`
(no sparse-corruption term: pure completion), then ``norm_alpha``, the max-norm penalty that
keeps the completed values from growing wild.

A users x items matrix of "ratings" (``3 + a rank-5 taste matrix + noise``, clipped to [1, 5]) is
streamed user by user; each user has rated 20% of the items, the rest are NaN. The max-norm
learner fits every user's coefficients to the observed ratings only (the ``c -> inf`` limit of
the paper's OMRMC) and its statistics use observed entries only, so missing ratings never
influence anything. ``impute`` fills the missing ratings with the low-rank part ``L r``; the
root-mean-square error on the hidden ratings is compared with predicting every item's mean.
(Shen, Xu & Li, *Online Optimization for Large-Scale Max-Norm Regularization*, 2014, section 5.)

Two settings matter for completion (see docs/maxnorm.md):

* ``noise="none"``: no sparse-corruption term (pure completion); with ``"l1"`` and the default
  ``outlier_alpha = 1/sqrt(p)``, ordinary rating deviations would be taken for corruptions;
* ``column_bound=None`` (the paper's Algorithm 4): the authors' projection of the basis columns
  onto a ball caps ``||L r||`` (at ``sqrt(d)`` with their unit columns), below the norm of a
  row of ratings (about ``3 sqrt(p)``), so its reconstructions are shrunk towards 0 (fine for
  subspaces, wrong for predictions). ``dict_step="prox_grad"`` keeps the
  unprojected basis step stable.

The rank is 6: the taste matrix's 5 plus the constant offset.

The figure shows the errors, and the imputed against the hidden ratings of the one-pass run.

Usage::

    python examples/matrix_completion.py [--out example-output]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from tensorstream import OnlineMaxNormMD

# sphinx_gallery_thumbnail_path = "_build/gallery-thumbs/matrix_completion.png"


def ratings(n_users: int = 2000, n_items: int = 200, rank: int = 5, seed: int = 0):
    rng = np.random.default_rng(seed)
    tastes = rng.standard_normal((n_users, rank)) @ rng.standard_normal((rank, n_items))
    X = np.clip(3 + 0.8 * tastes / np.sqrt(rank) + 0.1 * rng.standard_normal(tastes.shape), 1, 5)
    observed = rng.random(X.shape) < 0.2
    return X, observed


def rmse(prediction: np.ndarray, X: np.ndarray, hidden: np.ndarray) -> float:
    return float(np.sqrt(np.mean((prediction - X)[hidden] ** 2)))


def plot(errors: dict[str, float], imputed: np.ndarray, X: np.ndarray, hidden: np.ndarray,
         path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (bars, scatter) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained",
                                        width_ratios=(1.1, 1))
    names = list(errors)
    bars.barh(np.arange(len(names)), list(errors.values()), color="tab:blue")
    bars.set_yticks(np.arange(len(names)), names)
    bars.invert_yaxis()
    bars.set_xlabel("RMSE on the hidden ratings (rating points)")
    bars.set_title("Prediction error")
    for k, value in enumerate(errors.values()):
        bars.annotate(f"{value:.2f}", (value, k), xytext=(3, 0), textcoords="offset points",
                      va="center", fontsize=8)
    bars.set_xlim(0, 1.15 * max(errors.values()))
    counts = scatter.hist2d(X[hidden], imputed[hidden], bins=60, range=((1, 5), (0, 6)),
                            cmap="viridis", cmin=1)[3]
    scatter.plot([1, 5], [1, 5], color="k", linewidth=0.8, linestyle="--", label="y = x")
    scatter.set(xlabel="hidden rating", ylabel="imputed rating",
                title=f"Imputed against hidden ratings\n({names[1]})")
    scatter.legend(loc="upper left")
    fig.colorbar(counts, ax=scatter, label="ratings per bin")
    fig.savefig(path, dpi=120)
    print(f"saved {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    parser.add_argument("--out", default="example-output", help="output folder")
    args = parser.parse_args()
    X, observed = ratings()
    hidden = ~observed
    data = np.where(observed, X, np.nan)  # NaN marks a missing rating
    item_means = np.nanmean(data, axis=0)
    print(f"{X.shape[0]} users x {X.shape[1]} items, {observed.mean():.0%} of the ratings seen")
    print(f"  predict each item's mean rating          RMSE {rmse(item_means, X, hidden):.3f}")
    errors = {"item means": rmse(item_means, X, hidden)}
    runs = [
        ("OMRMC, one pass, one user per step", dict(batch_size=1, max_iter=1)),
        ("OMRMC, 3 passes, batches of 10 users", dict(batch_size=10, max_iter=3)),
        ("same with the authors' projection (shrunk)",
         dict(batch_size=10, max_iter=3, column_bound="auto", dict_step="bcd_subgrad")),
    ]
    with threadpool_limits(1):  # per-user products are tiny
        for name, params in runs:
            settings = dict(noise="none", column_bound=None, dict_step="prox_grad", missing="nan",
                            random_state=0)
            model = OnlineMaxNormMD(6, **{**settings, **params})
            tic = time.perf_counter()
            model.fit(data)
            seconds = time.perf_counter() - tic
            imputed = np.asarray(model.impute(data))
            error = rmse(imputed, X, hidden)
            print(f"  {name:<40} RMSE {error:.3f}  ({seconds:.1f} s)")
            errors[name] = error
            if len(errors) == 2:
                first_imputed = imputed
    # the values behind the mask are never read: the same fit from a mask and garbage values
    garbage = np.where(observed, X, 1e6)
    masked = OnlineMaxNormMD(6, noise="none", column_bound=None, dict_step="prox_grad",
                             random_state=0, batch_size=10).fit(garbage, mask=observed)
    nan_marked = OnlineMaxNormMD(6, noise="none", column_bound=None, dict_step="prox_grad",
                                 random_state=0, batch_size=10, missing="nan").fit(data)
    same = np.array_equal(masked.loadings_[0], nan_marked.loadings_[0])
    print(f"mask + garbage values gives the same basis as NaN-marked data: {same}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plot(errors, first_imputed, X, hidden, out / "matrix_completion.png")


if __name__ == "__main__":
    main()
