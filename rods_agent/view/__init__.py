"""``rods view``: see what the agent did and why it scored what it scored.

One self-contained HTML file (no network, no CDN: it opens from a laptop's disk or a
cluster's shared folder) for evaluation folders (``rods eval --out``), training runs
(``rods train``'s run directory, with its ``rollouts/``) or episode files, several side by
side::

    from rods_agent.view import view
    stats = view(["results/oracle", "results/random"], "results/view.html")

Sources are read by :mod:`rods_agent.view.sources`; the page is built by
:mod:`rods_agent.view.page` from ``static/`` (its HTML, CSS and JavaScript).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rods_agent.view.page import MAX_CHARS, MAX_EPISODES, PageStats, write_page
from rods_agent.view.sources import Source, load_sources

__all__ = ["MAX_CHARS", "MAX_EPISODES", "PageStats", "Source", "load_sources", "view"]


def view(
    paths: Sequence[str | Path],
    out: str | Path,
    *,
    max_chars: int = MAX_CHARS,
    max_episodes: int = MAX_EPISODES,
    title: str | None = None,
) -> PageStats:
    """Write the page for evaluation folders, training runs or episode files.

    Args:
        paths: What to show.
        out: The HTML file to write.
        max_chars: Characters of a tool output kept in the page (other messages: twice).
        max_episodes: Most episodes in the page (beyond it, an even sample, said on the page).
        title: The page's title (default: the sources' names).

    Raises:
        ConfigError: for a path that is none of these, in one line.
    """
    return write_page(
        load_sources(paths), out, max_chars=max_chars, max_episodes=max_episodes, title=title
    )
