"""Out-of-core input: files are opened lazily (dask chunks along the sample dim), batches read
only the chunks they touch, and the results equal in-memory input's."""

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("dask")
# zarr 3 says that fixed-width strings (the band labels) have no v3 specification yet
pytestmark = pytest.mark.filterwarnings("ignore:The data type")

import tensorstream.io.files as tio  # noqa: E402
from tensorstream import OnlineCPDL  # noqa: E402
from tensorstream.cli import main, shuffled_batches  # noqa: E402
from tensorstream.io import open_dataarray  # noqa: E402

FIT = ["--n-components", "2", "--batch-size", "8", "--steps", "7", "--seed", "3", "--quiet"]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    values = rng.random((50, 4, 3, 2)).astype(np.float32)
    return xr.DataArray(values, dims=("time", "y", "x", "band"), name="v",
                        coords={"time": np.arange(50) * 10, "band": ["red", "nir"]})


def test_netcdf_and_zarr_open_lazily_chunked_along_the_sample_dim(data, tmp_path):
    data.to_netcdf(tmp_path / "flat.nc")
    data.to_netcdf(tmp_path / "chunked.nc", encoding={"v": {"chunksizes": (5, 4, 3, 2)}})
    flat = open_dataarray(tmp_path / "flat.nc", sample_dim="time")
    assert flat.chunks == ((50,), (4,), (3,), (2,))  # 96 B per sample: one ~1 MiB chunk
    assert open_dataarray(tmp_path / "flat.nc", sample_dim="time",
                          chunk_size=16).chunks[0] == (16, 16, 16, 2)
    chunked = open_dataarray(tmp_path / "chunked.nc", "v", sample_dim="time")
    assert chunked.chunks[0] == (5,) * 10 and chunked.chunks[1:] == ((4,), (3,), (2,))
    pytest.importorskip("zarr")
    data.to_dataset().to_zarr(tmp_path / "d.zarr", encoding={"v": {"chunks": (10, 4, 3, 2)}},
                              consolidated=False)
    store = open_dataarray(tmp_path / "d.zarr", sample_dim="time")
    assert store.chunks[0] == (10,) * 5 and type(store.data).__module__.startswith("dask")
    # a store chunked along the features too: whole samples per chunk all the same
    data.to_dataset().to_zarr(tmp_path / "f.zarr", encoding={"v": {"chunks": (10, 1, 2, 2)}},
                              consolidated=False)
    store = open_dataarray(tmp_path / "f.zarr", sample_dim="time")
    assert store.chunks == ((10,) * 5, (4,), (3,), (2,))
    np.testing.assert_array_equal(store.values, data.values)


def test_info_describes_a_zarr_store(data, tmp_path, capsys):
    pytest.importorskip("zarr")
    data.to_dataset().to_zarr(tmp_path / "d.zarr", consolidated=False)
    assert main(["info", str(tmp_path / "d.zarr")]) == 0
    text = capsys.readouterr().out
    assert "data file (zarr)" in text and "v: (time: 50, y: 4, x: 3, band: 2) float32" in text


def test_npy_rows_read_exactly_the_slices_asked_for(tmp_path):
    X = np.random.default_rng(1).random((23, 3, 2))
    np.save(tmp_path / "x.npy", X)
    rows = tio._NpyRows(tmp_path / "x.npy")
    for key in [(slice(0, 5),), (slice(7, 23),), (slice(3, 20, 4), slice(1, 3)), slice(22, 30),
                (slice(5, 5),)]:
        np.testing.assert_array_equal(rows[key], X[key])
    lazy = open_dataarray(tmp_path / "x.npy", chunk_size=4)
    np.testing.assert_array_equal(lazy.isel(sample=[2, 9, 21]).values, X[[2, 9, 21]])
    np.save(tmp_path / "f.npy", np.asfortranarray(X))
    with pytest.raises(ValueError, match="C-order"):
        open_dataarray(tmp_path / "f.npy")


