"""Corruption benchmark of the robust learners on real images (issue #31).

Data that ships offline, scaled to [0, 1]:

- ``faces``: the 100 faces of ``skimage.data.lfw_subset`` (25 x 25, 625 features), K = 25;
- ``patches``: 8 x 8 patches of ``camera``, ``astronaut`` and ``coffee`` (grey, halved), K = 16;
- ``video``: frames of ``camera`` (halved twice, 64 x 64) under a slowly changing light, with a
  real object (a crop of ``coffee``'s cup) moving across it; K = 3.

Corruption classes, each at two strengths (``weak`` / ``strong``), on half of the samples
(every frame of the video carries its moving object):

- ``block-bright`` / ``block-dark``: one square block at 1 or 0 covering 7% / 15% of a sample;
- ``occluder``: the same square filled with a real object's texture (a window of ``coffee``,
  grey values inside the range, at no sample's extremes: saturation does not give it away);
- ``salt-pepper``: 5% / 15% of a sample's pixels at 0 or 1;
- ``stripes``: 1 / 3 dead (0) or saturated (1) rows or columns (sensor defects);
- ``spikes``: 2% / 5% of a sample's pixels plus ``|Cauchy|`` spikes (scale 2, at most 50);
- ``foreground`` (video only): the moving object.

Columns: the corrupted input itself, plain ``OnlineNMF``, scikit-learn's ``MiniBatchNMF``,
every robust learner with its defaults (``RobustOnlineNMF``, ``OnlineRobustPCA``,
``OnlineMaxNormMD``, the batch ``RobustNMF``), batch PCP (ours: ``RobustPCA``; TensorLy's
``robust_pca``) and the clean ceiling (scikit-learn's ``NMF`` fitted to the clean data). Each
cell is the PSNR (dB) against the clean data of the method's output on the corrupted data:
for the plain learners their reconstruction, for the robust ones their ``denoise`` (the
entries they flag as outliers replaced by their low-rank part, the others as observed; PCP's
by the same rule on its sparse part; ``--low-rank``: the low-rank part alone); the online
learners stream the samples once per pass with their own
``max_iter`` and reconstruct the same samples by ``transform`` (a new corrupted sample gets the
same treatment). For the video, the cell is the F1 score of the foreground found as the pixels
farther than 0.05 from the method's low-rank part (the background it learned) against the
object's pixels (those farther than 0.05 from the clean background), and the time is given as
frames per second of fit + transform. The background is a learner's ``background(X)`` where it
has one (``OnlineRobustPCA``, ``OnlineMaxNormMD``: the low-rank part refit to the entries
they do not flag, which is what a user subtracts), its low-rank part otherwise. Times are
wall seconds on the machine the benchmark runs on, BLAS on one thread. The last lines print
the ratios the issue's goals name: the best online robust learner against the input, plain
OnlineNMF and our PCP, and its time against PCP's.

Usage::

    python benchmarks/bench_robust.py --quick        # one data set per kind, small (~1 min)
    python benchmarks/bench_robust.py --small        # every class, weak strength only
    python benchmarks/bench_robust.py --video        # the video alone, 120 frames (~1 min)
    python benchmarks/bench_robust.py --video --frames 480   # a longer video (a slower object)
    python benchmarks/bench_robust.py                # everything (the table of docs/robustness.md)
    python benchmarks/bench_robust.py --pcp          # only batch PCP, ours against TensorLy's
    python benchmarks/bench_robust.py --pcp --cpu-time   # the same timed by CPU seconds
    python benchmarks/bench_robust.py --scale 20000 100000 --cpu-time
        # the online robust learners against our PCP on 20,000 and 100,000 patches

``--scale N [N ...]`` measures the time goal where online learning is meant to pay: ``N``
patches (the three images hold some 40,000 distinct 8 x 8 positions, so 100,000 repeat
some), the weak strength of ``--kinds`` (default salt-pepper), the online robust learners and
our PCP only (no ceiling: a batch NMF of the clean data costs more than the rest), and each
learner's time as a fraction of PCP's; ``--patch-size S`` takes S x S patches (K = 16 still):
both sides are linear in N, PCP's iterations cost ``N p^2`` and a robust coding ``N p K``, so
the fraction falls with the pixels ``p = S^2``, not with N. ``--kinds`` narrows the classes of
any run.
"""

