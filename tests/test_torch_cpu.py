"""torch tensors in host memory run on numpy through views (``core.backend.run``): what the
computation sees, what comes back, and when torch's own kernels run instead."""

from __future__ import annotations

import dataclasses
from collections import namedtuple

import numpy as np
import pytest
import tensorly as tl
from state_helpers import leaves

from tensorstream import OnlineCPDL, OnlineNMF
from tensorstream.core.backend import TORCH_CPU, as_tensor, numpy_view, run

torch = pytest.importorskip("torch")

Pair = namedtuple("Pair", "first second")


@pytest.fixture(autouse=True)
def default_route(monkeypatch):
    """Every test starts from the default (CI's portable pass sets the switch for the rest)."""
    monkeypatch.delenv(TORCH_CPU, raising=False)


@dataclasses.dataclass(frozen=True)
class Box:
    arrays: list
    named: dict
    count: int = 0


def _seen(*args):
    """The types the computation was given, and the arguments back as results."""
    kinds = []

    def function(*given):
        kinds.extend(type(leaf).__module__.split(".")[0] for leaf in leaves(given))
        return given

    return kinds, run("pytorch", function, *args)


def test_host_tensors_are_seen_as_numpy_views_and_come_back_as_tensors_on_that_memory():
    T = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    box = Box(arrays=[T, T.T], named={"mask": T > 2, "index": torch.arange(2)}, count=3)
    kinds, (back_T, back_box, back_pair) = _seen(T, box, Pair(T, 1.5))
    assert kinds == ["numpy"] * 6
    assert isinstance(back_T, torch.Tensor) and back_T.data_ptr() == T.data_ptr()
    assert isinstance(back_box, Box) and back_box.count == 3
    assert back_box.arrays[1].data_ptr() == T.data_ptr()  # the transposed view too
    assert torch.equal(back_box.arrays[1], T.T)
    assert back_box.named["mask"].dtype == torch.bool
    assert back_box.named["index"].dtype == torch.int64
    assert isinstance(back_pair, Pair) and back_pair.second == 1.5


def test_results_are_torch_tensors_a_read_only_array_copied():
    T = torch.ones(3, dtype=torch.float32)

    def function(U):
        assert isinstance(U, np.ndarray) and U.dtype == np.float32
        return {"sum": U + 1, "broadcast": np.broadcast_to(U, (2, 3)), "number": 2.0}

    out = run("pytorch", function, T)
    assert out["number"] == 2.0
    assert torch.equal(out["sum"], torch.full((3,), 2.0))
    assert out["broadcast"].shape == (2, 3) and out["broadcast"].dtype == torch.float32


def test_nothing_to_convert_gives_the_same_objects_back():
    box = Box(arrays=[1, 2.0], named={"n": None})

    def function(given):
        assert given is box
        return given

    assert run("pytorch", function, box) is box


@pytest.mark.parametrize("make", [
    lambda: torch.ones(3, dtype=torch.float16),  # numpy has it, but torch's half is kept
    lambda: torch.ones(3, requires_grad=True),
    lambda: torch.ones(3, dtype=torch.complex64),
], ids=["half", "grad", "complex"])
def test_tensors_without_a_plain_view_keep_torch_kernels(make):
    kinds, _ = _seen(torch.ones(2, dtype=torch.float64), make())
    assert kinds == ["torch", "torch"]  # all or nothing: one backend per computation
    assert numpy_view(make()) is None


def test_a_negated_view_is_seen_with_its_values():
    T = torch.arange(4, dtype=torch.float64)
    negated = torch._neg_view(T)  # torch's lazy negation: the sign is a bit, not in memory
    assert negated.is_neg()
    np.testing.assert_array_equal(numpy_view(negated), -np.arange(4.0))


def test_a_batch_of_the_learners_kind_is_taken_as_it_is_others_converted():
    context = {"dtype": torch.float64, "device": torch.device("cpu")}
    T = torch.ones(2, 3, dtype=torch.float64)
    assert as_tensor(T, "pytorch", **context) is T
    single = as_tensor(T.float(), "pytorch", **context)
    assert single.dtype == torch.float64
    tracked = as_tensor(torch.ones(2, requires_grad=True, dtype=torch.float64), "pytorch",
                        **context)
    assert not tracked.requires_grad


