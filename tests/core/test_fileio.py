"""The one file writer: atomic replacement, ordinary permissions, durable appends."""

from __future__ import annotations

import os
import stat

import pytest

from rods_env.fileio import (
    UMASK,
    append_jsonl,
    atomic_file,
    atomic_write,
    read_jsonl,
    write_json,
)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_atomic_write_replaces_whole_files_with_ordinary_permissions(tmp_path):
    path = tmp_path / "sub" / "a.txt"
    atomic_write(path, "one")
    atomic_write(path, ["two", "\n", "three"])
    assert path.read_text() == "two\nthree"
    assert _mode(path) == 0o666 & ~UMASK
    atomic_write(path, b"\x00bytes")
    assert path.read_bytes() == b"\x00bytes"
    assert [p.name for p in path.parent.iterdir()] == ["a.txt"]  # no temporary left


def test_a_failed_write_keeps_the_old_file(tmp_path):
    path = tmp_path / "a.txt"
    atomic_write(path, "old")

    def chunks():
        yield "partial"
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        atomic_write(path, chunks())
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_a_streamed_file_appears_whole_or_not_at_all(tmp_path):
    path = tmp_path / "state.bin"
    atomic_write(path, b"old")
    with pytest.raises(RuntimeError), atomic_file(path) as f:
        f.write(b"half of a new state")
        assert path.read_bytes() == b"old"  # nothing visible while it is written
        raise RuntimeError("killed")
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["state.bin"]
    with atomic_file(path) as f:
        for _ in range(3):
            f.write(b"chunk")
    assert path.read_bytes() == b"chunk" * 3 and _mode(path) == 0o666 & ~UMASK


def test_jsonl_appends_and_a_cut_off_last_line_is_dropped(tmp_path):
    path = tmp_path / "rows.jsonl"
    assert append_jsonl(path, [{"a": 1}, {"b": 2}]) == 2
    assert append_jsonl(path, []) == 0
    assert _mode(path) == 0o666 & ~UMASK
    with path.open("a") as fh:
        fh.write('{"c": 3')  # a kill mid-line
    assert read_jsonl(path) == [{"a": 1}, {"b": 2}]
    assert read_jsonl(tmp_path / "absent.jsonl") == []


def test_write_json(tmp_path):
    path = write_json(tmp_path / "x.json", {"k": [1, 2]})
    assert path.read_text().startswith("{\n")