from __future__ import annotations

import argparse
import functools
import time
import warnings
from collections.abc import Callable

import numpy as np
from threadpoolctl import threadpool_limits

from tensorstream.core.backend import to_numpy

# -- clean data --------------------------------------------------------------------------------


def faces(n: int = 100) -> np.ndarray:
    """The lfw faces, one per row, each scaled to [0, 1]."""
    from skimage.data import lfw_subset

    X = lfw_subset()[:n].reshape(n, -1).astype(float)
    X -= X.min(axis=1, keepdims=True)
    return X / X.max(axis=1, keepdims=True)


def patches(n: int = 1500, size: int = 8, seed: int = 0) -> np.ndarray:
    """``n`` patches of three grey images (halved), one per row, in [0, 1]."""
    from skimage import data
    from skimage.color import rgb2gray
    from skimage.transform import rescale

    rng = np.random.default_rng(seed)
    images = [data.camera() / 255.0, rgb2gray(data.astronaut()), rgb2gray(data.coffee())]
    rows = []
    for k, image in enumerate(images):
        image = rescale(image, 0.5, anti_aliasing=True)
        count = n // len(images) + (k < n % len(images))
        i = rng.integers(0, image.shape[0] - size, count)
        j = rng.integers(0, image.shape[1] - size, count)
        rows += [image[a:a + size, b:b + size].ravel() for a, b in zip(i, j)]
    return np.clip(np.array(rows), 0, 1)


#: a pixel is foreground where it differs from the background by more than this (the truth
#: against the clean background, a method's guess against its low-rank part)
FOREGROUND = 0.05


