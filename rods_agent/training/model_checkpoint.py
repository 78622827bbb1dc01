"""The model policy's files: its part of a checkpoint, and a plain model folder.

A checkpoint's ``policy/`` folder holds the trainable weights (``trainable.pt``), the
optimizer (AdamW's moments and the float32 master weights), the learning-rate schedule,
the random states and the weights version (``policy_state.pt``), and a small
``policy.json``; each file is written atomically. :func:`save_model_folder` writes the
learner as a model folder that ``model.path`` loads.

Host memory stays bounded: ``torch.save`` streams into the file (no whole-state buffer),
and tensors on a GPU are copied to the host one storage at a time as they are written;
loading memory-maps the files. Sizes per trainable parameter, full fine-tuning of a
bf16 model with master weights: 2 bytes in ``trainable.pt``, 12 in ``policy_state.pt``
(two AdamW moments and the master, float32): about 56 GB for Qwen3-4B's 4.0B parameters
(docs/training.md, "Checkpoints").
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rods_env.errors import ConfigError
from rods_env.fileio import atomic_file, write_json

WEIGHTS_FILE = "trainable.pt"
STATE_FILE = "policy_state.pt"
META_FILE = "policy.json"
REFERENCE_FILE = "reference.pt"
"""In the run directory: the KL reference's trainable weights after a warm start."""
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
"""The files of a model folder whose content :func:`weights_fingerprint` reads."""


def weights_fingerprint(folder: Path, *, samples: int = 256, chunk: int = 4096) -> str:
    """A digest of a model folder's weight files: names, sizes and ``samples`` evenly
    spaced ``chunk``-byte pieces of each (about 1 MB read per file, whatever its size).

    Two fine-tunes of one model have the same names, shapes and sizes but different bytes
    nearly everywhere, so the sampled bytes tell them apart; a copied or moved folder keeps
    its digest. A LoRA checkpoint records its base's digest: its weights are adapters,
    meaningful on that base only.
    """
    import hashlib

    digest = hashlib.sha256()
    files = sorted(f for f in Path(folder).iterdir() if f.is_file() and f.suffix in WEIGHT_SUFFIXES)
    for f in files:
        size = f.stat().st_size
        digest.update(f"{f.name}\0{size}\0".encode())
        with f.open("rb") as handle:
            for i in range(samples):
                handle.seek(size * i // samples)
                digest.update(handle.read(chunk))
    return digest.hexdigest()[:32]


def save_tensors(path: Path, obj: Any) -> None:
    """``torch.save`` ``obj`` to ``path`` atomically, streamed (bounded host memory)."""
    import torch

    with atomic_file(path) as f:
        torch.save(obj, f)


def load_tensors(path: Path, *, device: str = "cpu", full: bool = False) -> Any:
    """Load what :func:`save_tensors` wrote, memory-mapped, then onto ``device``
    (``full``: any pickled object, e.g. random states; else tensors only)."""
    import torch

    obj = torch.load(path, map_location="cpu", mmap=True, weights_only=not full)
    if device != "cpu" and isinstance(obj, Mapping):
        return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in obj.items()}
    return obj


def save_training_state(
    directory: Path,
    model: Any,
    optimizer: Any,
    scheduler: Any,
    *,
    weights_version: int,
    model_path: Path,
    lora: bool,
    base_fingerprint: str | None = None,
) -> None:
    """Write the trainable weights, optimizer, scheduler, random states and weights
    version to ``directory`` (each file atomically); ``base_fingerprint``: the
    :func:`weights_fingerprint` of ``model_path`` (a LoRA checkpoint's base)."""
    import torch

    directory = Path(directory)
    # Tensors stay where they are: torch.save copies a GPU storage to the host as it
    # writes it, so the host never holds the whole state.
    trainable = {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}
    save_tensors(directory / WEIGHTS_FILE, trainable)
    state = {
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "torch_rng": torch.random.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "weights_version": weights_version,
    }
    save_tensors(directory / STATE_FILE, state)
    write_json(
        directory / META_FILE,
        {
            "model_path": str(model_path),
            "lora": lora,
            "weights_version": weights_version,
            "trainable_tensors": len(trainable),
            "base_fingerprint": base_fingerprint,
        },
    )


def load_training_state(
    directory: Path,
    model: Any,
    optimizer: Any,
    scheduler: Any,
    *,
    base: Path | None = None,
    base_fingerprint: str | None = None,
) -> int:
    """Restore what :func:`save_training_state` wrote into ``model``, ``optimizer``,
    ``scheduler`` and the random generators; returns the weights version.

    Args:
        base, base_fingerprint: The folder ``model`` was loaded from and its
            :func:`weights_fingerprint`, checked against a LoRA checkpoint's record.

    Raises:
        ConfigError: ``directory`` is not such a checkpoint, its weights do not fit
            ``model``, or it holds LoRA adapters trained on another base.
    """
    import torch

    directory = Path(directory)
    for name in (WEIGHTS_FILE, STATE_FILE):
        if not (directory / name).is_file():
            raise ConfigError(f"{directory}: not a model-policy checkpoint (no {name})")
    check_base(directory, base, base_fingerprint)
    load_weights(directory, model)
    state = load_tensors(directory / STATE_FILE, full=True)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    torch.random.set_rng_state(state["torch_rng"])
    if state.get("cuda_rng") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    return int(state["weights_version"])


def read_meta(directory: Path) -> dict[str, Any]:
    """A checkpoint's ``policy.json`` ({} where there is none).

    Raises:
        ConfigError: it is not JSON.
    """
    import json

    path = Path(directory) / META_FILE
    if not path.is_file():
        return {}
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not JSON ({exc.msg})") from None
    return meta if isinstance(meta, dict) else {}


def check_base(directory: Path, base: Path | None, fingerprint: str | None) -> None:
    """Refuse to put a LoRA checkpoint's adapters on a base other than the one they were
    trained on (its recorded :func:`weights_fingerprint`); checkpoints of full fine-tuning
    hold every trained weight and pass.

    Raises:
        ConfigError: the fingerprints differ.
    """
    meta = read_meta(directory)
    recorded = meta.get("base_fingerprint")
    if not meta.get("lora") or not recorded or base is None:
        return
    found = fingerprint or weights_fingerprint(base)
    if found != recorded:
        raise ConfigError(
            f"{directory}: LoRA adapters trained on {meta.get('model_path')}, but {base} "
            "holds other weights (its fingerprint differs): point model.path at the base "
            "they were trained on"
        )


def load_weights(directory: Path, model: Any) -> None:
    """Copy a checkpoint's trainable weights (``directory/trainable.pt``) into ``model``.

    Raises:
        ConfigError: a weight ``model`` has no parameter for.
    """
    import torch

    trainable = load_tensors(Path(directory) / WEIGHTS_FILE)
    params = dict(model.named_parameters())
    unknown = sorted(set(trainable) - set(params))
    if unknown:
        raise ConfigError(
            f"{directory}: checkpoint weights do not fit this model ({unknown[0]}, ...)"
        )
    with torch.no_grad():
        for name, value in trainable.items():
            params[name].copy_(value.to(params[name].dtype))


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