def test_dask_backed_input_equals_in_memory_input_through_the_cli(data, tmp_path):
    """netCDF, zarr and .npy files (all dask-backed) give the in-memory loop's loadings."""
    data.to_netcdf(tmp_path / "d.nc", encoding={"v": {"chunksizes": (7, 4, 3, 2)}})
    np.save(tmp_path / "d.npy", data.values)
    labelled = ["--var", "v", "--sample-dim", "time", "--modes", "y,x;band"]
    runs = {"nc": ["fit", str(tmp_path / "d.nc"), *labelled],
            "npy": ["fit", str(tmp_path / "d.npy"), "--modes", "axis1,axis2;axis3",
                    "--chunk-size", "6"]}
    if _has_zarr():
        data.to_dataset().to_zarr(tmp_path / "d.zarr", consolidated=False,
                                  encoding={"v": {"chunks": (9, 4, 3, 2)}})
        runs["zarr"] = ["fit", str(tmp_path / "d.zarr"), *labelled]
    results = {}
    for name, command in runs.items():
        assert main([*command, *FIT, "--out", str(tmp_path / f"{name}.nc")]) == 0
        with xr.open_dataset(tmp_path / f"{name}.nc") as ds:
            results[name] = [ds[v].values for v in sorted(ds.data_vars)]
    model = OnlineCPDL(2, batch_size=8, random_state=3)  # in memory, the same batches
    for k, rows in enumerate(shuffled_batches(50, 8, seed=3, stop=7)):
        model.partial_fit(data.isel(time=rows),
                          **({"sample_dim": "time", "modes": [("y", "x"), "band"]} if k == 0
                             else {}))
    expected = {"band": model.factors_["band_loadings"].values,
                "space": model.factors_["y_x_loadings"].values}
    for name, (first, second) in results.items():
        space, band = (second, first) if name != "npy" else (first, second)
        np.testing.assert_allclose(band, expected["band"], rtol=1e-6, err_msg=name)
        np.testing.assert_allclose(space, expected["space"], rtol=1e-6, err_msg=name)


def test_the_cli_reads_only_the_chunks_its_batches_touch(tmp_path, monkeypatch):
    n = 400
    np.save(tmp_path / "big.npy", np.random.default_rng(2).random((n, 5, 4)))
    reads = []
    original = tio._NpyRows.__getitem__

    def counting(self, key):
        out = original(self, key)
        reads.append(out.shape[0])
        return out

    monkeypatch.setattr(tio._NpyRows, "__getitem__", counting)
    assert main(["fit", str(tmp_path / "big.npy"), "--n-components", "2", "--batch-size", "8",
                 "--steps", "3", "--chunk-size", "4", "--quiet",
                 "--out", str(tmp_path / "f.nc")]) == 0
    assert max(reads) <= 4  # chunk by chunk, never the whole array
    assert sum(reads) <= 3 * 8 * 4  # at most one chunk per sample of each of the 3 batches


class _CountingSource:
    """An array-like that records which rows dask asks for (module level: dask may copy it
    through pickle, which keeps a module-level class, and its record, by reference)."""

    shape, dtype, ndim = (1000, 6, 4), np.dtype(float), 3
    touched: list = []

    def __getitem__(self, key):
        rows = key[0]
        if rows.stop > rows.start:
            type(self).touched.append(rows.start)
        return np.ones((rows.stop - rows.start, 6, 4))


def test_learner_fit_on_a_lazy_array_reads_only_touched_chunks():
    dask_array = pytest.importorskip("dask.array")
    _CountingSource.touched.clear()
    lazy = xr.DataArray(dask_array.from_array(_CountingSource(), chunks=(10, 6, 4),
                                              asarray=False, fancy=False), dims=("t", "a", "b"))
    OnlineCPDL(2, batch_size=5, random_state=0).fit(lazy, sample_dim="t", n_steps=4)
    assert 0 < len(set(_CountingSource.touched)) <= 4 * 5  # out of 100 chunks


def _has_zarr():
    try:
        import zarr  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("chunk_size", ["3", 2.5, True, 0])
def test_a_chunk_size_that_is_not_a_positive_integer_is_refused(tmp_path, chunk_size):
    """'3' was read by dask as bytes (chunks of one sample), 2.5 cut to 2 or refused inside
    dask."""
    from tensorstream.io import open_dataarray

    np.save(tmp_path / "x.npy", np.ones((10, 4)))
    with pytest.raises(ValueError, match="chunk_size must be an integer >= 1"):
        open_dataarray(tmp_path / "x.npy", chunk_size=chunk_size)
    assert open_dataarray(tmp_path / "x.npy", chunk_size=np.int64(3)).chunks[0] == (3, 3, 3, 1)
