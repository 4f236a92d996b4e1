"""VR vs proximal SGD vs SMM for stochastic MF (issue #7; Zhao, Haskell & Feng 2017, sec. 5.3).

Setups (CPU-sized stand-ins for the paper's section 5.1; float64; every method starts from the
same ``W0`` -- the learner's default random-data-rows init drawn from the same
``random_state`` before any sampling):

* ``odl-digits``: ``load_digits()/16`` (n = 1797, d = 64), k = 49, ``lam = 1/8``;
* ``orpca-synth``: ``svrmf_synthetic(100, 5000, 5)``, k = 10, ``lam1 = lam2 = 0.1``, Gaussian
  init (``--full``: the paper's d = 400, n = 1e5, k' = 10, k = 49, ``lam = 1/sqrt(d)``;
  hours, not minutes);
* ``onmf-digits``: the digits, simplex columns, ``lam = 1/8``.

Codes: FISTA on the reduced problem, ``code_tol = 1e-6``, at most 100 iterations (the
library's default). Methods, each over a small step grid (the paper reports no steps),
**best of grid** reported (the member reaching the tightest target in the fewest passes, else
the lowest final f):

* ``VR (paper)``: ``b = round(0.2 n^(2/3))``, ``m = round(0.5 n^(1/3))`` (m b ~ 0.1 n);
* ``VR (mb~n)``: same ``b``, ``m = round(n / b)`` (the usual SVRG epoch);
* ``SGD``: ``gamma_t = beta / (b t + beta')``, ``beta' = 100 b``, ``beta = gamma_0 beta'``;
* ``SMM``: sums ``A``, ``B``, no forgetting (no step).

``f(W)`` is evaluated after every epoch (VR: ``n + m b`` reads; SGD/SMM: ``ceil(n/b)`` steps,
one pass) with accurate solves, outside the timer (docs/svrmf.md, points 17, 10, 16): times are
the learner's ``history_["seconds"]`` (algorithm time only); passes are sample reads / n.
``f_ref = min(f of a long run, every recorded f) - delta`` (below every f; ``delta = 1e-5``
by default). The long run continues the best VR run (lowest final f, any epoch length) to
``--long-factor`` times the pass budget. Reported per method: passes and seconds to reach
``f_ref + target`` (``--targets``: the issue's 1e-3 and a looser 1e-2), final f,
``||Gamma_1(W)||^2`` (the gradient mapping with ``eta = 1`` and accurate solves at the final
``W``, the same for every method) and the peak traced memory of one epoch (``tracemalloc``, a
separate run).

Performance goal check: microseconds per sample of VR's full-gradient pass vs the coding step
of the online learners on the same data and ``W`` (``coding.sparse_code``, OnlineCPDL's coder,
for ODL/ONMF; ``OnlineRobustPCA.partial_fit`` for ORPCA).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_svrmf.py --out bench_svrmf.csv
    python benchmarks/bench_svrmf.py --quick                 # < 1 min
    python benchmarks/bench_svrmf.py --setups orpca-synth --full --passes 12
"""

from __future__ import annotations

import argparse
import copy
import csv
import dataclasses
import math
import time
import tracemalloc
from collections.abc import Callable

import numpy as np
from threadpoolctl import threadpool_limits

from tensorstream import VarianceReducedMF
from tensorstream.coders.lasso import sparse_code
from tensorstream.core.backend import using
from tensorstream.datasets.svrmf import svrmf_synthetic
from tensorstream.finite.variance_reduction import FiniteData, full_gradient
from tensorstream.learners.robust_pca import OnlineRobustPCA
from tensorstream.metrics import expressed_variance

CODER = dict(coder="fista", code_tol=1e-6, code_max_iter=100)
#: the paper's raw units (data_scale=1): the step grids below are in them
RAW_UNITS = dict(data_scale=1.0)
CURVE_FIELDS = ("setup", "method", "step", "epoch", "passes_read", "solves", "seconds", "f",
                "grad_map_sq", "ev", "best")


