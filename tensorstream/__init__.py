"""tensorstream: online (streaming, mini-batch) CP-dictionary learning and matrix factorization.

One model, online CP-dictionary learning on TensorLy's backends; matrix factorizations are its
two-mode case. See :class:`OnlineCPDL`.

``import tensorstream`` registers the ``DataArray.tensorstream`` accessor and nothing more: the
names below are imported where first used (PEP 562), so that the command line
(``tensorstream info``) and a script that needs one learner do not pay for TensorLy, SciPy
and every learner at import.
"""

import importlib

from . import accessor as _accessor  # noqa: F401  (registers DataArray.tensorstream)
from ._version import __version__ as __version__  # re-exported: tensorstream.__version__

#: public name -> (module, attribute)
_LAZY = {
    "LearningWarning": ("engine.loop", "LearningWarning"),
    "NotFittedError": ("learners._params", "NotFittedError"),
    "OnlineCPDL": ("learners.ocpdl", "OnlineCPDL"),
    "OnlineDivergenceNMF": ("learners.divergence_nmf", "OnlineDivergenceNMF"),
    "OnlineMaxNormMD": ("learners.maxnorm", "OnlineMaxNormMD"),
    "OnlineNMF": ("learners.nmf", "OnlineNMF"),
    "OnlineRobustPCA": ("learners.robust_pca", "OnlineRobustPCA"),
    "RobustNMF": ("learners.robust_nmf_batch", "RobustNMF"),
    "RobustOnlineNMF": ("learners.robust_nmf", "RobustOnlineNMF"),
    "RobustPCA": ("learners.robust_pca", "RobustPCA"),
    "VarianceReducedMF": ("learners.variance_reduced", "VarianceReducedMF"),
    "load": ("io", "load_checkpoint"),
    "open_dataarray": ("io", "open_dataarray"),
    "write_factors": ("io", "write_factors"),
    "stack_modes": ("labels", "stack_modes"),
    "unfold": ("labels", "unfold"),
    "unstack_modes": ("labels", "unstack_modes"),
    "unstack_loadings": ("modes", "unstack_loadings"),  # regrouped array fits
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    """A public name, or a subpackage (``tensorstream.streams``), imported on first use."""
    if name in _LAZY:
        module, attribute = _LAZY[name]
        value = getattr(importlib.import_module(f".{module}", __name__), attribute)
        globals()[name] = value  # once: later lookups do not come here
        return value
    if not name.startswith("_"):
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise  # the subpackage exists but needs something missing: say that
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
