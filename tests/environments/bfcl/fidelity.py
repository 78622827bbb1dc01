"""The perturbation harness: edits of BFCL's gold trajectories, played through the environment
and scored by BFCL's own checker, verdict for verdict.

A hypothesis strategy (:func:`cases`) takes a task's ground truth and applies up to three
edits (:data:`EDITS`: values, argument presence and types, order, turn placement, repeats,
extra calls of any function of the task's classes, name and argument-name spellings,
number formats, the two sharing quirks' triggers, call-like argument text), then picks
how the calls are sent (:data:`FORMS`: ``<tool_call>`` text with the arguments as an
object or as a JSON string, OpenAI message dicts likewise) and how they are split into
steps (a turn's calls at once, one per step, or split at random).

:func:`compare` plays the case through :class:`~environments.bfcl.env.BFCLEnv` (default:
official verdicts) and hands the calls *as sent* to BFCL's own function-calling decoder
and checker (tests/environments/bfcl/official.py): the task verdict of
``multi_turn_checker`` and each checked turn's verdict from its loop without the early
return must equal the environment's. Where no argument text is rewritten by BFCL's
executor, the environment's strict verdicts are also compared with BFCL's executor run
without sharing (:func:`~tests.environments.bfcl.official.strict_turns`).
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st

from environments.bfcl.apis import functions, functions_of, replay
from environments.bfcl.env import BFCLEnv
from environments.bfcl.reading import reader
from environments.bfcl.tasks import BFCLTask
from rods_env.parsing import MAX_CALLS
from tests.environments.bfcl.official import (
    bfcl_convert,
    checker_verdict,
    official_turns,
    strict_turns,
)

MAX_STEPS = 20
"""BFCL's steps per turn (the 21st ends the conversation): cases stay within it."""


@dataclass(frozen=True)
class Call:
    """One call as the agent sends it (any name, any JSON arguments)."""

    name: str
    arguments: Mapping[str, Any]


@dataclass
class Case:
    """A trajectory to play: per turn, per step, calls; how they are sent; what was edited."""

    task: BFCLTask
    turns: list[list[list[Call]]]
    form: str
    edits: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        calls = [[[(c.name, dict(c.arguments)) for c in s] for s in t] for t in self.turns]
        return f"Case({self.task.id}, form={self.form}, edits={self.edits}, turns={calls})"


# -- values --------------------------------------------------------------------------------
WHITESPACE = (" ", "  ", "\t", "\n", "\r", "\f", "\v", "\u00a0", "\u3000", "\u2028", "\u200b")
"""Whitespace (and look-alikes) around names: some BFCL accepts, some it does not."""

UNKNOWN_NAMES = ("get_weather", "open_file", "list_files", "run_command", "submit_form")
"""Hallucinated function names (none is defined where BFCL evaluates a call)."""

WORDS = ("alpha", "report.txt", "temp", "x", "", "Hello (world)", "see ls() or cat(x)")
"""Extra string values; the last two are text BFCL's executor rewrites."""


def _pool(task: BFCLTask) -> dict[str, list[Any]]:
    """Values seen in the task's gold calls, by argument name (and all of them under "")."""
    pool: dict[str, list[Any]] = {"": []}
    for turn in task.gold:
        for call in turn:
            for key, value in call.arguments.items():
                pool.setdefault(key, []).append(value)
                pool[""].append(value)
    return pool


def _value(draw: Any, prop: Mapping[str, Any], pool: Sequence[Any]) -> Any:
    kind = prop.get("type")
    if pool and draw(st.booleans()):
        return draw(st.sampled_from(list(pool)))
    if kind == "integer":
        return draw(st.integers(-3, 12))
    if kind == "float":
        return draw(st.sampled_from((0.0, 1.5, 2.0, 10.0, 99.99)))
    if kind == "boolean":
        return draw(st.booleans())
    if kind == "array":
        return draw(st.lists(st.sampled_from(WORDS[:4]), max_size=2))
    if kind == "dict":
        return {}
    return draw(st.sampled_from(WORDS))


