"""The built-in demo (``tensorstream demo``): three short runs on embedded data, no download.

1. **Convergence check** (synthetic): samples of a planted CP model, sixteen-by-sixteen images
   mixing four separable patterns with sparse nonnegative weights, so the true atoms are known.
   Prints the held-out relative error, the surrogate value and the atom recovery (mean cosine
   similarity of matched planted and learned atoms) as the stream goes on; writes ``atoms.png``.
2. **Image reshapings** (Lyu, Strohmeier & Needell, section 7.1): CP dictionaries learned from
   20 x 20 x 3 patches of an image that ships with scikit-image, in the paper's three reshapings,
   written as *mode specifications* of a labelled patch array with dims
   ``(patch, y, x, channel)``: (b) ``["y", "x", "channel"]``, no reshaping, (c)
   ``[("y", "x"), "channel"]``, space vectorised, (d) ``[("y", "x", "channel")]``, fully
   vectorised. Prints the reconstruction PSNR of each; writes ``image_reshapings.png``.
3. **Labelled climate-like data**: a ``time x lat x lon x variable`` DataArray with datetime
   coordinates, built from three planted components (a slow warm spell, daytime heating over a
   continent, storms along a southern track). Learns joint ``(lat, lon)`` maps, variable
   profiles and their codes over time, writes them as netCDF (``climate_factors.nc``) and plots
   them against their coordinates (``climate_factors.png``); the input is written too
   (``climate.nc``), to try ``tensorstream fit`` on it.

Every part is also a function for scripts (see ``examples/``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

# the climate data's generator is public (tensorstream.datasets); imported here for the demo
from ..datasets.climate import CLIMATE_COMPONENTS, climate_like_dataarray  # noqa: F401
from ..datasets.images import load_image
from ..learners.ocpdl import OnlineCPDL
from ..metrics import reconstruction_error

SIZE, RANK = 16, 4
PATCH = 20
PARTS = ("synthetic", "image", "climate")

#: The paper's three reshapings of colour patches, as mode specifications of a patch array with
#: dims ``(patch, y, x, channel)`` (panel letters of the paper's Figure 3).
RESHAPINGS = {
    "(b) 20x20x3": ["y", "x", "channel"],
    "(c) (400, 3)": [("y", "x"), "channel"],
    "(d) (1200,)": [("y", "x", "channel")],
}


# --------------------------------------------------------------------------------------------
# 1. synthetic convergence check


def planted_patterns() -> list[np.ndarray]:
    """Loadings ``(U1, U2)`` of four separable 16 x 16 patterns, unit-norm columns."""
    grid = np.arange(SIZE)

    def bump(centre, width):
        return np.exp(-0.5 * ((grid - centre) / width) ** 2)

    rows = np.stack([bump(4, 1.5), np.ones(SIZE), bump(11, 2.0), (grid < 8).astype(float)], 1)
    cols = np.stack([bump(4, 1.5), bump(12, 1.0), bump(6, 3.0), np.ones(SIZE)], 1)
    return [rows / np.linalg.norm(rows, axis=0), cols / np.linalg.norm(cols, axis=0)]


def sample_stream(n_samples: int, rng: np.random.Generator, noise: float = 0.02) -> np.ndarray:
    """``n_samples`` images: sparse nonnegative mixtures of the planted atoms plus noise."""
    U1, U2 = planted_patterns()
    codes = rng.exponential(1.0, (n_samples, RANK)) * (rng.random((n_samples, RANK)) < 0.6)
    images = np.einsum("sr,ir,jr->sij", codes, U1, U2)
    return np.abs(images + noise * rng.standard_normal(images.shape))


def match_atoms(loadings: list, planted: list) -> tuple[float, np.ndarray]:
    """Pair learned with planted atoms (Hungarian matching on cosine similarity).

    Returns the mean cosine similarity of the pairs and, for each planted atom, the index of
    its learned partner.
    """
    from scipy.optimize import linear_sum_assignment

    def atoms(factors):
        A = np.einsum("ir,jr->rij", *factors).reshape(factors[0].shape[1], -1)
        return A / np.maximum(np.linalg.norm(A, axis=1, keepdims=True), 1e-300)

    similarity = atoms(planted) @ atoms(loadings).T
    rows, partners = linear_sum_assignment(-similarity)
    return float(similarity[rows, partners].mean()), partners


def run_convergence(out_dir: str | Path | None = "demo-output", n_steps: int = 200,
                    batch_size: int = 16, random_state: int = 0) -> dict:
    """Part 1: learn the planted atoms from a stream and print the convergence table.

    Parameters
    ----------
    out_dir : str or path, optional
        Folder for ``atoms.png``; None skips the figure.
    n_steps, batch_size : int
        Mini-batches, and images per mini-batch.
    random_state : int

    Returns
    -------
    dict
        ``table`` (one dict per printed row), ``model`` and, with a figure, ``figure``.
    """
    rng = np.random.default_rng(random_state)
    held_out = sample_stream(200, rng)
    model = OnlineCPDL(RANK, alpha=0.005, random_state=random_state)
    planted = planted_patterns()
    print(f"1. Convergence check: {n_steps} mini-batches of {batch_size} noisy {SIZE}x{SIZE} "
          f"images, rank {RANK}")
    # the first step of a process imports what a step needs, and the first transform (the
    # held-out error) compiles numba's coding kernel or loads it from its cache (a fit runs the
    # kernels only from its step 300 on): a throw-away learner takes both, so the table's
    # times are the learning's alone
    warm = time.perf_counter()
    first = sample_stream(batch_size, np.random.default_rng(random_state + 1))
    OnlineCPDL(RANK, alpha=0.005, random_state=random_state).partial_fit(first).transform(first)
    print(f"   (first step and transform of this process, with the kernels' compile or load: "
          f"{time.perf_counter() - warm:.2f} s; not in the times below)")
    print(f"{'step':>6} {'samples':>8} {'held-out rel. error':>20} {'surrogate':>11} "
          f"{'atom recovery':>14} {'time (s)':>9}")
    start, rows = time.perf_counter(), []
    for step in range(1, n_steps + 1):
        model.partial_fit(sample_stream(batch_size, rng))
        if step in (1, 2, 5, 10, 20, 50, 100, 200) or step == n_steps:
            row = {"step": step, "samples": model.n_samples_seen_,
                   "error": reconstruction_error(model, held_out),
                   "surrogate": model.surrogate_value(),
                   "recovery": match_atoms(model.loadings_, planted)[0],
                   "seconds": time.perf_counter() - start}
            rows.append(row)
            print(f"{row['step']:>6} {row['samples']:>8} {row['error']:>20.4f} "
                  f"{row['surrogate']:>11.4g} {row['recovery']:>14.4f} {row['seconds']:>9.2f}")
    result = {"table": rows, "model": model}
    if out_dir is not None:
        result["figure"] = _plot_planted(model.loadings_, planted, Path(out_dir) / "atoms.png")
        print(f"   figure of the learned atoms: {result['figure']}")
    return result


def _plot_planted(loadings: list, planted: list, path: Path) -> Path:
    from ..plot import cp_atoms, plot_atom_rows

    partners = match_atoms(loadings, planted)[1]
    rows = {"planted": cp_atoms(planted), "learned": cp_atoms([U[:, partners]
                                                                for U in loadings])}
    plot_atom_rows(rows, title="OnlineCPDL: rank-one atoms learned from a stream", path=path)
    return path


# --------------------------------------------------------------------------------------------
# 2. image patches in three reshapings


def image_patches(image: np.ndarray, corners: np.ndarray, size: int = PATCH) -> Any:
    """Patches ``size x size x 3`` at the given top-left ``corners`` ``(n, 2)``, labelled.

    Returns
    -------
    xarray.DataArray
        Dims ``(patch, y, x, channel)``, channel coordinates ``red, green, blue``.

    Examples
    --------
    >>> image_patches(np.zeros((30, 40, 3)), np.array([[0, 0], [10, 20]])).sizes
    Frozen({'patch': 2, 'y': 20, 'x': 20, 'channel': 3})
    """
    import xarray as xr

    offsets = np.arange(size)
    rows = corners[:, 0, None, None] + offsets[None, :, None]
    cols = corners[:, 1, None, None] + offsets[None, None, :]
    return xr.DataArray(image[rows, cols], dims=("patch", "y", "x", "channel"),
                        coords={"channel": ["red", "green", "blue"]})


def _tiles(image: np.ndarray, size: int = PATCH) -> tuple[Any, tuple[int, int]]:
    """The non-overlapping patches covering the image (cropped to whole tiles), labelled."""
    n_rows, n_cols = image.shape[0] // size, image.shape[1] // size
    grid = np.stack(np.meshgrid(np.arange(n_rows) * size, np.arange(n_cols) * size,
                                indexing="ij"), axis=-1).reshape(-1, 2)
    return image_patches(image, grid, size), (n_rows, n_cols)


def _untile(patches: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    n_rows, n_cols = grid
    size = patches.shape[1]
    blocks = patches.reshape(n_rows, n_cols, size, size, -1).transpose(0, 2, 1, 3, 4)
    return blocks.reshape(n_rows * size, n_cols * size, -1)


def psnr(reference: np.ndarray, approximation: np.ndarray, peak: float = 1.0) -> float:
    """Peak signal-to-noise ratio in dB.

    Examples
    --------
    >>> round(psnr(np.zeros(4), np.full(4, 0.1)), 6)
    20.0
    """
    mse = float(np.mean((np.asarray(reference) - np.asarray(approximation)) ** 2))
    return float("inf") if mse == 0 else float(10.0 * np.log10(peak ** 2 / mse))


def run_image_reshapings(out_dir: str | Path | None = "demo-output", n_steps: int = 80,
                         n_components: int = 16, batch_size: int = 64, alpha: float = 0.05,
                         image: np.ndarray | None = None, random_state: int = 0) -> dict:
    """Part 2: CP dictionaries of image patches in the paper's three reshapings.

    Each reshaping is a mode specification of the patch array (see :data:`RESHAPINGS`); the
    learners see the same patches. The atoms come back on the patch dims ``(y, x, channel)``
    whatever the reshaping, through the factors Dataset.

    Parameters
    ----------
    out_dir : str or path, optional
        Folder for ``image_reshapings.png``; None skips the figure.
    n_steps : int, default 80
        Mini-batches of fresh random patches per reshaping (the paper: 400 of 100).
    n_components : int, default 16
        Atoms per dictionary (the paper: 24).
    batch_size : int, default 64
    alpha : float, default 0.05
        l1 penalty on the codes (``OnlineCPDL``'s ``alpha``).
    image : array (H, W, 3), optional
        Default: :func:`load_image`.
    random_state : int

    Returns
    -------
    dict
        ``rows`` (one dict per reshaping: ``reshaping``, ``numbers_per_atom``, ``psnr``,
        ``seconds``), ``atoms`` and ``reconstructions`` per reshaping, ``source``, and the
        ``figure`` path.
    """
    from ..plot import factors_atoms

    source = "the given image"
    if image is None:
        image, source = load_image()
    tiles, grid = _tiles(image)
    print(f"\n2. Image reshapings: {n_components} atoms from {n_steps} batches of {batch_size} "
          f"random {PATCH}x{PATCH}x3 patches of {source}")
    print(f"{'reshaping':>14} {'numbers/atom':>13} {'PSNR (dB)':>10} {'time (s)':>9}")
    rows, atoms, reconstructions = [], {}, {}
    for label, modes in RESHAPINGS.items():
        rng = np.random.default_rng(random_state)  # the same patches for every reshaping
        model = OnlineCPDL(n_components, alpha=alpha, code_tol=1e-3, random_state=random_state)
        start = time.perf_counter()
        for step in range(n_steps):
            corners = np.stack([rng.integers(0, image.shape[k] - PATCH + 1, batch_size)
                                for k in (0, 1)], axis=1)
            labels = {"sample_dim": "patch", "modes": modes} if step == 0 else {}
            model.partial_fit(image_patches(image, corners), **labels)
        seconds = time.perf_counter() - start
        approx = model.reconstruct(tiles).transpose("patch", "y", "x", "channel").values
        reconstructions[label] = _untile(approx, grid)
        atoms[label] = factors_atoms(model.factors_).transpose("component", "y", "x",
                                                               "channel").values
        row = {"reshaping": label, "numbers_per_atom": sum(model.layout_.shape),
               "psnr": psnr(_untile(tiles.values, grid), reconstructions[label]),
               "seconds": seconds}
        rows.append(row)
        print(f"{label:>14} {row['numbers_per_atom']:>13} {row['psnr']:>10.2f} "
              f"{seconds:>9.2f}")
    result = {"rows": rows, "atoms": atoms, "reconstructions": reconstructions,
              "source": source}
    if out_dir is not None:
        from ..plot import plot_atom_rows

        path = Path(out_dir) / "image_reshapings.png"
        plot_atom_rows(atoms, extra=reconstructions, path=path,
                       title=f"CP dictionaries of {PATCH}x{PATCH}x3 patches in three reshapings")
        result["figure"] = path
        print(f"   figure of the three dictionaries: {path}")
    return result


# --------------------------------------------------------------------------------------------
# 3. labelled climate-like data

def run_climate_example(out_dir: str | Path | None = "demo-output", n_steps: int = 135,
                        n_components: int = 3, batch_size: int = 32, n_days: int = 60,
                        random_state: int = 0) -> dict:
    """Part 3: labelled factors of climate-like data, written as netCDF and plotted.

    Parameters
    ----------
    out_dir : str or path, optional
        Folder for ``climate.nc`` (the input), ``climate_factors.nc`` and
        ``climate_factors.png``; None writes nothing.
    n_steps : int, default 135
        Mini-batches (135 of 32 hours are three passes over 60 days).
    n_components : int, default 3
    batch_size : int, default 32
    n_days : int, default 60
    random_state : int

    Returns
    -------
    dict
        ``factors`` (the Dataset, codes included), ``model``, ``rows`` (per learned component:
        the planted component it matches, the correlation of the codes, the variable it loads
        most and where its map peaks) and the paths written.
    """
    from ..io import write_factors

    da, truth = climate_like_dataarray(n_days, random_state)
    modes = [("lat", "lon"), "variable"]
    print(f"\n3. Labelled data: {dict(da.sizes)}, sample_dim='time', modes={modes}, "
          f"rank {n_components}")
    per_pass = -(-da.sizes["time"] // batch_size)
    model = OnlineCPDL(n_components, batch_size=batch_size,
                       max_iter=-(-n_steps // per_pass), random_state=random_state)
    model.fit(da, sample_dim="time", modes=modes, n_steps=n_steps)
    factors = model.factors_
    factors["codes"] = model.transform(da)
    rows = _describe_climate_components(factors, truth["codes"])
    print(f"{'component':>10} {'planted':>16} {'code corr.':>11} {'top variable':>13} "
          f"{'map peak (lat, lon)':>20}")
    for row in rows:
        print(f"{row['component']:>10} {row['planted']:>16} {row['correlation']:>11.3f} "
              f"{row['top_variable']:>13} {str(row['peak']):>20}")
    result: dict[str, Any] = {"factors": factors, "model": model, "rows": rows}
    if out_dir is not None:
        from ..plot import plot_factors

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        da.to_netcdf(out / "climate.nc")
        result["input"] = out / "climate.nc"
        result["netcdf"] = write_factors(factors, out / "climate_factors.nc")
        result["figure"] = out / "climate_factors.png"
        plot_factors(factors, title="Labelled factors of climate-like data",
                     path=result["figure"])
        print(f"   factors: {result['netcdf']}, figure: {result['figure']}")
        # the command shuffles its batches its own way: the same model, not the same numbers
        print(f"   the same model from the command line (its own batch order):\n     "
              f"tensorstream fit {out / 'climate.nc'} --var obs --sample-dim time "
              f"--modes 'lat,lon;variable' --n-components {n_components} "
              f"--batch-size {batch_size} --steps {n_steps} --epochs {-(-n_steps // per_pass)} "
              f"--seed {random_state} --codes --out factors.nc --plot factors.png")
    return result


def _describe_climate_components(factors: Any, true_codes: np.ndarray) -> list[dict]:
    """Match learned to planted components by the correlation of their codes."""
    from scipy.optimize import linear_sum_assignment

    learned = factors["codes"].transpose("time", "component").values
    r_learned = learned.shape[1]
    corr = np.corrcoef(learned.T, true_codes.T)[:r_learned, r_learned:]
    rows_, partners = linear_sum_assignment(-np.nan_to_num(corr))
    partner = dict(zip(rows_, partners))
    maps = factors["lat_lon_loadings"]
    rows = []
    for r in range(r_learned):
        peak = maps.isel(component=r).argmax(dim=("lat", "lon"))
        profile = factors["variable_loadings"].isel(component=r)
        top = int(profile.argmax("variable"))
        rows.append({"component": r,
                     "planted": CLIMATE_COMPONENTS[partner[r]] if r in partner else "-",
                     "correlation": float(corr[r, partner[r]]) if r in partner else float("nan"),
                     "top_variable": str(profile["variable"].values[top]),
                     "peak": (float(maps["lat"][int(peak["lat"])]),
                              float(maps["lon"][int(peak["lon"])]))})
    return rows


# --------------------------------------------------------------------------------------------
# the whole demo


def run_demo(out_dir: str | Path = "demo-output", n_steps: int = 200, batch_size: int = 16,
             random_state: int = 0, plot: bool = True, image_steps: int = 80,
             climate_steps: int = 135, parts: Sequence[str] = PARTS) -> dict:
    """Run the demo's parts, print their tables and write their files to ``out_dir``.

    Parameters
    ----------
    out_dir : str or path, default "demo-output"
    n_steps, batch_size : int
        Mini-batches and their size in the convergence check (part 1).
    random_state : int
    plot : bool, default True
        Write the figures (and the netCDF files); False prints the tables only.
    image_steps : int, default 80
        Mini-batches per reshaping in part 2.
    climate_steps : int, default 135
        Mini-batches in part 3.
    parts : sequence of str
        Any of ``"synthetic"``, ``"image"``, ``"climate"``.

    Returns
    -------
    dict
        Part 1's ``table`` and ``model`` at the top level (and ``figure``), and each part's
        result under its name.
    """
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise ValueError(f"unknown demo parts {unknown}; choose from {list(PARTS)}")
    folder = Path(out_dir) if plot else None
    result: dict[str, Any] = {}
    start = time.perf_counter()
    if "synthetic" in parts:
        result["synthetic"] = run_convergence(folder, n_steps, batch_size, random_state)
        result.update(result["synthetic"])
    if "image" in parts:
        result["image"] = run_image_reshapings(folder, image_steps, random_state=random_state)
    if "climate" in parts:
        result["climate"] = run_climate_example(folder, climate_steps,
                                                random_state=random_state)
    print(f"\ndemo finished in {time.perf_counter() - start:.1f} s"
          + (f"; files in {folder}" if folder is not None else ""))
    return result
