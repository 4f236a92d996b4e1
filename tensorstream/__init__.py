"""tensorstream: online (streaming, mini-batch) CP-dictionary learning and matrix factorization.

One model, online CP-dictionary learning on TensorLy's backends; matrix factorizations are its
two-mode case. See :class:`OnlineCPDL`.
"""

from .io import load_checkpoint as load
from .learners.ocpdl import OnlineCPDL

__all__ = ["OnlineCPDL", "load"]
__version__ = "0.1.0"
