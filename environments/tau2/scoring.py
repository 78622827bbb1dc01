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
import re
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
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


QUIRKS = {
    "communicate_substring": (
        "COMMUNICATE passed by a substring only: a communicate_info string said inside a "
        'longer number or word ("10" in "100" or "1.10")'
    ),
    "action_loose": (
        "ACTION passed by a call that names fewer arguments than the gold action compares, "
        "or whose reply was an error (τ²-bench compares only the arguments the call names)"
    ),
    "said_in_reasoning": (
        "a communicate_info string not said was in the agent's <think> reasoning: τ²-bench "
        "given the raw completion, with no reasoning parser, would count it as said"
    ),
}
"""The known quirks of τ²-bench's verdicts that a :class:`Verdict` records."""

PARTING = ("communicate_substring", "action_loose")
"""The quirks that make τ²-bench's verdict differ from the strict one (``said_in_reasoning``
is a note: both verdicts are 0)."""

VERDICTS = ("official", "strict")
"""The verdicts a τ²-bench environment gives (``Tau2Env(verdicts=...)``)."""


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
            the conversation did not end by a stop, or DB is not in the task's reward
            basis).
        env_assertions: Whether each environment assertion holds.
        actions: Whether each gold action matches a tool call of the trajectory.
        communicate: Whether each ``communicate_info`` string was said.
        note: Why the reward is what it is when no check ran.
        checked: The bases whose checks ran (those of the basis, or all of
            :data:`BASES` with ``every_check``).
        strict_reward: The reward with τ²-bench's two loose checks made strict
            (:data:`QUIRKS`): what the agent did, where τ²-bench's verdict (``reward``, the
            verdict of record) says more.
        quirks: The quirks of τ²-bench's evaluator that made ``reward`` differ from
            ``strict_reward``, or that rods noted about the conversation (:data:`QUIRKS`).

    A check outside the task's reward basis is not run (its field stays None or empty):
    τ²-bench runs it and leaves it out of the reward.
    """

    reward: float
    reward_basis: tuple[str, ...]
    db_match: bool | None = None
    env_assertions: tuple[bool, ...] = ()
    actions: tuple[bool, ...] = ()
    communicate: tuple[bool, ...] = ()
    note: str | None = None
    checked: tuple[str, ...] = ()
    strict_reward: float | None = None
    quirks: tuple[str, ...] = ()

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
        for name in ("env_assertions", "actions", "communicate", "checked", "quirks"):
            data[name] = list(data[name])
        data["breakdown"] = self.breakdown()
        return data

    def to_tau2(self, task: Any) -> dict[str, Any]:
        """The verdict as τ²-bench's ``RewardInfo`` (JSON), what its evaluator would write
        into a results file: the reward, the basis and its breakdown, and each check that
        ran (one outside the basis is left out unless it ran)."""
        rods = {"strict_reward": self.strict_reward, "quirks": list(self.quirks)}
        if self.note is not None and not self.checked:
            # τ²-bench's form for an unscored end, or for a task without criteria
            return {
                "reward": self.reward,
                "reward_basis": None,
                "info": {"note": self.note, **rods},
            }
        criteria = task.evaluation_criteria
        out: dict[str, Any] = {
            "reward": self.reward,
            "reward_basis": list(self.reward_basis),
            "reward_breakdown": self.breakdown(),
            "info": {"checked": list(self.checked), "scorer": "rods", **rods},
        }
        if "DB" in self.checked and self.db_match is not None:
            out["db_check"] = {"db_match": self.db_match, "db_reward": float(self.db_match)}
        if "ENV_ASSERTION" in self.checked:
            out["env_assertions"] = [
                {"env_assertion": a.model_dump(mode="json"), "met": met, "reward": float(met)}
                for a, met in zip(criteria.env_assertions or [], self.env_assertions, strict=True)
            ]
        if "ACTION" in self.checked:
            out["action_checks"] = [
                {
                    "action": a.model_dump(mode="json"),
                    "action_match": met,
                    "action_reward": float(met),
                }
                for a, met in zip(criteria.actions or [], self.actions, strict=True)
            ]
        if "COMMUNICATE" in self.checked:
            out["communicate_checks"] = [
                {
                    "info": info,
                    "met": met,
                    "justification": f"Information '{info}' "
                    + ("communicated." if met else "not communicated."),
                }
                for info, met in zip(criteria.communicate_info or [], self.communicate, strict=True)
            ]
        return out


_BASES_OF: dict[int, tuple[Any, tuple[str, ...]]] = {}


def reward_basis(task: Any) -> tuple[str, ...]:
    """The task's reward basis as strings (τ²-bench's default when it names none). Made
    once per task object (reading an enum's ``value`` is slow, and every score needs it)."""
    found = _BASES_OF.get(id(task))
    if found is not None and found[0] is task:
        return found[1]
    criteria = task.evaluation_criteria
    basis = (
        ()
        if criteria is None
        else tuple(str(getattr(b, "value", b)) for b in criteria.reward_basis)
    )
    if len(_BASES_OF) >= 100_000:
        _BASES_OF.clear()
    _BASES_OF[id(task)] = (task, basis)  # the task itself is kept, so its id is not reused
    return basis


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


_KEYS: dict[int, tuple[Any, tuple[str, str, str]]] = {}


def _task_key(backend: Tau2Backend, task: Any) -> tuple[str, str, str]:
    """The gold cache's key of ``task``: its id and the content its gold depends on (an
    edited copy of a task with the same id gets its own gold). Made once per task object:
    τ²-bench's task models are read once per process and never changed."""
    found = _KEYS.get(id(task))
    if found is not None and found[0] is task:
        return found[1]
    criteria = task.evaluation_criteria
    content = json.dumps(
        [
            task.initial_state.model_dump(mode="json") if task.initial_state else None,
            [a.model_dump(mode="json") for a in (criteria.actions or [])] if criteria else None,
        ],
        sort_keys=True,
    )
    key = (backend.domain, str(task.id), content)
    with _GOLD_LOCK:
        if len(_KEYS) >= GOLD_CACHE_SIZE:
            _KEYS.clear()
        _KEYS[id(task)] = (task, key)  # the task itself is kept, so its id is not reused
    return key


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


def action_matches_strictly(action: Any, call: Mapping[str, Any], failed: Collection[str]) -> bool:
    """A call that does what the gold action does: the same name, every argument the
    action compares (``compare_args``, or all of its arguments) present and equal, and a
    reply that is not an error."""
    if action.name != call.get("name") or call.get("id") in failed:
        return False
    arguments = call.get("arguments") or {}
    names = action.arguments.keys() if action.compare_args is None else action.compare_args
    return all(k in arguments and arguments[k] == action.arguments.get(k) for k in names)


def _spoken(text: str) -> str:
    return text.lower().replace(",", "")


def said_as_token(text: str, info: str) -> bool:
    """Whether ``info`` occurs in ``text`` (case-folded, commas removed, as τ²-bench reads
    it) as a whole token: not inside a longer word or number (``"10"`` is not said by
    ``"100"``, ``"1.10"`` or ``"10.5"``)."""
    needle = re.escape(_spoken(info))
    return re.search(rf"(?<![\w.]){needle}(?![\w]|\.\d)", _spoken(text)) is not None


def says(text: str, info: str) -> bool:
    """τ²-bench's COMMUNICATE rule on one text: ``info`` is a substring, case-folded, with
    the text's commas removed."""
    return info.lower() in text.lower().replace(",", "")


def communicated(trajectory: Sequence[Mapping[str, Any]], info: str) -> bool:
    """Whether an assistant message with text contains ``info`` (τ²-bench's substring rule)."""
    return any(
        m.get("role") == "assistant" and _has_text(m) and says(str(m["content"]), info)
        for m in trajectory
    )


def score(
    backend: Tau2Backend,
    task: Any,
    trajectory: Sequence[Mapping[str, Any]],
    termination: str,
    state: EpisodeState,
    *,
    every_check: bool = False,
) -> Verdict:
    """τ²-bench's reward for ``trajectory``, whose final state is ``state``.

    Args:
        backend: The task's domain.
        task: τ²-bench's task model.
        trajectory: The τ²-bench messages of the conversation.
        termination: How it ended (``agent_stop`` and ``user_stop`` are scored).
        state: The episode state the trajectory produced (its environment is synced and
            assertions run on it, so it is used up).
        every_check: Run every check, as τ²-bench's evaluator does, also those outside the
            task's reward basis (they are reported, the reward is the same); by default only
            the checks of the basis run.
    """
    basis = reward_basis(task)
    if termination not in STOPPED:
        return Verdict(
            0.0,
            basis,
            note=f"the conversation did not end by a stop ({termination})",
            strict_reward=0.0,
        )
    criteria = task.evaluation_criteria
    if criteria is None:
        return Verdict(1.0, basis, note="no evaluation criteria", strict_reward=1.0)
    problem = check_task(task)
    if problem is not None:
        raise ConfigError(f"cannot score τ²-bench task {task.id}: {problem}")

    # τ²-bench runs every check and multiplies only those of the task's basis: here only
    # those run (telecom's tasks count no database, airline's and retail's no assertion)
    in_basis = set(basis)
    counts = set(BASES) if every_check else in_basis
    db_match: bool | None = None
    assertions: tuple[bool, ...] = ()
    if criteria.actions is None and criteria.env_assertions is None:
        db_match = True  # τ²-bench's environment check passes without looking
    elif counts & {"DB", "ENV_ASSERTION"}:
        # the databases, then the assertions (τ²-bench's order: the assertions run
        # environment functions, which sync the tools)
        if not state.synced:  # set_state's last step (a no-op on a state just synced)
            state.sync()
        if "DB" in counts:
            db_match = state.fingerprint() == gold_fingerprint(backend, task)
        if "ENV_ASSERTION" in counts:
            assertions = tuple(
                bool(state.run(functools.partial(state.env.run_env_assertion, a, False), None))
                for a in criteria.env_assertions or []
            )

    actions: tuple[bool, ...] = ()
    if "ACTION" in counts:
        calls = tool_calls_of(trajectory)
        actions = tuple(any(action_matches(a, c) for c in calls) for a in criteria.actions or [])
    said: tuple[bool, ...] = ()
    if "COMMUNICATE" in counts:
        said = tuple(communicated(trajectory, info) for info in criteria.communicate_info or [])

    reward = 1.0
    if criteria.actions is not None or criteria.env_assertions is not None:
        if "DB" in in_basis:
            reward *= float(bool(db_match))
        if "ENV_ASSERTION" in in_basis:
            reward *= float(all(assertions))
    if "ACTION" in in_basis:
        reward *= float(all(actions))
    if "COMMUNICATE" in in_basis:
        reward *= float(all(said))
    checked = tuple(b for b in BASES if b in counts)
    strict, quirks = reward, list[str]()
    if "ACTION" in in_basis and all(actions):
        calls = tool_calls_of(trajectory)
        failed = {
            str(m.get("id")) for m in trajectory if m.get("role") == "tool" and m.get("error")
        }
        if not all(
            any(action_matches_strictly(a, c, failed) for c in calls)
            for a in criteria.actions or []
        ):
            strict, quirks = 0.0, [*quirks, "action_loose"]
    if "COMMUNICATE" in in_basis and all(said):
        texts = [
            str(m["content"]) for m in trajectory if m.get("role") == "assistant" and _has_text(m)
        ]
        if not all(
            any(said_as_token(t, info) for t in texts) for info in criteria.communicate_info or []
        ):
            strict, quirks = 0.0, [*quirks, "communicate_substring"]
    return Verdict(
        reward,
        basis,
        db_match,
        assertions,
        actions,
        said,
        checked=checked,
        strict_reward=strict,
        quirks=tuple(quirks),
    )
