"""ToolEnv: a Gymnasium environment for multi-turn tool use with a simulated user."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym

from rods_env.database import Database
from rods_env.domain import Domain
from rods_env.errors import ConfigError, RodsError
from rods_env.gold import GOLD_CACHE, Gold, GoldCache
from rods_env.parsing import (
    LENIENT_READING,
    ParsedAction,
    ReadingRule,
    parse_action,
    strip_reasoning,
)
from rods_env.rewards import (
    OutputCheck,
    SeenValues,
    Speech,
    TurnResult,
    check_outputs,
    effect_present,
    evaluate_turn,
    progress,
    success,
)
from rods_env.spaces import MAX_TEXT_CHARS, UnicodeText
from rods_env.task import Task, load_tasks
from rods_env.tools import MAX_ERROR_CHARS, FrozenDict, FrozenList, clip_text
from rods_env.user import ScriptedUser, TurnView, UserSimulator

PROMPTS = ("full", "brief")
"""What an own-domain environment shows the agent (``ToolEnv(prompt=...)``)."""

_ARGS_JSON = json.JSONEncoder(ensure_ascii=False)  # reused: cheaper than json.dumps per call


class ToolEnv(gym.Env[str, str]):
    """A tau-bench-style conversation: an agent, a domain's tools and database, and a user.

    Observations are text: the user's messages, or the results of the agent's tool calls.
    Actions are text (a raw completion, with tool calls as ``<tool_call>{json}</tool_call>``
    blocks or bare JSON) or an OpenAI-style assistant message dict. A message without tool
    calls goes to the user, whose reply is the next observation. Reasoning between
    ``<think>`` and ``</think>`` is the agent's own: it is left out before the action is read,
    so it runs no tool, reaches neither the user nor the reward, and is not kept in the
    history (:func:`rods_env.parsing.split_reasoning`). ``step`` never raises on
    an action: whatever it is (malformed, huge, deeply nested, not JSON data), it becomes
    an error observation, in time linear in its size; an observation is at most
    ``MAX_TEXT_CHARS`` characters, a longer one ends with a truncation note.

    ``info["tools"]`` and the messages of ``info["messages"]`` are read-only data (editing
    them raises; ``copy.deepcopy`` gives an editable copy), so a caller cannot change the
    environment's history or another environment's tool list.

    The reward of a step is the increase of ``progress`` (share of user turns passed), so an
    episode's rewards sum to its final progress. ``terminated`` is true when the conversation
    ends by itself (the user is done, or a terminal tool such as a transfer to a human ran);
    ``truncated`` is true when the step limit cut it short. Either way the final ``info``
    holds ``progress`` and the strict ``success`` flag.

    Args:
        domain: A :class:`Domain` or a registered domain name.
        tasks: The task pool to sample from: None or ``"seeds"`` for the domain's seed tasks,
            a path to a JSONL pool, or a sequence of tasks (tasks of other domains are
            left out).
        split: Keep only tasks of this split (``"train"``/``"test"``); None keeps all.
        max_steps: Steps (agent actions) before the episode is truncated.
        user: User simulator (default: the domain's, :attr:`Domain.user`, else
            :class:`ScriptedUser`).
        render_mode: None or ``"ansi"``.
        max_action_chars: Longer actions are rejected with an error observation.
        gold_cache: Where gold replays are cached (default: process-wide).
        prompt: ``"full"``: the domain's policy and every tool (the task as a benchmark
            poses it); ``"brief"``: the domain's brief policy and only the task's own tools
            (:meth:`Domain.brief_tools_for`), for a small model's context. The task, the
            user and the reward are the same.
    """

    # gymnasium types metadata as an instance attribute; it is class-level data here.
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 4}  # type: ignore[misc]
    reading_rule: ClassVar[ReadingRule] = LENIENT_READING
    """How an action is split into text and calls (:class:`rods_env.parsing.ReadingRule`):
    rods' own domains read every form, bare JSON calls included."""

    def __init__(
        self,
        domain: Domain | str = "retail",
        *,
        tasks: Sequence[Task] | str | Path | None = None,
        split: str | None = "train",
        max_steps: int = 40,
        user: UserSimulator | None = None,
        render_mode: str | None = None,
        max_action_chars: int = MAX_TEXT_CHARS,
        gold_cache: GoldCache | None = None,
        prompt: str = "full",
    ) -> None:
        if isinstance(domain, str):
            from rods_env.registry import load_domain

            domain = load_domain(domain)
        if render_mode not in (None, "ansi"):
            raise ConfigError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if max_steps < 1:
            raise ConfigError(f"max_steps must be at least 1, got {max_steps}")
        if prompt not in PROMPTS:
            raise ConfigError(f"prompt must be one of {', '.join(PROMPTS)}, got {prompt!r}")
        if prompt == "brief" and domain.brief_policy is None:
            raise ConfigError(f"domain {domain.name} has no brief prompt (Domain.brief_policy)")
        self.prompt = prompt
        self.domain = domain
        self.render_mode = render_mode
        self.max_steps = int(max_steps)
        self.max_action_chars = int(max_action_chars)
        if user is None:
            user = domain.user() if domain.user is not None else ScriptedUser()
        self.user: UserSimulator = user
        self.observation_space = UnicodeText(MAX_TEXT_CHARS)
        self.action_space = UnicodeText(max_action_chars)
        self._gold_cache = gold_cache or GOLD_CACHE

        if tasks is None or (isinstance(tasks, str) and tasks == "seeds"):
            pool = domain.seed_tasks()
        elif isinstance(tasks, (str, Path)):
            pool = load_tasks(tasks)
        else:
            pool = list(tasks)
        if split is not None and split not in ("train", "test"):
            raise ConfigError(f"split must be 'train', 'test' or None, got {split!r}")
        pool = [t for t in pool if t.domain == domain.name]  # a pool file may mix domains
        self._all_tasks = pool
        self._pool = [t for t in pool if split is None or t.split == split or t.split is None]
        self._by_id = {t.id: t for t in domain.seed_tasks()}
        self._by_id.update({t.id: t for t in pool})
        self._all_tool_names = frozenset(domain.toolkit.names())
        self._schemas_all = FrozenList(domain.toolkit.schemas())
        self._task_tools = self._all_tool_names
        self._policy = domain.brief_policy if prompt == "brief" else domain.policy
        self._count_results = domain.rules.results != "off"
        self._per_turn_results = domain.rules.results == "turn"
        self._results_seen: Counter[str] = Counter()

        self._db: Database | None = None
        self._tools: Any = None
        self._task: Task | None = None
        self._gold: Gold | None = None
        self._messages: list[dict[str, Any]] = []
        self._seen = SeenValues()
        self._over = True

    # -- properties ------------------------------------------------------------------------
    @property
    def db(self) -> Database:
        """The episode's database state (read it, do not write it)."""
        if self._db is None:
            raise RodsError("call reset() first")
        return self._db

    @property
    def task(self) -> Task:
        """The current task."""
        if self._task is None:
            raise RodsError("call reset() first")
        return self._task

    @property
    def gold(self) -> Gold:
        """The gold trajectory of the current task."""
        if self._gold is None:
            raise RodsError("call reset() first")
        return self._gold

    @property
    def tasks(self) -> list[Task]:
        """The tasks ``reset`` samples from."""
        return list(self._pool)

    # -- gymnasium API ---------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode.

        Args:
            seed: Re-seeds the task sampler when given.
            options: ``{"task": Task or task id}`` picks the task; ``{"split": "test"}``
                samples from that split of the pool.

        Returns:
            The user's first message and the info dict (``tools``, ``policy``,
            ``messages``, ``task_id`` and the reward fields).
        """
        super().reset(seed=seed)
        options = options or {}
        task = self._pick_task(options)
        gold = self._gold_cache.get(self.domain, task)
        base = self.domain.base(task.db_seed, task.db_size)
        if self._db is None or self._db.base is not base:
            self._db = Database(base)
            self._tools = self.domain.toolkit(self._db)
        else:
            self._db.reset()
        self._tools.on_reset()
        self._task, self._gold = task, gold
        self._steps = 0
        self._results: list[TurnResult] = []
        self._result_dicts: list[dict[str, Any]] = []
        self._progress = 0.0
        self._success = False
        self._termination: str | None = None
        self._over = False
        self._seen = SeenValues()
        self._results_seen = Counter()
        if self.prompt == "brief":
            self._task_tools = self.domain.brief_tools_for(task)
        elif self.domain.task_tools is None:
            self._task_tools = self._all_tool_names
        else:
            self._task_tools = self.domain.tools_for(task)
        first = clip_text(self.user.start(task), MAX_TEXT_CHARS)
        # a domain without a policy sends no system prompt (BFCL's function-calling mode)
        system = [FrozenDict(role="system", content=self._policy)] if self._policy else []
        self._messages = [*system, FrozenDict(role="user", content=first)]
        self._open_turn(0)
        self._turn_customer.append(first)
        return first, self._info([])

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply the agent's action.

        Args:
            action: Raw completion text or an OpenAI-style assistant message dict.

        Returns:
            ``(observation, reward, terminated, truncated, info)``. ``terminated``: the
            conversation ended (user done or a terminal tool); ``truncated``: the step limit
            was reached first.
        """
        if self._task is None:
            raise RodsError("call reset() before step()")
        if self._over:
            raise RodsError("the episode is over: call reset() to start another")
        self._steps += 1
        before = self._progress
        parsed = parse_action(action, self.max_action_chars, self.reading_rule)

        call_log: list[dict[str, Any]] = []
        if parsed.error:
            obs = clip_text(f"Error: {parsed.error}", MAX_ERROR_CHARS, "error")
            self._messages.append(FrozenDict(role="assistant", content=_clip(_visible(action))))
            self._messages.append(FrozenDict(role="system", content=obs))
        elif parsed.calls:
            obs = self._run_calls(parsed, call_log)
        else:
            obs = self._talk(parsed.content)

        truncated = False
        if not self._over and self._steps >= self.max_steps:
            self._finish("max_steps")
            truncated = True
        terminated = self._over and not truncated
        reward = self._progress - before
        return clip_text(obs, MAX_TEXT_CHARS), reward, terminated, truncated, self._info(call_log)

    def truncate(self, reason: str = "truncated") -> dict[str, Any]:
        """End the episode now, scored exactly as when the step limit cuts it.

        A caller that stops an episode by a limit of its own (a rollout's turn or token
        budget) calls this, so the same point of a conversation gets the same reward
        whichever limit was hit: the open turn is evaluated on the state and the messages
        so far, and the turns not reached fail.

        Args:
            reason: Recorded as ``info["termination"]`` (e.g. ``"max_tokens"``).

        Returns:
            The final info dict (``progress``, ``success``, ``turn_results``, ...).
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

    # -- internals -------------------------------------------------------------------------
    def _pick_task(self, options: dict[str, Any]) -> Task:
        choice = options.get("task")
        if isinstance(choice, Task):
            if choice.domain != self.domain.name:
                raise ConfigError(
                    f"task '{choice.id}' belongs to domain '{choice.domain}', "
                    f"not to this {self.domain.name} environment"
                )
            return choice
        if isinstance(choice, str):
            try:
                return self._by_id[choice]
            except KeyError:
                raise ConfigError(
                    f"unknown task id '{choice}' for domain {self.domain.name}"
                ) from None
        if choice is not None:
            raise ConfigError(
                f"options['task'] must be a Task or a task id, got {type(choice).__name__}"
            )
        split = options.get("split")
        pool = self._pool if split is None else [t for t in self._all_tasks if t.split == split]
        if not pool:
            raise ConfigError(
                f"no tasks to sample for domain {self.domain.name}"
                + (f" split {split!r}" if split else "")
                + ": pass options={'task': ...} or a task pool"
            )
        return pool[int(self.np_random.integers(len(pool)))]

    def _open_turn(self, index: int) -> None:
        assert self._task is not None and self._db is not None
        self._turn = index
        self._turn_message = len(self._messages) - 1  # the user message that opens it
        self._turn_start = self._db.checkpoint()
        if self._per_turn_results:
            self._results_seen = Counter()
        self._turn_text: list[str] = []
        self._turn_customer: list[str] = []
        self._said_memo: tuple[tuple[int, ...], OutputCheck] | None = None
        withheld = self._task.turns[index].withheld_tools
        if withheld or self._task_tools is not self._all_tool_names:
            self._available = self._task_tools - set(withheld)
            self._schemas = FrozenList(self.domain.toolkit.schemas(self._available))
        else:
            self._available = self._all_tool_names
            self._schemas = self._schemas_all

    def _speech(self) -> Speech:
        return Speech(
            agent="\n".join(self._turn_text),
            customer="\n".join(self._turn_customer),
            seen=self._seen,
        )

    def _said(self) -> OutputCheck:
        """The output rules on the open turn, memoized on what they read (the user's view
        and the turn's end usually ask about the same messages)."""
        assert self._gold is not None
        key = (self._turn, len(self._turn_text), len(self._turn_customer), self._seen.count)
        if self._said_memo is None or self._said_memo[0] != key:
            self._said_memo = (key, check_outputs(self._gold.turns[self._turn], self._speech()))
        return self._said_memo[1]

    def _close_turn(self) -> None:
        assert self._gold is not None and self._db is not None
        result = evaluate_turn(
            self._turn,
            self._gold.turns[self._turn],
            self._db,
            self._turn_start,
            self._speech(),
            said=self._said(),
            results=self._results_seen,
        )
        self._record(result, self._turn_message)

    def _record(self, result: TurnResult, message: int | None = None) -> None:
        """Keep a turn's result; ``message`` is the index of the message that opened the
        turn (None for a turn never reached), so a reader can split the transcript by turn."""
        assert self._task is not None
        self._results.append(result)
        self._result_dicts.append({**result.to_dict(), "message": message})
        self._progress = progress(self._results, len(self._task.turns))

    def _finish(self, reason: str) -> None:
        assert self._task is not None and self._gold is not None and self._db is not None
        if len(self._results) == self._turn:
            self._close_turn()
        for i in range(len(self._results), len(self._task.turns)):
            self._record(TurnResult.not_reached(i, self._gold.turns[i]))
        self._success = success(self._gold, self._db, self._results)
        self._termination = reason
        self._over = True

    def _view(self) -> TurnView:
        assert self._task is not None and self._gold is not None and self._db is not None
        tg = self._gold.turns[self._turn]
        present = effect_present(tg, self._db)
        said = self._said()
        return TurnView(
            task=self._task,
            turn=self._turn,
            goal_reached=present and said.ok,
            effect_present=present,
            needs_write=bool(tg.effect),
            missing_outputs=said.missing,
        )

    def _talk(self, content: str) -> str:
        assert self._task is not None
        self._messages.append(FrozenDict(role="assistant", content=content))
        self._turn_text.append(content)
        reply = self.user.reply(content, self._view())
        text = clip_text(reply.text, MAX_TEXT_CHARS)
        if text or not reply.stop:  # a user who leaves without a word adds no message
            self._messages.append(FrozenDict(role="user", content=text))
        if reply.advance or reply.stop:
            self._close_turn()
            if reply.stop or self._turn + 1 >= len(self._task.turns):
                self._finish("user_stop")
            else:
                self._open_turn(self._turn + 1)
        self._turn_customer.append(text)
        return text

    def _run_calls(self, parsed: ParsedAction, log: list[dict[str, Any]]) -> str:
        tool_calls = []
        for k, call in enumerate(parsed.calls):
            args = call.arguments if call.arguments is not None else {}
            function = FrozenDict(name=call.name or "?", arguments=_ARGS_JSON.encode(args))
            tool_calls.append(
                FrozenDict(id=f"call_{self._steps}_{k}", type="function", function=function)
            )
        self._messages.append(
            FrozenDict(
                role="assistant", content=parsed.content or None, tool_calls=FrozenList(tool_calls)
            )
        )
        if parsed.content:
            self._turn_text.append(parsed.content)
        outputs: list[str] = []
        for call, tc in zip(parsed.calls, tool_calls, strict=True):
            error: str | None
            if call.error is not None:
                out, ok, terminal, error = f"Error: {call.error}", False, False, "ParseError"
            else:
                result = self._tools.call(call.name, call.arguments, available=self._available)
                out, ok, terminal = result.output, result.ok, result.terminal and result.ok
                error = result.error
                if ok:
                    self._seen.add(call.name, out)
                if self._count_results:
                    self._results_seen[out] += 1
            log.append({"name": call.name, "ok": ok, "error": error})
            self._messages.append(
                FrozenDict(role="tool", tool_call_id=tc["id"], name=call.name or "?", content=out)
            )
            outputs.append(out)
            if terminal:
                self._finish("terminal_tool")
                break
        if len(outputs) == 1:
            return outputs[0]
        return "\n".join(
            f"[{c.name or '?'}] {o}" for c, o in zip(parsed.calls, outputs, strict=False)
        )

    def _info(self, call_log: list[dict[str, Any]]) -> dict[str, Any]:
        assert self._task is not None
        return {
            "task_id": self._task.id,
            "turn": self._turn,
            "n_turns": len(self._task.turns),
            "progress": self._progress,
            "success": self._success,
            "turn_results": list(self._result_dicts),
            "termination": self._termination,
            "tool_calls": call_log,
            "messages": list(self._messages),
            "tools": self._schemas,
            "policy": self._policy,
            "steps": self._steps,
        }


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


def render_messages(messages: Sequence[dict[str, Any]]) -> str:
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


def clip_action(action: Any, limit: int = 2000) -> str:
    """What the history keeps of an action that could not be used: its text without its
    ``<think>`` reasoning, bounded (environments other than ToolEnv use it too).

    Args:
        action: The action as the agent gave it (text, a message dict, anything).
        limit: Most characters kept before a note of how many were omitted.
    """
    return _clip(_visible(action), limit)
