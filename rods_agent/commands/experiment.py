"""``rods experiment``: static vs filter vs rods from one warm start, at equal rollouts.

    rods experiment configs/experiment/learning-cpu.yaml                 # runs, or resumes, every stage
    rods experiment configs/experiment/learning-cpu.yaml runs.seeds=[0]  # key=value overrides
    rods experiment configs/experiment/learning-cpu.yaml --summary       # redraw the summary only
    rods experiment configs/experiment/paper.yaml train.model.path=DIR   # the RODS paper's setting

On a benchmark with its own train split (``env: bfcl-paper``, configs/experiment/paper.yaml) there is
no warm start: every arm starts from ``train.model.path``, and the summary gives BFCL's
numbers per category per arm on the test split beside the paper's rows.

The stages and what each writes are in :mod:`rods_agent.experiment.runner` and
docs/learning/protocol.md. A rerun with the same configuration continues where the last one stopped;
one with other settings is refused, naming them.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``rods experiment`` options."""
    parser.add_argument(
        "config",
        type=Path,
        help="experiment YAML (configs/experiment/learning-cpu.yaml; configs/experiment/paper.yaml: the paper's setting)",
    )
    parser.add_argument(
        "overrides", nargs="*", metavar="key=value", help="overrides, e.g. runs.steps=8"
    )
    parser.add_argument(
        "--summary",
        action="store_true",
        help="only (re)write the summary, table and plots from what the stages wrote",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``rods experiment``."""
    from rods_agent.experiment.config import load_experiment
    from rods_agent.experiment.runner import Experiment
    from rods_agent.experiment.summary import write_summary

    config = load_experiment(args.config, args.overrides)
    if args.summary:
        write_summary(config, Path(config.out))
        print(f"rods experiment: summary in {Path(config.out) / 'summary.md'}")
        return 0
    Experiment(config).run()
    print((Path(config.out) / "summary.md").read_text(encoding="utf-8"))
    return 0
