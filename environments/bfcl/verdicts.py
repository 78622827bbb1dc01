"""BFCL's verdicts of record and the correct ones: its checker, turn by turn, quirks on or off.

BFCL's ``multi_turn_checker`` runs the model's calls of a turn on the model's instances,
then the turn's ground truth on the gold's instances, and compares (the state check, the
response check). Three things it does make some wrong trajectories pass (or, in principle,
right ones fail); they are its **quirks** (:data:`QUIRKS`):

* ``shared_data``: in long-context tasks, TravelAPI puts module-level credit-card and
  booking dicts into every instance by reference, so the model's and the gold's instances
  hold the same card objects: an extra ``purchase_insurance`` on a distractor card changes
  the gold's card too, and the state check cannot see it (50 tasks);
* ``shared_defaults``: ``post_tweet(content, tags=[], mentions=[])``: Python makes each
  default list once per process and the tweet keeps it, so every tweet posted without
  ``mentions`` holds the same list, the model's and the gold's alike; a ``mention`` on one
  extends them all (156 tasks involve TwitterAPI);
* ``call_text``: the executor's rewrite of the call string reaches into argument text
  (``word (`` becomes ``word(``; a method name of an involved class before ``(`` gets the
  instance's name in front, which differs between the model's and the gold's instances).

A :class:`Judge` is that checker over one episode with some quirks: :data:`OFFICIAL` (all:
BFCL's verdicts, what its leaderboard reports) or :data:`STRICT` (none: the correct
verdicts). Sharing is reproduced per episode, never between episodes: each judge's worlds
are fresh, and what they share is fresh for the pair. Where the two verdicts part,
:func:`explain` replays the episode with one quirk at a time to say which quirk did it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from functools import lru_cache
from typing import Any

from environments.bfcl.apis import (
    CallResult,
    GoldCache,
    GoldRun,
    World,
    functions_of,
    has_mutable_defaults,
    new_pair,
    new_world,
    shares_data,
    unknown_function,
)
from environments.bfcl.reading import Reading, reader
from environments.bfcl.tasks import BFCLTask
from rods_env.episode import difference
from rods_env.task import ToolCall
from rods_env.tools import FrozenDict

QUIRKS: Mapping[str, str] = FrozenDict(
    shared_data=(
        "in BFCL's checker the model's and the gold's long-context TravelAPI instances hold "
        "the same credit-card and booking objects, so a change to one shows in both"
    ),
    shared_defaults=(
        "in BFCL's checker every tweet posted without mentions (or tags), the model's and "
        "the gold's, holds the same default list, so a mention on one extends all of them"
    ),
    call_text=(
        "BFCL's checker rewrites argument text: 'word (' becomes 'word(' and a method name "
        "before '(' gets an instance name (the model's and the gold's differ)"
    ),
)
"""The quirks of BFCL's checker that change verdicts, and what each does."""

OFFICIAL: frozenset[str] = frozenset(QUIRKS)
"""Every quirk: BFCL's own verdicts (its leaderboard's)."""

STRICT: frozenset[str] = frozenset()
"""No quirk: the correct verdicts."""

VERDICTS: Mapping[str, frozenset[str]] = FrozenDict(official=OFFICIAL, strict=STRICT)
"""The verdicts an environment gives, by name (``BFCLEnv(verdicts=...)``)."""

FAILURE_RULES: Mapping[str, str] = FrozenDict(
    no_call="no function was called in this turn",
    state_mismatch="the state differs from the gold's after this turn",
    missing_result="a gold result is not among the results so far",
    not_reached="the conversation ended before this turn",
)
"""The rules of BFCL's checker a turn can break, in words (``failures`` in turn results)."""


def gold_calls(task: BFCLTask, quirks: Collection[str]) -> tuple[tuple[ToolCall, ...], ...]:
    """The ground truth as the judge runs it: parsed (:attr:`BFCLTask.gold`), or, with
    ``call_text``, as BFCL's checker reads it (rewritten with the gold's instance names;
    the same calls for every one of BFCL's 800 tasks)."""
    if "call_text" not in quirks:
        return task.gold
    return _checker_gold(task.id, task.classes, task.ground_truth)


@lru_cache(maxsize=4096)
def _checker_gold(
    task_id: str, classes: tuple[str, ...], ground_truth: tuple[tuple[str, ...], ...]
) -> tuple[tuple[ToolCall, ...], ...]:
    read = reader(task_id, classes, gold=True).read_gold
    return tuple(tuple(read(text) for text in turn) for turn in ground_truth)


