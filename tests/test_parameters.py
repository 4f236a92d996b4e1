"""Parameters are declared as data: every parameter of every learner has its constraints, and
bad values (NaN, a bool flag set to 'bogus', out of range) are refused before anything changes."""

import inspect

import numpy as np
import pytest

from tensorstream.core.validation import Interval, validate_params
from tensorstream.learners.registry import learner_class, registered

CLASSES = sorted({learner_class(entry.class_name) for entry in registered()},
                 key=lambda cls: cls.__name__)


def _parameters(cls):
    return [p.name for p in inspect.signature(cls.__init__).parameters.values()
            if p.name != "self"]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_every_parameter_has_constraints(cls):
    assert set(_parameters(cls)) <= set(cls._parameter_constraints)  # shared ones may be extra


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_defaults_satisfy_the_constraints(cls):
    defaults = {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()
                if name != "self"}
    defaults["n_components"] = 2 if defaults.get("n_components") is inspect.Parameter.empty \
        else defaults["n_components"]
    validate_params(defaults, cls._parameter_constraints, cls.__name__)


def _numeric(cls):
    return [(cls, name) for name in _parameters(cls)
            if any(isinstance(c, Interval) for c in cls._parameter_constraints[name])]


@pytest.mark.parametrize("cls, name", [pair for cls in CLASSES for pair in _numeric(cls)],
                         ids=lambda value: getattr(value, "__name__", value))
def test_nan_is_refused_wherever_a_number_is_expected(cls, name):
    model = cls(2) if "n_components" in _parameters(cls) else cls()
    model.set_params(**{name: float("nan")})
    with pytest.raises((ValueError, TypeError), match=name):
        model._check_params()


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_flags_take_booleans_only(cls):
    flags = [name for name in _parameters(cls)
             if any(getattr(c, "description", "") == "True or False"
                    for c in cls._parameter_constraints[name])]
    for name in flags:
        model = cls(2).set_params(**{name: "bogus"})
        with pytest.raises(TypeError, match=name):
            model._check_params()


def test_a_refused_parameter_leaves_a_fitted_learner_as_it_was():
    from tensorstream import OnlineCPDL

    X = np.random.default_rng(0).random((20, 4, 3))
    model = OnlineCPDL(2, batch_size=5, max_iter=1, random_state=0).fit(X)
    state = model.state_
    model.set_params(code_tol=float("nan"))
    with pytest.raises(ValueError, match="code_tol"):
        model.partial_fit(X[:5])
    assert model.state_ is state


def test_the_code_box_must_not_be_empty():
    from tensorstream import OnlineDivergenceNMF

    with pytest.raises(ValueError, match="code_lower must be < code_upper"):
        OnlineDivergenceNMF(2, code_lower=1.0, code_upper=0.5).fit(np.ones((4, 3)))


@pytest.mark.parametrize("text", ["not json", "[1, 2]", "3"])
def test_mapping_text_that_is_not_a_json_object_is_refused_naming_the_parameter(text):
    from tensorstream.core.validation import json_mapping

    assert json_mapping('{"beta": 1.5}', "loss_params") == {"beta": 1.5}
    assert json_mapping(None, "loss_params") is None
    with pytest.raises(ValueError, match="loss_params must be a dict or the JSON text"):
        json_mapping(text, "loss_params")


