"""Evaluation: a model on a task pool -- pass^k, mean progress, per-skill/depth/variant/domain.

The library entry point is :func:`evaluate`; ``rods eval`` and the trainer's periodic
evaluation both call it::

    from rods_agent.evaluation.evaluate import evaluate
    summary = evaluate(engine, tasks, k=4, out=Path("results/NAME"))
    summary.pass_k[1], summary.mean_progress, summary.by_skill["cancel_order"].pass_1

Without ``out`` nothing is written. With ``out`` the run is resumable; these files are
written there (all through :mod:`rods_env.fileio`):

* ``episodes.jsonl`` -- one line per trial as soon as it ends: transcript, rewards,
  termination, timings;
* ``results.jsonl`` -- one line per task once all its trials are done;
* ``config.json`` -- the run's settings (written once the engine exists, so a model that
  fails to load leaves no folder behind);
* ``tasks.jsonl`` -- the tasks evaluated, with their gold calls (a task pool: the folder
  explains itself to ``rods view``, and ``--pool DIR/tasks.jsonl`` repeats the run);
* ``summary.json``, ``summary.md`` and ``pass_k.png`` -- pass^1..k, mean progress,
  breakdowns;
* a benchmark's own result files of the episodes, for its own tools (τ²-bench:
  ``tau2/<domain>.json``, its results format, which ``tau2 evaluate-trajs`` re-scores).

A rerun into the same folder skips the trials already done; trials that ended in an error
(a server that was down, a crashed engine) run again, and a line cut off by a kill is
dropped. A rerun with another model, pool or trial count is refused rather than mixed in.

pass^k is the chance that k independent trials of a task all succeed, estimated without
bias from n >= k trials with c successes as C(c, k) / C(n, k), averaged over tasks.

Its parts, one module per stage: :mod:`rods_agent.evaluation.pools` (the pool and the
checks before a run), :mod:`~rods_agent.evaluation.run_folder` (files, resume),
:mod:`~rods_agent.evaluation.progress` and :mod:`~rods_agent.evaluation.scores` (pass^k,
breakdowns, the summary); this module runs the trials and re-exports their public names.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from rods_agent.console.progress import Progress
from rods_agent.engines.base import Engine, SamplingParams, derive_seed
from rods_agent.evaluation.files import (
    CONFIG,
    EPISODES,
    IDENTITY_DEFAULTS,
    IDENTITY_KEYS,
    PASS_K_PNG,
    RESULTS,
    SUMMARY_JSON,
    SUMMARY_MD,
    TASKS,
    EngineFactory,
    UserFactory,
)
from rods_agent.evaluation.pools import USER_MODES, check_gold, load_pool
from rods_agent.evaluation.progress import (
    EvalProgress,
    ProgressCallback,
    _Bar,
    _MeteredEngine,
    _quiet,
    _Tracker,
)
from rods_agent.evaluation.run_folder import RunFolder, _Resumed
from rods_agent.evaluation.scores import (
    EvalSummary,
    GroupScore,
    TaskResult,
    headline_scores,
    pass_hat_k,
    pass_k_curve,
    plot_pass_k,
    user_line,
    verdict_scores,
)
from rods_agent.rollouts.batch import (
    EpisodeRecord,
    EpisodeSpec,
    RolloutConfig,
    env_prompt_kwargs,
    run_rollouts,
)
from rods_env.benchmark import BenchmarkDomain
from rods_env.env import make_env
from rods_env.errors import ConfigError
from rods_env.registry import AnyDomain
from rods_env.task import Task

log = logging.getLogger(__name__)


# -- evaluate ----------------------------------------------------------------------------
def _settings(
    k: int, trials: int, rollout: RolloutConfig, user: str, user_model: str | None
) -> dict[str, Any]:
    s = rollout.sampling
    return {
        "user_model": user_model,
        "k": k,
        "trials": trials,
        "max_turns": rollout.max_turns,
        "max_episode_tokens": rollout.max_tokens,
        "max_tokens": s.max_tokens,
        "temperature": s.temperature,
        "top_p": s.top_p,
        "seed": s.seed,
        "concurrency": rollout.batch_size,
        "tool_format": rollout.tool_format,
        "user": user,
        **({"prompt": rollout.prompt} if rollout.prompt != "full" else {}),
    }


def evaluate(
    engine: Engine | EngineFactory,
    tasks: Sequence[Task],
    *,
    k: int = 1,
    trials: int | None = None,
    rollout: RolloutConfig | None = None,
    user: Literal["scripted", "llm", "solo"] | UserFactory = "scripted",
    out: str | Path | None = None,
    progress: bool | ProgressCallback = False,
    meta: Mapping[str, Any] | None = None,
    seed: int | None = None,
    user_engine: Engine | EngineFactory | None = None,
    user_sampling: SamplingParams | None = None,
    user_model: str | None = None,
    verdicts: str | None = None,
) -> EvalSummary:
    """Evaluate a model on tasks: ``trials`` episodes per task, pass^1..k and breakdowns.

    Args:
        engine: The model, or a function that builds it. A function is called only when
            some trial is left to run (a rerun that finds every task done loads no model),
            and the engine it builds is closed at the end; an engine given as such is
            left open (it belongs to the caller).
        tasks: The tasks (of any installed domains and benchmarks; ids must be unique).
        k: pass^1..k is reported.
        trials: Trials per task, at least ``k`` (default ``k``).
        rollout: Sampling and limits (default :class:`RolloutConfig`). Its ``batch_size``
            is how many episodes run at once.
        user: ``"scripted"`` (the default deterministic user; a benchmark domain's
            stand-in), ``"llm"`` (the user is played by a model,
            :class:`rods_agent.rollouts.user.LLMUser`, its replies batched across episodes),
            ``"solo"`` (no user: a benchmark domain's solo mode), or a function that builds
            a user simulator.
        out: A folder for resumable result files (see the module docstring); None writes
            nothing.
        progress: True shows a progress bar on stderr (turns and tokens within live
            trials); a function gets an :class:`EvalProgress` after every generation batch.
        meta: What describes the run (model, environment, pool ...): written into
            ``config.json`` and the summary. With ``out``, a rerun whose ``env``, ``pool``,
            ``split``, ``engine`` or ``model`` differ from the folder's is refused.
        seed: Seeds each trial's sampling with ``derive_seed(seed, task id, trial)``, so
            the same weights give the same trials (a trainer's periodic evaluation, repeated
            exactly on resume); None leaves sampling to the engine.
        user_engine: With ``user="llm"``: the model that plays the user (an engine, or a
            function that builds it when some trial is left to run); None: the evaluated
            engine plays it.
        user_sampling: With ``user="llm"``: the user's sampling (default: LLMUser's).
        user_model: The name of the user's model, recorded in ``config.json`` and the
            summary (default: the evaluated model's, when it plays the user).
        verdicts: On benchmarks that give several verdicts (BFCL: ``"official"``, its own,
            the default; ``"strict"``, the correct ones), the one that scores the trials;
            every verdict is reported either way (``summary.verdicts``).

    Returns:
        The summary; ``summary.results`` has one :class:`TaskResult` per task, and
        ``summary.headline`` each benchmark's own numbers.

    Raises:
        ConfigError: for bad arguments, tasks whose gold calls fail, a user simulator for a
            benchmark whose user turns are scripted, or an ``out`` folder holding another
            run.
    """
    tasks = list(tasks)
    if not tasks:
        raise ConfigError("no tasks to evaluate")
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ConfigError(f"task ids must be unique; '{dup}' appears more than once")
    trials = k if trials is None else trials
    if k < 1 or trials < k:
        raise ConfigError(f"need 1 <= k <= trials; got k={k}, trials={trials}")
    rollout = rollout or RolloutConfig()
    user_name = user if isinstance(user, str) else "custom"
    if user_name not in (*USER_MODES, "custom"):
        raise ConfigError(f"unknown user simulator '{user}'; use {', '.join(USER_MODES)}")
    families = check_gold(tasks)
    mode = "llm" if user_name == "custom" else user_name
    for family in families.values():
        if not isinstance(family, BenchmarkDomain) and mode == "solo":
            raise ConfigError(f"{family.name} has no solo mode: its tasks need a user")
        if isinstance(family, BenchmarkDomain) and mode not in family.user_modes:
            raise ConfigError(
                f"{family.name} takes the users {', '.join(family.user_modes)}, not '{mode}'"
                + (
                    " (the benchmark scripts every user turn)"
                    if family.user_modes == ("scripted",)
                    else ""
                )
            )
    judged = [f for f in families.values() if isinstance(f, BenchmarkDomain) and f.verdicts]
    if verdicts is not None:
        unable = [
            f.name
            for f in families.values()
            if not isinstance(f, BenchmarkDomain) or verdicts not in f.verdicts
        ]
        if unable:
            raise ConfigError(
                f"verdicts '{verdicts}': {', '.join(unable)} give only their own verdicts "
                "(BFCL and τ²-bench give official and strict ones)"
            )
    meta = dict(meta or {})
    if judged:
        meta.setdefault("verdicts", verdicts or judged[0].verdicts[0])
    if user_name == "llm" and user_model is None and user_engine is None:
        user_model = str(meta.get("model")) if meta.get("model") is not None else None
    meta.setdefault("user", user_name)
    if user_model is not None:
        meta.setdefault("user_model", user_model)
    config = {**meta, **_settings(k, trials, rollout, user_name, user_model)}
    folder = RunFolder(out) if out is not None else None
    resumed = _Resumed({}, {})
    if folder is not None:
        folder.check_config(config)
        resumed = folder.resume(tasks, trials)
        if resumed.done:
            log.info("resuming: %d of %d tasks already done", len(resumed.done), len(tasks))
    todo = [t for t in tasks if t.id not in resumed.done]
    specs: list[EpisodeSpec] = []
    for task in todo:
        have = {r.trial for r in resumed.trials.get(task.id, [])}
        specs += [
            EpisodeSpec(
                task,
                trial,
                sampling_seed=None if seed is None else derive_seed(seed, task.id, trial),
            )
            for trial in range(trials)
            if trial not in have
        ]

    results = dict(resumed.done)
    if specs:
        owned = not isinstance(engine, Engine)
        model: Engine = engine() if not isinstance(engine, Engine) else engine
        user_owned = user_engine is not None and not isinstance(user_engine, Engine)
        users: Engine | None = None
        bar: _Bar | None = None
        parent = Progress(len(specs), "evaluation", "episode", show=False)
        try:
            if user_name == "llm":
                users = (
                    model
                    if user_engine is None
                    else user_engine()
                    if not isinstance(user_engine, Engine)
                    else user_engine
                )
            if folder is not None:
                folder.write_config(config, tasks)
            report: ProgressCallback = _quiet
            if callable(progress):
                report = progress
            elif progress:
                bar = _Bar(len(specs))
                report = bar
            tracker = _Tracker(_also_to(parent, report), len(tasks), len(resumed.done), len(specs))
            results.update(
                _run(
                    model,
                    families,
                    todo,
                    specs,
                    resumed,
                    trials,
                    rollout,
                    user,
                    folder,
                    tracker,
                    users,
                    user_sampling,
                    verdicts,
                )
            )
        finally:
            if bar is not None:
                bar.close()
            parent.close()
            if owned:
                model.close()
            if user_owned and users is not None:
                users.close()
    elif folder is not None:
        folder.write_config(config, tasks)
    ordered = [results[t.id] for t in tasks]
    summary = EvalSummary.from_results(
        ordered, k, meta, headline_scores(ordered, families), verdict_scores(ordered, families)
    )
    if folder is not None:
        files = folder.write_benchmark_results(tasks, trials, families, config)
        summary = replace(summary, benchmark_files=files)
        folder.write_summary(summary)
    return summary


def _also_to(parent: Progress, report: ProgressCallback) -> ProgressCallback:
    """``report``, and the trials done to ``parent`` (the progress file a parent process
    reads, ``rods experiment``'s; nothing without one)."""

    def both(p: EvalProgress) -> None:
        report(p)
        parent.to(p.trials_done)

    return both


def _run(
    engine: Engine,
    families: Mapping[str, AnyDomain],
    todo: Sequence[Task],
    specs: Sequence[EpisodeSpec],
    resumed: _Resumed,
    trials: int,
    rollout: RolloutConfig,
    user: Literal["scripted", "llm", "solo"] | UserFactory,
    folder: RunFolder | None,
    tracker: _Tracker,
    user_engine: Engine | None = None,
    user_sampling: SamplingParams | None = None,
    verdicts: str | None = None,
) -> dict[str, TaskResult]:
    """Run ``specs`` domain by domain (benchmark by benchmark); write each trial and each
    finished task at once."""
    by_id = {t.id: t for t in todo}
    groups: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for tid, recs in resumed.trials.items():
        groups[tid].extend(recs)
    finished: dict[str, TaskResult] = {}
    metered = _MeteredEngine(engine, tracker)
    batcher = None
    if user == "llm":
        from rods_agent.rollouts.user import SCENARIO_MAX_TOKENS, LLMUser, UserBatcher

        # the users' replies are batched across episodes; their tokens are not the agent's.
        # rods' users cap their own replies; a benchmark's scenario users need more room
        users_sampling = user_sampling or LLMUser(engine).sampling
        batch_sampling = replace(
            users_sampling, max_tokens=max(users_sampling.max_tokens, SCENARIO_MAX_TOKENS)
        )
        batcher = UserBatcher(user_engine or engine, batch_sampling)

    def on_record(record: EpisodeRecord) -> None:
        if folder is not None:
            folder.add_trial(record)
        tracker.trial(record)
        group = groups[record.task_id]
        group.append(record)
        if len(group) < trials:
            return
        result = TaskResult.from_records(by_id[record.task_id], group)
        if folder is not None:
            folder.add_result(result)
        finished[result.task_id] = result
        del groups[record.task_id]
        tracker.task()

    def user_for_env() -> Any:
        if user in ("scripted", "solo"):
            return None
        if user == "llm":
            from rods_agent.rollouts.user import LLMUser

            assert batcher is not None
            return LLMUser(batcher.engine, sampling=users_sampling, batcher=batcher)
        assert callable(user)
        return user()

    t_start = time.perf_counter()
    for name in families:
        mine = [s for s in specs if s.task.domain == name]
        if not mine:
            continue

        def make(name: str = name) -> Any:
            kwargs: dict[str, Any] = {
                "tasks": (),
                "split": None,
                "max_steps": rollout.max_turns,
                **env_prompt_kwargs(name, rollout.prompt),
            }
            if user == "solo":
                kwargs["solo"] = True
            else:
                kwargs["user"] = user_for_env()
            if verdicts is not None:
                kwargs["verdicts"] = verdicts
            return make_env(name, **kwargs)  # a benchmark's require() runs there

        run_rollouts(metered, make, mine, rollout, on_record=on_record, users=batcher)
    log.debug("evaluated %d tasks in %.1fs", len(finished), time.perf_counter() - t_start)
    return finished


__all__ = [
    "CONFIG",
    "EPISODES",
    "IDENTITY_DEFAULTS",
    "IDENTITY_KEYS",
    "PASS_K_PNG",
    "RESULTS",
    "SUMMARY_JSON",
    "SUMMARY_MD",
    "TASKS",
    "USER_MODES",
    "EngineFactory",
    "EvalProgress",
    "EvalSummary",
    "GroupScore",
    "ProgressCallback",
    "RunFolder",
    "TaskResult",
    "UserFactory",
    "check_gold",
    "evaluate",
    "headline_scores",
    "load_pool",
    "pass_hat_k",
    "pass_k_curve",
    "plot_pass_k",
    "user_line",
    "verdict_scores",
]
