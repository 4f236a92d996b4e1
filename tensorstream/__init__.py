"""tensorstream: online (streaming, mini-batch) CP-dictionary learning and matrix factorization.

One model, online CP-dictionary learning on TensorLy's backends; matrix factorizations are its
two-mode case. See :class:`OnlineCPDL`.
"""

from . import accessor as _accessor  # noqa: F401  (registers DataArray.tensorstream)
from .engine.loop import LearningWarning
from .io import load_checkpoint as load
from .io import open_dataarray, write_factors
from .labels import stack_modes, unfold, unstack_modes
from .learners._base import NotFittedError
from .learners.divergence_nmf import OnlineDivergenceNMF
from .learners.maxnorm import OnlineMaxNormMD
from .learners.nmf import OnlineNMF
from .learners.ocpdl import OnlineCPDL
from .learners.robust_nmf import RobustNMF, RobustOnlineNMF
from .learners.robust_pca import OnlineRobustPCA, RobustPCA
from .learners.variance_reduced import VarianceReducedMF

__all__ = [
    "NotFittedError", "OnlineCPDL", "OnlineDivergenceNMF", "OnlineMaxNormMD", "OnlineNMF",
    "OnlineRobustPCA",
    "RobustNMF", "RobustOnlineNMF", "RobustPCA", "load", "open_dataarray", "stack_modes", "unfold",
    "unstack_modes", "write_factors",
]
__all__ += ["VarianceReducedMF", "LearningWarning"]
__version__ = "0.1.0"
