"""Tasks as frozen, serializable data (JSONL in and out)."""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)

from rods_env.errors import ConfigError, TaskFileError
from rods_env.fileio import atomic_write

Variant = Literal["base", "missing_parameter", "missing_function", "long_context", "distractor"]
VARIANTS: tuple[str, ...] = (
    "base",
    "missing_parameter",
    "missing_function",
    "long_context",
    "distractor",
)


class Frozen(BaseModel):
    """Immutable model that rejects unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCall(Frozen):
    """One tool call: a name and JSON arguments."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)

    def key(self) -> str:
        """Canonical text of the call (sorted JSON arguments); kept for recent calls (a
        task's calls are keyed again and again by synthesis and its dedupe)."""
        hit = _CALL_KEYS.get(id(self))
        if hit is not None and hit[0] is self:
            return hit[1]
        key = f"{self.name}({json.dumps(self.arguments, sort_keys=True)})"
        _CALL_KEYS[id(self)] = (self, key)
        while len(_CALL_KEYS) > 16384:
            _CALL_KEYS.popitem(last=False)
        return key


_CALL_KEYS: OrderedDict[int, tuple[ToolCall, str]] = OrderedDict()


class Turn(Frozen):
    """One user request and what fulfils it.

    Attributes:
        request: What the user says to open the turn.
        calls: Gold tool calls, look-ups included, in an order that works.
        outputs: Values the agent must communicate in its messages during the turn.
        withheld_tools: Tools the agent may not use in this turn (missing-function variant);
            the right behaviour is to make no write and say the request cannot be done now.
        hidden_facts: Fact names the user holds back until asked (missing-parameter variant).
    """

    request: str
    calls: tuple[ToolCall, ...] = ()
    outputs: tuple[str, ...] = ()
    withheld_tools: tuple[str, ...] = ()
    hidden_facts: tuple[str, ...] = ()


class UserProfile(Frozen):
    """The simulated user: who they are and the facts they can tell when asked.

    Attributes:
        name: Display name.
        persona: A short description of how they talk (used by LLM users and rewriters).
        facts: Fact name (e.g. ``"email"``, ``"zip code"``, ``"order id"``) to value.
    """

    name: str
    persona: str = ""
    facts: dict[str, str] = Field(default_factory=dict)


class Signature(Frozen):
    """Structural complexity of a task, computed from its gold calls by value-flow tracing.

    Attributes:
        tools: Tool name of each gold call, in call order across turns.
        edges: ``(i, j)`` when an argument of call ``j`` is a value that call ``i`` returned.
        depth: Calls on the longest dependency chain.
        writes: Number of write calls.
        turns: Number of user turns.
        requests: For a composed task (several skills' requests of one customer, see
            :mod:`rods_env.synthesis.compose`), how many requests open in each turn; None
            for a task of one skill (one request). Left out of the JSON form when None.
        skills: For a composed task, the skill of each request in order; None otherwise.
    """

    tools: tuple[str, ...]
    edges: tuple[tuple[int, int], ...]
    depth: int
    writes: int
    turns: int
    requests: tuple[int, ...] | None = None
    skills: tuple[str, ...] | None = None

    @model_serializer(mode="wrap")
    def _without_unset_composition(self, handler: SerializerFunctionWrapHandler) -> Any:
        # a task of one skill serializes exactly as before composition existed, so the
        # committed seed sets stay bit-identical
        data = handler(self)
        if isinstance(data, dict):
            for name in ("requests", "skills"):
                if data.get(name, 0) is None:
                    del data[name]
        return data

    @property
    def key(self) -> str:
        """Canonical string: equal for tasks of the same structure."""
        edges = ",".join(f"{i}>{j}" for i, j in self.edges)
        key = f"t{self.turns}|w{self.writes}|d{self.depth}|{'+'.join(self.tools)}|{edges}"
        if self.requests is not None:
            key += "|r" + ".".join(map(str, self.requests))
        return key

    @property
    def width(self) -> int:
        """The most requests one turn opens (1 for a task of one skill)."""
        return max(self.requests, default=1) if self.requests else 1

    @property
    def composed(self) -> int:
        """How many different skills the task composes (1 for a task of one skill)."""
        return len(set(self.skills)) if self.skills else 1

    @property
    def knobs(self) -> dict[str, int]:
        """The difficulty knobs synthesis moves along: ``depth`` (the longest dependency
        chain, in calls), ``width`` (the most requests in one turn), ``turns`` and
        ``skills`` (different skills composed)."""
        return {
            "depth": self.depth,
            "width": self.width,
            "turns": self.turns,
            "skills": self.composed,
        }

    @property
    def size(self) -> tuple[int, int, int, int]:
        """Order used to say one signature is harder: (turns, calls, depth, writes)."""
        return (self.turns, len(self.tools), self.depth, self.writes)


