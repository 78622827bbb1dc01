"""The contamination guard: no task of the BFCL API world may share with a BFCL test task

1. a **user question**: each request, normalized (lower case, words only), against every
   user message of BFCL's 800 tasks: equal, or a near duplicate (Jaccard similarity of
   word 3-gram sets at or above :data:`NEAR_DUPLICATE`);
2. a **gold call sequence**: the task's whole sequence of calls (name and arguments), or
   one turn's sequence of two or more calls, equal to one of a BFCL task;
3. an **initial state**: the public state of an involved class at the task's start equal
   to that class's initial state in a BFCL task (MathAPI, which has no state, aside).

:func:`violations` says what a task shares (the domain's critique rejects such a
candidate: ``policy_violation``); :func:`report` measures a set of tasks (nearest
similarities, matches), as the tests and docs/bfcl.md report them. BFCL's tasks are read
from the installed bfcl-eval package; the index is built once per process (a second or
two).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from statistics import mean
from typing import Any

from rods_env.task import Task, ToolCall

NEAR_DUPLICATE = 0.5
"""Jaccard similarity of word 3-gram sets at or above which two questions are near
duplicates (BFCL's own paraphrase pairs across its categories score above it)."""

_WORD = re.compile(r"[a-z0-9]+")


def normalize(text: str) -> tuple[str, ...]:
    """The words of ``text``, lower case, punctuation and quotes dropped."""
    return tuple(_WORD.findall(text.lower()))


def shingles(words: Sequence[str], n: int = 3) -> frozenset[tuple[str, ...]]:
    """The word ``n``-grams of ``words`` (the whole text when shorter)."""
    if len(words) < n:
        return frozenset({tuple(words)}) if words else frozenset()
    return frozenset(tuple(words[i : i + n]) for i in range(len(words) - n + 1))


def jaccard(a: frozenset[Any], b: frozenset[Any]) -> float:
    """``|a & b| / |a | b|`` (0 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def nearest_question(
    mine: frozenset[tuple[str, ...]],
    grams: Mapping[tuple[str, ...], Sequence[int]],
    questions: Sequence[tuple[str, frozenset[tuple[str, ...]]]],
) -> tuple[float, str | None]:
    """The highest Jaccard similarity of the shingles ``mine`` to an indexed question, and
    that question's task id (``0.0, None`` when none shares a shingle).

    Args:
        mine: The shingles of the text looked up.
        grams: Each shingle to the indices of the questions that have it.
        questions: Each question's task id and shingles, by index.
    """
    counts: dict[int, int] = {}
    for gram in mine:
        for q in grams.get(gram, ()):
            counts[q] = counts.get(q, 0) + 1
    best, where = 0.0, None
    for q, shared in counts.items():
        other = questions[q][1]
        sim = shared / (len(mine) + len(other) - shared)
        if sim > best:
            best, where = sim, questions[q][0]
    return best, where


def calls_key(calls: Iterable[ToolCall]) -> str:
    """Canonical text of a call sequence (names and sorted JSON arguments)."""
    return "\x1e".join(c.key() for c in calls)


def _keyed(value: Any) -> Any:
    """JSON data whose dict keys name their type (``1`` and ``"1"`` stay apart, and keys of
    mixed types sort)."""
    if isinstance(value, dict):
        return {f"{type(k).__name__}:{k}": _keyed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_keyed(v) for v in value]
    return value


OUTLINED_KEYS = 64
"""A dict of more keys is outlined by its length alone (a long world's listings hold
thousands: walking them would cost what the digest does)."""


def outline(value: Any, depth: int = 2) -> Any:
    """A cheap function of a class's public state: scalars as they are, containers by their
    keys and outlines down to ``depth`` levels, then (or past :data:`OUTLINED_KEYS` keys)
    by their length. Equal states have equal outlines, so a state whose outline no BFCL
    state has equals none of them (its digest need not be computed)."""
    kind = type(value)
    if kind is dict:
        if depth <= 0 or len(value) > OUTLINED_KEYS:
            return ("d", len(value))
        return tuple(sorted((repr(k), outline(v, depth - 1)) for k, v in value.items()))
    if kind is list or kind is tuple:
        return ("l", len(value))
    return (
        (kind.__name__, value)
        if isinstance(value, (str, int, float, bool, type(None)))
        else kind.__name__
    )


def state_digest(state: Mapping[str, Any]) -> str:
    """A digest of a class's public state (plain data, see
    :func:`environments.bfcl.world.state.public_state`)."""
    text = json.dumps(_keyed(state), sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class BFCLIndex:
    """What the guard compares against, built from BFCL's 800 tasks.

    Attributes:
        questions: ``(task id, words)`` of every user message.
        grams: 3-gram to the questions holding it.
        exact: Normalized question to a task id.
        task_calls: Whole-task call sequences (canonical) to a task id.
        turn_calls: Turn call sequences of two or more calls to a task id.
        states: ``(class, state digest)`` to a task id.
        outlines: ``(class, outline)`` of every state in ``states`` (:func:`outline`).
    """

    questions: tuple[tuple[str, frozenset[tuple[str, ...]]], ...]
    grams: Mapping[tuple[str, ...], tuple[int, ...]]
    exact: Mapping[tuple[str, ...], str]
    task_calls: Mapping[str, str]
    turn_calls: Mapping[str, str]
    states: Mapping[tuple[str, str], str]
    outlines: frozenset[tuple[str, Any]]

    def nearest(self, text: str) -> tuple[float, str | None]:
        """The highest similarity of ``text`` to a BFCL question, and that task's id (kept
        for recent texts: a task's variants repeat most of its requests)."""
        hit = _NEAREST.get(text)
        if hit is None:
            hit = _NEAREST[text] = self._nearest(text)
            while len(_NEAREST) > 8192:
                _NEAREST.popitem(last=False)
        return hit

    def _nearest(self, text: str) -> tuple[float, str | None]:
        words = normalize(text)
        if words in self.exact:
            return 1.0, self.exact[words]
        return nearest_question(shingles(words), self.grams, self.questions)


