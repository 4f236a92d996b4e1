"""Checkpoints written with the papers' parameter names load under the glossary's names.

The robust and max-norm learners took the names of their papers (``lam``, ``M``, ``lambda1``,
``code_l1``, ...) before they took the glossary's (``docs/glossary.md``). A checkpoint holds its
learner's parameters by name, so each test saves a fitted learner, rewrites the names in the
checkpoint's metadata back to the old ones (what the earlier versions wrote), and loads it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tensorstream import load
from tensorstream.engine.checkpoint import read_checkpoint
from tensorstream.learners.maxnorm import OnlineMaxNormMD
from tensorstream.learners.robust_nmf import RobustOnlineNMF
from tensorstream.learners.robust_pca import OnlineRobustPCA

#: (learner, the old names of its parameters: the new names)
CASES = [
    (lambda: RobustOnlineNMF(3, outlier_alpha=0.4, outlier_alpha_scale=1.5, outlier_bound=5.0,
                             alpha=0.01, ridge=0.02, group_alpha=0.03, group_size=2,
                             batch_size=10, random_state=0),
     {"lam": "outlier_alpha", "lam_scale": "outlier_alpha_scale", "M": "outlier_bound",
      "code_l1": "alpha", "code_l2": "ridge", "code_group": "group_alpha"}),
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
def test_a_checkpoint_with_the_old_names_loads(tmp_path, make, old_names):
    X = _data()
    learner = make().fit(X)
    loaded = load(_with_old_names(learner.save(tmp_path / "new"), tmp_path, old_names))
    assert type(loaded) is type(learner)
    assert loaded.get_params() == learner.get_params()
    np.testing.assert_array_equal(np.asarray(loaded.components_),
                                  np.asarray(learner.components_))


@pytest.mark.parametrize("make, old_names", [CASES[0], CASES[1]], ids=["robust", "maxnorm"])
def test_an_online_learner_resumes_from_the_old_names_as_it_would_have(tmp_path, make,
                                                                        old_names):
    X = _data()
    learner = make().partial_fit(X[:10])
    loaded = load(_with_old_names(learner.save(tmp_path / "new"), tmp_path, old_names))
    for model in (learner, loaded):
        model.partial_fit(X[10:20])
    np.testing.assert_array_equal(np.asarray(loaded.components_),
                                  np.asarray(learner.components_))


@pytest.mark.parametrize("make, old_names", CASES,
                         ids=[type(make()).__name__ for make, _ in CASES])
def test_the_old_keywords_are_refused(make, old_names):
    """No shims in ``__init__`` (``get_params`` must round-trip): an old keyword is a
    ``TypeError``, as for any unknown keyword."""
    cls = type(make())
    for old in old_names:
        with pytest.raises(TypeError, match=old):
            cls(3, **{old: 1.0})
