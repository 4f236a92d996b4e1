"""Every public method of every learner shows its real arguments, each documented.

``help(OnlineCPDL.fit)`` and the API pages are generated from the signature and the numpydoc
``Parameters`` section: a ``**kwargs`` there hides the arguments (``sample_dim``, ``modes``,
``n_steps``, ``client``, ``mask``), and an argument missing from the section has no meaning
anywhere a user looks.
"""

import inspect

import pytest

import tensorstream

docscrape = pytest.importorskip("numpydoc.docscrape")

CLASSES = [getattr(tensorstream, name) for name in tensorstream.__all__
           if inspect.isclass(getattr(tensorstream, name))
           and not issubclass(getattr(tensorstream, name), BaseException | Warning)]


def public_methods(cls):
    for name, member in inspect.getmembers(cls):
        if name.startswith("_") or not callable(member) or inspect.isclass(member):
            continue
        if isinstance(inspect.getattr_static(cls, name), property):
            continue
        yield name, member


def documented_names(member):
    names = set()
    for section in ("Parameters", "Other Parameters"):
        for parameter in docscrape.FunctionDoc(member)[section]:
            names.update(part.strip().lstrip("*") for part in parameter.name.split(","))
    return names


CASES = [(cls, name) for cls in CLASSES for name, _ in public_methods(cls)]


@pytest.mark.parametrize("cls, name", CASES, ids=[f"{c.__name__}.{n}" for c, n in CASES])
def test_every_argument_is_in_the_signature_and_documented(cls, name):
    member = getattr(cls, name)
    signature = inspect.signature(member)
    # set_params(**params) is scikit-learn's own signature: its names are __init__'s, each
    # documented in the class's Parameters section
    hidden = [p.name for p in signature.parameters.values()
              if p.kind is p.VAR_KEYWORD and name != "set_params"]
    assert not hidden, f"{cls.__name__}.{name} hides its arguments behind **{hidden[0]}"
    arguments = [p for p in signature.parameters if p not in ("self", "cls")]
    missing = [p for p in arguments if p not in documented_names(member)]
    assert not missing, f"{cls.__name__}.{name}: {missing} not in its Parameters section"


def test_a_method_with_an_undescribed_argument_is_an_error_at_import():
    from tensorstream.learners._fitting import OnlineEstimator

    with pytest.raises(TypeError, match=r"Made.frobnicate: argument 'knob' has no description"):
        class Made(OnlineEstimator):
            __module__ = "tensorstream.learners.made"  # the rule holds in the package only

            def frobnicate(self, knob):
                """Turn the knob."""

    class Users(OnlineEstimator):  # a user's subclass documents as its author likes
        def frobnicate(self, knob):
            """Turn the knob."""


def test_fit_passes_its_arguments_on(tmp_path):
    """The real signatures forward what they take (no argument dropped on the way)."""
    import numpy as np
    import xarray as xr

    from tensorstream import OnlineNMF, RobustOnlineNMF

    da = xr.DataArray(np.random.default_rng(0).random((20, 3, 2)), dims=("t", "a", "b"))
    model = OnlineNMF(2, batch_size=5, max_iter=1, random_state=0)
    model.fit(da, sample_dim="t", modes=[("a", "b")], n_steps=2)
    assert model.n_steps_ == 2 and model.n_features_in_ == 6
    robust = RobustOnlineNMF(2, random_state=0).partial_fit(da, sample_dim="t",
                                                            modes=[("a", "b")])
    assert robust.n_features_in_ == 6
