"""``rods serve``: one rods environment id as an OpenEnv server (HTTP, WebSocket, MCP).

Example::

    rods serve rods/Retail-v0 --port 8000
    rods serve rods/Airline-v0 --tasks results/pool.jsonl --split train --port 8001
    rods serve rods/Tau2-Airline-v0 --port 8002 --max-sessions 128

Each session is its own episode: a WebSocket (``/ws``), or an HTTP session
(``openenv/session/create`` on ``/mcp``, then ``/reset``, ``/step``, ``/state`` with its
``session_id``). Sessions close after ``--idle-timeout`` seconds without a message, and
every route is bounded (body, frame, nesting; docs/hubs.md, "Limits"). Clients: the typed
``rods_agent.integrations.openenv.RodsEnv``, any OpenEnv client, TRL through
``openenv_environment_factory`` (docs/hubs.md). Needs ``bash scripts/setup.sh openenv``.
"""

from __future__ import annotations

import argparse
import dataclasses

from rods_agent.integrations.openenv.limits import ServeLimits

DEFAULTS = ServeLimits()


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
        default=DEFAULTS.max_sessions,
        help=f"sessions at once, each its own episode (default {DEFAULTS.max_sessions})",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=DEFAULTS.idle_timeout_s,
        metavar="SECONDS",
        help="a session with no message for this long is closed "
        f"(default {DEFAULTS.idle_timeout_s:g})",
    )
    parser.add_argument(
        "--reclaim-idle",
        type=float,
        default=DEFAULTS.reclaim_idle_s,
        metavar="SECONDS",
        help="when every session is taken, one idle this long gives its slot to a new "
        f"client (default {DEFAULTS.reclaim_idle_s:g})",
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


def limits(args: argparse.Namespace) -> ServeLimits:
    """The server's limits: the flags over the defaults (the same as the hub app's)."""
    return dataclasses.replace(
        DEFAULTS,
        max_sessions=args.max_sessions,
        idle_timeout_s=args.idle_timeout,
        reclaim_idle_s=args.reclaim_idle,
    )


def run(args: argparse.Namespace) -> int:
    """Run ``rods serve`` until interrupted."""
    import rods_env  # noqa: F401  (registers the ids)
    from rods_agent.integrations.openenv.server import serve

    serve(
        args.env_id,
        host=args.host,
        port=args.port,
        make_kwargs=make_kwargs(args),
        limits=limits(args),
        log_level=args.log_level,
    )
    return 0
