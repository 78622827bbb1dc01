"""A safe arithmetic evaluator for the domains' ``calculate`` tools.

Agent text is never passed to ``eval``: the expression is parsed with :mod:`ast` and only an
allow-list of nodes is evaluated (numbers, ``+ - * / // % **``, parentheses, unary signs).
Sizes are bounded (input length, exponent, magnitude) so a call cannot hang the process.
"""

from __future__ import annotations

import ast
import math
import operator
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from rods_env.errors import InvalidArgumentError

MAX_EXPRESSION_LENGTH = 500
"""Longest expression accepted, in characters."""

MAX_EXPONENT = 100
"""Largest absolute exponent accepted by ``**``."""

MAX_MAGNITUDE = 1e100
"""Largest absolute value of any intermediate result."""

_HINT = "Use numbers, + - * / // % ** and parentheses only, for example '(12.5 + 7.25) * 2'."

_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}

_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _check(value: float | int) -> float | int:
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidArgumentError("The result is not a finite number.", _HINT)
    if abs(value) > MAX_MAGNITUDE:
        raise InvalidArgumentError(
            f"The result is too large (more than {MAX_MAGNITUDE:g} in absolute value).", _HINT
        )
    return value


def _power(base: float | int, exponent: float | int) -> float | int:
    if abs(exponent) > MAX_EXPONENT:
        raise InvalidArgumentError(
            f"Exponent {exponent!r} is too large; exponents up to {MAX_EXPONENT} are allowed.",
            _HINT,
        )
    if base != 0 and abs(exponent) * math.log10(abs(base)) > math.log10(MAX_MAGNITUDE):
        raise InvalidArgumentError(
            f"{base!r} ** {exponent!r} is too large (more than {MAX_MAGNITUDE:g}).", _HINT
        )
    if base == 0 and exponent < 0:
        raise InvalidArgumentError("Zero cannot be raised to a negative power.", _HINT)
    result = base**exponent
    if isinstance(result, complex):
        raise InvalidArgumentError(
            f"{base!r} ** {exponent!r} is not a real number.",
            "Use a non-negative base for fractional powers.",
        )
    return result


