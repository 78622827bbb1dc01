"""``rods view``: one self-contained HTML page of evaluation folders and training runs.

Example::

    rods view results/oracle results/random --out results/view.html
    rods view results/cpu                       # a training run: results/cpu/view.html

Shows every episode with filters and sorting, one episode's conversation turn by turn with
the rule that failed each failed turn and the gold calls beside the agent's, and for a
training run the ``rods report`` panels and the pool's story (see docs/view.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``rods view`` options."""
    from rods_agent.view import MAX_CHARS, MAX_EPISODES

    parser.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="evaluation folders (rods eval --out), training runs, or episodes JSONL files",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the HTML file (default: PATH/view.html for one folder; required for several)",
    )
    parser.add_argument(
        "--max-chars",
        type=int,
        default=MAX_CHARS,
        help=f"characters of a tool output kept in the page; other messages keep twice this "
        f"(default {MAX_CHARS:,}); the files read are never changed",
    )
    parser.add_argument(
        "--max-episodes",
        type=int,
        default=MAX_EPISODES,
        help=f"most episodes in the page; beyond it an even sample (default {MAX_EPISODES:,})",
    )
    parser.add_argument("--title", default=None, help="the page's title")


def run(args: argparse.Namespace) -> int:
    """Run ``rods view``."""
    from rods_agent.view import view
    from rods_env.errors import ConfigError

    if args.out is None:
        if len(args.paths) > 1 or not args.paths[0].is_dir():
            raise ConfigError("--out FILE.html is needed for several paths or a file")
        args.out = args.paths[0] / "view.html"
    if args.out.exists() and args.out.is_dir():
        raise ConfigError(f"--out {args.out} is a folder; give a file such as view.html")
    if args.max_chars < 100:
        raise ConfigError(f"--max-chars must be at least 100, got {args.max_chars}")
    if args.max_episodes < 1:
        raise ConfigError(f"--max-episodes must be at least 1, got {args.max_episodes}")
    stats = view(
        args.paths,
        args.out,
        max_chars=args.max_chars,
        max_episodes=args.max_episodes,
        title=args.title,
    )
    shown = (
        f"{stats.episodes:,} episodes"
        if stats.episodes == stats.total
        else f"{stats.episodes:,} of {stats.total:,} episodes (an even sample: --max-episodes)"
    )
    print(
        f"rods view: wrote {stats.path} ({stats.bytes / 1e6:.1f} MB, {shown}, "
        f"{stats.cut_messages:,} long messages cut to the page's bound); open it in a browser"
    )
    return 0
