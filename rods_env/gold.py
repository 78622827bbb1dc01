"""Gold replay: run a task's gold calls on a fresh state and record what each turn changes."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from threading import Lock
from typing import TYPE_CHECKING, Any

from rods_env.database import DELETED, changes_fingerprint
from rods_env.errors import RodsError
from rods_env.leaves import record_json
from rods_env.task import Task, Turn

if TYPE_CHECKING:
    from rods_env.domain import Domain
    from rods_env.tools import ToolResult


class GoldError(RodsError):
    """A task's gold calls do not execute cleanly: the task is invalid."""


@dataclass(frozen=True)
class TurnGold:
    """What one turn's gold calls do.

    Attributes:
        effect: ``(table, key) -> record or DELETED`` for every record the turn's gold calls
            change, with the value they leave.
        outputs: Values the agent must communicate during the turn.
        operations: For a turn whose tools are withheld, the word stems naming the withheld
            operations (from the tools' ``operation``); the agent's refusal must name one.
        rivals: Required output (a word of a closed vocabulary of the domain, such as a
            flight status) to the other words of that vocabulary, which compete with it
            (:attr:`rods_env.tools.Toolkit.vocabularies`).
        results: The output texts of the turn's gold calls, when the domain's rules check
            results (:attr:`rods_env.domain.TurnRules.results`); else empty.
        state: The changes of the whole gold state (relative to the base) after the turn,
            when the domain's rules check the full state (:attr:`rods_env.domain.TurnRules.
            state` ``"full"``); else None.
    """

    effect: dict[tuple[str, str], Any]
    outputs: tuple[str, ...]
    operations: tuple[str, ...] = ()
    rivals: dict[str, tuple[str, ...]] = field(default_factory=dict)
    results: tuple[str, ...] = ()
    state: dict[tuple[str, str], Any] | None = None


@dataclass(frozen=True)
class Gold:
    """The gold trajectory of a task.

    Attributes:
        turns: Per-turn effects.
        final: Changes of the final gold state relative to the base.
        call_outputs: JSON value each gold call returned, in call order.
    """

    turns: tuple[TurnGold, ...]
    final: dict[tuple[str, str], Any]
    call_outputs: tuple[Any, ...]

    @cached_property
    def fingerprint(self) -> str:
        """Fingerprint of the final gold state (computed when first asked: hashing the
        changed records is most of a replay's cost, and synthesis never asks)."""
        return changes_fingerprint(self.final)

    @property
    def writes_anything(self) -> bool:
        """Whether the gold changes the database at all."""
        return bool(self.final)


def replay_gold(domain: Domain, task: Task) -> Gold:
    """Execute the task's gold calls on a fresh database and record per-turn effects.

    Raises:
        GoldError: if a gold call is rejected by its tool (the task is invalid).
    """
    db = domain.database(task.db_seed, task.db_size)
    tools = domain.tools(db)
    tools.on_reset()
    run = GoldRun(domain, db, tools, domain.tools_for(task))
    for t_index, turn in enumerate(task.turns):
        run.start_turn(turn.withheld_tools)
        for call in turn.calls:
            result = run.call(call.name, call.arguments)
            if not result.ok:
                raise GoldError(
                    f"task {task.id}: gold call {call.key()} in turn {t_index} failed: {result.output}"
                )
        run.end_turn(turn)
    return run.gold()


class GoldRun:
    """A task's gold calls run turn by turn on a state, recording what :func:`replay_gold`
    records (it runs one on a fresh state).

    A skill that makes its calls as it drafts, on the world the task starts from, records
    its draft's gold with one (:attr:`rods_env.domain.Draft.gold`), so synthesis need not
    replay the calls again. The toolkit may hold back its records until a turn ends
    (:meth:`rods_env.tools.Toolkit.hold`): read the state only between turns.

    Args:
        domain: The domain.
        db: The state the task starts from (changed as the calls run).
        tools: A toolkit bound to ``db``, reset for the episode.
        offered: The tools the task offers (None: every tool).
    """

    def __init__(
        self, domain: Domain, db: Any, tools: Any, offered: Collection[str] | None = None
    ) -> None:
        self.domain = domain
        self.db = db
        self.tools = tools
        self.offered = frozenset(offered) if offered is not None else None
        self.rules = domain.rules
        self.render = self.rules.results != "off"  # texts only where the rules compare them
        self.turns: list[TurnGold] = []
        self.outputs: list[Any] = []
        self._texts: list[str] = []
        self._start = db.checkpoint()
        self._available = self.offered
        tools.hold()

    def start_turn(self, withheld: Collection[str] = ()) -> None:
        """Open the next turn, with ``withheld`` tools refused in it."""
        self._start = self.db.checkpoint()
        self._texts = []
        if self.offered is not None:
            self._available = self.offered - set(withheld)
        elif withheld:
            self._available = frozenset(self.tools.names()) - set(withheld)
        else:
            self._available = None

    def call(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Run one gold call of the open turn; a call that succeeds is recorded."""
        result = self.tools.call(name, arguments, available=self._available, render=self.render)
        if result.ok:
            self.outputs.append(record_json(result.value))  # each record dumped once per process
            self._texts.append(result.output)
        return result

    def end_turn(self, turn: Turn) -> TurnGold:
        """Close the open turn (``turn``: its calls, outputs and withheld tools, as run)."""
        self.tools.sync()
        db = self.db
        changed = db.changed_since(self._start)
        specs = self.domain.toolkit.specs()
        vocabularies = [tuple(w.lower() for w in v) for v in self.domain.toolkit.vocabularies]
        operations = tuple(
            dict.fromkeys(
                stem
                for name in turn.withheld_tools
                for stem in (specs[name].operation if name in specs else (name.split("_")[0],))
            )
        )
        rivals = {
            out: tuple(w for w in vocabulary if w != out.lower())
            for out in turn.outputs
            for vocabulary in vocabularies
            if out.lower() in vocabulary
        }
        turn_gold = TurnGold(
            effect={key: db.get(*key, DELETED) for key in sorted(changed)},
            outputs=turn.outputs,
            operations=operations,
            rivals=rivals,
            results=tuple(self._texts) if self.rules.results != "off" else (),
            state=db.changes() if self.rules.state == "full" else None,
        )
        self.turns.append(turn_gold)
        self.start_turn()
        return turn_gold

    def gold(self) -> Gold:
        """The gold of the turns closed so far."""
        self.tools.sync()
        return Gold(
            turns=tuple(self.turns), final=self.db.changes(), call_outputs=tuple(self.outputs)
        )


class GoldCache:
    """A bounded cache of :class:`Gold` per task, so a reset does not replay the gold calls.

    Args:
        capacity: Number of tasks kept (least recently used are dropped).
    """

    def __init__(self, capacity: int = 8192) -> None:
        self.capacity = capacity
        self._items: OrderedDict[tuple[str, str], tuple[Task, Gold]] = OrderedDict()
        self._lock = Lock()

    def get(self, domain: Domain, task: Task) -> Gold:
        """The gold of ``task``, replayed on first use."""
        key = (domain.name, task.id)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None and (hit[0] is task or hit[0] == task):
                self._items.move_to_end(key)
                return hit[1]
        gold = replay_gold(domain, task)
        self.put(domain, task, gold)
        return gold

    def put(self, domain: Domain, task: Task, gold: Gold) -> None:
        """Store a gold already replayed (synthesis does), so a reset does not replay it."""
        key = (domain.name, task.id)
        with self._lock:
            self._items[key] = (task, gold)
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)


GOLD_CACHE = GoldCache()
"""Process-wide gold cache used by :class:`rods_env.env.ToolEnv`."""