def _mutate(draw: Any, value: Any, pool: Sequence[Any]) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + draw(st.sampled_from((-2, -1, 1, 3)))
    if isinstance(value, float):
        return draw(st.sampled_from((value + 1.0, value * 1.5, -value, 0.0)))
    if isinstance(value, str):
        others = [v for v in pool if isinstance(v, str) and v != value]
        options = [value + "x", value.upper(), "", value + " ", *others[:5]]
        return draw(st.sampled_from(options))
    if isinstance(value, list):
        if value and draw(st.booleans()):
            return value[1:]
        return [*value, draw(st.sampled_from(WORDS[:4]))]
    return value


def _retype(draw: Any, value: Any) -> Any:
    """The same number in another form: ``2`` for ``2.0``, ``5.0`` for ``5``, a string."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return draw(st.sampled_from((float(value), str(value))))
    if isinstance(value, float):
        forms: list[Any] = [str(value), repr(value)]
        if value.is_integer():
            forms.append(int(value))
        return draw(st.sampled_from(forms))
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return [value]
        return int(number) if number.is_integer() else number
    if isinstance(value, list) and len(value) == 1:
        return value[0]
    return value


def _schema(name: str) -> Mapping[str, Any]:
    return functions()[name].doc["parameters"]


def _new_call(draw: Any, name: str, pool: Mapping[str, list[Any]]) -> Call:
    """A call of ``name`` with its required arguments (and some optional ones) drawn."""
    params = _schema(name)
    required = set(params.get("required", ()))
    args = {}
    for key, prop in params["properties"].items():
        if key in required or draw(st.booleans()):
            args[key] = _value(draw, prop, pool.get(key, []))
    return Call(name, args)


# -- edits ---------------------------------------------------------------------------------
Turns = list[list[Call]]
Edit = Callable[[Any, BFCLTask, Turns, Mapping[str, list[Any]]], bool]


def _pick_call(draw: Any, turns: Turns, need: Callable[[Call], bool] = bool) -> tuple[int, int]:
    spots = [(t, i) for t, calls in enumerate(turns) for i, c in enumerate(calls) if need(c)]
    return draw(st.sampled_from(spots)) if spots else (-1, -1)


def _with_args(turns: Turns, t: int, i: int, args: dict[str, Any]) -> None:
    turns[t][i] = Call(turns[t][i].name, args)


def edit_value(draw, task, turns, pool) -> bool:
    t, i = _pick_call(draw, turns, lambda c: bool(c.arguments))
    if t < 0:
        return False
    args = dict(turns[t][i].arguments)
    key = draw(st.sampled_from(sorted(args)))
    args[key] = _mutate(draw, args[key], pool.get(key, []))
    _with_args(turns, t, i, args)
    return True


def edit_drop_argument(draw, task, turns, pool) -> bool:
    t, i = _pick_call(draw, turns, lambda c: bool(c.arguments))
    if t < 0:
        return False
    args = dict(turns[t][i].arguments)
    del args[draw(st.sampled_from(sorted(args)))]
    _with_args(turns, t, i, args)
    return True


def edit_add_argument(draw, task, turns, pool) -> bool:
    """An optional argument given: its documented default, or a value."""

    def has_optional(c: Call) -> bool:
        return c.name in functions() and bool(_optional(c))

    t, i = _pick_call(draw, turns, has_optional)
    if t < 0:
        return False
    call = turns[t][i]
    key = draw(st.sampled_from(_optional(call)))
    prop = _schema(call.name)["properties"][key]
    value = prop["default"] if "default" in prop and draw(st.booleans()) else None
    if value is None:
        value = _value(draw, prop, pool.get(key, []))
    _with_args(turns, t, i, {**call.arguments, key: value})
    return True


def _optional(call: Call) -> list[str]:
    params = _schema(call.name)
    required = set(params.get("required", ()))
    return sorted(k for k in params["properties"] if k not in required and k not in call.arguments)


def edit_number_format(draw, task, turns, pool) -> bool:
    t, i = _pick_call(
        draw, turns, lambda c: any(isinstance(v, int | float | str) for v in c.arguments.values())
    )
    if t < 0:
        return False
    args = dict(turns[t][i].arguments)
    key = draw(st.sampled_from(sorted(args)))
    args[key] = _retype(draw, args[key])
    _with_args(turns, t, i, args)
    return True


def edit_swap(draw, task, turns, pool) -> bool:
    flat = [(t, i) for t, calls in enumerate(turns) for i in range(len(calls))]
    if len(flat) < 2:
        return False
    a = draw(st.integers(0, len(flat) - 2))
    (t1, i1), (t2, i2) = flat[a], flat[a + 1]
    turns[t1][i1], turns[t2][i2] = turns[t2][i2], turns[t1][i1]
    return True


def edit_move_next(draw, task, turns, pool) -> bool:
    t, i = _pick_call(draw, turns[:-1])
    if t < 0:
        return False
    turns[t + 1].insert(0, turns[t].pop(i))
    return True


def edit_move_previous(draw, task, turns, pool) -> bool:
    t, i = _pick_call(draw, turns)
    if t <= 0:
        return False
    turns[t - 1].append(turns[t].pop(i))
    return True


def edit_repeat(draw, task, turns, pool) -> bool:
    t, i = _pick_call(draw, turns)
    if t < 0:
        return False
    turns[t].insert(draw(st.integers(i + 1, len(turns[t]))), turns[t][i])
    return True


def edit_drop_call(draw, task, turns, pool) -> bool:
    t, i = _pick_call(draw, turns)
    if t < 0:
        return False
    del turns[t][i]
    return True


def edit_omit_turn(draw, task, turns, pool) -> bool:
    full = [t for t, calls in enumerate(turns) if calls]
    if not full:
        return False
    turns[draw(st.sampled_from(full))].clear()
    return True


def edit_extra_call(draw, task, turns, pool) -> bool:
    """A call of any function of the task's classes (a read or a write), anywhere."""
    name = draw(st.sampled_from(functions_of(task.classes)))
    t = draw(st.integers(0, len(turns) - 1))
    turns[t].insert(draw(st.integers(0, len(turns[t]))), _new_call(draw, name, pool))
    return True


