"""``rods eval``: a model on a task pool -- pass^k, mean progress, per-skill/depth/variant/domain.

    rods eval --env rods/Retail-v0 --pool seeds --split test --engine openai \\
        --base-url http://127.0.0.1:8000/v1 --model NAME --k 4 --concurrency 16 --out results/NAME

Files written under ``--out``:

* ``results.jsonl`` -- one line per task, written when all its trials are done (a rerun
  skips the tasks listed there, so an interrupted run resumes where it stopped);
* ``episodes.jsonl`` -- one line per trial: transcript, rewards, termination, timings;
* ``summary.json`` and ``summary.md`` -- pass^1..k, mean progress, breakdowns;
* ``pass_k.png`` -- pass^k against k;
* ``config.json`` -- the run's settings (the API key's variable name, never its value).

pass^k is the chance that k independent trials of a task all succeed, estimated without
bias from n >= k trials with c successes as C(c, k) / C(n, k), averaged over tasks.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from math import comb
from pathlib import Path
from typing import Any

from rods_env.errors import ConfigError, RodsError
from rods_env.fileio import append_jsonl, atomic_write, read_jsonl, write_json
from rods_env.task import Task, load_tasks

log = logging.getLogger(__name__)

RESULTS = "results.jsonl"
EPISODES = "episodes.jsonl"
_RUN_KEYS = ("env", "pool", "split", "engine", "model", "trials", "max_turns", "user")


# -- pass^k ------------------------------------------------------------------------------
def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass^k for one task: C(c, k) / C(n, k).

    Raises:
        ConfigError: when ``k`` is not in 1..n or ``c`` not in 0..n.
    """
    if not 1 <= k <= n:
        raise ConfigError(f"pass^k needs 1 <= k <= n trials; got k={k}, n={n}")
    if not 0 <= c <= n:
        raise ConfigError(f"successes must be in 0..{n}, got {c}")
    return comb(c, k) / comb(n, k)


def pass_k_curve(results: Iterable[Mapping[str, Any]], k_max: int) -> dict[int, float]:
    """pass^1..k_max averaged over tasks (each result has ``n`` and ``successes``)."""
    rows = list(results)
    curve = {}
    for k in range(1, k_max + 1):
        vals = [pass_hat_k(r["n"], r["successes"], k) for r in rows if r["n"] >= k]
        curve[k] = sum(vals) / len(vals) if vals else 0.0
    return curve


# -- summary -----------------------------------------------------------------------------
def _group(results: Sequence[Mapping[str, Any]], key: str) -> dict[str, dict[str, float]]:
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in results:
        groups[str(r.get(key))].append(r)
    out = {}
    for name in sorted(groups, key=lambda s: (len(s), s)):
        rows = groups[name]
        out[name] = {
            "tasks": len(rows),
            "pass^1": sum(r["successes"] / r["n"] for r in rows) / len(rows),
            "progress": sum(r["mean_progress"] for r in rows) / len(rows),
        }
    return out


