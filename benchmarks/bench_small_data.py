"""Small clean data with each online learner's defaults: how much of the data it explains.

A clean rank-3 nonnegative matrix of 200 samples and 40 features (``rng.random((200, 3)) @
rng.random((3, 40))``, seed 0); each learner fits it with ``n_components=3`` and its defaults,
then with ``max_iter=20`` passes. Printed: the mini-batches ``fit`` ran, and the relative error
``||X - reconstruct(X)|| / ||X||``. The robust learners give part of clean data to their outlier
term, so more passes do not bring them to the non-robust learners' error (docs/user_guide.md).

Usage::

    python benchmarks/bench_small_data.py
"""

from __future__ import annotations

import warnings

import numpy as np

from tensorstream import OnlineCPDL, OnlineMaxNormMD, OnlineNMF, OnlineRobustPCA, RobustOnlineNMF

LEARNERS = (OnlineCPDL, OnlineNMF, OnlineRobustPCA, RobustOnlineNMF, OnlineMaxNormMD)


def relative_error(model, X: np.ndarray) -> float:
    return float(np.linalg.norm(X - model.reconstruct(X)) / np.linalg.norm(X))


def main() -> None:
    rng = np.random.default_rng(0)
    X = rng.random((200, 3)) @ rng.random((3, 40))
    print(f"{'learner':18} {'batch':>6} {'steps':>6} {'error (defaults)':>17} "
          f"{'steps':>6} {'error (max_iter=20)':>20}")
    for cls in LEARNERS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the table is the point, not the warnings
            default = cls(3, random_state=0).fit(X)
            longer = cls(3, max_iter=20, random_state=0).fit(X)
        print(f"{cls.__name__:18} {default.batch_size:6} {default.n_steps_:6} "
              f"{relative_error(default, X):17.3f} {longer.n_steps_:6} "
              f"{relative_error(longer, X):20.3f}")


if __name__ == "__main__":
    main()