def test_the_switch_keeps_torch_kernels(monkeypatch):
    monkeypatch.setenv(TORCH_CPU, "torch")
    kinds, _ = _seen(torch.ones(2, dtype=torch.float64))
    assert kinds == ["torch"]


def test_other_backends_are_left_alone():
    def function(X):
        assert isinstance(X, np.ndarray)
        return X

    X = np.ones(3)
    assert run("numpy", function, X) is X


def _fit(make, X, monkeypatch, route):
    monkeypatch.setenv(TORCH_CPU, route)
    model = make().fit(X)
    return model, model.transform(X[:5])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("make", [
    lambda: OnlineNMF(4, batch_size=32, max_iter=3, random_state=0),
    lambda: OnlineCPDL(3, batch_size=16, max_iter=2, random_state=0),
], ids=["nmf", "cpdl"])
def test_learners_on_host_tensors_match_torch_kernels_and_numpy(make, dtype, monkeypatch):
    rng = np.random.default_rng(0)
    shape = (96, 12) if make().__class__ is OnlineNMF else (64, 5, 4)
    X = rng.random(shape).astype(dtype)
    tolerance = 1e-9 if dtype == "float64" else 1e-3
    numpy_model, numpy_codes = _fit(make, X, monkeypatch, "numpy")
    results = {}
    for route in ("numpy", "torch"):
        model, codes = _fit(make, torch.from_numpy(X), monkeypatch, route)
        assert model.backend_ == "pytorch"
        assert isinstance(codes, torch.Tensor) and str(codes.dtype) == f"torch.{dtype}"
        for U in model.state_.loadings + [model.state_.statistics["B"]]:
            assert isinstance(U, torch.Tensor) and str(U.dtype) == f"torch.{dtype}"
        results[route] = model, codes
    # the same model to rounding both ways (the first loadings are drawn by torch's kernels
    # either way, so even the views' fit is not numpy's to the bit)
    for model, codes in results.values():
        for U, V in zip(model.loadings_, numpy_model.loadings_):
            np.testing.assert_allclose(U.numpy(), V, rtol=tolerance, atol=tolerance)
        np.testing.assert_allclose(codes.numpy(), numpy_codes, rtol=tolerance, atol=tolerance)


def test_a_refused_batch_of_host_tensors_changes_nothing():
    rng = np.random.default_rng(1)
    model = OnlineNMF(3, random_state=0).partial_fit(torch.from_numpy(rng.random((40, 6))))
    before = [U.clone() for U in model.loadings_]
    bad = torch.from_numpy(rng.random((40, 6)))
    bad[3, 2] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        model.partial_fit(bad)
    for U, V in zip(model.loadings_, before):
        assert torch.equal(U, V)


@pytest.mark.parametrize("route, seen", [("numpy", np.ndarray), ("torch", torch.Tensor)])
def test_a_step_and_transform_on_host_tensors_compute_on_the_chosen_kernels(route, seen,
                                                                           monkeypatch):
    import tensorstream.learners._base as base

    given = []
    step = base.online_step

    def spy(algorithm, X, state, *args, **kwargs):
        given.extend([type(X), type(state.loadings[0])])
        return step(algorithm, X, state, *args, **kwargs)

    monkeypatch.setattr(base, "online_step", spy)
    monkeypatch.setenv(TORCH_CPU, route)
    X = torch.from_numpy(np.random.default_rng(2).random((50, 7)))
    model = OnlineNMF(3, random_state=0).partial_fit(X).partial_fit(X)
    assert given == [seen] * 4
    assert isinstance(model.transform(X), torch.Tensor)


def test_numpy_arrays_given_stay_numpy_arrays_new_ones_become_tensors():
    constant = np.arange(3.0)
    box = Box(arrays=[torch.ones(3, dtype=torch.float64)], named={"constant": constant})

    def function(box):
        return Box(arrays=[box.arrays[0] + box.named["constant"]], named=box.named)

    out = run("pytorch", function, box)
    assert out.named["constant"] is constant
    assert isinstance(out.arrays[0], torch.Tensor)


