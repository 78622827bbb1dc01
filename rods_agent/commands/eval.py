"""``rods eval``: evaluate a model on a task pool (pass^k, mean progress, breakdowns).

    rods eval --env rods/Retail-v0 --pool seeds --split test --engine openai \\
        --base-url http://127.0.0.1:8000/v1 --model NAME --k 4 --concurrency 16 --out results/NAME
    rods eval --env bfcl --engine openai --model NAME --temperature 0 --out results/NAME-bfcl

A thin layer over :func:`rods_agent.evaluate.evaluate`: the options come from three
dataclasses (:class:`PoolOptions`, :class:`rods_agent.engines.EngineOptions`,
:class:`RunOptions`), and ``config.json`` records all of them.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from rods_agent.engines import EngineOptions
from rods_agent.engines.formats import tool_formats
from rods_agent.options import add_options, option, options_from


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
            "'seeds' (the domain's seed tasks, a benchmark's own tasks) or a JSONL task file"
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


DEFAULT_MAX_TURNS = 30
"""``--max-turns`` for a domain when not given (a benchmark brings its own bound)."""


@dataclass(frozen=True)
class RunOptions:
    """Sampling and limits of every episode."""

    temperature: float = field(
        default=0.7, metadata=option("sampling temperature (0: greedy, every trial alike)")
    )
    top_p: float = field(default=1.0, metadata=option("nucleus sampling mass"))
    max_tokens: int = field(default=512, metadata=option("most tokens per completion"))
    max_episode_tokens: int = field(
        default=8192, metadata=option("most tokens per conversation, prompt included")
    )
    max_turns: int | None = field(
        default=None,
        metadata=option("most agent steps per episode (default: 30; a benchmark's own bound)"),
    )
    tool_format: str = field(
        default="auto",
        metadata=option("how completions become actions", choices=tool_formats),
    )
    user: Literal["scripted", "llm"] = field(
        default="scripted", metadata=option("user simulator (llm: played by the same engine)")
    )
    progress: bool = field(
        default=True, metadata=option("no progress bars (ours and transformers')")
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``rods eval`` options."""
    add_options(parser, PoolOptions, "what to evaluate")
    add_options(parser, EngineOptions, "model")
    add_options(parser, RunOptions, "sampling and limits")


def run(args: argparse.Namespace) -> int:
    """Run ``rods eval``; exit code 1 when every trial ended in an error."""
    from rods_agent.engines import SamplingParams, build_engine
    from rods_agent.evaluate import evaluate, load_pool
    from rods_agent.rollout import RolloutConfig
    from rods_env.benchmark import BenchmarkDomain
    from rods_env.errors import ConfigError
    from rods_env.registry import load_any_domain

    pool = options_from(PoolOptions, args)
    engine = options_from(EngineOptions, args)
    opts = options_from(RunOptions, args)
    if pool.limit is not None and pool.limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {pool.limit}")
    if engine.max_model_len is None:
        engine = replace(engine, max_model_len=opts.max_episode_tokens)
    tasks = load_pool(pool.env, pool.pool, pool.split)[: pool.limit]
    family = load_any_domain(pool.env)
    default_turns = family.max_steps if isinstance(family, BenchmarkDomain) else DEFAULT_MAX_TURNS
    max_turns = opts.max_turns if opts.max_turns is not None else default_turns
    rollout = RolloutConfig(
        sampling=SamplingParams(
            max_tokens=opts.max_tokens,
            temperature=opts.temperature,
            top_p=opts.top_p,
            seed=engine.seed,
        ),
        max_turns=max_turns,
        max_tokens=opts.max_episode_tokens,
        batch_size=engine.concurrency,
        tool_format=opts.tool_format,
    )
    meta: dict[str, Any] = {
        "env": family.env_id,
        "pool": pool.pool,
        "split": pool.split,
        "limit": pool.limit,
        **asdict(engine),
        "model": engine.model_name,
    }
    summary = evaluate(
        lambda: build_engine(engine, tasks, progress=opts.progress),
        tasks,
        k=pool.k,
        trials=pool.trials,
        rollout=rollout,
        user=opts.user,
        out=pool.out,
        progress=opts.progress,
        meta=meta,
    )
    print(f"rods eval: {summary.line()}; wrote {pool.out}")
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
