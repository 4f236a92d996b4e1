"""Adversarial battery: bad data, bad hyper-parameters, tampered checkpoints and hard numerics,
tried on every registered learner and both backends.

A case *holds* when the learner either refuses it with a clear ``ValueError``/``TypeError``
(raised by tensorstream itself, not from inside numpy/torch/pandas, the message naming the
argument or field) and its state is bit-identical before and after (every attribute, the
random generator included), or accepts it and ends with finite factors inside their constraint
sets (nonnegative where the model is). Inputs that scikit-learn accepts (integers, booleans,
float16/float32, DataFrames, nested lists) must be accepted.

Run::

    python benchmarks/battery.py            # everything
    python benchmarks/battery.py --quick    # fewer hyper-parameter values (a few minutes)

It prints tried/held counts per learner and area, then every failure; the exit status is 1 when
something failed.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import importlib.util
import inspect
import json
import math
import os
import signal
import sys
import tempfile
import time
import traceback
import warnings
import zipfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

import tensorstream
from tensorstream import load
from tensorstream.learners.registry import registered

AREAS = ("data", "params", "checkpoint", "numerics", "float32", "scales", "resources",
         "clients")
HAS_TORCH = importlib.util.find_spec("torch") is not None
PACKAGE = str(Path(tensorstream.__file__).resolve().parent)
#: small settings so that one fit takes milliseconds
SMALL = {"batch_size": 10, "max_iter": 1, "random_state": 0, "n_epochs": 1}
BATCH_MAX_ITER = {"robust-nmf-batch": 20, "robust-pca-batch": 50}


# -- the state, bit for bit ---------------------------------------------------------------------


def fingerprint(value: Any, depth: int = 0) -> Any:
    """A comparable, exact description of ``value``: arrays by dtype, shape and bytes, random
    generators by their state, objects by their attributes (a few levels deep)."""
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        array = value.detach().cpu().numpy()
        return ("tensor", str(value.dtype), str(value.device), value.requires_grad,
                array.shape, array.tobytes())
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, np.random.Generator):
        return ("rng", json.dumps(value.bit_generator.state, sort_keys=True, default=str))
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, dict):
        return {repr(k): fingerprint(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [fingerprint(v, depth + 1) for v in value])
    if depth < 4 and (dataclasses.is_dataclass(value) or hasattr(value, "__dict__")) \
            and not callable(value) and not isinstance(value, type):
        return (type(value).__name__, fingerprint(vars(value), depth + 1))
    return repr(value)


def arrays_of(value: Any, depth: int = 0):
    """Every float array or tensor reachable from ``value`` (fitted attributes)."""
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        yield value.detach().cpu().double().numpy() if value.is_floating_point() else None
    elif isinstance(value, np.ndarray):
        yield value if value.dtype.kind == "f" else None
    elif isinstance(value, dict):
        for v in value.values():
            yield from arrays_of(v, depth + 1)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from arrays_of(v, depth + 1)
    elif depth < 3 and dataclasses.is_dataclass(value):
        yield from arrays_of(vars(value), depth + 1)


def nonnegative_model(model: Any) -> bool:
    """Whether the model's factors must be nonnegative."""
    try:
        return bool(getattr(model._algorithm(), "nonnegative", False))
    except AttributeError:
        return bool(getattr(model, "_positive_data", False)) and not getattr(
            model, "allow_negative", True)


def factors_of(model: Any) -> list:
    """The learned factors, as numpy arrays."""
    names = ("loadings_", "components_", "codes_")
    found = []
    for name in names:
        if name in vars(model) or (name == "loadings_" and "state_" in vars(model)):
            value = getattr(model, name)
            found.extend(value if isinstance(value, list) else [value])
    return [np.asarray(to_host(U), dtype=float) for U in found]


def to_host(value: Any) -> Any:
    if hasattr(value, "detach"):
        return value.detach().cpu().double().numpy()
    return value


# -- outcomes -----------------------------------------------------------------------------------

Failure = collections.namedtuple("Failure", "learner backend area case why")


