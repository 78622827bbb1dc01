"""Augment: derived variants whose semantics the environment and reward already enforce.

``missing_parameter``
    The first request that states a fact a gold call needs no longer states it; the fact
    is listed in :attr:`Turn.hidden_facts`. The :class:`~rods_env.user.ScriptedUser` tells
    a fact only when the agent's question names it, so the agent has to ask. The fact is
    chosen so that guessing fails: the gold calls replayed with a plausible wrong value
    (:func:`plausible_guesses`: another id of the same kind in the tool outputs, the same
    fact of another task, a near miss) leave a different state or lose a required output,
    or the tools reject every such guess (:func:`first_usable_guess`; else ``guess_passes``).
``missing_function``
    The first turn with a write is split in two. In the first copy its write tools are
    withheld (:attr:`Turn.withheld_tools`, removed from the tool list by the env), it has no
    gold calls (so any write is collateral and fails the turn) and one required output,
    :data:`CANNOT`: the agent must say it cannot do it. The second copy repeats the request
    with the tools back and the original gold calls.
``long_context``
    A controlled pair: the same task (requests, entities, gold calls, outputs) on a
    long-context size of the same world (``long-<n>k``: customers with long histories,
    products with many variants), kept when its gold tool outputs are at least
    :data:`LONG_MIN_RATIO` times as long as the base variant's (else ``not_longer``) and
    its gold changes the same records (else ``pair_mismatch``). The size knob (tokens of
    padding, up to model context lengths) picks the world.
``distractor``
    Sentences that compete with the request: another order or reservation of the customer
    (seen in the tool outputs, never used by the task), another date, and a second request
    that the policy forbids (the domain's :attr:`~rods_env.domain.Domain.forbidden_requests`).
    The gold is unchanged: acting on a competitor changes another record (collateral) and
    fails the turn. No sentence states a fact value (whole tokens).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from rods_env.domain import Domain
from rods_env.gold import Gold, replay_gold
from rods_env.leaves import value_leaves
from rods_env.padding import long_size_tokens
from rods_env.rewards import mentions
from rods_env.signature import compute_signature
from rods_env.synthesis.asking import kind as value_kind
from rods_env.synthesis.asking import no_ask_value, replay_variant, string_leaves
from rods_env.synthesis.execute import Candidate, replay
from rods_env.synthesis.plan import Reject
from rods_env.synthesis.rewrite import split_frame, strip_frame
from rods_env.synthesis.text import remove_value, states, text_problems
from rods_env.task import Signature, Task, ToolCall, Turn

AUGMENTS: tuple[str, ...] = ("missing_parameter", "missing_function", "long_context", "distractor")
"""The augmentation kinds, in the order the pipeline applies them."""

CANNOT = "cannot|can't|can’t|can not|unable|not able|not possible"
"""Required output of a withheld turn: the agent must tell the user it cannot do it now."""

LONG_SIZE = "long"
"""Size used by ``long_context`` in a domain without ``long-<n>k`` sizes."""

LONG_MIN_RATIO = 4.0
"""A long-context variant's tool outputs must be at least this many times the base's."""

LONG_TOKENS = 8000
"""Default size knob of ``long_context``: tokens of padding (4 characters a token)."""

_RETRY = (
    "Could you try again now?",
    "Let's try once more.",
    "Is it possible now? I still need this.",
    "Please try again, it's important to me.",
)


# -- missing parameter ---------------------------------------------------------------------
def needed_facts(task: Task, start: int = 0) -> list[str]:
    """Labels of facts that a gold call of turn ``start`` or later takes (string arguments).

    A fact is needed when one of its string argument values is part of the fact's value,
    the same rule the :class:`~rods_env.oracle.OracleAgent` uses to decide what to ask.
    """
    leaves = {
        leaf
        for turn in task.turns[start:]
        for c in turn.calls
        for leaf in string_leaves(c.arguments, keys=False)
    }
    return [
        label
        for label, value in task.user.facts.items()
        if value and any(leaf in value for leaf in leaves)
    ]


def near_miss(value: str) -> str:
    """A value that looks like ``value`` but differs in its last digit or letter."""
    chars = list(value)
    for i in range(len(chars) - 1, -1, -1):
        c = chars[i]
        if c.isdigit():
            chars[i] = str((int(c) + 1) % 10)
            return "".join(chars)
        if c.isalpha():
            base = "a" if c.islower() else "A"
            chars[i] = chr((ord(c) - ord(base) + 1) % 26 + ord(base))
            return "".join(chars)
    return value + "x"


def _substitute(value: Any, old: str, new: str) -> Any:
    if isinstance(value, dict):
        return {k: _substitute(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, old, new) for v in value]
    if isinstance(value, str) and value:
        if old in value:
            return value.replace(old, new)
        if value in old:  # part of the fact (e.g. one line of an address): a near miss of it
            return near_miss(value)
    return value


def guessed_calls(task: Task, label: str, guess: str) -> tuple[tuple[ToolCall, ...], ...]:
    """Every turn's gold calls as an agent that guessed ``guess`` for fact ``label`` makes them."""
    true = task.user.facts[label]
    return tuple(
        tuple(
            ToolCall(name=c.name, arguments=_substitute(c.arguments, true, guess))
            for c in turn.calls
        )
        for turn in task.turns
    )


