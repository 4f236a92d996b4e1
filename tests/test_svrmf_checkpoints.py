"""VarianceReducedMF's state (``FiniteState``) and its checkpoints: the batch learners' layout,
a saved run resuming exactly, and tampered fields refused by name.
"""

import dataclasses
import importlib.util

import numpy as np
import pytest
from state_helpers import _battery

from tensorstream import VarianceReducedMF, load
from tensorstream.core.backend import to_numpy
from tensorstream.engine.checkpoint import read_checkpoint
from tensorstream.finite.state import FiniteState

HAS_TORCH = importlib.util.find_spec("torch") is not None
LAPLACIAN = np.eye(6) * 2 - np.eye(6, k=1) - np.eye(6, k=-1)

AUTO = {"auto_samples": 20}  # a small subsample for the "auto" step
#: one learner per data-dependent part of the state: the formulation's Q (olrr), the reservoir's
#: output iterate, the SMM sums, dict parameters holding arrays and lists (formulation_params)
#: or a schedule (code_tol), and the torch backend
CASES = {
    "olrr Q": dict(formulation="olrr", method_params=AUTO),
    "output='random'": dict(formulation="ornmf", formulation_params={"lam": 0.1},
                            method_params={"output": "random", "step_size": 0.5}),
    "smm": dict(formulation="onmf", method="smm"),
    "laplacian": dict(formulation="ssodl", method_params=AUTO,
                      formulation_params={"laplacian": LAPLACIAN, "lam1": 0.2}),
    "groups": dict(formulation="ossl", method_params=AUTO,
                   formulation_params={"groups": [[[0, 1], 0.3], [2]], "lam": 0.1}),
    "code_tol schedule": dict(formulation="odl", method_params=AUTO,
                              code_tol={"c_tol": 0.5, "tau": 1e-3}),
    "torch": dict(formulation="orpca", method_params=AUTO),
}


def _data(n=30, d=6):
    rng = np.random.default_rng(0)
    return np.abs(rng.random((n, 2)) @ rng.random((2, d)) + 0.1 * rng.random((n, d)))


def _on(case, X):
    if case != "torch":
        return X
    if not HAS_TORCH:
        pytest.skip("needs torch")
    import torch

    return torch.as_tensor(X)


def _same_run(a, b):
    np.testing.assert_array_equal(to_numpy(a.components_), to_numpy(b.components_))
    np.testing.assert_array_equal(to_numpy(a.loadings_[0]), to_numpy(b.loadings_[0]))
    assert [h["passes_read"] for h in a.history_] == [h["passes_read"] for h in b.history_]
    assert (a.n_epochs_, a.n_steps_, a.scale_, a.step_size_) == \
        (b.n_epochs_, b.n_steps_, b.scale_, b.step_size_)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_saved_run_resumes_as_the_uninterrupted_one(case, tmp_path):
    X = _on(case, _data())
    params = dict(n_epochs=1, random_state=3, **CASES[case])
    half = VarianceReducedMF(3, **params).fit(X)
    resumed = load(half.save(tmp_path / "run.npz"))
    assert type(resumed.loadings_[0]) is type(half.loadings_[0])
    straight = VarianceReducedMF(3, **{**params, "n_epochs": 2}).fit(X)
    _same_run(resumed.partial_fit(X), straight)
    # the dict parameters come back as dicts, their arrays as arrays
    given, kept = half.get_params(), resumed.get_params()
    for name in ("formulation_params", "method_params", "code_tol"):
        assert type(kept[name]) is type(given[name])
    if case == "laplacian":
        np.testing.assert_array_equal(kept["formulation_params"]["laplacian"], LAPLACIAN)
        assert kept["formulation_params"]["lam1"] == 0.2
    else:
        assert (kept["formulation_params"], kept["method_params"], kept["code_tol"]) == \
            (given["formulation_params"], given["method_params"], given["code_tol"])


def test_the_layout_is_the_batch_learners_with_the_online_summary(tmp_path):
    model = VarianceReducedMF(2, formulation="olrr", method="smm", n_epochs=2,
                              random_state=0).fit(_data())
    meta, arrays = read_checkpoint(model.save(tmp_path / "m"))
    assert meta["version"] == 6 and "state" not in meta and meta["lists"] == {}
    assert set(arrays) == {"loading_0", "output", "A", "B", "Q"}
    assert meta["values"]["n_epochs"] == 2 and len(meta["values"]["history"]) == 2
    assert (meta["n_steps"], meta["n_samples_seen"], meta["n_loadings"], meta["scale"]) == (
        model.n_steps_, model.state_.n_samples_seen, 1, model.scale_)
    np.testing.assert_array_equal(arrays["loading_0"], model.loadings_[0])


def test_an_epoch_is_a_pure_function_of_the_state():
    X = _data()
    model = VarianceReducedMF(3, formulation="ornmf", method_params={"output": "random"},
                              n_epochs=1,
                              random_state=0).fit(X)
    state = model.state_
    rng_state = state.rng.bit_generator.state
    new, info = model._epoch(state, X)
    assert isinstance(new, FiniteState) and new is not state and model.state_ is state
    assert state.rng.bit_generator.state == rng_state and state.n_epochs == 1
    assert (new.n_epochs, len(new.history), new.history[-1]) == (2, 2, info)
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.n_epochs = 5


@pytest.mark.parametrize("field, change", [
    ("n_samples", lambda m, a: m["values"].update(n_samples="x")),
    ("inner_batch", lambda m, a: m["values"].update(inner_batch=10**6)),
    ("passes_read", lambda m, a: m["values"].update(passes_read=-1.0)),
    ("step_size", lambda m, a: m["values"].update(step_size=float("inf"))),
    ("history", lambda m, a: m["values"].update(history="x")),
    ("output", lambda m, a: a.update(output=a["output"][:, :1])),
    ("values", lambda m, a: m.pop("values")),
    ("n_epochs", lambda m, a: m["values"].pop("n_epochs")),
])
def test_tampered_state_fields_are_refused_by_name(field, change, tmp_path):
    good = VarianceReducedMF(2, n_epochs=1, random_state=0).fit(_data()).save(tmp_path / "g")
    bad = _battery.rewrite(good, tmp_path / "bad.npz", change)  # the battery's rewriter
    with pytest.raises(ValueError, match="cannot read checkpoint") as raised:
        load(bad)
    assert field in str(raised.value) and "bad.npz" in str(raised.value)
