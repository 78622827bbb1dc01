"""Start ``rods serve`` on a free loopback port for a test, and stop it after."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.requires import require

ROOT = Path(__file__).resolve().parents[2]


def require_openenv() -> None:
    """Skip (fail in CI) unless OpenEnv is installed (scripts/setup.sh openenv)."""
    try:
        import openenv.core  # noqa: F401
    except ModuleNotFoundError:
        require(False, "OpenEnv is not installed", "bash scripts/setup.sh openenv")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def rods_server(
    env_id: str, *extra: str, timeout: float = 120.0, log: Path | None = None
) -> Iterator[str]:
    """``rods serve ENV_ID`` in a subprocess; yields its base URL. Its output goes to
    ``log`` when given (read it after), else to a pipe read only if it exits early."""
    import requests

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    argv: Sequence[str] = [
        sys.executable,
        "-m",
        "rods_agent.cli",
        "serve",
        env_id,
        "--port",
        str(port),
        *extra,
    ]
    sink = open(log, "w") if log is not None else subprocess.PIPE  # noqa: SIM115
    proc = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                output = proc.stdout.read() if proc.stdout else log.read_text() if log else ""
                pytest.fail(f"rods serve {env_id} exited: {output}")
            try:
                if requests.get(f"{url}/health", timeout=1).ok:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"rods serve {env_id} did not answer in {timeout} s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if log is not None:
            sink.close()  # type: ignore[union-attr]
