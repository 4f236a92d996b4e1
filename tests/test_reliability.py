"""Reliability under bad input, faults and concurrency: each defect found by the adversarial
review is a test here, and each test covers its whole class (every learner, both backends)."""

import importlib.util
import json
import threading

import numpy as np
import pytest
import tensorly as tl
from conftest import assert_same_state
from state_helpers import (
    BACKENDS,
    LEARNERS,
    assert_feasible,
    data,
    fingerprint,
    host,
    make,
    state_of,
)
from threadpoolctl import threadpool_info

from tensorstream import (
    OnlineCPDL,
    OnlineDivergenceNMF,
    OnlineMaxNormMD,
    OnlineNMF,
    OnlineRobustPCA,
    RobustOnlineNMF,
    VarianceReducedMF,
    load,
)

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="needs torch")

ONLINE = {
    "cpdl": lambda: OnlineCPDL(3, batch_size=10, max_iter=1, random_state=0),
    "cpdl-kl": lambda: OnlineDivergenceNMF(3, loss="kl", batch_size=10, max_iter=1,
                                           random_state=0),
    "nmf": lambda: OnlineNMF(3, batch_size=10, max_iter=1, random_state=0),
    "robust-nmf": lambda: RobustOnlineNMF(3, batch_size=10, max_iter=1, random_state=0),
    "maxnorm": lambda: OnlineMaxNormMD(3, batch_size=10, max_iter=1, random_state=0),
    "robust-pca": lambda: OnlineRobustPCA(3, batch_size=10, max_iter=1, random_state=0),
    "divergence": lambda: OnlineDivergenceNMF(3, batch_size=10, max_iter=1, random_state=0),
}


def _data(n=40, d=12, seed=0):
    return np.random.default_rng(seed).random((n, d)) + 0.1


@pytest.mark.parametrize("name", sorted(ONLINE))
def test_huge_finite_values_never_poison_the_state(name):
    """Entries near 1e160 are finite, but their squares overflow: the step must either be
    refused with the state kept, or (scale-free models) learn finite factors; it used to
    commit inf statistics, and every later score was -inf."""
    model = ONLINE[name]().partial_fit(_data())
    before = model.state_
    with np.errstate(all="ignore"):
        try:
            model.partial_fit(_data(seed=1) * 1e160)
        except ValueError as error:
            assert "too large" in str(error)
            assert_same_state(before, model.state_)
    state = model.state_
    assert all(np.all(np.isfinite(U)) for U in state.loadings)
    if state.statistics is not None:
        assert np.all(np.isfinite(state.statistics["A"]))
        assert np.all(np.isfinite(state.statistics["B"]))
        assert np.isfinite(state.statistics["c"])
    model.partial_fit(_data(seed=2))
    assert np.isfinite(model.score(_data(seed=3)))


@pytest.mark.parametrize("name", sorted(ONLINE))
def test_a_failed_first_step_does_not_consume_the_random_stream(name, monkeypatch):
    """After a rejected first batch the learner equals a fresh one with the same seed."""
    model = ONLINE[name]()
    algorithm_class = type(model._algorithm())

    def fail(*args, **kwargs):
        raise FloatingPointError("injected")

    with monkeypatch.context() as patch:
        patch.setattr(algorithm_class, "update", fail)
        with pytest.raises(FloatingPointError, match="injected"):
            model.partial_fit(_data())
    assert not model._fitted
    model.partial_fit(_data())
    fresh = ONLINE[name]().partial_fit(_data())
    for U, V in zip(model.loadings_, fresh.loadings_):
        np.testing.assert_array_equal(U, V)


