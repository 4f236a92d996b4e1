"""The papers' parameter names are refused, by name, in keywords and in checkpoints.

The robust and max-norm learners took the names of their papers (``lam``, ``M``, ``lambda1``,
``code_l1``, ...) before they took the glossary's (``docs/glossary.md``), in development
versions no release shipped: nothing translates them. Each checkpoint test saves a fitted
learner, rewrites the names in its metadata back to the old ones, and loads it: refused,
naming the parameters the class does not take.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tensorstream import load
from tensorstream.engine.checkpoint import read_checkpoint
from tensorstream.learners.maxnorm import OnlineMaxNormMD
from tensorstream.learners.robust_nmf import RobustOnlineNMF
from tensorstream.learners.robust_nmf_batch import RobustNMF
from tensorstream.learners.robust_pca import OnlineRobustPCA, RobustPCA

#: (learner, the old names of its parameters: the new names)
CASES = [
    (lambda: RobustOnlineNMF(3, outlier_alpha=None, outlier_alpha_scale=1.5, outlier_bound=5.0,
                             alpha=0.01, ridge=0.02, group_alpha=0.03, group_size=2,
                             batch_size=10, random_state=0),
     {"lam": "outlier_alpha", "lam_scale": "outlier_alpha_scale", "M": "outlier_bound",
      "code_l1": "alpha", "code_l2": "ridge", "code_group": "group_alpha",
      "dict_max_iter": "dict_passes"}),
    (lambda: RobustNMF(3, outlier_alpha=0.4, outlier_bound=5.0, code_tol=1e-5,
                       code_max_iter=300, max_iter=5, random_state=0),
     {"lam": "outlier_alpha", "M": "outlier_bound", "transform_tol": "code_tol",
      "transform_max_iter": "code_max_iter"}),
    (lambda: RobustPCA(3, outlier_alpha=0.3, max_iter=50), {"lam": "outlier_alpha"}),
    (lambda: OnlineMaxNormMD(3, norm_alpha=0.2, outlier_alpha=0.4, ridge=0.05, random_state=0),
     {"lambda1": "norm_alpha", "lambda2": "outlier_alpha", "eps": "ridge"}),
    (lambda: OnlineRobustPCA(3, norm_alpha=0.2, outlier_alpha=0.4, random_state=0),
     {"lambda1": "norm_alpha", "lambda2": "outlier_alpha"}),
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
def test_a_checkpoint_with_the_old_names_is_refused_by_name(tmp_path, make, old_names):
    learner = make().fit(_data())
    old = _with_old_names(learner.save(tmp_path / "new"), tmp_path, old_names)
    with pytest.raises(ValueError, match="has no parameter") as error:
        load(old)
    assert all(repr(name) in str(error.value) for name in old_names)


@pytest.mark.parametrize("make, old_names", CASES,
                         ids=[type(make()).__name__ for make, _ in CASES])
def test_the_old_keywords_are_refused(make, old_names):
    """No shims in ``__init__`` (``get_params`` must round-trip): an old keyword is a
    ``TypeError``, as for any unknown keyword."""
    cls = type(make())
    for old in old_names:
        with pytest.raises(TypeError, match=old):
            cls(3, **{old: 1.0})
