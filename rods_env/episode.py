"""The episode core: one conversation's life, written once for every environment.

Every environment of rods, an own domain's (:class:`rods_env.env.ToolEnv`) or a benchmark's
brought in as it is (BFCL, τ²-bench), is the same episode:

1. **pick a task** (``reset(options={"task": ...})``, or a draw from the pool, of a split);
2. **open it**: the first messages, the tools shown, the first observation;
3. **read an action** once, by the environment's declared :attr:`EpisodeEnv.reading_rule`
   (:mod:`rods_env.parsing`: which forms are calls; the ``<think>`` reasoning left out),
   in any accepted form (raw completion text, an OpenAI-style message dict);
4. an action that cannot be used is an **error observation** (the episode goes on);
   **calls run** in order, each as the benchmark runs a call, and their results are the
   observation; **text goes to whoever listens** (a simulated user, the benchmark's next
   scripted turn), whose reply is the observation;
5. **close a turn** (score it) and open the next, **finish** (score the episode) when the
   conversation ends by itself (``terminated``), **truncate** at a step limit
   (``truncated``) or at a caller's own limit (:meth:`EpisodeEnv.truncate`);
6. fill the **info contract** that rollouts, ``rods eval``, ``rods view``, TRL and hub
   adapters read (:meth:`EpisodeEnv.step`), and **render** the conversation.

:class:`EpisodeEnv` does all of that. A benchmark is a subclass that supplies only what
differs, in these parts (each a method or two):

============== ========================================================================
part           what the subclass supplies (each hook *returns* what happened; only the
               core writes the episode's state: messages, tools, turn results, progress,
               success, the turn and the end)
============== ========================================================================
tasks          the pool (``tasks=``, ``split=`` and ``known=`` of ``EpisodeEnv.__init__``),
               :meth:`_resolve_task` (what ``options["task"]`` names) and
               :meth:`_unknown_task` (an id outside the pool)
opening        :meth:`_open` returns an :class:`Opening` (first messages, system prompt,
               number of turns, first observation, an end at once);
               :meth:`_begin_turn` returns a :class:`TurnOpening` (a turn's messages and
               tools)
calls          :meth:`_call` returns a :class:`CallReply` (one readable call); optionally
               :meth:`_calls_begin` (a :class:`Reply` when a whole message of calls means
               something else), :meth:`_calls_end` (an end, after them) and :meth:`_call_id`
the user       :meth:`_hear` returns a :class:`Reply` (the reply's messages, a turn change,
               an end)
scoring        :meth:`_close_turn` returns a :class:`TurnScore` (a turn's result, the
               progress), :meth:`_unreached` (a benchmark's own fields of a turn never
               reached: the core builds those rows), :meth:`_score` returns an
               :class:`Outcome` (success, final progress), :meth:`_verdicts` returns the
               :class:`Verdicts` of a benchmark judged twice (``info["verdicts"]``, built by
               :func:`verdicts_info`), :meth:`_extra_info` (the benchmark's own info keys)
limits         ``max_steps`` (per episode), :attr:`max_turn_steps` (tool-calling steps per
               turn), :meth:`_refusal` (actions the benchmark refuses), and any end a
               hook returns
hints          only with ``actionable_hints=True`` (:mod:`rods_env.hints`), optionally:
               :meth:`_withheld` (tools withheld this turn), :meth:`_hint_name` (a
               call's name as the benchmark reads it), :meth:`_failed` and
               :meth:`_state_hints` (hints from the benchmark's own state)
============== ========================================================================

The core writes its state only in its own methods; ``tests/core/test_core_state.py`` fails
when an adapter assigns or mutates one of the core's attributes, or calls one of the core
methods that write them.

No mutable state outlives an episode but the environment's own immutable caches: every
per-episode attribute is set again by ``reset``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple, Protocol, TypeVar, runtime_checkable

import gymnasium as gym

from rods_env.errors import ConfigError, RodsError
from rods_env.hints import (
    Hint,
    failure_hints,
    looks_failed,
    schema_hints,
    unique,
    with_hints,
)
from rods_env.parsing import (
    LENIENT_READING,
    ParsedAction,
    ParsedCall,
    ReadingRule,
    parse_action,
    strip_reasoning,
)
from rods_env.rewards import Failure
from rods_env.spaces import MAX_TEXT_CHARS, UnicodeText
from rods_env.splits import in_split
from rods_env.tools import MAX_ERROR_CHARS, FrozenDict, FrozenList, clip_text

INFO_KEYS: Mapping[str, type | tuple[type, ...]] = {
    "task_id": str,
    "turn": int,
    "n_turns": int,
    "progress": float,
    "success": bool,
    "turn_results": list,
    "termination": (str, type(None)),
    "tool_calls": list,
    "messages": list,
    "tools": list,
    "policy": str,
    "steps": int,
}
"""The info contract: the keys every environment's ``info`` holds, with their types.

