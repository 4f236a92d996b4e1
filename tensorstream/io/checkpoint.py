"""Checkpoints of any learner: save one mid-stream and resume it exactly.

The format lives in :mod:`tensorstream.engine.checkpoint`; this module adds what needs to know
the learners: rebuilding the right class (from :mod:`tensorstream.learners.registry`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..core.device import check_map_location, device_name, resolve_device
from ..engine.checkpoint import read_checkpoint
from ..learners.registry import learner_class


def save_checkpoint(learner: Any, path: str | os.PathLike) -> Path:
    """Write ``learner``'s parameters and state to ``path`` (``.npz``), atomically.

    The same as ``learner.save(path)``. The ``callback`` parameter is not saved (it is a live
    object); pass it again when loading.
    """
    return learner.save(path)


def load_checkpoint(path: str | os.PathLike, map_location: Any = None, **overrides: Any) -> Any:
    """Recreate the learner saved at ``path``; ``overrides`` set parameters (e.g. ``callback``).

    Parameters
    ----------
    path : str or path-like
        The checkpoint (``.npz``).
    map_location : str, torch.device or None, optional
        The device to restore the state on instead of the recorded one (as ``torch.load``'s):
        ``"cpu"`` reads a checkpoint written on a GPU on a machine without one. A learner saved
        with a ``device`` gets this one. None: the recorded device, which must exist here.
    **overrides
        Parameters to set on the loaded learner.

    Raises ``ValueError`` naming the file when it is not a readable tensorstream checkpoint, or
    when its device is not on this machine and no ``map_location`` is given.
    """
    path = Path(path)
    meta, arrays = read_checkpoint(path)
    try:
        cls = learner_class(meta["class"])
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"cannot read checkpoint {str(path)!r}: unknown learner class "
                         f"({error})") from None
    meta, overrides = _relocated(meta, overrides, map_location, path)
    return cls._from_checkpoint(meta, arrays, overrides, path)


def _relocated(meta: dict, overrides: dict, map_location: Any, path: Path) -> tuple[dict, dict]:
    """``meta`` (and the ``device`` parameter) moved to ``map_location``; the recorded device
    checked to exist here when there is none."""
    recorded = meta.get("device", "cpu")
    if map_location is None:
        if meta.get("backend") == "pytorch" and recorded != "cpu":
            try:
                resolve_device(recorded)
            except (ImportError, ValueError) as error:
                raise ValueError(f"checkpoint {str(path)!r} holds a state on device "
                                 f"{recorded!r}, which this machine lacks ({error}); load it "
                                 f"with map_location='cpu'") from None
        return meta, overrides
    check_map_location(map_location, meta.get("backend"))  # numpy arrays stay on the host
    target = device_name(resolve_device(map_location, "map_location"))
    params = meta.get("params") or {}
    if params.get("device") is not None and "device" not in overrides:
        overrides = {**overrides, "device": target}  # the learner goes on where it now is
    return {**meta, "device": target}, overrides
