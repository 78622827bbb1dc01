"""A trained run's weights as a plain model folder (``rods export``).

A run's checkpoint keeps only what training needs to continue: the trainable weights, the
optimizer and the random states (:mod:`~rods_agent.training.model_checkpoint`). To evaluate
the trained model (``rods eval --model FOLDER``), serve it or start another run from it,
:func:`export_model` loads the model the run started from (the checkpoint names it), puts
the checkpoint's weights in, merges LoRA adapters, and writes a model folder with the
tokenizer and chat template of the run's model.
"""

from __future__ import annotations

from pathlib import Path

from rods_env.errors import ConfigError
from rods_env.fileio import write_json

EXPORT_FILE = "rods_export.json"
"""In an exported folder: the run, checkpoint and step it came from."""


def export_model(
    run: str | Path, out: str | Path, *, step: int | None = None, base: str | Path | None = None
) -> tuple[Path, int]:
    """Write the model of ``run``'s checkpoint after ``step`` steps (None: the newest) as a
    model folder at ``out``.

    The model the weights go into is ``base`` if given, else the one the checkpoint names
    (``policy.json``), else, where that folder is gone, the run's ``model.path``. A LoRA
    checkpoint's adapters go only onto the base they were trained on (its recorded
    fingerprint): a moved or rebuilt base folder is an error, not a silently wrong model.

    Returns:
        The folder and the steps its checkpoint was taken after.

    Raises:
        ConfigError: ``run`` is not a model run, has no such checkpoint, its weights do not
            fit the model, or its adapters were trained on another base.
    """
    from rods_agent.training.config import load_config
    from rods_agent.training.learner import load_learner
    from rods_agent.training.model_checkpoint import (
        WEIGHTS_FILE,
        check_base,
        load_weights,
        read_meta,
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
    meta = read_meta(policy)
    overrides = ["log.progress=false"]
    if base is not None:
        if not Path(base).is_dir():
            raise ConfigError(f"{base}: no such model folder")
        overrides.append(f"model.path={base}")
    elif meta.get("model_path") and Path(meta["model_path"]).is_dir():
        overrides.append(f"model.path={meta['model_path']}")  # the model it was trained from
    config = load_config(run / "config.yaml", overrides)
    if config.policy != "model":
        raise ConfigError(f"{run}: a {config.policy} policy has no weights to export")
    learner = load_learner(config, run)
    check_base(policy, Path(learner.path), None)
    load_weights(policy, learner.model)
    model = learner.model.merge_and_unload() if learner.lora else learner.model
    save_model_folder(model, learner.tokenizer, out)
    write_json(
        out / EXPORT_FILE,
        {"run": str(run), "checkpoint": str(found[done]), "steps": done, "base": str(learner.path)},
    )
    return out, done
