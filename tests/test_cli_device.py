"""``tensorstream fit --device`` and ``tensorstream info --devices`` (issue 36): the command
computes where it is told, says where on its progress line, and refuses a device this machine
lacks as one line; ``info --devices`` lists torch's devices without torch being needed."""

import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

from tensorstream import load
from tensorstream.cli import main
from tensorstream.engine.checkpoint import read_checkpoint, write_checkpoint

torch = pytest.importorskip("torch")

FIT = ["--modes", "axis1", "--n-components", "2", "--batch-size", "8", "--steps", "3"]


@pytest.fixture
def npy(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.random.default_rng(0).random((40, 6)))
    return path


def test_fit_on_device_cpu_gives_the_numpy_result_and_says_where(npy, tmp_path, capsys):
    for device in (None, "cpu"):
        option = [] if device is None else ["--device", device]
        assert main(["fit", str(npy), *FIT, *option, "--out",
                     str(tmp_path / f"{device}.nc")]) == 0
        err = capsys.readouterr().err
        assert "fit ocpdl on cpu" in err  # the progress line says where it runs
    with xr.open_dataset(tmp_path / "None.nc") as a, xr.open_dataset(tmp_path / "cpu.nc") as b:
        assert '"device": "cpu"' in b.attrs["params"]
        xr.testing.assert_allclose(a["axis1_loadings"], b["axis1_loadings"], rtol=0,
                                   atol=1e-10)


def test_fit_on_a_missing_cuda_device_is_one_line_and_writes_nothing(npy, tmp_path, capsys,
                                                                      monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "f.nc"
    assert main(["fit", str(npy), *FIT, "--device", "cuda", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "device='cuda'" in err and "no CUDA device" in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_resume_with_device_moves_a_gpu_checkpoint_here(npy, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    checkpoint = tmp_path / "c.npz"
    assert main(["fit", str(npy), *FIT, "--device", "cpu", "--checkpoint", str(checkpoint),
                 "--quiet", "--out", str(tmp_path / "a.nc")]) == 0
    meta, arrays = read_checkpoint(checkpoint)
    meta["params"]["device"], meta["device"] = "cuda", "cuda:0"  # as written on a GPU
    write_checkpoint(checkpoint, meta.pop("class"), meta, arrays)
    resumed = ["fit", str(npy), *FIT[:-1], "6", "--checkpoint", str(checkpoint), "--resume",
               "--quiet", "--out", str(tmp_path / "b.nc")]
    assert main(resumed) == 1  # the recorded device is not here: the way out is named
    assert main([*resumed, "--device", "cpu"]) == 0
    assert load(checkpoint).n_steps_ == 6


def test_info_lists_the_devices_torch_sees(capsys):
    assert main(["info", "--devices"]) == 0
    out = capsys.readouterr().out
    assert "devices PyTorch sees" in out and "  cpu" in out


def test_info_without_torch_says_so_and_info_imports_no_torch(tmp_path):
    code = ("import sys; sys.modules['torch'] = None\n"  # as if not installed
            "from tensorstream.cli import main\n"
            "main(['info', '--devices'])\n")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True)
    assert "PyTorch is not installed" in found.stdout
    np.save(tmp_path / "x.npy", np.ones((3, 2)))
    code = ("import sys\nfrom tensorstream.cli import main\n"
            f"main(['info', {str(tmp_path / 'x.npy')!r}])\n"
            "print('torch' in sys.modules)\n")
    described = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               check=True)
    assert described.stdout.strip().splitlines()[-1] == "False"


def test_fit_with_an_auto_batch_streams_the_learners_default_batch(npy, tmp_path):
    for batch in ("32", "auto"):  # OnlineCPDL's default batch is 32
        assert main(["fit", str(npy), *FIT[:4], "--param", f"batch_size={batch}", "--steps",
                     "2", "--quiet", "--out", str(tmp_path / f"{batch}.nc")]) == 0
    with xr.open_dataset(tmp_path / "32.nc") as a, xr.open_dataset(tmp_path / "auto.nc") as b:
        xr.testing.assert_equal(a["axis1_loadings"], b["axis1_loadings"])
