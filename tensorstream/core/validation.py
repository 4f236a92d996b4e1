"""Validation at the boundary: everything a learner is given is checked here, before any state
changes, so a rejected batch leaves the learner exactly as it was."""

from __future__ import annotations

import json
import math
import numbers
import os
import threading
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorly as tl

from .backend import (
    as_tensor,
    backend_of,
    finfo_of,
    float_dtype_of,
    is_real_dtype,
    numpy_view,
    using,
)


def as_array(X: Any) -> Any:
    """One array from what scikit-learn accepts as one: a pandas or polars DataFrame (its
    values; a polars DataFrame has a shape but iterates over its columns, so it must not be
    read as a stream) or a pandas Series, an object with ``__array__`` but no shape, a nested
    list of numbers. Anything else (arrays, tensors, DataArrays, streams, lists of batches) is
    returned as it is."""
    if is_data_frame(X) or _library_of(X) == "pandas":
        if _has_nullable_columns(X):  # <NA> is a missing entry: NaN, as missing='nan' reads
            return X.to_numpy(dtype=np.float64, na_value=np.nan)
        return X.to_numpy()
    if hasattr(X, "__array__") and not hasattr(X, "shape"):
        return np.asarray(X)
    if isinstance(X, list) and X and isinstance(X[0], (list, numbers.Number)):
        return np.asarray(X)
    return X


def _has_nullable_columns(X: Any) -> bool:
    """Whether a pandas object has a nullable column (``Float64``, ``Int64``, ``boolean``:
    ``<NA>`` as its missing value), which ``to_numpy`` makes an object array."""
    if _library_of(X) != "pandas":
        return False
    dtypes = X.dtypes if hasattr(X, "columns") else [X.dtype]
    return any(type(getattr(d, "na_value", None)).__name__ == "NAType" for d in dtypes)


def is_data_frame(X: Any) -> bool:
    """True for a pandas or polars DataFrame, whatever its column labels."""
    return _library_of(X) in ("pandas", "polars") and hasattr(X, "columns") and hasattr(
        X, "to_numpy")


def _library_of(X: Any) -> str:
    return type(X).__module__.split(".")[0]


def feature_names(X: Any) -> np.ndarray | None:
    """The column names of a pandas or polars DataFrame whose columns are all named by
    strings (what scikit-learn keeps as ``feature_names_in_``); None for anything else."""
    if not is_data_frame(X):
        return None
    names = np.asarray(X.columns, dtype=object)
    return names if all(isinstance(name, str) for name in names) else None


def densify(X: Any) -> Any:
    """Plain array data from the containers the learners accept (sparse, xarray, dask)."""
    X = as_array(X)
    if hasattr(X, "todense") and not hasattr(X, "dims"):  # sparse.COO, scipy.sparse
        return np.asarray(X.todense())
    if hasattr(X, "dims") and hasattr(X, "data"):  # xarray.DataArray, positional use
        X = X.data
    if type(X).__module__.startswith("dask"):
        return np.asarray(X.compute())
    return X


def _check_samples(shape: tuple, sample_shape: tuple | None, name: str,
                   owner: str = "this learner") -> None:
    """At least one sample and one feature, and samples of the fitted shape."""
    if shape[0] == 0:
        raise ValueError(f"{name} is an empty batch: 0 sample(s) (shape={shape}) while a "
                         f"minimum of 1 is required.")
    if int(np.prod(shape[1:])) == 0:
        raise ValueError(f"{name} has 0 feature(s) (shape={shape}) while a minimum of 1 is "
                         f"required.")
    if sample_shape is not None and shape[1:] != tuple(sample_shape):
        if len(shape) == len(sample_shape) + 1 == 2:
            raise ValueError(f"{name} has {shape[1]} features, but {owner} is expecting "
                             f"{sample_shape[0]} features as input")
        raise ValueError(f"{name} has samples of shape {shape[1:]}, but this learner was fitted "
                         f"on samples of shape {tuple(sample_shape)}")


