"""A trained run's weights as a plain model folder (``rods export``).

A run's checkpoint keeps only what training needs to continue: the trainable weights, the
optimizer and the random states (:mod:`~rods_agent.training.model_checkpoint`). To evaluate
the trained model (``rods eval --model FOLDER``), serve it or start another run from it,
:func:`export_model` loads the model the run started from (the checkpoint names it), puts
the checkpoint's weights in, merges LoRA adapters, and writes a model folder with the
tokenizer and chat template of the run's model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rods_env.errors import ConfigError
from rods_env.fileio import write_json

EXPORT_FILE = "rods_export.json"
"""In an exported folder: the run, checkpoint and step it came from."""


def export_model(run: str | Path, out: str | Path, *, step: int | None = None) -> tuple[Path, int]:
    """Write the model of ``run``'s checkpoint after ``step`` steps (None: the newest) as a
    model folder at ``out``.

    Returns:
        The folder and the steps its checkpoint was taken after.

    Raises:
        ConfigError: ``run`` is not a model run, has no such checkpoint, or its weights do
            not fit the model it names.
    """
    from rods_agent.config import load_config
    from rods_agent.training.learner import load_learner
    from rods_agent.training.model_checkpoint import (
        META_FILE,
        WEIGHTS_FILE,
        load_weights,
        save_model_folder,
    )
    from rods_agent.training.run_dir import checkpoint_dirs

    run, out = Path(run), Path(out)
    if not (run / "config.yaml").is_file():
        raise ConfigError(f"{run}: not a training run (no config.yaml)")
    found = dict(checkpoint_dirs(run))
    if not found:
        raise ConfigError(f"{run}: no checkpoint to export")
    done = max(found) if step is None else step
    if done not in found:
        have = ", ".join(str(s) for s in sorted(found))
        raise ConfigError(f"{run}: no checkpoint after {done} steps (have: {have})")
    policy = found[done] / "policy"
    if not (policy / WEIGHTS_FILE).is_file():
        raise ConfigError(
            f"{found[done]}: not a model-policy checkpoint (no policy/{WEIGHTS_FILE})"
        )
    meta: dict[str, Any] = {}
    if (policy / META_FILE).is_file():
        try:
            meta = json.loads((policy / META_FILE).read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{policy / META_FILE}: not JSON ({exc.msg})") from None
    overrides = ["log.progress=false"]
    base = meta.get("model_path")
    if base and Path(base).is_dir():
        overrides.append(f"model.path={base}")  # the model the weights were trained from
    config = load_config(run / "config.yaml", overrides)
    if config.policy != "model":
        raise ConfigError(f"{run}: a {config.policy} policy has no weights to export")
    learner = load_learner(config, run)
    load_weights(policy, learner.model)
    model = learner.model.merge_and_unload() if learner.lora else learner.model
    save_model_folder(model, learner.tokenizer, out)
    write_json(
        out / EXPORT_FILE,
        {"run": str(run), "checkpoint": str(found[done]), "steps": done, "base": str(learner.path)},
    )
    return out, done
