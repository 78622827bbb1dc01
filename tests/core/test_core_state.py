"""Only the episode core writes its own state: an adapter's hooks return values.

The core's state is every private attribute :class:`rods_env.episode.EpisodeEnv` assigns
(the conversation, the tools shown, the turn, the turn results, progress, success, the end,
the task pool...). An adapter (any subclass, in any of rods' packages or its tests) may read
it, but neither assigns it, mutates it (``append``, item assignment...), nor calls a core
method that writes it (``_finish``, ``_open_turn``...): what a turn or an episode gave, it
returns (:class:`~rods_env.episode.TurnScore`, :class:`~rods_env.episode.Outcome`,
:class:`~rods_env.episode.Reply`...), and the core applies it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "rods_env" / "episode.py"
CORE_CLASS = "EpisodeEnv"
SCANNED = ("rods_env", "environments", "rods_agent", "tests", "hubs")

MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "pop",
        "popitem",
        "remove",
        "clear",
        "update",
        "setdefault",
        "sort",
        "reverse",
        "add",
        "discard",
        "__setitem__",
        "__delitem__",
    }
)
"""Methods that change a list, dict or set in place."""


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


def _self_attr(node: ast.AST) -> str | None:
    """``X`` for ``self.X``, ``self.X[...]`` (any depth), else None."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.attr if node.value.id == "self" else None
    return None


def _targets(node: ast.AST) -> Iterator[ast.AST]:
    if isinstance(node, ast.Assign):
        for t in node.targets:
            yield from _unpack(t)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        yield node.target
    elif isinstance(node, ast.Delete):
        yield from node.targets
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        yield from _unpack(node.target)
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        yield from _unpack(node.optional_vars)
    elif isinstance(node, ast.NamedExpr):
        yield node.target


def _unpack(target: ast.AST) -> Iterator[ast.AST]:
    if isinstance(target, (ast.Tuple, ast.List)):
        for t in target.elts:
            yield from _unpack(t)
    elif isinstance(target, ast.Starred):
        yield from _unpack(target.value)
    else:
        yield target


def _written(body: ast.AST) -> set[str]:
    """The ``self`` attributes a function writes: assigns, deletes or mutates in place."""
    found: set[str] = set()
    for node in ast.walk(body):
        for target in _targets(node):
            name = _self_attr(target)
            if name is not None:
                found.add(name)
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in MUTATORS:
                name = _self_attr(func.value)
                if name is not None:
                    found.add(name)
            if isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and node.args:
                first = node.args[0]
                if isinstance(first, ast.Name) and first.id == "self":
                    key = node.args[1] if len(node.args) > 1 else None
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        found.add(key.value)
                    else:
                        found.add("<setattr>")
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "__dict__"
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            found.add("__dict__")
    return found


def _called(body: ast.AST) -> set[str]:
    """The methods a function calls on ``self`` or ``super()`` (``super().__init__`` aside)."""
    found: set[str] = set()
    for node in ast.walk(body):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if (isinstance(owner, ast.Name) and owner.id == "self") or (
                isinstance(owner, ast.Call)
                and isinstance(owner.func, ast.Name)
                and owner.func.id == "super"
                and node.func.attr != "__init__"
            ):
                found.add(node.func.attr)
    return found


def _methods(cls: ast.ClassDef) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def core_state(source: str) -> tuple[frozenset[str], frozenset[str]]:
    """The core's private state (attributes its methods write) and the core methods that
    write it, directly or through one another."""
    core = _class(ast.parse(source), CORE_CLASS)
    state = {a for m in _methods(core) for a in _written(m) if a.startswith("_")}
    writes = {m.name: bool(_written(m) & state) for m in _methods(core)}
    calls = {m.name: _called(m) for m in _methods(core)}
    changed = True
    while changed:  # a method that calls a writer writes too
        changed = False
        for name, called in calls.items():
            if not writes[name] and any(writes.get(c) for c in called):
                writes[name] = changed = True
    writers = {name for name, w in writes.items() if w and name != "__init__"}
    return frozenset(state), frozenset(writers)


def violations(
    source: str, adapter: str, state: frozenset[str], writers: frozenset[str]
) -> list[str]:
    """What class ``adapter`` in ``source`` writes of the core's state, and which core
    writers it calls (``method: what``)."""
    cls = _class(ast.parse(source), adapter)
    own = {m.name for m in _methods(cls)}
    found = []
    for method in _methods(cls):
        for attr in sorted(_written(method) & (state | {"__dict__", "<setattr>"})):
            found.append(f"{method.name}: writes self.{attr}")
        for name in sorted((_called(method) & writers) - own):
            found.append(f"{method.name}: calls the core's {name}()")
    return found


