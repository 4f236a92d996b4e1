"""OMRMD vs OR-PCA vs PCP on the max-norm paper's Figure-4 setting (Shen, Xu & Li, section 6.2).

Data: ``corrupted_low_rank(p=400, d=80, n=5000, rho)`` (orthonormal basis, exactly
``round(rho p n)`` corruptions uniform on [-1000, 1000]), streamed once in order, one sample per
step (the paper's algorithm). Printed per method: expressed variance of the basis after
``t = 500 / 2000 / 5000`` samples, and the seconds per sample in the windows ``(0, 500]``,
``(500, 2000]`` and ``(2000, 5000]`` -- the per-sample cost must not grow with ``t`` (the state is
``O(p d)``). Times are CPU seconds of this process (``time.process_time``; with one BLAS thread
that is the wall time of an unloaded machine, and other jobs on a shared machine do not inflate
it). EV evaluation is excluded from the times, as in the paper's Figure 6. PCP (batch, all ``n``
samples, inexact ALM) has one EV and its total time spread over the samples.

``--batch-size 20`` adds OMRMD with mini-batches (one basis update per batch, the coding step
vectorised over the batch); ``--tensorly`` adds TensorLy's ``robust_pca`` on the same matrix
(objective ``||D||_* + lam ||E||_1`` with ``reg_J = 1/2``: it sums the nuclear norms of both
unfoldings). BLAS runs on ``--threads`` threads (default 1: the per-sample products are tiny and
a second thread only adds overhead; compare with ``--threads 2``).

Usage::

    python benchmarks/bench_maxnorm.py                           # rho = 0.3
    python benchmarks/bench_maxnorm.py --rho 0.01 0.1 0.3 0.5 --tensorly --batch-size 20
    python benchmarks/bench_maxnorm.py --n 1000 --p 200 --d 40   # a quick look
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

from tensorstream.datasets.maxnorm import corrupted_low_rank
from tensorstream.learners.maxnorm import OnlineMaxNormMD
from tensorstream.learners.robust_pca import OnlineRobustPCA, RobustPCA
from tensorstream.metrics import expressed_variance


def checkpoints(n: int) -> list[int]:
    """``t = n/10, 2n/5, n``: 500, 2000 and 5000 for the paper's n = 5000."""
    return [n // 10, 2 * n // 5, n]


def run_online(model, data, batch_size: int = 1) -> dict:
    """Stream ``data.Z`` in order; EV at the checkpoints and seconds per sample per window."""
    marks = checkpoints(data.Z.shape[0])
    evs, seconds, elapsed, start = [], [], 0.0, 0
    for t in range(0, data.Z.shape[0], batch_size):
        tic = time.process_time()
        model.partial_fit(data.Z[t:t + batch_size])
        elapsed += time.process_time() - tic
        seen = t + batch_size
        if seen in marks:
            evs.append(expressed_variance(data.U, model.loadings_[0]))
            seconds.append(elapsed / (seen - start))
            elapsed, start = 0.0, seen
    return {"ev": evs, "seconds": seconds}


def run_pcp(data, rank: int) -> dict:
    tic = time.process_time()
    pcp = RobustPCA(rank).fit(data.Z)
    elapsed = time.process_time() - tic
    return {"ev": [expressed_variance(data.U, pcp.loadings_[0])],
            "seconds": [elapsed / data.Z.shape[0]], "note": f"{pcp.n_iter_} ALM iterations"}


def run_tensorly(data, rank: int) -> dict:
    from tensorly.decomposition import robust_pca

    n, p = data.Z.shape
    tic = time.process_time()
    low_rank, _ = robust_pca(data.Z, reg_E=1 / np.sqrt(max(n, p)), reg_J=0.5, verbose=0)
    elapsed = time.process_time() - tic
    basis = np.linalg.svd(low_rank, full_matrices=False)[2][:rank].T
    return {"ev": [expressed_variance(data.U, basis)], "seconds": [elapsed / n],
            "note": "100 iterations (its default cap)"}


def row(name: str, rho: float, result: dict) -> str:
    evs = " | ".join(f"{ev:.3f}" for ev in result["ev"])
    if len(result["ev"]) == 1:
        evs = f"- | - | {evs}"
    ms = " | ".join(f"{1e3 * s:.2f}" for s in result["seconds"])
    if len(result["seconds"]) == 1:
        ms = f"- | - | {ms}"
    return f"| {name} | {rho} | {evs} | {ms} | {result.get('note', '')} |"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rho", type=float, nargs="+", default=[0.3])
    parser.add_argument("--p", type=int, default=400)
    parser.add_argument("--d", type=int, default=80)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=0,
                        help="also run OMRMD with mini-batches of this size")
    parser.add_argument("--tensorly", action="store_true",
                        help="also run tensorly.decomposition.robust_pca")
    args = parser.parse_args(argv)
    marks = checkpoints(args.n)
    print(f"p={args.p}, d={args.d}, n={args.n}, seed={args.seed}, BLAS threads={args.threads}")
    print(f"| method | rho | EV t={marks[0]} | EV t={marks[1]} | EV t={marks[2]} | "
          f"ms/sample (0,{marks[0]}] | ({marks[0]},{marks[1]}] | ({marks[1]},{marks[2]}] | "
          f"note |")
    print("|---|---|---|---|---|---|---|---|---|")
    with threadpool_limits(args.threads):
        for rho in args.rho:
            data = corrupted_low_rank(args.p, args.d, args.n, rho, random_state=args.seed)
            # the paper's settings (its Figure 4), not the data-adaptive defaults
            online = [("OMRMD", paper(OnlineMaxNormMD, args), 1),
                      ("OR-PCA", paper(OnlineRobustPCA, args), 1)]
            if args.batch_size > 1:
                online.append((f"OMRMD (batch {args.batch_size})",
                               paper(OnlineMaxNormMD, args), args.batch_size))
            for name, model, batch in online:
                print(row(name, rho, run_online(model, data, batch)), flush=True)
            print(row("PCP (inexact ALM)", rho, run_pcp(data, args.d)), flush=True)
            if args.tensorly:
                print(row("TensorLy robust_pca", rho, run_tensorly(data, args.d)), flush=True)


def paper(cls, args):
    """``cls`` at its paper's settings (``paper_params``)."""
    return cls(args.d, random_state=args.seed, **cls.paper_params)


if __name__ == "__main__":
    main()
