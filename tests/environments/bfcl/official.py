"""BFCL's own multi-turn checker, run on trajectories the tests built (never on agent output).

BFCL's checker executes call strings with ``eval``. It runs here only on calls produced by
the scripted agents of :mod:`environments.bfcl.agents` (gold, perturbations of it, trivial
agents), and :func:`safe_call_strings` refuses anything else before BFCL sees it: every
call must parse as a plain call of one of the 128 API functions with literal arguments.
Each run is isolated: the instances BFCL leaves in its module globals are removed and the
mpmath/decimal precision it may change is restored, so runs do not leak into each other
(BFCL's own runs do: see the safety tests).

The verdict is that of BFCL's ``_evaluate_single_multi_turn_entry`` (eval_runner): a
response shorter than the ground truth (a conversation cut before its last turn) fails as
``multi_turn:force_terminated``; otherwise ``multi_turn_checker`` decides on the decoded
calls (steps without calls are dropped, as BFCL's decoder drops them).
"""

from __future__ import annotations

import ast
import decimal
import importlib.util
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from environments.bfcl.apis import call_text, functions
from environments.bfcl.tasks import BFCLTask


def decoded_turns(turn_results: Sequence[Mapping[str, Any]]) -> list[list[list[str]]]:
    """BFCL's decoded model result from an episode's ``turn_results``: per reached turn, per
    step with calls, the call strings (BFCL's ``convert_to_function_call`` format)."""
    return [
        [[call_text(c["name"], c["arguments"]) for c in step] for step in turn["calls"] if step]
        for turn in turn_results
        if turn.get("reached", True)
    ]


def safe_call_strings(decoded: Sequence[Sequence[Sequence[str]]]) -> None:
    """Refuse (AssertionError) any call string that is not a plain call of an API function
    with literal arguments: only such strings may reach BFCL's ``eval``."""
    names = functions()
    for turn in decoded:
        for step in turn:
            for text in step:
                node = ast.parse(text, mode="eval").body
                assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name), text
                assert node.func.id in names, f"not an API function: {text[:80]}"
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    ast.literal_eval(arg)  # raises on anything but a literal
                assert all(k.arg is not None for k in node.keywords), text


@contextmanager
def isolated(model_name: str) -> Iterator[None]:
    """Run BFCL's checker and leave nothing behind: its instances (module globals keyed by
    model name and test id) are deleted and the process precision is restored."""
    import mpmath
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    prec, digits = mpmath.mp.prec, decimal.getcontext().prec
    prefix = re.sub(r"[-./:]", "_", model_name)
    try:
        yield
    finally:
        mpmath.mp.prec = prec
        decimal.getcontext().prec = digits
        space = vars(multi_turn_utils)
        for key in [k for k in space if k.startswith(prefix) and k.endswith("_instance")]:
            del space[key]


def official_verdict(
    task: BFCLTask, turn_results: Sequence[Mapping[str, Any]], model_name: str
) -> dict[str, Any]:
    """BFCL's verdict on an episode's calls (see the module doc).

    Args:
        task: The task.
        turn_results: The episode's ``info["turn_results"]``.
        model_name: Names BFCL's instances; unique per call (BFCL reuses instances of the
            same model name and test id).

    Returns:
        BFCL's result dict (``valid``, and ``error_type`` when not valid).
    """
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    ground_truth = [list(turn) for turn in task.ground_truth]
    decoded = decoded_turns(turn_results)
    if len(decoded) != len(ground_truth):
        return {"valid": False, "error_type": "multi_turn:force_terminated"}
    safe_call_strings(decoded)
    with isolated(model_name):
        return multi_turn_checker(decoded, ground_truth, task.entry(), task.category, model_name)  # type: ignore[no-any-return]


def bfcl_source(module: str, names: set[str], namespace: dict[str, Any]) -> dict[str, Any]:
    """BFCL's own functions ``names``, compiled from the installed source of ``module`` (a
    path under ``bfcl_eval/``) into ``namespace`` and returned by name. Used where BFCL's
    module imports packages that ``--no-deps`` leaves out (its decoders, its schema
    conversion)."""
    spec = importlib.util.find_spec("bfcl_eval")
    assert spec is not None and spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations)))
    tree = ast.parse((root / module).read_text(encoding="utf-8"))
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    assert {n.name for n in body} == names, f"{module} lacks {names - {n.name for n in body}}"
    exec(compile(ast.Module(body=body, type_ignores=[]), module, "exec"), namespace)
    return {name: namespace[name] for name in names}


def decode_like_bfcl_fc(result: Sequence[Sequence[Any]]) -> list[list[list[str]]]:
    """A result file's ``result`` decoded as BFCL's function-calling handlers decode it
    (``convert_to_function_call`` on each step; a step that fails to decode, or decodes to
    nothing, is dropped, as ``_evaluate_single_multi_turn_entry`` drops it)."""
    import json

    convert = bfcl_source("model_handler/utils.py", {"convert_to_function_call"}, {"json": json})[
        "convert_to_function_call"
    ]
    decoded = []
    for turn in result:
        steps = []
        for step in turn:
            try:
                calls = convert(step)
            except Exception:
                continue
            if calls:
                steps.append(calls)
        decoded.append(steps)
    return decoded
