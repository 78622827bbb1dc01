"""The state of a BFCL API world as rods records: one :class:`ApiState` per API class.

A record holds the class instance twice: its *public state* (every attribute whose name
does not start with ``_``, as plain data: what BFCL's state check compares, and so what
the reward compares) and the pickled instance (private attributes too: the file system's
current directory, the seeded random generators that draw ids). Two records are equal when
their public states are, exactly as BFCL compares two instances attribute by attribute, so
``cd`` (which moves only the private current directory) changes nothing the reward sees.
"""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Mapping
from typing import Any, cast

from pydantic import PrivateAttr

from rods_env.database import Record

TABLE = "apis"
"""The table of API states, keyed by class name."""

PEOPLE = "people"
"""The table of the world's owner (one record, key :data:`OWNER`)."""

OWNER = "owner"


class ApiState(Record):
    """One API class's instance in a world.

    Attributes:
        api: The class name (``GorillaFileSystem``, ...).
        state: The public attributes as plain data (files and directories as
            ``{"name", "content"}`` / ``{"name", "contents"}``, sets as sorted lists).

    The pickled instance (private attributes included; :attr:`blob`) is left out of
    equality, hashing and the record's JSON form. It is written when first read: most
    records (a turn's last state, a class a task never calls) are never made live again.
    Until then the record keeps the instance it was taken from, which nothing may change:
    a toolkit that goes on using it calls :meth:`seal` first. A toolkit's record also
    shares the listings that changed with that instance (copying a long world's listing at
    every turn's end was a large part of synthesis): :meth:`seal` copies them.
    """

    api: str
    state: dict[str, Any]
    _blob: bytes | None = PrivateAttr(default=None)
    _source: Any = PrivateAttr(default=None)
    _lent: tuple[str, ...] = PrivateAttr(default=())

    @property
    def _private(self) -> dict[str, Any]:
        # read directly: pydantic's __getattr__ reads a private attribute in ~15 us (it
        # raises and catches an AttributeError), and records are read thousands of times
        return cast("dict[str, Any]", self.__pydantic_private__)

    @property
    def blob(self) -> bytes:
        """The pickled instance (written now if it was not yet: :meth:`seal`)."""
        private = self._private
        blob = private["_blob"]
        if blob is None:
            blob = pickle.dumps(private["_source"], protocol=pickle.HIGHEST_PROTOCOL)
            private["_blob"], private["_source"] = blob, None
        return blob

    def seal(self) -> None:
        """Write the pickled instance now, before the instance it was taken from changes,
        and copy the attributes :attr:`state` still shares with that instance (see
        :func:`state_record`'s ``lent``)."""
        private = self._private
        if private["_blob"] is None:
            self.blob  # noqa: B018 - the property writes it
        lent, private["_lent"] = private["_lent"], ()
        if lent:
            state = self.state
            copies = pickle.loads(
                pickle.dumps([state[k] for k in lent], protocol=pickle.HIGHEST_PROTOCOL)
            )
            for k, value in zip(lent, copies, strict=True):
                state[k] = value  # an equal copy: the record's content does not change

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ApiState):
            return NotImplemented
        return self.api == other.api and self.state == other.state

    def __hash__(self) -> int:
        return hash((self.api, json.dumps(self.state, sort_keys=True, default=str)))

    def instance(self) -> Any:
        """A fresh copy of the instance (made in this process from the API classes)."""
        return pickle.loads(self.blob)


class Person(Record):
    """The person a world belongs to: the user of every account in it.

    Attributes:
        first: First name.
        last: Last name.
        twitter_user: TwitterAPI username.
        twitter_password: TwitterAPI password.
        message_id: MessageAPI user id.
        ticket_user: TicketAPI username.
        ticket_password: TicketAPI password.
        trading_user: TradingBot username.
        trading_password: TradingBot password.
        travel_client_id: TravelAPI client id.
        travel_secret: TravelAPI client secret.
        travel_refresh: TravelAPI refresh token.
    """

    first: str
    last: str
    twitter_user: str
    twitter_password: str
    message_id: str
    ticket_user: str
    ticket_password: str
    trading_user: str
    trading_password: str
    travel_client_id: str
    travel_secret: str
    travel_refresh: str

    @property
    def name(self) -> str:
        """First and last name."""
        return f"{self.first} {self.last}"


