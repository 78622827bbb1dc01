"""BFCL's own multi-turn checker, run on trajectories the tests built (never on agent output).

BFCL's checker executes call strings with ``eval``. It runs here only on calls produced by
the tests' scripted agents and perturbations, and :func:`safe_call_strings` refuses
anything else before BFCL sees it: every call must be a plain call with literal arguments
whose callee is an API function or a name that is not defined where BFCL evaluates it
(an undefined name raises before anything runs), or a string Python cannot parse (it
raises before anything runs too).

Each run is isolated (:func:`isolated`): the instances BFCL leaves in its module globals
are removed, the mpmath/decimal precision it may change is restored, and so are what its
runs change for every later run in a process: ``post_tweet``'s default lists and the
long-context data that TravelAPI's instances share. So every run here is BFCL's verdict on
that trajectory alone, in a fresh process (BFCL's own ``bfcl evaluate`` carries those
changes from task to task).

The task verdict is that of BFCL's ``_evaluate_single_multi_turn_entry`` (eval_runner): a
response shorter than the ground truth (a conversation cut before its last turn) fails as
``multi_turn:force_terminated``; otherwise ``multi_turn_checker`` decides on the decoded
calls (steps without calls are dropped, as BFCL's decoder drops them). The turn verdicts
(:func:`official_turns`) are the same checker's loop without its early return: BFCL's own
executor, ``state_checker`` and ``response_checker`` on every turn.
"""

from __future__ import annotations

import ast
import builtins
import copy
import decimal
import importlib.util
import inspect
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from environments.bfcl.apis import call_text, functions
from environments.bfcl.reading import CHECKER_MODEL
from environments.bfcl.tasks import BFCLTask

MODEL = CHECKER_MODEL
"""The model name BFCL's checker gets here: rods' reading names the instances after it
(the rewritten argument text holds it)."""


def decoded_turns(turn_results: Sequence[Mapping[str, Any]]) -> list[list[list[str]]]:
    """BFCL's decoded model result from an episode's ``turn_results``: per reached turn, per
    step with calls, the call strings (BFCL's ``convert_to_function_call`` format)."""
    return [
        [[call_text(c["name"], c["arguments"]) for c in step] for step in turn["calls"] if step]
        for turn in turn_results
        if turn.get("reached", True)
    ]


@cache
def _undefined_ok() -> frozenset[str]:
    """Names that are defined where BFCL evaluates a call (builtins and its module's
    globals): a callee may not start with one of them."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    return frozenset(dir(builtins)) | frozenset(vars(multi_turn_utils))


def safe_call_strings(decoded: Sequence[Sequence[Sequence[str]]]) -> None:
    """Refuse (AssertionError) any call string BFCL's ``eval`` could run code from: only
    plain calls with literal arguments, of an API function or of an undefined name, or
    strings that do not parse, may reach it."""
    names = functions()
    defined = _undefined_ok()
    for turn in decoded:
        for step in turn:
            for text in step:
                try:
                    tree = compile(text.lstrip(" \t"), "<string>", "eval", ast.PyCF_ONLY_AST)
                except (SyntaxError, ValueError):
                    continue  # eval raises before it runs anything
                node = tree.body  # type: ignore[attr-defined]
                assert isinstance(node, ast.Call), text
                callee = node.func
                while isinstance(callee, ast.Attribute):
                    callee = callee.value
                assert isinstance(callee, ast.Name), text
                head = text.lstrip().split("(")[0].strip()
                if head not in names:  # BFCL rewrites an API name; anything else is looked up
                    assert callee.id not in defined, f"a defined name: {text[:80]}"
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    _literal_or_undefined(arg, defined)
                assert all(k.arg is not None for k in node.keywords), text


_DATA_NODES = (
    ast.Constant,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.UnaryOp,
    ast.USub,
    ast.UAdd,
    ast.Load,
)


def _literal_or_undefined(node: ast.expr, defined: frozenset[str]) -> None:
    """A literal, or literal data holding names that are not defined where BFCL evaluates
    (``nan``, ``inf``: the lookup fails before anything is called); else AssertionError."""
    try:
        ast.literal_eval(node)
    except ValueError:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                assert sub.id not in defined, f"a defined name in an argument: {sub.id}"
            else:
                assert isinstance(sub, _DATA_NODES), f"not data: {ast.dump(sub)[:80]}"


_LONG_CONTEXT = "eval_checker/multi_turn_eval/func_source_code/long_context.py"


def _package_root() -> Path:
    spec = importlib.util.find_spec("bfcl_eval")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations)))


@cache
def _pristine_long_context() -> dict[str, Any]:
    """The containers of BFCL's ``long_context`` module as its source writes them."""
    tree = ast.parse((_package_root() / _LONG_CONTEXT).read_text(encoding="utf-8"))
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                value = ast.literal_eval(node.value)
                if isinstance(value, dict | list):
                    out[target.id] = value
    return out


