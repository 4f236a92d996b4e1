"""
CP dictionaries of colour image patches in three reshapings
===========================================================

**What it does.** Learns a dictionary of 20 x 20 x 3 patches of a colour image three times,
with three *mode specifications* of the same patch array ``(patch, y, x, channel)``, and draws
the atoms of each beside its reconstruction of the image.

**When to use it.** When your samples are small tensors (image patches, space x variable
blocks) and you must choose which axes a CP atom keeps separate: separate modes give
compact, structured atoms; stacked modes give free ones that cost more numbers.

**The parameter that matters.** ``modes`` of ``fit``: each entry is one CP mode, a tuple
stacks dims into one mode.

* (b) ``["y", "x", "channel"]`` - no reshaping: every atom is ``u_y o u_x o u_c``, an
  axis-parallel "plaid" pattern in a single hue (43 numbers per atom);
* (c) ``[("y", "x"), "channel"]`` - space vectorised: free spatial shapes, still a single hue
  per atom (403 numbers);
* (d) ``[("y", "x", "channel")]`` - fully vectorised: a plain NMF dictionary, multicoloured
  atoms (1200 numbers).

This is section 7.1 and Figure 3 of Lyu, Strohmeier & Needell, *Online Nonnegative
CP-dictionary Learning for Markovian Data* (2022). The defaults are the paper's scale (24
atoms, 400 batches of 100 patches: a few minutes on two cores); ``tensorstream demo`` runs a
short version.

Run::

    python examples/image_reshapings.py [--image coffee] [--steps 400] [--out example-output]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import xarray as xr

from tensorstream import OnlineCPDL, datasets
from tensorstream.plot import factors_atoms, plot_atom_rows
from tensorstream.streams import RandomPatches

PATCH = 20
RESHAPINGS = {
    "(b) 20x20x3": ["y", "x", "channel"],
    "(c) (400, 3)": [("y", "x"), "channel"],
    "(d) (1200,)": [("y", "x", "channel")],
}


def load_image(name: str) -> tuple[xr.DataArray, str]:
    """A colour image of scikit-image in [0, 1], every second pixel (a synthetic stand-in
    without scikit-image: :func:`tensorstream.datasets.load_image`), with named axes."""
    pixels, source = datasets.load_image(name, downsample=2)
    return xr.DataArray(pixels, dims=("y", "x", "channel"),
                        coords={"channel": ["red", "green", "blue"]}), source


def tiles(image: xr.DataArray) -> xr.DataArray:
    """The non-overlapping patches covering the image (cropped to whole tiles)."""
    rows, cols = image.sizes["y"] // PATCH, image.sizes["x"] // PATCH
    cropped = image.values[:rows * PATCH, :cols * PATCH]
    blocks = cropped.reshape(rows, PATCH, cols, PATCH, 3).transpose(0, 2, 1, 3, 4)
    return xr.DataArray(blocks.reshape(-1, PATCH, PATCH, 3), dims=("patch", "y", "x", "channel"),
                        coords={"channel": image["channel"].values}, attrs={"grid": (rows, cols)})


def untile(patches: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    rows, cols = grid
    blocks = patches.reshape(rows, cols, PATCH, PATCH, 3).transpose(0, 2, 1, 3, 4)
    return blocks.reshape(rows * PATCH, cols * PATCH, 3)


def numerical_rank(matrix: np.ndarray, rtol: float = 1e-6) -> int:
    """Rank of ``matrix`` up to ``rtol`` times its largest singular value."""
    singular = np.linalg.svd(matrix, compute_uv=False)
    return int((singular > rtol * singular.max()).sum()) if singular.max() > 0 else 0


def learn(image: xr.DataArray, modes: list, args: argparse.Namespace) -> OnlineCPDL:
    """One dictionary from a stream of random patches (the same patches for every ``modes``)."""
    patches = RandomPatches(image, (PATCH, PATCH), batch_size=args.batch_size,
                            n_steps=args.steps, random_state=0)
    model = OnlineCPDL(args.atoms, alpha=args.alpha, code_tol=1e-3, random_state=0)
    return model.fit(patches, sample_dim="patch", modes=modes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    parser.add_argument("--image", default="astronaut",
                        help="a colour image of skimage.data (astronaut, coffee, chelsea, ...)")
    parser.add_argument("--steps", type=int, default=400, help="batches per reshaping")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--atoms", type=int, default=24)
    parser.add_argument("--alpha", type=float, default=0.05, help="l1 penalty on the codes")
    parser.add_argument("--out", default="example-output", help="output folder")
    args = parser.parse_args()

    image, source = load_image(args.image)
    print(f"image: {source}, {image.sizes['y']}x{image.sizes['x']}")
    whole = tiles(image)
    clean = untile(whole.values, whole.attrs["grid"])
    print(f"{'reshaping':>14} {'numbers/atom':>13} {'PSNR (dB)':>10}")
    atoms, reconstructions = {}, {}
    for label, modes in RESHAPINGS.items():
        model = learn(image, modes, args)
        approx = model.reconstruct(whole).transpose("patch", "y", "x", "channel").values
        reconstructions[label] = untile(approx, whole.attrs["grid"])
        atoms[label] = factors_atoms(model.factors_).transpose("component", "y", "x",
                                                               "channel").values
        error = float(np.mean((clean - reconstructions[label]) ** 2))
        print(f"{label:>14} {sum(model.layout_.shape):>13} {10 * np.log10(1 / error):>10.2f}")
    path = Path(args.out) / "image_reshapings_example.png"
    plot_atom_rows(atoms, extra=reconstructions, path=path, max_atoms=8,
                   title=f"{PATCH}x{PATCH}x3 patches in three reshapings ({args.atoms} atoms, "
                         f"{args.steps} batches)")
    print(f"figure: {path.name}")

    print("\nstructure of the atoms (max over atoms of the numerical rank):")
    print(f"{'reshaping':>14} {'space (20x20)':>14} {'colour (400x3)':>15}")
    for label, found in atoms.items():
        space = max(numerical_rank(a[..., 0]) for a in found)
        colour = max(numerical_rank(a.reshape(-1, 3)) for a in found)
        print(f"{label:>14} {space:>14} {colour:>15}")


if __name__ == "__main__":
    main()
