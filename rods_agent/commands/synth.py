"""``rods synth``: grow a validated task pool offline from seed tasks.

Example::

    rods synth --env rods/Retail-v0 --from seeds --split train --per-seed 5 \\
        --mode resample --augment missing_parameter,distractor --out pool.jsonl --seed 0

The pool is written atomically to ``--out``; a summary (accepted, rejected by reason,
signature histogram of seeds and output, entity coverage) is printed and written as JSON
beside it (``pool.summary.json``). Needs no model and no torch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rods_env.fileio import write_json

AUGMENT_KINDS = ("missing_parameter", "missing_function", "long_context", "distractor")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``rods synth`` options."""
    parser.add_argument(
        "--env", required=True, help="environment id or domain name, e.g. rods/Retail-v0 or retail"
    )
    parser.add_argument(
        "--from",
        dest="source",
        default="seeds",
        help="'seeds' (the domain's seed set) or a JSONL task pool to synthesize around",
    )
    parser.add_argument(
        "--split",
        default="train",
        choices=["train", "test", "all"],
        help="split of the seed tasks to use (default: train)",
    )
    parser.add_argument(
        "--per-seed", type=int, default=5, help="accepted base variants wanted per seed task"
    )
    parser.add_argument(
        "--mode",
        default="resample",
        choices=["resample", "expand"],
        help="resample: same signature, new entities; expand: one step harder",
    )
    parser.add_argument(
        "--augment",
        default="",
        help=f"comma-separated augmentations of every accepted variant: {','.join(AUGMENT_KINDS)} "
        "(or 'all')",
    )
    parser.add_argument("--out", type=Path, required=True, help="output pool (JSONL)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    parser.add_argument(
        "--attempts", type=int, default=3, help="tries per wanted variant before giving up"
    )
    parser.add_argument("--limit", type=int, default=None, help="use at most this many seeds")
    parser.add_argument(
        "--skills", default="", help="comma-separated skills to keep (default: all)"
    )
    parser.add_argument("--no-rewrite", action="store_true", help="keep the skills' phrasing")
    parser.add_argument(
        "--include-seeds", action="store_true", help="also write the seed tasks to the pool"
    )
    parser.add_argument(
        "--append",
        action="store_true",
        help="add to the pool already at --out (its tasks count as known for dedupe)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _augments(text: str) -> tuple[str, ...]:
    from rods_env.errors import ConfigError

    if not text.strip():
        return ()
    if text.strip() == "all":
        return AUGMENT_KINDS
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    bad = [k for k in kinds if k not in AUGMENT_KINDS]
    if bad:
        raise ConfigError(
            f"--augment: unknown kind {', '.join(map(repr, bad))}; kinds: {', '.join(AUGMENT_KINDS)}"
        )
    return kinds


def _seeds(args: argparse.Namespace, domain: Any) -> list[Any]:
    from rods_env.errors import ConfigError
    from rods_env.task import load_tasks

    split = None if args.split == "all" else args.split
    if args.source == "seeds":
        tasks = domain.seed_tasks(split)
        where = f"the {domain.name} seed set"
    else:
        tasks = [
            t
            for t in load_tasks(args.source)
            if t.domain == domain.name and (split is None or t.split == split)
        ]
        where = str(args.source)
    if args.skills:
        keep = {s.strip() for s in args.skills.split(",") if s.strip()}
        unknown = keep - set(domain.skill_map)
        if unknown:
            raise ConfigError(
                f"--skills: unknown skill {', '.join(sorted(unknown))} in {domain.name}; "
                f"skills: {', '.join(domain.skill_map)}"
            )
        tasks = [t for t in tasks if t.skill in keep]
    if args.limit is not None:
        if args.limit < 1:
            raise ConfigError(f"--limit must be at least 1, got {args.limit}")
        tasks = tasks[: args.limit]
    if not tasks:
        raise ConfigError(
            f"no seed tasks of domain {domain.name} in {where}"
            + (f" (split {args.split})" if split else "")
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


def run(args: argparse.Namespace) -> int:
    """Run ``rods synth``."""
    from rods_env.errors import ConfigError
    from rods_env.registry import load_domain
    from rods_env.synthesis import SynthesisConfig, SynthesisReport, Synthesizer, TaskPool

    config = SynthesisConfig(
        per_seed=args.per_seed,
        mode=args.mode,
        augment=_augments(args.augment),
        seed=args.seed,
        attempts=args.attempts,
        rewrite=not args.no_rewrite,
    )
    domain = load_domain(args.env)
    seeds = _seeds(args, domain)
    if args.out.exists() and args.out.is_dir():
        raise ConfigError(f"--out {args.out} is a directory; give a file such as pool.jsonl")
    pool = (
        TaskPool.load(args.out, domains=domain)
        if args.append and args.out.exists()
        else TaskPool(domains=domain)
    )
    if args.include_seeds:
        pool.extend(seeds)
    synth = Synthesizer(config, domains=domain, known=pool.keys())
    synth.remember(seeds)
    report = SynthesisReport(seeds)
    bar = _progress(seeds, f"synth {domain.name}", disable=args.no_progress)
    try:
        for seed in bar:
            for outcome in synth.variants(seed):
                report.add(outcome)
                if outcome.accepted:
                    pool.add(outcome.task, key=outcome.key)
            bar.set_postfix(accepted=len(report.accepted), rejected=sum(report.rejected.values()))
    finally:
        bar.close()
        report.finish()
        written = pool.save(args.out)
        summary = {
            "env": domain.env_id,
            "source": str(args.source),
            "split": args.split,
            "out": str(args.out),
            "pool_size": written,
            "config": {
                "per_seed": config.per_seed,
                "mode": config.mode,
                "augment": list(config.augment),
                "seed": config.seed,
                "attempts": config.attempts,
                "rewrite": config.rewrite,
            },
            **report.to_dict(),
            "pool": pool.stats(),
        }
        write_json(summary_path(args.out), summary)
    print(report.format())
    print(f"wrote {written} tasks to {args.out}; summary in {summary_path(args.out)}")
    return 0
