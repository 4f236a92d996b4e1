"""When an online fit runs the compiled kernels (core/compiled.py): each from its first step on
(the pivoting coder from ``FIRST_COMPILED_STEP``, the column sweep from ``LATER["sweep"]``
times that), a rule that reads the step number alone. A fit shorter than that never imports
numba nor compiles; a fit resumed from a checkpoint switches at the step the
uninterrupted one does, and equals it bit for bit; two fits with one ``random_state`` are
identical; a cluster's workers follow the rule of one process. Skipped without numba."""

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
import tensorly as tl

from tensorstream import (
    OnlineCPDL,
    OnlineDivergenceNMF,
    OnlineMaxNormMD,
    OnlineNMF,
    OnlineRobustPCA,
    RobustOnlineNMF,
    load,
)
from tensorstream.coders import lasso
from tensorstream.core import compiled
from tensorstream.steps import compiled as steps_compiled

pytest.importorskip("numba")

#: every online learner (those that step through engine/loop.py), on a small problem
ONLINE = {
    "OnlineNMF": (lambda: OnlineNMF(4, batch_size=10, random_state=0), (12,)),
    "OnlineCPDL": (lambda: OnlineCPDL(3, batch_size=10, random_state=0), (5, 4)),
    "OnlineDivergenceNMF": (lambda: OnlineDivergenceNMF(3, batch_size=10, random_state=0),
                            (12,)),
    "OnlineMaxNormMD": (lambda: OnlineMaxNormMD(3, batch_size=10, random_state=0), (12,)),
    "OnlineRobustPCA": (lambda: OnlineRobustPCA(3, batch_size=10, random_state=0), (12,)),
    "RobustOnlineNMF": (lambda: RobustOnlineNMF(3, batch_size=10, random_state=0), (12,)),
}

_SHORT_FIT = """
import json, sys, warnings
import numpy as np
import tensorstream
from tensorstream.coders import lasso
from tensorstream.core import compiled
from tensorstream.steps import compiled as steps_compiled
warnings.simplefilter("ignore")
rng = np.random.default_rng(0)
shapes = {"OnlineCPDL": (5, 4)}
compiled.FIRST_COMPILED_STEP = 100  # lowered to keep the test short: the rule is the same
for name in json.loads(sys.argv[1]):
    model = getattr(tensorstream, name)(3, batch_size=10, random_state=0)
    # the longest fit that must not compile: OnlineNMF's default coder has no kernel, so its
    # first kernel (the sweep) starts later
    longest = compiled.first_step("sweep" if name == "OnlineNMF" else None)
    for _ in range(longest):
        model.partial_fit(rng.random((10, *shapes.get(name, (12,)))))
    assert model.n_steps_ == longest
print(json.dumps({"numba": "numba" in sys.modules,
                  "sweep": steps_compiled._compiled.cache_info().currsize,
                  "pivoting": lasso._compiled_pivoting.cache_info().currsize}))
"""


def test_the_rule_reads_the_step_number_alone(monkeypatch):
    monkeypatch.setenv(compiled.SWITCH, "1")
    K, S = compiled.FIRST_COMPILED_STEP, compiled.first_step("sweep")
    assert S == compiled.LATER["sweep"] * K > K
    assert not compiled.allowed_at(0) and not compiled.allowed_at(K - 1)
    assert compiled.allowed_at(K) and compiled.allowed_at(10 * K)
    assert not compiled.allowed_at(S - 1, "sweep") and compiled.allowed_at(S, "sweep")
    with compiled.from_step(K - 1):
        assert not compiled.enabled()
        with compiled.allowing(True):  # every kernel, whatever the step
            assert compiled.enabled() and compiled.enabled("sweep") and compiled.enabled("bcd")
        assert not compiled.enabled()
    with compiled.from_step(S - 1):
        assert compiled.enabled() and not compiled.enabled("sweep")
    with compiled.from_step(S):
        assert compiled.enabled() and compiled.enabled("sweep")
    monkeypatch.setenv(compiled.SWITCH, "0")
    with compiled.from_step(S):
        assert not compiled.enabled() and not compiled.enabled("sweep")


def test_a_fits_only_kernel_stays_off_outside_a_fit(monkeypatch):
    """Outputs (no step set) run every kernel but those of FITS_ONLY; a fit's steps past the
    first compiled step run them too."""
    monkeypatch.setenv(compiled.SWITCH, "1")
    assert compiled.enabled() and compiled.enabled("sweep")
    assert "bcd" in compiled.FITS_ONLY and not compiled.enabled("bcd")
    with compiled.from_step(compiled.first_step("bcd") - 1):
        assert not compiled.enabled("bcd")
    with compiled.from_step(compiled.first_step("bcd")):
        assert compiled.enabled("bcd")


def test_the_first_steps_bound_what_a_fit_pays_for_loading_the_kernels():
    """Switching at step K costs a fit that ends just after it the kernels' loading (0.5-0.8 s,
    measured) against K steps' time; at the 300 of before that was up to twice a short fit's
    time. Each kernel starts late enough that the loading is at most ~10% of the fit before it
    (steps of at least 1 ms: the learners' fastest, OnlineNMF on 64 features)."""
    load, fastest_step = 0.8, 1e-3
    for kernel in (None, "sweep"):
        assert load / (compiled.first_step(kernel) * fastest_step) <= 0.3
    assert load / (compiled.first_step() * 2e-3) <= 0.15  # the pivoting's learners: >= 2 ms


