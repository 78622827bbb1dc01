"""``rods experiment``: static vs filter vs rods from one warm start, at equal rollouts.

The protocol (docs/learning.md), in stages; each writes its results before the next
starts, and a rerun skips what is done (a run killed mid-way resumes from its checkpoint):

1. **pools** -- the domain's train seeds split into the validation split (held out) and
   the train seeds; variants synthesized from the train seeds (the warm start's data: no
   test task, no test customer).
2. **warm start** -- supervised fine-tuning on the oracle's transcripts of the synthesized
   pool, one epoch at a time, each epoch evaluated on the validation split; it stops when
   validation progress has not risen for ``warm_start.patience`` epochs and keeps the
   best epoch. The base model and the kept one are evaluated on the test split.
3. **runs** -- ``rods train`` in every mode and seed from the kept model (no warm start of
   its own), the same steps, tasks per step and group size, evaluated on the test split
   every ``eval.every`` steps.
4. **final** (``eval.final_variants`` or ``eval.final_fresh`` > 0) -- the test split widened
   by variants synthesized from its seeds and by fresh test tasks (test customers only);
   the warm start and each run's last checkpoint (``rods export``) evaluated on it at every
   run seed. Stages 3 and 4 share one queue of ``runs.parallel`` workers: a run's
   evaluation follows it in its worker, and the warm start's at a seed follows that seed's
   runs, so no core idles while the last run of stage 3 ends (each evaluation is the same
   computation either way; the stage's ``done.json`` is written once all are).
5. **summary** -- held-out progress and pass^1 per mode and step with two-way bootstrap
   95% intervals over tasks and seeds, the paired difference of each mode to ``static``,
   effective group ratio, pool by generation and terminations per mode; ``rods report``'s
   plots of every run.

Without a warm start (``train.warm_start.enabled: false``) stage 2 is the base model's
evaluation on the test split at every run seed, and the runs start from ``train.model.path``.
On a benchmark with a train split of its own (``env: bfcl-paper``, the RODS paper's setting;
configs/experiment/paper.yaml) there is no warm start: the pools are its train half (the runs' starting
pool) and its test half, nothing is synthesized before the runs, and the final stage always
runs: each run's last checkpoint scored on the test split at its seed, so the summary gives
the benchmark's own numbers (BFCL's accuracy per category and overall) per arm beside the
base model's and the paper's.

Every stage runs in a child process (``rods sft``, ``rods eval``, ``rods train``,
``rods export``) whose
output goes to a ``log.txt`` beside its results; a failing stage stops the experiment with
its last lines. While a child runs, the experiment's line says what it reports (SFT
batches, episodes evaluated, a step's rollouts: ``log.progress.json`` beside the log, see
:mod:`rods_agent.console.progress`; :mod:`rods_agent.experiment.stages`), at most every
:data:`~rods_agent.experiment.stages.SAY_EVERY` seconds, with the time left
from measured rates only.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from rods_agent.experiment.config import ExperimentConfig
from rods_agent.experiment.stages import (
    Clock,
    StageWatch,
    StepWatch,
    steps_done,
)
from rods_agent.experiment.stages import run_child as _child
from rods_agent.training.config import config_yaml
from rods_env.errors import ConfigError, RodsError
from rods_env.fileio import atomic_write, read_jsonl, write_json

EXPERIMENT_FILE = "experiment.yaml"
DONE = "done.json"


@dataclass
class Paths:
    """Where each stage keeps its files under the experiment directory."""

    root: Path

    @property
    def pools(self) -> Path:
        """The task sets."""
        return self.root / "pools"

    @property
    def warm(self) -> Path:
        """The warm start's epochs and the kept model."""
        return self.root / "warm-start"

    @property
    def evals(self) -> Path:
        """Evaluations outside the runs (the base and the warm-started model)."""
        return self.root / "eval"

    def run(self, mode: str, seed: int) -> Path:
        """A GRPO run's directory."""
        return self.root / "runs" / f"{mode}-s{seed}"

    def final(self, variants: int) -> Path:
        """The final evaluation on the test split widened by ``variants`` per test seed (the
        runs' checkpoints under ``step-S/``)."""
        return self.root / "final" / f"variants-{variants}"

    @property
    def final_test(self) -> Path:
        """A benchmark experiment's final evaluation on its test split (the runs'
        checkpoints under ``step-S/``)."""
        return self.root / "final" / "test-split"

    def base(self, seed: int) -> Path:
        """The base model's evaluation on the test split at run seed ``seed`` (without a
        warm start: the runs' step 0)."""
        return self.evals / f"base-s{seed}"


def _done(folder: Path) -> dict[str, Any] | None:
    path = folder / DONE
    return json.loads(path.read_text()) if path.exists() else None


def _mark_done(folder: Path, data: dict[str, Any]) -> None:
    write_json(folder / DONE, data)


