"""Structural signature of a task, from value-flow tracing of its executed gold calls.

An edge ``i -> j`` means an argument of gold call ``j`` is a value that gold call ``i``
returned (and that the user could not have said: values that appear in a user fact as a
whole token, with the matching rules of :func:`rods_env.rewards.mentions`, do not count as
flow). Leaves compared are strings of 3+ characters and numbers of magnitude >= 10,
so small quantities and flags do not create spurious edges.
"""

from __future__ import annotations

from collections.abc import Collection

from rods_env.gold import Gold
from rods_env.leaves import value_leaves
from rods_env.rewards import Said
from rods_env.task import Signature, Task

__all__ = ["compute_signature", "value_leaves"]


def compute_signature(task: Task, gold: Gold, write_tools: Collection[str]) -> Signature:
    """Compute the signature of ``task`` from its replayed ``gold``.

    Args:
        task: The task (its gold calls and user facts).
        gold: The result of :func:`rods_env.gold.replay_gold` for the task.
        write_tools: Names of the domain's write tools.
    """
    calls = task.gold_calls
    facts = [Said(v) for v in task.user.facts.values()]  # each fact analysed once
    # one text for a plain value: a whole token or number is said by some fact exactly when
    # the facts, one a line, say it (a line break bounds tokens and numbers)
    all_facts = Said("\n".join(task.user.facts.values()))

    def stated(leaf: str) -> bool:
        if leaf[:1] == "!" or "|" in leaf:  # read as a forbidden phrase or alternatives
            return any(fact.has(leaf) for fact in facts)
        return all_facts.has(leaf)

    produced = [value_leaves(out) for out in gold.call_outputs]
    parts = task.requests() if task.composed else []
    # the first call of the request each call belongs to
    opens = [0] * len(calls)
    for k, part in enumerate(parts):
        end = parts[k + 1].call if k + 1 < len(parts) else len(calls)
        for j in range(part.call, min(end, len(calls))):
            opens[j] = part.call
    edges: set[tuple[int, int]] = set()
    for j, call in enumerate(calls):
        for leaf in value_leaves(call.arguments):
            if stated(leaf):
                continue
            # within a request, a value comes from the latest call that returned it; a value
            # from an earlier request of a composed task, from the call that first returned
            # it (a user id that every later output repeats does not chain the requests)
            start = opens[j]
            source = next((i for i in range(j - 1, start - 1, -1) if leaf in produced[i]), None)
            if source is None:
                source = next((i for i in range(start) if leaf in produced[i]), None)
            if source is not None:
                edges.add((source, j))
    longest = [1] * len(calls)
    for i, j in sorted(edges, key=lambda e: e[1]):
        longest[j] = max(longest[j], longest[i] + 1)
    requests = skills = None
    if task.composed:
        parts = task.requests()
        opened = [0] * len(task.turns)
        for part in parts:
            if 0 <= part.turn < len(opened):
                opened[part.turn] += 1
        requests, skills = tuple(opened), tuple(p.skill for p in parts)
    return Signature(
        tools=tuple(c.name for c in calls),
        edges=tuple(sorted(edges)),
        depth=max(longest, default=0),
        writes=sum(1 for c in calls if c.name in write_tools),
        turns=len(task.turns),
        requests=requests,
        skills=skills,
    )
