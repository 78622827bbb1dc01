"""``rods train``: GRPO training with the RODS data engine in the loop.

Example::

    rods train --config configs/train/simulated.yaml mode=static steps=300 out=runs/static
    rods train --resume out=runs/static          # continue after a kill (config from the run)
    rods train --config configs/train/cpu.yaml --show-config

Everything is configured in YAML plus ``key=value`` overrides (dotted keys reach into the
sections: ``grpo.lr=1e-6``, ``data.capacity=400``); see :mod:`rods_agent.training.config`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rods_agent.training.config import TrainConfig


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
    from rods_agent.training.config import describe_config, load_config

    config = load_config(args.config, args.overrides)
    if args.resume and args.config is None:
        saved = Path(config.out) / "config.yaml"
        if saved.exists():
            config = load_config(saved, args.overrides)
    if args.show_config:
        print("\n".join(describe_config(values=config)))
        return 0

    from rods_agent.training.loop import train
    from rods_agent.training.run_dir import checkpoint_dirs

    out = Path(config.out)
    done_before = checkpoint_dirs(out)[-1][0] if args.resume and checkpoint_dirs(out) else 0
    if args.resume and done_before >= config.steps:
        print(
            f"rods train: nothing to do: {out} has done its {done_before} of {config.steps} "
            f"steps already (pass steps=N with N > {done_before} to train on); "
            f"plots: rods report {out}; transcripts: rods view {out}"
        )
        return 0
    train(config, resume=args.resume)
    print(outcome(config, out, done_before))
    return 0


def outcome(config: TrainConfig, out: Path, start: int) -> str:
    """What the run did, in words: the steps trained, or why it stopped early, and the
    mode with the synthesis modes it used."""
    from rods_agent.training.config import mode_label
    from rods_env.fileio import read_jsonl

    rows = [r for r in read_jsonl(out / "metrics.jsonl") if isinstance(r.get("step"), int)]
    done = max((r["step"] for r in rows), default=-1) + 1
    simulated = " (simulated learner: no model was trained)" if config.policy == "simulated" else ""
    shown = mode_label(config.mode, config.data.synth_modes, synthesize=config.data.synthesize)
    trained = done - start
    if start and trained > 0:
        what = f"trained steps {start}-{done - 1} ({trained} steps, resumed at {start})"
    elif trained > 0:
        what = f"trained {trained} steps"
    else:
        what = "trained no step"
    if done < config.steps:
        what += (
            f", then stopped early at step {done} of {config.steps}: the pool was exhausted "
            "(every task retired, or parked as hard and seen hard again)"
        )
    return (
        f"rods train: {what}, mode {shown}{simulated}\n"
        f"metrics in {out / 'metrics.jsonl'}; plots: rods report {out}; "
        f"transcripts: rods view {out}"
    )
