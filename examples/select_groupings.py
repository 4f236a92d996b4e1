"""
Choosing the grouping and the rank of image patches
===================================================

**What it does.** Scores three groupings of colour image patches x six ranks with
:func:`tensorstream.model_selection.select`, online from the same batches, and prints the
grouping and rank its rule chooses, for several seeds.

**When to use it.** When you do not know which axes a CP atom should keep separate, or how
many atoms to learn: the most asked question about tensor decompositions.

**The parameter that matters.** ``modes`` (one grouping per candidate) and
``n_components`` (the ranks to try); the rule's ``tolerance``.

Colour patches of an image, ``(patch, y, x, channel)``, can be learned in three groupings:
three modes (rank-one "plaid" atoms in one hue), ``(y·x, channel)`` (free spatial shapes, one
hue each) or one vector per patch (a plain NMF dictionary). Which one, and how many atoms?
:func:`tensorstream.model_selection.select` scores every grouping x rank online from the same
batches of patches, and chooses by its rule: the fewest parameters within one standard error
(or 10%) of the best imputation error of held-out entries, at the ranks that replicate
(averaged over the groupings that fit best at each rank; see ``docs/model_selection.md``).

The patches are given as a labelled ``xarray.DataArray`` of dims ``(patch, y, x,
channel)``: the candidate groupings are written with the dims' names (``"y,x;channel"``), and
the table and the choice come back in them.

The selection is repeated with several seeds (other patches, other batches): a stable choice
is one the seeds agree on. Natural patches have no finite rank: the imputation error falls all
the way to the largest rank tried in every grouping, and what limits the rank is
replicability (the atoms of the learners fitted on disjoint thirds of the patches stop
matching past rank 4). How often the seeds agree, with the worst component's and the median
component's replicability, is measured by ``benchmarks/bench_selection.py --sections real``
(5,000 patches, 10 or 20 seeds): see the numbers in ``docs/model_selection.md``.

Run::

    python examples/select_groupings.py [--image astronaut] [--patches 20000] [--seeds 3]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

import numpy as np
import xarray as xr

from tensorstream import OnlineCPDL
from tensorstream.datasets import load_image
from tensorstream.model_selection import select
from tensorstream.streams import RandomPatches

GROUPINGS = ["y;x;channel", "y,x;channel", "y,x,channel"]


def select_once(image: np.ndarray, n: int, size: int, ranks: list[int], seed: int,
                passes: int) -> object:
    # n patches at random places (uniform over the image's corners), drawn with this seed
    patches = RandomPatches(image, (size, size), batch_size=n, random_state=seed).next_batch()
    labelled = xr.DataArray(patches, dims=("patch", "y", "x", "channel"),
                            coords={"channel": ["red", "green", "blue"]}, name="patches")
    learner = OnlineCPDL(ranks[0], batch_size=64, random_state=seed)
    return select(learner, labelled, sample_dim="patch", modes=GROUPINGS, n_components=ranks,
                  n_passes=passes, random_state=seed)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    parser.add_argument("--image", default="astronaut")
    parser.add_argument("--patches", type=int, default=20000)
    parser.add_argument("--size", type=int, default=8, help="patch side in pixels")
    parser.add_argument("--ranks", default="4,8,12,16,24,32")
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", default="example-output", help="output folder")
    args = parser.parse_args(argv)

    image, source = load_image(args.image)
    ranks = [int(r) for r in args.ranks.split(",")]
    print(f"image: {source}; {args.patches} patches of {args.size}x{args.size}x3; "
          f"ranks {ranks}; {args.passes} passes")
    choices = []
    for seed in range(args.seeds):
        start = time.perf_counter()
        result = select_once(image, args.patches, args.size, ranks, seed, args.passes)
        chosen = (result.chosen["grouping"], result.chosen["n_components"])
        choices.append(chosen)
        print(f"seed {seed}: chosen {chosen[0]} rank {chosen[1]} "
              f"({time.perf_counter() - start:.1f} s)")
        if seed == 0:
            print(result.table[["imputation_error", "replicability", "passes"]]
                  .to_dataframe().round(4).to_string())
            import matplotlib

            matplotlib.use("Agg")
            axes = result.plot()
            path = Path(args.out) / "select_groupings.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            axes[0].figure.savefig(path, dpi=110)
            print(f"figure: {path}")
    counts = Counter(choices)
    print(f"choices over {args.seeds} seeds: {dict(counts)}")
    return {"choices": choices, "stable": len(counts) == 1}


if __name__ == "__main__":
    main()
