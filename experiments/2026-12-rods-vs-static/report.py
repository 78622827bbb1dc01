"""Writes the experiment's ``summary.md`` from the registered analysis (``analyze.py``).

The issue asks for a summary that names the registration's commit and reports the primary
comparison first; the registration (section 5) fixes how the primary interval is read, and
section 8 with amendments 1 and 3 how a stopped experiment is reported: not completed, the
blocks done, the primary on them labelled "not as registered". This script writes exactly
that, from the numbers ``analyze.analyze`` returns, so the form of the report is fixed before
anyone reads a result. It computes nothing of its own beyond grouping the checks.

    .venv/bin/python experiments/2026-12-rods-vs-static/report.py [OUT] [--stopped WHY] [--to FILE]
    .venv/bin/python experiments/2026-12-rods-vs-static/report.py --selftest

Without ``--stopped`` and with blocks missing, the summary is labelled interim (exploratory,
as section 8 allows reading the runner's summary).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
FILES = ("registration.md", "amendment-1.md", "amendment-2.md", "amendment-3.md", "amendment-4.md")
"""The registration's files, the registration first (their commits are named)."""
INTERIM = "Section 8 allows reading it; nothing in the design depends on it."
"""What an interim summary says of reading it (a successor that forbids reading says so)."""
SESSIONS = "the sessions amendment 3 counts; `partial/`: a lost block's copies."
"""What ``sessions.md`` and ``partial/`` hold, for the summary's list of files."""