@dataclasses.dataclass
class Setup:
    """One data set and formulation, with the step grids of each method."""

    name: str
    X: np.ndarray
    n_components: int
    params: dict  # VarianceReducedMF parameters shared by every method
    vr_steps: tuple[float, ...]  # eta
    sgd_steps: tuple[float, ...]  # gamma_0 = beta / beta'
    vr_default: float  # the one step of --quick and of the example
    sgd_default: float
    W_true: np.ndarray | None = None  # planted basis (EV curves)


def _digits(n_samples: int | None, seed: int) -> np.ndarray:
    from sklearn.datasets import load_digits

    X = load_digits().data / 16.0
    if n_samples is not None and n_samples < len(X):
        X = X[np.sort(np.random.default_rng(seed).choice(len(X), n_samples, replace=False))]
    return X


def odl_digits(n_samples: int | None = None, seed: int = 0, full: bool = False) -> Setup:
    """Digits-ODL (for the paper's CBCL/MNIST ODL): l2-ball columns, ``lam = 1/8``, k = 49."""
    return Setup("odl-digits", _digits(n_samples, seed), 49,
                 dict(formulation="odl", formulation_params={"lam": 1 / 8}, eval_tol=1e-3,
                      eval_max_iter=1000,
                      **CODER, **RAW_UNITS),
                 vr_steps=(0.3, 1.0, 3.0), sgd_steps=(1.0, 3.0, 10.0), vr_default=3.0,
                 sgd_default=3.0)


def onmf_digits(n_samples: int | None = None, seed: int = 0, full: bool = False) -> Setup:
    """Digits-ONMF (for the paper's ONMF): simplex columns, ``h >= 0``, ``lam = 1/8``, k = 49."""
    return Setup("onmf-digits", _digits(n_samples, seed), 49,
                 dict(formulation="onmf", formulation_params={"lam": 1 / 8}, eval_tol=1e-4,
                      eval_max_iter=1000,
                      **CODER, **RAW_UNITS),
                 vr_steps=(0.1, 0.3, 1.0, 3.0), sgd_steps=(0.3, 1.0, 3.0, 10.0), vr_default=0.3,
                 sgd_default=1.0)


def orpca_synth(n_samples: int | None = None, seed: int = 0, full: bool = False) -> Setup:
    """Synth-ORPCA: a CPU-sized setting, or the paper's (``full``)."""
    d, n, rank, k, lam = (400, 100_000, 10, 49, 400 ** -0.5) if full else (100, 5000, 5, 10, 0.1)
    data = svrmf_synthetic(d, n_samples or n, rank, random_state=seed)
    # eval_tol 1e-2 moves f by < 1e-5 here (f ~ 500) and is 5x cheaper than 1e-6
    return Setup("orpca-synth", data.X, k,
                 dict(formulation="orpca", formulation_params={"lam1": lam, "lam2": lam},
                      init="gaussian", eval_tol=1e-2, eval_max_iter=1000,
                      **CODER, **RAW_UNITS),
                 vr_steps=(3.0, 10.0, 30.0), sgd_steps=(10.0, 30.0, 100.0), vr_default=10.0,
                 sgd_default=30.0, W_true=data.W_true)


SETUPS: dict[str, Callable[..., Setup]] = {
    "odl-digits": odl_digits, "orpca-synth": orpca_synth, "onmf-digits": onmf_digits}


def method_grid(setup: Setup, quick: bool = False) -> list[tuple[str, float | None, dict]]:
    """``(method label, step, learner parameters)`` for every method and grid step."""
    n = setup.X.shape[0]
    b = max(1, round(0.2 * n ** (2 / 3)))
    vr_steps = (setup.vr_default,) if quick else setup.vr_steps
    sgd_steps = (setup.sgd_default,) if quick else setup.sgd_steps
    grid = [("VR (paper)", eta, dict(method="vr", method_params={"step_size": eta}))
            for eta in vr_steps]
    grid += [("VR (mb~n)", eta, dict(method="vr", method_params={"step_size": eta},
                                     epoch_length=round(n / b))) for eta in vr_steps]
    grid += [("SGD", g0, dict(method="sgd", method_params={"step_size": g0}))
             for g0 in sgd_steps]
    grid.append(("SMM", None, dict(method="smm")))
    return grid


