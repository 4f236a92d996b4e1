"""Checkpoints written with the papers' parameter names load under the glossary's names.

The batch robust learners took the names of their papers (``lam``, ``M``, ...) before they took
the glossary's (``docs/glossary.md``); the online learners keep no such names (no release wrote
them). A checkpoint holds its
learner's parameters by name, so each test saves a fitted learner, rewrites the names in the
checkpoint's metadata back to the old ones (what the earlier versions wrote), and loads it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tensorstream import load
from tensorstream.engine.checkpoint import read_checkpoint
from tensorstream.learners.robust_nmf import RobustNMF
from tensorstream.learners.robust_pca import RobustPCA

#: (learner, the old names of its parameters: the new names)
CASES = [
    (lambda: RobustNMF(3, outlier_alpha=0.4, outlier_bound=5.0, code_tol=1e-5,
                       code_max_iter=300, max_iter=5, random_state=0),
     {"lam": "outlier_alpha", "M": "outlier_bound", "transform_tol": "code_tol",
      "transform_max_iter": "code_max_iter"}),
    (lambda: RobustPCA(3, outlier_alpha=0.3, max_iter=50), {"lam": "outlier_alpha"}),
]


def _data() -> np.ndarray:
    rng = np.random.default_rng(0)
    X = rng.random((30, 3)) @ rng.random((3, 12))
    X[::5, ::4] += 3.0  # a few outliers
    return X


def _with_old_names(path, tmp_path, old_names: dict):
    """A copy of the checkpoint at ``path`` whose parameters carry the old names."""
    meta, arrays = read_checkpoint(path)
    new_to_old = {new: old for old, new in old_names.items()}
    assert set(new_to_old) <= set(meta["params"])  # every renamed parameter is saved
    meta["params"] = {new_to_old.get(k, k): v for k, v in meta["params"].items()}
    old = tmp_path / "old.npz"
    np.savez(old, __meta__=np.array(json.dumps(meta)), **arrays)
    return old


@pytest.mark.parametrize("make, old_names", CASES,
                         ids=[type(make()).__name__ for make, _ in CASES])
def test_a_checkpoint_with_the_old_names_loads(tmp_path, make, old_names):
    X = _data()
    learner = make().fit(X)
    loaded = load(_with_old_names(learner.save(tmp_path / "new"), tmp_path, old_names))
    assert type(loaded) is type(learner)
    assert loaded.get_params() == learner.get_params()
    np.testing.assert_array_equal(np.asarray(loaded.components_),
                                  np.asarray(learner.components_))
