"""Tau2Env: a τ²-bench domain as a Gymnasium environment with rods' step/info contract.

The conversation runs as τ²-bench's orchestrator runs it, one agent action per ``step``:

* The agent sees τ²-bench's agent system prompt (instructions and policy), its opening line
  "Hi! How can I help you today?" and the user's first message (the first observation).
  In **solo mode** (telecom) there is no user: the system prompt is τ²-bench's solo prompt
  and the ticket is the first observation; the agent has the user's tools too, and ends by
  calling ``done``.
* An action is read as τ²-bench receives a served model's message
  (:data:`rods_env.parsing.TOOL_CALL_READING`, the class's ``reading_rule``): its calls
  are its ``<tool_call>`` blocks (or a message dict's ``tool_calls``), its text what
  precedes the first block; any other text, JSON-looking or not, is text.
* An action with tool calls runs them through τ²-bench's own tools (its ``get_response``:
  errors become ``"Error: ..."`` replies); the replies are the observation.
* An action with text only goes to the user, whose reply is the observation. The user's
  reply is never read as an agent action: it is text, whatever it looks like, except that
  telecom's user calls the phone's tools with the forms of the reading rule, any number
  of times in a row (the agent does not see those calls).
* The episode **terminates** when the user says ``###STOP###`` / ``###TRANSFER###`` /
  ``###OUT-OF-SCOPE###``, when a solo agent stops, at τ²-bench's limits (200 orchestrator
  steps, 10 tool errors), at an agent error (a solo agent's text), or when the user fails
  (``user_error``: the simulator raised, or gave an empty message four times; the reason
  is ``info["user_error"]``). It is **truncated** after ``max_steps`` agent actions. Only
  a stop is scored; every other end gets reward 0, as in τ²-bench.

The reward is τ²-bench's (:mod:`.scoring`), given at the last step: the step rewards sum to
it, and ``info["progress"]`` is it (0 or 1), ``info["success"]`` whether it is 1, and
``info["reward_info"]`` the checks of the task's reward basis. The final ``info`` holds
``tau2_messages``, the τ²-bench trajectory (:mod:`.trajectory`): what τ²-bench's evaluator
would score, verdict for verdict the same (``env.trajectory`` gives it at any step), and
``benchmark_record``, the episode as a simulation of τ²-bench's results files (its messages,
termination reason and ``RewardInfo``), which ``rods eval`` writes for τ²-bench's own tools
(:mod:`.results`).

An action that cannot be parsed, or is empty, and a ``<tool_call>`` block that cannot be
read, are error observations for the agent, as in rods' environments; they are not part of
the τ²-bench trajectory (they reached neither the user nor the tools) and count neither as
τ²-bench steps nor as its tool errors (a served model's message never holds such a thing:
its server's tool parser decides what is a call).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from environments.tau2 import prompts
from environments.tau2.scoring import PARTING, QUIRKS, VERDICTS, Verdict, is_successful, says, score
from environments.tau2.state import EpisodeState
from environments.tau2.trajectory import (
    call_message,
    termination_reason,
    text_message,
    tool_message,
)
from environments.tau2.users import ScriptedStandIn
from rods_env.benchmark import BenchmarkDomain
from rods_env.episode import (
    CallReply,
    EpisodeEnv,
    Judgement,
    Opening,
    Outcome,
    Reply,
    TurnOpening,
    TurnScore,
    Verdicts,
    difference,
    started,
    task_pool,
)
from rods_env.errors import ConfigError, RodsError
from rods_env.parsing import (
    THINK_CLOSE,
    THINK_OPEN,
    TOOL_CALL_READING,
    ParsedAction,
    ParsedCall,
    ReadingRule,
    parse_action,
    split_reasoning,
    visible_text,
)
from rods_env.registry import load_any_domain
from rods_env.spaces import MAX_TEXT_CHARS
from rods_env.task import Task, resolve_task
from rods_env.tools import FrozenDict, clip_text, freeze
from rods_env.user import ScenarioUser

if TYPE_CHECKING:
    from environments.tau2.domain import Tau2Domain

_ARGS_JSON = json.JSONEncoder(ensure_ascii=False)

TAU2_MAX_STEPS = 200
"""τ²-bench's default step limit (its orchestrator counts every message)."""

TAU2_MAX_ERRORS = 10
"""τ²-bench's default limit on tool errors."""

