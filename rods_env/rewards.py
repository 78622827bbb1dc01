"""Rewards: pure functions over (task gold, state, what was said and seen).

A user turn passes when, at its end:

1. every record the turn's gold calls change holds its gold value (*effect*);
2. no other record changed during the turn (*collateral*);
3. every output the turn requires appears in the agent's messages of that turn
   (:func:`mentions`), not only inside words it copied from the customer (*echo*), and a
   required value that the customer said in the turn also appears in a tool result the
   agent received (*evidence*);
4. the agent's messages of the turn state no competing value of a required value
   (another value of the same field of the same tool that it saw in a tool result, or
   another word of the closed vocabulary the value belongs to, such as the flight
   statuses), no forbidden phrase (an output starting with ``!``), and at most
   :data:`SPRAY_LIMIT` values (numbers, tokens with a digit) beyond the required ones
   (*spray*);
5. on a turn whose tools are withheld, the agent says it cannot (:data:`REFUSAL`) and names
   the withheld operation (the tool's operation stems).

A domain may judge turns more strictly (:class:`rods_env.domain.TurnRules`): the whole state
must equal the gold's after the turn (BFCL's state check), and each result text of the
turn's gold calls must be among the agent's tool results so far (BFCL's response check).

``progress`` is the share of passed turns; ``success`` is strict: every turn passed and the
final state equals the gold final state. The step reward is the increase of progress.
docs/reward-design.md states the rules with examples and the table of number forms.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from functools import lru_cache
from itertools import islice
from typing import Any

from rods_env.database import DELETED, Checkpoint, Database
from rods_env.gold import Gold, TurnGold

REFUSAL = (
    "cannot|can't|can’t|can not|unable|not able|not possible|isn't possible|not allowed|"
    "isn't allowed|not eligible|isn't eligible|not available|isn't available|unavailable|"
    "won't be able"
)
"""Words that say the agent cannot do something (a required output with alternatives)."""

ECHO_RUN = 5
"""Words the agent repeats from the customer's messages of the turn, in runs of at least this
many, are not counted as said."""

SPRAY_LIMIT = 8
"""Most values (numbers, tokens of 3+ characters with a digit) that a turn's messages may
state beyond its required ones."""

MAX_TURN_CHARS = 20_000
"""A turn whose messages to the customer are longer than this fails (nobody answers with
a dump)."""

_CENT = Decimal("0.01")
_NUM = r"(?:0|[1-9][0-9]{0,2}(?:,[0-9]{3})+|[1-9][0-9]*)(?:\.[0-9]+)?"
_AMOUNT_WHOLE = re.compile(rf"^(?P<s1>[-−])?(?:[$€£]\s?)?(?P<s2>[-−])?(?P<num>{_NUM})$")
# a number in running text: not glued to a word, an id (#10), a time (10:30), a range (10-20),
# a percentage (10%), a version (1.2.3) or a zero-padded code (010)
_NUMBER_IN_TEXT = re.compile(
    r"(?<![\w.,#/:%+\-−])(?P<s1>[-−])?(?:[$€£]\s?)?(?P<s2>[-−])?"
    rf"(?P<num>{_NUM})"
    r"(?![\w%]|[.,][0-9]|[-−/:][0-9])"
)
_VALUE_TOKEN = re.compile(r"[0-9a-z_#@.:/\-]*[0-9][0-9a-z_#@.:/\-]*")
_WORD = re.compile(r"[0-9a-z_]+")
_WORD_EDGE = ".,;:!?()[]{}\"'`*<>«»“”‘’"
_MAX_AMOUNT_DIGITS = 15  # longer digit strings are ids, compared as text


@lru_cache(maxsize=65536)  # the same numbers come back in every episode
def _cents(sign: bool, digits: str) -> Decimal | None:
    if len(digits) > _MAX_AMOUNT_DIGITS + 4:
        return None
    try:
        value = Decimal(digits.replace(",", "")).quantize(_CENT, rounding=ROUND_HALF_UP)
    except InvalidOperation:
        return None
    return -value if sign else value


@lru_cache(maxsize=65536)
def amount_value(text: str) -> Decimal | None:
    """The amount ``text`` is, rounded to the cent, when it is a number as a whole.

    Accepted: an optional sign, an optional currency sign, digits without a leading zero
    (or a single ``0``), optional thousands commas, optional decimals: ``"10"``,
    ``"-10"``, ``"$1,234.50"``, ``"0.5"``. Anything else (``"010"``, ``"10%"``,
    ``"#10"``) is not an amount and compares as text.
    """
    m = _AMOUNT_WHOLE.match(text.strip())
    if m is None or len(m.group("num").split(".")[0]) > _MAX_AMOUNT_DIGITS + 4:
        return None
    return _cents(bool(m.group("s1")) != bool(m.group("s2")), m.group("num"))


def numbers_in(text: str) -> set[Decimal]:
    """Every amount stated in ``text`` (see :data:`_NUMBER_IN_TEXT`), rounded to the cent."""
    found = set()
    for m in _NUMBER_IN_TEXT.finditer(text):
        value = _cents(bool(m.group("s1")) != bool(m.group("s2")), m.group("num"))
        if value is not None:
            found.add(value)
    return found


# A code of digits only ("03", "02139") is a number written with a leading zero: like a
# number of the text, it is not matched inside a date, a time, a range, a version or an id
# ("03" is not said by "2024-03-05", "10:03" or "v1.03").
_DIGITS_BEFORE = r"(?<![0-9a-z_.,#/:%+\-−])"
_DIGITS_AFTER = r"(?![0-9a-z_%]|[.,][0-9]|[-−/:][0-9])"


def _token_regex(token: str, prefix: bool) -> str:
    """The pattern of one whole token (see :func:`mentions`); ``prefix``: a word stem."""
    if token.isascii() and token.isdigit():
        return _DIGITS_BEFORE + token + ("" if prefix else _DIGITS_AFTER)
    return r"(?<![0-9a-z_])" + re.escape(token) + ("" if prefix else r"(?![0-9a-z_])")


_WORD_CHARS = frozenset("0123456789abcdefghijklmnopqrstuvwxyz_")
_DIGIT_GLUE_BEFORE = _WORD_CHARS | frozenset(".,#/:%+-−")  # the class of _DIGITS_BEFORE
_DIGIT_GLUE_AFTER = frozenset("0123456789abcdefghijklmnopqrstuvwxyz_%")
_DIGIT_JOINERS = frozenset(".,-−/:")  # glue when a digit follows (_DIGITS_AFTER)
_ASCII_DIGITS = frozenset("0123456789")


def _has_token(lowered: str, token: str) -> bool:
    """Whether ``token`` (lower case) occurs in ``lowered`` as a whole token; a token ending
    in ``*`` is a word stem (any word that starts with it).

    The match of :func:`_token_regex`, found by scanning the occurrences of ``token`` and
    testing the characters around each as its look-behind and look-ahead do (a pattern
    compiled per token cost more than the search: most tokens are new values);
    ``tests/core/test_rewards.py`` checks the two agree (hypothesis).
    """
    prefix = token.endswith("*")
    if prefix:
        token = token[:-1]
    if not token:
        return False
    at = lowered.find(token)
    if at < 0:  # cheap and common
        return False
    digits = token.isascii() and token.isdigit()
    before = _DIGIT_GLUE_BEFORE if digits else _WORD_CHARS
    size, end = len(token), len(lowered)
    while at >= 0:
        after = at + size
        if (at == 0 or lowered[at - 1] not in before) and (
            prefix or after == end or _free_after(lowered, after, digits)
        ):
            return True
        at = lowered.find(token, at + 1)
    return False


def _free_after(lowered: str, after: int, digits: bool) -> bool:
    """Whether the character at ``after`` (there is one) ends the token (the look-ahead of
    :func:`_token_regex`)."""
    char = lowered[after]
    if not digits:
        return char not in _WORD_CHARS
    if char in _DIGIT_GLUE_AFTER:
        return False
    return not (
        char in _DIGIT_JOINERS and after + 1 < len(lowered) and lowered[after + 1] in _ASCII_DIGITS
    )


@lru_cache(maxsize=4096)
def _phrase_pattern(output: str) -> re.Pattern[str] | None:
    """One pattern for an output's alternatives when none is a number (None otherwise)."""
    words, digits = [], []
    for alternative in output.split("|"):
        token = alternative.strip().lower()
        if not token or amount_value(token) is not None:
            return None
        prefix = token.endswith("*")
        if prefix:
            token = token[:-1]
        if token.isascii() and token.isdigit():
            digits.append(_token_regex(token, prefix))
        else:
            words.append(re.escape(token) + ("" if prefix else r"(?![0-9a-z_])"))
    # one lookbehind for the word alternatives: a single alternation is searched much
    # faster than one group per alternative
    parts = [r"(?<![0-9a-z_])(?:" + "|".join(words) + ")"] if words else []
    return re.compile("|".join([*parts, *digits]))