``task_id``; ``turn`` (the open turn's index) of ``n_turns``; ``progress`` in [0, 1] (the
step rewards sum to it); ``success`` (the strict verdict, final once the episode ends);
``turn_results`` (one dict per turn once it ends, with at least ``turn``, ``passed``,
``failures`` and ``message``, the index of the message that opened it); ``termination``
(None while the episode runs, then why it ended: ``user_stop``, ``max_steps``,
``terminal_tool``, a caller's reason...); ``tool_calls`` (this step's calls: ``name``,
``ok``, ``error``); ``messages`` (the conversation in OpenAI's format, read-only);
``tools`` (the tool schemas shown now, read-only); ``policy`` (the system prompt, "" when
none); ``steps`` (agent actions so far). A benchmark adds keys of its own."""

_T = TypeVar("_T")

_ARGS_JSON = json.JSONEncoder(ensure_ascii=False)  # reused: cheaper than json.dumps per call


class CallReply(NamedTuple):
    """What running one call gave.

    Attributes:
        output: The text the agent sees.
        ok: Whether the call succeeded.
        error: The kind of failure (an exception class name, ``"ToolError"``...) or None.
        end: A termination reason when the call ends the episode (a terminal tool), else
            None.
    """

    output: str
    ok: bool
    error: str | None = None
    end: str | None = None


class Opening(NamedTuple):
    """How an episode opens (:meth:`EpisodeEnv._open`); turn 0 opens right after.

    Attributes:
        observation: The first observation, before turn 0's own (:class:`TurnOpening`).
        messages: The conversation's first messages (a system prompt, a greeting, the
            user's first message...).
        policy: The system prompt (``info["policy"]``; "" when none).
        n_turns: The task's turns.
        end: A termination reason when the episode ends at once (the user failed), else None.
    """

    observation: str
    messages: Sequence[Mapping[str, Any]] = ()
    policy: str = ""
    n_turns: int = 1
    end: str | None = None


class TurnOpening(NamedTuple):
    """How a turn opens (:meth:`EpisodeEnv._begin_turn`).

    Attributes:
        tools: The tool schemas shown in the turn (``info["tools"]``, read-only).
        messages: The messages that open it (none: the last message opened it, a user's
            reply that moved the conversation on).
        observation: What the agent reads of them ("" when its message is already there).
    """

    tools: Sequence[Mapping[str, Any]]
    messages: Sequence[Mapping[str, Any]] = ()
    observation: str = ""


class Reply(NamedTuple):
    """What the agent's text got back (:meth:`EpisodeEnv._hear`), or a message of calls that
    means something of its own (:meth:`EpisodeEnv._calls_begin`).

    Attributes:
        observation: What the agent reads (before the next turn's own, when one opens).
        messages: Messages to add to the conversation (the user's reply...).
        next_turn: The turn ends: it is scored, and the next opens (after the last, the
            episode ends: ``user_stop``).
        end: A termination reason when the episode ends here (the open turn is scored, the
            turns not reached fail), else None.
    """

    observation: str
    messages: Sequence[Mapping[str, Any]] = ()
    next_turn: bool = False
    end: str | None = None


class TurnScore(NamedTuple):
    """A closed turn's score (:meth:`EpisodeEnv._close_turn`).

    Attributes:
        row: Its result, as ``info["turn_results"]`` holds it (at least ``passed`` and
            ``failures``); the core adds ``turn`` and ``message``.
        progress: The episode's progress with this turn counted.
    """

    row: Mapping[str, Any]
    progress: float


class Outcome(NamedTuple):
    """An ended episode's score (:meth:`EpisodeEnv._score`).

    Attributes:
        success: The strict verdict (``info["success"]``).
        progress: The final progress (``info["progress"]``; the step rewards sum to it).
    """

    success: bool
    progress: float


class Judgement(NamedTuple):
    """One verdict of an episode judged twice, as it stands (see :class:`Verdicts`).

    Attributes:
        success: The episode's success under this verdict.
        progress: Its progress under this verdict.
        turns: Whether each turn closed so far passed.
    """

    success: bool
    progress: float
    turns: Sequence[bool]


class Verdicts(NamedTuple):
    """The verdicts of a benchmark whose own checker and the correct one can part
    (:meth:`EpisodeEnv._verdicts`; :func:`verdicts_info` makes ``info["verdicts"]``).

    Attributes:
        judgements: Each verdict by name, the benchmark's own (``"official"``) first.
        differences: Where they part, and why (:func:`difference`), once the episode ends.
    """

    judgements: Mapping[str, Judgement]
    differences: Sequence[Mapping[str, Any]] = ()


def verdicts_info(verdicts: Verdicts) -> dict[str, Any]:
    """``info["verdicts"]``: ``{name: {"success", "progress", "turns"}, ...,
    "differences": [...]}`` (what ``rods eval`` reports and rollouts keep)."""
    out: dict[str, Any] = {
        name: {"success": j.success, "progress": j.progress, "turns": list(j.turns)}
        for name, j in verdicts.judgements.items()
    }
    out["differences"] = list(verdicts.differences)
    return out


def difference(
    turn: int, official: bool, strict: bool, quirks: Sequence[str], why: str
) -> dict[str, Any]:
    """One place where the official and the strict verdicts part (``differences``).

    Args:
        turn: The turn.
        official: Whether it passed under the benchmark's own checker.
        strict: Whether it passed under the correct one.
        quirks: The checker's quirks that made them part.
        why: What those quirks do, in words.
    """
    return {
        "turn": turn,
        "official": official,
        "strict": strict,
        "quirks": list(quirks),
        "why": why,
    }


@runtime_checkable
class Truncatable(Protocol):
    """An environment a caller can end by a limit of its own, scored as at its step limit
    (every :class:`EpisodeEnv`; a benchmark's own environment declares it by having
    ``truncate``, :class:`rods_env.benchmark.BenchmarkDomain`)."""

    def truncate(self, reason: str = "truncated") -> dict[str, Any]:
        """End the episode now; returns the final info."""
        ...


@runtime_checkable
class SeededUser(Protocol):
    """A user whose replies are sampled (a model playing the user): seeded per episode."""

    def seed_episode(self, seed: int | None) -> None:
        """Seed the replies of the next episode."""
        ...


NOT_REACHED = Failure("not_reached").to_dict()
"""The failure of a turn the conversation never reached (read-only: copied into rows)."""


class EpisodeEnv(gym.Env[str, str]):
    """The life of an episode, common to every environment (see the module doc).

    Observations are text; actions are text (a raw completion) or an OpenAI-style assistant
    message dict. ``step`` never raises on an action: one that cannot be used is an error
    observation. ``terminated`` is true when the conversation ends by itself;
    ``truncated`` when a step limit cuts it. The reward of a step is the increase of
    ``progress``, so an episode's rewards sum to its final progress.

    Args:
        render_mode: None or ``"ansi"``.
        max_steps: Agent steps before the episode is truncated (None: the subclass's
            :meth:`_step_limit`).
        max_action_chars: Longer actions are rejected with an error observation.
        actionable_hints: Append actionable hints to the observation of a failed call
            (:mod:`rods_env.hints`; Environment Tuning's environment augmentation, for
            training only). Off by default; hints change what the agent reads, never the
            state or the reward.
        tasks: Every task of the environment (``options["split"]`` draws among them).
        split: ``reset`` draws from the tasks of this split (:func:`rods_env.splits.in_split`:
            a task without a split is a train task); None: from all.
        known: More tasks whose ids ``options["task"]`` may name (seed tasks beside a pool).
    """

    # gymnasium types metadata as an instance attribute; it is class-level data here.
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 4}  # type: ignore[misc]
    reading_rule: ClassVar[ReadingRule] = LENIENT_READING
    """How an action is split into text and calls (:class:`rods_env.parsing.ReadingRule`)."""
    max_turn_steps: ClassVar[int | None] = None
    """Most tool-calling steps (calls, or actions that cannot be used) in one turn; the
    next one truncates the episode (``max_steps``). None: no such limit."""
    user: Any = None
    """Who plays the user (None: nobody, or the benchmark's own script)."""

    def __init__(
        self,
        *,
        render_mode: str | None = None,
        max_steps: int | None = None,
        max_action_chars: int = MAX_TEXT_CHARS,
        actionable_hints: bool = False,
        tasks: Iterable[Any] = (),
        split: str | None = None,
        known: Iterable[Any] = (),
    ) -> None:
        if render_mode not in (None, "ansi"):
            raise ConfigError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if max_steps is not None and max_steps < 1:
            raise ConfigError(f"max_steps must be at least 1, got {max_steps}")
        self.render_mode = render_mode
        self.max_steps = max_steps
        self.max_action_chars = int(max_action_chars)
        if not isinstance(actionable_hints, bool):
            raise ConfigError(f"actionable_hints must be True or False, got {actionable_hints!r}")
        self.actionable_hints = actionable_hints
        self.observation_space = UnicodeText(MAX_TEXT_CHARS)
        self.action_space = UnicodeText(self.max_action_chars)
        self._all_tasks: list[Any] = list(tasks)
        self._pool: list[Any] = in_split(self._all_tasks, split)
        self._by_id: dict[str, Any] = {t.id: t for t in known}
        self._by_id.update((t.id, t) for t in self._all_tasks)
        self._task: Any = None
        self._messages: list[Any] = []
        self._schemas: Any = FrozenList()
        self._policy = ""
        self._n_turns = 1
        self._over = True

    # -- what every environment shows --------------------------------------------------------
    @property
    def tasks(self) -> list[Any]:
        """The tasks ``reset`` samples from."""
        return list(self._pool)

    # -- gymnasium API -------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode.

        Args:
            seed: Re-seeds the task sampler when given.
            options: ``{"task": a task or its id}`` picks the task; ``{"split": "test"}``
                samples from that split of the pool.

        Returns:
            The first observation and the info dict.
        """
        super().reset(seed=seed)
        task = self._pick_task(options or {})
        self._task = task
        self._steps = 0
        self._turn = 0
        self._turn_steps = 0
        self._turn_message = 0
        self._turn_closed = False
        self._results: list[Any] = []
        self._progress = 0.0
        self._success = False
        self._termination: str | None = None
        self._over = False
        self._messages = []
        opening = self._open(task)
        self._policy = opening.policy
        self._n_turns = opening.n_turns
        self._add(opening.messages)
        first = opening.observation + self._open_turn(0)
        if opening.end is not None:
            self._finish(opening.end)
        return first, self._info([])

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply the agent's action.

        Args:
            action: Raw completion text or an OpenAI-style assistant message dict.

        Returns:
            ``(observation, reward, terminated, truncated, info)``. ``terminated``: the
            conversation ended by itself; ``truncated``: a step limit cut it first. The
            info holds :data:`INFO_KEYS` and the benchmark's own keys.
        """
        if self._task is None:
            raise RodsError("call reset() before step()")
        if self._over:
            raise RodsError("the episode is over: call reset() to start another")
        self._steps += 1
        before = self._progress
        self._note_action(action)
        parsed = parse_action(action, self.max_action_chars, self.reading_rule)
        log: list[dict[str, Any]] = []
        error = parsed.error or self._refusal(parsed)
        if error is not None:
            obs = clip_text(f"Error: {error}", MAX_ERROR_CHARS, "error")
            self._messages.append(FrozenDict(role="assistant", content=clip_action(action)))
            self._messages.append(FrozenDict(role="system", content=obs))
            tool_step = True
        elif parsed.calls:
            obs = self._run_calls(parsed, log)
            tool_step = True
        else:
            self._messages.append(FrozenDict(role="assistant", content=parsed.content))
            obs = self._take(self._hear(parsed.content))
            tool_step = False
        truncated = False
        if tool_step and self.max_turn_steps is not None and not self._over:
            self._turn_steps += 1
            if self._turn_steps > self.max_turn_steps:
                self._finish("max_steps")
                truncated = True
        if not self._over and self._steps >= self._limit:
            self._finish("max_steps")
            truncated = True
        terminated = self._over and not truncated
        reward = self._progress - before
        return clip_text(obs, MAX_TEXT_CHARS), reward, terminated, truncated, self._info(log)

    def truncate(self, reason: str = "truncated") -> dict[str, Any]:
        """End the episode now, scored as when a step limit cuts it.

        A caller that stops an episode by a limit of its own (a rollout's turn or token
        budget) calls this, so the same point of a conversation gets the same reward
        whichever limit was hit: the open turn is scored on what happened so far, and the
        turns not reached fail.

        Args:
            reason: Recorded as ``info["termination"]`` (e.g. ``"max_tokens"``).

        Returns:
            The final info dict.
        """
        if self._task is None:
            raise RodsError("call reset() before truncate()")
        if not self._over:
            self._finish(reason)
        return self._info([])

    def render(self) -> str | None:
        """With ``render_mode="ansi"``, the conversation so far as text."""
        if self.render_mode != "ansi":
            return None
        return render_messages(self._messages)

    # -- the life, in order --------------------------------------------------------------------
    def _pick_task(self, options: Mapping[str, Any]) -> Any:
        choice = options.get("task")
        if choice is not None:
            return self._resolve_task(choice)
        split = options.get("split")
        if split not in (None, "train", "test"):
            raise ConfigError(f"options['split'] must be 'train' or 'test', got {split!r}")
        pool = self._pool if split is None else in_split(self._all_tasks, split)
        if not pool:
            raise ConfigError(
                f"no tasks to sample for {self._pool_name()}"
                + (f" split {split!r}" if split else "")
                + ": pass options={'task': ...} or a task pool"
            )
        return pool[int(self.np_random.integers(len(pool)))]

    def _task_by_id(self, task_id: str) -> Any:
        """The task with id ``task_id``: of the pool or ``known``, else
        :meth:`_unknown_task`'s."""
        found = self._by_id.get(task_id)
        return found if found is not None else self._unknown_task(task_id)

    def _add(self, messages: Iterable[Mapping[str, Any]]) -> None:
        """Add messages to the conversation (read-only, as ``info["messages"]`` hands them)."""
        for m in messages:
            self._messages.append(m if isinstance(m, FrozenDict) else FrozenDict(m))

    def _open_turn(self, index: int) -> str:
        """Open turn ``index`` (:meth:`_begin_turn`: its tools and messages); the turn's
        opening message is the first it added (or, when it added none, the last message: a
        user's reply that moved the conversation on). Returns its observation."""
        self._turn = index
        self._turn_steps = 0
        self._turn_closed = False
        mark = len(self._messages)
        opening = self._begin_turn(index)
        self._schemas = opening.tools
        self._add(opening.messages)
        self._turn_message = mark if opening.messages else mark - 1
        return opening.observation

    def _take(self, reply: Reply) -> str:
        """Apply a :class:`Reply`: its messages, then its end or the next turn; returns the
        observation."""
        if reply.messages:
            self._add(reply.messages)
        if reply.end is not None:
            if not self._over:
                self._finish(reply.end)
            return reply.observation
        if reply.next_turn:
            return reply.observation + self._end_turn()
        return reply.observation

    def _run_calls(self, parsed: ParsedAction, log: list[dict[str, Any]]) -> str:
        """The assistant's message with its calls, then each call's reply as a tool
        message, in order; a call that could not be read is an error reply and runs
        nothing. The observation is the reply, or the replies each under its call's name."""
        calls = parsed.calls
        ids = [self._call_id(k) for k in range(len(calls))]
        tool_calls = FrozenList(
            FrozenDict(
                id=cid,
                type="function",
                function=FrozenDict(
                    name=call.name or "?",
                    arguments=_ARGS_JSON.encode(
                        call.arguments if call.arguments is not None else {}
                    ),
                ),
            )
            for call, cid in zip(calls, ids, strict=True)
        )
        self._messages.append(
            FrozenDict(role="assistant", content=parsed.content or None, tool_calls=tool_calls)
        )
        answered = self._calls_begin(parsed, ids)
        if answered is not None:
            return self._take(answered)
        outputs: list[str] = []
        ran = 0
        for call, cid in zip(calls, ids, strict=True):
            if call.error is not None or call.arguments is None:
                reply = CallReply(f"Error: {call.error}", False, "ParseError")
            else:
                reply = self._call(call, cid)
                ran += 1
            entry: dict[str, Any] = {"name": call.name, "ok": reply.ok, "error": reply.error}
            log.append(entry)
            if self.actionable_hints:
                ran_call = call.error is None and call.arguments is not None
                found = self._hints(call, reply) if ran_call else []
                entry["hints"] = [h.kind for h in found]
                if found:
                    reply = reply._replace(output=with_hints(reply.output, found, MAX_TEXT_CHARS))
            out = clip_text(reply.output, MAX_TEXT_CHARS)
            self._messages.append(
                FrozenDict(role="tool", tool_call_id=cid, name=call.name or "?", content=out)
            )
            outputs.append(out)
            if reply.end is not None:
                self._finish(reply.end)
                break
        end = self._calls_end(ran)
        if end is not None and not self._over:
            self._finish(end)
        if len(outputs) == 1:
            return outputs[0]
        return "\n".join(f"[{c.name or '?'}] {o}" for c, o in zip(calls, outputs, strict=False))

    def _end_turn(self) -> str:
        """Close the open turn; finish (``user_stop``) after the last turn, else open the
        next. Returns the next turn's observation ("" when finished)."""
        self._close_open_turn(None)
        if self._turn + 1 >= self._n_turns:
            self._finish("user_stop")
            return ""
        return self._open_turn(self._turn + 1)

    def _close_open_turn(self, ending: str | None) -> None:
        if not self._turn_closed:
            self._turn_closed = True
            score = self._close_turn(ending)
            if score is not None:
                self._results.append(
                    {"turn": self._turn, **score.row, "message": self._turn_message}
                )
                self._progress = score.progress

    def _finish(self, reason: str) -> None:
        """End the episode: the open turn is scored, the turns not reached fail, then the
        episode is scored (:meth:`_score`)."""
        self._close_open_turn(reason)
        for index in range(len(self._results), self._n_turns):
            self._results.append(
                {
                    "turn": index,
                    "passed": False,
                    **self._unreached(index),
                    "message": None,
                    "failures": [dict(NOT_REACHED)],
                }
            )
        outcome = self._score(reason)
        self._success = outcome.success
        self._progress = outcome.progress
        self._termination = reason
        self._over = True

    def _info(self, log: list[dict[str, Any]]) -> dict[str, Any]:
        info = {
            "task_id": self._task.id,
            "turn": self._turn,
            "n_turns": self._n_turns,
            "progress": self._progress,
            "success": self._success,
            "turn_results": list(self._results),
            "termination": self._termination,
            "tool_calls": log,
            "messages": list(self._messages),
            "tools": self._schemas,
            "policy": self._policy,
            "steps": self._steps,
        }
        verdicts = self._verdicts()
        if verdicts is not None:
            info["verdicts"] = verdicts_info(verdicts)
        extra = self._extra_info()
        if extra:
            info.update(extra)
        return info

    def seed_user(self, seed: int | None) -> None:
        """Seed the user of the next episode when its replies are sampled
        (:class:`SeededUser`, a model playing the user); otherwise nothing."""
        if isinstance(self.user, SeededUser):
            self.user.seed_episode(seed)

    # -- the parts a benchmark supplies ----------------------------------------------------
    @property
    def _limit(self) -> int:
        """The episode's step limit (the subclass may make it depend on the task)."""
        if self.max_steps is None:
            raise NotImplementedError("a benchmark without max_steps says its own step limit")
        return self.max_steps

    def _pool_name(self) -> str:
        """How errors about the task pool name it."""
        return type(self).__name__

    def _resolve_task(self, choice: Any) -> Any:
        """The task ``options["task"]`` names: by default an id (:meth:`_task_by_id`).

        Raises:
            ConfigError: for anything that is not one of the environment's tasks.
        """
        if isinstance(choice, str):
            return self._task_by_id(choice)
        raise ConfigError(f"options['task'] must be a task id, got {type(choice).__name__}")

    def _unknown_task(self, task_id: str) -> Any:
        """The task of an id outside the pool and ``known`` (a benchmark may know more).

        Raises:
            ConfigError: by default.
        """
        raise ConfigError(f"unknown task id '{task_id}' for {self._pool_name()}")

    def _open(self, task: Any) -> Opening:
        """Open an episode of ``task`` (the core's per-episode state is already fresh): set
        up the benchmark's own state; return how the conversation opens."""
        raise NotImplementedError

    def _begin_turn(self, index: int) -> TurnOpening:
        """Turn ``index`` opens: its tools, and the messages that open it."""
        raise NotImplementedError

    def _call(self, call: ParsedCall, call_id: str) -> CallReply:
        """Run one readable call."""
        raise NotImplementedError

    def _calls_begin(self, parsed: ParsedAction, ids: Sequence[str]) -> Reply | None:
        """A message of calls arrives (its assistant message is in the conversation): a
        benchmark that gives such a message a meaning of its own answers it here (the
        :class:`Reply` holds the tool messages); None runs the calls."""
        return None

    def _calls_end(self, ran: int) -> str | None:
        """After a message's calls (``ran`` of them reached :meth:`_call`): a termination
        reason when the episode ends there, else None."""
        return None

    def _hints(self, call: ParsedCall, reply: CallReply) -> list[Hint]:
        """The actionable hints for one call's reply (only with ``actionable_hints``; the
        reply is already recorded wherever the benchmark scores it). A call to a withheld
        tool is told so; a failed call (:meth:`_failed`) gets what its schema says
        (:func:`rods_env.hints.schema_hints`), then the environment's own hints
        (:meth:`_state_hints`), else what its error text says
        (:func:`rods_env.hints.failure_hints`); a call that did what it should gets none."""
        name = self._hint_name(call)
        withheld = self._withheld()
        if name in withheld:
            return schema_hints(name, call.arguments, (), withheld=withheld)
        if not self._failed(reply):
            return []
        found = schema_hints(name, call.arguments, self._schemas, withheld=withheld)
        if any(h.kind == "unknown_function" for h in found):
            return found  # the name is the failure: what the error says is about the name
        state = self._state_hints(name, call, reply)
        found += state or failure_hints(name, reply.output, self._schemas)
        return unique(found)

    def _failed(self, reply: CallReply) -> bool:
        """Whether a call failed or gave nothing useful (hints are given only then)."""
        return not reply.ok or looks_failed(reply.output)

    def _hint_name(self, call: ParsedCall) -> str:
        """The function a call names, as the environment reads names (for the hints)."""
        return call.name

    def _withheld(self) -> Collection[str]:
        """Tools withheld in the open turn (a call to one is told it is not available)."""
        return ()

    def _state_hints(self, name: str, call: ParsedCall, reply: CallReply) -> list[Hint]:
        """The environment's own hints for a failed call ``name`` (read as
        :meth:`_hint_name` reads it), from its state and its tools' error texts; none by
        default (the generic ones of :func:`rods_env.hints.failure_hints` then apply)."""
        return []

    def _call_id(self, k: int) -> str:
        """The id of the ``k``-th call of this step's message."""
        return f"call_{self._steps}_{k}"

    def _hear(self, content: str) -> Reply:
        """The agent's text ``content`` (already in the conversation) reaches whoever
        listens; returns what came back (their reply, a turn change, an end)."""
        raise NotImplementedError

    def _refusal(self, parsed: ParsedAction) -> str | None:
        """Why the benchmark refuses a readable action (an error observation), or None."""
        return None

    def _note_action(self, action: Any) -> None:
        """See every action as given, before it is read (a benchmark that scores what was
        only thought keeps it here)."""

    def _close_turn(self, ending: str | None) -> TurnScore | None:
        """Score the open turn as it closes (``ending``: why the episode ends with it, None
        when the next turn opens); None: the turn has no result of its own."""
        return None

    def _unreached(self, index: int) -> Mapping[str, Any]:
        """The benchmark's own fields of the result of turn ``index``, never reached (the
        core adds ``turn``, ``passed``, ``message`` and the ``not_reached`` failure)."""
        return {}

    def _score(self, reason: str) -> Outcome:
        """Score the episode that ends for ``reason`` (its open turn already scored, the
        turns not reached already failed)."""
        return Outcome(self._success, self._progress)

    def _verdicts(self) -> Verdicts | None:
        """The verdicts as they stand, for a benchmark judged twice (``info["verdicts"]``);
        None: judged once."""
        return None

    def _extra_info(self) -> dict[str, Any] | None:
        """The benchmark's own info keys (None: none)."""
        return None


def started(value: _T | None) -> _T:
    """``value``, a part of the episode that ``reset`` sets (an environment's ``task``,
    state...).

    Raises:
        RodsError: before the first ``reset``.
    """
    if value is None:
        raise RodsError("call reset() first")
    return value


def _visible(action: Any) -> Any:
    """An action without its ``<think>`` reasoning (kept out of the history: the user and the
    reward never see it)."""
    if isinstance(action, str):
        return strip_reasoning(action)
    if isinstance(action, dict) and isinstance(action.get("content"), str):
        return {**action, "content": strip_reasoning(action["content"])}
    return action


def _clip(action: Any, limit: int = 2000) -> str:
    """A printable, bounded text of an action that could not be used (for the history)."""
    if isinstance(action, str):
        text = action[: limit + 1]
    else:
        try:
            text = json.dumps(action, default=repr, ensure_ascii=False)[: limit + 1]
        except (TypeError, ValueError, RecursionError):
            text = f"<an unreadable {type(action).__name__} action>"
    # lone surrogates cannot be written by any encoder: the history must stay writable
    text = text.encode("utf-8", "replace").decode("utf-8")
    if len(text) > limit:
        full = len(action) if isinstance(action, str) else len(text)
        return text[:limit] + f"... [{max(full - limit, 1):,} more characters omitted]"
    return text


def clip_action(action: Any, limit: int = 2000) -> str:
    """What the history keeps of an action that could not be used: its text without its
    ``<think>`` reasoning, bounded.

    Args:
        action: The action as the agent gave it (text, a message dict, anything).
        limit: Most characters kept before a note of how many were omitted.
    """
    return _clip(_visible(action), limit)


def render_messages(messages: Sequence[Mapping[str, Any]]) -> str:
    """Render an OpenAI-format conversation as readable text."""
    lines = []
    for m in messages:
        role = m.get("role", "?")
        if role == "system" and m is messages[0]:
            lines.append(f"[system] ({len(m.get('content') or '')} characters of policy)")
            continue
        if m.get("content"):
            lines.append(f"[{role}] {m['content']}")
        for tc in m.get("tool_calls") or ():
            fn = tc.get("function", {})
            lines.append(f"[assistant -> {fn.get('name')}] {fn.get('arguments')}")
    return "\n".join(lines) + "\n"


def task_pool(tasks: Sequence[Any] | str | Any | None, seeds: Any, domain: str) -> list[Any]:
    """The tasks an environment of ``domain`` samples from.

    Args:
        tasks: None or ``"seeds"`` for ``seeds()``, a path to a JSONL pool, or a sequence
            of tasks.
        seeds: Returns the domain's seed tasks.
        domain: Tasks of other domains are left out (a pool file may mix domains).
    """
    from pathlib import Path

    from rods_env.task import load_tasks

    if tasks is None or (isinstance(tasks, str) and tasks == "seeds"):
        pool = list(seeds())
    elif isinstance(tasks, (str, Path)):
        pool = load_tasks(tasks)
    else:
        pool = list(tasks)
    return [t for t in pool if t.domain == domain]
