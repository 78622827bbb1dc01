"""BFCL's executable API classes, run safely: the execution layer of the BFCL environments.

BFCL multi-turn (the ``bfcl-eval`` package) ships eight stateful Python classes
(GorillaFileSystem, MathAPI, MessageAPI, TwitterAPI, TicketAPI, TradingBot, TravelAPI,
VehicleControlAPI; 128 public methods, each documented as a tool). Its own executor builds a
Python string from the model's function name and arguments and ``eval``-s it, keeps the
instances in module globals, and lets MathAPI change process-wide precision. This module
runs the same methods without those hazards, and is what a rods domain over these classes
builds on:

* **Dispatch by name** (:meth:`World.call`): the name is looked up among the functions the
  caller allows (the tools visible this turn) and the bound method is called with the JSON
  arguments as keywords. Nothing the agent writes is ever evaluated; any other name is an
  error result, worded as BFCL's executor words an undefined name.
* **Per-episode instances** (:func:`new_world`): the classes are loaded with a scenario's
  initial configuration once per process and pickled; each episode unpickles its own
  instances, so no two episodes (and no episode and the gold) share an object. BFCL's
  TravelAPI in long-context mode keeps module-level credit-card dicts by reference: there,
  one booking changes a balance for every later instance. :func:`new_pair` gives the two
  worlds of BFCL's checker (the model's and the gold's) sharing exactly what BFCL's share,
  fresh for the pair (the official verdicts need it; :mod:`environments.bfcl.verdicts`).
* **Fresh defaults** (:attr:`Function.mutable_defaults`): an omitted list argument
  (``post_tweet``'s ``tags`` and ``mentions``) is a fresh copy of the default BFCL's source
  writes, never the process's one default object, which the method keeps and ``mention``
  extends; a :class:`World` given a ``defaults`` dict shares one object per episode
  instead (BFCL's semantics, for the official verdicts).
* **Bounded arithmetic**: MathAPI's ``logarithm`` and ``square_root`` set the process-wide
  mpmath and decimal precision from an argument (``precision=2000000`` runs for minutes),
  and ``power`` and ``round_number`` compute with Python integers of any size
  (``power(2, 10**17)`` never returns). Arguments beyond :data:`MAX_PRECISION`,
  :data:`MAX_EXPONENT` and :data:`MAX_DECIMAL_PLACES` are refused with an error result, and
  the process precision is restored after every MathAPI call.
* **Result text as BFCL writes it** (:func:`result_text`), so the response check compares
  the same strings as BFCL's checker.
* **State** (:meth:`World.state`, :func:`differences`): the public attributes of every
  instance, which is what BFCL's state check compares.
* **Gold replay** (:func:`replay`, :class:`GoldCache`): a scenario's gold calls run once per
  process, keeping each turn's result texts and the state after it, read-only
  (:func:`frozen_copy`).

Everything here needs ``bfcl-eval`` (installed with ``--no-deps``) and ``mpmath``; the
package is imported on first use, and :func:`require_bfcl` says how to install it.
"""

from __future__ import annotations

import ast
import copy
import decimal
import importlib
import importlib.util
import inspect
import json
import pickle
from collections import OrderedDict
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from threading import Lock
from typing import Any

from rods_env.errors import BenchmarkUnavailableError
from rods_env.task import ToolCall
from rods_env.tools import FrozenDict, FrozenList, freeze

BFCL_VERSION = "2026.3.23"
"""The bfcl-eval release the agreement with BFCL's checker was measured on (pinned in
constraints/cpu.txt)."""

INSTALL = f"bash scripts/setup.sh bfcl, or pip install --no-deps bfcl-eval=={BFCL_VERSION} mpmath"
"""How to install what this module needs (bfcl-eval's declared dependencies are not needed)."""

CLASS_MODULES: Mapping[str, str] = FrozenDict(
    GorillaFileSystem="gorilla_file_system",
    MathAPI="math_api",
    MessageAPI="message_api",
    TwitterAPI="posting_api",
    TicketAPI="ticket_api",
    TradingBot="trading_bot",
    TravelAPI="travel_booking",
    VehicleControlAPI="vehicle_control",
)
"""The eight API classes of BFCL multi-turn and their modules (their function docs have the
same file names)."""