@needs_torch
@pytest.mark.parametrize("name", sorted(ONLINE) + ["vr-mf"])
def test_fitting_on_torch_never_changes_other_threads_backend(name):
    """TensorLy's own context restores the previous backend globally on exit: a bystander
    thread saw torch tensors while a learner ran (nested contexts)."""
    import torch

    make = ONLINE.get(name, lambda: VarianceReducedMF(3, n_epochs=2, random_state=0))
    X = torch.tensor(_data(n=60))
    seen, stop = set(), threading.Event()

    def bystander():
        while not stop.is_set():
            seen.add(type(tl.tensor(np.ones(2))).__module__.split(".")[0])

    thread = threading.Thread(target=bystander)
    thread.start()
    try:
        make().fit(X)
    finally:
        stop.set()
        thread.join()
    assert seen == {"numpy"} and tl.get_backend() == "numpy"


@needs_torch
@pytest.mark.parametrize("name", sorted(ONLINE))
def test_torch_input_requiring_grad_builds_no_graph(name):
    import torch

    X = torch.tensor(_data(n=30), requires_grad=True)
    model = ONLINE[name]()
    for start in range(0, 30, 10):
        model.partial_fit(X[start:start + 10])
    assert not any(U.requires_grad for U in model.loadings_)
    statistics = model.statistics_ or {}
    assert not any(getattr(v, "requires_grad", False) for v in statistics.values())
    assert not model.transform(X[:5]).requires_grad


