"""OnlineDivergenceNMF's defaults on real data, and the beta-divergences' MU dictionary step."""

import numpy as np
import pytest

from tensorstream import OnlineDivergenceNMF
from tensorstream.algorithms.divergence_cp import beta_mu_step
from tensorstream.coders.divergence import code_divergence_matrix
from tensorstream.core.dictionary import outer_statistic, reconstruct
from tensorstream.losses import get_loss
from tensorstream.steps.gradient import batch_gradient, mu_preconditioned_step


def _heldout_is(components, X):
    """Mean IS divergence per entry of ``X`` at codes refitted by long IS multiplicative
    updates (the same evaluator for every method: MU is invariant to the dictionary's scale)."""
    W = np.asarray(components).T
    H, _ = code_divergence_matrix(X, W, "is", step="mu", max_iter=1000, tol=1e-10)
    return float(np.mean(get_loss("is").elementwise(X, H @ W.T)))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_is_defaults_come_close_to_minibatchnmf_on_digits():
    """Itakura-Saito on real counts (the digits + 1, so that IS is defined). Before the
    multiplicative defaults for IS (the paper's SGD dictionary step, Armijo codes) the held-out
    IS was twice MiniBatchNMF's (0.195 against 0.098 per entry); now it is below it (0.069)."""
    from sklearn.datasets import load_digits
    from sklearn.decomposition import MiniBatchNMF

    X = load_digits().data[:800] + 1.0
    train, test = X[:500], X[500:]
    ours = OnlineDivergenceNMF(16, loss="is", random_state=0).fit(train)
    peer = MiniBatchNMF(16, beta_loss="itakura-saito", random_state=0).fit(train)
    ours_is, peer_is = _heldout_is(ours.components_, test), _heldout_is(peer.components_, test)
    assert ours_is <= 1.1 * peer_is, (ours_is, peer_is)
    # score is minus the mean divergence per sample at the learner's own refitted codes
    assert -ours.score(test) == pytest.approx(ours_is * X.shape[1], rel=1e-3)


def _batch(beta, shape, R=3, seed=0):
    rng = np.random.default_rng(seed)
    loadings = [rng.uniform(0.1, 1.0, (size, R)) for size in shape]
    H = rng.uniform(0.5, 2.0, (6, R))
    X = rng.gamma(2.0, 1.0, (6, *shape))
    loss = get_loss(beta)
    model = reconstruct(loadings, H)
    return loss, loadings, H, X, batch_gradient(X, H, loadings, loss, model), model


@pytest.mark.parametrize("beta", [0.0, 0.5, 1.5, 3.0])
def test_beta_mu_step_at_eta_one_is_the_multiplicative_update(beta):
    """``eta = 1`` is Févotte & Idier's update ``W * (sum v y^(b-2) h) / (sum y^(b-1) h)``."""
    loss, [W], H, X, B, Y = _batch(beta, (5,))
    positive = outer_statistic(Y ** (beta - 1), H)
    [stepped] = beta_mu_step(B, positive, [W], 1.0, lambda U: U)
    expected = W * ((X * Y ** (beta - 2)).T @ H) / ((Y ** (beta - 1)).T @ H)
    np.testing.assert_allclose(stepped, expected, rtol=1e-12)
    # a partial step moves each entry part of the way, in proportion to its size
    [half] = beta_mu_step(B, positive, [W], 0.5, lambda U: U)
    np.testing.assert_allclose(half, (W + expected) / 2, rtol=1e-12)


def test_beta_mu_step_for_kl_is_the_code_sums_step_on_tensors():
    """At ``beta = 1`` the positive part is the code sums times the other loadings' column
    sums: the KL step (``mu_preconditioned_step``), for a CP dictionary too."""
    loss, loadings, H, X, B, Y = _batch(1.0, (4, 3))
    positive = outer_statistic(np.ones_like(Y), H)
    ours = beta_mu_step(B, positive, loadings, 0.7, lambda U: U)
    kl = mu_preconditioned_step(B, H.sum(axis=0), loadings, 0.7, lambda U: U)
    for U, V in zip(ours, kl):
        np.testing.assert_allclose(U, V, rtol=1e-12)


