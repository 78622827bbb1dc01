"""The ``rods`` command line, run as a user runs it: in a subprocess.

Exit codes, one-line errors, what is written (and what is not), resuming, progress output.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from rods_agent import cli
from rods_env.task import ToolCall, dump_tasks

ROOT = Path(__file__).resolve().parents[2]


def rods(*argv: str, umask: int | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``rods ARGV`` in a fresh interpreter; returns the finished process."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "rods_agent.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        preexec_fn=(lambda: os.umask(umask)) if umask is not None else None,
    )


def rods_on_a_terminal(*argv: str, timeout: float = 300) -> tuple[int, list[str]]:
    """Run ``rods ARGV`` with stdout and stderr on a pseudo-terminal (160 columns), as a user
    at a shell sees it; returns the exit code and the screen lines (bar redraws split)."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rods_agent.cli", *argv], stdout=slave, stderr=slave, env=env
    )
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    rc = proc.wait(timeout=30)
    text = out.decode("utf-8", errors="replace").replace("\r", "\n")
    return rc, [line for line in text.split("\n") if line.strip()]


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in err and err.count("\n") == 0, err
    for needle in needles:
        assert needle in err, err
    return err


# -- the command itself ---------------------------------------------------------------------------
def test_no_command_prints_help():
    proc = rods()
    assert proc.returncode == 2
    for name in ("demo", "eval", "synth"):
        assert name in proc.stdout


def test_a_command_imports_only_its_own_module():
    code = (
        "import sys\nfrom rods_agent import cli\n"
        "assert cli.main(['demo', '--env', 'retail', '--limit', '1']) == 0\n"
        "print(sorted(m for m in sys.modules if m.startswith('rods_agent.commands') or m == 'torch'))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (
        proc.stdout.strip().splitlines()[-1]
        == "['rods_agent.commands', 'rods_agent.commands.demo']"
    )


def test_missing_optional_dependency_is_a_one_line_error(monkeypatch, capsys):
    def run(args):
        raise ModuleNotFoundError("No module named 'torch'", name="torch")

    real = cli.importlib.import_module

    def fake_import(name):
        if name == "rods_agent.commands.demo":
            return types.SimpleNamespace(run=run, add_arguments=real(name).add_arguments)
        return real(name)

    monkeypatch.setattr(cli.importlib, "import_module", fake_import)
    assert cli.main(["demo"]) == 2
    err = capsys.readouterr().err
    assert "optional dependency 'torch'" in err and "Traceback" not in err


def test_a_bug_in_rods_itself_is_not_hidden(monkeypatch):
    def run(args):
        raise ModuleNotFoundError("No module named 'rods_env.nope'", name="rods_env.nope")

    real = cli.importlib.import_module
    monkeypatch.setattr(
        cli.importlib,
        "import_module",
        lambda n: (
            types.SimpleNamespace(run=run, add_arguments=real(n).add_arguments)
            if n == "rods_agent.commands.demo"
            else real(n)
        ),
    )
    with pytest.raises(ModuleNotFoundError):
        cli.main(["demo"])


# -- rods demo -------------------------------------------------------------------------------------
def test_demo_takes_domain_names_and_says_which_split_it_ran():
    proc = rods(
        "demo", "--env", "retail", "--env", "rods/Airline-v0", "--split", "train", "--limit", "2"
    )
    assert proc.returncode == 0, proc.stderr
    header, *rows = proc.stdout.strip().splitlines()
    assert header.split()[:3] == ["env", "split", "agent"]
    assert len(rows) == 6
    oracle = [r.split() for r in rows if r.split()[2] == "oracle"]
    assert [r[:2] for r in oracle] == [["rods/Retail-v0", "train"], ["rods/Airline-v0", "train"]]
    assert all(r[4] == "1.000" for r in oracle)  # success of the oracle
    talk = [r.split() for r in rows if r.split()[2] == "talk-only"]
    assert all(r[4] == "0.000" for r in talk)


def test_demo_errors_list_what_is_valid():
    bad_split = rods("demo", "--split", "nope")
    assert bad_split.returncode == 2
    assert "'train', 'test', 'all'" in bad_split.stderr
    _one_line_error(
        rods("demo", "--env", "retial"),
        "no domain named 'retial'",
        "Did you mean 'retail'",
        "airline",
    )