Value = tuple[str, Any]
"""A value as the reward compares it: ``("n", cents)`` for an amount, ``("s", lower text)``."""

Rivals = tuple[frozenset[Decimal], frozenset[str], tuple[str, ...]]
"""Values split for a fast look-up (:meth:`Said.stated`): amounts, tokens of word
characters only, other tokens."""


def split_values(values: set[Value] | frozenset[Value]) -> Rivals:
    """``values`` as :data:`Rivals`."""
    numbers = frozenset(raw for kind, raw in values if kind == "n")
    words = frozenset(raw for kind, raw in values if kind == "s" and _WORD.fullmatch(raw))
    others = tuple(sorted(raw for kind, raw in values if kind == "s" and raw not in words))
    return numbers, words, others


_AMOUNT_START = frozenset("0123456789-−$€£")
_DIGIT = re.compile(r"[0-9]")


@lru_cache(maxsize=65536)
def _number(raw: int | float) -> Value | None:  # values repeat: cached
    try:
        number = Decimal(repr(raw)).quantize(_CENT, rounding=ROUND_HALF_UP)
    except InvalidOperation:
        return None
    return ("n", number) if number.is_finite() else None


def value_of(raw: Any) -> Value | None:
    """How a tool-result leaf or a required output compares (None: not a value)."""
    kind = type(raw)
    if kind is str:
        text = raw.strip()
        if not text:
            return None
        if text[0] in _AMOUNT_START:
            amount = amount_value(text)
            if amount is not None:
                return ("n", amount)
        return ("s", text.lower())
    if kind is bool or raw is None:
        return None
    if kind is int or kind is float:
        return _number(raw)
    return value_of(str(raw))


