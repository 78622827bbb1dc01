"""Grow a validated task pool offline from seed tasks: the library function of ``rods synth``.

:func:`synth_pool` takes typed :class:`SynthOptions` (``rods synth`` builds them from its
command line, :mod:`rods_agent.commands.synth`) and runs the synthesis pipeline of
:mod:`rods_env.synthesis` over the seeds, optionally with a model paraphrasing the requests
(:mod:`rods_agent.synthesis.rewrite`). It writes the pool atomically and a summary beside it
(``pool.summary.json``), and returns the summary. Needs no model and no torch unless
``rewrite_model`` is set.

Reruns lose nothing and block nothing: an existing ``out`` is never overwritten unless
``force`` (or added to with ``append``); a run stopped by Ctrl-C or SIGTERM writes the seeds
it finished (never part of a seed) and marks its summary ``interrupted``, and ``resume``
finishes it, skipping the seeds already done, so the pool is the one an uninterrupted run
writes.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rods_env.errors import ConfigError
from rods_env.fileio import write_json

AUGMENT_KINDS = ("missing_parameter", "missing_function", "long_context", "distractor")
GROW_KINDS = ("shape", "join", "append", "deepen", "chain")


@dataclass(frozen=True)
class SynthOptions:
    """Everything ``rods synth`` does, as typed values (the CLI builds one from its options).

    Attributes:
        env: Environment id or domain name.
        out: Output pool (JSONL); the summary goes beside it.
        source: ``"seeds"`` or a JSONL task pool to synthesize around.
        split: ``"train"``, ``"test"`` or ``"all"``.
        per_seed: Accepted base variants wanted per seed (at least 1).
        mode: ``"resample"`` or ``"expand"``.
        augment: Augmentation kinds.
        seed: Seed of every random choice.
        attempts: Tries per wanted variant.
        limit: Use at most this many seeds.
        skills: Keep only seeds of these skills (empty: all).
        rewrite: Template rewrite (persona, phrasing).
        include_seeds: Also write the seed tasks into the pool.
        append: Add to the pool at ``out`` (its tasks count as known).
        force: Overwrite an existing ``out``.
        resume: Finish the interrupted run at ``out``.
        progress: Show a progress bar.
        round: Round number entering every random stream (new candidates per round).
        long_tokens: Size knob of long-context variants (tokens of padding).
        grow: What ``expand`` may grow: ``shape`` (a skill's own axes), ``join`` (one more
            request in the last turn), ``append`` (one more request in a new turn),
            ``deepen`` (a value the customer knew is found with the tools instead),
            ``chain`` (one more request that takes a value an earlier request found).
        rewrite_model: Model that paraphrases the requests (None: templates only).
        rewrite_engine: Engine of that model: ``transformers``, ``vllm`` or ``openai``.
        rewrite_base_url: API root of an OpenAI-compatible server.
        rewrite_batch_size: Paraphrases per engine call.
        rewrite_max_tokens: Most new tokens per paraphrase.
        rewrite_temperature: Sampling temperature of the paraphrases.
    """

    env: str
    out: Path
    source: str = "seeds"
    split: str = "train"
    per_seed: int = 5
    mode: str = "resample"
    augment: tuple[str, ...] = ()
    seed: int = 0
    attempts: int = 3
    limit: int | None = None
    skills: tuple[str, ...] = ()
    rewrite: bool = True
    include_seeds: bool = False
    append: bool = False
    force: bool = False
    resume: bool = False
    progress: bool = True
    round: int = 0
    long_tokens: int = 8000
    grow: tuple[str, ...] = GROW_KINDS
    rewrite_model: str | None = None
    rewrite_engine: str = "transformers"
    rewrite_base_url: str | None = None
    rewrite_batch_size: int = 16
    rewrite_max_tokens: int = 192
    rewrite_temperature: float = 0.7

    def __post_init__(self) -> None:
        if self.per_seed < 1:
            raise ConfigError(f"--per-seed must be at least 1, got {self.per_seed}")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"--limit must be at least 1, got {self.limit}")
        if self.round < 0:
            raise ConfigError(f"--round must be 0 or more, got {self.round}")
        modes = [f"--{m}" for m in ("append", "force", "resume") if getattr(self, m)]
        if len(modes) > 1:
            raise ConfigError(f"{' and '.join(modes)} cannot be combined; choose one")
        bad = [k for k in self.augment if k not in AUGMENT_KINDS]
        if bad:
            raise ConfigError(
                f"--augment: unknown kind {', '.join(map(repr, bad))}; kinds: "
                f"{', '.join(AUGMENT_KINDS)}"
            )
        bad = [k for k in self.grow if k not in GROW_KINDS]
        if bad or not self.grow:
            raise ConfigError(
                f"--grow: unknown step {', '.join(map(repr, bad)) or '(none given)'}; steps: "
                f"{', '.join(GROW_KINDS)}"
            )

    def run_config(self) -> dict[str, Any]:
        """The options that decide the pool's content (a resumed run must use the same)."""
        # how to run (where, whether to overwrite, how to batch) does not decide the content
        control = {"out", "append", "force", "resume", "progress", "rewrite_base_url"}
        control.add("rewrite_batch_size")
        data = asdict(self)
        return {
            k: list(v) if isinstance(v, tuple) else v for k, v in data.items() if k not in control
        }