def plausible_guesses(
    task: Task, gold: Gold, label: str, alternatives: Mapping[str, Sequence[str]] | None = None
) -> list[str]:
    """Wrong values an agent might fill in for fact ``label`` instead of asking, best first.

    Values of the same kind (length and character classes) that the agent sees in the gold
    calls' outputs (the customer's other orders or reservations), then the same fact of
    other tasks, then a near miss of the value.
    """
    value = task.user.facts[label]
    kind = value_kind(value)
    seen: dict[str, None] = {}
    for out in gold.call_outputs:
        for s in string_leaves(out):
            if len(s) == kind[0] and s != value and value_kind(s) == kind:
                seen[s] = None
    for s in sorted((alternatives or {}).get(label, ())):
        if s != value:
            seen[s] = None
    seen[near_miss(value)] = None
    return list(seen)


def guess_result(
    domain: Domain, task: Task, gold: Gold, label: str, guess: str, start: int
) -> bool | None:
    """What guessing ``guess`` for fact ``label`` instead of asking does to the task.

    The gold calls are replayed with the guess in place of the fact's value (everything else
    as in the gold). Returns None when a tool rejects the guessed calls (the guess cannot
    be used), True when from turn ``start`` on they leave a different effect or lose a
    required output (one that contains the true value, or one no longer found in the tool
    outputs from the first guessed call on), False when the guess gives the same result.
    """
    calls = guessed_calls(task, label, guess)
    flat_new = [c for turn in calls for c in turn]
    changed = [k for k, (a, b) in enumerate(zip(task.gold_calls, flat_new, strict=True)) if a != b]
    if not changed:
        return False
    first = changed[0]
    true = task.user.facts[label]
    trial = task.model_copy(
        update={
            "turns": tuple(
                t.model_copy(update={"calls": c}) for t, c in zip(task.turns, calls, strict=True)
            )
        }
    )
    other = replay_variant(domain, trial)
    if other is None:  # the tools reject it: the guess cannot be used
        return None
    k = 0
    for i, (turn, tg, og) in enumerate(zip(task.turns, gold.turns, other.turns, strict=True)):
        n = len(turn.calls)
        if i >= start:
            if tg.effect != og.effect:
                return True
            if any(true in out for out in tg.outputs):
                return True
            seen = repr(other.call_outputs[max(k, first) : k + n])
            if any(not mentions(seen, out) for out in tg.outputs):
                return True
        k += n
    return False


GUESSES_TRIED = 4
"""Plausible guesses replayed per fact before deciding whether guessing fails."""


def first_usable_guess(
    domain: Domain, task: Task, gold: Gold, label: str, start: int, guesses: Sequence[str]
) -> tuple[str | None, bool]:
    """The first guess the tools accept, and whether it fails the task.

    Returns ``(None, True)`` when the tools reject every guess tried: an agent that guesses
    cannot complete the task.
    """
    for guess in guesses[:GUESSES_TRIED]:
        result = guess_result(domain, task, gold, label, guess, start)
        if result is not None:
            return guess, result
    return None, True


