"""Out of the box: every learner with its defaults, next to the closest peer with its defaults.

Nothing is tuned: each learner is built as ``Learner(n_components, random_state=0)`` and its
peer as ``Peer(n_components, random_state=0)`` (the number of components is the only choice,
the same for both); both see the same data in the same run, so the machine's load cancels out
in the ratios. Rerunning the script after a change of defaults regenerates the table.

Data (all ships offline with scikit-image, scikit-learn, statsmodels or this repository):

* ``faces``: scikit-image ``lfw_subset`` (200 faces, 25 x 25, in [0, 1]);
* ``faces+outliers``: the same with the robust NMF paper's outliers: 70% of the samples get
  10% of their pixels replaced by ``U[-1, 1]``, clipped to the data range [0, 1];
* ``digits``: scikit-learn ``load_digits`` (8 x 8, scaled to [0, 1]);
* ``patches``: 8 x 8 patches of scikit-image's ``astronaut`` (grey levels in [0, 1]);
* ``video``: a video-like stack of frames built from ``astronaut``: the grey image at half
  resolution, a 48 x 48 window panning 1 pixel per frame along a diagonal, under a slowly
  varying global brightness (frames ``(T, 48, 48)``; even frames train, odd frames are held out);
* ``topics``: a planted-topic sparse count corpus (``examples/topic_learning_kl.py``'s
  generator: 6 topics of 30 words among 800, documents of about 60 tokens);
* ``elnino``: statsmodels' El Nino sea-surface temperatures as a labelled
  ``xarray.DataArray`` (year x month); the last 15 years are held out.

Metrics (higher is better for all but "rel. error"): PSNR (dB) of the reconstruction of
held-out samples against the clean data; for ``faces+outliers`` the reconstruction of the
training faces themselves (denoising: the robust learners' task) against the clean faces;
top-8 topic purity (Hungarian matching of learned to planted topics); relative error
``||X - X_hat|| / ||X||`` on held-out samples; training time in seconds. Held-out codes of a
TensorLy CP model are nonnegative least squares against its dictionary (its own sample mode
covers the training samples only).

A row is flagged (``worse``) where we are clearly worse than the peer: more than 1 dB of PSNR
below it, a purity below 0.9 times its purity, or a relative error above 1.1 times its error.
The last column shows what our learner said while fitting (its ``LearningWarning`` messages,
shortened): codes all at a bound, dead atoms re-initialised, a rising objective.

Usage::

    python benchmarks/bench_defaults.py --quick     # smaller data, about 2 minutes
    python benchmarks/bench_defaults.py             # the table of docs/defaults.md
    python benchmarks/bench_defaults.py --only digits-passes   # why the digits row differs
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import time
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

#: components per data set (the one choice every row makes, the same for learner and peer)
N_COMPONENTS = {"faces": 25, "faces+outliers": 25, "digits": 16, "patches": 16, "video": 8,
                "topics": 6, "elnino": 3}


# -- data -----------------------------------------------------------------------------------


def faces() -> np.ndarray:
    from skimage.data import lfw_subset

    return np.asarray(lfw_subset(), dtype=float).reshape(200, -1)


def paper_outliers(X: np.ndarray, samples: float = 0.7, pixels: float = 0.1,
                   seed: int = 0) -> np.ndarray:
    """``samples`` of the rows get ``pixels`` of their entries replaced by ``U[-1, 1]``,
    clipped to the data's range (the robust online NMF paper's recipe)."""
    rng = np.random.default_rng(seed)
    noisy = X.copy()
    n, F = X.shape
    rows = rng.choice(n, int(round(samples * n)), replace=False)
    cols = np.argsort(rng.random((len(rows), F)), axis=1)[:, :int(round(pixels * F))]
    values = np.clip(rng.uniform(-1, 1, cols.shape), X.min(), X.max())
    noisy[rows[:, None], cols] = values
    return noisy


def digits() -> np.ndarray:
    from sklearn.datasets import load_digits

    return load_digits().data / 16.0


def grey_astronaut() -> np.ndarray:
    from skimage.color import rgb2gray
    from skimage.data import astronaut

    return rgb2gray(astronaut())


def patches(n: int) -> np.ndarray:
    from sklearn.feature_extraction.image import extract_patches_2d

    return extract_patches_2d(grey_astronaut(), (8, 8), max_patches=n, random_state=0)


def video(n_frames: int, size: int = 48) -> np.ndarray:
    """Frames of a window panning over the half-resolution astronaut, brightness varying."""
    image = grey_astronaut()[::2, ::2]
    t = np.arange(n_frames)
    corner = (t * (image.shape[0] - size - 1)) // max(n_frames - 1, 1)
    frames = np.stack([image[c:c + size, c // 2:c // 2 + size] for c in corner])
    brightness = 0.8 + 0.2 * np.sin(2 * np.pi * t / n_frames)
    return frames * brightness[:, None, None]


def topics(n_docs: int):
    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "topic_learning_kl.py"
    spec = importlib.util.spec_from_file_location("topic_learning_kl", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    corpus = module.planted_topic_corpus(n_docs=n_docs, n_words=800, n_topics=6,
                                         words_per_topic=30, doc_length=60.0, random_state=0)
    return corpus, module.match_topics


def elnino():
    import statsmodels.api as sm
    import xarray as xr

    frame = sm.datasets.elnino.load_pandas().data
    months = [c for c in frame.columns if c != "YEAR"]
    return xr.DataArray(frame[months].to_numpy(float), dims=("year", "month"),
                        coords={"year": frame["YEAR"].astype(int).to_numpy(), "month": months},
                        name="sst", attrs={"units": "degC"})


# -- metrics --------------------------------------------------------------------------------


def psnr(clean: np.ndarray, estimate: np.ndarray, peak: float = 1.0) -> float:
    mse = float(np.mean((np.asarray(clean) - np.asarray(estimate)) ** 2))
    return 10 * np.log10(peak ** 2 / mse)


def relative_error(X: np.ndarray, estimate: np.ndarray) -> float:
    return float(np.linalg.norm(np.asarray(X) - np.asarray(estimate)) / np.linalg.norm(X))


def nnls_reconstruct(W: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Samples ``X`` (rows) rebuilt from nonnegative least-squares codes against ``W``."""
    from scipy.optimize import nnls

    codes = np.stack([nnls(W, x)[0] for x in X])
    return codes @ W.T


