"""``rods train``: GRPO training with the RODS data engine in the loop.

Example::

    rods train --config configs/simulated.yaml mode=static steps=300 out=runs/static
    rods train --resume out=runs/static          # continue after a kill (config from the run)
    rods train --config configs/cpu.yaml --show-config

Everything is configured in YAML plus ``key=value`` overrides (dotted keys reach into the
sections: ``grpo.lr=1e-6``, ``data.capacity=400``); see :mod:`rods_agent.config`.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``rods train`` options."""
    parser.add_argument("--config", type=Path, default=None, help="YAML config file")
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="config overrides, e.g. mode=static steps=300 out=DIR grpo.lr=1e-6",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in `out` from its last checkpoint (without --config, the "
        "run's own config.yaml is used)",
    )
    parser.add_argument(
        "--show-config",
        action="store_true",
        help="print the resolved configuration with each key's help, and exit",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``rods train``."""
    from rods_agent.config import describe_config, load_config

    config = load_config(args.config, args.overrides)
    if args.resume and args.config is None:
        saved = Path(config.out) / "config.yaml"
        if saved.exists():
            config = load_config(saved, args.overrides)
    if args.show_config:
        print("\n".join(describe_config(values=config)))
        return 0

    from rods_agent.training.loop import train

    out = train(config, resume=args.resume)
    simulated = " (simulated learner: no model was trained)" if config.policy == "simulated" else ""
    print(f"trained {config.steps} steps, mode {config.mode}{simulated}")
    print(f"metrics in {out / 'metrics.jsonl'}; plots: rods report {out}")
    return 0
