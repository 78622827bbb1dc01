"""BFCLEnv: BFCL multi-turn as a Gymnasium environment, scored by BFCL's own checker.

The conversation follows BFCL's multi-turn inference in function-calling mode. The first
observation is the first user turn; the tools are the OpenAI schemas of the involved
classes' functions (``info["tools"]``), as BFCL sends them. An action is completion text
(``<tool_call>{json}</tool_call>`` blocks or bare JSON) or an OpenAI-style assistant message
dict. Tool calls run at once, and their results (BFCL's result texts) are the next
observation. A reply without tool calls ends the turn; the next user turn is the next
observation, and after the last turn the episode terminates. In ``miss_func`` tasks the
held-out functions enter ``info["tools"]`` at the turn where BFCL reveals them, whose user
message is BFCL's :data:`~environments.bfcl.tasks.REVEAL_MESSAGE` after the new functions'
schemas (:func:`~environments.bfcl.tasks.reveal_message`: an engine that keeps one token
sequence renders the tool list only once). There is no system prompt.

**Reading.** Each call is read as BFCL's decoder and executor read it
(:mod:`environments.bfcl.reading`): whitespace around a function name and around argument
names is skipped as BFCL's reading skips it, argument names are NFKC-normalised; a name
BFCL would not call (a case slip, a prefix, an unknown name) is an undefined name.

**Reward: BFCL's checker, turn by turn** (:mod:`environments.bfcl.verdicts`). When a turn
with gold calls ends it is checked as BFCL checks it: the agent made at least one call in
the turn; every public attribute of each involved instance equals the gold instances'
after the turn's gold calls (the state check); and each gold result of the turn appears
among the agent's results so far, with multiplicity (the response check). A turn whose
gold is empty is not checked (the agent should ask for a missing value or say a function
is missing); what it changes there shows in the next checked turn. ``progress`` is the
share of checked turns passed; ``success`` is BFCL's verdict: every turn reached and every
checked turn passed. A step's reward is the increase of progress, so an episode's rewards
sum to its final progress.

**Two verdicts.** BFCL's checker lets the model's instances share objects with the gold's
(long-context credit cards, ``post_tweet``'s default lists) and rewrites argument text, so
it passes some wrong trajectories. Every episode is judged twice, on fresh worlds of its
own: ``"official"`` reproduces those quirks within the episode (BFCL's verdicts, the
leaderboard's), ``"strict"`` does not (the correct verdicts). ``verdicts=`` picks the one
that makes the reward, ``progress``, ``success`` and ``turn_results`` (default
``"official"``); ``info["verdicts"]`` holds both (``{"official": {"success", "progress",
"turns"}, "strict": {...}, "differences": [...]}``, the differences, with the quirk that
caused each, once the episode ends). What the agent sees comes from the strict world (the
APIs as they are).

**Limits.** As in BFCL, the 21st tool-calling step in one turn ends the conversation (BFCL's
``MAXIMUM_STEP_LIMIT`` is 20; ``truncated``, termination ``max_steps``); so does
``max_steps`` over the whole episode when given, and a rollout's own caps through
:meth:`BFCLEnv.truncate`. The open turn is checked as it stands and the turns not reached
fail, and so does the task, unless the cut came in the last turn (BFCL then still has a
response for every turn and checks them all).

**Per-turn results** (``info["turn_results"]``, one dict per turn once it ends): ``turn``,
``checked``, ``passed`` (True for a turn BFCL does not check, once reached), ``reached``,
``called`` (a call was made), ``calls`` (per step, the calls as read: ``{"name",
"arguments"}``, what BFCL's checker would receive), ``message`` (the index of the message
that opened the turn), ``failures`` (``{"rule", "values", "text"}`` per broken rule:
``no_call``, ``state_mismatch``, ``missing_result``, ``not_reached``), and for a checked
turn ``state_ok``, ``state_diff`` (class to differing attributes) and ``missing_results``
(gold result texts not found, cut to 200 characters).

**Where rods differs from BFCL's inference loop** (none of it changes a verdict of BFCL's
checker on the same calls): an action that cannot be parsed at all, or a call whose JSON
cannot be read, is an error observation and the turn goes on (BFCL's handlers drop such
calls silently, or end the turn); such steps count towards the per-turn limit. Calls are
dispatched by name among the allowed functions, never evaluated (see
:mod:`environments.bfcl.apis`). By default (``holdout="bfcl"``) a held-out function still
runs when called before its reveal, as BFCL's executor runs it (``multi_turn_miss_func_49``'s
own gold calls ``tail`` before revealing it); ``holdout="strict"`` makes it an unknown
function until revealed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from typing import Any, ClassVar, Literal

import gymnasium as gym

from environments.bfcl.apis import GOLD_CACHE, GoldCache, GoldRun, World, functions_of, schemas
from environments.bfcl.reading import Reading, reader
from environments.bfcl.tasks import (
    CATEGORIES,
    MAX_STEPS_PER_TURN,
    BFCLTask,
    get_task,
    load_tasks,
    reveal_message,
    task_index,
)
from environments.bfcl.verdicts import VERDICTS, Judge, explain, failure
from rods_env.env import clip_action, render_messages
from rods_env.errors import ConfigError, RodsError
from rods_env.parsing import ParsedAction, parse_action
from rods_env.spaces import MAX_TEXT_CHARS, UnicodeText
from rods_env.task import Task
from rods_env.tools import MAX_ERROR_CHARS, FrozenDict, FrozenList, clip_text

Holdout = Literal["bfcl", "strict"]
Verdicts = Literal["official", "strict"]

_ARGS_JSON = json.JSONEncoder(ensure_ascii=False)


@cache
def _turn_tools(classes: tuple[str, ...], hidden: frozenset[str]) -> tuple[frozenset[str], Any]:
    """The visible function names and their schemas (shared, read-only) for a set of classes
    with some functions still hidden."""
    names = tuple(n for n in functions_of(classes) if n not in hidden)
    return frozenset(names), schemas(names)


class BFCLEnv(gym.Env[str, str]):
    """BFCL multi-turn tasks with BFCL's turn flow and BFCL's verdicts (see the module doc).

    Args:
        category: Sample tasks of this category (``base``, ``miss_param``, ``miss_func``,
            ``long_context``); None samples from all 800.
        tasks: The tasks to sample from instead: BFCL tasks (taken as they are), or rods
            views of BFCL's tasks (views of other tasks are left out).
        split: ``"test"``, ``"all"`` or None (every BFCL task is a test task; ``"train"``
            is refused).
        max_steps: Agent steps before the episode is truncated; None allows every turn
            BFCL's full budget of steps.
        holdout: ``"bfcl"``: a held-out function runs when called before its reveal, as in
            BFCL; ``"strict"``: it is unknown until revealed.
        verdicts: Which verdicts make the reward, ``progress`` and ``success``:
            ``"official"``, BFCL's checker's own, quirks included (the leaderboard's
            numbers); ``"strict"``, the correct ones (:mod:`environments.bfcl.verdicts`).
            Both are in ``info["verdicts"]`` either way.
        render_mode: None or ``"ansi"``.
        max_action_chars: Longer actions are rejected with an error observation.
        gold_cache: Where gold replays are kept (default: process-wide).
        user: Must be None: BFCL's user turns are scripted by the benchmark.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 4}  # type: ignore[misc]

    def __init__(
        self,
        category: str | None = None,
        *,
        tasks: Sequence[BFCLTask | Task] | None = None,
        split: str | None = None,
        max_steps: int | None = None,
        holdout: Holdout = "bfcl",
        verdicts: Verdicts = "official",
        render_mode: str | None = None,
        max_action_chars: int = MAX_TEXT_CHARS,
        gold_cache: GoldCache | None = None,
        user: Any = None,
    ) -> None:
        if user is not None:
            raise ConfigError(
                "BFCL's user turns are scripted by the benchmark: a user simulator does not apply"
            )
        if category is not None and category not in CATEGORIES:
            raise ConfigError(
                f"unknown BFCL category '{category}'; categories: {', '.join(CATEGORIES)}"
            )
        if holdout not in ("bfcl", "strict"):
            raise ConfigError(f"holdout must be 'bfcl' or 'strict', got {holdout!r}")
        if verdicts not in VERDICTS:
            raise ConfigError(f"verdicts must be 'official' or 'strict', got {verdicts!r}")
        if render_mode not in (None, "ansi"):
            raise ConfigError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if max_steps is not None and max_steps < 1:
            raise ConfigError(f"max_steps must be at least 1, got {max_steps}")
        self.category = category
        self.holdout: Holdout = holdout
        self.verdicts: Verdicts = verdicts
        self.render_mode = render_mode
        self.max_steps = max_steps
        self.max_action_chars = int(max_action_chars)
        self.observation_space = UnicodeText(MAX_TEXT_CHARS)
        self.action_space = UnicodeText(max_action_chars)
        pool = load_tasks(category, split)
        if tasks is not None:
            index = task_index()
            pool = [
                t if isinstance(t, BFCLTask) else index[t.id]
                for t in tasks
                if isinstance(t, BFCLTask) or t.id in index
            ]
        self._pool = pool
        if not self._pool and tasks is None:
            raise ConfigError("no BFCL tasks to sample from")
        self._by_id = {t.id: t for t in self._pool}
        self._gold_cache = gold_cache or GOLD_CACHE
        self._task: BFCLTask | None = None
        self._judges: dict[str, Judge] = {}
        self._messages: list[FrozenDict] = []
        self._over = True

    # -- properties ------------------------------------------------------------------------
    @property
    def task(self) -> BFCLTask:
        """The current task."""
        if self._task is None:
            raise RodsError("call reset() first")
        return self._task

    @property
    def gold(self) -> GoldRun:
        """The gold replay of the current task (the ground truth as sent, no quirk)."""
        return self._judge("strict").gold

    @property
    def world(self) -> World:
        """The episode's API instances, the ones the agent's calls change and its
        observations come from (read them, do not change them)."""
        return self._judge("strict").world

    def _judge(self, name: str) -> Judge:
        if not self._judges:
            raise RodsError("call reset() first")
        return self._judges[name]

    @property
    def tasks(self) -> list[BFCLTask]:
        """The tasks ``reset`` samples from."""
        return list(self._pool)

    @property
    def results(self) -> list[str]:
        """The result texts of the agent's calls so far, in order (what the response check
        searches)."""
        return list(self._results)

    # -- gymnasium API ---------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode.

        Args:
            seed: Re-seeds the task sampler when given.
            options: ``{"task": a BFCL task, its rods view or its id}`` picks the task (any
                BFCL task, in the pool or not).

        Returns:
            The first user turn and the info dict.
        """
        super().reset(seed=seed)
        task = self._pick((options or {}).get("task"))
        # every episode judges with fresh worlds: nothing outlives it but immutable gold
        self._judges = {
            name: Judge(task, quirks, self._gold_cache) for name, quirks in VERDICTS.items()
        }
        self._reader = reader(task.id, task.classes)
        self._task = task
        self._limit = self.max_steps or len(task.turns) * (MAX_STEPS_PER_TURN + 1)
        self._steps = 0
        self._results: list[str] = []
        self._readings: list[list[Reading]] = []
        self._allowed_by_turn: list[frozenset[str]] = []
        self._turn_results: list[dict[str, Any]] = []
        self._successes = dict.fromkeys(VERDICTS, False)
        self._differences: list[dict[str, Any]] = []
        self._progress = 0.0
        self._success = False
        self._termination: str | None = None
        self._over = False
        self._messages = []
        first = self._open_turn(0)
        return first, self._info([])

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply the agent's action.

        Args:
            action: Completion text or an OpenAI-style assistant message dict.

        Returns:
            ``(observation, reward, terminated, truncated, info)``: ``terminated`` when the
            last turn ended; ``truncated`` when a step limit cut the conversation.
        """
        if self._task is None:
            raise RodsError("call reset() before step()")
        if self._over:
            raise RodsError("the episode is over: call reset() to start another")
        self._steps += 1
        before = self._progress
        parsed = parse_action(action, self.max_action_chars)
        call_log: list[dict[str, Any]] = []
        truncated = False
        if parsed.error or parsed.calls:
            if parsed.error:
                obs = clip_text(f"Error: {parsed.error}", MAX_ERROR_CHARS, "error")
                self._messages.append(FrozenDict(role="assistant", content=clip_action(action)))
                self._messages.append(FrozenDict(role="system", content=obs))
            else:
                obs = self._run_calls(parsed, call_log)
            self._turn_steps += 1
            if self._turn_steps > MAX_STEPS_PER_TURN:
                self._finish("max_steps")
                truncated = True
        else:
            obs = self._end_turn(parsed.content)
        if not self._over and self._steps >= self._limit:
            self._finish("max_steps")
            truncated = True
        terminated = self._over and not truncated
        reward = self._progress - before
        return clip_text(obs, MAX_TEXT_CHARS), reward, terminated, truncated, self._info(call_log)

    def truncate(self, reason: str = "truncated") -> dict[str, Any]:
        """End the episode now, scored as when a step limit cuts it (the open turn is
        checked on the state so far; later turns fail, and so does the task).

        Args:
            reason: Recorded as ``info["termination"]``.

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

    # -- internals -------------------------------------------------------------------------
    def _pick(self, choice: Any) -> BFCLTask:
        if isinstance(choice, BFCLTask):
            return choice
        if isinstance(choice, Task):
            choice = choice.id
        if isinstance(choice, str):
            return self._by_id.get(choice) or get_task(choice)
        if choice is not None:
            raise ConfigError(
                f"options['task'] must be a BFCL task or a task id, got {type(choice).__name__}"
            )
        if not self._pool:
            raise ConfigError("no BFCL tasks to sample: pass options={'task': ...}")
        return self._pool[int(self.np_random.integers(len(self._pool)))]

    def _open_turn(self, index: int) -> str:
        task = self._task
        assert task is not None
        self._turn = index
        self._turn_steps = 0
        self._turn_called = False
        self._turn_calls: list[list[dict[str, Any]]] = []
        self._readings.append([])
        hidden = frozenset(
            name for at, names in task.revealed.items() if at > index for name in names
        )
        visible, self._schemas = _turn_tools(task.classes, hidden)
        self._allowed = visible | hidden if self.holdout == "bfcl" else visible
        self._allowed_by_turn.append(self._allowed)
        self._turn_message = len(self._messages)  # the (first) user message that opens it
        messages = task.turns[index]
        if not messages:
            content = reveal_message(task.revealed[index]) if index in task.revealed else ""
            messages = (FrozenDict(role="user", content=content),)
        for message in messages:
            self._messages.append(
                message if isinstance(message, FrozenDict) else FrozenDict(message)
            )
        return "\n".join(str(m.get("content") or "") for m in messages)

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
        outputs: list[str] = []
        decoded: list[dict[str, Any]] = []
        for call, tc in zip(parsed.calls, tool_calls, strict=True):
            if call.error is not None or call.arguments is None:
                out = f"Error: {call.error}"
                log.append({"name": call.name, "ok": False, "error": "ParseError"})
            else:
                reading = self._reader.read(call.name, call.arguments)
                results = {name: j.run(reading, self._allowed) for name, j in self._judges.items()}
                result = results["strict"]  # the agent sees the world as it is
                out = result.text
                self._results.append(out)
                self._readings[-1].append(reading)
                self._turn_called = True
                decoded.append(
                    {"name": reading.function or call.name, "arguments": dict(reading.arguments)}
                )
                log.append({"name": call.name, "ok": result.error is None, "error": result.error})
            content = clip_text(out, MAX_TEXT_CHARS)
            self._messages.append(
                FrozenDict(
                    role="tool", tool_call_id=tc["id"], name=call.name or "?", content=content
                )
            )
            outputs.append(content)
        if decoded:
            self._turn_calls.append(decoded)
        if len(outputs) == 1:
            return outputs[0]
        return "\n".join(
            f"[{c.name or '?'}] {o}" for c, o in zip(parsed.calls, outputs, strict=True)
        )

    def _end_turn(self, content: str) -> str:
        task = self._task
        assert task is not None
        self._messages.append(FrozenDict(role="assistant", content=content))
        self._close_turn()
        if self._turn + 1 >= len(task.turns):
            self._finish("user_stop")
            return ""
        return self._open_turn(self._turn + 1)

    def _close_turn(self) -> None:
        """Every judge checks the turn; the turn result is the chosen verdicts' judge's."""
        checks = {name: j.close(self._turn, self._turn_called) for name, j in self._judges.items()}
        result: dict[str, Any] = {
            "turn": self._turn,
            "reached": True,
            "called": self._turn_called,
            "calls": self._turn_calls,
            "message": self._turn_message,
            "failures": [],
            **checks[self.verdicts],
        }
        self._progress = self._judges[self.verdicts].progress
        self._turn_results.append(result)

    def _finish(self, reason: str) -> None:
        task = self._task
        assert task is not None
        if len(self._turn_results) == self._turn:
            self._close_turn()
        gold = self._judge("strict").gold
        for t in range(len(self._turn_results), len(task.turns)):
            self._turn_results.append(
                {
                    "turn": t,
                    "checked": gold.turns[t].checked,
                    "passed": False,
                    "reached": False,
                    "called": False,
                    "calls": [],
                    "message": None,
                    "failures": [failure("not_reached")],
                }
            )
        # BFCL's verdict: every turn reached (a conversation cut in its last turn still
        # counts them all, as in BFCL) and every checked turn passed.
        reached_all = self._turn == len(task.turns) - 1
        for name, judge in self._judges.items():
            self._successes[name] = reached_all and all(t["passed"] for t in judge.turns)
        self._success = self._successes[self.verdicts]
        passes = {name: [bool(t["passed"]) for t in j.turns] for name, j in self._judges.items()}
        self._differences = explain(
            task,
            self._readings,
            self._allowed_by_turn,
            passes["official"],
            passes["strict"],
            self._gold_cache,
        )
        self._termination = reason
        self._over = True

    def _info(self, call_log: list[dict[str, Any]]) -> dict[str, Any]:
        task = self._task
        assert task is not None
        return {
            "task_id": task.id,
            "category": task.category,
            "turn": self._turn,
            "n_turns": len(task.turns),
            "progress": self._progress,
            "success": self._success,
            "verdicts": {
                **{
                    name: {
                        "success": self._successes[name],
                        "progress": judge.progress,
                        "turns": [bool(t["passed"]) for t in judge.turns],
                    }
                    for name, judge in self._judges.items()
                },
                "differences": list(self._differences),
            },
            "turn_results": list(self._turn_results),
            "termination": self._termination,
            "tool_calls": call_log,
            "messages": list(self._messages),
            "tools": self._schemas,
            "policy": "",
            "steps": self._steps,
        }
