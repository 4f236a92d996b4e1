"""Reliability at the edges of floating point and of resources (issue #35, numeric half):
float32 end to end, data too small or too large for a model's arithmetic, loops that must end
on any data, failed linear algebra, states too large for memory, and inputs that cannot be
computed on (torch meta tensors, closed Dask clients, pandas ``<NA>``). Each test covers every
learner (of its kind) on both backends."""

import inspect
import warnings

import numpy as np
import pytest
from state_helpers import BACKENDS, LEARNERS, entry_of, leaves, make, state_of

from tensorstream import RobustPCA, load
from tensorstream.coders.maxnorm import UNCAPPED_MAX_ITER, robust_code
from tensorstream.learners.registry import registered

ONLINE = [e.name for e in registered("online")]
NO_HANG = pytest.mark.timeout(120, method="thread")


def _on(backend, X):
    if backend == "pytorch":
        import torch

        return torch.tensor(X)
    return X


def _data(dtype=np.float64, n=60, d=8, seed=0):
    return (np.random.default_rng(seed).random((n, d)) + 0.1).astype(dtype)


def _dtypes(model):
    return {str(leaf.dtype).replace("torch.", "") for leaf in leaves(vars(model))
            if str(leaf.dtype).replace("torch.", "").startswith("float")}


def _refused(model, call, match):
    """``call`` raises a ValueError matching ``match`` and leaves ``model`` as it was."""
    before = state_of(model)
    with pytest.raises(ValueError, match=match):
        call()
    assert state_of(model) == before


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # dead atoms and all-zero batches warn, by design
        with np.errstate(all="ignore"):
            yield


# -- float32 end to end ---------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ONLINE)
def test_float32_state_stays_float32_through_dead_atom_reinits_and_reloads(name, backend,
                                                                           tmp_path):
    """Atoms re-initialised from a zero-norm sample were divided by a numpy float64, which
    promoted the whole state to float64: the checkpoint then refused to load (its members
    were float64 under a float32 header)."""
    X = _data(np.float32)
    model = make(name, n_components=3, batch_size=20)
    for i in range(3):
        model.partial_fit(_on(backend, X[20 * i:20 * i + 20]))
    for _ in range(40):
        model.partial_fit(_on(backend, np.zeros((20, 8), np.float32)))
    assert _dtypes(model) == {"float32"}
    model.save(tmp_path / "r.npz")
    loaded = load(tmp_path / "r.npz")
    assert _dtypes(loaded) == {"float32"}
    batch = _on(backend, X[:20])
    model.partial_fit(batch)
    loaded.partial_fit(batch)
    assert state_of(loaded.state_) == state_of(model.state_)


# -- too small ------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ONLINE)
@pytest.mark.parametrize("dtype, scale", [(np.float64, 1e-200), (np.float32, 1e-30)])
def test_data_whose_squares_underflow_are_refused_by_every_online_learner(name, backend,
                                                                          dtype, scale):
    """OnlineCPDL learned what zeros teach from a batch at 1e-200, and OnlineNMF called
    float32 data at 1e-30 "too large"; a fitted learner keeps its state."""
    model = make(name, n_components=3)
    _refused(model, lambda: model.partial_fit(_on(backend, _data(dtype) * dtype(scale))),
             "too small")
    model.partial_fit(_on(backend, _data(dtype)))
    _refused(model, lambda: model.partial_fit(_on(backend, _data(dtype) * dtype(scale))),
             "too small")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ONLINE)
def test_float32_data_just_above_the_limit_are_learned(name, backend):
    """The limit is the dtype's: float32 data at 1e-12 are learned (not as zeros: they are
    explained as well as at unit scale, within a few percent), in float32."""
    X = _data(np.float32)

    def explained(scale):
        model = make(name, n_components=3).partial_fit(_on(backend, X * np.float32(scale)))
        assert _dtypes(model) == {"float32"}
        Y = np.asarray(model.inverse_transform(model.transform(_on(backend, X * scale))),
                       dtype=np.float64)
        return np.linalg.norm(Y / scale - X) / np.linalg.norm(X)

    assert explained(1e-12) < min(0.9, explained(1.0) + 0.05)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scale", [1e-160, 1e-300, 1e300])
