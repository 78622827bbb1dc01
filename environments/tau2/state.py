"""Episode state over τ²-bench's own databases, tools and environment classes, without
reloading, deep-copying or hashing a whole database per episode.

τ²-bench builds an environment by loading its database from disk (airline: 0.5 s), and its
evaluator compares two environments by hashing the JSON of both whole databases (0.12 s
each). Here every database is loaded once per process and shared:

* **Copy on access** (airline, retail: databases whose fields are tables, ``dict`` of
  records). An episode's database is the shared one seen through :class:`CowTable`\\ s: a
  record is deep-copied into the episode the first time a tool takes it from a table, so
  τ²-bench's tools mutate only the episode's copies. Reset puts the shared records back,
  in time proportional to the records the episode touched. Read tools that scan a whole
  table (searches) see the records as they are, without copies; every other tool gets
  copies even when it scans.
* **Whole copies** (telecom: a database of a few kilobytes, lists rather than tables, and a
  user device). An episode unpickles its own copy of both databases (0.1 ms).

Two states are compared by their **changes**: the records whose JSON differs from the
shared base record (copy on access), or the whole database's hash (whole copies). Two
databases over the same base have equal hashes in τ²-bench's sense (``sha256`` of
``json.dumps(db.model_dump(), sort_keys=True, default=str)``) exactly when their changes
are equal, because that JSON is the sorted union of the per-record JSON of each table.

τ²-bench's tools, its ``Environment`` class (``get_response``, ``make_tool_call``,
``sync_tools``, ``run_env_assertion``...) and its tool schemas are used as they are; only
``calculate`` is replaced (see :func:`safe_calculate`).
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import json
import pickle
import random
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, get_args, get_origin

from environments.tau2.package import tau2_module
from rods_env.calculator import evaluate_python_arithmetic
from rods_env.errors import ConfigError

_MISSING: Any = object()
CALCULATOR_CHARS = frozenset("0123456789+-*/(). ")
"""The characters τ²-bench's ``calculate`` accepts."""


# -- calculate ---------------------------------------------------------------------------------
def safe_calculate(self: Any, expression: str) -> str:
    """τ²-bench's ``calculate`` with rods' evaluator in place of ``eval``.

    τ²-bench checks the characters (digits, ``+ - * /``, parentheses, dots, spaces), then
    ``eval``\\ s the text, so ``9**9**9`` hangs the process. The same check runs here, then
    :func:`rods_env.calculator.evaluate_python_arithmetic`, which gives ``eval``'s value
    (and ``eval``'s error message where ``eval`` fails) and refuses only the powers that
    would hang. The result is formatted as τ²-bench formats it.
    """
    if not all(char in CALCULATOR_CHARS for char in expression):
        raise ValueError("Invalid characters in expression")
    value: Any = evaluate_python_arithmetic(expression)
    return str(round(float(value), 2))


@functools.cache
def _safe_toolkit_class(toolkit_class: Any) -> Any:
    """``toolkit_class`` with its ``calculate`` tool (if any) run by :func:`safe_calculate`,
    and its ``tools`` mapping built once per toolkit object.

    τ²-bench's ``tools`` property rebuilds the name-to-method dict (merging the class
    hierarchy's tool lists) on every access, twice per tool call; here it is made once per
    episode's toolkit, read-only, with the same bound methods. The subclass keeps the
    original's name, docstrings and signatures, so the tool schemas an agent sees are
    τ²-bench's own.
    """
    toolkit = tau2_module("tau2.environment.toolkit")
    attrs: dict[str, Any] = {"tools": property(_cached_tools, doc=toolkit_class.tools.__doc__)}
    original = getattr(toolkit_class, "calculate", None)
    if original is not None:
        tool_type = getattr(original, toolkit.TOOL_TYPE_ATTR)

        @functools.wraps(original)
        def calculate(self: Any, expression: str) -> str:
            return safe_calculate(self, expression)

        attrs["calculate"] = toolkit.is_tool(tool_type)(calculate)
    return type(toolkit_class.__name__, (toolkit_class,), attrs)