def make_learner(setup: Setup, params: dict, seed: int) -> VarianceReducedMF:
    return VarianceReducedMF(setup.n_components, random_state=seed, **setup.params, **params)


def run_curve(setup: Setup, params: dict, passes: float, seed: int
              ) -> tuple[list[dict], VarianceReducedMF]:
    """Epochs until ``passes`` sample reads / n; ``f`` (and EV) after each, outside the timer.

    Stops early when the run diverges (``f`` not finite or above twice its first value)."""
    model = make_learner(setup, params, seed)
    model.set_params(n_epochs=0).fit(setup.X)  # W^{0,0}: the curve starts at f(W0)
    rows = [_row(setup, model, {"epoch": 0, "passes_read": 0.0, "solves": 0.0,
                                "seconds": 0.0, "grad_map_sq": None})]
    while len(rows) < 2 or rows[-1]["passes_read"] < 0.99 * passes:  # 11.98 passes count as 12
        model.partial_fit(setup.X)
        rows.append(_row(setup, model, model.history_[-1]))
        if not math.isfinite(rows[-1]["f"]) or rows[-1]["f"] > 2 * abs(rows[0]["f"]):
            break
    return rows, model


def _row(setup: Setup, model: VarianceReducedMF, info: dict) -> dict:
    """One curve point: the history row's counters, ``f`` and EV (evaluated outside the timer)."""
    ev = None if setup.W_true is None else expressed_variance(setup.W_true, model.loadings_[0])
    return {"epoch": info["epoch"], "passes_read": info["passes_read"], "solves": info["solves"],
            "seconds": info["seconds"], "f": model.objective(setup.X),
            "grad_map_sq": info["grad_map_sq"], "ev": ev}


def final_grad_map(setup: Setup, model: VarianceReducedMF, eta: float = 1.0) -> float:
    """``||Gamma_eta(W)||^2`` at the current ``W`` with accurate solves (any method)."""
    return model.gradient_mapping(setup.X, eta)


def peak_memory_mib(setup: Setup, params: dict, seed: int) -> float:
    """Peak traced allocation (MiB) of initialising and running one epoch."""
    model = make_learner(setup, params, seed)
    tracemalloc.start()
    try:
        model.partial_fit(setup.X)
        return tracemalloc.get_traced_memory()[1] / 2 ** 20
    finally:
        tracemalloc.stop()


def reached(rows: list[dict], level: float) -> dict | None:
    """The first checkpoint with ``f <= level``."""
    return next((row for row in rows if row["f"] <= level), None)


@dataclasses.dataclass
class SetupResult:
    setup: Setup
    curves: dict  # (label, step) -> rows
    models: dict  # (label, step) -> fitted learner
    params: dict  # (label, step) -> learner parameters
    f_ref: float
    f_long: float
    long_passes: float
    best: dict  # label -> step of the best grid member


