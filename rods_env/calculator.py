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
from collections.abc import Callable
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
MAX_RESULT_DIGITS = 100_000
"""Most decimal digits an integer power may produce in :func:`evaluate_python_arithmetic`
(Python computes ``9 ** 9 ** 9`` for minutes and gigabytes; this stops it first)."""

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


def _guarded_power(base: object, exponent: object) -> object:
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and exponent > 0
        and abs(base) > 1
        and exponent * math.log10(abs(base)) > MAX_RESULT_DIGITS
    ):
        shown = (
            repr(base) if abs(base) < 10**20 else f"a {int(math.log10(abs(base))) + 1}-digit number"
        )
        raise InvalidArgumentError(
            f"{shown} ** {exponent!r} has more than {MAX_RESULT_DIGITS:,} digits.", _HINT
        )
    return operator.pow(base, exponent)


def evaluate_python_arithmetic(expression: str) -> object:
    """Evaluate arithmetic on literal numbers exactly as Python's ``eval`` would, without it.

    For a benchmark whose own tool ``eval``\\ s an expression restricted to digits, ``+ - * /``,
    parentheses, dots and spaces (τ²-bench's ``calculate``), this gives the same value and,
    where ``eval`` raises, an exception of the same type with the same message: the source
    is parsed as ``eval`` parses it (leading spaces and tabs stripped, file ``<string>``),
    and the operators are Python's own, applied in Python's order. Only what ``eval`` would
    spend minutes or gigabytes on is refused (an integer power of more than
    :data:`MAX_RESULT_DIGITS` digits), and nothing but literals and operators is ever
    evaluated (a call raises the ``TypeError`` Python raises for calling a number).

    Args:
        expression: The expression text.

    Returns:
        What ``eval(expression)`` returns (an int, a float, ``Ellipsis`` or a tuple).

    Raises:
        SyntaxError, TypeError, ZeroDivisionError, OverflowError, ValueError, RecursionError:
            as ``eval`` raises them.
        InvalidArgumentError: for a node outside literal arithmetic, or a power too large.
    """
    with warnings.catch_warnings():  # "perhaps you missed a comma?": eval's, not ours
        warnings.simplefilter("ignore", SyntaxWarning)
        tree = ast.parse(expression.lstrip(" \t"), filename="<string>", mode="eval")
    # iterative post-order walk: a long chain of operators must not hit Python's recursion
    # limit before eval's own compiler would
    values: list[object] = []
    stack: list[tuple[ast.AST, bool]] = [(tree.body, False)]
    while stack:
        node, expanded = stack.pop()
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (bool, str, bytes)):
                raise InvalidArgumentError(f"{node.value!r} is not a number.", _HINT)
            values.append(node.value)
        elif not expanded:
            stack.append((node, True))
            if isinstance(node, ast.BinOp) and type(node.op) in _PY_BINARY:
                stack += [(node.right, False), (node.left, False)]
            elif isinstance(node, ast.UnaryOp) and type(node.op) in _PY_UNARY:
                stack.append((node.operand, False))
            elif isinstance(node, ast.Tuple) and not any(
                isinstance(e, ast.Starred) for e in node.elts
            ):
                stack += [(e, False) for e in reversed(node.elts)]
            elif isinstance(node, ast.Call) and not node.keywords:
                args = [a.value if isinstance(a, ast.Starred) else a for a in node.args]
                stack += [(a, False) for a in reversed(args)]
                stack.append((node.func, False))
            else:
                shown = ast.unparse(node) if isinstance(node, ast.expr) else type(node).__name__
                raise InvalidArgumentError(
                    f"'{shown}' is not allowed in an arithmetic expression.", _HINT
                )
        elif isinstance(node, ast.BinOp):
            right, left = values.pop(), values.pop()
            op = _guarded_power if isinstance(node.op, ast.Pow) else _PY_BINARY[type(node.op)]
            values.append(op(left, right))
        elif isinstance(node, ast.UnaryOp):
            values.append(_PY_UNARY[type(node.op)](values.pop()))
        elif isinstance(node, ast.Tuple):
            n = len(node.elts)
            items = tuple(values[len(values) - n :]) if n else ()
            del values[len(values) - n :]
            values.append(items)
        else:  # a call: the callee and its arguments are evaluated, then calling fails
            assert isinstance(node, ast.Call)
            first = len(values) - len(node.args)
            callee, arg_values = values[first - 1], values[first:]
            for arg, value in zip(node.args, arg_values, strict=True):
                if isinstance(arg, ast.Starred) and not isinstance(value, tuple):
                    raise TypeError(
                        f"{callee} argument after * must be an iterable, not {type(value).__name__}"
                    )
            raise TypeError(f"'{type(callee).__name__}' object is not callable")
    return values[0]