# -- the experiment -------------------------------------------------------------------------
class Experiment:
    """One experiment directory and its stages (see the module doc).

    Args:
        config: The experiment's configuration.
        write: Where progress lines go (default: stderr).
    """

    def __init__(
        self, config: ExperimentConfig, write: Callable[[str], None] | None = None
    ) -> None:
        self.config = config
        self.paths = Paths(Path(config.out))
        self.write = write or (lambda line: print(line, file=sys.stderr, flush=True))
        self.clock = Clock(self.paths.root / "timings.json", config, self.write)

    # -- the whole ----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Run (or resume) every stage; returns the summary."""
        self._check_engine()
        self._check_resume()
        self.pools()
        model = self.warm_start() if self.config.train.warm_start.enabled else self.base()
        plan = self._final_plan(model)
        self.runs(model, plan.jobs if plan else None)
        self.final(model)
        from rods_agent.experiment.summary import write_summary

        summary = write_summary(self.config, self.paths.root)
        self.clock.say("done", f"summary in {self.paths.root / 'summary.md'}")
        return summary

    def _check_engine(self) -> None:
        """Refuse, before any stage, a generator this interpreter cannot run: the children
        (warm start, evaluations, runs) run with the same Python."""
        if self.config.train.model.engine != "vllm":
            return
        from rods_agent.engines.vllm_engine import vllm_available

        if not vllm_available():
            raise ConfigError(
                "train.model.engine: vllm needs vLLM in the Python that runs the experiment; "
                "on CPU run `bash scripts/setup.sh vllm`, then `.venv-vllm/bin/rods experiment ...`"
            )

    def _check_resume(self) -> None:
        """Write the configuration, or refuse a directory holding another experiment."""
        path = self.paths.root / EXPERIMENT_FILE
        text = self._config_text()
        if path.exists():
            before = path.read_text(encoding="utf-8")
            changed = _changed_keys(before, text)
            raised = "runs.steps" in changed and self._steps_raised(_runs_steps(before))
            if raised:
                changed.remove("runs.steps")  # the runs continue (see runs)
            added = "runs.seeds" in changed and self._seeds_added(_runs_seeds(before))
            if added:
                changed.remove("runs.seeds")  # the new seeds' runs run; the others are kept
            if changed:
                diff = ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else "")
                raise ConfigError(
                    f"{self.paths.root} holds an experiment with other settings ({diff}); "
                    "use another out= or delete it"
                )
            if not raised and not added:
                return
        atomic_write(path, text)

    def _seeds_added(self, ran: list[int] | None) -> bool:
        """Whether ``runs.seeds`` adds seeds to ``ran``, the run seeds on disk (more seeds
        to narrow an interval: the pools and the warm start do not depend on them); dropping
        a seed is refused (its runs would be left out of the summary unseen)."""
        now = self.config.runs.seeds
        if ran is None:
            return False
        gone = [s for s in ran if s not in now]
        if gone:
            raise ConfigError(
                f"runs.seeds: {self.paths.root} holds runs of seeds {ran}; a resume may add "
                f"seeds, not drop {gone}"
            )
        return True

    def _steps_raised(self, ran: int | None) -> bool:
        """Whether ``runs.steps`` rose from ``ran``, the steps of the runs on disk, in a way
        the runs can continue; lowering it, or raising it past a decaying learning rate's
        end, is refused. ``None`` (not recorded): not a raise."""
        now, schedule = self.config.runs.steps, self.config.train.grpo.scheduler
        if ran is None:
            return False
        if now < ran:
            raise ConfigError(
                f"runs.steps: {self.paths.root} holds runs of {ran} steps; a resume may raise "
                f"it (the runs continue), not lower it to {now}"
            )
        if schedule != "constant":
            raise ConfigError(
                f"runs.steps: the runs of {self.paths.root} decayed their learning rate "
                f"({schedule}) towards step {ran}; more steps would not continue them as "
                "planned: use another out="
            )
        return True

    def _config_text(self) -> str:
        from omegaconf import OmegaConf

        return OmegaConf.to_yaml(OmegaConf.create(self.config.model_dump(mode="json")))

    # -- 1. pools -----------------------------------------------------------------------------
    def pools(self) -> dict[str, Any]:
        """The validation split, the train seeds and the synthesized warm-start pool."""
        folder = self.paths.pools
        done = _done(folder)
        if done is not None:
            return done
        if self.config.benchmark:
            return self._benchmark_pools()
        self.clock.say("pools: splitting the train seeds, synthesizing the warm start's pool", "")
        from rods_env.registry import load_domain
        from rods_env.synthesis import SynthesisConfig, TaskPool
        from rods_env.task import dump_tasks

        cfg = self.config
        domain = load_domain(cfg.env)
        train = domain.seed_tasks("train")
        test = domain.seed_tasks("test")
        if cfg.pool.skills is not None:
            unknown = sorted(set(cfg.pool.skills) - {s.name for s in domain.skills})
            if unknown:
                known = ", ".join(s.name for s in domain.skills)
                raise ConfigError(
                    f"pool.skills: {domain.name} has no skill {unknown[0]!r}; skills: {known}"
                )
            train = [t for t in train if t.skill in cfg.pool.skills]
            test = [t for t in test if t.skill in cfg.pool.skills]
        if cfg.pool.validation >= len(train):
            raise ConfigError(
                f"pool.validation: {cfg.pool.validation} of {len(train)} train seeds leaves "
                "none to train on"
            )
        ranked = sorted(train, key=lambda t: _stable_hash(cfg.pool.seed, t.id))
        validation = sorted(ranked[: cfg.pool.validation], key=lambda t: t.id)
        keep = {t.id for t in validation}
        seeds = [t for t in train if t.id not in keep]
        rl = [t for t in ranked if t.id not in keep]
        rl = sorted(rl[: cfg.pool.rl_tasks] if cfg.pool.rl_tasks else rl, key=lambda t: t.id)
        pool = TaskPool(domains=domain)  # as rods synth builds one: duplicates left out
        for mode in cfg.pool.modes:
            synthesis = SynthesisConfig(
                per_seed=cfg.pool.per_seed,
                mode=mode,
                augment=tuple(cfg.pool.augment),
                seed=cfg.pool.seed,
            )
            _synthesize(synthesis, domain, seeds, pool)
        synth = list(pool)
        if cfg.pool.rl_from == "synthesized":
            n = cfg.warm_start.tasks or len(synth)
            rl = _spread(synth[:n], cfg.pool.rl_tasks or n, cfg.pool.seed)
        if not synth:
            raise ConfigError("pool: synthesis accepted no variant of the train seeds")
        folder.mkdir(parents=True, exist_ok=True)
        dump_tasks(seeds, folder / "train-seeds.jsonl")
        dump_tasks(rl, folder / "rl-pool.jsonl")
        dump_tasks(validation, folder / "validation.jsonl")
        dump_tasks(test, folder / "test.jsonl")
        dump_tasks(synth, folder / "synthesized.jsonl")
        data = {
            "train_seeds": len(seeds),
            "rl_pool": len(rl),
            "validation": len(validation),
            "test": len(test),
            "synthesized": len(synth),
        }
        _mark_done(folder, data)
        return data

    def _benchmark_pools(self) -> dict[str, Any]:
        """A benchmark's own splits: the runs' starting pool from its train split
        (``pool.rl_tasks`` spread over its categories; 0: all), the test split (in turns
        over its categories, so ``eval.test_tasks`` takes a few of each); no validation
        split and nothing synthesized (there is no warm start)."""
        from rods_env.benchmark import BenchmarkDomain
        from rods_env.registry import load_any_domain
        from rods_env.task import dump_tasks

        cfg, folder = self.config, self.paths.pools
        self.clock.say(f"pools: {cfg.env}'s train and test splits", "")
        domain = load_any_domain(cfg.env)
        if not isinstance(domain, BenchmarkDomain):  # the configuration said it is one
            raise ConfigError(f"env: {cfg.env} is not a benchmark")
        domain.require()
        keep = cfg.train.data.keep_exploitable
        train = domain.training_tasks("train", keep_exploitable=keep)
        test = domain.seed_tasks("test")
        if cfg.pool.skills is not None:
            known = sorted({t.skill for t in [*train, *test]})
            unknown = sorted(set(cfg.pool.skills) - set(known))
            if unknown:
                raise ConfigError(
                    f"pool.skills: {domain.name} has no category {unknown[0]!r}; "
                    f"categories: {', '.join(known)}"
                )
            train = [t for t in train if t.skill in cfg.pool.skills]
            test = [t for t in test if t.skill in cfg.pool.skills]
        if not train or not test:
            raise ConfigError(f"pool: {domain.name} has no train or no test tasks here")
        rl = _spread(train, cfg.pool.rl_tasks or len(train), cfg.pool.seed)
        test = _in_turns(test)
        held = {t.id for t in test}
        leaked = [t.id for t in rl if t.id in held or t.split == "test"]
        if leaked:  # the benchmark's own split keeps them apart; this must not happen
            raise RodsError(f"pools: {leaked[0]} is a test task of {domain.name}")
        folder.mkdir(parents=True, exist_ok=True)
        dump_tasks(train, folder / "train-seeds.jsonl")
        dump_tasks(rl, folder / "rl-pool.jsonl")
        dump_tasks([], folder / "validation.jsonl")
        dump_tasks(test, folder / "test.jsonl")
        dump_tasks([], folder / "synthesized.jsonl")
        data = {
            "train_seeds": len(train),
            "rl_pool": len(rl),
            "validation": 0,
            "test": len(test),
            "synthesized": 0,
        }
        _mark_done(folder, data)
        return data

    # -- 2. warm start (or the base model) ----------------------------------------------------
    def base(self) -> str:
        """Without a warm start: the base model (``train.model.path``; the tiny model built
        once under ``<out>/tiny-model`` when null), evaluated on the test split at every run
        seed when ``eval.base_model`` (the runs' step 0); returns its folder."""
        cfg = self.config
        base = self._base_model()
        if cfg.eval.base_model:
            threads = cfg.train.model.threads if cfg.runs.parallel > 1 else None
            tests = self.paths.pools / "test.jsonl"

            def one(seed: int) -> None:
                self._evaluate(
                    base, tests, self.paths.base(seed), seed,
                    f"the base model on the test split (seed {seed})", threads,
                )  # fmt: skip

            _in_parallel([partial(one, seed) for seed in cfg.runs.seeds], cfg.runs.parallel)
        return base

    def _base_model(self) -> str:
        """The base model's folder: ``train.model.path``, or (null) the tiny random model,
        built once under ``<out>/tiny-model`` so that every stage uses the same one."""
        if self.config.train.model.path is not None:
            return _model_path(self.config.train.model.path)
        from rods_agent.training.learner import ensure_model

        return str(ensure_model(self._train_config(), self.paths.root))

    def _train_config(self, **overrides: Any) -> Any:
        """The experiment's ``train`` configuration with ``overrides`` (dotted keys)."""
        from rods_agent.training.config import TrainConfig

        data = self.config.train.model_dump(mode="json")
        data["env"] = [self.config.env]
        for key, value in overrides.items():
            node = data
            *parents, last = key.split(".")
            for p in parents:
                node = node[p]
            node[last] = value
        return TrainConfig.model_validate(data)

    def _evaluate(
        self,
        model: str,
        tasks: Path,
        out: Path,
        seed: int,
        what: str,
        threads: int | None = None,
        expect: int | None = None,
    ) -> dict[str, Any]:
        """Evaluate ``model`` on the tasks of ``tasks`` into ``out`` (``rods eval``; resumable),
        on ``threads`` cores (default: those of a stage running alone). Given ``expect``
        (tasks), an evaluation done on another number of tasks is resumed: ``rods eval``
        runs only the tasks it has no result for."""
        done = _done(out)
        if done is not None and (expect is None or _scored(out, expect)):
            return done
        rc = self.config.train.rollout
        mc = self.config.train.model
        n = self.config.eval.test_tasks if "test" in tasks.name else 0
        args = [
            "eval", "--env", self.config.env, "--pool", str(tasks), "--split", "all",
            "--engine", mc.engine, "--model", model, "--dtype", _dtype(mc.dtype, mc.device),
            "--device", _device(mc.device), "--seed", str(seed),
            "--temperature", str(rc.temperature), "--top-p", str(rc.top_p),
            "--max-tokens", str(rc.max_new_tokens), "--max-episode-tokens", str(rc.max_tokens),
            "--max-turns", str(rc.max_turns), "--prompt", rc.prompt,
            "--trials", str(self.config.eval.trials), "--concurrency", "64",
            "--no-progress", "--out", str(out),
        ]  # fmt: skip
        if n:
            args += ["--limit", str(n)]
        self.clock.say(f"evaluating {what}", "")
        t0 = time.monotonic()
        _child(
            args,
            out / "log.txt",
            threads or self.config.runs.threads_alone(mc.threads),
            watch=StageWatch(self.clock, f"evaluating {what}"),
        )
        self.clock.record("eval", time.monotonic() - t0)
        summary = json.loads((out / "summary.json").read_text())
        data = {
            "progress": summary["mean_progress"],
            "pass1": summary["pass_k"]["1"],
            "tasks": summary.get("tasks"),
        }
        _mark_done(out, data)
        return data

    def warm_start(self) -> str:
        """Fine-tune epoch by epoch until validation progress stops rising; returns the
        kept model's folder."""
        folder = self.paths.warm
        done = _done(folder)
        if done is not None:
            return str(done["model"])
        cfg, plan = self.config, self.config.warm_start
        pools = self.paths.pools
        base = self._base_model()
        history: list[dict[str, Any]] = []
        if cfg.eval.base_model:
            before = self._evaluate(
                base, pools / "validation.jsonl", folder / "epoch-0" / "eval-validation",
                cfg.train.seed, "the base model on the validation split",
            )  # fmt: skip
            history.append({"epoch": 0, "model": base, **before})
        best, best_epoch, previous = None, 0, base
        for epoch in range(1, plan.max_epochs + 1):
            out = folder / f"epoch-{epoch}"
            if _done(out) is None:
                left = partial(
                    self.clock.left,
                    epochs=plan.max_epochs - epoch + 1,
                    evals=plan.max_epochs - epoch + 3,
                    steps=len(cfg.runs.modes) * len(cfg.runs.seeds) * cfg.runs.steps,
                    now="epoch",
                )
                where = f"warm start: epoch {epoch} of at most {plan.max_epochs}"
                self.clock.say(where, left())
                run_cfg = self._train_config(
                    **{
                        "model.path": previous,
                        "data.pool": str(pools / "synthesized.jsonl"),
                        "data.split": "train",
                        "warm_start.epochs": 1,
                        "warm_start.tasks": plan.tasks,
                        "warm_start.measure": False,
                        "log.progress": False,
                        "seed": cfg.train.seed + epoch,  # a new shuffle each epoch
                        "model.threads": cfg.runs.threads_alone(cfg.train.model.threads),
                    }
                )
                out.mkdir(parents=True, exist_ok=True)
                atomic_write(out / "sft.yaml", config_yaml(run_cfg))
                t0 = time.monotonic()
                _child(
                    ["sft", "--config", str(out / "sft.yaml"), "--out", str(out)],
                    out / "log.txt",
                    cfg.runs.threads_alone(cfg.train.model.threads),
                    watch=StageWatch(self.clock, where, left),
                )
                self.clock.record("epoch", time.monotonic() - t0)
                _mark_done(out, json.loads((out / "sft.json").read_text()))
            score = self._evaluate(
                str(out / "model"), pools / "validation.jsonl", out / "eval-validation",
                cfg.train.seed, f"warm-start epoch {epoch} on the validation split",
            )  # fmt: skip
            history.append({"epoch": epoch, "model": str(out / "model"), **score})
            previous = str(out / "model")
            if best is None or score["progress"] > best:
                best, best_epoch = score["progress"], epoch
            elif epoch - best_epoch >= plan.patience:
                break
        kept = next(h for h in history if h["epoch"] == best_epoch)["model"]
        tests = {}
        if cfg.eval.base_model:
            tests["base"] = self._evaluate(
                base, pools / "test.jsonl", self.paths.evals / "base-test", cfg.train.seed,
                "the base model on the test split",
            )  # fmt: skip
        tests["warm"] = self._evaluate(
            kept, pools / "test.jsonl", self.paths.evals / "warm-test", cfg.train.seed,
            "the warm-started model on the test split",
        )  # fmt: skip
        _mark_done(folder, {"model": kept, "epoch": best_epoch, "history": history, "test": tests})
        return kept

    # -- 3. runs ------------------------------------------------------------------------------
    def runs(self, model: str, final: dict[str, Callable[[], None]] | None = None) -> None:
        """Every mode and seed from ``model``, resumable; ``runs.parallel`` of them at once
        (in the order of the seeds, so a protocol cut short stays balanced).

        Given the final stage's evaluations (``final``: name -> job, as :meth:`_final_plan`
        makes them), each run's evaluation follows it in the same worker, and the starting
        model's evaluation at a seed comes after that seed's runs: one queue, so no core
        waits for the slowest run of the stage before the evaluations begin. An evaluation
        computes what it would have computed in the final stage (same model, tasks, seed);
        :meth:`final` then finds them done and marks the stage."""
        cfg = self.config
        final = final or {}
        jobs = [(mode, seed) for seed in cfg.runs.seeds for mode in cfg.runs.modes]
        todo: list[Callable[[], None]] = []
        for index, (mode, seed) in enumerate(jobs):
            train = not _run_finished(self.paths.run(mode, seed), cfg.runs.steps)
            evaluate = final.get(f"{mode}-s{seed}")
            if train:
                step = partial(self._run_one, model, index, mode, seed, total=len(jobs))
                todo.append(step if evaluate is None else partial(_chain, step, evaluate))
            elif evaluate is not None:
                todo.append(evaluate)
            if mode == cfg.runs.modes[-1] and f"{cfg.start}-s{seed}" in final:
                todo.append(final[f"{cfg.start}-s{seed}"])
        _in_parallel(todo, cfg.runs.parallel)

    def _run_one(self, model: str, index: int, mode: str, seed: int, *, total: int) -> None:
        """One mode and seed's GRPO run, resumed where it stopped."""
        cfg = self.config
        out = self.paths.run(mode, seed)
        run_cfg = self._train_config(
            **{
                "mode": mode,
                "seed": seed,
                "steps": cfg.runs.steps,
                "out": str(out),
                "model.path": model,
                "warm_start.enabled": False,
                "data.pool": str(self.paths.pools / "rl-pool.jsonl"),
                "data.split": "train",
                # the held-out evaluations score the same tasks as the warm start's
                # (the test split of the chosen skills), not the domain's whole test split
                "data.eval_pool": str(self.paths.pools / "test.jsonl"),
                "log.eval_every": cfg.eval.every,
                "log.eval_tasks": cfg.eval.test_tasks,
                "log.eval_k": cfg.eval.trials,
                "log.progress": False,
            }
        )
        out.mkdir(parents=True, exist_ok=True)
        atomic_write(out / "run.yaml", config_yaml(run_cfg))
        where = f"runs: {mode} seed {seed} (run {index + 1} of {total})"
        runs_left = -(-(total - index) // cfg.runs.parallel)
        watch = StepWatch(self.clock, out, where, cfg.runs.steps, runs_left)
        watch.say()
        _child(
            ["train", "--config", str(out / "run.yaml"), "--resume"],
            out / "log.txt",
            cfg.train.model.threads,
            watch=watch,
        )
        _mark_done(out, {"steps": steps_done(out)})

    # -- 4. the final, wider evaluation ---------------------------------------------------------
    def final(self, model: str) -> dict[str, Any] | None:
        """The warm start (``model``) and each run's last checkpoint, evaluated on the test
        split widened by ``eval.final_variants`` variants per test seed, at every run seed
        (``runs.parallel`` evaluations at once; on a benchmark, :meth:`_final_plan`'s test
        split); None when there is no such stage. Evaluations done already (in the runs'
        queue, or by an earlier session) are kept."""
        plan = self._final_plan(model)
        if plan is None:
            return None
        done = _done(plan.folder)
        if done is not None and _scored_all(done, plan.count, list(plan.jobs)):
            return done
        _in_parallel(list(plan.jobs.values()), self.config.runs.parallel)
        data = {"tasks": plan.count, "evaluations": list(plan.jobs)}
        _mark_done(plan.folder, data)
        return data

    def _final_plan(self, model: str) -> FinalPlan | None:
        """The final stage's evaluations, each a job that does nothing when its evaluation
        is done (None when the experiment has no final stage).

        Widened (``eval.final_variants`` or ``eval.final_fresh``): the starting model at
        every run seed, then each run's last checkpoint (``rods export``), on the test split
        widened by variants of its seeds and fresh test tasks. On a benchmark
        (``cfg.benchmark``): each run's last checkpoint scored on the test split
        (``eval.test_tasks`` of it) at its seed; the base model's scores at the same seeds
        are the base stage's."""
        cfg = self.config
        runs = [f"{mode}-s{seed}" for seed in cfg.runs.seeds for mode in cfg.runs.modes]
        if cfg.benchmark:
            folder = self.paths.final_test / f"step-{cfg.runs.steps}"
            tasks = self.paths.pools / "test.jsonl"
            held = len(read_jsonl(tasks))
            count = min(cfg.eval.test_tasks, held) if cfg.eval.test_tasks else held
            widened, start, names = folder, None, runs
            what = f"after {cfg.runs.steps} steps on the test split"
        else:
            n = cfg.eval.final_variants
            if not n and not cfg.eval.final_fresh:
                return None
            widened = self.paths.final(n)
            folder = widened / f"step-{cfg.runs.steps}"  # more steps: evaluated again
            tasks = self._widened_tasks(widened, n)
            count = len(read_jsonl(tasks))
            start = cfg.start  # the model the runs started from: warm, or base
            names = [f"{start}-s{seed}" for seed in cfg.runs.seeds] + runs
            what = f"on the test split widened to {count} tasks"
        threads = cfg.train.model.threads if cfg.runs.parallel > 1 else None

        def one(name: str) -> None:
            who, seed = name.rsplit("-s", 1)
            out = widened / name if who == start else folder / name  # start: whatever the steps
            if _scored(out, count):
                return
            trained = model if who == start else self._exported(who, int(seed), folder)
            self._evaluate(trained, tasks, out, int(seed), f"{name} {what}", threads, count)

        return FinalPlan(folder, count, {name: partial(one, name) for name in names})

    def _widened_tasks(self, folder: Path, n: int) -> Path:
        """The test seeds, ``n`` resampled variants of each (synthesized once) and
        ``eval.final_fresh`` fresh test tasks per skill (drawn again when it changes)."""
        from rods_env.registry import load_domain
        from rods_env.seeds import FRESH, fresh_test_tasks
        from rods_env.task import dump_tasks, load_tasks

        path, meta = folder / "held-out.jsonl", folder / "held-out.json"
        fresh = self.config.eval.final_fresh
        if path.exists() and _fresh_of(meta) == fresh:
            return path
        domain = load_domain(self.config.env)
        if path.exists():  # the variants as they were; the fresh tasks drawn again
            tasks = [t for t in load_tasks(path) if f"-{FRESH}" not in t.id]
        else:
            tasks = self._variant_tasks(domain, n)
        if fresh:
            self.clock.say(f"final: drawing {fresh} fresh test tasks per skill", "")
            skills = sorted({t.skill for t in tasks if t.skill})
            tasks += fresh_test_tasks(domain, skills, fresh, avoid=tasks)
        leaked = [t.id for t in tasks if t.split != "test"]
        if leaked:  # synthesis keeps a variant on its seed's customers; this must not happen
            raise RodsError(f"final: task {leaked[0]} of the widened test split is not a test task")
        folder.mkdir(parents=True, exist_ok=True)
        dump_tasks(tasks, path)
        write_json(meta, {"final_fresh": fresh, "tasks": len(tasks)})
        return path

    def _variant_tasks(self, domain: Any, n: int) -> list[Any]:
        """The test seeds and ``n`` resampled variants of each."""
        from rods_env.synthesis import SynthesisConfig, TaskPool
        from rods_env.task import load_tasks

        test = load_tasks(self.paths.pools / "test.jsonl")
        if self.config.eval.test_tasks:  # the seeds the other evaluations score (rods eval --limit)
            test = test[: self.config.eval.test_tasks]
        if not n:
            return list(test)
        self.clock.say(f"final: synthesizing {_variants(n)} per test seed", "")
        pool = TaskPool(domains=domain)
        for task in test:
            pool.add(task)
        synthesis = SynthesisConfig(per_seed=n, mode="resample", seed=self.config.pool.seed)
        _synthesize(synthesis, domain, test, pool)
        return list(pool)

    def _exported(self, mode: str, seed: int, folder: Path) -> str:
        """The model folder of a run's checkpoint after ``runs.steps`` steps (``rods export``)."""
        steps = self.config.runs.steps
        out = folder / "models" / f"{mode}-s{seed}"
        if not (out / "rods_export.json").exists():
            _child(
                [
                    "export",
                    str(self.paths.run(mode, seed)),
                    "--step",
                    str(steps),
                    "--out",
                    str(out),
                ],
                folder / "models" / f"{mode}-s{seed}.log.txt",
                self.config.train.model.threads,
            )
        return str(out)


def _spread(tasks: Sequence[Any], k: int, seed: int) -> list[Any]:
    """``k`` of ``tasks`` covering as many skills and seed tasks as they hold, in their order.

    Skills take turns; within a skill, one variant of each seed task (in a seeded order)
    comes before a second of any. Taking the first ``k`` would take every variant of the
    first few seeds: the GRPO pool of the runs of 2026-12-02/03 was 4 seeds x 2 near-twin
    variants, and one of the five skills was missing.
    """
    queues: dict[str, list[Any]] = {}
    for skill in sorted({t.skill for t in tasks}):
        ranked = sorted(
            (t for t in tasks if t.skill == skill), key=lambda t: _stable_hash(seed, t.id)
        )
        seen: set[str] = set()
        first: list[Any] = []
        again: list[Any] = []
        for task in ranked:
            parent = task.provenance.parent_id or task.id
            (again if parent in seen else first).append(task)
            seen.add(parent)
        queues[skill] = first + again
    picked: list[Any] = []
    while len(picked) < k and any(queues.values()):
        for queue in queues.values():
            if queue and len(picked) < k:
                picked.append(queue.pop(0))
    order = {id(t): i for i, t in enumerate(tasks)}
    return sorted(picked, key=lambda t: order[id(t)])


def _in_turns(tasks: Sequence[Any]) -> list[Any]:
    """``tasks`` taken in turns from each skill (a benchmark's categories), each skill's in
    id order (numbers in ids compared as numbers): the first ``k`` hold every skill."""
    import re

    def key(task: Any) -> tuple[Any, ...]:
        parts = re.split(r"(\d+)", task.id)
        return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts)

    queues = [
        sorted((t for t in tasks if t.skill == skill), key=key)
        for skill in sorted({t.skill for t in tasks})
    ]
    out: list[Any] = []
    for i in range(max((len(q) for q in queues), default=0)):
        out += [q[i] for q in queues if i < len(q)]
    return out


