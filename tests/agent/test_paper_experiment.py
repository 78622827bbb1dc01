"""configs/experiment/paper.yaml, the RODS paper's setting as a ``rods experiment``: Qwen3-4B-Instruct-2507
on ``bfcl-paper`` (BFCL's 400 train tasks, the other 400 held out), static / envtuning / rods
from the base model, scored by BFCL's own numbers per category beside the paper's rows.

The whole protocol runs here with the tiny random model on a CPU (the mechanics: pools, the
base model's evaluation, every arm, each run's last checkpoint on the test split, the
summary); what it learns is not the point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rods_agent.experiment.config import load_experiment
from rods_env.errors import ConfigError
from rods_env.fileio import read_jsonl

ROOT = Path(__file__).resolve().parents[2]
PAPER = ROOT / "configs" / "experiment" / "paper.yaml"

TINY = [
    # the tiny random model (train.model.path null: built once under <out>/tiny-model), small
    "train.model.path=null", "train.model.device=cpu", "train.model.engine=transformers",
    "train.model.gradient_checkpointing=false", "train.model.threads=1",
    "runs.seeds=[0]", "runs.steps=1",
    "pool.rl_tasks=2",          # spread over categories: 2 train tasks
    "eval.test_tasks=4",        # the test split in turns by category: one of each
    "train.rollout.tasks_per_step=2", "train.rollout.group_size=2",
    "train.rollout.max_turns=2", "train.rollout.max_new_tokens=8",
    # BFCL's openings take 3.3-7.8k of the tiny tokenizer's tokens (its tools' schemas)
    "train.rollout.max_tokens=12000", "train.rollout.batch_size=0",
    "train.grpo.micro_batch_size=4", "train.log.tensorboard=false",
]  # fmt: skip


@pytest.fixture(scope="module")
def bfcl():
    from environments.bfcl.apis import bfcl_missing
    from tests.requires import require

    require(bfcl_missing() is None, "bfcl-eval is not installed", "bash scripts/setup.sh bfcl")


# -- the configuration ---------------------------------------------------------------------------
def test_the_paper_config_is_the_papers_setting_with_equal_rollouts_across_arms():
    config = load_experiment(PAPER)
    assert config.env == "bfcl-paper" and config.benchmark and config.start == "base"
    assert config.runs.modes == ["static", "envtuning", "rods"]
    assert not config.train.warm_start.enabled and config.pool.validation == 0
    assert config.pool.rl_tasks == 0 and config.eval.test_tasks == 0  # all 400 and 400
    train = config.train
    assert (train.rollout.tasks_per_step, train.rollout.group_size) == (32, 16)
    assert (train.grpo.lr, train.grpo.kl_coef) == (1e-6, 0.1)
    assert (train.grpo.clip_low, train.grpo.clip_high) == (0.2, 0.28)
    assert train.grpo.loss_agg == "seq-mean-token-mean" and train.data.capacity == 800
    assert train.model.device == "cuda" and train.model.path.endswith("Qwen3-4B-Instruct-2507")


def test_every_value_of_the_paper_config_names_its_source():
    """Each setting line carries a comment that starts with its source."""
    sources = ("RODS (abstract)", "ET ", "ours", "replace:")
    for number, line in enumerate(PAPER.read_text().splitlines(), 1):
        text = line.split("#", 1)
        _key, _, value = text[0].partition(":")
        if not value.strip():  # a section, a comment or a blank line
            continue
        assert len(text) == 2, (
            f"configs/experiment/paper.yaml:{number}: {line.strip()} has no source"
        )
        assert text[1].strip().startswith(sources), (
            f"configs/experiment/paper.yaml:{number}: {text[1]}"
        )


@pytest.mark.parametrize(
    ("override", "refusal"),
    [
        (
            "train.warm_start.enabled=true",
            "train.warm_start.enabled: env bfcl-paper is a benchmark",
        ),
        ("pool.validation=4", "pool.validation: without a warm start"),
        ("runs.modes=[static,rods-expand]", "runs.modes has rods-expand"),
        ("eval.final_variants=2", "eval.final_variants / eval.final_fresh synthesize"),
        ("pool.rl_from=synthesized", "pool.rl_from: synthesized are the warm start's tasks"),
        ("env=bfcl", "env: bfcl has no train split of its own"),
    ],
)
def test_meaningless_combinations_are_refused_in_one_line(override, refusal):
    with pytest.raises(ConfigError, match=refusal.replace("(", r"\(").replace(".", r"\.")) as exc:
        load_experiment(PAPER, [override])
    assert "\n" not in str(exc.value)


# -- the whole protocol on a CPU -----------------------------------------------------------------
@pytest.mark.slow
def test_the_paper_experiment_runs_end_to_end_with_a_tiny_model(tmp_path, bfcl):
    """Pools from bfcl-paper's halves, the base model on the test split, static / envtuning /
    rods for a step each, each run's last checkpoint on the test split, and the summary:
    BFCL's numbers per category per arm with the paper's rows; no test task in any pool;
    optimizer steps by the one rule; a rerun finds everything done."""
    out = tmp_path / "paper"
    command = [
        sys.executable,
        "-m",
        "rods_agent.cli",
        "experiment",
        str(PAPER),
        f"out={out}",
        *TINY,
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "runs: rods seed 0 (run 3 of 3)" in proc.stderr

    from environments.bfcl.split import paper_split

    split = paper_split()
    pools = json.loads((out / "pools" / "done.json").read_text())
    assert pools == {"train_seeds": 400, "rl_pool": 2, "validation": 0, "test": 400,
                     "synthesized": 0}  # fmt: skip
    test_ids = {t["id"] for t in read_jsonl(out / "pools" / "test.jsonl")}
    assert test_ids == {t for t, side in split.items() if side == "test"}
    first = [t["skill"] for t in read_jsonl(out / "pools" / "test.jsonl")[:4]]
    assert sorted(first) == ["base", "long_context", "miss_func", "miss_param"]

    summary = json.loads((out / "summary.json").read_text())
    for mode in ("static", "envtuning", "rods"):
        run = out / "runs" / f"{mode}-s0"
        # no test task entered the run's pool: not at the start, not after it
        started = {t["id"] for t in read_jsonl(run / "pool.jsonl")}
        assert started and not started & test_ids, mode
        for task in read_jsonl(run / "pool.jsonl"):
            parent = (task.get("provenance") or {}).get("parent_id") or task["id"]
            assert split.get(parent) == "train", (mode, task["id"])
        rows = [r for r in read_jsonl(run / "metrics.jsonl") if "step" in r]
        assert [r["step"] for r in rows] == [0] and rows[0]["terminations"]["error"] == 0
        # the one update rule: an optimizer step exactly when a group had reward variance
        # (a token with a non-zero advantage; the KL term alone takes none), in every arm
        for r in rows:
            assert r["optimizer_steps"] == (1 if r["effective_group_ratio"] > 0 else 0), mode
            episodes = sum(r["terminations"].values())
            assert episodes == 2 * 2, mode  # tasks_per_step x group_size: equal rollouts
        assert summary["modes"][mode]["optimizer_steps"] == sum(r["optimizer_steps"] for r in rows)
        exported = out / "final" / "test-split" / "step-1" / "models" / f"{mode}-s0"
        assert json.loads((exported / "rods_export.json").read_text())["steps"] == 1
    assert [r["mode"] for r in _configs(out)] == ["static", "envtuning", "rods"]
    same = {(c["rollout"]["tasks_per_step"], c["rollout"]["group_size"], c["steps"],
             c["grpo"]["epochs"]) for c in _configs(out)}  # fmt: skip
    assert same == {(2, 2, 1, 1)}  # equal rollouts and optimizer-step rule across arms

    bench = summary["benchmark"]
    assert bench["title"] == "BFCL-Paper" and bench["tasks"] == 4
    assert bench["columns"] == ["overall", "base", "miss_func", "miss_param", "long_context"]
    assert list(bench["models"]) == ["base", "static", "envtuning", "rods"]
    for name, m in bench["models"].items():
        assert m["scores"]["overall"] is None  # 4 of 400: BFCL computes no overall
        assert all(m["scores"][c] is not None for c in bench["columns"][1:]), name
    table = (out / "summary.md").read_text()
    assert "## BFCL-Paper: the benchmark's own numbers on the test split" in table
    assert "| model | overall | base | miss_func | miss_param | long_context |" in table
    assert (
        "| paper: RODS (Qwen3-4B-Instruct-2507) | 56.00 | 68.00 | 59.00 | 44.00 | 53.00 |" in table
    )
    assert "| paper: base model (Qwen3-4B-Instruct-2507) | 22.13 | - |" in table
    assert "not confirmed" in table
    again = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "evaluating" not in again.stderr and "runs: static" not in again.stderr


def _configs(out: Path) -> list[dict]:
    import yaml

    return [
        yaml.safe_load((out / "runs" / f"{mode}-s0" / "run.yaml").read_text())
        for mode in ("static", "envtuning", "rods")
    ]


# -- the pieces, fast ----------------------------------------------------------------------------
def test_the_paper_rows_are_kept_once_and_printed_beside_an_evaluation():
    """PAPER_RESULTS is the one place of the quoted numbers; an evaluation of bfcl-paper
    prints its own row above them in BFCL's column order, another benchmark prints none."""
    from rods_agent.evaluation.scores import PAPER_RESULTS, EvalSummary, paper_results

    table = PAPER_RESULTS["bfcl-paper"]
    assert paper_results("BFCL-Paper") is table and paper_results("BFCL") is None
    rods = next(r for r in table.rows if r.arm == "rods")
    categories = [rods.scores[c] for c in ("base", "miss_func", "miss_param", "long_context")]
    assert sum(categories) / 4 == pytest.approx(rods.scores["overall"])  # 56.00
    assert [r.arm for r in table.rows] == [None, "static", "envtuning", "rods"]
    numbers = {"overall": 0.25, "base": 0.5, "miss_func": 0.0, "miss_param": 0.25,
               "long_context": 0.25}  # fmt: skip
    summary = EvalSummary.from_results([], 1, {"model": "m"}, {"BFCL-Paper": numbers})
    md = summary.markdown()
    assert "| model | overall | base | miss_func | miss_param | long_context |" in md
    assert "| this evaluation (`m`, 0 tasks) | 25.00 | 50.00 | 0.00 | 25.00 | 25.00 |" in md
    assert "| paper: environment augmentation (Qwen3-4B-Instruct-2507) | 50.50 | - |" in md
    assert "not confirmed" in md
    assert summary.to_dict()["paper"]["BFCL-Paper"]["model"] == "Qwen3-4B-Instruct-2507"
    other = EvalSummary.from_results([], 1, {"model": "m"}, {"BFCL": numbers})
    assert "paper:" not in other.markdown() and "paper" not in other.to_dict()


