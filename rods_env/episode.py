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
part           what the subclass supplies
============== ========================================================================
tasks          ``_pool``/``_all_tasks`` (set in ``__init__``) and :meth:`_resolve_task`
opening        :meth:`_open` (state, first messages, ``_open_turn(0)``) and
               :meth:`_begin_turn` (a turn's messages and tools)
calls          :meth:`_call` (one readable call), optionally :meth:`_calls_begin` /
               :meth:`_calls_end` (what a whole message of calls means) and
               :meth:`_call_id`
the user       :meth:`_hear` (text to the user: their reply, turn changes, a stop)
scoring        :meth:`_close_turn` (a turn's result), :meth:`_score` (the episode's),
               :meth:`_extra_info` (the benchmark's own info keys)
limits         ``max_steps`` (per episode), :attr:`max_turn_steps` (tool-calling steps per
               turn), :meth:`_refusal` (actions the benchmark refuses), and any end the
               parts above declare through :meth:`_finish`
hints          only with ``actionable_hints=True`` (:mod:`rods_env.hints`), optionally:
               :meth:`_withheld` (tools withheld this turn), :meth:`_hint_name` (a
               call's name as the benchmark reads it), :meth:`_failed` and
               :meth:`_state_hints` (hints from the benchmark's own state)
============== ========================================================================

No mutable state outlives an episode but the environment's own immutable caches: every
per-episode attribute is set again by ``reset``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple, TypeVar

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
from rods_env.spaces import MAX_TEXT_CHARS, UnicodeText
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
    """

    # gymnasium types metadata as an instance attribute; it is class-level data here.
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 4}  # type: ignore[misc]
    reading_rule: ClassVar[ReadingRule] = LENIENT_READING
    """How an action is split into text and calls (:class:`rods_env.parsing.ReadingRule`)."""
    max_turn_steps: ClassVar[int | None] = None
    """Most tool-calling steps (calls, or actions that cannot be used) in one turn; the
    next one truncates the episode (``max_steps``). None: no such limit."""

    def __init__(
        self,
        *,
        render_mode: str | None = None,
        max_steps: int | None = None,
        max_action_chars: int = MAX_TEXT_CHARS,
        actionable_hints: bool = False,
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
        self._pool: list[Any] = []
        self._all_tasks: list[Any] = []
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
        first = self._open(task)
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
            obs = self._hear(parsed.content)
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
        pool = self._pool if split is None else [t for t in self._all_tasks if t.split == split]
        if not pool:
            raise ConfigError(
                f"no tasks to sample for {self._pool_name()}"
                + (f" split {split!r}" if split else "")
                + ": pass options={'task': ...} or a task pool"
            )
        return pool[int(self.np_random.integers(len(pool)))]

    def _open_turn(self, index: int) -> str:
        """Open turn ``index``: the subclass's :meth:`_begin_turn` adds its messages and
        sets its tools; the turn's opening message is the first it added (or, when it
        added none, the last message: a user's reply that moved the conversation on)."""
        self._turn = index
        self._turn_steps = 0
        self._turn_closed = False
        mark = len(self._messages)
        obs = self._begin_turn(index)
        self._turn_message = mark if len(self._messages) > mark else mark - 1
        return obs

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
            return answered
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
        self._calls_end(ran)
        if len(outputs) == 1:
            return outputs[0]
        return "\n".join(f"[{c.name or '?'}] {o}" for c, o in zip(calls, outputs, strict=False))

    def _say(self, text: str) -> None:
        """Add the user's message ``text`` to the conversation."""
        self._messages.append(FrozenDict(role="user", content=text))

    def _end_turn(self, stop: bool = False) -> str:
        """Close the open turn; finish (``user_stop``) after the last turn or on a stop,
        else open the next. Returns the next turn's observation ("" when finished)."""
        self._close_open_turn()
        if stop or self._turn + 1 >= self._n_turns:
            self._finish("user_stop")
            return ""
        return self._open_turn(self._turn + 1)

    def _close_open_turn(self) -> None:
        if not self._turn_closed:
            self._turn_closed = True
            self._close_turn()

    def _finish(self, reason: str) -> None:
        """End the episode: the open turn is scored, then the episode (:meth:`_score`)."""
        self._close_open_turn()
        self._score(reason)
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
        extra = self._extra_info()
        if extra:
            info.update(extra)
        return info

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
        """The task ``options["task"]`` names (a task, or its id).

        Raises:
            ConfigError: for anything that is not one of the environment's tasks.
        """
        raise NotImplementedError

    def _open(self, task: Any) -> str:
        """Open an episode of ``task`` (the per-episode state is already fresh): set up the
        state, the system prompt (``_policy``), the first messages and turn 0
        (:meth:`_open_turn`); return the first observation. It may end the episode at
        once (:meth:`_finish`)."""
        raise NotImplementedError

    def _begin_turn(self, index: int) -> str:
        """Turn ``index`` opens: add its messages, set the tools shown (``_schemas``);
        return the observation that opens it ("" when its message is already there)."""
        return ""

    def _call(self, call: ParsedCall, call_id: str) -> CallReply:
        """Run one readable call."""
        raise NotImplementedError

    def _calls_begin(self, parsed: ParsedAction, ids: Sequence[str]) -> str | None:
        """A message of calls arrives (its assistant message is in the conversation): a
        benchmark that gives such a message a meaning of its own answers it here, adding
        the tool messages itself, and returns the observation; None runs the calls."""
        return None

    def _calls_end(self, ran: int) -> None:
        """After a message's calls (``ran`` of them reached :meth:`_call`)."""

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

    def _hear(self, content: str) -> str:
        """The agent's text ``content`` (already in the conversation) reaches whoever
        listens; returns their reply (the observation). Uses :meth:`_say`,
        :meth:`_end_turn` and :meth:`_finish`."""
        raise NotImplementedError

    def _refusal(self, parsed: ParsedAction) -> str | None:
        """Why the benchmark refuses a readable action (an error observation), or None."""
        return None

    def _note_action(self, action: Any) -> None:
        """See every action as given, before it is read (a benchmark that scores what was
        only thought keeps it here)."""

    def _close_turn(self) -> None:
        """Score the open turn: append its result to ``_results``, update ``_progress``."""

    def _score(self, reason: str) -> None:
        """Score the episode that ends for ``reason`` (its open turn already scored): the
        turns not reached, ``_success``, ``_progress``."""

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


def split_of(pool: Sequence[Any], split: str | None) -> list[Any]:
    """The tasks of ``pool`` that ``reset`` draws from for ``split`` (None: all; a task
    without a split is in every split).

    Raises:
        ConfigError: for a split that is not ``train``, ``test`` or None.
    """
    if split is not None and split not in ("train", "test"):
        raise ConfigError(f"split must be 'train', 'test' or None, got {split!r}")
    return [t for t in pool if split is None or t.split == split or t.split is None]
