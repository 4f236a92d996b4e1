"""OnlineDivergenceNMF(KL) vs scikit-learn's MiniBatchNMF(KL) and NMF(mu, KL).

Two data sets, each split into training and held-out documents (10%, at most 2000):

(a) ``sparse``: a planted-topic count corpus (``examples/topic_learning_kl.py``'s generator),
    ``--n-docs`` x ``--n-words`` (default 50,000 x 5,000) at about ``--density`` nonzeros
    (default 0.5%), ``--rank`` planted topics, as scipy.sparse CSR;
(b) ``dense``: Zhao, Tan & Xu's synthetic KL data (section VIII-D, scaled): ``W``, ``H`` shifted
    half-normal, counts ``Poisson(W H)`` (``--dense-docs`` x ``--dense-features``);
(c) ``tensor``: a count tensor, ``--tensor-samples`` samples of shape ``--tensor-shape``,
    Poisson counts (mean 3) of a planted nonnegative CP model of rank ``--rank`` with gamma(0.5)
    factors. ``OnlineDivergenceNMF(loss="kl")`` given the tensor samples learns CP atoms (the
    "CP(kl)" rows, formerly ``OnlineCPDL(loss="kl")``, with its coding defaults); the other
    methods see the unfolded matrix (samples x ``I J``), and every dictionary is evaluated as
    that matrix's components (a CP atom unfolded: ``vec(u o v)``). The CP learner starts from
    its own random loadings (a CP dictionary cannot start from the others' matrix).

All methods learn ``--rank`` components. ``OnlineDivergenceNMF`` streams CSR (or dense)
mini-batches through ``partial_fit`` for up to ``--epochs`` passes; ``MiniBatchNMF.fit`` and
``NMF(solver="mu").fit`` are stopped after 1, 2, 4, ... passes / iterations, each run timed
from the same start (its users' time to an objective), until the next run would exceed
``--budget`` seconds; the online run stops at the budget.

Evaluator (the same for every method, outside the timed region): the held-out objective is the
mean per-document KL ``d(x || h W)`` with the codes ``h`` refitted at the method's fixed
dictionary by KL multiplicative updates from a flat start, until the objective changes by less
than 1e-7 relative (at most 2000 iterations); MU on the codes is invariant to the scale of the
dictionary, so the learners' different normalisations do not matter. Target rule: the *worst*
of the methods' best held-out objectives (so that every method reaches it); printed: each
method's time to reach the target, its best objective, training samples per second (samples
processed / training seconds), peak traced memory (``tracemalloc`` in a separate short run: 5
mini-batches, or one pass / iteration; what the method allocates, not the training matrix
allocated before), and the ratios
ours / MiniBatchNMF's (< 1: ours is faster). Then OnlineDivergenceNMF's
``transform`` of held-out documents: its time and code error at ``transform_tol`` and at the
training step's ``code_tol``.

BLAS threads are limited to ``--threads`` (default 1) for every method alike.

Usage::

    python benchmarks/bench_divergence.py --quick          # small sizes, < 1 min
    python benchmarks/bench_divergence.py                  # 50,000 x 5,000 sparse + dense
    python benchmarks/bench_divergence.py --n-docs 10000 --n-words 2000 --budget 60
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import math
import pathlib
import time
import tracemalloc
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.decomposition import NMF, MiniBatchNMF
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from tensorstream.coders.divergence import code_divergence_matrix, code_divergence_sparse
from tensorstream.core.dictionary import dictionary_matrix
from tensorstream.learners.divergence_nmf import OnlineDivergenceNMF


def _example(name: str):
    """Import a sibling example script (the corpus generator lives with its example)."""
    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- data -----------------------------------------------------------------------------------------


def sparse_corpus(n_docs: int, n_words: int, density: float, rank: int, seed: int):
    """Planted topics, ``rank`` of them, 5% of the vocabulary each (at least 10 words)."""
    generate = _example("topic_learning_kl").planted_topic_corpus
    per_topic = max(10, min(n_words // 20, n_words // rank))
    # distinct words per document ~ doc_length (few repeats at these densities)
    corpus = generate(n_docs, n_words, rank, per_topic, doc_length=density * n_words * 1.1,
                      random_state=seed)
    return corpus.X, corpus.topic_words


def dense_kl_data(n_docs: int, n_features: int, rank: int, seed: int) -> np.ndarray:
    """Section VIII-D for KL, scaled: shifted half-normal factors (kappa 1, sigma 5), Poisson counts
    normalised to a mean of about 10 per entry."""
    rng = np.random.default_rng(seed)
    W = 1 + np.abs(rng.normal(0, 5, (rank, n_features)))
    H = 1 + np.abs(rng.normal(0, 5, (n_docs, rank)))
    mean = H @ W
    return rng.poisson(10 * mean / mean.mean()).astype(float)


def count_tensor(n: int, shape: tuple, rank: int, seed: int) -> np.ndarray:
    """Poisson counts (mean 3) of a planted nonnegative CP model with gamma(0.5) factors,
    ``n`` samples of ``shape``."""
    rng = np.random.default_rng(seed)
    factors = [rng.gamma(0.5, 1.0, (size, rank)) for size in (n, *shape)]
    mean = factors[0]
    for U in factors[1:]:
        mean = np.einsum("n...r,ir->n...ir", mean, U)
    mean = mean.sum(axis=-1)
    return rng.poisson(3.0 * mean / mean.mean()).astype(float)


# -- evaluator ------------------------------------------------------------------------------------


def _model_on_support(X, H, W):
    """``(H W)`` at the nonzeros of ``X`` (sparse) or everywhere (dense)."""
    if sp.issparse(X):
        rows, cols = X.nonzero()
        return np.einsum("ik,ik->i", H[rows], W.T[cols]), X.data
    return H @ W, X


def kl_objective(X, H, W) -> float:
    """Mean per-document ``sum x log(x / y) - x + y`` with ``y = H W`` (zeros of ``x`` exact)."""
    model, data = _model_on_support(X, H, W)
    model = np.maximum(model, 1e-300)
    positive = data > 0
    log_term = np.zeros_like(model)
    log_term[positive] = data[positive] * np.log(data[positive] / model[positive])
    total = log_term.sum() - data.sum() + float(H.sum(axis=0) @ W.sum(axis=1))
    return total / X.shape[0]


def refit_kl(components: np.ndarray, X, tol: float = 1e-7, max_iter: int = 2000) -> float:
    """Held-out KL with codes refitted by KL multiplicative updates at fixed ``components``."""
    W = np.maximum(np.asarray(components, dtype=float), 0)
    totals = W.sum(axis=1)
    W = W[totals > 0] / totals[totals > 0, None]  # MU is scale-invariant; drop empty atoms
    lengths = np.asarray(X.sum(axis=1)).ravel()
    H = np.tile(lengths[:, None] / W.shape[0], (1, W.shape[0])) + 1e-12
    previous = math.inf
    for iteration in range(max_iter):
        model, data = _model_on_support(X, H, W)
        ratio = data / np.maximum(model, 1e-300)
        if sp.issparse(X):
            ratio = sp.csr_matrix((ratio, X.indices, X.indptr), shape=X.shape)
        H *= np.asarray(ratio @ W.T) / W.sum(axis=1)  # rows of W sum to 1
        if iteration % 10 == 9:
            value = kl_objective(X, H, W)
            if abs(previous - value) <= tol * abs(value):
                break
            previous = value
    return kl_objective(X, H, W)


# -- runs -----------------------------------------------------------------------------------------


def run_online(train, test, args, components0, make=None, sample_shape=None):
    """Stream ``train`` (each batch's samples reshaped to ``sample_shape`` where given); trace of
    (training seconds, held-out KL), samples/s and the model."""
    model = (make or make_online)(args, components0, sample_shape)
    n, bs = train.shape[0], args.batch_size
    steps = -(-n // bs) * args.epochs
    checkpoints = set(np.unique(np.geomspace(1, steps, args.n_evals).astype(int)).tolist())
    rng = np.random.default_rng(args.seed)
    trace, seconds, seen, step = [], 0.0, 0, 0
    for _ in range(args.epochs):
        order = rng.permutation(n)
        for start in range(0, n, bs):
            batch = train[order[start:start + bs]]
            if sample_shape is not None:
                batch = batch.reshape(-1, *sample_shape)
            begin = time.perf_counter()
            model.partial_fit(batch)
            seconds += time.perf_counter() - begin
            seen, step = seen + batch.shape[0], step + 1
            if step in checkpoints or seconds > args.budget:
                trace.append((seconds, refit_kl(_components(model), test)))
            if seconds > args.budget:
                return trace, seen / seconds, model
    return trace, seen / seconds, model


def _components(model) -> np.ndarray:
    """``(rank, n_words)`` of any method (the CP learner keeps loadings only; a CP dictionary's
    atoms unfolded as the samples are, ``vec(u o v)``)."""
    if hasattr(model, "loadings_"):
        return np.asarray(dictionary_matrix([np.asarray(U) for U in model.loadings_])).T
    return np.asarray(model.components_)


def _coding(args) -> dict:
    """The coding step's and rounds' options given on the command line (else the learners'
    defaults)."""
    options = {"code_tol": args.code_tol, "code_max_iter": args.code_max_iter,
               "dict_rounds": args.dict_rounds}
    return {key: value for key, value in options.items() if value is not None}


def make_online(args, components0, sample_shape=None):
    """OnlineDivergenceNMF with its defaults (or ``--dict-step`` / ``--step-a``), on the
    (unfolded) matrix."""
    return OnlineDivergenceNMF(components0.shape[0], loss="kl", batch_size=args.batch_size,
                               step_a=args.step_a, dict_step=args.dict_step,
                               init=[components0.T / components0.max()],
                               random_state=args.seed, **_coding(args))


def make_cpdl(args, components0, sample_shape=None):
    """The KL CP learner as ``OnlineCPDL(loss="kl")`` ran it: ``OnlineDivergenceNMF`` with
    ``code_max_iter=300, code_tol=1e-5`` (a matrix is a one-mode tensor, started from
    ``components0``; tensor samples start from its own random loadings)."""
    init = [components0.T / components0.max()] if sample_shape is None else "random"
    coding = {"code_max_iter": 300, "code_tol": 1e-5, **_coding(args)}
    return OnlineDivergenceNMF(components0.shape[0], loss="kl", batch_size=args.batch_size,
                               step_a=args.step_a, dict_step=args.dict_step, init=init,
                               random_state=args.seed, **coding)


def run_restarted(make, train, test, args, schedule):
    """``make(n).fit`` for ``n`` in ``schedule`` until the budget; trace and samples/s."""
    trace, processed = [], 0
    for n_iter in schedule:
        begin = time.perf_counter()
        model = make(n_iter).fit(train)
        seconds = time.perf_counter() - begin
        trace.append((seconds, refit_kl(model.components_, test)))
        processed = train.shape[0] * n_iter
        if 2 * seconds > args.budget:  # the next run (twice as long) would overrun
            break
    return trace, processed / trace[-1][0], model


def peak_memory(run) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _online_peak(train, args, components0, make=None, sample_shape=None):
    model = (make or make_online)(args, components0, sample_shape)
    for start in range(0, min(5 * args.batch_size, train.shape[0]), args.batch_size):
        batch = train[start:start + args.batch_size]
        model.partial_fit(batch if sample_shape is None else batch.reshape(-1, *sample_shape))


def time_to(trace, target):
    return next((seconds for seconds, value in trace if value <= target), math.nan)


def purity(components, topic_words, top: int = 8) -> float:
    """Mean fraction of each learned topic's top words in its matched planted topic."""
    match = _example("topic_learning_kl").match_topics
    return float(match(np.asarray(components), topic_words, top=top)[1].mean())


def compare(name: str, X, args, topic_words=None, sample_shape=None) -> dict:
    """Every method on one split of ``X``; prints the side-by-side table and the ratios.
    ``sample_shape``: the rows of ``X`` are unfolded tensor samples (the CP learner sees them as
    such)."""
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(X.shape[0])
    n_test = min(max(X.shape[0] // 10, 50), 2000)
    test, train = X[order[:n_test]], X[order[n_test:]]
    K = args.rank
    scale = float(train.sum()) / (train.shape[0] * train.shape[1])
    components0 = rng.random((K, X.shape[1])) * scale  # one start for everyone
    codes0 = np.full((train.shape[0], K), 1.0 / K)
    schedule = [2 ** k for k in range(12)]

    def make_minibatch(n):
        model = MiniBatchNMF(K, beta_loss="kullback-leibler", init="custom",
                             batch_size=args.sk_batch_size or args.batch_size, max_iter=n,
                             tol=0, max_no_improvement=None, random_state=args.seed)
        return _Custom(model, codes0, components0)

    def make_mu(n):
        model = NMF(K, solver="mu", beta_loss="kullback-leibler", init="custom", max_iter=n,
                    tol=0, random_state=args.seed)
        return _Custom(model, codes0, components0)

    results, peaks = {}, {}
    for label, make in (("OnlineDivergenceNMF", make_online), ("CP(kl)", make_cpdl)):
        shape = sample_shape if make is make_cpdl else None  # the others see the matrix
        results[label] = run_online(train, test, args, components0, make, shape)
        peaks[label] = peak_memory(lambda make=make, shape=shape: _online_peak(
            train, args, components0, make, shape))
    for label, make in (("MiniBatchNMF", make_minibatch), ("NMF(mu)", make_mu)):
        results[label] = run_restarted(make, train, test, args, schedule)
        peaks[label] = peak_memory(lambda make=make: make(1).fit(train))
    best = {label: min(v for _, v in trace) for label, (trace, _, _) in results.items()}
    target = best["MiniBatchNMF"]  # the peer's best held-out KL
    density = (X.nnz if sp.issparse(X) else np.count_nonzero(X)) / np.prod(X.shape)
    print(f"\n### {name}: {train.shape[0]} training / {n_test} held-out documents x "
          f"{X.shape[1]} words, density {density:.4f}, rank {K}\n")
    print(f"target = MiniBatchNMF's best held-out KL per document = {target:.4f}\n")
    print("| method | s / epoch | epoch-time ratio (/ MiniBatchNMF) | time to target (s) | "
          "time-to-target ratio | best held-out KL | purity (top 8) | peak MiB |")
    print("|---|---|---|---|---|---|---|---|")
    per_epoch = {label: samples and train.shape[0] / samples
                 for label, (_, samples, _) in results.items()}
    peer_time = time_to(results["MiniBatchNMF"][0], target)
    rows = {}
    for label, (trace, _, model) in results.items():
        reach = time_to(trace, target)
        topics = ("-" if topic_words is None
                  else f"{purity(_components(model), topic_words):.3f}")
        rows[label] = {"per_epoch": per_epoch[label], "time_to_target": reach,
                       "best": best[label], "peak": peaks[label]}
        print(f"| {label} | {per_epoch[label]:.3f} | "
              f"{per_epoch[label] / per_epoch['MiniBatchNMF']:.2f} | {reach:.2f} | "
              f"{reach / peer_time:.2f} | {best[label]:.4f} | {topics} | "
              f"{peaks[label] / 2**20:.1f} |")
    accuracy = transform_accuracy(results["OnlineDivergenceNMF"][2], test[:args.n_transform])
    return {"target": target, "rows": rows, "transform": accuracy}


def transform_accuracy(model, X) -> dict:
    """``transform``'s time and code error at ``transform_tol`` and at the training step's
    ``code_tol``, against codes solved to the limit (``tol=0``, 20,000 iterations)."""
    W, scale = np.asarray(model.loadings_[0]), model.scale_
    if sp.issparse(X):
        exact, _ = code_divergence_sparse(X / scale, W, tol=0.0, max_iter=20000)
    else:
        exact, _ = code_divergence_matrix(X / scale, W, "kl", tol=0.0, max_iter=20000)
    exact = exact * scale
    print(f"\n`transform` of {X.shape[0]} held-out documents (code error: sum|h - h*| / sum h*, "
          f"h* solved to the limit)\n")
    print("| coding step | ms | median code error | max code error |")
    print("|---|---|---|---|")
    out = {}
    for label, tol, max_iter in (
            (f"transform_tol={model.transform_tol:g} (default)", model.transform_tol,
             model.transform_max_iter),
            (f"code_tol={model.code_tol:g} (the training step's)", model.code_tol,
             model.code_max_iter)):
        model.set_params(transform_tol=tol, transform_max_iter=max_iter)
        begin = time.perf_counter()
        codes = np.asarray(model.transform(X))
        seconds = time.perf_counter() - begin
        error = np.abs(codes - exact).sum(axis=1) / np.maximum(exact.sum(axis=1), 1e-300)
        out[label] = {"seconds": seconds, "median": float(np.median(error)),
                      "max": float(error.max())}
        print(f"| {label} | {1e3 * seconds:.1f} | {np.median(error):.2e} | "
              f"{error.max():.2e} |")
    return out


class _Custom:
    """``fit(X)`` with scikit-learn's custom init from the shared start."""

    def __init__(self, model, codes0, components0):
        self.model, self.codes0, self.components0 = model, codes0, components0

    def fit(self, X):
        self.model.fit(X, W=self.codes0.copy(), H=self.components0.copy())
        self.components_ = self.model.components_
        return self


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark; returns the table rows per data set."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="small sizes (< 1 min) for the sizes not given")
    parser.add_argument("--datasets", nargs="+", default=["sparse", "dense"],
                        choices=["sparse", "dense", "tensor"])
    parser.add_argument("--n-docs", type=int, default=50000)
    parser.add_argument("--n-words", type=int, default=5000)
    parser.add_argument("--density", type=float, default=0.005)
    parser.add_argument("--dense-docs", type=int, default=20000)
    parser.add_argument("--dense-features", type=int, default=200)
    parser.add_argument("--tensor-samples", type=int, default=20000)
    parser.add_argument("--tensor-shape", type=int, nargs=2, default=[30, 30])
    parser.add_argument("--rank", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=500,
                        help="every method's batch size (the paper's 10 is per-batch-overhead "
                             "bound)")
    parser.add_argument("--sk-batch-size", type=int, default=None,
                        help="MiniBatchNMF's batch size (default: --batch-size)")
    parser.add_argument("--dict-step", choices=["auto", "mu", "sgd"], default="auto",
                        help="the online learners' dictionary step (default: theirs)")
    parser.add_argument("--step-a", type=float, default=None,
                        help="the online learners' step a (default: theirs)")
    parser.add_argument("--code-tol", type=float, default=None,
                        help="the online learners' code_tol (default: theirs)")
    parser.add_argument("--code-max-iter", type=int, default=None,
                        help="the online learners' code_max_iter (default: theirs)")
    parser.add_argument("--dict-rounds", type=lambda v: v if v == "auto" else int(v),
                        default=None, help="the online learners' dict_rounds (default: theirs)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--budget", type=float, default=120.0,
                        help="training seconds per method and data set")
    parser.add_argument("--n-evals", type=int, default=12)
    parser.add_argument("--n-transform", type=int, default=1000,
                        help="held-out documents whose transform is timed and checked")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.quick:  # small sizes, for the options not given on the command line
        quick = {"n_docs": 3000, "n_words": 500, "density": 0.02, "dense_docs": 2000,
                 "dense_features": 50, "rank": 5, "tensor_samples": 2000,
                 "tensor_shape": [8, 6], "budget": 3.0, "n_evals": 6, "epochs": 2}
        for name, value in quick.items():
            if getattr(args, name) == parser.get_default(name):
                setattr(args, name, value)
    warnings.simplefilter("ignore", ConvergenceWarning)
    print(f"BLAS threads {args.threads}; OnlineDivergenceNMF and CP(kl) "
          f"(dict_step={args.dict_step!r}, step_a={args.step_a}) batches of {args.batch_size}, "
          f"up to {args.epochs} passes; MiniBatchNMF batches of "
          f"{args.sk_batch_size or args.batch_size}; budget {args.budget:g} s per method. "
          f"Ratios: ours / MiniBatchNMF (< 1: ours is faster)")
    out = {}
    with threadpool_limits(args.threads):
        if "sparse" in args.datasets:
            X, topic_words = sparse_corpus(args.n_docs, args.n_words, args.density, args.rank,
                                           args.seed)
            out["sparse"] = compare("sparse counts (planted topics)", X, args, topic_words)
        if "dense" in args.datasets:
            X = dense_kl_data(args.dense_docs, args.dense_features, args.rank, args.seed)
            out["dense"] = compare("dense Poisson (VIII-D)", X, args)
        if "tensor" in args.datasets:
            shape = tuple(args.tensor_shape)
            X = count_tensor(args.tensor_samples, shape, args.rank, args.seed)
            out["tensor"] = compare(f"count tensor {shape}, unfolded for the matrix methods",
                                    X.reshape(len(X), -1), args, sample_shape=shape)
    return out


if __name__ == "__main__":
    main()