def test_the_overall_interval_is_the_mean_of_category_means_resampled_within_each():
    from rods_agent.experiment.stats import bootstrap_ci, stratified_ci

    a, b = [[1.0, 1.0, 0.0, 0.0]] * 2, [[1.0, 0.0]] * 2  # category means 0.5 and 0.5
    iv = stratified_ci([a, [[0.0, 0.0]] * 2])
    assert iv.mean == pytest.approx(0.25) and iv.tasks == 6 and iv.seeds == 2
    same = stratified_ci([[[0.3] * 4] * 3, [[0.7] * 2] * 3])
    assert same.low == same.high == pytest.approx(0.5)
    # one stratum: the plain two-way bootstrap's mean
    assert stratified_ci([b]).mean == bootstrap_ci(b).mean
    with pytest.raises(ValueError, match="same seeds"):
        stratified_ci([a, [[1.0]]])


def test_rods_eval_takes_a_subset_of_a_benchmarks_own_tasks(tmp_path, bfcl):
    """``rods eval --env bfcl-paper --pool FILE`` (rods experiment's test split): the
    benchmark's own views of the file's tasks; a task it does not know is refused."""
    from rods_agent.commands.eval import benchmark_subset
    from rods_env.registry import load_any_domain
    from rods_env.task import dump_tasks

    domain = load_any_domain("bfcl-paper")
    test = domain.seed_tasks("test")[:3]
    edited = test[0].model_copy(update={"turns": test[0].turns[:1]})
    dump_tasks([edited, *test[1:]], tmp_path / "test.jsonl")
    tasks = benchmark_subset(domain, str(tmp_path / "test.jsonl"), "all")
    assert [t.id for t in tasks] == [t.id for t in test] and tasks[0].turns == test[0].turns
    assert benchmark_subset(domain, str(tmp_path / "test.jsonl"), "test") == tasks
    with pytest.raises(ConfigError, match="no tasks of bfcl-paper in split 'train'"):
        benchmark_subset(domain, str(tmp_path / "test.jsonl"), "train")
    stranger = test[1].model_copy(update={"id": "multi_turn_base_9999"})
    dump_tasks([stranger], tmp_path / "odd.jsonl")
    with pytest.raises(ConfigError, match="not bfcl-paper's"):
        benchmark_subset(domain, str(tmp_path / "odd.jsonl"), "all")


