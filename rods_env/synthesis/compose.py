"""Composition: expansion without a ceiling, from what a domain declares.

A task is one or more *requests* of one customer (:class:`rods_env.task.Request`): a
request is what one skill drafts. *Expand* grows a task by one request of any skill of the
domain, drawn for **the same customer on the state the earlier requests leave**, either in
the task's last turn (``join``: one more thing to do in the same message, the task gets
wider) or as a new turn (``append``: the conversation gets longer). Composing the same
skill again asks for more entities (a second order to cancel); composing another skill
gives mixed tasks (a return and an address change in one conversation). The parent's turns
are kept as they are, so the expansion is exactly one request harder.

Nothing here is written per skill. What a domain declares is enough:

- its **skills** (they draw entities and word the request);
- its **customers** (:attr:`rods_env.domain.Domain.customers`: the tables holding a
  customer's records and the field naming the owner). A skill drafts the new request on a
  view of the database that holds that one customer and their records (shared tables
  such as products or flights stay whole), so whatever it picks is the customer's;
- its **tools**: the new request's gold calls run on the real state after the parent's
  (a call the tools reject discards the draft), and a look-up that tells the agent
  nothing new is left out (the same call with the same output as before, or a look-up
  whose whole answer is a value already seen: the customer is verified once).

The recipe is kept in the task (skills joined by ``+`` in ``Task.skill``, each request's
shape and opening turn under ``"<k>."`` keys of ``Task.shape``), so a composed task can be
*resampled*: :func:`composite_skill` redraws every request, in order, for another
customer.
"""

from __future__ import annotations

import itertools
import random
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from threading import Lock
from types import MappingProxyType
from typing import Any

from rods_env.database import DELETED, Database, Tables
from rods_env.domain import Domain, Draft, Skill, SkillUnavailable, scattered
from rods_env.errors import Reject
from rods_env.gold import Gold
from rods_env.leaves import record_json, value_leaves
from rods_env.rewards import Said, mentions
from rods_env.splits import task_customers
from rods_env.synthesis.rewrite import rephrase, split_frame
from rods_env.task import (
    SKILL_SEPARATOR,
    Request,
    Task,
    ToolCall,
    Turn,
    UserProfile,
    decode_requests,
    encode_requests,
)

JOIN, APPEND, CHAIN = "join", "append", "chain"
WORLD_OWNER = ""
"""The customer of a domain whose every task has a world of its own and that declares no
customers (:attr:`rods_env.domain.Domain.world_per_task`): the world's owner, whose
records are the whole world."""
COMPOSE_OPS: tuple[str, ...] = (JOIN, APPEND, CHAIN)
"""Expansion steps that add a request: in the last turn, in a new turn, or in a new turn
and taking a value an earlier request's call returned."""

CUSTOMERS_TRIED = 40
"""Customers a composed task's resample tries before its skill counts as unavailable."""

CONNECTORS = (
    "I also have another request.",
    "One more thing.",
    "There's something else, too.",
    "And another thing.",
)
"""Sentences that join a second request to a turn's message."""

_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")


# -- recipes ---------------------------------------------------------------------------------
_COMPOSITES: dict[tuple[int, str], Skill] = {}


def resolve_skill(domain: Domain, name: str) -> Skill | None:
    """The skill called ``name``: one of the domain's, or the composite of a composed
    task's skills (``"cancel_order+product_info"``); None when a part is unknown."""
    skill = domain.skill_map.get(name)
    if skill is not None or SKILL_SEPARATOR not in name:
        return skill
    key = (id(domain), name)
    found = _COMPOSITES.get(key)
    if found is None:
        parts = [domain.skill_map.get(part) for part in name.split(SKILL_SEPARATOR)]
        if any(part is None for part in parts):
            return None
        found = _COMPOSITES[key] = composite_skill(domain, name)
    return found


