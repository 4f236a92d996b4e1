"""Where a learner computes: the ``device`` parameter of every learner.

The rule, in one place:

- ``device=None`` (the default): the data decide, as before ``device`` existed. Numpy, dask,
  xarray, sparse and stream batches run on the numpy backend (or on ``backend``); a torch tensor
  runs on its own device.
- ``device`` given (``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a ``torch.device``): the learner runs
  on the pytorch backend on that device. Every batch, whatever its kind, is moved there when it
  is validated, one batch at a time (the data never sit on the device all at once), and the
  learned state lives there. ``transform`` and the other methods take host data as well and
  return the learner's tensors: torch tensors on its device (``set_output(transform="pandas")``
  or :func:`~tensorstream.core.backend.to_numpy` bring them home).

``backend="numpy"`` together with a device is refused: a device is a place of torch tensors.
Nothing here imports torch unless a device is given.
"""

from __future__ import annotations

from typing import Any

from .validation import Constraint, Instance

#: the way out named by the refusals of a device this machine lacks
_WAY_OUT = "use device='cpu' (or None: where the data are)"


class DeviceConstraint(Constraint):
    """A device name (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``) or a ``torch.device``."""

    def accepts_type(self, value: Any) -> bool:
        return isinstance(value, str) or type(value).__module__.startswith("torch") and \
            type(value).__name__ == "device"

    def accepts(self, value: Any) -> bool:
        # whether the machine has it is checked by resolve_device, whose refusal names the
        # way out (a device name is not wrong for being absent here)
        return self.accepts_type(value)

    def describe(self) -> str:
        return "a device such as 'cpu', 'cuda', 'cuda:1' or a torch.device"


def resolve_device(device: Any, name: str = "device") -> Any:
    """The ``torch.device`` that ``device`` names, checked to exist on this machine; None for
    None.

    Raises
    ------
    ImportError
        ``device`` given but PyTorch is not installed.
    ValueError
        Not a device name, or a device this machine does not have (no CUDA, or an index past
        the last GPU); the message names ``name`` and the way out.
    """
    if device is None:
        return None
    try:
        import torch
    except ImportError:
        raise ImportError(f"{name}={device!r} runs on PyTorch, which is not installed; "
                          f"pip install torch, or leave {name}=None (numpy)") from None
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"{name}={device!r} is not a device; use 'cpu', 'cuda', 'cuda:1' "
                         f"or a torch.device") from None
    _check_present(parsed, device, name)
    return parsed


def _check_present(parsed: Any, device: Any, name: str) -> None:
    """Refuse, naming ``name``, a device this machine does not have."""
    import torch

    if parsed.type == "cpu":
        return
    if parsed.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"{name}={device!r}: this machine has no CUDA device that PyTorch "
                             f"can use (torch.cuda.is_available() is False); {_WAY_OUT}")
        if parsed.index is not None and parsed.index >= count:
            raise ValueError(f"{name}={device!r}: this machine has {count} CUDA device(s), "
                             f"cuda:0 to cuda:{count - 1}; pick one of them")
        return
    available = getattr(getattr(torch.backends, parsed.type, None), "is_available", None)
    if available is None or not available():
        raise ValueError(f"{name}={device!r}: PyTorch has no {parsed.type!r} device on this "
                         f"machine; {_WAY_OUT}")


#: the constraint of every learner's ``device``
DEVICE = [DeviceConstraint(), Instance("None", check=lambda value: value is None)]


def device_name(device: Any) -> str:
    """``device`` as the string that checkpoints record (``"cuda:0"``, ``"cpu"``)."""
    return str(device)


def check_device_backend(device: Any, backend: str | None) -> None:
    """Refuse ``backend="numpy"`` with a device: devices are places of torch tensors."""
    if device is not None and backend == "numpy":
        raise ValueError(f"device={device_name(device)!r} runs on the pytorch backend but "
                         f"backend='numpy' was given; drop one of them (device=None for numpy)")


def device_of(learner: Any) -> Any:
    """The ``torch.device`` of ``learner``'s ``device`` parameter (None: where the data are)."""
    return resolve_device(getattr(learner, "device", None))


def device_context(learner: Any) -> dict | None:
    """The tensor context that puts an unfitted learner's first batch on its device (the
    dtype stays the data's), None without a device."""
    device = device_of(learner)
    return None if device is None else {"device": device}


def move(X: Any, device: Any) -> Any:
    """``X`` on ``device`` where it is a torch tensor elsewhere (other kinds are converted by
    validation, straight onto the device); ``X`` as it is otherwise."""
    if device is None or not type(X).__module__.startswith("torch"):
        return X
    return X if X.device == device else X.to(device)


def torch_devices() -> list[str] | None:
    """The devices PyTorch sees here (``["cpu", "cuda:0 (NVIDIA H100 ...)"]``), or None when
    torch is not installed (only ``tensorstream info --devices`` calls this: importing torch
    takes a second or more, which the other ``info`` commands do not pay)."""
    try:
        import torch
    except ImportError:
        return None
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{k} ({torch.cuda.get_device_name(k)})"
                    for k in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        devices.append("mps")
    return devices
