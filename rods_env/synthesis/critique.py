"""Critique: reject candidates that are invalid, trivial, off-structure or already known.

Every check works on the candidate's already-replayed gold (no episode is run), so the
whole critique costs microseconds to a few milliseconds. Checks, cheapest first, each with
the reason counted in summaries:

``no_state_change``
    The skill writes but the gold changes nothing, or a turn's write calls change nothing.
``do_nothing_passes``
    A turn has no gold effect and no required output: an agent that does nothing would
    pass it (and earn progress for nothing).
``signature_mismatch``
    *resample*: the signature differs from the seed's; *expand*: the signature is not one
    step larger (see :func:`check_one_step`); augmented variants: the signature is not the
    one the augmentation implies.
``underivable_argument``
    A gold argument value that the agent could not know: it is not in an earlier gold
    call's output, a user fact, a request so far, the policy text, or the tool schema's
    enum constants (see :func:`underivable_arguments`). Such a task asks for a guess, which
    the policy forbids.
``bad_text``
    A request no longer reads as a sentence (:func:`~rods_env.synthesis.text.text_problems`:
    a doubled word, stacked determiners, a dangling article, a bare label).
``split_leak``
    The task touches a customer (or a customer's record) of another split than its own:
    train tasks never touch the test split's customers (:mod:`rods_env.splits`).
``policy_violation``
    A check of the domain (:attr:`rods_env.domain.Domain.policy_checks`) or of the
    configuration (:data:`PolicyCheck`) found a breach of the policy.
``duplicate``
    Same dedupe key as a task already in the pool or batch (:func:`dedupe_key`).
``no_ask_passes``
    A hidden fact can be pinned down without asking for it, from the request and read-only
    look-ups (:func:`~rods_env.synthesis.asking.no_ask_value`).
``exploit_passes``
    A trivial agent of the exploit panel (:mod:`rods_env.exploits`: silent, "done", echo,
    blanket refusal, spray) passes a turn or succeeds. This check runs episodes (five per
    candidate with a turn that writes nothing; none otherwise), so it comes last.
"""

from __future__ import annotations

import hashlib
import json
import re
import weakref
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Iterator, Sequence
from functools import cache
from typing import Any

from rods_env.database import record_digest
from rods_env.domain import Domain
from rods_env.exploits import exploit_passes
from rods_env.gold import Gold
from rods_env.splits import leaked_customers
from rods_env.synthesis.asking import no_ask_value
from rods_env.synthesis.plan import Reject, resolve
from rods_env.synthesis.text import text_problems
from rods_env.task import Signature, Task
from rods_env.tools import Toolkit

PolicyCheck = Callable[[Domain, Task, Gold], "str | None"]
"""A domain rule check: returns what is wrong with the task, or None when it complies."""

REASONS: tuple[str, ...] = (
    "unknown_skill",
    "cannot_expand",
    "skill_unavailable",
    "execution_error",
    "no_state_change",
    "do_nothing_passes",
    "signature_mismatch",
    "underivable_argument",
    "bad_text",
    "split_leak",
    "policy_violation",
    "duplicate",
    "no_ask_passes",
    "augment_unavailable",
    "guess_passes",
    "not_longer",
    "pair_mismatch",
    "exploit_passes",
)
"""Every rejection reason, in pipeline order (plan, execute, critique, augment)."""

SMALL_NUMBER = 10
"""Numbers below this magnitude (counts, quantities, flags) need no source."""

_NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?")
_ARITHMETIC = re.compile(r"^[\d\s.,+\-*/()%]+$")


# -- individual checks ---------------------------------------------------------------------
def check_state_change(domain: Domain, task: Task, gold: Gold) -> None:
    """Reject when a writing skill (or a turn with write calls) changes nothing."""
    skill = resolve(domain, task.skill)
    if skill is not None and skill.writes and not gold.final:
        raise Reject("no_state_change", f"skill {task.skill} writes but the gold changes nothing")
    writes = domain.toolkit.write_names()
    for i, (turn, tg) in enumerate(zip(task.turns, gold.turns, strict=True)):
        if not tg.effect and any(c.name in writes for c in turn.calls):
            raise Reject("no_state_change", f"turn {i}: its write calls change nothing")


def free_turns(gold: Gold) -> list[int]:
    """Turns that a do-nothing agent passes: no gold effect and no required output."""
    return [i for i, tg in enumerate(gold.turns) if not tg.effect and not tg.outputs]


