"""GRPO on a rods environment with TRL's GRPOTrainer and the RODS data engine.

One process (CPU, the tiny local model):

    python examples/trl_grpo.py --env rods/Retail-v0 --mode rods --max-steps 4 --output-dir runs/trl

Two processes on the gloo backend (a real distributed run, each with half the batch):

    torchrun --nproc_per_node 2 examples/trl_grpo.py --max-steps 2 --output-dir runs/trl2

On GPUs, launch the same script with ``accelerate launch --config_file ...`` and a real
model (``--model Qwen/Qwen3-4B``, ``--vllm colocate``): see docs/scale-out.md. ``key=value``
arguments override the data engine's settings (``data.capacity=400 data.p_max=0.3``), as
in ``rods train``.

Outputs in ``--output-dir``: TRL's logs and checkpoints, ``rods_metrics.jsonl`` (one line
per round: zones, pool, synthesis, effective group ratio), ``rods_data_engine.json`` (the
engine's final state; with several processes one file per rank), and ``timing.json``
(steps/s and where the time went, per process).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="rods/Retail-v0", help="rods env id")
    parser.add_argument("--mode", choices=["static", "filter", "rods"], default="rods")
    parser.add_argument("--max-steps", type=int, default=4, help="optimizer steps")
    parser.add_argument("--output-dir", default="runs/trl_grpo")
    parser.add_argument(
        "--model", default=None, help="model folder or hub id (default: the tiny local model)"
    )
    parser.add_argument("--reward", choices=["progress", "success"], default="progress")
    parser.add_argument(
        "--tasks-per-step",
        type=int,
        default=2,
        help="distinct tasks per step over all processes",
    )
    parser.add_argument("--num-generations", type=int, default=2, help="G, rollouts per task")
    parser.add_argument("--max-completion-length", type=int, default=48)
    parser.add_argument("--max-tool-calls", type=int, default=4, help="tool rounds per episode")
    parser.add_argument("--max-env-steps", type=int, default=40, help="env actions per episode")
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    parser.add_argument("--vllm", choices=["off", "colocate", "server"], default="off")
    parser.add_argument("--bf16", action="store_true", help="bfloat16 training (GPU)")
    parser.add_argument(
        "overrides", nargs="*", default=[], help="data engine settings: data.KEY=VALUE"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Train; returns the timing summary of this process."""
    args = parse_args(argv)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from rods_agent.config import load_config
    from rods_agent.data import DataEngine
    from rods_agent.integrations.trl import (
        EngineDataset,
        RodsCallback,
        RodsGRPOTrainer,
        build_tiny_trl_model,
        environment_factory,
        rows_per_round,
    )
    from rods_env.errors import ConfigError
    from rods_env.fileio import write_json
    from rods_env.registry import load_domain

    torch.set_num_threads(args.threads)
    bad = [o for o in args.overrides if not o.startswith("data.")]
    if bad:
        raise SystemExit(
            f"trl_grpo.py: error: only data.KEY=VALUE overrides are read, got {bad[0]!r}"
        )
    try:
        data_config = load_config(None, args.overrides).data
    except ConfigError as exc:
        raise SystemExit(f"trl_grpo.py: error: {exc}") from None

    out = Path(args.output_dir)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    completions = args.tasks_per_step * args.num_generations
    if completions % world:
        raise SystemExit(
            f"trl_grpo.py: error: the {completions} completions of a step "
            f"(--tasks-per-step x --num-generations) do not split over {world} processes"
        )
    config = GRPOConfig(
        output_dir=str(out),
        max_steps=args.max_steps,
        per_device_train_batch_size=completions // world,
        gradient_accumulation_steps=1,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        max_tool_calling_iterations=args.max_tool_calls,
        learning_rate=args.learning_rate,
        shuffle_dataset=False,
        use_cpu=not torch.cuda.is_available(),
        bf16=args.bf16,
        # on CPU the tiny model's activations are small: recomputing them only costs time
        gradient_checkpointing=torch.cuda.is_available(),
        use_vllm=args.vllm != "off",
        vllm_mode=args.vllm if args.vllm != "off" else "colocate",
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=args.seed,
        data_seed=args.seed,
        ddp_backend="gloo" if not torch.cuda.is_available() and world > 1 else None,
    )

    model_path = args.model
    if model_path is None:
        model_path = str(out / "tiny-model")
        with config.main_process_first(desc="build the tiny model"):
            if not (Path(model_path) / "config.json").is_file():
                build_tiny_trl_model(model_path)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path)

    domain = load_domain(args.env)
    engine = DataEngine(
        data_config,
        mode=args.mode,
        tasks=domain.seed_tasks("train"),
        reserved=domain.seed_tasks("test"),
        seed=args.seed,
    )
    view = EngineDataset(
        engine, domain, tasks_per_round=rows_per_round(config), reserved=domain.seed_tasks("test")
    )
    callback = RodsCallback(view)
    trainer = RodsGRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        train_dataset=view.dataset(),
        environment_factory=environment_factory(
            domain, source=view, reward=args.reward, max_steps=args.max_env_steps
        ),
        callbacks=[callback],
        rods_view=view,
    )
    started = time.perf_counter()
    result = trainer.train()
    wall = time.perf_counter() - started
    rollout = trainer.rods_seconds["rollout"]
    env = trainer.rods_seconds["env"]
    engine_seconds = sum(callback.seconds.values())
    timing = {
        "processes": world,
        "rank": config.process_index,
        "steps": result.global_step,
        "train_seconds": wall,
        "steps_per_s": result.global_step / wall if wall else None,
        "seconds": {
            "generate": rollout - env,  # generation, tool parsing, reward gathering, log-probs
            "env": env,
            "data_engine": engine_seconds,
            "update": wall - rollout - engine_seconds,  # forward, backward, optimizer, logging
        },
        "data_engine": dict(callback.seconds),
        "dropped_completions": trainer.rods_dropped,
    }
    name = "timing.json" if config.process_index == 0 else f"timing.rank{config.process_index}.json"
    write_json(out / name, timing)
    return timing


if __name__ == "__main__":
    print(main())