def restore_bfcl_module_state(*, renew: bool = False) -> None:
    """Put back what BFCL's executor changes for every later run in a process: the
    long-context containers (in place: BFCL's modules imported them by name) and
    ``post_tweet``'s default lists (fresh ones).

    Args:
        renew: Replace the long-context containers' contents with fresh copies even when
            unchanged (instances loaded before then no longer share them with later ones).
    """
    from bfcl_eval.eval_checker.multi_turn_eval.func_source_code import long_context
    from bfcl_eval.eval_checker.multi_turn_eval.func_source_code.posting_api import TwitterAPI

    for name, pristine in _pristine_long_context().items():
        live = getattr(long_context, name)
        if renew or live != pristine:
            if isinstance(live, dict):
                live.clear()
                live.update(copy.deepcopy(pristine))
            else:
                live[:] = copy.deepcopy(pristine)
    post = TwitterAPI.post_tweet
    defaults = tuple(p.default for p in inspect.signature(post).parameters.values())[2:]
    if defaults != ([], []):
        post.__defaults__ = ([], [])


@contextmanager
def isolated(model_name: str = MODEL) -> Iterator[None]:
    """Run BFCL's checker and leave nothing behind: its instances (module globals keyed by
    model name and test id) are deleted, the process precision is restored, and so are the
    module state its runs change (:func:`restore_bfcl_module_state`)."""
    import mpmath
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    prec, digits = mpmath.mp.prec, decimal.getcontext().prec
    prefix = re.sub(r"[-./:]", "_", model_name)
    restore_bfcl_module_state()
    try:
        yield
    finally:
        mpmath.mp.prec = prec
        decimal.getcontext().prec = digits
        space = vars(multi_turn_utils)
        for key in [k for k in space if k.startswith(prefix) and k.endswith("_instance")]:
            del space[key]
        restore_bfcl_module_state()


def official_turns(
    task: BFCLTask, decoded: Sequence[Sequence[Sequence[str]]], model_name: str = MODEL
) -> list[bool | None]:
    """BFCL's verdict on each turn of decoded calls: its checker's loop without the early
    return (BFCL's executor for the model's steps and then the gold's calls, its empty-turn
    rule, ``state_checker``, ``response_checker``); None for a turn BFCL does not check.
    The task verdict is that every turn passed (:func:`official_verdict` checks it against
    ``multi_turn_checker`` itself).

    Args:
        task: The task.
        decoded: Per turn (all of them), per step, call strings.
        model_name: Names BFCL's instances (and the rewritten argument text).
    """
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import (
        response_checker,
        state_checker,
    )
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import (
        execute_multi_turn_func_call,
        is_empty_execute_response,
    )

    assert len(decoded) == len(task.ground_truth)
    safe_call_strings(decoded)
    entry = task.entry()
    long_context = task.category == "long_context"
    shared = {
        "initial_config": entry["initial_config"],
        "involved_classes": entry["involved_classes"],
        "test_entry_id": task.id,
        "long_context": long_context,
        "is_evaL_run": True,
    }
    verdicts: list[bool | None] = []
    results_so_far: list[str] = []
    with isolated(model_name):
        for steps, gold in zip(decoded, task.ground_truth, strict=True):
            model_instances: dict[str, Any] = {}
            for step in steps:
                results, model_instances = execute_multi_turn_func_call(
                    func_call_list=list(step), model_name=model_name, **shared
                )
                results_so_far.extend(results)
            gold_results, gold_instances = execute_multi_turn_func_call(
                func_call_list=list(gold), model_name=model_name + "_ground_truth", **shared
            )
            if not gold:
                verdicts.append(None)
                continue
            if not steps or is_empty_execute_response(steps):
                verdicts.append(False)
                continue
            ok = state_checker(model_instances, gold_instances)["valid"]
            ok = ok and response_checker(results_so_far, gold_results, 0)["valid"]
            verdicts.append(bool(ok))
    return verdicts