def raised_inside_tensorstream(error: BaseException) -> bool:
    """The error was raised by tensorstream's own code, not deep inside a dependency."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and frames[-1].filename.startswith(PACKAGE)


def judge(model: Any, before: Any, call: Callable[[], Any], *, must: str = "either",
          names: tuple = ()) -> str | None:
    """Run ``call`` and say what is wrong (None when it held).

    ``must``: ``"refuse"``, ``"accept"`` or ``"either"``; ``names``: words one of which a
    refusal's message must contain (the argument or field).
    """
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            result = call()
    except (ValueError, TypeError) as error:
        message = str(error)
        if must == "accept":
            return f"valid input refused: {type(error).__name__}: {message[:160]}"
        if not raised_inside_tensorstream(error):
            frame = traceback.extract_tb(error.__traceback__)[-1]
            return (f"unclear {type(error).__name__} from {Path(frame.filename).name}:"
                    f"{frame.lineno}: {message[:160]}")
        if names and not any(name in message for name in names):
            return f"message names none of {names}: {message[:160]}"
        if model is not None and fingerprint(vars(model)) != before:
            changed = [k for k, v in vars(model).items()
                       if fingerprint(v) != before.get(repr(k))]
            return f"state changed by a refused call ({changed or 'attributes removed'})"
        return None
    except Exception as error:  # noqa: BLE001 -- anything else is a failure, reported
        return f"{type(error).__name__}: {str(error)[:160]}"
    if must == "refuse":
        return "silently accepted"
    return check_result(model, result)


def check_result(model: Any, result: Any) -> str | None:
    """A successful call left finite factors inside their constraint sets."""
    values = [result] if isinstance(result, (float, np.floating)) else []
    if hasattr(result, "shape") and not hasattr(result, "fit"):
        values.append(to_host(result))
    for value in values:
        if not np.all(np.isfinite(np.asarray(value, dtype=float))):
            return "non-finite result"
    if model is None or not model._fitted:
        return None
    for array in arrays_of(vars(model)):
        if array is not None and not np.all(np.isfinite(array)):
            return "non-finite fitted attribute"
    if nonnegative_model(model) and any(np.min(U) < 0 for U in factors_of(model)):
        return "negative factor in a nonnegative model"
    return None


# -- the learners -------------------------------------------------------------------------------


@dataclasses.dataclass
class Subject:
    """One learner of the registry, made small."""

    name: str
    cls: type
    kind: str

    def make(self, **params) -> Any:
        accepted = inspect.signature(self.cls.__init__).parameters
        small = {"n_components": 2, **{k: v for k, v in SMALL.items() if k in accepted}}
        if self.name in BATCH_MAX_ITER:
            small["max_iter"] = BATCH_MAX_ITER[self.name]
        return self.cls(**{**small, **params})

    def methods(self) -> list[str]:
        return [m for m in ("fit", "partial_fit", "transform", "score") if hasattr(self.cls, m)]


def subjects() -> list[Subject]:
    return [Subject(e.name, e.load(), e.kind) for e in registered() if e.installed]


def on(backend: str, X: np.ndarray) -> Any:
    if backend == "pytorch":
        import torch

        return torch.tensor(X)
    return X


def clean(n: int = 30, d: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((n, d)) + 0.1


def fitted(subject: Subject, backend: str, **params) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return subject.make(**params).fit(on(backend, clean()))


# -- area: bad data -----------------------------------------------------------------------------


def data_cases(nonnegative: bool) -> dict[str, tuple[Callable[[], Any], str]]:
    """Name: (make the input, what must happen); the data of the fit, changed (a finite
    learner's ``partial_fit`` takes no other data)."""
    X = clean()

    def with_value(value):
        def make():
            Y = X.copy()
            Y[-1, 0] = value
            return Y
        return make

    cases = {
        "nan": (with_value(np.nan), "refuse"),
        "inf": (with_value(np.inf), "refuse"),
        "-inf": (with_value(-np.inf), "refuse"),
        "huge 1e160": (lambda: X * 1e160, "either"),
        "huge 1e300": (lambda: X * 1e300, "either"),
        "negative": (lambda: X - 0.8, "refuse" if nonnegative else "either"),
        "1-D": (lambda: X[0], "refuse"),
        "empty": (lambda: X[:0], "refuse"),
        "zero features": (lambda: X[:, :0], "refuse"),
        "scalar": (lambda: np.float64(1.0), "refuse"),
        "None": (lambda: None, "refuse"),
        "strings": (lambda: np.full(X.shape, "a"), "refuse"),
        "object strings": (lambda: np.full(X.shape, "a", dtype=object), "refuse"),
        "complex": (lambda: X.astype(complex), "refuse"),
        "bool": (lambda: X > 0.5, "accept"),
        "int": (lambda: np.round(X * 5).astype(np.int64), "accept"),
        "float16": (lambda: X.astype(np.float16), "accept"),
        "float32": (lambda: X.astype(np.float32), "accept"),
        "nested lists": (lambda: X.tolist(), "accept"),
        "single sample": (lambda: X[:1], "accept"),
    }
    if importlib.util.find_spec("pandas"):
        import pandas as pd

        cases["DataFrame"] = (lambda: pd.DataFrame(X), "accept")
    return cases


def after_fit_cases() -> dict[str, tuple[Callable[[], Any], str]]:
    """Inputs whose validity depends on the fitted state."""
    X = clean(20)
    return {
        "wrong trailing shape": (lambda: X[:, :5], "refuse"),
        "extra mode": (lambda: X.reshape(20, 4, 2), "refuse"),
    }


def run_data(subject: Subject, backend: str, record: Callable) -> None:
    probe = fitted(subject, backend)
    for case, (make, must) in data_cases(nonnegative_model(probe)).items():
        if subject.kind != "online" and case == "single sample":
            must = "either"  # a finite or batch learner may need more samples than atoms
        for method in subject.methods():
            if method == "fit":
                targets = [("fresh", subject.make()), ("fitted", fitted(subject, backend))]
            else:
                targets = [("fitted", fitted(subject, backend))]
            for where, model in targets:
                data = make()
                if backend == "pytorch" and isinstance(data, np.ndarray) and \
                        data.dtype.kind in "biuf":
                    data = on(backend, data)
                before = fingerprint(vars(model))
                call = getattr(model, method)
                record("data", f"{case} {method} ({where})",
                       judge(model, before, lambda c=call, x=data: c(x), must=must,
                             names=("X", "sample", "feature", "data", "dtype", "np.")))
    for case, (make, must) in after_fit_cases().items():
        for method in [m for m in subject.methods() if m != "fit"]:
            model = fitted(subject, backend)
            before = fingerprint(vars(model))
            record("data", f"{case} {method}",
                   judge(model, before, partial(getattr(model, method), on(backend, make())),
                         must=must, names=("X", "shape", "feature")))
    run_mixed(subject, backend, record)


def run_mixed(subject: Subject, backend: str, record: Callable) -> None:
    """A batch of the other backend after a fit: torch after numpy is refused; numpy after
    torch is converted."""
    if not HAS_TORCH:
        return
    other = "pytorch" if backend == "numpy" else "numpy"
    must = "refuse" if other == "pytorch" else "accept"
    for method in [m for m in subject.methods() if m != "fit"]:
        model = fitted(subject, backend)
        before = fingerprint(vars(model))
        record("data", f"{other} batch {method}",
               judge(model, before, partial(getattr(model, method), on(other, clean())),
                     must=must, names=("X", "backend")))


# -- area: hyper-parameters ---------------------------------------------------------------------


def bad_values(quick: bool) -> dict[str, tuple[Any, str]]:
    values = {"'bogus'": ("bogus", "refuse"), "nan": (math.nan, "refuse"),
              "-1": (-1, "either"), "object()": (object(), "refuse")}
    if not quick:
        values.update({"-1.5": (-1.5, "either"), "inf": (math.inf, "either"),
                       "[1, 2]": ([1, 2], "either"), "True": (True, "either"),
                       "'1'": ("1", "refuse")})  # no huge counts: max_iter=10**12 would run
    return values


#: parameters (and keys of dict parameters) that take any object by design
FREE = {"callback", "init", "groups", "laplacian", "lrr_A", "lrr_B", "code_step", "weights",
        "search_radius"}


def dict_keys(subject: Subject, param: str) -> list[tuple[dict, tuple[str, ...]]]:
    """``(flag, keys)``: the keys that the dict parameter ``param`` takes, with the setting of
    the parameter that chooses them (``flag``): the small learner's formulation's and method's;
    every solver's for ``solver_params``. Each key is tried with every bad value, in a dict."""
    model = subject.make()
    if param == "formulation_params":
        from tensorstream.finite.formulations import FORMULATION_PARAMS

        return [({}, FORMULATION_PARAMS[model.formulation])]
    if param == "method_params":
        from tensorstream.algorithms.variance_reduced import METHOD_PARAMS

        return [({}, tuple(METHOD_PARAMS[model.method]))]
    if param == "solver_params":
        table = subject.cls._solver_params  # the learner's own: the batch one has fewer
        return [({"solver": solver}, tuple(keys)) for solver, keys in table.items()]
    return []


def tried_values(subject: Subject, quick: bool) -> list[tuple[str, str, Any, str, dict]]:
    """``(param, label, value, must, flag)`` for every parameter and bad value (for a dict
    parameter, every key of it, the bad value in a one-key dict, ``flag`` the setting that
    makes the key apply)."""
    names = [p for p in subject.cls._param_names() if p != "n_components"]
    tried = []
    for param in names + ["n_components"]:  # n_components last: the others use 2
        keyed = dict_keys(subject, param)
        for label, (value, must) in bad_values(quick).items():
            if keyed:
                tried += [(param, f"{{{key!r}: {label}}}" + "".join(
                              f" ({k}={v!r})" for k, v in flag.items()), {key: value},
                           "either" if key in FREE and must == "refuse" and label != "nan"
                           else must, flag) for flag, keys in keyed for key in keys]
                continue
            if param in FREE and must == "refuse" and label != "nan":
                must = "either"
            tried.append((param, label, value, must, {}))
    return tried


def run_params(subject: Subject, backend: str, record: Callable, quick: bool) -> None:
    X = on(backend, clean())
    for param, label, value, must, flag in tried_values(subject, quick):
        if param == "callback":
            continue  # called with the learner: anything callable is up to the user
        model = None
        with contextlib.suppress(Exception):
            model = subject.make(**flag, **{param: value})
        if model is None:
            record("params", f"{param}={label} constructor", "the constructor raised; it "
                   "must only store parameters (scikit-learn)")
            continue
        record("params", f"{param}={label} fit",
               judge(model, fingerprint(vars(model)), lambda m=model: m.fit(X), must=must,
                     names=(param,)))
        update = "partial_fit" if hasattr(subject.cls, "partial_fit") else "fit"
        model = fitted(subject, backend)
        try:
            model.set_params(**flag, **{param: value})
        except (ValueError, TypeError):
            record("params", f"{param}={label} set_params", None)
            continue
        record("params", f"{param}={label} set_params+{update}",
               judge(model, fingerprint(vars(model)),
                     lambda m=model, u=update: getattr(m, u)(X), must=must, names=(param,)))


# -- area: checkpoints --------------------------------------------------------------------------


def rewrite(source: Path, target: Path, change: Callable[[dict, dict], None],
            compression: int = zipfile.ZIP_STORED) -> Path:
    """Copy a checkpoint with its metadata and arrays changed by ``change(meta, arrays)``."""
    with np.load(source) as archive:
        arrays = {k: archive[k] for k in archive.files}
    meta = json.loads(str(arrays.pop("__meta__")))
    change(meta, arrays)
    arrays["__meta__"] = np.array(json.dumps(meta))
    with zipfile.ZipFile(target, "w", compression=compression) as archive:
        for key, value in arrays.items():
            with archive.open(f"{key}.npy", "w") as handle:
                np.lib.format.write_array(handle, np.asanyarray(value), allow_pickle=True)
    return target


def checkpoint_cases(meta: dict, arrays: dict) -> dict[str, Callable[[dict, dict], None]]:
    first = next(k for k in arrays if not k.startswith("layout"))

    def set_meta(**changes):
        return lambda m, a: m.update(changes)

    def set_param(**changes):
        return lambda m, a: m["params"].update(changes)

    def set_array(value_of):
        return lambda m, a: a.update({first: value_of(a[first])})

    cases = {
        "n_components=10**12": set_param(n_components=10**12),
        "n_components='x'": set_param(n_components="x"),
        "unknown parameter": set_param(bogus=1),
        "params not a dict": set_meta(params=[1, 2]),
        "class unknown": set_meta(**{"class": "Nope"}),
        "class not a string": set_meta(**{"class": 3}),
        "version 99": set_meta(version=99),
        "backend jax": set_meta(backend="jax"),
        "dtype float16": set_meta(dtype="float16"),
        "dtype bogus": set_meta(dtype="bogus"),
        "meta missing key": lambda m, a: m.pop(next(k for k in m if k not in
                                                    ("format", "version", "class"))),
        f"{first} as strings": set_array(lambda v: v.astype(str)),
        f"{first} as int": set_array(lambda v: v.astype(np.int64)),
        f"{first} as object": set_array(lambda v: np.array([None] * v.size, dtype=object)),
        f"{first} transposed": set_array(lambda v: v.T.copy() if v.ndim == 2 else v[None]),
        f"{first} NaN": set_array(lambda v: np.full(v.shape, np.nan)),
        f"{first} scalar": set_array(lambda v: np.float64(1.0)),
        f"{first} missing": lambda m, a: a.pop(first),
        "extra member": lambda m, a: a.update(extra=np.ones(3)),
    }
    for key in ("n_steps", "n_samples_seen", "scale", "c", "n_loadings", "rng"):
        if key in meta:
            if key != "c":  # c, a constant of the surrogate, may be negative (KL)
                cases[f"{key}=-5"] = set_meta(**{key: -5})
            cases[f"{key}='x'"] = set_meta(**{key: "x"})
    if "n_steps" in meta:
        cases["n_steps=1e300"] = set_meta(n_steps=1e300)
    if "values" in meta:
        for key in meta["values"]:
            cases[f"values.{key}='x'"] = lambda m, a, k=key: m["values"].update({k: "x"})
    if "lists" in meta:
        for key in meta["lists"]:
            cases[f"lists.{key}=10**9"] = lambda m, a, k=key: m["lists"].update({k: 10**9})
    return cases


def run_checkpoints(subject: Subject, backend: str, record: Callable, folder: Path) -> None:
    model = fitted(subject, backend)
    good = model.save(folder / "good.npz")
    with np.load(good) as archive:
        arrays = {k: archive[k] for k in archive.files}
    meta = json.loads(str(arrays.pop("__meta__")))
    for case, change in checkpoint_cases(meta, arrays).items():
        path = rewrite(good, folder / "tampered.npz", change)
        must = "either" if case == "extra member" else "refuse"
        record("checkpoint", case, judge(None, None, lambda p=path: usable(load(p)), must=must,
                                         names=("checkpoint",)))
    raw = good.read_bytes()
    for case, content in {"truncated": raw[: len(raw) // 2], "empty": b"",
                          "garbage": b"PK\x03\x04" + b"x" * 100}.items():
        (folder / "bad.npz").write_bytes(content)
        record("checkpoint", case, judge(None, None, lambda: load(folder / "bad.npz"),
                                         must="refuse", names=("checkpoint",)))
    bomb = rewrite(good, folder / "bomb.npz", lambda m, a: a.update(
        extra=np.zeros(20_000_000, dtype=np.uint8)), compression=zipfile.ZIP_DEFLATED)
    record("checkpoint", "zip bomb (20 MB in a few KB)",
           judge(None, None, lambda: load(bomb), must="refuse", names=("checkpoint",)))
    if hasattr(os, "mkfifo"):
        fifo = folder / "fifo.npz"
        if not fifo.exists():
            os.mkfifo(fifo)
        record("checkpoint", "FIFO", judge(None, None, lambda: load(fifo), must="refuse",
                                           names=("checkpoint",)))
    record("checkpoint", "a folder", judge(None, None, lambda: load(folder), must="refuse",
                                            names=("checkpoint",)))
    try:
        load(folder / "missing.npz")
        record("checkpoint", "missing file", "silently accepted")
    except FileNotFoundError:
        record("checkpoint", "missing file", None)
    except Exception as error:  # noqa: BLE001
        record("checkpoint", "missing file", f"{type(error).__name__}: {error}")
    run_roundtrip(model, record, folder)


def usable(model: Any) -> Any:
    """A loaded learner must transform (online learners also learn) to finite values."""
    backend = getattr(model, "backend_", "numpy")
    data = on(backend, clean())  # the data of the fit (a finite learner takes no other)
    if hasattr(model, "partial_fit"):
        model.partial_fit(data)
    return model.transform(data) if hasattr(model, "transform") else model


def run_roundtrip(model: Any, record: Callable, folder: Path) -> None:
    """save("run") then load("run"), and the same learner back bit for bit."""
    with contextlib.chdir(folder):
        try:
            model.save("run")
            back = load("run")
        except Exception as error:  # noqa: BLE001
            record("checkpoint", 'save("run") then load("run")', f"{type(error).__name__}: "
                   f"{error}")
            return
    same = fingerprint(back.get_params()) == fingerprint(
        {k: v for k, v in model.get_params().items()})
    record("checkpoint", 'save("run") then load("run")', None if same else
           "parameters differ after the round trip")


# -- area: numerics -----------------------------------------------------------------------------


def numeric_cases() -> dict[str, Callable[[], np.ndarray]]:
    X = clean(30)
    rng = np.random.default_rng(1)
    cases = {f"scale {s:g}": (lambda s=s: X * s) for s in (1e-8, 1e-4, 1e4, 1e8)}
    cases.update({
        "constant": lambda: np.ones((30, 8)),
        "zeros": lambda: np.zeros((30, 8)),
        "rank one": lambda: np.outer(rng.random(30) + 0.1, rng.random(8) + 0.1),
        "duplicate samples": lambda: np.repeat(X[:3], 10, axis=0),
        "one sample": lambda: X[:1],
        "one feature (n_components > n_features)": lambda: X[:, :1],
        "sparse outlier 1e10": lambda: np.where(np.eye(30, 8) > 0, 1e10, X),
        "tiny values 1e-300": lambda: X * 1e-300,
    })
    return cases


def run_numerics(subject: Subject, backend: str, record: Callable) -> None:
    for case, make in numeric_cases().items():
        model = subject.make()
        data = on(backend, make())
        record("numerics", case, judge(model, fingerprint(vars(model)),
                                       lambda m=model, x=data: m.fit(x),
                                       names=("X", "n_components")))


# -- areas: threads, interrupts, control (issue 35) -------------------------------------------


def progress_of(model: Any) -> tuple:
    """What a step advances: (mini-batches, samples), or epochs for VarianceReducedMF."""
    if "n_epochs_" in vars(model):
        return model.n_epochs_, None
    return model.n_steps_, model.n_samples_seen_


def quietly(call: Callable[[], Any]) -> Any:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return call()


def run_threads(subject: Subject, backend: str, record: Callable) -> None:
    """24 partial_fit calls from 4 threads (stepped learners): every step kept; two fits at
    once (every learner): the result of one of them, whole; transform and score from three
    threads while another learns: finite results, no error."""
    import threading

    def in_threads(work: list[Callable[[], Any]]) -> list[BaseException]:
        errors: list[BaseException] = []

        def guarded(call: Callable[[], Any]) -> None:
            try:
                quietly(call)
            except BaseException as error:  # noqa: BLE001 -- reported as the case's failure
                errors.append(error)

        threads = [threading.Thread(target=guarded, args=(call,)) for call in work]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        return errors

    if subject.kind != "batch":
        model = quietly(lambda: subject.make().partial_fit(on(backend, clean(20))))
        steps, samples = progress_of(model)
        batches = [on(backend, clean(20, seed=k)) for k in range(1, 25)]
        errors = in_threads([lambda share=batches[k::4]: [model.partial_fit(b) for b in share]
                             for k in range(4)])
        after = progress_of(model)
        why = (f"{type(errors[0]).__name__}: {errors[0]}" if errors else
               None if after == (steps + 24, None if samples is None else samples + 480)
               else f"lost steps: {after} after 24 from {(steps, samples)}")
        record("threads", "24 partial_fit from 4 threads", why)
    model = subject.make()
    alone = factors_of(fitted(subject, backend))
    errors = in_threads([lambda: model.fit(on(backend, clean())) for _ in range(2)])
    same = not errors and all(np.array_equal(to_host(a), to_host(b)) for a, b in
                              zip(factors_of(model), alone, strict=True))
    record("threads", "two fits at once", None if same else
           f"{errors[0]!r}" if errors else "the result is no fit's")
    model = fitted(subject, backend)
    results: list[Any] = []
    use = [m for m in ("transform", "score") if hasattr(model, m)]
    if "partial_fit" in subject.methods() and use:
        X = on(backend, clean(20, seed=7))
        methods = [use[k % len(use)] for k in range(3)]
        readers = [lambda m=m: results.append(getattr(model, m)(X)) for m in methods]
        n = 30 if subject.kind == "finite" else 20  # VR steps on the data set of its fit
        learner = [lambda: [model.partial_fit(on(backend, clean(n, seed=k)))
                            for k in range(8)]]
        errors = in_threads(readers + learner)
        bad = [r for r in results if not np.all(np.isfinite(to_host(r)))]
        record("threads", "read while learning", f"{errors[0]!r}" if errors else
               "non-finite result" if bad else None)


class _Interrupter:
    """Ctrl-C (``_thread.interrupt_main``) after ``delay`` seconds, unless disarmed first;
    the lock makes disarming and firing exclusive, so no interrupt arrives after ``disarm``
    returns (one fired just before arrives during it)."""

    def __init__(self, delay: float):
        import threading

        self.lock = threading.Lock()
        self.armed = True
        self.timer = threading.Timer(delay, self._fire)
        self.timer.start()

    def _fire(self) -> None:
        import _thread

        with self.lock:
            if self.armed:
                _thread.interrupt_main()

    def disarm(self) -> None:
        self.timer.cancel()
        with self.lock:
            self.armed = False


def interrupted(call: Callable[[], Any], delay: float) -> tuple[bool, BaseException | None]:
    """Run ``call`` with Ctrl-C after ``delay`` s: (whether KeyboardInterrupt came out, any
    other error)."""
    interrupter = None
    try:
        try:
            interrupter = _Interrupter(delay)  # it may fire before it is even returned
            quietly(call)
        finally:
            if interrupter is not None:
                interrupter.disarm()
    except KeyboardInterrupt:
        return True, None
    except BaseException as error:  # noqa: BLE001 -- reported as the case's failure
        return False, error
    try:  # a Ctrl-C that fired as the call returned is handled here
        time.sleep(0.002)
    except KeyboardInterrupt:
        return True, None
    return False, None


def run_interrupts(subject: Subject, backend: str, record: Callable, folder: Path,
                   trials: int = 12) -> None:
    """Ctrl-C at random points of a refit (inside compiled kernels too, where numba is
    installed) and of ``save``. Held: a refit comes out as KeyboardInterrupt with the previous
    fit exactly kept, or completes as an uninterrupted refit would; a save comes out as
    KeyboardInterrupt or completes, the checkpoint on disk always loads, and no temporary,
    lock file or descriptor is left."""
    rng = np.random.default_rng(35)
    arrived = collections.Counter()  # the Ctrl-Cs that came before the call returned
    X = on(backend, clean(60, seed=3))
    reference = [to_host(U) for U in factors_of(quietly(lambda: subject.make().fit(X)))]
    start = time.perf_counter()
    quietly(lambda: subject.make().fit(X))
    duration = time.perf_counter() - start
    model = fitted(subject, backend)
    for trial in range(trials):
        before = fingerprint(vars(model))
        stopped, error = interrupted(partial(model.fit, X), rng.uniform(0, duration))
        if error is not None:
            why = f"{type(error).__name__} instead of the interrupt: {str(error)[:120]}"
        elif stopped:
            why = None if fingerprint(vars(model)) == before else "previous fit not kept"
            if why and all(np.array_equal(to_host(U), V) for U, V in
                           zip(factors_of(model), reference, strict=True)):
                why = None  # it fired as the completed refit returned
        else:
            same = all(np.array_equal(to_host(U), V) for U, V in
                       zip(factors_of(model), reference, strict=True))
            why = None if same else "a completed refit differs from an uninterrupted one"
        record("interrupts", f"refit, Ctrl-C #{trial + 1}", why)
        arrived["refit"] += stopped
        model = fitted(subject, backend)
    path = folder / f"{subject.name}-{backend}-interrupts.npz"
    model.save(path)
    start = time.perf_counter()
    model.save(path)
    duration = time.perf_counter() - start
    for trial in range(trials):
        descriptors = _descriptors()
        stopped, error = interrupted(lambda: model.save(path), rng.uniform(0, duration))
        left = sorted(p.name for p in folder.glob(f".{path.name}.*"))
        try:
            usable_file = type(load(path)) is type(model)
        except Exception as problem:  # noqa: BLE001 -- reported as the case's failure
            usable_file = False
            error = error or problem
        why = (f"{type(error).__name__} instead of the interrupt: {str(error)[:120]}"
               if error is not None else f"left {left}" if left else
               "descriptor leaked" if _descriptors() != descriptors else
               None if usable_file else "checkpoint unusable")
        record("interrupts", f"save, Ctrl-C #{trial + 1}", why)
        arrived["save"] += stopped
    print(f"{subject.name} [{backend}]: Ctrl-C arrived during {arrived['refit']} of {trials} "
          f"refits and {arrived['save']} of {trials} saves", file=sys.stderr, flush=True)


def _descriptors() -> int:
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0


def control_cases(subject: Subject, backend: str) -> dict[str, tuple[Callable, str, tuple]]:
    """Name: (make the call on a fitted learner, what must happen, words a refusal names)."""
    X = clean()
    hidden = np.eye(*X.shape, dtype=bool)
    masked = np.ma.masked_array(np.where(hidden, 1e6, X), mask=hidden)
    takes_masks = "missing" in inspect.signature(subject.cls.__init__).parameters
    huge = "n_epochs" if subject.kind == "finite" else "max_iter"
    cases = {
        "masked array fit": (lambda m: m.fit(masked), "accept" if takes_masks else "refuse",
                             ("masked",)),
        f"{huge}=10**12": (lambda m: m.fit(on(backend, X)), "refuse",
                           (huge, "MAX_FIT_STEPS")),
    }
    if subject.kind == "online":
        import xarray as xr

        labels = ["a", "a"] + [f"f{k}" for k in range(6)]
        cases.update({
            "sample_dim=0": (lambda m: m.fit(xr.DataArray(on(backend, X), dims=(0, "f")),
                                             sample_dim=0), "accept", ()),
            "repeated labels": (lambda m: m.fit(xr.DataArray(on(backend, X), dims=("t", "f"),
                                                             coords={"f": labels}),
                                                sample_dim="t"), "refuse", ("repeated",)),
            "masked array partial_fit": (lambda m: m.partial_fit(masked),
                                         "accept" if takes_masks else "refuse", ("masked",)),
        })
    return cases


def run_control(subject: Subject, backend: str, record: Callable) -> None:
    """Masked arrays (honoured where the learner takes masks, refused elsewhere), a fit past
    MAX_FIT_STEPS refused up front, integer sample dims and repeated labels."""
    for case, (call, must, names) in control_cases(subject, backend).items():
        model = fitted(subject, backend)
        if case.endswith("=10**12"):
            model.set_params(**{case.split("=")[0]: 10**12})
        before = fingerprint(vars(model))
        record("control", case, judge(model, before, partial(call, model), must=must,
                                      names=names))


CONTROL_AREAS = {"threads": run_threads, "interrupts": run_interrupts, "control": run_control}
AREAS = AREAS + tuple(CONTROL_AREAS)


# -- areas: float32 end to end, extreme scales, resource abuse, closed clients ---------------------

#: seconds a case may run before it counts as a hang (the areas below feed loops data that
#: once made them spin)
HANG_SECONDS = 60


class Hung(Exception):
    """A case ran past :data:`HANG_SECONDS`."""


def bounded(call: Callable[[], Any]) -> Callable[[], Any]:
    """``call``, stopped with :class:`Hung` after :data:`HANG_SECONDS` (an alarm signal: the
    battery runs in the main thread)."""
    def run() -> Any:
        def alarm(signum, frame):
            raise Hung(f"no answer within {HANG_SECONDS} s")
        previous = signal.signal(signal.SIGALRM, alarm)
        signal.alarm(HANG_SECONDS)
        try:
            return call()
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
    return run


def float_dtypes(model: Any) -> set:
    """The float dtypes of every array and tensor the learner holds."""
    found = set()

    def walk(value: Any, depth: int = 0) -> None:
        dtype = str(getattr(value, "dtype", "")).replace("torch.", "")
        if hasattr(value, "shape") and dtype.startswith("float"):
            found.add(dtype)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v, depth + 1)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v, depth + 1)
        elif depth < 3 and dataclasses.is_dataclass(value) and not isinstance(value, type):
            walk(vars(value), depth + 1)
        elif depth < 3 and hasattr(value, "current"):  # a carried state
            walk(value.current(), depth + 1)
    walk(vars(model))
    return found


