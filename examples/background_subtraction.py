"""
Background/foreground separation of a video with RobustOnlineNMF
================================================================

**What it does.** Splits a video into a still background and a moving foreground: every
frame is a combination of a few background images plus a sparse "outlier" part, which is the
moving object.

**When to use it.** When most of each sample follows a low-rank pattern and a small,
changing part does not (a moving object, a faulty sensor, a spike), and you want both parts.

**The parameter that matters.** ``outlier_alpha`` of :class:`~tensorstream.RobustOnlineNMF`:
larger values keep more of each frame in the background, smaller ones let more of it be
foreground.

Zhao & Tan, *Online Nonnegative Matrix Factorization with Outliers* (2017), Fig. 9, offline.
Frames are samples (a frame of ``h x w`` pixels is a vector of ``F = h w`` features). A static
background is low-rank; a moving object is sparse: the robust learner models frame ``i`` as
``W h_i + r_i`` with the background ``W h_i`` and the foreground ``r_i``. The video is an
offline stand-in for the paper's i2r clips: ``skimage.data.camera()`` resized to 48 x 64 (a smooth
synthetic image without scikit-image) with a moving 10 x 10 square of random texture, 200 frames,
streamed 10 times in random order (the paper's replication).

Printed: the background PSNR (``W_N h_i`` with the codes computed online, against the true
background) and the F1 score of the foreground support (``|r| > 0.05`` against the square), for
RobustOnlineNMF, for plain online NMF whose residual ``x - W h`` is thresholded instead, and
for :class:`~tensorstream.OnlineRobustPCA` with its defaults, whose ``background(X)`` is the
low-rank part refit without the pixels it flags (the foreground is ``x - background``).
Saved: a few frames with their backgrounds and foregrounds.

Usage::

    python examples/background_subtraction.py --out background_subtraction.png
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from tensorstream import OnlineNMF, OnlineRobustPCA, RobustOnlineNMF
from tensorstream.datasets import moving_patch_video, psnr, replicate, support_scores

BATCH = 5


def background_image() -> np.ndarray | None:
    try:
        from skimage.data import camera
        from skimage.transform import resize
    except ImportError:
        print("scikit-image is not installed: a synthetic background is used")
        return None
    return resize(camera() / 255.0, (48, 64), anti_aliasing=True)


def separate(model, stream):
    """Stream the frames; returns the online backgrounds and foregrounds, frame by frame."""
    backgrounds, foregrounds = [], []
    for start in range(0, len(stream), BATCH):
        batch = stream[start:start + BATCH]
        if isinstance(model, OnlineRobustPCA):
            # background(): the low-rank part refit without the entries flagged as outliers
            model.partial_fit(batch)
            background = np.asarray(model.background(batch))
            backgrounds.append(background)
            foregrounds.append(batch - background)
            continue
        if isinstance(model, RobustOnlineNMF):
            model.partial_fit(batch)
            codes, outliers = model.last_decomposition_  # the online h_t and r_t
        else:  # plain NMF: its step's codes (deterministic), foreground = thresholded residual
            fitted = hasattr(model, "loadings_")
            codes = model.transform(batch) if fitted else None
            model.partial_fit(batch)
            if codes is None:
                codes = model.transform(batch)
            outliers = batch - codes @ np.asarray(model.components_)
        backgrounds.append(codes @ np.asarray(model.components_))
        foregrounds.append(outliers)
    return np.concatenate(backgrounds), np.concatenate(foregrounds)


def plot(frames, results, masks, path, shape):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [0, 1, 2, 3]
    columns = 2 + 2 * len(results)
    fig, axes = plt.subplots(len(shown), columns, layout="constrained",
                             figsize=(1.45 * columns + 1.0, 1.2 * len(shown) + 0.8))
    for row, k in enumerate(shown):
        panels = [("frame", frames[k]), ("true foreground", masks[k])]
        for label, (background, foreground) in results.items():
            panels += [(f"{label}\nbackground", background[k]),
                       (f"{label}\n|foreground|", np.abs(foreground[k]))]
        for col, (title, image) in enumerate(panels):
            shown_image = axes[row, col].imshow(np.asarray(image, dtype=float).reshape(shape),
                                                cmap="gray", vmin=0, vmax=1)
            axes[row, col].set_xticks([])
            axes[row, col].set_yticks([])
            if row == 0:
                axes[row, col].set_title(title, fontsize=8)
        axes[row, 0].set_ylabel(f"frame {k}", fontsize=8)
    fig.colorbar(shown_image, ax=axes, shrink=0.7, label="pixel value")
    fig.suptitle("Robust learners against thresholded OnlineNMF residuals", fontsize=11)
    fig.savefig(path, dpi=120)
    print(f"saved {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    parser.add_argument("--out", default="background_subtraction.png", help="figure path")
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--components", type=int, default=5)
    parser.add_argument("--outlier-alpha-scale", type=float, default=3.0,
                        help="outlier_alpha = scale / sqrt(F); 1 is too small at F = 3072")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    frames, true_backgrounds, masks = moving_patch_video(background_image(),
                                                         n_frames=args.frames,
                                                         random_state=args.seed)
    shape = frames.shape[1:]
    X = frames.reshape(len(frames), -1)
    stream, source = replicate(X, args.copies, random_state=args.seed)
    truth_background = true_backgrounds.reshape(len(frames), -1)[source]
    truth_mask = masks.reshape(len(frames), -1)[source]
    learners = {
        # the paper's rule outlier_alpha = 1/sqrt(F) (raw units), scaled up: too small at this F
        "RobustOnlineNMF": RobustOnlineNMF(args.components,
                                           **{**RobustOnlineNMF.paper_params,
                                              "outlier_alpha_scale": args.outlier_alpha_scale,
                                              "batch_size": BATCH},
                                           random_state=args.seed),
        "OnlineNMF": OnlineNMF(args.components, batch_size=BATCH, column_bound=1.0,
                               random_state=args.seed),
        # defaults: each frame's outlier threshold follows its own residual scale
        "OnlineRobustPCA": OnlineRobustPCA(args.components, random_state=args.seed),
    }
    results = {}
    print(f"{len(stream)} frames of {shape[0]} x {shape[1]} pixels, "
          f"{args.components} components")
    for label, model in learners.items():
        begin = time.perf_counter()
        background, foreground = separate(model, stream)
        seconds = time.perf_counter() - begin
        quality = psnr(truth_background, background)
        f1 = support_scores(truth_mask, foreground, threshold=0.05)["f1"]
        print(f"{label:<16} {seconds:6.1f} s   background PSNR {quality:5.1f} dB   "
              f"foreground F1 {f1:.2f}")
        # the last copy of each of the first frames, for the figure
        last = {int(s): i for i, s in enumerate(source)}
        rows = [last[k] for k in range(4)]
        results[label] = (background[rows], foreground[rows])
    plot(X[:4], results, masks[:4], args.out, shape)


if __name__ == "__main__":
    main()