def _analysis() -> ModuleType:
    spec = importlib.util.spec_from_file_location("analyze_rods_vs_static", HERE / "analyze.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"{HERE / 'analyze.py'}: cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


analysis_module = _analysis
"""Where :func:`write` gets the registered analysis (a successor's report sets its own)."""


def commits(folder: Path = HERE) -> dict[str, str]:
    """The commit that added each of the registration's files (``hash date``), from git."""
    found: dict[str, str] = {}
    for name in FILES:
        done = subprocess.run(
            ["git", "log", "--diff-filter=A", "--format=%h %ad", "--date=short", "--", name],
            cwd=folder,
            capture_output=True,
            text=True,
        )
        lines = done.stdout.strip().splitlines()
        if done.returncode or not lines:
            raise SystemExit(
                f"{folder / name}: no commit added it (git log: {done.stderr.strip()})"
            )
        found[name] = lines[-1]
    return found


def ranges(numbers: Sequence[int]) -> str:
    """``[2, 3, 4, 7]`` as ``2-4, 7``."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def reading(primary: Mapping[str, Any], as_registered: bool) -> str:
    """Section 5's reading of the primary interval, qualified when not as registered."""
    low, high = primary["low"], primary["high"]
    if low > 0:
        rule = "lies above 0: rods beat static at this scale"
    elif high < 0:
        rule = "lies below 0: static beat rods at this scale"
    else:
        rule = (
            f"contains 0: the result is the interval itself, rods - static within "
            f'[{low:+.3f}, {high:+.3f}] (not "no difference")'
        )
    if as_registered:
        return f"The interval {rule}."
    return (
        f"Section 5's rule would read: the interval {rule}. The experiment did not run as "
        "registered, so this is not its answer."
    )


def _iv(d: Mapping[str, Any]) -> str:
    return f"{d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"


def grouped_problems(problems: Sequence[str], untouched: set[int]) -> list[str]:
    """The checks' lines, with the blocks that have no file at all folded into one line."""
    pattern = re.compile(r"block (\d+) incomplete")
    lines, idle = [], []
    for line in problems:
        m = pattern.match(line)
        if m and int(m.group(1)) in untouched:
            idle.append(int(m.group(1)))
        else:
            lines.append(line)
    if idle:
        lines.insert(
            0, f"blocks not run (no run or final evaluation of theirs exists): {ranges(idle)}"
        )
    return lines


def untouched_blocks(analysis: ModuleType, root: Path) -> set[int]:
    """Registered seeds of which no run's metrics and no final evaluation exist."""
    exp = analysis.Experiment(root)
    idle = set()
    for seed in analysis.SEEDS:
        runs = any(exp.metrics(arm, seed) for arm in analysis.ARMS)
        evals = any(exp.evaluation(m, seed).progress for m in ("warm", *analysis.ARMS))
        if not runs and not evals:
            idle.add(seed)
    return idle


def build(
    data: Mapping[str, Any],
    *,
    registered: Mapping[str, str],
    untouched: set[int],
    stopped: str | None,
    n_blocks: int,
    draws: int,
    analysis_text: str,
) -> str:
    """The text of ``summary.md`` (``analysis_text``: what ``analyze.py`` prints for ``data``)."""
    p = data["primary"]
    c = p["components"]
    blocks = list(data["blocks"])
    if data["as_registered"]:
        status = f"**Completed as registered**: all {n_blocks} blocks." + (
            f" The checks below found {len(data['problems'])} problem(s)."
            if data["problems"]
            else ""
        )
    elif stopped:
        status = (
            f"**Stopped, not completed** ({stopped}). {len(blocks)} of {n_blocks} blocks are "
            f"whole (run seeds {ranges(blocks)}); every figure below is computed on them and is "
            "**not as registered**."
        )
    else:
        status = (
            f"**Interim, exploratory**: {len(blocks)} of {n_blocks} blocks whole (run seeds "
            f"{ranges(blocks)}). {INTERIM}"
        )
    reg = registered["registration.md"].split()[0]
    amend = ", ".join(
        f"{name.removesuffix('.md').removeprefix('amendment-')} {registered[name].split()[0]}"
        for name in FILES[1:]
        if name in registered
    )
    amended = f"; amendments {amend} (each says what had been seen before it)" if amend else ""
    lines = [
        "# Summary: RODS against fixed-data RL on SmolLM2-135M (issue 43)",
        "",
        f"Registered in commit **{reg}** ({registered['registration.md'].split()[1]}; "
        f"[registration.md](registration.md)){amended}.",
        f"Written by `report.py` from `analyze.py`'s numbers. {status}",
        "",
        "## Primary: held-out progress at step 12, rods - static",
        "",
        f"**{_iv(p)}** (95% interval; {p['seeds']} run seeds x {p['tasks']} customers, paired by "
        f"run seed and customer; clustered two-way bootstrap, {draws} draws, seed 0).",
        "",
        reading(p, bool(data["as_registered"])),
        "",
        f"Variance components (run seed / customer / rest): {c['seed']:.4f} / {c['family']:.4f} / "
        f"{c['residual']:.4f}; the normal half-width they imply is {c['half_width']:.3f} "
        f"(the interval's is {(p['high'] - p['low']) / 2:.3f}).",
        "",
        "## Secondary (registration section 6; not used to answer the question)",
        "",
        "| comparison | mean [95% interval] |",
        "|---|---|",
        *(f"| {k} | {_iv(v)} |" for k, v in data["secondary"].items()),
        "",
        "| model | held-out progress [95% interval] | share of episodes at the step limit |",
        "|---|---|---|",
        *(
            f"| {m} | {_iv(v['progress'])} | {v['step_limit_share']['mean']:.3f} |"
            for m, v in data["models"].items()
        ),
    ]
    problems = grouped_problems(data["problems"], untouched)
    lines += ["", "## Checks", ""]
    lines += [f"- {x}" for x in problems] if problems else ["- none failed"]
    lines += [
        "",
        "## The registered analysis's own output",
        "",
        "`analyze.py out`, verbatim: the looping decomposition (how much of each difference is",
        "episodes no longer ending at the step limit) and the optimizer steps per run are here.",
        "",
        "```text",
        analysis_text,
        "```",
        "",
        "## Files",
        "",
        "- `out/`: every committed block (runs' `metrics.jsonl`, final `results.jsonl`, "
        "per-episode records gzipped); `analyze.py out` prints every number above.",
        f"- `sessions.md`: {SESSIONS}",
        "",
    ]
    return "\n".join(lines)


def write(root: Path, to: Path, stopped: str | None, registered: Mapping[str, str]) -> str:
    """Analyse ``root`` and write the summary to ``to``; returns its text."""
    analysis = analysis_module()
    data = analysis.analyze(root)
    text = build(
        data,
        registered=registered,
        untouched=untouched_blocks(analysis, root),
        stopped=stopped,
        n_blocks=len(analysis.SEEDS),
        draws=analysis.DRAWS,
        analysis_text=analysis.report(data),
    )
    to.write_text(text, encoding="utf-8")
    return text


def selftest() -> int:
    """Write summaries of synthetic folders and check their form and reading."""
    analysis = analysis_module()
    fake = {name: f"{i:07x} 2026-12-06" for i, name in enumerate(FILES, start=0xABC0000)}
    with tempfile.TemporaryDirectory() as tmp:
        root, to = Path(tmp) / "out", Path(tmp) / "summary.md"
        analysis.make_synthetic(root, seeds=(0, 1), effect=0.1)
        text = write(root, to, "six consecutive sessions without a block, amendment 3", fake)
        assert to.read_text(encoding="utf-8") == text
        heads = [x for x in text.splitlines() if x.startswith("## ")]
        assert heads[0].startswith("## Primary"), heads
        assert "commit **abc0000**" in text and "3 abc0003, 4 abc0004" in text, text[:400]
        assert "Stopped, not completed" in text and "2 of 20 blocks" in text, text[:600]
        assert "not as registered" in text and "this is not its answer" in text
        assert "blocks not run (no run or final evaluation of theirs exists): 2-19" in text
        assert "+0.100 [+0.100, +0.100]" in text and "lies above 0" in text
        assert "```text\nPRIMARY" in text and "static - warm: +0.200 = loops ended" in text
        complete = Path(tmp) / "all"
        analysis.make_synthetic(complete, effect=0.0)
        text = write(complete, to, None, fake)
        assert "Completed as registered" in text and "not as registered" not in text, text[:600]
        assert "The interval contains 0" in text and "- none failed" not in text  # hash check
        assert "The checks below found 1 problem(s)." in text, text[:600]
        assert ranges([2, 3, 4, 7, 9, 10]) == "2-4, 7, 9-10"
    print("report.py selftest: ok")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: see the module's docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=HERE / "out")
    parser.add_argument("--to", type=Path, default=HERE / "summary.md", help="where to write")
    parser.add_argument("--stopped", help="why the experiment stopped (amendment 1 and 3)")
    parser.add_argument("--selftest", action="store_true", help="run on synthetic data and check")
    args = parser.parse_args(argv)
    if args.selftest:
        return selftest()
    print(write(args.out, args.to, args.stopped, commits(HERE)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