_NEAREST: OrderedDict[str, tuple[float, str | None]] = OrderedDict()


@cache
def bfcl_index() -> BFCLIndex:
    """The index of BFCL's 800 multi-turn tasks (built once per process)."""
    from environments.bfcl.apis import new_world
    from environments.bfcl.tasks import load_tasks
    from environments.bfcl.world.state import public_state

    questions: list[tuple[str, frozenset[tuple[str, ...]]]] = []
    exact: dict[tuple[str, ...], str] = {}
    task_calls: dict[str, str] = {}
    turn_calls: dict[str, str] = {}
    states: dict[tuple[str, str], str] = {}
    outlines: set[tuple[str, Any]] = set()
    seen_scenarios: set[Any] = set()
    for task in load_tasks():
        for messages in task.turns:
            for message in messages:
                words = normalize(str(message.get("content") or ""))
                if words:
                    questions.append((task.id, shingles(words)))
                    exact.setdefault(words, task.id)
        task_calls.setdefault(calls_key(c for turn in task.gold for c in turn), task.id)
        for turn in task.gold:
            if len(turn) >= 2:
                turn_calls.setdefault(calls_key(turn), task.id)
        if task.scenario not in seen_scenarios:
            seen_scenarios.add(task.scenario)
            world = new_world(task.scenario)
            for cls, instance in world.instances.items():
                if cls != "MathAPI":
                    state = public_state(instance)
                    states.setdefault((cls, state_digest(state)), task.id)
                    outlines.add((cls, outline(state)))
    grams: dict[tuple[str, ...], list[int]] = {}
    for i, (_, mine) in enumerate(questions):
        for gram in mine:
            grams.setdefault(gram, []).append(i)
    return BFCLIndex(
        questions=tuple(questions),
        grams={g: tuple(v) for g, v in grams.items()},
        exact=exact,
        task_calls=task_calls,
        turn_calls=turn_calls,
        states=states,
        outlines=frozenset(outlines),
    )


