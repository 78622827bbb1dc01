"""``rods synth`` end to end on a real domain (skipped when none is installed)."""

from __future__ import annotations

import json

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
        (("--per-seed", "-1"), "per_seed must be 0 or more"),
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
