"""Reshaped modes for plain arrays: which axes of a sample form each CP mode.

A sample of shape ``(8, 8, 3)`` (an image patch: y, x, channel) can be learned as three modes,
as ``(8 * 8, 3)`` (joint spatial features, one colour mode) or as one vector of 192 numbers:
the grouping changes what is learned. ``modes`` says it the same way for every input:

* arrays (numpy, torch, dask, ``sparse.COO``, streams of them): axis groups of the *sample*,
  the sample axis excluded, e.g. ``[(0, 1), 2]``; negative axes count from the end;
* xarray DataArrays: dim names, e.g. ``[("y", "x"), "channel"]`` (:mod:`tensorstream.labels`);
* both: the command line's text, e.g. ``"0,1;2"`` or ``"y,x;channel"`` (``;`` between modes,
  ``,`` between the axes stacked into one mode).

:func:`as_modes` parses all of these, :class:`ArrayLayout` reshapes batches and
:func:`unstack_loadings` gives each learned loading its group's shape back.

Examples
--------
>>> import numpy as np
>>> layout = ArrayLayout.from_modes([(0, 1), 2], (8, 8, 3))
>>> layout.shape
(64, 3)
>>> layout.apply(np.zeros((5, 8, 8, 3))).shape
(5, 64, 3)
>>> [U.shape for U in unstack_loadings([np.zeros((64, 4)), np.zeros((3, 4))], layout)]
[(8, 8, 4), (3, 4)]
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["ArrayLayout", "as_modes", "format_groups", "unstack_loadings"]


def _parse_text(text: str) -> list[tuple[str, ...]]:
    """``"a,b;c"`` as ``[("a", "b"), ("c",)]``; malformed text names the syntax."""
    groups = [tuple(p.strip() for p in part.split(",")) for part in text.split(";")]
    if not all(all(groups_part) for groups_part in groups):
        raise ValueError(f"modes: cannot parse {text!r}; expected e.g. '0,1;2' or "
                         f"'y,x;channel' (';' between modes, ',' between stacked axes)")
    return groups


def as_modes(modes: Any, axes: Sequence[str] | int) -> list:
    """One parser for every way of writing ``modes``.

    Parameters
    ----------
    modes : str, sequence or mapping
        Axis groups of a sample (``[(0, 1), 2]``, negative axes allowed), dim names
        (``[("y", "x"), "channel"]``, or a ``{name: dims}`` mapping), or text (``"0,1;2"``,
        ``"y,x;channel"``, ``"space=lat,lon;variable"``).
    axes : int or sequence of str
        The number of axes of one sample (array input), or the dim names of a DataArray
        besides its sample dim.

    Returns
    -------
    list
        For arrays: one tuple of non-negative axes per mode. For dims: the list (or dict) of
        entries that :class:`tensorstream.labels.ModeLayout` takes.

    Raises
    ------
    ValueError
        Naming unknown, repeated or missing axes, and text it cannot parse.
    TypeError
        For a ``modes`` that is neither text nor a sequence of axes or dims.
    """
    if isinstance(axes, int):
        return _array_groups(modes, axes)
    if isinstance(modes, str):
        from .labels import parse_modes  # dims may be named in the text: the labels' parser
        return parse_modes(modes)
    return modes


def _array_groups(modes: Any, ndim: int) -> list[tuple[int, ...]]:
    """Axis groups of a sample of ``ndim`` axes, checked: every axis exactly once."""
    if isinstance(modes, str):
        modes = [tuple(_axis_of_text(a, modes) for a in group) for group in _parse_text(modes)]
    if not isinstance(modes, Sequence) or isinstance(modes, (bytes, str)):
        raise TypeError(f"modes: expected a list of axis groups such as [(0, 1), 2] or the "
                        f"text '0,1;2', got {type(modes).__name__}")
    if not modes:
        raise ValueError("modes is empty: give at least one axis group, or modes=None")
    groups = [_group(entry, ndim) for entry in modes]
    seen: dict[int, tuple] = {}
    for group in groups:
        for axis in group:
            if axis in seen:
                raise ValueError(f"modes: axis {axis} is listed twice (in {seen[axis]} and in "
                                 f"{group}); list each axis of the sample once")
            seen[axis] = group
    missing = [a for a in range(ndim) if a not in seen]
    if missing:
        raise ValueError(f"modes: axes {missing} of the sample (of {ndim} axes, the sample "
                         f"axis excluded) are in no group; add them to a mode")
    return groups


def _axis_of_text(text: str, whole: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise TypeError(f"modes: {text!r} in {whole!r} is a dim name, but the data is an "
                        f"unlabelled array: give axis numbers ('0,1;2'), or pass an "
                        f"xarray.DataArray with sample_dim=") from None


def _group(entry: Any, ndim: int) -> tuple[int, ...]:
    """One mode entry (an axis or a tuple of axes) as non-negative axes."""
    axes = (entry,) if not isinstance(entry, Iterable) else tuple(entry)
    if not axes:
        raise ValueError("modes: a mode must hold at least one axis, got an empty group")
    out = []
    for axis in axes:
        if isinstance(axis, bool) or not isinstance(axis, int) and not hasattr(axis,
                                                                             "__index__"):
            raise TypeError(f"modes: axes are integers for array input, got {axis!r}; dim "
                            f"names need an xarray.DataArray with sample_dim=")
        axis = int(axis)
        if not -ndim <= axis < ndim:
            raise ValueError(f"modes: unknown axis {axis}; a sample has {ndim} axes "
                             f"(0 to {ndim - 1}, or -{ndim} to -1; the sample axis is "
                             f"excluded)")
        out.append(axis % ndim)
    return tuple(out)


def format_groups(groups: Sequence[Sequence[int]]) -> str:
    """The text (``"0,1;2"``) that :func:`as_modes` reads back as ``groups``."""
    return ";".join(",".join(str(a) for a in group) for group in groups)


@dataclasses.dataclass(frozen=True)
class ArrayLayout:
    """How the samples of an unlabelled array are regrouped into CP modes.

    Parameters
    ----------
    sample_shape : tuple of int
        The shape of one sample as given (the sample axis excluded).
    groups : tuple of tuple of int
        The sample's axes that form each mode, in order.
    """

    sample_shape: tuple[int, ...]
    groups: tuple[tuple[int, ...], ...]

    @classmethod
    def from_modes(cls, modes: Any, sample_shape: Sequence[int]) -> ArrayLayout:
        """The layout of ``modes`` (anything :func:`as_modes` reads) for samples of
        ``sample_shape``."""
        sample_shape = tuple(int(n) for n in sample_shape)
        groups = _array_groups(modes, len(sample_shape))
        return cls(sample_shape, tuple(groups))

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of one regrouped sample: one size per mode."""
        return tuple(math.prod(self.sample_shape[a] for a in g) for g in self.groups)

    @property
    def group_shapes(self) -> tuple[tuple[int, ...], ...]:
        """Each mode's axes' sizes (what :func:`unstack_loadings` restores)."""
        return tuple(tuple(self.sample_shape[a] for a in g) for g in self.groups)

    @property
    def text(self) -> str:
        """The grouping as text, e.g. ``"0,1;2"`` (how a checkpoint stores it)."""
        return format_groups(self.groups)

    def _order(self) -> tuple[int, ...]:
        return (0, *(1 + a for g in self.groups for a in g))

    def apply(self, X: Any) -> Any:
        """A batch ``(n, *sample_shape)`` as ``(n, *shape)`` (any array with ``reshape``)."""
        if tuple(X.shape[1:]) != self.sample_shape:
            raise ValueError(f"X has samples of shape {tuple(X.shape[1:])}, but modes "
                             f"{self.text!r} were set for samples of shape {self.sample_shape}")
        X = _permuted(X, self._order())
        return X.reshape((X.shape[0], *self.shape))

    def restore(self, X: Any) -> Any:
        """Undo :meth:`apply`: regrouped samples ``(n, *shape)`` in the given axes' order."""
        order = self._order()
        grouped_shape = tuple(self.sample_shape[a - 1] for a in order[1:])
        X = X.reshape((X.shape[0], *grouped_shape))
        inverse = tuple(sorted(range(len(order)), key=order.__getitem__))
        return _permuted(X, inverse)


