"""Task files read in: every problem is a TaskFileError naming the file and the line."""

from __future__ import annotations

import json

import pytest

from rods_env import ToolEnv
from rods_env.errors import TaskFileError
from rods_env.task import dump_tasks, load_tasks
from tests.core.toy_domain import TOY


def _write(path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in lines))


def test_a_task_without_turns_is_a_task_file_error(tmp_path, toy_tasks):
    """Regression: it loaded, then reset crashed with an IndexError."""
    good = toy_tasks[0].to_json().encode()
    empty = json.loads(toy_tasks[1].to_json())
    empty["turns"] = []
    path = tmp_path / "pool.jsonl"
    _write(path, [good, json.dumps(empty).encode()])
    with pytest.raises(TaskFileError, match=r"pool\.jsonl:2: turns: .*at least 1"):
        load_tasks(path)
    with pytest.raises(TaskFileError, match=r"pool\.jsonl:2"):
        ToolEnv(TOY, tasks=path)


def test_non_utf8_bytes_are_a_task_file_error_naming_the_line(tmp_path, toy_tasks):
    """Regression: a bare UnicodeDecodeError escaped."""
    good = toy_tasks[0].to_json().encode()
    bad = toy_tasks[1].to_json().encode().replace(b'"request":"', b'"request":"\xff\xfe', 1)
    path = tmp_path / "pool.jsonl"
    _write(path, [good, good.replace(b"toy-", b"toy2-"), bad])
    with pytest.raises(TaskFileError, match=r"pool\.jsonl:3: not UTF-8 text \(byte 0xff"):
        load_tasks(path)


def test_a_written_pool_reads_back(tmp_path, toy_tasks):
    path = tmp_path / "pool.jsonl"
    assert dump_tasks(toy_tasks, path) == len(toy_tasks)
    assert load_tasks(path) == toy_tasks