def _seeds(opts: SynthOptions, domain: Any) -> list[Any]:
    from rods_env.task import load_tasks

    split = None if opts.split == "all" else opts.split
    if opts.source == "seeds":
        tasks = domain.seed_tasks(split)
        where = f"the {domain.name} seed set"
    else:
        tasks = [
            t
            for t in load_tasks(opts.source)
            if t.domain == domain.name and (split is None or t.split == split)
        ]
        where = str(opts.source)
    if opts.skills:
        unknown = set(opts.skills) - set(domain.skill_map)
        if unknown:
            raise ConfigError(
                f"--skills: unknown skill {', '.join(sorted(unknown))} in {domain.name}; "
                f"skills: {', '.join(domain.skill_map)}"
            )
        tasks = [t for t in tasks if t.skill in opts.skills]
    if opts.limit is not None:
        tasks = tasks[: opts.limit]
    if not tasks:
        raise ConfigError(
            f"no seed tasks of domain {domain.name} in {where}"
            + (f" (split {opts.split})" if split else "")
        )
    return tasks


class _NoBar:
    """Stands in for a tqdm bar when tqdm is not installed (it is not a core dependency)."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def __iter__(self) -> Any:
        return iter(self.items)

    def set_postfix(self, **_: Any) -> None:
        """Ignore progress details."""

    def close(self) -> None:
        """Nothing to close."""


def _progress(items: list[Any], desc: str, *, disable: bool) -> Any:
    """A progress bar on stderr (off when asked, or when stderr is not a terminal)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar(items)
    return tqdm(
        items,
        desc=desc,
        unit="seed",
        file=sys.stderr,
        disable=True if disable else None,
        dynamic_ncols=True,
    )


def summary_path(out: Path) -> Path:
    """Where the JSON summary of a pool goes: ``pool.jsonl`` -> ``pool.summary.json``."""
    return out.with_suffix(".summary.json")


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@contextmanager
def _interruptible() -> Iterator[Callable[[], Any]]:
    """SIGTERM stops the run like Ctrl-C; yields ``deferred()``, a context in which both
    signals wait until its end (a seed's results are committed whole or not at all)."""
    pending: list[int] = []

    def remember(signum: int, frame: Any) -> None:
        pending.append(signum)

    @contextmanager
    def deferred() -> Iterator[None]:
        saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        for s in saved:
            signal.signal(s, remember)
        try:
            yield
        finally:
            for s, handler in saved.items():
                signal.signal(s, handler)
            if pending:
                raise KeyboardInterrupt

    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield deferred
    finally:
        signal.signal(signal.SIGTERM, previous)


def _check_resumable(opts: SynthOptions) -> dict[str, Any]:
    """The earlier summary of an interrupted run with the same options, or a ConfigError."""
    path = summary_path(opts.out)
    if not opts.out.exists() or not path.exists():
        raise ConfigError(f"--resume: no earlier run at {opts.out} (pool and summary needed)")
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"--resume: cannot read {path}: {exc}") from None
    if not summary.get("interrupted"):
        raise ConfigError(
            f"--resume: the run at {opts.out} finished; nothing to resume "
            "(use --append to add to it, --force to start over)"
        )
    before = summary.get("config", {})
    now = opts.run_config()
    changed = sorted(k for k in now if before.get(k) != now[k])
    if changed:
        diffs = ", ".join(f"{k} {before.get(k)!r} -> {now[k]!r}" for k in changed)
        raise ConfigError(f"--resume needs the interrupted run's options; changed: {diffs}")
    return summary


def _model_rewriter(opts: SynthOptions, domain: Any) -> Any:
    from rods_agent.engines import make_engine
    from rods_agent.engines.base import SamplingParams
    from rods_agent.synthesis.rewrite import ModelRewriter

    assert opts.rewrite_model is not None
    engine_options: dict[str, Any] = {}
    if opts.rewrite_engine == "openai" and opts.rewrite_base_url:
        engine_options["base_url"] = opts.rewrite_base_url
    engine = make_engine(opts.rewrite_engine, opts.rewrite_model, **engine_options)
    params = SamplingParams(
        max_tokens=opts.rewrite_max_tokens,
        temperature=opts.rewrite_temperature,
        top_p=0.95,
        seed=opts.seed,
    )
    return ModelRewriter(engine, params=params, batch_size=opts.rewrite_batch_size, domains=domain)


