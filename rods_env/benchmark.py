"""Benchmarks: environment families whose state and reward are their own.

A rods *domain* (:class:`rods_env.domain.Domain`) keeps its state in a record
:class:`~rods_env.database.Database` and is scored by rods' turn rule. A benchmark brought in
from its own package (BFCL's Python API classes, τ²-bench's databases) keeps its own state
and is scored by its own rules, so it cannot be a Domain. It plugs in beside the domains
through one :class:`Benchmark` spec, exposed by an entry point of the group
``rods.benchmarks``::

    [project.entry-points."rods.benchmarks"]
    bfcl = "environments.bfcl:BENCHMARK"

What rods needs of a benchmark is small:

* **environments** with :class:`rods_env.env.ToolEnv`'s step/info contract (observations and
  actions are text; ``reset(options={"task": task or id})``; ``info`` holds ``task_id``,
  ``messages``, ``tools``, ``progress``, ``success``, ``turn_results``, ``termination``;
  ``truncate(reason)`` ends an episode scored as the step limit would), one Gymnasium id
  per subset (``env_ids``), registered when :mod:`rods_env` is imported;
* **tasks** that carry what evaluation groups results by (:class:`BenchmarkTask`);
* an **oracle** agent (the gold replay, a check that every task is solvable);
* optionally its **headline scores** (what the benchmark's own leaderboard reports),
  printed by ``rods eval`` beside pass^k and progress.

The spec's module is imported when :mod:`rods_env` is (to register the ids), so it must
import nothing heavy: the benchmark's package is imported only when an environment or the
tasks are made, and a missing package is a one-line
:class:`~rods_env.errors.BenchmarkUnavailableError` saying how to install it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rods_env.errors import BenchmarkUnavailableError, ConfigError


@runtime_checkable
class BenchmarkTask(Protocol):
    """What rods reads of a benchmark's task (a rods :class:`~rods_env.task.Task` has it all).

    Attributes:
        id: Unique id (the benchmark's own, so results can be matched with its tools).
        domain: The benchmark's name (results are grouped by it, as by a domain).
        skill: The task's category within the benchmark.
        variant: ``base`` or a rods variant name (``missing_parameter`` ...).
        split: ``"train"``, ``"test"`` or None.
        signature: Structural signature, or None.
    """

    @property
    def id(self) -> str: ...

    @property
    def domain(self) -> str: ...

    @property
    def skill(self) -> str: ...

    @property
    def variant(self) -> str: ...

    @property
    def split(self) -> str | None: ...

    @property
    def signature(self) -> Any: ...


Agent = Any
"""Anything with ``act(observation, info) -> action`` (see :func:`rods_env.oracle.run_episode`)."""


@dataclass(frozen=True, eq=False)
class Benchmark:
    """One benchmark: its environments, tasks, oracle and headline scores.

    Attributes:
        name: Lower-case name, also the entry-point name and ``rods eval --env`` value
            (``"bfcl"``); every task's ``domain``.
        title: Human name (``"BFCL multi-turn"``).
        env_ids: Gymnasium id to the subset it serves (None: every task), e.g.
            ``{"rods/BFCL-MultiTurn-v0": None, "rods/BFCL-MultiTurn-Base-v0": "base"}``.
        make_env: ``(subset=None, **kwargs) -> gymnasium.Env`` with ToolEnv's contract.
            Keyword arguments it must accept: ``max_steps`` (agent steps before the
            episode is truncated; None for the benchmark's own bound) and ``render_mode``.
        tasks: ``(subset, split) -> tasks``: the tasks of a subset (None: all) and split
            (``"train"``, ``"test"``, or None for all); raises
            :class:`~rods_env.errors.ConfigError` for a split the benchmark lacks.
        oracle: ``task -> agent`` that replays the task's gold.
        missing: ``() -> reason or None``: None when the benchmark's package is usable,
            else one line saying what is missing and how to install it.
        scores: ``{task id: successes of its trials} -> {label: value}``: the benchmark's
            own headline numbers (e.g. accuracy per category and overall), in display
            order; None when it reports nothing beyond pass^k.
        max_steps: The most agent steps one episode can take under the benchmark's own
            rules (``rods eval``'s default ``--max-turns`` for it).
        simulated_user: Whether its environments take a user simulator (``make_env(...,
            user=...)``); False when the benchmark scripts every user turn itself.
        description: One line for listings.
    """

    name: str
    title: str
    env_ids: Mapping[str, str | None]
    make_env: Callable[..., Any]
    tasks: Callable[[str | None, str | None], Sequence[BenchmarkTask]]
    oracle: Callable[[Any], Agent]
    missing: Callable[[], str | None] = field(default=lambda: None)
    scores: Callable[[Mapping[str, Sequence[bool]]], Mapping[str, float | None]] | None = None
    max_steps: int = 200
    simulated_user: bool = False
    description: str = ""

    def require(self) -> None:
        """Raise :class:`~rods_env.errors.BenchmarkUnavailableError` (one line, with the
        install command) when the benchmark's package is not usable."""
        reason = self.missing()
        if reason is not None:
            raise BenchmarkUnavailableError(f"benchmark '{self.name}': {reason}")

    def subset_of(self, env_id: str) -> str | None:
        """The subset an environment id serves.

        Raises:
            ConfigError: for an id that is not one of :attr:`env_ids`.
        """
        spec_id = env_id.split(":", 1)[-1]
        if spec_id not in self.env_ids:
            raise ConfigError(
                f"'{env_id}' is not an environment of benchmark '{self.name}'; its ids: "
                + ", ".join(self.env_ids)
            )
        return self.env_ids[spec_id]

    def env_id_of(self, subset: str | None) -> str:
        """The Gymnasium id serving ``subset`` (None: the id of every task)."""
        for env_id, sub in self.env_ids.items():
            if sub == subset:
                return env_id
        raise ConfigError(f"benchmark '{self.name}' has no environment for subset {subset!r}")

    def __repr__(self) -> str:
        return f"Benchmark({self.name!r}, {len(self.env_ids)} environments)"
