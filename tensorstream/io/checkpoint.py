"""Checkpoints of any learner: save one mid-stream and resume it exactly.

The format lives in :mod:`tensorstream.engine.checkpoint`; this module adds what needs to know
the learners: rebuilding the right class (from :mod:`tensorstream.learners.registry`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..engine.checkpoint import read_checkpoint
from ..learners.registry import learner_class


def save_checkpoint(learner: Any, path: str | os.PathLike) -> Path:
    """Write ``learner``'s parameters and state to ``path`` (``.npz``), atomically.

    The same as ``learner.save(path)``. The ``callback`` parameter is not saved (it is a live
    object); pass it again when loading.
    """
    return learner.save(path)


def load_checkpoint(path: str | os.PathLike, **overrides: Any) -> Any:
    """Recreate the learner saved at ``path``; ``overrides`` set parameters (e.g. ``callback``).

    Raises ``ValueError`` naming the file when it is not a readable tensorstream checkpoint.
    """
    path = Path(path)
    meta, arrays = read_checkpoint(path)
    try:
        cls = learner_class(meta["class"])
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"cannot read checkpoint {str(path)!r}: unknown learner class "
                         f"({error})") from None
    return cls._from_checkpoint(meta, arrays, overrides, path)