def check_do_nothing(gold: Gold) -> None:
    """Reject when doing nothing would pass a turn (see :func:`free_turns`)."""
    free = free_turns(gold)
    if free:
        raise Reject(
            "do_nothing_passes",
            f"turn(s) {', '.join(map(str, free))} have no gold effect and no required output",
        )


def check_one_step(old: Signature, new: Signature, axis: str | None) -> None:
    """Reject unless ``new`` is one step harder than ``old``.

    One step: the size order ``(turns, calls, depth, writes)`` grows; the turns grow by
    exactly one when the grown axis is ``turns`` and stay equal otherwise; every call of
    ``old`` still occurs in ``new`` (the tool multiset only grows); and, within the same
    turns, the writes and the depth grow by at most one.
    """
    if new.size <= old.size:
        raise Reject("signature_mismatch", f"expand: {new.key} is not larger than {old.key}")
    want_turns = old.turns + 1 if axis == "turns" else old.turns
    if new.turns != want_turns:
        raise Reject(
            "signature_mismatch",
            f"expand along {axis}: {new.turns} turns, expected {want_turns}",
        )
    missing = Counter(old.tools) - Counter(new.tools)
    if missing:
        raise Reject(
            "signature_mismatch", f"expand along {axis}: lost calls {dict(sorted(missing.items()))}"
        )
    if axis != "turns" and (new.writes - old.writes > 1 or new.depth - old.depth > 1):
        raise Reject(
            "signature_mismatch",
            f"expand along {axis}: more than one step ({old.key} -> {new.key})",
        )


def _requests(signature: Signature) -> int:
    return sum(signature.requests) if signature.requests is not None else 1


def check_extension(old: Signature, new: Signature, step: str) -> None:
    """Reject unless ``new`` is ``old`` with one more request (``join``: in its last turn;
    ``append``: in new turns), the calls of ``old`` first and their value flow unchanged."""
    n = len(old.tools)
    if new.tools[:n] != old.tools:
        raise Reject("signature_mismatch", f"{step}: the parent's calls are not kept first")
    if tuple(e for e in new.edges if e[1] < n) != old.edges:
        raise Reject("signature_mismatch", f"{step}: the parent's value flow changed")
    if _requests(new) != _requests(old) + 1:
        raise Reject(
            "signature_mismatch",
            f"{step}: {_requests(new)} requests, expected {_requests(old) + 1}",
        )
    if step == "join" and new.turns != old.turns:
        raise Reject("signature_mismatch", f"join: {new.turns} turns, expected {old.turns}")
    if step == "append" and new.turns <= old.turns:
        raise Reject("signature_mismatch", f"append: {new.turns} turns, not more than {old.turns}")


def check_chain(old: Signature, new: Signature) -> None:
    """Reject unless ``new`` is ``old`` with one more request in new turns (see
    :func:`check_extension`) whose calls take a value that a call of ``old`` returned: an
    edge from the parent's calls into the new request's."""
    check_extension(old, new, "append")
    n = len(old.tools)
    if not any(i < n <= j for i, j in new.edges):
        raise Reject("signature_mismatch", "chain: the new request uses no value of the parent's")


def check_deeper(old: Signature, new: Signature) -> None:
    """Reject unless ``new`` has ``old``'s calls and turns with a longer dependency chain."""
    if (new.tools, new.turns, new.writes) != (old.tools, old.turns, old.writes):
        raise Reject("signature_mismatch", f"deepen: {new.key} has other calls than {old.key}")
    if new.depth <= old.depth:
        raise Reject("signature_mismatch", f"deepen: depth {new.depth}, not more than {old.depth}")


def check_signature(expected: Signature, actual: Signature, mode: str, axis: str | None) -> None:
    """Reject when ``actual`` is not the planned structure.

    Args:
        expected: The seed's signature (or, for an augmentation, the implied one).
        actual: The candidate's signature.
        mode: ``"resample"`` (must be equal) or ``"expand"`` (one step larger).
        axis: The grown shape axis, or the expansion step (``join``, ``append``,
            ``deepen``, ``chain``).
    """
    if mode == "expand" and axis in ("join", "append"):
        check_extension(expected, actual, axis)
    elif mode == "expand" and axis == "deepen":
        check_deeper(expected, actual)
    elif mode == "expand" and axis == "chain":
        check_chain(expected, actual)
    elif mode == "expand":
        check_one_step(expected, actual, axis)
    elif actual.key != expected.key:
        raise Reject("signature_mismatch", f"{actual.key} != {expected.key}")


