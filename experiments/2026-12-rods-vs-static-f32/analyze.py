"""The registered analysis of experiment 2026-12-rods-vs-static-f32 (registration.md).

It is ``../2026-12-rods-vs-static/analyze.py``, registered there on 2026-12-06 and used here
unchanged, run on this experiment's output folder with this experiment's run seeds (0-9).
Everything it prints, in order (the primary comparison, its variance components, the
secondary comparisons, the looping decomposition, the optimizer steps, the checks of the
protocol), and how (the clustered two-way bootstrap over run seeds and customers of
:func:`rods_agent.experiment.stats.paired_difference`), is that script's. The held-out set is
checked against the same ``held-out.registered.json``.

    .venv/bin/python experiments/2026-12-rods-vs-static-f32/analyze.py [OUT] [--json FILE]
    .venv/bin/python experiments/2026-12-rods-vs-static-f32/analyze.py --selftest
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
BASE = HERE.parent / "2026-12-rods-vs-static" / "analyze.py"
SEEDS = tuple(range(10))
"""The registered run seeds (blocks)."""


def analysis() -> ModuleType:
    """The registered analysis module, set to this experiment's run seeds.

    Its ``SEEDS`` is read when it runs (which blocks must be whole); its synthetic folder's
    default seeds were bound when it was defined, so they are set too, and its self-test
    runs on a synthetic experiment of these 10 blocks."""
    spec = importlib.util.spec_from_file_location("analyze_rods_vs_static_f32", BASE)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{BASE}: cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.SEEDS = SEEDS
    defaults = module.make_synthetic.__defaults__
    module.make_synthetic.__defaults__ = (SEEDS, *defaults[1:])
    return module


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: see the module's docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "out", nargs="?", type=Path, default=HERE / "out", help="the experiment's output folder"
    )
    parser.add_argument("--json", type=Path, help="also write every number to this file")
    parser.add_argument("--selftest", action="store_true", help="run on synthetic data and check")
    args = parser.parse_args(argv)
    module = analysis()
    if args.selftest:
        return int(module.selftest())
    data = module.analyze(args.out)
    print(module.report(data))
    if args.json:
        args.json.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