def edit_error_first(draw, task, turns, pool) -> bool:
    """A call that errors (required arguments left out) at the start of a turn."""
    names = [n for n in functions_of(task.classes) if _schema(n).get("required")]
    if not names:
        return False
    t = draw(st.integers(0, len(turns) - 1))
    turns[t].insert(0, Call(draw(st.sampled_from(names)), {}))
    return True


def edit_hallucinated(draw, task, turns, pool) -> bool:
    t = draw(st.integers(0, len(turns) - 1))
    turns[t].insert(0, Call(draw(st.sampled_from(UNKNOWN_NAMES)), {"query": "x"}))
    return True


def _respell(draw: Any, name: str) -> str:
    how = draw(st.sampled_from(("case", "prefix", "space", "space", "fullwidth", "typo")))
    if how == "case":
        return draw(st.sampled_from((name.upper(), name.capitalize(), name.swapcase())))
    if how == "prefix":
        return draw(st.sampled_from(("functions.", "tools.", "default_api."))) + name
    if how == "space":
        before = draw(st.lists(st.sampled_from(WHITESPACE), max_size=2))
        after = draw(st.lists(st.sampled_from(WHITESPACE), max_size=2))
        return "".join(before) + name + "".join(after)
    if how == "fullwidth":
        k = draw(st.integers(0, len(name) - 1))
        char = name[k]
        wide = chr(ord(char) + 0xFEE0) if "!" <= char <= "~" else char
        return name[:k] + wide + name[k + 1 :]
    k = draw(st.integers(0, len(name) - 1))
    return name[:k] + name[k + 1 :] if len(name) > 2 else name + name[-1]


def edit_name_spelling(draw, task, turns, pool) -> bool:
    t, i = _pick_call(draw, turns)
    if t < 0:
        return False
    call = turns[t][i]
    turns[t][i] = Call(_respell(draw, call.name), call.arguments)
    return True


def edit_key_spelling(draw, task, turns, pool) -> bool:
    t, i = _pick_call(draw, turns, lambda c: bool(c.arguments))
    if t < 0:
        return False
    args = dict(turns[t][i].arguments)
    key = draw(st.sampled_from(sorted(args)))
    value = args.pop(key)
    args[_respell(draw, key)] = value
    _with_args(turns, t, i, args)
    return True


