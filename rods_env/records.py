"""Records serialized piece by piece, each piece once per object.

A changed record is a copy of the old one with some fields replaced
(``model_copy(update=...)``): every other field holds the *same objects* as before, and so
do the records nested in it (a flight with one date's seats changed shares the other 29
dates). Synthesis serializes thousands of such records a second (a dedupe key hashes every
record a task changes; a gold replay dumps every record a tool returns), and serializing
each whole again was a large part of its cost. Here both forms are assembled from those of
the parts, each nested record's remembered by identity (records are immutable):

- :func:`canonical_text` is ``json.dumps(record.model_dump(mode="json"), sort_keys=True,
  separators=(",", ":"))``, character for character;
- :func:`plain_dump` is ``record.model_dump(mode="json")``, equal as data (the same keys in
  the same order, the same values), nested records' dumps shared by the dumps holding them.

This is exact only where pydantic writes a value as it is, so it is done only there: a
model class is read from its core schema (the schema pydantic's own serializer runs on), and
a field qualifies when its schema is built of strings, integers, floats, booleans, null,
literals, lists, tuples, string-keyed dicts, optional values and models (or tagged unions of
models), with no custom serializer, computed field, excluded or aliased field, extra
fields or serialization setting anywhere. Every value written is also checked against its
field's schema by exact type (an ``int`` in a ``float`` field, which pydantic would write
as ``5.0``; a subclass of the declared model, which pydantic would write as the declared
one; a non-finite float; a set). Anything else is answered ``None``, and the caller takes
pydantic's own path. ``tests/core/test_records.py`` compares both functions with pydantic's
serialization on every record of the domains' worlds, on the records synthesis writes, and
on generated classes and values (hypothesis).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from json.encoder import encode_basestring_ascii
from threading import Lock
from typing import Any

from pydantic import BaseModel

__all__ = ["canonical_text", "plain", "plain_dump"]

_FIELD_KEYS = frozenset({"type", "schema", "metadata", "frozen", "validation_alias"})
"""Keys of a model field's schema that leave its serialization alone (an alias, an
exclusion or a serializer would change it)."""

_encode = json.JSONEncoder(separators=(",", ":")).encode
# what json.dumps writes a string as (ensure_ascii): the encoder's own function
_string = encode_basestring_ascii


class _NotPlain(Exception):
    """A schema or value the piecewise serialization does not write as pydantic would."""


# -- compiled schemas ------------------------------------------------------------------------
# A field's schema compiles to a *spec*: ("str",) ("int",) ("float",) ("bool",) ("none",)
# ("literal", {(type, value), ...}) ("nullable", spec) ("list", spec) ("tuple", spec)
# ("dict", spec) ("models", {cls, ...}): what pydantic writes as the value itself.
Spec = tuple[Any, ...]
_SCALARS = {"str": ("str",), "int": ("int",), "float": ("float",), "bool": ("bool",)}


class _Fields:
    """A plain model class's fields: in declaration order (as ``model_dump`` writes them)
    and sorted by name (as ``sort_keys`` writes them), each with its spec."""

    __slots__ = ("declared", "sorted")

    def __init__(self, declared: list[tuple[str, Spec]]) -> None:
        self.declared = tuple(declared)
        self.sorted = tuple((name, _encode(name), spec) for name, spec in sorted(declared))


_PLAIN: dict[type, _Fields | None] = {}
_PLAIN_LOCK = Lock()


def plain(cls: type) -> bool:
    """Whether instances of ``cls`` (a pydantic model class) can be written piece by piece:
    its schema is one pydantic writes as the values themselves (see the module docstring).
    The models nested in it are checked when written."""
    return _fields(cls) is not None


def _fields(cls: type) -> _Fields | None:
    try:
        return _PLAIN[cls]
    except KeyError:
        pass
    try:
        found: _Fields | None = _compile_model(cls)
    except _NotPlain:
        found = None
    with _PLAIN_LOCK:
        _PLAIN[cls] = found
    return found


def _compile_model(cls: type) -> _Fields:
    schema = getattr(cls, "__pydantic_core_schema__", None)
    if not isinstance(schema, Mapping):
        raise _NotPlain
    definitions: dict[str, Mapping[str, Any]] = {}
    node = _unwrap(schema, definitions)
    if node.get("type") != "model" or node.get("cls") is not cls:
        raise _NotPlain
    inner = _check_model(node)
    fields = inner.get("fields", {})
    if list(fields) != list(getattr(cls, "model_fields", {})):
        raise _NotPlain
    return _Fields(
        [
            (name, _compile(field["schema"], definitions, frozenset()))
            for name, field in fields.items()
        ]
    )


def _unwrap(node: Mapping[str, Any], definitions: dict[str, Mapping[str, Any]]) -> Any:
    """``node`` with its definitions collected (``definitions`` nodes unwrapped)."""
    while node.get("type") == "definitions":
        for item in node.get("definitions", ()):
            if isinstance(item, Mapping) and "ref" in item:
                definitions[item["ref"]] = item
        node = node["schema"]
    return node


def _check_model(node: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``model-fields`` schema of a model node that is written as its fields."""
    config = node.get("config") or {}
    if node.get("root_model") or config.get("extra_fields_behavior") == "allow":
        raise _NotPlain
    if any(key.startswith("ser") for key in config):  # ser_json_*, serialize_by_alias
        raise _NotPlain
    inner = node.get("schema") or {}
    if inner.get("type") != "model-fields" or inner.get("computed_fields"):
        raise _NotPlain
    if "serialization" in node or "serialization" in inner:
        raise _NotPlain
    if not all(set(field) <= _FIELD_KEYS for field in inner.get("fields", {}).values()):
        raise _NotPlain
    return inner


