"""The ``DataArray.tensorstream`` accessor: labelled learning and reshapes as array methods.

Importing :mod:`tensorstream` registers it::

    import tensorstream
    model = da.tensorstream.fit(8, sample_dim="time", modes=[("lat", "lon"), "variable"])
    model.factors_                       # labelled loadings
    da.tensorstream.unfold("variable")   # a labelled mode unfolding

Every method is a thin wrapper of the functions in :mod:`tensorstream.labels` and of the
learners, so the two spellings give identical results.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import xarray as xr

from .learners.registry import learner_class

if TYPE_CHECKING:  # imported where used: labels brings TensorLy
    from .labels import ModeLayout

__all__ = ["TensorStreamAccessor"]


@xr.register_dataarray_accessor("tensorstream")
class TensorStreamAccessor:
    """tensorstream methods of an :class:`xarray.DataArray` (``da.tensorstream.<method>``).

    Parameters
    ----------
    da : xarray.DataArray

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> import tensorstream.accessor
    >>> da = xr.DataArray(np.random.default_rng(0).random((40, 3, 4, 2)),
    ...                   dims=("time", "lat", "lon", "variable"))
    >>> model = da.tensorstream.fit(2, sample_dim="time", modes=[("lat", "lon"), "variable"],
    ...                             batch_size=10, max_iter=2, random_state=0)
    >>> model.factors_["lat_lon_loadings"].dims
    ('lat', 'lon', 'component')
    """

    def __init__(self, da: xr.DataArray):
        self._da = da

    def fit(self, n_components: int, sample_dim: str, modes: Any = None, *,
            model: str | type = "ocpdl", n_steps: int | None = None, **params: Any) -> Any:
        """Fit a learner to the array's samples and return it.

        Parameters
        ----------
        n_components : int
            Number of atoms ``R``.
        sample_dim : str
            The dim along which samples lie.
        modes : list or dict, optional
            One entry per CP mode: a dim, or a tuple of dims stacked into one mode (their joint
            features are learned). Default: every other dim is its own mode.
        model : str or class, default "ocpdl"
            A name or class name of :mod:`tensorstream.learners.registry` (``"ocpdl"``,
            ``"nmf"``, ``"OnlineNMF"``, ...) or a learner class.
        n_steps : int, optional
            Stop after this many mini-batches.
        **params
            Hyper-parameters of the learner (``alpha``, ``batch_size``, ``max_iter``,
            ``random_state``, ...).

        Returns
        -------
        learner
            Fitted; ``learner.factors_`` holds the labelled loadings and
            ``learner.transform(da)`` the labelled codes.

        Examples
        --------
        >>> import numpy as np, xarray as xr
        >>> import tensorstream.accessor
        >>> da = xr.DataArray(np.random.default_rng(0).random((30, 4, 3)), dims=("t", "x", "y"))
        >>> model = da.tensorstream.fit(2, "t", max_iter=1, random_state=0)
        >>> model.transform(da).dims
        ('t', 'component')
        """
        cls = learner_class(model)
        learner = cls(n_components=n_components, **params)
        parameters = inspect.signature(learner.fit).parameters.values()
        if any(p.name == "sample_dim" or p.kind is p.VAR_KEYWORD for p in parameters):
            return learner.fit(self._da, sample_dim=sample_dim, modes=modes, n_steps=n_steps)
        # a finite-data or batch learner of matrices: samples first, no modes, no steps
        name = getattr(cls, "__name__", str(model))
        for option, value in (("modes", modes), ("n_steps", n_steps)):
            if value is not None:
                raise ValueError(f"{option} does not apply to {name}, which factorizes a "
                                 f"matrix in passes over all its samples")
        if self._da.ndim != 2:
            raise ValueError(f"{name} factorizes matrices: give a 2-D DataArray (samples "
                             f"along {sample_dim!r}, features along the other dim), got dims "
                             f"{self._da.dims}")
        return learner.fit(self._da.transpose(sample_dim, ...))

    def layout(self, sample_dim: str | None = None, modes: Any = None) -> ModeLayout:
        """The :class:`~tensorstream.labels.ModeLayout` of the array for these modes.

        Examples
        --------
        >>> import numpy as np, xarray as xr
        >>> import tensorstream.accessor
        >>> da = xr.DataArray(np.zeros((5, 3, 4, 2)), dims=("time", "lat", "lon", "variable"))
        >>> da.tensorstream.layout("time", "lat,lon;variable")
        ModeLayout(sample_dim=time: 5, modes=[lat_lon (lat: 3, lon: 4); variable: 2])
        """
        from . import labels  # with its TensorLy: not at `import tensorstream`

        return labels.ModeLayout.from_dataarray(self._da, sample_dim, modes)

    def samples(self, sample_dim: str, modes: Any = None) -> Any:
        """The array as the learners see it: ``(n_samples, I_1, ..., I_n)`` (see ``to_samples``).

        Examples
        --------
        >>> import numpy as np, xarray as xr
        >>> import tensorstream.accessor
        >>> da = xr.DataArray(np.zeros((5, 3, 4, 2)), dims=("time", "lat", "lon", "variable"))
        >>> da.tensorstream.samples("time", [("lat", "lon"), "variable"]).shape
        (5, 12, 2)
        """
        from . import labels  # with its TensorLy: not at `import tensorstream`

        return labels.to_samples(self._da, self.layout(sample_dim, modes))

    def stack_modes(self, modes: Any = None, sample_dim: str | None = None) -> xr.DataArray:
        """One dim per CP mode (see :func:`tensorstream.labels.stack_modes`).

        Examples
        --------
        >>> import numpy as np, xarray as xr
        >>> import tensorstream.accessor
        >>> da = xr.DataArray(np.zeros((5, 3, 4)), dims=("time", "lat", "lon"))
        >>> da.tensorstream.stack_modes([("lat", "lon")], "time").dims
        ('time', 'lat_lon')
        """
        from . import labels  # with its TensorLy: not at `import tensorstream`

        return labels.stack_modes(self._da, modes, sample_dim)

    def unfold(self, mode: Any, **names: str) -> xr.DataArray:
        """The labelled mode unfolding (see :func:`tensorstream.labels.unfold`).

        Examples
        --------
        >>> import numpy as np, xarray as xr
        >>> import tensorstream.accessor
        >>> da = xr.DataArray(np.zeros((2, 3, 4)), dims=("a", "b", "c"))
        >>> da.tensorstream.unfold("b").sizes
        Frozen({'b': 3, 'a_c': 8})
        """
        from . import labels  # with its TensorLy: not at `import tensorstream`

        return labels.unfold(self._da, mode, **names)

