"""How BFCL reads a function call: its decoder's call string, its executor's rewrite, Python's
parser; here parsed and never evaluated.

BFCL's function-calling decoder (``convert_to_function_call``) writes each call as the
string ``name(k=repr(v),...)``. Its executor (``execute_multi_turn_func_call``) then
rewrites the whole string with one regular expression (``_process_method_calls``): every
identifier followed by optional whitespace and ``(`` loses that whitespace, and becomes
``<instance>.<identifier>`` when it is a method of an involved class; and ``eval``-s the
result. That reading normalises:

* **the function name**: whitespace after it (any character ``\\s`` matches, U+00A0 and
  U+3000 included) is dropped, and Python's ``eval`` skips spaces, tabs, newlines, form
  feeds and carriage returns before it (``" cp"``, ``"\\ncp"``, ``"cp\\u3000"`` are ``cp``);
  other characters before it (``"\\u00a0cp"``, ``"\\vcp"``) are a syntax error;
* **argument names**: as Python reads a keyword: whitespace around it is skipped and the
  name is NFKC-normalised (``"ｆｉｌｅ_name"`` is ``file_name``);
* **argument text** (BFCL's checker only; :attr:`Reading.checked`): inside strings too,
  ``word (`` becomes ``word(``, and a method name of an involved class followed by ``(``
  gets the checker's instance name in front (``"run ls()"`` is stored as ``"run
  <model>_eval_<task id>_GorillaFileSystem_instance.ls()"``; the gold's instance names
  differ from the model's).

Nothing else is normalised: case (``Cp``), a ``functions.`` prefix, a typo or an unknown
name is an undefined name, as in BFCL. A name or key that is Python code (BFCL would run
it) is not a call here.
"""

from __future__ import annotations

import ast
import keyword
import math
import re
import unicodedata
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from environments.bfcl.apis import ERROR_PREFIX, call_text, functions, functions_of
from rods_env.task import ToolCall
from rods_env.tools import FrozenDict

CALL_NAME = re.compile(r"\b([a-zA-Z_]\w*)\s*(?=\()")
"""BFCL's executor's pattern of a called name (``_process_method_calls``); every match in
the call string is rewritten."""

CHECKER_MODEL = "rods"
"""The model name in the instance names of rods' reading of BFCL's checker (BFCL's is the
evaluated model's registry name, which changes only the length of rewritten argument
text); the tests hand BFCL's checker the same name."""

_EVAL_SKIPS = " \t"
"""What Python strips from the start of an expression's text before parsing it."""


def instance_names(task_id: str, classes: Collection[str], *, gold: bool) -> dict[str, str]:
    """The names BFCL's checker gives the instances of one task's classes (the model's, or
    the gold's): ``<model>[_ground_truth]_eval_<task id>_<class>_instance``, with ``-./:``
    as ``_``."""
    model = CHECKER_MODEL + ("_ground_truth" if gold else "")
    return {
        cls: re.sub(r"[-./:]", "_", f"{model}_eval_{task_id}_{cls}_instance") for cls in classes
    }


@dataclass(frozen=True)
class Reading:
    """One call as BFCL reads it.

    Attributes:
        name: The name as sent.
        function: The API function BFCL calls, or None when the text is not a call of one
            (an undefined name, a syntax error).
        arguments: The arguments as the agent meant them: the names as Python reads them,
            the values as sent.
        checked: The arguments as BFCL's checker passes them (argument text rewritten;
            the same object as ``arguments`` when nothing changed).
        error: When ``function`` is None, the error text BFCL's executor would write.
    """

    name: str
    function: str | None
    arguments: Mapping[str, Any]
    checked: Mapping[str, Any]
    error: str = ""

    @property
    def rewritten(self) -> bool:
        """Whether BFCL's checker passes other argument values than were sent."""
        return self.checked is not self.arguments


