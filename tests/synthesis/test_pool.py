"""TaskPool: provenance, dedupe, queries, atomic files and clear errors."""

from __future__ import annotations

import json

import pytest

from rods_env.errors import RodsError, TaskFileError
from rods_env.synthesis import TaskPool, synthesize
from rods_env.task import Task
from tests.synthesis.toy_synth import SHAPED


@pytest.fixture(scope="module")
def pool(seeds):
    pool = TaskPool(seeds, domains=SHAPED)
    outcomes = synthesize(
        pool.tasks,
        domains=SHAPED,
        per_seed=2,
        mode="expand",
        augment=("distractor",),
        known=pool.keys(),
    )
    added = pool.extend(outcomes)
    assert added > 0
    return pool


def test_written_and_read_back_is_equal(pool, tmp_path):
    path = tmp_path / "pool.jsonl"
    assert pool.save(path) == len(pool)
    again = TaskPool.load(path, domains=SHAPED)
    assert again == pool and again.tasks == pool.tasks
    assert again.stats() == pool.stats()


def test_provenance_and_stats(pool, seeds):
    stats = pool.stats()
    assert stats["origin"] == {"seed": len(seeds), "synthesized": len(pool) - len(seeds)}
    assert stats["mode"]["expand"] == len(pool) - len(seeds)
    assert stats["augment"]["distractor"] > 0
    for task in pool.query(origin="synthesized"):
        assert task.provenance.parent_id in pool
        parent = pool[task.provenance.parent_id]
        step = task.provenance.augment is None  # an augmentation keeps its base's generation
        assert task.provenance.generation == parent.provenance.generation + step


def test_query(pool):
    transfers = pool.query(skill="transfer")
    assert transfers and all(t.skill == "transfer" for t in transfers)
    sig = transfers[0].signature
    same = pool.query(signature=sig)
    assert transfers[0] in same and all(t.signature == sig for t in same)
    assert pool.query(signature=sig.key) == same
    assert pool.query(split="test") == []
    assert len(pool.query(split="train")) == len(pool)
    assert all(t.variant == "distractor" for t in pool.query(variant="distractor"))
    assert pool.query(skill="transfer", origin="seed", generation=0) == [
        t for t in transfers if t.provenance.origin == "seed"
    ]


def test_duplicates_are_not_added(pool):
    task = pool.query(origin="synthesized")[0]
    copy = task.model_copy(update={"id": "another-id"})
    assert pool.add(copy) is False and "another-id" not in pool
    assert pool.add(task) is False  # already there
    n = len(pool)
    assert pool.extend([copy, task]) == 0 and len(pool) == n
    changed = task.model_copy(update={"skill": "balance"})
    with pytest.raises(RodsError, match="already in the pool with different content"):
        pool.add(changed)


def test_dedupe_off_keeps_everything(seeds):
    loose = TaskPool(domains=SHAPED, dedupe=False)
    loose.add(seeds[0])
    assert loose.add(seeds[0].model_copy(update={"id": "copy"}))
    assert len(loose) == 2


def test_remove_retires_the_task_but_keeps_its_key(seeds):
    p = TaskPool(seeds[:3], domains=SHAPED)
    key = p.key(seeds[1])
    t = p.remove(seeds[1].id)
    assert t == seeds[1] and seeds[1].id not in p and len(p) == 2
    # the key outlives the task: it is not added again, nor synthesized again
    known = p.keys()
    assert key in known and p.retired_keys == {key}
    assert not p.add(t) and seeds[1].id not in p
    again = [
        o
        for o in synthesize([t], domains=SHAPED, per_seed=1, attempts=1, known=p.keys(), seed=5)
        if o.accepted
    ]
    assert all(o.key not in known for o in again)
    # a rebuilt pool gets its retired keys back
    rebuilt = TaskPool(p.tasks, domains=SHAPED, retired_keys=p.retired_keys)
    assert not rebuilt.add(t) and rebuilt.keys() == p.keys()


def test_a_loaded_pool_retires_removed_tasks_too(seeds, tmp_path):
    TaskPool(seeds[:2], domains=SHAPED).save(tmp_path / "p.jsonl")
    p = TaskPool.load(tmp_path / "p.jsonl", domains=SHAPED)  # keys are computed lazily
    p.remove(seeds[0].id)
    assert p.retired_keys == {p.key(seeds[0])}
    assert not p.add(seeds[0])


def test_a_crash_mid_write_keeps_the_old_file(pool, tmp_path, monkeypatch):
    path = tmp_path / "pool.jsonl"
    pool.save(path)
    before = path.read_bytes()
    calls = {"n": 0}
    original = Task.to_json

    def explode(self):
        calls["n"] += 1
        if calls["n"] > 3:
            raise KeyboardInterrupt
        return original(self)

    monkeypatch.setattr(Task, "to_json", explode)
    with pytest.raises(KeyboardInterrupt):
        pool.save(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["pool.jsonl"]  # no temp file left


def test_truncated_file_names_file_and_line(pool, tmp_path):
    path = tmp_path / "pool.jsonl"
    pool.save(path)
    data = path.read_text()
    path.write_text(data[: len(data) - 40])  # cut inside the last record
    n = len(pool)
    with pytest.raises(TaskFileError, match=rf"pool.jsonl:{n}: truncated line"):
        TaskPool.load(path)


def test_corrupted_line_names_file_line_and_problem(pool, tmp_path):
    path = tmp_path / "pool.jsonl"
    pool.save(path)
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = "###" + lines[2]
    path.write_text("".join(lines))
    with pytest.raises(TaskFileError, match=r"pool.jsonl:3: invalid JSON"):
        TaskPool.load(path)

    record = json.loads(lines[1])
    record["turns"] = "not a list"
    lines[2] = json.dumps(record) + "\n"
    path.write_text("".join(lines))
    with pytest.raises(TaskFileError, match=r"pool.jsonl:3: turns"):
        TaskPool.load(path)


def test_duplicate_id_in_a_file(pool, tmp_path):
    path = tmp_path / "pool.jsonl"
    pool.save(path)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join([lines[0], "\n", *lines[1:4], lines[1]]))
    with pytest.raises(TaskFileError, match=r"pool.jsonl:6: duplicate task id .*first on line 3"):
        TaskPool.load(path)


def test_missing_file(tmp_path):
    with pytest.raises(TaskFileError, match="cannot open"):
        TaskPool.load(tmp_path / "nope.jsonl")