def _compile(node: Any, definitions: dict[str, Mapping[str, Any]], seen: frozenset[str]) -> Spec:
    if not isinstance(node, Mapping):
        raise _NotPlain
    node = _unwrap(node, definitions)
    if "serialization" in node:
        raise _NotPlain
    kind = node.get("type")
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "none":
        return ("none",)
    if kind == "literal":
        expected = node.get("expected", ())
        if not all(type(v) in (str, int, bool) or v is None for v in expected):
            raise _NotPlain  # enum members are written as their values
        return ("literal", frozenset((type(v), v) for v in expected))
    if kind == "definition-ref":
        ref = node.get("schema_ref")
        target = definitions.get(ref)
        if target is None or ref in seen:
            raise _NotPlain
        if target.get("type") == "model":
            return _compile(target, definitions, seen)  # a model compiles to its class
        return _compile(target, definitions, seen | {ref})
    if kind == "nullable":
        return ("nullable", _compile(node.get("schema"), definitions, seen))
    if kind == "default":
        return _compile(node.get("schema"), definitions, seen)
    if kind == "list":
        return ("list", _items(node.get("items_schema"), definitions, seen))
    if kind == "tuple":
        items = node.get("items_schema", ())
        if len(items) != 1 or node.get("variadic_item_index") != 0:
            raise _NotPlain  # only tuple[X, ...]
        return ("tuple", _compile(items[0], definitions, seen))
    if kind == "dict":
        keys = node.get("keys_schema")
        if keys is not None and _compile(keys, definitions, seen) != ("str",):
            raise _NotPlain
        return ("dict", _items(node.get("values_schema"), definitions, seen))
    if kind == "tagged-union":
        choices = list(node.get("choices", {}).values())
    elif kind == "union":
        choices = [c[0] if isinstance(c, tuple) else c for c in node.get("choices", ())]
    elif kind == "model":
        choices = [node]
    else:
        raise _NotPlain
    classes = []
    for choice in choices:
        spec = _compile_choice(choice, definitions)
        classes.append(spec)
    return ("models", frozenset(classes))


def _compile_choice(node: Any, definitions: dict[str, Mapping[str, Any]]) -> type:
    """The class of a model choice of a union (only unions of models are written here)."""
    if not isinstance(node, Mapping):
        raise _NotPlain
    node = _unwrap(node, definitions)
    if node.get("type") == "definition-ref":
        node = definitions.get(node.get("schema_ref"), {})
    cls = node.get("cls")
    if node.get("type") != "model" or not isinstance(cls, type) or "serialization" in node:
        raise _NotPlain
    _check_model(node)
    return cls


def _items(node: Any, definitions: dict[str, Mapping[str, Any]], seen: frozenset[str]) -> Spec:
    if node is None:
        raise _NotPlain  # list[Any]: pydantic infers each item's form
    return _compile(node, definitions, seen)


# -- canonical JSON text -----------------------------------------------------------------------
_TEXTS: OrderedDict[int, tuple[Any, str]] = OrderedDict()
_DUMPS: OrderedDict[int, tuple[Any, dict[str, Any]]] = OrderedDict()
_CACHE_SIZE = 65536
_LOCK = Lock()
_INFINITE = (float("inf"), float("-inf"))


