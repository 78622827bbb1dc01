"""The episode core's speed, side by side with τ-bench and with the commit before it.

Gold replay of every seed task, no model: rods plays each seed task's oracle actions
(recorded once) through ``reset``/``step``; τ-bench plays each test task's gold actions
through its own ``reset``/``step`` and computes its reward (``benchmarks/episode_worker.py``
says how). One process per side and domain, the sides alternating, so all run under the
same load; the best run of each side is reported (the least disturbed by other jobs). Both
rods sides must give the same fingerprint (every observation, reward and end).

Then ``cProfile`` of ``reset`` and ``step`` on both rods sides: where the time went, and
where it goes now.

Run (a τ-bench checkout, e.g. from sierra-research/tau-bench; several minutes)::

    RODS_BENCH_BASELINE=<commit> RODS_TAU_BENCH=/path/to/tau-bench \\
        pytest benchmarks/test_episode_core.py --benchmark-only -s
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "benchmarks" / "episode_worker.py"
DOMAINS = ("retail", "airline")

pytestmark = pytest.mark.skipif(
    not (os.environ.get("RODS_BENCH_BASELINE") and os.environ.get("RODS_TAU_BENCH")),
    reason="this checkout against another commit and τ-bench, alternating (several minutes): "
    "set RODS_BENCH_BASELINE=<commit> and RODS_TAU_BENCH=<a tau-bench checkout>",
)


def _worker(root: Path | None, *args: str) -> dict[str, Any]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(root or ROOT), str(ROOT)])
    out = subprocess.run(
        [sys.executable, str(WORKER), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(root or ROOT),
        timeout=1800,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _profile_rows(result: dict[str, Any], what: str, n: int) -> list[str]:
    per = result["episodes"] if what == "reset" else result["steps"]
    rows = []
    for r in result[what]["top"][:n]:
        rows.append(
            f"| `{r['function']}` | {1e6 * r['own_s'] / per:.1f} | "
            f"{1e6 * r['cumulative_s'] / per:.1f} | {r['calls'] / per:.2f} |"
        )
    return rows


def test_speed_against_tau_bench_and_baseline(benchmark, tmp_path):
    baseline = os.environ["RODS_BENCH_BASELINE"]
    tau_bench = os.environ["RODS_TAU_BENCH"]
    rounds = int(os.environ.get("RODS_BENCH_ROUNDS", "2"))
    base_commit = _git("rev-parse", "--short", baseline)
    head = _git("rev-parse", "--short", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", base_commit, "rods_env", "environments"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive, check=True)
    load_start = os.getloadavg()
    rows: list[str] = []
    profiles: dict[tuple[str, str], dict[str, Any]] = {}

    def run() -> None:
        for name in DOMAINS:
            results: dict[str, list[dict[str, Any]]] = {"tau": [], "base": [], "this": []}
            for _ in range(rounds):
                results["tau"].append(
                    _worker(None, "taubench", name, "--path", tau_bench, "--runs", "2")
                )
                results["base"].append(_worker(tmp_path, "speed", name, "--runs", "3"))
                results["this"].append(_worker(None, "speed", name, "--runs", "3"))
            assert str(tmp_path) in results["base"][0]["rods_env"]  # the baseline ran
            assert str(ROOT) in results["this"][0]["rods_env"]
            prints = {s: {r["fingerprint"] for r in results[s]} for s in ("base", "this")}
            assert prints["base"] == prints["this"], f"{name}: the episodes differ"
            assert all(r["failed"] == 0 for rs in results.values() for r in rs)

            def best(side: str, key: str = "cpu", results: dict = results) -> float:
                return max(r["tasks"] / c for r in results[side] for c in r[key])

            def least(side: str, key: str, results: dict = results) -> float:
                return min(x for r in results[side] for x in r[key])

            tau, base, this = best("tau"), best("base"), best("this")
            benchmark.extra_info[name] = {"tau_bench": tau, "base": base, "this": this}
            rows.append(
                f"| {name} | {tau:.2f} | {base:,.0f} | **{this:,.0f}** | {base / tau:,.0f}x | "
                f"**{this / tau:,.0f}x** | {best('base', 'oracle_cpu'):,.0f} / "
                f"{best('this', 'oracle_cpu'):,.0f} | {least('base', 'reset_us'):.0f} / "
                f"{least('this', 'reset_us'):.0f} | {least('base', 'step_us'):.0f} / "
                f"{least('this', 'step_us'):.0f} | {least('tau', 'reset_us') / 1e3:.0f} / "
                f"{least('tau', 'step_us') / 1e3:.0f} |"
            )
            for side, root in (("base", tmp_path), ("this", None)):
                profiles[(name, side)] = _worker(root, "profile", name, "--top", "15")

    benchmark.pedantic(run, rounds=1, iterations=1)
    load_end = os.getloadavg()
    print()
    print(
        f"Measured {datetime.date.today().isoformat()}, this checkout at {head}"
        f"{' (with uncommitted changes)' if dirty else ''} against {base_commit} and τ-bench "
        f"({tau_bench}), alternating {rounds} times, best run of each side, CPU time; load "
        f"{load_start[0]:.1f} at the start, {load_end[0]:.1f} at the end "
        f"(`RODS_BENCH_BASELINE={baseline} RODS_TAU_BENCH=... pytest "
        "benchmarks/test_episode_core.py --benchmark-only -s`):"
    )
    print()
    print(
        f"| domain | τ-bench episodes/s | {base_commit} | this | {base_commit} / τ-bench | "
        f"this / τ-bench | with the oracle agent ({base_commit} / this) | reset µs "
        f"({base_commit} / this) | step µs ({base_commit} / this) | τ-bench reset / step ms |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))
    for (name, side), result in profiles.items():
        label = base_commit if side == "base" else f"this checkout ({head})"
        for what in ("reset", "step"):
            print()
            print(
                f"{name}, {label}: `{what}` under cProfile, {result[what]['total_s']:.3f} s over "
                f"{result['episodes'] if what == 'reset' else result['steps']} calls, the 15 "
                f"functions of most own time (µs per {what}):"
            )
            print()
            print(f"| function | own | cumulative | calls per {what} |")
            print("| --- | --- | --- | --- |")
            print("\n".join(_profile_rows(result, what, 15)))