def _cached_tools(self: Any) -> Mapping[str, Callable[..., Any]]:
    """The toolkit's tools by name (bound methods), made on first use."""
    found = self.__dict__.get("_rods_tools")
    if found is None:
        names = list(self._func_tools)
        found = self.__dict__["_rods_tools"] = MappingProxyType(
            {name: getattr(self, name) for name in names}
        )
    return found


# -- reproducible ids ------------------------------------------------------------------------
_EPISODE_IDS: contextvars.ContextVar[random.Random | None] = contextvars.ContextVar(
    "tau2_episode_ids", default=None
)


class _EpisodeUuid:
    """Stands in for the ``uuid`` module inside τ²-bench's tool modules (telecom names a
    new bill ``B<uuid4>``): while an episode's tool runs, ``uuid4()`` draws from that
    episode's stream, seeded by the task, so the same task and actions give the same
    database in every process (and the gold replay the same ids as an agent that does
    the same); elsewhere it is the real ``uuid4``."""

    def __getattr__(self, name: str) -> Any:
        return getattr(uuid, name)

    @staticmethod
    def uuid4() -> uuid.UUID:
        """A version-4 UUID from the running episode's stream (the real one outside)."""
        rng = _EPISODE_IDS.get()
        if rng is None:
            return uuid.uuid4()
        return uuid.UUID(int=rng.getrandbits(128), version=4)


class _IdStream(random.Random):
    """An episode's id stream that keeps the ids it gave (:attr:`EpisodeState.drawn_ids`)."""

    def __init__(self) -> None:
        super().__init__()
        self.drawn: list[int] = []

    def getrandbits(self, k: int, /) -> int:
        bits = super().getrandbits(k)
        self.drawn.append(bits)
        return bits


def ids_seed(domain: str, task_id: str) -> str:
    """The seed of an episode's id stream (see :class:`_EpisodeUuid`): the task's, so the
    same actions give the same ids in every episode, replay and process."""
    return f"tau2-ids:{domain}:{task_id}"


@contextlib.contextmanager
def episode_ids(stream: random.Random) -> Iterator[None]:
    """Draw τ²-bench's ``uuid4()`` ids from ``stream`` inside the block (as an episode's
    tools do), e.g. to run τ²-bench's own code with reproducible ids."""
    token = _EPISODE_IDS.set(stream)
    try:
        yield
    finally:
        _EPISODE_IDS.reset(token)


def _seed_tool_ids(domain: str) -> None:
    """Give τ²-bench's tool modules of ``domain`` episode-seeded ids (see
    :class:`_EpisodeUuid`)."""
    for name in (f"tau2.domains.{domain}.tools", f"tau2.domains.{domain}.user_tools"):
        try:
            module = tau2_module(name)
        except ConfigError:
            continue
        if getattr(module, "uuid", None) is uuid:
            setattr(module, "uuid", _EpisodeUuid())  # noqa: B010 - a module's global


