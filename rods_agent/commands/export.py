"""``rods export``: a trained run's model as a plain model folder (:mod:`rods_agent.training.export`).

    rods export results/train --out results/train-model             # the newest checkpoint
    rods export results/train --step 12 --out results/train-step-12
    rods eval --env retail --engine transformers --model results/train-model --out ...

The folder holds the weights in the learner's dtype (LoRA merged in), the run model's
tokenizer and chat template, and ``rods_export.json`` naming the run, checkpoint and step.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``rods export`` options."""
    parser.add_argument("run", help="a rods train output folder (its checkpoints/)")
    parser.add_argument("--out", required=True, help="the model folder to write")
    parser.add_argument(
        "--step",
        type=int,
        default=None,
        help="the checkpoint after this many steps (default: newest)",
    )
    parser.add_argument(
        "--base",
        default=None,
        help="the model folder the run started from, where it has moved since "
        "(default: the folder the checkpoint names, else the run's model.path)",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``rods export``."""
    from rods_agent.training.export import export_model

    out, steps = export_model(args.run, args.out, step=args.step, base=args.base)
    print(f"rods export: the model after {steps} steps of {args.run} is in {out}")
    return 0
