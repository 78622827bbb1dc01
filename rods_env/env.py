"""ToolEnv: a Gymnasium environment for multi-turn tool use with a simulated user, on a rods
domain (its generated database, its toolkit, rods' turn rewards).

The episode's life (reading an action, running calls, the user's turn, finishing, the info
contract) is :class:`rods_env.episode.EpisodeEnv`'s; this module supplies what an own
domain adds: tasks from the domain's pools, calls through its :class:`~rods_env.tools.Toolkit`
on a copy-on-write :class:`~rods_env.database.Database`, the simulated user
(:class:`~rods_env.user.UserSimulator`) and rods' turn rules (:mod:`rods_env.rewards`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from rods_env.benchmark import BenchmarkDomain
from rods_env.database import Database
from rods_env.domain import Domain
from rods_env.episode import (
    CallReply,
    EpisodeEnv,
    Opening,
    Outcome,
    Reply,
    TurnOpening,
    TurnScore,
    clip_action,
    render_messages,
    started,
    task_pool,
)
from rods_env.errors import ConfigError
from rods_env.gold import GOLD_CACHE, Gold, GoldCache
from rods_env.parsing import LENIENT_READING, ParsedAction, ParsedCall, ReadingRule
from rods_env.registry import load_any_domain, load_domain
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
from rods_env.spaces import MAX_TEXT_CHARS
from rods_env.task import Task, resolve_task
from rods_env.tools import FrozenDict, FrozenList, clip_text
from rods_env.user import DeferredTurnView, ScriptedUser, TurnView, UserSimulator

__all__ = ["PROMPTS", "ToolEnv", "clip_action", "make_env", "render_messages"]

PROMPTS = ("full", "brief")
"""What an own-domain environment shows the agent (``ToolEnv(prompt=...)``)."""


class ToolEnv(EpisodeEnv):
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
        split: Keep only tasks of this split (``"train"``/``"test"``; a task without a
            split is a train task, :mod:`rods_env.splits`); None keeps all.
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
        actionable_hints: Append actionable hints to a failed call's observation
            (:mod:`rods_env.hints`); off by default, never used in evaluation.
    """

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
        actionable_hints: bool = False,
    ) -> None:
        if isinstance(domain, str):
            domain = load_domain(domain)
        super().__init__(
            render_mode=render_mode,
            max_steps=max_steps,
            max_action_chars=max_action_chars,
            actionable_hints=actionable_hints,
            tasks=task_pool(tasks, domain.seed_tasks, domain.name),
            split=split,
            known=domain.seed_tasks(),
        )
        if prompt not in PROMPTS:
            raise ConfigError(f"prompt must be one of {', '.join(PROMPTS)}, got {prompt!r}")
        if prompt == "brief" and domain.brief_policy is None:
            raise ConfigError(f"domain {domain.name} has no brief prompt (Domain.brief_policy)")
        self.prompt = prompt
        self.domain = domain
        self.max_steps = int(max_steps)
        if user is None:
            user = domain.user() if domain.user is not None else ScriptedUser()
        self.user: UserSimulator = user
        self._gold_cache = gold_cache or GOLD_CACHE

        self._all_tool_names = frozenset(domain.toolkit.names())
        self._schemas_all = FrozenList(domain.toolkit.schemas())
        self._task_tools = self._all_tool_names
        self._policy_text = domain.brief_policy if prompt == "brief" else domain.policy
        self._count_results = domain.rules.results != "off"
        self._per_turn_results = domain.rules.results == "turn"
        self._results_seen: Counter[str] = Counter()

        self._db: Database | None = None
        self._tools: Any = None
        self._gold: Gold | None = None
        self._seen = SeenValues()

    # -- properties ------------------------------------------------------------------------
    @property
    def db(self) -> Database:
        """The episode's database state (read it, do not write it)."""
        return started(self._db)

    @property
    def task(self) -> Task:
        """The current task."""
        return started(self._task)

    @property
    def gold(self) -> Gold:
        """The gold trajectory of the current task."""
        return started(self._gold)

    # -- tasks -----------------------------------------------------------------------------
    def _pool_name(self) -> str:
        return f"domain {self.domain.name}"

    def _resolve_task(self, choice: Any) -> Task:
        return resolve_task(choice, self.domain.name, self._task_by_id)

    # -- opening ---------------------------------------------------------------------------
    def _open(self, task: Task) -> Opening:
        domain = self.domain
        self._gold = self._gold_cache.get(domain, task)
        base = domain.base(task.db_seed, task.db_size)
        if self._db is None or self._db.base is not base:
            self._db = Database(base)
            self._tools = domain.toolkit(self._db)
        else:
            self._db.reset()
        self._tools.on_reset()
        self._turn_results_kept: list[TurnResult] = []
        self._seen = SeenValues()
        self._results_seen = Counter()
        if self.prompt == "brief":
            self._task_tools = domain.brief_tools_for(task)
        elif domain.task_tools is None:
            self._task_tools = self._all_tool_names
        else:
            self._task_tools = domain.tools_for(task)
        first = clip_text(self.user.start(task), MAX_TEXT_CHARS)
        self._heard = first  # the customer's words that open turn 0 (_begin_turn)
        # a domain without a policy sends no system prompt (BFCL's function-calling mode)
        system = (
            (FrozenDict(role="system", content=self._policy_text),) if self._policy_text else ()
        )
        return Opening(
            first,
            (*system, FrozenDict(role="user", content=first)),
            policy=self._policy_text or "",
            n_turns=len(task.turns),
        )

    def _begin_turn(self, index: int) -> TurnOpening:
        assert self._task is not None and self._db is not None
        self._turn_start = self._db.checkpoint()
        if self._per_turn_results:
            self._results_seen = Counter()
        self._turn_text: list[str] = []
        self._turn_customer: list[str] = [self._heard]  # the reply that opened the turn
        self._said_memo: tuple[tuple[int, ...], OutputCheck] | None = None
        withheld = self._task.turns[index].withheld_tools
        if withheld or self._task_tools is not self._all_tool_names:
            self._available = self._task_tools - set(withheld)
            return TurnOpening(FrozenList(self.domain.toolkit.schemas(self._available)))
        self._available = self._all_tool_names
        return TurnOpening(self._schemas_all)

    # -- calls -----------------------------------------------------------------------------
    def _calls_begin(self, parsed: ParsedAction, ids: Sequence[str]) -> Reply | None:
        if parsed.content:
            self._turn_text.append(parsed.content)
        return None

    def _call(self, call: ParsedCall, call_id: str) -> CallReply:
        result = self._tools.call(call.name, call.arguments, available=self._available)
        out = result.output
        if result.ok:
            self._seen.add(call.name, out)
        if self._count_results:
            self._results_seen[out] += 1
        end = "terminal_tool" if result.terminal and result.ok else None
        return CallReply(out, result.ok, result.error, end)

    def _withheld(self) -> Collection[str]:
        return self.task.turns[self._turn].withheld_tools

    # -- the user --------------------------------------------------------------------------
    def _hear(self, content: str) -> Reply:
        self._turn_text.append(content)
        reply = self.user.reply(content, self._view())
        text = clip_text(reply.text, MAX_TEXT_CHARS)
        self._heard = text
        if not (reply.advance or reply.stop):
            self._turn_customer.append(text)  # a reply that moves on opens the next turn
        return Reply(
            text,
            # a user who leaves without a word adds no message
            (FrozenDict(role="user", content=text),) if text or not reply.stop else (),
            next_turn=reply.advance,
            end="user_stop" if reply.stop else None,
        )

    def _view(self) -> TurnView:
        """What the user is told of the open turn, judged only where the user reads it."""
        assert self._task is not None and self._gold is not None and self._db is not None
        tg, db = self._gold.turns[self._turn], self._db

        def said() -> tuple[bool, tuple[str, ...]]:
            check = self._said()
            return check.ok, check.missing

        return DeferredTurnView(
            self._task, self._turn, bool(tg.effect), lambda: effect_present(tg, db), said
        )

    # -- scoring ---------------------------------------------------------------------------
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

    def _close_turn(self, ending: str | None) -> TurnScore:
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
        self._turn_results_kept.append(result)
        return TurnScore(result.to_dict(), progress(self._turn_results_kept, self._n_turns))

    def _unreached(self, index: int) -> Mapping[str, Any]:
        assert self._gold is not None
        return TurnResult.not_reached(index, self._gold.turns[index]).to_dict()

    def _score(self, reason: str) -> Outcome:
        assert self._gold is not None and self._db is not None
        # a turn not reached fails: it neither passes nor adds progress
        kept = self._turn_results_kept
        return Outcome(success(self._gold, self._db, kept), progress(kept, self._n_turns))


def make_env(domain: str, **kwargs: Any) -> Any:
    """Gymnasium entry point: the environment of ``domain`` (a :class:`ToolEnv` for a rods
    domain, the benchmark's own for a benchmark domain)."""
    spec = load_any_domain(domain)
    if isinstance(spec, BenchmarkDomain):
        spec.require()
        return spec.make_env(**kwargs)
    return ToolEnv(spec, **kwargs)