def composite_skill(domain: Domain, name: str) -> Skill:
    """A skill that draws a composed task of the requests ``name`` lists, for one customer.

    Its ``generate(db, rng, shape)`` reads each request's shape and opening turn from
    ``shape`` (as :func:`rods_env.task.encode_requests` wrote them), tries customers of
    ``db`` in a random order, and returns the first conversation in which every request
    could be drafted, in order, on the state the earlier ones leave.
    """
    names = name.split(SKILL_SEPARATOR)
    skills = [domain.skill(part) for part in names]

    def generate(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
        recipe = decode_requests(name, shape)
        tables = db.base
        # a world of one person's (no customers declared): the whole world is theirs
        owners = list(customer_index(domain, tables)) if domain.customers else [WORLD_OWNER]
        for customer in itertools.islice(scattered(owners, rng), CUSTOMERS_TRIED):
            conv = Conversation(domain, tables, customer)
            for skill, want in zip(skills, recipe, strict=True):
                join = want.turn < len(conv.turns)
                if want.turn != len(conv.turns) - (1 if join else 0):
                    break
                draft = _draft(skill, conv, rng, dict(want.shape))
                if draft is None or conv.add(skill, draft, rng, join=join) is not None:
                    break
            else:
                return conv.draft()
        raise SkillUnavailable(f"no customer supports the requests {' + '.join(names)}")

    return Skill(
        name,
        "Requests of one customer: " + ", then ".join(names) + ".",
        generate,
        writes=any(s.writes for s in skills),
    )


# -- customers -------------------------------------------------------------------------------
_INDEX: dict[int, tuple[Tables, dict[str, dict[str, tuple[str, ...]]]]] = {}
_VIEWS: OrderedDict[tuple[int, str], tuple[Tables, Tables]] = OrderedDict()
_LOCK = Lock()


def customer_index(domain: Domain, tables: Tables) -> dict[str, dict[str, tuple[str, ...]]]:
    """Customer to ``{table: keys of their records}`` over ``tables`` (built once per base),
    in the order the customers first appear."""
    hit = _INDEX.get(id(tables))
    if hit is not None and hit[0] is tables:
        return hit[1]
    index: dict[str, dict[str, list[str]]] = {}
    for table, owner_field in domain.customers.items():
        rows = tables.get(table)
        if rows is None:
            continue
        for key, record in rows.items():
            owner = getattr(record, owner_field, None)
            if isinstance(owner, str):
                index.setdefault(owner, {}).setdefault(table, []).append(key)
    frozen = {c: {t: tuple(keys) for t, keys in by.items()} for c, by in index.items()}
    with _LOCK:
        _INDEX[id(tables)] = (tables, frozen)
    return frozen


def customer_tables(domain: Domain, tables: Tables, customer: str) -> Tables:
    """``tables`` with only ``customer``'s records in the customers' tables (the others
    whole): the world a skill drafts a request of this customer from."""
    key = (id(tables), customer)
    with _LOCK:
        hit = _VIEWS.get(key)
        if hit is not None and hit[0] is tables:
            _VIEWS.move_to_end(key)
            return hit[1]
    owned = customer_index(domain, tables).get(customer, {})
    view: dict[str, Mapping[str, Any]] = {}
    for name, rows in tables.items():
        if name in domain.customers:
            view[name] = MappingProxyType({k: rows[k] for k in owned.get(name, ())})
        else:
            view[name] = rows
    frozen: Tables = MappingProxyType(view)
    with _LOCK:
        _VIEWS[key] = (tables, frozen)
        while len(_VIEWS) > 4096:
            _VIEWS.popitem(last=False)
    return frozen


def task_customer(domain: Domain, task: Task, gold: Gold) -> str | None:
    """The one customer whose records ``task`` touches (None: none, or several); in a
    domain of worlds of one person's, that person (:data:`WORLD_OWNER`)."""
    if not domain.customers and domain.world_per_task:
        return WORLD_OWNER
    found = task_customers(domain, task, gold)
    return next(iter(found)) if len(found) == 1 else None


# -- a conversation under construction -------------------------------------------------------
def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


class Conversation:
    """A composed task being built: its turns, its customer's facts, and the state its
    gold calls leave, both the real one and the customer's view of it.

    Args:
        domain: The domain.
        tables: The world the calls run on (a split's view or the whole database).
        customer: The customer every request is of.
    """

    def __init__(self, domain: Domain, tables: Tables, customer: str) -> None:
        self.domain = domain
        self.customer = customer
        self.state = Database(tables)
        self.tools = domain.tools(self.state)
        self.tools.on_reset()
        # without customers the view is the state itself (private state included, such as
        # a file system's current folder, which no equality of records shows)
        self.view = (
            Database(customer_tables(domain, tables, customer)) if domain.customers else self.state
        )
        self.turns: list[Turn] = []
        self.facts: dict[str, str] = {}
        self.user: UserProfile | None = None
        self.requests: list[Request] = []
        self._outputs: dict[str, list[Any]] = {}  # call key -> the outputs it gave
        self._values: set[str] = set()  # traceable values seen in outputs
        self._turn_changes: set[tuple[str, str]] = set()  # records the last turn changed

    @classmethod
    def resume(
        cls, domain: Domain, tables: Tables, customer: str, task: Task, gold: Gold
    ) -> Conversation:
        """The conversation of ``task`` so far: its turns, facts and requests, and the
        state (and tool state, such as who is verified) after its gold calls (``gold``:
        their outputs)."""
        conv = cls(domain, tables, customer)
        k = 0
        for turn in task.turns:
            start = conv.state.checkpoint()
            for call in turn.calls:
                result = conv.tools.call(call.name, call.arguments, render=False)
                if not result.ok:
                    raise Reject("execution_error", f"the parent's {call.key()} fails")
                conv._remember(call, gold.call_outputs[k])
                k += 1
            conv._turn_changes = conv.state.changed_since(start)
        conv._sync_view(conv.state.changes())
        conv.turns = list(task.turns)
        conv.facts = dict(task.user.facts)
        conv.user = task.user
        conv.requests = task.requests()
        return conv

    def _remember(self, call: ToolCall, out: Any) -> None:
        self._outputs.setdefault(call.key(), []).append(out)
        self._values |= value_leaves(out)

    def _known(self, call: ToolCall, out: Any) -> bool:
        """Whether a look-up tells the agent nothing new: the same call answered the same
        before, or its whole answer is one value already seen (a user id)."""
        if any(out == before for before in self._outputs.get(call.key(), ())):
            return True
        return _scalar(out) and bool(value_leaves(out)) and value_leaves(out) <= self._values

    def _sync_view(self, changed: Mapping[tuple[str, str], Any]) -> None:
        """Carry changes of the real state over to the customer's view."""
        if self.view is self.state:
            return
        for (table, key), record in changed.items():
            if table not in self.view.tables:
                continue
            owner_field = self.domain.customers.get(table)
            if (
                owner_field is not None
                and record is not DELETED
                and getattr(record, owner_field, None) != self.customer
            ):
                continue
            if record is DELETED:
                self.view.delete(table, key)
            else:
                self.view.put(table, key, record)

    def add(
        self, skill: Skill, draft: Draft, rng: random.Random, *, join: bool, chain: bool = False
    ) -> str | None:
        """Add ``draft`` (a request ``skill`` drafted on :attr:`view`) as the next request.

        Args:
            skill: The skill that drafted it.
            draft: Its draft.
            rng: Words the request (stock phrases, the connector of a joined request).
            join: Open it in the last turn (False: in a new turn).
            chain: Only if one of its calls takes a value that an earlier request's call
                returned (and that neither the customer states nor an earlier call of this
                request returned): the dependency chain runs through the earlier request.

        Returns:
            None when added, else why it was not (nothing is changed then).
        """
        if join and (len(draft.turns) != 1 or not self.turns):
            return "a joined request has one turn"
        if chain and not self._may_chain(draft):
            return "it uses no value an earlier request found"
        start = self.state.checkpoint()
        saved = (
            {k: list(v) for k, v in self._outputs.items()},
            set(self._values),
            # per-episode tool state (who is verified), restored with the database
            {k: v for k, v in vars(self.tools).items() if k != "db"},
        )
        kept: list[list[ToolCall]] = []
        wrote = False
        for turn in draft.turns:
            calls: list[ToolCall] = []
            for call in turn.calls:
                before = self.state.checkpoint()
                result = self.tools.call(call.name, call.arguments, render=False)
                if not result.ok:
                    self._undo(start, saved)
                    return f"{call.name} fails: {result.output[:160]}"
                out = record_json(result.value)
                if (
                    not result.writes
                    and self._known(call, out)
                    and _untouched(before, self.state.checkpoint())
                ):
                    continue  # the agent has this answer already
                wrote |= result.writes
                calls.append(call)
                self._remember(call, out)
            kept.append(calls)
        if chain and not self._chains(kept, saved[1], draft):
            self._undo(start, saved)
            return "it uses no value an earlier request found"
        changed = self.state.changed_since(start)
        if join and changed & self._turn_changes:
            # two requests of one turn changing one record: the turn's effect would not show
            # whether the first was done (a second address change hides the first)
            self._undo(start, saved)
            return "it changes a record another request of the turn changes"
        earlier = {o for t in self.turns for o in t.outputs}
        outputs = [[o for o in t.outputs if o not in earlier] for t in draft.turns]
        problem = None
        if wrote and not changed:
            problem = "its writes change nothing"
        elif not wrote and not any(outputs):
            problem = "it asks nothing new"
        elif any(not c and not o for c, o in zip(kept, outputs, strict=True)):
            problem = "a turn of it asks nothing new"
        elif join and _conflicting(self.turns[-1].outputs, draft.turns[0].outputs):
            problem = "a forbidden output of one request is required by the other"
        elif join and _mixes(self.turns[-1], kept[0], outputs[0], self.domain):
            # an honest agent confirms a write by stating its details: in a turn that also
            # requires outputs, those count as competing or sprayed values
            problem = "the turn would mix writes with outputs to state"
        if problem is not None:
            self._undo(start, saved)
            return problem
        self._sync_view({key: self.state.get(*key, DELETED) for key in changed})
        self._merge(skill, draft, rng, kept, outputs, join)
        # records the last turn changed (for an appended request of several turns, those of
        # all of them: more than needed, so a later join is refused, never wrongly allowed)
        self._turn_changes = (self._turn_changes if join else set()) | changed
        return None

    def _stated(self, draft: Draft) -> Said:
        """What the customer states: every fact of the conversation and of ``draft``."""
        return Said("\n".join([*self.facts.values(), *draft.user.facts.values()]))

    def _may_chain(self, draft: Draft) -> bool:
        """A cheap test before running ``draft``: one of its argument values was seen in an
        earlier request's output and is not stated by the customer."""
        stated = self._stated(draft)
        return any(
            leaf in self._values and not stated.has(leaf)
            for turn in draft.turns
            for call in turn.calls
            for leaf in value_leaves(call.arguments)
        )

    def _chains(self, kept: list[list[ToolCall]], earlier: set[str], draft: Draft) -> bool:
        """Whether a kept call takes a value from an earlier request: one in ``earlier``
        (the values the earlier requests' outputs held), not returned by a call of this
        request before it (the signature traces a value to the latest call of the request
        that returned it) and not stated by the customer."""
        stated = self._stated(draft)
        mine: set[str] = set()
        for call in (c for calls in kept for c in calls):
            for leaf in value_leaves(call.arguments):
                if leaf in earlier and leaf not in mine and not stated.has(leaf):
                    return True
            outputs = self._outputs.get(call.key())
            if outputs:
                mine |= value_leaves(outputs[-1])
        return False

    def _undo(
        self, start: Any, saved: tuple[dict[str, list[Any]], set[str], dict[str, Any]]
    ) -> None:
        self.state.rollback(start)
        self._outputs, self._values, tool_state = saved
        vars(self.tools).update(tool_state)

    def _merge(
        self,
        skill: Skill,
        draft: Draft,
        rng: random.Random,
        kept: list[list[ToolCall]],
        outputs: list[list[str]],
        join: bool,
    ) -> None:
        index = len(self.requests)
        first = sum(len(t.calls) for t in self.turns)
        if self.user is None:
            self.user = draft.user
        self._merge_facts(draft.user.facts, index)
        values = tuple(self.facts.values())
        opens = len(self.turns) - 1 if join else len(self.turns)
        for k, (turn, calls, outs) in enumerate(zip(draft.turns, kept, outputs, strict=True)):
            # requests state values, not labels: a renamed fact needs no change of text
            text = turn.request if index == 0 else rephrase(turn.request, rng, values)
            if k == 0 and join:
                last = self.turns[-1]
                opener, body, closer = split_frame(last.request)
                connector = CONNECTORS[rng.randrange(len(CONNECTORS))]
                joined = " ".join(p for p in (opener, body, connector, text, closer) if p)
                self.turns[-1] = last.model_copy(
                    update={
                        "request": joined,
                        "calls": last.calls + tuple(calls),
                        "outputs": last.outputs + tuple(outs),
                    }
                )
            else:
                self.turns.append(Turn(request=text, calls=tuple(calls), outputs=tuple(outs)))
        shape = dict(draft.shape) if draft.shape is not None else {}
        self.requests.append(Request(skill=skill.name, shape=shape, turn=opens, call=first))

    def _merge_facts(self, facts: Mapping[str, str], index: int) -> None:
        """Add a request's facts; a label already holding another value gets the request's
        ordinal ("order id (second request)"), as the shipped multi-turn skills do."""
        for label, value in facts.items():
            have = self.facts.get(label)
            if have is None or have == value:
                self.facts[label] = value
                continue
            ordinal = _ORDINALS[index] if index < len(_ORDINALS) else f"#{index + 1}"
            self.facts[f"{label} ({ordinal} request)"] = value

    def draft(self) -> Draft:
        """The composed task so far: the user, the turns, and the recipe as the shape."""
        assert self.user is not None, "a conversation has at least one request"
        user = self.user.model_copy(update={"facts": dict(self.facts)})
        _, shape = encode_requests(self.requests)
        return Draft(user=user, turns=tuple(self.turns), shape=shape)

    @property
    def skill_name(self) -> str:
        """The composed task's skill: its requests' skills joined by ``+``."""
        return SKILL_SEPARATOR.join(r.skill for r in self.requests)


def _untouched(
    before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]]
) -> bool:
    """Whether two checkpoints hold the same record objects: a look-up that changed
    nothing, not even private state that record equality ignores (a current folder)."""
    if before.keys() != after.keys():
        return False
    for table, layer in after.items():
        then = before[table]
        if layer.keys() != then.keys() or any(then[k] is not v for k, v in layer.items()):
            return False
    return True