def finite_diagnostics(model: Any) -> str | None:
    """A batch or finite learner's ``history_`` holds no inf or NaN number."""
    for record in getattr(model, "history_", None) or []:
        for key, value in record.items():
            if isinstance(value, float) and not math.isfinite(value):
                return f"history_ {key} is {value}"
    return None


def stays_float32(model: Any, folder: Path) -> str | None:
    """Every float the learner holds is float32, and (fitted online learners) its checkpoint
    loads and holds float32 too."""
    dtypes = float_dtypes(model)
    if dtypes != {"float32"}:
        return f"state dtypes {sorted(dtypes)}"
    if not hasattr(model, "save"):
        return None
    path = folder / f"f32-{type(model).__name__}.npz"
    try:
        model.save(path)
        back = load(path)
    except Exception as error:  # noqa: BLE001 -- an unloadable checkpoint is the failure
        return f"checkpoint round trip: {type(error).__name__}: {str(error)[:120]}"
    dtypes = float_dtypes(back)
    return None if dtypes == {"float32"} else f"reloaded dtypes {sorted(dtypes)}"


def run_float32(subject: Subject, backend: str, record: Callable, folder: Path) -> None:
    X = clean(60).astype(np.float32)

    def judged(case: str, call: Callable[[Any], Any], then: Callable | None = None) -> None:
        model = subject.make()
        why = judge(model, fingerprint(vars(model)), bounded(lambda: call(model)),
                    names=("X",))
        if why is None and then is not None and model._fitted:
            why = then(model)
        record("float32", case, why)

    judged("fit", lambda m: m.fit(on(backend, X)), lambda m: stays_float32(m, folder))
    if subject.kind == "online":
        def dead_atoms(m):
            for i in range(3):
                m.partial_fit(on(backend, X[20 * i:20 * i + 20]))
            for _ in range(40):
                m.partial_fit(on(backend, np.zeros((20, 8), np.float32)))
            return m
        judged("dead atoms re-initialised from zero batches, then saved and loaded",
               dead_atoms, lambda m: stays_float32(m, folder))
        judged("transform stays float32",
               lambda m: m.fit(on(backend, X)).transform(on(backend, X)),
               lambda m: None if str(m.transform(on(backend, X)).dtype).endswith("float32")
               else "float64 codes")
    for case, data in {"scale 1e-30": X * np.float32(1e-30), "scale 1e-12": X * 1e-12,
                       "scale 1e15": X * np.float32(1e15),
                       "one entry 3e38 (fill value)": np.where(np.eye(60, 8) > 0, 3e38, X),
                       "one entry float32 max": np.where(
                           np.eye(60, 8) > 0, np.finfo(np.float32).max, X)}.items():
        data = data.astype(np.float32)
        judged(case, lambda m, d=data: m.fit(on(backend, d)), finite_diagnostics)


