"""``rods eval``: pass^k, summaries, files, and resuming a killed run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rods_agent.cli import main as rods_main
from rods_agent.evaluate import pass_hat_k, pass_k_curve, summarize, summary_markdown
from rods_env.errors import ConfigError
from rods_env.task import dump_tasks

ROOT = Path(__file__).resolve().parents[2]


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_pass_hat_k_is_the_unbiased_estimator():
    assert pass_hat_k(4, 2, 1) == 0.5
    assert pass_hat_k(4, 2, 2) == pytest.approx(1 / 6)
    assert pass_hat_k(4, 2, 3) == 0.0
    assert pass_hat_k(4, 4, 4) == 1.0
    with pytest.raises(ConfigError, match="k <= n"):
        pass_hat_k(2, 1, 3)
    curve = pass_k_curve([{"n": 4, "successes": 4}, {"n": 4, "successes": 2}], 2)
    assert curve == {1: pytest.approx(0.75), 2: pytest.approx((1 + 1 / 6) / 2)}


def test_summary_breaks_results_down():
    rows = [
        {"task_id": "a", "domain": "retail", "skill": "s1", "variant": "base", "depth": 2, "n": 2,
         "successes": 2, "mean_progress": 1.0, "termination": ["user_stop"] * 2, "errors": 0},
        {"task_id": "b", "domain": "retail", "skill": "s2", "variant": "long_context", "depth": 3, "n": 2,
         "successes": 0, "mean_progress": 0.25, "termination": ["max_turns", "error"], "errors": 1},
    ]  # fmt: skip
    s = summarize(rows, 2, {"model": "m", "env": "rods/Retail-v0"})
    assert s["pass_k"] == {"1": 0.5, "2": 0.5}
    assert s["mean_progress"] == pytest.approx(0.625)
    assert s["by_skill"]["s2"] == {"tasks": 1, "pass^1": 0.0, "progress": 0.25}
    assert set(s["by_depth"]) == {"2", "3"} and set(s["by_variant"]) == {"base", "long_context"}
    assert s["terminations"] == {"error": 1, "max_turns": 1, "user_stop": 2}
    md = summary_markdown(s)
    assert "| 2 | 0.500 |" in md and "## By skill" in md and "| s2 | 1 | 0.000 | 0.250 |" in md


def test_eval_the_oracle_on_a_pool_file(tmp_path, retail_tasks, capsys):
    pool = tmp_path / "pool.jsonl"
    dump_tasks(retail_tasks[:3], pool)
    out = tmp_path / "oracle"
    argv = ["eval", "--env", "rods/Retail-v0", "--pool", str(pool), "--engine", "oracle",
            "--k", "2", "--out", str(out), "--no-progress"]  # fmt: skip
    assert rods_main(argv) == 0
    results = _lines(out / "results.jsonl")
    assert sorted(r["task_id"] for r in results) == sorted(t.id for t in retail_tasks[:3])
    assert all(r["n"] == 2 and r["successes"] == 2 for r in results)
    assert len(_lines(out / "episodes.jsonl")) == 6
    summary = json.loads((out / "summary.json").read_text())
    assert summary["pass_k"] == {"1": 1.0, "2": 1.0} and summary["tasks"] == 3
    assert (out / "summary.md").read_text().startswith("# Evaluation of `oracle`")
    assert (out / "pass_k.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "pass^2=1.000" in capsys.readouterr().out
    # A rerun finds everything done and runs nothing.
    assert rods_main(argv) == 0
    assert len(_lines(out / "results.jsonl")) == 3
    # Another model into the same folder is refused, not mixed in.
    other = [
        "eval",
        "--env",
        "rods/Retail-v0",
        "--pool",
        str(pool),
        "--model",
        "x",
        "--out",
        str(out),
    ]
    assert rods_main(other) == 2
    assert "different run" in capsys.readouterr().err


def test_resume_state_drops_cut_lines_and_orphan_episodes(tmp_path):
    from rods_agent.evaluate import resume_state

    (tmp_path / "results.jsonl").write_text('{"task_id": "a", "n": 1}\n{"task_id": "b", "n"')
    (tmp_path / "episodes.jsonl").write_text(
        '{"task_id": "a", "trial": 0}\n{"task_id": "b", "trial": 0}\n{"task_id": "c", "trial": 0}\n'
    )
    done = resume_state(tmp_path)
    assert list(done) == ["a"]
    assert _lines(tmp_path / "results.jsonl") == [{"task_id": "a", "n": 1}]
    assert _lines(tmp_path / "episodes.jsonl") == [{"task_id": "a", "trial": 0}]


def test_a_killed_eval_resumes_without_redoing_tasks(tmp_path, tiny_model_dir, capsys):
    out = tmp_path / "run"
    argv = ["eval", "--env", "rods/Retail-v0", "--split", "test", "--limit", "5", "--engine", "transformers",
            "--model", str(tiny_model_dir), "--k", "1", "--concurrency", "1", "--max-turns", "2",
            "--max-tokens", "4", "--max-episode-tokens", "16000", "--seed", "0", "--out", str(out),
            "--no-progress"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rods_agent.cli", *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    results = out / "results.jsonl"
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if results.exists() and results.read_text().count("\n") >= 1:
                break
            time.sleep(0.02)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    text = results.read_text()
    before = text[: text.rfind("\n") + 1]  # a line cut off by the kill does not count
    n_before = before.count("\n")
    assert 1 <= n_before < 5, "the run should have been killed midway"

    assert rods_main(argv) == 0
    assert f"resuming: {n_before} of 5 tasks already done" in capsys.readouterr().err
    after = results.read_text()
    assert after.startswith(before)  # finished tasks were kept, not redone
    ids = [r["task_id"] for r in _lines(results)]
    assert len(ids) == 5 == len(set(ids))
    episodes = _lines(out / "episodes.jsonl")
    assert sorted(e["task_id"] for e in episodes) == sorted(ids)
    assert json.loads((out / "summary.json").read_text())["tasks"] == 5


def test_an_unreachable_model_fails_loudly_but_keeps_its_records(tmp_path, capsys):
    import socket

    with socket.socket() as s:  # a loopback port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "down"
    argv = ["eval", "--env", "rods/Retail-v0", "--limit", "2", "--engine", "openai",
            "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m", "--retries", "0",
            "--timeout", "2", "--out", str(out), "--no-progress"]  # fmt: skip
    assert rods_main(argv) == 1
    err = capsys.readouterr().err
    assert "every trial (2) ended in an engine or environment error" in err
    results = _lines(out / "results.jsonl")
    assert [r["termination"] for r in results] == [["error"], ["error"]]
