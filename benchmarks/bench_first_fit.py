"""The first fit of a fresh process: import, construct, one ``partial_fit``, against scikit-learn.

Each row runs in a new Python process (what a user's script or the CLI pays once), ``--repeat``
times, and prints the median wall time of import + construction + the first ``partial_fit`` of
a small batch, and its ratio to scikit-learn's ``MiniBatchNMF`` doing the same:

* ``numba, cold``: numba compiles the kernels (a fresh, empty ``NUMBA_CACHE_DIR``);
* ``numba, cached``: the kernels come from numba's on-disk cache (the usual case after the
  first run on a machine);
* ``no JIT``: ``TENSORSTREAM_JIT=0``, the pure ``tl.*`` path.

Usage::

    python benchmarks/bench_first_fit.py               # OnlineNMF, 256 x 64, 5 repeats
    python benchmarks/bench_first_fit.py --learner OnlineCPDL --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

_OURS = """
import time; start = time.perf_counter()
import numpy as np
from tensorstream import {learner}
X = np.random.default_rng(0).random(({n}, {d}))
{learner}(8, random_state=0).partial_fit(X)
print(time.perf_counter() - start)
"""

_SKLEARN = """
import time; start = time.perf_counter()
import numpy as np
from sklearn.decomposition import MiniBatchNMF
X = np.random.default_rng(0).random(({n}, {d}))
MiniBatchNMF(8, random_state=0).partial_fit(X)
print(time.perf_counter() - start)
"""


def seconds(code: str, env: dict) -> float:
    """In-process seconds that a fresh interpreter reports for ``code``."""
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                         capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1])


def median_of(code: str, env_of, repeat: int) -> float:
    return statistics.median(seconds(code, env_of()) for _ in range(repeat))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learner", default="OnlineNMF")
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    threads = {v: "1" for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    ours = _OURS.format(learner=args.learner, n=args.n, d=args.d)
    cache = tempfile.mkdtemp(prefix="numba-cache-")
    seconds(ours, {**threads, "NUMBA_CACHE_DIR": cache})  # fills the cache for "cached"
    rows = {
        "scikit-learn MiniBatchNMF": (_SKLEARN.format(n=args.n, d=args.d), lambda: threads),
        "numba, cold": (ours, lambda: {**threads,
                                       "NUMBA_CACHE_DIR": tempfile.mkdtemp(prefix="nc-")}),
        "numba, cached": (ours, lambda: {**threads, "NUMBA_CACHE_DIR": cache}),
        "no JIT (TENSORSTREAM_JIT=0)": (ours, lambda: {**threads, "TENSORSTREAM_JIT": "0"}),
    }
    start = time.perf_counter()
    timed = {name: median_of(code, env, args.repeat) for name, (code, env) in rows.items()}
    reference = timed["scikit-learn MiniBatchNMF"]
    print(f"first fit in a fresh process: import + {args.learner}(8) + partial_fit of "
          f"({args.n}, {args.d}); median of {args.repeat} processes each")
    print(f"{'':32} {'seconds':>8} {'ratio to scikit-learn':>22}")
    for name, value in timed.items():
        print(f"{name:32} {value:8.2f} {value / reference:22.2f}")
    print(f"({time.perf_counter() - start:.0f} s in all)")


if __name__ == "__main__":
    main()
