"""The run of ``tensorstream fit``: shuffled mini-batches of a file into a learner, then outputs.

The batch order is a function of the seed and the step number alone (:func:`shuffled_batches`),
so a run resumed from a checkpoint sees exactly the batches an uninterrupted run sees.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .._version import __version__
from .errors import CLIError


def shuffled_batches(n_samples: int, batch_size: int, seed: int, start: int = 0,
                     stop: int | None = None) -> Iterator[np.ndarray]:
    """Sorted sample positions of steps ``start, ..., stop - 1`` of shuffled epochs.

    Epoch ``e`` visits the samples in the order ``default_rng([seed, e]).permutation(n)``, in
    consecutive batches (the last one may be short). The order is a function of the step number
    alone, so a run resumed at any step sees exactly the batches an uninterrupted run sees.
    Positions are sorted within a batch, so a file is read in order.

    Parameters
    ----------
    n_samples, batch_size, seed : int
    start : int, default 0
        The first step (0-based), e.g. the step count of a resumed learner.
    stop : int, optional
        Stop before this step (default: never).

    Yields
    ------
    numpy.ndarray of int

    Examples
    --------
    >>> [b.tolist() for b in shuffled_batches(5, 2, seed=0, stop=4)]
    [[2, 4], [0, 3], [1], [1, 4]]
    >>> [b.tolist() for b in shuffled_batches(5, 2, seed=0, start=2, stop=4)]
    [[1], [1, 4]]
    """
    per_epoch = -(-n_samples // batch_size)
    order, current = None, None
    step = start
    while stop is None or step < stop:
        epoch, k = divmod(step, per_epoch)
        if epoch != current:
            order, current = np.random.default_rng([seed, epoch]).permutation(n_samples), epoch
        yield np.sort(order[k * batch_size:(k + 1) * batch_size])
        step += 1


def train(learner: Any, da: Any, sample_dim: str, modes: Any, plan: dict,
          args: argparse.Namespace) -> tuple[list[dict], bool]:
    """Stream the batches into ``learner``, saving checkpoints on the way.

    Parameters
    ----------
    learner : online learner
        New, or restored from the checkpoint (``--resume``: it goes on from its ``n_steps_``).
    da : xarray.DataArray
        The data, lazily opened.
    sample_dim : str
    modes : mode specification or None
        Passed with the first batch of a new learner.
    plan : dict
        ``"model"`` (the registry name) and, if any, ``"checkpoint"`` (a path).
    args : argparse.Namespace
        The command line (``--epochs``, ``--steps``, ``--checkpoint-every``, ``--quiet``,
        ``--resume``).

    Returns
    -------
    history : list of dict
        The learner's information on each step run.
    interrupted : bool
        Whether Ctrl-C stopped the run (the checkpoint is saved then).
    """
    n_samples = da.sizes[sample_dim]
    # batch_size='auto' as fit chooses it (a resumed run keeps the one its checkpoint holds);
    # a batch the device cannot hold refused up front
    given = learner.batch_size if learner.batch_size != "auto" else \
        learner.__dict__.get("batch_size_", "auto")  # a batch set since the fit wins
    try:
        batch_size = learner._step_batch(given, da, n_samples)
    except ValueError as error:
        raise CLIError(str(error)) from None
    per_epoch = -(-n_samples // batch_size)
    from ..learners._fitting import fit_passes  # here: `tensorstream info` needs no learner

    # without --epochs, the passes fit(X) takes: one training-length rule for both
    epochs = args.epochs or fit_passes(getattr(learner, "max_iter", 1), n_samples, batch_size,
                                       learner._passes_rule)
    total = epochs * per_epoch if args.steps is None else (
        args.steps if args.epochs is None else min(args.steps, args.epochs * per_epoch))
    start = int(getattr(learner, "n_steps_", 0)) if args.resume else 0
    seed = learner.random_state if isinstance(learner.random_state, int) else 0
    checkpoint = plan.get("checkpoint")
    if start >= total and not args.quiet:
        print(f"the checkpoint is at step {start}, the run stops at {total}: nothing to learn",
              file=sys.stderr)
    history: list[dict] = []
    recent: collections.deque = collections.deque(maxlen=min(per_epoch, 100))
    progress = _progress(total, start, f"{plan['model']} on {_where_it_runs(learner)}", args.quiet)
    step = start
    cluster = contextlib.ExitStack()
    try:
        client = cluster.enter_context(_cluster(args))
        for rows in shuffled_batches(n_samples, batch_size, seed, start, total):
            _learn(learner, da, rows, sample_dim, modes, client)
            step += 1
            # the run is fit(X) read from disk: n_iter_ counts its passes started, as fit's
            learner._n_iter = -(-step // per_epoch)
            info = dict(getattr(learner, "_last_info", None) or {"step": step})
            history.append(info)
            if progress is not None:
                _show(progress, info, recent)
            if checkpoint is not None and step % args.checkpoint_every == 0:
                learner.save(checkpoint)
    except KeyboardInterrupt:
        if progress is not None:
            progress.close()
        where = f"after step {step}"
        if checkpoint is not None and step > start:
            learner.save(checkpoint)
            print(f"tensorstream: interrupted {where}; checkpoint saved to {str(checkpoint)!r}: "
                  f"run the same command with --resume to continue", file=sys.stderr)
        else:
            print(f"tensorstream: interrupted {where}; nothing written", file=sys.stderr)
        return history, True
    finally:
        if progress is not None:  # also on errors (closing twice is harmless)
            progress.close()
        cluster.close()
    if checkpoint is not None and step > start:
        learner.save(checkpoint)
    return history, False


@contextlib.contextmanager
def _cluster(args: argparse.Namespace) -> Iterator[Any]:
    """The Dask client of ``--scheduler``/``--workers`` (None without either), closed after."""
    scheduler, workers = getattr(args, "scheduler", None), getattr(args, "workers", None)
    if scheduler is None and workers is None:
        yield None
        return
    if workers is not None and workers < 1:
        raise CLIError("--workers must be >= 1")
    from ..engine.distributed import connected

    try:
        context = connected(scheduler or "local", n_workers=workers)
        client = context.__enter__()
    except ValueError as error:
        raise CLIError(str(error).replace("client:", "--scheduler:")) from None
    try:
        yield client
    finally:
        context.__exit__(None, None, None)


def _learn(learner: Any, da: Any, rows: np.ndarray, sample_dim: str, modes: Any,
           client: Any = None) -> None:
    """One mini-batch: read these samples (once, only them) and learn from them (on a cluster,
    the workers read them)."""
    batch = da.isel({sample_dim: rows})
    if client is None:
        batch = batch.compute()
    # the first batch fixes the layout; later ones are checked against it
    labels = {} if "layout_" in learner.__dict__ else {"sample_dim": sample_dim, "modes": modes}
    if client is not None:
        labels["client"] = client
    try:
        learner.partial_fit(batch, **labels)
    except ValueError as error:  # a rejected batch: say which samples, keep the state
        raise CLIError(_batch_error(error, rows, da, sample_dim)) from error


def _where_it_runs(learner: Any) -> str:
    """Where ``learner`` computes, for the progress line: its device (``cuda:0``), the device
    of its state once it has one, or ``cpu``."""
    context = learner.__dict__.get("_context") or {}
    device = context.get("device", getattr(learner, "device", None))
    return "cpu" if device is None else str(device)


def _progress(total: int, start: int, model: str, quiet: bool) -> Any:
    if quiet:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=start, unit="batch", desc=f"fit {model}",
                file=sys.stderr, dynamic_ncols=True)


def _show(progress: Any, info: dict, recent: collections.deque) -> None:
    """One step on the progress bar, with the batch loss and its running mean."""
    progress.update(1)
    loss = info.get("batch_loss")
    if loss is not None:
        recent.append(float(loss))
        workers = {"workers": info["workers"]} if "workers" in info else {}
        progress.set_postfix(loss=f"{loss:.4g}", mean=f"{np.mean(recent):.4g}", **workers,
                             refresh=False)


def _batch_error(error: Exception, rows: np.ndarray, da: Any, sample_dim: str) -> str:
    """Say which samples a rejected batch held, and what to do about NaN."""
    text = " ".join(str(error).split())
    coord = da[sample_dim].values[rows] if sample_dim in da.coords else rows
    where = f"{sample_dim} {coord[0]}" + (f" ... {coord[-1]}" if len(coord) > 1 else "")
    if "NaN" in text:
        text = (f"the data contain NaN or infinite values (in the batch {where}); pass "
                f"--missing nan to treat NaN as missing, or fill them first")
        return text
    return f"{text} (in the batch {where})"


# --------------------------------------------------------------------------------------------
# outputs


def factors(learner: Any, da: Any, args: argparse.Namespace, plan: dict,
            sample_dim: str) -> Any:
    """The learned factors, with the codes if asked (``--codes``) and a description of the run.

    Returns
    -------
    xarray.Dataset
        ``learner.factors_`` with attributes naming the model, its parameters, the data and the
        modes (what ``tensorstream info`` shows).
    """
    from ..engine.checkpoint import encode_param
    from ..labels import format_modes

    ds = learner.factors_
    if args.codes:
        ds["codes"] = _all_codes(learner, da, sample_dim)
    params = {k: encode_param(k, v) for k, v in learner.get_params().items()
              if k != "callback" and not _is_array_param(v)}
    ds.attrs.update({
        "title": f"tensorstream factors of {da.name} from {Path(args.input).name}",
        "tensorstream_version": __version__, "model": plan["model"],
        "learner": type(learner).__name__, "n_components": int(ds.sizes["component"]),
        "params": json.dumps(params), "n_steps": int(learner.n_steps_),
        "n_samples_seen": int(learner.n_samples_seen_), "source": str(args.input),
        "variable": str(da.name), "sample_dim": sample_dim,
        "modes": format_modes(learner.layout_.modes)})
    return ds


def _is_array_param(value: Any) -> bool:
    return isinstance(value, (list, tuple)) or hasattr(value, "shape")


def _all_codes(learner: Any, da: Any, sample_dim: str) -> Any:
    """Codes of every sample, in contiguous blocks (one sequential pass over the file)."""
    import xarray as xr

    n = da.sizes[sample_dim]
    block = max(int(learner.__dict__.get("batch_size_", learner.batch_size)), 256)
    parts = [learner.transform(da.isel({sample_dim: slice(i, i + block)}).compute())
             for i in range(0, n, block)]
    return xr.concat(parts, dim=sample_dim)


def write_outputs(ds: Any, history: list[dict], args: argparse.Namespace) -> None:
    """Write the factors (``--out``) and the figures (``--plot``); say what was written."""
    from ..io import write_factors

    written = [str(write_factors(ds, args.out))]
    if args.plot:
        from ..plot import plot_convergence, plot_factors

        plot = Path(args.plot)
        plot_factors(ds, max_components=args.plot_components, title=ds.attrs["title"],
                     path=plot)
        written.append(str(plot))
        if any("batch_loss" in info for info in history):
            curve = plot.with_name(f"{plot.stem}_convergence{plot.suffix}")
            plot_convergence(history, title="loss per mini-batch", path=curve)
            written.append(str(curve))
    if not args.quiet:
        print(f"learned {ds.attrs['n_components']} components in {ds.attrs['n_steps']} steps "
              f"({ds.attrs['n_samples_seen']} samples); wrote {', '.join(written)}")
