"""BFCLTools: the 128 functions of BFCL's API classes as a rods :class:`~rods_env.tools.Toolkit`.

Each function becomes a tool whose schema is BFCL's own (what BFCL sends in its
function-calling mode, :func:`environments.bfcl.apis.openai_schema`), whose result text is
BFCL's (:func:`environments.bfcl.apis.result_text`), and whose method runs the real API
class on the episode's state (:mod:`environments.bfcl.world.state`). What rods adds:

* arguments are validated first (strict JSON types from BFCL's docs; the values a doc lists
  as an ``[Enum]`` and a few documented constants are the only ones accepted): a bad call is
  an error observation that names the argument, where BFCL's executor would run it;
* every omitted optional argument is passed as a fresh copy of its default as BFCL's source
  writes it (BFCL's ``post_tweet`` keeps its default ``mentions`` list, which ``mention``
  later extends: one process's later tweets would start with old mentions);
* an exception inside a method is the result text BFCL's executor writes
  (``Error during execution: ...``), and the changes the method made before it stay, as in
  BFCL; MathAPI's unbounded arguments are refused and the process's precision is restored
  (:func:`environments.bfcl.apis.math_refusal`).

A tool *writes* (rods' sense) when it can change an instance's public state; a tool that
changes only private state (``cd``, a random generator) is a read. The classification is
checked against the real classes by the tests.
"""

from __future__ import annotations

import copy
import inspect
import json
import pickle
import re
from collections.abc import Mapping
from dataclasses import replace
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import Strict

from environments.bfcl.apis import (
    ERROR_PREFIX,
    Function,
    default_value,
    functions,
    kept_precision,
    math_refusal,
    result_text,
)
from environments.bfcl.world.state import TABLE, state_record
from rods_env.database import Database
from rods_env.errors import InvalidArgumentError, NotFoundError
from rods_env.tools import Toolkit, freeze, tool

PURE: frozenset[str] = frozenset({
    # GorillaFileSystem
    "ls", "pwd", "cat", "find", "wc", "sort", "grep", "du", "tail", "diff",
    # MathAPI (stateless)
    "absolute_value", "add", "divide", "imperial_si_conversion", "logarithm", "max_value",
    "mean", "min_value", "multiply", "percentage", "power", "round_number",
    "si_unit_conversion", "square_root", "standard_deviation", "subtract", "sum_values",
    # MessageAPI
    "list_users", "get_user_id", "message_get_login_status", "view_messages_sent",
    "search_messages", "get_message_stats",
    # TwitterAPI
    "posting_get_login_status", "list_all_following", "get_tweet", "get_user_tweets",
    "search_tweets", "get_tweet_comments", "get_user_stats",
    # TicketAPI
    "get_ticket", "ticket_get_login_status", "get_user_tickets",
    # TradingBot
    "get_current_time", "get_symbol_by_name", "get_stock_info", "get_order_details",
    "get_account_info", "trading_get_login_status", "get_watchlist", "get_order_history",
    "get_transaction_history", "get_available_stocks", "filter_stocks_by_price",
    "notify_price_change",
    # TravelAPI
    "travel_get_login_status", "get_budget_fiscal_year", "get_credit_card_balance",
    "list_all_airports", "get_nearest_airport_by_city", "compute_exchange_rate",
    "verify_traveler_information", "get_all_credit_cards", "get_booking_history",
    "retrieve_invoice", "contact_customer_support",
    # VehicleControlAPI
    "displayCarStatus", "check_tire_pressure", "find_nearest_tire_shop", "estimate_distance",
    "estimate_drive_feasibility_by_mileage", "get_zipcode_based_on_city", "liter_to_gallon",
    "gallon_to_liter", "display_log", "get_outside_temperature_from_weather_com",
})  # fmt: skip
"""Functions that change nothing in their instance (checked by the tests)."""

PRIVATE_ONLY: frozenset[str] = frozenset(
    {"cd", "get_flight_cost", "get_current_speed", "get_outside_temperature_from_google"}
)
"""Functions that change only private state (the current directory, a cache, a random
generator): reads in rods' sense, yet their new state is kept."""