def show(value: Value) -> str:
    """A value as text: an amount without trailing zero cents (``99.99``, ``235``)."""
    kind, raw = value
    if kind == "n" and raw == raw.to_integral_value():
        return str(int(raw))
    return str(raw)


class Said:
    """What the agent said, analysed once for many look-ups.

    Args:
        text: The agent's text.
    """

    __slots__ = ("_numbers", "_words", "lower")

    def __init__(self, text: str) -> None:
        self.lower = text.lower()
        self._numbers: set[Decimal] | None = None
        self._words: frozenset[str] | None = None

    def _token(self, token: str) -> bool:
        """Whether ``token`` (lower case, not a stem) is said as a whole token.

        A token of word characters only is said exactly when it is one of the text's
        maximal runs of word characters, a set built once: a turn is judged against
        thousands of competing values (a long-context world), and a pattern search for
        each dominated the cost of the exploit panel.
        """
        if _WORD.fullmatch(token) is None:
            return _has_token(self.lower, token)
        if self._words is None:
            self._words = frozenset(_WORD.findall(self.lower))
        if token not in self._words:
            return False
        # a code of digits only also must not be glued to a date, range or id
        return not token.isdigit() or _has_token(self.lower, token)

    def stated(self, values: Rivals) -> list[Value]:
        """Which of ``values`` are said (each by the rule of :meth:`has_value`).

        Numbers and word-character tokens are matched by set intersection with what the
        text states (a long-context turn has thousands of competing values); only the
        other tokens are searched one by one.
        """
        numbers, words, others = values
        found: list[Value] = [("n", n) for n in numbers & self.numbers] if numbers else []
        if words:
            if self._words is None:
                self._words = frozenset(_WORD.findall(self.lower))
            for word in words & self._words:
                if not word.isdigit() or _has_token(self.lower, word):
                    found.append(("s", word))
        found.extend(("s", other) for other in others if _has_token(self.lower, other))
        return found

    @property
    def numbers(self) -> set[Decimal]:
        """Every amount stated, rounded to the cent."""
        if self._numbers is None:
            self._numbers = numbers_in(self.lower)
        return self._numbers

    def has(self, output: str) -> bool:
        """Whether ``output`` is stated (the rules of :func:`mentions`)."""
        if output.startswith("!"):
            return not self.has(output[1:])
        if "|" in output:
            pattern = _phrase_pattern(output)
            if pattern is not None:  # words only: one search for every alternative
                return pattern.search(self.lower) is not None
            return any(self.has(alternative) for alternative in output.split("|"))
        out = output.strip()
        if not out:
            return True
        amount = amount_value(out)
        if amount is not None:
            return amount in self.numbers
        token = out.lower()
        return _has_token(self.lower, token) if token.endswith("*") else self._token(token)

    def has_value(self, value: Value) -> bool:
        """Whether a tool-result value is stated."""
        if value[0] == "n":
            return value[1] in self.numbers
        return self._token(value[1])

    def values(self) -> set[Value]:
        """The values stated: numbers, and tokens of 3+ characters with a digit (ids, codes,
        dates)."""
        out: set[Value] = {("n", n) for n in self.numbers}
        for m in _VALUE_TOKEN.finditer(self.lower):
            token = m.group().strip(".:/-")
            if len(token) >= 3 and amount_value(token) is None:
                out.add(("s", token))
        return out