USER_RETRIES = 3
"""Times an empty user message is asked for again before the user is said to have failed
(τ²-bench's ``generate`` retries an empty response ``DEFAULT_MAX_RETRIES`` = 3 times)."""


class Tau2Env(EpisodeEnv):
    """A τ²-bench domain as a Gymnasium environment (see the module docstring).

    Args:
        domain: A :class:`~environments.tau2.domain.Tau2Domain` or its name
            (``"tau2-airline"``).
        tasks: The task pool: None or ``"seeds"`` for τ²-bench's train and test tasks, a
            JSONL pool of rods task views, or a sequence of them.
        split: Sample from this split (``"train"``/``"test"``, :mod:`rods_env.splits`); None
            samples from all.
        max_steps: Agent actions before the episode is truncated (reward 0).
        user: Who plays the user: a :class:`rods_env.user.ScenarioUser` (e.g.
            :class:`rods_agent.rollouts.user.LLMUser`); None uses the scripted stand-in (not a
            τ²-bench user: see :mod:`.users`).
        solo: τ²-bench's solo mode (telecom): no user, the ticket is the first observation.
        render_mode: None or ``"ansi"``.
        max_action_chars: Longer actions are an error observation.
        tau2_max_steps: τ²-bench's step limit (orchestrator steps: messages).
        max_errors: τ²-bench's limit on tool errors.
        verdicts: Which verdict makes the reward, ``progress`` and ``success``:
            ``"official"`` (the default), τ²-bench's own, its loose checks included (the
            leaderboard's numbers); ``"strict"``, with COMMUNICATE as a whole token and
            ACTION by a successful call with every compared argument
            (:data:`environments.tau2.scoring.QUIRKS`). Both are in ``info["verdicts"]``
            either way; the results file for τ²-bench's tools always holds its own.
        actionable_hints: Append actionable hints to a failed call's observation
            (:mod:`rods_env.hints`; the τ²-bench trajectory keeps the tool's own reply).
            Off by default, never used in evaluation.
    """

    reading_rule: ClassVar[ReadingRule] = TOOL_CALL_READING
    """How an action is split into text and calls: as τ²-bench receives a served model's
    message, only ``<tool_call>`` blocks and a message dict's ``tool_calls`` are calls, and
    the text is what precedes the first block; any other text, JSON-looking or not, goes to
    the user (:data:`rods_env.parsing.TOOL_CALL_READING`)."""

    def __init__(
        self,
        domain: Tau2Domain | str = "tau2-airline",
        *,
        tasks: Sequence[Task] | str | Path | None = None,
        split: str | None = "train",
        max_steps: int = 100,
        user: ScenarioUser | None = None,
        solo: bool = False,
        render_mode: str | None = None,
        max_action_chars: int = MAX_TEXT_CHARS,
        tau2_max_steps: int = TAU2_MAX_STEPS,
        max_errors: int = TAU2_MAX_ERRORS,
        verdicts: str = "official",
        actionable_hints: bool = False,
    ) -> None:
        if isinstance(domain, str):
            domain = _tau2_domain(domain)
        pool = task_pool(tasks, domain.seed_tasks, domain.name)
        for task in pool:
            domain.tau2_task(task.id)  # an unknown id fails here, not mid-rollout
        super().__init__(
            render_mode=render_mode,
            max_steps=max_steps,
            max_action_chars=max_action_chars,
            actionable_hints=actionable_hints,
            tasks=pool,
            split=split,
            known=domain.seed_tasks(),
        )
        for name, value in (("tau2_max_steps", tau2_max_steps), ("max_errors", max_errors)):
            if value < 1:
                raise ConfigError(f"{name} must be at least 1, got {value}")
        if verdicts not in VERDICTS:
            raise ConfigError(f"verdicts must be 'official' or 'strict', got {verdicts!r}")
        self.verdicts = verdicts
        if user is not None and not isinstance(user, ScenarioUser):
            raise ConfigError(
                f"{domain.env_id} needs a user that plays τ²-bench's scenarios "
                f"(rods_env.user.ScenarioUser, e.g. rods_agent.rollouts.user.LLMUser), got "
                f"{type(user).__name__}"
            )
        if solo and not domain.has_solo_mode:
            raise ConfigError(f"{domain.env_id} has no solo mode (τ²-bench's telecom has one)")
        self.domain = domain
        self.backend = domain.backend()
        self.solo = bool(solo)
        self.max_steps = int(max_steps)
        self.tau2_max_steps = int(tau2_max_steps)
        self.max_errors = int(max_errors)
        self.user: Any = None if self.solo else (user if user is not None else ScriptedStandIn())

        schemas = list(self.backend.tool_schemas)
        if self.solo:
            schemas += [*self.backend.user_tool_schemas, prompts.done_tool_schema()]
        self._agent_schemas = freeze(schemas)  # read-only all the way down: shared by every env
        self._agent_tool_names = frozenset(s["function"]["name"] for s in schemas)
        self._user_schemas = list(self.backend.user_tool_schemas) or None
        policy = (self.backend.solo_proto if self.solo else self.backend.proto).policy
        self._policy_text = policy
        self._first_agent_message = prompts.first_agent_message()
        self._stops = prompts.user_stop_tokens()
        self._stop_token = prompts.stop_token()

        self._state: EpisodeState | None = None
        self._tau2_task: Any = None

    # -- properties ------------------------------------------------------------------------
    @property
    def task(self) -> Task:
        """The current task (its rods view)."""
        return started(self._task)

    @property
    def tau2_task(self) -> Any:
        """The current task as τ²-bench's model."""
        return started(self._tau2_task)

    @property
    def state(self) -> EpisodeState:
        """The episode's state (τ²-bench's environment object is ``state.env``)."""
        return started(self._state)

    @property
    def trajectory(self) -> list[dict[str, Any]]:
        """The episode's τ²-bench trajectory (plain dicts; see :mod:`.trajectory`)."""
        return [dict(m) for m in self._traj]

    # -- tasks -----------------------------------------------------------------------------
    def _pool_name(self) -> str:
        return self.domain.name

    def _resolve_task(self, choice: Any) -> Task:
        return resolve_task(choice, self.domain.name, self._task_by_id)

    def _unknown_task(self, task_id: str) -> Task:
        return self.domain.task(task_id)

    # -- opening ---------------------------------------------------------------------------
    def _open(self, task: Task) -> Opening:
        tau2_task = self.domain.tau2_task(task.id)
        if self._state is None:
            self._state = self.backend.new_state(solo=self.solo)
        self._state.reset(tau2_task)
        self._tau2_task = tau2_task
        self._tau2_steps = 0
        self._errors = 0
        self._verdict: Verdict | None = None
        self._user_error: str | None = None
        self._reasoning: list[str] = []
        self._traj: list[dict[str, Any]] = []
        self._user_view: list[dict[str, Any]] = []
        self._call_count = 0
        self._solo_started = False
        if self.solo:
            ticket = str(tau2_task.ticket or "")
            policy = prompts.solo_system_prompt(self._policy_text, ticket)
            first = clip_text(ticket, MAX_TEXT_CHARS)
            system = FrozenDict(role="system", content=policy)
            return Opening(first, (system, FrozenDict(role="user", content=first)), policy)
        policy = prompts.agent_system_prompt(self._policy_text)
        begin = getattr(self.user, "begin_scenario", None)
        if callable(begin):
            begin(tau2_task)
        self._user_prompt = prompts.scenario_prompt(
            tau2_task, with_tools=self._user_schemas is not None
        )
        greeting = self._first_agent_message
        self._traj.append(text_message("assistant", greeting))
        reply = self._user_turn(greeting)
        return Opening(
            reply.observation,
            (
                FrozenDict(role="system", content=policy),
                FrozenDict(role="assistant", content=greeting),
                *reply.messages,
            ),
            policy,
            end=reply.end,
        )

    def _begin_turn(self, index: int) -> TurnOpening:
        """The one turn: the whole conversation, with the same tools throughout."""
        return TurnOpening(self._agent_schemas)

    def _note_action(self, action: Any) -> None:
        thought = _reasoning(action)
        if thought:
            self._reasoning.append(thought)

    def _refusal(self, parsed: ParsedAction) -> str | None:
        if parsed.calls or parsed.content.strip():
            return None
        return "empty message: write a message to the user or call a tool" + (
            f" (in solo mode: call a tool, or {prompts.STOP_FUNCTION})" if self.solo else ""
        )

    # -- the agent's actions ---------------------------------------------------------------
    def _count_agent_message(self) -> None:
        """An agent message is one orchestrator step, except a solo agent's first (τ²-bench
        generates it while initializing)."""
        if self.solo and not self._solo_started:
            self._solo_started = True
            return
        self._tau2_steps += 1

    def _call_id(self, k: int) -> str:
        return self._new_call_id()

    def _new_call_id(self) -> str:
        """Call ids count the episode's calls, the user's included."""
        self._call_count += 1
        return f"call_{self._steps}_{self._call_count}"

    def _calls_begin(self, parsed: ParsedAction, ids: Sequence[str]) -> Reply | None:
        """A message of calls: in solo mode a ``done`` call makes it a stop (the other
        calls of that message do not run); otherwise its readable calls are one message of
        τ²-bench's trajectory, run in order."""
        if self.solo and any(c.name == prompts.STOP_FUNCTION for c in parsed.calls):
            self._traj.append(text_message("assistant", self._stop_token))
            answers = tuple(
                FrozenDict(
                    role="tool", tool_call_id=cid, name=c.name or "?", content=self._stop_token
                )
                for cid, c in zip(ids, parsed.calls, strict=True)
            )
            self._count_agent_message()
            return Reply(self._stop_token, answers, end=self._ending("agent_stop"))
        readable = [(cid, c) for cid, c in zip(ids, parsed.calls, strict=True) if c.error is None]
        if readable:
            self._traj.append(
                call_message(
                    "assistant",
                    [
                        {
                            "id": cid,
                            "name": c.name,
                            "arguments": c.arguments or {},
                            "requestor": "assistant",
                        }
                        for cid, c in readable
                    ],
                    parsed.content or None,
                )
            )
            self._count_agent_message()  # to the environment
        return None

    def _call(self, call: ParsedCall, call_id: str) -> CallReply:
        reply = self._run_tool(call_id, call.name, call.arguments or {}, "assistant")
        ok = not reply.error
        return CallReply(str(reply.content or ""), ok, None if ok else "ToolError")

    def _calls_end(self, ran: int) -> str | None:
        if ran:
            self._tau2_steps += 1  # the replies, back to the agent
        return self._ending()

    def _run_tool(
        self, call_id: str, name: str, arguments: Mapping[str, Any], requestor: str
    ) -> Any:
        from environments.tau2.package import tau2_module

        message = tau2_module("tau2.data_model.message")
        state = self.state
        tool_call = message.ToolCall(
            id=call_id, name=name, arguments=dict(arguments), requestor=requestor
        )
        reply = state.get_response(tool_call)
        if reply.error:
            self._errors += 1
        self._traj.append(tool_message(reply))
        return reply

    def _hear(self, content: str) -> Reply:
        """A message to the user (solo mode: a stop, or an agent error)."""
        self._traj.append(text_message("assistant", content))
        self._count_agent_message()
        if self.solo:
            stopped = self._stop_token in content
            end = self._ending("agent_stop" if stopped else "agent_error")
            if stopped:
                return Reply("(the episode is over)", end=end)
            return Reply(
                "Error: in solo mode every message must call a tool (call done to finish).",
                end=end,
            )
        cut = self._ending()
        if cut is not None:
            return Reply("(the conversation was cut at τ²-bench's step limit)", end=cut)
        return self._user_turn(content)

    # -- the user --------------------------------------------------------------------------
    def _user_turn(self, agent_text: str) -> Reply:
        """The user's answer to the agent's text, after any tool calls of their own.

        As in τ²-bench's orchestrator, a user's tool calls run and their replies go back to
        the user, as many times in a row as the user makes them: only τ²-bench's own limits
        (its step and error counts) end such a run. A user who fails (the simulator raises,
        or answers with nothing :data:`USER_RETRIES` + 1 times) ends the episode cleanly
        (``user_error``, unscored)."""
        self._user_view.append({"role": "user", "content": agent_text})
        while True:
            reply = self._user_reply()
            if isinstance(reply, str):
                self._user_error = reply
                return Reply(f"(the conversation ended: {reply})", end="user_error")
            text, calls = reply
            if calls:
                ids = [self._new_call_id() for _ in calls]
                specs: list[dict[str, Any]] = [
                    {"id": cid, "name": c.name, "arguments": c.arguments or {}, "requestor": "user"}
                    for cid, c in zip(ids, calls, strict=True)
                ]
                self._traj.append(call_message("user", specs, text or None))
                self._user_view.append(
                    {
                        "role": "assistant",
                        "content": text or None,
                        "tool_calls": [
                            {
                                "id": s["id"],
                                "type": "function",
                                "function": {
                                    "name": s["name"],
                                    "arguments": _ARGS_JSON.encode(s["arguments"]),
                                },
                            }
                            for s in specs
                        ],
                    }
                )
                self._tau2_steps += 1
                for spec in specs:
                    reply_message = self._run_tool(
                        spec["id"], spec["name"], spec["arguments"], "user"
                    )
                    self._user_view.append(
                        {
                            "role": "tool",
                            "tool_call_id": spec["id"],
                            "content": str(reply_message.content or ""),
                        }
                    )
                self._tau2_steps += 1
                cut = self._ending()
                if cut is not None:
                    return Reply("(the conversation was cut at τ²-bench's limits)", end=cut)
                continue
            self._traj.append(text_message("user", text))
            self._user_view.append({"role": "assistant", "content": text})
            shown = clip_text(text, MAX_TEXT_CHARS)
            self._tau2_steps += 1
            stop = "user_stop" if any(t in text for t in self._stops) else None
            return Reply(shown, (FrozenDict(role="user", content=shown),), end=self._ending(stop))

    def _user_reply(self) -> tuple[str, tuple[ParsedCall, ...]] | str:
        """The user's next message as ``(text, calls)``, or why there is none.

        An empty message is asked for again, up to :data:`USER_RETRIES` times, as τ²-bench's
        ``generate`` retries an empty response."""
        for _ in range(USER_RETRIES + 1):
            try:
                action = self.user.respond(
                    self._user_prompt, list(self._user_view), self._user_schemas
                )
            except Exception as exc:  # the user's failure, not the agent's: a clean end
                return f"the user simulator raised {type(exc).__name__}: {exc}"
            text, calls = self._read_user(action)
            if calls or text:
                return text, calls
        return f"the simulated user gave an empty message {USER_RETRIES + 1} times"

    def _read_user(self, action: Any) -> tuple[str, tuple[ParsedCall, ...]]:
        """A user's message as τ²-bench receives it: never read as an agent action.

        A user without tools (airline, retail) only writes text, whatever it looks like.
        Telecom's user has the phone's tools: their calls are the ``<tool_call>`` blocks or
        ``tool_calls`` that the reading rule reads, when every one of them can be read; a
        message with a call that cannot be read is text, as an OpenAI-compatible server's
        tool parser leaves it (vLLM's hermes parser returns the whole text as content)."""
        if self._user_schemas:
            parsed = parse_action(action, MAX_TEXT_CHARS, self.reading_rule)
            if parsed.error is None and all(c.error is None for c in parsed.calls):
                return parsed.content, parsed.calls
        return visible_text(action) or "", ()

    # -- the end ---------------------------------------------------------------------------
    def _ending(self, stop: str | None = None) -> str | None:
        """Why the episode ends here: ``stop`` (a stop the message carried) or τ²-bench's
        limits, checked where its orchestrator checks them: after any message not
        addressed to the tools. As there, a limit reached by the very message that stops
        overrides the stop. None: it goes on."""
        reason = stop
        if self._tau2_steps >= self.tau2_max_steps:
            reason = "max_steps"
        if self._errors >= self.max_errors:
            reason = "too_many_errors"
        return reason

    def _close_turn(self, ending: str | None) -> TurnScore:
        """The one turn closes as the conversation ends: τ²-bench scores it (:mod:`.scoring`)."""
        assert self._state is not None and self._tau2_task is not None
        if ending is None:
            raise RodsError("a τ²-bench conversation is one turn: it closes only as it ends")
        verdict = score(self.backend, self._tau2_task, self._traj, ending, self._state)
        if self._reasoning and verdict.communicate and not all(verdict.communicate):
            infos = self._tau2_task.evaluation_criteria.communicate_info or []
            unsaid = [i for i, ok in zip(infos, verdict.communicate, strict=True) if not ok]
            if any(says(r, i) for r in self._reasoning for i in unsaid):
                verdict = replace(verdict, quirks=(*verdict.quirks, "said_in_reasoning"))
        self._verdict = verdict
        chosen = self._chosen(verdict)
        passed = is_successful(chosen)
        failures = verdict.failures(self._tau2_task)
        if not passed and not failures:  # strict only
            failures = [
                {"rule": f"tau2_strict_{q}", "values": [], "text": QUIRKS[q]}
                for q in verdict.quirks
                if q in PARTING
            ]
        row = {
            "passed": passed,
            "reward": chosen,
            "checks": verdict.breakdown(),
            "failures": failures,
        }
        return TurnScore(row, chosen)

    def _score(self, reason: str) -> Outcome:
        assert self._verdict is not None  # scored as its one turn closed
        chosen = self._chosen(self._verdict)
        return Outcome(is_successful(chosen), chosen)

    def _chosen(self, verdict: Verdict) -> float:
        """The reward of the chosen verdicts (``verdicts=``)."""
        if self.verdicts == "strict" and verdict.strict_reward is not None:
            return float(verdict.strict_reward)
        return float(verdict.reward)

    def _verdicts(self) -> Verdicts:
        """τ²-bench's and the strict verdict, and where they part."""
        verdict = self._verdict
        official = verdict.reward if verdict is not None else 0.0
        strict = verdict.strict_reward if verdict is not None else None
        strict = official if strict is None else strict
        judgements = {
            name: Judgement(is_successful(value), value, [is_successful(value)])
            for name, value in (("official", official), ("strict", strict))
        }
        if is_successful(official) == is_successful(strict):
            return Verdicts(judgements)
        parting = [q for q in (verdict.quirks if verdict is not None else ()) if q in PARTING]
        why = "; ".join(QUIRKS[q] for q in parting)
        return Verdicts(
            judgements,
            [difference(0, is_successful(official), is_successful(strict), parting, why)],
        )

    def _extra_info(self) -> dict[str, Any]:
        verdict = self._verdict
        return {
            "reward_info": verdict.to_dict() if verdict is not None else None,
            "tau2_steps": self._tau2_steps,
            "tool_errors": self._errors,
            "user_error": self._user_error,
            "user": "solo" if self.solo else getattr(self.user, "name", type(self.user).__name__),
            **(self._final() if self._over else {}),
        }

    def _final(self) -> dict[str, Any]:
        """The final info's τ²-bench trajectory, and the benchmark record: the episode as
        τ²-bench's results files hold a simulation (:mod:`environments.tau2.results`)."""
        assert self._verdict is not None
        trajectory = self.trajectory
        record = {
            "benchmark": "tau2-bench",
            "domain": self.domain.tau2_domain,
            "task_id": str(self._tau2_task.id),
            "solo": self.solo,
            "termination_reason": termination_reason(self._termination),
            "tau2_replayable": not self._shows_new_ids(trajectory),
            "reward_info": self._verdict.to_tau2(self._tau2_task),
            "messages": [{**m, "turn_idx": i} for i, m in enumerate(trajectory)],
        }
        return {"tau2_messages": trajectory, "benchmark_record": record}

    def _shows_new_ids(self, trajectory: Sequence[Mapping[str, Any]]) -> bool:
        """Whether a tool reply shows an id τ²-bench's tools drew with ``uuid4()`` in this
        episode (telecom's new bills): τ²-bench's own evaluator, whose replay draws new
        ids, then cannot replay the conversation (rods' replay draws the same ones)."""
        drawn = [h[:8] for h in self.state.drawn_ids]
        return bool(drawn) and any(
            h in str(m.get("content") or "")
            for m in trajectory
            if m.get("role") == "tool"
            for h in drawn
        )


def _reasoning(action: Any) -> str:
    """The ``<think>`` reasoning of an action (or a message dict's ``reasoning_content``)."""
    if isinstance(action, str):
        return split_reasoning(action)[0] if THINK_CLOSE in action or THINK_OPEN in action else ""
    if isinstance(action, Mapping):
        parts = [action.get("reasoning_content"), action.get("reasoning")]
        content = action.get("content")
        if isinstance(content, str):
            parts.append(_reasoning(content))
        return "\n".join(p for p in parts if isinstance(p, str) and p)
    return ""


def _tau2_domain(name: str) -> Tau2Domain:
    """The τ²-bench domain called ``name`` (``tau2-airline``, or ``airline``), through the
    registry (the domain module makes environments of this one).

    Raises:
        ConfigError: for another name.
    """
    key = name if name.startswith("tau2-") else f"tau2-{name}"
    try:
        found = load_any_domain(key)
    except RodsError:
        found = None
    if not isinstance(found, BenchmarkDomain) or not hasattr(found, "tau2_domain"):
        raise ConfigError(f"no τ²-bench domain '{name}'")
    return found  # type: ignore[return-value]
