"""Writes this experiment's ``summary.md`` from the registered analysis (``analyze.py``).

It is ``../2026-12-rods-vs-static/report.py``, set to this experiment: its registration's
commit, its 10 blocks and its analysis. The form is that script's: the registration's commit
first, then the primary comparison and its reading by the registered rule, labelled "not as
registered" when the experiment stopped; the secondary endpoints; the checks; the analysis's
own output verbatim.

    .venv/bin/python experiments/2026-12-rods-vs-static-f32/report.py [OUT] [--stopped WHY] [--to FILE]
    .venv/bin/python experiments/2026-12-rods-vs-static-f32/report.py --selftest
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def report_module() -> ModuleType:
    """The first experiment's report writer, set to this experiment."""
    module = _load(
        "report_rods_vs_static_f32", HERE.parent / "2026-12-rods-vs-static" / "report.py"
    )
    analysis = _load("analyze_f32_wrapper", HERE / "analyze.py").analysis
    module.FILES = ("registration.md", "amendment-1.md")
    module.INTERIM = (
        "No held-out result may be read before block 9 is committed (registration section 5)."
    )
    module.SESSIONS = (
        "the sessions the stopping rule counts; `partial/`: an unfinished block's copies."
    )
    module.analysis_module = analysis
    return module


def selftest() -> int:
    """This experiment's summaries of synthetic folders: a stop after 2 of its 10 blocks,
    and a whole experiment."""
    report = report_module()
    analysis = report.analysis_module()
    fake = {"registration.md": "abc0000 2026-12-07"}
    with tempfile.TemporaryDirectory() as tmp:
        root, to = Path(tmp) / "out", Path(tmp) / "summary.md"
        analysis.make_synthetic(root, seeds=(0, 1), effect=0.1)
        text = report.write(root, to, "six consecutive sessions without a block", fake)
        assert "commit **abc0000** (2026-12-07; [registration.md](registration.md))." in text
        assert "amendments" not in text.split("\n## ")[0], text[:400]
        assert "Stopped, not completed" in text and "2 of 10 blocks" in text, text[:600]
        assert "blocks not run (no run or final evaluation of theirs exists): 2-9" in text
        assert next(x for x in text.splitlines() if x.startswith("## ")).startswith("## Primary")
        complete = Path(tmp) / "all"
        analysis.make_synthetic(complete, effect=0.0)
        text = report.write(complete, to, None, fake)
        assert "**Completed as registered**: all 10 blocks." in text, text[:600]
        assert "The interval contains 0" in text
    print("report.py selftest (2026-12-rods-vs-static-f32): ok")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: see the module's docstring (the first experiment's, on this folder)."""
    if argv is None:
        argv = sys.argv[1:]
    if "--selftest" in argv:
        return selftest()
    report = report_module()
    report.HERE = HERE  # its defaults (out/, summary.md) and the commits it names: this folder's
    return int(report.main(argv))


if __name__ == "__main__":
    sys.exit(main())
