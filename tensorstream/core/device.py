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

from .validation import Constraint, Instance, _bytes

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
    if parsed.type == "cuda" and parsed.index is None:
        # indexed, as a tensor's device is: torch.device("cuda") != torch.device("cuda:0"),
        # so the batch check would refuse every batch moved there
        parsed = torch.device("cuda", torch.cuda.current_device())
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


def check_map_location(map_location: Any, backend: str | None) -> None:
    """Refuse a ``map_location`` other than the host for a checkpoint of a numpy state: numpy
    arrays live in host memory only, so moving them was a silent no-op (the learner came back
    on numpy, not on the device asked for).

    Raises
    ------
    ValueError
        Naming ``map_location`` and the ways out.
    """
    if map_location is None or backend == "pytorch":
        return
    kind = getattr(map_location, "type", None) or str(map_location).split(":")[0]
    if kind != "cpu":
        raise ValueError(f"map_location={device_name(map_location)!r}: this checkpoint holds "
                         f"a numpy state (backend={backend!r}), which lives in host memory; "
                         f"load it without map_location (or with 'cpu'), or fit a learner with "
                         f"device={device_name(map_location)!r} to compute there")


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


def check_state_device(device: Any, state_device: Any) -> None:
    """Refuse a ``device`` set since the fit that differs from where the state is."""
    if device is None or _same_device(device, state_device):
        return
    raise ValueError(f"device={device_name(device)!r}, but the learned state is on "
                     f"{device_name(state_device)!r}: it was set since the fit; call fit to "
                     f"start anew there, or save and load(path, map_location="
                     f"{device_name(device)!r}) to move the state")


def _same_device(a: Any, b: Any) -> bool:
    """``cuda`` and ``cuda:0`` (the current device) are one device."""
    if b is None or a.type != getattr(b, "type", "cpu"):
        return False
    if a.type != "cuda" or a.index == b.index:
        return True
    import torch

    current = torch.cuda.current_device()
    return (current if a.index is None else a.index) == (current if b.index is None
                                                         else b.index)


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


# -- the batch a device holds --------------------------------------------------------------------

#: ``batch_size="auto"`` on a GPU: the largest power of two up to this many samples that fits
#: (the speed-ups of docs/performance.md were measured at batches of 256 to 4,096; a step's
#: kernel launches cost the same whatever the batch, so a GPU wants large ones)
AUTO_MAX_BATCH = 8192
#: copies of a batch a step holds at once (the batch, its reconstruction or residual, a
#: weighted/masked copy, a gradient) and of its codes (codes, previous codes, gradient,
#: momentum or ADMM duals, outliers): an estimate, to be measured on a GPU (bench_gpu.py)
BATCH_COPIES, CODE_COPIES = 4, 8
#: the share of the device's free memory a step's batch may take (the rest: the allocator's
#: caching, other tensors, fragmentation)
FREE_SHARE = 0.5


def free_memory(device: Any) -> float:
    """Bytes free on the CUDA ``device`` now (``torch.cuda.mem_get_info``)."""
    import torch

    return float(torch.cuda.mem_get_info(device)[0])


def step_bytes(n_features: int, n_components: int, itemsize: int) -> int:
    """Bytes one sample of ``n_features`` entries takes in a step (see :data:`BATCH_COPIES`)."""
    return itemsize * (BATCH_COPIES * n_features + CODE_COPIES * n_components)


def _fitting(device: Any, per_sample: int) -> tuple[int, float]:
    """How many samples fit in :data:`FREE_SHARE` of ``device``'s free memory, and the free
    bytes."""
    free = free_memory(device)
    return int(FREE_SHARE * free // per_sample), free


def _power_of_two_below(n: int, cap: int | None = AUTO_MAX_BATCH) -> int:
    """The largest power of two <= ``n`` (and <= ``cap``)."""
    return 1 << (min(n, cap or n).bit_length() - 1)


def step_batch_size(batch_size: Any, device: Any, n_features: int, n_components: int,
                    itemsize: int, default: int) -> int:
    """The batch ``fit`` streams: ``batch_size``, or for ``"auto"`` the rule below; on a CUDA
    device, refused before the first step when it cannot fit.

    ``"auto"``: ``default`` (the learner's own default batch) on the CPU and without a device,
    as before; on a CUDA device the largest power of two up to :data:`AUTO_MAX_BATCH` whose
    step (:func:`step_bytes` per sample) takes at most :data:`FREE_SHARE` of the device's free
    memory.

    Raises
    ------
    ValueError
        On a CUDA device, a batch (or, for ``"auto"``, a single sample) that does not fit;
        the message names the batch that fits.
    """
    if device is None or getattr(device, "type", "cpu") != "cuda":
        return default if batch_size == "auto" else int(batch_size)
    per_sample = step_bytes(n_features, n_components, itemsize)
    fits, free = _fitting(device, per_sample)
    if fits < 1:
        raise ValueError(f"batch_size={batch_size!r}: one sample takes about "
                         f"{_bytes(per_sample)} in a step, more than half the {_bytes(free)} "
                         f"free on {device}; free memory there, use a smaller n_components, "
                         f"or device='cpu'")
    if batch_size == "auto":
        return _power_of_two_below(fits)
    if batch_size > fits:
        fitting = _power_of_two_below(fits, None)
        raise ValueError(f"batch_size={batch_size}: a step would take about "
                         f"{_bytes(batch_size * per_sample)} on {device}, more than half the "
                         f"{_bytes(free)} free there; batch_size={fitting} fits (or "
                         f"batch_size='auto')")
    return int(batch_size)