def synth_pool(opts: SynthOptions) -> dict[str, Any]:
    """Grow the pool ``opts`` describe (what ``rods synth`` runs): write it and its summary.

    Args:
        opts: What to synthesize, from which seeds, and where to write it.

    Returns:
        The summary written beside the pool (:func:`summary_path`).

    Raises:
        ConfigError: for bad options, an existing ``--out`` without ``--force``,
            ``--append`` or ``--resume``, or a run that cannot be resumed.
        KeyboardInterrupt: after writing what the finished seeds produced, when the run
            is stopped (Ctrl-C, SIGTERM); the summary is then marked ``interrupted``.
    """
    from rods_env.registry import load_domain
    from rods_env.synthesis import SynthesisConfig, SynthesisReport, Synthesizer, TaskPool

    config = SynthesisConfig(
        per_seed=opts.per_seed,
        mode=opts.mode,
        augment=opts.augment,
        seed=opts.seed,
        attempts=opts.attempts,
        rewrite=opts.rewrite,
        long_tokens=opts.long_tokens,
        grow=opts.grow,
    )
    domain = load_domain(opts.env)
    seeds = _seeds(opts, domain)
    out = opts.out
    if out.exists() and out.is_dir():
        raise ConfigError(f"--out {out} is a directory; give a file such as pool.jsonl")
    if out.exists() and not (opts.force or opts.append or opts.resume):
        raise ConfigError(
            f"--out {out} already exists; pass --force to overwrite it, --append to add to it, "
            "or --resume to finish an interrupted run"
        )
    earlier = _check_resumable(opts) if opts.resume else None
    keep = (opts.append or opts.resume) and out.exists()
    pool = TaskPool.load(out, domains=domain) if keep else TaskPool(domains=domain)
    done: list[str] = list(earlier["seeds_done"]) if earlier else []
    if opts.include_seeds and earlier is None:
        pool.extend(seeds)
    rewriter = _model_rewriter(opts, domain) if opts.rewrite_model else None
    synth = Synthesizer(config, domains=domain, known=pool.keys())
    synth.remember(seeds)
    synth.remember(pool.tasks, keys=False)  # their facts feed the plausible guesses
    if earlier is not None:
        synthesized = [t for t in pool if t.provenance.origin == "synthesized"]
        report = SynthesisReport.resumed(earlier, seeds, synthesized)
    else:
        report = SynthesisReport(seeds)
    rewrite_stats = _rewrite_stats(earlier) if rewriter is not None else None
    todo = [s for s in seeds if s.id not in set(done)]
    print(
        f"synth {domain.name}: {len(todo)} of {len(seeds)} seeds to do -> {out}",
        flush=True,
    )
    interrupted = False
    bar = _progress(todo, f"synth {domain.name}", disable=not opts.progress)
    try:
        with _interruptible() as deferred:
            for seed in bar:
                outcomes = list(synth.variants(seed, round=opts.round))
                if rewriter is not None:
                    outcomes = _rewritten(rewriter, outcomes, rewrite_stats)
                with deferred():  # a seed's results go in whole, or not at all
                    for outcome in outcomes:
                        report.add(outcome)
                        if outcome.accepted:
                            pool.add(outcome.task, key=outcome.key)
                    done.append(seed.id)
                bar.set_postfix(
                    accepted=len(report.accepted), rejected=sum(report.rejected.values())
                )
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        bar.close()
        report.finish()
        written = pool.save(out)
        summary = {
            "env": domain.env_id,
            "source": str(opts.source),
            "split": opts.split,
            "out": str(out),
            "pool_size": written,
            "interrupted": interrupted,
            "seeds_total": len(seeds),
            "seeds_done": done,
            "config": opts.run_config(),
            **report.to_dict(),
            "pool": pool.stats(),
        }
        if rewrite_stats is not None:
            summary["model_rewrite"] = {"model": opts.rewrite_model, **rewrite_stats.to_dict()}
        write_json(summary_path(out), summary)
        if interrupted:
            print(
                f"rods synth: interrupted after {len(done)} of {len(seeds)} seeds; wrote "
                f"{written} tasks to {out}; finish with --resume",
                file=sys.stderr,
            )
    return summary


def _rewrite_stats(earlier: dict[str, Any] | None) -> Any:
    from collections import Counter

    from rods_agent.synthesis.rewrite import RewriteStats

    stats = RewriteStats()
    if earlier and "model_rewrite" in earlier:
        before = earlier["model_rewrite"]
        stats.requests = int(before.get("requests", 0))
        stats.accepted = int(before.get("accepted", 0))
        stats.rejected = Counter(before.get("rejected", {}))
        stats.examples = dict(before.get("examples", {}))
    return stats


def _rewritten(rewriter: Any, outcomes: Sequence[Any], stats: Any) -> list[Any]:
    """The outcomes with the accepted tasks' requests paraphrased by the model."""
    from dataclasses import replace

    accepted = [o for o in outcomes if o.accepted]
    results = iter(rewriter.rewrite([o.task for o in accepted]))
    out = []
    for o in outcomes:
        if o.accepted:
            result = next(results)
            stats.add(result)
            o = replace(o, task=result.task)
        out.append(o)
    return out