@pytest.mark.parametrize("loss", ["is", 0.5, 3.0])
def test_beta_defaults_learn_tensor_samples_feasibly(loss):
    """The MU step with the beta's own denominator on CP loadings: feasible, finite, and the
    held-out objective drops below the first batch's."""
    rng = np.random.default_rng(1)
    A, B = rng.gamma(1.0, 1.0, (6, 2)), rng.gamma(1.0, 1.0, (5, 2))
    X = np.einsum("nr,ir,jr->nij", rng.gamma(1.0, 1.0, (300, 2)), A, B)
    X = X * rng.gamma(20.0, 1 / 20.0, X.shape)  # multiplicative (IS) noise
    model = OnlineDivergenceNMF(2, loss=loss, batch_size=50, random_state=0)
    first = -model.partial_fit(X[:50]).score(X[250:])
    model.fit(X[:250])
    for U in model.loadings_:
        assert np.all(np.isfinite(U)) and U.min() >= 0 and U.max() <= model.dict_upper
    assert -model.score(X[250:]) < first


@pytest.mark.parametrize("beta", [0.5, 1.5, 3.0])
def test_beta_mu_step_on_cp_loadings_with_zeros_is_the_multiplicative_update(beta):
    """A CP dictionary (two loadings) and data with zero entries: each loading's ``eta = 1``
    step is its β multiplicative update, the other loading and the codes held."""
    loss, loadings, H, X, B, Y = _batch(beta, (4, 3))
    X = X * (np.random.default_rng(1).random(X.shape) < 0.7)  # ~30% zeros
    B = batch_gradient(X, H, loadings, loss, Y)
    positive = outer_statistic(Y ** (beta - 1), H)
    stepped = beta_mu_step(B, positive, loadings, 1.0, lambda U: U)
    A, C = loadings
    numerator, denominator = X * Y ** (beta - 2), Y ** (beta - 1)
    expected = [A * np.einsum("nik,kr,nr->ir", numerator, C, H)
                / np.einsum("nik,kr,nr->ir", denominator, C, H),
                C * np.einsum("nik,ir,nr->kr", numerator, A, H)
                / np.einsum("nik,ir,nr->kr", denominator, A, H)]
    for U, V in zip(stepped, expected):
        np.testing.assert_allclose(U, V, rtol=1e-10)


def test_auto_steps_are_multiplicative_for_the_beta_divergences_but_squared_l2():
    """The dictionary's and the coder's "auto" decide by the same names: the β-divergences
    but β = 2, however the loss is written (a name, a β value, a BetaDivergence object)."""
    from tensorstream.losses import BetaDivergence

    def dict_step(loss):
        return OnlineDivergenceNMF(2, loss=loss)._algorithm().dict_step()

    for loss in ("kl", "is", 0.5, 3.0, BetaDivergence(1.5), BetaDivergence(0.0)):
        assert dict_step(loss) == "mu", loss
    for loss in ("l2", 2.0, BetaDivergence(2.0), "hellinger", "l1"):
        assert dict_step(loss) == "sgd", loss


def test_the_multiplicative_dictionary_step_of_squared_l2_is_the_same_however_written():
    """β = 2 has a multiplicative update too (Lee & Seung's): ``loss=2.0`` (SquaredL2) and a
    ``BetaDivergence(2.0)`` object take the same step and learn the same dictionary."""
    from tensorstream.losses import BetaDivergence

    X = np.random.default_rng(0).random((40, 6)) + 0.5
    learned = [OnlineDivergenceNMF(2, loss=loss, dict_step="mu", batch_size=10,
                                   random_state=0).fit(X).components_
               for loss in (2.0, BetaDivergence(2.0))]
    np.testing.assert_allclose(learned[0], learned[1], rtol=1e-6)


@pytest.mark.parametrize("loss", ["hellinger", "l1"])
def test_the_multiplicative_dictionary_step_is_refused_for_other_losses(loss):
    """``dict_step="mu"`` is a β-divergence's update: another loss would get KL's scaling
    silently. Refused by name, the learner untouched."""
    X = np.random.default_rng(0).random((20, 5)) + 0.5
    model = OnlineDivergenceNMF(2, loss=loss, dict_step="mu", random_state=0)
    with pytest.raises(ValueError, match="dict_step='mu'"):
        model.fit(X)
    assert not hasattr(model, "components_")
