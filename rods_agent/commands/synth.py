"""``rods synth``: grow a validated task pool offline from seed tasks.

Example::

    rods synth --env rods/Retail-v0 --from seeds --split train --per-seed 5 \\
        --mode resample --augment missing_parameter,distractor --out pool.jsonl --seed 0

The pool is written atomically to ``--out``; a summary (accepted, rejected by reason,
signature histogram of seeds and output, entity coverage) is printed and written as JSON
beside it (``pool.summary.json``). Needs no model and no torch, unless ``--rewrite-model``
asks a model to paraphrase the requests (:mod:`rods_agent.synthesis.rewrite`).

Reruns lose nothing and block nothing: an existing ``--out`` is never overwritten unless
``--force`` (or added to with ``--append``); a run stopped by Ctrl-C or SIGTERM writes the
seeds it finished (never part of a seed) and marks its summary ``interrupted``, and
``--resume`` finishes it, skipping the seeds already done, so the pool is the one an
uninterrupted run writes.

This module is the command line only: :func:`rods_agent.synthesis.pool.synth_pool` does the
work, from the :class:`~rods_agent.synthesis.pool.SynthOptions` built here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rods_agent.synthesis.pool import (
    AUGMENT_KINDS,
    GROW_KINDS,
    SynthOptions,
    summary_path,
    synth_pool,
)
from rods_env.errors import ConfigError


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
    parser.add_argument(
        "--out", type=Path, default=None, help="output pool (JSONL); required unless --graph"
    )
    parser.add_argument(
        "--grow",
        default=",".join(GROW_KINDS),
        help="what expand may grow, comma-separated: shape (a skill's own axes), join (one "
        "more request in the last turn), append (one more request in a new turn), deepen (a "
        "value the customer knew is found with the tools), chain (one more request that takes a "
        "value an earlier request found); default: all",
    )
    parser.add_argument(
        "--graph",
        action="store_true",
        help="print the data-flow graph of the domain's tools (what expansion follows) and exit",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    parser.add_argument(
        "--attempts", type=int, default=3, help="tries per wanted variant before giving up"
    )
    parser.add_argument("--limit", type=int, default=None, help="use at most this many seeds")
    parser.add_argument(
        "--skills", default="", help="comma-separated skills to keep (default: all)"
    )
    parser.add_argument(
        "--round",
        type=int,
        default=0,
        help="round number in every random stream: the same seeds give new tasks in another "
        "round (default 0)",
    )
    parser.add_argument(
        "--long-tokens",
        type=int,
        default=8000,
        help="long-context size knob: tokens of padding in a long_context variant's tool "
        "outputs (4k, 8k, 16k or 32k worlds; default 8000)",
    )
    parser.add_argument("--no-rewrite", action="store_true", help="keep the skills' phrasing")
    parser.add_argument(
        "--include-seeds", action="store_true", help="also write the seed tasks to the pool"
    )
    existing = parser.add_mutually_exclusive_group()
    existing.add_argument(
        "--append",
        action="store_true",
        help="add to the pool already at --out (its tasks count as known for dedupe)",
    )
    existing.add_argument("--force", action="store_true", help="overwrite an existing --out")
    existing.add_argument(
        "--resume",
        action="store_true",
        help="finish the interrupted run at --out (same options), skipping finished seeds",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    model = parser.add_argument_group("model rewrite (optional; needs the agent extra)")
    model.add_argument(
        "--rewrite-model",
        default=None,
        help="paraphrase every request with this model (a folder, or a name on the server); "
        "paraphrases that change a value are refused and the template text is kept",
    )
    model.add_argument(
        "--rewrite-engine",
        default="transformers",
        choices=["transformers", "vllm", "openai"],
        help="engine of --rewrite-model (default: transformers)",
    )
    model.add_argument(
        "--rewrite-base-url", default=None, help="API root of an OpenAI-compatible server"
    )
    model.add_argument(
        "--rewrite-batch-size", type=int, default=16, help="paraphrases per engine call"
    )
    model.add_argument(
        "--rewrite-max-tokens", type=int, default=192, help="most new tokens per paraphrase"
    )
    model.add_argument(
        "--rewrite-temperature", type=float, default=0.7, help="sampling temperature"
    )


def _augments(text: str) -> tuple[str, ...]:
    if not text.strip():
        return ()
    if text.strip() == "all":
        return AUGMENT_KINDS
    return tuple(k.strip() for k in text.split(",") if k.strip())


def options_from(args: argparse.Namespace) -> SynthOptions:
    """The typed options of a parsed ``rods synth`` command line."""
    return SynthOptions(
        env=args.env,
        out=args.out,
        source=args.source,
        split=args.split,
        per_seed=args.per_seed,
        mode=args.mode,
        augment=_augments(args.augment),
        seed=args.seed,
        attempts=args.attempts,
        limit=args.limit,
        skills=tuple(s.strip() for s in args.skills.split(",") if s.strip()),
        rewrite=not args.no_rewrite,
        include_seeds=args.include_seeds,
        append=args.append,
        force=args.force,
        resume=args.resume,
        progress=not args.no_progress,
        round=args.round,
        long_tokens=args.long_tokens,
        grow=tuple(k.strip() for k in args.grow.split(",") if k.strip()),
        rewrite_model=args.rewrite_model,
        rewrite_engine=args.rewrite_engine,
        rewrite_base_url=args.rewrite_base_url,
        rewrite_batch_size=args.rewrite_batch_size,
        rewrite_max_tokens=args.rewrite_max_tokens,
        rewrite_temperature=args.rewrite_temperature,
    )


def run(args: argparse.Namespace) -> int:
    """Run ``rods synth`` from its parsed command line."""
    from rods_env.synthesis.report import format_summary

    if args.graph:
        from rods_env.registry import load_domain
        from rods_env.synthesis.flow import flow_graph

        print(flow_graph(load_domain(args.env)).format())
        return 0
    if args.out is None:
        raise ConfigError("--out is required (the pool to write), unless --graph")
    opts = options_from(args)
    summary = synth_pool(opts)
    print(format_summary(summary))
    rw = summary.get("model_rewrite")
    if rw:
        reasons = ", ".join(f"{k} {v}" for k, v in rw["rejected"].items()) or "none"
        print(
            f"model rewrite ({rw['model']}): {rw['accepted']} of {rw['requests']} paraphrases "
            f"kept; refused: {reasons}"
        )
    print(f"wrote {summary['pool_size']} tasks to {opts.out}; summary in {summary_path(opts.out)}")
    return 0