class Judge:
    """BFCL's checker over one episode, turn by turn and without its early return, with the
    quirks ``quirks``: the model's calls run on the judge's own model world as they come
    (:meth:`run`), and :meth:`close` checks a turn after running its gold.

    Args:
        task: The task.
        quirks: Which of :data:`QUIRKS` to reproduce.
        gold_cache: Where replays of the gold are kept (used when the gold does not depend
            on the model's calls: no sharing in play).
    """

    def __init__(self, task: BFCLTask, quirks: Collection[str], gold_cache: GoldCache) -> None:
        self.task = task
        self.quirks = frozenset(quirks)
        scenario = task.scenario
        share_data = "shared_data" in self.quirks and shares_data(scenario)
        share_defaults = "shared_defaults" in self.quirks and has_mutable_defaults(task.classes)
        calls = gold_calls(task, self.quirks)
        self._live: World | None = None
        self._cached: GoldRun | None = None
        if share_data or share_defaults:
            self.world, self._live = new_pair(
                scenario, share_data=share_data, share_defaults=share_defaults
            )
        else:
            self.world = new_world(scenario)
            variant = "" if calls == task.gold else "checker"
            key = (task.id, task.config, task.ground_truth, variant)
            self._cached = gold_cache.get(key, scenario, calls)
        self._gold_calls = calls
        self._gold_allowed = frozenset(functions_of(task.classes))
        self._checked = sum(1 for turn in calls if turn)
        self.counts: Counter[str] = Counter()
        self.passed = 0
        self.turns: list[dict[str, Any]] = []

    @property
    def gold(self) -> GoldRun:
        """The cached gold replay (a judge whose gold runs live, beside the model's calls,
        has none)."""
        if self._cached is None:
            raise RuntimeError("this judge runs its gold live: it has no cached replay")
        return self._cached

    @property
    def progress(self) -> float:
        """The share of checked turns passed so far."""
        return self.passed / self._checked if self._checked else 0.0

    def run(self, reading: Reading, allowed: Collection[str]) -> CallResult:
        """Run one of the model's calls on the judge's model world; its result text joins the
        results so far.

        Args:
            reading: The call as BFCL reads it.
            allowed: The functions callable now.
        """
        if reading.function is None:
            result = unknown_function(reading.name, reading.error)
        else:
            arguments = reading.checked if "call_text" in self.quirks else reading.arguments
            result = self.world.call(reading.function, arguments, allowed)
        self.counts[result.text] += 1
        return result

    def close(self, turn: int, called: bool) -> dict[str, Any]:
        """Check turn ``turn`` after the model's calls of it (BFCL runs the turn's gold calls
        now): ``{"checked", "passed", and for a checked turn "state_ok", "state_diff",
        "missing_results", "failures"}``.

        Args:
            turn: The turn's index (turns close in order).
            called: Whether the model made a call in the turn.
        """
        if self._live is not None:
            gold_results = [
                self._live.call(c.name, c.arguments, self._gold_allowed).text
                for c in self._gold_calls[turn]
            ]
            checked = bool(self._gold_calls[turn])
            gold_state: Mapping[str, Mapping[str, Any]] | None = (
                self._live.state() if checked else None
            )
        else:
            assert self._cached is not None
            gold = self._cached.turns[turn]
            gold_results, gold_state, checked = list(gold.results), gold.state, gold.checked
        result: dict[str, Any] = {"checked": checked, "passed": True}
        if gold_state is not None:
            diff = self.world.differences(gold_state)
            counts = self.counts
            missing = [t for t, n in Counter(gold_results).items() if counts.get(t, 0) < n]
            passed = called and not diff and not missing
            self.passed += passed
            result.update(
                passed=passed,
                state_ok=not diff,
                state_diff={cls: list(attrs) for cls, attrs in diff.items()},
                missing_results=[text[:200] for text in missing],
                failures=_failures(called, diff, missing),
            )
        self.turns.append(result)
        return result


def failure(rule: str, values: Sequence[str] = ()) -> dict[str, Any]:
    """One broken rule of :data:`FAILURE_RULES` as a turn result lists it."""
    text = FAILURE_RULES[rule] + (f": {', '.join(values)}" if values else "")
    return {"rule": rule, "values": list(values), "text": text}


def _failures(
    called: bool, diff: Mapping[str, Sequence[str]], missing: Sequence[str]
) -> list[dict[str, Any]]:
    found = []
    if not called:
        found.append(failure("no_call"))
    if diff:
        found.append(
            failure("state_mismatch", [f"{c}.{a}" for c, attrs in diff.items() for a in attrs])
        )
    if missing:
        found.append(
            failure("missing_result", [t if len(t) <= 80 else t[:77] + "..." for t in missing])
        )
    return found


def replay_judge(
    task: BFCLTask,
    quirks: Collection[str],
    turns: Sequence[Sequence[Reading]],
    allowed: Sequence[Collection[str]],
    gold_cache: GoldCache,
) -> list[bool]:
    """Each reached turn's verdict under ``quirks`` for the calls ``turns`` (per reached
    turn, its readings in order; ``allowed`` the functions callable in it)."""
    judge = Judge(task, quirks, gold_cache)
    passes = []
    for t, (readings, callable_now) in enumerate(zip(turns, allowed, strict=True)):
        for reading in readings:
            judge.run(reading, callable_now)
        passes.append(bool(judge.close(t, bool(readings))["passed"]))
    return passes


def explain(
    task: BFCLTask,
    turns: Sequence[Sequence[Reading]],
    allowed: Sequence[Collection[str]],
    official: Sequence[bool],
    strict: Sequence[bool],
    gold_cache: GoldCache,
) -> list[dict[str, Any]]:
    """Where the official and the strict verdicts of the reached turns part, and why.

    Each quirk is replayed alone on the same calls; the quirks that alone give a turn its
    official verdict are named as its cause (all quirks in play when none does alone).

    Returns:
        Per differing turn: ``{"turn", "official", "strict", "quirks", "why"}``.
    """
    differing = [t for t, (a, b) in enumerate(zip(official, strict, strict=True)) if a != b]
    if not differing:
        return []
    alone = {q: replay_judge(task, {q}, turns, allowed, gold_cache) for q in QUIRKS}
    out = []
    for t in differing:
        causes = [q for q, passes in alone.items() if passes[t] == official[t]]
        why = (
            "; ".join(QUIRKS[q] for q in causes)
            if causes
            else ("the quirks together: " + "; ".join(QUIRKS.values()))
        )
        out.append(difference(t, official[t], strict[t], causes or list(QUIRKS), why))
    return out
