"""Helpers of the reliability tests: every learner of the registry made small, and a learner's
state described exactly, to say "bit-identical before and after"."""

import dataclasses
import importlib.util
import inspect
import json

import numpy as np

from tensorstream.learners.registry import registered

BACKENDS = ["numpy"] + (["pytorch"] if importlib.util.find_spec("torch") else [])
LEARNERS = [e.name for e in registered()]
SMALL = {"batch_size": 10, "max_iter": 1, "random_state": 0, "n_epochs": 1}
BATCH_MAX_ITER = {"robust-nmf-batch": 20, "robust-pca-batch": 50}


def entry_of(name):
    return next(e for e in registered() if e.name == name)


def make(name, **params):
    """The registered learner ``name`` with two components and settings that fit in ms."""
    cls = entry_of(name).load()
    accepted = inspect.signature(cls.__init__).parameters
    small = {"n_components": 2, **{k: v for k, v in SMALL.items() if k in accepted}}
    if name in BATCH_MAX_ITER:
        small["max_iter"] = BATCH_MAX_ITER[name]
    return cls(**{**small, **params})


def data(backend="numpy", n=30, d=8, seed=0):
    X = np.random.default_rng(seed).random((n, d)) + 0.1
    if backend == "pytorch":
        import torch

        return torch.tensor(X)
    return X


def fingerprint(value, depth=0):
    """An exact, comparable description: arrays by dtype, shape and bytes, generators by
    their state, objects by their attributes (a few levels deep)."""
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        array = value.detach().cpu().numpy()
        return ("tensor", str(value.dtype), value.requires_grad, array.shape, array.tobytes())
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


def state_of(model):
    """Every attribute of ``model`` (its random generator included), exactly."""
    return fingerprint(vars(model))


def host(value):
    return value.detach().cpu().double().numpy() if hasattr(value, "detach") else np.asarray(
        value, dtype=float)


def factors(model):
    """The learned factors as float64 numpy arrays."""
    found = []
    for name in ("loadings_", "components_", "codes_"):
        if name in vars(model) or (name == "loadings_" and "state_" in vars(model)):
            value = getattr(model, name)
            found.extend(value if isinstance(value, list) else [value])
    return [host(U) for U in found]


def nonnegative(model):
    """Whether the model's factors must be nonnegative."""
    algorithm = getattr(model, "_algorithm", None)
    if algorithm is not None:
        return bool(getattr(algorithm(), "nonnegative", False))
    return bool(getattr(model, "_positive_data", False)) and not getattr(
        model, "allow_negative", True)


def assert_feasible(model):
    """Finite factors inside their constraint sets (nonnegative where the model is)."""
    for U in factors(model):
        assert np.all(np.isfinite(U))
        if nonnegative(model):
            assert U.min() >= 0