def mentions(text: str, output: str) -> bool:
    """Whether ``output`` appears in ``text``.

    * An output that is a number as a whole (:func:`amount_value`) matches a number of the
      text with the same value to the cent: ``"10"`` is matched by "10", "10.0", "$10.00"
      and "10.00 USD", not by "100", "10.5", "10:30", "10-20", "10%", "#10" or "010".
    * Any other output matches case-insensitively as a whole token: ``"1234"`` is not
      matched inside "01234", ``"W12"`` not inside "W123". A code of digits only (``"03"``)
      is also not matched where a number would be glued: inside a date ("2024-03-05"), a
      time, a range, a version or an id.
    * An output with ``|`` is matched by any of its alternatives; an alternative ending in
      ``*`` is a word stem (``"cancel*"`` matches "cancellation").
    * An output starting with ``!`` is *forbidden*: it is satisfied when none of its
      alternatives is said (``"!basic economy"`` fails a text that says "basic economy").

    Args:
        text: What the agent said.
        output: A required output value.
    """
    return Said(text).has(output)


# -- what the agent saw ------------------------------------------------------------------------
@dataclass(frozen=True)
class OutputValues:
    """The values in one tool result, indexed once (and cached: results repeat across
    episodes of the same task).

    Attributes:
        values: Every value in the result.
        fields: Path of object keys (list positions left out, keys holding digits such as
            ids and dates written ``*``) to the values found there; a bare result (a
            calculator's number) has no path and no field.
        paths_of: Value to the paths it was found at.
    """

    values: frozenset[Value]
    fields: dict[str, frozenset[Value]]
    paths_of: dict[Value, tuple[str, ...]]


@lru_cache(maxsize=8192)
def output_values(output: str) -> OutputValues:
    """Index the values of a tool result's text (JSON, or a bare string or number)."""
    data: Any = output
    if output[:1] in ("{", "["):
        try:
            data = json.loads(output)
        except (ValueError, RecursionError):
            data = None  # a truncated output: its values are not indexed
    fields: dict[str, set[Value]] = {}
    values: set[Value] = set()
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        item, path = stack.pop()
        kind = type(item)
        if kind is dict:
            for key, sub in item.items():
                part = "*" if _DIGIT.search(key) else key
                stack.append((sub, f"{path}.{part}" if path else part))
            continue
        if kind is list:
            stack.extend((sub, path) for sub in item)
            continue
        value = value_of(item)
        if value is None:
            continue
        values.add(value)
        if path:
            fields.setdefault(path, set()).add(value)
    paths_of: dict[Value, list[str]] = {}
    for path, found in fields.items():
        for value in found:
            paths_of.setdefault(value, []).append(path)
    return OutputValues(
        values=frozenset(values),
        fields={p: frozenset(v) for p, v in fields.items()},
        paths_of={v: tuple(p) for v, p in paths_of.items()},
    )


class SeenValues:
    """The tool results an agent received in an episode, as the output rules query them.

    A value's *field* is the tool and the path of object keys that lead to it
    (:class:`OutputValues`): ``get_order_details`` / ``fulfilments.tracking_ids``. Results
    are kept as text and indexed (:func:`output_values`, cached) only when a turn with
    required values is judged.
    """

    def __init__(self) -> None:
        self._raw: list[tuple[str, str]] = []
        self._indexed: list[tuple[str, OutputValues]] = []
        self._rivals: dict[Value, tuple[int, set[Value]]] = {}
        self._split: dict[Value, tuple[int, Rivals]] = {}

    def add(self, tool: str, output: str) -> None:
        """Record the output text of a successful tool call."""
        self._raw.append((tool, output))

    @property
    def count(self) -> int:
        """Number of results recorded."""
        return len(self._raw)

    def _outputs(self) -> list[tuple[str, OutputValues]]:
        for tool, output in self._raw[len(self._indexed) :]:
            self._indexed.append((tool, output_values(output)))
        return self._indexed

    def saw(self, value: Value) -> bool:
        """Whether a tool result contained ``value``."""
        return any(value in found.values for _, found in self._outputs())

    def competitors(self, value: Value) -> set[Value]:
        """The other values of every field where ``value`` was seen."""
        memo = self._rivals.get(value)
        if memo is not None and memo[0] == len(self._raw):
            return memo[1]
        found = self._competitors(value)
        self._rivals[value] = (len(self._raw), found)
        return found

    def competitor_sets(self, value: Value) -> Rivals:
        """:meth:`competitors` split for :meth:`Said.stated` (kept until a result is added)."""
        memo = self._split.get(value)
        if memo is not None and memo[0] == len(self._raw):
            return memo[1]
        found = split_values(self.competitors(value))
        self._split[value] = (len(self._raw), found)
        return found

    def _competitors(self, value: Value) -> set[Value]:
        outputs = self._outputs()
        where: dict[str, set[str]] = {}  # tool -> the paths where it gave ``value``
        for tool, found in outputs:
            paths = found.paths_of.get(value)
            if paths:
                where.setdefault(tool, set()).update(paths)
        out: set[Value] = set()
        for tool, found in outputs:
            for path in where.get(tool, ()):  # only those fields, not every field of each
                values = found.fields.get(path)
                if values:
                    out |= values
        out.discard(value)
        return out


