"""Every parameter of RobustOnlineNMF and RobustNMF means something for every value of every
other (issue 33): each solver's settings (``solver_params``) move that solver's result and are
refused, by name, for the other; ``outlier_alpha_scale`` with a given ``outlier_alpha`` and the
elastic-net weights with another constraint set are refused naming both, before learning, the
fitted state untouched; ``dict_passes`` and ``dict_tol`` reach both dictionary steps."""

import numpy as np
import pytest
from state_helpers import state_of

from tensorstream.algorithms.robust_nmf import BATCH_SOLVER_PARAMS, SOLVER_PARAMS
from tensorstream.datasets import synthetic_outlier_data
from tensorstream.learners.robust_nmf import RobustOnlineNMF
from tensorstream.learners.robust_nmf_batch import RobustNMF

#: a value other than the default of every solver setting
OTHER = {"kappa": 0.3, "accelerated": True, "rho": 3.0}


@pytest.fixture(scope="module")
def X():
    return synthetic_outlier_data(n_features=20, n_components=3, n_samples=40,
                                  random_state=3).X


def _online(X, **params):
    return RobustOnlineNMF(3, batch_size=10, max_iter=1, random_state=0, **params).fit(X)


def _batch(X, **params):
    return RobustNMF(3, max_iter=15, random_state=0, **params).fit(X)


def _refused(fitted, X, params, match):
    """``params`` set on ``fitted`` are refused by the next step with a message matching
    ``match``; once they are set back, the learner is exactly as it was."""
    before, kept = state_of(fitted), {k: fitted.get_params()[k] for k in params}
    fitted.set_params(**params)
    with pytest.raises(ValueError, match=match):
        fitted.fit(X) if isinstance(fitted, RobustNMF) else fitted.partial_fit(X[:10])
    fitted.set_params(**kept)
    assert state_of(fitted) == before


@pytest.mark.parametrize("solver, key", [(s, k) for s in SOLVER_PARAMS
                                         for k in SOLVER_PARAMS[s]])
def test_each_solver_setting_moves_the_online_result(X, solver, key):
    default = _online(X, solver=solver)
    other = _online(X, solver=solver, solver_params={key: OTHER[key]})
    at_default = _online(X, solver=solver, solver_params={key: SOLVER_PARAMS[solver][key]})
    assert not np.allclose(default.components_, other.components_)
    np.testing.assert_array_equal(default.components_, at_default.components_)


@pytest.mark.parametrize("solver, key", [(s, k) for s in BATCH_SOLVER_PARAMS
                                         for k in BATCH_SOLVER_PARAMS[s]])
def test_each_solver_setting_moves_the_batch_result(X, solver, key):
    default = _batch(X, solver=solver)
    other = _batch(X, solver=solver, solver_params={key: OTHER[key]})
    assert not np.allclose(default.components_, other.components_)
    assert not np.allclose(default.transform(X[:5]), other.transform(X[:5]))


@pytest.mark.parametrize("make, table", [(_online, SOLVER_PARAMS), (_batch, BATCH_SOLVER_PARAMS)],
                         ids=["online", "batch"])
@pytest.mark.parametrize("solver", ["pgd", "admm"])
def test_a_setting_of_the_other_solver_is_refused_by_name_state_kept(X, make, table, solver):
    fitted = make(X, solver=solver)
    wrong = [key for key in OTHER if key not in table[solver]]
    for key in wrong:
        _refused(fitted, X, {"solver_params": {key: OTHER[key]}},
                 rf"solver_params: '{key}' does not apply to solver='{solver}'")
    with pytest.raises(ValueError, match="solver_params"):  # before any learning too
        make(X, solver=solver, solver_params={wrong[0]: OTHER[wrong[0]]})


@pytest.mark.parametrize("make", [_online, _batch], ids=["online", "batch"])
@pytest.mark.parametrize("alpha", [0.4, float("inf")])
def test_outlier_alpha_scale_with_a_given_weight_is_refused_naming_both(X, make, alpha):
    _refused(make(X), X, {"outlier_alpha": alpha, "outlier_alpha_scale": 2.0},
             r"outlier_alpha_scale=2.0 with outlier_alpha=")
    make(X, outlier_alpha=alpha)  # at 1.0 a given weight is used as it is


@pytest.mark.parametrize("make", [_online, _batch], ids=["online", "batch"])
@pytest.mark.parametrize("alpha", ["auto", None])
def test_outlier_alpha_scale_moves_the_rules_weight(X, make, alpha):
    default = make(X, outlier_alpha=alpha)
    scaled = make(X, outlier_alpha=alpha, outlier_alpha_scale=3.0)
    assert not np.allclose(default.outliers(X), scaled.outliers(X))


@pytest.mark.parametrize("constraint", ["l2ball", "nonneg", "simplex"])
@pytest.mark.parametrize("name, value", [("gamma1", 0.5), ("gamma2", 1.0)])
def test_elastic_net_weights_without_that_set_are_refused_naming_both(X, constraint, name,
                                                                        value):
    _refused(_online(X, constraint=constraint), X, {name: value},
             rf"{name}={value} with constraint='{constraint}'")


