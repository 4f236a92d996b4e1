"""The ``tensorstream`` command.

``tensorstream demo`` runs the built-in demo (the README's main job). More sub-commands
(``fit`` on netCDF/zarr files, ``info``) belong to the labelled-data/CLI work.
"""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tensorstream",
        description="Online CP-dictionary learning and matrix factorization from streams.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="learn rank-one atoms from a synthetic image stream; prints a convergence "
                     "table and writes a figure")
    demo.add_argument("--out", default="demo-output", help="folder for the figure "
                                                           "(default: demo-output)")
    demo.add_argument("--steps", type=int, default=200, help="mini-batches to learn from")
    demo.add_argument("--batch-size", type=int, default=16, help="samples per mini-batch")
    demo.add_argument("--seed", type=int, default=0, help="random seed")
    demo.add_argument("--no-plot", action="store_true", help="skip the figure")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "demo":
            from .demo import run_demo

            if args.steps < 1 or args.batch_size < 1:
                raise ValueError("--steps and --batch-size must be >= 1")
            run_demo(args.out, n_steps=args.steps, batch_size=args.batch_size,
                     random_state=args.seed, plot=not args.no_plot)
    except Exception as error:  # one clear line for users; the traceback with --debug
        if args.debug:
            raise
        print(f"tensorstream: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
