"""The README stays true: its Python example runs, and CI runs its test command."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_python_example_runs():
    block = re.search(r"```python\n(.*?)```", README, re.DOTALL)
    assert block, "README has no python example"
    namespace: dict = {}
    exec(compile(block.group(1), "README.md", "exec"), namespace)  # our own file, not agent text
    assert namespace["obs"].startswith("Error")  # the example's email "..." is not a user
    assert namespace["info"]["progress"] == 0.0


def test_ci_runs_the_readme_test_command():
    commands = re.search(r"```bash\n(.*?)```", README, re.DOTALL).group(1)
    lines = [ln for ln in commands.splitlines() if ln.strip() and not ln.startswith("#")]
    assert len(lines) == 2, "the README starts with two commands: install+run, install+test"
    assert lines[1] in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