def test_concurrent_fits_restore_the_thread_pools():
    """Two fits in two threads left OpenBLAS at one thread for the whole process."""
    X = _data(n=2000, d=40)
    before = [pool["num_threads"] for pool in threadpool_info()]
    threads = [threading.Thread(target=lambda: OnlineNMF(4, batch_size=50, max_iter=2,
                                                         random_state=0).fit(X))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [pool["num_threads"] for pool in threadpool_info()] == before


@pytest.mark.parametrize("name", sorted(ONLINE) + ["vr-mf"])
def test_fit_is_all_or_nothing(name):
    """A bad row late in the data used to leave the learner half-trained and "fitted"."""
    make = ONLINE.get(name, lambda: VarianceReducedMF(3, n_epochs=2, random_state=0))
    model = make().fit(_data(seed=5))
    before = {k: v for k, v in vars(model).items()}
    rng_state = model._rng.bit_generator.state if "_rng" in before else None
    bad = _data(n=100)
    bad[-1, 0] = np.nan
    with pytest.raises(ValueError, match="NaN") as raised:
        model.fit(bad)
    assert any("undone" in note for note in getattr(raised.value, "__notes__", [])) or \
        name == "vr-mf"
    assert vars(model).keys() == before.keys()
    for key, value in before.items():
        assert vars(model)[key] is value
    if rng_state is not None:
        assert model._rng.bit_generator.state == rng_state
    unfitted = make()
    with pytest.raises(ValueError, match="NaN"):
        unfitted.fit(bad)
    assert not any(key.endswith("_") for key in vars(unfitted))


def test_parameters_set_after_fit_apply_to_the_next_step_as_after_a_reload(tmp_path):
    """VarianceReducedMF ignored a formulation weight set after fit in partial_fit but applied
    it after save/load: a resumed run differed from the uninterrupted one."""
    from tensorstream import load

    X = _data(n=80, d=10)
    straight = VarianceReducedMF(3, n_epochs=2, random_state=0).fit(X)
    resumed = load(straight.save(tmp_path / "vr.npz"))
    changed = VarianceReducedMF(3, n_epochs=2, random_state=0).fit(X)
    for model in (straight, resumed, changed):
        model.set_params(formulation_params={"lam": 2.0})
        model.partial_fit(X)
    np.testing.assert_array_equal(straight.components_, resumed.components_)
    unchanged = VarianceReducedMF(3, n_epochs=2, random_state=0).fit(X).partial_fit(X)
    assert not np.allclose(changed.components_, unchanged.components_)
    assert changed.formulation_.lam == 2.0


@pytest.mark.parametrize("name", sorted(ONLINE))
def test_a_samples_codes_do_not_depend_on_its_batch(name):
    """RobustOnlineNMF.transform of a sample changed by up to 0.12 under a permutation of
    the rows (random starts drawn per row); every coder must code a sample on its own."""
    X = _data(n=40)
    X[::5] *= 20  # samples that converge at different iterations
    model = ONLINE[name]().fit(_data(seed=7))
    whole = np.asarray(model.transform(X))
    order = np.random.default_rng(0).permutation(40)
    np.testing.assert_allclose(np.asarray(model.transform(X[order])), whole[order],
                               rtol=0, atol=1e-12)
    for part in (slice(0, 7), slice(7, 40), slice(3, 4)):
        np.testing.assert_allclose(np.asarray(model.transform(X[part])), whole[part],
                                   rtol=0, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("name", sorted(ONLINE))
@pytest.mark.parametrize("dtype", ["int64", "bool", "float16", "bfloat16"])
def test_torch_batches_of_any_real_dtype_learn_like_numpy(name, dtype):
    """Integer, boolean and half-precision torch batches crashed deep in a matmul while the
    same numpy data worked: they are computed in float64, like numpy's."""
    import torch

    X = np.round(_data(n=30) * 3)
    if dtype == "bool":
        X = (X > 1).astype(float) + 0.0
    converted = torch.tensor(X).to(getattr(torch, dtype))
    exact = np.asarray(converted.to(torch.float64))  # what the batch holds after rounding
    on_torch = ONLINE[name]().fit(converted)
    on_numpy = ONLINE[name]().fit(exact)
    assert on_torch.backend_ == "pytorch" and on_torch.loadings_[0].dtype == torch.float64
    for U, V in zip(on_torch.loadings_, on_numpy.loadings_):
        np.testing.assert_allclose(np.asarray(U), V, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", sorted(ONLINE))
def test_scalars_empty_and_boolean_data(name):
    """np.float64(1.0) raised IndexError, zero features a numpy reduction error, booleans a
    numpy subtraction TypeError: clear errors (or, for booleans, learning as 0/1)."""
    with pytest.raises(ValueError, match="Reshape your data"):
        ONLINE[name]().fit(np.float64(1.0))
    with pytest.raises(ValueError, match="0 feature"):
        ONLINE[name]().fit(np.zeros((40, 0)))
    with pytest.raises(ValueError, match="0 sample"):
        ONLINE[name]().fit(np.zeros((0, 5)))
    flags = _data() > 0.6
    model = ONLINE[name]().fit(flags)
    np.testing.assert_array_equal(np.asarray(model.transform(flags)),
                                  np.asarray(model.transform(flags.astype(float))))


# -- found by the battery (benchmarks/battery.py): every learner of the registry, both backends


#: fewer inner iterations where a learner's solvers run to their limit on overflowing data
CHEAP = {"maxnorm": {"code_max_iter": 10, "ball_max_iter": 10, "dict_passes": 1}}


@pytest.fixture(params=LEARNERS)
def learner_name(request):
    return request.param


@pytest.fixture(params=BACKENDS)
def fitted_model(request, learner_name):
    """A fitted learner of the registry, on the parametrized backend (as ``fitted_backend``)."""
    model = make(learner_name, **CHEAP.get(learner_name, {})).fit(data(request.param))
    model.fitted_backend = request.param  # an instance attribute: part of the state compared
    return model


def _rewrite(source, target, change):
    """A copy of a checkpoint with its metadata and members changed by ``change``."""
    with np.load(source) as archive:
        arrays = {k: archive[k] for k in archive.files}
    meta = json.loads(str(arrays.pop("__meta__")))
    change(meta, arrays)
    np.savez(target, __meta__=np.array(json.dumps(meta)), **arrays)
    return target


def _first_member(meta, arrays):
    return next(k for k in arrays if not k.startswith(("layout_", "param_")))


TAMPERED = {
    "params": lambda m, a: m.update(params=[1, 2]),
    "backend": lambda m, a: m.update(backend="jax"),
    "dtype": lambda m, a: m.update(dtype="bogus"),
    "rng": lambda m, a: m.update(rng="x") if "rng" in m else m.update(n_steps=-5),
    "n_steps": lambda m, a: m.update(n_steps=-5),
    "as int": lambda m, a: a.update({_first_member(m, a): a[_first_member(m, a)].astype(int)}),
    "scalar": lambda m, a: a.update({_first_member(m, a): np.float64(1.0)}),
    "NaN": lambda m, a: a[_first_member(m, a)].fill(np.nan),
}


def test_tampered_checkpoint_fields_are_refused_by_name(fitted_model, tmp_path):
    """Metadata of the wrong type (a list of params, backend 'jax', a string random state) and
    members of the wrong dtype or rank loaded silently or failed deep inside (AttributeError,
    ImportError, IndexError) for some learners; the batch learners validated nothing."""
    good = fitted_model.save(tmp_path / "good.npz")
    field = {"as int": "dtype", "scalar": "float array", "NaN": "NaN", "rng": "n"}
    for tamper, change in TAMPERED.items():
        bad = _rewrite(good, tmp_path / "bad.npz", change)
        with pytest.raises(ValueError, match="cannot read checkpoint") as raised:
            load(bad)
        assert field.get(tamper, tamper) in str(raised.value), tamper


def test_save_run_then_load_run_reads_run_npz(fitted_model, tmp_path, monkeypatch):
    """save("run") writes run.npz; load("run") used to say there is no checkpoint."""
    monkeypatch.chdir(tmp_path)
    assert fitted_model.save("run").name == "run.npz"
    back = load("run")
    assert fingerprint(back.get_params()) == fingerprint(
        {k: v for k, v in fitted_model.get_params().items()})


@pytest.mark.parametrize("name", ["cpdl-kl", "divergence"])
def test_a_dict_loss_params_comes_back_a_dict(name, tmp_path):
    model = ONLINE[name]().set_params(loss="beta", loss_params={"beta": 1.5}).fit(_data())
    back = load(model.save(tmp_path / "m.npz"))
    assert back.loss_params == {"beta": 1.5}
    np.testing.assert_array_equal(back.transform(_data()), model.transform(_data()))


@pytest.mark.parametrize("name", ["cpdl-kl", "divergence"])
def test_bad_loss_params_text_is_named(name):
    model = ONLINE[name]().set_params(loss_params="bogus")
    with pytest.raises(ValueError, match="loss_params must be a dict"):
        model.fit(_data())
    assert not model._fitted


def test_overflowing_transform_and_score_are_refused(fitted_model):
    """Codes and scores of finite data whose squares overflow were NaN and -inf without an
    error (entries near 1e160): either a clear refusal with the state kept, or finite."""
    X = data(fitted_model.fitted_backend)
    before = state_of(fitted_model)
    for method in ("transform", "score"):
        if not hasattr(fitted_model, method):
            continue
        with np.errstate(all="ignore"):
            try:
                result = getattr(fitted_model, method)(X * 1e160)
            except ValueError as error:
                assert "too large" in str(error)
            else:
                assert np.all(np.isfinite(host(result)))
        assert state_of(fitted_model) == before


def test_a_refused_fit_keeps_a_fitted_learner(fitted_model):
    """Batch RobustNMF dropped its fitted attributes before checking the new data; at 1e160
    it silently fitted NaN factors."""
    before = state_of(fitted_model)
    bad = data(fitted_model.fitted_backend)
    bad[-1, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        fitted_model.fit(bad)
    assert state_of(fitted_model) == before
    with np.errstate(all="ignore"):
        try:
            fitted_model.fit(data(fitted_model.fitted_backend) * 1e160)
        except ValueError as error:
            assert "too large" in str(error)
            assert state_of(fitted_model) == before
        else:
            assert_feasible(fitted_model)


@pytest.mark.parametrize("backend", BACKENDS)
def test_parameters_are_checked_before_seeding_and_strings_are_named(learner_name, backend):
    """random_state='bogus' failed inside numpy's SeedSequence; object arrays of strings
    inside numpy's astype."""
    model = make(learner_name)
    if "random_state" in model.get_params():
        model.set_params(random_state="bogus")
        with pytest.raises((TypeError, ValueError), match="random_state"):
            model.fit(data(backend))
        assert not model._fitted
    with pytest.raises(TypeError, match="X must hold real numbers"):
        make(learner_name).fit(np.full((30, 8), "a", dtype=object))


def test_the_cli_blames_a_bad_param_on_the_option(tmp_path, capsys):
    """A bad --param was reported as a problem "in the batch sample 0 ... 39"."""
    from tensorstream.cli.main import main

    np.save(tmp_path / "x.npy", _data())
    code = main(["fit", str(tmp_path / "x.npy"), "--model", "nmf", "--n-components", "2",
                 "--param", "alpha_W=-1", "--out", str(tmp_path / "out.nc"), "--quiet"])
    message = capsys.readouterr().err
    assert code != 0 and "alpha_W must be >= 0" in message and "batch" not in message


@pytest.mark.slow
def test_soak_a_hundred_thousand_tiny_steps_keep_memory_flat_and_finite():
    """10^5 partial_fit calls of one-sample batches (the cheapest learner): the traced memory
    after the first 10^4 steps does not grow, and the state stays finite throughout."""
    import tracemalloc

    model = OnlineRobustPCA(2, code_max_iter=3, random_state=0)
    stream = np.random.default_rng(0).random((1000, 3)) + 0.1
    traced = []
    tracemalloc.start()
    try:
        for step in range(100_000):
            model.partial_fit(stream[step % 1000:step % 1000 + 1])
            if step % 10_000 == 9_999:
                assert all(np.all(np.isfinite(U)) for U in model.loadings_), step
                traced.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    assert model.n_steps_ == 100_000
    assert max(traced[1:]) - traced[0] < 256 * 1024, traced  # flat: no per-step growth


class _Payload:
    """Unpickling this runs code (it would create ``marker``)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_loading_never_runs_code_from_the_file(tmp_path):
    """A member holding a pickle whose unpickling would run code is refused unread."""
    marker = tmp_path / "ran"
    good = ONLINE["nmf"]().fit(_data()).save(tmp_path / "m.npz")
    evil = _rewrite(good, tmp_path / "evil.npz", lambda m, a: a.update(
        loading_0=np.array([_Payload(marker)], dtype=object)))  # np.savez pickles it
    with pytest.raises(ValueError, match="cannot read checkpoint"):
        load(evil)
    assert not marker.exists()


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "array"])
def test_a_refused_fit_restores_a_generator_given_as_random_state(stream):
    """A Generator given as ``random_state`` is drawn from directly; a refused ``fit`` of a
    fresh learner puts it back where it was (it kept the draws of the steps before the
    refusal, or of the epoch's shuffle), so a retry gives the same result."""
    X = np.random.default_rng(0).random((20, 6))
    bad = X.copy()
    bad[7, 0] = np.nan
    generator = np.random.default_rng(5)
    before = generator.bit_generator.state
    data = [X[:5], bad[5:10]] if stream else bad
    with pytest.raises(ValueError, match="NaN"):
        OnlineNMF(2, batch_size=5, random_state=generator).fit(data)
    assert generator.bit_generator.state == before


def test_fit_on_a_stream_without_batches_is_refused_and_keeps_the_fit():
    """An empty stream is refused as an empty array is (it silently reset a fitted learner)."""
    X = np.random.default_rng(0).random((20, 6))
    model = OnlineNMF(2, batch_size=5, random_state=0).fit(X)
    components = np.array(model.components_)
    for empty in ([], iter(())):
        with pytest.raises(ValueError, match="no mini-batch"):
            model.fit(empty)
        np.testing.assert_array_equal(model.components_, components)
