"""A refusal of negative data names the way out, for every learner that refuses them, in
Python and on the command line; the learner's state is untouched by the refusal."""

import numpy as np
import pytest
from state_helpers import BACKENDS, LEARNERS, make, state_of

from tensorstream import OnlineCPDL, OnlineDivergenceNMF, VarianceReducedMF
from tensorstream.cli import main
from tensorstream.streams import Ising

#: what each learner's refusal must say to do instead
WAY_OUT = {
    "ocpdl": "nonnegative=False",
    "nmf": "OnlineCPDL(nonnegative=False)",
    "robust-nmf": "OnlineCPDL(nonnegative=False)",
    "robust-nmf-batch": "OnlineCPDL(nonnegative=False)",
    "divergence-nmf": "loss='l2'",
    "vr-mf": "formulation_params={'allow_negative': True}",
}
#: learners for signed data: nothing to refuse
SIGNED = {"maxnorm", "robust-pca", "robust-pca-batch"}


def signed(backend, n=30, d=8):
    X = np.random.default_rng(0).standard_normal((n, d))
    if backend == "pytorch":
        import torch

        return torch.tensor(X)
    return X


def test_every_learner_is_classified():
    assert set(WAY_OUT) | SIGNED == set(LEARNERS)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(WAY_OUT))
def test_negative_data_refusal_names_the_way_out(name, backend):
    params = {"formulation": "onmf"} if name == "vr-mf" else {}
    model = make(name, **params)
    with pytest.raises(ValueError, match="negative") as raised:
        model.fit(signed(backend))
    assert WAY_OUT[name] in str(raised.value)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["ocpdl", "nmf", "divergence-nmf"])
def test_a_refused_step_leaves_the_state_and_names_the_way_out(name, backend):
    model = make(name)
    model.partial_fit(abs(signed(backend)))
    before = state_of(model)
    with pytest.raises(ValueError, match="negative") as raised:
        model.partial_fit(signed(backend))
    assert WAY_OUT[name] in str(raised.value)
    assert state_of(model) == before


@pytest.mark.parametrize("name", sorted(SIGNED))
def test_signed_learners_take_negative_data(name):
    make(name).fit(signed("numpy"))


def test_the_way_out_works():
    """What the messages say to pass is accepted: they are not advice that fails next."""
    X = signed("numpy")
    OnlineCPDL(2, nonnegative=False, max_iter=1, random_state=0).fit(X)
    OnlineDivergenceNMF(2, loss="l2", max_iter=1, random_state=0).fit(X)
    VarianceReducedMF(2, formulation="onmf", formulation_params={"allow_negative": True},
                      n_epochs=1, random_state=0).fit(X)


def test_ising_spins_to_the_default_ocpdl_name_the_way_out():
    stream = Ising((3, 3), beta=0.4, batch_size=5, n_steps=3, random_state=0)
    with pytest.raises(ValueError, match="nonnegative=False"):
        OnlineCPDL(2, random_state=0).fit(stream)
    stream = Ising((3, 3), beta=0.4, batch_size=5, n_steps=3, random_state=0)
    OnlineCPDL(2, nonnegative=False, random_state=0).fit(stream)


@pytest.mark.parametrize("model, way_out", [("ocpdl", "--param nonnegative=False"),
                                            ("nmf", "--param nonnegative=False"),
                                            ("divergence-nmf", "--loss l2")])
def test_the_command_names_its_way_out(tmp_path, capsys, model, way_out):
    path = tmp_path / "signed.npy"
    np.save(path, signed("numpy"))
    status = main(["fit", str(path), "--model", model, "--n-components", "2", "--quiet",
                   "--out", str(tmp_path / "f.nc")])
    assert status == 1
    assert way_out in capsys.readouterr().err
