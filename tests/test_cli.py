"""The `tensorstream` command end to end in a temporary folder: fit (netCDF, zarr-free .npy),
resume, demo, info, and bad input as one-line errors that leave every file untouched."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import tensorstream
import tensorstream.cli as cli
from tensorstream import OnlineCPDL, load
from tensorstream.cli import main
from tensorstream.cli.demo import (
    climate_like_dataarray,
    match_atoms,
    planted_patterns,
    run_demo,
)
from tensorstream.engine.checkpoint import read_checkpoint
from tensorstream.learners import registry

FIT = ["--var", "obs", "--sample-dim", "time", "--modes", "lat,lon;variable", "--n-components", "3",
       "--batch-size", "16", "--quiet"]


@pytest.fixture(scope="module")
def climate_file(tmp_path_factory):
    da, _ = climate_like_dataarray(n_days=4, random_state=1)  # 96 hourly samples
    path = tmp_path_factory.mktemp("data") / "climate.nc"
    da.to_netcdf(path)
    return path, da


def _files(folder):
    return sorted(p.name for p in folder.iterdir())


# -- fit -------------------------------------------------------------------------------------


def test_fit_netcdf_writes_labelled_factors_codes_and_plots(climate_file, tmp_path, capsys):
    path, da = climate_file
    out, plot = tmp_path / "factors.nc", tmp_path / "factors.png"
    assert main(["fit", str(path), *FIT, "--epochs", "2", "--codes", "--out", str(out),
                 "--plot", str(plot)]) == 0
    with xr.open_dataset(out) as ds:
        assert ds["lat_lon_loadings"].dims == ("lat", "lon", "component")
        np.testing.assert_array_equal(ds["lat"], da["lat"])
        np.testing.assert_array_equal(ds["variable"], da["variable"])
        assert ds["lat"].attrs["units"] == "degrees_north"
        assert ds["codes"].dims == ("time", "component")
        np.testing.assert_array_equal(ds["time"], da["time"])
        assert ds.attrs["n_steps"] == 12 and ds.attrs["model"] == "ocpdl"
        assert ds.attrs["modes"] == "lat,lon;variable"
    assert plot.stat().st_size > 10_000
    assert (tmp_path / "factors_convergence.png").stat().st_size > 5_000
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # not a private temporary file's
    assert capsys.readouterr().err == ""  # --quiet: no progress bar


def test_fit_npy_uses_axes_as_modes_and_shows_progress(tmp_path, capsys):
    X = np.random.default_rng(0).random((40, 6, 5, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / "f.nc"
    assert main(["fit", str(tmp_path / "x.npy"), "--modes", "axis1,axis2;axis3",
                 "--n-components", "2", "--batch-size", "8", "--steps", "3", "--out",
                 str(out)]) == 0
    captured = capsys.readouterr()
    assert "3/3" in captured.err and "loss=" in captured.err  # tqdm with the running loss
    assert "learned 2 components in 3 steps" in captured.out
    with xr.open_dataset(out) as ds:
        assert ds["axis1_axis2_loadings"].dims == ("axis1", "axis2", "component")
        assert ds["axis3_loadings"].shape == (3, 2)


def test_pytorch_backend_gives_the_numpy_result(climate_file, tmp_path):
    pytest.importorskip("torch")
    path, _ = climate_file
    for backend in ("numpy", "pytorch"):
        assert main(["fit", str(path), *FIT, "--steps", "4", "--backend", backend, "--out",
                     str(tmp_path / f"{backend}.nc")]) == 0
    with xr.open_dataset(tmp_path / "numpy.nc") as a, xr.open_dataset(tmp_path /
                                                                      "pytorch.nc") as b:
        assert b.attrs["params"].count('"backend": "pytorch"') == 1
        # float32 data: float32 state on both backends, equal to float32 rounding
        xr.testing.assert_allclose(a["lat_lon_loadings"], b["lat_lon_loadings"], atol=1e-5)


def test_cli_matches_the_python_api_batch_for_batch(climate_file, tmp_path):
    """The command is OnlineCPDL.partial_fit over cli.shuffled_batches, nothing else."""
    path, da = climate_file
    out = tmp_path / "f.nc"
    assert main(["fit", str(path), *FIT, "--steps", "9", "--alpha", "0.05", "--out",
                 str(out)]) == 0
    model = OnlineCPDL(3, alpha=0.05, batch_size=16, random_state=0)
    for k, rows in enumerate(cli.shuffled_batches(96, 16, seed=0, stop=9)):
        labels = {"sample_dim": "time", "modes": [("lat", "lon"), "variable"]} if k == 0 else {}
        model.partial_fit(da.isel(time=rows), **labels)
    with xr.open_dataset(out) as ds:
        xr.testing.assert_allclose(ds["lat_lon_loadings"],
                                   model.factors_["lat_lon_loadings"], rtol=1e-6)


def test_resume_gives_the_uninterrupted_result(climate_file, tmp_path):
    path, _ = climate_file
    full, part, resumed = (tmp_path / n for n in ("full.nc", "part.nc", "resumed.nc"))
    checkpoint = tmp_path / "run.npz"
    assert main(["fit", str(path), *FIT, "--steps", "14", "--out", str(full)]) == 0
    # "killed" after 5 steps (mid-epoch: 6 batches per epoch), then resumed to 14
    assert main(["fit", str(path), *FIT, "--steps", "5", "--checkpoint", str(checkpoint),
                 "--checkpoint-every", "2", "--out", str(part)]) == 0
    assert load(checkpoint).n_steps_ == 5
    assert load(checkpoint).n_iter_ == 1  # passes started, as fit counts them (was 0)
    assert main(["fit", str(path), *FIT, "--steps", "14", "--checkpoint", str(checkpoint),
                 "--resume", "--out", str(resumed)]) == 0
    assert load(checkpoint).n_iter_ == 3  # 14 batches of 6 an epoch
    with xr.open_dataset(full) as a, xr.open_dataset(resumed) as b:
        assert b.attrs["n_steps"] == 14
        for name in ("lat_lon_loadings", "variable_loadings"):
            np.testing.assert_array_equal(a[name].values, b[name].values)


def test_the_modes_attribute_of_the_factors_resumes_the_run(climate_file, tmp_path):
    """``attrs["modes"]`` keeps the modes' names (it lost ``space=`` and wrote a renamed,
    reordered stack as its default), so passing it back as ``--modes`` resumes the run."""
    path, _ = climate_file
    checkpoint, out = tmp_path / "run.npz", tmp_path / "part.nc"
    options = [o for o in FIT if o not in ("--modes", "lat,lon;variable")]
    assert main(["fit", str(path), *options, "--modes", "space=lon,lat;variable", "--steps", "3",
                 "--checkpoint", str(checkpoint), "--out", str(out)]) == 0
    with xr.open_dataset(out) as ds:
        modes = ds.attrs["modes"]
        assert "space_loadings" in ds
    assert modes == "space=lon,lat;variable"
    assert main(["fit", str(path), *options, "--modes", modes, "--steps", "5",
                 "--checkpoint", str(checkpoint), "--resume", "--out", str(out)]) == 0
    assert load(checkpoint).n_steps_ == 5


def test_resuming_with_other_modes_names_both(climate_file, tmp_path, capsys):
    """A resume whose --modes stack the dims in another order is refused, and the message
    shows both specifications (it showed the same mode names and shapes on both sides)."""
    path, _ = climate_file
    checkpoint = tmp_path / "run.npz"
    options = [o for o in FIT if o not in ("--modes", "lat,lon;variable")]
    out = tmp_path / "factors.nc"
    assert main(["fit", str(path), *options, "--modes", "lat_lon=lon,lat;variable",
                 "--steps", "2", "--checkpoint", str(checkpoint), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["fit", str(path), *options, "--modes", "lat,lon;variable", "--steps", "3",
                 "--checkpoint", str(checkpoint), "--resume", "--out", str(out)]) == 1
    error = capsys.readouterr().err
    assert "'lat_lon=lon,lat;variable'" in error and "'lat,lon;variable'" in error, error
    assert load(checkpoint).n_steps_ == 2


def test_ctrl_c_saves_a_checkpoint_and_resume_finishes(climate_file, tmp_path, monkeypatch,
                                                        capsys):
    path, _ = climate_file
    checkpoint, out = tmp_path / "run.npz", tmp_path / "f.nc"
    original = OnlineCPDL.partial_fit
    calls = []

    def interrupted(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    monkeypatch.setattr(OnlineCPDL, "partial_fit", interrupted)
    assert main(["fit", str(path), *FIT, "--steps", "8", "--checkpoint", str(checkpoint),
                 "--out", str(out)]) == 130
    assert "interrupted after step 3" in capsys.readouterr().err
    assert not out.exists() and load(checkpoint).n_steps_ == 3
    monkeypatch.setattr(OnlineCPDL, "partial_fit", original)
    assert main(["fit", str(path), *FIT, "--steps", "8", "--checkpoint", str(checkpoint),
                 "--resume", "--out", str(out)]) == 0
    assert main(["fit", str(path), *FIT, "--steps", "8", "--out",
                 str(tmp_path / "straight.nc")]) == 0
    with xr.open_dataset(out) as a, xr.open_dataset(tmp_path / "straight.nc") as b:
        np.testing.assert_array_equal(a["lat_lon_loadings"].values, b["lat_lon_loadings"].values)


def test_other_registered_models_plug_in(climate_file, tmp_path):
    if not registry.entry("nmf").installed:
        pytest.skip("tensorstream.learners.nmf is not installed")
    path, _ = climate_file
    out = tmp_path / "nmf.nc"
    assert main(["fit", str(path), "--var", "obs", "--sample-dim", "time", "--model", "nmf",
                 "--n-components", "2", "--batch-size", "16", "--steps", "2", "--quiet", "--out",
                 str(out)]) == 0
    with xr.open_dataset(out) as ds:  # a matrix model: all feature dims form one mode
        assert ds["lat_lon_variable_loadings"].dims == ("lat", "lon", "variable", "component")


def test_fit_offers_the_online_models_only(capsys):
    online = [e.name for e in registry.registered("online")]
    assert {"ocpdl", "divergence-nmf"} <= set(online)
    assert not {"vr-mf", "robust-nmf-batch", "robust-pca-batch"} & set(online)
    with pytest.raises(SystemExit):
        main(["fit", "x.npy", "--model", "vr-mf", "--out", "f.nc"])
    assert "invalid choice: 'vr-mf'" in capsys.readouterr().err


# -- bad input ---------------------------------------------------------------------------------


def _bad_files(folder):
    np.save(folder / "nan.npy", np.where(np.arange(60).reshape(20, 3) == 31, np.nan, 1.0))
    xr.DataArray(np.array([["a", "b"], ["c", "d"]]), dims=("time", "x"),
                 name="s").to_netcdf(folder / "text.nc")
    (folder / "garbage.nc").write_bytes(b"not a netCDF file")
    np.save(folder / "one.npy", np.ones(5))


NO_LABELS = {"--var": None, "--sample-dim": None, "--modes": None}
BAD = {  # changes to a good command line (None: leave the option out) -> expected message
    "unknown dim": ({"--modes": "lat,lonn;variable"}, "unknown dim 'lonn'; the array has dims"),
    "dim twice": ({"--modes": "lat,lon;lat,variable"}, "dim 'lat' is listed twice"),
    "left-out dim": ({"--modes": "lat,lon"}, "dims ['variable'] are neither"),
    "sample dim in modes": ({"--modes": "time;lat,lon,variable"}, "is the sample_dim"),
    "no sample dim": ({"--sample-dim": None}, "sample dim is required"),
    "unknown sample dim": ({"--sample-dim": "day"}, "available dims: ['time', 'lat'"),
    "unknown variable": ({"--var": "t2m"}, "available variables: ['obs']"),
    "bad modes text": ({"--modes": "lat,;variable"}, "cannot parse"),
    "no n_components": ({"--n-components": None}, "--n-components is required"),
    "zero steps": ({"--steps": "0"}, "--steps must be >= 1"),
    "zero plot components": ({"--plot-components": "0"}, "--plot-components must be >= 1"),
    "inapplicable option": ({"--model": "robust-nmf", "--loss": "kl"},
                            "--loss does not apply to --model robust-nmf"),
    "bad --param": ({"--param": "ridge"}, "--param expects KEY=VALUE"),
    "unknown parameter": ({"--param": "rigde=0.1"}, "--param rigde does not apply"),
    "missing folder": ({"--out": "{tmp}/no/such/folder/f.nc"}, "does not exist"),
    "out is a folder": ({"--out": "{tmp}"}, "it is a folder"),
    "plot in missing folder": ({"--plot": "{tmp}/nope/f.png"}, "cannot write --plot"),
    "resume without checkpoint": ({"--resume": True}, "--resume needs --checkpoint"),
    "nothing to resume": ({"--checkpoint": "{tmp}/none.npz", "--resume": True},
                          "nothing to resume"),
    "missing input": ({"INPUT": "{tmp}/absent.nc"}, "no such file or folder"),
    "unreadable input": ({"INPUT": "{tmp}/garbage.nc"}, "cannot open"),
    "non-numeric data": ({"INPUT": "{tmp}/text.nc", "--var": "s", "--modes": None},
                         "non-numeric data"),
    "NaN in data": ({"INPUT": "{tmp}/nan.npy", **NO_LABELS}, "contain NaN or infinite values"),
    "1-D npy": ({"INPUT": "{tmp}/one.npy", **NO_LABELS}, "expected (n_samples, I_1, ..., I_n)"),
    "npy with --var": ({"INPUT": "{tmp}/one.npy", "--sample-dim": None, "--modes": None},
                       "--var/var does not apply"),
}


def _command(tmp_path, input_path, changes):
    """A good command line for ``input_path``, with ``changes`` applied."""
    args = {"INPUT": str(input_path), "--var": "obs", "--sample-dim": "time",
            "--modes": "lat,lon;variable", "--n-components": "2", "--out": str(tmp_path / "out.nc")}
    args.update(changes)
    command = ["fit", args.pop("INPUT").format(tmp=tmp_path), "--quiet"]
    for option, value in args.items():
        if value is True:
            command.append(option)
        elif value is not None:
            command += [option, value.format(tmp=tmp_path)]
    return command


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_and_touches_nothing(case, climate_file, tmp_path, capsys):
    changes, message = BAD[case]
    _bad_files(tmp_path)
    previous = tmp_path / "out.nc"
    previous.write_bytes(b"the previous result")
    before = _files(tmp_path)
    assert main(_command(tmp_path, climate_file[0], changes)) == 1
    err = capsys.readouterr().err
    assert err.startswith("tensorstream: error: ") and err.count("\n") == 1, err
    assert message in err and "Traceback" not in err
    assert _files(tmp_path) == before and previous.read_bytes() == b"the previous result"


def test_existing_checkpoint_is_not_overwritten_without_resume(climate_file, tmp_path, capsys):
    checkpoint = tmp_path / "run.npz"
    checkpoint.write_bytes(b"an older run")
    assert main(["fit", str(climate_file[0]), *FIT, "--checkpoint", str(checkpoint), "--out",
                 str(tmp_path / "f.nc")]) == 1
    assert "already exists" in capsys.readouterr().err
    assert checkpoint.read_bytes() == b"an older run"


def test_resume_with_other_options_is_refused(climate_file, tmp_path, capsys):
    path, _ = climate_file
    checkpoint = tmp_path / "run.npz"
    assert main(["fit", str(path), *FIT, "--steps", "2", "--checkpoint", str(checkpoint),
                 "--out", str(tmp_path / "f.nc")]) == 0
    saved = checkpoint.read_bytes()
    other_size = [a if a != "3" else "4" for a in FIT]
    assert main(["fit", str(path), *other_size, "--checkpoint", str(checkpoint), "--resume",
                 "--out", str(tmp_path / "g.nc")]) == 1
    assert "made with --n-components 3" in capsys.readouterr().err
    other_modes = [a if a != "lat,lon;variable" else "lat;lon;variable" for a in FIT]
    assert main(["fit", str(path), *other_modes, "--checkpoint", str(checkpoint), "--resume",
                 "--out", str(tmp_path / "g.nc")]) == 1
    assert "--modes 'lat,lon;variable'" in capsys.readouterr().err
    assert checkpoint.read_bytes() == saved and not (tmp_path / "g.nc").exists()


def test_debug_shows_the_traceback(climate_file, tmp_path):
    with pytest.raises(ValueError, match="unknown dim"):
        main(["--debug", "fit", str(climate_file[0]), *FIT, "--modes", "x;y", "--out",
              str(tmp_path / "f.nc")])
    with pytest.raises(ValueError, match="unknown dim"):
        main(["fit", str(climate_file[0]), *FIT, "--modes", "x;y", "--out",
              str(tmp_path / "f.nc"), "--debug"])


def test_help_explains_modes_and_lists_models(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    text = capsys.readouterr().out
    for expected in ("--sample-dim", '"lat,lon;variable"', "MultiIndex", "robust-nmf",
                     "--resume", "stacks dims into one mode"):
        assert expected in text


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"tensorstream {tensorstream.__version__}\n"
    root = Path(tensorstream.__file__).parents[1]  # this checkout's package, not an installed one
    result = subprocess.run([sys.executable, "-m", "tensorstream", "--version"],
                            capture_output=True, text=True, cwd=root)
    assert result.returncode == 0 and result.stdout == f"tensorstream {tensorstream.__version__}\n"


def test_rank_is_no_option(climate_file, tmp_path, capsys):
    """``--rank`` was a development spelling of ``--n-components``: argparse refuses it."""
    path, _ = climate_file
    old = [a if a != "--n-components" else "--rank" for a in FIT]
    with pytest.raises(SystemExit):
        main(["fit", str(path), *old, "--steps", "2", "--out", str(tmp_path / "old.nc")])
    assert "--rank" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    text = capsys.readouterr().out
    assert "--n-components" in text and "--rank" not in text


# -- info --------------------------------------------------------------------------------------


def test_info_describes_factors_checkpoints_and_data(climate_file, tmp_path, capsys):
    path, _ = climate_file
    out, checkpoint = tmp_path / "f.nc", tmp_path / "run.npz"
    assert main(["fit", str(path), *FIT, "--steps", "3", "--checkpoint", str(checkpoint),
                 "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["info", str(out)]) == 0
    text = capsys.readouterr().out
    assert "tensorstream factors, 3 components" in text and "3 steps" in text
    assert "lat_lon_loadings: (lat: 9, lon: 16, component: 3)" in text
    assert main(["info", str(checkpoint)]) == 0
    text = capsys.readouterr().out
    assert "tensorstream checkpoint" in text and "step 3" in text
    assert "modes lat_lon (lat: 9, lon: 16); variable (variable: 4)" in text
    assert main(["info", str(path)]) == 0
    text = capsys.readouterr().out
    assert "obs: (time: 96, lat: 9, lon: 16, variable: 4) float32" in text
    assert "coordinate time: 2021-03-01 00:00:00 .. 2021-03-04 23:00:00" in text


def test_info_and_resume_refuse_a_checkpoint_of_another_format_version(climate_file, tmp_path,
                                                                         capsys):
    """No release wrote a format before the current one: such a file is refused in one line,
    saying what to do, by ``info`` and by ``fit --resume``."""
    new = tmp_path / "new.npz"
    assert main(["fit", str(climate_file[0]), *FIT, "--steps", "2", "--checkpoint", str(new),
                 "--out", str(tmp_path / "f.nc")]) == 0
    capsys.readouterr()
    meta, arrays = read_checkpoint(new)
    old = tmp_path / "old.npz"
    np.savez(old, __meta__=np.array(json.dumps(dict(meta, version=5))), **arrays)
    assert main(["info", str(old)]) == 1
    assert "format version 5 is not supported" in capsys.readouterr().err
    assert main(["fit", str(climate_file[0]), *FIT, "--steps", "3", "--resume",
                 "--checkpoint", str(old), "--out", str(tmp_path / "g.nc")]) == 1
    err = capsys.readouterr().err
    assert "format version 5 is not supported" in err and "fit anew" in err
    assert not (tmp_path / "g.nc").exists()


def test_resume_with_another_alpha_is_refused(climate_file, tmp_path, capsys):
    checkpoint = tmp_path / "run.npz"
    fit = ["fit", str(climate_file[0]), *FIT, "--checkpoint", str(checkpoint)]
    assert main([*fit, "--alpha", "0.05", "--steps", "2", "--out", str(tmp_path / "f.nc")]) == 0
    capsys.readouterr()
    assert main([*fit, "--alpha", "0.3", "--steps", "3", "--resume", "--out",
                 str(tmp_path / "g.nc")]) == 1
    assert "made with --alpha 0.05, the command line says 0.3" in capsys.readouterr().err
    assert main([*fit, "--alpha", "0.05", "--steps", "3", "--resume", "--out",
                 str(tmp_path / "g.nc")]) == 0


def test_info_on_a_bad_file_is_one_line(tmp_path, capsys):
    (tmp_path / "junk.npz").write_bytes(b"junk")
    assert main(["info", str(tmp_path / "junk.npz")]) == 1
    assert "corrupt or not a tensorstream checkpoint" in capsys.readouterr().err
    assert main(["info", str(tmp_path / "absent.nc")]) == 1
    assert "no such file or folder" in capsys.readouterr().err


def test_info_needs_exactly_one_of_a_file_and_a_scheduler(tmp_path, capsys):
    assert main(["info"]) == 1
    assert "give a FILE or --scheduler ADDRESS" in capsys.readouterr().err
    assert main(["info", str(tmp_path / "f.nc"), "--scheduler", "tcp://127.0.0.1:1"]) == 1
    assert "give a FILE or --scheduler ADDRESS" in capsys.readouterr().err


def test_an_invalid_model_option_is_the_command_lines_error(climate_file, tmp_path, capsys):
    path, _ = climate_file
    assert main(["fit", str(path), *FIT, "--alpha", "-1", "--out",
                 str(tmp_path / "f.nc")]) == 1
    error = capsys.readouterr().err
    assert "invalid model option" in error and "alpha" in error
    assert not (tmp_path / "f.nc").exists()


# -- demo --------------------------------------------------------------------------------------


def test_demo_runs_every_part_and_writes_its_files(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    assert main(["demo", "--out", str(tmp_path), "--steps", "20", "--image-steps", "2",
                 "--climate-steps", "6"]) == 0
    output = capsys.readouterr().out
    for expected in ("held-out rel. error", "PSNR (dB)", "(c) (400, 3)", "code corr.",
                     "tensorstream fit"):
        assert expected in output
    for name, size in (("atoms.png", 5_000), ("image_reshapings.png", 20_000),
                       ("climate_factors.png", 20_000), ("climate_factors.nc", 1_000),
                       ("climate.nc", 100_000)):
        assert (tmp_path / name).stat().st_size > size, name
    with xr.open_dataset(tmp_path / "climate_factors.nc") as ds:
        assert set(ds.data_vars) == {"lat_lon_loadings", "variable_loadings", "codes"}


def test_demo_error_decreases_and_atoms_match():
    rows = run_demo(n_steps=50, plot=False, parts=["synthetic"])["table"]
    assert rows[-1]["error"] < rows[0]["error"]
    assert rows[-1]["recovery"] > 0.95


def test_demo_reshapings_constrain_the_atoms_as_the_paper_says():
    """(b) atoms are rank one in space with one hue; (c) one hue but free shapes; (d) free."""
    result = run_demo(plot=False, parts=["image"], image_steps=8)["image"]
    atoms = result["atoms"]
    b, c = atoms["(b) 20x20x3"], atoms["(c) (400, 3)"]

    def spatial_rank(a):
        return np.linalg.matrix_rank(a[..., 0], tol=1e-8 * np.abs(a).max())

    def colour_rank(a):  # pixels x channels
        return np.linalg.matrix_rank(a.reshape(-1, 3), tol=1e-8 * np.abs(a).max())

    assert all(spatial_rank(a) <= 1 and colour_rank(a) <= 1 for a in b)
    assert all(colour_rank(a) <= 1 for a in c) and max(spatial_rank(a) for a in c) > 1
    assert max(colour_rank(a) for a in atoms["(d) (1200,)"]) > 1
    assert all(row["psnr"] > 10 for row in result["rows"])


def test_demo_labelled_part_recovers_the_planted_components():
    rows = run_demo(plot=False, parts=["climate"], climate_steps=90)["climate"]["rows"]
    assert sorted(r["planted"] for r in rows) == sorted(["warm spell", "daytime heating",
                                                         "storms"])
    assert min(r["correlation"] for r in rows) > 0.9
    storms = next(r for r in rows if r["planted"] == "storms")
    assert storms["top_variable"] == "precip" and storms["peak"][0] < -30


def test_match_atoms_is_a_permutation():
    planted = planted_patterns()
    shuffled = [U[:, [2, 0, 3, 1]] for U in planted]
    score, partners = match_atoms(shuffled, planted)
    assert score == pytest.approx(1.0)
    assert list(partners) == [1, 3, 0, 2]


def test_demo_bad_arguments_give_one_line_errors(capsys):
    assert main(["demo", "--steps", "0", "--no-plot"]) == 1
    assert "error: --steps" in capsys.readouterr().err
    assert main(["demo", "--parts", "synthetic,movies", "--no-plot"]) == 1
    assert "unknown demo parts ['movies']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["no-such-command"])


# -- on a Dask cluster -----------------------------------------------------------------------


@pytest.mark.xdist_group("dask-cluster")
def test_fit_on_local_workers_equals_the_single_process_fit(climate_file, tmp_path):
    pytest.importorskip("distributed")
    path, _ = climate_file
    one, two = tmp_path / "one.nc", tmp_path / "two.nc"
    assert main(["fit", str(path), *FIT, "--steps", "4", "--quiet", "--out", str(one)]) == 0
    assert main(["fit", str(path), *FIT, "--steps", "4", "--quiet", "--out", str(two),
                 "--workers", "2"]) == 0
    with xr.open_dataset(one) as a, xr.open_dataset(two) as b:
        assert a["lat_lon_loadings"].dtype == np.float32  # the file's data are float32:
        for name in a.data_vars:  # sums in another order agree to float32's rounding
            np.testing.assert_allclose(b[name], a[name], rtol=1e-5, atol=1e-7)


def test_an_unreachable_scheduler_is_one_line(climate_file, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("tensorstream.engine.distributed.CONNECT_TIMEOUT", 1.0)
    pytest.importorskip("distributed")
    path, _ = climate_file
    out = tmp_path / "never.nc"
    assert main(["fit", str(path), *FIT, "--steps", "2", "--out", str(out),
                 "--scheduler", "tcp://127.0.0.1:9"]) != 0
    assert "cannot reach the Dask scheduler" in capsys.readouterr().err
    assert not out.exists()


# -- found by review (2026-11-26) -----------------------------------------------------------------


def test_resume_without_model_modes_or_sample_dim_takes_the_checkpoints(climate_file, tmp_path):
    """docs/cli.md: 'options given with --resume must agree with it (leave them out)': left
    out, --model, --modes and --sample-dim were the defaults, and the checkpoint was refused."""
    path, _ = climate_file
    checkpoint, full = tmp_path / "nmf.npz", tmp_path / "full.nc"
    nmf = ["--var", "obs", "--sample-dim", "time", "--model", "nmf", "--n-components", "3",
           "--batch-size", "16", "--quiet"]
    assert main(["fit", str(path), *nmf, "--steps", "6", "--out", str(full)]) == 0
    assert main(["fit", str(path), *nmf, "--steps", "3", "--checkpoint", str(checkpoint),
                 "--out", str(tmp_path / "a.nc")]) == 0
    resumed = tmp_path / "b.nc"
    assert main(["fit", str(path), "--var", "obs", "--steps", "6", "--quiet", "--checkpoint",
                 str(checkpoint), "--resume", "--out", str(resumed)]) == 0
    with xr.open_dataset(full) as a, xr.open_dataset(resumed) as b:
        for name in a.data_vars:
            np.testing.assert_array_equal(a[name].values, b[name].values)
    spaced = tmp_path / "sp.npz"
    assert main(["fit", str(path), *FIT, "--steps", "3", "--checkpoint", str(spaced),
                 "--out", str(tmp_path / "c.nc")]) == 0
    assert main(["fit", str(path), "--var", "obs", "--steps", "6", "--quiet", "--checkpoint",
                 str(spaced), "--resume", "--out", str(tmp_path / "d.nc")]) == 0


@pytest.mark.parametrize("name, clash", [("run.npz", ["--checkpoint", "{out}"]),
                                         ("f.png", ["--plot", "{out}"])])
def test_two_outputs_on_one_file_are_refused_before_the_run(climate_file, tmp_path, name, clash,
                                                              capsys):
    path, _ = climate_file
    out = tmp_path / name
    args = [a.format(out=out) for a in clash]
    assert main(["fit", str(path), *FIT, "--steps", "2", "--out", str(out), *args]) == 1
    assert "give each output its own file" in capsys.readouterr().err
    assert not out.exists()


def test_plot_components_chooses_how_many_the_figure_draws(climate_file, tmp_path,
                                                          monkeypatch):
    """``--plot`` drew 8 of 16 components with no option for more (issue 34): it passes 12 by
    default and ``--plot-components N`` to ``plot_factors``, whose title then says how many of
    all it shows (tests/test_plot.py)."""
    pytest.importorskip("matplotlib")
    import tensorstream.plot as plot

    asked = []
    monkeypatch.setattr(plot, "plot_factors", lambda ds, **kwargs: asked.append(
        (ds.sizes["component"], kwargs["max_components"])))
    path, _ = climate_file
    options = list(FIT)
    options[options.index("--n-components") + 1] = "14"
    command = ["fit", str(path), *options, "--steps", "1",
               "--out", str(tmp_path / "f.nc"), "--plot", str(tmp_path / "f.png")]
    assert main(command) == 0
    assert main([*command, "--plot-components", "14"]) == 0
    assert asked == [(14, 12), (14, 14)]


def test_a_plot_format_matplotlib_cannot_write_is_refused_before_the_run(climate_file, tmp_path,
                                                                          capsys):
    path, _ = climate_file
    out = tmp_path / "f.nc"
    assert main(["fit", str(path), *FIT, "--steps", "2", "--out", str(out), "--plot",
                 str(tmp_path / "f.pnj")]) == 1
    assert "cannot write --plot" in capsys.readouterr().err and not out.exists()


def test_loss_option_takes_a_beta_number(climate_file, tmp_path):
    path, _ = climate_file
    out = tmp_path / "f.nc"
    assert main(["fit", str(path), *FIT, "--model", "divergence-nmf", "--steps", "2", "--loss",
                 "1.5", "--out",
                 str(out)]) == 0


def test_resume_keeps_the_batch_auto_chose(climate_file, tmp_path, monkeypatch):
    """``--param batch_size='auto'`` as the first run chose it (by a device's free memory: 24
    here) is the batch of the resumed run, though the rule would choose another now (8): the
    checkpoint holds it, and re-choosing made the resumed run differ from the one that went on."""
    from tensorstream.learners import _base

    choices = iter([24, 8, 8])
    monkeypatch.setattr(_base, "step_batch_size", lambda batch_size, *args: next(choices)
                        if batch_size == "auto" else int(batch_size))
    checkpoint = tmp_path / "run.npz"
    fit = ["fit", str(climate_file[0]), *FIT[:-3], "--param", "batch_size='auto'", "--quiet",
           "--checkpoint", str(checkpoint)]
    assert main([*fit, "--steps", "2", "--out", str(tmp_path / "f.nc")]) == 0
    assert read_checkpoint(checkpoint)[0]["batch_size"] == 24
    assert main([*fit, "--steps", "4", "--resume", "--out", str(tmp_path / "g.nc")]) == 0
    meta = read_checkpoint(checkpoint)[0]
    assert meta["batch_size"] == 24 and meta["n_samples_seen"] == 4 * 24