def _adapters() -> list[tuple[Path, str]]:
    """Every subclass of the core (directly or not) in rods' packages and tests."""
    classes: list[tuple[Path, str, list[str]]] = []
    for package in SCANNED:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    bases = [
                        b.id if isinstance(b, ast.Name) else b.attr
                        for b in node.bases
                        if isinstance(b, (ast.Name, ast.Attribute))
                    ]
                    classes.append((path, node.name, bases))
    known = {CORE_CLASS}
    found: list[tuple[Path, str]] = []
    changed = True
    while changed:
        changed = False
        for path, name, bases in classes:
            if (path, name) not in found and known & set(bases) and path != CORE:
                found.append((path, name))
                known.add(name)
                changed = True
    return sorted(found)


STATE, WRITERS = core_state(CORE.read_text(encoding="utf-8"))
ADAPTERS = _adapters()


def test_the_core_state_and_its_writers_are_found() -> None:
    assert {"_messages", "_results", "_progress", "_success", "_n_turns", "_schemas"} <= STATE
    assert {"_policy", "_turn", "_termination", "_over", "_pool", "_all_tasks", "_by_id"} <= STATE
    assert {"_finish", "_open_turn", "_end_turn", "_take", "_add", "reset", "step"} <= WRITERS
    assert not WRITERS & {"_hear", "_close_turn", "_score", "_open", "_begin_turn", "_call"}
    names = {name for _, name in ADAPTERS}
    assert {"ToolEnv", "BFCLEnv", "Tau2Env"} <= names


@pytest.mark.parametrize(
    ("path", "adapter"), ADAPTERS, ids=[f"{p.relative_to(ROOT)}:{n}" for p, n in ADAPTERS]
)
def test_adapters_never_write_the_core_state(path: Path, adapter: str) -> None:
    found = violations(path.read_text(encoding="utf-8"), adapter, STATE, WRITERS)
    assert not found, f"{adapter} ({path.relative_to(ROOT)}) writes the core's state: {found}"


@pytest.mark.parametrize(
    "line",
    [
        "self._messages.append(FrozenDict(role='user', content=text))",
        "self._results.append({'turn': 0})",
        "self._progress = 1.0",
        "self._success = True",
        "self._n_turns = 3",
        "self._schemas = tools",
        "self._results[0] = {}",
        "self._turn += 1",
        "del self._messages[-1]",
        "self._messages[:] = []",
        "self._policy, other = 'p', 1",
        "setattr(self, '_progress', 1.0)",
        "self.__dict__['_success'] = True",
        "self._finish('user_stop')",
        "self._end_turn()",
        "self._open_turn(1)",
        "super()._finish('max_steps')",
    ],
)
def test_the_check_catches_an_adapter_that_writes_the_core_state(line: str) -> None:
    source = f"class Leaky(EpisodeEnv):\n    def _hear(self, text):\n        {line}\n"
    assert violations(source, "Leaky", STATE, WRITERS), line


def test_the_check_lets_an_adapter_read_the_core_state_and_keep_its_own() -> None:
    source = (
        "class Tidy(EpisodeEnv):\n"
        "    def _hear(self, text):\n"
        "        self._turn_text.append(text)\n"
        "        self._heard = self._messages[-1]\n"
        "        return Reply(text, next_turn=self._turn + 1 < self._n_turns)\n"
    )
    assert violations(source, "Tidy", STATE, WRITERS) == []


@pytest.mark.parametrize("path", ["rods_env/env.py", "environments/bfcl/env.py"])
def test_a_real_adapter_changed_to_write_the_core_state_fails(path: str) -> None:
    source = (ROOT / path).read_text(encoding="utf-8")
    adapter = next(name for p, name in ADAPTERS if p == ROOT / path)
    assert violations(source, adapter, STATE, WRITERS) == []
    hook = "    def _score(self, reason: str) -> Outcome:\n"
    assert hook in source
    leaky = source.replace(hook, hook + "        self._progress = 0.0\n", 1)
    assert violations(leaky, adapter, STATE, WRITERS) == ["_score: writes self._progress"]
