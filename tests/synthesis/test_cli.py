"""``rods synth`` end to end on a real domain (skipped when none is installed)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

import rods_env
from rods_agent.cli import main
from rods_env.synthesis import TaskPool

pytestmark = pytest.mark.skipif("retail" not in rods_env.domain_names(), reason="needs retail")


def _synth(tmp_path, *extra, name="pool.jsonl"):
    out = tmp_path / name
    argv = ["synth", "--env", "rods/Retail-v0", "--per-seed", "2", "--limit", "6"]
    argv += ["--out", str(out), "--seed", "0", "--no-progress", *extra]
    return main(argv), out


def test_synth_writes_pool_and_summary(tmp_path, capsys):
    rc, out = _synth(tmp_path, "--augment", "missing_parameter,distractor")
    assert rc == 0
    text = capsys.readouterr().out
    assert "accepted" in text and "signatures" in text and "entity coverage" in text
    pool = TaskPool.load(out)
    summary = json.loads((tmp_path / "pool.summary.json").read_text())
    assert summary["pool_size"] == len(pool) == summary["accepted"] > 0
    assert summary["env"] == "rods/Retail-v0" and summary["config"]["per_seed"] == 2
    assert set(summary["accepted_by_kind"]) <= {"base", "missing_parameter", "distractor"}
    assert summary["candidates"] == summary["accepted"] + sum(summary["rejected"].values())
    assert all(t.provenance.origin == "synthesized" for t in pool)


def test_synth_is_deterministic_and_seed_dependent(tmp_path):
    _, a = _synth(tmp_path, name="a.jsonl")
    _, b = _synth(tmp_path, name="b.jsonl")
    _, c = _synth(tmp_path, "--seed", "1", name="c.jsonl")
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


def test_synth_append_and_include_seeds(tmp_path):
    _, out = _synth(tmp_path, "--include-seeds")
    first = TaskPool.load(out)
    assert len(first.query(origin="seed")) == 6
    _, out = _synth(tmp_path, "--append", "--seed", "1")
    second = TaskPool.load(out)
    assert second.tasks[: len(first)] == first.tasks and len(second) > len(first)


def test_synth_from_a_pool_file_expand(tmp_path):
    _, out = _synth(tmp_path, name="base.jsonl")
    rc, out2 = _synth(tmp_path, "--from", str(out), "--mode", "expand", name="exp.jsonl")
    assert rc == 0
    parents = {t.id for t in TaskPool.load(out)}
    for t in TaskPool.load(out2):
        assert t.provenance.parent_id in parents and t.provenance.generation == 2


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (("--augment", "paraphrase"), "unknown kind 'paraphrase'"),
        (("--skills", "nope"), "unknown skill nope"),
        (("--per-seed", "-1"), "--per-seed must be at least 1"),
        (("--per-seed", "0"), "--per-seed must be at least 1"),
        (("--limit", "0"), "--limit must be at least 1"),
    ],
)
def test_bad_options_give_one_line_errors(tmp_path, capsys, extra, needle):
    rc, _ = _synth(tmp_path, *extra)
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_corrupted_source_pool_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    rc, _ = _synth(tmp_path, "--from", str(bad))
    assert rc == 2 and "bad.jsonl:1:" in capsys.readouterr().err


# -- reruns and interrupts, through the real command line -------------------------------------
RODS = [sys.executable, "-m", "rods_agent.cli"]


def _cli(tmp_path, *extra, out="pool.jsonl", limit="4"):
    argv = [*RODS, "synth", "--env", "retail", "--per-seed", "1", "--limit", limit]
    argv += ["--out", str(tmp_path / out), "--no-progress", *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path)


def test_an_existing_out_is_never_overwritten_without_force(tmp_path):
    first = _cli(tmp_path)
    assert first.returncode == 0, first.stderr
    pool, summary = tmp_path / "pool.jsonl", tmp_path / "pool.summary.json"
    before = (pool.read_bytes(), summary.read_bytes())
    again = _cli(tmp_path, "--seed", "3")
    assert again.returncode == 2
    assert again.stderr.strip().splitlines() == [
        f"rods synth: error: --out {pool} already exists; pass --force to overwrite it, "
        "--append to add to it, or --resume to finish an interrupted run"
    ]
    assert (pool.read_bytes(), summary.read_bytes()) == before
    forced = _cli(tmp_path, "--seed", "3", "--force")
    assert forced.returncode == 0 and pool.read_bytes() != before[0]
    kept = TaskPool.load(pool).tasks
    appended = _cli(tmp_path, "--seed", "4", "--append")
    assert appended.returncode == 0
    grown = TaskPool.load(pool).tasks
    assert grown[: len(kept)] == kept and len(grown) > len(kept)
    both = _cli(tmp_path, "--force", "--append")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


def test_per_seed_zero_is_an_error_that_writes_nothing(tmp_path):
    run = _cli(tmp_path, "--per-seed", "0")
    assert run.returncode == 2
    assert run.stderr.strip() == "rods synth: error: --per-seed must be at least 1, got 0"
    assert list(tmp_path.iterdir()) == []


def test_a_finished_run_says_so_in_its_summary_and_cannot_be_resumed(tmp_path):
    assert _cli(tmp_path).returncode == 0
    summary = json.loads((tmp_path / "pool.summary.json").read_text())
    assert summary["interrupted"] is False and summary["seeds_total"] == 4
    assert len(summary["seeds_done"]) == 4
    resumed = _cli(tmp_path, "--resume")
    assert resumed.returncode == 2 and "finished; nothing to resume" in resumed.stderr
    missing = _cli(tmp_path, "--resume", out="other.jsonl")
    assert missing.returncode == 2 and "no earlier run" in missing.stderr


@pytest.mark.slow
def test_an_interrupted_run_is_marked_and_resumes_to_the_pool_of_an_uninterrupted_run(tmp_path):
    argv = [*RODS, "synth", "--env", "retail", "--per-seed", "3", "--augment", "all"]
    argv += ["--limit", "80"]
    argv += ["--out", str(tmp_path / "cut.jsonl"), "--no-progress"]

    def interrupt_after(delay: float) -> tuple[int, str, dict]:
        child = subprocess.Popen(
            [*argv, "--force"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # a job started in the background by a non-interactive shell inherits SIGINT
            # ignored, and Python then keeps ignoring it: give the child the default
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        assert child.stdout is not None
        started = child.stdout.readline()
        assert started.startswith("synth retail: 80 of 80 seeds to do"), started
        time.sleep(delay)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=600)
        return child.returncode, err, json.loads((tmp_path / "cut.summary.json").read_text())

    # stop it mid-run: how far it gets in a given time depends on the machine and its load
    # (the whole run takes about a second here), so halve the delay after a run that
    # finished and double it after one that had not started a seed
    delay = 0.5
    for _ in range(10):
        code, err, summary = interrupt_after(delay)
        done = len(summary["seeds_done"])
        if 0 < done < 80:
            break
        delay = delay / 2 if done == 80 else delay * 2
    assert code == 130, err
    assert summary["interrupted"] is True and 0 < len(summary["seeds_done"]) < 80, summary
    assert f"interrupted after {len(summary['seeds_done'])} of 80 seeds" in err
    # only whole seeds were written: every task descends from a finished seed
    pool = TaskPool.load(tmp_path / "cut.jsonl")
    parents = {t.id: t.provenance.parent_id for t in pool}
    roots = {parents.get(p, p) for p in parents.values()}
    assert roots <= set(summary["seeds_done"]) and summary["pool_size"] == len(pool)
    # other options cannot resume it
    other = subprocess.run(
        [*argv, "--resume", "--seed", "1"], capture_output=True, text=True, timeout=300
    )
    assert other.returncode == 2 and "changed: seed 0 -> 1" in other.stderr
    resumed = subprocess.run([*argv, "--resume"], capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    full_argv = [
        a if a != str(tmp_path / "cut.jsonl") else str(tmp_path / "full.jsonl") for a in argv
    ]
    full = subprocess.run(full_argv, capture_output=True, text=True, timeout=600)
    assert full.returncode == 0, full.stderr
    # nothing over-represented, nothing lost: the same pool as one uninterrupted run
    assert (tmp_path / "cut.jsonl").read_bytes() == (tmp_path / "full.jsonl").read_bytes()
    a = json.loads((tmp_path / "cut.summary.json").read_text())
    b = json.loads((tmp_path / "full.summary.json").read_text())
    assert a["interrupted"] is False and a["seeds_done"] == b["seeds_done"]
    for key in ("candidates", "accepted", "accepted_by_kind", "rejected", "signatures"):
        assert a[key] == b[key], key