CLASS_NAMES: tuple[str, ...] = tuple(CLASS_MODULES)

STATELESS: frozenset[str] = frozenset({"MathAPI"})
"""Classes without a scenario to load (BFCL does not call their ``_load_scenario``)."""

_SOURCE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"

MAX_PRECISION = 1000
"""Most digits MathAPI's ``logarithm``/``square_root`` may be asked for (10 ms at 1,000;
BFCL's gold asks for at most 10; 2,000,000 ran for minutes)."""

PRECISION_FUNCTIONS: frozenset[str] = frozenset({"logarithm", "square_root"})

MAX_EXPONENT = 10_000
"""Largest exponent MathAPI's ``power`` takes with an integer base (Python computes the
exact integer: ``2**10**9`` runs for minutes)."""

MAX_DECIMAL_PLACES = 1_000
"""Largest magnitude of ``round_number``'s ``decimal_places`` (``round(5, -10**17)`` never
returns)."""

ERROR_PREFIX = "Error during execution: "
"""How BFCL's executor reports an exception (and so how this module does)."""


# -- the package ---------------------------------------------------------------------------
def bfcl_missing() -> str | None:
    """None when bfcl-eval and mpmath can be imported; else one line saying what is missing
    and how to install it."""
    missing = [name for name in ("bfcl_eval", "mpmath") if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    return f"{' and '.join(missing)} not installed ({INSTALL})"


def require_bfcl() -> None:
    """Raise :class:`~rods_env.errors.BenchmarkUnavailableError` unless bfcl-eval is usable."""
    reason = bfcl_missing()
    if reason is not None:
        raise BenchmarkUnavailableError(f"BFCL: {reason}")


def data_dir() -> Path:
    """bfcl-eval's ``data`` folder (tasks, ground truth, function docs), in the installed
    package (nothing is copied into rods)."""
    require_bfcl()
    spec = importlib.util.find_spec("bfcl_eval")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "data"


@cache
def api_class(name: str) -> type:
    """The API class called ``name`` (one of :data:`CLASS_NAMES`), imported on first use."""
    if name not in CLASS_MODULES:
        raise KeyError(f"no BFCL API class '{name}'; classes: {', '.join(CLASS_NAMES)}")
    require_bfcl()
    module = importlib.import_module(f"{_SOURCE}.{CLASS_MODULES[name]}")
    return getattr(module, name)


# -- functions and their schemas -----------------------------------------------------------
_OPENAPI_TYPES: Mapping[str, str] = FrozenDict(
    integer="integer", number="number", float="number", string="string", boolean="boolean",
    bool="boolean", array="array", list="array", dict="object", object="object",
    tuple="array", any="string",
)  # fmt: skip
"""BFCL's type names to JSON Schema types (the part of BFCL's ``GORILLA_TO_OPENAPI`` its
multi-turn function docs use)."""

PYTHON_HINT = " Note that the provided function is in Python 3 syntax."
"""What BFCL's loader appends to every Python function description."""


def _openapi_properties(properties: dict[str, Any]) -> dict[str, Any]:
    """BFCL's ``_cast_to_openai_type`` for its OpenAI function-calling style, in place."""
    for prop in properties.values():
        kind = prop.get("type")
        if kind is None:
            prop["type"] = "string"
        else:
            if kind == "float":
                prop["format"] = "float"
                prop["description"] += " This is a float type value."
            prop["type"] = _OPENAPI_TYPES.get(kind, "string")
        if prop["type"] in ("array", "object"):
            if "properties" in prop:
                prop["properties"] = _openapi_properties(prop["properties"])
            elif "items" in prop:
                items = prop["items"]
                items["type"] = _OPENAPI_TYPES[items["type"]]
                if items["type"] == "array" and "items" in items:
                    items["items"]["type"] = _OPENAPI_TYPES[items["items"]["type"]]
                elif items["type"] == "object" and "properties" in items:
                    items["properties"] = _openapi_properties(items["properties"])
    return properties


def openai_schema(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The OpenAI tool schema BFCL sends for a function doc in its function-calling mode.

    It is BFCL's own conversion (``convert_to_tool`` with ``GORILLA_TO_OPENAPI`` for the
    OpenAI chat-completions style) of the doc as BFCL's loader returns it (the Python hint
    appended to the description): ``parameters.type`` becomes ``object``, BFCL's type names
    become JSON Schema types, and a ``float`` parameter gets ``format: float`` and a
    sentence saying so. The function's ``response`` schema stays, as BFCL sends it.

    Args:
        doc: One entry of ``data/multi_turn_func_doc/*.json``.
    """
    item = copy.deepcopy(dict(doc))
    item["description"] = item["description"] + PYTHON_HINT
    item["parameters"]["type"] = "object"
    item["parameters"]["properties"] = _openapi_properties(item["parameters"]["properties"])
    return {"type": "function", "function": item}


@dataclass(frozen=True)
class Function:
    """One API function (a public method of one API class).

    Attributes:
        name: The function (method) name; unique across the eight classes.
        owner: Its class.
        doc: BFCL's function doc (read-only).
        schema: The OpenAI tool schema the agent sees (:func:`openai_schema`; read-only).
        params: The method's parameter names in order (positional gold arguments map to
            them).
        mutable_defaults: Parameter to its default as BFCL's source writes it, for the
            parameters whose default is a list, dict or set (``post_tweet``'s ``tags`` and
            ``mentions``): Python makes one such object per process, which the method then
            keeps and changes. Pickled, so each use unpickles a fresh copy
            (:func:`default_value`).
    """

    name: str
    owner: str
    doc: Mapping[str, Any]
    schema: Mapping[str, Any]
    params: tuple[str, ...]
    mutable_defaults: Mapping[str, bytes] = field(default_factory=FrozenDict)


MUTABLE_DEFAULT_TYPES = (list, dict, set)
"""Defaults that are one shared, changeable object per process when a method keeps them."""


def default_value(function: Function, param: str) -> Any:
    """A fresh copy of the default of ``param`` as BFCL's source writes it (never the
    process's default object, which earlier calls may have changed)."""
    return pickle.loads(function.mutable_defaults[param])


def _source_defaults(owner: type) -> dict[str, dict[str, Any]]:
    """Method -> parameter -> the default literal of every list, dict or set default, read
    from the class's source (the objects Python made from them may have been changed)."""
    import textwrap

    tree = ast.parse(textwrap.dedent(inspect.getsource(owner)))
    found: dict[str, dict[str, Any]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        args = node.args
        positional = [*args.posonlyargs, *args.args]
        pairs = [
            *zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True),
            *((a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d),
        ]
        for arg, default in pairs:
            try:
                value = ast.literal_eval(default)
            except ValueError:
                continue
            if isinstance(value, MUTABLE_DEFAULT_TYPES):
                found.setdefault(node.name, {})[arg.arg] = value
    return found


def _mutable_defaults(owner: type, name: str) -> FrozenDict:
    """The pickled source defaults of method ``name`` whose live default is a list, dict or
    set; an error when one cannot be read from the source."""
    written = _source_defaults(owner).get(name, {})
    out = {}
    for param in inspect.signature(getattr(owner, name)).parameters.values():
        if isinstance(param.default, MUTABLE_DEFAULT_TYPES):
            if param.name not in written:
                raise RuntimeError(
                    f"BFCL's {owner.__name__}.{name} has a mutable default for '{param.name}' "
                    "that is not a literal in its source: rods cannot give it fresh"
                )
            out[param.name] = pickle.dumps(written[param.name], protocol=pickle.HIGHEST_PROTOCOL)
    return FrozenDict(out)


@cache
def functions() -> Mapping[str, Function]:
    """Every function of the eight classes by name (128), read from bfcl-eval's docs."""
    root = data_dir() / "multi_turn_func_doc"
    found: dict[str, Function] = {}
    for owner, module in CLASS_MODULES.items():
        method_names = {
            name
            for name, _ in inspect.getmembers(api_class(owner), predicate=inspect.isfunction)
            if not name.startswith("_")
        }
        lines = (root / f"{module}.json").read_text(encoding="utf-8").splitlines()
        for line in lines:
            if not line.strip():
                continue
            doc = json.loads(line)
            name = doc["name"]
            if name not in method_names:
                raise RuntimeError(f"BFCL documents {owner}.{name}, which its class lacks")
            if name in found:
                raise RuntimeError(f"function '{name}' is documented by two classes")
            params = tuple(inspect.signature(getattr(api_class(owner), name)).parameters)[1:]
            found[name] = Function(
                name=name,
                owner=owner,
                doc=freeze(doc),
                schema=freeze(openai_schema(doc)),
                params=params,
                mutable_defaults=_mutable_defaults(api_class(owner), name),
            )
    return FrozenDict(found)


def functions_of(classes: Collection[str]) -> tuple[str, ...]:
    """The functions of ``classes``, in BFCL's order (class order given, doc order within)."""
    table = functions()
    return tuple(f.name for c in classes for f in table.values() if f.owner == c)


def schemas(names: Collection[str]) -> FrozenList:
    """The OpenAI tool schemas of ``names`` (read-only), in the order given."""
    table = functions()
    return FrozenList(table[n].schema for n in names)


# -- call text and result text -------------------------------------------------------------
def call_text(name: str, arguments: Mapping[str, Any]) -> str:
    """A call as BFCL writes a decoded function call: ``name(k=repr(v),...)``.

    This is the string BFCL's checker receives for a call made through function calling
    (``convert_to_function_call``); rods only writes it (results files, logs), never runs it.
    """
    return f"{name}({','.join(f'{k}={v!r}' for k, v in arguments.items())})"


def result_text(value: Any) -> str:
    """A function's return value as BFCL's executor turns it into text: a string as it is, a
    dict as JSON (``json.dumps`` defaults; ``str`` when it is not JSON-serializable, e.g.
    an mpmath number), anything else through ``str``."""
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except Exception:
            return str(value)
    return str(value)


class GoldParseError(ValueError):
    """A ground-truth call string that is not a plain call with literal arguments."""


def parse_call(text: str) -> ToolCall:
    """A BFCL ground-truth call string as a :class:`~rods_env.task.ToolCall`.

    The string is parsed, never evaluated: it must be one call of a known function, with
    literal arguments (``ast.literal_eval``); positional arguments are named from the
    method's signature.

    Raises:
        GoldParseError: naming what is not a plain call.
    """
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise GoldParseError(f"not a call: {text!r} ({exc.msg})") from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise GoldParseError(f"not a plain function call: {text!r}")
    function = functions().get(node.func.id)
    if function is None:
        raise GoldParseError(f"unknown function '{node.func.id}' in {text!r}")
    if len(node.args) > len(function.params):
        raise GoldParseError(f"too many positional arguments in {text!r}")
    arguments: dict[str, Any] = {}
    try:
        for name, arg in zip(function.params, node.args, strict=False):
            arguments[name] = ast.literal_eval(arg)
        for keyword in node.keywords:
            if keyword.arg is None:
                raise GoldParseError(f"'**' arguments in {text!r}")
            arguments[keyword.arg] = ast.literal_eval(keyword.value)
    except ValueError as exc:
        raise GoldParseError(f"a non-literal argument in {text!r}: {exc}") from None
    return ToolCall(name=function.name, arguments=arguments)


# -- precision -----------------------------------------------------------------------------
def _digits(value: Any) -> int | None:
    """The precision mpmath would take from ``value`` (it applies ``int``), or None."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def math_refusal(name: str, arguments: Mapping[str, Any]) -> str | None:
    """Why a MathAPI call would not finish in reasonable time, or None when it would.

    Args:
        name: A MathAPI function.
        arguments: Its arguments.
    """
    if name in PRECISION_FUNCTIONS:
        digits = _digits(arguments.get("precision"))
        if digits is not None and digits > MAX_PRECISION:
            return f"precision must be at most {MAX_PRECISION} digits, got {digits}"
    elif name == "power":
        base, exponent = arguments.get("base"), arguments.get("exponent")
        if isinstance(base, int) and isinstance(exponent, int) and exponent > MAX_EXPONENT:
            return f"exponent must be at most {MAX_EXPONENT} for an integer base, got {exponent}"
    elif name == "round_number":
        places = arguments.get("decimal_places")
        if isinstance(places, int) and abs(places) > MAX_DECIMAL_PLACES:
            return f"decimal_places must be within +-{MAX_DECIMAL_PLACES}, got {places}"
    return None


@contextmanager
def kept_precision() -> Iterator[None]:
    """Run a block, then restore mpmath's and decimal's precision as they were.

    MathAPI sets ``mpmath.mp.dps`` and ``decimal.getcontext().prec`` from its arguments and
    leaves them set, which changes every later mpmath and decimal computation in the
    process.
    """
    import mpmath

    prec = mpmath.mp.prec
    context = decimal.getcontext()
    digits = context.prec
    try:
        yield
    finally:
        mpmath.mp.prec = prec
        context.prec = digits


@contextmanager
def kept_weather() -> Iterator[None]:
    """Run a block, then put back the top level of BFCL's long-context weather dict.

    In long-context mode VehicleControlAPI's ``get_outside_temperature_from_google`` writes
    ``outsideTemperature`` into the module-level ``LONG_WEATHER_EXTENSION`` and returns that
    dict, so every later episode in the process would start with the key set. The result
    text is written inside the block (it is the same text), and the module keeps what its
    source wrote.
    """
    module = importlib.import_module(f"{_SOURCE}.long_context")
    weather = module.LONG_WEATHER_EXTENSION
    kept = dict(weather)
    try:
        yield
    finally:
        weather.clear()
        weather.update(kept)


_MODULE_WRITERS = {"get_outside_temperature_from_google": kept_weather}
"""BFCL functions that write a module-level container, and the guard that puts it back."""


# -- worlds --------------------------------------------------------------------------------
State = Mapping[str, Mapping[str, Any]]
"""Class name -> public attribute -> value: what BFCL's state check compares."""


@dataclass(frozen=True)
class CallResult:
    """What one call did.

    Attributes:
        name: The function called.
        text: The result as the agent sees it, and as the response check compares it
            (:func:`result_text`, or an error text).
        ran: The name resolved to an allowed function and its method ran (it may still have
            raised: ``text`` then starts with :data:`ERROR_PREFIX`).
        error: None when the method returned; ``"unknown_function"`` (not allowed here),
            ``"refused"`` (MathAPI arguments beyond the bounds: :func:`math_refusal`) or
            ``"exception"``.
    """

    name: str
    text: str
    ran: bool
    error: str | None = None


def _short(text: str, n: int = 100) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


class World:
    """The API instances of one episode (or of a gold replay).

    Args:
        instances: Class name to its instance (only this world uses them).
        defaults: Where omitted list/dict/set arguments come from. None (rods' semantics):
            each call gets a fresh copy of the default as BFCL's source writes it. A dict:
            BFCL's semantics within one episode: one object per function and parameter,
            made on first use and kept in the dict, so every call that omits the argument
            gets the same object (Python's one default per process); BFCL's checker shares
            it between the model's and the gold's instances, so it passes one dict to both
            worlds (:func:`new_pair`).
    """

    __slots__ = ("defaults", "instances")

    def __init__(
        self, instances: dict[str, Any], defaults: dict[tuple[str, str], Any] | None = None
    ) -> None:
        self.instances = instances
        self.defaults = defaults

    def call(self, name: str, arguments: Mapping[str, Any], allowed: Collection[str]) -> CallResult:
        """Run one call: ``name`` among ``allowed``, with ``arguments`` as keywords.

        Never raises on the call's account: an unknown or disallowed name, an argument the
        method rejects and an exception inside it are all error results. Partial changes a
        method made before raising stay, as in BFCL.

        Args:
            name: The function to call (as BFCL reads the agent's name:
                :mod:`environments.bfcl.reading`).
            arguments: Its JSON arguments.
            allowed: The function names callable now (the tools visible this turn).
        """
        function = functions().get(name) if name in allowed else None
        instance = self.instances.get(function.owner) if function is not None else None
        if function is None or instance is None:
            return unknown_function(name)
        method = getattr(instance, name)
        kwargs = _fresh(dict(arguments))
        for param in function.mutable_defaults:
            if param not in kwargs:
                kwargs[param] = self._default(function, param)
        if function.owner == "MathAPI":
            refusal = math_refusal(name, arguments)
            if refusal is not None:
                return CallResult(name, json.dumps({"error": refusal}), ran=False, error="refused")
            with kept_precision():  # the result text too: mpmath prints at its precision
                return _run(name, method, kwargs)
        guard = _MODULE_WRITERS.get(name)
        if guard is not None:
            with guard():  # the result text too: it is the module's dict
                return _run(name, method, kwargs)
        return _run(name, method, kwargs)

    def _default(self, function: Function, param: str) -> Any:
        if self.defaults is None:
            return default_value(function, param)
        key = (function.name, param)
        if key not in self.defaults:
            self.defaults[key] = default_value(function, param)
        return self.defaults[key]

    def state(self) -> dict[str, dict[str, Any]]:
        """The live public attributes of every instance (not copies: read them, do not keep
        them across calls)."""
        return {
            cls: {k: v for k, v in vars(inst).items() if not k.startswith("_")}
            for cls, inst in self.instances.items()
        }

    def snapshot(self) -> State:
        """A read-only copy of :meth:`state` that later calls do not change."""
        copied = pickle.loads(pickle.dumps(self.state(), protocol=pickle.HIGHEST_PROTOCOL))
        return frozen_copy(copied)

    def differences(self, gold: State) -> dict[str, tuple[str, ...]]:
        """BFCL's state check against ``gold``: class to the public attributes whose values
        differ (``live != gold``, attribute by attribute); empty when the states match."""
        return differences(self, gold)


def unknown_function(name: str, text: str | None = None) -> CallResult:
    """The result of a call that names no function callable here: BFCL's executor's words
    for an undefined name, or ``text``."""
    text = text or f"{ERROR_PREFIX}name '{_short(name)}' is not defined"
    return CallResult(name, text, ran=False, error="unknown_function")


def frozen_copy(value: Any, _memo: dict[int, Any] | None = None) -> Any:
    """``value`` with its containers made read-only, in place where they sit in an
    object's attributes: dicts become :class:`~rods_env.tools.FrozenDict`, lists
    :class:`~rods_env.tools.FrozenList`, sets frozensets; objects (BFCL's ``Directory``
    and ``File``) keep their identity with their attributes frozen. Equality with the
    live values is unchanged. Give it only a private copy (a snapshot's).
    """
    memo = {} if _memo is None else _memo
    key = id(value)
    if key in memo:
        return memo[key]
    if isinstance(value, str | bytes | int | float | complex | bool | type(None)):
        return value
    if isinstance(value, dict):
        out: Any = FrozenDict({k: frozen_copy(v, memo) for k, v in value.items()})
    elif isinstance(value, list):
        out = FrozenList(frozen_copy(v, memo) for v in value)
    elif isinstance(value, tuple):
        out = tuple(frozen_copy(v, memo) for v in value)
    elif isinstance(value, set | frozenset):
        out = frozenset(frozen_copy(v, memo) for v in value)
    else:
        memo[key] = value  # before its attributes: a directory's children point back to it
        for name, attr in list(getattr(value, "__dict__", {}).items()):
            setattr(value, name, frozen_copy(attr, memo))
        return value
    memo[key] = out
    return out


def differences(world: World, gold: State) -> dict[str, tuple[str, ...]]:
    """See :meth:`World.differences`."""
    found: dict[str, tuple[str, ...]] = {}
    for cls, attrs in gold.items():
        live = vars(world.instances[cls])
        bad = tuple(name for name, value in attrs.items() if _differs(live.get(name), value))
        if bad:
            found[cls] = bad
    return found


def _differs(live: Any, gold: Any) -> bool:
    try:
        return bool(live != gold)
    except RecursionError:  # a directory tree nested deeper than Python's recursion limit
        return True


def _fresh(value: Any) -> Any:
    """A copy of JSON data's containers. BFCL's executor builds every call's arguments anew
    from text, and methods keep them (``post_tweet`` stores its ``mentions`` list, which
    ``mention`` later extends): a caller's object must never become an instance's state."""
    if type(value) is dict:
        return {k: _fresh(v) for k, v in value.items()}
    if type(value) is list:
        return [_fresh(v) for v in value]
    return value


def _run(name: str, method: Any, kwargs: dict[str, Any]) -> CallResult:
    try:
        return CallResult(name, result_text(method(**kwargs)), ran=True)
    except Exception as exc:
        return CallResult(name, f"{ERROR_PREFIX}{exc}", ran=True, error="exception")


@dataclass(frozen=True)
class Scenario:
    """The initial state of a world: which classes, loaded with what.

    Attributes:
        classes: The involved classes, in the task's order.
        config: JSON text of the initial configuration (class name to its scenario).
        long_context: Load the classes in BFCL's long-context mode (bigger states and
            outputs).
    """

    classes: tuple[str, ...]
    config: str
    long_context: bool = False


class _Templates:
    """Pickled freshly loaded instances per scenario, built once per process (bounded).

    ``pair=False``: one world's instances. ``pair=True``: two worlds' instances loaded
    side by side, as BFCL's checker loads the model's and the gold's: whatever both
    reference from BFCL's modules (long-context TravelAPI's credit cards and bookings) is
    one object in the pickle, so each unpickled pair shares a fresh copy of it.
    """

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._blobs: OrderedDict[tuple[Scenario, bool], bytes] = OrderedDict()
        self._lock = Lock()

    def get(self, scenario: Scenario, pair: bool = False) -> bytes:
        key = (scenario, pair)
        with self._lock:
            blob = self._blobs.get(key)
            if blob is not None:
                self._blobs.move_to_end(key)
                return blob
        loaded: Any = (_load(scenario), _load(scenario)) if pair else _load(scenario)
        blob = pickle.dumps(loaded, protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            self._blobs[key] = blob
            while len(self._blobs) > self.capacity:
                self._blobs.popitem(last=False)
        return blob


def _load(scenario: Scenario) -> dict[str, Any]:
    """The classes of ``scenario`` loaded as BFCL loads them (a deep copy of each class's
    configuration into ``_load_scenario``)."""
    config = json.loads(scenario.config)
    instances = {}
    for name in scenario.classes:
        instance = api_class(name)()
        if name not in STATELESS:
            instance._load_scenario(
                copy.deepcopy(config.get(name, {})), long_context=scenario.long_context
            )
        instances[name] = instance
    return instances


_TEMPLATES = _Templates()


def new_world(scenario: Scenario) -> World:
    """A fresh world in the initial state of ``scenario``, sharing no object with any other,
    each omitted list argument a fresh default (rods' semantics).

    The blob it unpickles was made in this process from the loaded classes (never from
    outside data).
    """
    return World(pickle.loads(_TEMPLATES.get(scenario)))


def new_pair(scenario: Scenario, *, share_data: bool, share_defaults: bool) -> tuple[World, World]:
    """Two fresh worlds of ``scenario`` for BFCL's checker, the model's and the gold's, that
    share what BFCL's share, with each kind of sharing switched on or off.

    Args:
        scenario: The initial state.
        share_data: The objects both worlds take from BFCL's modules are the same objects
            (long-context TravelAPI's credit-card and booking dicts: a change through one
            world shows in the other), fresh for this pair.
        share_defaults: An omitted list argument is one object for both worlds
            (:class:`World`'s ``defaults``), fresh for this pair.
    """
    defaults: dict[tuple[str, str], Any] | None = {} if share_defaults else None
    if share_data:
        model, gold = pickle.loads(_TEMPLATES.get(scenario, pair=True))
    else:
        model, gold = (pickle.loads(_TEMPLATES.get(scenario)) for _ in range(2))
    return World(model, defaults), World(gold, defaults)


@cache
def shares_data(scenario: Scenario) -> bool:
    """Whether two worlds of ``scenario`` loaded as BFCL loads them hold a changeable object
    in common (BFCL's checker then lets the model's calls change the gold's state)."""
    return _common_containers(*pickle.loads(_TEMPLATES.get(scenario, pair=True)))


def _containers(value: Any, seen: dict[int, Any]) -> None:
    """Every list, dict, set and object reachable from ``value``, by id (kept alive)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str | bytes | int | float | complex | bool | type(None)):
            continue
        if id(item) in seen:
            continue
        seen[id(item)] = item
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
        elif hasattr(item, "__dict__"):
            stack.extend(vars(item).values())


def _common_containers(a: Any, b: Any) -> bool:
    left: dict[int, Any] = {}
    right: dict[int, Any] = {}
    _containers(a, left)
    _containers(b, right)
    return any(not isinstance(left[k], tuple | frozenset) for k in left.keys() & right.keys())


def has_mutable_defaults(classes: Collection[str]) -> bool:
    """Whether a function of ``classes`` has a list, dict or set default (TwitterAPI's
    ``post_tweet``)."""
    table = functions()
    return any(table[name].mutable_defaults for name in functions_of(classes))


# -- gold ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class GoldTurn:
    """One turn of a gold replay.

    Attributes:
        calls: The turn's gold calls.
        results: Their result texts, in order.
        state: The public state after the turn, or None when the turn has no gold calls
            (BFCL does not check it).
    """

    calls: tuple[ToolCall, ...]
    results: tuple[str, ...]
    state: State | None

    @property
    def checked(self) -> bool:
        """Whether BFCL checks this turn (it has gold calls)."""
        return self.state is not None


@dataclass(frozen=True)
class GoldRun:
    """A scenario's gold calls run turn by turn.

    Attributes:
        turns: One :class:`GoldTurn` per turn.
        errors: ``(turn, call index, result)`` of gold calls that did not return normally
            (BFCL keeps their error texts, and so does the response check).
    """

    turns: tuple[GoldTurn, ...]
    errors: tuple[tuple[int, int, str], ...] = ()

    @property
    def checked_turns(self) -> tuple[int, ...]:
        """Indices of the turns BFCL checks."""
        return tuple(i for i, t in enumerate(self.turns) if t.checked)


def replay(scenario: Scenario, turns: Sequence[Sequence[ToolCall]]) -> GoldRun:
    """Run gold calls turn by turn on a fresh world of ``scenario``.

    Every function of the scenario's classes is callable (the gold may use a function
    before the turn that reveals it to the agent, as ``multi_turn_miss_func_49`` does).

    Args:
        scenario: The initial state.
        turns: The gold calls of each turn.
    """
    world = new_world(scenario)
    allowed = frozenset(functions_of(scenario.classes))
    out: list[GoldTurn] = []
    errors: list[tuple[int, int, str]] = []
    for t, calls in enumerate(turns):
        results = []
        for i, call in enumerate(calls):
            result = world.call(call.name, call.arguments, allowed)
            if result.error is not None:
                errors.append((t, i, result.text))
            results.append(result.text)
        state = world.snapshot() if calls else None
        out.append(GoldTurn(tuple(calls), tuple(results), state))
    return GoldRun(tuple(out), tuple(errors))


class GoldCache:
    """Gold replays by key (e.g. a task id), computed once each; the least recently used
    are dropped beyond ``capacity``, so memory stays bounded however many tasks pass by.

    Args:
        capacity: Most replays kept.
    """

    def __init__(self, capacity: int = 1024) -> None:
        self.capacity = capacity
        self._runs: OrderedDict[Any, GoldRun] = OrderedDict()
        self._lock = Lock()

    def get(self, key: Any, scenario: Scenario, turns: Sequence[Sequence[ToolCall]]) -> GoldRun:
        """The replay stored under ``key``, running it first when absent."""
        with self._lock:
            run = self._runs.get(key)
            if run is not None:
                self._runs.move_to_end(key)
                return run
        run = replay(scenario, turns)
        with self._lock:
            self._runs[key] = run
            while len(self._runs) > self.capacity:
                self._runs.popitem(last=False)
        return run

    def __len__(self) -> int:
        return len(self._runs)

    def clear(self) -> None:
        """Forget every replay."""
        with self._lock:
            self._runs.clear()


GOLD_CACHE = GoldCache()
"""The process-wide gold replays of the BFCL environments."""