def test_a_bad_option_value_is_a_usage_error_naming_it(tmp_path):
    proc = rods("eval", "--env", "retail", "--model", "m", "--extra-body", "{oops", "--out",
                str(tmp_path / "run"))  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith("rods eval: error: argument --extra-body: not JSON")
    )
    assert not (tmp_path / "run").exists()


# -- rods eval: files and reruns -------------------------------------------------------------------
def test_eval_writes_every_file_with_the_umask_permissions(tmp_path, retail_tasks):
    pool = tmp_path / "pool.jsonl"
    dump_tasks(retail_tasks[:2], pool)
    out = tmp_path / "oracle"
    argv = ["eval", "--env", "retail", "--pool", str(pool), "--engine", "oracle", "--k", "2",
            "--out", str(out), "--no-progress"]  # fmt: skip
    proc = rods(*argv, umask=0o022)
    assert proc.returncode == 0, proc.stderr
    assert "pass^2=1.000" in proc.stdout
    names = {
        "config.json",
        "results.jsonl",
        "episodes.jsonl",
        "summary.json",
        "summary.md",
        "pass_k.png",
        "tasks.jsonl",
    }
    assert {p.name for p in out.iterdir()} == names
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()} == dict.fromkeys(
        names, 0o644
    )

    # A rerun runs nothing; another model into the same folder is refused, not mixed in.
    again = rods(*argv)
    assert again.returncode == 0 and "resuming: 2 of 2 tasks already done" in again.stderr
    assert len(_lines(out / "episodes.jsonl")) == 4
    other = rods("eval", "--env", "retail", "--pool", str(pool), "--model", "x", "--out", str(out))
    _one_line_error(other, "different run", "model='oracle'")


def test_a_pool_whose_gold_fails_says_so(tmp_path, retail_tasks):
    good = retail_tasks[0]
    turn = good.turns[0].model_copy(
        update={"calls": (ToolCall(name="get_order_details", arguments={"order_id": "#W0"}),)}
    )
    bad = good.model_copy(update={"id": "broken-1", "turns": (turn, *good.turns[1:])})
    pool = tmp_path / "pool.jsonl"
    dump_tasks([good, bad], pool)
    out = tmp_path / "run"
    proc = rods("eval", "--env", "retail", "--pool", str(pool), "--split", "all", "--engine",
                "oracle", "--out", str(out))  # fmt: skip
    err = _one_line_error(proc, "gold calls of 1 of 2 tasks fail", "broken-1")
    assert "reachable" not in err
    assert not out.exists()


def test_a_config_of_the_other_command_is_one_line_naming_the_right_one():
    quickstart = ROOT / "configs" / "experiment" / "quickstart.yaml"
    proc = rods("train", "--config", str(quickstart))
    _one_line_error(proc, "is a `rods experiment` config", f"run `rods experiment {quickstart}`")
    simulated = ROOT / "configs" / "train" / "simulated.yaml"
    proc = rods("experiment", str(simulated))
    _one_line_error(proc, "is a `rods train` config", f"run `rods train --config {simulated}`")