def scale_cases() -> dict[str, Callable[[], np.ndarray]]:
    X = clean(30)
    cases = {f"scale {s:g}": (lambda s=s: X * s)
             for s in (1e-300, 1e-200, 1e-160, 1e-150, 1e-40, 1e40, 1e76, 1e150, 1e200, 1e300)}
    for value in (1e75, 1e150, 1e154, 1e200, 1e308, np.finfo(np.float64).max):
        cases[f"one entry {value:g}"] = lambda v=value: np.where(np.eye(30, 8) > 0, v, X)
    return cases


def not_zeros(model: Any) -> str | None:
    """Nonzero data learned: some factor (or the low-rank part) is not all zeros."""
    low_rank = vars(model).get("low_rank_")
    factors = [to_host(low_rank)] if low_rank is not None else factors_of(model)
    if factors and all(not np.any(np.asarray(U, dtype=float)) for U in factors):
        return "learned all zeros from nonzero data"
    return finite_diagnostics(model)


def run_scales(subject: Subject, backend: str, record: Callable, folder: Path) -> None:
    for case, make in scale_cases().items():
        data = on(backend, make())
        model = subject.make()
        why = judge(model, fingerprint(vars(model)), bounded(lambda m=model, x=data: m.fit(x)),
                    names=("X",))
        # one huge entry may leave the rest below a batch solver's relative tolerance (zeros)
        learned = not_zeros if case.startswith("scale") else finite_diagnostics
        record("scales", f"fit, {case}", why or (learned(model) if model._fitted else None))
        if "transform" not in subject.methods():
            continue
        model = fitted(subject, backend)
        for method in ("transform", "score"):
            if hasattr(model, method):
                record("scales", f"{method}, {case}",
                       judge(model, fingerprint(vars(model)),
                             bounded(lambda m=model, f=method, x=data: getattr(m, f)(x)),
                             names=("X",)))


