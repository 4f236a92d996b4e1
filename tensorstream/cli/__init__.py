"""The ``tensorstream`` command: ``fit`` a model to a data file, run the ``demo``, ``info``.

* :mod:`~tensorstream.cli.main`: the parser, :func:`main` and the ``fit`` command;
* :mod:`~tensorstream.cli.fit`: its run: the training loop (:func:`shuffled_batches`,
  checkpoints) and the outputs;
* :mod:`~tensorstream.cli.info`: the ``info`` command (:func:`describe`);
* :mod:`~tensorstream.cli.demo`: the built-in demo.
"""

from .fit import shuffled_batches
from .info import describe
from .main import build_parser, main

__all__ = ["build_parser", "describe", "main", "shuffled_batches"]
