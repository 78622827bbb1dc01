"""The model policy's files: its part of a checkpoint, and a plain model folder.

A checkpoint's ``policy/`` folder holds the trainable weights (``trainable.pt``), the
optimizer, the scheduler, the random states and the weights version
(``policy_state.pt``), and a small ``policy.json``; each file is written atomically.
:func:`save_model_folder` writes the learner as a model folder that ``model.path`` loads.
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path
from typing import Any

from rods_env.errors import ConfigError
from rods_env.fileio import atomic_write, write_json

WEIGHTS_FILE = "trainable.pt"
STATE_FILE = "policy_state.pt"
META_FILE = "policy.json"


def _torch_bytes(obj: Any) -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def save_training_state(
    directory: Path,
    model: Any,
    optimizer: Any,
    scheduler: Any,
    *,
    weights_version: int,
    model_path: Path,
    lora: bool,
) -> None:
    """Write the trainable weights, optimizer, scheduler, random states and weights
    version to ``directory`` (each file atomically)."""
    import torch

    directory = Path(directory)
    trainable = {n: p.detach().cpu() for n, p in model.named_parameters() if p.requires_grad}
    atomic_write(directory / WEIGHTS_FILE, _torch_bytes(trainable))
    state = {
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "torch_rng": torch.random.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "weights_version": weights_version,
    }
    atomic_write(directory / STATE_FILE, _torch_bytes(state))
    write_json(
        directory / META_FILE,
        {
            "model_path": str(model_path),
            "lora": lora,
            "weights_version": weights_version,
            "trainable_tensors": len(trainable),
        },
    )


def load_training_state(
    directory: Path, model: Any, optimizer: Any, scheduler: Any, *, device: str
) -> int:
    """Restore what :func:`save_training_state` wrote into ``model``, ``optimizer``,
    ``scheduler`` and the random generators; returns the weights version.

    Raises:
        ConfigError: ``directory`` is not such a checkpoint, or its weights do not fit
            ``model``.
    """
    import torch

    directory = Path(directory)
    for name in (WEIGHTS_FILE, STATE_FILE):
        if not (directory / name).is_file():
            raise ConfigError(f"{directory}: not a model-policy checkpoint (no {name})")
    trainable = torch.load(directory / WEIGHTS_FILE, map_location=device)
    params = dict(model.named_parameters())
    unknown = sorted(set(trainable) - set(params))
    if unknown:
        raise ConfigError(
            f"{directory}: checkpoint weights do not fit this model ({unknown[0]}, ...)"
        )
    with torch.no_grad():
        for name, value in trainable.items():
            params[name].copy_(value.to(params[name].dtype))
    state = torch.load(directory / STATE_FILE, map_location="cpu", weights_only=False)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    torch.random.set_rng_state(state["torch_rng"])
    if state.get("cuda_rng") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    return int(state["weights_version"])


def save_model_folder(model: Any, tokenizer: Any, directory: Path) -> Path:
    """Save ``model`` (a plain model: merge LoRA first) and ``tokenizer`` as a model folder.

    transformers writes the folder file by file: it is written aside, then renamed into
    place, so a kill never leaves a half-written model where a run would load it.
    """
    directory = Path(directory)
    tmp = directory.with_name(f".{directory.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    if directory.exists():
        shutil.rmtree(directory)
    os.replace(tmp, directory)
    return directory