#: what our learners said while fitting (LearningWarning messages), until the next row
_SAID: list[str] = []


def timed(fn):
    """``(fn(), seconds)``; the LearningWarnings it gives are kept for the row."""
    from tensorstream.engine import LearningWarning

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always", LearningWarning)
        begin = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - begin
    _SAID.extend(str(w.message) for w in record if issubclass(w.category, LearningWarning))
    return result, seconds


# -- the rows -------------------------------------------------------------------------------


def _flat(X) -> np.ndarray:
    X = np.asarray(X)
    return X.reshape(len(X), -1)


def online_psnr(learner, train, test, clean_test):
    model, seconds = timed(lambda: learner.fit(train))
    estimate = model.inverse_transform(model.transform(test))
    return psnr(_flat(clean_test), _flat(estimate)), seconds


def sklearn_psnr(peer, train, test, clean_test):
    model, seconds = timed(lambda: peer.fit(_flat(train)))
    codes = model.transform(_flat(test))
    return psnr(_flat(clean_test), codes @ model.components_), seconds


def tensorly_cp_psnr(train, test, rank):
    import tensorly as tl
    from tensorly.decomposition import non_negative_parafac_hals

    cp, seconds = timed(lambda: non_negative_parafac_hals(tl.tensor(train), rank,
                                                          random_state=0))
    W = tl.to_numpy(tl.tenalg.khatri_rao(cp.factors[1:]))
    return psnr(_flat(test), nnls_reconstruct(W, _flat(test))), seconds


