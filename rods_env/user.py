"""User simulators: the protocols (:class:`UserSimulator`, :class:`ScenarioUser`) and the
deterministic :class:`ScriptedUser`."""

from __future__ import annotations

import random
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from threading import Lock
from typing import Any, Protocol, runtime_checkable

from rods_env.rewards import mentions
from rods_env.task import Task

FACT_ALIASES: dict[str, tuple[str, ...]] = {
    "email": ("email", "e-mail", "email address", "mail address"),
    "first name": ("first name", "full name", "your name", "name"),
    "last name": ("last name", "surname", "full name", "your name", "name"),
    "zip code": ("zip", "zip code", "postal code", "postcode"),
    "user id": ("user id", "account id", "customer id", "user name", "username"),
    "order id": ("order id", "order number", "order #", "which order", "what order"),
    "reservation id": (
        "reservation id",
        "reservation number",
        "reservation code",
        "booking id",
        "booking number",
        "booking reference",
        "confirmation code",
        "confirmation number",
        "which reservation",
        "which booking",
        "what reservation",
    ),
    "reason": ("reason", "why"),
    "payment method": ("payment method", "pay with", "which card", "what card"),
    "new address": ("new address", "address"),
}
"""Phrases that, in an agent's question, ask for a fact. A fact whose label is not listed is
asked for by its label itself (e.g. "passenger name"). A question names a fact only through
the longest phrase that matches there: "email address" asks for the email, not for an
address, and "the email on your order" asks for the email only."""


@dataclass(frozen=True)
class Persona:
    """How a simulated user talks.

    Attributes:
        description: One line for the profile (LLM users and rewriters read it).
        openers: Sentences that open a first request in this voice ("" for none).
        closers: Sentences that close it.
    """

    description: str
    openers: tuple[str, ...]
    closers: tuple[str, ...]


