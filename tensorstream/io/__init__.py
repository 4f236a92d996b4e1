"""Reading and writing: checkpoints of learners, data files, labelled factors.

- :mod:`.checkpoint`: :func:`load_checkpoint` (also ``tensorstream.load``) rebuilds any learner
  saved with ``learner.save(path)``; :func:`read_checkpoint` reads one without building it.
- :mod:`.files`: :func:`open_dataarray` opens netCDF, zarr and ``.npy`` files lazily for
  streaming; :func:`write_factors` writes labelled factors to netCDF, atomically.
"""

import importlib

#: name -> the module that defines it, imported on first use (PEP 562): describing a data file
#: (tensorstream info) then imports neither the engine nor TensorLy
_LAZY = {"read_checkpoint": "..engine.checkpoint", "load_checkpoint": ".checkpoint",
         "save_checkpoint": ".checkpoint", "NPY_SAMPLE_DIM": ".files", "data_format": ".files",
         "open_dataarray": ".files", "write_factors": ".files"}

__all__ = ["NPY_SAMPLE_DIM", "data_format", "load_checkpoint", "open_dataarray",
           "read_checkpoint", "save_checkpoint", "write_factors"]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