def edit_guess_in_empty_turn(draw, task, turns, pool) -> bool:
    """In a turn whose gold is empty, the next checked turn's calls (maybe with a wrong
    value), redone in their own turn."""
    gold = task.gold
    empty = [t for t in range(len(turns) - 1) if not gold[t]]
    if not empty:
        return False
    t = draw(st.sampled_from(empty))
    nxt = next((j for j in range(t + 1, len(gold)) if gold[j]), None)
    if nxt is None:
        return False
    guess = [Call(c.name, dict(c.arguments)) for c in gold[nxt]]
    if guess and guess[0].arguments and draw(st.booleans()):
        key = sorted(guess[0].arguments)[0]
        value = _mutate(draw, guess[0].arguments[key], pool.get(key, []))
        guess[0] = Call(guess[0].name, {**guess[0].arguments, key: value})
    turns[t].extend(guess)
    return True


def edit_mention_next_turn(draw, task, turns, pool) -> bool:
    """An unrequested ``mention`` at the start of the turn after a ``post_tweet``."""
    posts = [t for t, calls in enumerate(turns[:-1]) if any(c.name == "post_tweet" for c in calls)]
    if not posts:
        return False
    t = draw(st.sampled_from(posts))
    ids = _posted_ids(task) or [v for v in pool.get("tweet_id", []) if isinstance(v, int)] or [0]
    call = Call("mention", {"tweet_id": draw(st.sampled_from(ids)), "mentioned_usernames": ["@x"]})
    turns[t + 1].insert(0, call)
    return True


@lru_cache(maxsize=1024)
def _posted_ids(task: BFCLTask) -> list[int]:
    """The ids of the tweets the task's gold posts."""
    run = replay(task.scenario, task.gold)
    ids = []
    for gold, calls in zip(run.turns, task.gold, strict=True):
        for call, text in zip(calls, gold.results, strict=True):
            if call.name == "post_tweet" and text.startswith("{"):
                ids.append(int(json.loads(text)["id"]))
    return ids


def edit_distractor_insurance(draw, task, turns, pool) -> bool:
    """An extra ``purchase_insurance`` charged to a long-context distractor card."""
    if not (task.long_context and "TravelAPI" in task.classes):
        return False
    from bfcl_eval.eval_checker.multi_turn_eval.func_source_code.long_context import (
        BOOKING_RECORD_EXTENSION,
        CREDIT_CARD_EXTENSION,
    )

    tokens = pool.get("access_token") or ["abc123xyz"]
    bookings = [*pool.get("booking_id", []), *sorted(BOOKING_RECORD_EXTENSION)[:2]]
    call = Call(
        "purchase_insurance",
        {
            "access_token": draw(st.sampled_from(tokens)),
            "insurance_type": "comprehensive",
            "booking_id": draw(st.sampled_from(bookings)),
            "insurance_cost": draw(st.sampled_from((25.0, 100.0))),
            "card_id": draw(st.sampled_from(sorted(CREDIT_CARD_EXTENSION)[:6])),
        },
    )
    first = next(
        (
            t
            for t, calls in enumerate(task.gold)
            if any("access_token" in c.arguments for c in calls)
        ),
        0,
    )
    t = draw(st.integers(first, len(turns) - 1))
    turns[t].append(call)
    return True


def edit_call_like_text(draw, task, turns, pool) -> bool:
    """Text BFCL's executor rewrites, put into a string argument."""
    t, i = _pick_call(draw, turns, lambda c: any(isinstance(v, str) for v in c.arguments.values()))
    if t < 0:
        return False
    args = dict(turns[t][i].arguments)
    key = draw(st.sampled_from(sorted(k for k, v in args.items() if isinstance(v, str))))
    method = draw(st.sampled_from(functions_of(task.classes)))
    args[key] += draw(st.sampled_from((" (note)", f" {method}()", f" then {method} (now)")))
    _with_args(turns, t, i, args)
    return True