@pytest.mark.parametrize("method", ["vr", "smm"])
def test_variance_reduced_mf_on_host_tensors_matches_numpy(method, monkeypatch):
    from tensorstream import VarianceReducedMF

    X = np.random.default_rng(3).random((120, 10))
    fitted = {}
    for route in ("numpy", "torch"):
        monkeypatch.setenv(TORCH_CPU, route)
        model = VarianceReducedMF(3, method=method, n_epochs=2, random_state=0)
        model.fit(torch.from_numpy(X))
        assert model.state_.backend == "pytorch" and model.backend_ == "pytorch"
        assert isinstance(model.state_.dictionary, torch.Tensor)
        codes = model.transform(torch.from_numpy(X[:4]))
        assert isinstance(codes, torch.Tensor)
        fitted[route] = model.components_.numpy(), codes.numpy()
    reference = VarianceReducedMF(3, method=method, n_epochs=2, random_state=0).fit(X)
    for components, codes in fitted.values():
        np.testing.assert_allclose(components, reference.components_, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(codes, reference.transform(X[:4]), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("solver", ["admm", "pgd"])
def test_batch_robust_nmf_on_host_tensors_matches_numpy(solver, monkeypatch):
    from tensorstream.learners.robust_nmf_batch import RobustNMF

    X = np.random.default_rng(4).random((60, 12))
    reference = RobustNMF(3, solver=solver, max_iter=20, random_state=0).fit(X)
    codes, outliers = reference.decompose(X[:5])
    for route in ("numpy", "torch"):
        monkeypatch.setenv(TORCH_CPU, route)
        model = RobustNMF(3, solver=solver, max_iter=20, random_state=0).fit(torch.from_numpy(X))
        assert isinstance(model.components_, torch.Tensor) and model.backend_ == "pytorch"
        got = model.decompose(torch.from_numpy(X[:5]))
        assert all(isinstance(T, torch.Tensor) for T in got)
        np.testing.assert_allclose(model.components_.numpy(), reference.components_,
                                   rtol=1e-8, atol=1e-10)
        for T, expected in zip(got, (codes, outliers)):
            np.testing.assert_allclose(T.numpy(), expected, rtol=1e-7, atol=1e-9)


def test_robust_nmf_callback_runs_on_the_datas_backend():
    """Batch RobustNMF iterates on numpy views of torch CPU tensors; its callback still runs
    on the data's backend (pytorch), as before the views, and the global backend is kept."""
    torch = pytest.importorskip("torch")
    from tensorstream import RobustNMF

    seen = []
    RobustNMF(3, max_iter=2, random_state=0,
              callback=lambda model, info: seen.append(tl.get_backend())).fit(
        torch.rand(20, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))
    assert seen == ["pytorch", "pytorch"] and tl.get_backend() == "numpy"


def test_variance_reduced_mf_on_backend_pytorch_takes_numpy_data():
    """``backend="pytorch"`` with numpy data fits on CPU torch tensors (it raised a KeyError
    for the missing device), the same as the same data given as a torch tensor."""
    from tensorstream import VarianceReducedMF

    X = np.random.default_rng(0).random((40, 8))
    from_numpy = VarianceReducedMF(3, backend="pytorch", n_epochs=1, random_state=0).fit(X)
    from_torch = VarianceReducedMF(3, n_epochs=1, random_state=0).fit(torch.tensor(X))
    assert isinstance(from_numpy.components_, torch.Tensor)
    assert from_numpy.components_.device.type == "cpu"
    np.testing.assert_allclose(from_numpy.components_.numpy(), from_torch.components_.numpy(),
                               rtol=1e-12, atol=1e-12)
    assert isinstance(from_numpy.transform(X[:3]), torch.Tensor)


def test_float_limits_are_read_from_the_dtype_of_either_backend():
    from tensorstream.core.backend import finfo_of

    assert finfo_of(np.ones(2, np.float32)).eps == np.finfo(np.float32).eps
    assert finfo_of(torch.ones(2, dtype=torch.float32)).eps == np.finfo(np.float32).eps
    assert finfo_of(torch.ones(2, dtype=torch.float64)).max == np.finfo(np.float64).max
    with pytest.raises(ValueError):
        finfo_of(np.ones(2, dtype=np.int64))