def run_setup(setup: Setup, grid: list, passes: float, seed: int, long_factor: float,
              delta: float, targets: tuple[float, ...] = (1e-3,),
              log: Callable[[str], None] = print) -> SetupResult:
    """Every grid member on the same data and ``W0``, the long run, ``f_ref``, best of grid."""
    curves, models, grid_params = {}, {}, {}
    for label, step, params in grid:
        rows, model = run_curve(setup, params, passes, seed)
        curves[label, step], models[label, step], grid_params[label, step] = rows, model, params
        log(f"  {setup.name} {label} step={step}: f={rows[-1]['f']:.6f} after "
            f"{rows[-1]['passes_read']:.2f} passes, {rows[-1]['seconds']:.2f} s")
    vr_keys = [key for key in curves if key[0].startswith("VR")]
    key = min(vr_keys, key=lambda k: curves[k][-1]["f"])
    long_model = copy.deepcopy(models[key])  # the grid member keeps its final W
    f_long = curves[key][-1]["f"]
    if long_factor > 1:
        while long_model.history_[-1]["passes_read"] < 0.99 * long_factor * passes:
            long_model.partial_fit(setup.X)
        f_long = long_model.objective(setup.X)
    long_passes = long_model.history_[-1]["passes_read"]
    log(f"  {setup.name} long run ({key[0]}, step={key[1]}): f={f_long:.6f} after "
        f"{long_passes:.1f} passes")
    f_min = min(row["f"] for rows in curves.values() for row in rows if math.isfinite(row["f"]))
    f_ref = min(f_long, f_min) - delta
    best = {}
    for label in dict.fromkeys(k[0] for k in curves):
        members = [k for k in curves if k[0] == label]

        def rank(k):  # tightest target reached first, then fewest passes
            for i, target in enumerate(sorted(targets)):
                hit = reached(curves[k], f_ref + target)
                if hit:
                    return (i, hit["passes_read"], hit["seconds"])
            return (len(targets), curves[k][-1]["f"], 0.0)

        best[label] = min(members, key=rank)[1]
    return SetupResult(setup, curves, models, grid_params, f_ref, f_long, long_passes, best)


def table_rows(result: SetupResult, targets: tuple[float, ...], seed: int,
               memory: bool = True) -> list[str]:
    """Markdown rows: one per method (its best grid member)."""
    out = []
    for label, step in result.best.items():
        rows = result.curves[label, step]
        model = result.models[label, step]
        hits = [reached(rows, result.f_ref + target) for target in targets]
        when = " | ".join(f"{hit['passes_read']:.2f} / {hit['seconds']:.2f}" if hit
                          else "not reached" for hit in hits)
        last = rows[-1]
        gmap = final_grad_map(result.setup, model)
        mib = peak_memory_mib(result.setup, result.params[label, step], seed) if memory \
            else float("nan")
        ev = "" if last["ev"] is None else f" (EV {last['ev']:.4f})"
        step_text = "-" if step is None else f"{step:g}"
        out.append(f"| {result.setup.name} | {label} | {step_text} | {when} | "
                   f"{last['passes_read']:.2f} | {last['f']:.6f}{ev} | {gmap:.3g} | {mib:.1f} |")
    return out


def perf_check(setup: Setup, model: VarianceReducedMF, repeats: int = 3) -> list[str]:
    """Microseconds per sample: VR's full-gradient pass vs the online coding step, at the
    fitted ``model``'s ``W``."""
    X, n = setup.X, setup.X.shape[0]
    form, W = model.formulation_, model.loadings_[0]
    data = FiniteData(X, "numpy", {"dtype": np.float64})

    def best_of(function) -> float:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            function()
            times.append(time.perf_counter() - start)
        return 1e6 * min(times) / n

    with using("numpy"):
        vr = best_of(lambda: full_gradient(form, W, data, model.chunk_size, coder="fista",
                                           tol=CODER["code_tol"],
                                           max_iter=CODER["code_max_iter"]))
    lines = [f"| {setup.name} | VR full-gradient pass (FISTA tol 1e-6, <= 100 it, chunks "
             f"{model.chunk_size}) | {vr:.1f} |"]
    if setup.params["formulation"] == "orpca":
        lam = setup.params["formulation_params"]["lam1"]

        def online():
            learner = OnlineRobustPCA(setup.n_components, norm_alpha=lam, outlier_alpha=lam,
                                      batch_size=1024, code_max_iter=100, random_state=0)
            learner.partial_fit(X)

        lines.append(f"| {setup.name} | OnlineRobustPCA.partial_fit (batch 1024, <= 100 it) | "
                     f"{best_of(online):.1f} |")
    else:
        # OnlineCPDL's coder; ||x - W h||^2 + alpha |h|_1 + ridge ||h||^2 conventions
        nonneg = setup.params["formulation"] == "onmf"
        lam = setup.params["formulation_params"]["lam"]
        kwargs = dict(alpha=0.0, ridge=lam) if nonneg else dict(alpha=2 * lam, ridge=0.0)
        gram = W.T @ W

        def code():
            for start in range(0, n, model.chunk_size):
                sparse_code(gram, X[start:start + model.chunk_size] @ W, nonnegative=nonneg,
                            tol=1e-6, **kwargs)

        lines.append(f"| {setup.name} | coding.sparse_code (OnlineCPDL's coder, chunks "
                     f"{model.chunk_size}) | {best_of(code):.1f} |")
    return lines


