"""Registered experiments (experiments/*/): their configuration loads as registered and
their analysis script runs on a synthetic folder shaped like the experiment's output, so
neither rots before the runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from rods_agent.experiment.config import load_experiment

ROOT = Path(__file__).resolve().parents[2]
EXP = ROOT / "experiments" / "2026-12-rods-vs-static"


def _analysis():
    spec = importlib.util.spec_from_file_location("analyze_rods_vs_static", EXP / "analyze.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_configuration_is_the_registered_design() -> None:
    config = load_experiment(EXP / "experiment.yaml")
    analysis = _analysis()
    assert config.runs.modes == list(analysis.ARMS)
    assert config.runs.seeds == list(analysis.SEEDS)
    assert config.runs.steps == analysis.STEPS
    rollout = config.train.rollout
    assert (
        rollout.tasks_per_step * rollout.group_size * config.runs.steps == analysis.EPISODES_PER_RUN
    )
    assert config.pool.skills == ["order_info", "multi_turn"]
    assert (config.eval.final_variants, config.eval.final_fresh) == (0, 30)
    assert config.out == "experiments/2026-12-rods-vs-static/out"
    registered = json.loads((EXP / "held-out.registered.json").read_text())
    assert (registered["tasks"], registered["customers"]) == (70, 40)


def test_the_analysis_runs_on_a_synthetic_experiment() -> None:
    assert _analysis().selftest() == 0


def test_the_summary_writer_reports_the_primary_first_and_labels_a_stop() -> None:
    """report.py (the summary the issue asks for) on synthetic folders: a stop after two
    blocks is "not as registered", a whole experiment is read by section 5's rule."""
    spec = importlib.util.spec_from_file_location("report_rods_vs_static", EXP / "report.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.selftest() == 0


def test_every_experiment_folder_keeps_under_20_mb_in_git() -> None:
    """An experiment's tracked files stay compact (weights, checkpoints and plain episode
    files are ignored; a block of this experiment adds about 0.76 MB)."""
    import subprocess

    listed = subprocess.run(
        ["git", "ls-files", "-z", "experiments"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    sizes: dict[str, int] = {}
    for name in filter(None, listed.split("\0")):
        parts = Path(name).parts
        if len(parts) > 2 and (ROOT / name).is_file():
            sizes[parts[1]] = sizes.get(parts[1], 0) + (ROOT / name).stat().st_size
    assert sizes.get("2026-12-rods-vs-static", 0) > 100_000  # the registration is there
    assert {k: v for k, v in sizes.items() if v > 20_000_000} == {}


def test_no_block_starts_on_a_cpu_without_bf16_matmul(tmp_path: Path) -> None:
    """Amendment 3: `blocks.sh start` refuses, with its one-line cause and before anything
    is written, on a CPU whose flags name neither avx512_bf16 nor amx_bf16 (a flag that only
    begins with one of them is not it)."""
    import subprocess

    for flags in ("fpu sse2 avx avx2 fma", "avx2 avx512f avx512_bf16x amx_tile"):
        cpuinfo = tmp_path / "cpuinfo"
        cpuinfo.write_text(f"processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: {flags}\n")
        logs = tmp_path / "logs"
        done = subprocess.run(
            ["bash", str(EXP / "blocks.sh"), "start", "3"],
            env={"PATH": "/usr/bin:/bin", "CPUINFO": str(cpuinfo), "LOGS": str(logs)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1
        assert done.stderr.strip().splitlines() == [
            "blocks.sh: this CPU has neither avx512_bf16 nor amx_bf16 (amendment 3): "
            "no block runs on it"
        ]
        assert not logs.exists()


def test_no_block_starts_once_the_experiment_has_stopped(tmp_path: Path) -> None:
    """Amendment 3, item 3: six sessions without a block stopped the experiment and its
    summary says so; `blocks.sh start` then refuses even on a CPU with bf16 matmul, before
    anything is written or launched."""
    import subprocess

    assert "**Stopped, not completed**" in (EXP / "summary.md").read_text(encoding="utf-8")
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: avx2 avx512_bf16\n")
    logs = tmp_path / "logs"
    done = subprocess.run(
        ["bash", str(EXP / "blocks.sh"), "start", "2"],
        env={"PATH": "/usr/bin:/bin", "CPUINFO": str(cpuinfo), "LOGS": str(logs)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "blocks.sh: the experiment stopped (summary.md, amendment 3): no block runs any more"
    ]
    assert not logs.exists()
