"""τ²-bench's results files from a ``rods eval`` run, so τ²-bench's own tools can check it.

``rods eval --env tau2-airline --out results/NAME`` writes, beside ``episodes.jsonl``,
``results/NAME/tau2/airline.json``: a results file in τ²-bench's own format (its
``tau2.data_model.simulation.Results``: run info, the tasks, one simulation per trial with
its messages, termination reason and reward info). τ²-bench's evaluator then re-scores the
same conversations from scratch::

    tau2 evaluate-trajs results/NAME/tau2                      # prints τ²-bench's metrics
    tau2 evaluate-trajs results/NAME/tau2 -o results/NAME/tau2-rescored

and its reward of each simulation is rods' (``tests/agent/test_eval_tau2_results.py``
runs τ²-bench's ``evaluate_trajectories`` on written files). Each simulation is the
``benchmark_record`` the environment put in the episode's final ``info``; the reward info in
the file is rods' verdict in τ²-bench's ``RewardInfo`` form (the checks of the task's basis).

A trial that ended before its conversation began (an engine or environment error at reset)
has no τ²-bench trajectory: it is written with no messages and an unscored termination, so
τ²-bench counts it as a failure, as rods does. A solo run is written as τ²-bench's solo
agent and dummy user (``llm_agent_solo``, ``dummy_user``), the pair its tools read as solo
mode.

Only plain JSON is written here (τ²-bench's ``simulation`` module needs pandas); the models
that check it are τ²-bench's own, when it loads the file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from environments.tau2.env import TAU2_MAX_ERRORS, TAU2_MAX_STEPS
from environments.tau2.tasks import tau2_id
from environments.tau2.trajectory import termination_reason
from rods_env.errors import ConfigError
from rods_env.fileio import atomic_write

if TYPE_CHECKING:
    from environments.tau2.domain import Tau2Domain

RESULTS_FOLDER = "tau2"
"""The run folder's subfolder for τ²-bench's files (``tau2 evaluate-trajs`` reads every
``.json`` of a folder it is given, so they are kept apart from rods' own files)."""

SOLO_AGENT = "llm_agent_solo"
SOLO_USER = "dummy_user"
"""The agent and user implementations τ²-bench's tools read as solo mode."""


NOT_REPLAYABLE = {
    "tau2_can_replay": False,
    "why": (
        "a tool reply shows an id that τ²-bench's tools draw with uuid4() (a new bill), so "
        "its evaluator's replay draws another and raises; rods' replay draws the same "
        "(environments.tau2.results.rescore)"
    ),
}
"""What a simulation's reward info says when τ²-bench's evaluator cannot re-score it."""


def results_path(folder: str | Path, domain: Tau2Domain) -> Path:
    """Where the results file of ``domain`` goes in run folder ``folder``."""
    return Path(folder) / RESULTS_FOLDER / f"{domain.tau2_domain}.json"


def _agent_info(run: Mapping[str, Any], solo: bool) -> dict[str, Any]:
    args = {k: run[k] for k in ("temperature", "top_p", "max_tokens", "seed") if k in run}
    engine = run.get("engine")
    return {
        "implementation": SOLO_AGENT if solo else f"rods ({engine or 'agent'})",
        "llm": run.get("model"),
        "llm_args": args or None,
    }


def _user_info(run: Mapping[str, Any], solo: bool) -> dict[str, Any]:
    if solo:
        return {"implementation": SOLO_USER}
    user = run.get("user")
    if user == "llm":
        temperature = run.get("user_temperature")
        return {
            "implementation": "rods LLMUser (τ²-bench's user simulator prompt)",
            "llm": run.get("user_model"),
            "llm_args": {"temperature": temperature} if temperature is not None else None,
        }
    if user == "scripted":
        return {"implementation": "rods scripted stand-in (not τ²-bench's user model)"}
    return {"implementation": f"rods {user or 'custom'} user"}


def simulation(row: Mapping[str, Any], domain: Tau2Domain) -> dict[str, Any]:
    """One trial (an ``episodes.jsonl`` row) as τ²-bench's ``SimulationRun`` (JSON)."""
    task_id = str(row["task_id"])
    record = row.get("benchmark_record")
    if isinstance(record, Mapping):
        messages = list(record["messages"])
        termination = str(record["termination_reason"])
        reward_info = dict(record["reward_info"])
        if record.get("tau2_replayable") is False:
            reward_info["info"] = {**(reward_info.get("info") or {}), **NOT_REPLAYABLE}
    else:
        errors = "; ".join(str(e) for e in row.get("errors") or []) or "no record"
        messages = []
        termination = termination_reason(row.get("termination"))
        reward_info = {
            "reward": 0.0,
            "reward_basis": None,
            "info": {"note": f"rods: the conversation never began ({errors})"},
        }
    return {
        "id": f"{task_id}#{row.get('trial', 0)}",
        "task_id": tau2_id(domain.name, task_id),
        "start_time": "",
        "end_time": "",
        "duration": float(row.get("gen_seconds") or 0.0) + float(row.get("env_seconds") or 0.0),
        "termination_reason": termination,
        "reward_info": reward_info,
        "messages": messages,
        "trial": row.get("trial"),
        "seed": row.get("sampling_seed"),
    }


def results_document(
    domain: Tau2Domain, episodes: Sequence[Mapping[str, Any]], run: Mapping[str, Any]
) -> dict[str, Any]:
    """τ²-bench's ``Results`` (JSON) of ``episodes`` (rows of one domain's tasks).

    Raises:
        ConfigError: when the episodes mix solo and user-mode conversations (τ²-bench
            evaluates one mode per file).
    """
    modes = {
        bool(r["benchmark_record"].get("solo"))
        for r in episodes
        if isinstance(r.get("benchmark_record"), Mapping)
    }
    if len(modes) > 1:
        raise ConfigError(f"{domain.name}: the episodes mix solo and user-mode conversations")
    solo = modes.pop() if modes else run.get("user") == "solo"
    trials = [int(r.get("trial", 0)) for r in episodes]
    wanted = {tau2_id(domain.name, str(r["task_id"])) for r in episodes}
    tasks = [t for tid, t in domain.tau2_tasks().items() if tid in wanted]
    proto = domain.backend().solo_proto if solo else domain.backend().proto
    return {
        "info": {
            "git_commit": "",
            "num_trials": int(run.get("trials") or (max(trials) + 1 if trials else 1)),
            "max_steps": TAU2_MAX_STEPS,
            "max_errors": TAU2_MAX_ERRORS,
            "user_info": _user_info(run, solo),
            "agent_info": _agent_info(run, solo),
            "environment_info": {"domain_name": domain.tau2_domain, "policy": proto.policy},
            "seed": run.get("seed"),
        },
        "tasks": [t.model_dump(mode="json") for t in tasks],
        "simulations": [simulation(r, domain) for r in episodes],
    }


def write_results(
    domain: Tau2Domain,
    episodes: Sequence[Mapping[str, Any]],
    folder: str | Path,
    run: Mapping[str, Any],
) -> Path:
    """Write τ²-bench's results file of ``episodes`` into ``folder``'s ``tau2/`` (atomically).

    Returns:
        The file written.
    """
    path = results_path(folder, domain)
    document = results_document(domain, episodes, run)
    atomic_write(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    return path


def rescore(path: str | Path, domain: Tau2Domain) -> list[tuple[str, float, float]]:
    """Re-score every simulation of a results file of ``domain`` from its messages, as
    τ²-bench's evaluator does (a replay of the tool calls, then the checks), with rods'
    reproducible ids: also the conversations τ²-bench's own evaluator cannot replay.

    Returns:
        ``(simulation id, reward in the file, reward re-scored)`` per simulation.
    """
    from environments.tau2.trajectory import score_trajectory

    document = json.loads(Path(path).read_text(encoding="utf-8"))
    solo = document["info"]["agent_info"].get("implementation") == SOLO_AGENT
    backend = domain.backend()
    tasks = domain.tau2_tasks()
    out = []
    for sim in document["simulations"]:
        task = tasks[str(sim["task_id"])]
        messages = [{k: v for k, v in m.items() if k in _MESSAGE_KEYS} for m in sim["messages"]]
        verdict = score_trajectory(
            backend, task, messages, str(sim["termination_reason"]), solo=solo
        )
        out.append((str(sim["id"]), float(sim["reward_info"]["reward"]), verdict.reward))
    return out


_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls", "id", "requestor", "error"})
