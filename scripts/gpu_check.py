"""The GPU check behind ``scripts/gpu_check.sh``: a tiny Qwen3 with the real tokenizer, a warm
start and a few GRPO steps in bf16 with the transformers engine, and the numbers that say
whether the path is healthy.

    python scripts/gpu_check.py --device cuda --tokenizer .assets/tokenizers/qwen3
    python scripts/gpu_check.py --device cpu  ...   # the same path, small, on a CPU
    python scripts/gpu_check.py --experiment ...    # configs/experiment/gpu.yaml's protocol, in miniature
    python scripts/gpu_check.py --paper --model DIR # configs/experiment/paper.yaml's first steps with DIR
    python scripts/gpu_check.py --paper --device cpu  # the same path with the tiny model

Prints one ``gpu_check:`` line per measurement and writes them to ``<out>/gpu_check.json``
(and to ``$OUT/gpu_check.json`` when ``$OUT`` is set). Exit status: 0 when no episode ended in
``error`` and tokens were trained; 1 when one did, nothing was trained, or the run stopped
with an error (one line naming it); 2 when the machine cannot run the check (no CUDA, no
tokenizer).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# The run: small enough for minutes on one GPU (and seconds on a CPU), big enough that the
# openings (4-5k tokens with Qwen3's template), tool calls and updates are all real.
SETTINGS = {
    "cuda": {
        "steps": 5,
        "env": "[retail,airline]",
        "rollout": {"tasks_per_step": 8, "group_size": 4, "max_turns": 6,
                    "max_new_tokens": 96, "max_tokens": 8192, "thinking_tokens": 128},
        "warm_start": {"tasks": 8, "epochs": 2, "batch_size": 4, "micro_batch_size": 2},
        "grpo": {"micro_batch_size": 4},
    },
    "cpu": {
        "steps": 2,
        "env": "[retail]",
        "rollout": {"tasks_per_step": 2, "group_size": 2, "max_turns": 2,
                    "max_new_tokens": 8, "max_tokens": 8192, "thinking_tokens": 0},
        "warm_start": {"tasks": 2, "epochs": 1, "batch_size": 2, "micro_batch_size": 1},
        "grpo": {"micro_batch_size": 2},
    },
}  # fmt: skip


def build_tiny_qwen3(tokenizer_dir: Path, dest: Path) -> Path:
    """A random Qwen3 (hidden 64, 2 layers, 4 heads of 16, tied embeddings) with the
    tokenizer and chat template in ``tokenizer_dir``: about 10M parameters with Qwen3's
    vocabulary, nearly all of them the embedding (:func:`rods_agent.models.tiny.build_tiny_model`)."""
    from rods_agent.models.tiny import build_tiny_model

    return build_tiny_model(
        dest, family="qwen3", tokenizer=tokenizer_dir, hidden_size=64, layers=2, heads=4,
        kv_heads=2, intermediate_size=128, max_positions=32768,
    )  # fmt: skip


def overrides(device: str, model: Path, out: Path, steps: int | None) -> list[str]:
    """The ``rods train`` settings of the check on ``device``."""
    s = SETTINGS["cuda" if device.startswith("cuda") else "cpu"]
    items = [
        "policy=model", "mode=static", f"steps={steps or s['steps']}", f"env={s['env']}",
        f"out={out}", "seed=0",
        f"model.path={model}", f"model.device={device}", "model.dtype=bfloat16",
        "model.engine=transformers", "model.threads=1",
        "rollout.temperature=1.0",
        "grpo.lr=1e-5", "grpo.max_untrained_steps=0",
        "warm_start.enabled=true", "warm_start.lr=1e-3", "warm_start.max_tokens=16384",
        "warm_start.measure=false",
        "data.capacity=16",
        f"log.checkpoint_every={steps or s['steps']}", "log.keep_checkpoints=1",
        "log.eval_every=0", "log.tensorboard=false", "log.progress=false",
    ]  # fmt: skip
    from rods_agent.training.config import TrainConfig

    for section in ("rollout", "warm_start", "grpo"):
        # A key this checkout's configuration does not have yet (the reasoning budget of a
        # thinking model) is left out rather than refused.
        known = type(getattr(TrainConfig(), section)).model_fields
        items += [f"{section}.{k}={v}" for k, v in s[section].items() if k in known]
    return items


def summarize(out: Path, seconds: float) -> dict[str, Any]:
    """The check's numbers, from the run's metrics lines and files."""
    from rods_env.fileio import read_jsonl

    rows = read_jsonl(out / "metrics.jsonl") if (out / "metrics.jsonl").exists() else []
    terminations: dict[str, int] = {}
    for row in rows:
        for name, count in (row.get("terminations") or {}).items():
            terminations[name] = terminations.get(name, 0) + int(count)
    t = {k: sum(float(r["time"].get(k, 0.0)) for r in rows) for k in ("generate", "update", "step")}
    tokens = sum(int(r.get("tokens", 0)) for r in rows)
    learner_tokens = sum(float((r.get("update") or {}).get("learner_tokens", 0)) for r in rows)
    checkpoint = sorted((out / "checkpoints").glob("step-*/policy"))
    warm = out / "warm_start.json"
    return {
        "steps": len(rows),
        "terminations": terminations,
        "loss_tokens": sum(int(r.get("loss_tokens", 0)) for r in rows),
        "generated_tokens": tokens,
        "generate_tokens_per_s": tokens / t["generate"] if t["generate"] > 0 else 0.0,
        "learner_tokens_per_s": learner_tokens / t["update"] if t["update"] > 0 else 0.0,
        "outside_model_share": (
            max(0.0, 1.0 - (t["generate"] + t["update"]) / t["step"]) if t["step"] > 0 else 0.0
        ),
        "step_seconds": t["step"],
        "warm_start": json.loads(warm.read_text()) if warm.exists() else None,
        "checkpoint_mb": (
            sum(f.stat().st_size for f in checkpoint[-1].iterdir()) / 2**20 if checkpoint else 0.0
        ),
        "total_seconds": seconds,
    }


def report(summary: dict[str, Any], out: Path) -> None:
    """Print the ``gpu_check:`` lines and write the JSON."""
    ws = summary.get("warm_start") or {}
    lines = [
        f"device {summary['device']}, torch {summary['torch']}, transformers "
        f"{summary['transformers']}",
        f"tokenizer {summary['tokenizer']}",
        f"warm start: {int(ws.get('transcripts', 0))} transcripts, oracle progress "
        f"{ws.get('oracle_progress', 0.0):.2f}, loss {ws.get('loss_first', 0.0):.3f} -> "
        f"{ws.get('loss_last', 0.0):.3f}",
        f"steps {summary['steps']}: terminations {json.dumps(summary['terminations'])}",
        f"loss tokens {summary['loss_tokens']}, generated tokens {summary['generated_tokens']}",
        f"tokens/s: generation {summary['generate_tokens_per_s']:.0f}, learner "
        f"{summary['learner_tokens_per_s']:.0f}",
        f"share of step time outside the model (env, data engine, bookkeeping): "
        f"{100 * summary['outside_model_share']:.1f}% of {summary['step_seconds']:.1f} s",
        f"peak GPU memory: {summary['peak_gpu_gib']:.2f} GiB allocated, "
        f"{summary['peak_gpu_reserved_gib']:.2f} GiB reserved",
        f"checkpoint: {summary['checkpoint_mb']:.1f} MB",
        f"verdict: {summary['verdict']}",
    ]
    for line in lines:
        print(f"gpu_check: {line}", flush=True)
    text = json.dumps(summary, indent=2, default=str) + "\n"
    (out / "gpu_check.json").write_text(text)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"]).mkdir(parents=True, exist_ok=True)
        (Path(os.environ["OUT"]) / "gpu_check.json").write_text(text)


EXPERIMENT_SIZES = [
    "pool.skills=[order_info,cancel_order]", "pool.validation=2", "pool.rl_tasks=4",
    "pool.per_seed=1", "warm_start.max_epochs=1", "warm_start.tasks=4", "eval.test_tasks=4",
    "eval.every=1", "eval.base_model=false", "runs.seeds=[0]",
    "train.rollout.tasks_per_step=2", "train.rollout.group_size=2", "train.rollout.max_turns=4",
    "train.rollout.max_new_tokens=32", "train.rollout.max_tokens=8192",
    "train.rollout.thinking_tokens=0", "train.warm_start.batch_size=2",
    "train.warm_start.max_tokens=8192", "train.model.gradient_checkpointing=false",
    "train.grpo.max_untrained_steps=0", "train.log.tensorboard=false",
]  # fmt: skip
"""configs/experiment/gpu.yaml scaled down to minutes: what ``--experiment`` overrides."""


def run_experiment(device: str, model: Path, out: Path, steps: int | None) -> int:
    """``rods experiment configs/experiment/gpu.yaml`` with the tiny model on ``device``: every stage
    runs and the summary is written (the tiny model learns nothing; the path is checked)."""
    from rods_agent.experiment.config import load_experiment
    from rods_agent.experiment.runner import Experiment
    from rods_env.errors import RodsError

    config = load_experiment(
        ROOT / "configs" / "experiment" / "gpu.yaml",
        [*EXPERIMENT_SIZES, f"out={out / 'experiment'}", f"train.model.path={model}",
         f"train.model.device={device}", f"runs.steps={steps or 2}",
         # on a CPU the brief prompt: the full one's 4.4k-token openings through a 151k
         # vocabulary's logits make each stage minutes; the path checked is the same
         *(["train.rollout.prompt=brief"] if device == "cpu" else [])],
    )  # fmt: skip
    started = time.perf_counter()
    try:
        summary = Experiment(
            config, write=lambda line: print(f"gpu_check: {line}", flush=True)
        ).run()
    except RodsError as exc:
        print(f"gpu_check: verdict: FAILED: {' '.join(str(exc).split())}", flush=True)
        return 1
    errors = sum(m["terminations"].get("error", 0) for m in summary["modes"].values())
    episodes = sum(m["episodes"] for m in summary["modes"].values())
    curves = all(m["curve"] for m in summary["modes"].values())
    verdict = (
        f"FAILED: {errors} episodes ended in error" if errors
        else "FAILED: a mode has no held-out evaluation" if not curves
        else "ok"
    )  # fmt: skip
    print(f"gpu_check: experiment: {episodes} training episodes over "
          f"{', '.join(summary['modes'])} in {time.perf_counter() - started:.0f} s; "
          f"summary in {out / 'experiment' / 'summary.md'}", flush=True)  # fmt: skip
    print(f"gpu_check: verdict: {verdict}", flush=True)
    return 0 if verdict == "ok" else 1


PAPER_SIZES = {
    # configs/experiment/paper.yaml's arms, its model and its caps; a couple of steps of a few tasks,
    # and the test split's first tasks taken in turns from the four categories
    "cuda": [
        "runs.seeds=[0]", "pool.rl_tasks=8", "eval.test_tasks=8",
        "train.rollout.tasks_per_step=2", "train.rollout.group_size=4",
        "train.rollout.max_turns=12", "train.rollout.max_new_tokens=256",
        "train.model.engine=transformers",  # the GPU machines have no vLLM
        "train.grpo.max_untrained_steps=0", "train.log.tensorboard=false",
        "train.log.checkpoint_every=0",
    ],
    "cpu": [
        "runs.seeds=[0]", "pool.rl_tasks=2", "eval.test_tasks=4",
        "train.rollout.tasks_per_step=2", "train.rollout.group_size=2",
        "train.rollout.max_turns=2", "train.rollout.max_new_tokens=8",
        "train.rollout.max_tokens=12000", "train.model.engine=transformers",
        "train.model.gradient_checkpointing=false", "train.grpo.micro_batch_size=4",
        "train.grpo.max_untrained_steps=0", "train.log.tensorboard=false",
        "train.log.checkpoint_every=0",
    ],
}  # fmt: skip
"""configs/experiment/paper.yaml scaled down to its first steps: what ``--paper`` overrides (on a CPU
with the tiny random model, whose tokenizer takes BFCL's openings in 3.3-7.8k tokens)."""


def paper_overrides(device: str, model: Path | None, out: Path, steps: int | None) -> list[str]:
    """The ``rods experiment configs/experiment/paper.yaml`` overrides of ``--paper``."""
    sizes = PAPER_SIZES["cuda" if device.startswith("cuda") else "cpu"]
    path = "null" if model is None else str(model)  # null: the tiny model, built once
    return [*sizes, f"out={out / 'paper'}", f"train.model.path={path}",
            f"train.model.device={device}", f"runs.steps={steps or (2 if model else 1)}"]  # fmt: skip


def run_paper(device: str, model: Path | None, out: Path, steps: int | None) -> int:
    """``rods experiment configs/experiment/paper.yaml`` for its first steps: pools, the base model on
    a few test tasks, every arm (static, envtuning, rods), each run's last checkpoint scored,
    the summary with BFCL's table and the paper's rows."""
    from environments.bfcl.apis import bfcl_missing
    from rods_agent.experiment.config import load_experiment
    from rods_agent.experiment.runner import Experiment
    from rods_env.errors import RodsError

    missing = bfcl_missing()
    if missing is not None:
        print(f"gpu_check: error: {missing} (carry bfcl-eval and mpmath: `pip download "
              "--no-deps bfcl-eval mpmath -d .gpu-check/wheels`)", file=sys.stderr)  # fmt: skip
        return 2
    started = time.perf_counter()
    try:
        config = load_experiment(
            ROOT / "configs" / "experiment" / "paper.yaml",
            paper_overrides(device, model, out, steps),
        )
        summary = Experiment(
            config, write=lambda line: print(f"gpu_check: {line}", flush=True)
        ).run()
    except RodsError as exc:
        print(f"gpu_check: verdict: FAILED: {' '.join(str(exc).split())}", flush=True)
        return 1
    modes = summary["modes"]
    errors = sum(m["terminations"].get("error", 0) for m in modes.values())
    stepped = {mode: m.get("optimizer_steps") for mode, m in modes.items()}
    bench = summary.get("benchmark") or {}
    scored = list(bench.get("models") or ())
    verdict = (
        f"FAILED: {errors} episodes ended in error" if errors
        else "FAILED: the final evaluation did not score every arm"
        if scored[-len(modes):] != list(modes) else "ok"
    )  # fmt: skip
    cuda = device.startswith("cuda")
    import torch

    print(f"gpu_check: paper: {sum(m['episodes'] for m in modes.values())} training episodes "
          f"over {', '.join(modes)}, optimizer steps {json.dumps(stepped)}, "
          f"{bench.get('tasks', 0)} test tasks scored per model, in "
          f"{time.perf_counter() - started:.0f} s; peak GPU memory "
          f"{torch.cuda.max_memory_allocated() / 2**30 if cuda else 0.0:.2f} GiB (this "
          f"process; the stages run in children: see their logs); summary in "
          f"{out / 'paper' / 'summary.md'}", flush=True)  # fmt: skip
    print(f"gpu_check: verdict: {verdict}", flush=True)
    return 0 if verdict == "ok" else 1


def main(argv: list[str] | None = None) -> int:
    """Run the check; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (a smoke run)")
    parser.add_argument(
        "--tokenizer",
        default=str(ROOT / ".assets" / "tokenizers" / "qwen3"),
        help="folder of Qwen3's tokenizer.json and tokenizer_config.json (chat template)",
    )
    parser.add_argument("--out", default=str(ROOT / ".gpu-check" / "run"), help="run folder")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps (cuda: 5, cpu: 2)")
    parser.add_argument(
        "--experiment",
        action="store_true",
        help="run configs/experiment/gpu.yaml's protocol (rods experiment) with the tiny model and small "
        "sizes instead: every stage on the device, the summary and its figures",
    )
    parser.add_argument(
        "--paper",
        action="store_true",
        help="run configs/experiment/paper.yaml's first steps (rods experiment on bfcl-paper: every arm "
        "for --steps steps, a few test tasks) with the model in --model (on a CPU without "
        "--model: the tiny random model)",
    )
    parser.add_argument(
        "--model", default=None, help="with --paper: the model folder (Qwen3-4B-Instruct-2507)"
    )
    args = parser.parse_args(argv)

    import torch
    import transformers

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_check: error: --device cuda but torch sees no GPU", file=sys.stderr)
        return 2
    if args.model is not None and not args.paper:
        print("gpu_check: error: --model goes with --paper", file=sys.stderr)
        return 2
    if args.paper:
        if args.model is None and args.device.startswith("cuda"):
            print("gpu_check: error: --paper on a GPU needs --model DIR (the model folder)",
                  file=sys.stderr)  # fmt: skip
            return 2
        if args.model is not None and not (Path(args.model) / "config.json").is_file():
            print(f"gpu_check: error: no model folder at {args.model} (no config.json)",
                  file=sys.stderr)  # fmt: skip
            return 2
        if args.device == "cpu":
            torch.set_num_threads(1)
        out = Path(args.out)
        shutil.rmtree(out / "paper", ignore_errors=True)
        out.mkdir(parents=True, exist_ok=True)
        if args.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        model = Path(args.model) if args.model is not None else None
        return run_paper(args.device, model, out, args.steps)
    tokenizer = Path(args.tokenizer)
    if not (tokenizer / "tokenizer.json").is_file():
        print(
            f"gpu_check: error: no tokenizer.json in {tokenizer} (bash "
            "scripts/setup.sh tokenizers, or --tokenizer DIR)",
            file=sys.stderr,
        )
        return 2
    if args.device == "cpu":
        torch.set_num_threads(1)
    from rods_agent.training.config import load_config
    from rods_agent.training.loop import train
    from rods_env.errors import RodsError

    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    started = time.perf_counter()
    try:
        model = build_tiny_qwen3(tokenizer, out / "model")
    except Exception as exc:  # a tokenizer folder of another kind, a broken file
        message = " ".join(str(exc).split())
        print(f"gpu_check: error: cannot build the tiny Qwen3 from {tokenizer}: "
              f"{type(exc).__name__}: {message}", file=sys.stderr)  # fmt: skip
        return 2
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    if args.experiment:
        return run_experiment(args.device, model, out, args.steps)
    failure = None
    try:
        train(load_config(None, overrides(args.device, model, out / "train", args.steps)))
    except RodsError as exc:
        failure = " ".join(str(exc).split())
    summary = summarize(out / "train", time.perf_counter() - started)
    cuda = args.device.startswith("cuda")
    summary.update(
        device=torch.cuda.get_device_name() if cuda else "cpu",
        torch=torch.__version__,
        transformers=transformers.__version__,
        tokenizer=str(tokenizer),
        peak_gpu_gib=torch.cuda.max_memory_allocated() / 2**30 if cuda else 0.0,
        peak_gpu_reserved_gib=torch.cuda.max_memory_reserved() / 2**30 if cuda else 0.0,
        failure=failure,
    )
    errors = summary["terminations"].get("error", 0)
    if failure:
        summary["verdict"] = f"FAILED: {failure}"
    elif errors:
        summary["verdict"] = f"FAILED: {errors} episodes ended in error"
    elif not summary["loss_tokens"]:
        summary["verdict"] = "FAILED: no token was trained"
    else:
        summary["verdict"] = "ok"
    report(summary, out)
    return 0 if summary["verdict"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