def turn_depths(signature: Signature, calls_per_turn: Sequence[int]) -> list[int]:
    """Per turn, the longest dependency chain (in calls) that ends in one of its calls.

    Chains may start in earlier turns (an order id found in the first turn and used in the
    second makes the second turn deeper).
    """
    longest = [1] * len(signature.tools)
    for i, j in sorted(signature.edges, key=lambda e: e[1]):
        longest[j] = max(longest[j], longest[i] + 1)
    out, k = [], 0
    for n in calls_per_turn:
        out.append(max(longest[k : k + n], default=0))
        k += n
    return out


def check_turn_depths(parent: Task, parent_signature: Signature, task: Task) -> None:
    """Reject an expansion that lowers the depth of one of the parent's turns.

    Expanding along turns adds a request; the requests already there keep their structure,
    so none of them may become shallower than in the parent.
    """
    assert task.signature is not None, "candidates carry their signature"
    old = turn_depths(parent_signature, [len(t.calls) for t in parent.turns])
    new = turn_depths(task.signature, [len(t.calls) for t in task.turns])
    for i, (a, b) in enumerate(zip(old, new, strict=False)):
        if b < a:
            raise Reject(
                "signature_mismatch",
                f"expand along turns: turn {i} has depth {b}, {a} in the parent",
            )


# -- text and splits -----------------------------------------------------------------------
def check_text(task: Task) -> None:
    """Reject when a request no longer reads as a sentence (see :func:`text_problems`)."""
    for i, turn in enumerate(task.turns):
        problems = text_problems(turn.request)
        if problems:
            raise Reject("bad_text", f"turn {i}: {problems[0]} in {turn.request[:120]!r}")


def check_split(domain: Domain, task: Task, gold: Gold) -> None:
    """Reject a task that touches customers of another split (see :mod:`rods_env.splits`)."""
    leaked = leaked_customers(domain, task, gold)
    if leaked:
        raise Reject(
            "split_leak",
            f"a {task.split or 'train'} task touches customer(s) of the other split: "
            + ", ".join(leaked[:3]),
        )


def check_needs_asking(domain: Domain, task: Task, gold: Gold) -> None:
    """Reject a task whose hidden fact an agent can find without asking for it."""
    solved = no_ask_value(domain, task, gold)
    if solved is not None:
        raise Reject(
            "no_ask_passes",
            f"an agent that never asks pins down the hidden {solved} from the request and "
            "read-only look-ups",
        )


