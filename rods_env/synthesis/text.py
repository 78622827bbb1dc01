"""Text surgery on whole tokens, and a check that a request still reads as a sentence.

Augmentations and rewrites edit the user's requests: they take a value out, add a sentence,
swap a phrase. Every edit here works on whole tokens (``"no"`` is never found inside
``"economy"``, ``"4"`` never inside ``"NLYW4C"``), and :func:`text_problems` names what no
longer reads as a sentence (a doubled word, stacked determiners, a dangling article or
preposition, a label left without its value), so a bad edit is rejected instead of shipped.
"""

from __future__ import annotations

import re
from functools import lru_cache

_PREPOSITIONS = frozenset(
    ("to", "for", "from", "on", "in", "with", "at", "by", "of", "into", "onto", "about", "via")
)
NOUNS = frozenset(
    [
        *("order", "orders", "booking", "reservation", "reservations", "account", "trip"),
        *("flight", "card", "number", "id", "code", "item", "product"),
    ]
)
"""Nouns that name a value ("order #W123"): the value can go and the noun stays."""

DETERMINERS = frozenset(
    ("my", "the", "this", "that", "these", "those", "your", "our", "a", "an", "his", "her")
)


@lru_cache(maxsize=16384)
def token_pattern(value: str) -> re.Pattern[str]:
    """A pattern that finds ``value`` only as a whole token (not inside a longer word)."""
    pattern = re.escape(value)
    if value[:1].isalnum() or value[:1] == "_":
        pattern = r"(?<![\w])" + pattern
    if value[-1:].isalnum() or value[-1:] == "_":
        pattern += r"(?![\w])"
    return re.compile(pattern)


def _wordish(c: str) -> bool:
    return c.isalnum() or c == "_"


def states(text: str, value: str) -> bool:
    """Whether ``text`` states ``value`` as a whole token (not inside a longer word).

    Same rule as :func:`token_pattern`, without building a pattern per value (synthesis
    checks thousands of new values a second).
    """
    if not value:
        return False
    start = text.find(value)
    if start < 0:
        return False
    head, tail, n = _wordish(value[0]), _wordish(value[-1]), len(value)
    while start >= 0:
        end = start + n
        if (not head or start == 0 or not _wordish(text[start - 1])) and (
            not tail or end == len(text) or not _wordish(text[end])
        ):
            return True
        start = text.find(value, start + 1)
    return False


def states_folded(text: str, value: str) -> bool:
    """:func:`states`, ignoring case."""
    return states(text.lower(), value.lower())


def _tidy(text: str) -> str:
    text = re.sub(r"\(\s*\)", "", text)
    text = re.sub(r"\s+([.,;:!?)])", r"\1", text)
    text = re.sub(r"([.,;:!?])(?=[.,;:!?])", "", text)  # "order. ." -> "order."
    return re.sub(r"\s{2,}", " ", text).strip()


def remove_value(text: str, value: str, label: str) -> str:
    """``text`` without any whole-token occurrence of ``value``.

    Where a noun already names the value it is dropped and the noun keeps (or gets) a
    determiner ("Can you cancel order #W123?" gives "Can you cancel my order?"); a value in
    parentheses goes with them; elsewhere it is replaced by "my <label>" ("send it to
    ACC0003" gives "send it to my recipient account").
    """
    words = {w for w in re.findall(r"[a-z]+", label.lower()) if len(w) > 2}
    out = text
    for m in reversed(list(token_pattern(value).finditer(text))):
        before, after = out[: m.start()], out[m.end() :]
        if before.rstrip().endswith("(") and after.lstrip().startswith(")"):
            out = before.rstrip()[:-1].rstrip() + after.lstrip()[1:]
            continue
        tail = [w.lower() for w in re.findall(r"[A-Za-z]+", before)[-3:]]
        last = tail[-1] if tail else ""
        if last not in _PREPOSITIONS and (last in NOUNS or words & set(tail)):
            head = re.sub(r"\s*(?:\bis|:|=|#)?\s*$", "", before)
            noun = re.search(r"([A-Za-z]+)$", head)
            if noun and noun.group(1).lower() in NOUNS:
                word = noun.group(1)
                if label.lower().endswith(" " + word.lower()):
                    word = label  # "to account" -> "to my recipient account"
                previous = re.findall(r"[A-Za-z']+", head[: noun.start()])[-1:]
                if not previous or previous[0].lower() not in DETERMINERS:
                    if head[: noun.start()].strip():
                        word = "my " + word
                    else:
                        word = "My " + word[0].lower() + word[1:]
                head = head[: noun.start()] + word
            out = head + after
        else:
            out = f"{before}my {label}{after}"
    return _tidy(out)


_DOUBLED = re.compile(r"\b([a-z]+)\s+\1\b")  # lower case: "Chen Chen" is a name
_STACKED = re.compile(r"\b(my|the|a|an|your|our)\s+(my|the|a|an|your|our)\b", re.IGNORECASE)
_DANGLING = re.compile(
    r"(?:^|(?<=\s))(the|a|an|my|your|our|and|or)\s*([.,;:!?)]|$)"
    r"|(?:^|(?<=\s))(to|of|for|with|from|at|by|into|via)\s*([.,;:)]|$)"
)  # case-sensitive: "Via" and "By" also end street and place names
_PUNCTUATION = re.compile(r"[,;:]\s*[.,;:!?]|\s[.,;:!?]|\(\s*\)")
_SENTENCE = re.compile(r"[^.!?]+[.!?]?")
_VERBS = frozenset(
    [
        *("is", "are", "was", "were", "be", "has", "have", "had", "do", "does", "did"),
        *("can", "will", "would", "could", "should", "need", "needs", "want", "wants"),
        *("works", "work", "goes", "arrived", "came", "says", "changed", "moved", "helps"),
    ]
)
"""Verbs that make a short sentence more than a bare noun phrase."""


def text_problems(text: str) -> list[str]:
    """What keeps ``text`` from reading as one or more sentences (empty when it reads).

    Checks: a doubled word ("cabin cabin"), stacked determiners ("my the order"), an
    article, possessive or preposition left dangling before punctuation ("pay with ."),
    stray punctuation or empty parentheses, and a short sentence that is only a noun phrase
    ("The new address." once the address was taken out).
    """
    problems: list[str] = []
    if not text.strip():
        return ["empty text"]
    m = _DOUBLED.search(text)
    if m:
        problems.append(f"doubled word '{m.group(0)}'")
    m = _STACKED.search(text)
    if m:
        problems.append(f"stacked determiners '{m.group(0)}'")
    m = _DANGLING.search(text)
    if m:
        problems.append(f"dangling '{m.group(0).strip()}'")
    m = _PUNCTUATION.search(text)
    if m:
        problems.append(f"stray punctuation '{m.group(0)}'")
    for sentence in _SENTENCE.findall(text):
        words = [w.lower() for w in re.findall(r"[A-Za-z']+", sentence)]
        if (
            1 < len(words) <= 4
            and words[0] in ("the", "my", "a", "an", "your")
            and not any("'" in w or w in _VERBS for w in words)
        ):
            problems.append(f"fragment '{sentence.strip()}'")
            break
    return problems