def summarize(
    results: Sequence[Mapping[str, Any]], k: int, meta: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The summary of per-task results: pass^1..k, mean progress, breakdowns and counts."""
    terminations: Counter[str] = Counter()
    for r in results:
        terminations.update(r.get("termination", []))
    n_trials = sum(r["n"] for r in results)
    return {
        **dict(meta or {}),
        "tasks": len(results),
        "trials": n_trials,
        "pass_k": {str(i): v for i, v in pass_k_curve(results, k).items()},
        "mean_progress": (sum(r["mean_progress"] for r in results) / len(results))
        if results
        else 0.0,
        "by_domain": _group(results, "domain"),
        "by_skill": _group(results, "skill"),
        "by_depth": _group(results, "depth"),
        "by_variant": _group(results, "variant"),
        "terminations": dict(sorted(terminations.items())),
        "episodes_with_errors": sum(r.get("errors", 0) for r in results),
        "gen_seconds": sum(r.get("gen_seconds", 0.0) for r in results),
        "env_seconds": sum(r.get("env_seconds", 0.0) for r in results),
    }


def summary_markdown(summary: Mapping[str, Any]) -> str:
    """The summary as Markdown tables."""
    lines = [f"# Evaluation of `{summary.get('model', '?')}` on {summary.get('env', '?')}", ""]
    lines.append(
        f"Pool: {summary.get('pool', '?')} (split {summary.get('split', '?')}) -- "
        f"{summary['tasks']} tasks, {summary['trials']} trials; "
        f"engine {summary.get('engine', '?')}."
    )
    lines += ["", "| k | pass^k |", "|---|---|"]
    lines += [f"| {k} | {v:.3f} |" for k, v in summary["pass_k"].items()]
    lines += ["", f"Mean progress: {summary['mean_progress']:.3f}", ""]
    for key, title in (
        ("by_domain", "domain"),
        ("by_skill", "skill"),
        ("by_depth", "signature depth"),
        ("by_variant", "variant"),
    ):
        lines += [
            f"## By {title}",
            "",
            f"| {title} | tasks | pass^1 | progress |",
            "|---|---|---|---|",
        ]
        for name, row in summary[key].items():
            lines.append(
                f"| {name} | {row['tasks']} | {row['pass^1']:.3f} | {row['progress']:.3f} |"
            )
        lines.append("")
    lines += ["## Terminations", "", "| termination | trials |", "|---|---|"]
    lines += [f"| {t} | {c} |" for t, c in summary["terminations"].items()]
    lines += [
        "",
        f"Trials that met an engine or environment error: {summary['episodes_with_errors']}. "
        f"Generation time {summary['gen_seconds']:.1f} s (summed per trial), "
        f"environment time {summary['env_seconds']:.1f} s.",
        "",
    ]
    return "\n".join(lines)


def plot_pass_k(summary: Mapping[str, Any], path: str | Path) -> Path:
    """Save a PNG of pass^k against k."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = [int(k) for k in summary["pass_k"]]
    vals = [summary["pass_k"][str(k)] for k in ks]
    fig, ax = plt.subplots(figsize=(5, 3.5), dpi=100)
    ax.plot(ks, vals, marker="o")
    ax.set_xlabel("k")
    ax.set_ylabel("pass^k")
    ax.set_ylim(0, 1.08)
    for k, v in zip(ks, vals, strict=True):
        ax.annotate(
            f"{v:.2f}", (k, v), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8
        )
    ax.set_xticks(ks)
    ax.grid(alpha=0.3)
    ax.set_title(
        f"{summary.get('model', '?')} on {summary.get('env', '?')} ({summary['tasks']} tasks)",
        fontsize=9,
    )
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


# -- files -------------------------------------------------------------------------------
def resume_state(out: Path) -> dict[str, dict[str, Any]]:
    """Finished tasks of an earlier run in ``out`` (by task id); tidies both JSONL files.

    Lines cut off by a kill are dropped, and episodes of tasks whose result line was never
    written are removed, so they run again cleanly and no task is counted twice.
    """
    done: dict[str, dict[str, Any]] = {}
    for row in read_jsonl(out / RESULTS):
        done.setdefault(row["task_id"], row)
    atomic_write(
        out / RESULTS, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in done.values())
    )
    episodes = [e for e in read_jsonl(out / EPISODES) if e.get("task_id") in done]
    atomic_write(
        out / EPISODES, "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in episodes)
    )
    return done


