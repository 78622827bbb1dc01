"""Rewrite: vary the phrasing and persona of the user's requests, keeping every fact.

Templates only (no model): a persona is drawn for the user; the first request gets an
opener and a closer in that persona's voice; stock phrases ("I want to", "Can you") are
swapped for equivalents. A rewrite never adds, removes or alters a value: every fact value
and number of the original request is still there, and no fact that the original did not
state appears. When a rewrite would break that, the original text is kept. A model-based
paraphraser can replace this stage in ``rods_agent``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from rods_env.task import Task, Turn

PERSONAS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "polite": (
        "courteous and patient; writes complete sentences",
        (
            "I hope you can help me with something.",
            "I'd be grateful for your help with this.",
            "Thank you for taking the time to help me.",
        ),
        ("Thank you very much.", "Thanks in advance for your help.", "Much appreciated."),
    ),
    "direct": (
        "brief and to the point; gives only what is asked",
        ("", "Quick one.", "Straight to it:"),
        ("", "Thanks.", ""),
    ),
    "chatty": (
        "friendly and talkative; adds small talk",
        (
            "Hope your day is going well!",
            "So, I finally got around to sorting this out.",
            "I've been meaning to get in touch about this.",
        ),
        ("Thanks a bunch!", "You're a star, thanks!", "Cheers!"),
    ),
    "worried": (
        "a little anxious; wants reassurance that things are handled",
        (
            "I'm a bit worried about this, so I hope you can help.",
            "This has been bothering me, to be honest.",
            "I really need this sorted out.",
        ),
        (
            "Please let me know once it's done.",
            "I'd appreciate it if you could take care of it.",
            "Thanks, it would be a relief.",
        ),
    ),
}
"""Persona name -> (description stored in the profile, openers, closers)."""

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
    return frozenset(v for v in values if v and v in text)


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

    Args:
        task: A candidate task.
        rng: The variant's generator for this stage.
    """
    values = tuple(task.user.facts.values())
    name = task.user.persona if task.user.persona in PERSONAS else rng.choice(sorted(PERSONAS))
    description, openers, closers = PERSONAS[name]
    turns: list[Turn] = []
    for i, turn in enumerate(task.turns):
        text = rephrase(turn.request, rng, values)
        if i == 0:
            opener = openers[rng.randrange(len(openers))]
            closer = closers[rng.randrange(len(closers))]
            framed = " ".join(p for p in (opener, text, closer) if p)
            text = framed if _safe(turn.request, framed, values) else text
        turns.append(turn if text == turn.request else turn.model_copy(update={"request": text}))
    persona = task.user.persona or f"{name}: {description}"
    user = (
        task.user
        if persona == task.user.persona
        else task.user.model_copy(update={"persona": persona})
    )
    return task.model_copy(update={"turns": tuple(turns), "user": user})


_OPENERS = sorted({o for _, openers, _ in PERSONAS.values() for o in openers if o}, key=len)[::-1]
_CLOSERS = sorted({c for _, _, closers in PERSONAS.values() for c in closers if c}, key=len)[::-1]


def strip_frame(text: str) -> str:
    """``text`` without a persona opener or closer added by :func:`rewrite`."""
    for opener in _OPENERS:
        if text.startswith(opener + " "):
            text = text[len(opener) + 1 :]
            break
    for closer in _CLOSERS:
        if text.endswith(" " + closer):
            text = text[: -len(closer) - 1]
            break
    return text