# -- copy on access ----------------------------------------------------------------------------
class CowTable(dict[str, Any]):
    """One table of a shared τ²-bench database, as one episode sees it.

    A ``dict`` (pydantic serializes it and τ²-bench's code uses it as one) whose storage
    starts as references to the shared records. ``table[key]`` and ``table.get(key)``
    replace a shared record by a deep copy the first time (so a tool can mutate what it
    gets), assignments and deletions are the episode's own, and :meth:`reset` restores the
    shared records. Scans (``values()``, ``items()``, ``copy()``) copy every record first,
    except while :attr:`reading` is set (a read-only tool runs).

    Args:
        base: The shared table (never modified).
    """

    __slots__ = ("_base", "_gone", "_owned", "reading")

    def __init__(self, base: Mapping[str, Any]) -> None:
        super().__init__(base)
        self._base = base
        self._owned: set[str] = set()
        self._gone: set[str] = set()
        self.reading = False

    # copies ------------------------------------------------------------------------------
    def _own(self, key: str) -> Any:
        value = dict.__getitem__(self, key)
        if key not in self._owned:
            value = copy.deepcopy(value)
            dict.__setitem__(self, key, value)
            self._owned.add(key)
        return value

    def _own_all(self) -> None:
        if len(self._owned) < dict.__len__(self):
            for key in list(dict.keys(self)):
                self._own(key)

    def __getitem__(self, key: str) -> Any:
        return self._own(key)

    def get(self, key: str, default: Any = None) -> Any:
        """``table[key]`` if present (the episode's copy), else ``default``."""
        return self._own(key) if dict.__contains__(self, key) else default

    def values(self) -> Any:
        """The records (copies unless a read-only tool is scanning)."""
        if not self.reading:
            self._own_all()
        return dict.values(self)

    def items(self) -> Any:
        """The ``(key, record)`` pairs (copies unless a read-only tool is scanning)."""
        if not self.reading:
            self._own_all()
        return dict.items(self)

    def copy(self) -> dict[str, Any]:
        """A plain dict of the episode's records (copies)."""
        self._own_all()
        return dict(dict.items(self))

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {k: copy.deepcopy(dict.__getitem__(self, k), memo) for k in dict.keys(self)}

    def __reduce__(self) -> Any:
        return (dict, (dict(dict.items(self)),))

    # writes ------------------------------------------------------------------------------
    def __setitem__(self, key: str, value: Any) -> None:
        dict.__setitem__(self, key, value)
        self._owned.add(key)
        self._gone.discard(key)

    def __delitem__(self, key: str) -> None:
        dict.__delitem__(self, key)
        self._owned.discard(key)
        if key in self._base:
            self._gone.add(key)

    def pop(self, key: str, *default: Any) -> Any:
        """Remove ``key`` and return its record (or ``default``)."""
        if dict.__contains__(self, key):
            value = self._own(key)
            del self[key]
            return value
        if default:
            return default[0]
        raise KeyError(key)

    def popitem(self) -> tuple[str, Any]:
        """Remove and return the last ``(key, record)``."""
        if not dict.__len__(self):
            raise KeyError("popitem(): dictionary is empty")
        key = next(reversed(dict.keys(self)))
        return key, self.pop(key)

    def setdefault(self, key: str, default: Any = None) -> Any:
        """``table[key]``, inserting ``default`` first when absent."""
        if dict.__contains__(self, key):
            return self._own(key)
        self[key] = default
        return default

    def update(self, *args: Any, **kwargs: Any) -> None:
        """Assign every pair of ``dict(*args, **kwargs)``."""
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def clear(self) -> None:
        """Remove every record (of this episode's view)."""
        for key in list(dict.keys(self)):
            del self[key]

    def __ior__(self, other: Any) -> CowTable:  # type: ignore[misc,override]
        self.update(other)
        return self

    # the episode -------------------------------------------------------------------------
    def changed_keys(self) -> set[str]:
        """Keys whose record this episode took, assigned or deleted."""
        return self._owned | self._gone

    def current(self, key: str) -> Any:
        """The episode's record under ``key`` (no copy), or a missing marker."""
        return dict.get(self, key, _MISSING)

    def reset(self) -> None:
        """Back to the shared records: O(records the episode touched)."""
        base = self._base
        for key in self._owned:
            if key in base:
                dict.__setitem__(self, key, base[key])
            else:
                dict.__delitem__(self, key)
        for key in self._gone:
            dict.__setitem__(self, key, base[key])
        self._owned.clear()
        self._gone.clear()
        self.reading = False


def _canonical(value: Any) -> str:
    """τ²-bench's canonical JSON of dumped data (``get_dict_hash`` before the sha256)."""
    return json.dumps(value, sort_keys=True, default=str)


class CowDatabase:
    """A τ²-bench database of tables, shared, with one episode's view of it.

    Args:
        base: The shared database (a τ²-bench ``DB`` model whose fields are all tables).
    """

    def __init__(self, base: Any) -> None:
        cls = type(base)
        self.base = base
        self.tables: dict[str, CowTable] = {
            name: CowTable(getattr(base, name)) for name in cls.model_fields
        }
        self.db = cls.model_construct(**self.tables)
        self._adapters = _value_adapters(cls)
        self._base_json = _base_json_cache(base)

    @staticmethod
    def supports(base: Any) -> bool:
        """Whether every field of ``base`` is a table (``dict`` of records)."""
        fields = type(base).model_fields
        return bool(fields) and all(isinstance(getattr(base, f), dict) for f in fields)

    def reset(self) -> Any:
        """Restore the shared records; returns the episode's database model."""
        for table in self.tables.values():
            table.reset()
        return self.db

    def set_reading(self, reading: bool) -> None:
        """Mark whether the tool about to run only reads (its scans need no copies)."""
        for table in self.tables.values():
            table.reading = reading

    def changes(self) -> frozenset[tuple[str, str, str | None]]:
        """The records that differ from the shared base: ``(table, key, JSON or None)``."""
        out = set()
        for name, table in self.tables.items():
            dump = self._adapters[name]
            base_json = self._base_json[name]
            for key in table.changed_keys():
                value = table.current(key)
                now = None if value is _MISSING else _canonical(dump(value))
                if now != base_json(key):
                    out.add((name, key, now))
        return frozenset(out)