def run_resources(subject: Subject, backend: str, record: Callable, folder: Path) -> None:
    for R in (10**5 * 100, 10**9, 10**12, 2**63, 10**30):
        model = subject.make(n_components=R)
        record("resources", f"n_components={R}",
               judge(model, fingerprint(vars(model)), bounded(
                   lambda m=model: m.fit(on(backend, clean()))), must="refuse",
                   names=("n_components",)))
    if backend == "pytorch":
        import torch

        meta = torch.empty((30, 8), dtype=torch.float64, device="meta")
        model = subject.make()
        record("resources", "torch meta tensor",
               judge(model, fingerprint(vars(model)), bounded(lambda: model.fit(meta)),
                     must="refuse", names=("X",)))


def run_clients(subject: Subject, backend: str, record: Callable, folder: Path) -> None:
    # every online learner takes client= (some through **kwargs); others where they say so
    methods = [m for m in ("fit", "partial_fit") if hasattr(subject.cls, m) and (
        subject.kind == "online"
        or "client" in inspect.signature(getattr(subject.cls, m)).parameters)]
    if not methods:
        return
    try:
        import distributed
    except ImportError:
        return
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    client.close()
    closed_cluster = distributed.Client(cluster)
    cluster.close()
    cases = {"closed client": client, "client of a closed cluster": closed_cluster}
    for case, given in cases.items():
        for method in methods:
            model = subject.make()
            record("clients", f"{method}, {case}",
                   judge(model, fingerprint(vars(model)), bounded(
                       lambda m=model, f=method, c=given: getattr(m, f)(on(backend, clean()),
                                                                        client=c)),
                         must="refuse", names=("client",)))
    closed_cluster.close()