def _synthesize(synthesis: Any, domain: Any, seeds: Sequence[Any], pool: Any) -> None:
    """Add the accepted variants of ``seeds`` to ``pool`` (as ``rods synth`` does: what the
    pool already holds counts as known, duplicates left out)."""
    from rods_env.synthesis import Synthesizer

    engine = Synthesizer(synthesis, domains=domain, known=pool.keys())
    engine.remember(seeds)
    for seed_task in seeds:
        for outcome in engine.variants(seed_task):
            if outcome.accepted:
                pool.add(outcome.task, key=outcome.key)


@dataclass(frozen=True)
class FinalPlan:
    """The final stage: its folder (``done.json`` there once every evaluation is), the
    number of tasks each evaluation scores, and a job per evaluation, by name."""

    folder: Path
    count: int
    jobs: dict[str, Callable[[], None]]


def _chain(*jobs: Callable[[], None]) -> None:
    """Run ``jobs`` one after the other (a run, then its final evaluation)."""
    for job in jobs:
        job()


def _scored(out: Path, count: int) -> bool:
    """Whether the evaluation in ``out`` is done on ``count`` tasks."""
    done = _done(out)
    return done is not None and done.get("tasks") == count


def _scored_all(done: dict[str, Any], count: int, names: Sequence[str]) -> bool:
    """Whether a final stage's marker says it scored these ``count`` tasks with every model
    in ``names`` (seeds added to a resumed experiment are evaluated; each evaluation already
    done is kept)."""
    return done.get("tasks") == count and set(names) <= set(done.get("evaluations", ()))