def _value_adapters(db_class: Any) -> dict[str, Callable[[Any], Any]]:
    """Per table, how one record is dumped exactly as the whole database's ``model_dump``
    dumps it (the serializer of the table's declared value type)."""
    return _value_adapters_cached(db_class)


@functools.cache
def _value_adapters_cached(db_class: Any) -> dict[str, Callable[[Any], Any]]:
    from pydantic import TypeAdapter

    out: dict[str, Callable[[Any], Any]] = {}
    for name, info in db_class.model_fields.items():
        annotation = info.annotation
        if get_origin(annotation) is not dict:
            raise ConfigError(f"{db_class.__name__}.{name} is not a dict table")
        value_type = get_args(annotation)[1]
        out[name] = TypeAdapter(value_type).dump_python
    return out


_BASE_JSON: dict[int, dict[str, Callable[[str], str | None]]] = {}
_BASE_JSON_LOCK = threading.Lock()


def _base_json_cache(base: Any) -> dict[str, Callable[[str], str | None]]:
    """Per table, the canonical JSON of a base record (None when absent), computed once per
    record and process."""
    cached = _BASE_JSON.get(id(base))
    if cached is not None:
        return cached
    with _BASE_JSON_LOCK:
        cached = _BASE_JSON.get(id(base))
        if cached is None:
            adapters = _value_adapters(type(base))
            cached = {}
            for name in type(base).model_fields:
                table = getattr(base, name)

                @functools.cache
                def base_json(
                    key: str, table: Any = table, dump: Callable[[Any], Any] = adapters[name]
                ) -> str | None:
                    record = table.get(key, _MISSING)
                    return None if record is _MISSING else _canonical(dump(record))

                cached[name] = base_json
            _BASE_JSON[id(base)] = cached
    return cached


class CopiedDatabase:
    """A small τ²-bench database that each episode copies whole (telecom).

    Args:
        base: The shared database model.
    """

    def __init__(self, base: Any) -> None:
        self.base = base
        self._bytes = _pickled(base)
        self.db: Any = None

    def reset(self) -> Any:
        """A fresh copy of the base; returns it."""
        self.db = pickle.loads(self._bytes)
        return self.db

    def set_reading(self, reading: bool) -> None:
        """Nothing to do: the episode owns the whole copy."""

    def changes(self) -> str:
        """The whole database's hash, as τ²-bench computes it."""
        utils = tau2_module("tau2.utils.utils")
        return str(utils.get_dict_hash(self.db.model_dump()))


_PICKLED: dict[int, tuple[Any, bytes]] = {}


def _pickled(base: Any) -> bytes:
    """The pickle of a shared database, made once per process (the base never changes)."""
    found = _PICKLED.get(id(base))
    if found is None or found[0] is not base:
        found = _PICKLED[id(base)] = (base, pickle.dumps(base))
    return found[1]


def make_database(base: Any) -> CowDatabase | CopiedDatabase:
    """The episode-state strategy that fits ``base`` (see the module docstring)."""
    return CowDatabase(base) if CowDatabase.supports(base) else CopiedDatabase(base)