@dataclass
class Speech:
    """What happened in one turn, as the output rules see it.

    Attributes:
        agent: Everything the agent wrote to the customer during the turn.
        customer: Everything the customer wrote during the turn.
        seen: The tool results the agent received so far in the episode.
    """

    agent: str = ""
    customer: str = ""
    seen: SeenValues = field(default_factory=SeenValues)


def _words(text: str) -> list[str]:
    return [w.strip(_WORD_EDGE) for w in text.lower().split()]


@lru_cache(maxsize=4096)
def _grams(customer: str, run: int) -> frozenset[tuple[str, ...]]:
    """The runs of ``run`` words of a customer's text (cached: requests repeat)."""
    words = _words(customer)
    return frozenset(tuple(words[i : i + run]) for i in range(len(words) - run + 1))


def mask_echo(agent: str, customer: str, run: int = ECHO_RUN) -> str:
    """``agent`` with every run of ``run`` or more words copied from ``customer`` blanked.

    Words compare case-insensitively without surrounding punctuation; blanked words become
    ``…``, so tokens on both sides never join.
    """
    words = agent.split()
    if len(words) < run:
        return agent
    grams = _grams(customer, run)
    if not grams:
        return agent
    normed = _words(agent)
    masked: set[int] = set()
    for i in range(len(words) - run + 1):
        if tuple(normed[i : i + run]) in grams:
            masked.update(range(i, i + run))
    if not masked:
        return agent
    return " ".join("…" if i in masked else w for i, w in enumerate(words))


@dataclass(frozen=True)
class OutputCheck:
    """How a turn's messages measure against its required outputs.

    Attributes:
        missing: Required outputs (and refusal words) not said, said only by echoing the
            customer, or, for a value the customer said, never seen in a tool result.
        competing: Competing values stated next to a required one.
        spray: Values (numbers, tokens with a digit) stated beyond the required ones.
        overlong: The messages exceed :data:`MAX_TURN_CHARS`.
        why: The rule behind each missing output, ``(output, rule)`` in the order of
            ``missing`` (rules of :data:`RULES`: ``output_missing``, ``output_echoed``,
            ``no_evidence``, ``refusal_missing``, ``operation_not_named``,
            ``forbidden_said``).
    """

    missing: tuple[str, ...] = ()
    competing: tuple[str, ...] = ()
    spray: int = 0
    overlong: bool = False
    why: tuple[tuple[str, str], ...] = ()

    @property
    def ok(self) -> bool:
        """Whether the outputs part of the turn passes."""
        return not (self.missing or self.competing or self.overlong) and self.spray <= SPRAY_LIMIT


_OK = OutputCheck()


def is_value(output: str) -> bool:
    """Whether a required output is a value (an id, an amount, a status), as opposed to a
    phrase with alternatives or a forbidden phrase (``!``)."""
    return bool(output.strip()) and "|" not in output and not output.startswith("!")