def missing_parameter(
    domain: Domain,
    cand: Candidate,
    rng: random.Random,
    alternatives: Mapping[str, Sequence[str]] | None = None,
    prefer: Sequence[str] = (),
) -> Candidate:
    """Hide from the first request a fact a gold call needs (see the module docstring).

    Args:
        domain: The domain.
        cand: An accepted base candidate.
        rng: The augmentation's generator.
        alternatives: Fact label -> values of that fact in other tasks (plausible guesses).
        prefer: Labels to try first (the seed's hidden facts, when resampling one).

    Raises:
        Reject: ``augment_unavailable`` when no request states a needed fact;
            ``guess_passes`` when every hideable fact can be guessed without failing.
    """
    task = cand.task
    facts = task.user.facts
    options: list[tuple[int, str]] = []
    for t, turn in enumerate(task.turns):
        earlier = " ".join(x.request for x in task.turns[:t])
        for label in needed_facts(task, t):
            value = facts[label]
            if states(turn.request, value) and not states(earlier, value):
                options.append((t, label))
        if options:
            break
    if not options:
        raise Reject("augment_unavailable", "missing_parameter: no request states a needed fact")
    rng.shuffle(options)
    # Ids first (values with digits): a name or a code can often be inferred from the rest of
    # the request ("Dallas (DFW)"), an order number cannot.
    options.sort(key=lambda o: (o[1] not in prefer, not any(ch.isdigit() for ch in facts[o[1]])))
    verdicts: list[str] = []
    for t, label in options[:3]:
        value = facts[label]
        turns = list(task.turns)
        request = remove_value(turns[t].request, value, label)
        if states(request, value):
            continue
        problems = text_problems(request)
        if problems:
            verdicts.append(f"without {label}: {problems[0]}")
            continue
        hidden = tuple(
            lb
            for lb, v in facts.items()
            if v and states(turns[t].request, v) and not states(request, v)
        )
        turns[t] = turns[t].model_copy(update={"request": request, "hidden_facts": hidden})
        new = task.model_copy(update={"turns": tuple(turns), "variant": "missing_parameter"})
        solved = no_ask_value(domain, new, cand.gold)
        if solved is not None:
            verdicts.append(f"an agent that never asks finds {solved}")
            continue
        guesses = plausible_guesses(task, cand.gold, label, alternatives)
        _, fails = first_usable_guess(domain, task, cand.gold, label, t, guesses)
        if not fails:
            verdicts.append(f"guessing {label} does not fail")
            continue
        return Candidate(task=new, gold=cand.gold, plan=cand.plan)
    reason = "guess_passes" if all(v.startswith("guessing") for v in verdicts) else "no_ask_passes"
    raise Reject(reason, "missing_parameter: " + "; ".join(verdicts or ["no fact could be hidden"]))


# -- missing function ----------------------------------------------------------------------
def missing_function(domain: Domain, cand: Candidate, rng: random.Random) -> Candidate:
    """Withhold the write tools of the first writing turn for one turn (module docstring).

    Raises:
        Reject: ``augment_unavailable`` when no turn writes.
    """
    task = cand.task
    writes = domain.toolkit.write_names()
    for t, turn in enumerate(task.turns):  # noqa: B007 - t and turn are used after the loop
        withheld = sorted({c.name for c in turn.calls if c.name in writes})
        if withheld:
            break
    else:
        raise Reject("augment_unavailable", "missing_function: no turn writes")
    blocked = Turn(request=turn.request, outputs=(CANNOT,), withheld_tools=tuple(withheld))
    again = turn.model_copy(update={"request": f"{rng.choice(_RETRY)} {strip_frame(turn.request)}"})
    turns = (*task.turns[:t], blocked, again, *task.turns[t + 1 :])
    new = task.model_copy(update={"turns": turns, "variant": "missing_function"})
    gold, new = replay(domain, new)
    return Candidate(task=new, gold=gold, plan=cand.plan)


