"""Copy-on-write domain state.

A domain's records are generated once per (domain, seed, size) into an immutable *base*.
Each episode works on a :class:`Database`: the base plus a small *overlay* of the records
written since the last reset. Reset, checkpoint and rollback cost O(records changed), never
O(database), and the state fingerprint hashes only the overlay.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from threading import Lock
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict

from rods_env.errors import NotFoundError
from rods_env.records import canonical_text


class Record(BaseModel):
    """Base class of database records: immutable, validated, no unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __eq__(self, other: object) -> bool:
        """pydantic's equality, without its general checks where they cannot matter.

        Two records of one class with neither private attributes nor extra fields are
        compared as pydantic compares them then: equal ``__dict__``, or else fields only.
        Scoring compares records many times per episode (the gold effect at every user
        reply, the changes at the end); pydantic's general checks were a third of that.
        """
        if (
            type(other) is type(self)
            and getattr(self, "__pydantic_private__", None) is None
            and getattr(other, "__pydantic_private__", None) is None
            and self.__pydantic_extra__ is None
            and other.__pydantic_extra__ is None
        ):
            mine, theirs = self.__dict__, other.__dict__
            if mine == theirs:
                return True
            fields = type(self).__pydantic_fields__.keys()
            if mine.keys() <= fields and theirs.keys() <= fields:
                return False
        return super().__eq__(other)


class _Deleted:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<deleted>"


DELETED: Any = _Deleted()
"""Overlay marker of a record removed from the base."""

Tables = Mapping[str, Mapping[str, Record]]
_INDEXES: dict[tuple[int, str], tuple[Mapping[str, Any], dict[Hashable, list[str]]]] = {}
Checkpoint = dict[str, dict[str, Any]]


def freeze_tables(tables: Mapping[str, Mapping[str, Record]]) -> Tables:
    """Return read-only views of generated tables, to be shared as a base.

    Args:
        tables: Table name to (record key to record).

    Returns:
        The same tables behind read-only mapping proxies. A table that is already behind
        one is shared as it is (a long-context world derives its tables from another's
        without copying them: see :mod:`rods_env.padding`).
    """
    return MappingProxyType(
        {
            name: rows if isinstance(rows, MappingProxyType) else MappingProxyType(dict(rows))
            for name, rows in tables.items()
        }
    )


class LazyTable(Mapping[str, Record]):
    """A read-only table whose records are built on first look-up, each once.

    A world whose tables a task reads only in part (the classes of a BFCL API world: a task
    reads two or three of eight) builds what is read. Iterating it lists every key;
    reading its values builds them. Wrap it in :class:`types.MappingProxyType` before
    returning it from a generator (:func:`freeze_tables` then shares it as it is).

    Args:
        builders: Key to a function that builds its record.
    """

    def __init__(self, builders: Mapping[str, Callable[[], Record]]) -> None:
        self._builders = dict(builders)
        self._built: dict[str, Record] = {}
        self._lock = Lock()

    def __getitem__(self, key: str) -> Record:
        record = self._built.get(key)
        if record is None:
            build = self._builders[key]  # KeyError for an unknown key, as a dict
            with self._lock:
                record = self._built.get(key)
                if record is None:
                    record = self._built[key] = build()
        return record

    def __iter__(self) -> Iterator[str]:
        return iter(self._builders)

    def __len__(self) -> int:
        return len(self._builders)

    def __contains__(self, key: object) -> bool:
        return key in self._builders


_DIGESTS: OrderedDict[int, tuple[Any, str]] = OrderedDict()