def video(n_frames: int = 120, side: int = 64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(clean, corrupted, foreground)``: a still of ``camera`` under a slowly changing
    light (the low-rank background), and the same frames with a crop of ``coffee``'s cup
    moving across, the object's pixels marked in ``foreground``."""
    from skimage import data
    from skimage.color import rgb2gray
    from skimage.transform import resize

    background = resize(data.camera() / 255.0, (side, side), anti_aliasing=True)
    cup = resize(rgb2gray(data.coffee())[60:300, 180:460], (16, 18), anti_aliasing=True)
    light = 0.85 + 0.15 * np.sin(np.linspace(0, 2 * np.pi, n_frames))
    clean = light[:, None, None] * background[None] * 0.9
    corrupted, foreground = clean.copy(), np.zeros(clean.shape, dtype=bool)
    h, w = cup.shape
    for t in range(n_frames):
        top = int(8 + 30 * t / n_frames)
        left = int((side - w) * t / max(n_frames - 1, 1))
        corrupted[t, top:top + h, left:left + w] = cup
        foreground[t, top:top + h, left:left + w] = \
            np.abs(cup - clean[t, top:top + h, left:left + w]) > FOREGROUND
    return (clean.reshape(n_frames, -1), corrupted.reshape(n_frames, -1),
            foreground.reshape(n_frames, -1))


# -- corruption --------------------------------------------------------------------------------

STRENGTHS = {"weak": 0, "strong": 1}


def corrupt(X: np.ndarray, kind: str, strength: str, shape: tuple[int, int],
            seed: int = 0) -> np.ndarray:
    """A corrupted copy of ``X`` (one sample a row, images of ``shape``): the class ``kind``
    on every other sample, at ``strength``."""
    rng = np.random.default_rng(seed)
    s = STRENGTHS[strength]
    out = X.copy()
    images = out.reshape(len(X), *shape)
    for i in range(0, len(X), 2):
        CORRUPTIONS[kind](images[i], s, rng)
    return out


def _block(image: np.ndarray, s: int, rng, value: float) -> None:
    side = max(1, int(round(np.sqrt((0.07, 0.15)[s] * image.size))))
    a = rng.integers(0, image.shape[0] - side + 1)
    b = rng.integers(0, image.shape[1] - side + 1)
    image[a:a + side, b:b + side] = value


def _occluder(image: np.ndarray, s: int, rng) -> None:
    """A real object over the sample: a random 60 x 60 window of ``coffee`` (grey), resized
    to the block's side."""
    from skimage.transform import resize

    texture = _coffee_grey()
    side = max(1, int(round(np.sqrt((0.07, 0.15)[s] * image.size))))
    a = rng.integers(0, texture.shape[0] - 60)
    b = rng.integers(0, texture.shape[1] - 60)
    patch = resize(texture[a:a + 60, b:b + 60], (side, side), anti_aliasing=True)
    a = rng.integers(0, image.shape[0] - side + 1)
    b = rng.integers(0, image.shape[1] - side + 1)
    image[a:a + side, b:b + side] = patch


@functools.cache
def _coffee_grey() -> np.ndarray:
    from skimage import data
    from skimage.color import rgb2gray

    return rgb2gray(data.coffee())


def _salt_pepper(image: np.ndarray, s: int, rng) -> None:
    hit = rng.random(image.shape) < (0.05, 0.15)[s]
    image[hit] = rng.integers(0, 2, int(hit.sum()))


def _stripes(image: np.ndarray, s: int, rng) -> None:
    for _ in range((1, 3)[s]):
        value = float(rng.integers(0, 2))
        if rng.random() < 0.5:
            image[rng.integers(0, image.shape[0])] = value
        else:
            image[:, rng.integers(0, image.shape[1])] = value


def _spikes(image: np.ndarray, s: int, rng) -> None:
    hit = rng.random(image.shape) < (0.02, 0.05)[s]
    image[hit] += np.minimum(2.0 * np.abs(rng.standard_cauchy(int(hit.sum()))), 50.0)


CORRUPTIONS: dict[str, Callable] = {
    "block-bright": lambda image, s, rng: _block(image, s, rng, 1.0),
    "block-dark": lambda image, s, rng: _block(image, s, rng, 0.0),
    "occluder": _occluder,
    "salt-pepper": _salt_pepper,
    "stripes": _stripes,
    "spikes": _spikes,
}


# -- methods -----------------------------------------------------------------------------------


def psnr(estimate: np.ndarray, clean: np.ndarray) -> float:
    """Peak signal-to-noise ratio (dB) against ``clean``, data in [0, 1]."""
    mse = float(np.mean((estimate - clean) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(1.0 / mse)


#: what a robust method's cell measures: ``"denoise"`` (its ``denoise`` output: the entries it
#: flags replaced by its low-rank part, the others as observed; for PCP the same rule on its
#: sparse part) or ``"low-rank"`` (its low-rank part alone, as for the plain learners);
#: the video's rows use ``"background"``: ``background(X)`` where a learner has it (the
#: low-rank part refit without the entries it flags), its low-rank part otherwise
OUTPUT = {"kind": "denoise"}


def _cleaned(X: np.ndarray, low_rank: np.ndarray, outliers: np.ndarray) -> np.ndarray:
    """The output a cell measures (``OUTPUT``), from a method's parts."""
    if OUTPUT["kind"] == "low-rank":
        return low_rank
    return np.where(outliers == 0, X, low_rank)


def _online(cls: type, **fixed: object) -> Callable:
    """Fit ``cls`` (defaults, ``random_state=0``) on the data; its output and low-rank part
    (None where the output is ``denoise``: the cell measures that alone, and a learner is not
    timed for a second coding of every sample that nothing reads; PCP gives both parts from
    one fit)."""
    def run(X: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray | None]:
        model = cls(K, random_state=0, **fixed).fit(X)
        if OUTPUT["kind"] == "background" and hasattr(model, "background"):
            background = to_numpy(model.background(X))  # what a user subtracts
            return background, background
        if OUTPUT["kind"] == "denoise" and hasattr(model, "denoise"):
            return to_numpy(model.denoise(X)), None
        low_rank = to_numpy(model.inverse_transform(model.transform(X)))
        return low_rank, low_rank
    return run


def _minibatch_nmf(X: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.decomposition import MiniBatchNMF

    model = MiniBatchNMF(K, random_state=0, max_iter=200)
    low_rank = model.inverse_transform(model.fit_transform(X))
    return low_rank, low_rank


def _pcp_ours(X: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray]:
    from tensorstream.learners.robust_pca import RobustPCA

    model = RobustPCA().fit(X)
    low_rank = to_numpy(model.low_rank_)
    return _cleaned(X, low_rank, to_numpy(model.sparse_)), low_rank


def _pcp_tensorly(X: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray]:
    from tensorly.decomposition import robust_pca

    low_rank, sparse = robust_pca(X, reg_E=1 / np.sqrt(max(X.shape)), reg_J=0.5, verbose=0)
    low_rank = np.asarray(low_rank)
    return _cleaned(X, low_rank, np.asarray(sparse)), low_rank


#: the batch PCP columns, which ``--pcp`` runs alone
PCP = ("PCP (ours)", "PCP (TensorLy)")

#: the columns :func:`methods` runs (``--pcp`` narrows them to :data:`PCP`)
SELECTED: dict[str, tuple[str, ...] | None] = {"columns": None}


def methods() -> dict[str, Callable]:
    """Every column but the input and the ceiling, by name (those selected)."""
    from tensorstream.learners.maxnorm import OnlineMaxNormMD
    from tensorstream.learners.nmf import OnlineNMF
    from tensorstream.learners.robust_nmf import RobustOnlineNMF
    from tensorstream.learners.robust_nmf_batch import RobustNMF
    from tensorstream.learners.robust_pca import OnlineRobustPCA

    table = {"OnlineNMF": _online(OnlineNMF), "MiniBatchNMF": _minibatch_nmf,
             "RobustOnlineNMF": _online(RobustOnlineNMF),
             "OnlineRobustPCA": _online(OnlineRobustPCA),
             "OnlineMaxNormMD": _online(OnlineMaxNormMD), "RobustNMF": _online(RobustNMF),
             "PCP (ours)": _pcp_ours, "PCP (TensorLy)": _pcp_tensorly}
    chosen = SELECTED["columns"]
    return table if chosen is None else {name: table[name] for name in chosen}


#: the online robust learners, whose best the goals compare
ONLINE_ROBUST = ("RobustOnlineNMF", "OnlineRobustPCA", "OnlineMaxNormMD")


def ceiling(X: np.ndarray, K: int) -> np.ndarray:
    """A rank-``K`` NMF of the clean data (what no method fitted to corrupted data beats)."""
    from sklearn.decomposition import NMF

    model = NMF(K, init="nndsvda", max_iter=500, random_state=0)
    return model.inverse_transform(model.fit_transform(X))


def timed(run: Callable, *args: object) -> tuple[object, float]:
    """``(result, seconds)``: wall seconds, or with ``--cpu-time`` the process's CPU seconds
    (steadier on a shared machine: BLAS runs on one thread, so they are the work done)."""
    clock = time.process_time if CLOCK["cpu"] else time.perf_counter
    tic = clock()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run(*args)
    return result, clock() - tic


#: ``--cpu-time`` sets ``cpu``: :func:`timed` reads the process's CPU clock
CLOCK = {"cpu": False}


def f1(difference: np.ndarray, truth: np.ndarray) -> float:
    """F1 of the support ``|difference| > FOREGROUND`` against the true foreground."""
    found = np.abs(difference) > FOREGROUND
    hits = float(np.sum(found & truth))
    return 0.0 if hits == 0 else 2 * hits / (found.sum() + truth.sum())


# -- the runs ----------------------------------------------------------------------------------


def image_rows(sets: dict, kinds: list[str], strengths: list[str]) -> list[dict]:
    """One row per (data set, class, strength): PSNR and seconds of every column."""
    rows = []
    table = methods()
    for name, (X, K, shape) in sets.items():
        # --pcp compares the two PCPs only: no ceiling to fit
        clean_ceiling = psnr(ceiling(X, K), X) if SELECTED["columns"] is None else np.nan
        for kind in kinds:
            for strength in strengths:
                Xc = corrupt(X, kind, strength, shape)
                row = {"data": name, "class": kind, "strength": strength,
                       "input": (psnr(Xc, X), 0.0),
                       "ceiling": (clean_ceiling, 0.0)}
                for method, run in table.items():
                    (output, _), seconds = timed(run, Xc, K)
                    row[method] = (psnr(output, X), seconds)
                rows.append(row)
                print(format_row(row), flush=True)
    return rows


#: the columns of ``--scale``: the online robust learners and the PCP they are timed against
SCALE_COLUMNS = ONLINE_ROBUST + ("PCP (ours)",)


def scale_rows(sizes: list[int], kinds: list[str], side: int = 8) -> list[dict]:
    """One row per (number of patches, class) at the weak strength: PSNR and seconds of the
    online robust learners and of our PCP (:data:`SCALE_COLUMNS`) on ``side x side``
    patches."""
    rows = []
    table = methods()
    for n in sizes:
        X = patches(n, size=side)
        for kind in kinds:
            Xc = corrupt(X, kind, "weak", (side, side))
            row = {"data": f"patches {n}" + ("" if side == 8 else f" ({side} x {side})"),
                   "class": kind, "strength": "weak",
                   "input": (psnr(Xc, X), 0.0)}
            for method in SCALE_COLUMNS:
                (output, _), seconds = timed(table[method], Xc, 16)
                row[method] = (psnr(output, X), seconds)
            rows.append(row)
            print(format_row(row), flush=True)
    return rows


def scale_ratios(rows: list[dict]) -> None:
    """Each online robust learner's time as a fraction of PCP's (the goal: <= 0.05 for the
    best one) and its PSNR against PCP's, one line per row."""
    print("\nonline robust learners against our PCP (time as a fraction of PCP's; dB):")
    for row in rows:
        pcp, pcp_seconds = row["PCP (ours)"]
        cells = [f"{name} {row[name][1] / pcp_seconds:.3f} ({row[name][0] - pcp:+.2f} dB)"
                 for name in ONLINE_ROBUST]
        best = max(ONLINE_ROBUST, key=lambda name: row[name][0])
        print(f"  {row['data']}/{row['class']}: PCP {pcp_seconds:.2f} s; " + ", ".join(cells)
              + f"; best {best} {row[best][1] / pcp_seconds:.3f} (<= 0.05)")


def video_row(n_frames: int) -> dict:
    """F1 of the foreground support and frames per second of every method with outliers."""
    clean, corrupted, truth = video(n_frames)
    row = {"data": "video", "class": "foreground", "strength": "-"}
    # the background only (no denoise to time): a learner's background(X) where it has one
    kind, OUTPUT["kind"] = OUTPUT["kind"], "background"
    try:
        for method, run in methods().items():
            (_, background), seconds = timed(run, corrupted, 3)
            row[method] = (f1(corrupted - background, truth), n_frames / seconds)
    finally:
        OUTPUT["kind"] = kind
    print(format_row(row, unit="F1 / fps"), flush=True)
    return row


COLUMNS = ("input", "OnlineNMF", "MiniBatchNMF", "RobustOnlineNMF", "OnlineRobustPCA",
           "OnlineMaxNormMD", "RobustNMF", "PCP (ours)", "PCP (TensorLy)", "ceiling")


def format_row(row: dict, unit: str = "dB (s)") -> str:
    cells = []
    for column in COLUMNS:
        if column not in row:
            cells.append("-")
            continue
        value, seconds = row[column]
        cells.append(f"{value:.2f}" if column in ("input", "ceiling") and unit == "dB (s)"
                     else f"{value:.2f} ({seconds:.1f})")
    return f"| {row['data']} | {row['class']} | {row['strength']} | " + " | ".join(cells) + " |"


def header() -> str:
    names = " | ".join(COLUMNS)
    return f"| data | class | strength | {names} |\n|" + "---|" * (3 + len(COLUMNS))


def pcp_ratios(rows: list[dict], video: dict) -> None:
    """Ours against TensorLy's PCP, one line per row (the goal of issue #31: <= 0.5x its time
    within 0.05 dB)."""
    print("\nbatch PCP, ours against TensorLy's (dB, time ratio):")
    for row in rows:
        (ours, t_ours), (theirs, t_theirs) = row["PCP (ours)"], row["PCP (TensorLy)"]
        print(f"  {row['data']}/{row['class']}/{row['strength']}: {ours - theirs:+.3f} dB, "
              f"time {t_ours / t_theirs:.2f}x ({t_ours:.2f} s / {t_theirs:.2f} s)")
    (ours, fps_ours), (theirs, fps_theirs) = video["PCP (ours)"], video["PCP (TensorLy)"]
    print(f"  video: F1 {ours - theirs:+.4f}, time {fps_theirs / fps_ours:.2f}x")
    times = [row["PCP (ours)"][1] / row["PCP (TensorLy)"][1] for row in rows]
    print(f"  time ratio over the image rows: median {np.median(times):.2f}x, "
          f"worst {max(times):.2f}x")


def ratios(rows: list[dict], video: dict | None) -> None:
    """The goals of issue #31, one line per row."""
    print("\nbest online robust learner against the goals (dB; time as a fraction of PCP's):")
    for row in rows:
        best = max(ONLINE_ROBUST, key=lambda name: row[name][0])
        value, seconds = row[best]
        print(f"  {row['data']}/{row['class']}/{row['strength']}: {best} "
              f"input {value - row['input'][0]:+.2f} (>= +2), "
              f"OnlineNMF {value - row['OnlineNMF'][0]:+.2f} (>= +1.5), "
              f"PCP {value - row['PCP (ours)'][0]:+.2f} (>= -0.5), "
              f"time {seconds / row['PCP (ours)'][1]:.3f} (<= 0.05); "
              f"PCP ours - TensorLy {row['PCP (ours)'][0] - row['PCP (TensorLy)'][0]:+.2f} dB, "
              f"time {row['PCP (ours)'][1] / row['PCP (TensorLy)'][1]:.2f}x")
    if video is not None:
        best = max(ONLINE_ROBUST, key=lambda name: video[name][0])
        f, fps = video[best]
        print(f"  video: {best} F1 {f:.3f} vs PCP {video['PCP (ours)'][0]:.3f} (>=), "
              f"fps {fps / video['PCP (ours)'][1]:.1f}x PCP's (>= 20)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="faces and video, two classes")
    size.add_argument("--small", action="store_true", help="every class, weak strength only")
    size.add_argument("--video", action="store_true", help="the video alone, 120 frames")
    parser.add_argument("--frames", type=int, default=None, metavar="N",
                        help="the video's length (default 120; 60 with --quick): the object "
                             "crosses once whatever N, so a longer video shows it slower")
    parser.add_argument("--pcp", action="store_true",
                        help="only batch PCP, ours against TensorLy's, every data set")
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1)")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time by the process's CPU clock (a shared machine's load aside)")
    parser.add_argument("--low-rank", action="store_true",
                        help="measure the robust methods' low-rank part, not their denoise output")
    size.add_argument("--scale", type=int, nargs="+", metavar="N",
                      help="the online robust learners against our PCP on N patches (weak)")
    parser.add_argument("--kinds", nargs="+", choices=list(CORRUPTIONS), metavar="KIND",
                        help=f"the corruption classes to run, of {', '.join(CORRUPTIONS)}")
    parser.add_argument("--patch-size", type=int, default=8, metavar="S",
                        help="--scale: S x S patches (default 8; PCP's cost grows as S^4)")
    args = parser.parse_args(argv)
    if args.frames is not None and args.frames < 2:
        parser.error(f"--frames takes 2 frames or more, got {args.frames}")
    if args.frames is not None and args.scale is not None:
        parser.error("--frames is the video's length: --scale runs no video")
    OUTPUT["kind"] = "low-rank" if args.low_rank else "denoise"
    SELECTED["columns"] = PCP if args.pcp else None
    CLOCK["cpu"] = args.cpu_time
    if args.scale is not None:
        if min(args.scale) < 1:
            parser.error(f"--scale takes positive numbers of patches, got {args.scale}")
        if not 4 <= args.patch_size <= 64:  # coffee, the smallest image halved, is 200 high
            parser.error(f"--patch-size takes 4 to 64 pixels, got {args.patch_size}")
        with threadpool_limits(args.threads):
            print(header())
            rows = scale_rows(args.scale, args.kinds or ["salt-pepper"], args.patch_size)
        scale_ratios(rows)
        return
    kinds, strengths = args.kinds or list(CORRUPTIONS), list(STRENGTHS)
    sets = {"faces": (faces(), 25, (25, 25)), "patches": (patches(), 16, (8, 8))}
    n_frames = 120
    if args.quick:
        kinds, strengths, n_frames = args.kinds or ["block-bright", "salt-pepper"], ["strong"], 60
        sets = {"faces": sets["faces"]}
    elif args.small:
        strengths = ["weak"]
    elif args.video:
        sets = {}
    n_frames = args.frames or n_frames
    with threadpool_limits(args.threads):
        print(header())
        rows = image_rows(sets, kinds, strengths)
        row = video_row(n_frames)
    (pcp_ratios if args.pcp else ratios)(rows, row)


if __name__ == "__main__":
    main()
