"""Peak memory of streaming a file from disk: flat as the file grows.

Writes a ~200 MB and a ~2 GB zarr (or netCDF) array ``time x lat x lon x variable`` (float32)
to a temporary folder, chunk by chunk (never whole in memory), then runs, for each file, the
same ``tensorstream fit`` command (same rank, batch size and number of steps) in a fresh child
process and reads the child's peak resident memory from the kernel (``os.wait4``'s
``ru_maxrss``). Two reference children: one that only imports tensorstream and opens the file
(the floor), and one that loads the smaller file into memory (what streaming avoids). The files
are deleted at the end.

Run::

    python benchmarks/bench_out_of_core.py                   # 200 MB and 2 GB zarr stores
    python benchmarks/bench_out_of_core.py --format netcdf --sizes 100 1000 --steps 30
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

LAT, LON, VARIABLES = 64, 128, 4  # one sample: 128 KiB of float32
SAMPLE_BYTES = LAT * LON * VARIABLES * 4
CHUNK = 8  # samples per chunk on disk: 1 MiB

_OPEN_ONLY = """
import sys
from tensorstream.io import open_dataarray
da = open_dataarray(sys.argv[1], "v", sample_dim="time")
print(da.shape)
"""

_LOAD_ALL = """
import sys
import numpy as np
from tensorstream.io import open_dataarray
values = np.asarray(open_dataarray(sys.argv[1], "v", sample_dim="time"))
print(values.nbytes)
"""


def write_array(path: Path, n_samples: int, file_format: str, seed: int = 0) -> None:
    """Write ``n_samples`` random samples, chunk by chunk, uncompressed."""
    import dask.array
    import pandas as pd
    import xarray as xr

    data = dask.array.random.default_rng(seed).random(
        (n_samples, LAT, LON, VARIABLES), chunks=(CHUNK * 64, LAT, LON, VARIABLES),
        dtype=np.float32)
    da = xr.DataArray(data, dims=("time", "lat", "lon", "variable"), name="v", coords={
        "time": pd.date_range("2000-01-01", periods=n_samples, freq="h"),
        "lat": np.linspace(-90, 90, LAT), "lon": np.linspace(0, 360, LON, endpoint=False),
        "variable": np.array(["t2m", "rh", "wind", "precip"], dtype=object)})
    if file_format == "zarr":
        da = da.chunk({"time": CHUNK * 64})
        encoding = {"v": {"chunks": (CHUNK, LAT, LON, VARIABLES), "compressors": None}}
        da.to_dataset().to_zarr(path, encoding=encoding, consolidated=False, compute=True)
    else:
        encoding = {"v": {"chunksizes": (CHUNK, LAT, LON, VARIABLES)}}
        da.to_dataset().to_netcdf(path, encoding=encoding)


def peak_rss(command: list[str]) -> tuple[float, float]:
    """Run ``command``; return its peak resident memory (MiB) and wall time (s)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1"}
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env=env)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {child.stderr.read().decode()[-2000:]}")
    return usage.ru_maxrss / 1024.0, seconds  # Linux reports KiB


def file_size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[200.0, 2000.0],
                        help="file sizes in MB (default: 200 2000)")
    parser.add_argument("--format", choices=["zarr", "netcdf"], default="zarr")
    parser.add_argument("--steps", type=int, default=60, help="mini-batches per run")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--folder", help="where to write the files (default: a temp folder)")
    args = parser.parse_args(argv)

    folder = Path(tempfile.mkdtemp(prefix="bench_ooc_", dir=args.folder))
    free = shutil.disk_usage(folder).free
    needed = sum(args.sizes) * 1e6 * 1.1
    if needed > free:
        raise SystemExit(f"not enough disk space in {folder}: {needed / 1e9:.1f} GB needed, "
                         f"{free / 1e9:.1f} GB free; pass smaller --sizes")
    suffix = ".zarr" if args.format == "zarr" else ".nc"
    fit = ["--var", "v", "--sample-dim", "time", "--modes", "lat,lon;variable", "--n-components",
           str(args.rank), "--batch-size", str(args.batch_size), "--steps", str(args.steps),
           "--quiet"]
    rows = []
    try:
        for size in sorted(args.sizes):
            n_samples = max(args.batch_size, int(size * 1e6 // SAMPLE_BYTES))
            path = folder / f"data_{int(size)}MB{suffix}"
            start = time.perf_counter()
            write_array(path, n_samples, args.format)
            print(f"wrote {path.name}: {file_size(path) / 1e6:.0f} MB, {n_samples} samples of "
                  f"{SAMPLE_BYTES // 1024} KiB in {time.perf_counter() - start:.0f} s",
                  flush=True)
            rss, seconds = peak_rss([sys.executable, "-c", _OPEN_ONLY, str(path)])
            rows.append(("import + open only", file_size(path), "-", rss, seconds))
            if size == min(args.sizes):  # what streaming avoids (the large one would need GBs)
                rss, seconds = peak_rss([sys.executable, "-c", _LOAD_ALL, str(path)])
                rows.append(("load it into memory", file_size(path), "-", rss, seconds))
            command = [sys.executable, "-m", "tensorstream", "fit", str(path), *fit,
                       "--out", str(folder / "factors.nc")]
            rss, seconds = peak_rss(command)
            rows.append((f"tensorstream fit ({args.format})", file_size(path), args.steps, rss,
                         seconds))
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    print(f"\nPeak RSS of a child process; {args.steps} mini-batches of {args.batch_size} "
          f"samples ({LAT}x{LON}x{VARIABLES} float32), rank {args.rank}, chunks of {CHUNK} "
          f"samples on disk")
    print(f"{'run':<26} {'file (MB)':>10} {'steps':>6} {'peak RSS (MiB)':>15} {'wall (s)':>9}")
    for name, size, steps, rss, seconds in rows:
        print(f"{name:<26} {size / 1e6:>10.0f} {steps!s:>6} {rss:>15.0f} {seconds:>9.1f}")


if __name__ == "__main__":
    main()
