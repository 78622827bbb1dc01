"""The ``rods`` command line: ``rods demo``, ``rods train``, ``rods report``, ``rods eval``,
``rods synth``, ``rods sft``.

Each subcommand lives in its own module, imported only when it runs, so ``rods synth`` does
not pay for importing torch.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable

from rods_env.errors import RodsError

# subcommand -> (module, help); the module defines add_arguments(parser) and run(args) -> int
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": (
        "rods_agent.commands.demo",
        "oracle and baselines on a seed split: success and progress",
    ),
    "train": ("rods_agent.commands.train", "GRPO training with the RODS data engine in the loop"),
    "report": ("rods_agent.commands.report", "plots and a summary of training runs, side by side"),
    "eval": ("rods_agent.commands.eval", "evaluate a model on a task pool (pass^k, progress)"),
    "synth": ("rods_agent.commands.synth", "grow a validated task pool offline from seed tasks"),
    "sft": ("rods_agent.commands.sft", "warm-start a model on oracle transcripts of a task pool"),
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="rods", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        try:
            add: Callable[[argparse.ArgumentParser], None] = importlib.import_module(
                module
            ).add_arguments
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("rods_agent"):
                p.set_defaults(_missing=f"the '{name}' command is not available in this build")
            else:
                p.set_defaults(
                    _missing=f"'{name}' needs the optional dependency '{exc.name}': "
                    "pip install -c constraints/cpu.txt -e '.[agent,openai]'"
                )
            p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
            continue
        add(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``rods`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if getattr(args, "_missing", None):
        print(f"rods: {args._missing}", file=sys.stderr)
        return 2
    try:
        return int(importlib.import_module(args._module).run(args) or 0)
    except RodsError as exc:
        print(f"rods {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] in ("rods_env", "rods_agent", "environments"):
            raise
        print(
            f"rods {args.command}: error: this needs the optional dependency '{exc.name}': "
            "pip install -c constraints/cpu.txt -e '.[agent,openai]'",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        print(f"rods {args.command}: interrupted; results written so far are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