def record_digest(record: Record | Any) -> str:
    """Canonical JSON text of a record (or of the deletion marker), used for hashing.

    Kept for recent records by identity (records are immutable): the dedupe keys of a task
    and of its augmented variants hash the same records again. A changed record's text is
    assembled from the remembered texts of the records it shares with the original
    (:func:`rods_env.records.canonical_text`: the same text).
    """
    if record is DELETED:
        return '"<deleted>"'
    if isinstance(record, BaseModel):
        # assembled from its nested records' texts, each written once (rods_env.records)
        text = canonical_text(record)
        if text is not None:
            return text
    hit = _DIGESTS.get(id(record))
    if hit is not None and hit[0] is record:
        return hit[1]
    text = json.dumps(record.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    _DIGESTS[id(record)] = (record, text)
    while len(_DIGESTS) > 8192:
        _DIGESTS.popitem(last=False)
    return text


_DICT_ITEMS: type = type({}.items())


def _overlaid(
    items: Iterable[tuple[str, Any]], rows: Mapping[str, Any], layer: Mapping[str, Any]
) -> Iterator[Any]:
    """The records of a table of plain base records under an overlay, in the order of
    :meth:`Database.keys` (base order, then added keys), without a look-up per base key."""
    for key, record in items:
        if key in layer:
            record = layer[key]
            if record is DELETED:
                continue
        yield record
    for key, record in layer.items():
        if record is not DELETED and key not in rows:
            yield record


def changes_fingerprint(changes: Mapping[tuple[str, str], Any]) -> str:
    """Hex sha256 of changes (``(table, key) -> record or DELETED``), in canonical order:
    the fingerprint of a state with these changes (:meth:`Database.fingerprint`)."""
    h = hashlib.sha256()
    for (table, key), value in sorted(changes.items()):
        h.update(f"{table}\x1f{key}\x1f{record_digest(value)}\x1e".encode())
    return h.hexdigest()


class Database:
    """The state of one domain instance: a shared immutable base plus a per-episode overlay.

    Args:
        base: Tables produced by the domain's generator (see :func:`freeze_tables`).
    """

    __slots__ = ("_base", "_overlay")

    def __init__(self, base: Tables) -> None:
        self._base = base
        self._overlay: dict[str, dict[str, Any]] = {}

    # -- reading -------------------------------------------------------------------------
    @property
    def base(self) -> Tables:
        """The immutable tables this state is built on."""
        return self._base

    @property
    def tables(self) -> tuple[str, ...]:
        """Names of the tables."""
        return tuple(self._base)

    def get(self, table: str, key: str, default: Any = None) -> Any:
        """Return the current record ``key`` of ``table``, or ``default`` when absent."""
        layer = self._overlay.get(table)
        if layer is not None and key in layer:
            value = layer[key]
            return default if value is DELETED else value
        return self._base[table].get(key, default)

    def require(
        self, table: str, key: str, *, what: str | None = None, hint: str | None = None
    ) -> Any:
        """Return record ``key`` of ``table`` or raise :class:`NotFoundError` for the agent.

        Args:
            table: Table name.
            key: Record key.
            what: Human name of the record kind, used in the message (defaults to the table).
            hint: Which tool finds valid keys.
        """
        record = self.get(table, key)
        if record is None:
            raise NotFoundError(f"No {what or table} with id '{key}'.", hint)
        return record

    def __contains__(self, item: tuple[str, str]) -> bool:
        table, key = item
        return self.get(table, key) is not None

    def keys(self, table: str) -> Iterator[str]:
        """Iterate the keys currently in ``table`` (base order, then added keys)."""
        layer = self._overlay.get(table, {})
        base = self._base[table]
        for key in base:
            if layer.get(key, None) is not DELETED:
                yield key
        for key, value in layer.items():
            if key not in base and value is not DELETED:
                yield key

    def values(self, table: str) -> Iterator[Any]:
        """Iterate the current records of ``table``."""
        layer = self._overlay.get(table)
        rows = self._base[table]
        if not layer:
            return iter(rows.values())  # the common case, at C speed
        items = rows.items()
        if type(items) is not _DICT_ITEMS:
            # a derived table (rods_env.padding) reads other records than it scans: each
            # key is read, as get() reads it
            return (self.get(table, key) for key in self.keys(table))
        return _overlaid(items, rows, layer)

    def items(self, table: str) -> Iterator[tuple[str, Any]]:
        """Iterate ``(key, record)`` pairs of ``table``."""
        for key in self.keys(table):
            yield key, self.get(table, key)

    def find(
        self, table: str, index: str, value: Hashable, key: Callable[[Any], Hashable]
    ) -> list[Any]:
        """Records of ``table`` whose ``key(record) == value``, through a cached index.

        The index over the base is built once per (base table, ``index`` name) and shared by
        every episode; records in the overlay are checked directly, so a lookup costs
        O(matches + records changed), not O(table).

        Args:
            table: Table name.
            index: Name of the index; one name must always go with the same ``key``.
            value: The key value to look for.
            key: Function from a record to its key value.
        """
        base = self._base[table]
        cache_key = (id(base), index)
        entry = _INDEXES.get(cache_key)
        if entry is None or entry[0] is not base:
            built: dict[Hashable, list[str]] = {}
            for k, record in base.items():
                built.setdefault(key(record), []).append(k)
            entry = (base, built)
            _INDEXES[cache_key] = entry
        layer = self._overlay.get(table)
        keys = entry[1].get(value, ())
        if not layer:
            return [base[k] for k in keys]
        found = [base[k] for k in keys if k not in layer]
        found.extend(r for r in layer.values() if r is not DELETED and key(r) == value)
        return found

    def count(self, table: str) -> int:
        """Number of records currently in ``table``."""
        return sum(1 for _ in self.keys(table))

    # -- writing -------------------------------------------------------------------------
    def put(self, table: str, key: str, record: Record) -> None:
        """Insert or replace record ``key`` of ``table``."""
        if table not in self._base:
            raise KeyError(f"unknown table '{table}'; tables: {', '.join(self._base)}")
        self._overlay.setdefault(table, {})[key] = record

    def delete(self, table: str, key: str) -> None:
        """Remove record ``key`` of ``table`` (a no-op when absent)."""
        if self.get(table, key) is None:
            return
        if key in self._base[table]:
            self._overlay.setdefault(table, {})[key] = DELETED
        else:
            self._overlay[table].pop(key, None)

    def reset(self) -> None:
        """Drop every change: the state equals the base again. O(1)."""
        self._overlay = {}

    def checkpoint(self) -> Checkpoint:
        """Return a token for :meth:`rollback`; costs O(records changed)."""
        return {table: dict(layer) for table, layer in self._overlay.items()}

    def rollback(self, checkpoint: Checkpoint) -> None:
        """Restore the state saved by :meth:`checkpoint`."""
        self._overlay = {table: dict(layer) for table, layer in checkpoint.items()}

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Run a block as one transaction: if it raises, every change it made is undone."""
        saved = self.checkpoint()
        try:
            yield
        except BaseException:
            self.rollback(saved)
            raise

    def fork(self) -> Database:
        """Return an independent state with the same base and a copy of the overlay."""
        other = Database(self._base)
        other.rollback(self._overlay)
        return other

    # -- comparing -----------------------------------------------------------------------
    def changes(self) -> dict[tuple[str, str], Any]:
        """Records that differ from the base: ``(table, key) -> record or DELETED``.

        Overlay entries equal to their base record are dropped, so two states that reach
        the same records by different paths have equal changes.
        """
        out: dict[tuple[str, str], Any] = {}
        for table, layer in self._overlay.items():
            base = self._base[table]
            for key, value in layer.items():
                original = base.get(key)
                if value is DELETED:
                    if original is not None:
                        out[(table, key)] = DELETED
                elif original is None or original != value:
                    out[(table, key)] = value
        return out

    def changed_since(self, checkpoint: Checkpoint) -> set[tuple[str, str]]:
        """Keys whose current record differs from the one at ``checkpoint``."""
        keys: set[tuple[str, str]] = set()
        for table in set(self._overlay) | set(checkpoint):
            now = self._overlay.get(table, {})
            then = checkpoint.get(table, {})
            base = self._base[table]
            for key in set(now) | set(then):
                a = now[key] if key in now else base.get(key, DELETED)
                b = then[key] if key in then else base.get(key, DELETED)
                if a is DELETED or b is DELETED:
                    if a is not b:
                        keys.add((table, key))
                elif a != b:
                    keys.add((table, key))
        return keys

    def fingerprint(self) -> str:
        """Canonical hash of the state relative to its base (hex sha256 of the changes)."""
        return changes_fingerprint(self.changes())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Database):
            return NotImplemented
        if self._base is not other._base:
            return False
        return self.changes() == other.changes()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        sizes = ", ".join(f"{t}={len(rows)}" for t, rows in self._base.items())
        return f"Database({sizes}; {len(self.changes())} changed)"


def tables_digest(tables: Tables) -> str:
    """Hex sha256 of every record of ``tables`` in canonical form (slow: O(database)).

    Used to check that generation is deterministic across processes and machines; the hot
    path never calls it.
    """
    h = hashlib.sha256()
    for table in sorted(tables):
        for key in sorted(tables[table]):
            h.update(f"{table}\x1f{key}\x1f{record_digest(tables[table][key])}\x1e".encode())
    return h.hexdigest()