def write_curves(path: str, results: list[SetupResult]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CURVE_FIELDS)
        writer.writeheader()
        for result in results:
            for (label, step), rows in result.curves.items():
                for row in rows:
                    writer.writerow({"setup": result.setup.name, "method": label,
                                     "step": "" if step is None else step,
                                     "best": int(result.best[label] == step), **row})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--setups", nargs="+", choices=list(SETUPS), default=list(SETUPS))
    parser.add_argument("--passes", type=float, default=None,
                        help="pass budget per run (default 12; --quick 2)")
    parser.add_argument("--n-samples", type=int, default=None,
                        help="subsample the digits / set the synthetic n (smoke runs)")
    parser.add_argument("--full", action="store_true", help="ORPCA at the paper's size")
    parser.add_argument("--quick", action="store_true",
                        help="middle step of each grid, 2 passes, no long run")
    parser.add_argument("--long-factor", type=float, default=None,
                        help="long run = best VR run continued to this x the budget (3)")
    parser.add_argument("--delta", type=float, default=1e-5, help="f_ref offset (below every f)")
    parser.add_argument("--targets", type=float, nargs="+", default=[1e-2, 1e-3],
                        help="report passes / seconds to reach f_ref + target")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-perf", action="store_true", help="skip the per-sample check")
    parser.add_argument("--no-memory", action="store_true",
                        help="skip the peak-memory column (it reruns one epoch per method)")
    parser.add_argument("--out", default="bench_svrmf.csv", help="CSV of all curves")
    return parser


def default_passes(quick: bool) -> float:
    """About the paper's S = 10 VR epochs (~11-12 passes); 2 for a quick look."""
    return 2.0 if quick else 12.0


def main(argv: list[str] | None = None) -> list[SetupResult]:
    args = build_parser().parse_args(argv)
    long_factor = args.long_factor or (1.0 if args.quick else 3.0)
    results, table, perf, notes = [], [], [], []
    with threadpool_limits(args.threads):
        for name in args.setups:
            setup = SETUPS[name](args.n_samples, args.seed, args.full)
            passes = args.passes or default_passes(args.quick)
            print(f"{name}: n={setup.X.shape[0]}, d={setup.X.shape[1]}, "
                  f"k={setup.n_components}, budget {passes:g} passes", flush=True)
            result = run_setup(setup, method_grid(setup, args.quick), passes, args.seed,
                               long_factor, args.delta, tuple(args.targets))
            results.append(result)
            table += table_rows(result, tuple(args.targets), args.seed, not args.no_memory)
            notes.append(f"{name}: f_ref = {result.f_ref:.6f} (long run f = "
                         f"{result.f_long:.6f} after {result.long_passes:.1f} passes)")
            if not args.no_perf:
                best_vr = result.models["VR (mb~n)", result.best["VR (mb~n)"]]
                perf += perf_check(setup, best_vr, 1 if args.quick else 3)
    write_curves(args.out, results)
    print(f"\nBest of grid per method; f_ref = min(long run, all recorded) - {args.delta:g}; "
          f"BLAS threads {args.threads}; seed {args.seed}; times are algorithm seconds.")
    reach = " | ".join(f"passes / s to f_ref + {target:g}" for target in args.targets)
    print(f"| setup | method | best step | {reach} | passes run | final f | final ‖Γ₁‖² "
          f"| peak MiB (1 epoch) |")
    print("|---" * (7 + len(args.targets)) + "|")
    print("\n".join(table))
    print("\n".join(notes))
    if perf:
        print("\n| setup | step | µs / sample |\n|---|---|---|")
        print("\n".join(perf))
    print(f"\ncurves written to {args.out}")
    return results


if __name__ == "__main__":
    main()
