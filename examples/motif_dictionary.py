"""
Latent motifs of a network from motif-sampled patches
=====================================================

**What it does.** Walks a random path through a network, cuts out the k x k adjacency
patches it sees, and learns a few "latent motifs": small patterns that, combined, rebuild
every patch.

**When to use it.** To summarise the local structure of a graph, or whenever your samples
come from a Markov chain (no burn-in or thinning is needed).

**The parameter that matters.** ``n_components`` (how many motifs), then ``alpha`` of
:class:`~tensorstream.OnlineCPDL`, the sparsity of each patch's combination.

A Markov chain on homomorphisms of the k-node path into the graph (the pivot chain of
:class:`tensorstream.streams.MotifSampler`) yields k x k adjacency patches ``A[x_a, x_b]``;
nonnegative online CP-dictionary learning on them (the network dictionary learning of Lyu,
Needell & Balzano, *Online Matrix Factorization for Markovian Data and Applications to Network
Dictionary Learning*, 2020) finds "latent motifs": a few k x k patterns whose nonnegative
combinations reconstruct the patches. The learner reads every MCMC sample, with no burn-in or
thinning, as the convergence theory for Markovian data allows.

Run::

    python examples/motif_dictionary.py --graph karate --k 20 --out motifs.png

``--modes 1`` learns unconstrained k x k atoms (NMF of the flattened patches, as in network
dictionary learning); ``--modes 2`` learns rank-one atoms ``u o v`` (a CP dictionary).
"""

from __future__ import annotations

import argparse
import time

import matplotlib

matplotlib.use("Agg")  # write files only; no display needed

import matplotlib.pyplot as plt  # noqa: E402
import networkx as nx  # noqa: E402
import numpy as np  # noqa: E402

from tensorstream import OnlineCPDL  # noqa: E402
from tensorstream.streams import MotifSampler  # noqa: E402

GRAPHS = {
    "karate": nx.karate_club_graph,
    "lesmis": nx.les_miserables_graph,
    "florentine": nx.florentine_families_graph,
}


class Flattened:
    """A stream of k x k patches reshaped to k^2 features (one data mode)."""

    def __init__(self, stream):
        self.stream = stream

    def __iter__(self):
        for batch in self.stream:
            yield batch.reshape(len(batch), -1)


def atoms_of(model: OnlineCPDL, k: int, modes: int) -> np.ndarray:
    """The learned atoms as (R, k, k) arrays."""
    loadings = [np.asarray(U) for U in model.loadings_]
    if modes == 1:
        return loadings[0].T.reshape(-1, k, k)
    return np.einsum("ir,jr->rij", *loadings)


def importance(model: OnlineCPDL, patches: np.ndarray, modes: int) -> np.ndarray:
    """Mean code of each atom over held-out patches (how much it is used)."""
    X = patches.reshape(len(patches), -1) if modes == 1 else patches
    return np.asarray(model.transform(X)).mean(axis=0)


def plot_motifs(atoms: np.ndarray, weights: np.ndarray, title: str, path: str) -> None:
    order = np.argsort(weights)[::-1]
    cols = int(np.ceil(np.sqrt(len(atoms))))
    rows = int(np.ceil(len(atoms) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(1.6 * cols + 1.2, 1.7 * rows + 0.6),
                             layout="constrained")
    shares = weights / weights.sum()
    for ax in np.ravel(axes):
        ax.axis("off")
    vmax = float(atoms.max()) or 1.0
    for ax, r in zip(np.ravel(axes), order, strict=False):
        image = ax.imshow(atoms[r], cmap="Greys", vmin=0, vmax=vmax, interpolation="nearest")
        ax.set_title(f"share {shares[r]:.3f}", fontsize=8)
    fig.colorbar(image, ax=axes, shrink=0.6, label="atom entry (edge weight of the k x k patch)")
    fig.suptitle(title + "\nordered by their share of the held-out codes", fontsize=10)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    parser.add_argument("--graph", choices=sorted(GRAPHS), default="karate")
    parser.add_argument("--k", type=int, default=20, help="path nodes (patch size)")
    parser.add_argument("--n-components", type=int, default=16, help="number of motifs")
    parser.add_argument("--modes", type=int, choices=(1, 2), default=1)
    parser.add_argument("--chain", choices=("pivot", "glauber"), default="pivot")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--n-steps", type=int, default=200)
    parser.add_argument("--alpha", type=float, default=0.5, help="l1 penalty on the codes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="motifs.png", help="figure path")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    graph = GRAPHS[args.graph]()
    sampler = MotifSampler(graph, args.k, batch_size=args.batch_size, chain=args.chain,
                           n_steps=args.n_steps, random_state=args.seed)
    model = OnlineCPDL(args.n_components, alpha=args.alpha, nonnegative=True,
                       random_state=args.seed)
    model.fit(Flattened(sampler) if args.modes == 1 else sampler)

    # evaluate on fresh patches from the same chain
    held_out = np.concatenate([sampler.next_batch() for _ in range(5)])
    X = held_out.reshape(len(held_out), -1) if args.modes == 1 else held_out
    fit = 1 - np.linalg.norm(X - np.asarray(model.reconstruct(X))) / np.linalg.norm(X)
    atoms = atoms_of(model, args.k, args.modes)
    title = (f"{args.n_components} latent motifs of {args.graph} (k={args.k}, {args.chain} "
             f"chain, {args.modes}-mode dictionary); held-out fit {fit:.2f}")
    plot_motifs(atoms, importance(model, held_out, args.modes), title, args.out)
    print(f"{graph.number_of_nodes()} nodes, {graph.number_of_edges()} edges; "
          f"{model.n_steps_} steps x {args.batch_size} patches; held-out fit {fit:.3f};\n"
          f"saved {args.out} in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