OPERATIONS: Mapping[str, tuple[str, ...]] = {
    "mkdir": ("directory", "folder"), "touch": ("file", "create"), "echo": ("write", "file"),
    "mv": ("move", "renam"), "cp": ("copy",), "rm": ("remov", "delet"),
    "rmdir": ("remov", "delet", "folder", "directory"),
    "send_message": ("send", "message"), "delete_message": ("delet", "message"),
    "add_contact": ("contact", "add"), "message_login": ("log", "sign"),
    "authenticate_twitter": ("authenticat", "log", "sign"), "post_tweet": ("post", "tweet"),
    "retweet": ("retweet",), "comment": ("comment",), "mention": ("mention",),
    "follow_user": ("follow",), "unfollow_user": ("unfollow",),
    "create_ticket": ("ticket", "creat", "open"), "close_ticket": ("clos",),
    "resolve_ticket": ("resolv",), "edit_ticket": ("edit", "updat", "chang"),
    "ticket_login": ("log", "sign"), "logout": ("log", "sign"),
    "add_to_watchlist": ("watchlist", "add"), "cancel_order": ("cancel",),
    "place_order": ("order", "buy", "sell", "purchas"), "withdraw_funds": ("withdraw",),
    "fund_account": ("fund", "deposit"), "remove_stock_from_watchlist": ("remov", "watchlist"),
    "trading_login": ("log", "sign"), "trading_logout": ("log", "sign"),
    "authenticate_travel": ("authenticat", "log", "sign"),
    "register_credit_card": ("regist", "card"), "book_flight": ("book", "flight"),
    "cancel_booking": ("cancel",), "purchase_insurance": ("insur", "purchas", "buy"),
    "set_budget_limit": ("budget", "limit"),
    "startEngine": ("start", "engine"), "fillFuelTank": ("fill", "fuel", "refuel"),
    "lockDoors": ("lock", "door"), "adjustClimateControl": ("climate", "temperature", "adjust"),
    "setHeadlights": ("headlight", "light"), "activateParkingBrake": ("parking", "brake"),
    "pressBrakePedal": ("brake", "press"), "releaseBrakePedal": ("brake", "releas"),
    "setCruiseControl": ("cruise",), "set_navigation": ("navigat",),
}  # fmt: skip
"""Word stems that name what each write function does (a refusal while it is withheld must
name one; see :mod:`rods_env.rewards`)."""

CONSTANTS: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("place_order", "order_type"): ("Buy", "Sell"),
    ("wc", "mode"): ("l", "w", "c"),
    ("book_flight", "travel_class"): ("economy", "business", "first"),
    ("get_flight_cost", "travel_class"): ("economy", "business", "first"),
    ("authenticate_travel", "grant_type"): ("read_write", "read", "write"),
    ("purchase_insurance", "insurance_type"): ("basic", "comprehensive"),
}
"""Arguments whose documented values (in words, not an ``[Enum]`` list) are the only valid
ones."""

_ENUM = re.compile(r"\[Enum\]:\s*(\[[^\]]*\])")
_TYPES: Mapping[str, Any] = {
    "string": Annotated[str, Strict()],
    "integer": Annotated[int, Strict()],
    "float": Annotated[float, Strict()],
    "number": Annotated[float, Strict()],
    "boolean": Annotated[bool, Strict()],
    "dict": dict[str, Any],
    "any": Any,
}


def _enum(function: str, name: str, prop: Mapping[str, Any]) -> tuple[str, ...] | None:
    if (function, name) in CONSTANTS:
        return CONSTANTS[(function, name)]
    found = _ENUM.search(str(prop.get("description", "")))
    return tuple(json.loads(found.group(1))) if found else None


SPECIAL: Mapping[tuple[str, str], tuple[str, ...]] = {("cd", "folder"): ("..", "/")}
"""Special values an argument takes besides any other of its type (documented in the
argument model, so they count as known constants, not guesses)."""


def _annotation(function: str, name: str, prop: Mapping[str, Any]) -> Any:
    special = SPECIAL.get((function, name))
    if special:
        return Literal[special] | _TYPES["string"]
    values = _enum(function, name, prop)
    kind = prop.get("type", "any")
    if kind == "array":
        item = prop.get("items", {}).get("type", "any")
        inner: Any = Literal[values] if values else _TYPES.get(item, Any)
        return list[inner]
    if values:
        return Literal[values]
    return _TYPES.get(kind, Any)


def _one_line(text: str) -> str:
    return " ".join(str(text).split()) or "(no description)"


def _method(function: Function, owner: type) -> Any:
    """A toolkit method for ``function``: BFCL's parameters with their types and defaults,
    and a Google docstring from BFCL's doc (rods derives validation from both)."""
    doc = function.doc
    props: Mapping[str, Any] = doc["parameters"]["properties"]
    required = set(doc["parameters"].get("required", ()))
    real = inspect.signature(getattr(owner, function.name)).parameters
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    for name in function.params:
        prop = props.get(name, {"type": "any", "description": name})
        hint = _annotation(function.name, name, prop)
        if name in required:
            default: Any = inspect.Parameter.empty
        elif name in function.mutable_defaults:  # as BFCL's source writes it, never the
            default = default_value(function, name)  # process's object, which may have changed
        else:
            default = (
                real[name].default if real[name].default is not inspect.Parameter.empty else None
            )
            if default is None:
                hint = hint | None
        annotations[name] = hint
        params.append(
            inspect.Parameter(
                name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=hint
            )
        )
    args = "\n".join(
        f"    {name}: {_one_line(props.get(name, {}).get('description', name))}"
        for name in function.params
    )
    text = _one_line(doc["description"]) + ("\n\nArgs:\n" + args if args else "")

    def method(self: BFCLTools, **kwargs: Any) -> Any:
        return self.invoke(function.name, kwargs)

    method.__name__ = function.name
    method.__qualname__ = f"BFCLTools.{function.name}"
    method.__doc__ = text
    method.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    method.__annotations__ = annotations
    writes = function.name not in PURE and function.name not in PRIVATE_ONLY
    return tool(method, writes=writes, operation=OPERATIONS.get(function.name, ()))