# -- one τ²-bench domain -----------------------------------------------------------------------
@dataclass
class Tau2Backend:
    """One τ²-bench domain loaded once per process: its prototype environments (the
    policy, the toolkit classes, the shared databases) as τ²-bench's own factory builds them.

    Attributes:
        domain: τ²-bench's domain name (``"airline"``).
        proto: The environment τ²-bench's ``get_environment()`` builds.
        solo_proto: The same in solo mode (None when the domain has none).
        tool_schemas: The agent tools' OpenAI schemas (τ²-bench's own).
        user_tool_schemas: The user tools' schemas (empty when the user has none).
    """

    domain: str
    proto: Any
    solo_proto: Any
    tool_schemas: tuple[dict[str, Any], ...]
    user_tool_schemas: tuple[dict[str, Any], ...]
    _read_tools: frozenset[str] = field(default_factory=frozenset)

    @property
    def has_user_tools(self) -> bool:
        """Whether the user acts on an environment of their own (telecom's phone)."""
        return self.proto.user_tools is not None

    def is_read_tool(self, name: str) -> bool:
        """Whether the agent or user tool ``name`` is one τ²-bench marks read-only."""
        return name in self._read_tools

    def new_state(self, *, solo: bool = False) -> EpisodeState:
        """A fresh episode state (call :meth:`EpisodeState.reset` before use)."""
        proto = self.solo_proto if solo else self.proto
        if proto is None:
            raise ConfigError(f"τ²-bench's {self.domain} domain has no solo mode")
        return EpisodeState(self, proto, solo=solo)


_BACKENDS: dict[str, Tau2Backend] = {}
_BACKENDS_LOCK = threading.Lock()


def backend(domain: str) -> Tau2Backend:
    """The backend of τ²-bench domain ``domain`` (built once per process, thread-safe)."""
    found = _BACKENDS.get(domain)
    if found is not None:
        return found
    with _BACKENDS_LOCK:
        found = _BACKENDS.get(domain)
        if found is None:
            found = _BACKENDS[domain] = _build_backend(domain)
    return found


def _build_backend(domain: str) -> Tau2Backend:
    module = tau2_module(f"tau2.domains.{domain}.environment")
    _seed_tool_ids(domain)
    proto = module.get_environment()
    try:
        solo_proto = module.get_environment(solo_mode=True)
    except ValueError:  # "Airline domain does not support solo mode"
        solo_proto = None
    if solo_proto is not None:  # one shared database, whichever mode an episode runs
        solo_proto.tools.db = proto.tools.db
        if solo_proto.user_tools is not None:
            solo_proto.user_tools.db = proto.user_tools.db
    toolkit = tau2_module("tau2.environment.toolkit")
    read: set[str] = set()
    for kit in (proto.tools, proto.user_tools):
        if kit is not None:
            read.update(n for n in kit.tools if kit.tool_type(n) == toolkit.ToolType.READ)
    return Tau2Backend(
        domain=domain,
        proto=proto,
        solo_proto=solo_proto,
        tool_schemas=tuple(t.openai_schema for t in proto.get_tools()),
        user_tool_schemas=tuple(t.openai_schema for t in proto.get_user_tools())
        if proto.user_tools is not None
        else (),
        _read_tools=frozenset(read),
    )