PERSONAS: dict[str, Persona] = {
    "polite": Persona(
        "courteous and patient; writes complete sentences",
        (
            "I hope you can help me with something.",
            "I'd be grateful for your help with this.",
            "Thank you for taking the time to help me.",
        ),
        ("Thank you very much.", "Thanks in advance for your help.", "Much appreciated."),
    ),
    "direct": Persona(
        "brief and to the point; gives only what is asked",
        ("", "Quick one.", "Straight to it:"),
        ("", "Thanks.", ""),
    ),
    "chatty": Persona(
        "friendly and talkative; adds small talk",
        (
            "Hope your day is going well!",
            "So, I finally got around to sorting this out.",
            "I've been meaning to get in touch about this.",
        ),
        ("Thanks a bunch!", "You're a star, thanks!", "Cheers!"),
    ),
    "worried": Persona(
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
"""The personas of simulated users, by name. A profile records one as
``"<name>: <description>"`` (:func:`persona_text`), so every stage (skills, Rewrite, a model
paraphraser, an LLM user) speaks in the same voice."""

PERSONA_NAMES: tuple[str, ...] = tuple(sorted(PERSONAS))


def persona_text(name: str) -> str:
    """The profile text of persona ``name``: ``"<name>: <description>"``."""
    return f"{name}: {PERSONAS[name].description}"


def persona_name(text: str) -> str | None:
    """The persona name a profile text records, or None when it is not one of
    :data:`PERSONAS`."""
    name = text.split(":", 1)[0].strip()
    return name if name in PERSONAS and text == persona_text(name) else None


_QUESTION = re.compile(
    # (?=[ptswcm]): the words' first letters, a guard that fails fast at most positions
    r"\?|\b(?=[ptswcm])(please (provide|share|tell|give|confirm)|tell me|share|provide|"
    r"what is|what's|which|could you|can you|may i have)\b",
    re.IGNORECASE,
)

_CONFIRM = re.compile(
    r"\b(?=[cpgsdwioa])(confirm|proceed|go ahead|shall i|should i|do you want me|"
    r"would you like me|is (that|this) (correct|right|ok|okay)|ok to|okay to|are you sure)\b",
    re.IGNORECASE,
)


def _is_question(message: str) -> bool:
    """Whether ``message`` asks something (:data:`_QUESTION`); a question mark, the common
    case, is found without running the pattern over the whole message."""
    return "?" in message or _QUESTION.search(message) is not None


@dataclass(frozen=True)
class TurnView:
    """What the environment tells the user simulator about the current turn.

    Attributes:
        task: The task.
        turn: Index of the current turn.
        goal_reached: The turn's gold effect is present and its outputs were communicated.
        effect_present: The turn's gold effect is present in the database.
        needs_write: The turn's gold changes the database.
        missing_outputs: Required outputs not yet communicated.
    """

    task: Task
    turn: int
    goal_reached: bool
    effect_present: bool
    needs_write: bool
    missing_outputs: tuple[str, ...] = ()


class DeferredTurnView(TurnView):
    """A :class:`TurnView` whose judgements are made when first read (then kept):
    ``effect()`` says whether the gold effect is present, ``said()`` whether the outputs
    were communicated and which are missing. A user who answers a question reads neither,
    and the environment judges only what the user reads."""

    _effect: Callable[[], bool]
    _said: Callable[[], tuple[bool, tuple[str, ...]]]

    def __init__(
        self,
        task: Task,
        turn: int,
        needs_write: bool,
        effect: Callable[[], bool],
        said: Callable[[], tuple[bool, tuple[str, ...]]],
    ) -> None:
        # one update of the frozen instance's attributes (built at every reply of the user)
        self.__dict__.update(
            task=task, turn=turn, needs_write=needs_write, _effect=effect, _said=said
        )

    def _memo(self, name: str, compute: Callable[[], Any]) -> Any:
        found = self.__dict__.get(name)
        if found is None:
            found = compute()
            object.__setattr__(self, name, found)
        return found

    @property
    def effect_present(self) -> bool:
        return bool(self._memo("_effect_present", self._effect))

    @property
    def goal_reached(self) -> bool:
        return self.effect_present and bool(self._memo("_said_result", self._said)[0])

    @property
    def missing_outputs(self) -> tuple[str, ...]:
        return tuple(self._memo("_said_result", self._said)[1])


@dataclass(frozen=True)
class UserReply:
    """The user's answer.

    Attributes:
        text: What the user says.
        advance: The current turn is over (its goal reached or abandoned).
        stop: The conversation is over.
        kind: Why the user said it: ``answer``, ``confirm``, ``decline``, ``nudge``,
            ``advance``, ``abandon`` or ``stop``.
    """

    text: str
    advance: bool = False
    stop: bool = False
    kind: str = "answer"


@runtime_checkable
class UserSimulator(Protocol):
    """A simulated user: opens the conversation and answers each agent message."""

    def start(self, task: Task) -> str:
        """Reset for ``task`` and return the user's first message."""
        ...

    def reply(self, message: str, view: TurnView) -> UserReply:
        """Answer the agent's ``message`` given the state of the current turn."""
        ...


@lru_cache(maxsize=4096)
def _alias_pattern(phrase: str) -> re.Pattern[str]:
    return re.compile(r"(?<![a-z0-9])" + re.escape(phrase) + r"(?![a-z0-9])")


@lru_cache(maxsize=1024)
def _phrases(label: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """The phrases that ask for the fact ``label``, each with its whole-word pattern."""
    lowered = label.lower()
    return tuple(
        (phrase, _alias_pattern(phrase))
        for phrase in dict.fromkeys((*FACT_ALIASES.get(lowered, ()), lowered))
    )


def _asked_labels(message: str, facts: Mapping[str, str]) -> list[str]:
    """The facts a message asks for: each phrase of :data:`FACT_ALIASES` (or the label
    itself) found in the message, where a longer phrase hides the shorter ones inside it."""
    return list(_asked(message, tuple(facts)))


@lru_cache(maxsize=8192)
def _asked(message: str, labels: tuple[str, ...]) -> tuple[str, ...]:
    """:func:`_asked_labels` of the facts ``labels`` (remembered: agents ask alike)."""
    text = message.lower()
    found: list[tuple[int, int, str]] = []
    for label in labels:
        for phrase, pattern in _phrases(label):
            if phrase in text:
                found.extend((m.start(), m.end(), label) for m in pattern.finditer(text))
    taken: list[tuple[int, int]] = []
    asked: list[str] = []
    for start, end, label in sorted(found, key=lambda f: (f[0] - f[1], f[0])):
        if any(s < end and start < e and (s, e) != (start, end) for s, e in taken):
            continue  # inside a longer phrase that asks for something else
        taken.append((start, end))
        if label not in asked:
            asked.append(label)
    return tuple(label for label in labels if label in asked)


_STATED: OrderedDict[tuple[int, str], tuple[Task, frozenset[str]]] = OrderedDict()
_STATED_SIZE = 8192
_STATED_LOCK = Lock()


def stated_facts(task: Task, text: str) -> frozenset[str]:
    """The labels of the user's facts whose values ``text`` states.

    Remembered per task and text (a bounded cache of immutable answers): every episode of a
    task opens with the same request, which a reset would otherwise search again for each
    fact's value."""
    key = (id(task), text)
    hit = _STATED.get(key)
    if hit is not None and hit[0] is task:
        return hit[1]
    found = frozenset(
        label for label, value in task.user.facts.items() if value and mentions(text, value)
    )
    with _STATED_LOCK:
        _STATED[key] = (task, found)
        if len(_STATED) > _STATED_SIZE:
            _STATED.popitem(last=False)
    return found


_SEEDED: OrderedDict[str, tuple[Any, ...]] = OrderedDict()
_SEEDED_SIZE = 8192
_SEEDED_LOCK = Lock()


def _seeded_state(seed: str) -> tuple[Any, ...]:
    """The state of ``random.Random(seed)`` just after seeding (a bounded cache of immutable
    states): ``setstate`` of it gives the very stream a fresh ``Random(seed)`` gives, a
    quarter cheaper than a new generator seeded with the string (3.2 against 4.1 µs)."""
    state = _SEEDED.get(seed)
    if state is None:
        state = random.Random(seed).getstate()
        with _SEEDED_LOCK:
            _SEEDED[seed] = state
            if len(_SEEDED) > _SEEDED_SIZE:
                _SEEDED.popitem(last=False)
    return state


@dataclass
class ScriptedUser:
    """Deterministic user simulator driven by the task's facts and turn goals.

    It opens each turn with the turn's request; answers questions with the facts the agent
    asks for (and only those); confirms an action when asked while the turn's write is still
    to be done (or when the turn needs no write: a look-up), and declines when the write is
    done already or its tool is withheld (no workarounds); moves to the next turn when the agent yields after the goal is reached; after
    ``patience`` yields without progress it abandons the turn; it ends the conversation after
    the last turn. Phrasing varies with a generator seeded from the task id, so the same task
    gives the same transcript in every process.

    Args:
        patience: Agent yields tolerated per turn before the user abandons it.
    """

    patience: int = 2
    _task: Task | None = field(default=None, init=False, repr=False)
    _rng: random.Random = field(default_factory=random.Random, init=False, repr=False)
    _nudges: int = field(default=0, init=False, repr=False)
    _told: set[str] = field(default_factory=set, init=False, repr=False)

    _GREETINGS = ("Hi!", "Hello.", "Hi there,", "Hey,", "Good morning.")
    _NEXT = (
        "Thanks! One more thing:",
        "Great, thank you. Also,",
        "Perfect. Next,",
        "Thanks. I also need help with this:",
    )
    _YES = (
        "Yes, please go ahead.",
        "Yes, I confirm.",
        "Yes, that's right, please proceed.",
        "Yes.",
    )
    _BYE = (
        "That's all I needed, thank you!",
        "Great, that's everything. Thanks!",
        "Thank you, goodbye!",
    )

    @classmethod
    def fixed_phrases(cls) -> tuple[str, ...]:
        """Its fixed phrases that can make up a short message: greetings (before a request),
        confirmations and goodbyes (the exploit panel bounds what an echo can say with
        them)."""
        return (*cls._GREETINGS, *cls._YES, *cls._BYE)

    def start(self, task: Task) -> str:
        """Reset for ``task`` and return the first request."""
        self._task = task
        self._rng.setstate(_seeded_state(f"scripted-user:{task.id}"))
        self._nudges = 0
        self._told = set()
        self._tell(task.turns[0].request)
        return f"{self._rng.choice(self._GREETINGS)} {task.turns[0].request}"

    def _tell(self, text: str) -> None:
        """Remember the facts whose values ``text`` states."""
        assert self._task is not None
        self._told |= stated_facts(self._task, text)

    def reply(self, message: str, view: TurnView) -> UserReply:
        """Answer the agent's message (see the class docstring for the rules)."""
        task = self._task
        if task is None:
            raise RuntimeError("ScriptedUser.reply called before start()")
        is_question = _is_question(message)
        confirming = is_question and _CONFIRM.search(message) is not None
        if confirming and view.needs_write and not view.effect_present:
            return UserReply(self._rng.choice(self._YES), kind="confirm")
        if is_question:
            asked = _asked_labels(message, task.user.facts)
            new = [a for a in asked if a not in self._told]
            if new:
                self._told.update(new)
                parts = [f"my {label} is {task.user.facts[label]}" for label in new]
                return UserReply("Sure, " + "; ".join(parts) + ".", kind="answer")
            if asked and not view.goal_reached and self._nudges < self.patience:
                self._nudges += 1
                parts = [f"my {label} is {task.user.facts[label]}" for label in asked]
                return UserReply("As I said, " + "; ".join(parts) + ".", kind="answer")
        if view.goal_reached:
            return self._advance(view, abandoned=False)
        if confirming:
            turn = task.turns[view.turn]
            if not view.needs_write and not turn.withheld_tools:
                # permission for a look-up: harmless, and what the user wants
                return UserReply(self._rng.choice(self._YES), kind="confirm")
            # nothing more to write (done already, or the tool is withheld): no workaround
            return UserReply("No, I don't want that. " + turn.request, kind="decline")
        self._nudges += 1
        if self._nudges > self.patience:
            return self._advance(view, abandoned=True)
        if is_question:
            return UserReply(
                "Sorry, I don't know that. What I need is this: " + task.turns[view.turn].request,
                kind="nudge",
            )
        return UserReply(
            "I still need help with this: " + task.turns[view.turn].request, kind="nudge"
        )

    def _advance(self, view: TurnView, *, abandoned: bool) -> UserReply:
        task = self._task
        assert task is not None
        self._nudges = 0
        lead = "Never mind, let's leave that." if abandoned else ""
        kind = "abandon" if abandoned else "advance"
        nxt = view.turn + 1
        if nxt >= len(task.turns):
            text = f"{lead} {self._rng.choice(self._BYE)}".strip()
            return UserReply(text, advance=True, stop=True, kind="stop" if not abandoned else kind)
        request = task.turns[nxt].request
        self._tell(request)
        connector = self._rng.choice(self._NEXT)
        if (
            connector.endswith(",")
            and request[:1].isupper()
            and not request.startswith(("I ", "I'"))
        ):
            request = request[0].lower() + request[1:]
        text = f"{lead} {connector} {request}".strip()
        return UserReply(text, advance=True, kind=kind)


@dataclass
class TurnTakingUser:
    """A user who takes turns as BFCL's multi-turn benchmark does: every reply of the agent
    without tool calls ends the turn, and the next message is the next request as written.

    The one exception is a question for a fact the user holds (a missing-parameter
    variant's hidden value, or any fact of the profile not yet said): the user answers it
    and the turn goes on. No greeting, no confirmations, no nudges: an agent that asks for
    permission, or stops before the work is done, has ended its turn.
    """

    _task: Task | None = field(default=None, init=False, repr=False)
    _told: set[str] = field(default_factory=set, init=False, repr=False)

    def start(self, task: Task) -> str:
        """Reset for ``task`` and return its first request."""
        self._task = task
        self._told = set()
        self._tell(task.turns[0].request)
        return task.turns[0].request

    def _tell(self, text: str) -> None:
        """Remember the facts whose values ``text`` states."""
        assert self._task is not None
        self._told |= stated_facts(self._task, text)

    def reply(self, message: str, view: TurnView) -> UserReply:
        """Answer a question for an untold fact; otherwise end the turn."""
        task = self._task
        if task is None:
            raise RuntimeError("TurnTakingUser.reply called before start()")
        if _is_question(message):
            asked = [a for a in _asked_labels(message, task.user.facts) if a not in self._told]
            if asked:
                self._told.update(asked)
                parts = [f"my {label} is {task.user.facts[label]}" for label in asked]
                text = "; ".join(parts)
                return UserReply(text[0].upper() + text[1:] + ".", kind="answer")
        nxt = view.turn + 1
        if nxt >= len(task.turns):
            return UserReply("", advance=True, stop=True, kind="stop")
        request = task.turns[nxt].request
        self._tell(request)
        return UserReply(request, advance=True, kind="advance")


@runtime_checkable
class ScenarioUser(Protocol):
    """A simulated user who plays a scenario written for a language model.

    rods' own domains drive their users turn by turn (:class:`UserSimulator`). A benchmark
    brought in with its own user instructions (τ²-bench's user guidelines and a task's
    ``user_scenario``) needs a user who reads those instructions and the conversation and
    writes the next message, possibly calling tools of their own (τ²-bench's telecom
    user works a phone). The environment keeps the conversation and asks for each message.
    A user's message is never read as an agent's action: it is text, whatever it looks
    like (JSON included), except that a user given tools calls them with the forms that
    count as calls in the environment's reading rule (``<tool_call>`` blocks, a message
    dict's ``tool_calls``).
    """

    def begin_scenario(self, task: Any) -> None:
        """A new conversation starts, about ``task`` (the benchmark's own task object)."""
        ...

    def respond(
        self,
        system: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> str | Mapping[str, Any]:
        """The user's next message.

        Args:
            system: The user's instructions (the system prompt).
            messages: The conversation from the user's side, in OpenAI format: the agent's
                messages as ``user``, the user's own as ``assistant`` (with their
                ``tool_calls``), the replies of the user's tools as ``tool``.
            tools: The user's tool schemas (None: the user has no tools).

        Returns:
            Text (tool calls in ``<tool_call>`` blocks) or an OpenAI-style assistant
            message dict (tool calls in ``tool_calls``).
        """
        ...