def initial_states(task: Task, index: BFCLIndex | None = None) -> dict[str, str]:
    """Class to the digest of its public state at the start of ``task`` (its involved
    classes; MathAPI aside). Given the ``index``, only the states whose outline a BFCL state
    has (:func:`outline`; the others cannot equal one)."""
    from environments.bfcl.apis import functions
    from environments.bfcl.world.state import TABLE
    from rods_env.registry import load_domain

    DOMAIN = load_domain("bfcl-api")  # through the registry: the domain runs this check
    table = functions()
    involved = {table[n].owner for n in DOMAIN.tools_for(task)} - {"MathAPI"}
    base = DOMAIN.base(task.db_seed, task.db_size)
    out = {}
    for cls in sorted(involved):
        record = base[TABLE][cls]
        if index is None:
            out[cls] = state_digest(getattr(record, "state", {}))
            continue
        digest = _candidate_digest(cls, record, index)
        if digest is not None:
            out[cls] = digest
    return out


_CHECKED: OrderedDict[int, tuple[Any, str | None]] = OrderedDict()
"""Recent base records' verdicts, by identity (records are immutable; a task's variants,
each augmentation of a base variant, start from the same records)."""


def _candidate_digest(cls: str, record: Any, index: BFCLIndex) -> str | None:
    """The digest of ``record``'s state when its outline is a BFCL state's, else None."""
    hit = _CHECKED.get(id(record))
    if hit is not None and hit[0] is record:
        return hit[1]
    state = getattr(record, "state", {})
    digest = state_digest(state) if (cls, outline(state)) in index.outlines else None
    _CHECKED[id(record)] = (record, digest)
    while len(_CHECKED) > 4096:
        _CHECKED.popitem(last=False)
    return digest


def violations(task: Task) -> list[str]:
    """What ``task`` shares with a BFCL test task (empty: nothing), one line each."""
    index = bfcl_index()
    found = []
    for i, turn in enumerate(task.turns):
        sim, where = index.nearest(turn.request)
        if sim >= NEAR_DUPLICATE:
            found.append(
                f"turn {i}'s request is a near duplicate ({sim:.2f}) of a question of {where}"
            )
    whole = index.task_calls.get(calls_key(task.gold_calls))
    if whole is not None:
        found.append(f"its gold call sequence is that of {whole}")
    for i, turn in enumerate(task.turns):
        if len(turn.calls) >= 2:
            hit = index.turn_calls.get(calls_key(turn.calls))
            if hit is not None:
                found.append(f"turn {i}'s gold calls are a turn of {hit}")
    for cls, digest in initial_states(task, index).items():
        hit = index.states.get((cls, digest))
        if hit is not None:
            found.append(f"its initial {cls} state is that of {hit}")
    return found


def report(tasks: Sequence[Task]) -> dict[str, Any]:
    """The guard's numbers over ``tasks``: per request the nearest BFCL question's
    similarity (max, 99th percentile, mean; how many at or above the threshold), and how
    many tasks share a call sequence or an initial state."""
    index = bfcl_index()
    sims = sorted(index.nearest(turn.request)[0] for task in tasks for turn in task.turns)
    shared = [t.id for t in tasks if violations(t)]
    return {
        "tasks": len(tasks),
        "requests": len(sims),
        "nearest_similarity_max": max(sims, default=0.0),
        "nearest_similarity_p99": sims[int(0.99 * (len(sims) - 1))] if sims else 0.0,
        "nearest_similarity_mean": mean(sims) if sims else 0.0,
        "near_duplicates": sum(s >= NEAR_DUPLICATE for s in sims),
        "tasks_sharing_anything": len(shared),
        "bfcl_questions": len(index.questions),
        "bfcl_states": len(index.states),
    }