def check_batch(
    X: Any,
    *,
    backend: str,
    context: dict | None = None,
    sample_shape: tuple | None = None,
    nonnegative: bool = False,
    name: str = "X",
    owner: str = "this learner",
    missing_hint: bool = True,
    way_out: str = "",
) -> Any:
    """Return ``X`` as a finite float tensor of ``backend`` with samples on the first axis.

    Raises ``TypeError`` for non-numeric data or a tensor of another backend/device, and
    ``ValueError`` for wrong dimensions or sample shape, empty batches, NaN/inf, and negative
    entries when ``nonnegative``.
    """
    if X is None:
        raise TypeError(f"{name} must be an array of shape (n_samples, I_1, ..., I_n), got None")
    _refuse_masked(X, name, owner, missing_hint)
    X = densify(X)
    source = backend_of(X)
    if getattr(getattr(X, "device", None), "type", None) == "meta":
        raise TypeError(f"{name} is a torch meta tensor (a shape without values); pass a "
                        f"tensor that holds data, e.g. on 'cpu' or 'cuda'")
    if source != "numpy" and source != backend:
        raise TypeError(f"{name} is a {source} tensor but this learner runs on the {backend} "
                        f"backend; convert it, or use a new learner with backend={source!r}")
    if source == "numpy":
        X = np.asarray(X)
        if X.dtype.kind == "O":  # numbers stored as objects (a pandas column, a ragged build)
            X = _numbers_from_objects(X, name)
        if X.dtype.kind == "c":
            raise ValueError(f"{name}: Complex data not supported (got dtype {X.dtype})")
    if not is_real_dtype(X):
        raise TypeError(f"{name} must hold real numbers, got dtype {X.dtype}")
    shape = tuple(X.shape)
    if len(shape) < 2:
        raise ValueError(f"{name} must have shape (n_samples, I_1, ..., I_n) with at least one "
                         f"data mode, got shape {shape}; Reshape your data: a single sample as "
                         f"(1, ...), a single feature as (-1, 1)")
    _check_samples(shape, sample_shape, name, owner)
    if context is not None and source == backend == "pytorch" and X.device != context["device"]:
        raise TypeError(f"{name} is on device {X.device} but the learner's state is on "
                        f"{context['device']}")
    if context is None or "dtype" not in context:  # ints, bools, half precision: in float
        # (a context of a device alone, a learner's ``device``: the data's dtype there)
        context = {"dtype": float_dtype_of(X, backend), **(context or {})}
        if source == "pytorch":
            context.setdefault("device", X.device)
    if source == backend == "numpy" and X.dtype == np.dtype(context["dtype"]):
        tensor = X  # already the learner's arrays: no copy (no learner writes into a batch)
    else:
        tensor = as_tensor(X, backend, **context)
    low, high = _extremes(tensor, backend)
    _remember_largest(tensor, max(abs(low), abs(high)))
    if not (np.isfinite(low) and np.isfinite(high)):
        hint = "; to treat NaN as missing entries, use missing='nan' or pass a mask" \
            if missing_hint else ""
        raise ValueError(f"{name} contains NaN or infinite values{hint}")
    if nonnegative and low < 0:
        raise ValueError(negative_data_message(name, low, way_out))
    return tensor


def is_masked(X: Any) -> bool:
    """True for a ``numpy.ma`` masked array with at least one masked entry."""
    return isinstance(X, np.ma.MaskedArray) and bool(np.ma.getmaskarray(X).any())


def split_masked(X: Any, mask: Any) -> tuple[Any, Any]:
    """``(data, mask)`` of a ``numpy.ma`` masked array ``X``: its masked entries become
    missing ones (False in the returned mask, with ``mask``'s own missing entries); anything
    else is returned as it is. Masked entries' values never reach a learner."""
    if not isinstance(X, np.ma.MaskedArray):
        return X, mask
    observed = ~np.ma.getmaskarray(X)
    if mask is not None:
        mask = densify(mask)
        mask = np.asarray(mask.cpu() if backend_of(mask) == "pytorch" else mask)
        if mask.dtype != bool or mask.shape != observed.shape:  # said by _observed
            return np.ma.getdata(X), mask
        observed = observed & mask
    return np.ma.getdata(X), (None if observed.all() else observed)