def _fresh_of(meta: Path) -> int:
    """The ``eval.final_fresh`` a widened test split was drawn with (0 before it existed)."""
    return int(json.loads(meta.read_text()).get("final_fresh", 0)) if meta.exists() else 0


def _variants(n: int) -> str:
    return f"{n} variant" + ("" if n == 1 else "s")


def _in_parallel(jobs: Sequence[Callable[[], None]], workers: int) -> None:
    """Run ``jobs`` with ``workers`` at once (in order; one at a time when 1); the first
    failure stops the jobs not started yet and is raised once those running finish."""
    if workers == 1 or len(jobs) <= 1:
        for job in jobs:
            job()
        return
    from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(job) for job in jobs]
        finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = [f for f in finished if f.exception() is not None]
        if failed:
            for f in futures:
                f.cancel()  # the jobs not started yet; those running finish their stage
            raise failed[0].exception()  # type: ignore[misc]


def _run_finished(run: Path, steps: int) -> bool:
    """Whether ``run`` took ``steps`` steps (a resume that raised ``runs.steps`` continues
    the runs that finished fewer from their last checkpoint: their learning rate is
    constant (a decaying schedule is refused) and each step's randomness derives from the
    run's seed and the step, so they continue as if planned that long)."""
    done = _done(run)
    return done is not None and int(done.get("steps", 0)) >= steps


