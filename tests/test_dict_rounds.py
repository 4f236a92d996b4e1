"""Several alternating rounds per batch (``dict_rounds``) of the divergence learners' MU step.

A step with ``R`` rounds moves the batch's own dictionary ``R`` times by the multiplicative
update, the batch's codes once between two of them, and mixes the result in with the step size:
``W <- P((1 - eta) W + eta W_batch)``. Checked against an explicit numpy alternation; each round
lowers the batch's objective; one round is the single MU step; what a step reports is measured
before it learns; ``"auto"`` makes 4 rounds per nonzero of the batch per entry of a matrix
dictionary (1 to 20), 1 on tensors;
more rounds fit dense Poisson data better in the same passes; bad values are refused by name.
A resumed checkpoint continues as the uninterrupted run; a sparse batch with stored zeros
takes the rounds of the same dense batch. (The cluster, sparse input and torch run the default,
several rounds, in ``test_distributed.py``, ``test_divergence_sparse.py`` and
``test_divergence_nmf.py``.)
"""

import numpy as np
import pytest
import scipy.sparse as sp
from state_helpers import state_of

import tensorstream
from tensorstream import OnlineDivergenceNMF
from tensorstream.algorithms.divergence_cp import auto_rounds

#: the coding step of ``transform`` set to the training step's, so that ``_coded`` gives the
#: codes the next ``partial_fit`` starts from
TRAINING_CODES = {"transform_tol": 1e-4, "transform_max_iter": 100}
#: ``eta_t = step_a`` at every step, data at their own scale, a box that never binds
FIXED_STEP = {"normalize": False, "step_b": 1.0, "step_tau": 0.0, "dict_upper": 1e9}


def _counts(shape, seed=0):
    return np.random.default_rng(seed).poisson(3.0, shape).astype(float) + 0.5


def _mu_dictionary(V, W, H):
    """One KL multiplicative update of the dictionary ``W`` (features x R) at codes ``H``."""
    return W * ((V / (H @ W.T)).T @ H) / H.sum(axis=0)


def _mu_codes(V, W, H, lower, upper):
    """One KL multiplicative update of the codes, clipped to the coder's box."""
    return np.clip(H * ((V / (H @ W.T)) @ W) / W.sum(axis=0), lower, upper)


@pytest.mark.parametrize("eta", [1.0, 0.4])
@pytest.mark.parametrize("rounds", [2, 3, 5])
def test_a_step_is_the_explicit_alternation_mixed_in_with_the_step_size(rounds, eta):
    X = _counts((20, 8))
    model = OnlineDivergenceNMF(3, dict_rounds=rounds, step_a=eta, random_state=0,
                                **FIXED_STEP, **TRAINING_CODES)
    model.partial_fit(X[:10])
    U = np.array(model.loadings_[0])
    H = np.asarray(model._coded(X[10:], None).codes)
    model.partial_fit(X[10:])
    W = U
    for _ in range(rounds - 1):
        W = _mu_dictionary(X[10:], W, H)
        H = _mu_codes(X[10:], W, H, model.code_lower, model.code_upper)
    expected = (1 - eta) * U + eta * _mu_dictionary(X[10:], W, H)
    np.testing.assert_allclose(model.loadings_[0], expected, rtol=1e-10, atol=1e-14)


def test_every_round_lowers_the_batch_objective():
    X = _counts((60, 12), seed=1)
    model = OnlineDivergenceNMF(3, dict_rounds=1, random_state=0, **FIXED_STEP,
                                step_a=1.0).partial_fit(X[:30])
    algorithm, state, batch = model._algorithm(), model.state_, X[30:]
    coded = algorithm.encode(batch, state.loadings, state.scale)
    sums = algorithm.batch_sums(batch, coded, None, state.loadings, state.scale)

    def objective(loadings, codes):
        model_values = codes @ np.asarray(loadings[0]).T
        return float(np.sum(algorithm.loss.per_sample(batch, model_values)))

    at, values = state.loadings, [objective(state.loadings, coded.codes)]
    for _ in range(8):
        at = algorithm.round_dictionary(sums, at)
        values.append(objective(at, coded.codes))  # the dictionary's move, at fixed codes
        coded, fresh = algorithm.recode(batch, coded, at, state.scale)
        values.append(objective(at, coded.codes))  # the codes' move, at fixed dictionary
        sums = {**sums, **fresh}
    assert all(later <= earlier * (1 + 1e-12) for earlier, later in zip(values, values[1:]))
    assert values[-1] < 0.97 * values[0]


