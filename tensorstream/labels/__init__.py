"""Labelled modes: xarray DataArrays in, CP-shaped arrays for the learners, labelled factors out.

A learner sees a batch as a plain array of shape ``(n_samples, I_1, ..., I_n)``. A user has an
:class:`xarray.DataArray` with named dims and coordinates. This module is the boundary between
the two, and the only place where names are turned into positions and back:

* a *mode specification* ``modes=[("lat", "lon"), "variable"]`` says which dims form each CP
  mode; a tuple **stacks** its dims into one mode (C order over the listed dims, as
  :meth:`xarray.DataArray.stack` and :func:`numpy.reshape` do), so that the joint features of
  those dims are learned (the paper's "reshaping");
* :class:`ModeLayout` records, once, everything needed to go back: the sample dim and its
  coords, each mode's dims, sizes and coords (MultiIndexes and non-dimension coords included),
  and the array's name and attrs;
* :func:`to_samples` / :func:`from_samples` convert data, :func:`factors_to_dataset` /
  :func:`dataset_to_loadings` convert learned loadings, :func:`codes_to_dataarray` converts codes;
* :func:`stack_modes` / :func:`unstack_modes` and :func:`unfold` / :func:`fold` are the labelled
  reshapes, and round-trip exactly.

Labels are matched by value, not by position: a batch whose coordinates along a feature dim
are a permutation of the layout's is reordered to the layout's order; other labels are an error.

The modules: :mod:`.specs` (mode specifications: parsed, formatted, checked; the label helpers),
:mod:`.layout` (the layout), :mod:`.reshape` (data in and out, the labelled reshapes),
:mod:`.factors` (factors and codes in and out). The public names are importable from here.
"""

from .factors import (
    aligned_samples,
    codes_from_dataarray,
    codes_to_dataarray,
    dataset_to_loadings,
    factors_to_dataset,
)
from .layout import ModeLayout
from .reshape import (
    fold,
    from_samples,
    stack_modes,
    to_samples,
    unfold,
    unstack_modes,
)
from .specs import COMPONENT_DIM, Mode, check_unique_labels, format_modes, parse_modes

__all__ = [
    "COMPONENT_DIM",
    "Mode",
    "ModeLayout",
    "aligned_samples",
    "check_unique_labels",
    "codes_from_dataarray",
    "codes_to_dataarray",
    "dataset_to_loadings",
    "factors_to_dataset",
    "fold",
    "format_modes",
    "from_samples",
    "parse_modes",
    "stack_modes",
    "to_samples",
    "unfold",
    "unstack_modes",
]