# -- long context --------------------------------------------------------------------------
def long_sizes(domain: Domain) -> list[tuple[int, str]]:
    """The domain's long-context sizes as ``(tokens, size)``, smallest first.

    Sizes named ``long-<n>k`` (see :mod:`rods_env.padding`); a domain with none but a
    ``long`` size offers that one (tokens unknown: 0).
    """
    ladder = sorted(
        (tokens, size) for size in domain.sizes if (tokens := long_size_tokens(size)) is not None
    )
    if not ladder and LONG_SIZE in domain.sizes:
        ladder = [(0, LONG_SIZE)]
    return ladder


def long_context(
    domain: Domain,
    cand: Candidate,
    rng: random.Random,
    min_ratio: float = LONG_MIN_RATIO,
    tokens: int = LONG_TOKENS,
) -> Candidate:
    """The same task on a long-context world: a controlled pair of ``cand``.

    The requests, user, gold calls and required outputs stay as they are; only the
    database changes, to a long size of the same world (the same records, with long
    histories and more variants), so the tool outputs grow and nothing else does. The
    smallest long size of at least ``tokens`` tokens is tried first, then larger ones,
    until the gold's tool outputs are ``min_ratio`` times the base's.

    Args:
        domain: The domain.
        cand: An accepted base candidate (on the ``default`` world).
        rng: Unused: the pair draws nothing new (kept for the augmentation interface).
        min_ratio: How many times longer than the base's its tool outputs must be.
        tokens: The size knob: tokens (4 characters each) of padding wanted.

    Raises:
        Reject: ``augment_unavailable`` when the domain has no long size;
            ``execution_error`` when a gold call fails on the long world; ``pair_mismatch``
            when the gold changes other records there; ``not_longer`` when no long size
            makes the outputs long enough.
    """
    del rng
    ladder = long_sizes(domain)
    if not ladder:
        raise Reject("augment_unavailable", f"long_context: domain {domain.name} has no long size")
    wanted = [size for t, size in ladder if t >= tokens] or [ladder[-1][1]]
    base = output_chars(cand.gold)
    long = 0
    for size in wanted:
        task = cand.task.model_copy(update={"db_size": size, "variant": "long_context"})
        try:
            gold = replay_gold(domain, task)
        except Exception as exc:  # GoldError, or a tool bug: the pair is not valid there
            raise Reject("execution_error", f"long_context on {size}: {exc}") from None
        for i, (a, b) in enumerate(zip(cand.gold.turns, gold.turns, strict=True)):
            if set(a.effect) != set(b.effect):
                raise Reject(
                    "pair_mismatch",
                    f"long_context on {size}: turn {i} changes "
                    f"{sorted(map('/'.join, set(b.effect) ^ set(a.effect)))[:3]} unlike the base",
                )
        texts = [json.dumps(v, ensure_ascii=False) for v in gold.call_outputs]
        long = sum(map(len, texts))
        if long >= min_ratio * base:
            task = task.model_copy(
                update={
                    "signature": paired_signature(domain, cand.task, cand.gold, task, gold, texts)
                }
            )
            plan = replace(cand.plan, db_size=size)
            return Candidate(task=task, gold=gold, plan=plan)
    raise Reject(
        "not_longer",
        f"long_context: tool outputs of {long:,} characters on {wanted[-1]}, {base:,} in the "
        f"base variant (needs {min_ratio:g}x)",
    )


def paired_signature(
    domain: Domain, base: Task, base_gold: Gold, task: Task, gold: Gold, texts: Sequence[str]
) -> Signature:
    """The signature of ``task``, the same calls as ``base`` on a larger world.

    Exactly :func:`~rods_env.signature.compute_signature`, without tracing the value flow
    through thousands of padded values when it can be shown unchanged: each argument value
    still occurs in the output it came from in the base, and in no output between that one
    and its call (``texts``: the outputs as JSON). Otherwise the flow is traced in full.
    """
    writes = domain.toolkit.write_names()
    assert base.signature is not None and base.gold_calls == task.gold_calls
    facts = list(task.user.facts.values())
    produced = [value_leaves(out) for out in base_gold.call_outputs]
    for j, call in enumerate(task.gold_calls):
        for leaf in value_leaves(call.arguments):
            if any(mentions(fact, leaf) for fact in facts):
                continue
            source = next((i for i in range(j - 1, -1, -1) if leaf in produced[i]), -1)
            needle = json.dumps(leaf, ensure_ascii=False)[1:-1] if isinstance(leaf, str) else leaf
            if source >= 0 and needle not in texts[source]:
                return compute_signature(task, gold, writes)
            if any(needle in texts[i] for i in range(source + 1, j)):
                return compute_signature(task, gold, writes)
    return base.signature


