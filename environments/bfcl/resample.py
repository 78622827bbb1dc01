"""Resampled variants of BFCL's train tasks: the paper's RODS synthesis on BFCL.

A variant keeps its parent's category, involved classes, turns and call structure (the same
functions in the same order in every turn, the same data flow from results to later
arguments) and draws new values for the entities of the initial state that the task names:

============================ =============================================================
class                        what is renamed (a consistent mapping, drawn per variant)
============================ =============================================================
GorillaFileSystem            every file and directory name of the tree, and the names the
                             gold creates (``mkdir``, ``touch``, ``mv``/``cp`` targets):
                             word by word (``final_report.pdf`` -> ``harbor_ledger.pdf``;
                             a word keeps its case, its plural and its extension; a word
                             the API classes' own code uses, such as ``log``, is kept)
TwitterAPI                   user names (the account, authors, commenters, followed and
                             mentioned users), the password
MessageAPI                   contact names (``user_map``)
TicketAPI                    the current user's name, ticket ids, ``ticket_login``'s user
                             name and password
TravelAPI                    card ids, booking ids, access token, the traveller's names, a
                             new card's number and holder, passport numbers, client ids
TradingBot                   stock symbols (not when the gold looks one up by company name
                             or sector: those tables are the class's own code)
every class                  numbers the user states that the gold passes on (amounts,
                             prices, litres...): nudged by up to a quarter, same type and
                             decimals (ids, small numbers and values read from an earlier
                             result are kept)
============================ =============================================================

The same mapping rewrites the initial configuration (keys, values, and names inside longer
texts such as file contents), the user's questions (whole names, case-insensitively and in
the case they are written in, plus a file's stem and its words spaced out: ``'final
report'``) and the gold call strings. Free texts (messages, tweets, ticket descriptions, grep
patterns), airports, dates, currencies and the classes' own vocabularies stay as they are.

**Validation** (each failure is a rejection with its reason, as rods' synthesis does):

* ``unchanged``: nothing the task names could be renamed;
* ``collision``: a drawn value already occurs in the task (or its long-context data);
* ``gold_error``: the variant's gold, replayed through BFCL's own API classes
  (:func:`environments.bfcl.apis.replay`), errs where the parent's did not (or the reverse);
* ``flow_changed``: a result-to-argument edge of the parent's gold (a later call passes a
  value an earlier result showed) is missing in the variant's, or a new one appears;
* ``checker``: the gold played as the agent in :class:`~environments.bfcl.env.BFCLEnv`
  does not pass BFCL's checker (official and strict verdicts);
* ``contamination``: :mod:`environments.bfcl.guard` finds the variant too close to a test
  task;
* ``duplicate``: the variant equals one already made or known.

A variant depends only on (parent, seed, number): :class:`BFCLResampler` has the shape of
:class:`rods_env.synthesis.Synthesizer` (``variants(parent)`` yields outcomes with
``accepted``, ``reason``, ``task``, ``key``; ``seen`` holds the dedupe keys).
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import random
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from environments.bfcl.apis import CLASS_MODULES, ERROR_PREFIX, api_class, new_world, replay
from environments.bfcl.resample_words import FIRST_NAMES, LAST_NAMES, WORDS
from environments.bfcl.tasks import BFCLTask, bfcl_task, task_index, task_view
from rods_env.task import Task, ToolCall
from rods_env.tools import FrozenDict

REASONS: tuple[str, ...] = (
    "not_train",
    "unchanged",
    "collision",
    "gold_error",
    "flow_changed",
    "checker",
    "contamination",
    "duplicate",
)
"""Why a candidate variant is rejected (see the module doc)."""

FS_PARAMS: frozenset[tuple[str, str]] = frozenset(
    {
        ("cat", "file_name"), ("cd", "folder"), ("cp", "source"), ("cp", "destination"),
        ("diff", "file_name1"), ("diff", "file_name2"), ("echo", "file_name"),
        ("grep", "file_name"), ("mkdir", "dir_name"), ("mv", "source"),
        ("mv", "destination"), ("rm", "file_name"), ("rmdir", "dir_name"),
        ("sort", "file_name"), ("tail", "file_name"), ("touch", "file_name"),
        ("wc", "file_name"), ("find", "name"), ("du", "path"), ("head", "file_name"),
    }
)  # fmt: skip
"""Gold arguments that name files and directories."""

NAMED_PARAMS: Mapping[tuple[str, str], str] = {
    ("authenticate_twitter", "username"): "handle",
    ("authenticate_twitter", "password"): "secret",
    ("post_tweet", "mentions"): "handle",
    ("mention", "mentioned_usernames"): "handle",
    ("follow_user", "username_to_follow"): "handle",
    ("unfollow_user", "username_to_unfollow"): "handle",
    ("ticket_login", "username"): "handle",
    ("ticket_login", "password"): "secret",
    ("add_contact", "user_name"): "first",
    ("register_credit_card", "card_number"): "code",
    ("register_credit_card", "cardholder_name"): "person",
    ("verify_traveler_information", "first_name"): "first",
    ("verify_traveler_information", "last_name"): "last",
    ("verify_traveler_information", "passport_number"): "code",
    ("authenticate_travel", "client_id"): "code",
    ("authenticate_travel", "client_secret"): "code",
    ("authenticate_travel", "refresh_token"): "code",
    ("authenticate_travel", "user_first_name"): "first",
    ("authenticate_travel", "user_last_name"): "last",
}
"""Other gold arguments that name an entity, with the kind of value they take."""

SYMBOL_LOOKUPS: frozenset[str] = frozenset(
    {"get_symbol_by_name", "get_available_stocks", "filter_stocks_by_price"}
)
"""TradingBot functions that answer from the class's own tables of symbols."""

