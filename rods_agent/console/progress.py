"""Progress of long loops, on a terminal, off it, and to a parent process.

On a terminal, a tqdm bar on stderr. Off a terminal (a log file, CI, ``nohup``, a terminal
that reports 0 columns) tqdm's bar is hidden, and a run of several minutes would say nothing
until it ends; there a :class:`Progress` writes one plain line every ``1/lines`` of the way
(and at the end) instead, with the same fields as the bar's postfix and the time left at the
rate measured so far. Log lines go through :func:`write_line`, which prints them above a live
bar instead of through it.

A process run by another (``rods experiment`` runs each stage as a child whose output goes
to a log file) also reports to a small JSON file named by :data:`PROGRESS_FILE`: every
:class:`Progress` writes its :class:`Snapshot` there (at its start, at its first estimate,
then at most once a second, and at the end) whether or not it shows anything on stderr, and the parent reads it with
:func:`read_snapshot`.

An estimate comes only from a measured rate: before the first unit is done there is none
(:func:`left_text` says "not yet measured"), and while work remains it is never 0.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rods_env.fileio import write_json

PROGRESS_FILE = "RODS_PROGRESS_FILE"
"""The environment variable naming the file a process reports its progress to (set by
``rods experiment`` for the stages it runs; unset: no file)."""

WRITE_EVERY = 1.0
"""Seconds between two writes of the progress file (the last unit is always written)."""


@dataclass(frozen=True)
class Snapshot:
    """Where one loop stands, as written to the progress file.

    Attributes:
        what: What is being done (``warm start (SFT)``, ``rollouts``, ``evaluation``).
        unit: The unit's name (``batch``, ``episode``).
        done: Units done (earlier runs' included).
        total: Units to do.
        seconds: Wall time of this run of the loop so far.
        left: Seconds left at the rate measured so far; None before the first unit of
            this run is done.
        fields: What else the loop shows (e.g. ``{"loss": "0.123"}``).
    """

    what: str
    unit: str
    done: int
    total: int
    seconds: float
    left: float | None
    fields: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """One phrase: ``warm start (SFT): 12 of 40 batches, 41 s each, about 0:19:08 for
        the other 28 (loss 0.123)``."""
        remaining = self.total - self.done
        head = f"{self.what}: {self.done} of {self.total} {plural(self.unit)}"
        if remaining <= 0:
            rate = "all done"
        elif self.left is None:
            rate = f"time per {self.unit} not yet measured"
        else:
            each = self.left / remaining
            rate = f"{seconds_text(each)} each, {left_text(self.left, remaining, rest=True)}"
        shown = ", ".join(f"{k} {v}" for k, v in self.fields.items())
        return f"{head}, {rate}" + (f" ({shown})" if shown else "")


class Progress:
    """A progress report over ``total`` units: a tqdm bar on a terminal, else plain lines;
    and the progress file when :data:`PROGRESS_FILE` names one.

    Args:
        total: Units to do.
        desc: What is being done (the bar's label, the lines' prefix).
        unit: The unit's name.
        initial: Units already done (a resumed run).
        lines: Off a terminal, at most about this many lines (one every ``total / lines``);
            0: none (a bar on a terminal only).
        leave: Keep the bar on screen when closed.
        stream: Where to write (stderr).
        show: False shows nothing on ``stream`` (``log.progress: false``, ``--no-progress``);
            the progress file is written all the same.
        file: Where to write the progress file (default: the path in :data:`PROGRESS_FILE`,
            none when it is unset).
        clock: Seconds, for the rate (``time.perf_counter``; tests pass a fake one).
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
        show: bool = True,
        file: str | Path | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.done = self.initial = initial
        self.stream = stream if stream is not None else sys.stderr
        self.lines = lines if show else 0
        self.every = max(1, -(-total // max(1, lines)))
        self.clock = clock
        self.started = clock()
        self.fields: dict[str, str] = {}
        named = file if file is not None else os.environ.get(PROGRESS_FILE)
        self.file = Path(named) if named else None
        self.written: float | None = None
        self.rated = False  # whether the file holds an estimate yet
        self.bar: Any = None
        self._write_file(force=True)  # the parent sees the loop begin, with no estimate
        if show and is_terminal(self.stream):
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
        if fields:
            self.fields = {k: str(v) for k, v in fields.items()}
        # the first estimate and the end are written at once; the rest once a second
        self._write_file(force=self.done >= self.total or not self.rated)
        if self.bar is not None:
            self.bar.update(n)
            if fields:
                self.bar.set_postfix(fields)
            return
        if self.lines and (self.done % self.every == 0 or self.done >= self.total):
            shown = "".join(f", {k} {v}" for k, v in self.fields.items())
            snap = self.snapshot()
            remaining = self.total - self.done
            left = f", {left_text(snap.left, remaining)}" if remaining > 0 else ""
            print(
                f"{self.desc}: {self.done}/{self.total} {plural(self.unit)}{shown} "
                f"({snap.seconds:.0f} s{left})",
                file=self.stream,
                flush=True,
            )

    def to(self, done: int, **fields: Any) -> None:
        """Record that ``done`` units are done in all (a loop that counts for itself)."""
        if done > self.done:
            self.update(done - self.done, **fields)

    def snapshot(self) -> Snapshot:
        """Where the loop stands, with the time left at the rate of this run's units."""
        seconds = self.clock() - self.started
        return Snapshot(
            what=self.desc,
            unit=self.unit,
            done=self.done,
            total=self.total,
            seconds=seconds,
            left=seconds_left(self.done - self.initial, self.total - self.done, seconds),
            fields=dict(self.fields),
        )

    def close(self) -> None:
        """Close the bar, and write the progress file's last state."""
        self._write_file(force=True)
        if self.bar is not None:
            self.bar.close()

    def _write_file(self, *, force: bool) -> None:
        if self.file is None:
            return
        now = self.clock()
        if not force and self.written is not None and now - self.written < WRITE_EVERY:
            return
        self.written = now
        snap = self.snapshot()
        self.rated = snap.left is not None
        try:
            write_json(self.file, asdict(snap), indent=None)
        except OSError:  # a report that cannot be written must not stop the work
            self.file = None


def read_snapshot(path: str | Path) -> Snapshot | None:
    """The progress a process last wrote to ``path`` (None: none yet, or unreadable)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return Snapshot(
            what=str(data["what"]),
            unit=str(data["unit"]),
            done=int(data["done"]),
            total=int(data["total"]),
            seconds=float(data["seconds"]),
            left=None if data.get("left") is None else float(data["left"]),
            fields={str(k): str(v) for k, v in (data.get("fields") or {}).items()},
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def seconds_left(done: int, remaining: int, seconds: float) -> float | None:
    """Seconds for ``remaining`` more units at the rate of ``done`` units in ``seconds``
    (None before the first unit: no rate measured yet; 0 when nothing remains)."""
    if remaining <= 0:
        return 0.0
    if done <= 0:
        return None
    return seconds / done * remaining


def left_text(left: float | None, remaining: int = 1, *, rest: bool = False) -> str:
    """``about 0:03:10 left`` (``rest``: ``about 0:03:10 for the other 7``); ``time left
    not yet measured`` without an estimate; never 0 seconds while ``remaining`` > 0."""
    if remaining <= 0:
        return "nothing left"
    if left is None:
        return "time left not yet measured"
    shown = hms(max(1.0, math.ceil(left)))
    return f"about {shown} for the other {remaining}" if rest else f"about {shown} left"


def seconds_text(seconds: float) -> str:
    """A duration for a human: ``0.012 s``, ``0.4 s``, ``41 s``, ``0:03:10``."""
    if seconds < 0.1:
        return f"{seconds:.2g} s"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return hms(seconds)


def hms(seconds: float) -> str:
    """``H:MM:SS`` (rounded to the second)."""
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def plural(unit: str) -> str:
    """``step`` -> ``steps``, ``batch`` -> ``batches``."""
    return unit + ("es" if unit.endswith(("s", "sh", "ch", "x")) else "s")


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
