"""
Labelled, out-of-core learning on climate-like data
===================================================

**What it does.** The whole workflow for a real netCDF or zarr file, on synthetic
climate-like data: open it lazily, learn maps, variable profiles and codes over time, read
them back on the file's own coordinates, checkpoint and resume, write and plot the factors.

**When to use it.** When your data are labelled arrays (xarray) too large for memory, and you
want factors you can select by latitude, variable name or date.

**The parameter that matters.** ``modes`` of ``fit``: ``[("lat", "lon"), "variable"]`` learns
free maps (a tuple stacks dims into one mode) and separate variable profiles.

The whole workflow a user with a real netCDF/zarr file follows, on a synthetic stand-in with
known structure (``tensorstream.datasets.climate_like_dataarray``: hourly ``time x lat x lon x
variable`` data made of a warm spell, daytime heating over a continent and storms):

1. write the data to netCDF, chunked along time, and open it lazily (dask): batches read only
   the chunks they need, so the file may be larger than memory;
2. fit with the ``DataArray.tensorstream`` accessor: ``modes=[("lat", "lon"), "variable"]``
   learns free (lat, lon) maps (not products of a latitude and a longitude profile) and
   variable profiles;
3. the factors come back on the original coordinates: select a map by latitude, a profile by
   variable name, the codes by date;
4. checkpoint mid-stream, resume, and get exactly the uninterrupted result;
5. write the factors to netCDF and plot them against their coordinates.

The same from the command line::

    tensorstream fit climate.nc --var obs --sample-dim time --modes "lat,lon;variable" \\
        --n-components 3 --epochs 3 --codes --out factors.nc --plot factors.png

Run::

    python examples/labelled_climate.py [--out example-output]

(its own folder: ``tensorstream demo`` writes files of the same names to ``demo-output``).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import xarray as xr

import tensorstream  # noqa: F401  (registers the DataArray.tensorstream accessor)
from tensorstream import OnlineCPDL, load, open_dataarray, write_factors
from tensorstream.datasets import CLIMATE_COMPONENTS, climate_like_dataarray
from tensorstream.plot import plot_factors

MODES = [("lat", "lon"), "variable"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    parser.add_argument("--out", default="example-output", help="output folder")
    parser.add_argument("--days", type=int, default=120)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    # 1. a netCDF file, opened lazily: dask chunks of 48 hours along time
    da, truth = climate_like_dataarray(n_days=args.days)
    da.to_netcdf(out / "climate.nc", encoding={"obs": {"chunksizes": (48, 9, 16, 4)}})
    lazy = open_dataarray(out / "climate.nc", "obs", sample_dim="time")
    print(f"opened {lazy.name}: {dict(lazy.sizes)},\n  chunks along time: "
          f"{lazy.chunks[0][:3]}...")

    # 2. fit through the accessor (the same as OnlineCPDL(...).fit(lazy, sample_dim=..., ...))
    model = lazy.tensorstream.fit(3, sample_dim="time", modes=MODES, batch_size=32,
                                  max_iter=3, random_state=0)
    factors = model.factors_
    factors["codes"] = model.transform(lazy)

    # 3. labelled results: match learned to planted components by their codes
    codes = factors["codes"].transpose("time", "component").values
    corr = np.corrcoef(codes.T, truth["codes"].T)[:3, 3:]
    for r in range(3):
        planted = int(np.argmax(corr[r]))
        profile = factors["variable_loadings"].sel(component=r)
        peak = factors["lat_lon_loadings"].sel(component=r).argmax(dim=("lat", "lon"))
        print(f"component {r}: {CLIMATE_COMPONENTS[planted]:<16} (code correlation "
              f"{corr[r, planted]:.3f}),\n  mostly {str(profile.idxmax('variable').values)!r}, "
              f"map peak at lat {float(factors['lat'][int(peak['lat'])]):+.0f}")
    noon = factors["codes"].sel(time="2021-03-10T12:00")
    print(f"codes at noon on 10 March: {np.round(noon.values, 2)}")

    # 4. checkpoint after 20 batches, "crash", resume: the same result as without the crash
    batches = [lazy.isel(time=slice(k * 32, (k + 1) * 32)) for k in range(40)]
    straight = OnlineCPDL(3, random_state=0)
    for k, batch in enumerate(batches):
        straight.partial_fit(batch, **({"sample_dim": "time", "modes": MODES} if k == 0
                                       else {}))
    with tempfile.TemporaryDirectory() as folder:
        first = OnlineCPDL(3, random_state=0)
        for k, batch in enumerate(batches[:20]):
            first.partial_fit(batch, **({"sample_dim": "time", "modes": MODES} if k == 0
                                        else {}))
        path = first.save(Path(folder) / "run.npz")
        del first
        resumed = load(path)  # keeps the labels: resumed.factors_ is labelled too
        for batch in batches[20:]:
            resumed.partial_fit(batch)
    same = resumed.factors_.identical(straight.factors_)
    print(f"resumed after a checkpoint == uninterrupted run: {same}")

    # 5. netCDF and a figure against the coordinates
    write_factors(factors, out / "climate_factors.nc")
    plot_factors(factors, title="climate-like data: labelled CP factors",
                 path=out / "climate_factors.png")
    with xr.open_dataset(out / "climate_factors.nc") as back:
        print(f"wrote {out / 'climate_factors.nc'}\n  with {list(back.data_vars)},\n"
              f"and the figure {out / 'climate_factors.png'}")


if __name__ == "__main__":
    main()