def _eval(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidArgumentError(f"{value!r} is not a number.", _HINT)
        return _check(value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _check(_UNARY[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left = _eval(node.left)
        right = _eval(node.right)
        if isinstance(node.op, ast.Pow):
            return _check(_power(left, right))
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and right == 0:
            raise InvalidArgumentError("Division by zero.", _HINT)
        return _check(_BINARY[type(node.op)](left, right))
    shown = ast.unparse(node) if isinstance(node, ast.expr) else type(node).__name__
    raise InvalidArgumentError(f"'{shown}' is not allowed in an arithmetic expression.", _HINT)


def evaluate_arithmetic(expression: str, *, ndigits: int | None = None) -> float | int:
    """Evaluate an arithmetic expression safely.

    Args:
        expression: Text such as ``"(12.5 + 7.25) * 2"``: numbers, ``+ - * / // % **``,
            parentheses and unary signs. At most :data:`MAX_EXPRESSION_LENGTH` characters.
        ndigits: When given, round the result to this many decimals (an integral float
            result then stays a float, e.g. ``3.0``).

    Returns:
        The value: an ``int`` when every operand and operation stays integral, else a ``float``.

    Raises:
        InvalidArgumentError: The text is empty, too long, not valid arithmetic, uses
            anything outside the allow-list, divides by zero, or overflows the bounds.
    """
    if not isinstance(expression, str):
        raise InvalidArgumentError(
            f"The expression must be text, got {type(expression).__name__}.", _HINT
        )
    text = expression.strip()
    if not text:
        raise InvalidArgumentError("The expression is empty.", _HINT)
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise InvalidArgumentError(
            f"The expression has {len(text)} characters; "
            f"at most {MAX_EXPRESSION_LENGTH} are allowed.",
            "Split the computation into several smaller calls.",
        )
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise InvalidArgumentError(
            f"'{text}' is not a valid arithmetic expression.", _HINT
        ) from None
    try:
        value = _eval(tree)
    except (OverflowError, RecursionError, MemoryError):
        raise InvalidArgumentError(
            f"'{text}' cannot be computed within the bounds.", _HINT
        ) from None
    if ndigits is not None:
        value = round(value, ndigits)
    return value


# -- Python's own arithmetic, without eval ----------------------------------------------------
MAX_WORK = 1_000_000_000
"""Most work :func:`evaluate_python_arithmetic` does on one expression's integers, in units
of about a nanosecond of CPython's own integer arithmetic (see :func:`_int_work`): about a
second. Python computes ``9 ** 9 ** 9`` for minutes and gigabytes; this stops it first,
and lets ``2 ** 1000000`` (a few milliseconds) through."""

_LIMB_BITS = 30
"""Bits per digit of CPython's integers."""

_KARATSUBA_CUTOFF = 70
"""Digits from which CPython multiplies by Karatsuba's method."""


class TooCostlyError(InvalidArgumentError):
    """An expression whose integers would take Python's own arithmetic more than
    :data:`MAX_WORK` (seconds to hours, and memory with it): refused before it runs."""

    def __init__(self, message: str) -> None:
        super().__init__(message, None)


_PY_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_PY_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _limbs(value: int) -> int:
    return abs(value).bit_length() // _LIMB_BITS + 1


def _multiply_work(a: int, b: int) -> float:
    """CPython's cost of a product of ``a`` and ``b``-digit integers (schoolbook below the
    Karatsuba cutoff, else Karatsuba on the shorter, once per slice of the longer)."""
    small, large = min(a, b), max(a, b)
    if small < _KARATSUBA_CUTOFF:
        return float(small * large)
    return 5.0 * small**1.585 * (large / small)


def _int_work(op: type[ast.operator], left: object, right: object) -> float:
    """An estimate of the work of ``left <op> right`` (see :data:`MAX_WORK`), calibrated
    on CPython 3.11 (a product of two 1.6-million-bit integers: 0.12 s; their quotient:
    0.8 s; ``3 ** 5000000``: 0.9 s): close enough to refuse only what takes Python about a
    second or more. Only integer operands cost more than a constant, and a sequence
    repeated costs its length."""
    if op is ast.Mult and isinstance(right, tuple | list | str) and isinstance(left, int):
        left, right = right, left
    if op is ast.Mult and isinstance(left, tuple | list | str) and isinstance(right, int):
        return float(max(0, right) * len(left) + 1)
    if not (isinstance(left, int) and isinstance(right, int)):
        for value in (left, right):  # an int converted to a float: linear
            if isinstance(value, int):
                return float(_limbs(value))
        return 1.0
    a, b = _limbs(left), _limbs(right)
    if op is ast.Pow:
        base = abs(left)
        if right <= 0 or base <= 1:
            return float(a + b)
        log2 = math.log2(base) if base.bit_length() < 1000 else float(base.bit_length())
        result = int(right * log2) // _LIMB_BITS + 1
        if base & (base - 1) == 0:  # a power of two: squarings of a single bit (~0.1 µs
            return 100.0 * result  # a digit: 2 ** 10000000 takes 0.03 s)
        return 2.0 * _multiply_work(result // 2 + 1, result // 2 + 1)
    if op is ast.Mult:
        return _multiply_work(a, b)
    if op in (ast.FloorDiv, ast.Mod):
        return 1.3 * (max(0, a - b) + 1) * b
    return float(a + b)


def _spend(op: type[ast.operator], left: object, right: object, spent: list[float]) -> None:
    """Add the work of ``left <op> right`` to ``spent``; refuse past :data:`MAX_WORK`."""
    spent[0] += _int_work(op, left, right)
    if spent[0] > MAX_WORK:
        raise TooCostlyError(
            "The expression is too costly to compute: its integers grow past what Python's "
            "arithmetic computes in about a second."
        )


def _function_str(callee: object) -> str:
    """How CPython names a callee in its argument-unpacking errors (``_PyObject_FunctionStr``):
    ``module.qualname()`` for a function, and ``str()`` of anything without a
    ``__qualname__``, which is every literal."""
    return str(callee)


def _is_iterable(value: object) -> bool:
    """CPython's test before ``*`` unpacking: the type can be iterated or indexed."""
    kind = type(value)
    return hasattr(kind, "__iter__") or hasattr(kind, "__getitem__")


def evaluate_python_arithmetic(expression: str) -> object:
    """Evaluate arithmetic on literal numbers exactly as Python's ``eval`` would, without it.

    For a benchmark whose own tool ``eval``\\ s an expression restricted to digits, ``+ - * /``,
    parentheses, dots and spaces (τ²-bench's ``calculate``), this gives the same value and,
    where ``eval`` raises, an exception of the same type with the same message: the source
    is parsed as ``eval`` parses it (leading spaces and tabs stripped, file ``<string>``),
    and the operators are Python's own, applied in Python's order. Only what ``eval`` would
    take more than about a second on is refused (:class:`TooCostlyError`, before the
    operation runs: integers that grow past :data:`MAX_WORK`), and nothing but literals
    and operators is ever evaluated. The text is compiled as ``eval`` compiles it (to a
    code object that never runs), so a syntax error, or the compiler's ``RecursionError``
    on some 3,000 operators in a chain, is ``eval``'s own; where that limit falls depends,
    for ``eval`` too, on how deep the call stack already is (three operators fewer per
    frame).

    A call on a literal (``2(3)``, ``2(*3)``, ``2(**3)``: juxtaposed parentheses and stars)
    can never succeed, but it fails where and as CPython's bytecode fails it: the callee,
    then the positional arguments (a ``*`` argument among others must be iterable at once,
    ``Value after * must be an iterable``), then each ``**`` argument (``2 argument after
    ** must be a mapping``), then a lone ``*`` argument (``2 argument after * must be an
    iterable``), then the call (``'int' object is not callable``). An exception raised
    while evaluating an argument comes first when that argument comes first.

    Args:
        expression: The expression text.

    Returns:
        The value Python gives ``expression`` (an int, a float, ``Ellipsis`` or a tuple).

    Raises:
        SyntaxError, TypeError, ZeroDivisionError, OverflowError, ValueError, RecursionError:
            as ``eval`` raises them.
        InvalidArgumentError: for a node outside literal arithmetic (a name, an attribute, a
            named keyword argument...); :class:`TooCostlyError` for integers too large.
    """
    source = expression.lstrip(" \t")
    with warnings.catch_warnings():  # "perhaps you missed a comma?": eval's, not ours
        warnings.simplefilter("ignore", SyntaxWarning)
        # eval's own compilation, to a code object that is never run: its errors word for
        # word, the compiler's RecursionError on a long chain of operators included
        compile(source, "<string>", "eval", dont_inherit=True)
        try:
            tree = ast.parse(source, filename="<string>", mode="eval")
        except RecursionError:  # a few nodes short of the compiler's limit: eval called a
            # frame deeper than here fails so
            raise RecursionError("maximum recursion depth exceeded during compilation") from None
    spent = [0.0]
    # an iterative walk in evaluation order, so that a long chain of operators cannot hit
    # Python's recursion limit before eval's own compiler would. A frame is (what, node,
    # data): "eval" pushes a node's work; the others run once the values it needs are on
    # the value stack.
    values: list[object] = []
    frames: list[tuple[str, Any, int]] = [("eval", tree.body, 0)]
    while frames:
        what, node, data = frames.pop()
        if what == "eval":
            _expand(node, values, frames)
        elif what == "binop":
            right, left = values.pop(), values.pop()
            _spend(type(node.op), left, right, spent)
            values.append(_PY_BINARY[type(node.op)](left, right))
        elif what == "unary":
            values.append(_PY_UNARY[type(node.op)](values.pop()))
        elif what == "star":  # a * item of a display or of several arguments: LIST_EXTEND
            if not _is_iterable(values[-1]):
                raise TypeError(
                    f"Value after * must be an iterable, not {type(values[-1]).__name__}"
                )
        elif what == "tuple":
            n = len(node.elts)
            items = values[len(values) - n :] if n else []
            del values[len(values) - n :]
            out: list[object] = []
            for elt, item in zip(node.elts, items, strict=True):
                if isinstance(elt, ast.Starred):
                    assert isinstance(item, Iterable)  # checked by its "star" frame
                    out.extend(item)
                else:
                    out.append(item)
            values.append(tuple(out))
        elif what == "mapping":  # a ** argument: DICT_MERGE (no literal is a mapping)
            raise TypeError(
                f"{_function_str(values[data])} argument after ** must be a mapping, "
                f"not {type(values[-1]).__name__}"
            )
        else:  # "call": CALL_FUNCTION_EX's check of a lone * argument, then the call
            callee = values[data]
            args = node.args
            if len(args) == 1 and isinstance(args[0], ast.Starred):
                lone = values[data + 1]
                if not _is_iterable(lone):
                    raise TypeError(
                        f"{_function_str(callee)} argument after * must be an iterable, "
                        f"not {type(lone).__name__}"
                    )
            raise TypeError(f"'{type(callee).__name__}' object is not callable")
    return values[0]


def _expand(node: ast.AST, values: list[object], frames: list[tuple[str, Any, int]]) -> None:
    """Push a literal's value, or the frames that evaluate ``node`` (last pushed runs first)."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (bool, str, bytes)):
            raise InvalidArgumentError(f"{node.value!r} is not a number.", _HINT)
        values.append(node.value)
        return
    todo: list[tuple[str, Any, int]] = []  # in evaluation order; pushed reversed
    if isinstance(node, ast.BinOp) and type(node.op) in _PY_BINARY:
        todo = [("eval", node.left, 0), ("eval", node.right, 0), ("binop", node, 0)]
    elif isinstance(node, ast.UnaryOp) and type(node.op) in _PY_UNARY:
        todo = [("eval", node.operand, 0), ("unary", node, 0)]
    elif isinstance(node, ast.Tuple) and isinstance(node.ctx, ast.Load):
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                todo += [("eval", elt.value, 0), ("star", elt, 0)]
            else:
                todo.append(("eval", elt, 0))
        todo.append(("tuple", node, 0))
    elif isinstance(node, ast.Call) and all(k.arg is None for k in node.keywords):
        callee_at = len(values)  # where the callee's value will be
        todo = [("eval", node.func, 0)]
        lone_star = len(node.args) == 1 and isinstance(node.args[0], ast.Starred)
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                todo.append(("eval", arg.value, 0))
                if not lone_star:
                    todo.append(("star", arg, 0))
            else:
                todo.append(("eval", arg, 0))
        for keyword in node.keywords:
            todo += [("eval", keyword.value, 0), ("mapping", keyword, callee_at)]
        todo.append(("call", node, callee_at))
    else:
        shown = ast.unparse(node) if isinstance(node, ast.expr) else type(node).__name__
        raise InvalidArgumentError(f"'{shown}' is not allowed in an arithmetic expression.", _HINT)
    frames.extend(reversed(todo))