def _mixes(turn: Turn, calls: Sequence[ToolCall], outputs: Sequence[str], domain: Domain) -> bool:
    """Whether joining ``calls`` and ``outputs`` to ``turn`` gives a turn with both writes
    and required outputs (the shipped skills never write in a turn that asks for values).
    Never in a domain whose agent does not confirm writes (nothing it says about a write
    then competes with a value to state)."""
    if not domain.confirm_writes:
        return False
    writes = domain.toolkit.write_names()
    wrote = any(c.name in writes for c in (*turn.calls, *calls))
    return wrote and bool(turn.outputs or outputs)


def _conflicting(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether an output of one list forbids (``!``) what the other requires."""
    for forbidding, requiring in ((a, b), (b, a)):
        for out in forbidding:
            if not out.startswith("!"):
                continue
            if any(not r.startswith("!") and not mentions(r, out) for r in requiring):
                return True
    return False


def _draft(
    skill: Skill, conv: Conversation, rng: random.Random, shape: dict[str, int]
) -> Draft | None:
    """``skill``'s draft of a request of the conversation's customer, or None."""
    try:
        return skill.generate(conv.view.fork(), rng, shape)
    except SkillUnavailable:
        return None
    except Exception:  # a skill bug on an unusual state: that skill is skipped
        return None


_SEVERAL: dict[int, frozenset[str]] = {}


def _multi_turn_skills(domain: Domain) -> frozenset[str]:
    """Skills whose every seed task has more than one turn (they never draft a request that
    a turn can join)."""
    found = _SEVERAL.get(id(domain))
    if found is None:
        turns: dict[str, set[int]] = {}
        for task in domain.seed_tasks():
            turns.setdefault(task.skill, set()).add(len(task.turns))
        found = _SEVERAL[id(domain)] = frozenset(k for k, v in turns.items() if min(v) > 1)
    return found


def random_shape(skill: Skill, rng: random.Random) -> dict[str, int]:
    """A shape for a new request: the skill's default, or (half of the time) one drawn
    within its limits, as the seed sets are drawn."""
    shape = dict(skill.shape)
    if skill.limits and rng.random() < 0.5:
        shape.update({axis: rng.randint(lo, hi) for axis, (lo, hi) in skill.limits.items()})
    return shape


def extend(
    domain: Domain,
    parent: Task,
    gold: Gold,
    tables: Tables,
    rng: random.Random,
    *,
    join: bool,
    chain: bool = False,
) -> tuple[str, Draft]:
    """``parent`` with one more request of its customer: ``(skill name, draft)``.

    The skills the task does not compose yet are tried first, then the others, each in a
    random order; the first whose draft adds something (a write that changes a record, or
    an output the task does not ask for yet) on the state after the parent's gold is taken.

    Args:
        domain: The domain.
        parent: The task to extend.
        gold: Its gold replay.
        tables: The world skills draft from (the parent's split).
        rng: The variant's generator.
        join: Add the request to the last turn (False: in new turns).
        chain: In new turns, and only a request that takes a value an earlier request's
            call returned (see :meth:`Conversation.add`).

    Raises:
        Reject: ``skill_unavailable`` when the parent is not of exactly one customer or
            no skill adds a request.
    """
    customer = task_customer(domain, parent, gold)
    if customer is None:
        raise Reject("skill_unavailable", "the task is not of exactly one customer")
    conv = Conversation.resume(domain, tables, customer, parent, gold)
    # skills the task does not compose yet first (the task grows more varied, rather than
    # asking for the same thing again and again), each group in a random order
    used = {r.skill for r in conv.requests}
    fresh = [s for s in domain.composable if s.name not in used]
    again = [s for s in domain.composable if s.name in used]
    rng.shuffle(fresh)
    rng.shuffle(again)
    order = fresh + again
    if join:  # a joined request has one turn: skills that always draft several cannot join
        several = _multi_turn_skills(domain)
        order = [s for s in order if s.name not in several]
    why: list[str] = []
    for skill in order:
        draft = _draft(skill, conv, rng, random_shape(skill, rng))
        if draft is None:
            continue
        problem = conv.add(skill, draft, rng, join=join, chain=chain)
        if problem is None:
            return conv.skill_name, conv.draft()
        why.append(f"{skill.name}: {problem}")
    raise Reject(
        "skill_unavailable",
        f"no skill adds a request for customer {customer}"
        + (f" ({'; '.join(why[:3])})" if why else ""),
    )