def canonical_text(record: BaseModel) -> str | None:
    """``json.dumps(record.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))``
    assembled from the remembered texts of the records nested in it, or None when ``record``
    is not written that way piece by piece (see the module docstring)."""
    try:
        return _record_text(record)
    except _NotPlain:
        return None


def _record_text(record: BaseModel) -> str:
    hit = _TEXTS.get(id(record))
    if hit is not None and hit[0] is record:
        return hit[1]
    fields = _fields(type(record))
    if fields is None or record.__pydantic_extra__:
        raise _NotPlain
    values = record.__dict__
    try:
        parts = [f"{key}:{_text(spec, values[name])}" for name, key, spec in fields.sorted]
    except KeyError:
        raise _NotPlain from None  # a field never set (model_construct)
    text = "{" + ",".join(parts) + "}"
    with _LOCK:
        _TEXTS[id(record)] = (record, text)
        while len(_TEXTS) > _CACHE_SIZE:
            _TEXTS.popitem(last=False)
    return text


def _text(spec: Spec, value: Any) -> str:
    kind = spec[0]
    vtype = type(value)
    if kind == "str":
        if vtype is str:
            return _string(value)
    elif kind == "int":
        if vtype is int:
            return int.__repr__(value)
    elif kind == "models":
        if vtype in spec[1]:
            return _record_text(value)
    elif kind == "tuple":
        if vtype is tuple:
            item = spec[1]
            return "[" + ",".join([_text(item, v) for v in value]) + "]"
    elif kind == "list":
        if vtype is list:
            item = spec[1]
            return "[" + ",".join([_text(item, v) for v in value]) + "]"
    elif kind == "dict":
        if vtype is dict and all(type(k) is str for k in value):
            item = spec[1]
            return (
                "{"
                + ",".join([_string(k) + ":" + _text(item, value[k]) for k in sorted(value)])
                + "}"
            )
    elif kind == "float":
        if vtype is float and value == value and value not in _INFINITE:
            return float.__repr__(value)
    elif kind == "nullable":
        return "null" if value is None else _text(spec[1], value)
    elif kind == "literal":
        if (vtype, value) in spec[1]:
            return _encode(value)
    elif kind == "bool":
        if vtype is bool:
            return "true" if value else "false"
    elif kind == "none" and value is None:
        return "null"
    raise _NotPlain


# -- dumps -------------------------------------------------------------------------------------
def plain_dump(record: BaseModel) -> dict[str, Any] | None:
    """``record.model_dump(mode="json")`` assembled from the remembered dumps of the records
    nested in it (shared: treat the result as read-only), or None when ``record`` is not
    dumped that way piece by piece (see the module docstring)."""
    try:
        return _record_dump(record)
    except _NotPlain:
        return None


def _record_dump(record: BaseModel) -> dict[str, Any]:
    hit = _DUMPS.get(id(record))
    if hit is not None and hit[0] is record:
        return hit[1]
    fields = _fields(type(record))
    if fields is None or record.__pydantic_extra__:
        raise _NotPlain
    values = record.__dict__
    try:
        dumped = {name: _dump(spec, values[name]) for name, spec in fields.declared}
    except KeyError:
        raise _NotPlain from None
    with _LOCK:
        _DUMPS[id(record)] = (record, dumped)
        while len(_DUMPS) > _CACHE_SIZE:
            _DUMPS.popitem(last=False)
    return dumped


def _dump(spec: Spec, value: Any) -> Any:
    kind = spec[0]
    vtype = type(value)
    if kind == "str":
        if vtype is str:
            return value
    elif kind == "int":
        if vtype is int:
            return value
    elif kind == "models":
        if vtype in spec[1]:
            return _record_dump(value)
    elif kind == "tuple":
        if vtype is tuple:
            item = spec[1]
            return [_dump(item, v) for v in value]
    elif kind == "list":
        if vtype is list:
            item = spec[1]
            return [_dump(item, v) for v in value]
    elif kind == "dict":
        if vtype is dict and all(type(k) is str for k in value):
            item = spec[1]
            return {k: _dump(item, v) for k, v in value.items()}
    elif kind == "float":
        if vtype is float and value == value and value not in _INFINITE:
            return value
    elif kind == "nullable":
        return None if value is None else _dump(spec[1], value)
    elif kind == "literal":
        if (vtype, value) in spec[1]:
            return value
    elif kind == "bool":
        if vtype is bool:
            return value
    elif kind == "none" and value is None:
        return None
    raise _NotPlain