def _canon(value: Any) -> Any:
    """Plain data of an attribute value, compared as BFCL compares it (``File`` and
    ``Directory`` by name and content; no parent links)."""
    kind = type(value)
    if kind in _ATOMS:  # immutable: copy.copy would return it
        return value
    if kind is dict:
        return {k: _canon(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [_canon(v) for v in value]
    if kind is set or kind is frozenset:
        return sorted((_canon(v) for v in value), key=repr)
    name = kind.__name__
    if name == "Directory":
        return _directory(value)
    if name == "File":
        return {"name": value.name, "content": value.content}
    return copy.copy(value)


_ATOMS = frozenset({str, int, float, bool, type(None)})


def _directory(folder: Any) -> dict[str, Any]:
    """:func:`_canon` of a ``Directory`` (a file system's tree: thousands of entries in a
    long world, walked at every turn's end that changes it)."""
    contents = {}
    for k, v in folder.contents.items():
        name = type(v).__name__
        if name == "File":
            contents[k] = {"name": v.name, "content": v.content}
        elif name == "Directory":
            contents[k] = _directory(v)
        else:
            contents[k] = _canon(v)
    return {"name": folder.name, "contents": contents}


def _plain(value: Any) -> Any:
    kind = type(value)
    if kind is set or kind is frozenset:
        return sorted(value, key=repr)
    if kind.__name__ in ("Directory", "File"):
        return _canon(value)
    if kind is dict or kind is list:  # plain JSON data: copied at C speed
        return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    return _canon(value)


def public_state(
    instance: Any,
    before: Mapping[str, Any] | None = None,
    *,
    owned: bool = False,
    lent: list[str] | None = None,
) -> dict[str, Any]:
    """The public attributes of an API instance as plain data (see :class:`ApiState`).

    Args:
        instance: The instance.
        before: An earlier public state of it: an attribute of plain JSON data that still
            equals its value there shares that value (states are never changed, and
            comparing is a tenth of the cost of copying a long listing).
        owned: The instance is dropped after this (a world's record, built from a fresh
            instance): its dicts and lists are taken as they are, not copied.
        lent: Given, the dicts and lists that changed are taken as they are too, and their
            names appended to it: the caller copies them before the instance changes
            again (:meth:`ApiState.seal`), so one that never changes again is never copied.
    """
    out = {}
    for k, v in vars(instance).items():
        if k.startswith("_"):
            continue
        if owned and (type(v) is dict or type(v) is list):
            out[k] = v
            continue
        if before is not None and type(v) in _PLAIN_DATA:
            old = before.get(k, _MISSING)
            if type(old) is type(v) and old == v:
                out[k] = old
                continue
        if lent is not None and (type(v) is dict or type(v) is list):
            out[k] = v
            lent.append(k)
            continue
        out[k] = _plain(v)
    return out


_PLAIN_DATA = (dict, list, str, int, float, bool, type(None))
"""Attribute types whose plain form is the value itself (copied): equal values, equal forms."""

_MISSING = object()


def state_record(
    api: str,
    instance: Any,
    before: ApiState | None = None,
    *,
    owned: bool = False,
    lent: bool = False,
) -> ApiState:
    """The record of ``instance`` now (a snapshot: later changes to it are not seen, once
    the caller has called :meth:`ApiState.seal` before making them); ``before``: an earlier
    record of it, whose unchanged attributes it shares; ``owned``: the instance is never
    used again (its containers become the record's state); ``lent``: the instance's changed
    dicts and lists are shared until :meth:`ApiState.seal` copies them (a turn's last
    state is most often never changed again: never copied)."""
    names: list[str] | None = [] if lent else None
    record = ApiState.model_construct(
        api=api,
        state=public_state(
            instance, before.state if before is not None else None, owned=owned, lent=names
        ),
    )
    record._source = instance  # pickled when first needed
    if names:
        record._lent = tuple(names)
    return record


def load_instance(api: str, config: Mapping[str, Any] | None, *, copy_config: bool = True) -> Any:
    """An instance of class ``api`` loaded with ``config`` as BFCL loads a scenario (a deep
    copy of the configuration, unless the caller hands it over; MathAPI takes none)."""
    from environments.bfcl.apis import STATELESS, api_class

    instance = api_class(api)()
    if api not in STATELESS:
        scenario = dict(config or {})
        instance._load_scenario(
            copy.deepcopy(scenario) if copy_config else scenario, long_context=False
        )
    return instance