def strict_turns(
    task: BFCLTask, decoded: Sequence[Sequence[Sequence[str]]], model_name: str = MODEL
) -> list[bool | None]:
    """The turn verdicts of BFCL's executor and checks without sharing (the correct ones):
    as :func:`official_turns`, but the model's and the gold's instances are loaded apart
    (the long-context data renewed in between, so each holds its own copy) and every call
    runs alone with fresh default lists. BFCL's rewrite of argument text stays: compare
    only calls it leaves alone.
    """
    from bfcl_eval.eval_checker.multi_turn_eval.func_source_code.posting_api import TwitterAPI
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import (
        response_checker,
        state_checker,
    )
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import (
        execute_multi_turn_func_call,
    )

    assert len(decoded) == len(task.ground_truth)
    safe_call_strings(decoded)
    entry = task.entry()
    shared = {
        "initial_config": entry["initial_config"],
        "involved_classes": entry["involved_classes"],
        "test_entry_id": task.id,
        "long_context": task.category == "long_context",
        "is_evaL_run": True,
    }
    gold_name = model_name + "_ground_truth"

    def run(calls: Sequence[str], name: str) -> tuple[list[str], dict[str, Any]]:
        results: list[str] = []
        instances: dict[str, Any] = {}
        for call in calls:
            TwitterAPI.post_tweet.__defaults__ = ([], [])
            out, instances = execute_multi_turn_func_call(
                func_call_list=[call], model_name=name, **shared
            )
            results += out
        return results, instances

    verdicts: list[bool | None] = []
    results_so_far: list[str] = []
    with isolated(model_name):
        _, model_instances = execute_multi_turn_func_call(
            func_call_list=[], model_name=model_name, **shared
        )
        restore_bfcl_module_state(renew=True)
        _, gold_instances = execute_multi_turn_func_call(
            func_call_list=[], model_name=gold_name, **shared
        )
        restore_bfcl_module_state(renew=True)
        for steps, gold in zip(decoded, task.ground_truth, strict=True):
            for step in steps:
                results_so_far += run(step, model_name)[0]
            gold_results = run(gold, gold_name)[0]
            if not gold:
                verdicts.append(None)
                continue
            if not steps:
                verdicts.append(False)
                continue
            ok = state_checker(model_instances, gold_instances)["valid"]
            ok = ok and response_checker(results_so_far, gold_results, 0)["valid"]
            verdicts.append(bool(ok))
    return verdicts


def official_verdict(
    task: BFCLTask, turn_results: Sequence[Mapping[str, Any]], model_name: str = MODEL
) -> dict[str, Any]:
    """BFCL's verdict on an episode's calls (see the module doc).

    Args:
        task: The task.
        turn_results: The episode's ``info["turn_results"]``.
        model_name: Names BFCL's instances (reused within a run, removed after it).

    Returns:
        BFCL's result dict (``valid``, and ``error_type`` when not valid).
    """
    decoded = decoded_turns(turn_results)
    return checker_verdict(task, decoded, model_name)


def checker_verdict(
    task: BFCLTask, decoded: Sequence[Sequence[Sequence[str]]], model_name: str = MODEL
) -> dict[str, Any]:
    """BFCL's ``multi_turn_checker`` on decoded calls (per reached turn, per step, call
    strings), after BFCL's force-termination rule."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    ground_truth = [list(turn) for turn in task.ground_truth]
    if len(decoded) != len(ground_truth):
        return {"valid": False, "error_type": "multi_turn:force_terminated"}
    safe_call_strings(decoded)
    with isolated(model_name):
        return multi_turn_checker(  # type: ignore[no-any-return]
            [[list(s) for s in t] for t in decoded], ground_truth, task.entry(), task.category,
            model_name,
        )  # fmt: skip


def bfcl_source(module: str, names: set[str], namespace: dict[str, Any]) -> dict[str, Any]:
    """BFCL's own functions ``names``, compiled from the installed source of ``module`` (a
    path under ``bfcl_eval/``) into ``namespace`` and returned by name. Used where BFCL's
    module imports packages that ``--no-deps`` leaves out (its decoders, its schema
    conversion)."""
    tree = ast.parse((_package_root() / module).read_text(encoding="utf-8"))
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    assert {n.name for n in body} == names, f"{module} lacks {names - {n.name for n in body}}"
    exec(compile(ast.Module(body=body, type_ignores=[]), module, "exec"), namespace)
    return {name: namespace[name] for name in names}


def decode_like_bfcl_fc(result: Sequence[Sequence[Any]]) -> list[list[list[str]]]:
    """A result file's ``result`` decoded as BFCL's function-calling handlers decode it
    (``convert_to_function_call`` on each step; a step that fails to decode, or decodes to
    nothing, is dropped, as ``_evaluate_single_multi_turn_entry`` drops it)."""
    convert = bfcl_convert()
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


@cache
def bfcl_convert() -> Any:
    """BFCL's ``convert_to_function_call`` (its function-calling decoder), from its source."""
    import json

    return bfcl_source("model_handler/utils.py", {"convert_to_function_call"}, {"json": json})[
        "convert_to_function_call"
    ]
