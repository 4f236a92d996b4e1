"""Synthetic data sets of the papers (exact recipes, so the tests' thresholds mean something)."""

from .climate import CLIMATE_COMPONENTS, climate_like_dataarray
from .divergences import DivergenceData, divergence_synthetic
from .images import load_image, synthetic_image
from .maxnorm import CorruptedLowRank, corrupted_low_rank
from .ncpd import low_rank_tensor, nonnegative_tensor_stream, synthetic_ncpd_tensor
from .outliers import (
    OutlierData,
    contaminate,
    moving_patch_video,
    normalize_unit_max,
    psnr,
    replicate,
    support_scores,
    synthetic_outlier_data,
)
from .svrmf import SVRMFSynth, svrmf_synthetic

__all__ = [
    "CorruptedLowRank", "OutlierData", "contaminate", "corrupted_low_rank", "low_rank_tensor",
    "moving_patch_video", "nonnegative_tensor_stream", "normalize_unit_max", "replicate",
    "synthetic_ncpd_tensor", "synthetic_outlier_data",
]
__all__ += ["DivergenceData", "SVRMFSynth", "divergence_synthetic", "svrmf_synthetic"]
# the gallery's data and quality measures
__all__ += ["CLIMATE_COMPONENTS", "climate_like_dataarray", "psnr", "support_scores"]
__all__ += ["load_image", "synthetic_image"]  # real colour images (scikit-image)
