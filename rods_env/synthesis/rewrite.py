"""Rewrite: vary the phrasing and persona of the user's requests, keeping every fact.

Templates only (no model): the user's persona (one of :data:`rods_env.user.PERSONAS`, kept
when the profile records one, else drawn and recorded in ``user.persona``); the first request
gets an opener and a closer in that persona's voice; stock phrases ("I want to", "Can you") are
swapped for equivalents. A rewrite never adds, removes or alters a value: every fact value
and number of the original request is still there, and no fact that the original did not
state appears. When a rewrite would break that, the original text is kept. A model-based
paraphraser (``rods_agent.synthesis.rewrite``) can rephrase the result further.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence

from rods_env.synthesis.text import states, text_problems
from rods_env.task import Task, Turn
from rods_env.user import PERSONA_NAMES, PERSONAS, persona_name, persona_text

_PHRASES: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = tuple(
    (re.compile(pattern), options)
    for pattern, options in (
        (r"\bI want to\b", ("I'd like to", "I need to", "I want to")),
        (r"\bI would like to\b", ("I'd like to", "I want to", "I would like to")),
        (r"\bI'd like to\b", ("I would like to", "I want to", "I'd like to")),
        (r"\bCan you\b", ("Could you", "Can you", "Would you")),
        (r"\bcan you\b", ("could you", "can you", "would you")),
        (r"\bPlease\b", ("Please", "Kindly")),
        (r"\bI need to\b", ("I have to", "I need to")),
    )
)

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def _values_stated(text: str, values: Sequence[str]) -> frozenset[str]:
    return frozenset(v for v in values if v and states(text, v))


def _safe(original: str, new: str, values: Sequence[str]) -> bool:
    """Whether ``new`` states exactly the fact values and numbers that ``original`` states."""
    return _values_stated(original, values) == _values_stated(new, values) and sorted(
        _NUMBER.findall(original)
    ) == sorted(_NUMBER.findall(new))


def rephrase(text: str, rng: random.Random, values: Sequence[str]) -> str:
    """Swap stock phrases of ``text`` for equivalents, outside fact values.

    Args:
        text: A request.
        rng: Chooses the replacements.
        values: Fact values that must not be touched.
    """
    new = text
    for pattern, options in _PHRASES:
        choice = options[rng.randrange(len(options))]
        new = pattern.sub(choice, new)
    return new if _safe(text, new, values) else text


def rewrite(task: Task, rng: random.Random) -> Task:
    """Return ``task`` with rephrased requests and a persona (see the module docstring).

    The persona is the one the profile records when it is one of
    :data:`rods_env.user.PERSONAS`; otherwise one is drawn and recorded in the profile
    (``user.persona``), so the opener's voice and the recorded persona always agree.

    Args:
        task: A candidate task.
        rng: The variant's generator for this stage.
    """
    values = tuple(task.user.facts.values())
    name = persona_name(task.user.persona) or PERSONA_NAMES[rng.randrange(len(PERSONA_NAMES))]
    persona = PERSONAS[name]
    turns: list[Turn] = []
    for i, turn in enumerate(task.turns):
        text = rephrase(turn.request, rng, values)
        if i == 0:
            opener = persona.openers[rng.randrange(len(persona.openers))]
            closer = persona.closers[rng.randrange(len(persona.closers))]
            framed = " ".join(p for p in (opener, text, closer) if p)
            text = framed if _safe(turn.request, framed, values) else text
        turns.append(turn if text == turn.request else turn.model_copy(update={"request": text}))
    recorded = persona_text(name)
    user = (
        task.user
        if recorded == task.user.persona
        else task.user.model_copy(update={"persona": recorded})
    )
    return task.model_copy(update={"turns": tuple(turns), "user": user})


def opener_persona(text: str) -> str | None:
    """The persona whose opener starts ``text`` (None when it starts with no opener)."""
    for name, persona in PERSONAS.items():
        for opener in persona.openers:
            if opener and text.startswith(opener + " "):
                return name
    return None


_OPENERS = sorted({o for p in PERSONAS.values() for o in p.openers if o}, key=len)[::-1]
_CLOSERS = sorted({c for p in PERSONAS.values() for c in p.closers if c}, key=len)[::-1]


def split_frame(text: str) -> tuple[str, str, str]:
    """``(opener, request, closer)``: the persona opener and closer :func:`rewrite` added
    around a request ("" where there is none)."""
    opener = closer = ""
    for o in _OPENERS:
        if text.startswith(o + " "):
            opener, text = o, text[len(o) + 1 :]
            break
    for c in _CLOSERS:
        if text.endswith(" " + c):
            closer, text = c, text[: -len(c) - 1]
            break
    return opener, text, closer


def strip_frame(text: str) -> str:
    """``text`` without a persona opener or closer added by :func:`rewrite`."""
    return split_frame(text)[1]


# -- validating a paraphrase (of a model, or any other source) ------------------------------
PARAPHRASE_REASONS: tuple[str, ...] = (
    "empty",
    "markup",
    "too_long",
    "lost_value",
    "new_value",
    "numbers_changed",
    "meaning_changed",
    "bad_text",
    "underivable",
)
"""Why a paraphrase of a request is refused (the request then keeps its template text)."""

MAX_GROWTH = 3.0
"""A paraphrase may be at most this many times as long as the request (plus 200 characters)."""

_MARKUP = re.compile(
    r"<[/|]?[a-z_|]+>|<\|[a-z_]+\|>|\b(?:user|assistant|system|customer|agent)\s*:",
    re.IGNORECASE,
)
_VALUE_TOKEN = re.compile(r"\S*[\d@#]\S*")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "so",
        "to",
        "of",
        "for",
        "in",
        "on",
        "at",
        "by",
        "with",
        "from",
        "into",
        "about",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "am",
        "do",
        "does",
        "did",
        "have",
        "has",
        "had",
        "i",
        "me",
        "my",
        "mine",
        "you",
        "your",
        "we",
        "our",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "what",
        "which",
        "who",
        "how",
        "when",
        "why",
        "can",
        "could",
        "would",
        "will",
        "shall",
        "should",
        "may",
        "might",
        "must",
        "please",
        "thanks",
        "thank",
        "just",
        "also",
        "too",
        "very",
        "really",
        "some",
        "any",
        "all",
        "not",
        "no",
        "yes",
        "hi",
        "hello",
    ]
)
MIN_OVERLAP = 0.4
"""Share of the request's content words a paraphrase must keep (anchors are always kept)."""


