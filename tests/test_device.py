"""``device=`` on every learner (issue 36): the same results on the CPU as the numpy backend
for every input kind, the device kept through clone/pickle/checkpoints, and a device this
machine lacks refused by name with the state untouched. The CUDA runs are in test_cuda.py."""

from __future__ import annotations

import inspect
import pickle

import numpy as np
import pytest
from sklearn.base import clone
from state_helpers import LEARNERS, data, entry_of, factors, leaves, make, state_of

from tensorstream import load
from tensorstream.core import device as device_module
from tensorstream.core.device import resolve_device
from tensorstream.engine.checkpoint import read_checkpoint, write_checkpoint

torch = pytest.importorskip("torch")

#: learners that learn from a stream of batches (the batch learners need the whole data set)
STREAMING = [name for name in LEARNERS if entry_of(name).kind == "online"]
TOLERANCE = 1e-10
#: input kinds a learner refuses whatever its device (VR needs dense data for its prox steps)
REFUSED = {("vr-mf", "sparse")}


def _kinds(X):
    """The input kinds a user may pass, each holding ``X``'s values."""
    xarray = pytest.importorskip("xarray")
    dask_array = pytest.importorskip("dask.array")
    sparse = pytest.importorskip("scipy.sparse")
    return {
        "numpy": X,
        "torch": torch.tensor(X),
        "dataarray": xarray.DataArray(X, dims=("sample", "feature")),
        "dask": dask_array.from_array(X, chunks=(10, X.shape[1])),
        "sparse": sparse.csr_matrix(X),
    }


def _fitted(name, X, **params):
    """A learner fitted on ``X``, or the type of error it refused ``X`` with."""
    model = make(name, **params)
    labelled = {"sample_dim": "sample"} if hasattr(X, "dims") and name in STREAMING else {}
    try:
        return model.fit(X, **labelled)
    except (TypeError, ValueError) as error:
        return type(error)


def _on(model, device):
    """Whether ``model``'s learned tensors are torch tensors on ``device`` (numpy arrays
    kept beside them: random generators' states, counts)."""
    tensors = [leaf for leaf in leaves(vars(model)) if isinstance(leaf, torch.Tensor)]
    return bool(tensors) and all(t.device == torch.device(device) for t in tensors)


