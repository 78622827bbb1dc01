"""``rods eval``: evaluate a model on a task pool (implementation in :mod:`rods_agent.evaluate`)."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``rods eval`` options."""
    from rods_agent.evaluate import add_eval_arguments

    add_eval_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Run ``rods eval``."""
    from rods_agent.evaluate import run_eval

    return run_eval(args)
