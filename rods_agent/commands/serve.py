"""``rods serve``: one rods environment id as an OpenEnv server (HTTP, WebSocket, MCP).

Example::

    rods serve rods/Retail-v0 --port 8000
    rods serve rods/Airline-v0 --tasks results/pool.jsonl --split train --port 8001
    rods serve rods/Tau2-Airline-v0 --port 8002 --max-sessions 128

Each WebSocket session is its own episode; the routes are OpenEnv's (``/reset``, ``/step``,
``/state``, ``/schema``, ``/metadata``, ``/health``, ``/ws``, ``/mcp``). Clients: the typed
``rods_agent.integrations.openenv.RodsEnv``, any OpenEnv client, TRL through
``openenv_environment_factory`` (docs/hubs.md). Needs ``bash scripts/setup_openenv.sh``.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``rods serve`` options."""
    parser.add_argument(
        "env_id", metavar="ENV_ID", help="a rods environment id, e.g. rods/Retail-v0"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to bind (default 8000)")
    parser.add_argument(
        "--tasks",
        default=None,
        metavar="POOL",
        help="a JSONL task pool (a synthesized pool, rods synth) instead of the seed tasks",
    )
    parser.add_argument(
        "--split",
        choices=("train", "test", "all"),
        default="all",
        help="the tasks a reset without a task id draws from (default all)",
    )
    parser.add_argument(
        "--max-steps", type=int, default=None, help="agent actions before an episode is cut"
    )
    parser.add_argument(
        "--max-sessions",
        type=int,
        default=64,
        help="concurrent WebSocket sessions, each its own episode (default 64)",
    )
    parser.add_argument(
        "--log-level", default="warning", help="uvicorn's log level (default warning)"
    )


def make_kwargs(args: argparse.Namespace) -> dict[str, object]:
    """The ``gymnasium.make`` arguments the options ask for."""
    kwargs: dict[str, object] = {"split": None if args.split == "all" else args.split}
    if args.tasks is not None:
        kwargs["tasks"] = args.tasks
    if args.max_steps is not None:
        kwargs["max_steps"] = args.max_steps
    return kwargs


def run(args: argparse.Namespace) -> int:
    """Run ``rods serve`` until interrupted."""
    import rods_env  # noqa: F401  (registers the ids)
    from rods_agent.integrations.openenv.server import serve

    serve(
        args.env_id,
        host=args.host,
        port=args.port,
        make_kwargs=make_kwargs(args),
        max_sessions=args.max_sessions,
        log_level=args.log_level,
    )
    return 0
