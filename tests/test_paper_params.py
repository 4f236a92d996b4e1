"""``paper_params``: every learner's paper settings, one argument away (issue #15)."""

import warnings
from pathlib import Path

import numpy as np
import pytest

from tensorstream import VarianceReducedMF
from tensorstream.learners.maxnorm import OnlineMaxNormMD
from tensorstream.learners.robust_nmf import RobustOnlineNMF
from tensorstream.learners.robust_nmf_batch import RobustNMF
from tensorstream.learners.robust_pca import OnlineRobustPCA

LEARNERS = [RobustOnlineNMF, RobustNMF, OnlineMaxNormMD, OnlineRobustPCA, VarianceReducedMF]
DOCS = Path(__file__).resolve().parents[1] / "docs"
#: the page that lists each learner's paper settings
PAGES = {"RobustOnlineNMF": "nmf.md", "RobustNMF": "nmf.md", "OnlineMaxNormMD": "maxnorm.md",
         "OnlineRobustPCA": "maxnorm.md", "VarianceReducedMF": "svrmf.md"}


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda cls: cls.__name__)
def test_paper_params_are_parameters_and_fit(cls):
    params = cls.paper_params
    assert isinstance(params, dict) and params
    model = cls(2, **params)
    assert {k: model.get_params()[k] for k in params} == params
    assert f"{cls.__name__}.paper_params" in (DOCS / PAGES[cls.__name__]).read_text()
    X = np.random.default_rng(0).random((30, 6))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # VarianceReducedMF warns about the all-ones start
        extra = {"n_epochs": 1} if cls is VarianceReducedMF else {}
        fitted = model.set_params(random_state=0, **extra).fit(X)
    assert np.all(np.isfinite(np.asarray(fitted.components_)))


@pytest.mark.parametrize("cls", [OnlineMaxNormMD, OnlineRobustPCA, VarianceReducedMF],
                         ids=lambda cls: cls.__name__)
def test_paper_params_work_in_raw_units_and_the_defaults_adapt(cls):
    """The papers' weights are in the data's raw units; the defaults measure the data."""
    assert cls.paper_params["data_scale"] == 1.0
    assert cls(2).get_params()["data_scale"] == "auto"


def test_svrmf_paper_start_warns():
    with pytest.warns(UserWarning, match="ones"):
        VarianceReducedMF(2, n_epochs=1, random_state=0, **VarianceReducedMF.paper_params).fit(
            np.random.default_rng(0).random((30, 6)))
