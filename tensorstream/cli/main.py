"""The ``tensorstream`` command line: the parser, :func:`main`, and the ``fit`` command.

Every failure the user can cause (a wrong dim name, an unreadable file, NaN in the data, an
output folder that does not exist) ends as one line on stderr and a non-zero exit code, before
any file is touched; ``--debug`` shows the traceback instead. Outputs and checkpoints are written
atomically, so an interrupted run never leaves a half-written file behind.

The run itself (the training loop, the outputs) is :mod:`tensorstream.cli.fit`; ``info`` is
:mod:`tensorstream.cli.info`, the demo :mod:`tensorstream.cli.demo`. The models are the online
learners of :mod:`tensorstream.learners.registry`, imported only when used, so a learner that is
not installed does not break the command.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from .._version import __version__
from ..learners import registry
from .errors import CLIError
from .fit import factors, train, write_outputs
from .info import run_info
from .params import add_params
from .params import literal as _literal
from .select import add_select, run_select

# --------------------------------------------------------------------------------------------
# the parser

_DESCRIPTION = """\
Learn interpretable low-rank features of large multi-way arrays from a stream of samples.

A data file holds samples along one dim (e.g. "time"). tensorstream learns R atoms so that
every sample is a sparse (nonnegative) combination of them; each atom is an outer product of
one loading vector per *mode*. A mode is one dim, or several dims stacked together, whose
joint features are then learned (e.g. "lat,lon" learns free maps rather than products of a
latitude and a longitude profile). The data are read mini-batch by mini-batch, never as a
whole, so files larger than memory work.
"""

_FIT_EPILOG = """\
examples:
  tensorstream info obs.nc                       # which variables and dims the file has
  tensorstream fit obs.nc --var t2m --sample-dim time --modes "lat,lon;variable" \\
      --n-components 8 --out factors.nc --plot factors.png
  tensorstream fit patches.npy --modes "axis1,axis2;axis3" --n-components 24 --epochs 3 \\
      --out patch_factors.nc                     # .npy: samples on the first axis
  tensorstream fit obs.nc --var t2m --sample-dim time --n-components 8 --out f.nc \\
      --checkpoint run.npz --resume                # continue an interrupted run

modes: ";" separates modes, "," stacks dims into one mode, "name=" names a stacked
mode ("space=lat,lon;variable"). Default: every dim but the sample dim is its own mode.

output: a netCDF file with one variable "<mode>_loadings" per mode over the mode's dims and
"component", on the original coordinates (and "codes" over the sample dim with --codes).
netCDF cannot store a pandas MultiIndex: such dims are written with their levels as plain
coordinates (rebuild with ds.set_index(dim=[levels])).
"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``tensorstream`` command."""
    parser = argparse.ArgumentParser(
        prog="tensorstream", description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run 'tensorstream COMMAND --help' for the options of a command.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of errors")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_fit(commands)
    add_select(commands)
    _add_demo(commands)
    info = commands.add_parser(
        "info", help="describe a factors (.nc), checkpoint (.npz) or data file, or a Dask "
                     "cluster",
        description="Describe a file: learned factors (.nc written by 'fit'), a checkpoint "
                    "(.npz), or a data file (netCDF, zarr, .npy) with its variables and dims; "
                    "or, with --scheduler, a Dask cluster: its workers, threads, memory and "
                    "the tensorstream version on each; or, with --devices, the devices "
                    "PyTorch sees.")
    info.add_argument("file", nargs="?", help="the file to describe")
    info.add_argument("--scheduler", metavar="ADDRESS",
                      help="describe the Dask cluster of this scheduler instead")
    info.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                      help="wait this long for the scheduler (default 10)")
    info.add_argument("--devices", action="store_true",
                      help="list the devices PyTorch sees here (for fit --device)")
    _add_debug(info)
    return parser