@pytest.mark.parametrize("n_samples, batch_size, passes", [
    (1437, 1024, 100),   # scikit-learn's training digits: 2 batches a pass
    (150, 1024, 200),    # one batch a pass: capped at 200 passes
    (60, 32, 100), (640, 32, 10), (20 * 1024, 1024, 10), (10**6, 1024, 10),
    (19 * 32 + 1, 32, 10), (19 * 32, 32, 11),
])
def test_auto_passes_give_small_arrays_at_least_200_steps(n_samples, batch_size, passes):
    from tensorstream.learners._fitting import fit_passes

    assert fit_passes("auto", n_samples, batch_size) == passes
    steps = passes * -(-n_samples // batch_size)
    assert passes == 200 or steps >= 200 or passes == 10
    assert fit_passes(7, n_samples, batch_size) == 7  # a number is the number of passes


@pytest.mark.parametrize("name", ["OnlineNMF", "OnlineCPDL", "OnlineDivergenceNMF"])
def test_fit_with_auto_passes_takes_the_rules_steps(name):
    cls = learner_class(name)
    assert inspect.signature(cls.__init__).parameters["max_iter"].default == "auto"
    X = np.random.default_rng(0).random((45, 6)) + 0.1
    small = cls(2, batch_size=20, random_state=0).fit(X)  # 3 batches a pass: 67 passes
    assert small.n_steps_ == 67 * 3 and small.n_samples_seen_ == 67 * 45
    counted = cls(2, batch_size=20, max_iter=2, random_state=0).fit(X)
    assert counted.n_steps_ == 6
    with pytest.raises(ValueError, match="max_iter"):
        cls(2, max_iter="many").fit(X)


def test_only_learners_whose_fit_counts_passes_accept_auto_max_iter():
    """``max_iter="auto"`` is a number of passes (``fit_passes``); a batch learner's
    ``max_iter`` counts iterations, so there ``"auto"`` is refused by name, not met later by
    an arithmetic TypeError."""
    from tensorstream.learners._base import OnlineLearner

    for cls in CLASSES:
        if "max_iter" not in _parameters(cls):
            continue
        constraints = {"max_iter": cls._parameter_constraints["max_iter"]}
        if issubclass(cls, OnlineLearner):
            validate_params({"max_iter": "auto"}, constraints, cls.__name__)
        else:
            with pytest.raises((TypeError, ValueError), match="max_iter"):
                validate_params({"max_iter": "auto"}, constraints, cls.__name__)
    X = np.random.default_rng(0).random((20, 8))
    with pytest.raises((TypeError, ValueError), match="max_iter"):
        learner_class("RobustNMF")(2, max_iter="auto").fit(X)


@pytest.mark.parametrize("name", ["OnlineNMF", "OnlineCPDL", "RobustOnlineNMF"])
def test_a_bad_parameter_set_after_fit_is_named_by_transform_and_score(name):
    """``transform`` and ``score`` check the parameters (the shared coding step does), so a
    bad value set after ``fit`` is named, not reported by the coder; the fit is kept."""
    X = np.random.default_rng(1).random((40, 6)) + 0.1
    model = learner_class(name)(2, batch_size=20, max_iter=1, random_state=0).fit(X)
    before, tol = np.asarray(model.transform(X[:3])), model.code_tol
    model.set_params(code_tol=-1.0)
    for method in (model.transform, model.score):
        with pytest.raises(ValueError, match="code_tol"):
            method(X[:3])
    np.testing.assert_array_equal(np.asarray(model.set_params(code_tol=tol).transform(X[:3])),
                                  before)


@pytest.mark.parametrize("bad", [0, -3, 2.5, "many", None])
def test_fit_passes_names_max_iter_for_a_bad_value(bad):
    from tensorstream.learners._fitting import fit_passes

    with pytest.raises((TypeError, ValueError), match="max_iter"):
        fit_passes(bad, 100, 10)


def test_parameters_are_checked_once_while_unchanged_and_again_when_set():
    """A loop of ``partial_fit`` calls validates the parameters once (they are compared by
    identity to those validated last); any value set since, by ``set_params``, by assignment
    or inside a list, is validated again."""
    X = np.random.default_rng(2).random((20, 5))
    model = learner_class("OnlineNMF")(2, batch_size=10, random_state=0).partial_fit(X)
    calls = []
    model._check_rules = lambda: calls.append(1)  # counts the full validations
    model.partial_fit(X).partial_fit(X)
    assert calls == []
    model.set_params(alpha_W=-1.0)
    with pytest.raises(ValueError, match="alpha_W"):
        model.partial_fit(X)
    model.alpha_W = 0.0  # back to the values validated last: nothing to check
    model.partial_fit(X)
    assert calls == []
    model.alpha_W = 1e-3
    model.partial_fit(X)
    assert len(calls) == 1
    model.init = [np.ones((5, 2))]
    model.partial_fit(X)
    model.init[0] = "not an array"  # the same list, another item: validated again
    model.partial_fit(X)
    assert len(calls) == 3


def test_parameter_values_compare_numbers_by_value_and_objects_by_identity():
    from tensorstream.learners._params import _ParameterValues

    array = np.zeros(3)
    assert _ParameterValues({"a": 1.0, "b": "x", "c": array, "d": [array]}) == \
        _ParameterValues({"a": float("1.0"), "b": "x", "c": array, "d": [array]})
    assert _ParameterValues({"c": array}) != _ParameterValues({"c": array.copy()})
    assert _ParameterValues({"a": 1}) != _ParameterValues({"a": True})  # bool is another type
    assert _ParameterValues({"d": [array]}) != _ParameterValues({"d": [array, array]})
    assert _ParameterValues({"a": 1}) != _ParameterValues({"b": 1})


def test_an_unhashable_learner_subclass_is_validated_every_time():
    """A subclass that defines ``__eq__`` (so instances are unhashable) cannot be recorded in
    the weak map of validated parameters: its parameters are checked at every call."""
    base = learner_class("OnlineNMF")

    class Comparable(base):
        def __eq__(self, other):
            return self is other

    X = np.random.default_rng(3).random((20, 5))
    model = Comparable(2, batch_size=10, random_state=0).partial_fit(X)
    model.alpha_W = -1.0
    with pytest.raises(ValueError, match="alpha_W"):
        model.partial_fit(X)


def test_integers_beyond_int64_are_refused_by_name():
    """``n_components=10**400`` is refused naming it (``float(value)`` raised OverflowError)."""
    X = np.random.default_rng(0).random((10, 3, 3))
    with pytest.raises(ValueError, match="n_components"):
        learner_class("OnlineCPDL")(n_components=10**400).fit(X)
    assert learner_class("OnlineCPDL")(np.int64(2), random_state=0).fit(X).n_components == 2


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_set_params_with_an_unknown_name_sets_nothing(cls):
    """The unknown name is refused before any name is set: a valid name listed before it
    keeps its value."""
    learner = cls(2)
    before = learner.get_params()
    with pytest.raises(ValueError, match="invalid parameter 'not_a_parameter'"):
        learner.set_params(n_components=5, not_a_parameter=1)
    assert learner.get_params() == before
