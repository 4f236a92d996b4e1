"""Climate-like labelled data with planted components (the demo's and the gallery's)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["CLIMATE_COMPONENTS", "climate_like_dataarray"]

#: What the planted components of :func:`climate_like_dataarray` are.
CLIMATE_COMPONENTS = ("warm spell", "daytime heating", "storms")


def climate_like_dataarray(n_days: int = 60, random_state: int = 0) -> tuple[Any, dict]:
    """Hourly ``time x lat x lon x variable`` data with three planted components.

    Each component is a joint ``(lat, lon)`` map times a variable profile times a code over
    time: a warm spell (warm low latitudes, a 30-day oscillation), daytime heating over a
    continent (a diurnal cycle, mostly wind and temperature) and storms along a southern track
    (sporadic 36-hour events, mostly precipitation), plus a little noise.

    Parameters
    ----------
    n_days : int, default 60
        Length of the hourly record.
    random_state : int, default 0

    Returns
    -------
    da : xarray.DataArray
        ``float32``, dims ``(time, lat, lon, variable)``, datetime ``time``, ``lat``/``lon`` in
        degrees (with units), ``variable`` names and a non-dimension ``units`` coordinate.
    truth : dict
        ``codes`` ``(time, 3)``, ``maps`` ``(lat, lon, 3)``, ``profiles`` ``(variable, 3)``,
        in the order of :data:`CLIMATE_COMPONENTS`.

    Examples
    --------
    >>> da, truth = climate_like_dataarray(n_days=2)
    >>> dict(da.sizes), truth["codes"].shape
    ({'time': 48, 'lat': 9, 'lon': 16, 'variable': 4}, (48, 3))
    """
    import pandas as pd
    import xarray as xr

    rng = np.random.default_rng(random_state)
    times = pd.date_range("2021-03-01", periods=24 * n_days, freq="h")
    hours = times.hour.to_numpy()
    days = np.arange(len(times)) / 24.0
    lat, lon = np.linspace(-60.0, 60.0, 9), np.arange(0.0, 360.0, 22.5)
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    east = (lo - 100.0 + 180.0) % 360.0 - 180.0  # longitude relative to the continent
    maps = np.stack([np.cos(np.deg2rad(la)) ** 2,
                     np.exp(-((la - 20.0) ** 2 / 400.0 + east ** 2 / 2000.0)),
                     np.exp(-((la + 40.0) ** 2) / 150.0) * (1.0 + 0.5 * np.cos(np.deg2rad(lo)))],
                    axis=-1)
    profiles = np.array([[1.0, 0.5, 0.0, 0.0], [0.5, 0.0, 1.0, 0.0], [0.1, 0.7, 0.6, 1.0]]).T
    storms = np.zeros(len(times))
    for start in rng.choice(max(1, len(times) - 48), max(1, n_days // 5), replace=False):
        length = min(36, len(times) - start)
        storms[start:start + length] += np.hanning(36)[:length] * rng.uniform(0.5, 1.5)
    codes = np.stack([1.0 + 0.6 * np.sin(2 * np.pi * days / 30.0),
                      np.clip(np.sin(2 * np.pi * (hours - 6) / 24.0), 0.0, None) ** 1.5,
                      storms], axis=-1)
    data = np.einsum("tr,abr,vr->tabv", codes, maps, profiles)
    data = np.abs(data + 0.02 * rng.standard_normal(data.shape)).astype(np.float32)
    da = xr.DataArray(
        data, dims=("time", "lat", "lon", "variable"), name="obs",
        coords={"time": times, "lat": ("lat", lat, {"units": "degrees_north"}),
                "lon": ("lon", lon, {"units": "degrees_east"}),
                "variable": ["t2m", "rh", "wind", "precip"],
                "units": ("variable", ["K (scaled)", "% (scaled)", "m/s", "mm/h"])},
        attrs={"title": "climate-like synthetic observations (tensorstream demo)"})
    return da, {"codes": codes, "maps": maps, "profiles": profiles}