def test_engine_vllm_without_vllm_leaves_no_folder(tmp_path, tiny_model_dir):
    # vLLM made unimportable in the child (sys.modules[name] = None is how Python marks a
    # module that cannot be imported), so this runs alike with and without vLLM installed
    out = tmp_path / "run"
    no_vllm = (
        "import sys; sys.modules['vllm'] = None; from rods_agent.cli import main; sys.exit(main())"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", no_vllm, "eval", "--env", "retail", "--engine", "vllm",
         "--model", str(tiny_model_dir), "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    _one_line_error(proc, "needs vLLM", "setup.sh vllm")
    assert not out.exists()


@pytest.mark.parametrize(
    ("folder", "needle"),
    [
        ("nope", "does not exist"),
        ("empty", "is empty"),
        ("config-only", "lacks weights (model.safetensors or pytorch_model.bin) and a tokenizer"),
    ],
)
def test_model_load_errors_are_one_line_and_leave_no_folder(tmp_path, folder, needle):
    model = tmp_path / folder
    if folder != "nope":
        model.mkdir()
    if folder == "config-only":
        (model / "config.json").write_text("{}")
    out = tmp_path / "run"
    proc = rods("eval", "--env", "retail", "--engine", "transformers", "--model", str(model),
                "--out", str(out))  # fmt: skip
    _one_line_error(proc, needle, str(model))
    assert not out.exists()


def _tiny_eval(out: Path, model: Path, *extra: str) -> list[str]:
    return ["eval", "--env", "retail", "--limit", "1", "--engine", "transformers", "--model", str(model),
            "--max-turns", "1", "--max-tokens", "2", "--max-episode-tokens", "16000", "--seed", "0",
            "--out", str(out), *extra]  # fmt: skip


@pytest.mark.slow
def test_a_model_typo_does_not_lock_the_folder(tmp_path, tiny_model_dir):
    out = tmp_path / "run"
    typo = rods(*_tiny_eval(out, tmp_path / "tiny-qwne", "--no-progress"))
    _one_line_error(typo, "does not exist")
    assert not out.exists()
    fixed = rods(*_tiny_eval(out, tiny_model_dir, "--no-progress"))
    assert fixed.returncode == 0, fixed.stderr
    assert json.loads((out / "config.json").read_text())["model"] == str(tiny_model_dir)


@pytest.mark.slow
def test_progress_within_long_trials_and_no_progress_silences_every_bar(tmp_path, tiny_model_dir):
    rc, screen = rods_on_a_terminal(
        *_tiny_eval(tmp_path / "loud", tiny_model_dir, "--max-turns", "3")
    )
    assert rc == 0, screen
    assert any(line.startswith("Loading weights") for line in screen), screen
    # Before the first trial ends the bar already counts its turns and tokens.
    within = [line for line in screen if line.startswith("trials:") and "0/1" in line]
    assert any("turns 2, tokens" in line for line in within), screen
    rc, screen = rods_on_a_terminal(
        *_tiny_eval(tmp_path / "quiet", tiny_model_dir, "--no-progress")
    )
    assert rc == 0, screen
    assert not [line for line in screen if "%|" in line or "it/s" in line], screen
    assert screen[-1].startswith("rods eval: 1 tasks: pass^1=")


@pytest.mark.slow
def test_a_killed_eval_resumes_without_redoing_tasks(tmp_path, tiny_model_dir):
    out = tmp_path / "run"
    argv = ["eval", "--env", "retail", "--split", "test", "--limit", "5", "--engine", "transformers",
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

    again = rods(*argv)
    assert again.returncode == 0, again.stderr
    assert f"resuming: {n_before} of 5 tasks already done" in again.stderr
    after = results.read_text()
    assert after.startswith(before)  # finished tasks were kept, not redone
    ids = [r["task_id"] for r in _lines(results)]
    assert len(ids) == 5 == len(set(ids))
    episodes = _lines(out / "episodes.jsonl")
    assert sorted(e["task_id"] for e in episodes) == sorted(ids)
    assert json.loads((out / "summary.json").read_text())["tasks"] == 5


def test_an_unreachable_model_fails_loudly_and_is_retried_on_rerun(tmp_path):
    with socket.socket() as s:  # a loopback port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "down"
    argv = ["eval", "--env", "retail", "--limit", "2", "--engine", "openai",
            "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m", "--retries", "0",
            "--timeout", "2", "--out", str(out), "--no-progress"]  # fmt: skip
    first = rods(*argv)
    assert first.returncode == 1
    assert "every trial (2) ended in an engine or environment error" in first.stderr
    assert [r["termination"] for r in _lines(out / "results.jsonl")] == [["error"], ["error"]]
    # The rerun does not count those trials as done: it runs them again (and fails again).
    second = rods(*argv)
    assert second.returncode == 1 and "resuming" not in second.stderr
    episodes = _lines(out / "episodes.jsonl")
    assert len(episodes) == 2 and all("connection failed" in e["errors"][0] for e in episodes)


def test_eval_options_come_from_the_typed_dataclasses():
    from rods_agent.commands.eval import PoolOptions, RunOptions, UserOptions
    from rods_agent.console.options import option_table
    from rods_agent.engines import EngineOptions

    proc = rods("eval", "--help")
    assert proc.returncode == 0
    help_text = " ".join(proc.stdout.split())
    doc = (ROOT / "docs" / "evaluation.md").read_text()
    doc_rows = {
        line.split(" | ")[0].strip("| `") for line in doc.splitlines() if line.startswith("| `--")
    }
    flags = []
    for cls in (PoolOptions, EngineOptions, RunOptions, UserOptions):
        for flag, default, text in option_table(cls):
            flags.append(flag)
            assert flag in help_text and " ".join(text.split()) in help_text, flag
            assert f"| `{flag}` | {default} | {text} |" in doc, f"docs/evaluation.md: {flag}"
    assert doc_rows == set(flags)  # the docs list no option that does not exist
    assert len(flags) == len(set(flags))