def _permuted(X: Any, order: tuple[int, ...]) -> Any:
    """``X`` with its axes in ``order`` (torch's ``permute``, otherwise ``transpose``)."""
    if order == tuple(range(len(order))):
        return X
    if hasattr(X, "permute"):  # torch: transpose swaps two axes only
        return X.permute(*order)
    return X.transpose(order)


def unstack_loadings(loadings: Sequence[Any], layout: ArrayLayout) -> list:
    """Each loading of a regrouped fit in its group's shape.

    Parameters
    ----------
    loadings : list of arrays of shape (I_k, R)
        A learner's ``loadings_`` after ``fit(X, modes=...)`` on an array.
    layout : ArrayLayout
        The learner's ``array_layout_``.

    Returns
    -------
    list
        Loading ``k`` of shape ``(*sizes of group k's axes, R)``: for ``modes=[(0, 1), 2]``
        on patches ``(8, 8, 3)``, an ``(8, 8, R)`` spatial atom and a ``(3, R)`` colour one.
    """
    if len(loadings) != len(layout.groups):
        raise ValueError(f"loadings: {len(loadings)} loadings for the {len(layout.groups)} "
                         f"modes of layout {layout.text!r}")
    return [U.reshape((*shape, U.shape[-1])) for U, shape in zip(loadings, layout.group_shapes)]


# --------------------------------------------------------------------------------------------
# checkpoints (regrouping a learner's batches is the learners' side: learners/_modes.py)


def encode_array_layout(layout: ArrayLayout) -> dict:
    """JSON for a checkpoint's metadata."""
    return {"sample_shape": list(layout.sample_shape),
            "groups": [list(g) for g in layout.groups]}


def decode_array_layout(meta: dict, sample_shape: tuple) -> ArrayLayout:
    """The layout :func:`encode_array_layout` wrote, checked against the loadings' shape."""
    layout = ArrayLayout.from_modes([tuple(g) for g in meta["groups"]],
                                    tuple(meta["sample_shape"]))
    if layout.shape != tuple(sample_shape):
        raise ValueError(f"the grouping {layout.text!r} of samples {layout.sample_shape} makes "
                         f"modes {layout.shape}, but the loadings have {tuple(sample_shape)}")
    return layout