def _stem(word: str) -> str:
    return word.lower()[:4]


def _anchors(task: Task, turn: int) -> set[str]:
    """Word stems a paraphrase must keep: proper nouns inside a sentence (a product, a city,
    a card brand), the request's words that name what the gold does (the words of its tools'
    names: cancel, return, address, payment...) and the request's words of a fact (the
    reason "ordered by mistake" in "I ordered it by mistake")."""
    request = task.turns[turn].request
    names = {c.name for c in task.turns[turn].calls} | set(task.turns[turn].withheld_tools)
    if not names:  # a withheld turn asks for what the next turn does
        names = {c.name for t in task.turns[turn + 1 :] for c in t.calls}
    tool_words = {_stem(w) for name in names for w in name.split("_") if len(w) >= 4}
    said = {_stem(w) for w in _WORD.findall(request)}
    # words of a fact the request words in its own way ("I ordered it by mistake" for the
    # reason "ordered by mistake"): a paraphrase must not swap the reason for another
    fact_words = {
        _stem(w)
        for v in task.user.facts.values()
        if not any(c.isdigit() for c in v)
        for w in _WORD.findall(v)
        if len(w) >= 4 and w.lower() not in _STOPWORDS
    }
    anchors = fact_words & said
    for sentence in re.split(r"(?<=[.!?])\s+", request):
        words = _WORD.findall(sentence)
        for i, w in enumerate(words):
            if (i > 0 and w[0].isupper() and len(w) >= 3 and w.lower() not in _STOPWORDS) or (
                _stem(w) in tool_words
            ):
                anchors.add(_stem(w))
    return anchors


def _content(text: str) -> set[str]:
    return {_stem(w) for w in _WORD.findall(text) if len(w) >= 3 and w.lower() not in _STOPWORDS}


def _value_tokens(text: str) -> list[str]:
    """Tokens that carry a value (a digit, an email sign, an id sign), without the
    punctuation around them."""
    return sorted(t.strip(".,;:!?()[]\"'") for t in _VALUE_TOKEN.findall(text))


def paraphrase_problem(
    task: Task,
    turn: int,
    text: str,
    underivable: Callable[[Task], list[str]] | None = None,
) -> tuple[str, str] | None:
    """Why ``text`` cannot replace the request of turn ``turn`` of ``task``, or None.

    A paraphrase must state every fact value the request states, as a whole token, and no
    fact value it does not state (a hidden fact stays hidden); carry exactly the request's
    value tokens (numbers, ids, emails); keep the words that say what is asked (the
    request's words found in the names of the turn's gold tools, such as "cancel" or
    "address", and proper nouns such as a product or a city) and at least
    :data:`MIN_OVERLAP` of its content words; read as a sentence; hold no chat markup; and
    leave every gold argument derivable (``underivable(new_task)``, when given, lists those
    that are not), so the gold, the task's meaning, is unchanged.

    Returns:
        ``(reason, detail)`` with a reason of :data:`PARAPHRASE_REASONS`, or None when the
        paraphrase is valid.
    """
    original = task.turns[turn].request
    text = text.strip()
    if not text:
        return "empty", "no text"
    m = _MARKUP.search(text)
    if m:
        return "markup", f"chat markup {m.group(0)!r}"
    if len(text) > MAX_GROWTH * len(original) + 200:
        return "too_long", f"{len(text)} characters for a request of {len(original)}"
    values = [v for v in task.user.facts.values() if v]
    before, after = _values_stated(original, values), _values_stated(text, values)
    if before - after:
        return "lost_value", "drops " + ", ".join(sorted(before - after))[:200]
    if after - before:
        return "new_value", "states " + ", ".join(sorted(after - before))[:200]
    old_tokens, new_tokens = _value_tokens(original), _value_tokens(text)
    if old_tokens != new_tokens:
        added = sorted(set(new_tokens) - set(old_tokens))
        lost = sorted(set(old_tokens) - set(new_tokens))
        if added:
            return "new_value", "adds " + ", ".join(added)[:200]
        if lost:
            return "lost_value", "drops " + ", ".join(lost)[:200]
        return "numbers_changed", "a value is repeated or dropped"
    kept = _content(text)
    missing = sorted(_anchors(task, turn) - kept)
    if missing:
        return "meaning_changed", "drops the words " + ", ".join(missing)[:200]
    content = _content(original)
    if content and len(content & kept) < MIN_OVERLAP * len(content):
        return "meaning_changed", f"keeps {len(content & kept)} of {len(content)} content words"
    problems = text_problems(text)
    if problems:
        return "bad_text", problems[0]
    if underivable is not None:
        turns = list(task.turns)
        turns[turn] = turns[turn].model_copy(update={"request": text})
        bad = underivable(task.model_copy(update={"turns": tuple(turns)}))
        if bad:
            return "underivable", "; ".join(bad[:3])
    return None
