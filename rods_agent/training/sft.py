"""``rods sft``: warm-start a model on oracle transcripts and save it as a model folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rods_agent.training.config import TrainConfig, config_yaml
from rods_agent.training.model_policy import ModelPolicy
from rods_agent.training.pools import load_pools
from rods_env.fileio import atomic_write, write_json


def run_sft(config: TrainConfig, out: Path | str) -> dict[str, Any]:
    """``rods sft``: warm-start the configured model on oracle transcripts of the training
    pool (``data.pool`` / ``data.split`` of ``env``; ``warm_start.tasks`` of it), and save it
    as a model folder.

    Writes ``<out>/model`` (weights and tokenizer: use it as ``model.path``),
    ``<out>/sft.json`` (what the warm start measured) and ``<out>/config.yaml``.

    Returns:
        The warm start's metrics (see :func:`rods_agent.training.warm_start.warm_start`).
    """
    out = Path(out)
    train_tasks, _ = load_pools(config)
    policy = ModelPolicy(config, out)  # a model that fails to load leaves no output behind
    try:
        policy.check_prompts(train_tasks)  # and neither do openings longer than the caps
        atomic_write(out / "config.yaml", config_yaml(config))
        metrics = policy.warm_start(train_tasks)
        policy.save_model(out / "model")
    finally:
        policy.close()
    write_json(out / "sft.json", metrics)
    return metrics
