"""Reading and writing: checkpoints of learners, data files, labelled factors.

- :mod:`.checkpoint`: :func:`load_checkpoint` (also ``tensorstream.load``) rebuilds any learner
  saved with ``learner.save(path)``; :func:`read_checkpoint` reads one without building it.
- :mod:`.files`: :func:`open_dataarray` opens netCDF, zarr and ``.npy`` files lazily for
  streaming; :func:`write_factors` writes labelled factors to netCDF, atomically.
"""

from ..engine.checkpoint import read_checkpoint
from .checkpoint import load_checkpoint, save_checkpoint
from .files import NPY_SAMPLE_DIM, data_format, open_dataarray, write_factors

__all__ = ["NPY_SAMPLE_DIM", "data_format", "load_checkpoint", "open_dataarray",
           "read_checkpoint", "save_checkpoint", "write_factors"]
