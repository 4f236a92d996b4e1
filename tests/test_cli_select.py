"""``tensorstream select`` (issue #32): candidate groupings and ranks from a file, the table
(netCDF or CSV), the plot and the choice; bad options named in one line."""

import numpy as np
import pytest
import xarray as xr

from tensorstream.cli import main
from tensorstream.cli.select import parse_ranks


@pytest.fixture(scope="module")
def patches(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = np.einsum("nr,ir,jr,kr->nijk", rng.random((300, 2)), rng.random((5, 2)),
                  rng.random((4, 2)), rng.random((3, 2)))
    path = tmp_path_factory.mktemp("data") / "patches.npy"
    np.save(path, X)
    return path


def test_select_writes_the_table_and_the_plot_and_prints_the_choice(patches, tmp_path,
                                                                    capsys):
    pytest.importorskip("matplotlib")
    out, plot = tmp_path / "selection.nc", tmp_path / "selection.png"
    assert main(["select", str(patches), "--modes", "axis1;axis2;axis3", "--modes",
                 "axis1,axis2;axis3", "--n-components", "1:3", "--passes", "2",
                 "--batch-size", "40", "--out", str(out), "--plot", str(plot)]) == 0
    table = xr.open_dataset(out)
    assert list(table.grouping.values) == ["axis1;axis2;axis3", "axis1,axis2;axis3"]
    assert list(table["rank"].values) == [1, 2, 3]
    assert plot.stat().st_size > 0
    printed = capsys.readouterr().out
    # the planted grouping (exact rank 2 in three modes); one pass (three at most) of these
    # 300 samples leaves rank 2 short of the error of a joint rank 3 (1.2e-4 against 1e-4)
    assert printed.startswith('chosen: --modes "axis1;axis2;axis3" --n-components 2 ')


def test_select_writes_csv(patches, tmp_path):
    out = tmp_path / "selection.csv"
    assert main(["select", str(patches), "--modes", "axis1,axis2,axis3", "--model", "nmf",
                 "--n-components", "1,2", "--passes", "1", "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[0].startswith("grouping,rank,imputation_error") and len(lines) == 3


def test_select_takes_the_learners_per_candidate(patches, tmp_path):
    out = tmp_path / "selection.nc"
    assert main(["select", str(patches), "--modes", "axis1;axis2;axis3", "--n-components", "2",
                 "--passes", "1", "--splits", "2", "--out", str(out)]) == 0
    assert xr.open_dataset(out).attrs["n_splits"] == 2


@pytest.mark.parametrize("options, message", [
    (["--modes", "axis1;axis2;axis9", "--n-components", "2"], "unknown dim 'axis9'"),
    (["--modes", "axis1;axis2;axis3", "--n-components", "a:b"], "--n-components: expected"),
    (["--modes", "axis1;axis2;axis3", "--n-components", "0:2"], "give positive ranks"),
    (["--modes", "axis1;axis2;axis3", "--n-components", "2", "--out", "t.txt"],
     "--out must end in .nc or .csv"),
    (["--modes", "axis1;axis2;axis3", "--n-components", "2", "--param", "alpha"],
     "--param expects KEY=VALUE"),
    (["--modes", "axis1;axis2;axis3", "--model", "nmf", "--n-components", "2"],
     "OnlineNMF factorizes matrices"),
    (["--modes", "axis1;axis2;axis3", "--n-components", "2", "--param", "alpah=0.1"],
     "--param alpah does not apply to --model ocpdl"),
    (["--modes", "axis1;axis2;axis3", "--n-components", "2", "--param", "n_components=3"],
     "give the candidate ranks as --n-components"),
    (["--modes", "axis1;axis2;axis3", "--n-components", "2", "--splits", "1"], "--splits"),
])
def test_bad_options_are_named(patches, capsys, options, message):
    assert main(["select", str(patches), *options]) == 1
    assert message in capsys.readouterr().err


def test_rank_ranges_are_inclusive():
    assert parse_ranks("4:12:4") == [4, 8, 12]
    assert parse_ranks("2:4") == [2, 3, 4]
    assert parse_ranks("3,5") == [3, 5]


def test_fit_and_select_read_params_alike(patches, capsys):
    """One parser (cli/params.py): the same values, the same refusal of an unknown name."""
    from tensorstream import OnlineCPDL
    from tensorstream.cli.errors import CLIError
    from tensorstream.cli.params import add_params

    params = add_params({"random_state": 0}, ["alpha=0.5", "dict_passes=2"], OnlineCPDL, "x")
    assert params == {"random_state": 0, "alpha": 0.5, "dict_passes": 2}
    with pytest.raises(CLIError, match="--param beta, --param gamma does not apply"):
        add_params({}, ["gamma=1", "beta=2"], OnlineCPDL, "ocpdl")
    assert main(["fit", str(patches), "--n-components", "2", "--out", "never.nc",
                 "--param", "alpah=0.1"]) == 1
    assert "--param alpah does not apply to --model" in capsys.readouterr().err