EDITS: Mapping[str, Edit] = {
    "value": edit_value,
    "drop_argument": edit_drop_argument,
    "add_argument": edit_add_argument,
    "number_format": edit_number_format,
    "swap": edit_swap,
    "move_next": edit_move_next,
    "move_previous": edit_move_previous,
    "repeat": edit_repeat,
    "drop_call": edit_drop_call,
    "omit_turn": edit_omit_turn,
    "extra_call": edit_extra_call,
    "error_first": edit_error_first,
    "hallucinated": edit_hallucinated,
    "name_spelling": edit_name_spelling,
    "key_spelling": edit_key_spelling,
    "guess_in_empty_turn": edit_guess_in_empty_turn,
    "mention_next_turn": edit_mention_next_turn,
    "distractor_insurance": edit_distractor_insurance,
    "call_like_text": edit_call_like_text,
}
"""The edits, by name; each returns False when it does not apply to the task."""


def applicable_edits(task: BFCLTask) -> list[str]:
    """The edits that can change ``task``'s gold, the targeted ones (those that trigger a
    quirk of BFCL's checker or a turn without gold) listed three times."""
    gold = task.gold
    names = [n for n in EDITS if n not in TARGETED]
    if any(
        call.name in functions() and _optional(Call(call.name, call.arguments))
        for t in gold
        for call in t
    ):
        names.append("add_argument")
    targeted = []
    if any(c.name == "post_tweet" for calls in gold[:-1] for c in calls):
        targeted.append("mention_next_turn")
    if task.long_context and "TravelAPI" in task.classes:
        targeted.append("distractor_insurance")
    if any(not gold[t] and any(gold[t + 1 :]) for t in range(len(gold))):
        targeted.append("guess_in_empty_turn")
    return names + 3 * targeted


TARGETED = ("add_argument", "mention_next_turn", "distractor_insurance", "guess_in_empty_turn")
"""Edits that apply to some tasks only (:func:`applicable_edits`)."""

FORMS = ("text", "text_string_arguments", "message", "message_objects")
"""How a step's calls are sent: ``<tool_call>`` blocks, their arguments an object or a JSON
string; an OpenAI message dict, its arguments a JSON string or an object."""


def _steps(draw: Any, calls: list[Call]) -> list[list[Call]]:
    if not calls:
        return []
    how = draw(st.sampled_from(("turn", "call", "random")))
    if how == "call" and len(calls) <= MAX_STEPS:
        return [[c] for c in calls]
    if how == "random" and len(calls) <= MAX_STEPS:
        cuts = (
            sorted(draw(st.sets(st.integers(1, len(calls) - 1), max_size=4)))
            if len(calls) > 1
            else []
        )
        bounds = [0, *cuts, len(calls)]
        return [calls[a:b] for a, b in itertools.pairwise(bounds)]
    return [calls[i : i + MAX_CALLS] for i in range(0, len(calls), MAX_CALLS)]


@st.composite
def case_of(draw: Any, task: BFCLTask, min_edits: int = 1, max_edits: int = 3) -> Case:
    """An edited gold trajectory of ``task`` (no edit: the gold itself, sent in a form)."""
    pool = _pool(task)
    turns: Turns = [[Call(c.name, dict(c.arguments)) for c in calls] for calls in task.gold]
    applied = []
    names = applicable_edits(task)
    for name in draw(st.lists(st.sampled_from(names), min_size=min_edits, max_size=max_edits)):
        if EDITS[name](draw, task, turns, pool):
            applied.append(name)
    form = draw(st.sampled_from(FORMS))
    return Case(task, [_steps(draw, calls) for calls in turns], form, applied)


def gold_case(task: BFCLTask, form: str) -> Case:
    """The task's gold, each turn's calls at once (in steps of at most 16 calls, one
    action's bound)."""
    turns = [[Call(c.name, dict(c.arguments)) for c in calls] for calls in task.gold]
    steps = [[calls[i : i + MAX_CALLS] for i in range(0, len(calls), MAX_CALLS)] for calls in turns]
    return Case(task, steps, form)


def cases(
    tasks: Sequence[BFCLTask], min_edits: int = 0, max_edits: int = 3
) -> st.SearchStrategy[Case]:
    """Edited gold trajectories of any of ``tasks``."""
    return st.sampled_from(list(tasks)).flatmap(lambda t: case_of(t, min_edits, max_edits))


