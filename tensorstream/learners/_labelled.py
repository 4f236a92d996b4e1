"""Labelled input at a learner's boundary: ``xarray.DataArray`` batches laid out as samples
(:class:`~..labels.ModeLayout`), masks matched to their data by label, and results given back
in the form the data came in.

Plain arrays regrouped by ``modes`` are the business of :mod:`._modes`; this module handles
the labelled kind and the masks of both (a DataFrame's by column name).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from ..core.backend import backend_of, to_numpy
from ..core.validation import as_array, densify, feature_names, is_data_frame, is_sparse
from ..labels import ModeLayout, aligned_samples, check_unique_labels, from_samples, to_samples


def is_labelled(X: Any) -> bool:
    """True for an ``xarray.DataArray`` (labelled input)."""
    return isinstance(X, xr.DataArray)


def make_layout(da: Any, sample_dim: str | None, modes: Any) -> ModeLayout:
    """The mode layout of a DataArray, with a clear error when ``sample_dim`` is missing or
    a feature dim repeats a label."""
    if sample_dim is None:
        raise ValueError(f"sample_dim is required for xarray.DataArray input (dims {da.dims})")
    layout = ModeLayout.from_dataarray(da, sample_dim, modes).check_factor_names()
    check_unique_labels(da, [dim for mode in layout.modes for dim in mode.dims])
    return layout


def _mask_of_frame(mask: Any, X: Any) -> Any:
    """A mask given as a DataFrame (``X.notna()``) as an array, its columns matched to a
    DataFrame ``X``'s by name (in another order they would mark other entries, silently)."""
    if not is_data_frame(mask):
        return mask
    # a frame whatever its column labels (pd.DataFrame(array).notna() has integers): fit takes
    # its batches by row position, which label-indexes a DataFrame's columns
    names, columns = feature_names(mask), feature_names(X)
    if names is not None and columns is not None and (
            len(names) != len(columns) or np.any(names != columns)):
        raise ValueError(f"mask has the columns {list(names)}, X has {list(columns)}: a "
                         f"DataFrame mask must name X's columns in X's order")
    return as_array(mask)


def _labelled_like(mask: Any, X: Any) -> Any:
    """The mask of the labelled data ``X``: a DataArray as it is, a plain array of ``X``'s
    shape (its dims in ``X``'s order) labelled like ``X``; None stays None."""
    if mask is None or is_labelled(mask):
        return mask
    if _shape_of(mask) != tuple(X.shape):
        raise ValueError(f"mask must be a DataArray, or an array of X's shape {tuple(X.shape)} "
                         f"(dims {tuple(X.dims)}), got shape {_shape_of(mask)}")
    if is_sparse(mask):
        mask = densify(mask)
    elif backend_of(mask) == "pytorch" or not hasattr(mask, "shape"):  # dask stays lazy
        mask = to_numpy(mask)
    return xr.DataArray(mask, dims=X.dims, coords=X.coords)


def _shape_of(array: Any) -> tuple:
    """The shape of an array of any kind (numpy, torch, dask, sparse) or nested list."""
    return tuple(array.shape) if hasattr(array, "shape") else np.shape(array)


class LabelledInput:
    """A learner's labelled batches as samples-first arrays (``layout_`` keeps the first
    batch's layout), and the way back to labels."""

    def _unlabel(self, X: Any, sample_dim: str | None, modes: Any) -> tuple[Any, Any]:
        """``(samples-first array, layout)`` of ``X``; the layout is None for unlabelled input.

        The first labelled batch defines the layout; later batches must match it (same dims and
        feature labels). Nothing is stored here: ``partial_fit`` keeps the layout on success.
        """
        layout = self.__dict__.get("layout_")
        X = as_array(X)
        if not is_labelled(X):
            if sample_dim is not None:  # modes of an array were applied by regroup
                raise TypeError("sample_dim applies to xarray.DataArray input only; for an "
                                "array the samples lie along its first axis")
            if layout is not None:
                raise TypeError(f"this learner was fitted on labelled data (dims "
                                f"{layout.dims}); pass an xarray.DataArray")
            return X, None
        if layout is None or sample_dim is not None or modes is not None:
            if sample_dim is None:  # not `or`: 0 is a valid dim name
                sample_dim = getattr(layout, "sample_dim", None)
            fresh = make_layout(X, sample_dim, modes)
            if layout is not None and (fresh.mode_names, fresh.shape) != (layout.mode_names,
                                                                         layout.shape):
                raise ValueError(f"modes {fresh.mode_names} with shape {fresh.shape} differ from "
                                 f"the fitted {layout.mode_names} with shape {layout.shape}")
            layout = layout or fresh
        return to_samples(X, layout), layout

    def _unlabel_mask(self, mask: Any, layout: Any, X: Any) -> Any:
        """A labelled mask laid out like its labelled data ``X`` (``layout`` is X's, None for
        unlabelled data): features matched by name and label, samples by X's sample labels."""
        if mask is not None and is_labelled(mask) and layout is None:
            raise TypeError("a labelled mask needs labelled data")
        if mask is None or layout is None:
            return mask
        mask = _labelled_like(mask, X)
        return to_samples(aligned_samples(mask, X, layout.sample_dim), layout)

    def _as_given(self, X: Any, layout: Any) -> Any:
        """The function that gives a result of the checked samples' shape the form ``X`` came
        in: the axes as given of a regrouped array (``array_layout_``), the labels of a
        DataArray (``layout``, from :meth:`_checked_input`)."""
        grouping = self.__dict__.get("array_layout_")
        labels = None if layout is None else layout.with_samples(X)

        def as_given(result: Any) -> Any:
            if grouping is not None:
                result = grouping.restore(result)
            return result if labels is None else from_samples(result, labels)

        return as_given