def output_chars(gold: Gold) -> int:
    """Characters of every gold call's output as JSON: the tool-output text an agent reads."""
    return sum(len(json.dumps(v, ensure_ascii=False)) for v in gold.call_outputs)


# -- distractor ----------------------------------------------------------------------------
_DISTRACTORS = (
    "By the way, I'm writing from my phone, so sorry for any typos.",
    "I tried to get in touch earlier but got distracted by {chore}.",
    "It's {weather} here in {city} today.",
    "My cousin {name} had a similar question a while ago, but that was a different matter.",
    "I've got {n} things on my to-do list today, so I'm trying to be quick.",
    "Funny enough, my {relative} just started a new job in {city}.",
    "I'm also planning a {event} for next month, but that's not why I'm here.",
    "Last {day} I spent the whole afternoon {chore}.",
    "My {relative} says hello, by the way.",
    "I read somewhere that {city} is lovely in the spring.",
)
_FILL: dict[str, tuple[str, ...]] = {
    "chore": ("fixing a leaky tap", "walking the dog", "cleaning the garage", "baking bread"),
    "weather": ("raining", "sunny", "freezing", "really windy"),
    "city": ("Lisbon", "Osaka", "Nairobi", "Montreal", "Oslo", "Lima"),
    "name": ("Priya", "Tomasz", "Aiko", "Mateo", "Fatima", "Lars"),
    "n": ("three", "four", "a dozen", "twenty"),
    "relative": ("sister", "uncle", "neighbour", "grandmother"),
    "event": ("birthday party", "garden barbecue", "book club meeting"),
    "day": ("Sunday", "Tuesday", "weekend"),
}


def distractor_sentence(rng: random.Random) -> str:
    """One irrelevant sentence."""
    template = rng.choice(_DISTRACTORS)
    return re.sub(r"\{(\w+)\}", lambda m: rng.choice(_FILL[m.group(1)]), template)


_COMPETING = (
    "I also have {noun} {value}, but that one is fine, so please leave it as it is.",
    "Just to be clear, it's not about {noun} {value}; that one is all sorted.",
    "My other {noun}, {value}, is fine as it is.",
)
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_SPOKEN_DATE = re.compile(r"\b(" + "|".join(_MONTHS) + r") (\d{1,2})\b")
_OTHER_DATE = (
    "{date} would not work for me, by the way.",
    "I had thought about {date} at first, but that's not what I want.",
)


def _noun(label: str) -> str | None:
    """The noun a fact label names its value with ("order id" -> "order")."""
    for word in re.findall(r"[a-z]+", label.lower()):
        if word in ("order", "reservation", "booking", "account", "flight", "card"):
            return word
    return None


def competing_sentences(task: Task, gold: Gold, turn: int, rng: random.Random) -> list[str]:
    """Sentences that mention a value competing with one the request states.

    Another value of the same kind as a fact the request states, that the agent will see in
    the tool outputs (the customer's other orders or reservations) but that the task never
    uses; or another date next to a date the request states. A careless agent acts on it.
    """
    facts = task.user.facts
    request = task.turns[turn].request
    used = {leaf for c in task.gold_calls for leaf in string_leaves(c.arguments, keys=False)}
    used.update(v for v in facts.values() if v)
    out: list[str] = []
    for label, value in facts.items():
        noun = _noun(label)
        if noun is None or not value or not states(request, value):
            continue
        kind = value_kind(value)
        others = sorted(
            {
                s
                for o in gold.call_outputs
                for s in string_leaves(o)
                if len(s) == kind[0]
                and value_kind(s) == kind
                and s not in used
                and not any(s in u for u in used)
            }
        )
        if others:
            template = rng.choice(_COMPETING)
            out.append(template.format(noun=noun, value=rng.choice(others)))
    m = _SPOKEN_DATE.search(request)
    if m:
        month = _MONTHS.index(m.group(1))
        day = int(m.group(2)) + rng.choice((-3, -2, -1, 1, 2, 3))
        if 1 <= day <= 28:
            other = f"{_MONTHS[month]} {day}"
            if not states(request, other):
                out.append(rng.choice(_OTHER_DATE).format(date=other))
    return out