# -- playing and comparing -----------------------------------------------------------------
def action(step: Sequence[Call], form: str) -> Any:
    """A step's calls as one action of the form ``form``."""
    if form.startswith("text"):
        blocks = []
        for c in step:
            args: Any = dict(c.arguments)
            if form == "text_string_arguments":
                args = json.dumps(args)
            blocks.append(
                f"<tool_call>{json.dumps({'name': c.name, 'arguments': args})}</tool_call>"
            )
        return "".join(blocks)
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": dict(c.arguments)
                    if form == "message_objects"
                    else json.dumps(dict(c.arguments)),
                },
            }
            for c in step
        ],
    }


def play(env: BFCLEnv, case: Case) -> dict[str, Any]:
    """The final info of ``case`` played through ``env``."""
    _, info = env.reset(options={"task": case.task})
    done = False
    while not done:
        for step in case.turns[int(info["turn"])]:
            _, _, terminated, truncated, info = env.step(action(step, case.form))
            assert not (terminated or truncated), "a case stays within BFCL's limits"
        _, _, terminated, truncated, info = env.step("Done.")
        done = terminated or truncated
    return info


def bfcl_decoded(case: Case) -> list[list[list[str]]]:
    """What BFCL's function-calling decoder makes of the calls as sent, per turn and step."""
    convert = bfcl_convert()
    out = []
    for steps in case.turns:
        decoded = []
        for step in steps:
            sent = [
                {
                    c.name: json.dumps(dict(c.arguments))
                    if "string" in case.form or case.form == "message"
                    else dict(c.arguments)
                }
                for c in step
            ]
            calls = convert(sent)
            if calls:
                decoded.append(calls)
        out.append(decoded)
    return out


@dataclass
class Tally:
    """Counts of a harness run."""

    trajectories: int = 0
    turn_verdicts: int = 0
    bfcl_passed: int = 0
    strict_compared: int = 0
    strict_turn_verdicts: int = 0
    official_strict_differ: int = 0
    by_edit: Counter[str] = field(default_factory=Counter)
    passed_by_edit: Counter[str] = field(default_factory=Counter)
    differ_by_edit: Counter[str] = field(default_factory=Counter)
    disagreements: list[str] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        """Add another tally's counts to this one."""
        for name, value in vars(other).items():
            mine = getattr(self, name)
            if isinstance(mine, Counter):
                mine.update(value)
            else:
                setattr(self, name, mine + value)


def compare(env: BFCLEnv, case: Case, tally: Tally) -> None:
    """Play ``case`` and hold the environment's verdicts against BFCL's; disagreements go
    into ``tally.disagreements``."""
    info = play(env, case)
    decoded = bfcl_decoded(case)
    official = checker_verdict(case.task, decoded)["valid"]
    turns = official_turns(case.task, decoded)
    ours = info["verdicts"]["official"]
    tally.trajectories += 1
    tally.bfcl_passed += bool(official)
    for name in case.edits or ["none"]:
        tally.by_edit[name] += 1
        tally.passed_by_edit[name] += bool(official)
        tally.differ_by_edit[name] += info["verdicts"]["strict"]["success"] != ours["success"]
    problems = []
    if ours["success"] != official or info["success"] != official:
        problems.append(f"task: rods {ours['success']}, BFCL {official}")
    if official != all(v is not False for v in turns):
        problems.append(f"BFCL's own task verdict {official} and its turn verdicts {turns} part")
    for t, verdict in enumerate(turns):
        if verdict is None:
            continue
        tally.turn_verdicts += 1
        if ours["turns"][t] != verdict:
            problems.append(f"turn {t}: rods {ours['turns'][t]}, BFCL {verdict}")
    strict = info["verdicts"]["strict"]
    tally.official_strict_differ += strict["success"] != ours["success"]
    read = reader(case.task.id, case.task.classes).read
    rewritten = any(
        read(c.name, c.arguments).rewritten for steps in case.turns for step in steps for c in step
    )
    if not rewritten:
        tally.strict_compared += 1
        for t, verdict in enumerate(strict_turns(case.task, decoded)):
            if verdict is None:
                continue
            tally.strict_turn_verdicts += 1
            if strict["turns"][t] != verdict:
                problems.append(
                    f"strict turn {t}: rods {strict['turns'][t]}, unshared BFCL {verdict}"
                )
    if problems:
        tally.disagreements.append(f"{case!r}: {'; '.join(problems)}")
