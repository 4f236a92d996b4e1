"""Helpers of the reliability tests: every learner of the registry made small, and (from the
battery, ``benchmarks/battery.py``) a learner's state described exactly, to say
"bit-identical before and after", and its factors."""

import dataclasses
import importlib.util
import inspect

import numpy as np
from scripts import load_script

from tensorstream.core.backend import Carried
from tensorstream.learners.registry import registered

#: the battery script: its exact description of a learner's state and of its factors are the
#: ones the tests use
_battery = load_script("benchmarks/battery.py", "tensorstream_battery")
fingerprint = _battery.fingerprint

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


def state_of(model):
    """Every attribute of ``model`` (its random generator included), exactly."""
    return fingerprint(vars(model))


host = _battery.to_host
factors = _battery.factors_of
nonnegative = _battery.nonnegative_model


def assert_feasible(model):
    """Finite factors inside their constraint sets (nonnegative where the model is)."""
    for U in factors(model):
        assert np.all(np.isfinite(U))
        if nonnegative(model):
            assert U.min() >= 0


def leaves(tree):
    """Every numpy array and torch tensor that ``tree`` holds (lists, tuples, dicts, dataclass
    instances, a carried state as it is now)."""
    if isinstance(tree, Carried):
        return leaves(tree.current())
    if isinstance(tree, (list, tuple)):
        return [leaf for item in tree for leaf in leaves(item)]
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in leaves(value)]
    if dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        return [leaf for f in dataclasses.fields(tree) for leaf in leaves(getattr(tree, f.name))]
    is_tensor = type(tree).__module__.startswith("torch") and hasattr(tree, "shape")
    return [tree] if isinstance(tree, np.ndarray) or is_tensor else []