SKILL_SEPARATOR = "+"
"""Joins the skills of a composed task's requests in :attr:`Task.skill`
(``"cancel_order+product_info"``)."""


class Request(Frozen):
    """One request of a task: what one skill asked for, and the turn where it opens.

    A task of one skill is one request; a composed task (see
    :mod:`rods_env.synthesis.compose`) records each request's skill in :attr:`Task.skill`
    (joined by :data:`SKILL_SEPARATOR`) and its shape under ``"<k>."`` keys of
    :attr:`Task.shape`, with ``"<k>.turn"`` the turn it opens in and ``"<k>.call"`` the
    index of its first gold call among the task's gold calls.
    """

    skill: str
    shape: dict[str, int] = Field(default_factory=dict)
    turn: int = 0
    call: int = 0


def encode_requests(requests: list[Request]) -> tuple[str, dict[str, int]]:
    """The ``(skill, shape)`` of a task made of ``requests`` (one request: its own)."""
    if len(requests) == 1 and requests[0].turn == 0:
        return requests[0].skill, dict(requests[0].shape)
    shape: dict[str, int] = {}
    for k, request in enumerate(requests):
        shape.update({f"{k}.{axis}": value for axis, value in request.shape.items()})
        shape[f"{k}.turn"] = request.turn
        shape[f"{k}.call"] = request.call
    return SKILL_SEPARATOR.join(r.skill for r in requests), shape


def decode_requests(skill: str, shape: Mapping[str, int]) -> list[Request]:
    """The requests a task's ``(skill, shape)`` records (the inverse of
    :func:`encode_requests`)."""
    if SKILL_SEPARATOR not in skill:
        return [Request(skill=skill, shape=dict(shape))]
    names = skill.split(SKILL_SEPARATOR)
    shapes: list[dict[str, int]] = [{} for _ in names]
    places = [{"turn": 0, "call": 0} for _ in names]
    for key, value in shape.items():
        index, _, axis = key.partition(".")
        if not index.isdigit() or int(index) >= len(names) or not axis:
            continue
        if axis in ("turn", "call"):
            places[int(index)][axis] = value
        else:
            shapes[int(index)][axis] = value
    return [
        Request(skill=name, shape=shape, **place)
        for name, shape, place in zip(names, shapes, places, strict=True)
    ]


