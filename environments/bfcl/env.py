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

from collections.abc import Collection, Mapping, Sequence
from functools import cache
from typing import Any, ClassVar, Literal

from environments.bfcl.apis import (
    GOLD_CACHE,
    GoldCache,
    GoldRun,
    World,
    functions,
    functions_of,
    schemas,
)
from environments.bfcl.hints import bfcl_hints
from environments.bfcl.reading import Reading, reader
from environments.bfcl.tasks import (
    CATEGORIES,
    MAX_STEPS_PER_TURN,
    BFCLTask,
    bfcl_task,
    load_tasks,
    reveal_message,
    task_index,
)
from environments.bfcl.verdicts import VERDICTS, Judge, explain
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
    started,
)
from rods_env.errors import ConfigError, RodsError
from rods_env.hints import Hint
from rods_env.parsing import ParsedAction, ParsedCall
from rods_env.spaces import MAX_TEXT_CHARS
from rods_env.task import Task
from rods_env.tools import FrozenDict

Holdout = Literal["bfcl", "strict"]
VerdictName = Literal["official", "strict"]


@cache
def _turn_tools(classes: tuple[str, ...], hidden: frozenset[str]) -> tuple[frozenset[str], Any]:
    """The visible function names and their schemas (shared, read-only) for a set of classes
    with some functions still hidden."""
    names = tuple(n for n in functions_of(classes) if n not in hidden)
    return frozenset(names), schemas(names)


