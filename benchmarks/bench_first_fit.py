"""The first fit of a fresh process: import, construct, one ``partial_fit``, against scikit-learn.

Each row runs in a new Python process (what a user's script or the CLI pays once), ``--repeat``
times, and prints the median wall time of import + construction + the first ``partial_fit`` of
a small batch, and its ratio to scikit-learn's ``MiniBatchNMF`` doing the same:

* ``numba, cold``: the JIT on (the default) and an empty ``NUMBA_CACHE_DIR``, so that a kernel
  that runs is compiled;
* ``numba, cached``: the JIT on, the kernels in numba's on-disk cache (the usual case after the
  first run on a machine);
* ``no JIT``: ``TENSORSTREAM_JIT=0``, the pure ``tl.*`` path.

An online fit runs the kernels only from step ``FIRST_COMPILED_STEP`` on
(``tensorstream/core/compiled.py``), so the first ``partial_fit`` loads nothing of numba. A
second table times a longer fit in a fresh process (import + ``--steps`` ``partial_fit`` calls,
default twice that step) with that rule, with the kernels from the first step
(``FIRST_COMPILED_STEP = 0``, what the library did before the rule), and without them: the
rule's cost on a long fit is the steps before the switch run without the kernels.

Usage::

    python benchmarks/bench_first_fit.py               # OnlineNMF, 256 x 64, 5 repeats
    python benchmarks/bench_first_fit.py --learner OnlineCPDL --d 8,8,3 --repeat 3
    python benchmarks/bench_first_fit.py --steps 0     # the first fit only
"""

from __future__ import annotations

import argparse
import math
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

_LONG = """
import time; start = time.perf_counter()
import numpy as np
from tensorstream import {learner}
from tensorstream.core import compiled
compiled.FIRST_COMPILED_STEP = {first}
X = np.random.default_rng(0).random(({n}, {d}))
model = {learner}(8, random_state=0)
for _ in range({steps}):
    model.partial_fit(X)
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


def _listed(shape: tuple) -> str:
    """``shape`` as the dimensions a tuple literal lists after the sample count."""
    return ", ".join(str(v) for v in shape)


def first_fit(args: argparse.Namespace, threads: dict, cache: str) -> None:
    """The first table: import + construction + one ``partial_fit``, against scikit-learn."""
    ours = _OURS.format(learner=args.learner, n=args.n, d=_listed(args.d))
    seconds(ours, {**threads, "NUMBA_CACHE_DIR": cache})
    rows = {
        "scikit-learn MiniBatchNMF": (_SKLEARN.format(n=args.n, d=math.prod(args.d)),
                                      lambda: threads),
        "numba, cold": (ours, lambda: {**threads,
                                       "NUMBA_CACHE_DIR": tempfile.mkdtemp(prefix="nc-")}),
        "numba, cached": (ours, lambda: {**threads, "NUMBA_CACHE_DIR": cache}),
        "no JIT (TENSORSTREAM_JIT=0)": (ours, lambda: {**threads, "TENSORSTREAM_JIT": "0"}),
    }
    timed = {name: median_of(code, env, args.repeat) for name, (code, env) in rows.items()}
    reference = timed["scikit-learn MiniBatchNMF"]
    print(f"first fit in a fresh process: import + {args.learner}(8) + partial_fit of "
          f"({args.n}, {_listed(args.d)}); median of {args.repeat} processes each")
    print(f"{'':32} {'seconds':>8} {'ratio to scikit-learn':>22}")
    for name, value in timed.items():
        print(f"{name:32} {value:8.2f} {value / reference:22.2f}")


def long_fit(args: argparse.Namespace, threads: dict, cache: str) -> None:
    """The second table: import + ``args.steps`` steps with the rule, with the kernels from
    the first step, and without them (numba's cache filled first, as the usual case)."""
    from tensorstream.core.compiled import FIRST_COMPILED_STEP

    def code(first: int) -> str:
        return _LONG.format(learner=args.learner, n=args.n, d=_listed(args.d), steps=args.steps,
                            first=first)

    seconds(code(0), {**threads, "NUMBA_CACHE_DIR": cache})
    cached = {**threads, "NUMBA_CACHE_DIR": cache}
    rows = {
        f"kernels from step {FIRST_COMPILED_STEP} (now)": (code(FIRST_COMPILED_STEP), cached),
        "kernels from step 0 (before)": (code(0), cached),
        "no JIT (TENSORSTREAM_JIT=0)": (code(0), {**threads, "TENSORSTREAM_JIT": "0"}),
    }
    timed = {name: median_of(text, lambda env=env: env, args.repeat)
             for name, (text, env) in rows.items()}
    reference = timed["no JIT (TENSORSTREAM_JIT=0)"]
    print(f"\nlonger fit in a fresh process: import + {args.steps} partial_fit of "
          f"({args.n}, {_listed(args.d)}), numba's cache filled; median of {args.repeat} "
          f"processes each")
    print(f"{'':32} {'seconds':>8} {'ratio to no JIT':>22}")
    for name, value in timed.items():
        print(f"{name:32} {value:8.2f} {value / reference:22.2f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learner", default="OnlineNMF")
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--d", type=lambda text: tuple(int(v) for v in text.split(",")),
                        default=(64,), help="a sample's shape, e.g. 64 or 8,8,3 (scikit-learn "
                                            "gets the samples flattened)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--steps", type=int, default=None,
                        help="steps of the longer fit (default: twice FIRST_COMPILED_STEP; "
                             "0: no longer fit)")
    args = parser.parse_args(argv)
    if args.steps is None:
        from tensorstream.core.compiled import FIRST_COMPILED_STEP
        args.steps = 2 * FIRST_COMPILED_STEP
    threads = {v: "1" for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    cache = tempfile.mkdtemp(prefix="numba-cache-")  # filled by each table's first run
    start = time.perf_counter()
    first_fit(args, threads, cache)
    if args.steps > 0:
        long_fit(args, threads, cache)
    print(f"({time.perf_counter() - start:.0f} s in all)")


if __name__ == "__main__":
    main()
