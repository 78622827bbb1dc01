"""``evaluate()``: pass^k, summaries, files, progress and resuming (library level).

The command line over it is tested in ``test_cli.py`` (through subprocesses).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from rods_agent.engines import (
    Completion,
    EngineError,
    GenerationRequest,
    SamplingParams,
    random_engine,
)
from rods_agent.engines import oracle_engine as make_oracle
from rods_agent.evaluation.evaluate import (
    EvalProgress,
    EvalSummary,
    TaskResult,
    evaluate,
    pass_hat_k,
    pass_k_curve,
)
from rods_agent.rollouts.batch import EpisodeSpec, RolloutConfig, run_rollouts
from rods_env.env import ToolEnv
from rods_env.errors import ConfigError
from rods_env.registry import load_domain
from rods_env.task import load_tasks


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _result(tid: str, skill: str, success: Sequence[bool], progress: Sequence[float], **kw):
    n = len(success)
    return TaskResult(
        task_id=tid,
        domain=kw.get("domain", "retail"),
        skill=skill,
        variant=kw.get("variant", "base"),
        depth=kw.get("depth", 2),
        signature=None,
        success=tuple(success),
        progress=tuple(progress),
        termination=tuple(kw.get("termination", ["user_stop"] * n)),
        n_steps=(3,) * n,
    )


class FlakyOracle:
    """The oracle, except that completions of the listed episodes (``task#trial``) fail."""

    def __init__(self, tasks, fail=()):
        self.inner = make_oracle(tasks)
        self.chat = None
        self.fail = set(fail)
        self.calls: Counter[str] = Counter()
        self.closed = False

    def generate(self, requests: Sequence[GenerationRequest], params: SamplingParams):
        out = self.inner.generate(requests, params)
        for i, req in enumerate(requests):
            self.calls[req.key] += 1
            if req.key in self.fail:
                out[i] = Completion.failed("connection failed (server down)")
        return out

    def end_episode(self, key: str) -> None:
        self.inner.end_episode(key)

    def close(self) -> None:
        self.closed = True


# -- pass^k and summaries -----------------------------------------------------------------------
def test_pass_hat_k_is_the_unbiased_estimator():
    assert pass_hat_k(4, 2, 1) == 0.5
    assert pass_hat_k(4, 2, 2) == pytest.approx(1 / 6)
    assert pass_hat_k(4, 2, 3) == 0.0
    assert pass_hat_k(4, 4, 4) == 1.0
    with pytest.raises(ConfigError, match="k <= n"):
        pass_hat_k(2, 1, 3)
    curve = pass_k_curve(
        [_result("a", "s", [True] * 4, [1.0] * 4), _result("b", "s", [True, True, False, False], [1, 1, 0, 0])],
        2,
    )  # fmt: skip
    assert curve == {1: pytest.approx(0.75), 2: pytest.approx((1 + 1 / 6) / 2)}


def test_summary_breaks_results_down():
    rows = [
        _result("a", "s1", [True, True], [1.0, 1.0]),
        _result("b", "s2", [False, False], [0.5, 0.0], variant="long_context", depth=3,
                termination=["max_turns", "error"]),
    ]  # fmt: skip
    s = EvalSummary.from_results(rows, 2, {"model": "m", "env": "rods/Retail-v0"})
    assert s.pass_k == {1: 0.5, 2: 0.5} and s.success == 0.5
    assert s.mean_progress == pytest.approx(0.625)
    assert s.by_skill["s2"].pass_1 == 0.0 and s.by_skill["s2"].progress == 0.25
    assert set(s.by_depth) == {"2", "3"} and set(s.by_variant) == {"base", "long_context"}
    assert s.terminations == {"error": 1, "max_turns": 1, "user_stop": 2}
    assert s.errored_trials == 1 and s.tasks == 2 and s.trials == 4
    d = json.loads(json.dumps(s.to_dict()))
    assert d["pass_k"] == {"1": 0.5, "2": 0.5} and d["model"] == "m"
    assert d["by_skill"]["s2"] == {"tasks": 1, "pass^1": 0.0, "progress": 0.25}
    md = s.markdown()
    assert "| 2 | 0.500 |" in md and "## By skill" in md and "| s2 | 1 | 0.000 | 0.250 |" in md
    assert TaskResult.from_dict(rows[1].to_dict()) == rows[1]


# -- evaluate() -----------------------------------------------------------------------------------
def test_evaluate_the_oracle_in_memory_writes_nothing(retail_tasks, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tasks = retail_tasks[:3]
    summary = evaluate(make_oracle(tasks), tasks, k=2)
    assert [r.task_id for r in summary.results] == [t.id for t in tasks]
    assert summary.pass_k == {1: 1.0, 2: 1.0} and summary.mean_progress == 1.0
    assert all(r.n == 2 and r.successes == 2 for r in summary.results)
    assert set(summary.by_skill) == {t.skill for t in tasks}
    assert summary.by_domain["retail"].tasks == 3
    assert list(tmp_path.iterdir()) == []


def test_a_silent_agent_scores_zero(retail_tasks):
    from rods_agent.engines.scripted import ScriptedEngine
    from rods_env import TalkOnlyAgent

    summary = evaluate(ScriptedEngine(lambda info: TalkOnlyAgent()), retail_tasks[:3])
    assert summary.pass_k[1] == 0.0 and summary.success == 0.0
    assert summary.mean_progress < 1.0


def test_the_random_engine_is_a_seeded_floor(retail_tasks):
    tasks = retail_tasks[:4]

    def run(seed, batch):
        records = []

        domain = load_domain("retail")
        specs = [EpisodeSpec(t, trial) for t in tasks for trial in range(2)]
        run_rollouts(
            random_engine(seed),
            lambda: ToolEnv(domain, tasks=(), split=None, max_steps=30),
            specs,
            RolloutConfig(batch_size=batch),
            on_record=records.append,
        )
        return {(r.task_id, r.trial): r.messages for r in records}

    first = run(0, 8)
    assert run(0, 3) == first  # per-episode seeds: the batch does not matter
    assert run(1, 8) != first
    assert len({json.dumps(m) for m in first.values()}) == len(first)  # trials differ
    summary = evaluate(random_engine(0), tasks, k=2)
    assert summary.success == 0.0 and summary.pass_k[1] == 0.0


def test_evaluate_writes_resumable_files(retail_tasks, tmp_path):
    tasks = retail_tasks[:3]
    out = tmp_path / "run"
    evaluate(
        make_oracle(tasks), tasks, k=2, out=out, meta={"model": "oracle", "env": "rods/Retail-v0"}
    )
    assert sorted(r["task_id"] for r in _lines(out / "results.jsonl")) == sorted(
        t.id for t in tasks
    )
    assert len(_lines(out / "episodes.jsonl")) == 6
    summary = json.loads((out / "summary.json").read_text())
    assert summary["pass_k"] == {"1": 1.0, "2": 1.0} and summary["tasks"] == 3
    assert (out / "summary.md").read_text().startswith("# Evaluation of `oracle`")
    assert (out / "pass_k.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    config = json.loads((out / "config.json").read_text())
    assert config["trials"] == 2 and config["model"] == "oracle"
    # the folder explains itself: the tasks evaluated, gold calls included, and why turns failed
    assert load_tasks(out / "tasks.jsonl") == list(tasks)
    assert all(
        r["failures"] == [] for e in _lines(out / "episodes.jsonl") for r in e["turn_results"]
    )

    # A rerun finds everything done: the engine is not even built.
    built = []
    again = evaluate(lambda: built.append(1) or make_oracle(tasks), tasks, k=2, out=out,
                     meta={"model": "oracle", "env": "rods/Retail-v0"})  # fmt: skip
    assert built == [] and again.pass_k == {1: 1.0, 2: 1.0}
    assert len(_lines(out / "results.jsonl")) == 3
    # Another model into the same folder is refused, not mixed in.
    with pytest.raises(ConfigError, match=r"different run.*model='oracle'"):
        evaluate(make_oracle(tasks), tasks, k=2, out=out, meta={"model": "other"})


def test_trials_that_met_an_engine_error_are_retried_on_resume(retail_tasks, tmp_path):
    tasks = retail_tasks[:3]
    out = tmp_path / "run"
    broken = f"{tasks[1].id}#1"
    first = FlakyOracle(tasks, fail={broken})
    s1 = evaluate(first, tasks, k=1, trials=2, out=out)
    assert s1.errored_trials == 1 and s1.results[1].termination[1] == "error"
    assert not first.closed  # an engine passed in belongs to the caller

    second = FlakyOracle(tasks)
    s2 = evaluate(lambda: second, tasks, k=1, trials=2, out=out)
    assert set(second.calls) == {broken}  # only the failed trial ran again
    assert second.closed  # an engine built by the factory is closed
    assert s2.errored_trials == 0 and s2.pass_k[1] == 1.0
    episodes = _lines(out / "episodes.jsonl")
    assert sorted((e["task_id"], e["trial"]) for e in episodes) == sorted(
        (t.id, i) for t in tasks for i in range(2)
    )
    assert all(e["termination"] != "error" for e in episodes)
    results = _lines(out / "results.jsonl")
    assert sorted(r["task_id"] for r in results) == sorted(t.id for t in tasks)
    assert all(r["successes"] == 2 for r in results)


def test_a_task_cut_off_midway_keeps_its_finished_trials(retail_tasks, tmp_path):
    tasks = retail_tasks[:2]
    out = tmp_path / "run"
    evaluate(make_oracle(tasks), tasks, trials=3, out=out)
    episodes = _lines(out / "episodes.jsonl")
    # As if killed after two trials of the second task: no result line, one episode cut off.
    keep = [e for e in episodes if not (e["task_id"] == tasks[1].id and e["trial"] == 2)]
    results = [r for r in _lines(out / "results.jsonl") if r["task_id"] == tasks[0].id]
    (out / "episodes.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in keep) + '{"task_id": "' + tasks[1].id + '", "tri'
    )
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
    again = FlakyOracle(tasks)
    summary = evaluate(again, tasks, trials=3, out=out)
    assert set(again.calls) == {f"{tasks[1].id}#2"}
    assert summary.trials == 6 and summary.pass_k[1] == 1.0
    assert len(_lines(out / "episodes.jsonl")) == 6


def test_progress_is_reported_within_trials(retail_tasks, tiny_engine):
    from rods_agent.engines.scripted import ScriptedEngine
    from rods_env import OracleAgent
    from rods_env.registry import load_domain

    tasks = [t for t in retail_tasks if len(t.turns) > 1][:1] or retail_tasks[:1]
    writes = load_domain("retail").toolkit.write_names()
    engine = ScriptedEngine(lambda info: OracleAgent(tasks[0], writes), chat=tiny_engine.chat)
    seen: list[EvalProgress] = []
    evaluate(engine, tasks, rollout=RolloutConfig(max_tokens=60000), progress=seen.append)
    assert seen, "no progress was reported"
    before_first_trial = [p for p in seen if p.trials_done == 0]
    assert before_first_trial and before_first_trial[-1].turns >= 2  # a trial of several turns
    assert before_first_trial[-1].tokens > 0
    turns = [p.turns for p in seen]
    assert turns == sorted(turns)
    last = seen[-1]
    assert (last.trials_done, last.trials, last.tasks_done, last.tasks) == (1, 1, 1, 1)
    assert last.successes == 1


def test_a_model_that_fails_to_load_leaves_no_folder(retail_tasks, tmp_path):
    out = tmp_path / "run"

    def broken():
        raise EngineError("model folder '/nope' does not exist")

    with pytest.raises(EngineError):
        evaluate(broken, retail_tasks[:2], out=out)
    assert not out.exists()


def test_tasks_whose_gold_fails_are_named_before_any_model_runs(retail_tasks):
    from rods_env.task import ToolCall

    good = retail_tasks[0]
    turn = good.turns[0].model_copy(
        update={"calls": (ToolCall(name="get_order_details", arguments={"order_id": "#W0"}),)}
    )
    bad = good.model_copy(update={"id": "broken-1", "turns": (turn, *good.turns[1:])})
    engine = FlakyOracle([good])
    with pytest.raises(ConfigError, match=r"gold calls of 1 of 2 tasks fail.*broken-1"):
        evaluate(engine, [good, bad])
    assert not engine.calls


def test_bad_arguments_are_config_errors(retail_tasks):
    engine = make_oracle(retail_tasks)
    with pytest.raises(ConfigError, match="k <= trials"):
        evaluate(engine, retail_tasks[:1], k=3, trials=2)
    with pytest.raises(ConfigError, match="no tasks"):
        evaluate(engine, [])
    with pytest.raises(ConfigError, match="unique"):
        evaluate(engine, [retail_tasks[0], retail_tasks[0]])
