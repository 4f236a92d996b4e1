"""Every learner on CUDA tensors: it learns on the device what it learns on numpy, keeps its
state there, refuses host tensors by name, and resumes a checkpoint exactly. Skipped without a
CUDA device (CI has none); run on a GPU machine with ``python -m pytest tests/test_cuda.py``.

``TENSORSTREAM_TEST_DEVICE=cpu TENSORSTREAM_TORCH_CPU=torch`` runs the same tests on host
tensors through torch's own kernels, the GPU's code path, to check this file without a GPU."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from state_helpers import LEARNERS, entry_of, leaves, make

from tensorstream.core.backend import run
from tensorstream.engine import OnlineState
from tensorstream.io import load_checkpoint

torch = pytest.importorskip("torch")
DEVICE = os.environ.get("TENSORSTREAM_TEST_DEVICE", "cuda")
pytestmark = pytest.mark.skipif(DEVICE == "cuda" and not torch.cuda.is_available(),
                                reason="needs a CUDA device")
OTHER = "cpu" if DEVICE == "cuda" else "meta"  # a device the learner's tensors are not on

ONLINE = [name for name in LEARNERS if entry_of(name).kind == "online"]


def _on_device(T):
    return isinstance(T, torch.Tensor) and T.device.type == DEVICE


def _data(name, seed=0):
    """Nonnegative samples: matrices, or 3 x 4 tensors for the tensor learners."""
    shape = (60, 12) if entry_of(name).matrix else (60, 3, 4)
    return np.random.default_rng(seed).random(shape) + 0.05


def _learned(model):
    """The learned factors on the host as float64, atoms on the last axis (``components_``
    transposed)."""
    names = [n for n in ("loadings_", "components_", "codes_") if n == "loadings_" and
             "state_" in vars(model) or n in vars(model)]
    found = []
    for name in names:
        value = getattr(model, name)
        for U in value if isinstance(value, list) else [value]:
            U = U.detach().cpu().double().numpy() if isinstance(U, torch.Tensor) else U
            found.append(U.T if name == "components_" else U)
    return found


def _same_factors(ours, theirs):
    """Equal factors, up to the sign of each atom where the model is signed (an SVD's signs
    are the library's choice: a GPU's may differ from LAPACK's)."""
    signs = np.sign(np.sum(ours[0] * theirs[0], axis=0))
    signs[signs == 0] = 1
    for U, V in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(U * signs, V, rtol=1e-6, atol=1e-8)
    return signs


@pytest.mark.parametrize("name", LEARNERS)
def test_a_learner_learns_on_the_device_what_it_learns_on_numpy(name):
    X = _data(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small data: convergence and health warnings
        on_numpy = make(name).fit(X)
        on_cuda = make(name).fit(torch.tensor(X, device=DEVICE))
    fitted = leaves(vars(on_cuda))
    assert fitted and all(_on_device(T) for T in fitted), "a fitted tensor left the device"
    signs = _same_factors(_learned(on_cuda), _learned(on_numpy))
    if hasattr(on_cuda, "transform"):
        codes = on_cuda.transform(torch.tensor(X[:7], device=DEVICE))
        assert _on_device(codes)
        np.testing.assert_allclose(codes.cpu().numpy() * signs, on_numpy.transform(X[:7]),
                                   rtol=1e-6, atol=1e-8)


def _host_kinds(X):
    """``X`` as the host input kinds a user gives a learner with a ``device``."""
    xarray = pytest.importorskip("xarray")
    dask_array = pytest.importorskip("dask.array")
    import torch

    return {"numpy": X, "torch": torch.from_numpy(X),  # a host tensor, moved to the device
            "dask": dask_array.from_array(X, chunks=(20,) + X.shape[1:]),
            "dataarray": xarray.DataArray(X, dims=("sample",) + tuple(
                f"axis{k}" for k in range(1, X.ndim)))}


@pytest.mark.parametrize("kind", ["numpy", "torch", "dask", "dataarray"])
@pytest.mark.parametrize("name", LEARNERS)
def test_device_moves_host_data_there_and_learns_what_numpy_learns(name, kind):
    """``device=`` (issue 36): host data of every kind sent to the device batch by batch."""
    X = _data(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        on_numpy = make(name).fit(X)
        model, data = make(name, device=DEVICE), _host_kinds(X)[kind]
        labelled = {"sample_dim": "sample"} if kind == "dataarray" and name in ONLINE else {}
        on_device = model.fit(data, **labelled)
    fitted = leaves(vars(on_device))
    assert fitted and all(_on_device(T) for T in fitted), "a fitted tensor left the device"
    signs = _same_factors(_learned(on_device), _learned(on_numpy))
    if hasattr(on_device, "transform") and kind == "numpy":
        codes = on_device.transform(X[:7])  # host input; the device's tensors back
        assert _on_device(codes)
        np.testing.assert_allclose(codes.cpu().numpy() * signs, on_numpy.transform(X[:7]),
                                   rtol=1e-6, atol=1e-8)


def test_the_command_line_fits_on_the_device(tmp_path, capsys):
    from tensorstream.cli import main

    np.save(tmp_path / "x.npy", np.random.default_rng(0).random((64, 12)))
    assert main(["fit", str(tmp_path / "x.npy"), "--modes", "axis1", "--n-components", "3",
                 "--batch-size", "16", "--steps", "4", "--device", DEVICE, "--checkpoint",
                 str(tmp_path / "c.npz"), "--out", str(tmp_path / "f.nc")]) == 0
    assert f"on {DEVICE}" in capsys.readouterr().err
    resumed = load_checkpoint(tmp_path / "c.npz")
    assert all(_on_device(U) for U in resumed.loadings_) and resumed.n_steps_ == 4


@pytest.mark.parametrize("name, params", [
    ("ocpdl", {"coder": "pivoting"}), ("ocpdl", {"coder": "admm", "batch_size": 30}),
    ("ocpdl", {"nonnegative": False}), ("ocpdl", {"alpha": 0.1}),
    ("divergence-nmf", {"loss": "kl"}), ("ocpdl", {"missing": "nan"}),
], ids=["pivoting", "admm", "signed", "l1", "kl", "missing"])
def test_the_cp_dictionary_learner_in_its_modes_on_the_device(name, params):
    """The CP dictionary's coders, losses and masked batches on tensor samples: each code path
    on the device (the KL loss is OnlineDivergenceNMF's since OnlineCPDL is the squared loss's
    learner only)."""
    X = _data("ocpdl", seed=1)
    if "missing" in params:
        X[::7, 1, 2] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        on_numpy = make(name, **params).fit(X)
        on_cuda = make(name, **params).fit(torch.tensor(X, device=DEVICE))
    assert all(_on_device(U) for U in on_cuda.loadings_)
    _same_factors(_learned(on_cuda), _learned(on_numpy))


@pytest.mark.parametrize("name", ONLINE)
def test_float32_on_the_device_stays_float32_and_finite(name):
    X = torch.tensor(_data(name), dtype=torch.float32, device=DEVICE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make(name).fit(X)
    for U in model.loadings_:
        assert _on_device(U) and U.dtype == torch.float32 and torch.isfinite(U).all()


@pytest.mark.parametrize("name", ONLINE)
def test_tensors_on_another_device_are_refused_by_name_and_change_nothing(name):
    X = _data(name)
    model = make(name).partial_fit(torch.tensor(X[:10], device=DEVICE))
    before = [U.clone() for U in model.loadings_]
    with pytest.raises(TypeError, match="X"):
        model.partial_fit(torch.tensor(X[10:20], device=OTHER))
    for U, V in zip(model.loadings_, before):
        assert torch.equal(U, V)


@pytest.mark.parametrize("name", ONLINE)
def test_a_checkpoint_on_the_device_resumes_exactly(name, tmp_path):
    X = torch.tensor(_data(name), device=DEVICE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        straight = make(name)
        half = make(name)
        for start in range(0, 30, 10):
            straight.partial_fit(X[start:start + 10])
            half.partial_fit(X[start:start + 10])
        resumed = load_checkpoint(half.save(tmp_path / "half.npz"))
        for start in range(30, 60, 10):
            straight.partial_fit(X[start:start + 10])
            resumed.partial_fit(X[start:start + 10])
    for U, V in zip(resumed.loadings_, straight.loadings_):
        assert _on_device(U) and torch.equal(U, V)


def test_a_carried_call_on_the_device_runs_torchs_kernels():
    """``run(..., carry=True)`` on device tensors: no numpy, no ``Carried`` (the GPU path)."""
    state = OnlineState(loadings=[torch.ones((3, 2), dtype=torch.float64, device=DEVICE)],
                        statistics=None)
    X = torch.ones((4, 3), dtype=torch.float64, device=DEVICE)
    seen = []

    def step(state, X):
        seen.append((type(state.loadings[0]), type(X)))
        return state, X @ state.loadings[0]

    new, product = run("pytorch", step, state, X, carry=True)
    assert seen == [(torch.Tensor, torch.Tensor)]
    assert new is state and _on_device(product)