class BFCLTools(Toolkit):
    """Base of the generated toolkit (see :func:`toolkit_class`): runs BFCL's functions on
    the episode's :class:`~environments.bfcl.world.state.ApiState` records.

    Args:
        db: The episode's state.
    """

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self._live: dict[str, tuple[Any, Any]] = {}
        self._held = False
        self._dirty: dict[str, None] = {}
        self._unsealed: dict[str, Any] = {}

    def on_reset(self) -> None:
        """Forget the live instances of the last episode."""
        self._live.clear()
        self._dirty.clear()
        self._unsealed.clear()

    def hold(self) -> None:
        """Write a class's record once per :meth:`sync`, not after every call that may
        change it (a turn of file commands changes the file system's record four times)."""
        self._held = True

    def sync(self) -> None:
        """Write the records of the classes changed since the last sync."""
        for api in self._dirty:
            before, live = self._live[api]
            record = state_record(api, live, before, lent=True)
            self.db.put(TABLE, api, record)
            self._live[api] = (record, live)
            self._unsealed[api] = record
        self._dirty.clear()

    @classmethod
    def render(cls, value: Any) -> str:
        """BFCL's result text."""
        return result_text(value)

    def instance(self, api: str) -> Any:
        """The live instance of class ``api`` in this state (rebuilt from its record when
        the record is not the one this toolkit last wrote or read)."""
        record = self.db.get(TABLE, api)
        if record is None:
            raise NotFoundError(f"No {api} in this world.", "Use the tools listed for this task.")
        hit = self._live.get(api)
        if hit is not None and hit[0] is record:
            return hit[1]
        live = record.instance()
        self._live[api] = (record, live)
        return live

    def invoke(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """Run function ``name`` with validated ``arguments`` and keep what it changed."""
        function = functions()[name]
        api = function.owner
        kwargs = _copied(dict(arguments))
        bad = next((k for k, v in kwargs.items() if _unwritable(v)), None)
        if bad is not None:  # it could never be shown, stored or compared as text
            raise InvalidArgumentError(
                f"'{bad}' holds a lone surrogate (not valid Unicode text).",
                "Send the value as plain UTF-8 text.",
            )
        live = self.instance(api)
        if name not in PURE and self._unsealed:
            # the last record taken from this instance is pickled before the call changes it
            unsealed = self._unsealed.pop(api, None)
            if unsealed is not None:
                unsealed.seal()
        if api == "MathAPI":
            refusal = math_refusal(name, kwargs)
            if refusal is not None:
                return {"error": refusal}
            with kept_precision():
                value = _run(getattr(live, name), kwargs)
                return value if isinstance(value, (dict, list, str)) else result_text(value)
        try:
            value = _run(getattr(live, name), kwargs)
        finally:
            if name in PURE:
                pass
            elif self._held:
                self._dirty[api] = None
            else:
                record = state_record(api, live, self._live[api][0], lent=True)
                self.db.put(TABLE, api, record)
                self._live[api] = (record, live)
                self._unsealed[api] = record
        return value


def _unwritable(value: Any) -> bool:
    """Whether ``value`` holds a string that is not valid Unicode (a lone surrogate)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_unwritable(k) or _unwritable(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_unwritable(v) for v in value)
    return False


def _run(method: Any, kwargs: dict[str, Any]) -> Any:
    try:
        value = method(**kwargs)
    except Exception as exc:
        return f"{ERROR_PREFIX}{exc}"
    return _copied(value)  # never the instance's own containers


_ATOMS = (str, int, float, bool, type(None))


def _copied(value: Any) -> Any:
    """A deep copy of a call's arguments or result: an immutable scalar as it is, anything
    else through pickle (the same copy as :func:`copy.deepcopy` of this plain data, shared
    parts shared alike, at C speed)."""
    if type(value) in _ATOMS:
        return value
    try:
        return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # something pickle cannot write: the general copy
        return copy.deepcopy(value)


@cache
def toolkit_class() -> type[BFCLTools]:
    """The toolkit with one tool per BFCL function (built once; needs bfcl-eval)."""
    from environments.bfcl.apis import api_class

    table = functions()
    namespace: dict[str, Any] = {
        name: _method(function, api_class(function.owner)) for name, function in table.items()
    }
    namespace["__module__"] = __name__
    namespace["__doc__"] = BFCLTools.__doc__
    cls: type[BFCLTools] = type("BFCLTools", (BFCLTools,), namespace)
    # the agent sees BFCL's own schemas (rods' derived ones only validate)
    cls._specs = {
        name: replace(spec, schema=freeze(dict(table[name].schema)))
        for name, spec in cls._specs.items()
    }
    return cls
