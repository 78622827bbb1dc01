"""Trajectories of τ²-bench tasks scored by rods and by τ²-bench's own evaluator.

Each case is an episode of a scripted agent in a rods τ²-bench environment: the gold (its
actions, then its ``communicate_info``), the gold without what it must say, the gold
saying it with commas and capitals, a silent agent, the gold with a write missing, with
one argument changed, or with another task's write added, the gold with bare tool calls
(``name`` only: τ²-bench's ACTION check matches them), and the gold cut half way. rods'
verdict comes from the episode (the live state) and from
:func:`environments.tau2.trajectory.score_trajectory` (a replay); τ²-bench's from
``tau2.evaluator.evaluator.evaluate_simulation(..., EvaluationType.ALL)`` on the same
messages, in worker processes (it loads each database from disk twice per trajectory).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from environments.tau2.domain import Tau2Domain, domain_named
from environments.tau2.env import Tau2Env
from environments.tau2.trajectory import score_trajectory, termination_reason, to_tau2_messages

HEAVY_ROTATION = ("missing_write", "wrong_argument", "extra_write")
"""The perturbations of the gold's actions: each task of airline and retail gets one (in
turn), telecom (whose evaluator is cheap) every one."""


@dataclass
class Case:
    """One trajectory and the verdicts on it."""

    domain: str
    solo: bool
    task_id: str
    tau2_id: str
    variant: str
    trajectory: list[dict[str, Any]]
    termination: str
    ours: dict[str, Any]
    replayed: dict[str, Any]
    tau2: dict[str, Any] = field(default_factory=dict)

    def key(self) -> str:
        """Equal for the same conversation of the same task."""
        return json.dumps([self.domain, self.solo, self.task_id, self.trajectory, self.termination])


def _call(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def _with_commas(text: str) -> str:
    return re.sub(r"\d{4,}", lambda m: f"{int(m.group()):,}", text).upper()


class _Script:
    def __init__(self, steps: Sequence[str]) -> None:
        self.steps = list(steps)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        return self.steps.pop(0)


def _altered(value: Any, others: Sequence[Any]) -> Any:
    different = [o for o in others if o != value and type(o) is type(value)]
    if different:
        return different[0]
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "0"
    if isinstance(value, list):
        return value[:-1] if len(value) > 1 else value + value
    return {}


class _Plans:
    """The scripted agents' steps for every variant of a domain's tasks."""

    def __init__(self, domain: Tau2Domain, solo: bool) -> None:
        self.domain, self.solo = domain, solo
        self.writes = domain.write_tools()
        self.tasks = list(domain.tau2_tasks().values())
        self.values: dict[tuple[str, str], list[Any]] = {}
        for task in self.tasks:
            for a in self._actions(task):
                for k, v in a.arguments.items():
                    self.values.setdefault((a.name, k), []).append(v)

    @staticmethod
    def _actions(task: Any) -> list[Any]:
        criteria = task.evaluation_criteria
        return list(criteria.actions or []) if criteria else []

    def _step(self, action: Any, *, bare: bool = False) -> str:
        if action.requestor == "user" and not self.solo:
            return f"Please do this on your phone now: {action.name}."
        return _call(action.name, {} if bare else dict(action.arguments))

    def _end(self, info: Sequence[str]) -> list[str]:
        if self.solo:
            return [_call("done", {})]
        return [f"Everything is taken care of. {' '.join(info)}".strip()]

    def plans(self, index: int, task: Any) -> Iterator[tuple[str, list[str]]]:
        """``(variant, steps)`` for the task; an episode whose steps run out before the
        conversation ends is cut (``max_turns``: unscored)."""
        actions = self._actions(task)
        info = (
            list(task.evaluation_criteria.communicate_info or [])
            if task.evaluation_criteria
            else []
        )
        gold = [self._step(a) for a in actions]
        yield "gold", gold + self._end(info)
        yield "silent", ["OK."] if not self.solo else self._end([])
        if info and not self.solo:
            yield "no_communicate", gold + self._end([])
            yield "commas", gold + self._end([_with_commas(i) for i in info])
        writes = [
            i for i, a in enumerate(actions) if a.name in self.writes and a.requestor == "assistant"
        ]
        every = self.domain.tau2_domain == "telecom"
        rotation = HEAVY_ROTATION if every else (HEAVY_ROTATION[index % len(HEAVY_ROTATION)],)
        for variant in rotation:
            if variant == "missing_write" and writes:
                steps = [s for i, s in enumerate(gold) if i != writes[-1]]
                yield variant, steps + self._end(info)
            elif variant == "wrong_argument" and actions:
                i = writes[-1] if writes else len(actions) - 1
                a = actions[i]
                if a.arguments:
                    name = next(iter(a.arguments))
                    args = dict(a.arguments)
                    args[name] = _altered(args[name], self.values.get((a.name, name), []))
                    steps = [*gold[:i], _call(a.name, args), *gold[i + 1 :]]
                    yield variant, steps + self._end(info)
            elif variant == "extra_write":
                other = self.tasks[(index + 1) % len(self.tasks)]
                extra = [
                    self._step(a)
                    for a in self._actions(other)
                    if a.name in self.writes and a.requestor == "assistant"
                ][:1]
                if extra:
                    yield variant, gold + extra + self._end(info)
        if every:
            bare = [self._step(a, bare=True) for a in actions]
            yield "bare_actions", bare + self._end(info)
        if len(gold) >= 2:
            yield "cut", gold[: len(gold) // 2]


def build_cases(name: str, *, solo: bool = False) -> list[Case]:
    """Every case of one domain (and mode), with rods' two verdicts."""
    domain = domain_named(name)
    env = Tau2Env(domain, split=None, solo=solo, max_steps=200)
    plans = _Plans(domain, solo)
    cases: list[Case] = []
    seen: set[str] = set()
    for index, (tid, tau2_task) in enumerate(domain.tau2_tasks().items()):
        task = domain.task(f"{domain.name}:{tid}")
        for variant, steps in plans.plans(index, tau2_task):
            agent = _Script(steps)
            obs, info = env.reset(options={"task": task})
            done = False
            while not done and agent.steps:
                obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
                done = terminated or truncated
            if not done:
                info = env.truncate("max_turns")
            trajectory = env.trajectory
            termination = str(info["termination"])
            replayed = score_trajectory(
                env.backend, tau2_task, trajectory, termination, solo=solo, every_check=True
            )
            case = Case(
                domain=name,
                solo=solo,
                task_id=task.id,
                tau2_id=tid,
                variant=variant,
                trajectory=trajectory,
                termination=termination,
                ours=dict(info["reward_info"]),
                replayed=replayed.to_dict(),
            )
            if case.key() not in seen:
                seen.add(case.key())
                cases.append(case)
    return cases


