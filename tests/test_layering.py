"""The dependency direction of DESIGN.md: rods_env <- environments <- rods_agent; and no
import cycle among the modules (files) of the three, imports inside functions included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
AGENT = "rods_agent"
PACKAGES = ("rods_env", "environments", "rods_agent")
FORBIDDEN = {
    "rods_env": {"environments", "rods_agent", "torch", "transformers", "vllm"},
    "environments": {"rods_agent", "torch", "transformers", "vllm"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_lower_layers_do_not_import_higher_ones(package):
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no Python files under {package}"
    bad = {
        str(f.relative_to(ROOT)): sorted(_imports(f) & FORBIDDEN[package])
        for f in files
        if _imports(f) & FORBIDDEN[package]
    }
    assert not bad, f"{package} imports a higher layer: {bad}"


def test_domains_do_not_import_each_other():
    domains = [d for d in (ROOT / "environments").iterdir() if (d / "__init__.py").exists()]
    for d in domains:
        others = {o.name for o in domains if o != d}
        for f in d.rglob("*.py"):
            tree = ast.parse(f.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.ImportFrom)
                    and node.module
                    and node.module.startswith("environments.")
                ):
                    assert node.module.split(".")[1] not in others, f"{f} imports another domain"


def test_the_check_itself_detects_a_violation(tmp_path):
    bad = tmp_path / "x.py"
    bad.write_text("from rods_agent.engines import base\nimport torch\n")
    assert _imports(bad) == {"rods_agent", "torch"}


# -- import cycles among rods_agent's modules ---------------------------------------------------
def _module_files(root: Path, packages: str | tuple[str, ...]) -> dict[str, Path]:
    files = {}
    names = (packages,) if isinstance(packages, str) else packages
    for path in (p for package in names for p in (root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: at module level, in functions and methods,
    under ``try`` or ``if``; only ``if TYPE_CHECKING:`` blocks are left out (mypy reads
    them, Python never runs them)."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
            continue
        children = list(ast.iter_child_nodes(node))
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            children = list(node.orelse)
        stack.extend(children)
    return found


def import_graph(root: Path, packages: str | tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports (relative imports resolved; ``from a
    import b`` names the module ``a.b`` when there is one, else ``a``)."""
    files = _module_files(root, packages)
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        base = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: set[str] = set()
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                origin = node.module or ""
                if node.level:
                    anchor = base
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    origin = f"{anchor}.{origin}" if origin else anchor
                # `from a import b`: the module a.b when there is one, else a name in a
                names = [
                    f"{origin}.{a.name}" if f"{origin}.{a.name}" in files else origin
                    for a in node.names
                ]
            for name in names:
                while name and name not in files:  # a name inside a module: the module
                    name = name.rpartition(".")[0]
                if name and name != module:
                    targets.add(name)
        graph[module] = targets
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycle_among_modules():
    """No circle among the files of rods_env, environments and rods_agent: each module
    imports only modules below it (a domain that needs its own entry point from a module
    it runs goes through the registry, as rods_agent does)."""
    graph = import_graph(ROOT, PACKAGES)
    for module in ("rods_agent.training.loop", "rods_env.episode", "environments.tau2.env"):
        assert module in graph  # the walk found every package
    assert not import_cycles(graph), f"import cycles: {import_cycles(graph)}"


def test_the_cycle_check_sees_function_level_and_relative_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("from .c import g\n")
    (pkg / "sub" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import d\n"
        "def g():\n    import pkg.a\n"
    )
    (pkg / "d.py").write_text("from pkg.sub.c import g\nfrom pkg import e\n")
    (pkg / "e.py").write_text("from pkg import VALUE\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.a"] == {"pkg.sub.b"}  # the module, not the package that holds it
    assert graph["pkg.sub.b"] == {"pkg.sub.c"}
    assert graph["pkg.sub.c"] == {"pkg.a"}  # not pkg.d: a TYPE_CHECKING import
    assert graph["pkg.d"] == {"pkg.sub.c", "pkg.e"}
    assert graph["pkg.e"] == {"pkg"}  # a name in the package: its __init__
    assert import_cycles(graph) == [["pkg.a", "pkg.sub.b", "pkg.sub.c"]]
