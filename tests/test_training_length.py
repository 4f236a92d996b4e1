"""One training-length rule: ``tensorstream fit`` without ``--epochs``/``--steps`` runs as many
mini-batches as the learner's ``fit(X)`` on the same array (its ``max_iter`` passes)."""

import numpy as np
import pytest
import xarray as xr
from state_helpers import LEARNERS, entry_of

from tensorstream.cli import main


@pytest.mark.parametrize("name", [n for n in LEARNERS if entry_of(n).streamable])
def test_the_command_trains_as_long_as_fit(name, tmp_path):
    X = np.random.default_rng(0).random((60, 6)) + 0.1
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / "f.nc"
    assert main(["fit", str(tmp_path / "x.npy"), "--model", name, "--n-components", "2",
                 "--batch-size", "8", "--quiet", "--out", str(out)]) == 0
    learner = entry_of(name).load()(2, batch_size=8, random_state=0).fit(X)
    with xr.open_dataset(out) as ds:
        assert int(ds.attrs["n_steps"]) == learner.n_steps_