def _refuse_masked(X: Any, name: str, owner: str, missing_hint: bool) -> None:
    """A masked array reaching the plain batch check would have its masked values learned
    as data (``np.asarray`` drops the mask): refuse it, with the ways out."""
    if not is_masked(X):
        return
    count = int(np.ma.getmaskarray(X).sum())
    way = ("pass missing='nan' with X.filled(np.nan), or mask=~np.ma.getmaskarray(X) with "
           "X.data" if missing_hint else
           f"{owner} cannot leave entries out: fill them (X.filled(value)) or drop the samples "
           f"that hold them")
    raise ValueError(f"{name} is a numpy masked array with {count} masked entr"
                     f"{'y' if count == 1 else 'ies'}, whose values would be learned as data; "
                     f"{way}")


def negative_data_message(name: str, low: float, way_out: str = "") -> str:
    """The refusal of negative data by a nonnegative model, with the way out when there is one
    (``way_out``: what to pass instead, from the learner that refuses)."""
    return (f"Negative values in data passed to {name} (min {low:.3g}): {name} has negative "
            f"entries, but the model is nonnegative" + (f"; {way_out}" if way_out else ""))


def _extremes(tensor: Any, backend: str) -> tuple[float, float]:
    """The smallest and largest entries: NaN if any entry is (both libraries propagate NaN),
    so both are finite exactly when every entry is (two passes, no temporaries). Host memory
    is read by numpy, whose reductions cost less per call than torch's."""
    view = numpy_view(tensor)
    if view is not None:
        return float(view.min()), float(view.max())
    with using(backend):
        return float(tl.min(tensor)), float(tl.max(tensor))


def _numbers_from_objects(X: np.ndarray, name: str) -> np.ndarray:
    """An object array of numbers as float64; anything else (strings, None, ragged rows) is a
    ``TypeError`` naming the argument, not numpy's conversion error."""
    try:
        return X.astype(np.float64)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{name} must hold real numbers, got an object array that does not "
                        f"convert to float ({error})") from None


def check_overflow(results: tuple, name: str = "X") -> None:
    """Refuse results that overflowed on finite (validated) data: its values are too large for
    the model's arithmetic (e.g. entries near 1e160, whose squares are inf). Without this, a
    score of such data is -inf and its codes NaN, with no error.

    Raises
    ------
    ValueError
        Some result holds NaN or infinite values; the message names the argument.
    """
    for result in results:
        with using(backend_of(result)):
            finite = bool(tl.all(tl.abs(result) < float("inf")))
        if not finite:
            raise ValueError(f"{name}: the values are too large for this model's arithmetic "
                             f"(its codes or losses overflow to inf or NaN); rescale the data")


def largest_entry(X: Any) -> float:
    """The largest absolute entry of a validated batch (dense or sparse; 0.0 when empty)."""
    values = X.data if hasattr(X, "tocsr") or hasattr(X, "nnz") else X
    if not int(np.prod(tuple(values.shape))):
        return 0.0
    with using(backend_of(values)):
        return float(tl.max(tl.abs(values)))


#: the batch this thread validated last and its largest absolute entry (one slot per thread)
_last_checked = threading.local()


def _remember_largest(tensor: Any, largest: float) -> None:
    """Keep :func:`check_batch`'s largest absolute entry of ``tensor`` for
    :func:`check_not_too_small`, which a step runs on the batch just validated: the scan is
    then made once per batch, not twice (it is a few percent of a small step). A weak
    reference: a later array that happens to reuse the address is not taken for it."""
    try:
        _last_checked.entry = (weakref.ref(tensor), largest)
    except TypeError:  # an array type without weak references: scanned again when asked
        _last_checked.entry = None


def largest_checked(X: Any) -> float:
    """:func:`largest_entry` of a validated batch, read from :func:`check_batch`'s scan when
    ``X`` is the batch this thread validated last (scanned otherwise)."""
    entry = getattr(_last_checked, "entry", None)
    if entry is not None and entry[0]() is X:
        return entry[1]
    return largest_entry(X)


def underflows(value: float, like: Any) -> bool:
    """Whether ``value``, a data scale or entry, is nonzero but so small for ``like``'s float
    dtype that its square falls below the smallest full-precision number (``tiny / eps``):
    losses and statistics are kept in squared data units, where such data vanish or lose
    their digits (float64 below ~1e-146, float32 below ~3e-16)."""
    info = finfo_of(like)
    return 0.0 < abs(value) and value * value < float(info.tiny) / float(info.eps)


