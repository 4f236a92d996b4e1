"""Refactoring changes no result: every learner's factors and codes on fixed seeds, as recorded.

Each case fits one learner on small fixed data and returns the arrays it learned (loadings or
components, codes of a few samples, outliers where the model has them). The recording in
``tests/golden/results.npz`` was made on numpy and on pytorch (float64, CPU) before the engine
was rebuilt; a refactor must reproduce it to 1e-10. A change that is *meant* to change results
(a new default, a fixed bug) re-records it, says so in its commit message, and keeps the cases:

    python tests/test_unchanged_results.py --record
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import step_params

from tensorstream.core.backend import to_numpy

GOLDEN = Path(__file__).parent / "golden" / "results.npz"
BACKENDS = ["numpy"] + (["pytorch"] if importlib.util.find_spec("torch") else [])
TOLERANCE = dict(rtol=1e-10, atol=1e-10)


def _data(shape, seed=0, scale=1.0):
    return scale * np.random.default_rng(seed).random(shape)


def _as_backend(X, backend):
    if backend == "numpy":
        return X
    import torch

    return torch.tensor(X, dtype=torch.float64)


def _low_rank(n, features, rank, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, rank)) @ rng.random((rank, features)) / rank


def _cpdl(backend):
    from tensorstream import OnlineCPDL

    X = _as_backend(_data((60, 5, 4, 3)), backend)
    model = OnlineCPDL(3, batch_size=10, max_iter=2, alpha=0.05, ridge=0.01, random_state=0)
    model.fit(X)
    return {"loadings": model.loadings_, "codes": model.transform(X[:4])}


def _cpdl_masked_radius(backend):
    from tensorstream import OnlineCPDL

    X = _data((40, 6, 5))
    mask = np.random.default_rng(1).random(X.shape) < 0.8
    model = OnlineCPDL(2, weights=0.7, search_radius=0.5, random_state=1)
    for start in range(0, 40, 10):
        model.partial_fit(_as_backend(X[start:start + 10], backend), mask=mask[start:start + 10])
    return {"loadings": model.loadings_, "codes": model.transform(_as_backend(X[:4], backend)),
            "A": model.statistics_["A"]}


def _cpdl_kl(backend):
    from tensorstream import OnlineDivergenceNMF

    # recorded as OnlineCPDL(loss="kl"), whose code_tol was 1e-5: the same algorithm since
    X = _as_backend(np.random.default_rng(2).poisson(3.0, (40, 5, 4)).astype(float), backend)
    model = OnlineDivergenceNMF(2, loss="kl", batch_size=10, max_iter=1, step_a=500.0,
                                code_max_iter=20, code_tol=1e-5, random_state=0).fit(X)
    return {"loadings": model.loadings_, "codes": model.transform(X[:4])}


def _nmf(backend, coder):
    from tensorstream import OnlineNMF

    X = _as_backend(_low_rank(80, 12, 3), backend)
    model = OnlineNMF(3, batch_size=20, max_iter=2, coder=coder, alpha_W=0.01, l1_ratio=0.5,
                      random_state=0).fit(X)
    return {"components": model.components_, "codes": model.transform(X[:4])}


def _nmf_forget(backend):
    from tensorstream import OnlineNMF

    X = _as_backend(_low_rank(80, 12, 3, seed=3), backend)
    model = OnlineNMF(3, batch_size=20, max_iter=2, forget_factor=0.7, init="nndsvda",
                      random_state=0).fit(X)
    return {"components": model.components_, "codes": model.transform(X[:4])}


def _robust(backend, solver):
    from tensorstream import RobustOnlineNMF

    X = _low_rank(60, 15, 3, seed=4)
    X[::4, ::5] = 1.0
    X = _as_backend(X, backend)
    model = RobustOnlineNMF(3, solver=solver, batch_size=10, max_iter=1, random_state=0).fit(X)
    return {"loadings": model.loadings_, "codes": model.transform(X[:4]),
            "outliers": model.outliers(X[:4])}


def _robust_masked(backend):
    from tensorstream import RobustOnlineNMF

    X = _low_rank(40, 10, 2, seed=5)
    mask = np.random.default_rng(5).random(X.shape) < 0.7
    model = RobustOnlineNMF(2, solver="pgd", dict_l1=0.01, ridge=0.01, random_state=0)
    for start in range(0, 40, 10):
        model.partial_fit(_as_backend(X[start:start + 10], backend), mask=mask[start:start + 10])
    return {"loadings": model.loadings_,
            "codes": model.transform(_as_backend(X[:4], backend), mask=mask[:4])}


def _divergence(backend, loss, dict_step, **options):
    from tensorstream import OnlineDivergenceNMF

    X = _as_backend(np.random.default_rng(6).poisson(4.0, (50, 8)).astype(float) + 0.5, backend)
    model = OnlineDivergenceNMF(2, loss=loss, dict_step=dict_step, batch_size=10, max_iter=1,
                                code_max_iter=30, random_state=0, **options).fit(X)
    return {"components": model.components_, "codes": model.transform(X[:4])}


def _maxnorm(backend, mode):
    from tensorstream import OnlineMaxNormMD
    from tensorstream.datasets.maxnorm import corrupted_low_rank

    Z = _as_backend(corrupted_low_rank(20, 3, 60, 0.1, random_state=0).Z, backend)
    # recorded as variant=mode: "paper" was the default column bound's None (no projection)
    bound = {"authors": "auto", "paper": None}[mode]
    model = OnlineMaxNormMD(3, column_bound=bound, batch_size=2, random_state=0).fit(Z)
    return {"loadings": model.loadings_, "outliers": model.outliers(Z[:4])}


def _orpca(backend):
    from tensorstream import OnlineRobustPCA
    from tensorstream.datasets.maxnorm import corrupted_low_rank

    Z = _as_backend(corrupted_low_rank(20, 3, 60, 0.1, random_state=1).Z, backend)
    model = OnlineRobustPCA(3, batch_size=3, random_state=0).fit(Z)
    return {"loadings": model.loadings_, "outliers": model.outliers(Z[:4])}


def _variance_reduced(backend, formulation, method):
    from tensorstream import VarianceReducedMF

    X = _as_backend(_low_rank(120, 10, 3, seed=7) + 0.01 * _data((120, 10), seed=8), backend)
    step = step_params(0.5, method)  # SMM takes no step
    model = VarianceReducedMF(3, formulation=formulation, method=method, n_epochs=2,
                              method_params=step, random_state=0).fit(X)
    return {"components": model.components_, "codes": model.transform(X[:4])}


def _robust_batch(backend, solver):
    from tensorstream import RobustNMF

    X = _low_rank(30, 12, 3, seed=9)
    X[::5, ::4] = 1.0
    X = _as_backend(X, backend)
    model = RobustNMF(3, solver=solver, max_iter=20, random_state=0).fit(X)
    return {"components": model.components_, "codes": model.codes_, "outliers": model.outliers_}


def _pcp(backend):
    from tensorstream import RobustPCA
    from tensorstream.datasets.maxnorm import corrupted_low_rank

    Z = _as_backend(corrupted_low_rank(20, 3, 50, 0.1, random_state=2).Z, backend)
    model = RobustPCA(3).fit(Z)
    return {"low_rank": model.low_rank_, "sparse": model.sparse_}


CASES = {
    "cpdl": _cpdl,
    "cpdl_masked_radius": _cpdl_masked_radius,
    "cpdl_kl": _cpdl_kl,
    "nmf_admm": lambda backend: _nmf(backend, "admm"),
    # recorded with coder="hals", the old name of "pivoting" (the key kept: no re-recording)
    "nmf_hals": lambda backend: _nmf(backend, "pivoting"),
    "nmf_forget_nndsvda": _nmf_forget,
    "robust_admm": lambda backend: _robust(backend, "admm"),
    "robust_pgd": lambda backend: _robust(backend, "pgd"),
    "robust_masked": _robust_masked,
    "divergence_kl_sgd": lambda backend: _divergence(backend, "kl", "sgd"),
    "divergence_kl_mu": lambda backend: _divergence(backend, "kl", "mu"),
    "divergence_kl_mu_one_round": lambda backend: _divergence(backend, "kl", "mu",
                                                              dict_rounds=1),
    "divergence_beta": lambda backend: _divergence(backend, 1.5, "sgd"),
    "maxnorm_authors": lambda backend: _maxnorm(backend, "authors"),
    "maxnorm_paper": lambda backend: _maxnorm(backend, "paper"),
    "orpca": _orpca,
    "vr_odl": lambda backend: _variance_reduced(backend, "odl", "vr"),
    "vr_orpca_sgd": lambda backend: _variance_reduced(backend, "orpca", "sgd"),
    "vr_onmf_smm": lambda backend: _variance_reduced(backend, "onmf", "smm"),
    "batch_robust_pgd": lambda backend: _robust_batch(backend, "pgd"),
    "batch_robust_admm": lambda backend: _robust_batch(backend, "admm"),
    "batch_pcp": _pcp,
}


def _arrays(result: dict) -> dict[str, np.ndarray]:
    out = {}
    for name, value in result.items():
        if isinstance(value, list):
            out.update({f"{name}{k}": to_numpy(v) for k, v in enumerate(value)})
        else:
            out[name] = to_numpy(value)
    return out


def run_case(name: str, backend: str) -> dict[str, np.ndarray]:
    """The case's arrays on the portable path, as a GPU runs it: the ``tl.*`` column sweep
    (numba's kernel differs by rounding, see ``steps/compiled.py``) and torch's own kernels
    for torch tensors (on the CPU they run on numpy by default, see ``core.backend.run``), so
    the recording does not depend on what is installed and the pytorch case tests torch."""
    from tensorstream.core.backend import TORCH_CPU, using
    from tensorstream.steps.compiled import SWITCH

    pinned = {SWITCH: "0", TORCH_CPU: "torch"}
    saved = {key: os.environ.get(key) for key in pinned}
    os.environ.update(pinned)
    try:
        with using(backend):
            return _arrays(CASES[name](backend))
    finally:
        for key, value in saved.items():
            if value is None:
                del os.environ[key]
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def golden():
    with np.load(GOLDEN) as archive:
        return dict(archive)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_results_match_the_recording(name, backend, golden):
    result = run_case(name, backend)
    recorded = {key.split("/")[2]: value for key, value in golden.items()
                if key.startswith(f"{backend}/{name}/")}
    assert sorted(result) == sorted(recorded)
    for key, value in result.items():
        np.testing.assert_allclose(value, recorded[key], **TOLERANCE, err_msg=f"{name}: {key}")


def record() -> None:
    arrays = {f"{backend}/{name}/{key}": value
              for backend in BACKENDS for name in sorted(CASES)
              for key, value in run_case(name, backend).items()}
    GOLDEN.parent.mkdir(exist_ok=True)
    np.savez_compressed(GOLDEN, **arrays)
    print(f"recorded {len(arrays)} arrays of {len(CASES)} cases x {BACKENDS} in {GOLDEN}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit(__doc__)
    import torch

    torch.set_num_threads(1)
    record()
