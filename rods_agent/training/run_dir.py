"""The run directory: its ``config.yaml``, checkpoints and what a resume starts from.

``checkpoints/step-NNNNNN/`` holds the policy's files (``policy/``), the data engine's
state (``engine.json``) and the loop's (``loop.json``); each is written into a temporary
folder and renamed into place, so a kill never leaves half a checkpoint.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
from pathlib import Path
from typing import Any

from rods_agent.data import DataEngine
from rods_agent.training.config import TrainConfig, config_yaml, load_config
from rods_agent.training.policy import Policy
from rods_env.errors import ConfigError, RodsError
from rods_env.fileio import atomic_write, fsync_dir, read_jsonl, write_json, write_jsonl

RESUMABLE_CHANGES = ("steps", "log.progress", "log.rollouts_per_group", "log.rollouts_max_chars")
"""Config keys a resumed run may change (more steps, progress bars on or off, how much of
the rollouts is kept)."""


def prepare_run_dir(config: TrainConfig, out: Path, *, resume: bool) -> None:
    """Check that ``out`` may hold this run (nothing is written here: the resolved
    ``config.yaml`` goes in once the policy has loaded, see :func:`write_run_config`).

    A fresh run refuses a directory that already holds a run's metrics or checkpoints
    (nothing is overwritten); a resumed run that has started refuses a configuration that
    differs from the saved one in anything but :data:`RESUMABLE_CHANGES`. A run that never
    reached its first step (a model that failed to load) has not started: ``--resume``
    begins it afresh with the configuration given.
    """
    saved = out / "config.yaml"
    started = (out / "metrics.jsonl").exists() or (out / "checkpoints").exists()
    if out.exists() and not out.is_dir():
        raise ConfigError(f"out: {out} is a file, not a directory")
    if resume and started and saved.exists():
        before = load_config(saved)
        changed = _differences(before.model_dump(mode="json"), config.model_dump(mode="json"))
        changed = [c for c in changed if c not in RESUMABLE_CHANGES]
        if changed:
            raise ConfigError(
                f"--resume: the configuration differs from {saved} in {', '.join(changed)}; "
                f"only {', '.join(RESUMABLE_CHANGES)} may change"
            )
    elif not resume and started:
        raise ConfigError(
            f"out: {out} already holds a run; pass --resume to continue it, or choose "
            "another out=DIR"
        )


def with_template_date(config: TrainConfig, out: Path, *, resume: bool) -> TrainConfig:
    """``config`` with ``rollout.template_date`` settled: the saved run's on a resume (a
    gpt-oss prompt shows the same date on every day of the run), else today's.

    Raises:
        ConfigError: the saved ``config.yaml`` cannot be read.
    """
    if config.rollout.template_date is not None:
        return config
    saved = out / "config.yaml"
    day: datetime.date | None = datetime.date.today()
    if resume and saved.exists():
        day = load_config(saved).rollout.template_date
    rollout = config.rollout.model_copy(update={"template_date": day})
    return config.model_copy(update={"rollout": rollout})


def write_run_config(config: TrainConfig, out: Path) -> None:
    """Write the resolved configuration to ``out/config.yaml`` (atomically)."""
    atomic_write(out / "config.yaml", config_yaml(config))


def _differences(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        keys = list(dict.fromkeys([*a, *b]))
        return [d for k in keys for d in _differences(a.get(k), b.get(k), f"{prefix}{k}.")]
    return [] if a == b else [prefix.rstrip(".")]


def keep_metrics_before(path: Path, step: int) -> None:
    """Drop metrics lines of steps at or after ``step`` (written after the checkpoint that a
    resume starts from, and about to be written again)."""
    if not path.exists():
        return
    rows = read_jsonl(path)
    kept = [r for r in rows if isinstance(r.get("step"), int) and r["step"] < step]
    if len(kept) != len(rows) or path.read_bytes()[-1:] not in (b"", b"\n"):
        write_jsonl(path, kept)


def checkpoint_dirs(out: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints of a run, oldest first, as ``(steps done, folder)``."""
    root = out / "checkpoints"
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        name = path.name
        if name.startswith("step-") and name[5:].isdigit() and (path / "loop.json").exists():
            found.append((int(name[5:]), path))
    return sorted(found)


def latest_checkpoint(out: Path) -> Path | None:
    """The newest complete checkpoint of the run in ``out``, or None."""
    found = checkpoint_dirs(out)
    return found[-1][1] if found else None


def save_checkpoint(
    out: Path, done: int, policy: Policy, engine: DataEngine, config: TrainConfig
) -> Path:
    """Write a checkpoint after ``done`` steps, atomically, and prune old ones.

    Everything goes into a temporary folder first (``policy.save``, the data engine's
    state, the loop's state); one rename then publishes it, so a kill mid-write leaves
    the previous checkpoint as the newest complete one.
    """
    root = out / "checkpoints"
    final = root / f"step-{done:06d}"
    tmp = root / f".step-{done:06d}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    (tmp / "policy").mkdir(parents=True)
    policy.save(tmp / "policy")
    write_json(tmp / "engine.json", engine.state_dict(), indent=None)
    write_json(tmp / "loop.json", {"step": done, "seed": config.seed, "mode": config.mode})
    if final.exists():  # a resumed run writing the same step again
        shutil.rmtree(final)
    os.replace(tmp, final)
    fsync_dir(root)
    for _, old in checkpoint_dirs(out)[: -config.log.keep_checkpoints]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def restore(checkpoint: Path, policy: Policy, engine: DataEngine) -> int:
    """Load a checkpoint into ``policy`` and ``engine``; returns the steps it had done."""
    try:
        loop = json.loads((checkpoint / "loop.json").read_text(encoding="utf-8"))
        state = json.loads((checkpoint / "engine.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RodsError(f"{checkpoint}: unreadable checkpoint ({exc})") from None
    policy.load(checkpoint / "policy")
    engine.load_state_dict(state)
    for stale in checkpoint.parent.glob(".step-*.tmp"):  # a checkpoint cut off by the kill
        shutil.rmtree(stale, ignore_errors=True)
    return int(loop["step"])