class BFCLEnv(EpisodeEnv):
    """BFCL multi-turn tasks with BFCL's turn flow and BFCL's verdicts (see the module doc).

    Args:
        category: Sample tasks of this category (``base``, ``miss_param``, ``miss_func``,
            ``long_context``); None samples from all 800.
        tasks: The tasks to sample from instead: BFCL tasks (taken as they are), or rods
            views of BFCL's tasks or of resampled variants (run from their payload; views
            of other tasks are left out).
        split: ``"train"`` or ``"test"``: that half of the paper's split
            (:mod:`environments.bfcl.split`); ``"all"`` or None: every task.
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
        actionable_hints: Append actionable hints to a failed call's observation
            (:mod:`rods_env.hints`, :mod:`environments.bfcl.hints`); the results the
            checker compares stay BFCL's. Off by default, never used in evaluation.
    """

    max_turn_steps: ClassVar[int | None] = MAX_STEPS_PER_TURN
    """BFCL's ``MAXIMUM_STEP_LIMIT``: the 21st tool-calling step of a turn ends the
    conversation."""

    def __init__(
        self,
        category: str | None = None,
        *,
        tasks: Sequence[BFCLTask | Task] | None = None,
        split: str | None = None,
        max_steps: int | None = None,
        holdout: Holdout = "bfcl",
        verdicts: VerdictName = "official",
        render_mode: str | None = None,
        max_action_chars: int = MAX_TEXT_CHARS,
        gold_cache: GoldCache | None = None,
        user: Any = None,
        actionable_hints: bool = False,
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
        if split not in (None, "all", "train", "test"):
            raise ConfigError(f"unknown BFCL split '{split}'; splits: train, test, all")
        if tasks is None:
            pool = load_tasks(category)
        else:
            index = task_index()
            pool = [
                bfcl_task(t)
                for t in tasks
                if isinstance(t, BFCLTask) or t.payload is not None or t.id in index
            ]
        super().__init__(
            render_mode=render_mode,
            max_steps=max_steps,
            max_action_chars=max_action_chars,
            actionable_hints=actionable_hints,
            tasks=pool,
            split=None if split == "all" else split,
        )
        self.category = category
        self.holdout: Holdout = holdout
        self.verdicts: VerdictName = verdicts
        self.max_steps = max_steps
        if not self._pool and tasks is None:
            raise ConfigError("no BFCL tasks to sample from")
        self._gold_cache = gold_cache or GOLD_CACHE
        self._judges: dict[str, Judge] = {}

    # -- properties ------------------------------------------------------------------------
    @property
    def task(self) -> BFCLTask:
        """The current task."""
        return started(self._task)

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
    def results(self) -> list[str]:
        """The result texts of the agent's calls so far, in order (what the response check
        searches)."""
        return list(self._call_results)

    # -- tasks -----------------------------------------------------------------------------
    def _pool_name(self) -> str:
        return "BFCL"

    def _resolve_task(self, choice: Any) -> BFCLTask:
        if isinstance(choice, BFCLTask) or (isinstance(choice, Task) and choice.payload):
            return bfcl_task(choice)
        if isinstance(choice, Task):
            choice = choice.id
        if isinstance(choice, str):
            return self._task_by_id(choice)
        raise ConfigError(
            f"options['task'] must be a BFCL task or a task id, got {type(choice).__name__}"
        )

    def _unknown_task(self, task_id: str) -> BFCLTask:
        return bfcl_task(task_id)

    @property
    def _limit(self) -> int:
        return self._step_limit

    # -- opening ---------------------------------------------------------------------------
    def _open(self, task: BFCLTask) -> Opening:
        # every episode judges with fresh worlds: nothing outlives it but immutable gold
        self._judges = {
            name: Judge(task, quirks, self._gold_cache) for name, quirks in VERDICTS.items()
        }
        self._reader = reader(task.id, task.classes)
        self._step_limit = self.max_steps or len(task.turns) * (MAX_STEPS_PER_TURN + 1)
        self._call_results: list[str] = []
        self._readings: list[list[Reading]] = []
        self._allowed_by_turn: list[frozenset[str]] = []
        self._successes = dict.fromkeys(VERDICTS, False)
        self._differences: list[dict[str, Any]] = []
        return Opening("", n_turns=len(task.turns))  # no system prompt: turn 0 opens it

    def _begin_turn(self, index: int) -> TurnOpening:
        task = self._task
        self._turn_called = False
        self._turn_calls: list[list[dict[str, Any]]] = []
        self._readings.append([])
        hidden = frozenset(
            name for at, names in task.revealed.items() if at > index for name in names
        )
        visible, tools = _turn_tools(task.classes, hidden)
        self._allowed = visible | hidden if self.holdout == "bfcl" else visible
        self._allowed_by_turn.append(self._allowed)
        messages = task.turns[index]
        if not messages:
            content = reveal_message(task.revealed[index]) if index in task.revealed else ""
            messages = (FrozenDict(role="user", content=content),)
        return TurnOpening(
            tools, messages, "\n".join(str(m.get("content") or "") for m in messages)
        )

    # -- calls -----------------------------------------------------------------------------
    def _calls_begin(self, parsed: ParsedAction, ids: Sequence[str]) -> Reply | None:
        self._decoded: list[dict[str, Any]] = []
        return None

    def _call(self, call: ParsedCall, call_id: str) -> CallReply:
        assert call.arguments is not None
        reading = self._reader.read(call.name, call.arguments)
        results = {name: j.run(reading, self._allowed) for name, j in self._judges.items()}
        result = results["strict"]  # the agent sees the world as it is
        self._call_results.append(result.text)
        self._readings[-1].append(reading)
        self._turn_called = True
        self._decoded.append(
            {"name": reading.function or call.name, "arguments": dict(reading.arguments)}
        )
        return CallReply(result.text, result.error is None, result.error)

    def _hint_name(self, call: ParsedCall) -> str:
        return self._readings[-1][-1].function or call.name  # as _call just read it

    def _withheld(self) -> Collection[str]:
        return [n for at, names in self._task.revealed.items() if at > self._turn for n in names]

    def _state_hints(self, name: str, call: ParsedCall, reply: CallReply) -> list[Hint]:
        function = functions().get(name)
        owner = function.owner if function is not None else None
        shown = _turn_tools(self._task.classes, frozenset(self._withheld()))[0]
        return bfcl_hints(name, call.arguments or {}, reply.output, shown, owner)

    def _calls_end(self, ran: int) -> str | None:
        if self._decoded:
            self._turn_calls.append(self._decoded)
        return None

    # -- the user: BFCL's next turn --------------------------------------------------------
    def _hear(self, content: str) -> Reply:
        return Reply("", next_turn=True)

    # -- scoring ---------------------------------------------------------------------------
    def _close_turn(self, ending: str | None) -> TurnScore:
        """Every judge checks the turn; the turn result is the chosen verdicts' judge's."""
        checks = {name: j.close(self._turn, self._turn_called) for name, j in self._judges.items()}
        row = {
            "reached": True,
            "called": self._turn_called,
            "calls": self._turn_calls,
            "failures": [],
            **checks[self.verdicts],
        }
        return TurnScore(row, self._judges[self.verdicts].progress)

    def _unreached(self, index: int) -> Mapping[str, Any]:
        gold = self._judge("strict").gold
        return {
            "checked": gold.turns[index].checked,
            "reached": False,
            "called": False,
            "calls": [],
        }

    def _score(self, reason: str) -> Outcome:
        task = self._task
        # BFCL's verdict: every turn reached (a conversation cut in its last turn still
        # counts them all, as in BFCL) and every checked turn passed.
        reached_all = self._turn == len(task.turns) - 1
        for name, judge in self._judges.items():
            self._successes[name] = reached_all and all(t["passed"] for t in judge.turns)
        passes = {name: [bool(t["passed"]) for t in j.turns] for name, j in self._judges.items()}
        self._differences = explain(
            task,
            self._readings,
            self._allowed_by_turn,
            passes["official"],
            passes["strict"],
            self._gold_cache,
        )
        chosen = self.verdicts
        return Outcome(self._successes[chosen], self._judges[chosen].progress)

    def _verdicts(self) -> Verdicts:
        return Verdicts(
            {
                name: Judgement(
                    self._successes[name], judge.progress, [bool(t["passed"]) for t in judge.turns]
                )
                for name, judge in self._judges.items()
            },
            self._differences,
        )

    def _extra_info(self) -> dict[str, Any]:
        return {"category": self._task.category}