@lru_cache(maxsize=4096)
def _values_of(outputs: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(o for o in outputs if is_value(o))


def refusal_words(turn: TurnGold) -> tuple[str, ...]:
    """What a withheld turn requires besides its outputs: a refusal (:data:`REFUSAL`) and
    the withheld operation (any stem of a withheld tool); nothing for other turns."""
    if not turn.operations:
        return ()
    return (REFUSAL, "|".join(f"{stem}*" for stem in turn.operations))


def check_outputs(turn: TurnGold, speech: Speech | str) -> OutputCheck:
    """Judge what the agent said in a turn against the turn's required outputs.

    Args:
        turn: The turn's gold (required outputs and, for a withheld turn, the operations).
        speech: The turn's messages and what the agent saw (a string: the agent's messages
            alone, with nothing seen and nothing said by the customer).
    """
    required = turn.outputs + refusal_words(turn)
    if not required:
        return _OK
    if isinstance(speech, str):
        speech = Speech(agent=speech)
    if len(speech.agent) > MAX_TURN_CHARS:
        return OutputCheck(missing=required, overlong=True)
    masked = mask_echo(speech.agent, speech.customer)
    said = Said(masked)
    missing = [o for o in required if not said.has(o)]
    why = [(o, _why_missing(o, turn, masked, speech.agent)) for o in missing]
    values = _values_of(turn.outputs)
    if not values:
        return OutputCheck(missing=tuple(missing), why=tuple(why)) if missing else _OK
    seen = speech.seen
    wanted = {v for v in (value_of(o) for o in values) if v is not None}
    customer = Said(speech.customer) if speech.customer else None
    for output in values:
        if output in missing or customer is None or not customer.has(output):
            continue
        value = value_of(output)
        if value is None or not seen.saw(value):
            missing.append(output)  # the customer's own words are no evidence of work
            why.append((output, "no_evidence"))
    competing: list[str] = []
    rivals = [("s", word) for o in values for word in turn.rivals.get(o, ())]
    said_rivals = [r for r in rivals if said.has_value(r)]
    for value in wanted:
        for other in [*said.stated(seen.competitor_sets(value)), *said_rivals]:
            if other not in wanted:
                shown = show(other)
                if shown not in competing:
                    competing.append(shown)
    spray = len(said.values() - wanted)
    return OutputCheck(tuple(missing), tuple(sorted(competing)), spray, why=tuple(why))


def _why_missing(output: str, turn: TurnGold, masked: str, agent: str) -> str:
    """The rule (:data:`RULES`) by which a required output counts as not said."""
    if turn.operations:
        refusal, operation = refusal_words(turn)
        if output == refusal and output not in turn.outputs:
            return "refusal_missing"
        if output == operation and output not in turn.outputs:
            return "operation_not_named"
    if output.startswith("!"):
        return "forbidden_said"
    if masked is not agent and Said(agent).has(output):
        return "output_echoed"
    return "output_missing"


# -- turns, progress, success ------------------------------------------------------------------
RULES: dict[str, str] = {
    "effect_missing": "the turn's gold effect is not in the database",
    "collateral_write": "a record the turn's gold leaves alone was changed",
    "output_missing": "a required output was not said",
    "output_echoed": "a required output was said only in words copied from the customer",
    "no_evidence": "a value the customer said was never seen in a tool result",
    "refusal_missing": "the tool is withheld and the agent did not say it cannot",
    "operation_not_named": "the refusal does not name the withheld operation",
    "forbidden_said": "a phrase this turn forbids was said",
    "competing_value": "a competing value was stated next to a required one",
    "spray": f"more than {SPRAY_LIMIT} values stated beyond the required ones",
    "overlong": f"the turn's messages exceed {MAX_TURN_CHARS:,} characters",
    "result_missing": "a result of the turn's gold calls is not among the agent's tool results",
    "not_reached": "the conversation ended before this turn",
}
"""Why a turn fails: each rule's name (as :class:`Failure` records it) and its meaning."""

_SHOWN = 80  # characters of a value shown in a failure's detail


@dataclass(frozen=True)
class Failure:
    """One reason a turn failed, as the reward computed it.

    Attributes:
        rule: The rule (a key of :data:`RULES`).
        values: What broke it: the records (``table/key``, with the fields that differ for
            a missing effect), the outputs, the competing values or the count.
    """

    rule: str
    values: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """The rule in words, with its values: ``a required output was not said: 203.31``
        (an output with alternatives shows its first: ``cannot (or 15 alternatives)``)."""
        meaning = RULES.get(self.rule, self.rule)
        if not self.values:
            return meaning
        return f"{meaning}: {', '.join(_show_output(v) for v in self.values)}"

    def to_dict(self) -> dict[str, Any]:
        """``{"rule", "values", "text"}``."""
        return {"rule": self.rule, "values": list(self.values), "text": self.text}


def _show_output(output: str) -> str:
    parts = output.split("|")
    if len(parts) < 3:
        return output
    return f"{parts[0]} (or {len(parts) - 1} alternatives)"


@dataclass(frozen=True)
class TurnResult:
    """How one user turn went.

    Attributes:
        index: Turn index.
        passed: Effect present, no collateral change, the outputs rules hold.
        effect_ok: Every record the gold changes holds the gold value.
        collateral: ``table/key`` of records changed during the turn that the gold leaves alone.
        missing_outputs: Required outputs (and refusal words) not communicated.
        competing: Competing values stated next to a required one (see :func:`check_outputs`).
        spray: Values (numbers, tokens with a digit) stated beyond the required ones (the
            turn fails above :data:`SPRAY_LIMIT`).
        overlong: The turn's messages exceed :data:`MAX_TURN_CHARS`.
        failures: Why the turn failed, one :class:`Failure` per broken rule (empty when it
            passed).
    """

    index: int
    passed: bool
    effect_ok: bool
    collateral: tuple[str, ...]
    missing_outputs: tuple[str, ...]
    competing: tuple[str, ...] = ()
    spray: int = 0
    overlong: bool = False
    failures: tuple[Failure, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form for ``info`` and logs."""
        return {
            "turn": self.index,
            "passed": self.passed,
            "effect_ok": self.effect_ok,
            "collateral": list(self.collateral),
            "missing_outputs": list(self.missing_outputs),
            "competing": list(self.competing),
            "spray": self.spray,
            "overlong": self.overlong,
            "failures": [f.to_dict() for f in self.failures],
        }

    @classmethod
    def not_reached(cls, index: int, turn: TurnGold) -> TurnResult:
        """The result of a turn the conversation never reached."""
        return cls(index, False, False, (), tuple(turn.outputs), failures=(Failure("not_reached"),))


def effect_present(turn: TurnGold, db: Database) -> bool:
    """Whether every record the turn's gold changes holds its gold value in ``db``."""
    for (table, key), value in turn.effect.items():
        current = db.get(table, key, DELETED)
        if current is DELETED or value is DELETED:
            if current is not value:
                return False
        elif current != value:
            return False
    return True


def _clip_value(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def _leaf_differences(now: Any, gold: Any, path: str) -> Iterator[str]:
    """Where two JSON values differ, down to the first differing leaves: ``path now (gold
    value)``, ``path missing (gold value)``, ``path extra value``."""
    if isinstance(now, dict) and isinstance(gold, dict):
        for key in dict.fromkeys([*gold, *now]):
            sub = f"{path}.{key}" if path else str(key)
            if key not in now:
                yield f"{sub} missing (gold {_clip_value(gold[key])})"
            elif key not in gold:
                yield f"{sub} extra {_clip_value(now[key])}"
            elif now[key] != gold[key]:
                yield from _leaf_differences(now[key], gold[key], sub)
        return
    if isinstance(now, list) and isinstance(gold, list):
        for i in range(max(len(now), len(gold))):
            sub = f"{path}[{i}]"
            if i >= len(now):
                yield f"{sub} missing (gold {_clip_value(gold[i])})"
            elif i >= len(gold):
                yield f"{sub} extra {_clip_value(now[i])}"
            elif now[i] != gold[i]:
                yield from _leaf_differences(now[i], gold[i], sub)
        return
    yield f"{path} {_clip_value(now)} (gold {_clip_value(gold)})"


def effect_differences(
    turn: TurnGold,
    db: Database,
    limit: int = 3,
    expected: Mapping[tuple[str, str], Any] | None = None,
) -> tuple[str, ...]:
    """The records of the turn's gold effect that ``db`` does not hold as the gold leaves
    them, each as ``table/key`` with its first ``limit`` differing fields, down to the
    leaves: ``orders/#W1 status "pending" (gold "cancelled")``,
    ``users/u1 reservations[3] missing (gold "ABC123")``, ``reservations/ABC123 missing
    (gold writes it)``, ``... present (gold deletes it)``.

    Args:
        turn: The turn's gold.
        db: The state.
        limit: Differing fields shown per record.
        expected: The records to compare instead of the turn's effect (the whole gold
            state after the turn, under the full state rule).
    """
    out = []
    for (table, key), value in (turn.effect if expected is None else expected).items():
        current = db.get(table, key, DELETED)
        where = f"{table}/{key}"
        if value is DELETED:
            if current is not DELETED:
                out.append(f"{where} present (gold deletes it)")
        elif current is DELETED:
            out.append(f"{where} missing (gold writes it)")
        elif current != value:
            found = list(
                islice(
                    _leaf_differences(
                        current.model_dump(mode="json"), value.model_dump(mode="json"), ""
                    ),
                    limit + 1,
                )
            )
            shown = "; ".join(found[:limit]) + ("; ..." if len(found) > limit else "")
            out.append(f"{where} {shown}")
    return tuple(out)


def missing_outputs(turn: TurnGold, speech: Speech | str) -> tuple[str, ...]:
    """Required outputs of the turn not communicated (see :func:`check_outputs`)."""
    return check_outputs(turn, speech).missing


def failures_of(
    effect: tuple[str, ...],
    collateral: tuple[str, ...],
    said: OutputCheck,
    results: tuple[str, ...] = (),
) -> tuple[Failure, ...]:
    """The broken rules of a turn, from its effect differences, collateral records, output
    check and missing gold results (empty when the turn passes)."""
    out: list[Failure] = []
    if effect:
        out.append(Failure("effect_missing", effect))
    if collateral:
        out.append(Failure("collateral_write", collateral))
    if results:
        out.append(Failure("result_missing", results))
    if said.overlong:
        return (*out, Failure("overlong"))
    by_rule: dict[str, list[str]] = {}
    for output, rule in said.why:
        shown = output[1:] if rule == "forbidden_said" else output
        if rule in ("refusal_missing", "operation_not_named"):
            shown = ""  # the refusal words and operation stems, not worth listing
        by_rule.setdefault(rule, [])
        if shown:
            by_rule[rule].append(shown)
    out += [Failure(rule, tuple(values)) for rule, values in by_rule.items()]
    if said.competing:
        out.append(Failure("competing_value", said.competing))
    if said.spray > SPRAY_LIMIT:
        out.append(Failure("spray", (f"{said.spray} values",)))
    return tuple(out)


def missing_results(turn: TurnGold, results: Mapping[str, int] | None) -> tuple[str, ...]:
    """The result texts of the turn's gold calls not among the agent's tool results so far
    (``results``: text to how many times the agent got it), with multiplicity; each cut to
    200 characters. Empty when the turn checks no results."""
    if not turn.results:
        return ()
    have = results or {}
    return tuple(text[:200] for text, n in Counter(turn.results).items() if have.get(text, 0) < n)


def state_check(
    turn: TurnGold, db: Database, turn_start: Checkpoint
) -> tuple[bool, tuple[str, ...]]:
    """``(gold records hold, collateral records)`` of a turn's state: under rods' rule the
    turn's gold effect is present and nothing else changed during the turn; under the full
    rule (``turn.state`` recorded) every record equals the gold state after the turn."""
    if turn.state is None:
        ok = effect_present(turn, db)
        collateral = sorted(
            f"{t}/{k}" for t, k in db.changed_since(turn_start) if (t, k) not in turn.effect
        )
        return ok, tuple(collateral)
    return full_state_check(turn, db.changes())


def full_state_check(
    turn: TurnGold, changes: Mapping[tuple[str, str], Any]
) -> tuple[bool, tuple[str, ...]]:
    """:func:`state_check` under the full rule, of a state given by its ``changes``
    (:meth:`Database.changes`): every record of the gold state after the turn holds, and no
    other record differs from the base."""
    gold = turn.state
    assert gold is not None, "the full state rule records the gold state of every turn"
    ok = all(_same(changes.get(key, DELETED_BASE), value) for key, value in gold.items())
    extra = sorted(f"{t}/{k}" for t, k in changes if (t, k) not in gold)
    return ok, tuple(extra)


DELETED_BASE: Any = object()
"""Marks a record that holds its base value (absent from :meth:`Database.changes`)."""


def _same(now: Any, gold: Any) -> bool:
    if now is DELETED or gold is DELETED or now is DELETED_BASE:
        return now is gold
    return bool(now == gold)


def evaluate_turn(
    index: int,
    turn: TurnGold,
    db: Database,
    turn_start: Checkpoint,
    speech: Speech | str,
    said: OutputCheck | None = None,
    results: Mapping[str, int] | None = None,
) -> TurnResult:
    """Evaluate one user turn at its end.

    Args:
        index: Turn index.
        turn: The turn's gold.
        db: The state at the end of the turn.
        turn_start: Checkpoint taken when the turn began.
        speech: The turn's messages and what the agent saw (or the agent's text alone).
        said: :func:`check_outputs` of this speech, when the caller has it already.
        results: The agent's tool result texts, counted (so far, or of this turn, as the
            domain's rules say; read only when the turn's gold records results:
            :attr:`TurnGold.results`).
    """
    ok, collateral = state_check(turn, db, turn_start)
    if said is None:
        said = check_outputs(turn, speech)
    lacking = missing_results(turn, results)
    passed = ok and not collateral and said.ok and not lacking
    if ok:
        effect: tuple[str, ...] = ()
    else:
        effect = effect_differences(turn, db, expected=turn.state) or ("a record differs",)
    failures = () if passed else failures_of(effect, collateral, said, lacking)
    return TurnResult(
        index=index,
        passed=passed,
        effect_ok=ok,
        collateral=collateral,
        missing_outputs=said.missing,
        competing=said.competing,
        spray=said.spray,
        overlong=said.overlong,
        failures=failures,
    )


def progress(results: list[TurnResult], n_turns: int) -> float:
    """Share of the task's turns that passed, in [0, 1]."""
    if n_turns <= 0:
        return 0.0
    return sum(1 for r in results if r.passed) / n_turns


def success(gold: Gold, db: Database, results: list[TurnResult]) -> bool:
    """Strict success: every turn passed and the final state equals the gold final state.

    A task whose writes were all made, but in the wrong turns, ends in the gold state with
    failed turns: that is not a success.
    """
    if len(results) != len(gold.turns) or not all(r.passed for r in results):
        return False
    return db.changes() == gold.final
