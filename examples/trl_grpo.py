"""GRPO on a rods environment with TRL's GRPOTrainer and the RODS data engine.

One process (CPU, the tiny local model):

    python examples/trl_grpo.py --env rods/Retail-v0 --mode rods --max-steps 4 --output-dir results/trl

A model whose chat template TRL does not recognize byte for byte (an older revision of the
family's template, a fine-tune's own copy) gets TRL's copy of the official one with
``--chat-template qwen3`` (or ``qwen2_5``, ``llama3_1``, ``gptoss``, or a ``.jinja`` file);
without it the script stops with a one-line error instead of failing inside TRL. Gemma 3's
template renders no tool calls, which TRL's tool loop needs.

Two processes on the gloo backend (a real distributed run, each with half the batch):

    torchrun --nproc_per_node 2 examples/trl_grpo.py --max-steps 2 --output-dir results/trl2

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
    parser.add_argument(
        "--mode", choices=["static", "filter", "rods", "rods-expand", "envtuning"], default="rods"
    )
    parser.add_argument("--max-steps", type=int, default=4, help="optimizer steps")
    parser.add_argument("--output-dir", default="results/trl_grpo")
    parser.add_argument(
        "--model", default=None, help="model folder or hub id (default: the tiny local model)"
    )
    parser.add_argument(
        "--chat-template",
        default=None,
        help="chat template for the model: a .jinja file or the name of one TRL ships "
        "(qwen3, qwen2_5, llama3_1, gptoss, ...); TRL parses tool calls only for templates "
        "it recognizes byte for byte (default: the model's own)",
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
    parser.add_argument("--beta", type=float, default=0.0, help="KL coefficient (paper: 0.1)")
    parser.add_argument("--epsilon", type=float, default=0.2, help="lower clip range")
    parser.add_argument("--epsilon-high", type=float, default=0.28, help="upper clip range")
    parser.add_argument(
        "--gradient-accumulation-steps",
        type=int,
        default=1,
        help="micro-batches per optimizer step on each process",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    parser.add_argument("--vllm", choices=["off", "colocate", "server"], default="off")
    parser.add_argument(
        "--vllm-server", default=None, help="base URL of `trl vllm-serve` (--vllm server)"
    )
    parser.add_argument(
        "--vllm-gpu-memory-utilization", type=float, default=0.3, help="--vllm colocate only"
    )
    parser.add_argument("--bf16", action="store_true", help="bfloat16 training (GPU)")
    parser.add_argument(
        "--save-steps", type=int, default=0, help="checkpoint every N steps (0: never)"
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue from the last checkpoint in --output-dir"
    )
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

    from rods_agent.data import DataEngine
    from rods_agent.integrations.trl import (
        EngineDataset,
        RodsCallback,
        RodsGRPOTrainer,
        build_tiny_trl_model,
        environment_factory,
        rows_per_round,
    )
    from rods_agent.integrations.trl.model import load_chat_template, trl_template_problem
    from rods_agent.training.config import load_config
    from rods_env.benchmark import BenchmarkDomain
    from rods_env.errors import ConfigError
    from rods_env.fileio import write_json
    from rods_env.registry import load_any_domain

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
    micro_batches = world * args.gradient_accumulation_steps
    if completions % micro_batches:
        raise SystemExit(
            f"trl_grpo.py: error: the {completions} completions of a step "
            f"(--tasks-per-step x --num-generations) do not split into {world} processes x "
            f"{args.gradient_accumulation_steps} accumulation steps"
        )
    config = GRPOConfig(
        output_dir=str(out),
        max_steps=args.max_steps,
        per_device_train_batch_size=completions // micro_batches,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        max_tool_calling_iterations=args.max_tool_calls,
        learning_rate=args.learning_rate,
        beta=args.beta,
        epsilon=args.epsilon,
        epsilon_high=args.epsilon_high,
        shuffle_dataset=False,
        use_cpu=not torch.cuda.is_available(),
        bf16=args.bf16,
        # on CPU the tiny model's activations are small: recomputing them only costs time
        gradient_checkpointing=torch.cuda.is_available(),
        use_vllm=args.vllm != "off",
        vllm_mode=args.vllm if args.vllm != "off" else "colocate",
        vllm_server_base_url=args.vllm_server,
        vllm_gpu_memory_utilization=args.vllm_gpu_memory_utilization,
        logging_steps=1,
        save_strategy="steps" if args.save_steps else "no",
        save_steps=args.save_steps or 500,
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
    try:
        if args.chat_template is not None:
            tokenizer.chat_template = load_chat_template(args.chat_template)
    except ConfigError as exc:
        raise SystemExit(f"trl_grpo.py: error: {exc}") from None
    problem = trl_template_problem(tokenizer)
    if problem is not None:
        raise SystemExit(f"trl_grpo.py: error: {model_path}: {problem}")
    model = AutoModelForCausalLM.from_pretrained(model_path)

    domain = load_any_domain(args.env)  # a rods domain or a benchmark with a train split
    train_tasks = (
        domain.training_tasks("train")
        if isinstance(domain, BenchmarkDomain)
        else domain.seed_tasks("train")
    )
    engine = DataEngine(
        data_config,
        mode=args.mode,
        tasks=train_tasks,
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
    result = trainer.train(resume_from_checkpoint=True if args.resume else None)
    wall = time.perf_counter() - started
    rollout = trainer.rods_seconds["rollout"]
    env = trainer.rods_seconds["env"]
    engine_seconds = sum(callback.seconds.values())
    step_seconds = [float(x["step_time"]) for x in trainer.state.log_history if "step_time" in x]
    timing = {
        "processes": world,
        "rank": config.process_index,
        "steps": result.global_step,
        "steps_this_run": callback.steps_run,
        "train_seconds": wall,
        "steps_per_s": callback.steps_run / wall if wall else None,
        "seconds": {
            "generate": rollout - env,  # generation, tool parsing, reward gathering, log-probs
            "env": env,
            "data_engine": engine_seconds,
            "update": wall - rollout - engine_seconds,  # forward, backward, optimizer, logging
        },
        "step_seconds": step_seconds[len(step_seconds) - callback.steps_run :],
        "data_engine": dict(callback.seconds),
        "dropped_completions": trainer.rods_dropped,
    }
    name = "timing.json" if config.process_index == 0 else f"timing.rank{config.process_index}.json"
    write_json(out / name, timing)
    return timing


if __name__ == "__main__":
    print(main())