def test_one_round_is_the_single_multiplicative_step():
    X = _counts((20, 8))
    model = OnlineDivergenceNMF(3, dict_rounds=1, step_a=1.0, random_state=0, **FIXED_STEP,
                                **TRAINING_CODES)
    model.partial_fit(X[:10])
    U = np.array(model.loadings_[0])
    H = np.asarray(model._coded(X[10:], None).codes)
    model.partial_fit(X[10:])
    np.testing.assert_allclose(model.loadings_[0], _mu_dictionary(X[10:], U, H), rtol=1e-12)


def test_a_step_reports_the_loss_of_its_first_codes():
    X = _counts((40, 8))
    model = OnlineDivergenceNMF(3, dict_rounds=4, random_state=0).partial_fit(X[:20])
    algorithm, state = model._algorithm().at_state(model.state_), model.state_
    first = algorithm.encode(X[20:], state.loadings, state.scale)  # before anything is learned
    model.partial_fit(X[20:])
    assert model._last_info["batch_loss"] == pytest.approx(float(np.sum(first.losses)) / 20,
                                                           rel=1e-12)
    later = algorithm.recode(X[20:], first, state.loadings, state.scale)[0]
    later_loss = np.sum(algorithm.loss.at_scale(state.scale).per_sample(
        X[20:], np.asarray(later.codes) @ np.asarray(state.loadings[0]).T)) / 20
    assert model._last_info["batch_loss"] != pytest.approx(later_loss, rel=1e-9)


def _fits(X, cls=OnlineDivergenceNMF, **options):
    return cls(3, batch_size=20, max_iter=2, random_state=0, **options).fit(X)


def _assert_same_loadings(a, b):
    for U, V in zip(a.loadings_, b.loadings_):
        np.testing.assert_array_equal(U, V)


@pytest.mark.parametrize("nonzeros, entries, error", [
    (-1, 10, ValueError), (5, 0, ValueError), (5, -3, ValueError), (5, 2.5, ValueError),
    ("many", 10, TypeError), (float("nan"), 10, TypeError)])
def test_auto_rounds_refuses_bad_counts_by_name(nonzeros, entries, error):
    name = "nonzeros" if error is TypeError or nonzeros == -1 else "entries"
    with pytest.raises(error, match=name):
        auto_rounds(nonzeros, entries)


def test_auto_makes_four_rounds_per_nonzero_per_dictionary_entry_up_to_twenty():
    assert [auto_rounds(n, 100) for n in (0, 24, 25, 50, 99, 100, 101, 499, 500, 10**9)] == \
        [1, 1, 1, 2, 3, 4, 4, 19, 20, 20]
    X = _counts((60, 8))[:, :6]  # 120 nonzeros per batch of 20, 18 dictionary entries: 20
    auto = _fits(X)
    _assert_same_loadings(auto, _fits(X, dict_rounds=20))
    assert not np.allclose(auto.components_, _fits(X, dict_rounds=19).components_)
    Y = _documents(60, 30, words=3)  # 60 nonzeros per batch of 20, 90 entries: 2 rounds
    _assert_same_loadings(_fits(Y), _fits(Y, dict_rounds=2))