def faces_rows(quick: bool) -> list[dict]:
    from sklearn.decomposition import NMF, MiniBatchNMF

    from tensorstream import OnlineNMF, RobustOnlineNMF
    from tensorstream.learners.robust_nmf_batch import RobustNMF

    X = faces()
    R = N_COMPONENTS["faces"]
    train, test = X[:150], X[150:]
    rows = [row("faces", "OnlineNMF", "PSNR held-out (dB)",
                online_psnr(OnlineNMF(R, random_state=0), train, test, test),
                "MiniBatchNMF", sklearn_psnr(MiniBatchNMF(R, random_state=0), train, test,
                                             test))]
    noisy = paper_outliers(X)
    note = f"PSNR vs clean (dB); noisy input {psnr(X, noisy):.1f}"
    peer = sklearn_psnr(MiniBatchNMF(R, random_state=0), noisy, noisy, X)
    rows.append(row("faces+outliers", "RobustOnlineNMF", note,
                    online_psnr(RobustOnlineNMF(R, random_state=0), noisy, noisy, X),
                    "MiniBatchNMF", peer))
    batch, seconds = timed(lambda: RobustNMF(R, random_state=0).fit(noisy))
    ours = psnr(X, np.asarray(batch.inverse_transform(batch.transform(noisy)))), seconds
    rows.append(row("faces+outliers", "RobustNMF", note, ours, "NMF",
                    sklearn_psnr(NMF(R, random_state=0), noisy, noisy, X)))
    rows += robust_pca_rows(X, noisy, R, note)
    return rows


def robust_pca_rows(X, noisy, R, note) -> list[dict]:
    import tensorly as tl
    from tensorly.decomposition import robust_pca

    from tensorstream import OnlineMaxNormMD, OnlineRobustPCA
    from tensorstream.learners.robust_pca import RobustPCA

    (low_rank, _), seconds = timed(lambda: robust_pca(tl.tensor(noisy)))
    peer = psnr(X, tl.to_numpy(low_rank)), seconds
    rows = [row("faces+outliers", name, note,
                online_psnr(cls(R, random_state=0), noisy, noisy, X), "tensorly robust_pca",
                peer)
            for name, cls in (("OnlineRobustPCA", OnlineRobustPCA),
                              ("OnlineMaxNormMD", OnlineMaxNormMD))]
    model, seconds = timed(lambda: RobustPCA(R).fit(noisy))
    rows.append(row("faces+outliers", "RobustPCA", note,
                    (psnr(X, np.asarray(model.low_rank_)), seconds), "tensorly robust_pca",
                    peer))
    return rows


def digits_rows(quick: bool) -> list[dict]:
    from sklearn.decomposition import MiniBatchDictionaryLearning, MiniBatchNMF

    from tensorstream import OnlineCPDL, OnlineNMF, VarianceReducedMF

    X = digits()[:600] if quick else digits()
    R = N_COMPONENTS["digits"]
    cut = int(0.8 * len(X))
    train, test = X[:cut], X[cut:]
    tensors = X.reshape(-1, 8, 8)
    rows = [row("digits", "OnlineNMF", "PSNR held-out (dB)",
                online_psnr(OnlineNMF(R, random_state=0), train, test, test), "MiniBatchNMF",
                sklearn_psnr(MiniBatchNMF(R, random_state=0), train, test, test)),
            row("digits", "VarianceReducedMF", "PSNR held-out (dB)",
                online_psnr(VarianceReducedMF(R, random_state=0), train, test, test),
                "MiniBatchDictionaryLearning",
                sklearn_psnr(MiniBatchDictionaryLearning(R, random_state=0), train, test,
                             test)),
            row("digits (8 x 8 samples)", "OnlineCPDL", "PSNR held-out (dB)",
                online_psnr(OnlineCPDL(R, random_state=0), tensors[:cut], tensors[cut:],
                            tensors[cut:]),
                "non_negative_parafac_hals", tensorly_cp_psnr(tensors[:cut], tensors[cut:], R))]
    return rows