EXTREME_AREAS = {"float32": run_float32, "scales": run_scales, "resources": run_resources,
                 "clients": run_clients}


# -- the run ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer hyper-parameter values")
    parser.add_argument("--learners", nargs="*", help="registry names (default: all)")
    parser.add_argument("--backends", nargs="*", default=["numpy"] + (["pytorch"] if HAS_TORCH
                                                                       else []))
    parser.add_argument("--areas", nargs="*", default=list(AREAS), choices=AREAS)
    args = parser.parse_args(argv)
    counts = collections.defaultdict(lambda: [0, 0])
    failures: list[Failure] = []
    with tempfile.TemporaryDirectory() as folder:
        for subject in subjects():
            if args.learners and subject.name not in args.learners:
                continue
            for backend in args.backends:
                record = Recorder(subject.name, backend, counts, failures)
                run_areas(subject, backend, record, args, Path(folder))
                print(f"{subject.name} [{backend}]: {record.tried} tried, {record.held} held",
                      file=sys.stderr, flush=True)
    report(counts, failures, args.areas)
    return 1 if failures else 0


@dataclasses.dataclass
class Recorder:
    """Counts the cases of one learner and backend, and keeps the failures."""

    learner: str
    backend: str
    counts: dict
    failures: list
    tried: int = 0
    held: int = 0

    def __call__(self, area: str, case: str, why: str | None) -> None:
        self.counts[(self.learner, area)][0] += 1
        self.counts[(self.learner, area)][1] += why is None
        self.tried += 1
        self.held += why is None
        if why is not None:
            self.failures.append(Failure(self.learner, self.backend, area, case, why))