def _runs_setting(text: str, key: str) -> Any:
    """``runs.<key>`` of an experiment file's text (None when it has none)."""
    import yaml

    data = yaml.safe_load(text) or {}
    return (data.get("runs") or {}).get(key)


def _runs_steps(text: str) -> int | None:
    """``runs.steps`` of an experiment file's text."""
    steps = _runs_setting(text, "steps")
    return steps if isinstance(steps, int) else None


def _runs_seeds(text: str) -> list[int] | None:
    """``runs.seeds`` of an experiment file's text."""
    seeds = _runs_setting(text, "seeds")
    ok = isinstance(seeds, list) and all(isinstance(s, int) for s in seeds)
    return seeds if ok else None


def _stable_hash(seed: int, text: str) -> str:
    return hashlib.sha256(f"{seed}:{text}".encode()).hexdigest()


def _dtype(dtype: str, device: str) -> str:
    """The evaluations' dtype: float32 for ``auto``, ``fast`` as the learner resolves it."""
    if dtype == "auto":
        return "float32"
    if dtype == "fast":
        from rods_agent.training.learner import resolve_dtype

        return resolve_dtype(dtype, _device(device))
    return dtype


def _device(device: str) -> str:
    from rods_agent.training.learner import resolve_device

    return resolve_device(device)