def digits_passes_rows(quick: bool) -> list[dict]:
    """Why the digits row differs from ``bench_nmf.py``'s method-neutral evaluation.

    The same split as :func:`digits_rows`. First OnlineNMF at 10 passes and MiniBatchNMF's
    defaults, with every model's codes replaced by nonnegative least squares against its
    components (so a coder's inexactness at ``transform`` would show next to the 10-pass row).
    Then both learners at equal numbers of passes over the array (``max_iter``; MiniBatchNMF's
    default is 200, OnlineNMF's ``"auto"`` 100 on these 1,437 digits, it was 10), and OnlineNMF
    with its former weights ``1/t`` (``"balanced"``), which stall on repeated passes.
    """
    from sklearn.decomposition import MiniBatchNMF

    from tensorstream import OnlineNMF

    X = digits()[:600] if quick else digits()
    R = N_COMPONENTS["digits"]
    cut = int(0.8 * len(X))
    train, test = X[:cut], X[cut:]
    metric = "PSNR held-out (dB)"

    def refit(make):
        def run():
            model, seconds = timed(lambda: make().fit(train))
            components = np.asarray(model.components_)
            return psnr(test, nnls_reconstruct(components.T, test)), seconds
        return run()

    rows = [row("digits", "OnlineNMF(max_iter=10)", "PSNR held-out, NNLS codes (dB)",
                refit(lambda: OnlineNMF(R, max_iter=10, random_state=0)), "MiniBatchNMF",
                refit(lambda: MiniBatchNMF(R, random_state=0)))]
    for passes in (10, 50, 200):
        rows.append(row(f"digits, {passes} passes", f"OnlineNMF(max_iter={passes})", metric,
                        online_psnr(OnlineNMF(R, max_iter=passes, random_state=0), train, test,
                                    test),
                        f"MiniBatchNMF(max_iter={passes})",
                        sklearn_psnr(MiniBatchNMF(R, max_iter=passes, random_state=0), train,
                                     test, test)))
    rows.append(row("digits, 200 passes", "OnlineNMF(max_iter=200, weights='balanced')", metric,
                    online_psnr(OnlineNMF(R, max_iter=200, weights="balanced", random_state=0),
                                train, test, test),
                    "MiniBatchNMF(max_iter=200)",
                    sklearn_psnr(MiniBatchNMF(R, max_iter=200, random_state=0), train, test,
                                 test)))
    return rows


def patches_rows(quick: bool) -> list[dict]:
    from sklearn.decomposition import MiniBatchDictionaryLearning

    from tensorstream import OnlineCPDL

    P = patches(1000 if quick else 8000)
    R = N_COMPONENTS["patches"]
    cut = int(0.8 * len(P))
    return [row("patches (astronaut 8 x 8)", "OnlineCPDL", "PSNR held-out (dB)",
                online_psnr(OnlineCPDL(R, random_state=0), P[:cut], P[cut:], P[cut:]),
                "MiniBatchDictionaryLearning",
                sklearn_psnr(MiniBatchDictionaryLearning(R, random_state=0), P[:cut], P[cut:],
                             P[cut:]))]


def video_rows(quick: bool) -> list[dict]:
    from tensorstream import OnlineCPDL

    V = video(80 if quick else 240)
    R = N_COMPONENTS["video"]
    train, test = V[0::2], V[1::2]
    return [row("video (frames 48 x 48)", "OnlineCPDL", "PSNR held-out frames (dB)",
                online_psnr(OnlineCPDL(R, random_state=0), train, test, test),
                "non_negative_parafac_hals", tensorly_cp_psnr(train, test, R))]