def test_the_summary_gives_bfcls_numbers_per_arm_as_the_mean_over_run_seeds(tmp_path, bfcl):
    """From the stages' files alone: every test task scored by the base model and each arm
    at two seeds; per category the mean over seeds of BFCL's accuracy, the overall BFCL's
    mean of the four, with intervals, and the paired pass^1 difference to the base."""
    from rods_agent.experiment.summary import collect_benchmark, markdown
    from rods_env.registry import load_any_domain
    from rods_env.task import dump_tasks

    config = load_experiment(PAPER, [f"out={tmp_path}", "runs.seeds=[0,1]", "runs.steps=3",
                                     "runs.modes=[static,rods]"])  # fmt: skip
    test = load_any_domain("bfcl-paper").seed_tasks("test")
    (tmp_path / "pools").mkdir()
    dump_tasks(test, tmp_path / "pools" / "test.jsonl")

    def write(folder: Path, passes) -> None:
        folder.mkdir(parents=True)
        rows = [{"task_id": t.id, "progress": [1.0 * passes(t)], "success": [passes(t)]}
                for t in test]  # fmt: skip
        (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    final = tmp_path / "final" / "test-split" / "step-3"
    for seed in (0, 1):
        write(tmp_path / "eval" / f"base-s{seed}", lambda t: False)
        write(final / f"static-s{seed}", lambda t: t.skill == "base")
        # rods: every base task, and miss_func at seed 1 only
        write(final / f"rods-s{seed}",
              lambda t, s=seed: t.skill == "base" or (s == 1 and t.skill == "miss_func"))  # fmt: skip
    bench = collect_benchmark(config, tmp_path, {"rods": "rods (resample)"})
    assert bench is not None and bench["tasks"] == 400
    rods = bench["models"]["rods"]
    assert rods["scores"] == pytest.approx({"overall": (1.0 + 0.5) / 4, "base": 1.0,
                                            "miss_func": 0.5, "miss_param": 0.0,
                                            "long_context": 0.0})  # fmt: skip
    assert rods["intervals"]["base"]["low"] == 1.0 and rods["intervals"]["overall"]["tasks"] == 400
    assert rods["pass1_vs_base"]["mean"] == pytest.approx(0.375)
    assert bench["models"]["static"]["scores"]["overall"] == pytest.approx(0.25)
    md = markdown(config, {"modes": {}, "benchmark": bench})
    assert (
        "| rods (resample) | 37.50 [" in md
        and "| base model (`Qwen3-4B-Instruct-2507`) | 0.00" in md
    )
    assert "| paper: fixed-data GRPO (Qwen3-4B-Instruct-2507) | 50.00 | - | - | - | - | - |" in md


def test_without_a_warm_start_the_base_model_is_each_runs_step_0(tmp_path, monkeypatch):
    """On a rods domain too: no warm start, the base model evaluated on the test split at
    every run seed (the runs' step 0), and the runs start from it."""
    import yaml

    from rods_agent.experiment import runner

    seen: list[tuple[str, str]] = []

    def child(args, log, threads, **_):
        if args[0] == "eval":
            out = Path(args[args.index("--out") + 1])
            seen.append(("eval", out.name))
            out.mkdir(parents=True, exist_ok=True)
            (out / "summary.json").write_text(
                json.dumps({"mean_progress": 0.1, "pass_k": {"1": 0}})
            )
        else:
            run = yaml.safe_load(Path(args[args.index("--config") + 1]).read_text())
            seen.append(("train", run["model"]["path"]))
            (Path(run["out"]) / "metrics.jsonl").write_text('{"step": 0}\n')

    monkeypatch.setattr(runner, "_child", child)
    monkeypatch.setattr(runner, "_model_path", lambda path: "base-folder")
    config = load_experiment(
        ROOT / "configs" / "experiment" / "learning-cpu.yaml",
        [f"out={tmp_path}", "train.warm_start.enabled=false", "pool.validation=0",
         "runs.modes=[static]", "runs.seeds=[0,1]", "runs.parallel=1"],
    )  # fmt: skip
    assert config.start == "base"
    experiment = runner.Experiment(config)
    (tmp_path / "pools").mkdir()
    experiment.runs(experiment.base())
    assert seen == [("eval", "base-s0"), ("eval", "base-s1"), ("train", "base-folder"),
                    ("train", "base-folder")]  # fmt: skip
