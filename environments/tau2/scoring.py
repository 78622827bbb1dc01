"""τ²-bench's reward, computed as its evaluator computes it, without litellm.

τ²-bench's ``evaluate_simulation(..., EvaluationType.ALL)`` gives a trajectory a reward in
{0, 1}: 0 when the conversation did not end by the agent's or the user's stop; otherwise
the product, over the task's reward basis, of

* ``DB``: the agent's (and the user's) database equal to the gold one, which is the
  initial state with the gold actions replayed (:func:`gold_fingerprint`);
* ``ENV_ASSERTION``: every assertion of the task holds on the final state;
* ``ACTION``: every gold action matches some tool call of the trajectory (τ²-bench's
  ``Action.compare_with_tool_call``: the name, and the arguments the *call* names);
* ``COMMUNICATE``: every ``communicate_info`` string is a case-insensitive substring of an
  assistant message with text, commas removed from the message.

``NL_ASSERTION`` needs an LLM judge: no task of the three domains has it in its basis, and a
task that has it is refused (:func:`check_task`). The rules here are checked against
τ²-bench's own evaluator, trajectory by trajectory, in
``tests/environments/tau2/test_agreement.py``.

A trajectory is a list of τ²-bench messages as plain dicts (see :mod:`.trajectory`).
"""

from __future__ import annotations

import functools
import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from threading import Lock
from typing import Any

from environments.tau2.state import EpisodeState, Tau2Backend
from rods_env.errors import ConfigError

STOPPED = frozenset({"agent_stop", "user_stop"})
"""Terminations that τ²-bench scores; every other one (step or error limit, an agent or
user error, a cut by the caller) gets reward 0."""

BASES = ("DB", "ENV_ASSERTION", "ACTION", "COMMUNICATE")
"""The reward bases computed here."""

DEFAULT_BASIS = ("DB", "COMMUNICATE")
"""τ²-bench's default reward basis (a task that does not name one)."""


def is_successful(reward: float) -> bool:
    """τ²-bench's success test: the reward is 1 (within 1e-6)."""
    return (1 - 1e-6) <= reward <= (1 + 1e-6)