def topics_rows(quick: bool) -> list[dict]:
    from sklearn.decomposition import MiniBatchNMF

    from tensorstream import OnlineDivergenceNMF

    corpus, match = topics(2000 if quick else 6000)
    R = N_COMPONENTS["topics"]

    def purity(components):
        return float(np.mean(match(np.asarray(components), corpus.topic_words, top=8)[1]))

    ours, seconds = timed(lambda: OnlineDivergenceNMF(R, random_state=0).fit(corpus.X))
    peer, peer_seconds = timed(lambda: MiniBatchNMF(R, beta_loss="kullback-leibler",
                                                    random_state=0).fit(corpus.X))
    return [row("topics (sparse counts)", "OnlineDivergenceNMF", "top-8 topic purity",
                (purity(ours.components_), seconds), "MiniBatchNMF(KL)",
                (purity(peer.components_), peer_seconds))]


def elnino_rows(quick: bool) -> list[dict]:
    from sklearn.decomposition import NMF

    from tensorstream import OnlineCPDL

    da = elnino()
    R = N_COMPONENTS["elnino"]
    train, test = da.isel(year=slice(None, -15)), da.isel(year=slice(-15, None))
    model, seconds = timed(lambda: OnlineCPDL(R, random_state=0).fit(train, sample_dim="year"))
    ours = relative_error(test.values, model.reconstruct(test).values), seconds
    peer, peer_seconds = timed(lambda: NMF(R, random_state=0).fit(train.values))
    estimate = peer.transform(test.values) @ peer.components_
    return [row("elnino (DataArray year x month)", "OnlineCPDL", "rel. error held-out",
                ours, "NMF", (relative_error(test.values, estimate), peer_seconds))]


# -- the table ------------------------------------------------------------------------------


def row(data: str, learner: str, metric: str, ours: tuple, peer_name: str,
        peer: tuple) -> dict:
    said = list(_SAID)
    _SAID.clear()
    return {"data": data, "learner": learner, "metric": metric, "ours": ours[0],
            "time": ours[1], "peer": peer_name, "peer_value": peer[0], "peer_time": peer[1],
            "said": said}


def clearly_worse(r: dict) -> bool:
    ours, peer = r["ours"], r["peer_value"]
    if "rel. error" in r["metric"]:
        return ours > 1.1 * peer
    if "dB" in r["metric"]:
        return ours < peer - 1.0
    return ours < 0.9 * peer


def markdown(rows: list[dict]) -> str:
    """The table of docs/defaults.md: ours and the peer's metric and seconds side by side
    in one cell each (the page's column is narrow), what our learner said in the last."""
    lines = ["| data | learner (defaults) | peer (defaults) | metric | ours / peer | "
             "seconds ours / peer | notes |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        flag = ["**worse**"] if clearly_worse(r) else []
        said = sorted({m.split(": ", 1)[-1][:60] + "..." for m in r["said"]})
        lines.append(f"| {r['data']} | {r['learner']} | {r['peer']} | {r['metric']} | "
                     f"{r['ours']:.3g} / {r['peer_value']:.3g} | "
                     f"{r['time']:.2f} / {r['peer_time']:.2f} | {'; '.join(flag + said)} |")
    return "\n".join(lines)


SECTIONS = {"faces": faces_rows, "digits": digits_rows, "patches": patches_rows,
            "video": video_rows, "topics": topics_rows, "elnino": elnino_rows}
#: sections that explain a row, run only when named in ``--only``
DIAGNOSTICS = {"digits-passes": digits_passes_rows}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller data (about 2 minutes)")
    parser.add_argument("--only", nargs="*", choices=sorted({**SECTIONS, **DIAGNOSTICS}),
                        help="run these data sets only (or the diagnostic digits-passes)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1)")
    args = parser.parse_args(argv)
    rows = []
    with threadpool_limits(args.threads), warnings.catch_warnings():
        # the peers' convergence warnings are part of "defaults" but would drown the table
        warnings.simplefilter("ignore")
        for name in args.only or SECTIONS:
            rows += {**SECTIONS, **DIAGNOSTICS}[name](args.quick)
            print(f"[{name} done]", flush=True)
    print(markdown(rows))
    return rows


if __name__ == "__main__":
    main()