def check_not_too_small(X: Any, name: str = "X", largest: float | None = None) -> None:
    """Refuse a validated batch whose largest entry :func:`underflows` its dtype: such data
    would be learned as zeros, or divided by a scale that squares to zero, without a word.
    ``largest``: that entry when it is known already (a batch spread over a cluster's
    workers, from its shards); ``X`` then only gives the dtype.

    Raises
    ------
    ValueError
        Naming ``name``, the largest entry and the way out (rescale).
    """
    if largest is None:
        largest = largest_checked(X)
    if underflows(largest, X):
        raise ValueError(f"{name}: the values are too small for this model's arithmetic "
                         f"(largest absolute entry {largest:.3g}, whose square loses its "
                         f"digits in {_dtype_name(X)}); rescale the data (multiply it by a "
                         f"constant). The learner's state was left unchanged")


#: room left for the products of codes and statistics with the data's squares
OVERFLOW_MARGIN = 1e6


def overflows(X: Any, power: int = 2) -> bool:
    """Whether ``power``-th powers of a validated batch's entries (squares: losses and
    statistics; fourth powers: squared gradients), summed over a sample, come within
    :data:`OVERFLOW_MARGIN` of the largest number of its dtype (in logarithms: the powers
    themselves may overflow)."""
    largest = largest_checked(X)
    if largest == 0.0:
        return False
    size = float(np.prod(tuple(X.shape[1:])))
    return not power * math.log(largest) + math.log(size * OVERFLOW_MARGIN) < \
        math.log(float(finfo_of(X).max))


def check_not_too_large(X: Any, name: str = "X", power: int = 2) -> None:
    """Refuse a validated batch that :func:`overflows` (at ``power``): its losses and
    objectives would be infinite (a batch learner's ``history_``) or its scale absurd.

    Raises
    ------
    ValueError
        Naming ``name``, the largest entry and the way out (rescale).
    """
    if overflows(X, power):
        powers = "squares" if power == 2 else f"{power}th powers"
        raise ValueError(f"{name}: the values are too large for this model's arithmetic "
                         f"(largest absolute entry {largest_entry(X):.3g}: its {powers}, summed "
                         f"over a sample, overflow {_dtype_name(X)}); rescale the data (divide "
                         f"it by a constant). The learner's state was left unchanged")


def _dtype_name(X: Any) -> str:
    return str(X.dtype).replace("torch.", "")


def json_mapping(value: Any, name: str) -> dict | None:
    """A mapping given as itself, None, or its JSON text (how checkpoints of older versions
    stored it); text that is not a JSON object is a ``ValueError`` naming the parameter."""
    if not isinstance(value, str):
        return value
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ValueError(f"{name} must be a dict or the JSON text of one, got {value!r}")
    return parsed


def is_sparse(X: Any) -> bool:
    """True for a scipy.sparse matrix/array or a pydata ``sparse`` array (``sparse.COO``, ...)."""
    if type(X).__module__.split(".")[0] == "sparse":
        return hasattr(X, "todense")
    import scipy.sparse

    return scipy.sparse.issparse(X)


