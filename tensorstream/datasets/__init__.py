"""Synthetic data sets of the papers (exact recipes, so the tests' thresholds mean something)."""

from .ncpd import low_rank_tensor, nonnegative_tensor_stream, synthetic_ncpd_tensor

__all__ = ["low_rank_tensor", "nonnegative_tensor_stream", "synthetic_ncpd_tensor"]
