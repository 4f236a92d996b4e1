"""The built-in demo: stream samples of a planted CP model and watch OnlineCPDL recover it.

Each sample is a 16 x 16 "image" mixing four separable patterns (bars and blobs) with sparse
nonnegative weights plus a little noise, so the planted atoms are known. The demo prints a
convergence table (held-out relative error, surrogate value, atom recovery: mean cosine
similarity of matched planted and learned atoms) and writes a figure
of the learned atoms next to the planted ones.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from .learners.ocpdl import OnlineCPDL
from .metrics import reconstruction_error

SIZE, RANK = 16, 4


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


def run_demo(out_dir: str | Path = "demo-output", n_steps: int = 200, batch_size: int = 16,
             random_state: int = 0, plot: bool = True) -> dict:
    """Run the demo, print the convergence table and write ``atoms.png`` to ``out_dir``."""
    rng = np.random.default_rng(random_state)
    held_out = sample_stream(200, rng)
    model = OnlineCPDL(RANK, alpha=0.01, random_state=random_state)
    planted = planted_patterns()
    print(f"OnlineCPDL demo: {n_steps} mini-batches of {batch_size} noisy {SIZE}x{SIZE} images, "
          f"rank {RANK}")
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
    if plot:
        result["figure"] = _plot_atoms(model.loadings_, planted, Path(out_dir) / "atoms.png")
        print(f"figure of the learned atoms: {result['figure']}")
    return result


def _plot_atoms(loadings: list, planted: list, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    partners = match_atoms(loadings, planted)[1]
    learned = [U[:, partners] for U in loadings]
    fig, axes = plt.subplots(2, RANK, figsize=(2.2 * RANK, 4.6))
    for row, (title, factors) in enumerate([("planted", planted), ("learned", learned)]):
        for r in range(RANK):
            axes[row, r].imshow(np.outer(factors[0][:, r], factors[1][:, r]), cmap="viridis")
            axes[row, r].set_title(f"{title} atom {r + 1}", fontsize=9)
            axes[row, r].axis("off")
    fig.suptitle("OnlineCPDL: rank-one atoms learned from a stream")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
