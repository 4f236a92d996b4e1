"""What a learner on one finite data set shares with :class:`~tensorstream.VarianceReducedMF`:
reading the data set (chunk by chunk, in units of the data scale, spread over a Dask cluster
if asked), setting the fitted attributes from a :class:`~tensorstream.finite.state.FiniteState`
in one place, and its checkpoints (the batch learners' layout, with the online learners'
summary at the top).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import numpy as np
import tensorly as tl

from ..algorithms.robust_matrix import sample_scale_sums
from ..core.backend import as_tensor, backend_of, float_dtype_of, using
from ..core.device import device_of
from ..core.validation import check_overflow
from ..engine.distributed import SpreadRows, connected
from ..engine.loop import usable_scale
from ..finite.state import FiniteState, checked_values, restored_state, state_contents
from ..finite.variance_reduction import FiniteData, finite_matrix
from ._checkpoints import ArrayCheckpoint
from ._fitting import OnlineEstimator


class FiniteDataLearner(ArrayCheckpoint, OnlineEstimator):
    """A learner whose fitted state is one :class:`~tensorstream.finite.state.FiniteState`.

    A subclass has the parameters ``formulation``, ``data_scale``,
    ``chunk_size``, ``backend`` and ``device``, and says which attributes a state sets
    (``_fitted_attributes``) and how its formulation is built (``_make_formulation``).
    """

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False  # dense data only (a clear TypeError for sparse)
        return tags

    # -- data ------------------------------------------------------------------------------------

    def _finite_data(self, X: Any, context: dict | None = None, backend: str | None = None,
                     form=None, spread: SpreadRows | None = None, *,
                     scale: float | None = None) -> FiniteData:
        """The finite data set behind ``X``, or a clear error (VR needs a finite sum); with a
        ``scale``, read in its units; with ``spread``, its full passes run on the workers."""
        X = finite_matrix(X, type(self).__name__, self.__dict__.get("n_features_in_"))
        if backend is None:
            device = device_of(self)  # a device given: the pytorch backend there
            backend = "pytorch" if device is not None else (self.backend or backend_of(X))
            with using(backend):
                probe = X[:1] if backend_of(X) == backend else np.zeros((1, 1))
                dtype = float_dtype_of(probe, backend)
                context = {"dtype": dtype}
                if backend == "pytorch":  # numpy data on backend="pytorch": the CPU's tensors
                    context["device"] = device if device is not None else X.device \
                        if backend_of(X) == "pytorch" else tl.context(tl.tensor(probe))["device"]
        nonnegative = bool(form is not None and form.refuses_negative_data)
        way_out = (f"formulation={self.formulation!r} is nonnegative: pass formulation_params="
                   f"{{'allow_negative': True}}, or a formulation for signed data (e.g. 'odl', "
                   f"'orpca')")
        return FiniteData(X, backend, context, nonnegative, spread,
                          1.0 if scale is None else scale, way_out)

    @contextlib.contextmanager
    def _spread(self, X: Any, client: Any) -> Any:
        """``X``'s rows spread over the workers of ``client`` for the block (None without a
        client: the full passes run in this process)."""
        if client is None:
            yield None
            return
        data = self._finite_data(X)  # refuses bad input before connecting
        with connected(client) as open_client:
            spread = SpreadRows(open_client, data.X, self.chunk_size)
            try:
                yield spread
            finally:
                spread.release()

    def _scale_of(self, data: FiniteData) -> tuple[float, float]:
        """``(scale, passes read)``: ``data_scale``, or for ``"auto"`` the mean over samples of
        each sample's median absolute entry (:func:`~tensorstream.algorithms.robust_matrix.
        sample_scale_sums`), one pass over the data set."""
        if self.data_scale != "auto":
            return float(self.data_scale), 0.0
        with using(data.backend):  # a map-reduce: on the workers when the data are spread
            total = data.map_reduce(_scale_sum, self.chunk_size)
            # the float dtype the data are read in (integer data: float64)
            like = tl.zeros((1,), **data.context)
        return usable_scale(float(total) / data.n, like=like), 1.0

    def _commit(self, state: FiniteState) -> None:
        """Set the fitted attributes from ``state`` (the only place the learner changes)."""
        check_overflow((state.dictionary,))  # finite data whose squares overflow (~1e160)
        self.__dict__.update(self._fitted_attributes(state))

    def _forget_fit(self) -> None:
        """Remove what :meth:`_commit` set and the feature names (``fit`` starts anew)."""
        if "state_" in self.__dict__:
            for name in self._fitted_attributes(self.state_):
                del self.__dict__[name]
        self.__dict__.pop("feature_names_in_", None)

    # -- checkpoints (the batch learners' layout, tensorstream.engine.checkpoint) -----------

    def _fitted_contents(self) -> tuple[dict, dict]:
        """The state's values and tensors (:func:`~tensorstream.finite.state.state_contents`).
        """
        self._check_fitted()
        return state_contents(self.state_)

    def _checkpoint_contents(self) -> tuple[dict, dict]:
        """The batch learners' layout, plus the fields every online checkpoint has at the top
        (steps, samples seen, scale, random generator), which ``tensorstream info`` shows."""
        meta, arrays = super()._checkpoint_contents()
        state = self.state_
        meta.update(n_steps=state.n_steps, n_samples_seen=state.n_samples_seen, n_loadings=1,
                    scale=state.scale, rng=state.rng.bit_generator.state)
        return meta, arrays

    def _restore_fitted(self, meta: dict, arrays: dict, backend: str, context: dict) -> None:
        """The state of a checkpoint, checked as the constructor and ``fit`` would."""
        self._check_params()
        values = checked_values(meta["values"])
        rng = np.random.default_rng()
        rng.bit_generator.state = meta["rng"]
        with using(backend):
            tensors = {name: as_tensor(arrays[name], backend, **context)
                       for name in ("loading_0", "output", "A", "B") if name in arrays}
        form = self._make_formulation(values["n_features"])
        if "Q" in arrays:
            form = dataclasses.replace(form, Q=arrays["Q"])
        self._commit(restored_state(
            values, tensors, form, n_components=self.n_components, scale=float(meta["scale"]),
            rng=rng, backend=backend, context=context, n_steps=int(meta["n_steps"])))


def _scale_sum(chunk: Any) -> float:
    """A chunk's part of the ``"auto"`` data scale (its samples' median absolute entries)."""
    return sample_scale_sums(chunk)[0]
