"""``rods eval``: evaluate a model on a task pool (pass^k, mean progress, breakdowns).

    rods eval --env rods/Retail-v0 --pool seeds --split test --engine openai \\
        --base-url http://127.0.0.1:8000/v1 --model NAME --k 4 --concurrency 16 --out results/NAME
    rods eval --env bfcl --engine openai --model NAME --temperature 0 --out results/NAME-bfcl

A thin layer over :func:`rods_agent.evaluation.evaluate.evaluate`: the options come from four
dataclasses (:class:`PoolOptions`, :class:`rods_agent.engines.EngineOptions`,
:class:`RunOptions`, :class:`UserOptions`), and ``config.json`` records all of them.

On a benchmark domain (``--env tau2-airline``) the scores are the benchmark's own (τ²-bench's
reward; pass^k as τ²-bench computes it), and the user model is named in the summary.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from rods_agent.console.options import add_options, option, options_from
from rods_agent.engines import EngineOptions
from rods_agent.engines.formats import tool_formats


@dataclass(frozen=True)
class PoolOptions:
    """What to evaluate and where the results go."""

    env: str = field(
        metadata=option(
            "environment id, domain or benchmark name, e.g. rods/Retail-v0, retail, bfcl"
        )
    )
    out: Path = field(metadata=option("output folder (a rerun resumes it)"))
    pool: str = field(
        default="seeds",
        metadata=option(
            "'seeds' (the domain's seed tasks, a benchmark's own tasks) or a JSONL task file "
            "(on a benchmark: a subset of its own tasks, e.g. rods experiment's test.jsonl)"
        ),
    )
    split: Literal["train", "test", "all"] = field(
        default="test", metadata=option("split of the pool")
    )
    limit: int | None = field(
        default=None, metadata=option("evaluate only the first N tasks", metavar="N")
    )
    k: int = field(default=1, metadata=option("report pass^1..k"))
    trials: int | None = field(
        default=None, metadata=option("trials per task, n >= k (default: k)")
    )
    verdicts: Literal["official", "strict"] | None = field(
        default=None,
        metadata=option(
            "on a benchmark whose checker has quirks (bfcl, tau2-*): score by its official verdicts "
            "(the default; the leaderboard's) or the strict, correct ones; both are reported"
        ),
    )


DEFAULT_MAX_TURNS = 30
"""``--max-turns`` for a domain when not given (a benchmark brings its own bound)."""

DEFAULT_MAX_EPISODE_TOKENS = 8192
"""``--max-episode-tokens`` when not given (a benchmark may need more: its own bound)."""


@dataclass(frozen=True)
class RunOptions:
    """Sampling and limits of every episode."""

    temperature: float = field(
        default=0.7, metadata=option("sampling temperature (0: greedy, every trial alike)")
    )
    top_p: float = field(default=1.0, metadata=option("nucleus sampling mass"))
    max_tokens: int = field(default=512, metadata=option("most tokens per completion"))
    max_episode_tokens: int | None = field(
        default=None,
        metadata=option(
            "most tokens per conversation, prompt included (default: 8192; a benchmark's own "
            "bound, e.g. 32768 on τ²-bench's)"
        ),
    )
    max_turns: int | None = field(
        default=None,
        metadata=option(
            "most agent steps per episode (default: 30; a benchmark's own bound, e.g. 100 on "
            "τ²-bench's)"
        ),
    )
    tool_format: str = field(
        default="auto",
        metadata=option("how completions become actions", choices=tool_formats),
    )
    prompt: Literal["full", "brief"] = field(
        default="full",
        metadata=option(
            "what a rods domain shows: full (its policy and every tool) or brief (a short "
            "policy and the task's own tools, as a small model trained with "
            "rollout.prompt=brief saw them)"
        ),
    )
    progress: bool = field(
        default=True, metadata=option("no progress bars (ours and transformers')")
    )


@dataclass(frozen=True)
class UserOptions:
    """Who plays the user."""

    user: Literal["scripted", "llm", "solo"] | None = field(
        default=None,
        metadata=option(
            "user simulator: scripted, llm (a model plays it) or solo (none: tau2-telecom's "
            "solo mode); default: scripted, llm on a benchmark whose user a model plays (but "
            "for --engine oracle)",
        ),
    )
    user_model: str | None = field(
        default=None,
        metadata=option(
            "with --user llm: the model that plays the user, on an OpenAI-compatible server "
            "(default: the evaluated engine plays it)"
        ),
    )
    user_base_url: str | None = field(
        default=None, metadata=option("API root of the user model's server (default: the agent's)")
    )
    user_api_key_env: str = field(
        default="OPENAI_API_KEY",
        metadata=option("name of the environment variable with the user model's API key"),
    )
    user_temperature: float | None = field(
        default=None,
        metadata=option("sampling temperature of the user model (default: 0.7; τ²-bench uses 0)"),
    )


def benchmark_subset(domain: Any, path: str, split: str) -> list[Any]:
    """The tasks of a JSONL file that are a benchmark's own (``rods experiment`` writes its
    test split there): each its benchmark's view (a task of the file cannot change a
    benchmark task's turns), a resampled variant checked by the benchmark, in the file's
    order; tasks of other domains skipped.

    Raises:
        ConfigError: no such file, a task the benchmark does not know, or none left.
    """
    from rods_env.errors import ConfigError
    from rods_env.task import load_tasks

    domain.require()
    if not Path(path).is_file():
        raise ConfigError(f"--pool: no file '{path}'; use 'seeds' or a JSONL file of tasks")
    given = [t for t in load_tasks(path) if t.domain == domain.name]
    broken = domain.check_tasks(given)
    if broken:
        raise ConfigError(
            f"--pool {path}: {len(broken)} tasks are not {domain.name}'s ({broken[0]})"
        )
    own = {t.id: t for t in domain.seed_tasks()}
    tasks = [own.get(t.id, t) if t.payload is None else t for t in given]
    if split != "all":
        tasks = [t for t in tasks if t.split in (None, split)]
    if not tasks:
        raise ConfigError(f"--pool {path}: no tasks of {domain.name} in split '{split}'")
    return tasks


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``rods eval`` options."""
    add_options(parser, PoolOptions, "what to evaluate")
    add_options(parser, EngineOptions, "model")
    add_options(parser, RunOptions, "sampling and limits")
    add_options(parser, UserOptions, "simulated user")


