"""The ``rods`` command line: ``rods demo``, ``rods eval``, ``rods synth`` and more.

Each subcommand lives in its own module, imported only when it runs (``rods synth`` does not
pay for importing torch, and a broken optional dependency of one command never breaks
another). A command module defines ``add_arguments(parser)`` and ``run(args) -> int``; it
is a thin layer over typed library functions, its options derived from their dataclasses
(:mod:`rods_agent.console.options`).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

from rods_env.errors import RodsError

# subcommand -> (module, help); the module defines add_arguments(parser) and run(args) -> int
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": (
        "rods_agent.commands.demo",
        "oracle and baselines on a seed split: success and progress",
    ),
    "train": ("rods_agent.commands.train", "GRPO training with the RODS data engine in the loop"),
    "report": ("rods_agent.commands.report", "plots and a summary of training runs, side by side"),
    "view": (
        "rods_agent.commands.view",
        "one HTML page of evaluations and training runs: episodes, why turns failed, the pool",
    ),
    "eval": ("rods_agent.commands.eval", "evaluate a model on a task pool (pass^k, progress)"),
    "synth": ("rods_agent.commands.synth", "grow a validated task pool offline from seed tasks"),
    "sft": ("rods_agent.commands.sft", "warm-start a model on oracle transcripts of a task pool"),
    "serve": (
        "rods_agent.commands.serve",
        "serve an environment id over OpenEnv's HTTP/WebSocket/MCP server (docs/hubs.md)",
    ),
    "export": (
        "rods_agent.commands.export",
        "a trained run's checkpoint as a model folder (for rods eval, serving, another run)",
    ),
    "experiment": (
        "rods_agent.commands.experiment",
        "static vs filter vs rods from one warm start, with held-out evaluation (resumable)",
    ),
}

INSTALL_HINT = "pip install -c constraints/cpu.txt -e '.[agent,openai]'"


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (its first non-option word), if any."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; only ``command``'s module is imported to add its options.

    Returns:
        A parser whose namespace carries ``_module`` (the command's module name) and, when
        the module cannot be imported, ``_missing`` (why, in one line).
    """
    parser = argparse.ArgumentParser(prog="rods", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        if name != command:
            p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
            continue
        try:
            add: Callable[[argparse.ArgumentParser], None] = _load(module).add_arguments
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("rods_agent"):
                p.set_defaults(_missing=f"the '{name}' command is not available in this build")
            else:
                p.set_defaults(
                    _missing=f"'{name}' needs the optional dependency '{exc.name}': {INSTALL_HINT}"
                )
            p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
            continue
        add(p)
    return parser


def _load(module: str) -> ModuleType:
    return importlib.import_module(module)


LOGGERS = ("rods_agent", "rods_env")
"""The loggers whose records ``rods`` prints on stderr (:func:`_setup_logging`)."""


class _StderrHandler(logging.Handler):
    """Log records of rods as ``rods CMD: [warning: ]message`` lines on the current stderr."""

    def __init__(self, command: str) -> None:
        super().__init__(logging.INFO)
        self.command = command

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from rods_agent.console.progress import write_line

            level = "" if record.levelno < logging.WARNING else f"{record.levelname.lower()}: "
            write_line(f"rods {self.command}: {level}{record.getMessage()}", sys.stderr)
        except Exception:  # logging must never break the command (a closed stderr ...)
            self.handleError(record)


def _setup_logging(command: str) -> None:
    """Show the INFO messages of rods' own loggers on stderr (once per process)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        for h in list(logger.handlers):
            if isinstance(h, _StderrHandler):
                logger.removeHandler(h)
        logger.addHandler(_StderrHandler(command))
        logger.setLevel(logging.INFO)
        logger.propagate = False


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``rods`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = _command_of(argv)
    parser = build_parser(command)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if getattr(args, "_missing", None):
        print(f"rods: {args._missing}", file=sys.stderr)
        return 2
    _setup_logging(args.command)
    try:
        return int(_load(args._module).run(args) or 0)
    except RodsError as exc:
        message = " ".join(str(exc).split())
        print(f"rods {args.command}: error: {message}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] in ("rods_env", "rods_agent", "environments"):
            raise
        print(
            f"rods {args.command}: error: this needs the optional dependency '{exc.name}': "
            f"{INSTALL_HINT}",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        print(f"rods {args.command}: interrupted; results written so far are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
