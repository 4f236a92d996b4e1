"""The methods that use a learned dictionary: codes of new samples (``transform``), samples
from codes (``inverse_transform``), the coding objective (``score``), the labelled factors
(``factors_``) and the CP form of a batch.

:class:`DictionaryMethods` is a :class:`~._params.CheckedParameters`, so that these methods run
inside the learner's thread limit and give the container ``set_output`` chose, as the methods a
learner defines itself do.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import tensorly as tl
import xarray as xr

from ..core.backend import run, using
from ..core.dictionary import reconstruct, to_cp_tensor
from ..core.validation import check_batch, check_overflow, check_sample_weight
from ..engine import Algorithm, Codes, OnlineState
from ..labels import (
    ModeLayout,
    codes_from_dataarray,
    codes_to_dataarray,
    factors_to_dataset,
    from_samples,
)
from ._labelled import is_labelled
from ._output import plain_output
from ._params import CheckedParameters

#: outputs of new data (``transform``, ``score``, ``outliers``, ``denoise``, ``background``,
#: ``impute`` of the robust learners) code a large array in chunks of this many entries (whole
#: samples, at least one: :func:`coding_chunks`), whatever batch ``fit`` took. Each sample's
#: codes are its own (the same in any chunk); a call runs until its slowest sample converges,
#: and its temporaries are a few of the chunk's size: fewer, larger calls save the per-call
#: overhead until fresh memory for large temporaries costs more than their arithmetic.
#: Measured (one BLAS thread): OnlineRobustPCA's denoise / background of 1,500 patches of 64
#: pixels 30 / 61 ms in chunks of 32 against 8 / 33 in chunks of 1,024 (20,000 patches 0.36 s
#: against 0.09 s); 100 faces of 625 pixels 5 / 14 against 4 / 9 at once; the video (4,096
#: pixels) 29 / 31 in chunks of 16 against 72 / 80 in chunks of 128. RobustOnlineNMF: 20,000
#: patches in one call took twice the CPU time of 20 chunks of 1,000.
CODING_ENTRIES = 65_536


def coding_chunks(n_samples: int, n_features: int) -> list[slice]:
    """The chunks (slices of samples) in which an output codes ``n_samples`` samples of
    ``n_features`` entries each: :data:`CODING_ENTRIES` entries a chunk, at least one sample.

    Examples
    --------
    >>> coding_chunks(2500, 64)
    [slice(0, 1024, None), slice(1024, 2048, None), slice(2048, 3072, None)]
    """
    size = max(1, CODING_ENTRIES // max(1, n_features))
    return [slice(start, start + size) for start in range(0, n_samples, size)]


class DictionaryMethods(CheckedParameters):
    """What a fitted online learner does with its dictionary (for :class:`~._base.OnlineLearner`,
    which gives ``_algorithm``, ``_held_state``, ``_checked_input`` and the fitted state)."""

    def _coding_algorithm(self) -> Algorithm:
        """The algorithm whose coding step ``transform`` and ``score`` run: the training one,
        unless a learner codes its results more tightly (``transform_tol``)."""
        return self._algorithm()

    def _coded(self, X: Any, mask: Any) -> Codes:
        """The coding step of ``transform`` and ``score`` at the learned dictionary and scale."""
        self._check_params()  # a parameter set since fit is named, not reported by the coder
        self._check_params_against_state()
        algorithm = self._coding_algorithm().at_state(self._held_state())

        def code(state: OnlineState, X: Any, mask: Any) -> tuple:
            return state, algorithm.encode(X, state.loadings, state.scale, mask)

        # the state as a step takes it (carry): a carried state's arrays are not made tensors
        _, coded = run(self.backend_, code, self.__dict__["state_"], X, mask, carry=True)
        check_overflow((coded.codes, coded.losses), "X")
        return coded

    def transform(self, X: Any, mask: Any = None) -> Any:
        """Codes of the samples of ``X`` against the learned dictionary, shape ``(n, R)``.

        Labelled input gives a DataArray over ``(sample_dim, "component")`` with the sample
        coords. ``mask`` (or ``missing="nan"``) marks missing entries, which are ignored.
        """
        self._check_fitted()
        X_checked, mask, layout = self._checked_input(X, mask)
        codes = self._coded(X_checked, mask).codes
        return codes if layout is None else codes_to_dataarray(codes, layout.with_samples(X))

    def inverse_transform(self, codes: Any) -> Any:
        """Samples ``sum_r codes[j, r] atom_r``, shape ``(n, I_1, ..., I_n)`` (for a fit on an
        array regrouped by ``modes``, in the axes the samples were given in).

        Codes given as a DataArray (from ``transform`` of labelled data) give the samples back
        as a DataArray with the original dims and coords.
        """
        self._check_fitted()
        layout = None
        if is_labelled(codes):
            layout = self.__dict__.get("layout_")
            if layout is None:
                raise TypeError("labelled codes need a learner fitted on labelled data")
            layout = layout.with_samples(codes)
            codes = codes_from_dataarray(codes, layout, self.n_components_)
        codes = check_batch(codes, backend=self.backend_, context=self._context,
                            sample_shape=(self.n_components_,), name="codes",
                            owner=type(self).__name__, missing_hint=False)
        with using(self.backend_):
            samples = reconstruct(self.loadings_, codes)
        if "array_layout_" in self.__dict__:  # the axes as the samples were given
            samples = self.array_layout_.restore(samples)
        return samples if layout is None else from_samples(samples, layout)

    def score(self, X: Any, y: Any = None, sample_weight: Any = None, mask: Any = None) -> float:
        """Minus the (weighted) mean over samples of the coding objective at the learned
        dictionary (for the squared loss ``min_h ||x - W h||^2 + penalties``).

        With missing entries (``mask`` or ``missing="nan"``) only observed entries count.
        """
        self._check_fitted()
        X, mask, _ = self._checked_input(X, mask)
        weights = check_sample_weight(sample_weight, X.shape[0])
        losses = self._coded(X, mask).losses
        with using(self.backend_):
            losses = tl.to_numpy(losses)
        score = -float(np.average(losses, weights=weights))
        if not math.isfinite(score):  # finite losses near the largest float, summed
            raise ValueError("X: the values are too large for this model's arithmetic (the "
                             "mean of its losses overflows to inf); rescale the data")
        return score

    @property
    def factors_(self):
        """The learned loadings as an ``xarray.Dataset``: one variable per mode.

        For labelled input each variable keeps the original dims and coords (stacked modes
        unstacked again) plus a ``component`` dim; for plain arrays the dims are ``mode_0``,
        ``mode_1``, ...
        """
        self._check_fitted()
        layout = self.__dict__.get("layout_")
        if layout is None:
            dims = ("sample", *(f"mode_{k}" for k in range(len(self.sample_shape_))))
            template = xr.DataArray(np.broadcast_to(0.0, (1, *self.sample_shape_)), dims=dims)
            layout = ModeLayout.from_dataarray(template, "sample", None)
        return factors_to_dataset(self.loadings_, layout)

    def to_cp_tensor(self, X: Any, mask: Any = None):
        """The batch ``X`` as a TensorLy ``CPTensor``: its codes (from the observed entries,
        ``mask``) are the sample-mode factor."""
        with plain_output():
            codes = self.transform(X, mask=mask)
        if is_labelled(codes):
            codes = codes.data
        with using(self.backend_):
            return to_cp_tensor(self.loadings_, codes)

    def reconstruct(self, X: Any, mask: Any = None) -> Any:
        """``inverse_transform(transform(X, mask))``: the model's approximation of ``X``, all
        entries (the missing ones filled in) from the observed ones."""
        with plain_output():
            codes = self.transform(X, mask=mask)
        return self.inverse_transform(codes)
