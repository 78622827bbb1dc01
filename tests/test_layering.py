"""The dependency direction of DESIGN.md: rods_env <- environments <- rods_agent."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
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