def run(args: argparse.Namespace) -> int:
    """Run ``rods eval``; exit code 1 when every trial ended in an error."""
    from rods_agent.engines import SamplingParams, build_engine
    from rods_agent.evaluation.evaluate import evaluate, load_pool
    from rods_agent.rollouts.batch import RolloutConfig
    from rods_env.benchmark import BenchmarkDomain
    from rods_env.errors import ConfigError
    from rods_env.registry import load_any_domain

    pool = options_from(PoolOptions, args)
    engine = options_from(EngineOptions, args)
    opts = options_from(RunOptions, args)
    users = options_from(UserOptions, args)
    if pool.limit is not None and pool.limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {pool.limit}")
    domain = load_any_domain(pool.env)
    benchmark = isinstance(domain, BenchmarkDomain)
    default_turns = domain.max_steps if isinstance(domain, BenchmarkDomain) else DEFAULT_MAX_TURNS
    max_turns = opts.max_turns if opts.max_turns is not None else default_turns
    own_tokens = domain.max_episode_tokens if isinstance(domain, BenchmarkDomain) else None
    max_episode_tokens = opts.max_episode_tokens or own_tokens or DEFAULT_MAX_EPISODE_TOKENS
    # a model plays a benchmark's user where it has one (not when the oracle checks the pool)
    talks = benchmark and "llm" in getattr(domain, "user_modes", ())
    default_user: Literal["scripted", "llm"] = (
        "llm" if talks and engine.engine != "oracle" else "scripted"
    )
    user: Literal["scripted", "llm", "solo"] = users.user or default_user
    if users.user_model is not None and user != "llm":
        raise ConfigError(f"--user-model plays the user of --user llm, not of --user {user}")
    if user == "llm" and engine.engine == "oracle" and users.user_model is None:
        raise ConfigError(
            "--engine oracle replays gold calls and cannot play the user: use --user scripted, "
            "or name a model with --user-model"
        )
    if engine.max_model_len is None:
        engine = replace(engine, max_model_len=max_episode_tokens)
    if benchmark and pool.pool != "seeds":
        tasks = benchmark_subset(domain, pool.pool, pool.split)[: pool.limit]
    else:
        tasks = load_pool(pool.env, pool.pool, pool.split)[: pool.limit]
    rollout = RolloutConfig(
        sampling=SamplingParams(
            max_tokens=opts.max_tokens,
            temperature=opts.temperature,
            top_p=opts.top_p,
            seed=engine.seed,
        ),
        max_turns=max_turns,
        max_tokens=max_episode_tokens,
        batch_size=engine.concurrency,
        tool_format=opts.tool_format,
        prompt=opts.prompt,
    )
    user_model = None
    if user == "llm":
        user_model = users.user_model or engine.model_name
    elif user == "scripted" and talks and engine.engine != "oracle":
        print(
            f"rods eval: warning: on {domain.name}, --user scripted is a deterministic stand-in "
            "for the benchmark's user model: the score is not the benchmark's (use --user llm)",
            file=sys.stderr,
        )
    meta: dict[str, Any] = {
        "env": domain.env_id,
        "pool": pool.pool,
        "split": pool.split,
        "limit": pool.limit,
        **asdict(engine),
        "model": engine.model_name,
        "user": user,
        "user_model": user_model,
    }
    if user == "llm":
        from rods_agent.rollouts.user import USER_TEMPERATURE

        given = users.user_temperature
        meta["user_temperature"] = given if given is not None else USER_TEMPERATURE
    user_engine = None
    if users.user_model is not None:
        user_options = EngineOptions(
            engine="openai",
            model=users.user_model,
            base_url=users.user_base_url or engine.base_url,
            api_key_env=users.user_api_key_env,
            concurrency=engine.concurrency,
            timeout=engine.timeout,
            retries=engine.retries,
        )
        meta["user_base_url"] = user_options.base_url

        def user_engine() -> Any:
            return build_engine(user_options, progress=opts.progress)

    user_sampling = None
    if users.user_temperature is not None:
        user_sampling = SamplingParams(max_tokens=96, temperature=users.user_temperature)
    summary = evaluate(
        lambda: build_engine(engine, tasks, progress=opts.progress),
        tasks,
        k=pool.k,
        trials=pool.trials,
        rollout=rollout,
        user=user,
        out=pool.out,
        progress=opts.progress,
        meta=meta,
        user_engine=user_engine,
        user_sampling=user_sampling,
        user_model=user_model,
        verdicts=pool.verdicts,
    )
    print(f"rods eval: {summary.line()}; wrote {pool.out}")
    for title in summary.headline:
        table = summary.paper_table(title)  # the paper's rows beside (bfcl-paper)
        if table:
            print(f"rods eval: {title}, this evaluation beside the paper's numbers (%):")
            print("\n".join(table))
    if summary.benchmark_files:
        shown = ", ".join(str(pool.out / f) for f in summary.benchmark_files)
        print(f"rods eval: the benchmark's own results format: {shown}")
    if user == "llm":
        print(
            f"rods eval: the user was played by {user_model}; scores compare only across runs with the same user model"
        )
    if summary.trials and summary.errored_trials == summary.trials:
        print(
            f"rods eval: error: every trial ({summary.trials}) ended in an engine or environment "
            f"error; the scores mean nothing (see {pool.out / 'episodes.jsonl'}; is the model "
            "reachable? a rerun retries these trials)",
            file=sys.stderr,
        )
        return 1
    if summary.errored_trials:
        print(
            f"rods eval: warning: {summary.errored_trials} of {summary.trials} trials ended in "
            "an error; a rerun with the same --out retries them",
            file=sys.stderr,
        )
    return 0