def test_outside_an_online_step_the_kernels_stay_allowed(monkeypatch):
    """Batch learners, ``transform`` and direct calls are not gated."""
    monkeypatch.setenv(compiled.SWITCH, "1")
    assert compiled.enabled()
    assert steps_compiled.column_sweep(np.ones((2, 2))) is not None


def test_a_fit_shorter_than_the_first_compiled_step_never_loads_numba():
    """In a fresh process (nothing else there imports numba), every online learner fitted for
    ``FIRST_COMPILED_STEP`` steps, the JIT switched on: numba is not imported and neither
    kernel factory has compiled anything."""
    env = {**os.environ, compiled.SWITCH: "1"}
    out = subprocess.run([sys.executable, "-c", _SHORT_FIT, json.dumps(sorted(ONLINE))],
                         env=env, capture_output=True, text=True, check=True, timeout=600)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "numba": False, "sweep": 0, "pivoting": 0}


class _Spy:
    """Counts the kernel factories' calls (made only where :func:`compiled.enabled` says
    yes), by thread, and hands the real kernels back."""

    def __init__(self, monkeypatch):
        self.calls = []
        for module, name in ((steps_compiled, "_compiled"), (lasso, "_compiled_pivoting")):
            monkeypatch.setattr(module, name, self._wrap(getattr(module, name)))

    def _wrap(self, factory):
        def spied():
            self.calls.append(threading.current_thread().name)
            return factory()
        return spied


@pytest.mark.parametrize("name, first", [("OnlineCPDL", 3), ("OnlineNMF", 12)])
def test_the_kernels_run_from_the_first_compiled_step_on(monkeypatch, name, first):
    """OnlineCPDL's coder pivots in a kernel from K on; OnlineNMF's default coder has none, and
    its dictionary step's sweep starts at LATER["sweep"] * K."""
    monkeypatch.setenv(compiled.SWITCH, "1")
    monkeypatch.setattr(compiled, "FIRST_COMPILED_STEP", 3)
    spy = _Spy(monkeypatch)
    make, sample_shape = ONLINE[name]
    model, rng = make(), np.random.default_rng(0)
    for step in range(first + 2):
        model.partial_fit(rng.random((10, *sample_shape)))
        assert bool(spy.calls) == (step >= first), (step, spy.calls)


def _fed(model, batches):
    for X in batches:
        model.partial_fit(X)
    return model


def _batches(sample_shape, n):
    """``n`` batches of 10 samples, on the backend the test runs in."""
    rng = np.random.default_rng(1)
    return [tl.tensor(rng.random((10, *sample_shape))) for _ in range(n)]


@pytest.mark.parametrize("name", sorted(ONLINE))
def test_resume_across_the_first_compiled_step_equals_the_uninterrupted_fit(
        monkeypatch, backend, name, tmp_path):
    """Checkpoint at step K - 5, resume past the sweep's first step: bit for bit the
    uninterrupted fit, and a second uninterrupted fit is the first (K lowered to 8 to keep the
    test short)."""
    monkeypatch.setenv(compiled.SWITCH, "1")
    K = 8
    monkeypatch.setattr(compiled, "FIRST_COMPILED_STEP", K)
    make, sample_shape = ONLINE[name]
    end = compiled.first_step("sweep") + 20
    batches = _batches(sample_shape, end)
    straight, again = _fed(make(), batches), _fed(make(), batches)
    resumed = load(_fed(make(), batches[:K - 5]).save(tmp_path / "run.npz"))
    assert resumed.n_steps_ == K - 5
    _fed(resumed, batches[K - 5:])
    for other in (again, resumed):
        assert other.n_steps_ == straight.n_steps_ == end
        for U, V in zip(straight.loadings_, other.loadings_):
            np.testing.assert_array_equal(tl.to_numpy(U), tl.to_numpy(V))


@pytest.mark.slow  # 6,000 steps
def test_resume_across_the_real_first_compiled_step_equals_the_uninterrupted_fit(
        monkeypatch, backend, tmp_path):
    """The same at the library's own switch step, on the main model."""
    monkeypatch.setenv(compiled.SWITCH, "1")
    K = compiled.FIRST_COMPILED_STEP
    batches = _batches((4, 3), K + 20)

    def make():
        return OnlineCPDL(3, random_state=0)

    straight = _fed(make(), batches)
    resumed = load(_fed(make(), batches[:K - 5]).save(tmp_path / "run.npz"))
    _fed(resumed, batches[K - 5:])
    assert resumed.n_steps_ == straight.n_steps_ == K + 20
    for U, V in zip(straight.loadings_, resumed.loadings_):
        np.testing.assert_array_equal(tl.to_numpy(U), tl.to_numpy(V))


def test_a_clusters_workers_follow_the_rule_of_one_process(monkeypatch):
    """The workers code a step's shards with the kernels exactly when one process would: not
    before step K, and from it on (the flag goes with each shard's task)."""
    distributed = pytest.importorskip("distributed")
    monkeypatch.setenv(compiled.SWITCH, "1")
    monkeypatch.setattr(compiled, "FIRST_COMPILED_STEP", 3)
    X = np.random.default_rng(0).random((60, 12))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as local, \
            distributed.Client(local) as client:
        calls, spy = {}, _Spy(monkeypatch)
        for n_steps in (3, 6):
            spy.calls.clear()
            model = OnlineNMF(4, batch_size=20, max_iter=n_steps // 3, coder="pivoting",
                              random_state=0)  # 3 steps a pass; the lasso kernel codes
            model.fit(X, client=client)
            assert model.n_steps_ == n_steps
            calls[n_steps] = list(spy.calls)
    assert calls[3] == []
    assert any(thread != threading.main_thread().name for thread in calls[6]), calls[6]