NUDGE_MIN = 10
"""Numbers below this are kept (counts, priorities, line numbers: their meaning is exact)."""

_ALIAS_SEPARATORS = re.compile(r"[_\-]+")
_TOKEN = re.compile(r"[A-Za-z]+|\d+|[^A-Za-z\d]+")


@cache
def source_strings() -> frozenset[str]:
    """The string constants of the eight API modules, lower case (their own vocabulary:
    default users, symbols, cities, enum values, attribute names): never renamed."""
    out: set[str] = set()
    for cls in CLASS_MODULES:
        module = inspect.getmodule(api_class(cls))
        for node in ast.walk(ast.parse(inspect.getsource(module))):  # type: ignore[arg-type]
            value = node.value if isinstance(node, ast.Constant) else None
            if isinstance(value, str) and 0 < len(value) < 40 and " " not in value:
                out.add(value.lower())
    return frozenset(out)


# -- outcomes --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    """One candidate variant: accepted (with its task and dedupe key) or rejected (why).

    Attributes:
        accepted: Whether it passed every check.
        reason: ``"accepted"`` or one of :data:`REASONS`.
        task: The variant's rods view (accepted only).
        key: Its dedupe key (accepted only).
        detail: What exactly was wrong.
        parent_id: The train task it was made from.
        mode: ``"resample"`` (rods' synthesis modes; the only one here).
        augment: None (no augmentation: the category is the parent's).
    """

    accepted: bool
    reason: str
    task: Task | None = None
    key: str | None = None
    detail: str = ""
    parent_id: str = ""
    mode: str = "resample"
    augment: str | None = None


# -- drawing values --------------------------------------------------------------------------
def _case_like(word: str, like: str) -> str:
    """``word`` written in the case of ``like`` (lower, UPPER, Title, or as it is)."""
    if like.isupper() and len(like) > 1:
        return word.upper()
    if like.islower():
        return word.lower()
    if like[:1].isupper():
        return word[:1].upper() + word[1:].lower()
    return word


class _Draw:
    """The replacement values of one variant: a word map shared by every name, and one
    value per distinct original."""

    def __init__(self, rng: random.Random, taken: Callable[[str], bool]) -> None:
        self.rng = rng
        self.taken = taken
        self.words: dict[str, str] = {}
        self.values: dict[tuple[str, str], str] = {}
        self.used: set[str] = set()

    def _fresh(self, pool: Iterable[str], avoid: str) -> str:
        options = [w for w in pool if w.lower() not in self.used and w.lower() != avoid.lower()]
        options = [w for w in options if not self.taken(w)]
        if not options:
            raise _Reject("collision", f"no unused replacement for '{avoid}'")
        choice = self.rng.choice(options)
        self.used.add(choice.lower())
        return choice

    def word(self, word: str) -> str:
        """A replacement for one word (plural kept; a first name by a first name)."""
        low = word.lower()
        if len(low) < 3 or low in source_strings() or low in _KEEP_WORDS:
            return word
        stem, plural = (
            (low[:-1], "s") if low.endswith("s") and not low.endswith("ss") else (low, "")
        )
        if stem not in self.words:
            pool: Iterable[str] = FIRST_NAMES if stem.title() in _FIRST_SET else WORDS
            if plural:  # a plural takes a word whose plural is one more 's'
                pool = [w for w in pool if not w.endswith(("s", "x", "z", "h", "y"))]
            self.words[stem] = self._fresh(pool, stem).lower()
        return _case_like(self.words[stem] + plural, word)

    def name(self, value: str) -> str:
        """A file, directory or user name with its words replaced (digits, separators and a
        file's extension kept)."""
        head, dot, ext = value.rpartition(".")
        if dot and head and 1 <= len(ext) <= 5 and ext.isalnum():
            return self._tokens(head) + "." + ext
        return self._tokens(value)

    def _tokens(self, text: str) -> str:
        out = []
        for token in _TOKEN.findall(text):
            out.append(self.word(token) if token.isalpha() else token)
        return "".join(out)

    def value(self, kind: str, old: str) -> str:
        """A replacement of ``kind`` for ``old`` (the same one each time it is asked)."""
        key = (kind, old)
        if key in self.values:
            return self.values[key]
        if kind in ("fs", "handle"):
            at = "@" if old.startswith("@") else ""
            new = at + self.name(old[len(at) :])
        elif kind == "first":
            new = self._fresh(FIRST_NAMES, old)
        elif kind == "last":
            new = self._fresh(LAST_NAMES, old)
        elif kind == "person":
            parts = old.split()
            pools = [FIRST_NAMES] + [LAST_NAMES] * (len(parts) - 1)
            new = " ".join(self._fresh(p, w) for p, w in zip(pools, parts, strict=True))
        elif kind == "secret":
            new = "".join(self._char(c) for c in old)
        elif kind == "code":
            new = (
                "".join(self._char(c) if c.isdigit() else c for c in old)
                if any(c.isdigit() for c in old)
                else self._tokens(old)
            )
        elif kind == "symbol":
            letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
            new = "".join(self.rng.choice(letters) for _ in old)
        else:
            raise ValueError(kind)
        if new == old:  # every word of it is the classes' own vocabulary
            self.values[key] = new
            return new
        if self.taken(new) or new.lower() in self.used - {new.lower()}:
            raise _Reject("collision", f"'{old}' -> '{new}' collides")
        self.used.add(new.lower())
        self.values[key] = new
        return new

    def _char(self, c: str) -> str:
        if c.isdigit():
            return self.rng.choice("123456789" if c != "0" else "0123456789")
        if c.isupper():
            return self.rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ")
        if c.islower():
            return self.rng.choice("abcdefghijkmnopqrstuvwxyz")
        return c

    def number(self, value: float | int) -> float | int:
        """A nearby number of the same type and decimals (a quarter at most either way)."""
        spread = max(1, int(abs(value) * 0.25))
        for _ in range(8):
            delta = self.rng.randint(1, spread) * self.rng.choice((-1, 1))
            if isinstance(value, int):
                new: float | int = value + delta
            else:
                text = repr(value)
                decimals = len(text.split(".")[1]) if "." in text and "e" not in text else 0
                step = delta if float(value).is_integer() else delta * (1 + self.rng.random())
                new = round(value + step, decimals) if decimals else float(round(value + step))
            if new != value and new > 0 and (new >= NUDGE_MIN) == (value >= NUDGE_MIN):
                return new
        raise _Reject("collision", f"no nearby number for {value}")


_FIRST_SET = frozenset(FIRST_NAMES) | frozenset(
    [
        "Alex",
        "Alice",
        "Bob",
        "Charlie",
        "David",
        "Emma",
        "Eve",
        "Jack",
        "Jane",
        "John",
        "Julia",
        "Kate",
        "Lisa",
        "Mark",
        "Michael",
        "Sarah",
        "Simona",
        "Tom",
    ]
)
_KEEP_WORDS = frozenset({"txt", "pdf", "csv", "doc", "docx", "jpg", "png", "json", "md"})


class _Reject(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


# -- what a task names -------------------------------------------------------------------------
def _walk_fs(tree: Mapping[str, Any], out: list[str]) -> None:
    for name, node in tree.items():
        out.append(name)
        if isinstance(node, Mapping) and node.get("type") == "directory":
            _walk_fs(node.get("contents") or {}, out)


def config_entities(config: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``(kind, value)`` of the entities the initial configuration names (the slots in the
    module doc's table)."""
    out: list[tuple[str, Any]] = []
    fs = (config.get("GorillaFileSystem") or {}).get("root")
    if isinstance(fs, Mapping):
        names: list[str] = []
        _walk_fs(fs, names)
        out += [("fs", n) for n in names]
    tw = config.get("TwitterAPI") or {}
    if isinstance(tw.get("username"), str):
        out.append(("handle", tw["username"]))
    if isinstance(tw.get("password"), str):
        out.append(("secret", tw["password"]))
    for tweet in (tw.get("tweets") or {}).values():
        if isinstance(tweet, Mapping) and isinstance(tweet.get("username"), str):
            out.append(("handle", tweet["username"]))
    for comments in (tw.get("comments") or {}).values():
        for c in comments if isinstance(comments, list) else ():
            if isinstance(c, Mapping) and isinstance(c.get("username"), str):
                out.append(("handle", c["username"]))
    out += [("handle", u) for u in tw.get("following_list") or () if isinstance(u, str)]
    msg = config.get("MessageAPI") or {}
    out += [("first", name) for name in (msg.get("user_map") or {})]
    tk = config.get("TicketAPI") or {}
    if isinstance(tk.get("current_user"), str):
        out.append(("person", tk["current_user"]))
    for ticket in tk.get("ticket_queue") or ():
        if isinstance(ticket, Mapping) and type(ticket.get("id")) is int:
            out.append(("ticket_id", ticket["id"]))
    tr = config.get("TravelAPI") or {}
    out += [("code", card) for card in (tr.get("credit_card_list") or {})]
    out += [("code", b) for b in (tr.get("booking_record") or {})]
    if isinstance(tr.get("access_token"), str):
        out.append(("code", tr["access_token"]))
    for key, kind in (("user_first_name", "first"), ("user_last_name", "last")):
        if isinstance(tr.get(key), str):
            out.append((kind, tr[key]))
    tb = config.get("TradingBot") or {}
    out += [("symbol", s) for s in (tb.get("stocks") or {})]
    out += [("symbol", s) for s in tb.get("watch_list") or () if isinstance(s, str)]
    for order in (tb.get("orders") or {}).values():
        if isinstance(order, Mapping) and isinstance(order.get("symbol"), str):
            out.append(("symbol", order["symbol"]))
    return out


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def _number_tokens(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w]|\.\d)", text))


def _number_forms(value: float | int) -> list[str]:
    forms = [repr(value)]
    if isinstance(value, float) and value.is_integer():
        forms.append(str(int(value)))
    return forms


# -- the mapping ------------------------------------------------------------------------------
@dataclass
class Mapping_:
    """One variant's substitutions: whole strings, their question aliases, ticket ids and
    nudged numbers."""

    strings: dict[str, str] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    ids: dict[int, int] = field(default_factory=dict)
    numbers: dict[float, float | int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.strings or self.ids or self.numbers)

    @property
    def _inner(self) -> re.Pattern[str] | None:
        olds = sorted((s for s in self.strings if len(s) >= 3), key=len, reverse=True)
        if not olds:
            return None
        return re.compile(
            r"(?<![A-Za-z0-9_])(?:" + "|".join(map(re.escape, olds)) + r")(?![A-Za-z0-9_])"
        )

    def text(self, text: str, pattern: re.Pattern[str] | None) -> str:
        """A string of the configuration or an argument: a whole value mapped, else the
        names inside it (case as written)."""
        if text in self.strings:
            return self.strings[text]
        if pattern is None:
            return text
        return pattern.sub(lambda m: self.strings[m.group(0)], text)


def _question_pattern(mapping: Mapping_) -> tuple[re.Pattern[str] | None, dict[str, str]]:
    table: dict[str, str] = {}
    for old, new in {**mapping.aliases, **mapping.strings}.items():
        table.setdefault(old.lower(), new)
    numbers: list[tuple[float | int, float | int]] = [*mapping.ids.items()]
    numbers += mapping.numbers.items()
    for value, nudged in numbers:
        for old_form, new_form in zip(
            _number_forms(value), _number_forms(nudged) * 2, strict=False
        ):
            table.setdefault(old_form, new_form)
    olds = sorted((o for o in table if len(o) >= 2), key=len, reverse=True)
    if not olds:
        return None, table
    pattern = re.compile(
        r"(?<![A-Za-z0-9_.])(?:" + "|".join(map(re.escape, olds)) + r")(?![A-Za-z0-9_]|\.\d)",
        re.IGNORECASE,
    )
    return pattern, table


def _apply_config(
    value: Any, mapping: Mapping_, pattern: re.Pattern[str] | None, key: str = ""
) -> Any:
    if isinstance(value, dict):
        return {
            mapping.text(k, pattern) if isinstance(k, str) else k: _apply_config(
                v, mapping, pattern, k
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_apply_config(v, mapping, pattern, key) for v in value]
    if isinstance(value, str):
        return mapping.text(value, pattern)
    if type(value) is int and key == "id" and value in mapping.ids:
        return mapping.ids[value]
    return value


def _apply_argument(
    name: str, param: str, value: Any, mapping: Mapping_, pattern: re.Pattern[str] | None
) -> Any:
    if isinstance(value, list):
        return [_apply_argument(name, param, v, mapping, pattern) for v in value]
    if isinstance(value, str):
        return mapping.text(value, pattern)
    if type(value) is int and param.endswith("_id") and value in mapping.ids:
        return mapping.ids[value]
    if type(value) in (int, float) and not param.endswith("_id") and value in mapping.numbers:
        new = mapping.numbers[value]
        return type(value)(new)
    return value


def _call_string(call: ToolCall) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in call.arguments.items())
    return f"{call.name}({args})"


# -- validation ------------------------------------------------------------------------------
def _is_error(text: str) -> bool:
    if text.startswith(ERROR_PREFIX):
        return True
    if text.startswith("{") and '"error"' in text:
        try:
            return "error" in json.loads(text)
        except ValueError:
            return False
    return False


def _flow(task: BFCLTask, results: list[str]) -> set[tuple[int, int, str]]:
    """``(i, j, param)``: call ``j`` passes a value that the result of call ``i`` shows."""
    calls = [c for turn in task.gold for c in turn]
    edges = set()
    for j, call in enumerate(calls):
        for param, value in call.arguments.items():
            for leaf in _leaves(value):
                if isinstance(leaf, bool) or leaf is None:
                    continue
                text = str(leaf)
                if len(text) < 2 or text in (".", ".."):
                    continue
                needle = re.compile(r"(?<![\w.])" + re.escape(text) + r"(?![\w]|\.\d)")
                for i in range(j):
                    if text in results[i] and needle.search(results[i]):
                        edges.add((i, j, param))
    return edges


def _results(task: BFCLTask) -> list[str]:
    run = replay(task.scenario, task.gold)
    return [r for turn in run.turns for r in turn.results]


@cache
def _parent_facts(
    task_id: str,
) -> tuple[tuple[str, ...], frozenset[tuple[int, int, str]], str]:
    """A parent's gold results, flow edges and everything its world holds, as text
    (immutable: the cache shares them across variants and processes' rounds)."""
    task = task_index()[task_id]
    results = _results(task)
    world = new_world(task.scenario)
    text = json.dumps(world.state(), default=str) if task.long_context else task.config
    return tuple(results), frozenset(_flow(task, results)), text


def passes_checker(task: BFCLTask) -> tuple[bool, str]:
    """Whether the gold, played as the agent in :class:`~environments.bfcl.env.BFCLEnv`,
    passes BFCL's checker with both verdicts (and why not)."""
    from environments.bfcl.agents import OracleAgent
    from environments.bfcl.env import BFCLEnv

    env = BFCLEnv(tasks=[task])
    agent = OracleAgent(task)
    obs, info = env.reset(options={"task": task})
    done = False
    while not done:
        obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
        done = terminated or truncated
    verdicts = info["verdicts"]
    if verdicts["official"]["success"] and verdicts["strict"]["success"]:
        return True, ""
    return False, f"official {verdicts['official']['turns']}, strict {verdicts['strict']['turns']}"


# -- one variant -----------------------------------------------------------------------------
def draw_mapping(task: BFCLTask, rng: random.Random, world_text: str) -> Mapping_:
    """The substitutions of one variant of ``task`` (see the module doc)."""
    questions = "\n".join(str(m.get("content") or "") for turn in task.turns for m in turn)
    everything = (
        world_text
        + "\n"
        + questions
        + "\n"
        + "\n".join(c for turn in task.ground_truth for c in turn)
    ).lower()
    draw = _Draw(rng, lambda s: s.lower() in everything)
    mapping = Mapping_()
    config = json.loads(task.config)
    lookups = any(c.name in SYMBOL_LOOKUPS for turn in task.gold for c in turn)
    entities = config_entities(config)
    gold_values: set[Any] = set()
    for turn in task.gold:
        for call in turn:
            for param, value in call.arguments.items():
                kind = (
                    "fs"
                    if (call.name, param) in FS_PARAMS
                    else NAMED_PARAMS.get((call.name, param))
                )
                for leaf in _leaves(value):
                    gold_values.add(leaf)
                    if kind is not None and isinstance(leaf, str) and leaf in questions:
                        entities.append((kind, leaf))
    fs_dirs: set[str] = set()
    for kind, old in entities:
        if kind == "ticket_id":
            if old >= 100 and old not in mapping.ids:  # 1, 2, ... occur everywhere
                drawn = rng.randint(10 ** (len(str(old)) - 1), 10 ** len(str(old)) - 1)
                if str(drawn) in everything:
                    raise _Reject("collision", f"ticket id {drawn} occurs in the task")
                mapping.ids[old] = drawn
            continue
        if not isinstance(old, str) or old in (".", "..", "") or old in mapping.strings:
            continue
        if kind == "symbol" and lookups:
            continue
        if kind not in ("fs", "symbol") and old.lower() in source_strings():
            continue
        new = draw.value(kind, old)
        if new == old:
            continue
        mapping.strings[old] = new
        if kind == "fs":
            head, dot, _ = old.rpartition(".")
            stem = head if dot and head else old
            if not dot:
                fs_dirs.add(old)
            new_stem = draw.name(stem)
            if stem != old and len(stem) >= 4:
                mapping.aliases.setdefault(stem, new_stem)
            spaced = _ALIAS_SEPARATORS.sub(" ", stem)
            if spaced != stem and len(spaced) >= 4:
                mapping.aliases.setdefault(spaced, _ALIAS_SEPARATORS.sub(" ", new_stem))
    # numbers the user states and the gold passes on (not read from a result)
    results, _, _ = _parent_facts(task.id) if task.id in task_index() else ((), frozenset(), "")
    stated = _number_tokens(questions)
    shown = " ".join(results)
    for turn in task.gold:
        for call in turn:
            for param, value in call.arguments.items():
                if param.endswith("_id") or param in ("precision", "decimal_places"):
                    continue
                for leaf in _leaves(value):
                    if type(leaf) not in (int, float) or abs(leaf) < NUDGE_MIN:
                        continue
                    if leaf in mapping.numbers or not any(f in stated for f in _number_forms(leaf)):
                        continue
                    if any(
                        re.search(r"(?<![\w.])" + re.escape(f) + r"(?![\w]|\.\d)", shown)
                        for f in _number_forms(leaf)
                    ):
                        continue
                    mapping.numbers[leaf] = draw.number(leaf)
    # a renamed directory named in a question in its other number (document / documents)
    for old in fs_dirs:
        if len(old) < 4 or not old.isalpha():
            continue
        other = old[:-1] if old.lower().endswith("s") else old + "s"
        if other not in mapping.strings and other.lower() not in mapping.aliases:
            mapping.aliases[other] = draw.name(other)
    return mapping


def make_variant(parent: BFCLTask, rng: random.Random, vid: str) -> BFCLTask:
    """A candidate variant of ``parent`` (not yet validated beyond its drawing).

    Raises:
        _Reject: when the mapping cannot be drawn.
    """
    _, _, world_text = _parent_facts(parent.id)
    mapping = draw_mapping(parent, rng, world_text)
    if not mapping:
        raise _Reject("unchanged", "nothing the task names can be renamed")
    inner = mapping._inner
    config = _apply_config(json.loads(parent.config), mapping, inner)
    qpattern, table = _question_pattern(mapping)

    def rewrite(text: str) -> str:
        if qpattern is None:
            return text
        return qpattern.sub(
            lambda m: (
                _case_like(table[m.group(0).lower()], m.group(0))
                if m.group(0).isalpha() or m.group(0).lower() == m.group(0)
                else table[m.group(0).lower()]
            ),
            text,
        )

    turns = tuple(
        tuple(
            FrozenDict({**m, "content": rewrite(str(m["content"]))}) if m.get("content") else m
            for m in turn
        )
        for turn in parent.turns
    )
    gold = tuple(
        tuple(
            _call_string(
                ToolCall(
                    name=c.name,
                    arguments={
                        k: _apply_argument(c.name, k, v, mapping, inner)
                        for k, v in c.arguments.items()
                    },
                )
            )
            for c in turn
        )
        for turn in parent.gold
    )
    return BFCLTask(
        id=vid,
        category=parent.category,
        turns=turns,
        ground_truth=gold,
        classes=parent.classes,
        config=json.dumps(config),
        revealed=parent.revealed,
        excluded=parent.excluded,
        parent=parent.id,
    )


def validate(parent: BFCLTask, variant: BFCLTask) -> None:
    """Raise :class:`_Reject` unless ``variant`` keeps ``parent``'s structure, replays
    without new errors and passes BFCL's checker."""
    if variant.ground_truth == parent.ground_truth and variant.turns == parent.turns:
        raise _Reject("unchanged", "the questions and the gold are the parent's")
    parent_results, parent_flow, _ = _parent_facts(parent.id)
    results = _results(variant)
    before = [_is_error(r) for r in parent_results]
    after = [_is_error(r) for r in results]
    if before != after:
        at = next(i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b)
        raise _Reject("gold_error", f"gold call {at}: {results[at][:160]}")
    flow = _flow(variant, results)
    if flow != parent_flow:
        raise _Reject(
            "flow_changed",
            f"missing {sorted(parent_flow - flow)[:3]}, new {sorted(flow - parent_flow)[:3]}",
        )
    ok, why = passes_checker(variant)
    if not ok:
        raise _Reject("checker", why)


def dedupe_key(task: BFCLTask) -> str:
    """Equal for variants with the same classes, initial state and gold calls."""
    text = json.dumps([task.classes, task.config_key, task.ground_truth, task.category])
    return "bfcl:" + hashlib.sha256(text.encode()).hexdigest()[:24]


class BFCLResampler:
    """Resampled variants of BFCL train tasks, with rods' Synthesizer's shape.

    Args:
        per_seed: Accepted variants wanted per parent and call of :meth:`variants`.
        seed: The synthesis seed.
        known: Dedupe keys already in the pool (variants equal to one are rejected).
        attempts: Candidates tried per wanted variant.
        domain: The domain name of the views made (a BFCL id's name; default: the parent's).
        guard: Check each variant against the test tasks (:mod:`environments.bfcl.guard`).
    """

    def __init__(
        self,
        per_seed: int = 2,
        seed: int = 0,
        known: Iterable[str] = (),
        *,
        attempts: int = 3,
        domain: str | None = None,
        guard: bool = True,
    ) -> None:
        self.per_seed = per_seed
        self.seed = seed
        self.attempts = attempts
        self.domain = domain
        self.guard = guard
        self.seen: set[str] = set(known)
        self._rounds: dict[str, int] = {}

    def variants(self, parent: Task | BFCLTask, *, round: int | None = None) -> Iterator[Outcome]:
        """Candidates for ``parent`` (a train task's view, or the task), until ``per_seed``
        are accepted or ``per_seed * attempts`` were tried. Each call without ``round``
        draws new ones (the round counts per parent)."""
        task = bfcl_task(parent) if isinstance(parent, Task) else parent
        domain = self.domain or (parent.domain if isinstance(parent, Task) else "bfcl")
        if round is None:
            round = self._rounds.get(task.id, 0)
            self._rounds[task.id] = round + 1
        if task.parent is not None:  # a variant of a variant: resample its train task
            task = task_index()[task.parent]
        if task.split != "train":
            yield Outcome(False, "not_train", detail=f"{task.id} is a test task", parent_id=task.id)
            return
        accepted = 0
        for number in range(self.per_seed * self.attempts):
            if accepted >= self.per_seed:
                return
            outcome = self.candidate(task, round, number, domain)
            if outcome.accepted:
                accepted += 1
            yield outcome
            if outcome.reason == "unchanged":
                return  # the same for every draw

    def candidate(self, parent: BFCLTask, round: int, number: int, domain: str) -> Outcome:
        """Candidate ``number`` of ``round`` for ``parent`` (deterministic)."""
        tag = f"rods/bfcl-resample:{self.seed}:{parent.id}:{round}:{number}"
        rng = random.Random(tag)
        vid = f"{parent.id}_rs{hashlib.sha256(tag.encode()).hexdigest()[:10]}"
        try:
            variant = make_variant(parent, rng, vid)
            key = dedupe_key(variant)
            if key in self.seen or key == dedupe_key(parent):
                raise _Reject("duplicate", "an equal variant was made or is known")
            validate(parent, variant)
            view = task_view(variant, domain)
            if self.guard:
                from environments.bfcl.guard import violations

                found = violations(variant)
                if found:
                    raise _Reject("contamination", "; ".join(found))
        except _Reject as r:
            return Outcome(False, r.reason, detail=r.detail, parent_id=parent.id)
        self.seen.add(key)
        return Outcome(True, "accepted", task=view, key=key, parent_id=parent.id)

    def run(self, parents: Iterable[Task | BFCLTask]) -> Iterator[Outcome]:
        """:meth:`variants` of every parent in turn."""
        for parent in parents:
            yield from self.variants(parent)