class Reader:
    """Reads calls as BFCL reads them for one task's classes.

    Args:
        classes: The task's involved classes (their methods, held-out ones included, are
            the names BFCL's executor resolves).
        instances: Class to the checker's instance name (:func:`instance_names`).
    """

    def __init__(self, classes: Collection[str], instances: Mapping[str, str]) -> None:
        table = functions()
        self._owner = {name: instances[table[name].owner] for name in functions_of(classes)}
        self._by_instance = {v: k for k, v in instances.items()}

    def _rewrite(self, match: re.Match[str]) -> str:
        name = match.group(1)
        instance = self._owner.get(name)
        return f"{instance}.{name}" if instance is not None else name

    def _method(self, func: ast.expr) -> str | None:
        """The API method a parsed callee is, or None."""
        if not (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in self._by_instance
        ):
            return None
        return func.attr if self._owner.get(func.attr) == func.value.id else None

    def _undefined(self, node: ast.expr, name: str) -> str:
        """BFCL's executor's error for a callee that is no API method: the first name Python
        would look up (what it reports as not defined), or the name as sent when that is an
        instance (code around a method name)."""
        while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
            node = node.func if isinstance(node, ast.Call) else node.value
        shown = node.id if isinstance(node, ast.Name) else name
        if shown in self._by_instance:
            shown = name
        if len(shown) > 100:
            shown = shown[:97] + "..."
        return f"{ERROR_PREFIX}name '{shown}' is not defined"

    def read(self, name: str, arguments: Mapping[str, Any]) -> Reading:
        """``name(arguments)`` as BFCL's decoder writes it and its executor reads it."""
        if name in self._owner and all(map(_plain_key, arguments)) and _plain(arguments):
            sent = FrozenDict(arguments)  # what the full reading gives, without parsing
            return Reading(name, name, sent, sent)
        text = call_text(name, arguments)
        split = len(name) + 1  # the rewrite never crosses the call's own "("
        head = CALL_NAME.sub(self._rewrite, text[:split])
        tail = CALL_NAME.sub(self._rewrite, text[split:])
        try:
            call = _parse(head + tail)
        except (SyntaxError, ValueError) as exc:
            return Reading(name, None, arguments, arguments, f"{ERROR_PREFIX}{exc}")
        if not isinstance(call, ast.Call):
            return Reading(name, None, arguments, arguments, self._undefined(call, name))
        function = self._method(call.func)
        names = [k.arg for k in call.keywords]
        again = next((k for i, k in enumerate(call.keywords) if k.arg in names[:i]), None)
        if again is not None:  # Python's compiler refuses it; its parser does not
            where = f"(<string>, line {again.lineno})"
            error = f"{ERROR_PREFIX}keyword argument repeated: {again.arg} {where}"
            return Reading(name, None, arguments, arguments, error)
        if (
            function is None
            or _core(name) != function  # code around the name (BFCL would run it)
            or call.args
            or names != [_keyword(k) for k in arguments]  # code in an argument name
        ):
            return Reading(name, None, arguments, arguments, self._undefined(call.func, name))
        try:
            values = [ast.literal_eval(k.value) for k in call.keywords]
        except ValueError:  # nan or inf: the names Python prints them by are not defined
            unknown = next(
                n for k in call.keywords for n in ast.walk(k.value) if isinstance(n, ast.Name)
            )
            return Reading(name, None, arguments, arguments, self._undefined(unknown, name))
        sent = FrozenDict(zip(names, arguments.values(), strict=True))
        if tail == text[split:]:
            return Reading(name, function, sent, sent)
        # each value is the repr of JSON data, rewritten inside its strings
        return Reading(name, function, sent, FrozenDict(zip(names, values, strict=True)))

    def read_gold(self, text: str) -> ToolCall:
        """A ground-truth call string as BFCL's checker runs it (rewritten, then parsed;
        positional arguments named from the method's signature).

        Raises:
            ValueError: when it is not a plain call of a method with literal arguments.
        """
        call = _parse(CALL_NAME.sub(self._rewrite, text))
        function = self._method(call.func) if isinstance(call, ast.Call) else None
        if function is None or not isinstance(call, ast.Call):
            raise ValueError(f"not a call of an API method: {text!r}")
        params = functions()[function].params
        arguments = {p: ast.literal_eval(a) for p, a in zip(params, call.args, strict=False)}
        arguments.update((str(k.arg), ast.literal_eval(k.value)) for k in call.keywords)
        return ToolCall(name=function, arguments=arguments)


def _plain_key(key: str) -> bool:
    """Whether BFCL reads ``key=`` as the keyword ``key`` itself (an ASCII identifier)."""
    return key.isascii() and key.isidentifier() and not keyword.iskeyword(key)


def _plain(value: Any) -> bool:
    """Whether BFCL's rewrite leaves ``value`` (JSON data) alone and Python reads its repr
    back as it is: no ``(`` in its text, no infinite or NaN number."""
    if isinstance(value, str):
        return "(" not in value
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, Mapping):
        return all(_plain(k) and _plain(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    return True


def _parse(source: str) -> ast.expr:
    """The syntax tree of ``source`` read as one Python expression, as BFCL's checker reads
    a call: parsed only, never run (leading spaces and tabs skipped as Python's expression
    mode skips them; errors name ``<string>``, as BFCL's error texts show them).

    Raises:
        SyntaxError: for text that is not one expression.
        ValueError: for a null character.
    """
    tree = ast.parse(source.lstrip(_EVAL_SKIPS), filename="<string>", mode="eval")
    return tree.body


_BLANK = " \t\n\r\f"
"""Characters Python's parser skips before a call's name (blank lines, indentation that
``eval`` strips) and around a keyword inside the parentheses."""

_TRAILING_SPACE = re.compile(r"\s+\Z")


def _core(name: str) -> str:
    """The name without what BFCL's reading skips around it: blank characters before it,
    any whitespace after it (the rewrite drops the whitespace before the ``(``)."""
    return _TRAILING_SPACE.sub("", name.lstrip(_BLANK))


def _keyword(key: str) -> str:
    """An argument name as Python reads it in ``key=value``: blanks around it skipped,
    NFKC-normalised (what a non-identifier turns into does not matter: it is refused)."""
    return unicodedata.normalize("NFKC", key.strip(_BLANK))


@lru_cache(maxsize=4096)
def reader(task_id: str, classes: tuple[str, ...], *, gold: bool = False) -> Reader:
    """The reader of one task's calls (the model's, or the gold's), kept per process."""
    return Reader(classes, instance_names(task_id, classes, gold=gold))
