"""The learners' side of :mod:`tensorstream.modes`: a batch regrouped at the boundary.

:func:`regroup` reshapes an unlabelled batch by the ``modes`` a learner is given (or the grouping
it was fitted with); it lives with the learners, not in :mod:`tensorstream.modes`, because it asks
the registry whether a learner factorizes matrices, and the registry is the learners' layer.
"""

from __future__ import annotations

from typing import Any

from ..core.validation import as_array
from ..modes import ArrayLayout
from .registry import entry


def _is_matrix_learner(learner: Any) -> bool:
    """Whether ``learner`` factorizes matrices (the registry says so); a class that is not
    registered is taken to learn CP modes."""
    try:
        return entry(type(learner).__name__).matrix
    except (KeyError, ValueError):
        return False


def regroup(learner: Any, X: Any, mask: Any, modes: Any) -> tuple[Any, Any, Any]:
    """``(X, mask, layout)``: an unlabelled batch regrouped by ``modes`` or by the grouping
    the learner was fitted with (``array_layout_``); labelled input and learners without a
    grouping are passed through with ``layout`` None. Nothing is stored here."""
    fitted = learner.__dict__.get("array_layout_")
    if isinstance(X, _xarray_types()):
        if fitted is not None:
            raise TypeError(f"this learner was fitted on an array grouped by modes "
                            f"{fitted.text!r}; pass an array, not an xarray.DataArray")
        return X, mask, None
    if modes is None and fitted is None:
        return X, mask, None
    X = as_array(X)
    if not hasattr(X, "shape") or len(X.shape) < 2:
        raise ValueError(f"modes: X must have shape (n_samples, I_1, ..., I_n) to be "
                         f"regrouped, got {getattr(X, 'shape', type(X).__name__)}")
    layout = fitted
    if modes is not None:
        layout = ArrayLayout.from_modes(modes, X.shape[1:])
        if fitted is not None and layout != fitted:
            raise ValueError(f"modes {layout.text!r} for samples {layout.sample_shape} differ "
                             f"from the fitted {fitted.text!r} for samples "
                             f"{fitted.sample_shape}; call fit to start anew with them")
        if len(layout.groups) > 1 and _is_matrix_learner(learner):
            every_axis = tuple(range(len(X.shape) - 1))
            raise ValueError(f"modes {layout.text!r} make {len(layout.groups)} modes, but "
                             f"{type(learner).__name__} factorizes matrices (one feature "
                             f"mode): group every axis into one, modes=[{every_axis}], or use "
                             f"OnlineCPDL for several modes")
    X = layout.apply(X)
    if mask is not None and hasattr(mask, "shape") and not isinstance(mask, _xarray_types()):
        mask = layout.apply(as_array(mask))
    return X, mask, layout


def _xarray_types() -> tuple:
    import xarray as xr
    return (xr.DataArray, xr.Dataset)
