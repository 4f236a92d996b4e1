"""CP dictionaries of colour image patches in the paper's three reshapings (spec 004, F1).

Lyu, Strohmeier & Needell (section 7.1, Figure 3) learn dictionaries from 20 x 20 x 3 patches of
a painting in three ways; in tensorstream each way is a *mode specification* of the patch array
``(patch, y, x, channel)``:

* (b) ``["y", "x", "channel"]`` - no reshaping: every atom is ``u_y o u_x o u_c``: an
  axis-parallel "plaid" pattern in a single hue (43 numbers per atom);
* (c) ``[("y", "x"), "channel"]`` - space vectorised: free spatial shapes, still a single hue
  per atom (403 numbers);
* (d) ``[("y", "x", "channel")]`` - fully vectorised: a plain NMF dictionary, multicoloured
  atoms (1200 numbers).

This script runs the demo's image part at the paper's scale (24 atoms, 400 batches of 100
patches: a few minutes on two cores) and checks the structure of the atoms. ``tensorstream
demo`` runs a short version of it.

Run::

    python examples/image_reshapings.py [--image coffee] [--steps 400] [--out demo-output]
"""

from __future__ import annotations

import argparse

import numpy as np

from tensorstream.cli.demo import load_image, run_image_reshapings


def numerical_rank(matrix: np.ndarray, rtol: float = 1e-6) -> int:
    """Rank of ``matrix`` up to ``rtol`` times its largest singular value."""
    singular = np.linalg.svd(matrix, compute_uv=False)
    return int((singular > rtol * singular.max()).sum()) if singular.max() > 0 else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="astronaut",
                        help="a colour image of skimage.data (astronaut, coffee, chelsea, ...)")
    parser.add_argument("--steps", type=int, default=400, help="batches per reshaping")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--atoms", type=int, default=24)
    parser.add_argument("--alpha", type=float, default=0.1, help="l1 penalty on the codes")
    parser.add_argument("--out", default="demo-output")
    args = parser.parse_args()

    image, source = load_image(args.image)
    print(f"image: {source}, {image.shape[0]}x{image.shape[1]}")
    result = run_image_reshapings(args.out, n_steps=args.steps, n_components=args.atoms,
                                  batch_size=args.batch_size, alpha=args.alpha, image=image)

    print("\nstructure of the atoms (max over atoms of the numerical rank):")
    print(f"{'reshaping':>14} {'space (20x20)':>14} {'colour (400x3)':>15}")
    for label, atoms in result["atoms"].items():
        space = max(numerical_rank(a[..., 0]) for a in atoms)
        colour = max(numerical_rank(a.reshape(-1, 3)) for a in atoms)
        print(f"{label:>14} {space:>14} {colour:>15}")
    psnr = {row["reshaping"]: row["psnr"] for row in result["rows"]}
    print(f"\nPSNR (d) - PSNR (b) = {psnr['(d) (1200,)'] - psnr['(b) 20x20x3']:+.2f} dB; "
          "an atom of (d) stores 28x the numbers of one of (b) (the paper finds (b) "
          "visibly blurrier)")


if __name__ == "__main__":
    main()