@pytest.mark.parametrize("name", ["gamma1", "gamma2"])
def test_each_elastic_net_weight_moves_the_elastic_net_result(X, name):
    base = dict(constraint="elasticnet", gamma1=0.2, gamma2=1.0)
    default = _online(X, **base)
    other = _online(X, **{**base, name: 2 * base[name]})
    assert not np.allclose(default.components_, other.components_)


@pytest.mark.parametrize("solver", ["pgd", "admm"])
@pytest.mark.parametrize("params", [dict(dict_passes=1), dict(dict_tol=0.1)])
def test_dict_passes_and_dict_tol_move_both_dictionary_steps(X, solver, params):
    default = _online(X, solver=solver)
    other = _online(X, solver=solver, **params)
    assert not np.allclose(default.components_, other.components_)


def test_solver_params_round_trip_checkpoints_and_the_command_line(X, tmp_path):
    """A checkpoint keeps ``solver_params`` and resumes with it; ``--param`` reads it as a
    dict literal."""
    from tensorstream import load
    from tensorstream.cli import main

    params = dict(solver="pgd", solver_params={"kappa": 0.5, "accelerated": True})
    straight = RobustOnlineNMF(3, batch_size=10, random_state=0, **params)
    interrupted = RobustOnlineNMF(3, batch_size=10, random_state=0, **params)
    for start in range(0, 40, 10):
        straight.partial_fit(X[start:start + 10])
        if start < 20:
            interrupted.partial_fit(X[start:start + 10])
    resumed = load(interrupted.save(tmp_path / "robust.npz"))
    assert resumed.get_params()["solver_params"] == params["solver_params"]
    for start in (20, 30):
        resumed.partial_fit(X[start:start + 10])
    np.testing.assert_array_equal(resumed.components_, straight.components_)

    np.save(tmp_path / "x.npy", X)
    checkpoint = tmp_path / "run.npz"
    assert main(["fit", str(tmp_path / "x.npy"), "--model", "robust-nmf", "--n-components",
                 "3", "--batch-size", "10", "--steps", "2", "--quiet", "--param", "solver=pgd",
                 "--param", "solver_params={'kappa': 0.5}", "--checkpoint", str(checkpoint),
                 "--out", str(tmp_path / "f.nc")]) == 0
    assert load(checkpoint).get_params()["solver_params"] == {"kappa": 0.5}


@pytest.mark.parametrize("make, name, value", [
    (_online, "outlier_bound", 0.05), (_online, "outlier_l2", 0.1),
    (_online, "nonnegative_outliers", True), (_online, "outlier_init", "uniform"),
    (_batch, "outlier_bound", 0.05)])
def test_outlier_settings_without_outliers_are_refused_naming_both(X, make, name, value):
    """``outlier_alpha=inf`` has no outlier part: what only it reads is refused there (the box
    at inf is no box, as None), and each one moves the result with outliers."""
    _refused(make(X), X, {"outlier_alpha": float("inf"), name: value},
             rf"{name}={value!r} with outlier_alpha=inf")
    make(X, outlier_alpha=float("inf"), outlier_bound=float("inf"))
    with_outliers = dict(outlier_alpha=0.05)
    assert not np.allclose(make(X, **with_outliers).outliers(X),
                           make(X, **with_outliers, **{name: value}).outliers(X))


def test_group_size_without_the_group_lasso_is_refused_naming_both(X):
    _refused(_online(X), X, {"group_size": 2}, r"group_size=2 with group_alpha=0")
    grouped = dict(group_alpha=0.05)
    assert not np.allclose(_online(X, **grouped).transform(X),
                           _online(X, **grouped, group_size=3).transform(X))


@pytest.mark.parametrize("name", ["RobustOnlineNMF", "RobustNMF"])
def test_the_papers_settings_without_outliers_are_taken(name):
    """``{**paper_params, "outlier_alpha": inf}`` (the paper's settings, plain NMF with these
    solvers) was refused on the paper's own box and start: a rule refuses only what is set by
    hand, neither the default nor the paper's value."""
    import math

    import tensorstream

    cls = getattr(tensorstream, name)
    X = np.random.default_rng(0).random((40, 10))
    model = cls(3, **{**cls.paper_params, "outlier_alpha": math.inf}, random_state=0).fit(X)
    assert np.all(np.asarray(model.outliers(X)) == 0)


def test_solver_settings_refuse_an_unknown_solver_and_a_non_dict_by_name():
    """Called directly (the learners' constraints refuse these first): a clear error naming
    the argument, not a KeyError."""
    from tensorstream.algorithms.robust_nmf import solver_settings

    with pytest.raises(ValueError, match=r"solver must be one of \['pgd', 'admm'\], got 'sgd'"):
        solver_settings("sgd", None)
    with pytest.raises(TypeError, match="solver_params must be a dict or None"):
        solver_settings("pgd", [("kappa", 0.5)])
    with pytest.raises(ValueError, match="does not apply to solver='pgd' of the RobustNMF"):
        solver_settings("pgd", {"accelerated": True}, {"pgd": {"kappa": 0.7}}, "RobustNMF")