def distractor(domain: Domain, cand: Candidate, rng: random.Random) -> Candidate:
    """Add sentences that compete with the request (see the module docstring).

    Each request gets one competing sentence when it can (another order or reservation of
    the customer, another date), the first request, when its turn writes, also a request
    the policy forbids (:attr:`~rods_env.domain.Domain.forbidden_requests`) or, failing
    both, small talk. A
    sentence that states a fact value (as a whole token) is never used.

    Raises:
        Reject: ``augment_unavailable`` when no request gets a competing sentence or a
            forbidden request.
    """
    task = cand.task
    values = [v for v in task.user.facts.values() if v]

    def clean(sentence: str) -> bool:  # states no fact value, as a whole token
        return not any(states(sentence, v) for v in values)

    forbidden: list[str] = []
    writes = domain.toolkit.write_names()
    # a second, forbidden request competes with an action; a turn that is itself a refusal
    # (no write) is left to say why it refuses only what it was asked
    acts = any(c.name in writes for c in task.turns[0].calls)
    if domain.forbidden_requests is not None and acts:
        db = domain.database(task.db_seed, task.db_size)
        forbidden = list(domain.forbidden_requests(task, db, rng))
    turns = []
    competing = 0
    for i, turn in enumerate(task.turns):
        pool = [x for x in competing_sentences(task, cand.gold, i, rng) if clean(x)]
        before = [rng.choice(pool)] if pool else []
        # a second request about another record than the one just said to be fine
        named = {w for x in before for w in re.findall(r"[#\w]*\d\w*", x)}
        options = [f for f in forbidden if clean(f) and not any(w in f for w in named)]
        after = [rng.choice(options)] if i == 0 and options else []
        competing += bool(before) + bool(after)
        if i == 0 and not (before or after):
            talk = distractor_sentence(rng)
            before = [talk] if clean(talk) else []
        if rng.random() < 0.5:  # a competing value reads as well after the request
            after, before = before + after, []
        # inside the persona's opener and closer; a second request always comes after
        opener, core, closer = split_frame(turn.request)
        parts = [opener, *before, core, *after, closer]
        request = " ".join(p for p in parts if p)
        turns.append(turn.model_copy(update={"request": request}))
    if not competing:
        raise Reject(
            "augment_unavailable",
            "distractor: no competing value (another order, reservation or date) and no "
            "forbidden request for this task",
        )
    new = task.model_copy(update={"turns": tuple(turns), "variant": "distractor"})
    return Candidate(task=new, gold=cand.gold, plan=cand.plan)


# -- dispatch ------------------------------------------------------------------------------
AugmentFn = Callable[..., Candidate]


def apply_augment(
    kind: str,
    domain: Domain,
    cand: Candidate,
    rng: random.Random,
    *,
    alternatives: Mapping[str, Sequence[str]] | None = None,
    prefer: Sequence[str] = (),
    long_ratio: float = LONG_MIN_RATIO,
    long_tokens: int = LONG_TOKENS,
) -> Candidate:
    """Apply augmentation ``kind`` to a base candidate (see the module docstring).

    Raises:
        ValueError: for an unknown kind.
        Reject: when the augmentation does not apply or its result is invalid.
    """
    if kind == "missing_parameter":
        return missing_parameter(domain, cand, rng, alternatives, prefer)
    if kind == "missing_function":
        return missing_function(domain, cand, rng)
    if kind == "long_context":
        return long_context(domain, cand, rng, long_ratio, long_tokens)
    if kind == "distractor":
        return distractor(domain, cand, rng)
    raise ValueError(f"unknown augmentation '{kind}'; kinds: {', '.join(AUGMENTS)}")


def expected_signature(kind: str, base: Signature) -> Signature:
    """The signature an augmentation of a task with signature ``base`` must have.

    Only ``missing_function`` changes the structure: one more turn (the withheld one, with
    no calls), the same calls and value flow.
    """
    if kind == "missing_function":
        return base.model_copy(update={"turns": base.turns + 1})
    return base