def _add_debug(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: a sub-command's default must not override "tensorstream --debug COMMAND"
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the full traceback of errors")


def _add_fit(commands: Any) -> None:
    online = registry.registered("online")
    width = max(len(e.name) for e in online) + 2
    models = "\n".join(f"  {e.name:<{width}}{e.summary}" for e in online)
    fit = commands.add_parser(
        "fit", help="learn a CP dictionary from a netCDF, zarr or .npy file",
        description="Learn a CP dictionary from the samples of a data file, mini-batch by "
                    "mini-batch, and write the labelled factors.\n\nmodels:\n" + models,
        epilog=_FIT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_fit_data(fit.add_argument_group("data"))
    _add_fit_model(fit.add_argument_group("model"))
    _add_fit_run(fit.add_argument_group("run"))
    _add_fit_output(fit.add_argument_group("output"))
    _add_debug(fit)


def _add_fit_data(data: Any) -> None:
    data.add_argument("input", metavar="INPUT",
                      help="netCDF file, zarr store or .npy file (samples on its first axis)")
    data.add_argument("--var", metavar="NAME",
                      help="variable to read from a netCDF/zarr file (default: its only one)")
    data.add_argument("--sample-dim", metavar="DIM",
                      help="the dim along which samples lie, e.g. time (required for "
                           "netCDF/zarr; 'sample' for .npy)")
    data.add_argument("--modes", metavar="SPEC",
                      help='the CP modes, e.g. "lat,lon;variable" (see below)')
    data.add_argument("--chunk-size", type=int, metavar="N",
                      help="samples per chunk read from disk (default: the file's chunks, "
                           "or about 1 MiB)")


def _add_fit_model(model: Any) -> None:
    names = [e.name for e in registry.registered("online")]
    model.add_argument("--model", default=None, choices=sorted(names), metavar="NAME",
                       help=f"the learner, one of {', '.join(names)} (default: ocpdl)")
    model.add_argument("--n-components", type=int, metavar="R",
                       help="number of atoms (required)")
    model.add_argument("--alpha", type=float, help="l1 penalty on the codes (sparsity), "
                       "against half the squared error as in scikit-learn")
    model.add_argument("--loss", help="loss / divergence, for models that have one "
                       "(divergence-nmf: e.g. kl, is, beta float)")
    model.add_argument("--missing", choices=["nan"],
                       help="treat NaN entries as missing (default: NaN is an error)")
    model.add_argument("--backend", choices=["numpy", "pytorch"],
                       help="TensorLy backend to compute on (default: numpy)")
    model.add_argument("--device", metavar="DEVICE",
                       help="compute on this device on the pytorch backend: cpu, cuda, "
                            "cuda:1 (default: numpy on the CPU; tensorstream info --devices "
                            "lists them)")
    model.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                       help="any other learner parameter, e.g. --param ridge=0.1 "
                            "(repeatable)")


def _add_fit_run(run: Any) -> None:
    run.add_argument("--batch-size", type=int, metavar="B", help="samples per mini-batch")
    run.add_argument("--epochs", type=int, metavar="E",
                     help="passes over the samples, shuffled (default: the learner's max_iter, as "
                          "fit(X) takes: 'auto' is 10 passes and at least 200 mini-batches, "
                          "at most 200 passes)")
    run.add_argument("--steps", type=int, metavar="N",
                     help="stop after N mini-batches in all (counting those before a resume)")
    run.add_argument("--seed", type=int, metavar="S",
                     help="random seed of the initialisation and the batch order (default: 0)")
    run.add_argument("--checkpoint", metavar="PATH",
                     help="save the learner's state to this .npz file during the run")
    run.add_argument("--checkpoint-every", type=int, default=50, metavar="N",
                     help="mini-batches between checkpoints (default: 50)")
    run.add_argument("--resume", action="store_true",
                     help="continue from --checkpoint (the same data and batch order)")
    run.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    cluster = run.add_mutually_exclusive_group()
    cluster.add_argument("--scheduler", metavar="ADDRESS",
                         help="fit on this Dask cluster (e.g. tcp://host:8786): every batch is "
                              "split across its workers, which read their samples themselves")
    cluster.add_argument("--workers", type=int, metavar="N",
                         help="fit on a local Dask cluster of N worker processes")


def _add_fit_output(out: Any) -> None:
    out.add_argument("--out", required=True, metavar="FILE.nc",
                     help="write the labelled factors to this netCDF file")
    out.add_argument("--codes", action="store_true",
                     help="also compute the codes of every sample (one more pass over the "
                          "data) and write them")
    out.add_argument("--plot", metavar="FILE.png",
                     help="plot the factors (and the loss per step, in FILE_convergence.png)")
    out.add_argument("--plot-components", type=int, default=12, metavar="N",
                     help="components drawn by --plot (default: 12; the figure says how many "
                          "of all it shows)")


def _add_demo(commands: Any) -> None:
    demo = commands.add_parser(
        "demo", help="the built-in demo: synthetic, image-patch and labelled examples",
        description="Three short runs on embedded data (no download): a convergence table on "
                    "a planted model, CP dictionaries of image patches in three reshapings, "
                    "and labelled factors of climate-like data written as netCDF and plotted.")
    demo.add_argument("--out", default="demo-output",
                      help="folder for the figures and files (default: demo-output)")
    demo.add_argument("--steps", type=int, default=200,
                      help="mini-batches of the convergence check (default: 200)")
    demo.add_argument("--batch-size", type=int, default=16,
                      help="samples per mini-batch of the convergence check (default: 16)")
    demo.add_argument("--image-steps", type=int, default=80,
                      help="mini-batches per reshaping of the image example (default: 80)")
    demo.add_argument("--climate-steps", type=int, default=135,
                      help="mini-batches of the labelled example (default: 135)")
    demo.add_argument("--parts", default="synthetic,image,climate",
                      help="which parts to run (default: synthetic,image,climate)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    demo.add_argument("--no-plot", action="store_true", help="print the tables only")
    _add_debug(demo)


# --------------------------------------------------------------------------------------------
# main


def main(argv: list[str] | None = None) -> int:
    """Run the command; return its exit status (0 on success).

    Parameters
    ----------
    argv : list of str, optional
        Arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success, 1 on an error (one line on stderr), 130 when interrupted.
    """
    args = build_parser().parse_args(argv)
    try:
        if args.command == "fit":
            return run_fit(args)
        if args.command == "demo":
            return _run_demo(args)
        if args.command == "select":
            return run_select(args)
        return run_info(args)
    except KeyboardInterrupt:
        if args.debug:
            raise
        print("tensorstream: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # one clear line for users; the traceback with --debug
        if args.debug:
            raise
        print(f"tensorstream: error: {_one_line(error)}", file=sys.stderr)
        return 1


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, FileNotFoundError) and error.filename:
        text = f"no such file or folder: {error.filename!r}"
    elif isinstance(error, (ImportError, MemoryError, OSError)):
        text = f"{type(error).__name__}: {text}"
    return text


def _run_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    for option in ("steps", "batch_size", "image_steps", "climate_steps"):
        if getattr(args, option) < 1:
            raise CLIError(f"--{option.replace('_', '-')} must be >= 1, got "
                           f"{getattr(args, option)}")
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    run_demo(args.out, n_steps=args.steps, batch_size=args.batch_size,
             random_state=args.seed, plot=not args.no_plot, image_steps=args.image_steps,
             climate_steps=args.climate_steps, parts=parts)
    return 0


# --------------------------------------------------------------------------------------------
# fit


def run_fit(args: argparse.Namespace) -> int:
    """``tensorstream fit``: check everything, stream the batches, write the outputs."""
    plan = _plan(args)
    resumed = plan.get("resumed")
    saved = None if resumed is None else resumed.__dict__.get("layout_")
    if saved is not None and args.sample_dim is None:  # --resume: the checkpoint's
        args.sample_dim = saved.sample_dim
    da = _open(args)
    sample_dim = args.sample_dim or ("sample" if plan["format"] == "npy" else None)
    modes = _modes(args, da, sample_dim, plan["model"], saved)
    layout = _layout(da, sample_dim, modes)
    learner = _resume(args, plan, layout) if args.resume else _new_learner(args, plan)
    history, stopped = train(learner, da, sample_dim, modes, plan, args)
    if stopped:
        return 130
    ds = factors(learner, da, args, plan, sample_dim)
    write_outputs(ds, history, args)
    return 0


def _plan(args: argparse.Namespace) -> dict:
    """Validate the options that need no data; check that every output can be written."""
    from ..io import data_format

    for option in ("n_components", "batch_size", "epochs", "steps", "checkpoint_every",
                   "chunk_size", "plot_components"):
        value = getattr(args, option)
        if value is not None and value < 1:
            raise CLIError(f"--{option.replace('_', '-')} must be >= 1, got {value}")
    if args.seed is not None and args.seed < 0:
        raise CLIError(f"--seed must be >= 0, got {args.seed}")
    if args.n_components is None and not args.resume:
        raise CLIError("--n-components is required: the number of atoms to learn "
                       "(e.g. --n-components 8)")
    if args.resume and not args.checkpoint:
        raise CLIError("--resume needs --checkpoint PATH (the checkpoint to continue from)")
    plan = {"format": data_format(args.input)}
    source = Path(args.input)
    if not source.exists():
        raise CLIError(f"cannot read INPUT: no such file or folder: {args.input!r}")
    outputs = {"--out": Path(args.out)}
    _check_writable(args.out, "--out", source)
    if args.plot:
        _check_writable(args.plot, "--plot", source)
        _check_plot_format(args.plot)
        plot = Path(args.plot)
        outputs["--plot"] = plot
        outputs["--plot (its convergence figure)"] = plot.with_name(
            f"{plot.stem}_convergence{plot.suffix or '.png'}")
    if args.checkpoint:
        checkpoint = Path(args.checkpoint)
        if checkpoint.suffix != ".npz":
            checkpoint = checkpoint.with_suffix(checkpoint.suffix + ".npz")
        _check_writable(checkpoint, "--checkpoint", source)
        if args.resume and not checkpoint.is_file():
            raise CLIError(f"nothing to resume: no checkpoint at {str(checkpoint)!r}")
        if not args.resume and checkpoint.exists():
            raise CLIError(f"checkpoint {str(checkpoint)!r} already exists: add --resume to "
                           f"continue from it, or remove it to start over")
        plan["checkpoint"] = checkpoint
        outputs["--checkpoint"] = checkpoint
    _check_distinct(outputs)
    if args.resume:  # the checkpoint fixes the model (and the modes, in _modes)
        from ..io import load_checkpoint

        # --device moves a checkpoint written elsewhere (on a GPU) to this run's device
        plan["resumed"] = load_checkpoint(plan["checkpoint"],
                                          map_location=getattr(args, "device", None))
    name = args.model or (registry.entry(type(plan["resumed"]).__name__).name
                          if args.resume else "ocpdl")
    plan.update(model=name, cls=registry.learner_class(name))
    return plan


def _check_distinct(outputs: dict) -> None:
    """Two outputs on one file would overwrite each other (a checkpoint with the factors)."""
    seen: dict = {}
    for option, path in outputs.items():
        key = path.resolve()
        if key in seen:
            raise CLIError(f"{option} {str(path)!r} is also {seen[key]}; give each output "
                           f"its own file")
        seen[key] = option


def _check_plot_format(path: str) -> None:
    """A format matplotlib cannot write is refused now, not after the fit."""
    suffix = Path(path).suffix.lstrip(".").lower() or "png"
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise CLIError("--plot needs matplotlib: pip install 'tensorstream[plot]'") from None
    formats = FigureCanvasBase.get_supported_filetypes()
    if suffix not in formats:
        raise CLIError(f"cannot write --plot {path!r}: matplotlib does not write "
                       f"{suffix!r} files (it writes {', '.join(sorted(formats))})")


def _check_writable(path: str | Path, option: str, source: Path) -> None:
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise CLIError(f"cannot write {option} {str(path)!r}: it is a folder; give a file name")
    if not folder.is_dir():
        raise CLIError(f"cannot write {option} {str(path)!r}: folder {str(folder)!r} does not "
                       f"exist")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise CLIError(f"cannot write {option} {str(path)!r}: permission denied")
    if path.exists() and source.exists() and path.resolve() == source.resolve():
        raise CLIError(f"{option} {str(path)!r} is the input file; choose another name")


def _open(args: argparse.Namespace) -> Any:
    from ..io import open_dataarray

    return open_dataarray(args.input, args.var, sample_dim=args.sample_dim,
                          chunk_size=args.chunk_size)


def _modes(args: argparse.Namespace, da: Any, sample_dim: str | None, model: str,
           saved: Any = None) -> Any:
    """The mode specification: parsed ``--modes``, the layout ``saved`` in the checkpoint of
    ``--resume``, or the model's default."""
    from ..labels import parse_modes

    if args.modes:
        return parse_modes(args.modes)
    if saved is not None:
        from ..labels import format_modes

        return parse_modes(format_modes(saved.modes))
    if registry.entry(model).matrix:  # a matrix model: every feature dim in one mode
        return [tuple(d for d in da.dims if d != sample_dim)]
    return None


def _layout(da: Any, sample_dim: str | None, modes: Any) -> Any:
    """Validate dims and modes against the data before any work (clear errors)."""
    from ..labels import ModeLayout

    if sample_dim is None:
        raise CLIError(f"--sample-dim is required: the variable {da.name!r} has dims "
                       f"{list(da.dims)}; which one holds the samples (e.g. time)?")
    if da.sizes[sample_dim] == 0:
        raise CLIError(f"the data have no samples (dim {sample_dim!r} is empty)")
    return ModeLayout.from_dataarray(da, sample_dim, modes).check_factor_names()


def _learner_params(args: argparse.Namespace, plan: dict) -> dict:
    """Learner parameters given on the command line (only those given)."""
    model = registry.entry(plan["model"])
    loss = args.loss if args.loss is None else _literal(args.loss)  # 1.5: a beta divergence
    given = {"n_components": args.n_components, "alpha": args.alpha, "loss": loss,
             "missing": args.missing, "backend": args.backend,
             "device": getattr(args, "device", None),
             "batch_size": args.batch_size, "random_state": args.seed}
    params = {model.aliases.get(k, k): v for k, v in given.items() if v is not None}
    return add_params(params, args.param, plan["cls"], plan["model"],
                      lambda name: _option(name, plan))


_OPTIONS = {"n_components": "--n-components", "random_state": "--seed", "alpha": "--alpha",
            "loss": "--loss", "missing": "--missing", "backend": "--backend",
            "device": "--device",
            "batch_size": "--batch-size"}


def _option(param: str, plan: dict) -> str:
    """The command-line spelling of a learner parameter (``--seed``, ``--param ridge``)."""
    options = {v: k for k, v in registry.entry(plan["model"]).aliases.items()}
    name = options.get(param, param)
    return _OPTIONS.get(name, f"--param {param}")


def _new_learner(args: argparse.Namespace, plan: dict) -> Any:
    params = _learner_params(args, plan)
    params.setdefault("random_state", 0)  # reproducible by default; the batch order uses it
    learner = plan["cls"](**params)
    check = getattr(learner, "_check_params", None)
    if check is not None:  # a bad --param is the command line's problem, not the data's
        try:
            check()
        except (TypeError, ValueError) as error:
            raise CLIError(f"invalid model option: {error}") from None
    return learner


def _mismatch(key: str, value: Any, saved: Any, plan: dict) -> str:
    """The message refusing ``--resume`` with an option that differs from the checkpoint's
    parameter."""
    return (f"the checkpoint was made with {_option(key, plan)} {saved!r}, the command line "
            f"says {value!r}; leave the option out to keep the checkpoint's")


def _resume(args: argparse.Namespace, plan: dict, layout: Any) -> Any:
    """The checkpointed learner, checked against the options and the data."""
    from ..io import load_checkpoint

    learner = plan.get("resumed") or load_checkpoint(plan["checkpoint"],
                                                     map_location=getattr(args, "device", None))
    if type(learner) is not plan["cls"]:
        raise CLIError(f"the checkpoint holds a {type(learner).__name__}, not the "
                       f"{plan['cls'].__name__} of --model {plan['model']}")
    saved = learner.get_params()
    for key, value in _learner_params(args, plan).items():
        if saved.get(key) != value:
            raise CLIError(_mismatch(key, value, saved.get(key), plan))
    fitted = learner.__dict__.get("layout_")
    if fitted is None:
        raise CLIError("the checkpoint was made from unlabelled data (Python API); it cannot "
                       "be resumed on a data file")
    if (fitted.sample_dim, fitted.mode_names, fitted.shape, fitted.feature_dims) != (
            layout.sample_dim, layout.mode_names, layout.shape, layout.feature_dims):
        from ..labels import format_modes

        # the modes as --modes writes them: names, stacked dims in order, so a difference in
        # any of them shows
        raise CLIError(f"the checkpoint was made with samples along {fitted.sample_dim!r} and "
                       f"--modes {format_modes(fitted.modes)!r} of shape {fitted.shape}; the "
                       f"data and the command line give samples along {layout.sample_dim!r} "
                       f"and --modes {format_modes(layout.modes)!r} of shape {layout.shape}")
    return learner
