"""Benchmark domains: another benchmark's environment, tasks and scorer, inside rods.

A rods domain (:class:`rods_env.domain.Domain`) generates its database, defines its tools
with rods' toolkit, is scored by rods' turn rules in :class:`rods_env.env.ToolEnv` and can
synthesize new tasks. A benchmark brought in as it is (τ²-bench, BFCL) keeps its own state,
tools and scorer, because agreeing with its own checker verdict for verdict is the point.
It enters rods as a :class:`BenchmarkDomain`, declared through the same ``rods.domains``
entry points and registered as ``rods/<Title>-v0`` like any domain.

Everything downstream (rollouts, ``rods eval``, ``rods train``, the data engine) then
needs only what this class declares:

* :meth:`~BenchmarkDomain.seed_tasks`: the benchmark's tasks as rods
  :class:`~rods_env.task.Task` views (ids, splits, a skill label for breakdowns);
* :meth:`~BenchmarkDomain.make_env`: an environment with :class:`~rods_env.env.ToolEnv`'s
  contract: ``reset(options={"task": ..., "split": ...})``; ``step`` taking raw text or a
  message dict; ``info`` with ``task_id``, ``messages``, ``tools``, ``policy``,
  ``progress``, ``success``, ``turn_results`` and ``termination``; ``truncate(reason)``
  (:class:`~rods_env.episode.Truncatable`: a rollout that stops the episode by a limit of
  its own calls it); and, in the final ``info``, optionally ``benchmark_record``: the episode in the
  benchmark's own format (JSON), which rollouts keep with the episode;
* :meth:`~BenchmarkDomain.check_tasks`: whether the tasks' gold is sound (``rods eval``
  refuses to score tasks nobody can pass);
* :meth:`~BenchmarkDomain.training_tasks`: the pool training may use (a benchmark's test
  split never; by default no task that a cheap exploit passes,
  :meth:`~BenchmarkDomain.exploitable_task_ids`);
* :meth:`~BenchmarkDomain.oracle_agent`: an agent that solves a task (the ``oracle``
  engine, warm starts);
* :attr:`~BenchmarkDomain.synthesis`: whether rods' synthesis can grow its tasks, and why not;
* :attr:`~BenchmarkDomain.train_domain`: the rods domain ``rods train`` trains on when the
  benchmark has no train split of its own (its tasks are then only evaluated);
* :meth:`~BenchmarkDomain.missing`: a one-line reason when the benchmark's own package is
  not installed (with the command that installs it); the registry raises
  :class:`~rods_env.errors.BenchmarkUnavailableError` with it when an environment is made;
* :meth:`~BenchmarkDomain.scores`: the benchmark's own headline numbers (what its
  leaderboard reports), printed by ``rods eval`` beside pass^k and progress;
* :attr:`~BenchmarkDomain.max_steps`: the most agent steps one episode may take under the
  benchmark's own rules;
* :attr:`~BenchmarkDomain.verdicts`: the verdicts its environment gives side by side, when
  its own checker's verdicts (``"official"``, the first) and the correct ones
  (``"strict"``) can part: ``make_env(verdicts=...)`` picks the one that makes the reward,
  and the final ``info["verdicts"]`` holds each (``{"success", "progress", "turns"}``) and
  ``"differences"`` (where they part, and why), which ``rods eval`` reports;
* :meth:`~BenchmarkDomain.write_results`: the benchmark's own result files of an evaluation
  (from its episodes' ``benchmark_record``), which ``rods eval`` writes beside
  ``episodes.jsonl`` so that the benchmark's own tools can check rods' scores.

One entry point is one Gymnasium id. A benchmark with several subsets (BFCL's categories)
declares one entry point per subset, each naming its own instance. The entry-point name is
the id's title with its case (``BFCL-MultiTurn-Base`` gives ``rods/BFCL-MultiTurn-Base-v0``;
an all-lower-case name is title-cased, ``tau2-airline`` gives ``rods/Tau2-Airline-v0``) and
its lower-case form is the domain's :attr:`~BenchmarkDomain.name`. The module an entry point
names is imported only when its environment or tasks are needed, so it may import the
benchmark's package at the top; :meth:`~BenchmarkDomain.missing` must not need it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rods_env.errors import BenchmarkUnavailableError, ConfigError
from rods_env.task import Task


class BenchmarkDomain(ABC):
    """A domain whose environment, tasks and scorer are another benchmark's.

    Attributes:
        name: Lower-case name, also the entry-point name (``"tau2-airline"``).
        title: Name in environment ids (``"Tau2-Airline"`` gives ``rods/Tau2-Airline-v0``).
        version: Environment version in the id.
        user_modes: The users its environment takes: ``"scripted"`` (a deterministic
            stand-in), ``"llm"`` (a model playing the benchmark's user), ``"solo"`` (no
            user at all).
        synthesis: None when rods' synthesis can grow its tasks; otherwise why it cannot
            (``rods train mode=rods`` refuses it with this reason).
        train_domain: The rods domain that stands in for a train split the benchmark does
            not have (BFCL: ``bfcl-api``, the same API classes with tasks of rods' own):
            ``rods train env=[<benchmark>]`` trains on that domain's tasks and evaluates on
            the benchmark's. None: train on the benchmark's own train split.
        max_episode_tokens: The conversation length (tokens, prompt included) its episodes
            need, when more than ``rods eval``'s default of 8,192 (τ²-bench's policies and
            tools alone take 5,000-9,000); None: the default.
        verdicts: The verdicts its environment gives side by side (the first is the
            benchmark's own, the default; see the module doc); empty: only its own.
    """

    name: str
    title: str
    version: int = 0
    user_modes: tuple[str, ...] = ("scripted", "llm")
    synthesis: str | None = "rods' synthesis has no skills for this benchmark's tasks"
    max_steps: int = 200
    description: str = ""
    train_domain: str | None = None
    max_episode_tokens: int | None = None
    verdicts: tuple[str, ...] = ()

    def missing(self) -> str | None:
        """None when the benchmark's own package is usable; otherwise one line saying what is
        missing and the command that installs it (e.g. ``"bfcl-eval is not installed: bash
        scripts/setup.sh bfcl"``). Must not import the package at module level."""
        return None

    def require(self) -> None:
        """Raise :class:`~rods_env.errors.BenchmarkUnavailableError` (one line, with the
        install command) when the benchmark's package is not usable."""
        reason = self.missing()
        if reason is not None:
            raise BenchmarkUnavailableError(f"benchmark '{self.name}': {reason}")

    def scores(self, successes: Mapping[str, Sequence[bool]]) -> Mapping[str, float | None]:
        """The benchmark's own headline numbers, in display order (e.g. accuracy per
        category and overall), from each task id's trial successes; empty when it reports
        nothing beyond pass^k."""
        return {}

    @property
    def env_id(self) -> str:
        """The Gymnasium id, e.g. ``rods/Tau2-Airline-v0``."""
        return f"rods/{self.title}-v{self.version}"

    @abstractmethod
    def seed_tasks(self, split: str | None = None) -> list[Task]:
        """The benchmark's tasks as rods views, optionally of one split (``train``/``test``)."""

    @abstractmethod
    def make_env(self, **kwargs: Any) -> Any:
        """An environment with ToolEnv's contract. Takes ToolEnv's keyword arguments
        (``tasks``, ``split``, ``max_steps``, ``user``, ``render_mode``) and its own."""

    @abstractmethod
    def check_tasks(self, tasks: Sequence[Task]) -> list[str]:
        """What is wrong with ``tasks`` (one line each; empty when every task can be
        run and passed)."""

    @abstractmethod
    def oracle_agent(self, task: Task, *, user_mode: str = "scripted") -> Any:
        """An agent (``act(observation, info) -> action``) that solves ``task`` in an
        environment with the given user mode."""

    @property
    @abstractmethod
    def policy(self) -> str:
        """What the agent is told before the conversation (its system prompt)."""

    @abstractmethod
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The agent's tool schemas (OpenAI format)."""

    def write_results(
        self, episodes: Sequence[Mapping[str, Any]], folder: Path, run: Mapping[str, Any]
    ) -> list[Path]:
        """Write the benchmark's own result files for an evaluation into ``folder``.

        Args:
            episodes: The rows of ``episodes.jsonl`` of this benchmark's tasks (each with
                the ``benchmark_record`` its environment gave, when it gave one).
            folder: The run folder (``--out``); files go into a subfolder of it.
            run: The run's settings (``config.json``: model, user model, trials...).

        Returns:
            The files written (none by default: the benchmark has no result format).
        """
        return []

    def exploitable_task_ids(self) -> frozenset[str]:
        """Tasks that an agent of the benchmark's exploit panel passes without doing the
        task (doing nothing, echoing, refusing, stating every value seen, a call that
        matches without its arguments...): a policy trained on them learns the exploit.
        None unless the benchmark has some; must be deterministic."""
        return frozenset()

    def training_tasks(self, split: str = "train", *, keep_exploitable: bool = False) -> list[Task]:
        """The tasks training may start from: the train split, without the exploitable
        tasks (:meth:`exploitable_task_ids`) unless ``keep_exploitable``.

        Raises:
            ConfigError: for any split but ``train`` (a benchmark's test split is never
                trained on).
        """
        if split != "train":
            raise ConfigError(
                f"{self.name}: training uses the benchmark's train split only, not "
                f"'{split}' (its test split is never trained on)"
            )
        tasks = self.seed_tasks("train")
        if keep_exploitable:
            return tasks
        exploitable = self.exploitable_task_ids()
        return [t for t in tasks if t.id not in exploitable]

    def check_training_pool(self, tasks: Sequence[Task]) -> None:
        """Refuse a training pool that holds a test task of the benchmark.

        Raises:
            ConfigError: naming the first test task found.
        """
        test = {t.id for t in self.seed_tasks("test")}
        for task in tasks:
            if task.domain == self.name and task.id in test:
                raise ConfigError(
                    f"the training pool holds {task.id}, a test task of {self.name}; "
                    "the benchmark's test split is never trained on"
                )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