# -- running -----------------------------------------------------------------------------
def task_result(task: Task, records: Sequence[Any]) -> dict[str, Any]:
    """The per-task result line from its trials' records."""
    sig = task.signature
    n = len(records)
    return {
        "task_id": task.id,
        "domain": task.domain,
        "skill": task.skill,
        "variant": task.variant,
        "depth": sig.depth if sig is not None else None,
        "signature": sig.key if sig is not None else None,
        "n": n,
        "successes": sum(1 for r in records if r.success),
        "mean_progress": sum(r.progress for r in records) / n if n else 0.0,
        "success": [r.success for r in records],
        "progress": [r.progress for r in records],
        "termination": [r.termination for r in records],
        "n_steps": [r.n_steps for r in records],
        "errors": sum(1 for r in records if r.errors),
        "gen_seconds": sum(r.gen_seconds for r in records),
        "env_seconds": sum(r.env_seconds for r in records),
    }


def load_pool(env_id: str, pool: str, split: str) -> tuple[Any, list[Task]]:
    """The domain of ``env_id`` and the tasks to evaluate (``pool`` is ``seeds`` or a path)."""
    from rods_env.registry import load_domain

    domain = load_domain(env_id)
    want = None if split == "all" else split
    if pool == "seeds":
        tasks = domain.seed_tasks(want)
        if not tasks:
            raise ConfigError(f"domain {domain.name} has no seed tasks in split '{split}'")
        return domain, tasks
    path = Path(pool)
    if not path.exists():
        raise ConfigError(f"--pool: no file '{pool}'; use 'seeds' or a JSONL file of tasks")
    tasks = load_tasks(path)
    other = sum(1 for t in tasks if t.domain != domain.name)
    tasks = [t for t in tasks if t.domain == domain.name]
    if want is not None:
        tasks = [t for t in tasks if t.split in (None, want)]
    if other:
        log.warning("skipping %d tasks of other domains in %s", other, pool)
    if not tasks:
        raise ConfigError(f"--pool {pool}: no tasks of domain {domain.name} in split '{split}'")
    return domain, tasks


