"""Progress of long loops, on a terminal and off it.

On a terminal, a tqdm bar on stderr. Off a terminal (a log file, CI, ``nohup``, a terminal
that reports 0 columns) tqdm's bar is hidden, and a run of several minutes would say nothing until it ends; there a
:class:`Progress` writes one plain line every ``1/lines`` of the way (and at the end)
instead, with the same fields as the bar's postfix. Log lines go through
:func:`write_line`, which prints them above a live bar instead of through it.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, TextIO


class Progress:
    """A progress report over ``total`` units: a tqdm bar on a terminal, else plain lines.

    Args:
        total: Units to do.
        desc: What is being done (the bar's label, the lines' prefix).
        unit: The unit's name.
        initial: Units already done (a resumed run).
        lines: Off a terminal, at most about this many lines (one every ``total / lines``).
        leave: Keep the bar on screen when closed.
        stream: Where to write (stderr).
    """

    def __init__(
        self,
        total: int,
        desc: str,
        unit: str,
        *,
        initial: int = 0,
        lines: int = 20,
        leave: bool = True,
        stream: TextIO | None = None,
    ) -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.done = initial
        self.stream = stream if stream is not None else sys.stderr
        self.every = max(1, -(-total // max(1, lines)))
        self.started = time.perf_counter()
        self.bar: Any = None
        if is_terminal(self.stream):
            try:
                from tqdm.auto import tqdm
            except ImportError:  # lines instead
                return
            self.bar = tqdm(
                total=total, initial=initial, desc=desc, unit=unit, leave=leave,
                file=self.stream, dynamic_ncols=True,
            )  # fmt: skip

    def update(self, n: int = 1, **fields: Any) -> None:
        """Record ``n`` more units done, with the fields to show (e.g. ``loss="0.123"``)."""
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
            if fields:
                self.bar.set_postfix(fields)
            return
        if self.done % self.every == 0 or self.done >= self.total:
            shown = "".join(f", {k} {v}" for k, v in fields.items())
            seconds = time.perf_counter() - self.started
            print(
                f"{self.desc}: {self.done}/{self.total} {self.unit}s{shown} ({seconds:.0f} s)",
                file=self.stream,
                flush=True,
            )

    def close(self) -> None:
        """Close the bar (nothing to do for lines)."""
        if self.bar is not None:
            self.bar.close()


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal that can show a bar: a tty with at least one column.

    Some CI runners and ``script`` report a terminal of 0 columns, where every tqdm bar is
    hidden for the whole run; that counts as not a terminal (plain lines instead).
    """
    isatty = getattr(stream, "isatty", None)
    try:
        if not (callable(isatty) and isatty()):
            return False
        return os.get_terminal_size(stream.fileno()).columns > 0
    except (ValueError, OSError, AttributeError):  # closed, or no file descriptor
        return bool(callable(isatty) and _safe(isatty))


def _safe(call: Any) -> bool:
    try:
        return bool(call())
    except ValueError:
        return False


def write_line(line: str, stream: TextIO | None = None) -> None:
    """Print a log line without breaking a progress bar on screen (tqdm redraws it below)."""
    stream = stream if stream is not None else sys.stderr
    try:
        from tqdm import tqdm
    except ImportError:
        print(line, file=stream, flush=True)
        return
    if getattr(tqdm, "_instances", None):
        tqdm.write(line, file=stream)
    else:
        print(line, file=stream, flush=True)
