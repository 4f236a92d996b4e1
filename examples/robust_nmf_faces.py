"""
Basis images under outliers: OnlineNMF against RobustOnlineNMF
==============================================================

**What it does.** Learns basis images from faces and digits with outliers planted in most
samples, with and without an outlier term, and measures how clean each basis is.

**When to use it.** When some samples carry corrupted entries and plain NMF would learn the
corruption into its atoms.

**The parameter that matters.** ``outlier_alpha`` of :class:`~tensorstream.RobustOnlineNMF`
(how readily an entry is treated as an outlier).

Zhao & Tan, *Online Nonnegative Matrix Factorization with Outliers* (2017), Fig. 7, offline.
Faces that ship with scikit-image (``skimage.data.lfw_subset()``: the first 100 images are 25 x 25
faces) and scikit-learn's 8 x 8 digits get the paper's outliers: every sample is scaled to unit
maximum, then a fraction ``nu`` of the samples get U[-1, 1] values on a fraction ``nu~`` of their
pixels, clipped to [0, 1] (the paper's settings 1 and 3: (0.7, 0.1) and (0.9, 0.3)). The stream
is every corrupted sample ``--copies`` times, shuffled (the paper's replication).

Both learners see the same stream from the same initial dictionary. Printed per learner: the
time, the PSNR against the clean images of the reconstructions ``W h`` from codes recomputed with
the final dictionary (the robust learner's codes come with outliers ``r``), and the PSNR of the
dictionary itself on the clean images (nonnegative least-squares codes), against the same
number for batch NMF fitted on the *clean* images: the best a basis of that size can do.

What to expect: these small image sets are far from low-rank (batch NMF on clean faces with
25 atoms reaches only ~21 dB), so the rank limit, not the outliers, dominates; the robust
learner's gain appears with heavy outliers (setting 3: about +1 dB on faces), and is nil on
digits. ``outlier_alpha = 2 / sqrt(F)``: the paper's ``1 / sqrt(F)`` takes facial detail for
outliers.

Usage::

    python examples/robust_nmf_faces.py --out robust_nmf_faces.png
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.decomposition import NMF, non_negative_factorization
from sklearn.exceptions import ConvergenceWarning

from tensorstream import OnlineNMF, RobustOnlineNMF
from tensorstream.datasets import contaminate, normalize_unit_max, psnr, replicate


def load_faces() -> tuple[np.ndarray, tuple[int, int]] | None:
    try:
        from skimage.data import lfw_subset
    except ImportError:
        print("scikit-image is not installed: faces skipped (pip install scikit-image)")
        return None
    faces = lfw_subset()[:100]  # the first 100 images are faces
    return faces.reshape(100, -1), faces.shape[1:]


def load_digits_data() -> tuple[np.ndarray, tuple[int, int]]:
    from sklearn.datasets import load_digits

    return load_digits().data, (8, 8)


def learn(name, clean, shape, n_components, copies, alpha_scale, seed, setting=(0.7, 0.1)):
    """Corrupt, stream, fit both learners; returns their dictionaries and PSNRs."""
    clean = normalize_unit_max(clean)
    data = contaminate(clean, *setting, random_state=seed)
    stream, _ = replicate(data.X, copies, random_state=seed)
    start = RobustOnlineNMF(n_components, random_state=seed)._initial_state(stream[:1])
    init = [start["state_"].loadings[0]]  # one W_0 (in C) for both learners
    # the paper's outlier_alpha rule (alpha_scale / sqrt(F), raw units)
    robust = RobustOnlineNMF(n_components, **{**RobustOnlineNMF.paper_params,
                                              "outlier_alpha_scale": alpha_scale, "batch_size": 10},
                             init=init)
    plain = OnlineNMF(n_components, batch_size=10, column_bound=1.0, init=init)
    results = {}
    for label, model in (("OnlineNMF", plain), ("RobustOnlineNMF", robust)):
        begin = time.perf_counter()
        model.fit(stream)
        seconds = time.perf_counter() - begin
        model.set_params(code_tol=1e-5, code_max_iter=300)  # accurate codes for the evaluation
        quality = psnr(clean, model.reconstruct(data.X))
        results[label] = (np.asarray(model.components_), quality)
        print(f"{name:<20} {label:<16} {seconds:6.1f} s {quality:9.1f} dB "
              f"{basis_psnr(np.asarray(model.components_), clean):9.1f} dB")
    reference = NMF(n_components, init="nndsvda", max_iter=500, random_state=seed).fit(clean)
    print(f"{name:<20} {'corrupted input':<16} {'':>8} {psnr(clean, data.X):9.1f} dB "
          f"{basis_psnr(reference.components_, clean):9.1f} dB (1)")
    return results, shape, data


def basis_psnr(components, clean):
    """PSNR of the best nonnegative combinations of the atoms on the clean images."""
    codes, _, _ = non_negative_factorization(clean, H=components, n_components=len(components),
                                             init="custom", update_H=False, max_iter=2000,
                                             tol=1e-8)
    return psnr(clean, codes @ components)


def plot(panels, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = len(panels)
    fig, axes = plt.subplots(rows, 3, figsize=(12.5, 4.2 * rows + 0.5), squeeze=False,
                             layout="constrained")
    for row, (name, (results, shape, data)) in enumerate(panels.items()):
        image = axes[row, 0].imshow(_grid(data.X[:16], shape), cmap="gray", vmin=0, vmax=1)
        axes[row, 0].set_title(f"{name}: corrupted samples", fontsize=10)
        for col, (label, (components, quality)) in enumerate(results.items(), 1):
            axes[row, col].imshow(_grid(components, shape), cmap="gray", vmin=0, vmax=1)
            axes[row, col].set_title(f"{label} atoms (PSNR {quality:.1f} dB)", fontsize=10)
    for ax in axes.ravel():
        ax.axis("off")
    fig.colorbar(image, ax=axes, shrink=0.4,
                 label="pixel value (each image or atom scaled to max 1)")
    fig.suptitle("Corrupted samples (nu, nu~), and the atoms learned from them")
    fig.savefig(path, dpi=110)
    print(f"saved {path}")


def _grid(images, shape):
    """Images side by side (each scaled to its maximum), 4 or 5 per row."""
    n = len(images)
    per_row = 5 if n % 5 == 0 else 4
    rows = -(-n // per_row)
    height, width = shape
    canvas = np.ones((rows * (height + 1), per_row * (width + 1)))
    for k, image in enumerate(images):
        r, c = divmod(k, per_row)
        tile = image.reshape(shape) / max(image.max(), 1e-12)
        canvas[r * (height + 1):r * (height + 1) + height,
               c * (width + 1):c * (width + 1) + width] = tile
    return canvas


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    parser.add_argument("--out", default="robust_nmf_faces.png", help="figure path")
    parser.add_argument("--copies", type=int, default=10, help="replication of the data set")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", ConvergenceWarning)
    print(f"{'data (nu, nu~)':<20} {'learner':<16} {'time':>8} {'W h vs clean':>12} "
          f"{'basis':>12}")
    panels = {}
    faces = load_faces()
    if faces is not None:
        for setting in ((0.7, 0.1), (0.9, 0.3)):
            name = f"faces {setting}"
            panels[name] = learn(name, *faces, n_components=25, copies=args.copies,
                                 alpha_scale=2.0, seed=args.seed, setting=setting)
    panels["digits (0.7, 0.1)"] = learn("digits (0.7, 0.1)", *load_digits_data(),
                                        n_components=16, copies=max(1, args.copies // 5),
                                        alpha_scale=1.0, seed=args.seed)
    print("(1) the basis column of 'corrupted input': batch NMF on the clean data")
    plot(panels, args.out)


if __name__ == "__main__":
    main()