class EpisodeState:
    """The state of one episode: τ²-bench's environment object around this episode's
    databases (fresh toolkit objects each reset, so no toolkit state such as telecom's id
    counters carries over).

    Args:
        backend: The domain.
        proto: The prototype environment (normal or solo mode).
        solo: Whether the environment runs in solo mode.
    """

    def __init__(self, backend: Tau2Backend, proto: Any, *, solo: bool) -> None:
        self.backend = backend
        self.proto = proto
        self.solo = solo
        self._shared_agent_db = make_database(proto.tools.db)
        self._shared_user_db = (
            make_database(proto.user_tools.db) if proto.user_tools is not None else None
        )
        self._agent_db: CowDatabase | CopiedDatabase = self._shared_agent_db
        self._user_db: CowDatabase | CopiedDatabase | None = self._shared_user_db
        kits: list[Any] = [type(proto.tools), type(proto.user_tools)]
        self._tools_class = _safe_toolkit_class(kits[0])
        self._user_tools_class = (
            _safe_toolkit_class(kits[1]) if proto.user_tools is not None else None
        )
        self.env: Any = None
        self._ids = _IdStream()
        self.synced = False
        """Whether the last thing run on this state was τ²-bench's ``sync_tools`` (its own
        call, or the one that ends a successful ``get_response``): running it again then
        changes nothing (telecom's sync is a fixed point: it sets the surroundings from the
        databases, and settles a paid request into the next one), so scoring skips it."""

    def reset(self, task: Any) -> Any:
        """Start from the task's initial state, as τ²-bench's ``set_state`` does without a
        message history: initialization data, initialization actions, then ``sync_tools``.

        Returns:
            τ²-bench's environment object for this episode.
        """
        initial = task.initial_state
        data = initial.initialization_data if initial is not None else None
        actions = initial.initialization_actions if initial is not None else None
        if initial is not None and initial.message_history:
            raise ConfigError(
                f"τ²-bench task {task.id} starts from a message history, which these "
                "environments do not replay"
            )
        self._agent_db, self._user_db = self._shared_agent_db, self._shared_user_db
        agent_db = self._agent_db.reset()
        user_db = self._user_db.reset() if self._user_db is not None else None
        self._ids.seed(ids_seed(self.backend.domain, str(task.id)))
        self._ids.drawn.clear()
        env = copy.copy(self.proto)
        env.tools = self._tools_class(agent_db)
        env.user_tools = (
            self._user_tools_class(user_db) if self._user_tools_class is not None else None
        )
        self.env = env
        if data is not None:
            self._initialize_data(task, data)
        for action in actions or ():
            self.run(functools.partial(env.run_env_function_call, action), None)
        self.sync()
        return env

    def sync(self) -> None:
        """τ²-bench's ``sync_tools`` (the user's surroundings from the databases)."""
        self.run(self.env.sync_tools, None)
        self.synced = True

    def _initialize_data(self, task: Any, data: Any) -> None:
        """τ²-bench's ``update_db`` replaces a database by a new model: the episode then
        owns that model whole (no shared base; such tasks are rare)."""
        env = self.env
        if data.agent_data is not None:
            env.tools.update_db(data.agent_data)
            self._agent_db = _Detached(env.tools.db)
        if data.user_data is not None:
            env.user_tools.update_db(data.user_data)
            self._user_db = _Detached(env.user_tools.db)

    def run(self, call: Callable[[], Any], tool_name: str | None) -> Any:
        """Run ``call`` (a tool call or an environment function) with scans copy-free when
        ``tool_name`` is a read-only tool."""
        self.synced = False
        reading = tool_name is not None and self.backend.is_read_tool(tool_name)
        if reading:
            self._agent_db.set_reading(True)
            if self._user_db is not None:
                self._user_db.set_reading(True)
        token = _EPISODE_IDS.set(self._ids)
        try:
            return call()
        finally:
            _EPISODE_IDS.reset(token)
            if reading:
                self._agent_db.set_reading(False)
                if self._user_db is not None:
                    self._user_db.set_reading(False)

    def get_response(self, tool_call: Any) -> Any:
        """τ²-bench's ``Environment.get_response`` (the tool's reply as a ``ToolMessage``,
        errors as ``"Error: ..."``, then ``sync_tools``)."""
        reply = self.run(lambda: self.env.get_response(tool_call), tool_call.name)
        self.synced = not reply.error  # its last step was sync_tools unless something raised
        return reply

    def make_tool_call(self, name: str, requestor: str, arguments: Mapping[str, Any]) -> Any:
        """τ²-bench's ``Environment.make_tool_call`` (raises what the tool raises)."""
        return self.run(
            lambda: self.env.make_tool_call(name, requestor=requestor, **arguments), name
        )

    @property
    def drawn_ids(self) -> tuple[str, ...]:
        """The ids (``uuid4().hex``) τ²-bench's tools drew in this episode, in order
        (telecom's new bills are named ``"B" + hex[:8]``)."""
        return tuple(uuid.UUID(int=bits, version=4).hex for bits in self._ids.drawn)

    def fingerprint(self) -> tuple[Any, Any]:
        """What τ²-bench's database check compares: the agent and user databases' changes."""
        user = self._user_db.changes() if self._user_db is not None else None
        return self._agent_db.changes(), user

    def iter_tables(self) -> Iterator[str]:
        """Names of the agent database's copy-on-access tables (empty for whole copies)."""
        db = self._agent_db
        return iter(db.tables) if isinstance(db, CowDatabase) else iter(())


class _Detached(CopiedDatabase):
    """A database an initialization replaced: owned whole by the episode and compared by
    hash; the next reset returns to the shared database."""

    def __init__(self, db: Any) -> None:
        self.base = db
        self._bytes = b""
        self.db = db