@dataclass(frozen=True)
class Verdict:
    """τ²-bench's verdict on one trajectory.

    Attributes:
        reward: 0.0 or 1.0.
        reward_basis: The task's reward basis.
        db_match: Whether the databases equal the gold ones (None: not checked, because
            the conversation did not end by a stop, or the task has no actions and no
            assertions).
        env_assertions: Whether each environment assertion holds.
        actions: Whether each gold action matches a tool call of the trajectory.
        communicate: Whether each ``communicate_info`` string was said.
        note: Why the reward is what it is when no check ran.
    """

    reward: float
    reward_basis: tuple[str, ...]
    db_match: bool | None = None
    env_assertions: tuple[bool, ...] = ()
    actions: tuple[bool, ...] = ()
    communicate: tuple[bool, ...] = ()
    note: str | None = None

    @property
    def success(self) -> bool:
        """τ²-bench's success: reward 1."""
        return is_successful(self.reward)

    def breakdown(self) -> dict[str, float]:
        """The reward of each basis of the task (τ²-bench's ``reward_breakdown``)."""
        if self.note is not None and self.db_match is None and not self.actions:
            return {}
        parts = {
            "DB": float(bool(self.db_match)) if self.db_match is not None else 1.0,
            "ENV_ASSERTION": float(all(self.env_assertions)),
            "ACTION": float(all(self.actions)),
            "COMMUNICATE": float(all(self.communicate)),
        }
        return {b: parts[b] for b in self.reward_basis if b in parts}

    def failures(self, task: Any) -> list[dict[str, Any]]:
        """Why the reward is 0, as ``{"rule", "values", "text"}`` dicts (rods' turn-result
        form, which ``rods view`` shows): each failed check of the reward basis."""
        if self.success:
            return []
        if self.note is not None and self.db_match is None and not self.actions:
            return [{"rule": "tau2_unscored", "values": [], "text": self.note}]
        criteria = task.evaluation_criteria
        out: list[dict[str, Any]] = []
        basis = set(self.reward_basis)
        if "DB" in basis and self.db_match is False:
            text = "the database differs from the gold one (the gold actions replayed)"
            out.append({"rule": "tau2_db", "values": [], "text": text})
        if "ENV_ASSERTION" in basis:
            for assertion, met in zip(
                criteria.env_assertions or [], self.env_assertions, strict=True
            ):
                if not met:
                    call = f"{assertion.func_name}({json.dumps(assertion.arguments)})"
                    out.append(
                        {
                            "rule": "tau2_env_assertion",
                            "values": [call],
                            "text": f"an assertion does not hold: {call}",
                        }
                    )
        if "ACTION" in basis:
            for action, met in zip(criteria.actions or [], self.actions, strict=True):
                if not met:
                    call = f"{action.name}({json.dumps(action.arguments)})"
                    out.append(
                        {
                            "rule": "tau2_action",
                            "values": [call],
                            "text": f"a gold action was not called: {call}",
                        }
                    )
        if "COMMUNICATE" in basis:
            for info, met in zip(criteria.communicate_info or [], self.communicate, strict=True):
                if not met:
                    out.append(
                        {"rule": "tau2_communicate", "values": [info], "text": f"not said: {info}"}
                    )
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (``info["reward_info"]``)."""
        data = asdict(self)
        data["reward_basis"] = list(self.reward_basis)
        for name in ("env_assertions", "actions", "communicate"):
            data[name] = list(data[name])
        data["breakdown"] = self.breakdown()
        return data


def reward_basis(task: Any) -> tuple[str, ...]:
    """The task's reward basis as strings (τ²-bench's default when it names none)."""
    criteria = task.evaluation_criteria
    if criteria is None:
        return ()
    return tuple(str(getattr(b, "value", b)) for b in criteria.reward_basis)


def check_task(task: Any) -> str | None:
    """Why rods cannot score ``task`` as τ²-bench does, or None when it can."""
    basis = reward_basis(task)
    unknown = [b for b in basis if b not in BASES]
    if unknown:
        return f"its reward basis has {', '.join(unknown)} (needs an LLM judge)"
    initial = task.initial_state
    if initial is not None and initial.message_history:
        return "it starts from a message history"
    return None


# -- gold ----------------------------------------------------------------------------------
_GOLD: OrderedDict[tuple[str, str, str], tuple[Any, Any]] = OrderedDict()
_GOLD_LOCK = Lock()
GOLD_CACHE_SIZE = 50_000
"""Gold fingerprints kept per process (each is a few records' JSON, or two hashes)."""


def _task_key(backend: Tau2Backend, task: Any) -> tuple[str, str, str]:
    criteria = task.evaluation_criteria
    content = json.dumps(
        [
            task.initial_state.model_dump(mode="json") if task.initial_state else None,
            [a.model_dump(mode="json") for a in (criteria.actions or [])] if criteria else None,
        ],
        sort_keys=True,
    )
    return backend.domain, str(task.id), content


def gold_fingerprint(backend: Tau2Backend, task: Any) -> tuple[Any, Any]:
    """The gold databases of ``task`` (cached per process): the initial state with the gold
    actions replayed, as τ²-bench's evaluator builds its gold environment (normal mode;
    each action through ``make_tool_call``; an action that raises is skipped)."""
    key = _task_key(backend, task)
    with _GOLD_LOCK:
        found = _GOLD.get(key)
        if found is not None:
            _GOLD.move_to_end(key)
            return found
    state = backend.new_state(solo=False)
    state.reset(task)
    criteria = task.evaluation_criteria
    for action in (criteria.actions or []) if criteria is not None else []:
        try:
            state.make_tool_call(action.name, action.requestor, action.arguments)
        except Exception:  # τ²-bench logs a warning and goes on
            continue
    fingerprint = state.fingerprint()
    with _GOLD_LOCK:
        _GOLD[key] = fingerprint
        while len(_GOLD) > GOLD_CACHE_SIZE:
            _GOLD.popitem(last=False)
    return fingerprint


# -- the checks ------------------------------------------------------------------------------
def _has_text(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, str) and content.strip() != ""


def tool_calls_of(trajectory: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Every tool call of the agent's and the user's messages, in order."""
    return [
        call
        for m in trajectory
        if m.get("role") in ("assistant", "user") and m.get("tool_calls") is not None
        for call in m["tool_calls"]
    ]


def action_matches(action: Any, call: Mapping[str, Any]) -> bool:
    """τ²-bench's ``Action.compare_with_tool_call``: the same name, and equal values for
    the compared arguments (``compare_args``, or else every argument the *call* has; a call
    with no arguments therefore matches any action of its name)."""
    if action.name != call.get("name"):
        return False
    arguments = call.get("arguments") or {}
    names = arguments.keys() if action.compare_args is None else action.compare_args
    if len(names) == 0:
        return True
    called = {k: v for k, v in arguments.items() if k in names}
    wanted = {k: v for k, v in action.arguments.items() if k in names}
    return bool(called == wanted)


def communicated(trajectory: Sequence[Mapping[str, Any]], info: str) -> bool:
    """Whether an assistant message with text contains ``info`` (τ²-bench's substring rule)."""
    needle = info.lower()
    return any(
        m.get("role") == "assistant"
        and _has_text(m)
        and needle in str(m["content"]).lower().replace(",", "")
        for m in trajectory
    )


def score(
    backend: Tau2Backend,
    task: Any,
    trajectory: Sequence[Mapping[str, Any]],
    termination: str,
    state: EpisodeState,
) -> Verdict:
    """τ²-bench's reward for ``trajectory``, whose final state is ``state``.

    Args:
        backend: The task's domain.
        task: τ²-bench's task model.
        trajectory: The τ²-bench messages of the conversation.
        termination: How it ended (``agent_stop`` and ``user_stop`` are scored).
        state: The episode state the trajectory produced (its environment is synced and
            assertions run on it, so it is used up).
    """
    basis = reward_basis(task)
    if termination not in STOPPED:
        return Verdict(0.0, basis, note=f"the conversation did not end by a stop ({termination})")
    criteria = task.evaluation_criteria
    if criteria is None:
        return Verdict(1.0, basis, note="no evaluation criteria")
    problem = check_task(task)
    if problem is not None:
        raise ConfigError(f"cannot score τ²-bench task {task.id}: {problem}")

    # the environment: databases, then assertions (τ²-bench's order: the assertions run
    # environment functions, which sync the tools)
    db_match: bool | None
    assertions: tuple[bool, ...] = ()
    if criteria.actions is None and criteria.env_assertions is None:
        db_match, env_reward = True, 1.0
    else:
        state.run(state.env.sync_tools, None)  # set_state's last step (τ²-bench replays)
        db_match = state.fingerprint() == gold_fingerprint(backend, task)
        assertions = tuple(
            bool(state.run(functools.partial(state.env.run_env_assertion, a, False), None))
            for a in criteria.env_assertions or []
        )
        env_reward = 1.0
        if "DB" in basis:
            env_reward *= float(db_match)
        if "ENV_ASSERTION" in basis:
            env_reward *= float(all(assertions))

    calls = tool_calls_of(trajectory)
    actions = tuple(any(action_matches(a, c) for c in calls) for a in criteria.actions or [])
    said = tuple(communicated(trajectory, info) for info in criteria.communicate_info or [])

    reward = 1.0
    if {"DB", "ENV_ASSERTION"} & set(basis):
        reward *= env_reward
    if "ACTION" in basis:
        reward *= float(all(actions))
    if "COMMUNICATE" in basis:
        reward *= float(all(said))
    return Verdict(reward, basis, db_match, assertions, actions, said)
