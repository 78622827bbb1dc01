"""``rods sft``: warm-start a model on oracle transcripts of a task pool (see :mod:`rods_agent.training.sft`).

    rods sft --config configs/train/cpu.yaml warm_start.epochs=30 --out results/sft

It reads the ``model``, ``rollout``, ``data`` and ``warm_start`` sections of a training
config, fine-tunes the model on the oracle's transcripts of the training pool, measures the
mean progress on those tasks before and after, and saves the model to ``<out>/model``
(``rods train ... model.path=<out>/model`` starts from it).
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``rods sft`` options."""
    parser.add_argument("--config", default=None, help="training config YAML (default: built-in)")
    parser.add_argument("--out", required=True, help="output folder (the model goes to OUT/model)")
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="config overrides, e.g. warm_start.lr=3e-3",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``rods sft``."""
    from rods_agent.training.config import load_config
    from rods_agent.training.sft import run_sft

    config = load_config(args.config, [*args.overrides, f"out={args.out}"])
    metrics = run_sft(config, args.out)
    shown = ", ".join(
        f"{k} {metrics[k]:.3f}"
        for k in ("progress_before", "progress_after", "loss_first", "loss_last")
        if k in metrics
    )
    print(f"rods sft: {int(metrics['transcripts'])} transcripts, {int(metrics['steps'])} steps: "
          f"{shown}; model in {args.out}/model")  # fmt: skip
    return 0