# -- derivability --------------------------------------------------------------------------
def _schema_constants(node: Any, out: set[Any]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "enum" and isinstance(value, list):
                out.update(v for v in value if isinstance(v, (str, int, float)))
            elif key == "const" and isinstance(value, (str, int, float)):
                out.add(value)
            else:
                _schema_constants(value, out)
    elif isinstance(node, list):
        for value in node:
            _schema_constants(value, out)


_CONSTANTS: dict[type[Toolkit], dict[str, frozenset[Any]]] = {}


def tool_constants(toolkit: type[Toolkit]) -> dict[str, frozenset[Any]]:
    """Enum and const values of each tool's parameter schema and argument model (computed
    once per toolkit)."""
    cached = _CONSTANTS.get(toolkit)
    if cached is not None:
        return cached
    out: dict[str, frozenset[Any]] = {}
    for name, spec in toolkit.specs().items():
        found: set[Any] = set()
        _schema_constants(spec.schema["function"]["parameters"], found)
        # the argument model may state constants the agent's schema words in prose
        _schema_constants(spec.params.model_json_schema(), found)
        out[name] = frozenset(found)
    _CONSTANTS[toolkit] = out
    return out


def _leaves(value: Any, name: str = "") -> Iterator[tuple[str, Any]]:
    """``(argument name, scalar)`` pairs of a JSON value (list items keep the list's name)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, str(key))
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item, name)
    else:
        yield name, value


def _numbers_in(text: str) -> set[float]:
    return {round(float(m.replace(",", "")), 6) for m in _NUMBER.findall(text)}


_NUMBERS: OrderedDict[str, frozenset[float]] = OrderedDict()


def _numbers_of(text: str) -> frozenset[float]:
    """:func:`_numbers_in` of ``text``, kept for recent texts: a gold output's text (the same
    string object for the same output, see :func:`_output_text`) and a policy are searched
    for numbers by every task that reads them. Texts longer than 32,768 characters (a
    long-context output) are searched each time, so the cache stays small."""
    if len(text) > 32768:
        return frozenset(_numbers_in(text))
    hit = _NUMBERS.get(text)
    if hit is None:
        hit = _NUMBERS[text] = frozenset(_numbers_in(text))
        while len(_NUMBERS) > 4096:
            _NUMBERS.popitem(last=False)
    return hit


@cache
def _policy_numbers(policy: str) -> frozenset[float]:
    return frozenset(_numbers_in(policy))


_TEXTS: OrderedDict[int, tuple[Any, str]] = OrderedDict()


def _output_text(value: Any) -> str:
    """A gold output's compact JSON text, kept for recent outputs by identity (gold outputs
    are shared and never changed: a record returned again is the same object)."""
    if not isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    hit = _TEXTS.get(id(value))
    if hit is not None and hit[0] is value:
        return hit[1]
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    _TEXTS[id(value)] = (value, text)
    while len(_TEXTS) > 8192:
        _TEXTS.popitem(last=False)
    return text


class _Known:
    """What the agent can know at some point: the text it has seen and the numbers in it.

    Tool outputs are kept as their JSON text (fast to build, and a string value that needs
    no JSON escaping occurs in it verbatim); numbers inside texts are parsed only when a
    numeric argument is not found among the numbers already known.
    """

    def __init__(self, policy: str, texts: Sequence[str]) -> None:
        facts = "\x00".join(texts)
        self.text = f"{policy}\x00{facts}"
        self.numbers: set[float] = set(_policy_numbers(policy))
        self.pending: list[str] = [facts]

    def add_text(self, text: str) -> None:
        self.text = f"{self.text}\x00{text}"
        self.pending.append(text)

    def add_output(self, value: Any) -> None:
        text = _output_text(value)
        self.text = f"{self.text}\x00{text}"
        self.pending.append(text)

    def number(self, value: float) -> bool:
        if abs(value) < SMALL_NUMBER:
            return True
        key = round(float(value), 6)
        if key in self.numbers:
            return True
        # the texts not yet searched, the latest first (a calculation's numbers mostly come
        # from the output just before it), until the number is found: the same answer as
        # searching them all, which is done only when it is in none of them
        while self.pending:
            self.numbers |= _numbers_of(self.pending.pop())
            if key in self.numbers:
                return True
        return False

    def string(self, value: str) -> bool:
        if value in self.text:
            return True
        needs_escape = json.dumps(value, ensure_ascii=False)[1:-1] != value
        if needs_escape and json.dumps(value, ensure_ascii=False)[1:-1] in self.text:
            return True
        if _ARITHMETIC.match(value):  # an expression for a calculator: its numbers must be known
            return all(self.number(n) for n in _numbers_in(value))
        return False


def underivable_arguments(domain: Domain, task: Task, gold: Gold) -> list[str]:
    """Gold argument values the agent has no way to know, as ``"tool.arg=value"`` strings.

    A value is derivable when it is a boolean or null, a number below
    :data:`SMALL_NUMBER`, one of the tool schema's enum constants, or it occurs in a user
    fact, a request of this or an earlier turn, the policy text, or the output of an earlier
    gold call (numbers compare by value; a calculator expression is derivable when its
    numbers are).
    """
    constants = tool_constants(domain.toolkit)
    known = _Known(domain.policy, list(task.user.facts.values()))
    bad: list[str] = []
    k = 0
    for turn in task.turns:
        known.add_text(turn.request)
        for call in turn.calls:
            allowed = constants.get(call.name, frozenset())
            for name, value in _leaves(call.arguments):
                if value is None or isinstance(value, bool) or value in allowed:
                    continue
                if isinstance(value, (int, float)):
                    ok = known.number(value)
                else:
                    ok = known.string(str(value))
                if not ok:
                    bad.append(f"{call.name}.{name}={value!r}")
            known.add_output(gold.call_outputs[k])
            k += 1
    return bad


def check_derivable(domain: Domain, task: Task, gold: Gold) -> None:
    """Reject when a gold argument value cannot be derived (see :func:`underivable_arguments`)."""
    bad = underivable_arguments(domain, task, gold)
    if bad:
        raise Reject("underivable_argument", "; ".join(bad[:3]))


# -- duplicates ----------------------------------------------------------------------------
_KEYS: OrderedDict[tuple[object, ...], tuple[weakref.ref[Gold], str]] = OrderedDict()
"""Recent dedupe keys by gold replay (a seed set is remembered at every synthesis round);
a weak reference tells a live gold from a new one that reuses its id, without keeping
golds (a long-context one holds megabytes) alive."""


def dedupe_key(task: Task, gold: Gold) -> str:
    """Key under which two tasks count as duplicates (see :func:`compute_dedupe_key`).

    Kept for recent gold replays: the key depends on the gold and on what of the task the
    gold does not fix (domain, variant, database, outputs, withheld tools, hidden facts).
    """
    memo = (
        id(gold),
        task.domain,
        task.variant,
        task.db_seed,
        task.db_size,
        tuple((t.outputs, t.withheld_tools, t.hidden_facts) for t in task.turns),
        tuple(c.key() for c in task.gold_calls) if not gold.final else (),
        tuple(sorted(task.user.facts)),
    )
    hit = _KEYS.get(memo)
    if hit is not None and hit[0]() is gold:
        return hit[1]
    key = compute_dedupe_key(task, gold)
    _KEYS[memo] = (weakref.ref(gold), key)
    while len(_KEYS) > 4096:
        _KEYS.popitem(last=False)
    return key


def compute_dedupe_key(task: Task, gold: Gold) -> str:
    """Key under which two tasks count as duplicates.

    Same domain, variant, database (seed and size), per-turn gold effect and required
    outputs (and withheld tools / hidden facts), and the same kinds of facts the customer
    knows (their labels: a task whose customer no longer states the order id, so the agent
    must find it, is another task than its parent). A task whose gold writes nothing is
    also keyed by its gold calls, so look-ups of different entities that happen to give the
    same answer stay distinct.
    """
    h = hashlib.sha256()
    h.update(f"{task.domain}\x1f{task.variant}\x1f{task.db_seed}\x1f{task.db_size}\x1e".encode())
    for turn, tg in zip(task.turns, gold.turns, strict=True):
        for (table, key), value in sorted(tg.effect.items()):
            h.update(f"{table}\x1f{key}\x1f{record_digest(value)}\x1e".encode())
        h.update(
            json.dumps(
                [list(turn.outputs), list(turn.withheld_tools), sorted(turn.hidden_facts)]
            ).encode()
        )
        h.update(b"\x1d")
    h.update(("\x1f".join(sorted(task.user.facts)) + "\x1d").encode())
    if not gold.final:
        h.update("\x1f".join(c.key() for c in task.gold_calls).encode())
    return h.hexdigest()[:32]


# -- exploits ------------------------------------------------------------------------------
def check_exploits(domain: Domain, task: Task, gold: Gold) -> None:
    """Reject when an agent of the exploit panel passes a turn or succeeds."""
    passed = exploit_passes(domain, task, gold)
    if passed:
        raise Reject("exploit_passes", "; ".join(passed[:3]))


# -- all together --------------------------------------------------------------------------
def critique(
    domain: Domain,
    task: Task,
    gold: Gold,
    *,
    expected: Signature | None,
    mode: str = "resample",
    axis: str | None = None,
    seen: Collection[str] = (),
    policy_checks: Sequence[PolicyCheck] = (),
    parent: Task | None = None,
) -> str:
    """Run every check on a candidate and return its dedupe key.

    Args:
        domain: The candidate's domain.
        task: The candidate.
        gold: Its gold replay.
        expected: The signature to compare with (None skips the signature check).
        mode: ``"resample"`` or ``"expand"``.
        axis: The grown axis (expand).
        seen: Dedupe keys of the tasks already in the pool or batch.
        policy_checks: Extra rule checks, run after the domain's own
            (:attr:`~rods_env.domain.Domain.policy_checks`).
        parent: The seed of an expansion along turns: its turns must keep their depth.

    Raises:
        Reject: with the first failed check's reason (see the module docstring).
    """
    check_state_change(domain, task, gold)
    check_do_nothing(gold)
    if expected is not None:
        assert task.signature is not None, "candidates carry their signature"
        check_signature(expected, task.signature, mode, axis)
        if mode == "expand" and axis == "turns" and parent is not None:
            check_turn_depths(parent, expected, task)
    check_derivable(domain, task, gold)
    check_text(task)
    check_split(domain, task, gold)
    for check in (*domain.policy_checks, *policy_checks):
        problem = check(domain, task, gold)
        if problem:
            raise Reject("policy_violation", problem)
    key = dedupe_key(task, gold)
    if key in seen:
        raise Reject("duplicate", "same gold effect and outputs as a task already in the pool")
    if any(turn.hidden_facts for turn in task.turns):
        check_needs_asking(domain, task, gold)
    check_exploits(domain, task, gold)
    return key
