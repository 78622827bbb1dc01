"""``rods report``: plots and a summary of training runs, side by side.

Example::

    rods report runs/static runs/filter runs/rods --out runs/report

Draws ``reward.png``, ``effective_group_ratio.png``, ``zones.png``, ``pool.png`` and
``variance.png`` and writes ``report.md`` (see :mod:`rods_agent.training.report`).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``rods report`` options."""
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help="run directories")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the plots (default: RUN_DIR/report for one run; required for several)",
    )
    parser.add_argument(
        "--window", type=int, default=10, help="steps averaged in the plotted curves (default 10)"
    )


def run(args: argparse.Namespace) -> int:
    """Run ``rods report``."""
    from rods_agent.training.report import make_report
    from rods_env.errors import ConfigError

    if args.out is None:
        if len(args.runs) > 1:
            raise ConfigError("--out is needed when reporting on several runs")
        args.out = args.runs[0] / "report"
    if args.window < 1:
        raise ConfigError(f"--window must be at least 1, got {args.window}")
    written = make_report(args.runs, args.out, window=args.window)
    print((args.out / "report.md").read_text(encoding="utf-8"))
    print(f"wrote {', '.join(p.name for p in written)} to {args.out}")
    return 0