def _documents(n, n_words, words, seed=0):
    """``n`` documents of exactly ``words`` distinct words each (counts 1-4)."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, n_words))
    for row in X:
        row[rng.choice(n_words, words, replace=False)] = rng.integers(1, 5, words)
    return X


def test_auto_makes_one_round_on_sparse_batches_and_tensors():
    X = _documents(60, 30, words=1)  # 20 nonzeros per batch of 20, 90 entries: 1 round
    _assert_same_loadings(_fits(X), _fits(X, dict_rounds=1))
    assert not np.allclose(_fits(X).components_, _fits(X, dict_rounds=3).components_)
    _assert_same_loadings(_fits(sp.csr_matrix(X)), _fits(sp.csr_matrix(X), dict_rounds=1))
    T = _counts((60, 4, 3))
    _assert_same_loadings(_fits(T), _fits(T, dict_rounds=1))


def test_rounds_on_a_tensor_dictionary_keep_it_feasible_and_lower_the_objective():
    T = _counts((80, 5, 4), seed=2)
    model = OnlineDivergenceNMF(2, batch_size=20, max_iter=3, dict_rounds=4, random_state=0)
    model.fit(T)
    for U in model.loadings_:
        U = np.asarray(U)
        assert np.all(U >= 0) and np.all(U <= model.dict_upper)
        assert np.all(U.sum(axis=0) > 0)
    start = OnlineDivergenceNMF(2, loss="kl", batch_size=20, max_iter=1, dict_rounds=4,
                                random_state=0).partial_fit(T[:20])
    assert model.score(T) > start.score(T)


def _shifted_half_normal_counts(n, features, rank, seed):
    """Dense Poisson counts of shifted half-normal factors (Zhao, Tan & Xu's KL data): a
    slow start for every multiplicative method."""
    rng = np.random.default_rng(seed)
    W = 1 + np.abs(rng.normal(0, 5, (rank, features)))
    H = 1 + np.abs(rng.normal(0, 5, (n, rank)))
    mean = H @ W
    return rng.poisson(10 * mean / mean.mean()).astype(float)


def test_more_rounds_fit_dense_poisson_data_better_in_the_same_passes():
    X = _shifted_half_normal_counts(1200, 40, 4, seed=0)
    train, test = X[:1000], X[1000:]
    scores = {}
    for rounds in (1, 20):
        model = OnlineDivergenceNMF(4, batch_size=100, max_iter=2, dict_rounds=rounds,
                                    random_state=0).fit(train)
        scores[rounds] = -model.score(test)
    assert scores[20] < scores[1] - 0.02 * abs(scores[1])


@pytest.mark.parametrize("value", [0, -1, 2.5, "many", None])
def test_a_bad_number_of_rounds_is_refused_by_name(value):
    with pytest.raises((ValueError, TypeError), match="dict_rounds"):
        OnlineDivergenceNMF(2, dict_rounds=value).fit(_counts((20, 5)))


def test_rounds_need_the_multiplicative_step():
    X = _counts((20, 5))
    with pytest.raises(ValueError, match="dict_rounds=2 needs the multiplicative"):
        OnlineDivergenceNMF(2, loss="huber", loss_params={"threshold": 1.0},
                            dict_rounds=2).fit(X)
    with pytest.raises(ValueError, match="dict_rounds=2 needs the multiplicative"):
        OnlineDivergenceNMF(2, dict_step="sgd", dict_rounds=2).fit(X)
    # "auto" and 1 are one round there
    OnlineDivergenceNMF(2, loss="huber", loss_params={"threshold": 1.0}, max_iter=1,
                        random_state=0).fit(X)
    OnlineDivergenceNMF(2, dict_step="sgd", dict_rounds=1, max_iter=1, random_state=0).fit(X)


def test_a_refused_batch_in_a_rounds_step_changes_nothing():
    X = _counts((40, 8))
    model = OnlineDivergenceNMF(3, dict_rounds=4, random_state=0).partial_fit(X[:20])
    before = state_of(model)
    bad = X[20:].copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="X"):
        model.partial_fit(bad)
    assert state_of(model) == before


@pytest.mark.parametrize("rounds", [4, "auto"])
def test_a_resumed_checkpoint_continues_the_rounds_as_the_uninterrupted_run(tmp_path, rounds):
    X = _counts((80, 9))
    straight = OnlineDivergenceNMF(3, batch_size=20, dict_rounds=rounds, random_state=0)
    for start in range(0, 80, 20):
        straight.partial_fit(X[start:start + 20])
    first = OnlineDivergenceNMF(3, batch_size=20, dict_rounds=rounds, random_state=0)
    for start in range(0, 40, 20):
        first.partial_fit(X[start:start + 20])
    resumed = tensorstream.load(first.save(tmp_path / "rounds.npz"))
    assert resumed.dict_rounds == rounds
    for start in range(40, 80, 20):
        resumed.partial_fit(X[start:start + 20])
    np.testing.assert_array_equal(resumed.components_, straight.components_)


def test_stored_zeros_of_a_sparse_batch_do_not_count_as_nonzeros():
    X = _documents(60, 30, words=4)  # 80 nonzeros per batch of 20, 90 entries: 3 rounds
    stored = sp.csr_matrix(X + 1.0)
    stored.data -= 1.0  # the same matrix, its zeros stored (as thresholding leaves them)
    assert stored.nnz == X.size and np.array_equal(stored.toarray(), X)
    np.testing.assert_allclose(_fits(stored).components_, _fits(X).components_, rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_array_equal(_fits(stored).components_,
                                  _fits(stored, dict_rounds=3).components_)