class Provenance(Frozen):
    """Where a task came from.

    Attributes:
        origin: ``"seed"`` or ``"synthesized"``.
        parent_id: The task it was made from.
        generation: Steps of synthesis from a seed task (a seed: 0).
        mode: ``"resample"`` or ``"expand"``.
        augment: The augmentation kind, None for a base variant.
        step: What *expand* grew: a shape axis of the skill, or ``join``, ``append`` or
            ``deepen`` (:data:`rods_env.synthesis.plan.STEPS`). Left out of the JSON form
            when None.
    """

    origin: Literal["seed", "synthesized"] = "seed"
    parent_id: str | None = None
    generation: int = 0
    mode: Literal["resample", "expand"] | None = None
    augment: str | None = None
    step: str | None = None

    @model_serializer(mode="wrap")
    def _without_unset_step(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("step", 0) is None:
            del data["step"]  # the committed seed sets stay bit-identical
        return data


class Task(Frozen):
    """One task: a database, a user, and the turns of the conversation with their gold calls.

    Attributes:
        id: Unique id, e.g. ``"retail-0001"``.
        domain: Domain name, e.g. ``"retail"``.
        skill: Name of the skill that generated it.
        shape: The skill's shape parameters (e.g. ``{"items": 2}``).
        split: ``"train"`` or ``"test"`` for seed tasks, None for pools.
        db_seed: Seed of the database the task runs on.
        db_size: Size preset of that database (``"default"``, ``"tiny"``, ``"long"``, ...).
        user: The simulated user.
        turns: The user's requests in order.
        variant: Base or an augmented variant.
        signature: Structural signature (filled by :func:`rods_env.signature.compute_signature`).
        provenance: Seed or synthesized, parent, generation.
        payload: A benchmark's own record of a task that is not in the benchmark's package
            (a synthesized variant of a BFCL task carries its BFCL entry here, so the
            benchmark's environment can run it from the task alone). Left out of the JSON
            form when None.
    """

    id: str
    domain: str
    skill: str
    shape: dict[str, int] = Field(default_factory=dict)
    split: Literal["train", "test"] | None = None
    db_seed: int = 0
    db_size: str = "default"
    user: UserProfile
    turns: tuple[Turn, ...] = Field(min_length=1)
    variant: Variant = "base"
    signature: Signature | None = None
    provenance: Provenance = Field(default_factory=Provenance)
    payload: dict[str, Any] | None = None

    @model_serializer(mode="wrap")
    def _without_unset_payload(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("payload", 0) is None:
            del data["payload"]  # the committed seed sets stay bit-identical
        return data

    @property
    def composed(self) -> bool:
        """Whether the task composes several requests (see :class:`Request`)."""
        return SKILL_SEPARATOR in self.skill

    def requests(self) -> list[Request]:
        """The task's requests: one for a task of one skill, several for a composed one."""
        return decode_requests(self.skill, self.shape)

    @property
    def gold_calls(self) -> tuple[ToolCall, ...]:
        """Every gold call of every turn, in order."""
        return tuple(c for t in self.turns for c in t.calls)

    def content_hash(self) -> str:
        """Hash of everything but the id and provenance (equal for identical task content)."""
        data = self.model_dump(mode="json", exclude={"id", "provenance", "split"})
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_json(self) -> str:
        """One JSONL line (no trailing newline)."""
        return self.model_dump_json(exclude_none=False)


def resolve_task(choice: Any, domain: str, find: Callable[[str], Task]) -> Task:
    """The task an episode's ``options["task"]`` names: a :class:`Task` of ``domain`` as it
    is, a task id as ``find`` finds it.

    Raises:
        ConfigError: for a task of another domain or a choice of another type (``find``
            raises its own for an unknown id).
    """
    if isinstance(choice, Task):
        if choice.domain != domain:
            raise ConfigError(
                f"task '{choice.id}' belongs to domain '{choice.domain}', "
                f"not to this {domain} environment"
            )
        return choice
    if isinstance(choice, str):
        return find(choice)
    raise ConfigError(f"options['task'] must be a Task or a task id, got {type(choice).__name__}")


def iter_tasks(path: str | Path) -> Iterator[Task]:
    """Read tasks from a JSONL file lazily.

    Raises:
        TaskFileError: naming the file, the line number and what is wrong (unreadable file,
            bytes that are not UTF-8, invalid JSON, a truncated last line, a field that
            does not validate, e.g. a task without turns).
    """
    path = Path(path)
    try:
        fh = path.open("rb")  # lines decoded one by one, so a bad byte names its line
    except OSError as exc:
        raise TaskFileError(f"{path}: cannot open task file ({exc.strerror})") from None
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise TaskFileError(
                    f"{path}:{lineno}: not UTF-8 text (byte {raw[exc.start]:#04x} at column "
                    f"{exc.start + 1})"
                ) from None
            if not line.strip():
                continue
            if not line.endswith("\n"):
                # Every line we write ends with a newline; a missing one means a cut-off file.
                try:
                    json.loads(line)
                except (ValueError, RecursionError):
                    raise TaskFileError(
                        f"{path}:{lineno}: truncated line (file ends mid-record)"
                    ) from None
            try:
                yield Task.model_validate_json(line)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "line"
                kind = (
                    "invalid JSON"
                    if first["type"] == "json_invalid"
                    else f"{where}: {first['msg']}"
                )
                raise TaskFileError(f"{path}:{lineno}: {kind}") from None


def load_tasks(path: str | Path) -> list[Task]:
    """Read every task of a JSONL file (see :func:`iter_tasks` for errors)."""
    return list(iter_tasks(path))


def dump_tasks(tasks: Iterable[Task], path: str | Path) -> int:
    """Write tasks to a JSONL file atomically: a crash never leaves a truncated file.

    Returns:
        The number of tasks written.
    """
    count = 0

    def lines() -> Iterator[str]:
        nonlocal count
        for task in tasks:
            yield task.to_json() + "\n"
            count += 1

    atomic_write(path, lines())
    return count
