"""What an evaluation reports while it runs: trials done, tokens, a progress bar."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rods_agent.engines.base import Completion, Engine, GenerationRequest, SamplingParams
from rods_agent.rollouts.batch import EpisodeRecord


# -- progress ----------------------------------------------------------------------------
@dataclass(frozen=True)
class EvalProgress:
    """Where a running evaluation stands (reported after every generation batch).

    Attributes:
        tasks_done: Tasks whose trials have all ended (earlier runs' included).
        tasks: Tasks in the evaluation.
        trials_done: Trials ended in this run.
        trials: Trials this run has to run.
        turns: Completions generated in this run (agent turns, within live trials too).
        tokens: Completion tokens generated in this run.
        successes: Successful trials in this run.
        seconds: Wall time of this run so far.
    """

    tasks_done: int
    tasks: int
    trials_done: int
    trials: int
    turns: int
    tokens: int
    successes: int
    seconds: float


ProgressCallback = Callable[[EvalProgress], None]


class _Tracker:
    """Counts turns, tokens and finished trials, and reports them."""

    def __init__(self, report: ProgressCallback, tasks: int, tasks_done: int, trials: int):
        self.report = report
        self.tasks, self.tasks_done, self.trials = tasks, tasks_done, trials
        self.trials_done = self.turns = self.tokens = self.successes = 0
        self.t0 = time.perf_counter()

    def batch(self, completions: Sequence[Completion]) -> None:
        ok = [c for c in completions if c.finish_reason != "error"]
        self.turns += len(ok)
        self.tokens += sum(c.n_tokens for c in ok)
        self.emit()

    def trial(self, record: EpisodeRecord) -> None:
        self.trials_done += 1
        self.successes += int(record.success)
        self.emit()

    def task(self) -> None:
        self.tasks_done += 1
        self.emit()

    def emit(self) -> None:
        self.report(
            EvalProgress(
                tasks_done=self.tasks_done,
                tasks=self.tasks,
                trials_done=self.trials_done,
                trials=self.trials,
                turns=self.turns,
                tokens=self.tokens,
                successes=self.successes,
                seconds=time.perf_counter() - self.t0,
            )
        )


class _MeteredEngine:
    """An engine that reports each batch of completions to a tracker (same behaviour)."""

    def __init__(self, engine: Engine, tracker: _Tracker) -> None:
        self.engine = engine
        self.chat = engine.chat
        self.tracker = tracker

    def generate(
        self, requests: Sequence[GenerationRequest], params: SamplingParams
    ) -> list[Completion]:
        out = self.engine.generate(requests, params)
        self.tracker.batch(out)
        return out

    def end_episode(self, key: str) -> None:
        end = getattr(self.engine, "end_episode", None)
        if callable(end):
            end(key)

    def close(self) -> None:
        """The wrapped engine belongs to the caller: it is not closed here."""


def _quiet(progress: EvalProgress) -> None:
    """Report nothing."""


class _Bar:
    """A tqdm bar over trials whose postfix shows turns and tokens within live trials (hidden
    when stderr is not a terminal)."""

    def __init__(self, total: int) -> None:
        from tqdm.auto import tqdm

        from rods_agent.console.progress import is_terminal

        self.bar = tqdm(
            total=total,
            desc="trials",
            unit="trial",
            file=sys.stderr,
            disable=not is_terminal(sys.stderr),
        )

    def __call__(self, p: EvalProgress) -> None:
        bar = self.bar
        if bar.total != p.trials:
            bar.total = p.trials
        if p.trials_done > bar.n:
            bar.update(p.trials_done - bar.n)
        rate = f"{p.successes / p.trials_done:.2f}" if p.trials_done else "-"
        bar.set_postfix_str(
            f"tasks {p.tasks_done}/{p.tasks}, turns {p.turns}, tokens {p.tokens:,}, success {rate}"
        )

    def close(self) -> None:
        self.bar.close()
