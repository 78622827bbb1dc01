"""docs/adding-a-domain.md stays true: its skeleton, shipped as a separate package through
the entry point of its pyproject.toml, registers, writes seeds and passes the shared checks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "adding-a-domain.md").read_text(encoding="utf-8")


def _block(lang: str, needle: str) -> str:
    for body in re.findall(rf"```{lang}\n(.*?)```", DOC, re.DOTALL):
        if needle in body:
            return body
    raise AssertionError(f"docs/adding-a-domain.md has no {lang} block with {needle!r}")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The doc's package, installed the way pip installs it: the module and a dist-info
    folder whose entry_points.txt comes from the doc's pyproject.toml."""
    site = tmp_path_factory.mktemp("site")
    project = tomllib.loads(_block("toml", 'name = "rods-bookshop"'))["project"]
    (eps,) = project["entry-points"].values()
    package = site / "rods_bookshop"
    package.mkdir()
    (package / "__init__.py").write_text(_block("python", "DOMAIN = Domain("))
    info = site / f"rods_bookshop-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
    )
    group = next(iter(project["entry-points"]))
    lines = "".join(f"{name} = {target}\n" for name, target in eps.items())
    (info / "entry_points.txt").write_text(f"[{group}]\n{lines}")
    return site


def _run(site: Path, *cmd: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    return subprocess.run(
        [sys.executable, *cmd], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600
    )


EXPAND_GENERATIONS = """
import rods_env
from rods_env.synthesis import synthesize

domain = rods_env.load_domain("bookshop")
tasks = domain.seed_tasks("train")
for _ in range(5):
    tasks = [o.task for o in synthesize(tasks, per_seed=1, mode="expand") if o.accepted]
    print(len(tasks))
"""


@pytest.mark.slow
def test_the_skeleton_ships_as_a_package_and_passes_the_shared_checks(site):
    seeds = _run(site, "-m", "rods_env.seeds", "bookshop")
    assert seeds.returncode == 0, seeds.stderr
    assert (site / "rods_bookshop" / "seeds.jsonl").read_text().count("\n") == 200

    # declaring its tools and its customers is all it takes to be expanded (issue 19): each
    # generation expanded from the previous one's output, to generation 5
    generations = _run(site, "-c", EXPAND_GENERATIONS)
    assert generations.returncode == 0, generations.stderr
    counts = [int(n) for n in generations.stdout.split()]
    assert len(counts) == 5 and all(n > 0 for n in counts), counts

    demo = _run(site, "-m", "rods_agent.cli", "demo", "--env", "bookshop", "--split", "all")
    assert demo.returncode == 0, demo.stderr
    rows = {line.split()[2]: line.split() for line in demo.stdout.splitlines()[1:]}
    assert rows["oracle"][0] == "rods/Bookshop-v0" and rows["oracle"][4] == "1.000"
    assert rows["talk-only"][4] == "0.000" and rows["random"][4] == "0.000"

    # The shared checks, except the two that ask a shipped domain for more than a skeleton
    # has (at least 8 skills, more than 100 seed tasks that write).
    report = site / "shared.xml"
    shared = _run(
        site, "-m", "pytest", "tests/test_all_envs.py", "-k",
        "Bookshop and not seed_set_has_200 and not talk_only_fails_every",
        "-p", "no:cacheprovider", "--junitxml", str(report),
    )  # fmt: skip
    assert shared.returncode == 0, shared.stdout[-3000:]
    cases = list(ET.parse(report).getroot().iter("testcase"))
    assert len(cases) >= 10, shared.stdout[-2000:]
    for case in cases:
        assert "Bookshop" in str(case.get("name")), case.get("name")
        assert not [c.tag for c in case if c.tag in ("failure", "error", "skipped")], case.get(
            "name"
        )