def build_engine(args: argparse.Namespace, domain: Any = None, tasks: Sequence[Task] = ()) -> Any:
    """The engine the arguments ask for (``oracle``: the gold oracle of ``tasks``)."""
    from rods_agent.engines import make_engine

    if args.engine == "oracle":
        from rods_agent.engines.scripted import ScriptedEngine
        from rods_env.oracle import OracleAgent

        by_id = {t.id: t for t in tasks}
        writes = domain.toolkit.write_names()
        return ScriptedEngine(lambda info: OracleAgent(by_id[info["task_id"]], writes))
    if args.engine == "openai":
        extra = json.loads(args.extra_body) if args.extra_body else None
        return make_engine(
            "openai",
            args.model,
            base_url=args.base_url,
            api_key_env=args.api_key_env,
            concurrency=args.concurrency,
            timeout=args.timeout,
            max_retries=args.retries,
            logprobs=args.logprobs,
            extra_body=extra,
        )
    if args.engine == "transformers":
        return make_engine("transformers", args.model, device=args.device, dtype=args.dtype)
    return make_engine(
        "vllm",
        args.model,
        dtype=args.dtype,
        max_model_len=args.max_episode_tokens,
        seed=args.seed or 0,
    )


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``rods eval`` options to ``parser``."""
    from rods_agent.engines import ENGINES
    from rods_agent.engines.formats import tool_formats

    g = parser.add_argument_group("what to evaluate")
    g.add_argument("--env", required=True, help="environment id or domain, e.g. rods/Retail-v0")
    g.add_argument(
        "--pool", default="seeds", help="'seeds' (the domain's seed tasks) or a JSONL task file"
    )
    g.add_argument(
        "--split", default="test", choices=("train", "test", "all"), help="split of the pool"
    )
    g.add_argument("--limit", type=int, default=None, help="evaluate only the first N tasks")
    g.add_argument("--k", type=int, default=1, help="report pass^1..k")
    g.add_argument("--trials", type=int, default=None, help="trials per task (n >= k; default k)")
    g.add_argument("--out", required=True, help="output folder (a rerun resumes it)")
    m = parser.add_argument_group("model")
    m.add_argument(
        "--engine",
        default="openai",
        choices=(*ENGINES, "oracle"),
        help="how to reach the model (oracle: replay the gold calls, a check of the pool)",
    )
    m.add_argument(
        "--model", default=None, help="model name on the server, or a local model folder"
    )
    m.add_argument(
        "--base-url", default="http://127.0.0.1:8000/v1", help="OpenAI-compatible API root"
    )
    m.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="name of the environment variable holding the API key (its value is never written)",
    )
    m.add_argument(
        "--concurrency", type=int, default=16, help="episodes (and HTTP requests) at once"
    )
    m.add_argument("--timeout", type=float, default=120.0, help="seconds per HTTP request")
    m.add_argument("--retries", type=int, default=5, help="HTTP retries on 429/5xx/timeouts")
    m.add_argument("--logprobs", action="store_true", help="ask the server for log-probabilities")
    m.add_argument("--extra-body", default=None, help="JSON merged into every HTTP request body")
    m.add_argument("--device", default="cpu", help="device of the transformers engine")
    m.add_argument("--dtype", default="float32", help="dtype of local engines")
    s = parser.add_argument_group("sampling and limits")
    s.add_argument("--temperature", type=float, default=0.7)
    s.add_argument("--top-p", type=float, default=1.0)
    s.add_argument("--seed", type=int, default=None, help="seed of local engines' sampling")
    s.add_argument("--max-tokens", type=int, default=512, help="most tokens per completion")
    s.add_argument(
        "--max-episode-tokens", type=int, default=8192, help="most tokens per conversation"
    )
    s.add_argument("--max-turns", type=int, default=30, help="most agent steps per episode")
    s.add_argument(
        "--tool-format",
        default="auto",
        choices=tool_formats(),
        help="how completions become actions",
    )
    s.add_argument(
        "--user",
        default="scripted",
        choices=("scripted", "llm"),
        help="user simulator (llm: the same engine)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _config(args: argparse.Namespace) -> dict[str, Any]:
    keys = (
        "env", "pool", "split", "limit", "k", "trials", "engine", "model", "base_url", "api_key_env",
        "concurrency", "temperature", "top_p", "seed", "max_tokens", "max_episode_tokens",
        "max_turns", "tool_format", "user",
    )  # fmt: skip
    return {k: getattr(args, k) for k in keys}


def run_eval(args: argparse.Namespace) -> int:
    """Run ``rods eval`` with parsed arguments; returns the exit code."""
    from rods_agent.engines.base import SamplingParams
    from rods_agent.rollout import RolloutConfig

    args.trials = args.trials or args.k
    if args.model is None:
        if args.engine != "oracle":
            raise ConfigError(f"--model is required with --engine {args.engine}")
        args.model = "oracle"
    if args.k < 1 or args.trials < args.k:
        raise ConfigError(f"need 1 <= k <= trials; got k={args.k}, trials={args.trials}")
    domain, tasks = load_pool(args.env, args.pool, args.split)
    if args.limit is not None:
        tasks = tasks[: args.limit]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config = _config(args)
    old = out / "config.json"
    if old.exists():
        prev = json.loads(old.read_text())
        diff = [k for k in _RUN_KEYS if prev.get(k) != config.get(k)]
        if diff:
            raise ConfigError(
                f"{out} holds results of a different run ({', '.join(f'{k}={prev.get(k)!r}' for k in diff)}); "
                "use another --out or delete it"
            )
    write_json(old, config)
    done = resume_state(out)
    todo = [t for t in tasks if t.id not in done]
    if done:
        print(
            f"rods eval: resuming: {len(tasks) - len(todo)} of {len(tasks)} tasks already done",
            file=sys.stderr,
        )

    sampling = SamplingParams(
        max_tokens=args.max_tokens, temperature=args.temperature, top_p=args.top_p, seed=args.seed
    )
    rollout = RolloutConfig(
        sampling=sampling,
        max_turns=args.max_turns,
        max_tokens=args.max_episode_tokens,
        batch_size=args.concurrency,
        tool_format=args.tool_format,
    )
    results = [done[t.id] for t in tasks if t.id in done]
    if todo:
        engine = build_engine(args, domain, todo)
        try:
            results += _run(engine, domain, todo, args, rollout, out)
        finally:
            engine.close()
    order = {t.id: i for i, t in enumerate(tasks)}
    results.sort(key=lambda r: order.get(r["task_id"], len(order)))
    meta = {k: config[k] for k in ("env", "pool", "split", "engine", "model")}
    summary = summarize(results, args.k, meta)
    write_json(out / "summary.json", summary)
    atomic_write(out / "summary.md", summary_markdown(summary))
    plot_pass_k(summary, out / "pass_k.png")
    pk = ", ".join(f"pass^{k}={v:.3f}" for k, v in summary["pass_k"].items())
    print(
        f"rods eval: {len(results)} tasks: {pk}, mean progress {summary['mean_progress']:.3f}; wrote {out}"
    )
    trials = sum(len(r["termination"]) for r in results)
    errored = sum(t == "error" for r in results for t in r["termination"])
    if trials and errored == trials:
        print(
            f"rods eval: error: every trial ({trials}) ended in an engine or environment error; "
            f"the scores mean nothing (see {out / 'episodes.jsonl'}; is the model reachable?)",
            file=sys.stderr,
        )
        return 1
    if errored:
        print(
            f"rods eval: warning: {errored} of {trials} trials ended in an error", file=sys.stderr
        )
    return 0


def _run(
    engine: Any, domain: Any, todo: list[Task], args: argparse.Namespace, rollout: Any, out: Path
) -> list[dict[str, Any]]:
    """Run the trials of ``todo``, writing each task's lines as soon as its trials finish."""
    import gymnasium as gym
    from tqdm.auto import tqdm

    import rods_env  # registers the environment ids
    from rods_agent.rollout import EpisodeSpec, run_rollouts
    from rods_agent.user import LLMUser

    assert rods_env.ENV_IDS

    def make_env() -> Any:
        user = LLMUser(engine) if args.user == "llm" else None
        return gym.make(
            domain.env_id, max_steps=args.max_turns, user=user, disable_env_checker=True
        )

    by_id = {t.id: t for t in todo}
    pending: dict[str, list[Any]] = defaultdict(list)
    finished: list[dict[str, Any]] = []
    bar = tqdm(
        total=len(todo), desc="tasks", unit="task", disable=True if args.no_progress else None
    )
    t_start = time.perf_counter()

    def on_record(record: Any) -> None:
        group = pending[record.task_id]
        group.append(record)
        if len(group) < args.trials:
            return
        group.sort(key=lambda r: r.trial)
        row = task_result(by_id[record.task_id], group)
        append_jsonl(out / EPISODES, (r.to_dict(tokens=False) for r in group))
        append_jsonl(out / RESULTS, [row])
        finished.append(row)
        del pending[record.task_id]
        bar.update(1)
        wins = sum(r["successes"] for r in finished)
        bar.set_postfix(success=f"{wins / (len(finished) * args.trials):.2f}")

    specs = (EpisodeSpec(task, trial) for task in todo for trial in range(args.trials))
    try:
        run_rollouts(engine, make_env, specs, rollout, on_record=on_record)
    finally:
        bar.close()
    log.info("evaluated %d tasks in %.1fs", len(finished), time.perf_counter() - t_start)
    return finished


def main(argv: list[str] | None = None) -> int:
    """``python -m rods_agent.evaluate ...`` (same as ``rods eval ...``)."""
    parser = argparse.ArgumentParser(prog="rods eval", description=__doc__.splitlines()[0])
    add_eval_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_eval(args)
    except RodsError as exc:
        print(f"rods eval: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
