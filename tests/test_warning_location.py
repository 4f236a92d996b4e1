"""Every warning a user can trigger names the user's line (this file), not the library's.

A fixed ``stacklevel`` pointed inside the package on most call paths (``learners/_base.py``
through the thread-limit wrapper); ``core.caller.warn`` attributes each warning to the first
frame outside the package, whatever the path (fit, partial_fit, a stream, a checkpoint).
"""

import sys
import warnings

import numpy as np
import pytest
from state_helpers import LEARNERS, data, entry_of, make

import tensorstream
from tensorstream import LearningWarning, OnlineCPDL, OnlineDivergenceNMF, VarianceReducedMF
from tensorstream.learners import _fitting


def assert_here(record, category, match):
    """Each warning of ``category`` matching ``match`` was attributed to this file."""
    found = [w for w in record if issubclass(w.category, category) and match in str(w.message)]
    assert found, f"no {category.__name__} matching {match!r}: {[str(w.message) for w in record]}"
    for w in found:
        assert w.filename == __file__, f"{w.message} attributed to {w.filename}:{w.lineno}"


def test_learning_warning_is_exported():
    assert tensorstream.LearningWarning is LearningWarning
    assert issubclass(LearningWarning, UserWarning)
    assert "LearningWarning" in tensorstream.__all__
    assert tensorstream.NotFittedError.__name__ == "NotFittedError"


#: learners whose codes a setting pins at a bound, so that the health check warns
CANNOT_LEARN = [(OnlineCPDL, {"alpha": 5e5}), (OnlineDivergenceNMF, {"ridge": 1e30})]


@pytest.mark.parametrize("cls, params", CANNOT_LEARN, ids=lambda v: getattr(v, "__name__", ""))
@pytest.mark.parametrize("method", ["fit", "partial_fit"])
def test_learning_warning_names_the_callers_line(backend, cls, params, method):
    X = data(backend)
    model = cls(2, **params, batch_size=10, max_iter=1, random_state=0)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        getattr(model, method)(X)
    assert_here(record, LearningWarning, "every code of the batch")


@pytest.mark.parametrize("name", [n for n in LEARNERS if hasattr(entry_of(n).load(), "transform")])
def test_feature_names_warning_names_the_callers_line(name):
    pd = pytest.importorskip("pandas")
    X = data()
    model = make(name).fit(pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])]))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model.transform(X)
    assert_here(record, UserWarning, "X has no feature names")


@pytest.mark.parametrize("name", [n for n in LEARNERS if entry_of(n).streamable])
def test_stream_cap_warning_names_the_callers_line(name, monkeypatch):
    monkeypatch.setattr(_fitting, "STREAM_STEPS", 2)
    X = data()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        make(name).fit(X[i:i + 10] for i in range(0, 30, 10))  # a generator: no length
    assert_here(record, UserWarning, "stopped after 2 mini-batches")


def test_ones_start_warning_names_the_callers_line(backend):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        VarianceReducedMF(2, init="ones", n_epochs=1, random_state=0).fit(data(backend))
    assert_here(record, UserWarning, "init='ones'")


def test_checkpoint_output_warning_names_the_callers_line(tmp_path, monkeypatch):
    pytest.importorskip("pandas")
    path = tmp_path / "run.npz"
    OnlineCPDL(2, max_iter=1, random_state=0).set_output(transform="pandas").fit(
        data()).save(path)
    monkeypatch.setitem(sys.modules, "pandas", None)  # a machine without pandas loads it
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        loaded = tensorstream.load(path)
    assert_here(record, UserWarning, "its learner gives the default output")
    assert isinstance(loaded.transform(data()[:2]), np.ndarray)