def check_sparse_batch(
    X: Any,
    *,
    backend: str = "numpy",
    context: dict | None = None,
    sample_shape: tuple | None = None,
    nonnegative: bool = False,
    name: str = "X",
    owner: str = "this learner",
    way_out: str = "",
) -> Any:
    """Return a sparse batch ``(n_samples, n_features)`` as a canonical float CSR matrix.

    The counterpart of :func:`check_batch` that never densifies: checks run on the stored
    values only. Duplicate entries are summed (the result is a new matrix: ``X`` is never
    modified); the dtype is the one of ``context``, else float32/float64 kept, others float64.

    Parameters
    ----------
    X : scipy.sparse matrix or array, or 2-D pydata ``sparse`` array
    backend : str, default "numpy"
        Sparse batches exist on the NumPy backend only.
    context : dict, optional
        ``{"dtype": ...}`` of the learner's state.
    sample_shape : tuple, optional
        The fitted ``(n_features,)``.
    nonnegative : bool, default False
        Reject negative entries.
    name : str, default "X"
        Argument name for the messages.
    owner : str, default "this learner"
        Who expects the fitted shape, for the messages.
    way_out : str, default ""
        What to do instead, appended to the refusal of negative entries.

    Returns
    -------
    scipy.sparse.csr_matrix

    Raises
    ------
    TypeError
        Not a sparse array, non-real dtype, or a backend other than NumPy.
    ValueError
        Not 2-D, no samples, wrong number of features, NaN/inf values, negative entries when
        ``nonnegative``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse
    >>> V = check_sparse_batch(scipy.sparse.coo_matrix(np.array([[0, 2], [1, 0]])))
    >>> V.format, V.dtype, V.nnz
    ('csr', dtype('float64'), 2)
    """
    import scipy.sparse

    if not is_sparse(X):
        raise TypeError(f"{name} must be a sparse array, got {type(X).__name__}")
    if backend != "numpy":
        raise TypeError(f"sparse {name} needs the numpy backend (this learner runs on "
                        f"{backend}); densify it (X.todense()) or use backend='numpy'")
    if np.dtype(X.dtype).kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {X.dtype}")
    shape = tuple(X.shape)
    if len(shape) != 2:
        raise ValueError(f"sparse {name} must have shape (n_samples, n_features), got shape "
                         f"{shape}")
    _check_samples(shape, sample_shape, name, owner)
    dtype = np.dtype(X.dtype) if np.dtype(X.dtype) in (np.float32, np.float64) else np.float64
    dtype = np.dtype((context or {}).get("dtype", dtype))
    csr = scipy.sparse.csr_matrix(X.tocsr(), dtype=dtype, copy=True)  # pydata: via scipy
    csr.sum_duplicates()  # canonical: sorted indices, one value per entry
    if not np.all(np.isfinite(csr.data)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if nonnegative and csr.nnz and csr.data.min() < 0:
        raise ValueError(negative_data_message(name, float(csr.data.min()), way_out))
    return csr


def check_masked_batch(X: Any, mask: Any, *, missing: str | None, backend: str,
                       context: dict | None = None, sample_shape: tuple | None = None,
                       nonnegative: bool = False, name: str = "X",
                       owner: str = "this learner", way_out: str = "") -> tuple[Any, Any]:
    """``(X, mask)`` for a batch with missing entries; ``mask`` is None when nothing is missing.

    ``mask`` (boolean, X's shape, True = observed) and/or ``missing="nan"`` (NaN = missing)
    mark entries that must not influence anything: they are set to 0 in the returned ``X``
    (whatever they held, NaN included) and the returned mask is a float 0/1 tensor. Every
    sample needs at least one observed entry.
    """
    if missing not in (None, "nan"):
        raise ValueError(f"missing must be None or 'nan', got {missing!r}")
    X, mask = split_masked(X, mask)
    if mask is None and missing is None:
        return check_batch(X, backend=backend, context=context, sample_shape=sample_shape,
                           nonnegative=nonnegative, name=name, owner=owner,
                           way_out=way_out), None
    X = densify(X)
    shape = tuple(getattr(X, "shape", np.shape(X)))
    if len(shape) >= 2:  # no samples or no features: said as without missing entries
        _check_samples(shape, sample_shape, name, owner)
    observed = _observed(X, mask, missing, shape)
    zeroed = np.where(observed, X, 0.0) if backend_of(X) == "numpy" else _zero_missing(X, observed)
    tensor = check_batch(zeroed, backend=backend, context=context, sample_shape=sample_shape,
                         nonnegative=nonnegative, name=name, owner=owner, way_out=way_out)
    with using(backend):
        mask_tensor = as_tensor(observed, backend, **tl.context(tensor))
    return tensor, mask_tensor


def _observed(X: Any, mask: Any, missing: str | None, shape: tuple) -> np.ndarray:
    """Host boolean array of the observed entries, validated."""
    observed = np.ones(shape, dtype=bool)
    if mask is not None:
        mask = densify(mask)
        mask = np.asarray(mask.cpu() if backend_of(mask) == "pytorch" else mask)
        if mask.dtype != bool:
            raise TypeError(f"mask must be a boolean array (True = observed), got dtype "
                            f"{mask.dtype}")
        if mask.shape != shape:
            raise ValueError(f"mask must have the shape of X {shape}, got {mask.shape}")
        observed &= mask
    if missing == "nan":
        values = np.asarray(X.detach().cpu() if backend_of(X) == "pytorch" else X)
        if values.dtype.kind == "f":
            observed &= ~np.isnan(values)
    if len(shape) >= 2 and shape[0] > 0:
        empty = np.flatnonzero(~observed.reshape(shape[0], -1).any(axis=1))
        if empty.size:
            raise ValueError(f"sample(s) {empty[:5].tolist()} of X have no observed entry")
    return observed


def _zero_missing(X: Any, observed: np.ndarray) -> Any:
    """A backend tensor with its missing entries set to 0 (on its own device)."""
    import torch

    keep = torch.as_tensor(observed, device=X.device)
    return torch.where(keep, X, torch.zeros((), dtype=X.dtype, device=X.device))


def check_n_components(n_components: Any) -> int:
    """A positive integer number of atoms."""
    if isinstance(n_components, bool) or not isinstance(n_components, numbers.Integral):
        raise TypeError(f"n_components must be a positive int, got {n_components!r}")
    if n_components < 1:
        raise ValueError(f"n_components must be >= 1, got {n_components}")
    return int(n_components)


def _check_finite_real(value: Any, name: str) -> None:
    # the type test both number checks start with (bool is an int, but never a number here)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise TypeError(f"{name} must be a finite real number, got {value!r}")


def check_nonnegative_number(value: Any, name: str) -> float:
    """A finite real number >= 0."""
    _check_finite_real(value, name)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return float(value)


def check_positive_number(value: Any, name: str) -> float:
    """A finite real number > 0."""
    _check_finite_real(value, name)
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return float(value)


def check_positive_int(value: Any, name: str) -> int:
    """An integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def check_sample_weight(sample_weight: Any, n_samples: int) -> np.ndarray | None:
    """Nonnegative finite weights, one per sample, not all zero."""
    if sample_weight is None:
        return None
    weights = np.asarray(densify(sample_weight) if backend_of(sample_weight) == "numpy"
                         else sample_weight.cpu().numpy(), dtype=float)
    if weights.shape != (n_samples,):
        raise ValueError(f"sample_weight must have shape ({n_samples},), got {weights.shape}")
    if not np.all(np.isfinite(weights)) or np.any(weights < 0) or weights.sum() == 0:
        raise ValueError("sample_weight must be finite, nonnegative and not all zero")
    return weights


# -- parameters, declared as data --------------------------------------------------------------
#
# Every learner declares ``_parameter_constraints``: for each parameter of ``__init__``, the list
# of what it may be (any one suffices). :func:`validate_params` checks them all, in one place,
# with messages that name the parameter, what it may be, and what it was given.


class Constraint:
    """One thing a parameter may be."""

    def accepts_type(self, value: Any) -> bool:
        """Whether ``value`` has a type this constraint is about."""
        raise NotImplementedError

    def accepts(self, value: Any) -> bool:
        return self.accepts_type(value)

    def describe(self) -> str:
        raise NotImplementedError


#: integers beyond int64 are refused (no array, count or size of the library can hold them)
_LARGEST_INT = 2**63 - 1


class Interval(Constraint):
    """A number of ``kind`` (``"int"`` or ``"real"``) in an interval; NaN never is.

    Examples
    --------
    >>> Interval("real", 0, None, closed="neither").describe()
    '> 0'
    >>> Interval("int", 1, None).describe()
    '>= 1 (an integer)'
    """

    def __init__(self, kind: str, low: float | None = None, high: float | None = None,
                 closed: str = "both"):
        self.kind, self.low, self.high, self.closed = kind, low, high, closed

    def accepts_type(self, value: Any) -> bool:
        if isinstance(value, bool):
            return False
        if self.kind == "int":
            return isinstance(value, numbers.Integral)
        return isinstance(value, numbers.Real)

    def accepts(self, value: Any) -> bool:
        if not self.accepts_type(value):
            return False
        if isinstance(value, numbers.Integral):  # no float of it (10**400 overflows one)
            if abs(int(value)) > _LARGEST_INT:
                return False
        elif not np.isfinite(float(value)):
            return False
        low_ok = self.low is None or (value >= self.low if self.closed in ("both", "left")
                                      else value > self.low)
        high_ok = self.high is None or (value <= self.high if self.closed in ("both", "right")
                                        else value < self.high)
        return bool(low_ok and high_ok)

    def describe(self) -> str:
        bounds = []
        if self.low is not None:
            bounds.append(f"{'>=' if self.closed in ('both', 'left') else '>'} {self.low:g}")
        if self.high is not None:
            bounds.append(f"{'<=' if self.closed in ('both', 'right') else '<'} {self.high:g}")
        if self.kind == "int":
            return f"{' and '.join(bounds)} (an integer)" if bounds else "an integer"
        return " and ".join(bounds) if bounds else "a finite number"


class Options(Constraint):
    """One of a set of strings."""

    def __init__(self, *options: str):
        self.options = options

    def accepts_type(self, value: Any) -> bool:
        return isinstance(value, str)

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.options

    def describe(self) -> str:
        return "one of " + ", ".join(repr(option) for option in self.options)


class Instance(Constraint):
    """An instance of one of ``types`` (arrays, callables, schedules, ...), described as
    ``description``."""

    def __init__(self, description: str, *types: type, check: Any = None):
        self.description, self.types, self.check = description, types, check

    def accepts_type(self, value: Any) -> bool:
        if self.check is not None:
            return bool(self.check(value))
        return isinstance(value, self.types)

    def describe(self) -> str:
        return self.description


BOOLEAN = Instance("True or False", check=lambda value: value is True or value is False)
NONE = Instance("None", check=lambda value: value is None)
CALLABLE = Instance("a callable", check=callable)
ARRAY = Instance("an array", check=lambda value: hasattr(value, "shape") and
                 not isinstance(value, (str, bytes)))
SEQUENCE = Instance("a list of arrays", list, tuple)
RANDOM_STATE = [Interval("int", 0, None), NONE,
                Instance("a numpy Generator", np.random.Generator),
                Instance("a numpy RandomState", np.random.RandomState)]
BACKEND = [Options("numpy", "pytorch"), NONE]


def generator_of(random_state: Any) -> np.random.Generator:
    """The generator a learner draws from: a seed's, a Generator given (drawn from directly),
    or, for a ``RandomState``, one seeded by a draw from it (as scikit-learn's estimators draw
    their seeds: the draw advances it). The learner's own generator is a Generator, whose
    state checkpoints store."""
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(int(random_state.randint(np.iinfo(np.int32).max)))
    return np.random.default_rng(random_state)


def bit_generator_of(random_state: Any) -> Any:
    """The bit generator that :func:`generator_of` draws from, or advances, for
    ``random_state``: a Generator's own, a ``RandomState``'s (its seed draw advances it); None
    for a seed or None (a fresh generator shares nothing with the caller). Saving its ``state``
    and setting it back undoes what drawing did to the caller's object."""
    if isinstance(random_state, np.random.Generator):
        return random_state.bit_generator
    if isinstance(random_state, np.random.RandomState):
        return random_state._bit_generator
    return None


def refuse_set_by_hand(set_by_hand: Any, role: str, way_out: str, setting: str) -> None:
    """Refuse the parameters of ``set_by_hand`` (those set to another value than their default
    and the paper's, read from the learner's signature) where ``setting`` leaves them nothing
    to do: the error names the parameter, its ``role``, the ``way_out`` and the setting."""
    if set_by_hand:  # the first one named
        name, value = next(iter(set_by_hand.items()))
        raise ValueError(f"{name} {role}: leave {name} at its default or {way_out}, got "
                         f"{name}={value!r} with {setting}")


def refuse_unknown_keys(given: Any, valid: Any, what: str, noun: str,
                        owner: str | None = None) -> None:
    """Refuse, by name, each key of the dict ``given`` that ``valid`` does not hold: a key
    that ``what`` takes no such setting of is an error, never ignored (``noun``: what the
    valid keys are, in the message; ``owner``: the parameter the dict is, its prefix).

    Examples
    --------
    >>> refuse_unknown_keys({"lam2": 0.1}, ("lam", "nu"), "formulation 'odl'", "parameters")
    Traceback (most recent call last):
    ...
    ValueError: 'lam2' does not apply to formulation 'odl': its parameters are ['lam', 'nu']
    """
    unknown = [key for key in given if key not in valid]
    if unknown:
        raise ValueError(f"{owner + ': ' if owner else ''}{', '.join(map(repr, unknown))} "
                         f"{'does' if len(unknown) == 1 else 'do'} not apply to {what}: its "
                         f"{noun} are {list(valid)}")


def keyed_settings(params: Any, defaults: Any, what: str, name: str,
                   constraints: dict) -> dict:
    """``defaults`` updated by ``params``, the dict (or None) a learner's parameter ``name``
    holds: a key that ``defaults`` lacks is refused by name (it does not apply to ``what``),
    and the values are checked against ``constraints``.

    Examples
    --------
    >>> rho = {"rho": [Interval("real", 0, None, closed="neither")]}
    >>> keyed_settings({"rho": 2.0}, {"rho": 1.0}, "solver='admm'", "solver_params", rho)
    {'rho': 2.0}
    >>> keyed_settings({"kappa": 0.5}, {"rho": 1.0}, "solver='admm'", "solver_params", rho)
    Traceback (most recent call last):
    ...
    ValueError: solver_params: 'kappa' does not apply to solver='admm': its settings are ['rho']
    """
    params = {} if params is None else params
    if not isinstance(params, Mapping):
        raise TypeError(f"{name} must be a dict or None, got {params!r}")
    refuse_unknown_keys(params, defaults, what, "settings", name)
    validate_params(dict(params), constraints, name)
    return {**defaults, **params}


def validate_params(params: dict, constraints: dict, owner: str) -> None:
    """Check every parameter against its declared constraints.

    Raises ``TypeError`` when no constraint is about the value's type, ``ValueError`` when one
    is but the value is out of range; the message names the parameter, what it may be and what
    it was given.

    Examples
    --------
    >>> validate_params({"alpha": -1.0}, {"alpha": [Interval("real", 0, None)]}, "Model")
    Traceback (most recent call last):
    ...
    ValueError: alpha must be >= 0, got -1.0 (Model)
    """
    for name, value in params.items():
        if name not in constraints:
            raise TypeError(f"{owner} declares no constraint for its parameter {name!r}")
        allowed = constraints[name]
        if any(constraint.accepts(value) for constraint in allowed):
            continue
        expected = " or ".join(constraint.describe() for constraint in allowed)
        kind = ValueError if any(c.accepts_type(value) for c in allowed) else TypeError
        raise kind(f"{name} must be {expected}, got {value!r}{_beyond_int64(value)} ({owner})")


def _beyond_int64(value: Any) -> str:
    """Why an integer within every stated bound is refused: beyond what arrays can count."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and \
            abs(int(value)) > _LARGEST_INT:
        return ", beyond the largest supported integer 2**63 - 1"
    return ""


def check_state_memory(n_values: float, dtype: Any, n_components: int,
                       device: Any = None) -> None:
    """Refuse, before anything is allocated, a state of ``n_values`` numbers of ``dtype``
    larger than the memory that would hold it (the host's, or a CUDA ``device``'s): numpy's
    ``MemoryError`` or torch's allocator error would come from deep inside the first step.

    Raises
    ------
    ValueError
        Naming ``n_components``, the bytes needed and available, and the way out.
    """
    try:
        itemsize = np.dtype(dtype).itemsize  # numpy dtypes and scalar types
    except TypeError:  # a torch dtype
        itemsize = np.dtype(str(dtype).replace("torch.", "")).itemsize
    need = float(n_values) * itemsize
    available, where = _memory_of(device)
    if available and need > available:
        raise ValueError(f"n_components={n_components}: the learner's state would take "
                         f"{_bytes(need)}, more than the {_bytes(available)} of {where}; use "
                         f"a smaller n_components")


def _memory_of(device: Any) -> tuple[float, str]:
    """``(bytes, description)`` of the memory that holds a state on ``device`` (0 when not
    known)."""
    if device is not None and getattr(device, "type", "cpu") == "cuda":
        import torch

        return float(torch.cuda.get_device_properties(device).total_memory), f"{device}"
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # not a POSIX system
        return 0.0, ""
    return float(pages * size), "this machine's memory"


def _bytes(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} PiB"