# -- τ²-bench's side (worker processes) ------------------------------------------------------
def _worker_init() -> None:
    from tests.environments.tau2 import litellm_stub

    litellm_stub.install()


def tau2_verdict(job: tuple[str, bool, str, list[dict[str, Any]], str]) -> dict[str, Any]:
    """τ²-bench's ``evaluate_simulation(..., EvaluationType.ALL)`` on one trajectory."""
    from environments.tau2.package import tau2_module
    from environments.tau2.tasks import tau2_tasks

    domain, solo, tid, trajectory, termination = job
    evaluator = tau2_module("tau2.evaluator.evaluator")
    simulation = tau2_module("tau2.data_model.simulation")
    task = tau2_tasks(domain)[tid]
    run = simulation.SimulationRun(
        id="rods-agreement",
        task_id=task.id,
        start_time="",
        end_time="",
        duration=0.0,
        termination_reason=termination_reason(termination),
        messages=to_tau2_messages(trajectory),
    )
    info = evaluator.evaluate_simulation(run, task, evaluator.EvaluationType.ALL, solo, domain)
    breakdown = {getattr(k, "value", k): v for k, v in (info.reward_breakdown or {}).items()}
    return {
        "reward": info.reward,
        "breakdown": breakdown,
        # every check τ²-bench ran, in the basis or not (None: it ran none)
        "db_match": info.db_check.db_match if info.db_check is not None else None,
        "env_assertions": [c.met for c in info.env_assertions or []],
        "actions": [c.action_match for c in info.action_checks or []],
        "communicate": [c.met for c in info.communicate_checks or []],
    }


def score_with_tau2(cases: Sequence[Case], workers: int | None = None) -> None:
    """Fill each case's ``tau2`` verdict, with τ²-bench's evaluator in worker processes."""
    workers = workers or max(1, min(2, os.cpu_count() or 1))
    jobs = [
        (domain_named(c.domain).tau2_domain, c.solo, c.tau2_id, c.trajectory, c.termination)
        for c in cases
    ]
    context = multiprocessing.get_context("spawn")
    with context.Pool(workers, initializer=_worker_init) as pool:
        verdicts = pool.map(tau2_verdict, jobs, chunksize=4)
    for case, verdict in zip(cases, verdicts, strict=True):
        case.tau2 = verdict