def run_areas(subject: Subject, backend: str, record: Recorder, args: argparse.Namespace,
              folder: Path) -> None:
    for area in args.areas:
        if area == "interrupts":
            run_interrupts(subject, backend, record, folder)
        elif area in CONTROL_AREAS:
            CONTROL_AREAS[area](subject, backend, record)
        elif area == "data":
            run_data(subject, backend, record)
        elif area == "params":
            run_params(subject, backend, record, args.quick)
        elif area == "checkpoint":
            run_checkpoints(subject, backend, record, folder)
        elif area == "numerics":
            run_numerics(subject, backend, record)
        else:
            EXTREME_AREAS[area](subject, backend, record, folder)


def report(counts: dict, failures: list[Failure], areas: list[str]) -> None:
    learners = list(dict.fromkeys(name for name, _ in counts))
    print(f"{'learner':<18}" + "".join(f"{a:>16}" for a in areas) + f"{'total':>16}")
    totals = collections.defaultdict(lambda: [0, 0])
    for name in learners:
        row = [counts.get((name, a), [0, 0]) for a in areas]
        tried, held = sum(r[0] for r in row), sum(r[1] for r in row)
        for a, r in zip(areas, row):
            totals[a][0] += r[0]
            totals[a][1] += r[1]
        print(f"{name:<18}" + "".join(f"{f'{r[1]}/{r[0]}':>16}" for r in row)
              + f"{f'{held}/{tried}':>16}")
    tried = sum(t[0] for t in totals.values())
    held = sum(t[1] for t in totals.values())
    print(f"{'all':<18}" + "".join(f"{f'{totals[a][1]}/{totals[a][0]}':>16}" for a in areas)
          + f"{f'{held}/{tried}':>16}")
    print(f"\n{len(failures)} failure(s)")
    for f in failures:
        print(f"- {f.learner} [{f.backend}] {f.area}: {f.case}: {f.why}")


if __name__ == "__main__":
    sys.exit(main())
