"""Issue 14, goal 3: the Python work of one ``partial_fit`` step is bounded.

Counted in Python and C function calls (a deterministic cost measure, unlike a timing): one
step of OnlineNMF and OnlineCPDL at two ranks and two batch sizes, each coder held to a fixed
number of iterations so that only the sizes change between the runs.
"""

import warnings
from functools import partial

import numpy as np
import pytest
import tensorly as tl
from test_coding import _count_calls

from tensorstream import OnlineCPDL, OnlineNMF
from tensorstream.coders.robust import nonnegative_code_admm

RANKS = (3, 12)
BATCHES = (16, 256)
#: calls of one exact column step of the dictionary (``steps.surrogate.column_descent``): a
#: Gauss-Seidel sweep is sequential over the columns, so it is the one part that grows with
#: the rank (about 27 calls per column and loading, measured; 47 before issue 14)
PER_COLUMN = 32
#: calls of one iteration of OnlineNMF's ADMM coder, averaged over iterations 9 to 24 (the
#: stopping test among them at 12, 16, 20 and 24): 18.75 measured on numpy, 17.75 on torch;
#: 37 before the iteration was written in ``z`` alone with a test every 4 iterations
ADMM_PER_ITERATION = 20


def _step_calls(make, sample_shape, R, b):
    """Calls of a second step on a batch of ``b`` samples: the same ``BATCHES[0]`` samples
    repeated, so that every data-dependent branch (a coder's stopping test, a health
    warning) goes the same way at every batch size and only the size differs (on fresh
    random batches those branches made OnlineCPDL's difference 99 calls of the 100 allowed)."""
    rng = np.random.default_rng(R)
    first, second = rng.random((2, BATCHES[0], *sample_shape))
    X = np.concatenate([np.tile(part, (b // BATCHES[0],) + (1,) * len(sample_shape))
                        for part in (first, second)])
    model = make(R)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.partial_fit(X[:b])  # the first step also initialises
        calls, _ = _count_calls(lambda: model.partial_fit(X[b:]))
    return calls


@pytest.mark.parametrize("name, make, sample_shape, n_loadings", [
    ("OnlineNMF", lambda R: OnlineNMF(R, code_max_iter=3, code_tol=1e-300, random_state=0),
     (20,), 1),
    ("OnlineCPDL", lambda R: OnlineCPDL(R, code_max_iter=1, random_state=0,
                                        reinit_dead_atoms=False), (6, 5), 2),
])
def test_calls_per_step_do_not_grow_with_the_batch_and_only_the_sweep_with_the_rank(
        name, make, sample_shape, n_loadings):
    calls = {(R, b): _step_calls(make, sample_shape, R, b) for R in RANKS for b in BATCHES}
    for R in RANKS:  # the batch only enters the batched backend calls (0 calls apart on
        # repeated samples, measured; a loop over the 240 extra samples would add thousands)
        small, large = calls[R, BATCHES[0]], calls[R, BATCHES[1]]
        assert abs(large - small) <= 100, (name, calls)
    for b in BATCHES:  # the rank only enters them too, but for the column sweep
        growth = calls[RANKS[1], b] - calls[RANKS[0], b]
        assert growth <= PER_COLUMN * n_loadings * (RANKS[1] - RANKS[0]), (name, calls)


def test_the_admm_coder_makes_few_calls_per_iteration_whatever_the_rank_and_batch(backend):
    per_iteration = set()
    for R, b in ((3, 16), (12, 256)):
        rng = np.random.default_rng(R)
        W = rng.random((30, R))
        G, P = tl.tensor(W.T @ W), tl.tensor(rng.random((b, 30)) @ W)
        calls = [_count_calls(partial(nonnegative_code_admm, G, P, residual_tol=0.0,
                                      max_iter=n))[0] for n in (8, 24)]  # tol 0: none stops
        per_iteration.add((calls[1] - calls[0]) / 16)
    # a sample whose move is exactly zero may retire (a call or two in 16 iterations, depending
    # on rounding); growth with the rank or the batch would add whole calls per iteration
    assert max(per_iteration) - min(per_iteration) < 0.5, per_iteration
    assert max(per_iteration) <= ADMM_PER_ITERATION, per_iteration


def test_the_accelerated_dictionary_step_makes_as_many_calls_at_any_rank():
    """``dict_step="fista"`` (iterations held fixed): the dictionary step's calls are the same at
    rank 24 as at rank 5, and a whole OnlineCPDL step grows by a few calls per atom only (the
    engine's per-atom health counters), against ~27 per column and loading with the sweep."""
    from test_coding import _count_calls

    from tensorstream.steps.surrogate import surrogate_bcd_step

    def dictionary_step_calls(R):
        rng = np.random.default_rng(R)
        loadings = [rng.random((6, R)), rng.random((5, R))]
        H = rng.random((50, R))
        return _count_calls(lambda: surrogate_bcd_step(
            loadings, H.T @ H / 50, rng.random((6, 5, R)), nonnegative=True, column_bound=1.0,
            method="fista", n_passes=3, tol=0.0))[0]

    assert dictionary_step_calls(24) == dictionary_step_calls(5)

    def make(R):
        return OnlineCPDL(R, code_max_iter=1, random_state=0, reinit_dead_atoms=False,
                          dict_step="fista", dict_passes=3, dict_tol=0.0)

    small, large = (_step_calls(make, (6, 5), R, 16) for R in (5, 24))
    assert large - small <= 8 * (24 - 5), (small, large)


def test_no_learner_writes_into_the_batch_it_is_given():
    """``check_batch`` hands a float64 numpy batch over without a copy, so no method of any
    learner may write into it (with missing entries too: they are zeroed in a copy)."""
    from sklearn.base import clone
    from test_sklearn_compat import LEARNERS

    X = np.random.default_rng(0).random((30, 8)) + 0.1
    X[2, 3] = 0.0
    for learner in LEARNERS:
        data = X.copy()
        model = clone(learner)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(data)
            if hasattr(model, "batch_size"):  # the online learners
                model.partial_fit(data[:10])
            if hasattr(model, "transform"):
                model.transform(data)
        np.testing.assert_array_equal(data, X, err_msg=type(model).__name__)
    masked = X.copy()
    masked[4, 5] = np.nan
    data = masked.copy()
    OnlineNMF(2, batch_size=10, max_iter=1, missing="nan", random_state=0).fit(data)
    np.testing.assert_array_equal(data, masked)
