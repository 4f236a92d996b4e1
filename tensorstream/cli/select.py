"""``tensorstream select``: choose the grouping of modes and the rank of a data file.

Every ``--modes`` is a candidate grouping, every rank of ``--n-components`` a candidate rank;
:func:`tensorstream.model_selection.select` scores them all from the same batches and chooses
one by its documented rule. The table goes to ``--out`` (netCDF ``.nc`` or ``.csv``), the plot
to ``--plot``, the choice to the standard output.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..learners import registry
from .errors import CLIError
from .params import add_params

_EPILOG = """\
examples:
  tensorstream select patches.npy --modes "axis1,axis2;axis3" --modes "axis1;axis2;axis3" \\
      --n-components 2:8 --out selection.nc --plot selection.png
  tensorstream select video.nc --var frames --sample-dim time --modes "y,x;channel" \\
      --modes "y;x;channel" --n-components 4:32:4 --param alpha=0.1

--modes: ';' between modes, ',' between the dims stacked into one mode (as for 'fit');
repeat it for each candidate grouping. --n-components: a list (2,4,8) or an inclusive range
FIRST:LAST or FIRST:LAST:STEP. The rule: among replicable candidates, the one with the fewest
parameters whose imputation error is within one standard error (or --tolerance times) of the
best (docs/model_selection.md).
"""


def add_select(commands: Any) -> None:
    """The ``select`` sub-command's parser."""
    select = commands.add_parser(
        "select", help="choose the grouping of modes and the rank from a data file",
        description="Score every candidate grouping (--modes, repeated) and rank "
                    "(--n-components) online from the same mini-batches, and choose one.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    select.add_argument("input", metavar="INPUT",
                        help="netCDF file, zarr store or .npy file (samples on its first axis)")
    select.add_argument("--var", metavar="NAME", help="variable of a netCDF/zarr file")
    select.add_argument("--sample-dim", metavar="DIM",
                        help="the dim along which samples lie ('sample' for .npy)")
    select.add_argument("--modes", metavar="SPEC", action="append", required=True,
                        help='a candidate grouping, e.g. "y,x;channel"; repeat for each')
    select.add_argument("--n-components", metavar="RANKS", required=True,
                        help="candidate ranks: 2,4,8 or FIRST:LAST[:STEP] (inclusive)")
    names = [e.name for e in registry.registered("online")]
    select.add_argument("--model", default="ocpdl", choices=names, metavar="NAME",
                        help=f"the learner (default ocpdl; one of {', '.join(names)})")
    select.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a learner parameter, e.g. alpha=0.1 (repeatable)")
    select.add_argument("--passes", type=int, default=3, metavar="N",
                        help="passes over the data (default 3)")
    select.add_argument("--splits", type=int, default=3, metavar="N",
                        help="learners per candidate, each on its own share of every batch, "
                             "whose factors are matched for replicability (default 3)")
    select.add_argument("--batch-size", type=int, metavar="N",
                        help="samples per mini-batch (default: the learner's)")
    select.add_argument("--tolerance", type=float, default=0.1, metavar="T",
                        help="relative error gap counted as a tie (default 0.1)")
    select.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    select.add_argument("--out", metavar="FILE",
                        help="write the table: .nc (netCDF) or .csv")
    select.add_argument("--plot", metavar="FILE", help="write the plot (e.g. .png)")
    select.add_argument("--progress", action="store_true", help="show a progress bar")
    select.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the full traceback of errors")


def parse_ranks(text: str) -> list[int]:
    """``"2,4,8"`` or ``"4:32"`` / ``"4:32:4"`` (inclusive) as a list of ranks."""
    try:
        if ":" in text:
            parts = [int(p) for p in text.split(":")]
            if len(parts) not in (2, 3):
                raise ValueError
            first, last, step = (*parts, 1) if len(parts) == 2 else parts
            ranks = list(range(first, last + 1, step))
        else:
            ranks = [int(p) for p in text.split(",")]
    except ValueError:
        raise CLIError(f"--n-components: expected 2,4,8 or FIRST:LAST[:STEP], got {text!r}"
                       ) from None
    if not ranks or min(ranks) < 1:
        raise CLIError(f"--n-components: give positive ranks, got {text!r}")
    return ranks


def run_select(args: argparse.Namespace) -> int:
    """``tensorstream select``: check the options, select, write and print the choice."""
    from ..io import open_dataarray
    from ..model_selection import select

    ranks = parse_ranks(args.n_components)
    for path, suffixes in ((args.out, (".nc", ".csv")), (args.plot, None)):
        if path is not None and suffixes and Path(path).suffix not in suffixes:
            raise CLIError(f"--out must end in .nc or .csv, got {path!r}")
    cls = registry.learner_class(args.model)
    params = {"random_state": args.seed}
    if args.batch_size is not None:
        params["batch_size"] = args.batch_size
    params = add_params(params, args.param, cls, args.model, _option)
    if args.splits < 2:  # replicability matches the factors of two learners at least
        raise CLIError(f"--splits must be at least 2, got {args.splits}")
    if "n_components" in params:  # select tries every rank of --n-components
        raise CLIError("--param n_components: give the candidate ranks as --n-components")
    learner = cls(n_components=ranks[0], **params)
    da = open_dataarray(args.input, args.var, sample_dim=args.sample_dim)
    sample_dim = args.sample_dim or ("sample" if "sample" in da.dims else None)
    if sample_dim is None:
        raise CLIError(f"--sample-dim is required: {da.name!r} has dims {list(da.dims)}")
    result = select(learner, da, sample_dim=sample_dim, modes=args.modes, n_components=ranks,
                    n_passes=args.passes, tolerance=args.tolerance, random_state=args.seed,
                    n_splits=args.splits, verbose=args.progress)
    _write(result, args)
    chosen = result.chosen
    print(f"chosen: --modes \"{chosen['grouping']}\" --n-components {chosen['n_components']}"
          f"  ({result.table.attrs['rule']})")
    return 0


def _write(result: Any, args: argparse.Namespace) -> None:
    if args.out is not None:
        if args.out.endswith(".csv"):
            table = result.table.drop_vars("replicability_per_component")
            table.to_dataframe().to_csv(args.out)
        else:
            table = result.table.copy()
            table["replicable"] = table["replicable"].astype("int8")  # netCDF has no bool
            table.to_netcdf(args.out)
    if args.plot is not None:
        import matplotlib

        matplotlib.use("Agg")
        axes = result.plot()
        axes[0].figure.savefig(args.plot, dpi=120)


def _option(name: str) -> str:
    """The command-line spelling of a learner parameter."""
    return {"random_state": "--seed", "batch_size": "--batch-size"}.get(name, f"--param {name}")
