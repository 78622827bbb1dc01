"""One way to write files: atomic replacement, durable appends, tolerant JSONL reads.

Every file rods writes (task pools, evaluation results, summaries, training metrics and
checkpoints) goes through these functions, so a crash or a kill never leaves a half-written
file behind, and every file gets ordinary permissions (``0666`` less the process umask, like
``open(path, "w")``; ``tempfile.mkstemp`` alone would leave it private to the owner).
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


UMASK = _read_umask()
"""The process umask, read once at import (``os.umask`` can only be read by setting it)."""


def fsync_dir(directory: Path) -> None:
    """Flush a folder's entries to disk (after a rename into it), where the system allows."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # some file systems do not open directories; the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_file(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file that replaces ``path`` atomically when the block ends without error.

    For writers that stream (``torch.save`` of a large state): nothing is held in memory.
    The data goes to a temporary file in the same folder, is flushed to disk, gets ordinary
    permissions and replaces ``path`` in one rename; on an error the temporary file is
    removed and ``path`` is untouched. Parent folders are created.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fb:
            yield fb
            fb.flush()
            os.fsync(fb.fileno())
        os.chmod(tmp, 0o666 & ~UMASK)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write(
    path: str | Path, data: str | bytes | Iterable[str], *, encoding: str = "utf-8"
) -> Path:
    """Write ``data`` to ``path`` atomically: readers see the old file or the whole new one
    (see :func:`atomic_file`).

    Args:
        path: The file to write.
        data: Text, bytes, or an iterable of text chunks (written in order; e.g. JSONL lines
            with their newlines).
        encoding: Text encoding.

    Returns:
        The path written.
    """
    with atomic_file(path) as fb:
        if isinstance(data, bytes):
            fb.write(data)
        else:
            text = io.TextIOWrapper(fb, encoding=encoding, newline="\n")
            if isinstance(data, str):
                text.write(data)
            else:
                for chunk in data:
                    text.write(chunk)
            text.flush()
            text.detach()  # the binary file stays open for atomic_file to finish
    return Path(path)


def json_line(row: Mapping[str, Any]) -> str:
    """One JSONL line (with its newline) for ``row``; non-JSON values are written as text."""
    return json.dumps(row, ensure_ascii=False, default=str) + "\n"


def write_json(path: str | Path, value: Any, *, indent: int | None = 2) -> Path:
    """Write ``value`` as a JSON document atomically (see :func:`atomic_write`)."""
    return atomic_write(
        path, json.dumps(value, ensure_ascii=False, indent=indent, default=str) + "\n"
    )


def write_jsonl(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    """Write ``rows`` as a JSONL file atomically (see :func:`atomic_write`)."""
    return atomic_write(path, (json_line(r) for r in rows))


def append_jsonl(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> int:
    """Append ``rows`` to a JSONL file durably (flushed and synced before returning).

    The rows are written in one ``write`` call, so a kill leaves at most one cut-off last
    line, which :func:`read_jsonl` drops. A new file gets ordinary permissions.

    Returns:
        The number of rows appended.
    """
    path = Path(path)
    lines = [json_line(r) for r in rows]
    if not lines:
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8", newline="\n") as fh:
        fh.write("".join(lines))
        fh.flush()
        os.fsync(fh.fileno())
    return len(lines)


def iter_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """The complete JSON-object lines of a JSONL file that may have been cut off by a kill.

    A last line without its newline was being written when the writer stopped: it is
    dropped, as are lines that are not JSON objects. A missing file yields nothing.
    """
    path = Path(path)
    if not path.exists():
        return
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.endswith("\n"):
                break
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                yield row


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Every complete row of a JSONL file (see :func:`iter_jsonl`)."""
    return list(iter_jsonl(path))