def _model_path(path: str) -> str:
    """The base model's folder (``smollm2``: SmolLM2-135M-Instruct, converted once)."""
    from rods_agent.training.learner import resolve_model_path

    return str(resolve_model_path(path))


HOW_KEYS = frozenset(
    {"runs.parallel", "runs.solo_threads", "eval.final_variants", "eval.final_fresh"}
)
"""Settings of how the protocol runs, not of what it measures, and of the final evaluation
alone (kept in a folder named by them): a resume may change them."""


def _changed_keys(before: str, now: str) -> list[str]:
    """The settings that differ between two experiments' configurations, bar
    :data:`HOW_KEYS` and settings a newer rods added at their default (an experiment
    started before they existed ran with that default)."""
    import yaml

    def flat(d: Any, prefix: str = "") -> dict[str, Any]:
        if not isinstance(d, dict):
            return {prefix: d}
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(flat(v, f"{prefix}{k}."))
        return out

    def keyed(text: str) -> dict[str, Any]:
        return {k.rstrip("."): v for k, v in flat(yaml.safe_load(text)).items()}

    a, b = keyed(before), keyed(now)
    defaults = keyed(yaml.safe_dump(ExperimentConfig.model_construct().model_dump(mode="json")))
    return sorted(
        k
        for k in a.keys() | b.keys()
        if a.get(k) != b.get(k)
        and k not in HOW_KEYS
        and not (k not in a and k in defaults and b.get(k) == defaults[k])
    )