def test_robust_pca_splits_data_at_extreme_scales(backend, scale):
    """At 1e-160 the norms underflowed and the split was all zeros (relative error 1.0)."""
    from tensorstream.datasets.maxnorm import corrupted_low_rank

    Z = corrupted_low_rank(20, 3, 50, 0.1, random_state=2).Z
    unit = RobustPCA(3).fit(_on(backend, Z))
    model = RobustPCA(3).fit(_on(backend, Z * scale))
    low_rank = np.asarray(model.low_rank_) / scale
    reference = np.asarray(unit.low_rank_)
    assert np.linalg.norm(low_rank - reference) / np.linalg.norm(reference) < 0.25


@pytest.mark.parametrize("backend", BACKENDS)
def test_robust_pca_rescaled_is_bit_identical_to_the_plain_solve(backend):
    """The data are divided by a power of two (exact) and the stopping rule is kept in the
    data's units, so at ordinary scales the result is the unscaled iteration's, bit for bit."""
    import tensorly as tl

    from tensorstream.algorithms.pcp import inexact_alm
    from tensorstream.core.backend import using
    from tensorstream.datasets.maxnorm import corrupted_low_rank

    Z = _on(backend, corrupted_low_rank(20, 3, 50, 0.1, random_state=2).Z * 37.0)
    model = RobustPCA(3).fit(Z)
    with using(backend):
        A, E, n_iter = inexact_alm(tl.tensor(Z), outlier_alpha=None, tol=1e-7,
                                   change_tol=model.change_tol, rho=model.rho, max_iter=1000)
    assert model.n_iter_ == n_iter
    np.testing.assert_array_equal(np.asarray(model.low_rank_), np.asarray(A))
    np.testing.assert_array_equal(np.asarray(model.sparse_), np.asarray(E))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["robust-nmf-batch", "vr-mf"])
def test_batch_learners_refuse_data_too_small(name, backend):
    model = make(name)
    _refused(model, lambda: model.fit(_on(backend, _data() * 1e-200)), "too small")


# -- too large ------------------------------------------------------------------------------

def _with_entry(dtype, value, n=40, d=8):
    X = _data(dtype, n, d)
    X[3, 2] = value
    return X


@NO_HANG
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", LEARNERS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_largest_float_entry_is_refused_or_learned_finitely(name, backend, dtype):
    """One entry at the dtype's largest number (float32's 3.4e38 is a common fill value):
    refused as too large with the state unchanged, or learned with every fitted array and
    every diagnostic finite. OnlineRobustPCA spun forever; RobustNMF's history_ was inf."""
    X = _on(backend, _with_entry(dtype, np.finfo(dtype).max))
    model = make(name)
    before = state_of(model)
    try:
        model.fit(X)
    except ValueError as error:
        assert "too large" in str(error)
        assert state_of(model) == before
        return
    for leaf in leaves(vars(model)):
        assert np.all(np.isfinite(np.asarray(leaf, dtype=np.float64)))
    for record in getattr(model, "history_", []):
        assert all(np.isfinite(v) for v in record.values() if isinstance(v, float))


@NO_HANG
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["robust-pca", "maxnorm"])
@pytest.mark.parametrize("dtype, value", [(np.float64, 1e308), (np.float32, 3e38)])
def test_uncapped_robust_coding_ends_on_overflowing_data(name, backend, dtype, value):
    """code_max_iter=None on an entry of 1e308: partial_fit, transform and score spun in
    robust_code (the change measure was NaN, never below tol); they now refuse at once."""
    model = make(name, code_max_iter=None)
    big = _on(backend, _with_entry(dtype, value, 20))
    _refused(model, lambda: model.partial_fit(big), "too large")
    model.partial_fit(_on(backend, _data(dtype, 20)))
    _refused(model, lambda: model.transform(big), "too large")
    _refused(model, lambda: model.score(big), "too large")