def _assert_same_factors(on_device, reference):
    got, expected = factors(on_device), factors(reference)
    assert len(got) == len(expected)
    for U, V in zip(got, expected):
        np.testing.assert_allclose(U, V, rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("kind", ["numpy", "torch", "dataarray", "dask", "sparse"])
@pytest.mark.parametrize("name", LEARNERS)
def test_device_cpu_learns_what_numpy_learns_from_every_input_kind(name, kind):
    X = data()
    reference = _fitted(name, X)
    model = _fitted(name, _kinds(X)[kind], device="cpu")
    if isinstance(model, type):  # refused: the numpy learner refuses this kind alike
        assert (name, kind) in REFUSED
        assert _fitted(name, _kinds(X)[kind]) is model
        return
    assert _on(model, "cpu")
    _assert_same_factors(model, reference)


@pytest.mark.parametrize("name", STREAMING)
def test_device_cpu_learns_from_a_stream_of_numpy_batches_as_numpy(name):
    X = data()
    batches = [X[:10], X[10:20], X[20:]]
    reference = make(name)
    model = make(name, device="cpu")
    for batch in batches:
        reference.partial_fit(batch)
    model.fit(iter(batches))
    assert _on(model, "cpu") and model.n_steps_ == 3
    _assert_same_factors(model, reference)


@pytest.mark.parametrize("name", LEARNERS)
def test_transform_takes_host_data_and_returns_the_learners_tensors(name):
    model = make(name, device="cpu").fit(data())
    if not hasattr(model, "transform"):
        return
    codes = model.transform(data(seed=1))
    assert isinstance(codes, torch.Tensor) and codes.device == torch.device("cpu")
    reference = make(name).fit(data())
    np.testing.assert_allclose(codes.numpy(), reference.transform(data(seed=1)),
                               rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("name", LEARNERS)
def test_device_survives_clone_pickle_and_checkpoints(name, tmp_path):
    device = torch.device("cpu")
    model = make(name, device=device).fit(data())
    assert clone(model).get_params()["device"] == device
    again = pickle.loads(pickle.dumps(model))
    assert again.device == device and _on(again, "cpu")
    loaded = load(model.save(tmp_path / "m.npz"))
    assert str(loaded.device) == "cpu" and _on(loaded, "cpu")
    _assert_same_factors(loaded, model)


@pytest.mark.parametrize("name", LEARNERS)
def test_a_cuda_device_on_a_machine_without_one_is_refused_by_name(name, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    model = make(name, device="cuda")
    before = state_of(model)
    with pytest.raises(ValueError, match=r"device='cuda'.*no CUDA device.*device='cpu'"):
        model.fit(data())
    assert state_of(model) == before


@pytest.mark.parametrize("name", LEARNERS)
def test_a_fitted_learner_refuses_a_missing_device_with_its_state_untouched(name, monkeypatch):
    model = make(name, device="cpu").fit(data())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    model.set_params(device="cuda:1")
    before = state_of(model)
    with pytest.raises(ValueError, match="device='cuda:1'"):
        model.fit(data())
    assert state_of(model) == before


def test_not_a_device_and_a_device_with_the_numpy_backend_are_refused_by_name():
    with pytest.raises(TypeError, match="device"):
        make("nmf", device=3).fit(data())
    with pytest.raises(ValueError, match="device='gpu' is not a device"):
        make("nmf", device="gpu").fit(data())
    with pytest.raises(ValueError, match="backend='numpy'"):
        make("nmf", device="cpu", backend="numpy").fit(data())


def _recorded_on_cuda(path):
    """The checkpoint at ``path`` as one written on a GPU (its recorded device faked)."""
    meta, arrays = read_checkpoint(path)
    meta["params"]["device"] = "cuda"
    meta["device"] = "cuda:0"
    write_checkpoint(path, meta.pop("class"), meta, arrays)


@pytest.mark.parametrize("name", LEARNERS)
def test_a_cuda_checkpoint_loads_on_a_cpu_machine_with_map_location(name, tmp_path,
                                                                   monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    model = make(name, device="cpu").fit(data())
    path = model.save(tmp_path / "gpu.npz")
    _recorded_on_cuda(path)
    with pytest.raises(ValueError, match="device 'cuda:0'.*map_location='cpu'"):
        load(path)
    loaded = load(path, map_location="cpu")
    assert loaded.device == "cpu" and _on(loaded, "cpu")
    _assert_same_factors(loaded, model)
    loaded.partial_fit(data(seed=2)) if hasattr(loaded, "partial_fit") else loaded.fit(data())


def test_resolve_device_names_the_argument():
    assert resolve_device(None) is None
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="map_location='tpu"):
        resolve_device("tpu:0", "map_location")


# -- batch_size="auto" and the batch a device holds ---------------------------------------------

FAKE_CUDA = torch.device("cuda", 0)  # a device object only: nothing is allocated on it


@pytest.mark.parametrize("device", [None, "cpu"])
@pytest.mark.parametrize("name", STREAMING)
def test_auto_batch_on_the_cpu_is_the_learners_default(name, device):
    X = data(n=60)
    auto = make(name, batch_size="auto", device=device).fit(X)
    reference = make(name, device=device)
    # the class's default batch, or for a learner whose default is "auto" its rule
    # (learners._auto_batch: the family's share of the array within its limits)
    default = inspect.signature(type(reference).__init__).parameters["batch_size"].default
    reference.set_params(batch_size=reference._auto_batch(len(X)) if default == "auto"
                         else default).fit(X)
    assert auto.batch_size_ == reference.batch_size
    _assert_same_factors(auto, reference)


def test_auto_batch_on_a_gpu_is_the_largest_power_of_two_that_fits(monkeypatch):
    per_sample = device_module.step_bytes(1000, 20, 8)  # 8 * (4 * 1000 + 8 * 20) bytes
    assert per_sample == 33_280
    monkeypatch.setattr(device_module, "free_memory", lambda device: 100 * per_sample)
    assert device_module.step_batch_size("auto", FAKE_CUDA, 1000, 20, 8, 32) == 32  # 50 fit
    monkeypatch.setattr(device_module, "free_memory", lambda device: 1e12)
    assert device_module.step_batch_size("auto", FAKE_CUDA, 1000, 20, 8, 32) == 8192
    assert device_module.step_batch_size(100, None, 1000, 20, 8, 32) == 100  # no query


def test_a_batch_that_cannot_fit_on_a_gpu_is_refused_naming_the_one_that_fits(monkeypatch):
    per_sample = device_module.step_bytes(1000, 20, 8)
    monkeypatch.setattr(device_module, "free_memory", lambda device: 100 * per_sample)
    with pytest.raises(ValueError, match=r"batch_size=4096: .*batch_size=32 fits"):
        device_module.step_batch_size(4096, FAKE_CUDA, 1000, 20, 8, 32)
    monkeypatch.setattr(device_module, "free_memory", lambda device: per_sample)
    with pytest.raises(ValueError, match=r"batch_size='auto': one sample takes .*device='cpu'"):
        device_module.step_batch_size("auto", FAKE_CUDA, 1000, 20, 8, 32)


@pytest.mark.parametrize("name", STREAMING)
def test_fit_refuses_a_batch_the_gpu_cannot_hold_before_any_step(name, monkeypatch):
    """The learner's side of the rule: the device's free memory is asked before the first
    step, and a refusal leaves the learner as it was (the device is faked: no GPU here)."""
    model = make(name, batch_size=10)
    before = state_of(model)
    monkeypatch.setattr(type(model), "_device", lambda self: FAKE_CUDA)
    monkeypatch.setattr(device_module, "free_memory", lambda device: 1000.0)
    with pytest.raises(ValueError, match=r"batch_size=10: .*batch_size=\d+ fits"):
        model.fit(data())
    assert state_of(model) == before


@pytest.mark.parametrize("name", STREAMING)
def test_a_device_set_since_the_fit_is_refused_by_name(name, monkeypatch):
    model = make(name).fit(data())  # numpy: no device
    model.set_params(device="cpu")
    before = state_of(model)
    with pytest.raises(ValueError, match=r"device='cpu', but the learned state is on"):
        model.partial_fit(data(seed=3))
    assert state_of(model) == before
    on_cpu = make(name, device="cpu").fit(data())
    on_cpu.partial_fit(data(seed=3))  # the same device: goes on
    assert on_cpu.set_params(device=torch.device("cpu")).partial_fit(data(seed=4)).n_steps_ > 3


@pytest.mark.parametrize("name", LEARNERS)
def test_a_device_without_torch_installed_is_refused_by_name(name, monkeypatch):
    import sys

    model = make(name, device="cpu")
    before = state_of(model)
    monkeypatch.setitem(sys.modules, "torch", None)  # as on a machine without torch
    with pytest.raises(ImportError, match=r"device='cpu' runs on PyTorch.*pip install torch"):
        model.fit(data())
    assert state_of(model) == before


def test_the_batch_auto_chose_is_kept_in_a_checkpoint(monkeypatch, tmp_path):
    """A GPU's ``batch_size="auto"`` (here 300, stood in for on the CPU) configures the
    algorithm (OnlineCPDL's ``coder="auto"`` is ADMM from 256); a resumed run keeps it, and
    equals the run that went on without the save (it came back at the default 32: pivoting)."""
    from tensorstream import OnlineCPDL
    from tensorstream.learners import _base

    chosen = lambda batch_size, *args: 300 if batch_size == "auto" else int(batch_size)  # noqa: E731
    monkeypatch.setattr(_base, "step_batch_size", chosen)
    X = np.abs(np.random.default_rng(0).standard_normal((60, 4, 5)))
    model = OnlineCPDL(3, batch_size="auto", random_state=0).fit(X)
    assert model.batch_size_ == 300
    resumed = load(model.save(tmp_path / "run.npz"))
    assert resumed.batch_size_ == 300
    assert resumed._algorithm().options.batch_size == 300
    for learner in (model, resumed):
        learner.partial_fit(X[:40])
    for U, V in zip(model.loadings_, resumed.loadings_):
        np.testing.assert_array_equal(U, V)


@pytest.mark.parametrize("location", ["cuda", "cuda:1", "mps"])
def test_a_device_map_location_for_a_numpy_checkpoint_is_refused_by_name(location):
    """load(path, map_location='cuda') of a numpy checkpoint left the state on numpy without
    a word (checkpoint.py's _relocated is to call check_map_location first)."""
    from tensorstream.core.device import check_map_location

    with pytest.raises(ValueError, match=rf"map_location='{location}'.*numpy state"):
        check_map_location(location, "numpy")


@pytest.mark.parametrize("location, backend", [(None, "numpy"), ("cpu", "numpy"),
                                               ("cuda", "pytorch"), ("cuda:0", "pytorch")])
def test_host_or_torch_map_locations_pass_the_backend_check(location, backend):
    from tensorstream.core.device import check_map_location

    check_map_location(location, backend)  # resolve_device then checks the device exists


def test_load_refuses_a_device_map_location_for_a_numpy_checkpoint(tmp_path):
    """The check is live in ``load``: the numpy state did not move and said nothing."""
    model = make("nmf", device=None).fit(data(n=40))
    path = model.save(tmp_path / "numpy.npz")
    with pytest.raises(ValueError, match=r"map_location='cuda'.*numpy state"):
        load(path, map_location="cuda")
    assert type(load(path, map_location="cpu")) is type(model)