def test_robust_code_without_a_cap_stops_on_nan():
    Z = np.full((2, 4), np.nan)
    out = robust_code(Z, np.eye(4)[:, :2], 0.5, max_iter=None)
    assert np.all(out.n_iter == 1)
    assert 0 < UNCAPPED_MAX_ITER < np.iinfo(np.int32).max


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ONLINE)
def test_a_failed_solve_inside_a_step_names_the_data(name, backend, monkeypatch):
    """RobustOnlineNMF with one 1e150 entry (finite squares) raised numpy's or torch's bare
    'LinAlgError: Singular matrix' from shifted_inverse (whether it does depends on the BLAS's
    rounding, so the failure is injected): any learner's failed solve is a ValueError naming
    X and the way out, the state unchanged."""
    errors = [np.linalg.LinAlgError("Singular matrix")]
    if backend == "pytorch":
        import torch

        errors.append(torch.linalg.LinAlgError("linalg.solve: singular"))
    model = make(name, n_components=3).partial_fit(_on(backend, _data(n=20)))
    algorithm = type(model._algorithm())
    for error in errors:
        def fail(*args, error=error, **kwargs):
            raise error

        monkeypatch.setattr(algorithm, "encode", fail)
        _refused(model, lambda: model.partial_fit(_on(backend, _data(n=20, seed=1))),
                 "X: the step's linear algebra failed .* rescale the data")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["robust-nmf-batch", "vr-mf"])
@pytest.mark.parametrize("scale", [1e200, 1e76])
def test_batch_diagnostics_are_never_infinite(name, backend, scale):
    """Data x1e200 gave RobustNMF objectives of inf and VarianceReducedMF an inf snapshot
    loss; VarianceReducedMF's squared gradient map (fourth powers) at 1e76 too."""
    model = make(name)
    try:
        model.fit(_on(backend, _data(n=30) * scale))
    except ValueError as error:
        assert "too large" in str(error) and "rescale" in str(error)
        return
    for record in model.history_:
        assert all(np.isfinite(v) for v in record.values() if isinstance(v, float))


# -- resources and inputs that cannot be computed on ----------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", LEARNERS)
def test_n_components_beyond_memory_is_refused_up_front(name, backend):
    """10**7 atoms of 8 features: a 728 TiB state, numpy's MemoryError or torch's allocator
    error from inside the first step (the CLI printed 'Unable to allocate')."""
    model = make(name, n_components=10**7)
    with pytest.raises(ValueError, match="n_components"):
        model.fit(_on(backend, _data(n=30)))
    assert not hasattr(model, "components_")


@pytest.mark.parametrize("name", LEARNERS)
def test_n_components_beyond_int64_says_so(name):
    with pytest.raises(ValueError, match=r"2\*\*63 - 1"):
        make(name, n_components=2**63).fit(_data(n=30))


@pytest.mark.parametrize("name", LEARNERS)
def test_torch_meta_tensors_are_refused_by_name(name):
    torch = pytest.importorskip("torch")
    X = torch.empty((30, 8), dtype=torch.float64, device="meta")
    with pytest.raises(TypeError, match="meta tensor"):
        make(name).fit(X)


def test_a_closed_dask_client_is_refused_by_name():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                       dashboard_address=":0")
    client = distributed.Client(cluster)
    client.close()
    cluster.close()
    for name in ["nmf", "vr-mf"]:
        model = make(name)
        with pytest.raises(ValueError, match="client: the Dask client is closed"):
            model.fit(_data(n=30), client=client)
        assert not hasattr(model, "components_")


@pytest.mark.parametrize("name", [n for n in LEARNERS if "missing" in inspect.signature(
    entry_of(n).load().__init__).parameters])
def test_pandas_nullable_na_is_a_missing_entry(name):
    pd = pytest.importorskip("pandas")
    X = _data(n=30)
    frame = pd.DataFrame(X).astype("Float64")
    frame.iloc[2, 1] = pd.NA
    expected = X.copy()
    expected[2, 1] = np.nan
    model = make(name, missing="nan").fit(frame)
    reference = make(name, missing="nan").fit(expected)
    assert state_of(model.state_) == state_of(reference.state_)
    with pytest.raises(ValueError, match="missing='nan'"):
        make(name).fit(frame)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", LEARNERS)
def test_transform_and_score_of_huge_entries_are_refused_or_finite(name, backend):
    """OnlineCPDL's and OnlineNMF's score of a batch with one 1e154 entry was -inf (each
    sample's loss finite, their mean not); RobustNMF's codes of a largest-float entry inf."""
    model = make(name).fit(_on(backend, _data(n=30)))
    for value in (1e154, np.finfo(np.float64).max):
        X = _on(backend, _with_entry(np.float64, value, 30))
        for method in ("transform", "score"):
            if not hasattr(model, method):
                continue
            before = state_of(model)
            try:
                result = getattr(model, method)(X)
            except ValueError as error:
                assert "too large" in str(error)
                assert state_of(model) == before
                continue
            assert np.all(np.isfinite(np.asarray(result, dtype=np.float64)))
